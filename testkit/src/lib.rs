//! What the workspace's tests share, in one crate: stand-ins for the
//! model and the hosts the assistant's loop asks ([`model`]).
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

pub mod model;
