//! The relay's frame bodies built field by field (`arbitrary` over the real
//! `Body` type, every variant and field), so every input reaches the checks
//! past parsing: its JSON parses back to the same body; sealed, it opens
//! exactly when its content passes the checks, and re-encodes to the same
//! bytes. The byte-level `relay_frame` target mutates the JSON itself. The
//! checks live in relay/proto/tests/fuzz_check/mod.rs, which the corpus
//! replay shares.

#![no_main]

#[path = "../../relay/proto/tests/fuzz_check/mod.rs"]
mod fuzz_check;

use aromba_relay_proto::frame::Body;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|body: Body| {
    if let Err(broken) = fuzz_check::shaped(&body) {
        panic!("{broken}");
    }
});
