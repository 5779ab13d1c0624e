//! Registering this server with the relay (`POST /v1/servers`), over a
//! connection made by the [`Gate`](crate::net::Gate) and TLS verified
//! against the relay's name, as the WebSocket is.

use crate::config::{RelayConfig, RelayUrl};
use crate::net::Gate;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    #[error("cannot reach the relay at {0}: {1}")]
    Connect(String, std::io::Error),
    #[error("the TLS connection to the relay failed: {0}")]
    Tls(std::io::Error),
    #[error("the relay's name {0:?} is not one a certificate can carry")]
    Name(String),
    #[error("the request to the relay failed: {0}")]
    Http(String),
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
    tokio::time::timeout(
        Duration::from_secs(TIMEOUT_S),
        post(gate, &config.relay, roots, "/v1/servers", body),
    )
    .await
    .map_err(|_| RegisterError::Timeout(TIMEOUT_S))?
}

async fn post(
    gate: &Gate,
    relay: &RelayUrl,
    roots: Option<Arc<rustls::RootCertStore>>,
    path: &str,
    body: String,
) -> Result<Registered, RegisterError> {
    let tcp = gate
        .connect(&relay.host, relay.port)
        .await
        .map_err(|e| RegisterError::Connect(relay.base(), e))?;
    let request = hyper::Request::post(path)
        .header(hyper::header::HOST, authority(relay))
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| RegisterError::Http(e.to_string()))?;
    let response = if relay.secure {
        let config = aromba_proto::client::tls_config(roots)
            .map_err(|e| RegisterError::Tls(std::io::Error::other(e)))?;
        let name = rustls_pki_types::ServerName::try_from(relay.host.clone())
            .map_err(|_| RegisterError::Name(relay.host.clone()))?;
        let tls = tokio_rustls::TlsConnector::from(config)
            .connect(name, tcp)
            .await
            .map_err(RegisterError::Tls)?;
        send(TokioIo::new(tls), request).await?
    } else {
        send(TokioIo::new(tcp), request).await?
    };
    let status = response.status().as_u16();
    let bytes = Limited::new(response.into_body(), MAX_ANSWER)
        .collect()
        .await
        .map_err(|e| RegisterError::Http(e.to_string()))?
        .to_bytes();
    let answer: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
    match (status, answer.get("outcome").and_then(|o| o.as_str())) {
        (201, _) => Ok(Registered::New),
        (200, _) => Ok(Registered::Unchanged),
        (202, _) => Ok(Registered::Duplicate),
        _ => Err(RegisterError::Refused {
            status,
            reason: answer
                .get("message")
                .and_then(|e| e.as_str())
                .map(|e| e.chars().filter(|c| !c.is_control()).take(200).collect())
                .unwrap_or_else(|| "no reason given".into()),
        }),
    }
}

fn authority(relay: &RelayUrl) -> String {
    let host = if relay.host.contains(':') {
        format!("[{}]", relay.host)
    } else {
        relay.host.clone()
    };
    match (relay.secure, relay.port) {
        (true, 443) | (false, 80) => host,
        (_, port) => format!("{host}:{port}"),
    }
}

async fn send<T>(
    io: TokioIo<T>,
    request: hyper::Request<Full<Bytes>>,
) -> Result<hyper::Response<hyper::body::Incoming>, RegisterError>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| RegisterError::Http(e.to_string()))?;
    // The connection runs beside the request and ends with it.
    tokio::spawn(connection);
    sender
        .send_request(request)
        .await
        .map_err(|e| RegisterError::Http(e.to_string()))
}
