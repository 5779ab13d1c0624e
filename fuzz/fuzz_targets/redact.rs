//! The redactor on arbitrary bytes: no panic, idempotent, and no marker
//! that a second pass would judge again. Run from `fuzz/`:
//! `cargo fuzz run redact` (see fuzz/README.md).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(broken) = aromba_redact_corpus::invariants::check(data) {
        panic!("{broken}");
    }
});
