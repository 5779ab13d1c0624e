//! What the workspace's tests share, in one crate, so no test includes
//! another crate's files by path and no support module needs
//! `allow(dead_code)`:
//!
//! - [`relay`]: the real relay on a fresh database, with servers and bots
//!   to drive it; [`hostile_relay`]: a relay the test plays over the real
//!   protocol.
//! - [`serving`]: the one way a test serves a Warden in-process, which
//!   [`warden`] (installed, the test as its Worker, a clock the test moves,
//!   relay-signed taps) and [`worker`] (the `aromba` binary under real
//!   uids) build on; [`paired`]: a server paired end to end with the fake
//!   Bot API in the chat.
//! - [`release`]: releases signed with the test keys, and a server for
//!   them.
//! - [`model_fake`]: a model endpoint on loopback; [`model`]: in-process,
//!   a scripted model and the hosts the assistant's loop asks.
//! - [`redaction`]: the redactor's shape tests' key lines and checks;
//!   [`bench`](mod@bench): what the relay's benchmarks share; [`fuzz`]: a
//!   fuzz target's committed corpus, for its replay.
//!
//! A dev-dependency only: no shipped program links it (the `xtask` gate
//! `no_shipped_program_links_the_fake_bot_api_or_the_demo` checks).
//!
//! ```
//! use aromba::assistant::model::Usage;
//! use aromba_testkit::model::{Scripted, text};
//!
//! let model = Scripted::new(vec![text("All is well.", Usage::default())]);
//! assert!(model.seen.lock().unwrap().is_empty());
//! ```

#![forbid(unsafe_code)]

pub mod bench;
pub mod catalogue;
pub mod fuzz;
pub mod hostile_relay;
pub mod logs;
pub mod model;
pub mod model_fake;
pub mod paired;
pub mod postgres;
pub mod redaction;
pub mod relay;
pub mod release;
pub mod serving;
pub mod skills;
pub mod taken_over;
pub mod telegram;
pub mod updates;
pub mod warden;
pub mod worker;
