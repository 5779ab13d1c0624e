//! Passwords in URLs of any scheme: `postgres://user:pass@host`,
//! `redis://:pass@host`, `mongodb+srv://u:p@cluster`.
//!
//! The authority ends at the first `/`, `?`, `#`, whitespace or quote
//! (RFC 3986); the userinfo is what precedes its last `@`, and the password
//! what follows the first `:` of the userinfo. A URL without a password is
//! left whole.

use crate::Class;
use crate::bytes::is_marker_at;
use crate::tokens::{Found, class_of_value};

fn is_scheme_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'+' || b == b'-' || b == b'.'
}

fn ends_authority(b: u8) -> bool {
    matches!(
        b,
        b'/' | b'?' | b'#' | b' ' | b'\t' | b'\r' | b'\n' | b'"' | b'\'' | b'<' | b'>' | b'`'
    )
}

/// At a `://` trigger.
pub(crate) fn url_password_at(hay: &[u8], sep: usize, floor: usize) -> Option<Found> {
    // A scheme: one letter then scheme bytes, directly before `://`.
    let mut start = sep;
    while start > floor && sep - start < 32 && is_scheme_byte(hay[start - 1]) {
        start -= 1;
    }
    if start == sep || !hay[start].is_ascii_alphabetic() {
        return None;
    }
    let authority = sep + 3;
    let mut end = authority;
    // A marker ends it too: what follows was judged by another rule.
    while end < hay.len() && !ends_authority(hay[end]) && !is_marker_at(hay, end) {
        end += 1;
    }
    let at = memchr::memrchr(b'@', &hay[authority..end])? + authority;
    let colon = memchr::memchr(b':', &hay[authority..at])? + authority;
    let password = colon + 1;
    if password == at || is_marker_at(hay, password) {
        return None;
    }
    // A token used as a password (`https://x-access-token:ghs_…@github.com`)
    // is counted as that token.
    let class = class_of_value(&hay[password..at]).unwrap_or(Class::UrlPassword);
    Some(Found {
        start: password,
        end: at,
        class,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn password(s: &str) -> Option<&str> {
        let sep = s.find("://")?;
        let found = url_password_at(s.as_bytes(), sep, 0)?;
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
    fn keeps_urls_without_a_password() {
        assert_eq!(password("https://example.com:8443/a@b"), None);
        assert_eq!(password("ssh://git@github.com/x.git"), None);
        assert_eq!(password("https://host/?mail=a@b.c"), None);
    }
}
