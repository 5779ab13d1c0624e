//! The relay's checks of the `mini_app_launch` fuzz target, shared with
//! the corpus replay in `relay/tests/fuzz_corpora.rs` (the target includes
//! this file by path, and the Warden's `warden/tests/fuzz_check/launch.rs`).
//!
//! An input is a Mini App's launch data ("init data", a query string). The
//! relay's `mini_app::launch::check`, with the bot's token:
//! - never takes the input as it comes (the fuzzer does not hold the
//!   token's HMAC);
//! - never refuses the same fields as wrongly hashed once hashed as
//!   Telegram hashes them, so the relay and Telegram read one launch as the
//!   same bytes;
//! - and when it takes them, names the chat the `user` JSON names, read
//!   plainly, with the hash bound to the token (another token: refused) and
//!   the time (past the relay's window: refused).

use aromba_botfake::launch::hashed_launch;
use aromba_relay::mini_app::launch::{MAX_AGE_S, Refused, check as relay_check};

/// The bot whose token hashes the launches.
pub const TOKEN: &str = "7000001:FUZZ-token";
/// The clock when a launch carries no `auth_date` to check it at.
pub const NOW: i64 = 1_800_000_000;

/// One `application/x-www-form-urlencoded` component read plainly (`+` a
/// space, `%XX` a byte), or `None` when it is no such thing.
fn plain_decode(raw: &str) -> Option<String> {
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

/// Checks one input; the user the relay took the launch for, if it did.
pub fn check(data: &[u8]) -> Result<Option<i64>, String> {
    let Ok(raw) = std::str::from_utf8(data) else {
        return Ok(None);
    };
    if let Ok(c) = relay_check(raw, TOKEN, NOW) {
        return Err(format!("the input as it came was taken: {c:?}"));
    }
    let mut fields = Vec::new();
    for pair in raw.split('&') {
        let Some((k, v)) = pair.split_once('=') else {
            return Ok(None);
        };
        let (Some(k), Some(v)) = (plain_decode(k), plain_decode(v)) else {
            return Ok(None);
        };
        if k != "hash" {
            fields.push((k, v));
        }
    }
    let field = |name: &str| {
        fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let now = field("auth_date")
        .and_then(|d| d.parse::<i64>().ok())
        .unwrap_or(NOW);
    let hashed = hashed_launch(TOKEN, fields.clone());
    let checked = match relay_check(&hashed, TOKEN, now) {
        Ok(c) => c,
        Err(Refused::Hash) => {
            return Err(format!(
                "fields hashed as Telegram hashes them were refused as wrongly hashed: {hashed:?}"
            ));
        }
        Err(Refused::Stale) => {
            return Err(format!(
                "a launch checked at its own auth_date was stale: {hashed:?}"
            ));
        }
        Err(Refused::Malformed) => return Ok(None),
    };
    let user: serde_json::Value = field("user")
        .and_then(|u| serde_json::from_str(&u).ok())
        .ok_or("a launch without a user's JSON was taken")?;
    if user["id"].as_i64() != Some(checked.user) || checked.user <= 0 {
        return Err(format!(
            "the relay took the launch for {}, the JSON holds {}",
            checked.user, user["id"]
        ));
    }
    if relay_check(&hashed, "7000001:another-token", now) != Err(Refused::Hash) {
        return Err("a launch hashed with one token was taken with another".into());
    }
    if let Some(later) = now.checked_add(MAX_AGE_S + 1)
        && relay_check(&hashed, TOKEN, later) != Err(Refused::Stale)
    {
        return Err("a launch past the relay's window was taken".into());
    }
    Ok(Some(checked.user))
}
