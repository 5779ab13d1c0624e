//! Aromba's relay: servers register here and hold one authenticated
//! WebSocket each; what waits for them lives in PostgreSQL, the one source
//! of truth, so any number of replicas can run behind a load balancer.
//!
//! [`Relay::serve`] runs the whole service on listeners the caller binds,
//! against a database the caller connects, until `shutdown` resolves, so
//! every test starts the real server on `127.0.0.1:0`:
//!
//! ```no_run
//! # async fn run() -> Result<(), aromba_relay::RelayError> {
//! use aromba_relay::{Config, Listeners, Pepper, Relay};
//! let db = sqlx::PgPool::connect("postgres://localhost/aromba").await?;
//! let api = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let config = Config::new(Pepper::new(&[7; 32])?);
//! Relay::serve(Listeners { api, metrics: None }, db, config, std::future::pending()).await
//! # }
//! ```
//!
//! Map: [`config`] (settings), [`secrets`] (each read from its file),
//! [`serve`] (the accept loop and request deadlines), [`slots`] (what
//! clients hold open, where the unproven give way), [`hellos`] (hello
//! paces), [`servers`] (registration), [`ws`] (the
//! WebSocket session), [`hub`] (connections on this replica), [`outbox`]
//! and [`listener`] (delivery across replicas), [`writer`] (group commit of
//! enqueues and acknowledgements), [`sweep`] (what is erased
//! when), [`store`] (every SQL statement, one module per table),
//! [`metrics`], [`http`] (routes), [`db`] (migrations, readiness),
//! [`telegram`] (the bot: webhook or polling, pairing, chats, signed taps).

#![forbid(unsafe_code)]
#![warn(unreachable_pub)]

pub mod address;
pub mod clock;
pub mod config;
pub mod db;
pub(crate) mod error;
pub mod hashing;
pub(crate) mod hellos;
pub mod http;
pub(crate) mod hub;
pub(crate) mod listener;
pub mod logging;
pub mod metrics;
pub mod mini_app;
pub(crate) mod openapi;
pub mod outbox;
pub(crate) mod secrets;
pub(crate) mod serve;
pub(crate) mod servers;
pub mod slots;
pub(crate) mod state;
pub(crate) mod store;
pub(crate) mod sweep;
pub mod telegram;
pub mod tls;
pub mod writer;
pub mod ws;

pub use config::{Config, ConfigError, Limits, Pepper};
pub use state::App;

use rand::Rng;
use sqlx::PgPool;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::net::TcpListener;

/// Where the relay listens: the API and WebSocket, and (apart from them)
/// the metrics.
pub struct Listeners {
    pub api: TcpListener,
    pub metrics: Option<TcpListener>,
}

#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    #[error("the database migrations could not be applied: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("the database could not be reached: {0}")]
    Database(#[from] sqlx::Error),
    #[error("a listener failed: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    #[error(transparent)]
    ApprovalKey(#[from] telegram::signing::KeyError),
}

pub struct Relay;

impl Relay {
    /// Applies the migrations, then serves until `shutdown` resolves. On
    /// shutdown every connected server is told when to come back, and the
    /// connections are given `drain_ms` to close.
    pub async fn serve(
        listeners: Listeners,
        db: PgPool,
        config: Config,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), RelayError> {
        db::MIGRATOR.run(&db).await?;
        let (restart_tx, restart_rx) = tokio::sync::watch::channel(None);
        let telegram = match config.telegram.clone() {
            Some(t) => Some(telegram::Telegram::prepare(t, &db).await?),
            None => None,
        };
        let (app, writers) = App::new(
            db,
            config,
            restart_rx,
            telegram.as_ref().map(|(t, _)| t.clone()),
        );
        let limits = app.config.limits.clone();
        let mut tasks = tokio::task::JoinSet::new();
        if let Some((t, receivers)) = telegram {
            telegram::start(app.clone(), t, receivers, &mut tasks);
        }
        tasks.spawn(sweep::run(app.clone()));
        tasks.spawn(listener::run(app.clone()));
        if let Some(metrics) = listeners.metrics {
            let router = http::metrics_router(app.clone());
            tasks.spawn(async move {
                if let Err(e) = axum::serve(metrics, router).await {
                    tracing::error!(error = %e, "metrics listener failed");
                }
            });
        }
        let router = http::router(app.clone(), &mut tasks);
        let announce = async move {
            shutdown.await;
            let jitter = limits.restart_jitter_ms;
            let after = limits.restart_after_ms + rand::rng().random_range(0..=jitter / 2);
            let _ = restart_tx.send(Some((after, jitter)));
        };
        let addr = listeners.api.local_addr()?;
        let acceptor = match &app.config.tls {
            Some(files) => {
                let certs = Arc::new(tls::Certificates::load(files.clone())?);
                let server_config = tls::server_config(certs.clone())?;
                // Registered before the first connection is accepted, so a
                // SIGHUP never finds the default action (which would end the
                // process).
                let hangups =
                    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
                tasks.spawn(reload_on_hangup(certs, hangups));
                Some(tokio_rustls::TlsAcceptor::from(server_config))
            }
            None => None,
        };
        tracing::info!(addr = %addr, tls = acceptor.is_some(), "relay listening");
        serve::run(listeners.api, acceptor, app.clone(), router, announce).await;
        // The WebSockets outlive the HTTP server's graceful shutdown (they
        // were handed off at the upgrade); give them time to say goodbye.
        let deadline = tokio::time::Instant::now() + Duration::from_millis(limits.drain_ms);
        while app.sockets.load(Ordering::SeqCst) > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tasks.abort_all();
        // What the connections acknowledged and the chat side queued is
        // written before the relay is gone.
        writers.drain(Duration::from_millis(limits.drain_ms)).await;
        Ok(())
    }
}

/// Rereads the certificate and key on every SIGHUP.
async fn reload_on_hangup(certs: Arc<tls::Certificates>, mut hangups: tokio::signal::unix::Signal) {
    while hangups.recv().await.is_some() {
        match certs.reload() {
            Ok(()) => tracing::info!("certificate reloaded"),
            Err(e) => tracing::warn!(error = %e, "certificate reload failed; the old one stays"),
        }
    }
}
