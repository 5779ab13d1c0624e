//! Ladder signals: events that say Aromba itself may be misbehaving. The
//! ladder that acts on them is `ladder.rs`; every part of the Warden
//! reports through this one type so nothing is lost.

#![forbid(unsafe_code)]

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Signal {
    /// A request matched a `[deny]` pattern.
    DenyListHit { pattern: &'static str },
    /// A request named a secret or fenced path.
    SecretPathRead { path: String, rule: String },
    /// More than the Worker's normal volume in a window: commands (reads,
    /// dry runs, approvals), requests of any kind, connections, refusals
    /// for a full connection pool, or journal files rotated away. `what`
    /// says which, in the plural.
    TooManyCommands {
        count: usize,
        window_s: u64,
        what: &'static str,
    },
    /// A process of the Worker's uid holds a TCP connection to an address
    /// the Worker's `network.toml` does not list.
    UnknownHost { remote: String },
    /// The cage saw a chore change files outside its `touches`.
    FilesOutsideTouches { chore: String, paths: Vec<String> },
    /// A baselined file (a binary, the policy, the fence list, a state
    /// record) no longer matches its baseline.
    IntegrityMismatch { what: String },
    /// A red action asked for without an approval the Warden could verify.
    RedActionWithoutApproval { action: String },
    /// A honeypot file was opened.
    HoneypotRead { path: String },
}

impl Signal {
    /// The signal's name in the journal.
    pub fn kind(&self) -> &'static str {
        match self {
            Signal::DenyListHit { .. } => "deny-list-hit",
            Signal::SecretPathRead { .. } => "secret-path-read",
            Signal::TooManyCommands { .. } => "too-many-commands",
            Signal::UnknownHost { .. } => "unknown-host",
            Signal::FilesOutsideTouches { .. } => "files-outside-touches",
            Signal::IntegrityMismatch { .. } => "integrity-mismatch",
            Signal::RedActionWithoutApproval { .. } => "red-action-without-approval",
            Signal::HoneypotRead { .. } => "honeypot-read",
        }
    }

    /// Honeypot reads, integrity failures and unknown hosts go straight to
    /// Cut; every other signal climbs one step.
    pub fn jumps_to_cut(&self) -> bool {
        matches!(
            self,
            Signal::HoneypotRead { .. }
                | Signal::IntegrityMismatch { .. }
                | Signal::UnknownHost { .. }
        )
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Signal::DenyListHit { pattern } => write!(f, "deny-list hit ({pattern})"),
            Signal::SecretPathRead { path, rule } => {
                write!(f, "read of a secret or fenced path {path} ({rule})")
            }
            Signal::TooManyCommands {
                count,
                window_s,
                what,
            } => {
                if *window_s >= 86_400 && window_s % 86_400 == 0 {
                    write!(f, "{count} {what} in {} days", window_s / 86_400)
                } else if window_s % 60 == 0 {
                    write!(f, "{count} {what} in {} minutes", window_s / 60)
                } else {
                    write!(f, "{count} {what} in {window_s} s")
                }
            }
            Signal::UnknownHost { remote } => write!(
                f,
                "outbound connection to {remote}, which network.toml does not list"
            ),
            Signal::FilesOutsideTouches { chore, paths } => {
                write!(
                    f,
                    "chore {chore} changed files outside its touches: {}",
                    paths.join(", ")
                )
            }
            Signal::IntegrityMismatch { what } => write!(f, "integrity: {what}"),
            Signal::RedActionWithoutApproval { action } => {
                write!(f, "red action {action} asked for without a fresh approval")
            }
            Signal::HoneypotRead { path } => write!(f, "honeypot {path} was opened"),
        }
    }
}
