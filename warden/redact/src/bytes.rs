//! Byte classes the rules share. Everything works on bytes: command output
//! need not be UTF-8.

/// `[A-Za-z0-9_-]`: the alphabet of most provider tokens (base64url).
pub(crate) fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// `[A-Za-z0-9_.-]`: what a variable, option or header name is made of.
pub(crate) fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.'
}

/// Spaces and tabs, never a line break: no rule reaches across lines but the
/// private-key block.
pub(crate) fn is_blank(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

pub(crate) fn skip_blanks(hay: &[u8], mut i: usize, cap: usize) -> usize {
    let limit = i.saturating_add(cap).min(hay.len());
    while i < limit && is_blank(hay[i]) {
        i += 1;
    }
    i
}

/// The end of the run of bytes satisfying `pred` that starts at `i`.
pub(crate) fn run_end(hay: &[u8], mut i: usize, pred: impl Fn(u8) -> bool) -> usize {
    while i < hay.len() && pred(hay[i]) {
        i += 1;
    }
    i
}

pub(crate) fn starts_with_ignore_case(hay: &[u8], at: usize, needle: &[u8]) -> bool {
    hay.get(at..at.saturating_add(needle.len()))
        .is_some_and(|s| s.eq_ignore_ascii_case(needle))
}

pub(crate) fn contains_ignore_case(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle))
}

/// The marker text itself: a value that is already a marker is left alone,
/// which makes redaction idempotent.
pub(crate) const MARKER_PREFIX: &[u8] = b"[redacted:";

pub(crate) fn is_marker_at(hay: &[u8], at: usize) -> bool {
    hay.get(at..).is_some_and(|s| s.starts_with(MARKER_PREFIX))
}
