//! `POST /v1/telegram/webhook`: our own route for Telegram's updates.
//!
//! Without the `X-Telegram-Bot-Api-Secret-Token` header equal to the
//! webhook secret (compared in constant time) the answer is exactly the
//! 404 of an unknown path, for any method, before the body is read. With
//! it, the update is read up to a cap, parsed, queued for its chat's shard,
//! and answered 200 once it is settled — handled and committed, or a copy
//! of one that was — and 503 otherwise, so that Telegram, which retries
//! anything but a 2xx, sends it again (a relay killed with updates in its
//! queues lost them when the 200 came at queueing: found by the chaos
//! test). An update too large or one that is not an update is counted and
//! dropped (200), and its content is never logged. One whose queue stays
//! full for [`QUEUE_WAIT`], or that is not settled within [`SETTLE_WAIT`],
//! is answered 503: late, never lost.

use crate::error::ApiError;
use crate::state::App;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use std::time::Instant;

pub const PATH: &str = "/v1/telegram/webhook";
pub const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";

/// How long an update waits for room in its queue before Telegram is told
/// to send it again. Telegram holds at most its webhook connections (40 by
/// default) open, so this is back-pressure, not a queue of its own.
pub const QUEUE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
/// How long a queued update may take to settle before Telegram is told to
/// send it again (within the answer's deadline, `serve::ANSWER_DEADLINE`).
pub const SETTLE_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

/// Telegram's rule for a webhook secret: 1–256 of `A-Z a-z 0-9 _ -`.
pub fn valid_secret(secret: &str) -> bool {
    (1..=256).contains(&secret.len())
        && secret
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The secret Telegram must send, and during a rotation the previous one
/// until the overlap ends. Only their SHA-256 is kept, so the comparison
/// takes the same time whatever the lengths. `Debug` shows neither.
#[derive(Clone)]
pub struct WebhookSecrets {
    current: Arc<str>,
    current_hash: [u8; 32],
    previous: Option<([u8; 32], Instant)>,
}

impl std::fmt::Debug for WebhookSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookSecrets")
            .field("rotating", &self.previous.is_some())
            .finish_non_exhaustive()
    }
}

fn hash(secret: &[u8]) -> [u8; 32] {
    Sha256::digest(secret).into()
}

impl WebhookSecrets {
    pub fn one(secret: &str) -> WebhookSecrets {
        WebhookSecrets {
            current: secret.into(),
            current_hash: hash(secret.as_bytes()),
            previous: None,
        }
    }

    /// `secret`, and `previous` as well until `until`.
    pub fn rotating(secret: &str, previous: &str, until: Instant) -> WebhookSecrets {
        WebhookSecrets {
            previous: Some((hash(previous.as_bytes()), until)),
            ..WebhookSecrets::one(secret)
        }
    }

    /// The secret the relay registers with Telegram.
    pub fn current(&self) -> &str {
        &self.current
    }

    /// Whether `offered` is the secret (or, within the overlap, the
    /// previous one). Both are compared, always, in constant time.
    pub fn accepts(&self, offered: &[u8]) -> bool {
        use subtle::ConstantTimeEq;
        let offered = hash(offered);
        let current = offered.ct_eq(&self.current_hash);
        let previous = match &self.previous {
            Some((h, until)) => {
                offered.ct_eq(h) & subtle::Choice::from(u8::from(Instant::now() < *until))
            }
            None => subtle::Choice::from(0),
        };
        bool::from(current | previous)
    }
}

/// The route (any method: another method must not reveal it exists).
pub async fn receive(
    State(app): State<App>,
    method: Method,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let Some(telegram) = app.telegram.as_ref() else {
        return ApiError::NotFound.into_response();
    };
    let offered = headers
        .get(SECRET_HEADER)
        .map(|v| v.as_bytes())
        .unwrap_or_default();
    let accepted = telegram.config.secrets.accepts(offered);
    if !accepted || method != Method::POST {
        app.metrics.telegram("webhook_refused");
        return ApiError::NotFound.into_response();
    }
    let bytes = match axum::body::to_bytes(body, telegram.config.limits.max_update_bytes).await {
        Ok(b) => b,
        Err(_) => {
            app.metrics.telegram("update_oversize");
            return StatusCode::OK.into_response();
        }
    };
    app.metrics.telegram("update_received");
    match super::inbound::parse(&bytes) {
        Some(update) => {
            let Some(settled) = telegram.inbound.offer_within(update, QUEUE_WAIT).await else {
                // Telegram keeps what it was not answered 2xx for and sends
                // it again (slowing down meanwhile): a paired chat's PIN or
                // tap behind a flood is late, never lost (found by the
                // attack round: a full queue dropped it after a 200).
                app.metrics.telegram("update_deferred_queue_full");
                return StatusCode::SERVICE_UNAVAILABLE.into_response();
            };
            let settled = tokio::time::timeout(SETTLE_WAIT, settled).await;
            if !matches!(settled, Ok(Ok(super::queue::Settled::Done))) {
                app.metrics.telegram("update_deferred_unsettled");
                return StatusCode::SERVICE_UNAVAILABLE.into_response();
            }
        }
        None => app.metrics.telegram("update_malformed"),
    }
    StatusCode::OK.into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_secret_and_the_previous_one_only_within_the_overlap() {
        let one = WebhookSecrets::one("new-secret");
        assert!(one.accepts(b"new-secret"));
        assert!(!one.accepts(b"new-secre"));
        assert!(!one.accepts(b""));
        let soon = Instant::now() + std::time::Duration::from_secs(60);
        let rotating = WebhookSecrets::rotating("new-secret", "old-secret", soon);
        assert!(rotating.accepts(b"old-secret") && rotating.accepts(b"new-secret"));
        let past = Instant::now() - std::time::Duration::from_secs(1);
        let over = WebhookSecrets::rotating("new-secret", "old-secret", past);
        assert!(!over.accepts(b"old-secret") && over.accepts(b"new-secret"));
        assert!(!format!("{over:?}").contains("secret\""));
    }

    #[test]
    fn a_secret_has_telegrams_shape() {
        assert!(valid_secret("abc_DEF-123"));
        assert!(!valid_secret(""));
        assert!(!valid_secret("with space"));
        assert!(!valid_secret(&"a".repeat(257)));
    }
}
