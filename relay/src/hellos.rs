//! Sockets that have not said hello yet: each address may hold a few, and
//! all of them together a bounded number, apart from the servers'
//! connections. Anonymous sockets can therefore neither keep a registered
//! server out nor hold more than their address's share; each also has the
//! hello deadline.

use crate::address::AddressKey;
use crate::config::Limits;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

#[derive(Default)]
pub struct Hellos {
    waiting: Mutex<Waiting>,
}

#[derive(Default)]
struct Waiting {
    by_address: HashMap<AddressKey, u32>,
    total: usize,
}

/// One socket waiting for its hello; its slot is given back when dropped.
pub struct Pending {
    hellos: Arc<Hellos>,
    address: AddressKey,
}

impl Hellos {
    fn waiting(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A slot for a socket from `address`, if its share and the total
    /// allow one.
    pub fn admit(self: &Arc<Self>, address: AddressKey, limits: &Limits) -> Option<Pending> {
        let mut w = self.waiting();
        if w.total >= limits.max_pending_hellos {
            return None;
        }
        let mine = w.by_address.entry(address).or_insert(0);
        if *mine >= limits.hellos_per_address {
            return None;
        }
        *mine += 1;
        w.total += 1;
        Some(Pending {
            hellos: self.clone(),
            address,
        })
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        let mut w = self.hellos.waiting();
        w.total = w.total.saturating_sub(1);
        if let Some(n) = w.by_address.get_mut(&self.address) {
            *n -= 1;
            if *n == 0 {
                w.by_address.remove(&self.address);
            }
        }
    }
}
