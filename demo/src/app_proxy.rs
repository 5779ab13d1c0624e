//! The demo's Mini App, reached as a person's browser can: the relay
//! serves the app over TLS under the demo's own certificate authority,
//! which no browser trusts, so the page's app panel loads it through this
//! proxy on its own loopback origin (apart from the chat page's, as
//! Telegram's clients keep an app apart from the chat). Only `/app/…` is
//! passed on, each answer with the relay's own policy for the page.

use aromba::config::RelayUrl;
use aromba::http::{Ask, request};
use aromba_relay_proto::client::Direct;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// The largest body passed either way (the app asks with a launch).
const CAP: usize = 64 * 1024;

#[derive(Clone)]
struct Proxy {
    relay: Arc<RelayUrl>,
    roots: Arc<rustls::RootCertStore>,
    /// The chat page's origin, the one that may frame the app here.
    page: Arc<str>,
}

/// Serves the proxy on `listener`, to the relay at `relay` (its
/// certificate under the authority in `ca`), for the chat page at `page`.
pub fn serve(
    listener: tokio::net::TcpListener,
    relay: &str,
    ca: &std::path::Path,
    page: &str,
) -> Result<(), String> {
    let relay = RelayUrl::parse(relay)?;
    // The Worker's own reading of a relay's CA file (root's, unwritable by
    // others), as `aromba pair --ca-file` takes it.
    let roots = aromba::pair::roots(Some(ca))?
        .ok_or_else(|| format!("{} holds no certificate", ca.display()))?;
    let state = Proxy {
        relay: Arc::new(relay),
        roots,
        page: page.into(),
    };
    let router = axum::Router::new().fallback(pass).with_state(state);
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router).await {
            tracing::error!(error = %e, "the app proxy stopped");
        }
    });
    Ok(())
}

fn kind_of(path: &str) -> &'static str {
    if path.ends_with(".js") {
        "text/javascript; charset=utf-8"
    } else if path.ends_with(".css") {
        "text/css; charset=utf-8"
    } else if path.ends_with('/') {
        "text/html; charset=utf-8"
    } else {
        "application/json"
    }
}

async fn pass(State(proxy): State<Proxy>, method: Method, uri: Uri, body: Bytes) -> Response {
    let path = uri.path();
    if !path.starts_with("/app/")
        || path.contains("..")
        || uri.query().is_some() && method != Method::GET
    {
        return (StatusCode::NOT_FOUND, "only the Mini App is here").into_response();
    }
    let body = if method == Method::POST {
        match String::from_utf8(body.to_vec()) {
            Ok(text) if text.len() <= CAP => Some(("application/json", text)),
            _ => return (StatusCode::BAD_REQUEST, "not a JSON body").into_response(),
        }
    } else {
        None
    };
    let ask = Ask {
        method: method.clone(),
        path,
        body,
        cap: CAP,
        headers: Vec::new(),
    };
    let answer = match request(&Direct, &proxy.relay, Some(proxy.roots.clone()), ask).await {
        Ok(a) => a,
        Err(e) => {
            return (
                StatusCode::BAD_GATEWAY,
                format!("the relay did not answer: {e}"),
            )
                .into_response();
        }
    };
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::BAD_GATEWAY);
    let mut r = (status, answer.body).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(kind_of(path)),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    let policy = format!(
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors {}",
        proxy.page
    );
    if let Ok(v) = HeaderValue::from_str(&policy) {
        h.insert(header::CONTENT_SECURITY_POLICY, v);
    }
    r
}
