//! Telegram's own signature over a Mini App's launch data: the one proof of
//! the person's tap the relay cannot make.
//!
//! When a person opens a Mini App, Telegram hands the page its "init data":
//! a query string with the person's user id, the time (`auth_date`) and,
//! for an app opened from a direct link (`t.me/<bot>/<app>?startapp=P`),
//! `start_param=P`. Since Bot API 8.0 Telegram signs it with Ed25519 for
//! third parties ("Validating data for Third-Party Use"): the signed bytes
//! are
//!
//! ```text
//! <bot id>:WebAppData
//! <key>=<value>          every field but `hash` and `signature`, URL-decoded,
//! <key>=<value>          sorted by key, joined by "\n" (none after the last)
//! ```
//!
//! and `signature` is the signature in base64url without padding. The relay
//! holds the bot token and can make the other proof, `hash` (an HMAC with
//! it), so the Warden never looks at `hash`; it checks the Ed25519 signature
//! with Telegram's public key, compiled in ([`PRODUCTION_KEY`]) unless root
//! pinned another at install.
//!
//! ```
//! use aromba_warden::init_data::{TelegramKey, verify};
//! let key = TelegramKey::production();
//! // Not signed by Telegram: refused, whatever it says.
//! let forged = "auth_date=1700000000&user=%7B%22id%22%3A42%7D&signature=AAAA";
//! assert!(verify(forged, 7_000_000_001, &key, 1_700_000_000).is_err());
//! ```
//!
//! Parsing is strict: a field named twice, a bad escape, a control
//! character, a missing user id or time, or launch data longer than any
//! Telegram sends is refused before the signature is looked at.

#![forbid(unsafe_code)]

use base64ct::{Base64UrlUnpadded, Encoding};
use std::fmt;

/// Telegram's production key for third-party validation, as published in
/// the Bot API documentation.
pub const PRODUCTION_KEY: &str = "e7bf03a2fa4602af4580703d88dda5bb59f32ed8b02a56c187fe7d34caed242d";

/// Telegram's test-environment key, as published beside it.
pub const TEST_ENVIRONMENT_KEY: &str =
    "40055058a4ee38156a06562e52eece92a771bcd8346a8c4615cb7376eddf72ec";

/// The longest launch data the Warden reads. Telegram's is a few hundred
/// bytes (a user's names are at most 64 characters each).
pub const MAX_LEN: usize = 4096;

/// How far the launch data's `auth_date` may be from the Warden's clock:
/// an app opened more than this long ago approves nothing.
pub const FRESH_S: u64 = 600;

/// The longest `start_param` Telegram passes (the Bot API's limit).
pub const MAX_START_PARAM: usize = 512;

/// An Ed25519 public key Telegram signs launch data with.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct TelegramKey(ed25519_compact::PublicKey);

impl TelegramKey {
    /// Telegram's production key.
    pub fn production() -> TelegramKey {
        // A constant of this module, tested to read.
        match TelegramKey::from_hex(PRODUCTION_KEY) {
            Ok(k) => k,
            Err(_) => unreachable!("the production key is 64 hex digits"),
        }
    }

    /// A key given as 64 lower-case hex digits (how root pins one).
    pub fn from_hex(hex: &str) -> Result<TelegramKey, InitDataError> {
        let bytes = aromba_warden_proto::decode_hex(hex)
            .filter(|b| b.len() == ed25519_compact::PublicKey::BYTES)
            .ok_or(InitDataError::Key)?;
        ed25519_compact::PublicKey::from_slice(&bytes)
            .map(TelegramKey)
            .map_err(|_| InitDataError::Key)
    }

    /// The key as 64 lower-case hex digits.
    pub fn to_hex(&self) -> String {
        aromba_warden_proto::encode_hex(self.0.as_ref())
    }

    /// Whether this is Telegram's production key.
    pub fn is_production(&self) -> bool {
        self.to_hex() == PRODUCTION_KEY
    }
}

impl fmt::Debug for TelegramKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TelegramKey({})", self.to_hex())
    }
}

/// Why launch data approves nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InitDataError {
    /// A pinned key that is not 64 hex digits of an Ed25519 key.
    Key,
    /// Longer than [`MAX_LEN`].
    TooLong,
    /// Not a query string Telegram makes (the words say where).
    Malformed(String),
    /// A field Telegram always sends is missing.
    Missing(&'static str),
    /// The signature is not 64 bytes of base64url.
    SignatureUnreadable,
    /// The signature does not verify over these fields for this bot with
    /// this key.
    NotSignedByTelegram,
    /// Opened too long ago (or in the future).
    NotFresh { auth_date: u64, now: u64 },
}

impl fmt::Display for InitDataError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InitDataError::Key => {
                f.write_str("the Telegram key is not 64 hex digits of an Ed25519 public key")
            }
            InitDataError::TooLong => write!(
                f,
                "the launch data is longer than the {MAX_LEN} bytes Telegram sends"
            ),
            InitDataError::Malformed(why) => {
                write!(f, "the launch data is not what Telegram sends: {why}")
            }
            InitDataError::Missing(field) => write!(f, "the launch data has no {field}"),
            InitDataError::SignatureUnreadable => {
                f.write_str("the launch data's signature is not 64 bytes of base64url")
            }
            InitDataError::NotSignedByTelegram => {
                f.write_str("the launch data is not signed by Telegram for this bot")
            }
            InitDataError::NotFresh { auth_date, now } => write!(
                f,
                "the app was opened at {auth_date}, more than {} minutes from now ({now}); open it again from the message",
                FRESH_S / 60
            ),
        }
    }
}

impl std::error::Error for InitDataError {}

/// Launch data whose signature verified: what Telegram vouches for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    /// The Telegram user who opened the app.
    pub user_id: u64,
    /// The name the user shows ("First Last (@username)"), printable
    /// characters only: root reads it on a terminal.
    pub name: String,
    /// When Telegram made the launch data (Unix seconds).
    pub auth_date: u64,
    /// The direct link's parameter, when it had one.
    pub start_param: Option<String>,
    /// The signature as sent, for the journal: every approval is evidence.
    pub signature: String,
}

/// The fields of launch data, decoded, in the order sent.
struct Fields(Vec<(String, String)>);

impl Fields {
    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

fn malformed(why: impl Into<String>) -> InitDataError {
    InitDataError::Malformed(why.into())
}

/// One `application/x-www-form-urlencoded` component, decoded (`+` is a
/// space, as URLSearchParams and Telegram's own examples read it).
fn decode_component(raw: &str) -> Result<String, InitDataError> {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = raw
                    .get(i + 1..i + 3)
                    .ok_or_else(|| malformed("an escape is cut short"))?;
                let byte = u8::from_str_radix(hex, 16)
                    .ok()
                    .filter(|_| hex.bytes().all(|b| b.is_ascii_hexdigit()))
                    .ok_or_else(|| malformed("an escape is not two hex digits"))?;
                out.push(byte);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    let text = String::from_utf8(out).map_err(|_| malformed("a field is not UTF-8"))?;
    if text.chars().any(char::is_control) {
        return Err(malformed("a field holds a control character"));
    }
    Ok(text)
}

fn parse(raw: &str) -> Result<Fields, InitDataError> {
    if raw.len() > MAX_LEN {
        return Err(InitDataError::TooLong);
    }
    if raw.is_empty() {
        return Err(malformed("it is empty"));
    }
    let mut fields: Vec<(String, String)> = Vec::new();
    for pair in raw.split('&') {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| malformed("a field has no value"))?;
        let key = decode_component(k)?;
        if key.is_empty()
            || key.len() > 64
            || !key.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
        {
            return Err(malformed(
                "a field's name is not lower-case letters and `_`",
            ));
        }
        if fields.iter().any(|(seen, _)| *seen == key) {
            return Err(malformed(format!("the field {key} is given twice")));
        }
        fields.push((key, decode_component(v)?));
    }
    Ok(Fields(fields))
}

/// The bytes Telegram signs for `bot_id`: the data-check string with its
/// first line.
fn signed_bytes(fields: &Fields, bot_id: u64) -> Vec<u8> {
    let mut lines: Vec<String> = fields
        .0
        .iter()
        .filter(|(k, _)| k != "hash" && k != "signature")
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    lines.sort();
    format!("{bot_id}:WebAppData\n{}", lines.join("\n")).into_bytes()
}

/// The user id in the `user` field's JSON, and the name it shows.
fn user_of(user: &str) -> Result<(u64, String), InitDataError> {
    let value: serde_json::Value =
        serde_json::from_str(user).map_err(|_| malformed("the user field is not JSON"))?;
    let id = value
        .get("id")
        .and_then(serde_json::Value::as_u64)
        .filter(|id| *id > 0)
        .ok_or_else(|| malformed("the user field has no positive id"))?;
    let field = |k: &str| {
        value
            .get(k)
            .and_then(serde_json::Value::as_str)
            .unwrap_or("")
    };
    let mut name = [field("first_name"), field("last_name")]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    if !field("username").is_empty() {
        name = format!("{name} (@{})", field("username"))
            .trim()
            .to_string();
    }
    Ok((id, printable(&name)))
}

/// `text` without control or bidirectional formatting characters, at most
/// 160 characters: what a terminal shows as it is.
fn printable(text: &str) -> String {
    text.chars()
        .filter(|c| {
            !c.is_control()
                && !matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
        })
        .take(160)
        .collect()
}

/// Whether `param` is a `start_param` Telegram would pass.
pub fn is_start_param(param: &str) -> bool {
    !param.is_empty()
        && param.len() <= MAX_START_PARAM
        && param
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Verifies `raw` launch data: signed by `key` for the bot `bot_id`, made
/// within [`FRESH_S`] of `now`, with a user id. What it vouches for is
/// returned; the caller checks the user and the `start_param` against its
/// own records.
pub fn verify(
    raw: &str,
    bot_id: u64,
    key: &TelegramKey,
    now: u64,
) -> Result<Launch, InitDataError> {
    let fields = parse(raw)?;
    let signature_text = fields
        .get("signature")
        .ok_or(InitDataError::Missing("signature"))?;
    let user = fields.get("user").ok_or(InitDataError::Missing("user"))?;
    let auth_date = fields
        .get("auth_date")
        .ok_or(InitDataError::Missing("auth_date"))?;
    let auth_date: u64 = auth_date
        .parse()
        .ok()
        .filter(|_| auth_date.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| malformed("auth_date is not a number of seconds"))?;
    let (user_id, name) = user_of(user)?;
    let start_param = match fields.get("start_param") {
        Some(p) if is_start_param(p) => Some(p.to_string()),
        Some(_) => return Err(malformed("start_param is not what a direct link carries")),
        None => None,
    };
    let mut sig = [0u8; ed25519_compact::Signature::BYTES];
    let decoded = Base64UrlUnpadded::decode(signature_text, &mut sig)
        .map_err(|_| InitDataError::SignatureUnreadable)?;
    if decoded.len() != ed25519_compact::Signature::BYTES {
        return Err(InitDataError::SignatureUnreadable);
    }
    key.0
        .verify(
            signed_bytes(&fields, bot_id),
            &ed25519_compact::Signature::new(sig),
        )
        .map_err(|_| InitDataError::NotSignedByTelegram)?;
    // Checked after the signature: a forged time says nothing.
    if auth_date.abs_diff(now) > FRESH_S {
        return Err(InitDataError::NotFresh { auth_date, now });
    }
    Ok(Launch {
        user_id,
        name,
        auth_date,
        start_param,
        signature: signature_text.to_string(),
    })
}

#[cfg(test)]
#[path = "init_data/tests.rs"]
mod tests;
