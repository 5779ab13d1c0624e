//! What the server sent and the relay has not yet acknowledged, bounded.
//!
//! A relay that never acknowledges (a hostile one, or an honest one whose
//! chat outbox stays full for a day) would otherwise grow the server
//! without bound, and have all of it sent again at each reconnect. The set
//! holds at most [`MAX_UNACKED`] messages and [`MAX_UNACKED_BYTES`] of
//! text; past either the oldest is dropped (the caller logs it). Pushing,
//! acknowledging and dropping cost a logarithm of the set, never a walk
//! through it.
//!
//! ```
//! use aromba_relay_proto::frame::Body;
//! use aromba_relay_proto::unacked::Unacked;
//! let mut set = Unacked::new(2, 1 << 20);
//! let send = |n: u128| Body::Send {
//!     id: uuid::Uuid::from_u128(n),
//!     text: "hi".into(),
//!     buttons: vec![],
//!     monospace: vec![],
//! };
//! assert_eq!(set.push(uuid::Uuid::from_u128(1), send(1)), 0);
//! assert_eq!(set.push(uuid::Uuid::from_u128(2), send(2)), 0);
//! assert_eq!(set.push(uuid::Uuid::from_u128(3), send(3)), 1, "the oldest went");
//! assert!(set.ack(uuid::Uuid::from_u128(3)));
//! assert_eq!(set.len(), 1);
//! ```

use crate::frame::Body;
use std::collections::{BTreeMap, HashMap};
use uuid::Uuid;

/// Messages kept for the relay to acknowledge, at most: a few screens of
/// chat, far more than an honest relay leaves unacknowledged for long.
pub const MAX_UNACKED: usize = 256;
/// Their text, at most (a message is at most 4,096 characters).
pub const MAX_UNACKED_BYTES: usize = 1 << 20;

/// The unacknowledged messages, oldest first.
#[derive(Debug)]
pub struct Unacked {
    by_order: BTreeMap<u64, (Uuid, Body, usize)>,
    order_of: HashMap<Uuid, u64>,
    next: u64,
    bytes: usize,
    max_count: usize,
    max_bytes: usize,
}

impl Default for Unacked {
    fn default() -> Unacked {
        Unacked::new(MAX_UNACKED, MAX_UNACKED_BYTES)
    }
}

impl Unacked {
    pub fn new(max_count: usize, max_bytes: usize) -> Unacked {
        Unacked {
            by_order: BTreeMap::new(),
            order_of: HashMap::new(),
            next: 0,
            bytes: 0,
            max_count: max_count.max(1),
            max_bytes,
        }
    }

    /// Keeps `body` under `id` until acknowledged; the number of the
    /// oldest messages dropped to make room. The same id again replaces
    /// the one kept.
    pub fn push(&mut self, id: Uuid, body: Body) -> usize {
        self.ack(id);
        let weight = weight(&body);
        self.by_order.insert(self.next, (id, body, weight));
        self.order_of.insert(id, self.next);
        self.next += 1;
        self.bytes += weight;
        let mut dropped = 0;
        // The newest is kept whatever it weighs: it is what the chat waits
        // for now.
        while self.by_order.len() > 1
            && (self.by_order.len() > self.max_count || self.bytes > self.max_bytes)
        {
            let Some((_, (old, _, w))) = self.by_order.pop_first() else {
                break;
            };
            self.order_of.remove(&old);
            self.bytes -= w;
            dropped += 1;
        }
        dropped
    }

    /// The relay has `id`: it need not be sent again. Whether it was kept.
    pub fn ack(&mut self, id: Uuid) -> bool {
        let Some(order) = self.order_of.remove(&id) else {
            return false;
        };
        if let Some((_, _, w)) = self.by_order.remove(&order) {
            self.bytes -= w;
        }
        true
    }

    /// Oldest first, to send again after a reconnect.
    pub fn iter(&self) -> impl Iterator<Item = &Body> {
        self.by_order.values().map(|(_, body, _)| body)
    }

    pub fn len(&self) -> usize {
        self.by_order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_order.is_empty()
    }

    /// The text kept, in bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// What a message costs to keep: its text and its buttons' (the rest is
/// small and fixed).
fn weight(body: &Body) -> usize {
    const FIXED: usize = 64;
    match body {
        Body::Send {
            text,
            buttons,
            monospace,
            ..
        } => {
            FIXED
                + text.len()
                + buttons
                    .iter()
                    .map(|b| b.id.len() + b.label.len() + FIXED)
                    .sum::<usize>()
                + monospace.len() * 16
        }
        Body::Edit { text, buttons, .. } => {
            FIXED
                + text.len()
                + buttons
                    .iter()
                    .map(|b| b.id.len() + b.label.len() + FIXED)
                    .sum::<usize>()
        }
        _ => FIXED,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(n: u128, text: &str) -> (Uuid, Body) {
        let id = Uuid::from_u128(n);
        (
            id,
            Body::Send {
                id,
                text: text.into(),
                buttons: vec![],
                monospace: vec![],
            },
        )
    }

    #[test]
    fn a_relay_that_never_acknowledges_leaves_at_most_the_cap() {
        let mut set = Unacked::default();
        let mut dropped = 0;
        for n in 0..60_000 {
            let (id, body) = send(n, "What I can do: …");
            dropped += set.push(id, body);
        }
        assert_eq!(set.len(), MAX_UNACKED);
        assert_eq!(dropped, 60_000 - MAX_UNACKED);
        // The newest are the ones kept, oldest first.
        let first = set.iter().next().map(|b| match b {
            Body::Send { id, .. } => *id,
            _ => Uuid::nil(),
        });
        assert_eq!(first, Some(Uuid::from_u128(60_000 - MAX_UNACKED as u128)));
    }

    #[test]
    fn long_messages_are_held_to_the_byte_cap() {
        let mut set = Unacked::default();
        let long = "é".repeat(4_000);
        for n in 0..1_000 {
            let (id, body) = send(n, &long);
            set.push(id, body);
        }
        assert!(set.bytes() <= MAX_UNACKED_BYTES, "{}", set.bytes());
        assert!(set.len() < MAX_UNACKED);
    }

    #[test]
    fn acknowledging_takes_out_only_that_message_and_its_bytes() {
        let mut set = Unacked::default();
        for n in 0..10 {
            let (id, body) = send(n, "abc");
            set.push(id, body);
        }
        let before = set.bytes();
        assert!(set.ack(Uuid::from_u128(4)));
        assert!(!set.ack(Uuid::from_u128(4)), "once");
        assert!(!set.ack(Uuid::from_u128(99)), "never kept");
        assert_eq!(set.len(), 9);
        assert!(set.bytes() < before);
        for n in (0..10).filter(|n| *n != 4) {
            assert!(set.ack(Uuid::from_u128(n)));
        }
        assert!(set.is_empty());
        assert_eq!(set.bytes(), 0);
    }

    #[test]
    fn the_newest_message_is_kept_whatever_it_weighs() {
        let mut set = Unacked::new(10, 100);
        let (id, body) = send(1, &"y".repeat(1_000));
        assert_eq!(set.push(id, body), 0);
        assert_eq!(set.len(), 1);
        let (id, body) = send(2, "z");
        assert_eq!(set.push(id, body), 1, "the heavy one makes room");
        assert_eq!(set.len(), 1);
    }
}
