//! Every refusal the HTTP API gives: a status and a JSON body
//! `{"error": "<code>", "message": "<one sentence>"}`. Malformed input is a
//! 4xx, never a 5xx; a 5xx says only that the relay failed, never why.

use axum::Json;
use axum::extract::FromRequest;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

#[derive(Debug, thiserror::Error)]
pub(crate) enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    #[error("the body is larger than this route accepts")]
    TooLarge,
    #[error("the body must be JSON (Content-Type: application/json)")]
    UnsupportedMediaType,
    #[error("{0}")]
    Unprocessable(String),
    #[error("this server id is registered with another token")]
    Conflict,
    #[error("too many requests from this address; try again later")]
    TooManyRequests,
    #[error("no such route")]
    NotFound,
    #[error("the relay is busy; try again later")]
    Unavailable,
    #[error("the relay failed to complete the request")]
    Internal(#[source] Box<dyn std::error::Error + Send + Sync>),
}

#[derive(Serialize)]
struct Body<'a> {
    error: &'a str,
    message: String,
}

impl ApiError {
    pub(crate) fn internal(e: impl std::error::Error + Send + Sync + 'static) -> ApiError {
        ApiError::Internal(Box::new(e))
    }

    fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self {
            ApiError::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad_request"),
            ApiError::TooLarge => (StatusCode::PAYLOAD_TOO_LARGE, "too_large"),
            ApiError::UnsupportedMediaType => {
                (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type")
            }
            ApiError::Unprocessable(_) => (StatusCode::UNPROCESSABLE_ENTITY, "invalid"),
            ApiError::Conflict => (StatusCode::CONFLICT, "conflict"),
            ApiError::TooManyRequests => (StatusCode::TOO_MANY_REQUESTS, "rate_limited"),
            ApiError::NotFound => (StatusCode::NOT_FOUND, "not_found"),
            ApiError::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            ApiError::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = self.status_and_code();
        if let ApiError::Internal(e) = &self {
            tracing::error!(error = %e, "request failed");
        }
        (
            status,
            Json(Body {
                error: code,
                message: self.to_string(),
            }),
        )
            .into_response()
    }
}

/// The raw body, its rejections as [`ApiError`]s: for handlers that must
/// count a request before they judge it.
pub(crate) struct ApiBytes(pub axum::body::Bytes);

impl<S: Send + Sync> FromRequest<S> for ApiBytes {
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, ApiError> {
        match axum::body::Bytes::from_request(req, state).await {
            Ok(b) => Ok(ApiBytes(b)),
            Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => Err(ApiError::TooLarge),
            Err(_) => Err(ApiError::BadRequest("the body could not be read".into())),
        }
    }
}

/// A JSON body as `Json` would take it, the refusals as [`ApiError`]s.
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(
    headers: &axum::http::HeaderMap,
    body: &[u8],
) -> Result<T, ApiError> {
    let json_type = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|m| {
            let m = m.trim().to_ascii_lowercase();
            m == "application/json" || (m.starts_with("application/") && m.ends_with("+json"))
        })
        .unwrap_or(false);
    if !json_type {
        return Err(ApiError::UnsupportedMediaType);
    }
    serde_json::from_slice(body).map_err(|e| match e.classify() {
        serde_json::error::Category::Data => {
            ApiError::Unprocessable(format!("the body does not fit the request's shape: {e}"))
        }
        _ => ApiError::BadRequest("the body is not valid JSON".into()),
    })
}
