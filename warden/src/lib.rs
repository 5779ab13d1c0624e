//! The Warden: the one root process of Aromba, and the only one that
//! executes anything.
//!
//! It links little on purpose (see `warden/DEPENDENCIES.md`): no async
//! runtime, no HTTP, no database, no configuration parser. ARCHITECTURE.md
//! maps its modules.
//!
//! ```
//! use aromba_warden::cli::{Command, parse};
//! let cmd = parse(["redact"].iter().map(|s| s.to_string())).unwrap();
//! assert_eq!(cmd, Command::Redact);
//! ```

// `unsafe` is denied everywhere and allowed in `system` alone; every other
// module says #![forbid(unsafe_code)] itself (a test checks).
#![deny(unsafe_code)]
// Nothing the Warden is given may panic it: no unwrap or expect outside
// tests (an error is a value; see ARCHITECTURE.md, "Panics").
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod approvals;
pub mod atomic_file;
pub mod cage;
pub mod chores;
pub mod cli;
pub mod egress;
pub mod exec;
pub mod fences;
pub mod init_data;
pub mod install;
pub mod integrity;
pub mod journal;
pub mod ladder;
pub mod layout;
pub mod netwatch;
pub mod pin;
pub mod policy;
pub mod redact_cmd;
pub mod seal;
pub mod server;
pub mod signal;
pub mod skills;
pub mod state;
pub mod system;
pub mod telegram;
pub mod update;
pub mod users;
pub mod worker_dirs;
pub mod writers;
