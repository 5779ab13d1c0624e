//! Skill bundles on arbitrary bytes, their manifest signed again with the
//! test release key (the fuzzer cannot sign), through the Warden's
//! `Skill::verify`: no panic; verified or refused with nothing written;
//! what verifies is exactly its signed manifest and files; a manifest
//! changed after signing is refused. The checks live in
//! warden/tests/fuzz_check/skill_bundle.rs, which the corpus replay shares.

#![no_main]

#[path = "../../warden/tests/fuzz_check/skill_bundle.rs"]
mod skill_bundle;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(broken) = skill_bundle::check(data).map(drop) {
        panic!("{broken}");
    }
});
