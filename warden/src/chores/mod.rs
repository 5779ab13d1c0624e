//! Chores: scripts with a strict header (`header.rs`), run in the cage by
//! `run.rs` under the rules of the specification, with the snapshot a red
//! run's Undo restores (`snapshot/`). The server drives a run phase by
//! phase (`server/chore_run.rs`).

#![forbid(unsafe_code)]

pub mod catalog;
pub mod header;
pub mod placeholders;
pub mod quarantine;
pub mod run;
pub mod snapshot;
pub mod tree;
