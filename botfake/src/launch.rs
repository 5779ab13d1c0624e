//! Telegram's part when a person opens a Mini App: the launch data ("init
//! data") it hands the page, signed twice as Telegram signs it — with
//! Ed25519 for third parties (over `<bot id>:WebAppData\n` and the sorted
//! fields but `hash` and `signature`) and with the HMAC of the bot token
//! (`hash`, over the sorted fields but `hash`, `signature` included). The
//! fake's Ed25519 key stands in for Telegram's; the demo pins its public
//! key in the Warden at install, as root may.
//!
//! ```
//! use aromba_botfake::launch::{LaunchKey, Person, launch};
//! let key = LaunchKey::from_seed_hex(&"07".repeat(32)).unwrap();
//! let data = launch(&key, "123456:TEST-token", &Person::new(42, "Ana"), Some("p"), 1_800_000_000);
//! assert!(data.contains("start_param=p") && data.contains("&signature="));
//! ```

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The key the fake signs launches with (Telegram's, in the fake's world).
#[derive(Clone)]
pub struct LaunchKey(ed25519_compact::KeyPair);

impl LaunchKey {
    /// A key from its 32-byte seed in hex (as `keys/test/` keeps one).
    pub fn from_seed_hex(hex: &str) -> Option<LaunchKey> {
        let hex = hex.trim();
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let seed: Vec<u8> = (0..32)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16))
            .collect::<Result<_, _>>()
            .ok()?;
        let seed = ed25519_compact::Seed::from_slice(&seed).ok()?;
        Some(LaunchKey(ed25519_compact::KeyPair::from_seed(seed)))
    }

    /// A fresh random key (the demo makes one per run).
    pub fn generate() -> std::io::Result<LaunchKey> {
        use std::io::Read;
        let mut seed = [0u8; 32];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut seed)?;
        Ok(LaunchKey(ed25519_compact::KeyPair::from_seed(
            ed25519_compact::Seed::new(seed),
        )))
    }

    /// The public key as 64 hex digits: what `aromba-warden install
    /// --telegram-key` takes.
    pub fn public_hex(&self) -> String {
        self.0
            .pk
            .as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// The seed as 64 hex digits, to keep the key across restarts.
    pub fn seed_hex(&self) -> String {
        self.0
            .sk
            .seed()
            .as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

/// The person who opens the app, as Telegram describes them.
#[derive(Clone, Debug)]
pub struct Person {
    pub id: i64,
    pub first_name: String,
}

impl Person {
    pub fn new(id: i64, first_name: &str) -> Person {
        Person {
            id,
            first_name: first_name.to_string(),
        }
    }

    fn json(&self) -> String {
        serde_json::json!({
            "id": self.id,
            "first_name": self.first_name,
            "language_code": "en",
            "allows_write_to_pm": true,
        })
        .to_string()
    }
}

/// What `encodeURIComponent` makes of `s`: how Telegram encodes a field.
pub fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.!~*'()".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// The bot id Telegram signs launches for: the number before the colon of
/// its token.
pub fn bot_id(token: &str) -> Option<u64> {
    token.split_once(':')?.0.parse().ok()
}

/// Launch data for `person` opening the bot `token`'s Mini App at `now`,
/// from a direct link carrying `start_param` (if any).
pub fn launch(
    key: &LaunchKey,
    token: &str,
    person: &Person,
    start_param: Option<&str>,
    now: u64,
) -> String {
    let mut fields: Vec<(String, String)> = vec![
        ("user".into(), person.json()),
        ("chat_instance".into(), format!("{}", 7_000_000 + person.id)),
        ("chat_type".into(), "sender".into()),
        ("auth_date".into(), now.to_string()),
    ];
    if let Some(p) = start_param {
        fields.push(("start_param".into(), p.to_string()));
    }
    signed_launch(key, token, fields)
}

/// `fields` (decoded) as Telegram hands them to the page: signed with
/// `key` for the bot `token` (`signature`), then with the token's HMAC
/// (`hash`), every name and value encoded. Fields of any names and values
/// are signed as they are (the fuzz targets sign what they make).
pub fn signed_launch(key: &LaunchKey, token: &str, mut fields: Vec<(String, String)>) -> String {
    let signature = signature(key, bot_id(token).unwrap_or(0), &fields);
    fields.push(("signature".into(), signature));
    hashed_launch(token, fields)
}

/// `fields` (decoded) with the bot `token`'s HMAC (`hash`) over them, the
/// signature among them if they have one, every name and value encoded.
pub fn hashed_launch(token: &str, mut fields: Vec<(String, String)>) -> String {
    let secret = hmac_sha256(b"WebAppData", token.as_bytes());
    let hash = hmac_sha256(&secret, check(&fields, &["hash"]).as_bytes());
    fields.push((
        "hash".into(),
        hash.iter().map(|b| format!("{b:02x}")).collect(),
    ));
    fields
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// The data-check string of `fields` (decoded): `key=value` lines, sorted,
/// joined by "\n", without the fields named in `leave_out`.
fn check(fields: &[(String, String)], leave_out: &[&str]) -> String {
    let mut lines: Vec<String> = fields
        .iter()
        .filter(|(k, _)| !leave_out.contains(&k.as_str()))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    lines.sort();
    lines.join("\n")
}

/// Telegram's Ed25519 signature, base64url, over `fields` (decoded) for the
/// bot `bot_id`: what a launch's `signature` field holds.
pub fn signature(key: &LaunchKey, bot_id: u64, fields: &[(String, String)]) -> String {
    let signed = format!(
        "{bot_id}:WebAppData\n{}",
        check(fields, &["hash", "signature"])
    );
    base64url(key.0.sk.sign(signed.as_bytes(), None).as_ref())
}

fn hmac_sha256(key: &[u8], data: &[u8]) -> Vec<u8> {
    // An HMAC takes a key of any length.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key) else {
        unreachable!("HMAC takes a key of any length")
    };
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

/// Base64url without padding, as Telegram writes its signature.
pub fn base64url(bytes: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(char::from(A[((n >> (18 - 6 * i)) & 63) as usize]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64url_is_unpadded_and_url_safe() {
        assert_eq!(base64url(b""), "");
        assert_eq!(base64url(b"f"), "Zg");
        assert_eq!(base64url(b"fo"), "Zm8");
        assert_eq!(base64url(b"foo"), "Zm9v");
        assert_eq!(base64url(&[0xfb, 0xff]), "-_8");
        assert_eq!(base64url(&[0u8; 64]).len(), 86);
    }

    #[test]
    fn the_bot_id_is_the_tokens_number() {
        assert_eq!(bot_id("123456:TEST-token"), Some(123456));
        assert_eq!(bot_id("nope"), None);
    }

    #[test]
    fn a_seed_round_trips_and_bad_seeds_are_refused() {
        let k = LaunchKey::generate().unwrap();
        let again = LaunchKey::from_seed_hex(&k.seed_hex()).unwrap();
        assert_eq!(k.public_hex(), again.public_hex());
        assert!(LaunchKey::from_seed_hex("zz").is_none());
        assert!(LaunchKey::from_seed_hex(&"g".repeat(64)).is_none());
    }

    /// The HMAC half matches what Telegram-Mini-Apps' published vector
    /// (MIT; bot token and data from its `web.test.ts`) says Telegram made.
    #[test]
    fn the_bot_token_hmac_is_telegrams() {
        let token = "7342037359:AAFZehRPBRs8Seg40oDjTMIW8uTGPuW1zfQ";
        let fields = [
            (
                "user",
                "{\"id\":279058397,\"first_name\":\"Vladislav + - ? \\/\",\"last_name\":\"Kibenko\",\"username\":\"vdkfrost\",\"language_code\":\"ru\",\"is_premium\":true,\"allows_write_to_pm\":true,\"photo_url\":\"https:\\/\\/t.me\\/i\\/userpic\\/320\\/4FPEE4tmP3ATHa57u6MqTDih13LTOiMoKoLDRG4PnSA.svg\"}",
            ),
            ("chat_instance", "8134722200314281151"),
            ("chat_type", "private"),
            ("auth_date", "1733584787"),
            (
                "signature",
                "zL-ucjNyREiHDE8aihFwpfR9aggP2xiAo3NSpfe-p7IbCisNlDKlo7Kb6G4D0Ao2mBrSgEk4maLSdv6MLIlADQ",
            ),
        ];
        let mut lines: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
        lines.sort();
        let secret = hmac_sha256(b"WebAppData", token.as_bytes());
        let hash: String = hmac_sha256(&secret, lines.join("\n").as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            hash,
            "2174df5b000556d044f3f020384e879c8efcab55ddea2ced4eb752e93e7080d6"
        );
    }
}
