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
    /// older one.
    pub fn attach(&self, server: Uuid, db_generation: i64) -> Arc<Slot> {
        let slot = Arc::new(Slot {
            generation: self.next_generation.fetch_add(1, Ordering::Relaxed),
            db_generation,
            recheck: Notify::new(),
            wake: Notify::new(),
            replaced: Notify::new(),
        });
        if let Some(old) = self.slots().insert(server, slot.clone()) {
            old.replaced.notify_one();
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
