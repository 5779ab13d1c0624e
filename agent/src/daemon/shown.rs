//! The messages with buttons the Worker sent, by message: their text, so
//! that a tap answers its message in place — the buttons taken
//! off and what was chosen said under the text ("Approved ✓ — running…",
//! "Cancelled") — and a second tap on a message answered already is known
//! for the double tap it is, without asking the Warden again.
//!
//! Kept in the Worker's home (a restart must not turn a person's second
//! tap into a question for the Warden), bounded in count and age.

use super::Daemon;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Messages remembered at most (the oldest go first).
const MAX_SHOWN: usize = 64;
/// A message is remembered as long as its buttons live at the relay.
const KEPT_FOR_S: i64 = 7 * 86_400;
const RECORD: &str = "shown.json";

/// A message with buttons, as it was sent.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Shown {
    pub message: Uuid,
    pub text: String,
    /// A button was tapped and acted on: the buttons are off.
    pub answered: bool,
    /// For a proposal to undo a run: the receipt that offered the undo.
    #[serde(default)]
    pub undo_of: Option<Uuid>,
    /// "Was that you?": its No stops Aromba (`/panic`).
    #[serde(default)]
    pub no_is_panic: bool,
    /// Approved and running: the Warden's answer is still to come.
    #[serde(default)]
    pub pending: bool,
    /// Approved in the Mini App: the `start_param` of its app button.
    #[serde(default)]
    pub app: Option<String>,
    at: i64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Record(Vec<Shown>);

fn now_s() -> i64 {
    jiff::Timestamp::now().as_second()
}

/// The record as kept, or empty.
pub fn load(daemon_home: &std::path::Path) -> Record {
    let mut record: Record = super::kept::read_in(daemon_home, RECORD).unwrap_or_default();
    let now = now_s();
    record.0.retain(|s| now - s.at < KEPT_FOR_S);
    record
}

fn with<T>(daemon: &Daemon, f: impl FnOnce(&mut Record) -> (T, bool)) -> T {
    let mut record = daemon.shown.lock().unwrap_or_else(|p| p.into_inner());
    let (out, changed) = f(&mut record);
    if changed && let Err(e) = super::kept::save(daemon, RECORD, &*record) {
        tracing::warn!(error = %e, "a message's buttons were not kept");
    }
    out
}

/// Remembers a message sent with buttons.
pub fn remember(daemon: &Daemon, message: Uuid, text: &str) {
    with(daemon, |record| {
        record.0.retain(|s| s.message != message);
        record.0.push(Shown {
            message,
            text: text.to_string(),
            answered: false,
            undo_of: None,
            no_is_panic: false,
            pending: false,
            app: None,
            at: now_s(),
        });
        let extra = record.0.len().saturating_sub(MAX_SHOWN);
        record.0.drain(..extra);
        ((), true)
    });
}

/// The message whose app button carries `start_param`.
pub fn with_app(daemon: &Daemon, start_param: &str) -> Option<Shown> {
    with(daemon, |record| {
        (
            record
                .0
                .iter()
                .find(|s| s.app.as_deref() == Some(start_param))
                .cloned(),
            false,
        )
    })
}

/// Whether an Undo of the run on the receipt `receipt` was proposed less
/// than `within_s` seconds ago and is not answered yet.
pub fn undo_open(daemon: &Daemon, receipt: Uuid, within_s: i64) -> bool {
    let now = now_s();
    with(daemon, |record| {
        (
            record
                .0
                .iter()
                .any(|s| s.undo_of == Some(receipt) && !s.answered && now - s.at < within_s),
            false,
        )
    })
}

/// The message `message`, when it is remembered.
pub fn get(daemon: &Daemon, message: Uuid) -> Option<Shown> {
    with(daemon, |record| {
        (
            record.0.iter().find(|s| s.message == message).cloned(),
            false,
        )
    })
}

/// Changes what is remembered of `message`; `None` when it is not.
pub fn update<T>(daemon: &Daemon, message: Uuid, f: impl FnOnce(&mut Shown) -> T) -> Option<T> {
    with(daemon, |record| {
        match record.0.iter_mut().find(|s| s.message == message) {
            Some(s) => (Some(f(s)), true),
            None => (None, false),
        }
    })
}

/// Marks `message` answered: `Some(true)` when it was open until now (of
/// two taps on one message, one finds it open), `None` when it is not
/// remembered.
pub fn answer(daemon: &Daemon, message: Uuid) -> Option<bool> {
    update(daemon, message, |s| {
        !std::mem::replace(&mut s.answered, true)
    })
}

/// `text` with `under` below it, the text cut so that both fit one message.
fn with_under(text: &str, under: &str) -> String {
    let room = super::MESSAGE_CHARS.saturating_sub(under.chars().count() + 3);
    let text = if text.chars().count() > room {
        let cut: String = text.chars().take(room).collect();
        format!("{cut}…")
    } else {
        text.to_string()
    };
    format!("{text}\n\n{under}")
}

/// Shows `message` with `outcome` under its text and no buttons (never
/// with buttons: the relay signs a tap over the text it shows, the Warden
/// over its own, so a message with live buttons keeps its text).
pub async fn close(daemon: &Daemon, message: Uuid, outcome: &str) {
    close_noting(daemon, message, outcome, false).await;
}

/// [`close`], noting that the outcome is still to come (the Warden is
/// running what was approved).
pub async fn close_pending(daemon: &Daemon, message: Uuid, under: &str) {
    close_noting(daemon, message, under, true).await;
}

async fn close_noting(daemon: &Daemon, message: Uuid, under: &str, pending: bool) {
    let text = update(daemon, message, |s| {
        s.pending = pending;
        s.text.clone()
    });
    if let Some(text) = text {
        daemon.edit(message, with_under(&text, under), vec![]).await;
    }
}

/// At start: a proposal left "running…" by a Worker that stopped before
/// the Warden answered says so, rather than "running…" for ever (found by
/// the attack round).
pub async fn settle_interrupted(daemon: &Daemon) {
    let pending: Vec<Uuid> = with(daemon, |record| {
        (
            record
                .0
                .iter()
                .filter(|s| s.pending)
                .map(|s| s.message)
                .collect(),
            false,
        )
    });
    for message in pending {
        close(daemon, message, aromba_words::approvals::INTERRUPTED).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outcome_under_a_long_text_still_fits_one_message() {
        let long = "x".repeat(super::super::MESSAGE_CHARS);
        let both = with_under(&long, "Cancelled.");
        assert!(both.chars().count() <= super::super::MESSAGE_CHARS);
        assert!(both.ends_with("…\n\nCancelled."));
        assert_eq!(with_under("Run it?", "Cancelled."), "Run it?\n\nCancelled.");
    }
}
