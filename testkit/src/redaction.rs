//! What the shape tests share: key lines of a key's width, and checks of
//! what a redaction removed and kept.

use aromba_redact::{Counts, redact, redact_cut};

pub const L1: &str = "MIIEpAIBAAKCAQEAu7x8Qd2Vh5cZ3mFq9nYk0wPzL1sJt4RbXe6gHa2KdUoNcMvW";
pub const L2: &str = "Yp0qSx3Tz7AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcdefghijklmnopqr";
pub const L3: &str = "h7Kq2LmN9pQrStUvWxYzAbCdEfGhIjKl0123456789MnOpQrStUvWxYzAbCd+/Aa";

/// The redacted text and its counts.
pub fn out(input: &str) -> (String, Counts) {
    let r = redact(input.as_bytes());
    (String::from_utf8(r.text).expect("UTF-8"), r.counts)
}

/// Redacts `input`: every one of `secrets` is gone, every one of `kept` is
/// still there.
pub fn gone(input: &str, secrets: &[&str], kept: &[&str]) -> Counts {
    let (text, counts) = out(input);
    for s in secrets {
        assert!(!text.contains(s), "{s:?} survived in {text:?}");
    }
    for k in kept {
        assert!(text.contains(k), "{k:?} was destroyed in {text:?}");
    }
    counts
}

/// Well-formed keys of each family (test keys: made up, never issued),
/// for the redactor's tests of keys glued together.
pub mod keys {
    pub const GOOGLE: &str = "AIzaSyDq3xV8bN2kLmP0rT5wYzA1cE4gH7jK9oQ";
    pub const OPENAI: &str = "sk-proj-Xq9Lm2Vb7Nc4Rt8Wy1Za3Kd6Hf0Jg5Ps2Eu7Io4TbQw3Er5Ty";
    pub const ANTHROPIC: &str =
        "sk-ant-api03-Zx8Cv7Bn6Mm5Kk4Jj3Hh2Gg1Ff0Dd9Ss8Aa7Qq6Ww5Ee4Rr3Tt2Yy1Uu0IiOoPp-AbCdEfAA";
    pub const GITHUB: &str = "ghp_R4nd0mG1tHubT0k3nW1thThirtySixChars";
    pub const AWS: &str = "AKIAIOSFODNN7EXAMPLE";
    pub const AWS2: &str = "AKIAIOSFODNN7EXAMPLF";
    pub const SLACK: &str = "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx";
    pub const JWT: &str = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
    pub const TELEGRAM: &str = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1";
    pub const TELEGRAM_SECRET: &str = "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1";
    pub const YA29: &str = "ya29.a0AfH6SMBx7Yk2Qw3Er4Ty5Ui6Op7As8Df9Gh0Jk1Lz2Xc3Vb4Nm";
    pub const GOCSPX: &str = "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t";
    pub const REFRESH: &str = "1//09gKx7Yz2Qw3Er4Ty5Ui6Op7As8Df9Gh0Jk1Lz2Xc3";
}

/// A deterministic generator (xorshift), so that a failure replays.
pub struct Rng(pub u64);

impl Rng {
    pub fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }

    pub fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len())]
    }
}

/// A short excerpt for a failure message: never a whole long input.
pub fn short(s: &str) -> String {
    if s.len() <= 160 {
        s.to_owned()
    } else {
        format!("{}…({} bytes)", &s[..s.floor_char_boundary(160)], s.len())
    }
}

/// One pass leaves nothing for a second, for `redact` and for what
/// `redact_cut` writes: the same text, nothing counted.
pub fn once_is_enough(input: &str) {
    for (what, first) in [
        ("output", redact(input.as_bytes())),
        ("cut output", redact_cut(input.as_bytes())),
    ] {
        let second = redact(&first.text);
        assert_eq!(
            String::from_utf8_lossy(&second.text),
            String::from_utf8_lossy(&first.text),
            "a second pass changed the {what} of {}",
            short(input)
        );
        assert_eq!(
            second.counts.total(),
            0,
            "a second pass removed something from the {what} of {}",
            short(input)
        );
    }
}
