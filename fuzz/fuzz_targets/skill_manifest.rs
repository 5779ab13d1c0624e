//! A skill's manifest (`aromba_warden::skills::manifest::Manifest::parse`)
//! on arbitrary bytes: no panic; what parses renders back to the same
//! manifest, widens nothing over itself and grants the paths it lists.
//! The checks live in warden/tests/fuzz_check/skill_manifest.rs, which the
//! corpus replay shares.

#![no_main]

#[path = "../../warden/tests/fuzz_check/skill_manifest.rs"]
mod skill_manifest;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(broken) = skill_manifest::check(data) {
        panic!("{broken}");
    }
});
