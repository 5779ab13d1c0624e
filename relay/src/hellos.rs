//! How often hellos may come. A hello that passes costs a database write
//! (the connection's generation) and a notification to every replica, so
//! each server has a small bucket: a burst for honest reconnects, then one
//! hello per refill, keyed by the server id only after its token was
//! checked, so nobody can spend another server's hellos. A hello that
//! fails (a wrong token, malformed, stale, silent) costs a database lookup
//! or a slot, so each address has a bucket of failures too, looked at
//! before the lookup (found by the attack round: one address had the relay
//! look up hundreds of unknown servers a second).
//!
//! The sockets still waiting for their hello live in a [`crate::slots`]
//! pool of their own, apart from the servers' connections.

use crate::address::AddressKey;
use crate::config::Limits;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use tokio::time::{Duration, Instant};
use uuid::Uuid;

/// Each server's hellos.
pub(crate) type HelloPace = Buckets<Uuid>;
/// Each address's failed hellos.
pub(crate) type FailedHellos = Buckets<AddressKey>;

impl HelloPace {
    pub fn new(limits: &Limits) -> HelloPace {
        Buckets::with(
            limits.hello_burst,
            Duration::from_millis(limits.hello_refill_ms),
        )
    }
}

impl FailedHellos {
    pub fn for_addresses(limits: &Limits) -> FailedHellos {
        Buckets::with(
            limits.failed_hello_burst,
            Duration::from_millis(limits.failed_hello_refill_ms),
        )
    }
}

/// A token bucket per key, in memory, forgetting full buckets.
pub struct Buckets<K> {
    burst: f64,
    refill: Duration,
    state: Mutex<Map<K>>,
}

struct Map<K> {
    by_key: HashMap<K, Bucket>,
    /// The map's size after its last pruning: it is pruned again at twice
    /// that, so pruning costs amortised O(1) per hello.
    pruned_at: usize,
}

#[derive(Clone, Copy)]
struct Bucket {
    tokens: f64,
    last: Instant,
}

/// Servers remembered before full buckets are forgotten.
const REMEMBERED: usize = 4_096;

impl<K: Hash + Eq + Copy> Buckets<K> {
    pub fn with(burst: u32, refill: Duration) -> Buckets<K> {
        Buckets {
            burst: f64::from(burst.max(1)),
            refill: refill.max(Duration::from_millis(1)),
            state: Mutex::new(Map {
                by_key: HashMap::new(),
                pruned_at: 0,
            }),
        }
    }

    /// Whether `key` has a token left, without taking it.
    pub fn has(&self, key: K) -> bool {
        let now = Instant::now();
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state
            .by_key
            .get(&key)
            .is_none_or(|b| self.refilled(*b, now) >= 1.0)
    }

    fn refilled(&self, bucket: Bucket, now: Instant) -> f64 {
        let gained = now.duration_since(bucket.last).as_secs_f64() / self.refill.as_secs_f64();
        (bucket.tokens + gained).min(self.burst)
    }

    /// Takes one of `key`'s tokens; `false` when it has none left.
    pub fn take(&self, key: K) -> bool {
        let now = Instant::now();
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.by_key.len() > REMEMBERED.max(state.pruned_at * 2) {
            // A full bucket is the same as no bucket.
            let burst = self.burst;
            state.by_key.retain(|_, b| self.refilled(*b, now) < burst);
            state.pruned_at = state.by_key.len();
        }
        let bucket = state.by_key.get(&key).copied().unwrap_or(Bucket {
            tokens: self.burst,
            last: now,
        });
        let tokens = self.refilled(bucket, now);
        let (tokens, granted) = if tokens >= 1.0 {
            (tokens - 1.0, true)
        } else {
            (tokens, false)
        };
        state.by_key.insert(key, Bucket { tokens, last: now });
        granted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pace(burst: u32, refill_ms: u64) -> HelloPace {
        HelloPace::new(&Limits {
            hello_burst: burst,
            hello_refill_ms: refill_ms,
            ..Limits::default()
        })
    }

    #[tokio::test(start_paused = true)]
    async fn a_server_gets_its_burst_then_one_hello_per_refill() {
        let pace = pace(3, 1_000);
        let server = Uuid::new_v4();
        assert!((0..3).all(|_| pace.take(server)));
        assert!(!pace.take(server));
        tokio::time::advance(Duration::from_millis(1_001)).await;
        assert!(pace.take(server));
        assert!(!pace.take(server));
    }

    #[tokio::test(start_paused = true)]
    async fn one_servers_hellos_do_not_spend_anothers() {
        let pace = pace(1, 60_000);
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        assert!(pace.take(a));
        assert!(!pace.take(a));
        assert!(pace.take(b));
    }

    #[tokio::test(start_paused = true)]
    async fn a_spent_bucket_survives_the_pruning_of_many_others() {
        let pace = pace(2, 1_000);
        let spent = Uuid::new_v4();
        assert!(pace.take(spent) && pace.take(spent));
        for _ in 0..REMEMBERED + 1 {
            pace.take(Uuid::new_v4());
        }
        tokio::time::advance(Duration::from_millis(500)).await;
        pace.take(Uuid::new_v4());
        assert!(!pace.take(spent), "a spent bucket survives the pruning");
    }
}
