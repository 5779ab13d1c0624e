//! The model endpoints' event streams (OpenAI and Anthropic) on arbitrary
//! bytes: no panic; fed whole, a byte at a time, or in any pieces, a stream
//! gives the same reply or the same error, and the text shown so far is a
//! prefix of the final text. The checks live in
//! agent/tests/fuzz_check/sse.rs, which the corpus replay shares.

#![no_main]

#[path = "../../agent/tests/fuzz_check/sse.rs"]
mod sse;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(broken) = sse::check(data) {
        panic!("{broken}");
    }
});
