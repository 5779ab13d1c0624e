//! The protocol between the relay and the Worker on each server.
//!
//! A server dials the relay, sends a [`frame::Hello`] with its token and a
//! fresh nonce, and gets back a welcome sealed under a session key both
//! sides derive from the token and both nonces ([`session`]). From then on
//! every frame is a [`frame::Body`] with a counter, a timestamp and an HMAC;
//! anything replayed, reordered, stale, forged or oversize is refused and
//! the connection closed.
//!
//! ```
//! use aromba_relay_proto::frame::{Body, Nonce};
//! use aromba_relay_proto::session::{derive, now_ms, Direction, Opener, Sealer};
//! use aromba_relay_proto::token::ServerToken;
//!
//! let token = ServerToken::generate();
//! let (server_nonce, relay_nonce) = (Nonce::random(), Nonce::random());
//! let key = derive(&token, &server_nonce, &relay_nonce, Direction::ServerToRelay);
//! let sealed = Sealer::new(key.clone()).seal(&Body::PairingRequest {}, now_ms());
//! assert_eq!(Opener::new(key).open(sealed.as_bytes(), now_ms()), Ok(Body::PairingRequest {}));
//! ```
//!
//! The Warden never links this crate.

#![forbid(unsafe_code)]

/// The reconnecting client, with the `client` feature (the Worker's).
#[cfg(feature = "client")]
pub mod client;
pub mod commands;
pub mod frame;
pub mod session;
pub mod token;
pub mod unacked;
