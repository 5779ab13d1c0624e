//! Telegram's sending limits, kept on our side: about one message a second
//! per chat, thirty a second in all, and a pause for as long as a 429 says.

use std::collections::HashMap;
use std::sync::Mutex;
use tokio::time::{Duration, Instant};

/// How often the relay writes.
#[derive(Clone, Debug)]
pub struct PaceLimits {
    /// Between two messages to one chat.
    pub per_chat: Duration,
    /// Between any two messages.
    pub overall: Duration,
}

impl Default for PaceLimits {
    fn default() -> PaceLimits {
        PaceLimits {
            per_chat: Duration::from_millis(1_000),
            overall: Duration::from_millis(34),
        }
    }
}

/// The next moment each chat, and the bot as a whole, may be written to.
pub struct Pace {
    limits: PaceLimits,
    state: Mutex<State>,
}

struct State {
    next_any: Instant,
    next_chat: HashMap<i64, Instant>,
}

/// Chats remembered before the ones whose turn has passed are forgotten.
const REMEMBERED: usize = 4_096;

impl Pace {
    pub fn new(limits: PaceLimits) -> Pace {
        let now = Instant::now();
        Pace {
            limits,
            state: Mutex::new(State {
                next_any: now,
                next_chat: HashMap::new(),
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes `chat`'s next turn, without waiting: the moment it may be
    /// written to. Turns are handed out in call order, so replies reserved
    /// one after another go out in that order.
    pub fn reserve(&self, chat: i64) -> Instant {
        let mut state = self.state();
        let now = Instant::now();
        if state.next_chat.len() > REMEMBERED {
            state.next_chat.retain(|_, next| *next > now);
        }
        let at = state.next_chat.get(&chat).copied().unwrap_or(now).max(now);
        state.next_chat.insert(chat, at + self.limits.per_chat);
        at
    }

    /// Takes `n` turns in a row for `chat` (the parts of one message, with
    /// nothing of the relay's in between), unless the first would come
    /// later than `within` from now: then nothing is taken, and the caller
    /// tries later instead of holding a place in line.
    pub fn reserve_within(&self, chat: i64, n: usize, within: Duration) -> Option<Vec<Instant>> {
        let mut state = self.state();
        let now = Instant::now();
        let first = state.next_chat.get(&chat).copied().unwrap_or(now).max(now);
        if first > now + within {
            return None;
        }
        let turns: Vec<Instant> = (0..n.max(1))
            .map(|i| first + self.limits.per_chat * u32::try_from(i).unwrap_or(u32::MAX))
            .collect();
        let next = turns.last().copied().unwrap_or(first) + self.limits.per_chat;
        state.next_chat.insert(chat, next);
        Some(turns)
    }

    /// Waits for the bot-wide turn (and any 429 pause), taken only once a
    /// chat's own turn has come: one chat's future turn never holds back
    /// another chat.
    pub async fn overall(&self) {
        let at = {
            let mut state = self.state();
            let at = state.next_any.max(Instant::now());
            state.next_any = at + self.limits.overall;
            at
        };
        tokio::time::sleep_until(at).await;
    }

    /// Takes the next turn for `chat` and waits for it.
    pub async fn wait(&self, chat: i64) {
        let at = self.reserve(chat);
        tokio::time::sleep_until(at).await;
        self.overall().await;
    }

    /// Whether `chat` could be written to now (its turn has come).
    pub fn ready(&self, chat: i64) -> bool {
        let state = self.state();
        state
            .next_chat
            .get(&chat)
            .is_none_or(|next| *next <= Instant::now())
    }

    /// Telegram said 429: nothing goes out for `wait`.
    pub fn pause(&self, wait: Duration) {
        let mut state = self.state();
        let until = Instant::now() + wait;
        if until > state.next_any {
            state.next_any = until;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn one_chat_waits_a_second_between_messages_and_others_do_not() {
        let pace = Pace::new(PaceLimits::default());
        let start = Instant::now();
        pace.wait(1).await;
        pace.wait(2).await;
        assert!(start.elapsed() < Duration::from_millis(100));
        assert!(!pace.ready(1));
        pace.wait(1).await;
        assert!(start.elapsed() >= Duration::from_millis(1_000));
    }

    #[tokio::test(start_paused = true)]
    async fn a_chats_future_turn_does_not_hold_back_another_chat() {
        let pace = Pace::new(PaceLimits {
            per_chat: Duration::from_secs(3_600),
            overall: Duration::from_millis(34),
        });
        pace.wait(1).await;
        let later = pace.reserve(1);
        assert!(later > Instant::now() + Duration::from_secs(3_000));
        let start = Instant::now();
        pace.wait(2).await;
        assert!(start.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn a_chat_too_far_behind_gets_no_turn() {
        let pace = Pace::new(PaceLimits::default());
        let within = Duration::from_secs(3);
        assert!(pace.reserve_within(9, 3, within).is_some());
        // Three turns taken: the next is about 3 s away, then past 3 s.
        assert!(pace.reserve_within(9, 1, within).is_some());
        assert!(pace.reserve_within(9, 1, within).is_none());
        assert!(pace.reserve_within(10, 1, within).is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_pause_holds_every_chat() {
        let pace = Pace::new(PaceLimits::default());
        pace.pause(Duration::from_secs(5));
        let start = Instant::now();
        pace.wait(7).await;
        assert!(start.elapsed() >= Duration::from_secs(5));
    }
}
