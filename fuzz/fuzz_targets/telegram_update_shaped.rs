//! Telegram updates at the relay's webhook, built field by field in
//! Telegram's shape (every kind the relay reads, values of any size, an
//! unknown field, a field given twice), so that every input reaches the
//! relay's parser as an update rather than as bytes it refuses: what the
//! parser takes says what the JSON says. The byte-level `telegram_update`
//! target mutates the JSON itself. The shapes are in
//! relay/tests/fuzz_check/update_shape.rs, the checks in update.rs; the
//! corpus replay shares both.

#![no_main]

#[path = "../../relay/tests/fuzz_check/update.rs"]
mod update;

#[path = "../../relay/tests/fuzz_check/update_shape.rs"]
mod update_shape;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|shaped: update_shape::ShapedUpdate| {
    if let Err(broken) = update::check(&shaped.render()) {
        panic!("{broken}");
    }
});
