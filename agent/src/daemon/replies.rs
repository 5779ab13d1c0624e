//! The chat's pace: how many deliveries the Worker answers, whatever they
//! ask. A person types a few messages a minute and taps twice at most; a
//! relay that delivers `/help` sixty thousand times would otherwise get
//! sixty thousand answers, each kept until acknowledged. A bucket of
//! [`BURST`] turns, one more every [`EVERY`]: past it a delivery is dropped,
//! and the chat is told once until the pace allows answers again.

use std::time::Duration;
use tokio::time::Instant;

/// Answers in a row before the pace holds.
pub const BURST: u32 = 20;
/// One more answer this often, after the burst.
pub const EVERY: Duration = Duration::from_secs(3);

/// What to do with a delivery.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Turn {
    /// Answer it.
    Answer,
    /// Drop it, and say that some were skipped (the first dropped since
    /// the last answer).
    FirstSkipped,
    /// Drop it silently.
    Skipped,
}

#[derive(Debug)]
pub struct Replies {
    turns: u32,
    refilled: Instant,
    skipping: bool,
}

impl Default for Replies {
    fn default() -> Replies {
        Replies::new(Instant::now())
    }
}

impl Replies {
    pub fn new(now: Instant) -> Replies {
        Replies {
            turns: BURST,
            refilled: now,
            skipping: false,
        }
    }

    /// Takes a turn at `now`.
    pub fn take(&mut self, now: Instant) -> Turn {
        let earned = now.saturating_duration_since(self.refilled).as_millis() / EVERY.as_millis();
        if earned > 0 {
            let earned = u32::try_from(earned).unwrap_or(u32::MAX);
            self.turns = self.turns.saturating_add(earned).min(BURST);
            self.refilled += EVERY * earned.min(BURST);
            if self.turns == BURST {
                self.refilled = now;
            }
        }
        if self.turns > 0 {
            self.turns -= 1;
            self.skipping = false;
            return Turn::Answer;
        }
        if self.skipping {
            Turn::Skipped
        } else {
            self.skipping = true;
            Turn::FirstSkipped
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_is_answered_then_one_skip_is_told_and_the_rest_are_silent() {
        let t = Instant::now();
        let mut r = Replies::new(t);
        for _ in 0..BURST {
            assert_eq!(r.take(t), Turn::Answer);
        }
        assert_eq!(r.take(t), Turn::FirstSkipped);
        for _ in 0..1_000 {
            assert_eq!(r.take(t), Turn::Skipped);
        }
        // A turn comes back with time, and a skip after it is told again.
        assert_eq!(r.take(t + EVERY), Turn::Answer);
        assert_eq!(r.take(t + EVERY), Turn::FirstSkipped);
    }

    #[test]
    fn sixty_thousand_deliveries_in_a_minute_get_a_few_dozen_answers() {
        let t = Instant::now();
        let mut r = Replies::new(t);
        let answered = (0..60_000u64)
            .filter(|i| r.take(t + Duration::from_millis(i / 1_000 * 1_000)) == Turn::Answer)
            .count() as u32;
        assert!(answered <= BURST + 60 / 3 + 1, "{answered}");
        assert!(answered >= BURST, "{answered}");
    }

    #[test]
    fn a_person_typing_now_and_then_is_never_held() {
        let t = Instant::now();
        let mut r = Replies::new(t);
        for i in 0..500u32 {
            // Two messages every six seconds: a busy person.
            assert_eq!(r.take(t + EVERY * (2 * i)), Turn::Answer);
            assert_eq!(r.take(t + EVERY * (2 * i)), Turn::Answer);
        }
    }
}
