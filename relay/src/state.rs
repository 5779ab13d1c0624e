//! What every handler shares.

use crate::config::Config;
use crate::hub::Hub;
use crate::metrics::Metrics;
use sqlx::PgPool;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use tokio::sync::watch;

/// A planned shutdown: come back after this many ms, ± this jitter.
pub type Restart = Option<(u64, u64)>;

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
    pub hellos: Arc<crate::hellos::Hellos>,
    /// Set when the relay is shutting down.
    pub shutdown: watch::Receiver<Restart>,
}

impl std::ops::Deref for App {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

impl App {
    pub fn new(db: PgPool, config: Config, shutdown: watch::Receiver<Restart>) -> App {
        App(Arc::new(Inner {
            db,
            config,
            hub: Hub::default(),
            metrics: Metrics::new(),
            sockets: AtomicUsize::new(0),
            hellos: Arc::default(),
            shutdown,
        }))
    }
}

impl App {
    /// Queues a delivery for a server with this relay's clock and bound,
    /// counting what the bound dropped: the entry point for the chat side.
    pub async fn enqueue(
        &self,
        server: uuid::Uuid,
        delivery: &aromba_proto::frame::Delivery,
    ) -> Result<i64, crate::outbox::OutboxError> {
        let (id, dropped) = crate::outbox::enqueue(
            &self.db,
            server,
            delivery,
            self.config.clock.now(),
            self.config.limits.max_pending,
        )
        .await?;
        if dropped > 0 {
            self.metrics.outbox_dropped.inc_by(dropped);
            tracing::info!(server = %server, dropped, "outbox bound reached");
        }
        Ok(id)
    }
}
