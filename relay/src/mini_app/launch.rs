//! The relay's look at a Mini App launch: Telegram's HMAC with the bot
//! token (`hash`), checked only to refuse junk early and to know which
//! chat asks. The relay can make this proof itself, so it decides nothing
//! that matters: the Warden checks Telegram's Ed25519 signature over the
//! same launch, passed on untouched.
//!
//! `hash` is the HMAC-SHA256, keyed with HMAC-SHA256("WebAppData", bot
//! token), of the data-check string: every field but `hash`, URL-decoded,
//! sorted by key, `key=value` joined by "\n" (Telegram's "Validating data
//! received via the Mini App").

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// How old a launch the relay still passes on (the Warden's own limit for
/// an approval is shorter).
pub const MAX_AGE_S: i64 = 3600;

/// What a launch that passed says: the person (their private chat with the
/// bot has the same id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    pub user: i64,
}

/// Why a launch is refused, for a count (never its content).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    Malformed,
    Hash,
    Stale,
}

impl Refused {
    pub fn kind(self) -> &'static str {
        match self {
            Refused::Malformed => "app_launch_malformed",
            Refused::Hash => "app_launch_hash",
            Refused::Stale => "app_launch_stale",
        }
    }
}

fn decode(raw: &str) -> Option<String> {
    let b = raw.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = raw.get(i + 1..i + 3)?;
                if !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
                    return None;
                }
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

fn hmac(key: &[u8], data: &[u8]) -> Option<Vec<u8>> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).ok()?;
    mac.update(data);
    Some(mac.finalize().into_bytes().to_vec())
}

/// Checks `launch` against the bot `token` at `now` (Unix seconds).
pub fn check(launch: &str, token: &str, now: i64) -> Result<Checked, Refused> {
    if launch.is_empty() || launch.len() > aromba_relay_proto::frame::MAX_LAUNCH {
        return Err(Refused::Malformed);
    }
    let mut fields: Vec<(String, String)> = Vec::new();
    for pair in launch.split('&') {
        let (k, v) = pair.split_once('=').ok_or(Refused::Malformed)?;
        let (k, v) = (
            decode(k).ok_or(Refused::Malformed)?,
            decode(v).ok_or(Refused::Malformed)?,
        );
        if fields.iter().any(|(seen, _)| *seen == k) {
            return Err(Refused::Malformed);
        }
        fields.push((k, v));
    }
    let field = |name: &str| {
        fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let hash = field("hash").ok_or(Refused::Malformed)?;
    let given: Vec<u8> = (0..hash.len() / 2)
        .map(|i| {
            hash.get(2 * i..2 * i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect::<Option<_>>()
        .filter(|b: &Vec<u8>| b.len() == 32 && hash.len() == 64)
        .ok_or(Refused::Malformed)?;
    let mut lines: Vec<String> = fields
        .iter()
        .filter(|(k, _)| k != "hash")
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    lines.sort();
    let secret = hmac(b"WebAppData", token.as_bytes()).ok_or(Refused::Hash)?;
    let expected = hmac(&secret, lines.join("\n").as_bytes()).ok_or(Refused::Hash)?;
    if !bool::from(subtle::ConstantTimeEq::ct_eq(
        expected.as_slice(),
        given.as_slice(),
    )) {
        return Err(Refused::Hash);
    }
    let auth_date: i64 = field("auth_date")
        .and_then(|d| d.parse().ok())
        .ok_or(Refused::Malformed)?;
    if now.abs_diff(auth_date) > MAX_AGE_S.unsigned_abs() {
        return Err(Refused::Stale);
    }
    let user: serde_json::Value = field("user")
        .and_then(|u| serde_json::from_str(u).ok())
        .ok_or(Refused::Malformed)?;
    let user = user
        .get("id")
        .and_then(serde_json::Value::as_i64)
        .filter(|id| *id > 0)
        .ok_or(Refused::Malformed)?;
    Ok(Checked { user })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Launch data Telegram made for the bot whose token is below, published
    /// as a test vector by the Telegram-Mini-Apps project (MIT licence,
    /// `packages/init-data-node/src/entries/web.test.ts`).
    const TOKEN: &str = "7342037359:AAFZehRPBRs8Seg40oDjTMIW8uTGPuW1zfQ";
    const LAUNCH: &str = "user=%7B%22id%22%3A279058397%2C%22first_name%22%3A%22Vladislav%20%2B%20-%20%3F%20%5C%2F%22%2C%22last_name%22%3A%22Kibenko%22%2C%22username%22%3A%22vdkfrost%22%2C%22language_code%22%3A%22ru%22%2C%22is_premium%22%3Atrue%2C%22allows_write_to_pm%22%3Atrue%2C%22photo_url%22%3A%22https%3A%5C%2F%5C%2Ft.me%5C%2Fi%5C%2Fuserpic%5C%2F320%5C%2F4FPEE4tmP3ATHa57u6MqTDih13LTOiMoKoLDRG4PnSA.svg%22%7D&chat_instance=8134722200314281151&chat_type=private&auth_date=1733584787&signature=zL-ucjNyREiHDE8aihFwpfR9aggP2xiAo3NSpfe-p7IbCisNlDKlo7Kb6G4D0Ao2mBrSgEk4maLSdv6MLIlADQ&hash=2174df5b000556d044f3f020384e879c8efcab55ddea2ced4eb752e93e7080d6";
    const AT: i64 = 1_733_584_787;

    #[test]
    fn a_launch_telegram_made_for_this_bot_passes_and_names_the_person() {
        assert_eq!(
            check(LAUNCH, TOKEN, AT + 5),
            Ok(Checked { user: 279058397 })
        );
    }

    #[test]
    fn another_bots_token_a_changed_field_or_an_old_launch_is_refused() {
        let other = "7342037359:AAFZehRPBRs8Seg40oDjTMIW8uTGPuW1zfR";
        assert_eq!(check(LAUNCH, other, AT), Err(Refused::Hash));
        let changed = LAUNCH.replacen("279058397", "279058398", 1);
        assert_eq!(check(&changed, TOKEN, AT), Err(Refused::Hash));
        assert_eq!(
            check(LAUNCH, TOKEN, AT + MAX_AGE_S + 1),
            Err(Refused::Stale)
        );
    }

    #[test]
    fn junk_is_refused_without_a_panic() {
        for junk in [
            "",
            "&",
            "hash=",
            "hash=zz",
            "a=%",
            "a=%zz&hash=00",
            "a=1&a=2",
            &"x".repeat(5000),
        ] {
            assert!(check(junk, TOKEN, AT).is_err(), "{junk}");
        }
    }
}
