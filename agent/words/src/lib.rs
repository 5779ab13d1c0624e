//! Every sentence the Worker says in the chat, in one place a reviewer
//! reads through.
//!
//! The Worker's code decides *when* to say something; this crate is
//! *what* it says. A fixed message is a `const`, one with numbers or names
//! in it a function that writes it from them — no I/O, no state, std only
//! (and `aromba-health`'s types for the health replies). A reader who has
//! never used a terminal is the one each message is written for: a verdict
//! first ("All good", "Not done: the PIN was wrong."), then what it means,
//! then the technical detail, and the way forward when there is one.
//!
//! Read in this order:
//! - [`chat`]: `/help`, unknown commands, the Worker's own budget, the
//!   Warden away or refusing, `/logs`, `/chores`, `/run`;
//! - [`approvals`]: a proposal answered in place, the PIN, a second tap;
//! - [`chores`]: the first week, dry runs, a run that did not happen, the
//!   scans for production and data;
//! - [`receipt`]: a run's receipt in plain words;
//! - [`health`]: `/status`, `/disk`, `/services`, `/updates`, the digest,
//!   the alerts;
//! - [`trust`]: `/trust`, `/prodmode`, the journal's anchor;
//! - [`updates`]: Aromba's own updates;
//! - [`assistant`]: the marker of the AI's messages, the words around its
//!   answers, `/ai`.
//!
//! Not here, on purpose: the Warden's words, which the Worker passes on as
//! they are — its proposals and buttons (signed over their exact text),
//! its refusals (`aromba_warden_proto::refusals`), the ladder's messages
//! and "Was that you?" (the Warden's `ladder`); the names of what the
//! first scan found (`aromba_health::scan::Finding::describe`, which are
//! also the reasons the Warden journals for prod mode); the words of an
//! error a sentence here carries after its verdict ("I could not ask the
//! Warden: " and the Warden client's own `ClientError`); and what the
//! model writes. The gate in `tests/catalogue.rs` holds the rest: every item
//! here is used by the Worker, and no sentence for the chat is written in
//! the Worker's chat code outside this crate.
//!
//! # Example
//!
//! ```
//! use aromba_words::{approvals, chat};
//!
//! assert_eq!(approvals::CANCELLED, "Cancelled. Nothing was done.");
//! assert_eq!(
//!     chat::no_such_chore("tidy"),
//!     "There is no chore called tidy. /chores lists them."
//! );
//! ```

#![forbid(unsafe_code)]

pub mod approvals;
pub mod assistant;
pub mod chat;
pub mod chores;
pub mod health;
pub mod receipt;
pub mod trust;
pub mod updates;

/// A clause said on its own: its first letter a capital, a full stop at
/// the end — so a thing said both ways is written once.
pub(crate) fn sentence(clause: &str) -> String {
    let mut chars = clause.chars();
    let mut out: String = chars
        .next()
        .map(|c| c.to_uppercase().collect())
        .unwrap_or_default();
    out.extend(chars);
    out.push('.');
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_clause_said_on_its_own_starts_with_a_capital_and_ends_with_a_full_stop() {
        assert_eq!(
            super::sentence("the clock is not synchronized"),
            "The clock is not synchronized."
        );
        assert_eq!(super::sentence("écrit"), "Écrit.");
        assert_eq!(super::sentence(""), ".");
    }
}
