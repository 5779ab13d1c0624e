//! Telegram's sending limits, kept on our side: about one message a second
//! per chat, thirty a second in all, and a pause when a 429 says so.
//!
//! The thirty a second are split in two lanes that never wait for each
//! other: paired chats (the servers' messages and the relay's answers to
//! them) and strangers (chats that are not paired: a wrong pairing code,
//! pairing busy). However many strangers write, they draw on their own
//! lane and cannot delay a paired chat's message.
//!
//! A 429 pauses what it was about: the chat, when the call was for one
//! chat, for at most [`MAX_CHAT_PAUSE`]. Only when several chats are told
//! to wait within a few seconds, or a call for no chat is, does the whole
//! bot pause, and never for more than [`MAX_BOT_PAUSE`]: then it tries
//! again (one `retry_after` of a day would otherwise mute every chat for a
//! day).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use tokio::time::{Duration, Instant};

/// The longest the whole bot pauses for one 429.
pub const MAX_BOT_PAUSE: Duration = Duration::from_secs(60);
/// The longest one chat pauses for one 429.
pub const MAX_CHAT_PAUSE: Duration = Duration::from_secs(600);
/// 429s for this many different chats…
const WIDE_AFTER: usize = 3;
/// …within this long pause the whole bot.
const WIDE_WITHIN: Duration = Duration::from_secs(10);

/// How often the relay writes.
#[derive(Clone, Debug)]
pub struct PaceLimits {
    /// Between two messages to one chat.
    pub per_chat: Duration,
    /// Between any two messages to paired chats…
    pub overall: Duration,
    /// …and, in a lane of their own, between two replies to chats that are
    /// not paired.
    pub strangers: Duration,
}

impl Default for PaceLimits {
    fn default() -> PaceLimits {
        // 25 a second for paired chats and 5 for strangers: Telegram's 30.
        PaceLimits {
            per_chat: Duration::from_millis(1_000),
            overall: Duration::from_millis(40),
            strangers: Duration::from_millis(200),
        }
    }
}

/// The next moment each chat, and each lane, may be written to.
pub struct Pace {
    limits: PaceLimits,
    state: Mutex<State>,
}

struct State {
    next_any: Instant,
    next_stranger: Instant,
    /// A bot-wide pause (a 429 that was about everyone) holds both lanes.
    paused_until: Instant,
    next_chat: HashMap<i64, Instant>,
    /// Recent 429s, by chat, to tell a chat's limit from the bot's.
    recent: VecDeque<(Instant, i64)>,
    /// `next_chat`'s size after its last pruning.
    pruned_at: usize,
}

/// Chats remembered before the ones whose turn has passed are forgotten.
const REMEMBERED: usize = 4_096;

/// What a call Telegram answered 429 was about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum About {
    /// A paired chat (or one the relay answers in the paired lane).
    Chat(i64),
    /// A reply to a chat that is not paired.
    Stranger(i64),
    /// No chat (`getMe`, `setWebhook`, …).
    Bot,
}

/// What a 429 paused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Paused {
    /// The chat it was about, for this long.
    pub chat: Option<Duration>,
    /// Every chat, for this long.
    pub bot: Option<Duration>,
    /// Whether Telegram asked for longer than the relay waits.
    pub capped: bool,
}

impl Pace {
    pub fn new(limits: PaceLimits) -> Pace {
        let now = Instant::now();
        Pace {
            limits,
            state: Mutex::new(State {
                next_any: now,
                next_stranger: now,
                paused_until: now,
                next_chat: HashMap::new(),
                recent: VecDeque::new(),
                pruned_at: 0,
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
        // Pruned again only once the map has doubled since the last
        // pruning: with thousands of chats told to wait (429s), pruning on
        // every call would scan them all each time.
        if state.next_chat.len() > REMEMBERED.max(state.pruned_at * 2) {
            state.next_chat.retain(|_, next| *next > now);
            state.pruned_at = state.next_chat.len();
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

    /// Waits for the paired lane's turn (and any bot-wide pause), taken
    /// only once a chat's own turn has come: one chat's future turn never
    /// holds back another chat.
    pub async fn overall(&self) {
        let at = {
            let mut state = self.state();
            let at = state.next_any.max(state.paused_until).max(Instant::now());
            state.next_any = at + self.limits.overall;
            at
        };
        tokio::time::sleep_until(at).await;
    }

    /// Takes the strangers' lane's next turn, unless it is more than
    /// `within` away (the reply is then dropped: strangers wait in no
    /// queue).
    pub fn reserve_stranger(&self, within: Duration) -> Option<Instant> {
        let mut state = self.state();
        let now = Instant::now();
        let at = state.next_stranger.max(state.paused_until).max(now);
        if at > now + within {
            return None;
        }
        state.next_stranger = at + self.limits.strangers;
        Some(at)
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

    /// The chats whose turn has not come yet.
    pub fn waiting_chats(&self) -> Vec<i64> {
        let state = self.state();
        let now = Instant::now();
        state
            .next_chat
            .iter()
            .filter(|(_, next)| **next > now)
            .map(|(chat, _)| *chat)
            .collect()
    }

    /// Telegram said 429 for a call about `about`, with this `retry_after`:
    /// pauses what it was about, capped. A 429 for a stranger's reply
    /// pauses that chat only and never counts toward a pause of the whole
    /// bot (found by the attack round: strangers' 429s paused the paired
    /// chats again and again).
    pub fn too_many_requests(&self, about: About, wait: Duration) -> Paused {
        let mut state = self.state();
        let now = Instant::now();
        let mut paused = Paused {
            chat: None,
            bot: None,
            capped: false,
        };
        let wide = match about {
            About::Chat(chat) | About::Stranger(chat) => {
                let chat_wait = wait.min(MAX_CHAT_PAUSE);
                paused.capped |= chat_wait < wait;
                let until = now + chat_wait;
                let next = state.next_chat.entry(chat).or_insert(until);
                *next = (*next).max(until);
                paused.chat = Some(chat_wait);
                if matches!(about, About::Stranger(_)) {
                    return paused;
                }
                while state
                    .recent
                    .front()
                    .is_some_and(|(at, _)| now.duration_since(*at) > WIDE_WITHIN)
                {
                    state.recent.pop_front();
                }
                state.recent.push_back((now, chat));
                let mut chats: Vec<i64> = state.recent.iter().map(|(_, c)| *c).collect();
                chats.sort_unstable();
                chats.dedup();
                chats.len() >= WIDE_AFTER
            }
            About::Bot => true,
        };
        if wide {
            let bot_wait = wait.min(MAX_BOT_PAUSE);
            paused.capped |= bot_wait < wait;
            state.paused_until = state.paused_until.max(now + bot_wait);
            paused.bot = Some(bot_wait);
        }
        paused
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
            ..PaceLimits::default()
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
    async fn a_429_for_one_chat_pauses_that_chat_and_no_other() {
        let pace = Pace::new(PaceLimits::default());
        let paused = pace.too_many_requests(About::Chat(7), Duration::from_secs(5));
        assert_eq!(paused.chat, Some(Duration::from_secs(5)));
        assert_eq!(paused.bot, None);
        assert!(!pace.ready(7));
        let start = Instant::now();
        pace.wait(8).await;
        assert!(start.elapsed() < Duration::from_secs(1));
        pace.wait(7).await;
        assert!(start.elapsed() >= Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn a_days_retry_after_pauses_the_bot_at_most_a_minute() {
        let pace = Pace::new(PaceLimits::default());
        let paused = pace.too_many_requests(About::Bot, Duration::from_secs(86_400));
        assert_eq!(paused.bot, Some(MAX_BOT_PAUSE));
        assert!(paused.capped);
        let start = Instant::now();
        pace.wait(9).await;
        assert!(start.elapsed() >= MAX_BOT_PAUSE);
        assert!(start.elapsed() < MAX_BOT_PAUSE + Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_days_retry_after_for_a_chat_pauses_it_at_most_ten_minutes() {
        let pace = Pace::new(PaceLimits::default());
        let paused = pace.too_many_requests(About::Chat(3), Duration::from_secs(86_400));
        assert_eq!(paused.chat, Some(MAX_CHAT_PAUSE));
        assert!(paused.capped);
        tokio::time::advance(MAX_CHAT_PAUSE + Duration::from_millis(1)).await;
        assert!(pace.ready(3));
    }

    #[tokio::test(start_paused = true)]
    async fn several_chats_told_to_wait_at_once_pause_the_whole_bot_briefly() {
        let pace = Pace::new(PaceLimits::default());
        assert_eq!(
            pace.too_many_requests(About::Chat(1), Duration::from_secs(3))
                .bot,
            None
        );
        assert_eq!(
            pace.too_many_requests(About::Chat(1), Duration::from_secs(3))
                .bot,
            None
        );
        assert_eq!(
            pace.too_many_requests(About::Chat(2), Duration::from_secs(3))
                .bot,
            None
        );
        let third = pace.too_many_requests(About::Chat(3), Duration::from_secs(3));
        assert_eq!(third.bot, Some(Duration::from_secs(3)));
    }

    #[tokio::test(start_paused = true)]
    async fn strangers_429s_never_pause_the_whole_bot() {
        let pace = Pace::new(PaceLimits::default());
        for chat in 0..10 {
            let paused = pace.too_many_requests(About::Stranger(chat), Duration::from_secs(30));
            assert_eq!(paused.bot, None);
        }
        let start = Instant::now();
        pace.wait(42).await;
        assert!(start.elapsed() < Duration::from_millis(100));
    }

    #[tokio::test(start_paused = true)]
    async fn strangers_have_their_own_lane_and_never_delay_a_paired_chat() {
        let pace = Pace::new(PaceLimits::default());
        let within = Duration::from_secs(5);
        // The strangers' lane fills up: 5 s of turns at 200 ms each.
        let taken = (0..1_000)
            .filter_map(|_| pace.reserve_stranger(within))
            .count();
        assert!(taken <= 26, "{taken} stranger turns within 5 s");
        assert!(pace.reserve_stranger(within).is_none());
        let start = Instant::now();
        pace.wait(42).await;
        assert!(start.elapsed() < Duration::from_millis(100));
    }
}
