//! The servers connected to this replica: one connection per server, a new
//! one replacing the old. A connection is woken (coalesced, never queued)
//! when its outbox may have grown, and told to go when it is replaced.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;
use uuid::Uuid;

/// What the hub holds of one connection.
#[derive(Debug)]
pub struct Slot {
    pub generation: u64,
    /// The server's connection generation in PostgreSQL when this
    /// connection took it: a higher one anywhere replaces this connection.
    pub db_generation: i64,
    /// Woken after notifications may have been lost: the connection checks
    /// its generation against the database.
    pub recheck: Notify,
    /// Woken when the server's outbox may hold something new.
    pub wake: Notify,
    /// Woken when a newer connection of the same server replaced this one.
    pub replaced: Notify,
}

#[derive(Default)]
pub struct Hub {
    slots: Mutex<HashMap<Uuid, Arc<Slot>>>,
    next_generation: AtomicU64,
}

impl Hub {
    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, Arc<Slot>>> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a connection for `server`, replacing (and telling) any
    /// older one. Older is by the database's generation, not by arrival:
    /// a connection whose hello took an older generation but reached the
    /// hub later is told to go at once, and the newer one stays.
    pub fn attach(&self, server: Uuid, db_generation: i64) -> Arc<Slot> {
        let slot = Arc::new(Slot {
            generation: self.next_generation.fetch_add(1, Ordering::Relaxed),
            db_generation,
            recheck: Notify::new(),
            wake: Notify::new(),
            replaced: Notify::new(),
        });
        let mut slots = self.slots();
        match slots.get(&server) {
            Some(held) if held.db_generation > db_generation => slot.replaced.notify_one(),
            _ => {
                if let Some(old) = slots.insert(server, slot.clone()) {
                    old.replaced.notify_one();
                }
            }
        }
        slot
    }

    /// Removes the connection, unless a newer one already took its place.
    pub fn detach(&self, server: Uuid, slot: &Slot) {
        let mut slots = self.slots();
        if slots
            .get(&server)
            .is_some_and(|s| s.generation == slot.generation)
        {
            slots.remove(&server);
        }
    }

    /// Wakes the server's connection, if this replica holds it.
    pub fn wake(&self, server: Uuid) -> bool {
        match self.slots().get(&server) {
            Some(slot) => {
                slot.wake.notify_one();
                true
            }
            None => false,
        }
    }

    /// Wakes every connection: after the listener lost notifications.
    pub fn wake_all(&self) {
        for slot in self.slots().values() {
            slot.wake.notify_one();
            slot.recheck.notify_one();
        }
    }

    /// A connection of `server` with `db_generation` started somewhere:
    /// an older one here goes.
    pub fn superseded(&self, server: Uuid, db_generation: i64) {
        if let Some(slot) = self.slots().get(&server)
            && slot.db_generation < db_generation
        {
            slot.replaced.notify_one();
        }
    }

    pub fn len(&self) -> usize {
        self.slots().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;

    #[test]
    fn a_connection_of_an_older_generation_attached_later_goes_and_the_newer_stays() {
        let hub = Hub::default();
        let server = Uuid::new_v4();
        let newer = hub.attach(server, 7);
        let older = hub.attach(server, 6);
        // The older one is told to go; the newer one is not.
        let told = older.replaced.notified();
        tokio::pin!(told);
        assert!(polled_ready(told.as_mut()));
        let not_told = newer.replaced.notified();
        tokio::pin!(not_told);
        assert!(!polled_ready(not_told.as_mut()));
        // Detaching the older one leaves the newer one in place.
        hub.detach(server, &older);
        assert!(hub.wake(server));
        let woken = newer.wake.notified();
        tokio::pin!(woken);
        assert!(polled_ready(woken.as_mut()));
    }

    #[test]
    fn a_newer_generation_replaces_the_one_held() {
        let hub = Hub::default();
        let server = Uuid::new_v4();
        let first = hub.attach(server, 1);
        let second = hub.attach(server, 2);
        let told = first.replaced.notified();
        tokio::pin!(told);
        assert!(polled_ready(told.as_mut()));
        hub.detach(server, &first);
        assert_eq!(hub.len(), 1, "the newer one stays");
        drop(second);
    }

    /// Polls once: whether the notification was already there.
    fn polled_ready(f: std::pin::Pin<&mut tokio::sync::futures::Notified<'_>>) -> bool {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        f.poll(&mut cx).is_ready()
    }
}
