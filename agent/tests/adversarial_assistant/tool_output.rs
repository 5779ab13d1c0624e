//! A tool's output against the loop. The attacker: whoever writes what a
//! read returns (a log line, a file name), and so what the model is sent.
//! What it tries: to close the data's delimiter early, from pieces of it,
//! and speak outside the data; or to have the result cut inside a
//! character. What holds: the delimiter cannot be rebuilt from pieces
//! inside the content, and a result is cut on a character. The injection
//! suites: `agent/tests/injection_suite.rs` and
//! `agent/tests/adversarial_assistant.rs`.

use aromba::assistant::conversation::{self, MAX_RESULT_CHARS, cap, wrap};

/// The delimiter cannot be rebuilt from pieces inside the content, and a
/// result of many multi-byte characters is cut on a character.
#[test]
fn the_delimiter_cannot_be_rebuilt_and_the_cap_cuts_on_characters() {
    let d = conversation::new_delimiter();
    let half = d.len() / 2;
    let nested = format!("{}{}{}", &d[..half], d, &d[half..]);
    let wrapped = wrap(&d, &format!("a\n{nested}\nb"));
    assert_eq!(wrapped.matches(&d).count(), 2, "{wrapped}");
    let big = "é".repeat(MAX_RESULT_CHARS + 10);
    let c = cap(&big, MAX_RESULT_CHARS);
    assert!(c.starts_with(&"é".repeat(MAX_RESULT_CHARS)));
}
