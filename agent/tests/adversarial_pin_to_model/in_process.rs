//! The PIN reaching the model, at the unit level. The attacker: a model
//! that asks for the PIN, and so the person who types it in full-width
//! digits, split by a dot, a comma or an underscore, after a word, or with
//! a period. What it tries: to have the message go to the model's provider
//! as a question. What holds: each is taken for a PIN and kept from the
//! model. End to end: `agent/tests/adversarial_pin_to_model.rs`.

/// A PIN typed in full-width digits, or split with a dot, a comma or an
/// underscore, or after a word ("pin 472913"), is not "4 to 12 digits,
/// perhaps spaced": it goes to the third party's model as a question.
#[test]
fn a_pin_in_other_digits_or_separators_is_kept_from_the_model() {
    let mut sent = Vec::new();
    for pin in [
        "\u{ff14}\u{ff17}\u{ff12}\u{ff19}\u{ff11}\u{ff13}",
        "472.913",
        "472,913",
        "472_913",
        "pin 472913",
        "472913.",
    ] {
        if !aromba::daemon::ask::looks_like_pin(pin) {
            sent.push(pin);
        }
    }
    assert!(sent.is_empty(), "sent to the model: {sent:?}");
}
