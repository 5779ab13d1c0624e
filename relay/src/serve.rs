//! The HTTP server loop: hyper's HTTP/1 on connections that each hold a
//! slot of the HTTP [`crate::slots::Pool`], a deadline on every part
//! of a request, upgrades for the WebSocket, and a graceful shutdown.
//!
//! Deadlines, so that no client holds a connection by being slow:
//! - the TLS handshake (when the relay terminates TLS) within
//!   [`HANDSHAKE_DEADLINE`];
//! - a request's headers, and the wait for the next request on a kept-alive
//!   connection, within [`HEADER_DEADLINE`] (hyper's timer);
//! - its body within `body_deadline_ms` ([`crate::config::Limits`]) of its
//!   headers;
//! - the answer within [`ANSWER_DEADLINE`].
//!
//! Past the answer's the client gets a 503 and the connection closes; past
//! any other the connection is cut. A connection is unproven (the
//! pool may give its slot to a newcomer) except while a request that has
//! fully arrived is being answered.

use crate::address::{AddressKey, is_trusted_proxy};
use crate::slots::{Holder, Pool, PoolLimits, Reasons};
use crate::state::App;
use crate::tls::PeerAddr;
use axum::Router;
use axum::extract::ConnectInfo;
use axum::response::IntoResponse;
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

/// How long a client may take to send a request's headers (and how long a
/// kept-alive connection may wait for its next request).
pub(crate) const HEADER_DEADLINE: Duration = Duration::from_secs(10);
/// How long the relay may take to answer a request that has arrived.
pub(crate) const ANSWER_DEADLINE: Duration = Duration::from_secs(30);
/// The whole TLS handshake's deadline.
pub(crate) const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(10);
/// How long a shutdown waits for HTTP requests in flight.
const DRAIN: Duration = Duration::from_secs(10);

/// Serves `router` on `listener` (through `tls` when given) until
/// `shutdown` resolves.
pub(crate) async fn run(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    app: App,
    router: Router,
    shutdown: impl Future<Output = ()> + Send,
) {
    let limits = &app.config.limits;
    let pool = Pool::new(
        PoolLimits {
            total: limits.max_http_connections,
            per_address: limits.http_per_address as usize,
        },
        Reasons::HTTP,
    );
    // Connections are told to finish through `stop`, and counted by the
    // clones of `alive` they hold.
    let (stop, stopping) = tokio::sync::watch::channel(false);
    let alive = Arc::new(());
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    // Out of descriptors and the like: wait, then go on.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // The peer's own address: headers are not read yet. A trusted proxy
        // carries many clients and has no share of its own.
        let exempt = is_trusted_proxy(peer.ip(), &app.config.trusted_proxies);
        let admitted = match pool.admit(AddressKey::of(peer.ip()), exempt) {
            Ok(a) => a,
            Err(refused) => {
                app.metrics.refuse(pool.refused_reason(refused));
                drop(stream);
                continue;
            }
        };
        if let Some(evicted) = admitted.evicted {
            app.metrics.refuse(pool.evicted_reason(evicted));
        }
        let slot = admitted.slot;
        let router = router.clone();
        let tls = tls.clone();
        let app = app.clone();
        let mut stopping = stopping.clone();
        let held = alive.clone();
        tokio::spawn(async move {
            let holder = slot.holder().clone();
            let serving = async {
                match tls {
                    Some(acceptor) => {
                        match tokio::time::timeout(HANDSHAKE_DEADLINE, acceptor.accept(stream))
                            .await
                        {
                            Ok(Ok(io)) => {
                                serve_connection(io, peer, app, router, &holder, &mut stopping)
                                    .await
                            }
                            _ => app.metrics.refuse("tls_handshake"),
                        }
                    }
                    None => {
                        serve_connection(stream, peer, app, router, &holder, &mut stopping).await
                    }
                }
            };
            tokio::select! {
                () = serving => {}
                () = slot.holder().evicted() => {}
            }
            drop(slot);
            drop(held);
        });
    }
    drop(listener);
    let _ = stop.send(true);
    let deadline = tokio::time::Instant::now() + DRAIN;
    while Arc::strong_count(&alive) > 1 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One connection, request after request, until it ends, upgrades or the
/// relay stops.
async fn serve_connection<I>(
    io: I,
    peer: std::net::SocketAddr,
    app: App,
    router: Router,
    holder: &Arc<Holder>,
    stopping: &mut tokio::sync::watch::Receiver<bool>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service_holder = holder.clone();
    let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
        answer(
            req,
            peer,
            app.clone(),
            router.clone(),
            service_holder.clone(),
        )
    });
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_DEADLINE)
        .serve_connection(TokioIo::new(io), service)
        .with_upgrades();
    tokio::pin!(connection);
    tokio::select! {
        _ = connection.as_mut() => {}
        () = stopped(stopping) => {
            // A request being answered is finished; a connection still
            // sending one (or idle) is cut, not waited for.
            if holder.is_proven() {
                connection.as_mut().graceful_shutdown();
                let _ = connection.await;
            }
        }
    }
}

/// One request: its body read under `body_deadline_ms`, its answer under
/// [`ANSWER_DEADLINE`]; the connection is proven only in between.
async fn answer(
    req: hyper::Request<Incoming>,
    peer: std::net::SocketAddr,
    app: App,
    router: Router,
    holder: Arc<Holder>,
) -> Result<axum::response::Response, std::convert::Infallible> {
    let (mut parts, body) = req.into_parts();
    parts.extensions.insert(ConnectInfo(PeerAddr(peer)));
    let arrived = body.is_end_stream();
    let body = DeadlineBody {
        inner: body,
        deadline: Box::pin(tokio::time::sleep(Duration::from_millis(
            app.config.limits.body_deadline_ms,
        ))),
        holder: holder.clone(),
        app: app.clone(),
        arrived,
    };
    holder.set_proven(arrived);
    let request = hyper::Request::from_parts(parts, axum::body::Body::new(body));
    let answered = tokio::time::timeout(ANSWER_DEADLINE, router.oneshot(request)).await;
    holder.set_proven(false);
    match answered {
        Ok(Ok(response)) => Ok(response),
        Err(_) => {
            app.metrics.refuse("answer_deadline");
            // The client is told, and the connection closes after it.
            let mut response = crate::error::ApiError::Unavailable.into_response();
            response.headers_mut().insert(
                axum::http::header::CONNECTION,
                axum::http::HeaderValue::from_static("close"),
            );
            Ok(response)
        }
    }
}

/// A request body that must arrive whole by its deadline; past it, the
/// read fails and the connection is cut. It marks the connection proven
/// once the last byte is in.
struct DeadlineBody {
    inner: Incoming,
    deadline: Pin<Box<tokio::time::Sleep>>,
    holder: Arc<Holder>,
    app: App,
    arrived: bool,
}

#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within its deadline")]
struct BodyTooSlow;

impl HttpBody for DeadlineBody {
    type Data = hyper::body::Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = &mut *self;
        if !this.arrived && this.deadline.as_mut().poll(cx).is_ready() {
            this.app.metrics.refuse("body_deadline");
            this.holder.evict_self();
            return Poll::Ready(Some(Err(Box::new(BodyTooSlow))));
        }
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(None) => this.mark_arrived(),
            Poll::Ready(Some(Ok(_))) if this.inner.is_end_stream() => this.mark_arrived(),
            _ => {}
        }
        polled.map(|f| f.map(|r| r.map_err(Into::into)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl DeadlineBody {
    fn mark_arrived(&mut self) {
        if !self.arrived {
            self.arrived = true;
            self.holder.set_proven(true);
        }
    }
}

/// Resolves once `stop` was sent (or its sender is gone).
async fn stopped(rx: &mut tokio::sync::watch::Receiver<bool>) {
    loop {
        if *rx.borrow_and_update() {
            return;
        }
        if rx.changed().await.is_err() {
            return;
        }
    }
}
