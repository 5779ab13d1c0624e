//! Named secrets: `NAME=value`, `NAME = value`, `NAME: value`,
//! `"NAME": "value"`, `--name=value`, `--name value`, the bare `NAME value`
//! when the value carries a digit, and the credential after `Bearer` or
//! `Basic`.
//!
//! NAME is a run of `[A-Za-z0-9_.-]` that contains, in any case, one of the
//! keywords `key`, `token`, `secret`, `password`, `passwd`, `pwd`,
//! `credential`, `bearer` or `auth`; the scanner finds the keyword and this
//! module grows the name around it. A value is removed when it is 12 bytes or
//! longer, is not already a marker, is not a path and is not a URL (a URL's
//! password and query parameters are judged by their own rules). A value that
//! is a known provider token is counted under that token's class.

use crate::Class;
use crate::bytes::{
    MARKER_PREFIX, contains_ignore_case, is_blank, is_marker_at, is_name_byte, run_end,
    skip_blanks, starts_with_ignore_case,
};
use crate::tokens::{Found, class_of_value};

/// A name longer than this is not a name but part of a blob (base64 and such).
const NAME_CAP: usize = 64;
const MIN_VALUE: usize = 12;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    /// `NAME=value`, `NAME: value`, `"NAME": "value"`, `--name=value`.
    Operator,
    /// `--name value`, `-name value`.
    OptionSpace,
    /// `NAME value`: prose shares this shape, so the value must carry a digit.
    Bare,
}

/// At a keyword match `[kw_start, kw_end)`.
/// Nothing before `floor` is read: it was already replaced.
pub(crate) fn assignment_at(
    hay: &[u8],
    kw_start: usize,
    kw_end: usize,
    floor: usize,
) -> Option<Found> {
    let mut name_start = kw_start;
    while name_start > floor && is_name_byte(hay[name_start - 1]) {
        if kw_start - name_start >= NAME_CAP {
            return None;
        }
        name_start -= 1;
    }
    let mut name_end = kw_end;
    while name_end < hay.len() && is_name_byte(hay[name_end]) {
        if name_end - kw_end >= NAME_CAP {
            return None;
        }
        name_end += 1;
    }
    let name = &hay[name_start..name_end];
    let dashes = name.iter().take_while(|&&b| b == b'-').count();
    let bare_name = &name[dashes..];

    if dashes == 0
        && (bare_name.eq_ignore_ascii_case(b"bearer") || bare_name.eq_ignore_ascii_case(b"basic"))
    {
        return credential_after_scheme(hay, name_end, false);
    }

    let (form, value_at) = operator_after_name(hay, name_end, dashes > 0)?;
    let value = value_span(hay, value_at, form)?;
    judge_value(hay, value, name, form)
}

/// Finds what follows the name: an operator and the value's start, or the
/// space-separated value of an option or a bare name.
fn operator_after_name(hay: &[u8], name_end: usize, is_option: bool) -> Option<(Form, usize)> {
    let mut i = name_end;
    let mut quoted_name = false;
    if let Some(&q) = hay.get(i)
        && (q == b'"' || q == b'\'')
    {
        i += 1;
        quoted_name = true;
    } else if hay[i..].starts_with(b"\\\"") {
        i += 2;
        quoted_name = true;
    }
    let j = skip_blanks(hay, i, 16);
    let op_len = match hay.get(j..) {
        Some([b':', b'=', ..]) | Some([b'=', b'>', ..]) => 2,
        Some([b'=', b'=', ..]) => return None,
        Some([b'=', ..]) => 1,
        Some([b':', b'/', b'/', ..]) => return None,
        Some([b':', b':', ..]) => return None,
        Some([b':', ..]) => 1,
        _ => 0,
    };
    if op_len > 0 {
        return Some((Form::Operator, skip_blanks(hay, j + op_len, 16)));
    }
    if quoted_name || j == i || j >= hay.len() {
        return None;
    }
    Some((
        if is_option {
            Form::OptionSpace
        } else {
            Form::Bare
        },
        j,
    ))
}

/// A value's bytes, without its quotes.
#[derive(Clone, Copy)]
struct Value {
    start: usize,
    end: usize,
    quoted: bool,
}

fn value_span(hay: &[u8], at: usize, form: Form) -> Option<Value> {
    let first = *hay.get(at)?;
    if is_marker_at(hay, at) {
        return None;
    }
    if first == b'"' || first == b'\'' {
        let start = at + 1;
        if is_marker_at(hay, start) {
            return None;
        }
        return Some(Value {
            start,
            end: quoted_end(hay, start, first),
            quoted: true,
        });
    }
    if hay[at..].starts_with(b"\\\"") {
        let start = at + 2;
        if is_marker_at(hay, start) {
            return None;
        }
        let close = memchr::memmem::find(&hay[start..], b"\\\"").map_or(hay.len(), |i| start + i);
        let window = &hay[start..close];
        let line = memchr::memchr2(b'\n', b'\r', window).unwrap_or(window.len());
        let marker = memchr::memmem::find(&window[..line], MARKER_PREFIX).unwrap_or(line);
        return Some(Value {
            start,
            end: start + marker,
            quoted: true,
        });
    }
    if form != Form::Operator && first == b'-' {
        // The next option, not a value.
        return None;
    }
    let mut end = at;
    while end < hay.len() && !ends_unquoted(hay, end) {
        end += 1;
    }
    if form == Form::Bare {
        while end > at && matches!(hay[end - 1], b':' | b'.' | b',' | b';' | b'!' | b'?') {
            end -= 1;
        }
    }
    (end > at).then_some(Value {
        start: at,
        end,
        quoted: false,
    })
}

/// The closing quote, honouring backslash escapes inside double quotes; an
/// unclosed quote ends with its line (the value was cut or is malformed, and
/// either way is treated as a value).
fn quoted_end(hay: &[u8], start: usize, quote: u8) -> usize {
    let mut i = start;
    while i < hay.len() {
        match hay[i] {
            b'[' if is_marker_at(hay, i) => return i,
            b'\\' if quote == b'"' => i += 2,
            b'\n' | b'\r' => return i,
            b if b == quote => return i,
            _ => i += 1,
        }
    }
    hay.len()
}

fn ends_unquoted(hay: &[u8], i: usize) -> bool {
    match hay[i] {
        // A marker ends a value: what precedes it was judged on the first pass.
        b'[' => is_marker_at(hay, i),
        b' ' | b'\t' | b'\r' | b'\n' | 0x0b | 0x0c => true,
        b'"' | b'\'' | b'`' | b',' | b';' | b'&' | b')' | b']' | b'}' | b'<' | b'>' => true,
        // Inside escaped text (JSON in a log line): `\"`, `\n`.
        b'\\' => matches!(hay.get(i + 1), Some(b'"' | b'\'' | b'n' | b'r' | b't')),
        _ => false,
    }
}

fn judge_value(hay: &[u8], value: Value, name: &[u8], form: Form) -> Option<Found> {
    let bytes = &hay[value.start..value.end];
    // `Authorization: Bearer …` and `"token": "Basic …"`: the credential only.
    // An unquoted value ended at the blank after the scheme, so look past it.
    let scheme_window = if value.quoted {
        bytes
    } else {
        &hay[value.start..]
    };
    if let Some(scheme_len) = scheme_len(scheme_window) {
        let found = credential_after_scheme(hay, value.start + scheme_len, true)?;
        let end = if value.quoted {
            found.end.min(value.end)
        } else {
            found.end
        };
        return (end > found.start).then_some(Found { end, ..found });
    }
    if let Some(class) = class_of_value(bytes) {
        return Some(Found {
            start: value.start,
            end: value.end,
            class,
        });
    }
    if bytes.len() < MIN_VALUE || starts_with_scheme(bytes) {
        return None;
    }
    if looks_like_path(name, bytes) {
        return None;
    }
    if form == Form::Bare && !bare_value_is_secret(bytes) {
        return None;
    }
    Some(Found {
        start: value.start,
        end: value.end,
        class: Class::SecretAssignment,
    })
}

/// A URL (`scheme://…`): its password and query parameters have rules of
/// their own, and a URL without them is not a secret.
fn starts_with_scheme(bytes: &[u8]) -> bool {
    let scheme = bytes
        .iter()
        .take_while(|&&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
        .count();
    scheme > 0 && bytes[0].is_ascii_alphabetic() && bytes[scheme..].starts_with(b"://")
}

/// `Bearer ` / `Basic ` at the start of a value: the length through the blanks.
fn scheme_len(bytes: &[u8]) -> Option<usize> {
    for scheme in [b"bearer".as_slice(), b"basic"] {
        if starts_with_ignore_case(bytes, 0, scheme)
            && bytes.get(scheme.len()).is_some_and(|&b| is_blank(b))
        {
            return Some(skip_blanks(bytes, scheme.len(), 16));
        }
    }
    None
}

/// RFC 7235 token68 bytes, which is what Basic and Bearer credentials are.
fn is_token68(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'+' | b'/')
}

/// The credential after `Bearer`/`Basic` that ends at `scheme_end`. As the
/// value of a named header (`Authorization: Bearer …`), any credential goes;
/// after a bare `Bearer`/`Basic` it must be 8 bytes or more and not read
/// like a word of prose ("Basic authentication"). The judgement uses only
/// the bytes of the match, never its surroundings, so that redacting text
/// nearby cannot change it.
fn credential_after_scheme(hay: &[u8], scheme_end: usize, header: bool) -> Option<Found> {
    let start = skip_blanks(hay, scheme_end, 16);
    if start == scheme_end && !header {
        return None;
    }
    if start >= hay.len() || is_marker_at(hay, start) {
        return None;
    }
    let mut end = run_end(hay, start, is_token68);
    end = run_end(hay, end, |b| b == b'=');
    if end == start {
        return None;
    }
    let cred = &hay[start..end];
    let prose = !cred
        .iter()
        .any(|&b| b.is_ascii_digit() || !b.is_ascii_alphabetic() || b.is_ascii_uppercase())
        || (cred.len() < 8);
    if !header && prose {
        return None;
    }
    Some(Found {
        start,
        end,
        class: Class::AuthHeader,
    })
}

/// A value is a path when it starts like one, holds only path bytes, has
/// two separators (`/run/secrets/db`) or a name that says it is a file
/// (`KEY_FILE=./k.pem`), and every segment reads like a file name.
///
/// The last condition is what keeps a base64 secret that happens to start
/// with `/` from passing as a path: its segments are long runs of mixed-case
/// letters and digits with no `.`, `-`, `_` or `~`, which file names rarely are.
fn looks_like_path(name: &[u8], value: &[u8]) -> bool {
    let rooted = value.starts_with(b"/")
        || value.starts_with(b"./")
        || value.starts_with(b"../")
        || value.starts_with(b"~/");
    if !rooted {
        return false;
    }
    let path_bytes = value
        .iter()
        .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'.' | b'_' | b'-' | b'~'));
    if !path_bytes {
        return false;
    }
    let separators = value.iter().filter(|&&b| b == b'/').count();
    let named_as_path = [b"file".as_slice(), b"path", b"dir"]
        .into_iter()
        .any(|w| contains_ignore_case(name, w));
    (separators >= 2 || named_as_path) && value.split(|&b| b == b'/').all(segment_reads_like_a_name)
}

fn segment_reads_like_a_name(segment: &[u8]) -> bool {
    let punctuated = segment
        .iter()
        .any(|b| matches!(b, b'.' | b'-' | b'_' | b'~'));
    let upper = segment.iter().any(u8::is_ascii_uppercase);
    let digit = segment.iter().any(u8::is_ascii_digit);
    segment.len() <= 3 || punctuated || !upper || (!digit && segment.len() <= 12)
}

/// The bare form `password hunter2hunter2`: a digit and a letter, and not an
/// identifier that prose names this way (a UUID, a hex digest or key id).
fn bare_value_is_secret(value: &[u8]) -> bool {
    let digit = value.iter().any(u8::is_ascii_digit);
    let letter = value.iter().any(u8::is_ascii_alphabetic);
    let hex = value.iter().all(|&b| b.is_ascii_hexdigit() || b == b'-');
    digit && letter && !hex
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value_of(s: &str, keyword: &str) -> Option<(String, Class)> {
        let start = s.find(keyword)?;
        let found = assignment_at(s.as_bytes(), start, start + keyword.len(), 0)?;
        Some((s[found.start..found.end].to_string(), found.class))
    }

    #[test]
    fn finds_each_assignment_form() {
        let want = Some(("hunter2hunter2x".to_string(), Class::SecretAssignment));
        assert_eq!(value_of("DB_PASSWORD=hunter2hunter2x", "PASSWORD"), want);
        assert_eq!(value_of("db_password = hunter2hunter2x", "password"), want);
        assert_eq!(value_of("password: hunter2hunter2x", "password"), want);
        assert_eq!(
            value_of(r#"{"password": "hunter2hunter2x"}"#, "password"),
            want
        );
        assert_eq!(value_of("app --password=hunter2hunter2x", "password"), want);
        assert_eq!(value_of("app --password hunter2hunter2x", "password"), want);
        assert_eq!(value_of("password hunter2hunter2x", "password"), want);
    }

    #[test]
    fn keeps_prose_paths_and_short_values() {
        assert_eq!(
            value_of("password authentication failed for user", "password"),
            None
        );
        assert_eq!(
            value_of("DB_PASSWORD_FILE=/run/secrets/db", "PASSWORD"),
            None
        );
        assert_eq!(value_of("token=abc", "token"), None);
        assert_eq!(
            value_of("password correcthorsebatterystaple", "password"),
            None
        );
    }

    #[test]
    fn takes_only_the_credential_of_an_authorization_header() {
        let got = value_of("Authorization: Bearer abc.def-ghi", "Auth").unwrap();
        assert_eq!(got, ("abc.def-ghi".to_string(), Class::AuthHeader));
    }
}
