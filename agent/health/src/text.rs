//! Checks every parser applies before it reads a line, and small helpers.

use crate::error::{ErrorKind, ParseError, Source};

/// No line of a real health read comes near this (a unit description or a
/// mount point is the longest); a longer one is garbage or an attack.
pub const MAX_LINE_BYTES: usize = 4096;

/// More lines than any health read has; the Warden caps output at 1 MiB.
pub const MAX_LINES: usize = 50_000;

/// Whether U+FFFD (what a lossy UTF-8 conversion leaves for bytes that are
/// not UTF-8) may appear. Free text (mount points, descriptions) may hold
/// such bytes; identifiers and numbers never do.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Replacement {
    Allowed,
    Refused,
}

/// The lines of `text`, numbered from 1, each checked: bounded length, no
/// control characters, and (when refused) no U+FFFD.
pub(crate) fn checked_lines(
    source: Source,
    text: &str,
    replacement: Replacement,
) -> Result<Vec<(usize, &str)>, ParseError> {
    let mut out = Vec::new();
    for (index, line) in text.split('\n').enumerate() {
        let number = index + 1;
        if number > MAX_LINES {
            return Err(ParseError::whole(
                source,
                ErrorKind::TooManyLines { limit: MAX_LINES },
            ));
        }
        if line.len() > MAX_LINE_BYTES {
            return Err(ParseError::at(
                source,
                number,
                ErrorKind::LineTooLong {
                    limit: MAX_LINE_BYTES,
                },
            ));
        }
        if line.chars().any(char::is_control) {
            return Err(ParseError::at(source, number, ErrorKind::ControlCharacter));
        }
        if replacement == Replacement::Refused && line.contains('\u{FFFD}') {
            return Err(ParseError::at(
                source,
                number,
                ErrorKind::ReplacementCharacter,
            ));
        }
        out.push((number, line));
    }
    // The newline that ends the last line does not start another.
    if out.last().is_some_and(|(_, line)| line.is_empty()) {
        out.pop();
    }
    Ok(out)
}

/// A plain decimal number: ASCII digits only (no sign, no spaces).
pub(crate) fn number(
    source: Source,
    line: usize,
    column: &'static str,
    text: &str,
) -> Result<u64, ParseError> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ParseError::at(source, line, ErrorKind::NotANumber(column)));
    }
    // Only digits remain, so the one way to fail is a value past u64.
    text.parse::<u64>()
        .map_err(|_| ParseError::at(source, line, ErrorKind::Overflow(column)))
}

/// Words separated by runs of spaces, each with the byte offset where it
/// starts and ends in the line.
pub(crate) fn words(line: &str) -> Vec<(usize, usize, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in line.char_indices() {
        if c == ' ' {
            if let Some(s) = start.take() {
                out.push((s, i, &line[s..i]));
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(s) = start {
        out.push((s, line.len(), &line[s..]));
    }
    out
}

/// A Debian package name as dpkg allows it: lowercase letters, digits,
/// `+`, `-` and `.`, starting with a letter or digit, at least two long.
pub(crate) fn is_package_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    bytes.len() >= 2
        && bytes.len() <= 256
        && bytes[0].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"+-.".contains(&b))
}
