//! Credentials in HTTP authentication: the value of an `Authorization`
//! header whatever its scheme (`Bearer`, `Basic`, `token`, `Digest`,
//! `AWS4-HMAC-SHA256` …), and the credential after a bare `Bearer` or
//! `Basic`.
//!
//! The scheme word is not the credential: `Authorization: token 9f…` loses
//! the hex, not `token`. A challenge is not a credential: `Bearer
//! realm="api"` names a parameter, and `WWW-Authenticate` is never read
//! (see `assign::names_no_secret`).

use crate::Class;
use crate::assign::TokenInside;
use crate::bytes::{is_blank, is_marker_at, run_end, skip_blanks, starts_with_ignore_case};
use crate::tokens::Found;

/// `Bearer ` / `Basic ` at the start of a value: the length through the blanks.
pub(crate) fn scheme_len(bytes: &[u8]) -> Option<usize> {
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

/// The token68 credential at `start`: its end, or `None` when what is there
/// is an auth-param (`realm="api"`, `charset=UTF-8`), not a credential.
fn token68_end(hay: &[u8], start: usize, limit: usize) -> Option<usize> {
    let within = &hay[..limit];
    let body = run_end(within, start, is_token68);
    let end = run_end(within, body, |b| b == b'=');
    if end == start {
        return None;
    }
    // `name=value`: a parameter. Padding is followed by nothing of a token
    // (nor by a marker, where a value was already removed — or will be: a
    // token its own rule removes starts at `limit`).
    let marker_after = end == limit && limit < hay.len();
    if end > body
        && (marker_after
            || within
                .get(end)
                .is_some_and(|&b| b == b'"' || is_token68(b) || is_marker_at(hay, end)))
    {
        return None;
    }
    Some(end)
}

/// The credential after `Bearer`/`Basic` that ends at `scheme_end`. As the
/// value of a named header (`Authorization: Bearer …`), any credential goes;
/// after a bare `Bearer`/`Basic` it must be 8 bytes or more and not read
/// like a word of prose ("Basic authentication"). The judgement uses only
/// the bytes of the match, never its surroundings, so that redacting text
/// nearby cannot change it.
///
/// A credential that is kept may hold a token its own rule removes; a
/// second pass sees the credential end at that token's marker, so it is
/// judged that way too.
pub(crate) fn credential_after_scheme(
    hay: &[u8],
    scheme_end: usize,
    header: bool,
    token_inside: TokenInside<'_>,
) -> Option<Found> {
    let start = skip_blanks(hay, scheme_end, 16);
    if start == scheme_end && !header {
        return None;
    }
    if start >= hay.len() || is_marker_at(hay, start) {
        return None;
    }
    let judge = |limit: usize| {
        let end = token68_end(hay, start, limit)?;
        let cred = &hay[start..end];
        let prose = !cred
            .iter()
            .any(|&b| b.is_ascii_digit() || !b.is_ascii_alphabetic() || b.is_ascii_uppercase())
            || (cred.len() < 8);
        (header || !prose).then_some(Found {
            start,
            end,
            class: Class::AuthHeader,
        })
    };
    if let Some(found) = judge(hay.len()) {
        return Some(found);
    }
    let read = run_end(hay, start, |b| is_token68(b) || b == b'=');
    let token = token_inside(start, read).filter(|&t| t > start)?;
    judge(token)
}

/// The value of an `Authorization` header, starting at `at` (after the
/// colon or equals sign). With a scheme word, what follows it: a token68
/// credential, or every parameter to the end of the header (`Digest
/// username=…, response=…`). Without one, the whole value.
pub(crate) fn authorization_value(hay: &[u8], at: usize) -> Option<Found> {
    let mut start = at;
    let quote = match hay.get(start) {
        Some(&q @ (b'"' | b'\'')) => {
            start += 1;
            Some(q)
        }
        _ => None,
    };
    if start >= hay.len() || is_marker_at(hay, start) {
        return None;
    }
    // The header's end is found only where the removal runs to it: a line
    // of `Authorization:` repeated has a candidate every few bytes, and
    // each walking to the line's end cost a square of the line.
    let ends_at = |i: usize| header_end(hay, i, quote, i + 1) == i;
    let scheme = run_end(hay, start, |b| b.is_ascii_alphanumeric() || b == b'-');
    if is_marker_at(hay, scheme) {
        // Part of the word was removed by another rule: what it was is not
        // known any more, and the first pass judged it whole.
        return None;
    }
    let cred = skip_blanks(hay, scheme, 16);
    let found = |start: usize, end: usize| {
        (end > start).then_some(Found {
            start,
            end,
            class: Class::AuthHeader,
        })
    };
    if scheme > start && cred > scheme && is_marker_at(hay, cred) {
        // Already removed: the scheme word stays what it is.
        return None;
    }
    // No break before the credential (the scheme word and the blanks are
    // none).
    if scheme > start && cred > scheme && header_end(hay, scheme, quote, cred + 1) > cred {
        return match token68_end(hay, cred, hay.len()) {
            // A token68 credential that ends the header, or is followed by
            // something else on the line (a URL on a `curl` command line).
            // Its bytes hold no break, so the header goes on to its end.
            Some(t) if ends_at(t) || !matches!(hay[t], b',' | b'=') => found(cred, t),
            // Parameters: all of them go.
            _ => found(
                cred,
                trim_end(hay, cred, header_end(hay, cred, quote, hay.len())),
            ),
        };
    }
    // One word: a raw key as the whole value.
    let word = run_end(hay, start, is_token68);
    let word = run_end(hay, word, |b| b == b'=');
    (word - start >= 8)
        .then_some(())
        .and_then(|()| found(start, word))
}

/// Where a header value ends, looking no further than `limit`: its closing
/// quote when quoted, else its line, and always at a marker.
fn header_end(hay: &[u8], start: usize, quote: Option<u8>, limit: usize) -> usize {
    let limit = limit.min(hay.len());
    let mut i = start;
    while i < limit {
        let b = hay[i];
        if b == b'\n' || b == b'\r' || Some(b) == quote || (b == b'[' && is_marker_at(hay, i)) {
            break;
        }
        if b == b'\\' && matches!(hay.get(i + 1), Some(b'"' | b'n' | b'r')) {
            break;
        }
        i += 1;
    }
    i
}

fn trim_end(hay: &[u8], start: usize, mut end: usize) -> usize {
    while end > start && is_blank(hay[end - 1]) {
        end -= 1;
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth(s: &str) -> Option<&str> {
        let at = s.find(": ")? + 2;
        let f = authorization_value(s.as_bytes(), at)?;
        Some(&s[f.start..f.end])
    }

    #[test]
    fn takes_the_credential_after_any_scheme_word() {
        let hex = "0123456789abcdef0123456789abcdef01234567";
        assert_eq!(auth(&format!("Authorization: token {hex}")), Some(hex));
        assert_eq!(
            auth("Authorization: Bearer abc.def-ghi"),
            Some("abc.def-ghi")
        );
        assert_eq!(
            auth("Authorization: Digest username=\"a\", response=\"6629fae4\""),
            Some("username=\"a\", response=\"6629fae4\"")
        );
        assert_eq!(
            auth("curl -H Authorization: Bearer abcdefgh123 https://api.example.com/"),
            Some("abcdefgh123")
        );
    }

    #[test]
    fn a_challenge_parameter_is_not_a_credential() {
        let hay = b"Bearer realm=\"api\"";
        assert_eq!(credential_after_scheme(hay, 6, true, &|_, _| None), None);
    }
}
