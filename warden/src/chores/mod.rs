//! Chores: scripts with a strict header (`header.rs`), run in the cage by
//! `run.rs` under the rules of the specification. The embedded system
//! chores, approvals, receipts and undo are in progress.

#![forbid(unsafe_code)]

pub mod catalog;
pub mod header;
pub mod placeholders;
pub mod quarantine;
pub mod run;
pub mod snapshot;
pub mod tree;
