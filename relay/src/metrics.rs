//! What `GET /metrics` shows, in the Prometheus text format, on the metrics
//! address only: counts and ids' worth of state, never content.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Reason {
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Direction {
    pub direction: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Event {
    pub event: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PoolState {
    pub state: &'static str,
}

/// What the outbox writers count (shared with [`Metrics`]).
#[derive(Clone)]
pub struct WriterMetrics {
    pub outbox_dropped: Counter,
    pub acks_lost: Counter,
    pub delivery_latency: Histogram,
}

pub struct Metrics {
    registry: Registry,
    pub connected: Gauge,
    pub frames: Family<Direction, Counter>,
    pub refusals: Family<Reason, Counter>,
    pub outbox_depth: Gauge,
    pub outbox_dropped: Counter,
    pub acks_lost: Counter,
    pub delivery_latency: Histogram,
    pub pool: Family<PoolState, Gauge>,
    pub registrations: Family<Reason, Counter>,
    pub telegram: Family<Event, Counter>,
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("aromba_relay");
        let connected = Gauge::default();
        registry.register(
            "connected_servers",
            "Servers holding a WebSocket to this replica",
            connected.clone(),
        );
        let frames = Family::<Direction, Counter>::default();
        registry.register("frames", "Sealed frames, by direction", frames.clone());
        let refusals = Family::<Reason, Counter>::default();
        registry.register(
            "refusals",
            "Hellos, frames and requests refused, by reason",
            refusals.clone(),
        );
        let outbox_depth = Gauge::default();
        registry.register(
            "outbox_depth",
            "Deliveries waiting in the outbox, all servers",
            outbox_depth.clone(),
        );
        let outbox_dropped = Counter::default();
        registry.register(
            "outbox_dropped",
            "Deliveries dropped because a server's queue was full",
            outbox_dropped.clone(),
        );
        let acks_lost = Counter::default();
        registry.register(
            "acks_lost",
            "Acknowledgements not written while the database refused them (their rows are sent again)",
            acks_lost.clone(),
        );
        let delivery_latency = Histogram::new([
            0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0, 300.0,
        ]);
        registry.register(
            "delivery_latency_seconds",
            "From enqueue to the server's acknowledgement",
            delivery_latency.clone(),
        );
        let pool = Family::<PoolState, Gauge>::default();
        registry.register(
            "db_pool_connections",
            "Database pool connections, by state",
            pool.clone(),
        );
        let registrations = Family::<Reason, Counter>::default();
        registry.register(
            "registrations",
            "Server registrations, by outcome",
            registrations.clone(),
        );
        let telegram = Family::<Event, Counter>::default();
        registry.register(
            "telegram_events",
            "The Telegram side: updates, taps, pairings, messages, by event",
            telegram.clone(),
        );
        Metrics {
            telegram,
            registry,
            connected,
            frames,
            refusals,
            outbox_depth,
            outbox_dropped,
            acks_lost,
            delivery_latency,
            pool,
            registrations,
        }
    }

    pub fn refuse(&self, reason: &'static str) {
        self.refusals.get_or_create(&Reason { reason }).inc();
    }

    pub fn telegram(&self, event: &'static str) {
        self.telegram.get_or_create(&Event { event }).inc();
    }

    /// How often `event` happened (for tests and the benchmark).
    pub fn telegram_count(&self, event: &'static str) -> u64 {
        self.telegram.get_or_create(&Event { event }).get()
    }

    pub fn frame(&self, direction: &'static str) {
        self.frames.get_or_create(&Direction { direction }).inc();
    }

    /// The counters the outbox writers add to.
    pub fn writer(&self) -> WriterMetrics {
        WriterMetrics {
            outbox_dropped: self.outbox_dropped.clone(),
            acks_lost: self.acks_lost.clone(),
            delivery_latency: self.delivery_latency.clone(),
        }
    }

    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}
