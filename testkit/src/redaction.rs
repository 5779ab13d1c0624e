//! What the shape tests share: key lines of a key's width, and checks of
//! what a redaction removed and kept.

use aromba_redact::{Counts, redact};

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
