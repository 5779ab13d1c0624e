//! Slots that clients hold open, counted per address and in all, where
//! the unproven give way.
//!
//! Rate limits cap how often work starts, not how much stays open: a client
//! that trickles a request's headers or body, or opens a WebSocket and never
//! says hello, holds its slot for as long as it is allowed to. From enough
//! addresses that would be every slot, and the relay would be offline. So a
//! [`Pool`] counts what each address (an IPv6 /64, see
//! [`crate::address`]) holds and what all hold, and a holder that has
//! proven nothing yet can be evicted:
//!
//! - an address at its share gives up its own oldest unproven slot to its
//!   newcomer;
//! - a full pool gives up the oldest unproven slot of the address holding
//!   the most slots (the heaviest first: found by the attack round, taking
//!   the oldest of anyone let churn from many addresses push out a real
//!   client still in its first round trips, which holds one slot).
//!
//! A slot is *proven* while its holder is being answered: an HTTP request
//! that has fully arrived, or a hello that has arrived and is being
//! checked. That state lasts a bounded time (the request deadline, a
//! database lookup), so a newcomer is refused only when every slot is
//! being answered at that moment. A real client holds one slot or a few;
//! to make it the one that goes, an attacker would have to spread the
//! whole pool over more addresses than it has slots, one each.
//!
//! The relay keeps two pools: HTTP connections (before any becomes a
//! WebSocket) and WebSockets waiting for their hello.
//!
//! ```
//! use aromba_relay::address::AddressKey;
//! use aromba_relay::slots::{Admitted, Pool, PoolLimits, Reasons};
//! let pool = Pool::new(PoolLimits { total: 2, per_address: 1 }, Reasons::HTTP);
//! let a = AddressKey::of("192.0.2.1".parse().unwrap());
//! let b = AddressKey::of("192.0.2.2".parse().unwrap());
//! let Ok(Admitted { slot: first, .. }) = pool.admit(a, false) else { panic!() };
//! // The address's share is one: its second connection pushes out the first.
//! let Ok(Admitted { evicted: Some(_), .. }) = pool.admit(a, false) else { panic!() };
//! assert!(first.was_evicted());
//! let Ok(_) = pool.admit(b, false) else { panic!() };
//! ```

use crate::address::AddressKey;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// How many slots a pool has in all, and how many one address may hold.
#[derive(Clone, Copy, Debug)]
pub struct PoolLimits {
    pub total: usize,
    pub per_address: usize,
}

/// What the metrics call a pool's refusals and evictions.
#[derive(Clone, Copy, Debug)]
pub struct Reasons {
    pub address_share: &'static str,
    pub full: &'static str,
    pub evicted_same_address: &'static str,
    pub evicted_heaviest: &'static str,
}

impl Reasons {
    /// The HTTP connections' pool.
    pub const HTTP: Reasons = Reasons {
        address_share: "http_address_share",
        full: "http_pool_full",
        evicted_same_address: "http_evicted_same_address",
        evicted_heaviest: "http_evicted_heaviest",
    };
    /// The pool of sockets before their hello.
    pub const HELLO: Reasons = Reasons {
        address_share: "hello_address_share",
        full: "hello_budget",
        evicted_same_address: "hello_evicted_same_address",
        evicted_heaviest: "hello_evicted_heaviest",
    };
}

pub struct Pool {
    limits: PoolLimits,
    reasons: Reasons,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    next: u64,
    /// Every slot by the order it was taken (oldest first).
    open: BTreeMap<u64, Entry>,
    /// The slots each address holds, oldest first (exempt holders too:
    /// they have no share, but they weigh).
    by_address: HashMap<AddressKey, BTreeSet<u64>>,
    /// Addresses by how many slots they hold.
    by_load: BTreeSet<(usize, AddressKey)>,
}

struct Entry {
    address: AddressKey,
    holder: Arc<Holder>,
}

/// Addresses looked at, heaviest first, for a full pool's eviction.
const CANDIDATES: usize = 64;

/// What the pool and a slot's holder both see.
#[derive(Default)]
pub struct Holder {
    proven: AtomicBool,
    evicted: AtomicBool,
    told: Notify,
}

impl Holder {
    /// Resolves once the pool took the slot back for a newcomer.
    pub async fn evicted(&self) {
        loop {
            if self.evicted.load(Ordering::SeqCst) {
                return;
            }
            self.told.notified().await;
        }
    }

    /// Marks the holder as being answered (it cannot be evicted) or, again,
    /// as unproven.
    pub fn set_proven(&self, proven: bool) {
        self.proven.store(proven, Ordering::SeqCst);
    }

    /// Gives the slot up from the holder's side (a deadline passed): the
    /// holder's task ends as if evicted.
    pub fn evict_self(&self) {
        self.evicted.store(true, Ordering::SeqCst);
        self.told.notify_waiters();
        self.told.notify_one();
    }

    pub fn is_proven(&self) -> bool {
        self.proven.load(Ordering::SeqCst)
    }
}

/// One slot; given back when dropped.
pub struct Slot {
    pool: Arc<Pool>,
    id: u64,
    holder: Arc<Holder>,
}

impl Slot {
    pub fn holder(&self) -> &Arc<Holder> {
        &self.holder
    }

    pub fn was_evicted(&self) -> bool {
        self.holder.evicted.load(Ordering::SeqCst)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.pool.state().forget(self.id);
    }
}

/// Whose slot a newcomer took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Evicted {
    /// The oldest unproven slot of the newcomer's own address.
    SameAddress,
    /// The oldest unproven slot of the address holding the most.
    Heaviest,
}

pub struct Admitted {
    pub slot: Slot,
    pub evicted: Option<Evicted>,
}

/// Why a newcomer got no slot: everything it could push out is being
/// answered right now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// Its address holds its whole share, all proven.
    AddressShare,
    /// The pool is full, all proven.
    Full,
}

impl State {
    fn held_by(&self, address: &AddressKey) -> usize {
        self.by_address.get(address).map_or(0, BTreeSet::len)
    }

    fn reweigh(&mut self, address: AddressKey, before: usize) {
        let after = self.held_by(&address);
        if before > 0 {
            self.by_load.remove(&(before, address));
        }
        if after > 0 {
            self.by_load.insert((after, address));
        }
    }

    fn forget(&mut self, id: u64) -> Option<Entry> {
        let entry = self.open.remove(&id)?;
        let address = entry.address;
        let before = self.held_by(&address);
        if let Some(ids) = self.by_address.get_mut(&address) {
            ids.remove(&id);
            if ids.is_empty() {
                self.by_address.remove(&address);
            }
        }
        self.reweigh(address, before);
        Some(entry)
    }

    fn evict(&mut self, id: u64) {
        if let Some(entry) = self.forget(id) {
            entry.holder.evict_self();
        }
    }

    /// The oldest unproven slot `address` holds.
    fn oldest_unproven_of(&self, address: &AddressKey) -> Option<u64> {
        self.by_address
            .get(address)?
            .iter()
            .copied()
            .find(|id| self.open.get(id).is_some_and(|e| !e.holder.is_proven()))
    }

    /// The slot a full pool gives up: of the heaviest addresses (those
    /// holding the most), the oldest unproven slot.
    fn heaviest_unproven(&self) -> Option<u64> {
        let mut best: Option<(usize, u64)> = None;
        for (load, address) in self.by_load.iter().rev().take(CANDIDATES) {
            if best.is_some_and(|(top, _)| *load < top) {
                break;
            }
            if let Some(id) = self.oldest_unproven_of(address)
                && best.is_none_or(|(_, b)| id < b)
            {
                best = Some((*load, id));
            }
        }
        best.map(|(_, id)| id)
    }
}

impl Pool {
    pub fn new(limits: PoolLimits, reasons: Reasons) -> Arc<Pool> {
        Arc::new(Pool {
            limits: PoolLimits {
                total: limits.total.max(1),
                per_address: limits.per_address.max(1),
            },
            reasons,
            state: Mutex::default(),
        })
    }

    /// The metrics reason of a refusal.
    pub fn refused_reason(&self, refused: Refused) -> &'static str {
        match refused {
            Refused::AddressShare => self.reasons.address_share,
            Refused::Full => self.reasons.full,
        }
    }

    /// The metrics reason of an eviction.
    pub fn evicted_reason(&self, evicted: Evicted) -> &'static str {
        match evicted {
            Evicted::SameAddress => self.reasons.evicted_same_address,
            Evicted::Heaviest => self.reasons.evicted_heaviest,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Slots held now.
    pub fn len(&self) -> usize {
        self.state().open.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A slot for a newcomer from `address`; `exempt` (a trusted proxy,
    /// which carries many clients) counts only against the total.
    pub fn admit(self: &Arc<Self>, address: AddressKey, exempt: bool) -> Result<Admitted, Refused> {
        let mut state = self.state();
        let mut evicted = None;
        if !exempt && state.held_by(&address) >= self.limits.per_address {
            match state.oldest_unproven_of(&address) {
                Some(id) => {
                    state.evict(id);
                    evicted = Some(Evicted::SameAddress);
                }
                None => return Err(Refused::AddressShare),
            }
        }
        if state.open.len() >= self.limits.total {
            match state.heaviest_unproven() {
                Some(id) => {
                    state.evict(id);
                    evicted = Some(Evicted::Heaviest);
                }
                None => return Err(Refused::Full),
            }
        }
        let id = state.next;
        state.next += 1;
        let holder = Arc::new(Holder::default());
        state.open.insert(
            id,
            Entry {
                address,
                holder: holder.clone(),
            },
        );
        let before = state.held_by(&address);
        state.by_address.entry(address).or_default().insert(id);
        state.reweigh(address, before);
        Ok(Admitted {
            slot: Slot {
                pool: self.clone(),
                id,
                holder,
            },
            evicted,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(last: u8) -> AddressKey {
        AddressKey::of(std::net::IpAddr::V4(std::net::Ipv4Addr::new(
            192, 0, 2, last,
        )))
    }

    fn admit(pool: &Arc<Pool>, address: AddressKey) -> Admitted {
        match pool.admit(address, false) {
            Ok(a) => a,
            Err(r) => panic!("refused: {r:?}"),
        }
    }

    #[test]
    fn a_full_pool_evicts_from_the_heaviest_address_not_a_client_holding_one() {
        let pool = Pool::new(
            PoolLimits {
                total: 4,
                per_address: 10,
            },
            Reasons::HTTP,
        );
        let client = admit(&pool, key(1)).slot;
        let churn: Vec<_> = (0..3).map(|_| admit(&pool, key(2)).slot).collect();
        let newcomer = admit(&pool, key(3));
        assert_eq!(newcomer.evicted, Some(Evicted::Heaviest));
        assert!(!client.was_evicted(), "the client holding one slot stays");
        assert!(churn[0].was_evicted(), "the heaviest address's oldest goes");
        assert!(!churn[1].was_evicted() && !churn[2].was_evicted());
    }

    #[test]
    fn a_full_pool_evicts_its_oldest_unproven_slot_among_equals() {
        let pool = Pool::new(
            PoolLimits {
                total: 3,
                per_address: 10,
            },
            Reasons::HTTP,
        );
        let first = admit(&pool, key(1)).slot;
        let second = admit(&pool, key(2)).slot;
        let third = admit(&pool, key(3)).slot;
        first.holder().set_proven(true);
        let fourth = admit(&pool, key(4));
        assert_eq!(fourth.evicted, Some(Evicted::Heaviest));
        assert!(!first.was_evicted(), "a proven slot stays");
        assert!(second.was_evicted(), "the oldest unproven one goes");
        assert!(!third.was_evicted());
        assert_eq!(pool.len(), 3);
    }

    #[test]
    fn an_address_at_its_share_gives_up_its_own_oldest_and_nobody_elses() {
        let pool = Pool::new(
            PoolLimits {
                total: 100,
                per_address: 2,
            },
            Reasons::HTTP,
        );
        let other = admit(&pool, key(9)).slot;
        let a1 = admit(&pool, key(1)).slot;
        let a2 = admit(&pool, key(1)).slot;
        let a3 = admit(&pool, key(1));
        assert_eq!(a3.evicted, Some(Evicted::SameAddress));
        assert!(a1.was_evicted() && !a2.was_evicted() && !other.was_evicted());
    }

    #[test]
    fn a_newcomer_is_refused_only_when_everything_is_being_answered() {
        let pool = Pool::new(
            PoolLimits {
                total: 2,
                per_address: 1,
            },
            Reasons::HTTP,
        );
        let a = admit(&pool, key(1)).slot;
        a.holder().set_proven(true);
        assert_eq!(pool.admit(key(1), false).err(), Some(Refused::AddressShare));
        let b = admit(&pool, key(2)).slot;
        b.holder().set_proven(true);
        assert_eq!(pool.admit(key(3), false).err(), Some(Refused::Full));
        b.holder().set_proven(false);
        assert!(pool.admit(key(3), false).is_ok());
    }

    #[test]
    fn an_exempt_holder_has_no_share_but_counts_in_the_total() {
        let pool = Pool::new(
            PoolLimits {
                total: 3,
                per_address: 1,
            },
            Reasons::HTTP,
        );
        let proxy = key(7);
        let held: Vec<_> = (0..3).map(|_| admit_exempt(&pool, proxy)).collect();
        assert!(held.iter().all(|s| !s.was_evicted()));
        let next = admit_exempt(&pool, proxy);
        assert!(held[0].was_evicted() && !next.was_evicted());
    }

    fn admit_exempt(pool: &Arc<Pool>, address: AddressKey) -> Slot {
        match pool.admit(address, true) {
            Ok(a) => a.slot,
            Err(r) => panic!("refused: {r:?}"),
        }
    }

    #[test]
    fn a_dropped_slot_is_given_back() {
        let pool = Pool::new(
            PoolLimits {
                total: 1,
                per_address: 1,
            },
            Reasons::HTTP,
        );
        let a = admit(&pool, key(1)).slot;
        drop(a);
        assert!(pool.is_empty());
        assert!(admit(&pool, key(1)).evicted.is_none());
    }

    #[tokio::test]
    async fn an_evicted_holder_is_told() {
        let pool = Pool::new(
            PoolLimits {
                total: 1,
                per_address: 1,
            },
            Reasons::HTTP,
        );
        let a = admit(&pool, key(1)).slot;
        let holder = a.holder().clone();
        let waiting = tokio::spawn(async move { holder.evicted().await });
        tokio::task::yield_now().await;
        let _b = admit(&pool, key(2));
        tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .expect("told within 5 s")
            .expect("the task");
    }
}
