//! Private-key blocks: PEM (PKCS#1, SEC1, PKCS#8, encrypted PKCS#8), OpenSSH,
//! PGP, and the SSH2 (RFC 4716) private-key form.
//!
//! A block is removed from its BEGIN line through the end of its END line.
//! A block with no END line is removed through the end of the input: a cut
//! key must never survive, and a "next blank line" rule would leave the body
//! of PGP and legacy encrypted PEM keys, whose armor headers end in a blank
//! line. Lines prefixed by a logger, or a key inside a JSON string with `\n`
//! escapes, are removed the same way because nothing here depends on lines.

use crate::Class;
use crate::tokens::Found;
use memchr::memmem;

const LABEL_CAP: usize = 96;

/// At a `-----BEGIN` (five dashes) trigger.
pub(crate) fn pem_at(hay: &[u8], at: usize) -> Option<Found> {
    if !hay[at..].starts_with(b"-----BEGIN ") {
        return None;
    }
    let label_start = at + b"-----BEGIN ".len();
    let label_end = label_end(hay, label_start, b"-----")?;
    if !is_private_label(&hay[label_start..label_end]) {
        // Certificates and public keys are not secrets.
        return None;
    }
    let end = block_end(hay, label_end, b"-----END ", b"-----");
    Some(Found {
        start: at,
        end,
        class: Class::PrivateKey,
    })
}

/// At a `---- BEGIN SSH2` trigger (RFC 4716 armor, used by some tools for
/// private keys too).
pub(crate) fn ssh2_at(hay: &[u8], at: usize) -> Option<Found> {
    if !hay[at..].starts_with(b"---- BEGIN SSH2 ") {
        return None;
    }
    let label_start = at + b"---- BEGIN SSH2 ".len();
    let label_end = label_end(hay, label_start, b"----")?;
    if !is_private_label(&hay[label_start..label_end]) {
        return None;
    }
    let end = block_end(hay, label_end, b"---- END SSH2 ", b"----");
    Some(Found {
        start: at,
        end,
        class: Class::PrivateKey,
    })
}

/// Armor labels are upper-case words (`RSA PRIVATE KEY`, `PGP PRIVATE KEY
/// BLOCK`); anything else between the dashes is not a key's BEGIN line.
fn is_private_label(label: &[u8]) -> bool {
    label
        .iter()
        .all(|&b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b' ')
        && memmem::find(label, b"PRIVATE").is_some()
}

/// Where the label of a BEGIN line ends: at the closing dashes, or at the end
/// of the line or input when the line was cut (a cut label still counts).
fn label_end(hay: &[u8], start: usize, closing: &[u8]) -> Option<usize> {
    let limit = start.saturating_add(LABEL_CAP).min(hay.len());
    let window = &hay[start..limit];
    let line = memchr::memchr2(b'\n', b'\r', window).unwrap_or(window.len());
    let window = &window[..line];
    Some(start + memmem::find(window, closing).unwrap_or(window.len()))
}

/// The end of the END line's closing dashes, or the end of the input.
fn block_end(hay: &[u8], from: usize, end_marker: &[u8], closing: &[u8]) -> usize {
    let Some(rel) = memmem::find(&hay[from..], end_marker) else {
        return hay.len();
    };
    let end_label = from + rel + end_marker.len();
    let limit = end_label.saturating_add(LABEL_CAP).min(hay.len());
    let window = &hay[end_label..limit];
    let line = memchr::memchr2(b'\n', b'\r', window).unwrap_or(window.len());
    match memmem::find(&window[..line], closing) {
        Some(i) => end_label + i + closing.len(),
        None => end_label + line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_a_certificate() {
        let hay = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        assert_eq!(pem_at(hay, 0), None);
    }

    #[test]
    fn removes_a_block_through_its_end_line() {
        let hay = b"x\n-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\ny";
        let found = pem_at(hay, 2).unwrap();
        assert_eq!(&hay[found.end..], b"\ny");
    }

    #[test]
    fn removes_a_block_without_end_line_to_the_end() {
        let hay = b"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n\nmore";
        assert_eq!(pem_at(hay, 0).unwrap().end, hay.len());
    }
}
