//! The queues Telegram's updates wait in: one per shard, chats spread over
//! them by id, so a chat's updates keep their order while chats go on
//! side by side; one task per shard hands them to [`super::inbound`], in
//! order, and tells whoever waits (the webhook's answer, the poller's
//! offset) when each settled. A chat whose update must be sent again holds
//! its later ones behind it ([`Held`]).

use super::inbound::handle;
use crate::state::App;
use teloxide::types::Update;
use tokio::sync::{mpsc, oneshot};

/// What became of an update: settled (handled, or a copy of one handled
/// already), so Telegram may forget it; or to be sent again, because
/// nothing of it was kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Settled {
    Done,
    Again,
}

/// An update waiting in a shard, and who waits to hear it settled.
pub struct Work {
    update: Update,
    settled: oneshot::Sender<Settled>,
}

/// The queues updates wait in, one per shard.
pub struct Queue {
    shards: Vec<mpsc::Sender<Work>>,
}

/// The other ends, taken by [`spawn_shards`].
pub struct Receivers(Vec<mpsc::Receiver<Work>>);

impl Queue {
    pub fn new(shards: usize, per_shard: usize) -> (Queue, Receivers) {
        let (senders, receivers) = (0..shards.max(1))
            .map(|_| mpsc::channel(per_shard.max(1)))
            .unzip();
        (Queue { shards: senders }, Receivers(receivers))
    }

    fn shard(&self, update: &Update) -> &mpsc::Sender<Work> {
        let key = update
            .chat()
            .map(|c| c.id.0.unsigned_abs())
            .or_else(|| update.from().map(|u| u.id.0))
            .unwrap_or(0);
        // Chat ids are spread well enough by their low bits.
        &self.shards[(key % self.shards.len() as u64) as usize]
    }

    /// Queues, waiting up to `wait` for room; what hears the update
    /// settled, or `None` when the shard stayed full (the webhook then
    /// answers so that Telegram sends the update again, rather than losing
    /// it).
    pub async fn offer_within(
        &self,
        update: Update,
        wait: std::time::Duration,
    ) -> Option<oneshot::Receiver<Settled>> {
        let (settled, heard) = oneshot::channel();
        let shard = self.shard(&update);
        shard
            .send_timeout(Work { update, settled }, wait)
            .await
            .ok()
            .map(|()| heard)
    }

    /// Queues, waiting for room (the poller can wait: Telegram keeps what
    /// it has not confirmed); what hears the update settled, or `None` once
    /// the relay is stopping.
    pub async fn feed(&self, update: Update) -> Option<oneshot::Receiver<Settled>> {
        let (settled, heard) = oneshot::channel();
        let shard = self.shard(&update);
        shard
            .send(Work { update, settled })
            .await
            .ok()
            .map(|()| heard)
    }
}

/// One task per shard, each taking its updates in order.
pub fn spawn_shards(app: App, receivers: Receivers, tasks: &mut tokio::task::JoinSet<()>) {
    for mut rx in receivers.0 {
        let app = app.clone();
        let hold = app
            .telegram
            .as_ref()
            .map_or(HOLD, |t| t.config.limits.give_up_after / 2);
        tasks.spawn(async move {
            let mut held = Held::new(hold);
            while let Some(Work { update, settled }) = rx.recv().await {
                let chat = update.chat().map(|c| c.id.0);
                let id = i64::from(update.id.0);
                if held.holds(chat, id) {
                    app.metrics.telegram("update_held_for_order");
                    let _ = settled.send(Settled::Again);
                    continue;
                }
                let outcome = handle(&app, update).await;
                held.note(chat, id, outcome);
                let _ = settled.send(outcome);
            }
        });
    }
}

/// How long a chat's later updates wait behind one that must be sent
/// again, at most, without a bot: half of `TelegramLimits::give_up_after`
/// otherwise (after which the poller may go past the one that does not
/// settle, and Telegram may give up on it).
const HOLD: std::time::Duration = std::time::Duration::from_secs(30);
/// Chats held at once in one shard, at most (past it the oldest holds go).
const MAX_HELD: usize = 4_096;

/// The chats of one shard whose update must be sent again, by that
/// update's id: their later updates are sent again too, unhandled, until
/// it settles, so that a chat's messages keep their order (found by the
/// attack round: a message that failed on the database was overtaken by
/// the next one, handled at once).
struct Held {
    chats: std::collections::HashMap<i64, (i64, std::time::Instant)>,
    hold: std::time::Duration,
}

impl Held {
    fn new(hold: std::time::Duration) -> Held {
        Held {
            chats: std::collections::HashMap::new(),
            hold,
        }
    }

    /// Whether update `id` of `chat` waits behind an earlier one.
    fn holds(&mut self, chat: Option<i64>, id: i64) -> bool {
        let Some(chat) = chat else {
            return false;
        };
        match self.chats.get(&chat) {
            Some(&(first, since)) if since.elapsed() < self.hold => id > first,
            Some(_) => {
                self.chats.remove(&chat);
                false
            }
            None => false,
        }
    }

    /// What became of update `id` of `chat`.
    fn note(&mut self, chat: Option<i64>, id: i64, outcome: Settled) {
        let Some(chat) = chat else {
            return;
        };
        match outcome {
            Settled::Again => {
                if self.chats.len() >= MAX_HELD {
                    let hold = self.hold;
                    self.chats.retain(|_, (_, since)| since.elapsed() < hold);
                }
                if self.chats.len() < MAX_HELD {
                    self.chats
                        .entry(chat)
                        .or_insert((id, std::time::Instant::now()));
                }
            }
            Settled::Done => {
                if self.chats.get(&chat).is_some_and(|&(first, _)| first == id) {
                    self.chats.remove(&chat);
                }
            }
        }
    }
}
