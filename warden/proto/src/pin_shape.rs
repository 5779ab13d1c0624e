//! What a PIN may be, said once: one word of 6 to 64 characters, with at
//! least one digit, no whitespace and no control character.
//!
//! The shape is narrow so that the Worker can tell, without asking anyone,
//! which chat messages could be the PIN: none of those ever reaches the
//! assistant's model, and the relay deletes one typed where none was asked
//! for. A wider PIN (any 6 to 64 characters) could not be told from a
//! question. The relay keeps the same rule in `aromba_relay_proto::frame`; a
//! test holds the two equal.

use crate::hidden::invisible_or_separator;

/// The fewest characters a PIN has.
pub const PIN_MIN_CHARS: usize = 6;
/// The most characters a PIN has.
pub const PIN_MAX_CHARS: usize = 64;

/// Wrong PINs in a row before PIN actions lock (the Warden counts; the
/// Worker says it to the person).
pub const PIN_MAX_FAILURES: u32 = 5;
/// How long PIN actions stay locked then, in seconds.
pub const PIN_LOCK_S: u64 = 15 * 60;

/// A PIN on its way to the Warden. It cannot be printed: it has no
/// `Display`, and its `Debug` is `[pin]`, so a request logged or journaled
/// whole (`{request:?}`) never carries it. Only the Warden's check reads it
/// ([`Pin::expose`]).
#[derive(Clone, PartialEq, Eq)]
pub struct Pin(String);

impl Pin {
    pub fn new(pin: impl Into<String>) -> Pin {
        Pin(pin.into())
    }

    /// The PIN itself, for the one check that needs it (and the frame that
    /// carries it).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Pin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[pin]")
    }
}

impl From<&str> for Pin {
    fn from(pin: &str) -> Pin {
        Pin::new(pin)
    }
}

impl From<String> for Pin {
    fn from(pin: String) -> Pin {
        Pin(pin)
    }
}

/// Whether `text`, trimmed, has the shape of a PIN.
pub fn could_be_pin(text: &str) -> bool {
    let text = text.trim();
    let n = text.chars().count();
    (PIN_MIN_CHARS..=PIN_MAX_CHARS).contains(&n)
        && !text.starts_with('/')
        && text.chars().any(|c| c.is_numeric())
        && !text
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || invisible_or_separator(c))
}

#[cfg(test)]
mod tests {
    use super::{Pin, could_be_pin};

    #[test]
    fn a_pin_never_prints() {
        let pin = Pin::new("428193");
        assert_eq!(format!("{pin:?}"), "[pin]");
        assert_eq!(format!("{:?}", Some(pin.clone())), "Some([pin])");
        assert_eq!(pin.expose(), "428193");
    }

    #[test]
    fn a_pin_is_one_word_with_a_digit() {
        assert!(could_be_pin("472913"));
        assert!(could_be_pin("Tr0ub4dor&3"));
        assert!(could_be_pin("  Tr0ub4dor&3\n"), "trimmed");
        assert!(!could_be_pin("correcthorse"), "no digit");
        assert!(!could_be_pin("my pin is 472913"), "several words");
        assert!(!could_be_pin("12345"), "too short");
        assert!(!could_be_pin(&"1".repeat(65)), "too long");
        assert!(!could_be_pin("/panic1"), "a command");
        assert!(!could_be_pin("why is disk 2 full?"));
        assert!(!could_be_pin("ab\u{202E}12cd"), "an invisible character");
    }
}

/// A skill setting's value on its way to the Warden, which may be a
/// secret: its `Debug` is `[value]`, so a request logged whole never
/// carries it.
#[derive(Clone, PartialEq, Eq)]
pub struct SettingValue(String);

impl SettingValue {
    pub fn new(value: impl Into<String>) -> SettingValue {
        SettingValue(value.into())
    }

    /// The value, for the Warden that keeps it (and the frame that
    /// carries it).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SettingValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[value]")
    }
}
