//! The assistant (being built, issue 17): answers a question from the
//! server's own numbers and logs through typed, read-only tools
//! ([`tools`]), each one request the Warden judges; it proposes, never
//! executes.

pub mod conversation;
pub mod model;
pub mod tools;
