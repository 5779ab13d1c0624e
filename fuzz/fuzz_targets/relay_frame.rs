//! The relay's hello and sealed frames on arbitrary bytes: no panic; a
//! hello re-encodes to the same bytes; an opened frame seals again to the
//! same bytes; a body sealed with the right key opens exactly when it is a
//! valid `Body`. The checks live in relay/proto/tests/fuzz_check/mod.rs,
//! which the corpus replay shares.

#![no_main]

#[path = "../../relay/proto/tests/fuzz_check/mod.rs"]
mod fuzz_check;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(broken) = fuzz_check::check(data) {
        panic!("{broken}");
    }
});
