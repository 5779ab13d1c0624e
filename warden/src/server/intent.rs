//! Intent before action. Whatever changes the server or the Warden's state
//! on a request — a chore run, a chore action, an undo, a tap's approval,
//! an issued action id, a confirmed cap, the PIN, prod mode, `resume` — is
//! first a journal line saying what is about to happen and on whose
//! approval (`"phase":"intent"`). When that line cannot be written the act
//! is refused and nothing is done. After the act, a second line with the
//! same `kind` says how it went (`"phase":"outcome"`, `"intent_seq"` naming
//! the first), so an intent without an outcome in the journal is an act
//! that was cut short.

#![forbid(unsafe_code)]

use super::event::{Event, Outcome};
use super::{Shared, write};
use aromba_warden_proto::Response;

/// A journaled intent: the outcome is bound to it.
#[derive(Debug)]
pub(super) struct Intent {
    pub(super) seq: u64,
    kind: &'static str,
}

/// What the Warden answers when it cannot journal what it is about to do.
pub(super) fn not_journaled(kind: &str) -> Response {
    Response::Refused {
        reason: format!(
            "the journal cannot be written, so nothing was done ({kind}): the Warden acts only once the journal holds what it is about to do"
        ),
        journal_seq: None,
    }
}

/// An intent the journal could not take: nothing may be done.
#[derive(Debug)]
pub(super) struct Unjournaled(&'static str);

impl From<Unjournaled> for Response {
    fn from(u: Unjournaled) -> Response {
        not_journaled(u.0)
    }
}

/// Journals that `act` is about to happen — what, and on whose approval.
/// `Err` when the line could not be written: the caller answers with the
/// refusal it converts into.
pub(super) fn intend(shared: &Shared, act: Event<'_>) -> Result<Intent, Unjournaled> {
    let line = act.render().intent();
    let kind = line.kind;
    match write(shared, line) {
        Some(seq) => Ok(Intent { seq, kind }),
        None => Err(Unjournaled(kind)),
    }
}

impl Intent {
    /// The kind of the act.
    pub(super) fn kind(&self) -> &'static str {
        self.kind
    }

    /// Journals how the act went; `None` when the line could not be written
    /// (the act is done: the intent line already holds it).
    pub(super) fn outcome(&self, shared: &Shared, outcome: Outcome<'_>) -> Option<u64> {
        debug_assert!(
            outcome.of_kind().is_none_or(|k| k == self.kind),
            "a {:?} outcome for a {} intent",
            outcome.of_kind(),
            self.kind
        );
        write(shared, outcome.render(self.kind, self.seq))
    }
}

/// The answer when an act was done (its intent is journaled) but its
/// outcome could not be: what happened, and nothing the journal lacks.
pub(super) fn outcome_not_journaled(intent: &Intent, what: &str) -> Response {
    Response::Error {
        message: format!(
            "{what}; the journal holds that it was about to happen (seq {}) but could not take its outcome",
            intent.seq
        ),
    }
}
