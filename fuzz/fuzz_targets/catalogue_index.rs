//! The skill catalogue's index (`aromba::catalogue::parse`) on arbitrary
//! bytes: no panic; what parses renders back to the same index, free of
//! hidden characters; a refusal's words are one line, bounded, free of
//! them. The checks live in agent/tests/fuzz_check/catalogue.rs, which the
//! corpus replay shares.

#![no_main]

#[path = "../../agent/tests/fuzz_check/catalogue.rs"]
mod catalogue;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(broken) = catalogue::check(data) {
        panic!("{broken}");
    }
});
