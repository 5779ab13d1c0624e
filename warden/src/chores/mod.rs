//! Chores: scripts with a strict header, run in the cage. Today: the header
//! parser; the runner, the embedded system chores and approvals follow.

#![forbid(unsafe_code)]

pub mod header;
