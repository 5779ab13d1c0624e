//! Ladder signals: events that say Aromba itself may be misbehaving. The
//! ladder that acts on them is its own module (a later capability); every
//! part of the Warden reports through this one type so nothing is lost.

#![forbid(unsafe_code)]

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Signal {
    /// A request matched a `[deny]` pattern.
    DenyListHit { pattern: &'static str },
    /// A request named a secret or fenced path.
    SecretPathRead { path: String, rule: String },
}

impl Signal {
    /// The signal's name in the journal.
    pub fn kind(&self) -> &'static str {
        match self {
            Signal::DenyListHit { .. } => "deny-list-hit",
            Signal::SecretPathRead { .. } => "secret-path-read",
        }
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Signal::DenyListHit { pattern } => write!(f, "deny-list hit ({pattern})"),
            Signal::SecretPathRead { path, rule } => {
                write!(f, "read of a secret or fenced path {path} ({rule})")
            }
        }
    }
}
