//! The HTTP server loop: hyper's HTTP/1 with a timer, so that a client has
//! a deadline to send its request headers (a slowloris is cut off), a cap
//! on connections that have not yet become WebSockets, upgrades for the
//! WebSocket, and a graceful shutdown.

use crate::tls::PeerAddr;
use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;
use tower::ServiceExt;

/// How long a client may take to send a request's headers.
pub const HEADER_DEADLINE: Duration = Duration::from_secs(10);
/// How long a shutdown waits for HTTP requests in flight.
const DRAIN: Duration = Duration::from_secs(10);

/// Serves `router` on `listener` until `shutdown` resolves. At most
/// `max_connections` HTTP connections at once (a WebSocket leaves this
/// count when it is upgraded).
pub async fn run<L>(
    mut listener: L,
    router: Router,
    max_connections: usize,
    shutdown: impl Future<Output = ()> + Send,
) where
    L: axum::serve::Listener<Addr = SocketAddr>,
{
    // Connections are told to finish through `stop`, and counted by the
    // clones of `alive` they hold.
    let (stop, stopping) = tokio::sync::watch::channel(false);
    let alive = Arc::new(());
    let slots = Arc::new(Semaphore::new(max_connections.max(1)));
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let (io, addr) = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let router = router.clone();
        let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
            req.extensions_mut().insert(ConnectInfo(PeerAddr(addr)));
            router.clone().oneshot(req)
        });
        let connection = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_DEADLINE)
            .serve_connection(TokioIo::new(io), service)
            .with_upgrades();
        let mut stopping = stopping.clone();
        let held = alive.clone();
        tokio::spawn(async move {
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                () = stopped(&mut stopping) => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
            drop(permit);
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
