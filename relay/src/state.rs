//! What every handler shares.

use crate::config::Config;
use crate::hub::Hub;
use crate::metrics::Metrics;
use sqlx::PgPool;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use tokio::sync::watch;

/// A planned shutdown: come back after this many ms, ± this jitter.
pub(crate) type Restart = Option<(u64, u64)>;

#[derive(Clone)]
pub struct App(Arc<Inner>);

pub struct Inner {
    pub db: PgPool,
    pub config: Config,
    pub hub: Hub,
    pub metrics: Metrics,
    /// Servers connected to this replica (past their hello).
    pub sockets: AtomicUsize,
    /// Sockets waiting for their hello.
    pub hellos: Arc<crate::slots::Pool>,
    /// How often each server may say hello…
    pub hello_pace: crate::hellos::HelloPace,
    /// …and each address fail to.
    pub failed_hellos: crate::hellos::FailedHellos,
    /// Servers connected to this replica that are not paired.
    pub unpaired_sockets: AtomicUsize,
    /// `/readyz`'s last answer, kept for a second.
    pub readiness: crate::http::Readiness,
    /// Set when the relay is shutting down.
    pub shutdown: watch::Receiver<Restart>,
    /// Enqueues and acknowledgements, a commit per batch.
    pub writer: crate::writer::Writer,
    /// The Telegram side, when the relay talks to a bot.
    pub telegram: Option<std::sync::Arc<crate::telegram::Telegram>>,
    /// Mini App pages waiting on this replica for their server's answer.
    pub app_answers: crate::mini_app::answers::Waiters,
}

impl std::ops::Deref for App {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

impl App {
    /// The shared state, and the outbox writers it starts (to be drained
    /// when the relay stops).
    pub fn new(
        db: PgPool,
        config: Config,
        shutdown: watch::Receiver<Restart>,
        telegram: Option<std::sync::Arc<crate::telegram::Telegram>>,
    ) -> (App, crate::writer::Tasks) {
        let metrics = Metrics::new();
        let (writer, tasks) = crate::writer::Writer::start(
            db.clone(),
            metrics.writer(),
            config.clock.clone(),
            config.limits.max_pending,
        );
        let hellos = crate::slots::Pool::new(
            crate::slots::PoolLimits {
                total: config.limits.max_pending_hellos,
                per_address: config.limits.hellos_per_address as usize,
            },
            crate::slots::Reasons::HELLO,
        );
        let hello_pace = crate::hellos::HelloPace::new(&config.limits);
        let failed_hellos = crate::hellos::FailedHellos::for_addresses(&config.limits);
        let app = App(Arc::new(Inner {
            db,
            config,
            hub: Hub::default(),
            metrics,
            sockets: AtomicUsize::new(0),
            hellos,
            hello_pace,
            failed_hellos,
            unpaired_sockets: AtomicUsize::new(0),
            readiness: crate::http::Readiness::default(),
            app_answers: crate::mini_app::answers::Waiters::default(),
            shutdown,
            writer,
            telegram,
        }));
        (app, tasks)
    }
}

impl App {
    /// Queues a delivery for a server with this relay's clock and bound
    /// (the writer counts what the bound dropped), and waits for its
    /// commit: the entry point for the chat side.
    pub async fn enqueue(
        &self,
        server: uuid::Uuid,
        delivery: &aromba_relay_proto::frame::Delivery,
    ) -> Result<i64, crate::writer::WriterError> {
        let (id, _dropped) = self
            .writer
            .enqueue(server, delivery.clone(), self.config.clock.now())
            .await?;
        Ok(id)
    }
}
