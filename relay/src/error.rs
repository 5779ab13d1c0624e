//! Every refusal the HTTP API gives: a status and a JSON body
//! `{"error": "<code>", "message": "<one sentence>"}`. Malformed input is a
//! 4xx, never a 5xx; a 5xx says only that the relay failed, never why.

use axum::Json;
use axum::extract::FromRequest;
use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
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
    #[error("the relay failed to complete the request")]
    Internal(#[source] Box<dyn std::error::Error + Send + Sync>),
}

#[derive(Serialize)]
struct Body<'a> {
    error: &'a str,
    message: String,
}

impl ApiError {
    pub fn internal(e: impl std::error::Error + Send + Sync + 'static) -> ApiError {
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

/// `Json<T>` whose every rejection is an [`ApiError`].
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    Json<T>: FromRequest<S, Rejection = JsonRejection>,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, ApiError> {
        match Json::<T>::from_request(req, state).await {
            Ok(Json(v)) => Ok(ApiJson(v)),
            Err(JsonRejection::MissingJsonContentType(_)) => Err(ApiError::UnsupportedMediaType),
            Err(JsonRejection::JsonDataError(e)) => Err(ApiError::Unprocessable(
                // serde's message names the field and what was wrong, never
                // echoes a value longer than the type name.
                e.body_text(),
            )),
            Err(JsonRejection::JsonSyntaxError(_)) => {
                Err(ApiError::BadRequest("the body is not valid JSON".into()))
            }
            Err(JsonRejection::BytesRejection(e)) => {
                if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    Err(ApiError::TooLarge)
                } else {
                    Err(ApiError::BadRequest("the body could not be read".into()))
                }
            }
            Err(_) => Err(ApiError::BadRequest("the body was refused".into())),
        }
    }
}
