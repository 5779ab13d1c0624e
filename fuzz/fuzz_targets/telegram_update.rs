//! Telegram updates at the relay's webhook on arbitrary bytes: no panic;
//! what the relay's parser takes says what the JSON says (id, kind, chat,
//! sender, text, a tap's data, whether the tapped message is gone). The checks live in
//! relay/tests/fuzz_check/update.rs, which the corpus replay shares.

#![no_main]

#[path = "../../relay/tests/fuzz_check/update.rs"]
mod update;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(broken) = update::check(data) {
        panic!("{broken}");
    }
});
