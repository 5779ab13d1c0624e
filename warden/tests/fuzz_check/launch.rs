//! The Warden's checks of the `mini_app_launch` fuzz target, shared with
//! the corpus replay in `warden/tests/fuzz_corpora.rs` (the target includes
//! this file by path, and the relay's `relay/tests/fuzz_check/launch.rs`).
//!
//! An input is a Mini App's launch data ("init data", a query string).
//! `init_data::verify`, under a key the check holds:
//! - never takes the input as it comes (the fuzzer cannot sign);
//! - takes the same fields once signed as Telegram signs them exactly when
//!   they are well formed: never refuses them as unsigned, so the Warden
//!   and Telegram read one launch as the same signed bytes;
//! - and then vouches for what the fields say, read plainly: the user id in
//!   the `user` JSON, `auth_date`, `start_param`, a name a terminal shows
//!   as it is; bound to the bot (another bot id: refused) and the time
//!   (past the freshness window: refused).

use aromba_botfake::launch::{LaunchKey, signed_launch};
use aromba_warden::init_data::{FRESH_S, InitDataError, TelegramKey, verify};

/// The bot the launches are for.
pub const TOKEN: &str = "7000001:FUZZ-token";
pub const BOT_ID: u64 = 7_000_001;
/// The clock when a launch carries no `auth_date` to check it at.
pub const NOW: u64 = 1_800_000_000;

/// The key the check signs with, standing in for Telegram's.
pub fn key() -> LaunchKey {
    match LaunchKey::from_seed_hex(&"5a".repeat(32)) {
        Some(k) => k,
        None => unreachable!("64 hex digits are a seed"),
    }
}

fn telegram_key() -> TelegramKey {
    match TelegramKey::from_hex(&key().public_hex()) {
        Ok(k) => k,
        Err(e) => unreachable!("the fake's public key reads: {e}"),
    }
}

/// One `application/x-www-form-urlencoded` component read plainly (`+` a
/// space, `%XX` a byte), or `None` when it is no such thing.
pub fn plain_decode(raw: &str) -> Option<String> {
    let b = raw.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = raw.get(i + 1..i + 3)?;
                if !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
                    return None;
                }
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

/// The input's fields, decoded, in order, without those named in
/// `leave_out`; `None` when it is not a query string.
pub fn plain_fields(raw: &str, leave_out: &[&str]) -> Option<Vec<(String, String)>> {
    let mut fields = Vec::new();
    for pair in raw.split('&') {
        let (k, v) = pair.split_once('=')?;
        let (k, v) = (plain_decode(k)?, plain_decode(v)?);
        if !leave_out.contains(&k.as_str()) {
            fields.push((k, v));
        }
    }
    Some(fields)
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// Checks one input; the user id the Warden vouched for, if it did.
pub fn check(data: &[u8]) -> Result<Option<u64>, String> {
    let Ok(raw) = std::str::from_utf8(data) else {
        return Ok(None);
    };
    let tkey = telegram_key();
    if let Ok(l) = verify(raw, BOT_ID, &tkey, NOW) {
        return Err(format!("the input as it came verified: {l:?}"));
    }
    let Some(fields) = plain_fields(raw, &["hash", "signature"]) else {
        return Ok(None);
    };
    // Checked at the launch's own time when it has one, so the fuzzer need
    // not find the clock; freshness is checked below.
    let now = field(&fields, "auth_date")
        .and_then(|d| d.parse::<u64>().ok())
        .unwrap_or(NOW);
    let signed = signed_launch(&key(), TOKEN, fields.clone());
    let launch = match verify(&signed, BOT_ID, &tkey, now) {
        Ok(l) => l,
        Err(e @ (InitDataError::NotSignedByTelegram | InitDataError::SignatureUnreadable)) => {
            return Err(format!(
                "fields signed as Telegram signs them were refused ({e}): {signed:?}"
            ));
        }
        Err(InitDataError::NotFresh { .. }) => {
            return Err(format!(
                "a launch checked at its own auth_date was not fresh: {signed:?}"
            ));
        }
        Err(_) => return Ok(None),
    };
    let user: serde_json::Value = field(&fields, "user")
        .and_then(|u| serde_json::from_str(u).ok())
        .ok_or("a launch without a user's JSON verified")?;
    if user["id"].as_u64() != Some(launch.user_id) {
        return Err(format!(
            "the Warden vouched for user {}, the JSON holds {}",
            launch.user_id, user["id"]
        ));
    }
    let auth_date = field(&fields, "auth_date")
        .filter(|d| d.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|d| d.parse::<u64>().ok());
    if auth_date != Some(launch.auth_date) {
        return Err(format!(
            "the Warden read auth_date {}, the field is {:?}",
            launch.auth_date,
            field(&fields, "auth_date")
        ));
    }
    if field(&fields, "start_param") != launch.start_param.as_deref() {
        return Err(format!(
            "the Warden read start_param {:?}, the field is {:?}",
            launch.start_param,
            field(&fields, "start_param")
        ));
    }
    if launch.name.chars().count() > 160
        || launch.name.chars().any(|c| {
            c.is_control()
                || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
        })
    {
        return Err(format!(
            "the name root reads is not shown as it is: {:?}",
            launch.name
        ));
    }
    match verify(&signed, BOT_ID + 1, &tkey, now) {
        Err(InitDataError::NotSignedByTelegram) => {}
        other => return Err(format!("signed for one bot, read for another: {other:?}")),
    }
    if let Some(later) = launch.auth_date.checked_add(FRESH_S + 1) {
        match verify(&signed, BOT_ID, &tkey, later) {
            Err(InitDataError::NotFresh { .. }) => {}
            other => return Err(format!("a launch past its freshness was taken: {other:?}")),
        }
    }
    Ok(Some(launch.user_id))
}
