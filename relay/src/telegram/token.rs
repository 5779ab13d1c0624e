//! The bot token: read once, hidden everywhere, scrubbed from every error.
//!
//! The token is the one secret that lets anyone act as the bot. It comes
//! from the file `TELEGRAM_BOT_TOKEN_FILE` names (or, with a warning at
//! start, from `TELEGRAM_BOT_TOKEN`, where it stays in `/proc/<pid>/environ`),
//! lives in [`BotToken`], whose `Debug` and `Display` hide it, and every
//! error text from the Telegram client passes [`scrub`] before it is logged
//! or returned: the exact token, and anything shaped like a bot token, is
//! replaced.

use std::sync::Arc;

/// The environment variable the token may come from by value (never a
/// flag; `TELEGRAM_BOT_TOKEN_FILE` is the way to give it).
pub const ENV: &str = "TELEGRAM_BOT_TOKEN";

/// What a scrubbed token becomes in a text.
pub const HIDDEN: &str = "<bot-token>";

/// A Telegram bot token: `<bot id>:<secret>`. `Debug` and `Display` hide it.
#[derive(Clone)]
pub struct BotToken(Arc<str>);

/// Why a token is refused at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "TELEGRAM_BOT_TOKEN is not a bot token (digits, a colon, then 30 or more of letters, digits, `_` and `-`)"
)]
pub struct MalformedToken;

impl BotToken {
    pub fn new(text: &str) -> Result<BotToken, MalformedToken> {
        let text = text.trim();
        let (id, secret) = text.split_once(':').ok_or(MalformedToken)?;
        let id_ok = (1..=20).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_digit());
        let secret_ok = (30..=128).contains(&secret.len()) && secret.bytes().all(is_secret_byte);
        if !(id_ok && secret_ok) {
            return Err(MalformedToken);
        }
        Ok(BotToken(text.into()))
    }

    /// The token itself, for the client that sends it to Telegram.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }

    /// The bot's numeric id (the part before the colon): not a secret.
    pub fn bot_id(&self) -> &str {
        self.0.split_once(':').map(|(id, _)| id).unwrap_or("")
    }

    /// The bot's id as a number (0 if it does not fit, which a real one
    /// always does).
    pub fn bot_id_number(&self) -> i64 {
        self.bot_id().parse().unwrap_or(0)
    }
}

impl std::fmt::Debug for BotToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BotToken({HIDDEN})")
    }
}

impl std::fmt::Display for BotToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(HIDDEN)
    }
}

fn is_secret_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// `text` with `token`, its secret part alone, and every `<digits>:<30+
/// token characters>` run replaced by [`HIDDEN`]. The shape catches a token
/// the client rewrote or cut (URL-encoded colons included: `%3A`); the
/// secret alone is what an answer echoing part of a request could hold
/// (found by the `bot_answer` fuzz target).
pub fn scrub(text: &str, token: &BotToken) -> String {
    let exact = text.replace(token.expose(), HIDDEN);
    let exact = exact.replace(&token.expose().replace(':', "%3A"), HIDDEN);
    let exact = match token.expose().split_once(':') {
        Some((_, secret)) => exact.replace(secret, HIDDEN),
        None => exact,
    };
    scrub_shape(&exact)
}

/// Replaces every `<digits>:<30+ token characters>` (or `%3A` for the
/// colon) in `text`.
pub fn scrub_shape(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        if !bytes[i].is_ascii_digit() || (i > 0 && bytes[i - 1].is_ascii_digit()) {
            i += 1;
            continue;
        }
        let digits_end = i + bytes[i..].iter().take_while(|b| b.is_ascii_digit()).count();
        let colon = if bytes[digits_end..].starts_with(b":") {
            1
        } else if bytes[digits_end..].len() >= 3
            && bytes[digits_end..digits_end + 3].eq_ignore_ascii_case(b"%3a")
        {
            3
        } else {
            0
        };
        if colon == 0 {
            i = digits_end;
            continue;
        }
        let secret_start = digits_end + colon;
        let secret_len = bytes[secret_start..]
            .iter()
            .take_while(|b| is_secret_byte(**b))
            .count();
        if secret_len >= 30 {
            // Both ends are ASCII, so these are character boundaries.
            out.push_str(&text[copied..i]);
            out.push_str(HIDDEN);
            copied = secret_start + secret_len;
            i = copied;
        } else {
            i = secret_start;
        }
    }
    out.push_str(&text[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0";

    #[test]
    fn hides_the_token_in_debug_and_display() {
        let token = BotToken::new(TOKEN).expect("a token");
        assert!(!format!("{token:?}").contains("AAHdq"));
        assert!(!format!("{token}").contains("AAHdq"));
        assert_eq!(token.bot_id(), "123456789");
    }

    #[test]
    fn refuses_what_is_not_a_token() {
        for bad in [
            "",
            "123456",
            "abc:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0",
            "1:short",
        ] {
            assert_eq!(BotToken::new(bad).err(), Some(MalformedToken), "{bad}");
        }
    }

    #[test]
    fn scrubs_the_tokens_secret_part_alone() {
        let token = BotToken::new(TOKEN).expect("a token");
        let secret = TOKEN.split_once(':').expect("a colon").1;
        let scrubbed = scrub(&format!("Bad Request: {secret} is not modified"), &token);
        assert!(!scrubbed.contains(secret), "{scrubbed}");
        assert!(scrubbed.contains(HIDDEN), "{scrubbed}");
    }

    #[test]
    fn scrubs_the_exact_token_and_the_shape() {
        let token = BotToken::new(TOKEN).expect("a token");
        let text = format!(
            "error sending request for url (https://api.telegram.org/bot{TOKEN}/SendMessage)"
        );
        let scrubbed = scrub(&text, &token);
        assert!(!scrubbed.contains("AAHdq"), "{scrubbed}");
        assert!(
            scrubbed.contains("/bot<bot-token>/SendMessage"),
            "{scrubbed}"
        );
        let other = "another 987654321:ZZZdqTcvCH1vGWJxfSeofSAs0K5PALDsaw9 and 55%3AZZZdqTcvCH1vGWJxfSeofSAs0K5PALDsaw9";
        let scrubbed = scrub(other, &token);
        assert!(!scrubbed.contains("ZZZdq"), "{scrubbed}");
        assert_eq!(
            scrub("time 12:30 and 7:short", &token),
            "time 12:30 and 7:short"
        );
        assert_eq!(scrub_shape("é1:ü"), "é1:ü");
    }
}
