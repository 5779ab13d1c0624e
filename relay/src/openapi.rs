//! `GET /openapi.json`: the HTTP API (everything but the WebSocket) as an
//! OpenAPI 3.1 document. A test keeps it equal to the routes.

use serde_json::{Value, json};

fn error_response(description: &str) -> Value {
    json!({
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    })
}

pub(crate) fn document() -> Value {
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Aromba relay",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Servers register here and then hold an authenticated WebSocket at /v1/connect (not described here: see the aromba-relay-proto crate)."
        },
        "paths": {
            "/healthz": {"get": {
                "summary": "The process answers.",
                "responses": {"200": {"description": "Alive", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Status"}}}}}
            }},
            "/readyz": {"get": {
                "summary": "The database answers and its migrations are current.",
                "responses": {
                    "200": {"description": "Ready", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Status"}}}},
                    "503": error_response("Not ready")
                }
            }},
            "/openapi.json": {"get": {
                "summary": "This document.",
                "responses": {"200": {"description": "The OpenAPI document", "content": {"application/json": {}}}}
            }},
            "/v1/servers": {"post": {
                "summary": "Register a server with the id and token it generated.",
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Registration"}}}},
                "responses": {
                    "201": {"description": "Registered", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Registered"}}}},
                    "200": {"description": "Already registered exactly so", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Registered"}}}},
                    "202": {"description": "The id is known from another boot: a duplicate case the chat decides", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Registered"}}}},
                    "400": error_response("Not JSON"),
                    "409": error_response("The id is registered with another token"),
                    "413": error_response("Body too large"),
                    "415": error_response("Not application/json"),
                    "422": error_response("A field is missing, unknown or malformed"),
                    "429": error_response("Too many registrations from this address, or too many open duplicate cases for this id")
                }
            }}
        },
        "components": {"schemas": {
            "Status": {"type": "object", "required": ["status"], "properties": {"status": {"type": "string"}}},
            "Error": {
                "type": "object", "required": ["error", "message"],
                "properties": {"error": {"type": "string"}, "message": {"type": "string"}}
            },
            "Registration": {
                "type": "object", "additionalProperties": false,
                "required": ["id", "token", "boot_id", "install_source"],
                "properties": {
                    "id": {"type": "string", "format": "uuid"},
                    "token": {"type": "string", "pattern": "^arb_[A-Za-z0-9_-]{43}$"},
                    "boot_id": {"type": "string", "format": "uuid"},
                    "install_source": {"type": "string", "enum": crate::servers::INSTALL_SOURCES}
                }
            },
            "Registered": {
                "type": "object", "required": ["outcome"],
                "properties": {"outcome": {"type": "string", "enum": ["registered", "unchanged", "duplicate"]}}
            }
        }}
    })
}
