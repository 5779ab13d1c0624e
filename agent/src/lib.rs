//! `aromba`: the unprivileged Worker (user `aromba`) and the root
//! command-line verbs. The Worker never spawns a process: everything that
//! touches the system is a request to the Warden.
//!
//! The library holds all of it; `main.rs` is the command line that calls
//! into it, and the tests in `tests/` (the assistant's injection suite
//! among them) use it as the binary does.

#![forbid(unsafe_code)]

#[macro_use]
pub mod out;
pub mod assistant;
pub mod catalogue;
pub mod config;
pub mod daemon;
pub mod download;
pub mod health;
pub mod http;
pub mod lifecycle;
pub mod net;
pub mod pair;
pub mod paths;
pub mod register;
pub mod skills_cli;
pub mod terminal;
pub mod warden_client;
