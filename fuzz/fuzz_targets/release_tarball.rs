//! See release/tests/fuzz_check/mod.rs (`tarball`), which the corpus
//! replay in release/tests/fuzz_corpus.rs shares: no panic, and the
//! properties stated there.

#![no_main]

#[allow(dead_code)]
#[path = "../../release/tests/fuzz_check/mod.rs"]
mod fuzz_check;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(broken) = fuzz_check::tarball(data) {
        panic!("{broken}");
    }
});
