//! The Bot API's answers on arbitrary bytes, through the relay's real
//! client against a Bot API on loopback: no panic; an error's words never
//! hold the token, are one line and bounded; a wait only when the answer
//! asks one; what a call returns is what the JSON says. The checks live in
//! relay/tests/fuzz_check/bot_answer.rs, which the corpus replay shares.

#![no_main]

#[path = "../../relay/tests/fuzz_check/bot_answer.rs"]
mod bot_answer;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(broken) = bot_answer::check(data) {
        panic!("{broken}");
    }
});
