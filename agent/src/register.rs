//! Registering this server with the relay (`POST /v1/servers`), over a
//! connection made by the [`Gate`](crate::net::Gate) and TLS verified
//! against the relay's name, as the WebSocket is.

use crate::config::RelayConfig;
use crate::http::{Ask, HttpError, request};
use crate::net::Gate;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    #[error("the relay could not be asked: {0}")]
    Http(#[from] HttpError),
    #[error("the relay did not answer within {0} seconds")]
    Timeout(u64),
    #[error("the relay refused the registration ({status}): {reason}")]
    Refused { status: u16, reason: String },
}

/// What the relay made of the registration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registered {
    /// New at the relay.
    New,
    /// Known already, exactly so.
    Unchanged,
    /// The id is known from another machine or boot: the chat decides.
    Duplicate,
}

const TIMEOUT_S: u64 = 30;
/// The relay's answers to a registration are a few dozen bytes.
const MAX_ANSWER: usize = 16 << 10;

/// Registers `config`'s id and token with the relay.
pub async fn register(
    gate: &Gate,
    config: &RelayConfig,
    roots: Option<Arc<rustls::RootCertStore>>,
    boot_id: Uuid,
    install_source: &str,
) -> Result<Registered, RegisterError> {
    let body = serde_json::json!({
        "id": config.server_id,
        "token": config.token.expose(),
        "boot_id": boot_id,
        "install_source": install_source,
    })
    .to_string();
    let ask = Ask {
        method: hyper::Method::POST,
        path: "/v1/servers",
        body: Some(("application/json", body)),
        cap: MAX_ANSWER,
        headers: Vec::new(),
    };
    let answer = tokio::time::timeout(
        Duration::from_secs(TIMEOUT_S),
        request(gate, &config.relay, roots, ask),
    )
    .await
    .map_err(|_| RegisterError::Timeout(TIMEOUT_S))??;
    let body: serde_json::Value = serde_json::from_slice(&answer.body).unwrap_or_default();
    match answer.status {
        201 => Ok(Registered::New),
        200 => Ok(Registered::Unchanged),
        202 => Ok(Registered::Duplicate),
        status => Err(RegisterError::Refused {
            status,
            reason: body
                .get("message")
                .and_then(|e| e.as_str())
                .map(|e| e.chars().filter(|c| !c.is_control()).take(200).collect())
                .unwrap_or_else(|| "no reason given".into()),
        }),
    }
}
