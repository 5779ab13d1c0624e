//! Passwords in URLs of any scheme: `postgres://user:pass@host`,
//! `redis://:pass@host`, `mongodb+srv://u:p@cluster`, also written
//! JSON-escaped (`postgres:\/\/u:p@db`, as PHP prints them) or
//! percent-encoded whole (`https%3A%2F%2Fadmin%3Ap%40host`, a URL inside a
//! query string).
//!
//! A password may hold any byte a person can type, `#`, `/`, `?`, `@` and
//! spaces included, and the tools that print connection strings do not
//! encode it. So the userinfo is not cut at the first reserved byte but runs
//! to the last `@` before the host: an `@` followed by a host name and then
//! the end of the URL, a port, a path or a query. An `@` inside the URL's
//! own query (`?mail=a@b.c`) is not that `@`. A URL whose authority is
//! `host:port` (digits, then the path) has no password. A URL without one
//! is left whole, and so is a password already masked (`***`).

use crate::Class;
use crate::bytes::is_marker_at;
use crate::tokens::{Found, class_of_value};

/// How the URL is written, from the separator the scanner met.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UrlForm {
    /// `://`
    Plain,
    /// `:\/\/`
    JsonEscaped,
    /// `%3A%2F%2F`, any case.
    PercentEncoded,
}

impl UrlForm {
    fn separator_len(self) -> usize {
        match self {
            UrlForm::Plain => 3,
            UrlForm::JsonEscaped => 5,
            UrlForm::PercentEncoded => 9,
        }
    }
}

/// How far past the scheme a userinfo and host are looked for.
const REGION_CAP: usize = 512;

fn is_scheme_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'+' || b == b'-' || b == b'.'
}

fn is_host_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'~' | b'%')
}

/// Bytes that end the text a URL can span, whatever its password holds.
fn ends_region(b: u8) -> bool {
    matches!(b, b'\n' | b'\r' | b'"' | b'\'' | b'<' | b'>' | b'`')
}

/// At a separator of `form` found at `sep`. Nothing before `floor` is read.
pub(crate) fn url_password_at(
    hay: &[u8],
    sep: usize,
    floor: usize,
    form: UrlForm,
) -> Option<Found> {
    // A scheme: one letter then scheme bytes, directly before the separator.
    let mut start = sep;
    while start > floor && sep - start < 32 && is_scheme_byte(hay[start - 1]) {
        start -= 1;
    }
    if start == sep || !hay[start].is_ascii_alphabetic() {
        return None;
    }
    let authority = sep + form.separator_len();
    let (text, origin) = match form {
        UrlForm::Plain => {
            let end = plain_region_end(hay, authority);
            let text = &hay[authority..end];
            // The common case: no `@` at all, so no password.
            memchr::memchr(b'@', text)?;
            let (pw_start, pw_end) = password_span(text, is_marker_at(hay, end))?;
            let password = &text[pw_start..pw_end];
            let class = class_of_value(password).unwrap_or(Class::UrlPassword);
            return Some(Found {
                start: authority + pw_start,
                end: authority + pw_end,
                class,
            });
        }
        UrlForm::JsonEscaped => decode_json(hay, authority),
        UrlForm::PercentEncoded => decode_percent(hay, authority),
    };
    let at_marker = origin.last().is_some_and(|&end| is_marker_at(hay, end));
    let (pw_start, pw_end) = password_span(&text, at_marker)?;
    let class = class_of_value(&text[pw_start..pw_end]).unwrap_or(Class::UrlPassword);
    Some(Found {
        start: origin[pw_start],
        end: origin[pw_end],
        class,
    })
}

/// Where a plain URL's text ends: at a line break or quote, at a marker
/// (what follows was judged by another rule), or after `REGION_CAP` bytes.
fn plain_region_end(hay: &[u8], from: usize) -> usize {
    let limit = from.saturating_add(REGION_CAP).min(hay.len());
    let mut i = from;
    while i < limit {
        let b = hay[i];
        if ends_region(b) || (b == b'[' && is_marker_at(hay, i)) {
            return i;
        }
        // `\"`: the end of a JSON string the URL sits in.
        if b == b'\\' && hay.get(i + 1) == Some(&b'"') {
            return i;
        }
        i += 1;
    }
    i
}

/// A JSON-escaped URL decoded (`\/` is `/`), with the offset in `hay` each
/// byte came from; one more offset marks the end.
fn decode_json(hay: &[u8], from: usize) -> (Vec<u8>, Vec<usize>) {
    let limit = from.saturating_add(REGION_CAP).min(hay.len());
    let mut text = Vec::new();
    let mut origin = Vec::new();
    let mut i = from;
    while i < limit {
        let b = hay[i];
        if ends_region(b) || (b == b'[' && is_marker_at(hay, i)) {
            break;
        }
        if b == b'\\' {
            match hay.get(i + 1) {
                Some(&c @ (b'/' | b'\\')) => {
                    text.push(c);
                    origin.push(i);
                    i += 2;
                    continue;
                }
                Some(b'u') => match hay.get(i + 2..i + 6).and_then(hex4) {
                    Some(c) if c != b'"' => {
                        text.push(c);
                        origin.push(i);
                        i += 6;
                        continue;
                    }
                    _ => break,
                },
                // `\"` ends the string, other escapes end the URL.
                _ => break,
            }
        }
        text.push(b);
        origin.push(i);
        i += 1;
    }
    origin.push(i);
    (text, origin)
}

/// `\u00XX` for an ASCII byte.
fn hex4(digits: &[u8]) -> Option<u8> {
    let s = std::str::from_utf8(digits).ok()?;
    let v = u16::from_str_radix(s, 16).ok()?;
    u8::try_from(v).ok().filter(u8::is_ascii)
}

/// A percent-encoded URL decoded, with the offset each byte came from. The
/// encoded URL is a query value: it ends at `&`, a blank or a quote.
fn decode_percent(hay: &[u8], from: usize) -> (Vec<u8>, Vec<usize>) {
    let limit = from.saturating_add(REGION_CAP * 3).min(hay.len());
    let mut text = Vec::new();
    let mut origin = Vec::new();
    let mut i = from;
    while i < limit {
        let b = hay[i];
        if ends_region(b) || matches!(b, b'&' | b' ' | b'\t') || (b == b'[' && is_marker_at(hay, i))
        {
            break;
        }
        origin.push(i);
        if b == b'%'
            && let Some(byte) = hay.get(i + 1..i + 3).and_then(hex2)
        {
            text.push(byte);
            i += 3;
            continue;
        }
        text.push(if b == b'+' { b' ' } else { b });
        i += 1;
    }
    origin.push(i);
    (text, origin)
}

fn hex2(digits: &[u8]) -> Option<u8> {
    let s = std::str::from_utf8(digits).ok()?;
    u8::from_str_radix(s, 16).ok()
}

/// The password of the URL whose authority starts `text`, as a span of it.
/// `at_marker`: the text ends where an earlier rule removed something, so
/// what ended there is not known.
fn password_span(text: &[u8], at_marker: bool) -> Option<(usize, usize)> {
    let valid: Vec<usize> = memchr::memchr_iter(b'@', text)
        .filter(|&at| userinfo_ends_at(text, at, at_marker))
        .collect();
    let first = *valid.first()?;
    // An `@` in the URL's query (`?mail=a@b`, a `?` then a `=` after the
    // first host) is not the userinfo's; a `?` alone may be the password's.
    let in_query = |at: usize| {
        memchr::memchr(b'?', &text[first..at])
            .is_some_and(|q| memchr::memchr(b'=', &text[first + q..at]).is_some())
    };
    let at = valid
        .iter()
        .rev()
        .copied()
        .find(|&at| !in_query(at))
        .unwrap_or(first);
    let colon = memchr::memchr(b':', &text[..at])?;
    let password = &text[colon + 1..at];
    if password.is_empty() || password.iter().all(|&b| b == b'*') {
        return None;
    }
    Some((colon + 1, at))
}

/// Whether the `@` at `at` ends a userinfo `user:password` and starts a host.
fn userinfo_ends_at(text: &[u8], at: usize, at_marker: bool) -> bool {
    let Some(colon) = memchr::memchr(b':', &text[..at]) else {
        return false;
    };
    // A user name is made of the bytes RFC 3986 allows in a userinfo (and
    // UTF-8), without `=`: then no other rule's trigger (an assignment, an
    // encoded colon) can sit in it unseen while the password is judged.
    let user = &text[..colon];
    let user_byte = |b: u8| {
        b >= 0x80
            || b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'.' | b'_'
                    | b'~'
                    | b'-'
                    | b'!'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'('
                    | b')'
                    | b'*'
                    | b'+'
                    | b','
                    | b';'
                    | b'%'
            )
    };
    if !user.iter().all(|&b| user_byte(b))
        || user.windows(3).any(|w| w.eq_ignore_ascii_case(b"%3a"))
    {
        return false;
    }
    let password = &text[colon + 1..at];
    if password.is_empty() || memchr::memmem::find(password, b"://").is_some() {
        return false;
    }
    // `example.com:8443/a@b`: the authority is a host and a port, not a
    // userinfo. A host has a dot (or is `localhost`); a user name rarely
    // does (`root:7033#x@db` is a password).
    let digits = password.iter().take_while(|b| b.is_ascii_digit()).count();
    let host_like = user.contains(&b'.') || user.eq_ignore_ascii_case(b"localhost");
    if host_like
        && (1..=5).contains(&digits)
        && password
            .get(digits)
            .is_some_and(|&b| matches!(b, b'/' | b'?' | b'#' | b' ' | b'\t'))
    {
        return false;
    }
    let host_start = at + 1;
    let host_end = if text.get(host_start) == Some(&b'[') {
        match memchr::memchr(b']', &text[host_start..]) {
            Some(i) => host_start + i + 1,
            None => return false,
        }
    } else {
        let mut i = host_start;
        while i < text.len() && is_host_byte(text[i]) {
            i += 1;
        }
        i
    };
    if host_end == host_start || (host_end == text.len() && at_marker) {
        return false;
    }
    let after = text.get(host_end).copied();
    let url_goes_on = matches!(after, Some(b':' | b'/'));
    let ends_host = after.is_none()
        || url_goes_on
        || matches!(
            after,
            Some(b'?' | b'#' | b' ' | b'\t' | b',' | b';' | b')' | b'\\' | b'&')
        );
    // A password with a space is believed only when a port or a path shows
    // that a URL goes on after the host: prose has `a:b c@d` too.
    let spaced = password.iter().any(|&b| b == b' ' || b == b'\t');
    ends_host && (!spaced || url_goes_on)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn password(s: &str) -> Option<&str> {
        let (sep, form) = [
            ("%3A%2F%2F", UrlForm::PercentEncoded),
            (":\\/\\/", UrlForm::JsonEscaped),
            ("://", UrlForm::Plain),
        ]
        .into_iter()
        .find_map(|(needle, form)| s.find(needle).map(|i| (i, form)))?;
        let found = url_password_at(s.as_bytes(), sep, 0, form)?;
        Some(&s[found.start..found.end])
    }

    #[test]
    fn finds_the_password_of_a_connection_string() {
        assert_eq!(
            password("postgres://app:s3cr3t@db:5432/app"),
            Some("s3cr3t")
        );
        assert_eq!(password("redis://:hunter2@cache:6379/0"), Some("hunter2"));
        assert_eq!(
            password("mongodb+srv://u:p%40ss@c.example.net/x"),
            Some("p%40ss")
        );
    }

    #[test]
    fn a_password_runs_to_the_last_at_before_the_host() {
        assert_eq!(
            password("postgres://app:Hx7#kLq92mZpW4@db/app"),
            Some("Hx7#kLq92mZpW4")
        );
        assert_eq!(
            password("redis://:2517#qvnsEEU7C@cache:6379/0"),
            Some("2517#qvnsEEU7C")
        );
        assert_eq!(
            password("mysql://root:7033#zQzKn8zp@127.0.0.1:3306/app"),
            Some("7033#zQzKn8zp")
        );
        assert_eq!(
            password("redis://:my secret pass 42@cache/0"),
            Some("my secret pass 42")
        );
        assert_eq!(
            password("mysql://root:p@ss/w?rd@127.0.0.1:3306/app"),
            Some("p@ss/w?rd")
        );
        assert_eq!(
            password("https://u:pw12345678@host/path?email=a@b.c"),
            Some("pw12345678")
        );
    }

    #[test]
    fn finds_escaped_and_encoded_urls() {
        assert_eq!(
            password(r#"{"dsn":"postgres:\/\/app:Hx7\/kLq92@db\/app"}"#),
            Some(r"Hx7\/kLq92")
        );
        assert_eq!(
            password("next=https%3A%2F%2Fadmin%3AS3cr3t%2Fpw%40intranet%2Fx&y=1"),
            Some("S3cr3t%2Fpw")
        );
    }

    #[test]
    fn keeps_urls_without_a_password() {
        assert_eq!(password("https://example.com:8443/a@b"), None);
        assert_eq!(password("ssh://git@github.com/x.git"), None);
        assert_eq!(password("https://host/?mail=a@b.c"), None);
        assert_eq!(
            password("see https://example.com:8443 or mail admin@corp.com"),
            None
        );
        assert_eq!(password("http://localhost:oops then me@x.com"), None);
        assert_eq!(password("postgresql://app:***@db/app"), None);
    }
}
