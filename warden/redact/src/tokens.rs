//! Provider and platform tokens: fixed prefixes, then a body of a known
//! alphabet and length. Each rule is tried only where the trigger automaton
//! saw its prefix.

use crate::Class;
use crate::bytes::{is_token_byte, run_end};
use crate::runs::{Alphabet, Runs};

/// Which token family a trigger prefix starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Prefix {
    /// `sk-`: OpenAI, or Anthropic (`sk-ant-`) or OpenRouter (`sk-or-`).
    SkDash,
    /// `sk_` / `rk_`: Stripe secret and restricted keys.
    StripeKey,
    /// `whsec_`: Stripe webhook signing secret.
    StripeWebhook,
    /// `ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`.
    GitHubClassic,
    /// `github_pat_`.
    GitHubFineGrained,
    /// `AKIA`, `ASIA`.
    AwsAccessKeyId,
    /// `xox?-`.
    SlackXox,
    /// `xapp-`.
    SlackApp,
    /// `hooks.slack.com/services/`.
    SlackWebhook,
    /// `AIza`.
    GoogleApiKey,
    /// `GOCSPX-`.
    GoogleClientSecret,
    /// `ya29.`.
    GoogleAccessToken,
    /// `1//0`.
    GoogleRefreshToken,
    /// `eyJ`.
    Jwt,
}

/// A token found at a position: its span and class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Found {
    pub start: usize,
    pub end: usize,
    pub class: Class,
}

fn is_alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

/// A token must not be the tail of a longer word: `desk-…` is not `sk-…`.
/// Bytes before `floor` were already replaced by a marker, which ends in `]`.
/// A percent-encoded byte (`%2F`, `%22`) ends a word as the byte it encodes
/// does: a URL percent-encoded whole (`https%3A%2F%2FAIza…%3Ax%40host`).
fn left_boundary_ok(hay: &[u8], start: usize, floor: usize) -> bool {
    start <= floor || !is_alnum(hay[start - 1]) || percent_encoded_before(hay, start, floor)
}

/// `%XX` ends right before `start` (and after `floor`).
fn percent_encoded_before(hay: &[u8], start: usize, floor: usize) -> bool {
    start >= floor + 3
        && hay[start - 3] == b'%'
        && hay[start - 2].is_ascii_hexdigit()
        && hay[start - 1].is_ascii_hexdigit()
}

/// The body `[start, end)` of bytes in `alphabet`, if its length is within
/// `min..=max` and no byte of the same alphabet follows it. Reads at most
/// one byte past the longest body, and `runs` remembers what it read.
fn body(
    hay: &[u8],
    start: usize,
    min: usize,
    max: usize,
    alphabet: Alphabet,
    runs: &mut Runs,
) -> Option<usize> {
    let bound = start.saturating_add(max).saturating_add(1);
    let end = runs.end(hay, start, bound, alphabet);
    let len = end - start;
    (min..=max).contains(&len).then_some(end)
}

/// Tries the token family `prefix` whose literal starts at `at`.
/// Prefix literals are matched case-insensitively by the trigger automaton;
/// the case is checked here. No rule looks before `floor`: those bytes were
/// already replaced, and a judgement must not depend on what a second pass
/// over the output would no longer see. `runs`: what this pass over `hay`
/// has read already.
pub(crate) fn token_at(
    hay: &[u8],
    at: usize,
    prefix: Prefix,
    floor: usize,
    runs: &mut Runs,
) -> Option<Found> {
    if !left_boundary_ok(hay, at, floor) && prefix != Prefix::SlackWebhook {
        return None;
    }
    let rest = &hay[at..];
    let found = |end: usize, class: Class| Found {
        start: at,
        end,
        class,
    };
    match prefix {
        Prefix::SkDash => {
            let (class, head) = if rest.starts_with(b"sk-ant-") {
                (Class::AnthropicKey, 7)
            } else if rest.starts_with(b"sk-or-") {
                (Class::OpenRouterKey, 6)
            } else if rest.starts_with(b"sk-") {
                (Class::OpenAiKey, 3)
            } else {
                return None;
            };
            let end = body(hay, at + head, 20, 512, Alphabet::Token, runs)?;
            Some(found(end, class))
        }
        Prefix::StripeKey => {
            let head = [
                b"sk_live_".as_slice(),
                b"sk_test_",
                b"rk_live_",
                b"rk_test_",
            ]
            .into_iter()
            .find(|h| rest.starts_with(h))?
            .len();
            let end = body(hay, at + head, 16, 256, Alphabet::Alnum, runs)?;
            Some(found(end, Class::StripeKey))
        }
        Prefix::StripeWebhook => {
            if !rest.starts_with(b"whsec_") {
                return None;
            }
            let end = body(hay, at + 6, 24, 256, Alphabet::Alnum, runs)?;
            Some(found(end, Class::StripeKey))
        }
        Prefix::GitHubClassic => {
            let ok = matches!(
                rest.get(..4),
                Some([b'g', b'h', b'p' | b'o' | b'u' | b's' | b'r', b'_'])
            );
            if !ok {
                return None;
            }
            let end = body(hay, at + 4, 30, 255, Alphabet::Alnum, runs)?;
            Some(found(end, Class::GitHubToken))
        }
        Prefix::GitHubFineGrained => {
            if !rest.starts_with(b"github_pat_") {
                return None;
            }
            let end = body(hay, at + 11, 40, 255, Alphabet::AlnumUnderscore, runs)?;
            Some(found(end, Class::GitHubToken))
        }
        Prefix::AwsAccessKeyId => {
            if !(rest.starts_with(b"AKIA") || rest.starts_with(b"ASIA")) {
                return None;
            }
            let end = runs.end(hay, at + 4, at + 4 + 17, Alphabet::UpperOrDigit);
            // Exactly 16 after the prefix, and not followed by more of a word.
            let exact = end - (at + 4) == 16 && hay.get(end).is_none_or(|&b| !is_alnum(b));
            exact.then(|| found(end, Class::AwsKey))
        }
        Prefix::SlackXox => {
            let ok = matches!(
                rest.get(..5),
                Some([
                    b'x',
                    b'o',
                    b'x',
                    b'a' | b'b' | b'p' | b'r' | b's' | b'e',
                    b'-' | b'.'
                ])
            );
            if !ok {
                return None;
            }
            let end = body(hay, at + 5, 10, 512, Alphabet::AlnumDashDot, runs)?;
            Some(found(end, Class::SlackToken))
        }
        Prefix::SlackApp => {
            if !rest.starts_with(b"xapp-") {
                return None;
            }
            let end = body(hay, at + 5, 10, 512, Alphabet::AlnumDash, runs)?;
            Some(found(end, Class::SlackToken))
        }
        Prefix::SlackWebhook => {
            const HEAD: &[u8] = b"hooks.slack.com/services/";
            if !rest.starts_with(HEAD) {
                return None;
            }
            // The secret is the path after /services/: T…/B…/secret.
            let start = at + HEAD.len();
            let end = body(hay, start, 20, 256, Alphabet::TokenSlash, runs)?;
            Some(Found {
                start,
                end,
                class: Class::SlackToken,
            })
        }
        Prefix::GoogleApiKey => {
            if !rest.starts_with(b"AIza") {
                return None;
            }
            let end = body(hay, at + 4, 30, 64, Alphabet::Token, runs)?;
            Some(found(end, Class::GoogleKey))
        }
        Prefix::GoogleClientSecret => {
            if !rest.starts_with(b"GOCSPX-") {
                return None;
            }
            let end = body(hay, at + 7, 20, 128, Alphabet::Token, runs)?;
            Some(found(end, Class::GoogleKey))
        }
        Prefix::GoogleAccessToken => {
            if !rest.starts_with(b"ya29.") {
                return None;
            }
            let end = body(hay, at + 5, 20, 4096, Alphabet::TokenDot, runs)?;
            Some(found(end, Class::GoogleKey))
        }
        Prefix::GoogleRefreshToken => {
            if !rest.starts_with(b"1//0") {
                return None;
            }
            let end = body(hay, at + 4, 30, 1024, Alphabet::Token, runs)?;
            Some(found(end, Class::GoogleKey))
        }
        Prefix::Jwt => jwt_at(hay, at, runs),
    }
}

/// `eyJ…` `.` `eyJ…`-ish `.` signature: header and payload are base64url
/// JSON, the signature may be empty (`alg: none`).
fn jwt_at(hay: &[u8], at: usize, runs: &mut Runs) -> Option<Found> {
    if !hay[at..].starts_with(b"eyJ") {
        return None;
    }
    let header_end = body(hay, at, 10, 8192, Alphabet::Token, runs)?;
    if hay.get(header_end) != Some(&b'.') {
        return None;
    }
    let payload_end = body(hay, header_end + 1, 10, 65536, Alphabet::Token, runs)?;
    if hay.get(payload_end) != Some(&b'.') {
        return None;
    }
    let end = run_end(hay, payload_end + 1, is_token_byte);
    Some(Found {
        start: at,
        end,
        class: Class::Jwt,
    })
}

/// A Telegram bot token `123456789:AA…` (6–12 digits, a colon, 35 base64url
/// bytes), found from its colon. It has no literal prefix, so the scanner
/// offers every colon; the check fails within a byte or two on timestamps.
pub(crate) fn telegram_at_colon(
    hay: &[u8],
    colon: usize,
    floor: usize,
    runs: &mut Runs,
) -> Option<Found> {
    telegram_at_separator(hay, colon, 1, floor, runs)
}

/// The same token with its colon percent-encoded (`123456789%3AAA…`), as it
/// appears in an encoded URL or form body.
pub(crate) fn telegram_at_encoded_colon(
    hay: &[u8],
    at: usize,
    floor: usize,
    runs: &mut Runs,
) -> Option<Found> {
    telegram_at_separator(hay, at, 3, floor, runs)
}

fn telegram_at_separator(
    hay: &[u8],
    sep: usize,
    sep_len: usize,
    floor: usize,
    runs: &mut Runs,
) -> Option<Found> {
    // The bot id may run back into a removal: a key glued before the token
    // (`AIza…-123456789:AA…`, `Bearer 123456789:AA…`) took the digits into
    // its own run. Its secret goes too; the removal before it left nothing
    // for a second pass to judge.
    let mut start = sep;
    while start > 0 && sep - start < 13 && hay[start - 1].is_ascii_digit() {
        start -= 1;
    }
    // The hex digits of a percent-encoded byte before the id are not the
    // id's (`%22123456789:AA…`, `%F1…`).
    let escape = (start.saturating_sub(2)..start).find(|&p| {
        hay[p] == b'%'
            && hay
                .get(p + 1..p + 3)
                .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit))
    });
    if let Some(p) = escape {
        start = start.max(p + 3);
    }
    let digits = sep - start;
    if !(6..=12).contains(&digits) {
        return None;
    }
    // Left of the digits: a removal, a byte that is no letter or digit, a
    // percent-encoded byte, or `bot` as in a Bot API URL path.
    let boundary = start <= floor
        || !is_alnum(hay[start - 1])
        || escape.is_some()
        || percent_encoded_before(hay, start, floor)
        || (start >= floor + 3 && &hay[start - 3..start] == b"bot");
    if !boundary {
        return None;
    }
    // The secret is always 35 bytes; a `-` or `_` after it is a separator
    // (`…:AA…-sk-…`, `…:AA…-prod`), not more secret.
    let secret = sep + sep_len;
    // Every secret Telegram issues starts with `A` (base64url of bytes that
    // start with a zero), as gitleaks' rule has it too: `:abc…` is no token.
    if hay.get(secret) != Some(&b'A') {
        return None;
    }
    let run = runs.end(hay, secret, secret + 36, Alphabet::Token);
    let end = match run - secret {
        35 => run,
        36 if matches!(hay[secret + 35], b'-' | b'_') => secret + 35,
        _ => return None,
    };
    Some(Found {
        start,
        end,
        class: Class::TelegramBotToken,
    })
}

/// When a whole value is a known token, its class (more telling than
/// "secret-assignment").
pub(crate) fn class_of_value(value: &[u8]) -> Option<Class> {
    const FAMILIES: [(&[u8], Prefix); 14] = [
        (b"sk-", Prefix::SkDash),
        (b"sk_", Prefix::StripeKey),
        (b"rk_", Prefix::StripeKey),
        (b"whsec_", Prefix::StripeWebhook),
        (b"gh", Prefix::GitHubClassic),
        (b"github_pat_", Prefix::GitHubFineGrained),
        (b"A", Prefix::AwsAccessKeyId),
        (b"xox", Prefix::SlackXox),
        (b"xapp-", Prefix::SlackApp),
        (b"AIza", Prefix::GoogleApiKey),
        (b"GOCSPX-", Prefix::GoogleClientSecret),
        (b"ya29.", Prefix::GoogleAccessToken),
        (b"1//0", Prefix::GoogleRefreshToken),
        (b"eyJ", Prefix::Jwt),
    ];
    for (head, prefix) in FAMILIES {
        if value.starts_with(head)
            && let Some(found) = token_at(value, 0, prefix, 0, &mut Runs::default())
        {
            return Some(found.class);
        }
    }
    if let Some(colon) = memchr::memchr(b':', value)
        && let Some(found) = telegram_at_colon(value, colon, 0, &mut Runs::default())
        && found.start == 0
    {
        return Some(found.class);
    }
    if let Some(pct) = memchr::memchr(b'%', value)
        && value[pct..].len() > 3
        && value[pct + 1..pct + 3].eq_ignore_ascii_case(b"3a")
        && let Some(found) = telegram_at_encoded_colon(value, pct, 0, &mut Runs::default())
        && found.start == 0
    {
        return Some(found.class);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_a_prefix_inside_a_longer_word() {
        let hay = b"desk-abcdefghijklmnopqrstuvwxyz0123";
        assert_eq!(
            token_at(hay, 2, Prefix::SkDash, 0, &mut Runs::default()),
            None
        );
    }

    #[test]
    fn finds_a_telegram_token_in_a_bot_api_path() {
        let hay = b"GET /bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1/getMe";
        let colon = hay.iter().position(|&b| b == b':').unwrap();
        let found = telegram_at_colon(hay, colon, 0, &mut Runs::default()).unwrap();
        assert_eq!(&hay[found.start..found.start + 9], b"123456789");
    }

    #[test]
    fn finds_a_telegram_token_with_an_encoded_colon() {
        let hay = b"text=hi&token=123456789%3AAAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1&x";
        let at = hay.windows(3).position(|w| w == b"%3A").unwrap();
        let found = telegram_at_encoded_colon(hay, at, 0, &mut Runs::default()).unwrap();
        assert_eq!(&hay[found.start..found.end], &hay[14..61]);
    }

    #[test]
    fn a_dash_or_underscore_after_the_secret_is_a_separator_not_more_secret() {
        for sep in ["-", "_"] {
            let hay = format!("123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1{sep} x");
            let found = telegram_at_colon(hay.as_bytes(), 9, 0, &mut Runs::default()).unwrap();
            assert_eq!(&hay[found.start..found.end], &hay[..45]);
        }
        let hay = b"123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1x x";
        assert_eq!(telegram_at_colon(hay, 9, 0, &mut Runs::default()), None);
    }

    #[test]
    fn a_bot_id_may_run_back_into_a_removal() {
        // `floor` 11: `AIzaSyDq123` was removed; the id's digits began in it.
        let hay = b"AIzaSyDq123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1 x";
        let found = telegram_at_colon(hay, 17, 11, &mut Runs::default()).unwrap();
        assert_eq!((found.start, found.end), (8, 53));
        // Glued to a letter with nothing removed, it is not a token.
        assert_eq!(telegram_at_colon(hay, 17, 0, &mut Runs::default()), None);
    }

    #[test]
    fn leaves_a_clock_time_alone() {
        let hay = b"Dec 02 04:14:53 host";
        assert_eq!(telegram_at_colon(hay, 9, 0, &mut Runs::default()), None);
    }
}
