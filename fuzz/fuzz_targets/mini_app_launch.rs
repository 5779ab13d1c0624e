//! A Mini App's launch data on arbitrary bytes, at both ends that read it:
//! the relay (Telegram's HMAC with the bot token) and the Warden
//! (Telegram's Ed25519 signature). No panic; neither takes the bytes as
//! they come; each takes the same fields signed as Telegram signs them
//! exactly when they are well formed and then vouches for what they say,
//! bound to the bot and the time; and when both take a launch, they name
//! the same person. The checks live in relay/tests/fuzz_check/launch.rs
//! and warden/tests/fuzz_check/launch.rs, which the corpus replays share.

#![no_main]

#[path = "../../relay/tests/fuzz_check/launch.rs"]
mod relay_launch;
#[path = "../../warden/tests/fuzz_check/launch.rs"]
mod warden_launch;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let relay = relay_launch::check(data).unwrap_or_else(|broken| panic!("relay: {broken}"));
    let warden = warden_launch::check(data).unwrap_or_else(|broken| panic!("Warden: {broken}"));
    if let (Some(r), Some(w)) = (relay, warden)
        && u64::try_from(r).ok() != Some(w)
    {
        panic!("the relay took the launch for {r}, the Warden for {w}");
    }
});
