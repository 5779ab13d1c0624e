//! One HTTP/1.1 request over a connection a [`Dialer`] makes (the Worker's
//! [`Gate`](crate::net::Gate), which dials only what `network.toml`
//! lists), TLS verified against the host's name for `https://`, the
//! answer's body read up to a cap and no further. Registering with the
//! relay and downloading a release both go through here.

use crate::config::RelayUrl;
use aromba_relay_proto::client::Dialer;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("cannot reach {0}: {1}")]
    Connect(String, std::io::Error),
    #[error("the TLS connection to {0} failed: {1}")]
    Tls(String, std::io::Error),
    #[error("{0:?} is not a name a certificate can carry")]
    Name(String),
    #[error("the request to {0} failed: {1}")]
    Http(String, String),
    #[error("{0} answered with more than {1} bytes")]
    TooLarge(String, usize),
}

/// An answer: its status and its body, whole.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub body: Bytes,
    /// Whether the body was a stream of server-sent events
    /// (`text/event-stream`), given piece by piece as it came.
    pub event_stream: bool,
}

/// What to send.
pub struct Ask<'a> {
    pub method: hyper::Method,
    pub path: &'a str,
    /// `(content type, bytes)`, for a POST.
    pub body: Option<(&'a str, String)>,
    /// The most bytes of answer read; more is an error.
    pub cap: usize,
    /// More headers (a model API's key); never logged.
    pub headers: Vec<(&'static str, String)>,
}

/// Sends `ask` to `origin` and reads the answer. The caller bounds the
/// time it may take.
pub async fn request(
    dialer: &dyn Dialer,
    origin: &RelayUrl,
    roots: Option<Arc<rustls::RootCertStore>>,
    ask: Ask<'_>,
) -> Result<Answer, HttpError> {
    request_streamed(dialer, origin, roots, ask, &mut |_| {}).await
}

/// [`request`], with each piece of a `text/event-stream` body given to
/// `piece` as it comes (and the whole body, capped, in the answer too).
pub async fn request_streamed(
    dialer: &dyn Dialer,
    origin: &RelayUrl,
    roots: Option<Arc<rustls::RootCertStore>>,
    ask: Ask<'_>,
    piece: &mut (dyn FnMut(&[u8]) + Send),
) -> Result<Answer, HttpError> {
    let base = origin.base();
    let tcp = dialer
        .connect(&origin.host, origin.port)
        .await
        .map_err(|e| HttpError::Connect(base.clone(), e))?;
    let mut builder = hyper::Request::builder()
        .method(ask.method)
        .uri(ask.path)
        .header(hyper::header::HOST, authority(origin));
    for (name, value) in &ask.headers {
        builder = builder.header(*name, value.as_str());
    }
    let body = match ask.body {
        Some((content_type, bytes)) => {
            builder = builder.header(hyper::header::CONTENT_TYPE, content_type);
            Full::new(Bytes::from(bytes))
        }
        None => Full::new(Bytes::new()),
    };
    let request = builder
        .body(body)
        .map_err(|e| HttpError::Http(base.clone(), e.to_string()))?;
    let response = if origin.secure {
        let config = aromba_relay_proto::client::tls_config(roots)
            .map_err(|e| HttpError::Tls(base.clone(), std::io::Error::other(e)))?;
        let name = rustls_pki_types::ServerName::try_from(origin.host.clone())
            .map_err(|_| HttpError::Name(origin.host.clone()))?;
        let tls = tokio_rustls::TlsConnector::from(config)
            .connect(name, tcp)
            .await
            .map_err(|e| HttpError::Tls(base.clone(), e))?;
        send(&base, TokioIo::new(tls), request).await?
    } else {
        send(&base, TokioIo::new(tcp), request).await?
    };
    let status = response.status().as_u16();
    let event_stream = response
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("text/event-stream"))
        });
    let mut body = Limited::new(response.into_body(), ask.cap);
    let mut whole = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| {
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                HttpError::TooLarge(base.clone(), ask.cap)
            } else {
                HttpError::Http(base.clone(), e.to_string())
            }
        })?;
        if let Ok(data) = frame.into_data() {
            if event_stream {
                piece(&data);
            }
            whole.extend_from_slice(&data);
        }
    }
    Ok(Answer {
        status,
        body: Bytes::from(whole),
        event_stream,
    })
}

fn authority(origin: &RelayUrl) -> String {
    let host = if origin.host.contains(':') {
        format!("[{}]", origin.host)
    } else {
        origin.host.clone()
    };
    match (origin.secure, origin.port) {
        (true, 443) | (false, 80) => host,
        (_, port) => format!("{host}:{port}"),
    }
}

async fn send<T>(
    base: &str,
    io: TokioIo<T>,
    request: hyper::Request<Full<Bytes>>,
) -> Result<hyper::Response<hyper::body::Incoming>, HttpError>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| HttpError::Http(base.into(), e.to_string()))?;
    // The connection runs beside the request and ends with it.
    tokio::spawn(connection);
    sender
        .send_request(request)
        .await
        .map_err(|e| HttpError::Http(base.into(), e.to_string()))
}
