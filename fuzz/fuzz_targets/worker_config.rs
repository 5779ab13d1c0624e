//! The Worker's `relay.toml` and `network.toml` (`aromba::config`) on
//! arbitrary text: no panic; what parses renders to text that parses to the
//! same configuration. The checks live in agent/tests/fuzz_check/config.rs,
//! which the corpus replay shares.

#![no_main]

#[path = "../../agent/tests/fuzz_check/config.rs"]
mod config;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(broken) = config::check(data) {
        panic!("{broken}");
    }
});
