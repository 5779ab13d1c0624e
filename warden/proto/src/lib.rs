//! The protocol between the Worker and the Warden, shared by both so the
//! Worker never links Warden code.
//!
//! A message is a frame: a 4-byte big-endian length, then that many bytes
//! of JSON. Requests are capped at [`MAX_REQUEST`] bytes, responses at
//! [`MAX_RESPONSE`]. Decoding is strict: an unknown `type`, an unknown or
//! missing field, or a field of the wrong type is an error, never a guess.
//! Command output travels as hex, so any bytes — names with newlines,
//! escape sequences, invalid UTF-8 — arrive exactly as the Warden sent them;
//! whoever prints them escapes them ([`printable`]).
//!
//! ```
//! use aromba_warden_proto::{Request, decode_request, encode_request};
//! let req = Request::Read { cmd: "df".into(), args: vec!["-h".into()] };
//! let bytes = encode_request(&req);
//! assert_eq!(decode_request(&bytes).unwrap(), req);
//! ```

#![forbid(unsafe_code)]

mod frame;
mod hex;
pub mod hidden;
mod message;
pub mod package;
mod pin_shape;
mod refusals;
pub mod rules;
pub mod socket_owner;

pub use frame::{FrameError, MAX_REQUEST, MAX_RESPONSE, read_frame, write_frame};
pub use hex::{decode_hex, encode_hex};
pub use message::{
    Button, ChoreInfo, LadderEvent, Lane, MAX_FENCES_ASKED, MAX_FINDING, MAX_FINDINGS, MAX_LISTED,
    ProtoError, ReadResult, Request, Response, SettingInfo, SkillInfo, Status, decode_request,
    decode_request_in, decode_response, encode_request, encode_request_in, encode_response,
    printable,
};
pub use pin_shape::{
    PIN_LOCK_S, PIN_MAX_CHARS, PIN_MAX_FAILURES, PIN_MIN_CHARS, Pin, SettingValue, could_be_pin,
};
pub use refusals::{DECLINED, PANIC_FROM_CHAT, SKILL_WIDENS, SLOWED, WRONG_PIN};

use std::path::{Path, PathBuf};

/// What turning prod mode off means: the Warden sends it with the proposal
/// for the chat, and `aromba prod-mode off` prints it, before the PIN is
/// asked for.
pub const PROD_MODE_OFF_CONSEQUENCES: &str = "Turning prod mode off: chores keep their own colors again (green ones run without asking), quarantined files are purged after 7 days, and the assistant may act with your approval instead of only proposing. It needs your PIN.";

/// The Worker's socket and the root-only control socket: under
/// `/run/aromba/`, or under `ROOT/run/` when the Warden runs with
/// `--root ROOT`.
pub fn socket_paths(root: Option<&Path>) -> (PathBuf, PathBuf) {
    let run = root.map_or_else(|| PathBuf::from("/run/aromba"), |r| r.join("run"));
    (run.join("worker.sock"), run.join("control.sock"))
}
