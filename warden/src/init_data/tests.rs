#![forbid(unsafe_code)]

//! Launch data made here with a test key, by the documented recipe (not by
//! the code under test), then tampered with field by field.

use super::*;
use ed25519_compact::{KeyPair, Seed};

const BOT: u64 = 7_000_000_001;
const NOW: u64 = 1_800_000_000;
const USER_JSON: &str = r#"{"id":424242,"first_name":"Ana","last_name":"Silva","username":"ana_s","language_code":"pt","allows_write_to_pm":true}"#;

fn test_pair() -> KeyPair {
    KeyPair::from_seed(Seed::new([7u8; 32]))
}

fn key_of(pair: &KeyPair) -> TelegramKey {
    TelegramKey::from_hex(&aromba_warden_proto::encode_hex(pair.pk.as_ref())).unwrap()
}

/// What a form encoder (encodeURIComponent) makes of `s`.
fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Launch data as Telegram sends it: `fields` encoded in the given order,
/// then `hash` and `signature` over the documented data-check string.
fn signed_by(pair: &KeyPair, bot: u64, fields: &[(&str, &str)]) -> String {
    let mut sorted: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
    sorted.sort();
    let check = format!("{bot}:WebAppData\n{}", sorted.join("\n"));
    let sig = pair.sk.sign(check.as_bytes(), None);
    let mut parts: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("{k}={}", enc(v)))
        .collect();
    parts.push(format!("hash={}", "ab".repeat(32)));
    parts.push(format!(
        "signature={}",
        Base64UrlUnpadded::encode_string(sig.as_ref())
    ));
    parts.join("&")
}

fn usual(start_param: &str) -> Vec<(&'static str, String)> {
    vec![
        ("user", USER_JSON.to_string()),
        ("chat_instance", "-4512345678901234567".to_string()),
        ("chat_type", "sender".to_string()),
        ("start_param", start_param.to_string()),
        ("auth_date", (NOW - 30).to_string()),
    ]
}

fn launch(pair: &KeyPair, bot: u64, fields: &[(&'static str, String)]) -> String {
    let borrowed: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    signed_by(pair, bot, &borrowed)
}

#[test]
fn the_compiled_in_keys_are_telegrams_published_ones_and_read() {
    let production = TelegramKey::production();
    assert_eq!(production.to_hex(), PRODUCTION_KEY);
    assert!(production.is_production());
    let test_env = TelegramKey::from_hex(TEST_ENVIRONMENT_KEY).unwrap();
    assert!(!test_env.is_production());
}

#[test]
fn launch_data_signed_for_this_bot_verifies_and_says_who_and_what() {
    let pair = test_pair();
    let raw = launch(&pair, BOT, &usual("0123abcd_ef"));
    let got = verify(&raw, BOT, &key_of(&pair), NOW).unwrap();
    assert_eq!(got.user_id, 424242);
    assert_eq!(got.auth_date, NOW - 30);
    assert_eq!(got.start_param.as_deref(), Some("0123abcd_ef"));
    assert!(raw.ends_with(&format!("signature={}", got.signature)));
}

#[test]
fn the_order_fields_arrive_in_does_not_matter() {
    let pair = test_pair();
    let mut fields = usual("p");
    fields.reverse();
    let raw = launch(&pair, BOT, &fields);
    assert!(verify(&raw, BOT, &key_of(&pair), NOW).is_ok());
}

#[test]
fn every_field_tampered_breaks_the_signature() {
    let pair = test_pair();
    let raw = launch(&pair, BOT, &usual("action_one"));
    let tampered = [
        ("user=%7B%22id%22%3A424242", "user=%7B%22id%22%3A424243"),
        ("chat_type=sender", "chat_type=private"),
        (
            "chat_instance=-4512345678901234567",
            "chat_instance=-4512345678901234568",
        ),
        ("start_param=action_one", "start_param=action_two"),
        (
            &format!("auth_date={}", NOW - 30),
            &format!("auth_date={}", NOW - 29),
        ),
    ];
    for (from, to) in tampered {
        assert!(raw.contains(from), "{from} not in {raw}");
        let changed = raw.replacen(from, to, 1);
        assert_eq!(
            verify(&changed, BOT, &key_of(&pair), NOW),
            Err(InitDataError::NotSignedByTelegram),
            "{from} -> {to}"
        );
    }
}

#[test]
fn a_field_added_or_removed_breaks_the_signature() {
    let pair = test_pair();
    let raw = launch(&pair, BOT, &usual("x"));
    let added = format!("query_id=AAE&{raw}");
    assert_eq!(
        verify(&added, BOT, &key_of(&pair), NOW),
        Err(InitDataError::NotSignedByTelegram)
    );
    let removed = raw.replacen("chat_type=sender&", "", 1);
    assert_eq!(
        verify(&removed, BOT, &key_of(&pair), NOW),
        Err(InitDataError::NotSignedByTelegram)
    );
}

#[test]
fn the_hash_is_not_what_is_trusted_so_changing_it_changes_nothing() {
    // The relay can make `hash` (an HMAC with the bot token); the Warden
    // never relies on it, in either direction.
    let pair = test_pair();
    let raw = launch(&pair, BOT, &usual("x"));
    let rehashed = raw.replacen(&"ab".repeat(32), &"cd".repeat(32), 1);
    assert!(verify(&rehashed, BOT, &key_of(&pair), NOW).is_ok());
}

#[test]
fn launch_data_for_another_bot_is_refused() {
    let pair = test_pair();
    let raw = launch(&pair, BOT + 1, &usual("x"));
    assert_eq!(
        verify(&raw, BOT, &key_of(&pair), NOW),
        Err(InitDataError::NotSignedByTelegram)
    );
}

#[test]
fn launch_data_signed_by_another_key_is_refused() {
    let mallory = KeyPair::from_seed(Seed::new([9u8; 32]));
    let raw = launch(&mallory, BOT, &usual("x"));
    assert_eq!(
        verify(&raw, BOT, &key_of(&test_pair()), NOW),
        Err(InitDataError::NotSignedByTelegram)
    );
    // Nor does the production key take a test key's signature.
    assert_eq!(
        verify(&raw, BOT, &TelegramKey::production(), NOW),
        Err(InitDataError::NotSignedByTelegram)
    );
}

#[test]
fn stale_or_future_launch_data_is_refused_after_the_signature() {
    let pair = test_pair();
    let raw = launch(&pair, BOT, &usual("x"));
    let opened = NOW - 30;
    assert!(verify(&raw, BOT, &key_of(&pair), opened + FRESH_S).is_ok());
    assert_eq!(
        verify(&raw, BOT, &key_of(&pair), opened + FRESH_S + 1),
        Err(InitDataError::NotFresh {
            auth_date: opened,
            now: opened + FRESH_S + 1
        })
    );
    assert!(matches!(
        verify(&raw, BOT, &key_of(&pair), opened - FRESH_S - 1),
        Err(InitDataError::NotFresh { .. })
    ));
}

#[test]
fn another_user_is_who_the_launch_data_names() {
    // The Warden compares the user with the one pinned at pairing; the
    // launch data of another account says that account.
    let pair = test_pair();
    let mut fields = usual("x");
    fields[0].1 = r#"{"id":999,"first_name":"Eve"}"#.to_string();
    let raw = launch(&pair, BOT, &fields);
    assert_eq!(verify(&raw, BOT, &key_of(&pair), NOW).unwrap().user_id, 999);
}

#[test]
fn a_field_given_twice_is_refused_before_the_signature() {
    let pair = test_pair();
    let raw = launch(&pair, BOT, &usual("a"));
    let twice = format!("{raw}&start_param=b");
    assert!(matches!(
        verify(&twice, BOT, &key_of(&pair), NOW),
        Err(InitDataError::Malformed(why)) if why.contains("twice")
    ));
}

#[test]
fn missing_fields_are_named() {
    let pair = test_pair();
    let no_user: Vec<_> = usual("a")
        .into_iter()
        .filter(|(k, _)| *k != "user")
        .collect();
    assert_eq!(
        verify(&launch(&pair, BOT, &no_user), BOT, &key_of(&pair), NOW),
        Err(InitDataError::Missing("user"))
    );
    let no_time: Vec<_> = usual("a")
        .into_iter()
        .filter(|(k, _)| *k != "auth_date")
        .collect();
    assert_eq!(
        verify(&launch(&pair, BOT, &no_time), BOT, &key_of(&pair), NOW),
        Err(InitDataError::Missing("auth_date"))
    );
    let raw = launch(&pair, BOT, &usual("a"));
    let unsigned = raw.split("&signature=").next().unwrap().to_string();
    assert_eq!(
        verify(&unsigned, BOT, &key_of(&pair), NOW),
        Err(InitDataError::Missing("signature"))
    );
}

#[test]
fn malformed_launch_data_is_refused_with_a_reason_and_never_panics() {
    let key = key_of(&test_pair());
    let cases = [
        "",
        "&",
        "=",
        "user",
        "user=%",
        "user=%4",
        "user=%zz",
        "user=%+1",
        "user=%C3%28",
        "user=a%0Ab",
        "USER=1",
        "us-er=1",
        "user=1&user=1",
        "auth_date=-1&user=%7B%22id%22%3A1%7D&signature=AA",
        "auth_date=+1&user=%7B%22id%22%3A1%7D&signature=AA",
        "auth_date=1&user=%7B%22id%22%3A0%7D&signature=AA",
        "auth_date=1&user=%7B%22id%22%3A-5%7D&signature=AA",
        "auth_date=1&user=not-json&signature=AA",
        "auth_date=1&user=%7B%7D&signature=AA",
        "auth_date=1&user=%7B%22id%22%3A1%7D&start_param=a%20b&signature=AA",
        "auth_date=1&user=%7B%22id%22%3A1%7D&start_param=&signature=AA",
    ];
    for raw in cases {
        match verify(raw, BOT, &key, NOW) {
            Err(InitDataError::Malformed(_) | InitDataError::Missing(_)) => {}
            other => panic!("{raw:?}: {other:?}"),
        }
    }
    assert_eq!(
        verify(&"a=b&".repeat(2000), BOT, &key, NOW),
        Err(InitDataError::TooLong)
    );
    let long_param = format!(
        "auth_date=1&user=%7B%22id%22%3A1%7D&start_param={}&signature=AA",
        "a".repeat(MAX_START_PARAM + 1)
    );
    assert!(matches!(
        verify(&long_param, BOT, &key, NOW),
        Err(InitDataError::Malformed(_))
    ));
}

#[test]
fn an_unreadable_signature_is_told_from_a_wrong_one() {
    let pair = test_pair();
    let raw = launch(&pair, BOT, &usual("a"));
    let (head, sig) = raw.split_once("&signature=").unwrap();
    for bad in ["", "AA", "!!!!", &format!("{sig}AA"), &sig[..sig.len() - 2]] {
        assert_eq!(
            verify(&format!("{head}&signature={bad}"), BOT, &key_of(&pair), NOW),
            Err(InitDataError::SignatureUnreadable),
            "{bad:?}"
        );
    }
    // Padding is not what Telegram sends.
    assert_eq!(
        verify(
            &format!("{head}&signature={sig}%3D%3D"),
            BOT,
            &key_of(&pair),
            NOW
        ),
        Err(InitDataError::SignatureUnreadable)
    );
}

#[test]
fn a_plus_reads_as_a_space_as_telegrams_own_examples_decode_it() {
    let pair = test_pair();
    let mut fields = usual("a");
    fields[0].1 = r#"{"id":5,"first_name":"Ana Maria"}"#.to_string();
    let raw = launch(&pair, BOT, &fields).replacen("Ana%20Maria", "Ana+Maria", 1);
    assert_eq!(verify(&raw, BOT, &key_of(&pair), NOW).unwrap().user_id, 5);
}

#[test]
fn start_params_are_what_a_direct_link_may_carry() {
    assert!(is_start_param("a"));
    assert!(is_start_param(&"Az09_-".repeat(85)));
    assert!(!is_start_param(""));
    assert!(!is_start_param(&"a".repeat(513)));
    for bad in ["a b", "a.b", "a/b", "ä", "a=b", "a%20"] {
        assert!(!is_start_param(bad), "{bad}");
    }
}

#[test]
fn keys_are_refused_unless_64_hex_digits() {
    for bad in [
        "",
        "00",
        &"g".repeat(64),
        &"AB".repeat(32),
        &"ab".repeat(33),
    ] {
        assert_eq!(TelegramKey::from_hex(bad), Err(InitDataError::Key), "{bad}");
    }
}

/// Launch data Telegram itself signed with its production key, published
/// as a test vector by the Telegram-Mini-Apps project (MIT licence,
/// `packages/init-data-node/src/entries/node.test.ts`): the decoding and the
/// data-check string here are Telegram's, not only ours.
const TELEGRAM_SIGNED: &str = "user=%7B%22id%22%3A279058397%2C%22first_name%22%3A%22Vladislav%20%2B%20-%20%3F%20%5C%2F%22%2C%22last_name%22%3A%22Kibenko%22%2C%22username%22%3A%22vdkfrost%22%2C%22language_code%22%3A%22ru%22%2C%22is_premium%22%3Atrue%2C%22allows_write_to_pm%22%3Atrue%2C%22photo_url%22%3A%22https%3A%5C%2F%5C%2Ft.me%5C%2Fi%5C%2Fuserpic%5C%2F320%5C%2F4FPEE4tmP3ATHa57u6MqTDih13LTOiMoKoLDRG4PnSA.svg%22%7D&chat_instance=8134722200314281151&chat_type=private&auth_date=1733584787&signature=zL-ucjNyREiHDE8aihFwpfR9aggP2xiAo3NSpfe-p7IbCisNlDKlo7Kb6G4D0Ao2mBrSgEk4maLSdv6MLIlADQ&hash=2174df5b000556d044f3f020384e879c8efcab55ddea2ced4eb752e93e7080d6";
const TELEGRAM_SIGNED_BOT: u64 = 7_342_037_359;
const TELEGRAM_SIGNED_AT: u64 = 1_733_584_787;

#[test]
fn launch_data_signed_by_telegrams_production_key_verifies() {
    let got = verify(
        TELEGRAM_SIGNED,
        TELEGRAM_SIGNED_BOT,
        &TelegramKey::production(),
        TELEGRAM_SIGNED_AT + 60,
    )
    .unwrap();
    assert_eq!(got.user_id, 279_058_397);
    assert_eq!(got.start_param, None);
}

#[test]
fn telegrams_own_signature_holds_for_no_other_bot_key_or_user() {
    let at = TELEGRAM_SIGNED_AT + 60;
    let production = TelegramKey::production();
    assert_eq!(
        verify(TELEGRAM_SIGNED, TELEGRAM_SIGNED_BOT - 1, &production, at),
        Err(InitDataError::NotSignedByTelegram)
    );
    let test_env = TelegramKey::from_hex(TEST_ENVIRONMENT_KEY).unwrap();
    assert_eq!(
        verify(TELEGRAM_SIGNED, TELEGRAM_SIGNED_BOT, &test_env, at),
        Err(InitDataError::NotSignedByTelegram)
    );
    let other_user = TELEGRAM_SIGNED.replacen("279058397", "279058398", 1);
    assert_eq!(
        verify(&other_user, TELEGRAM_SIGNED_BOT, &production, at),
        Err(InitDataError::NotSignedByTelegram)
    );
    let with_param = format!("{TELEGRAM_SIGNED}&start_param=run_wipe");
    assert_eq!(
        verify(&with_param, TELEGRAM_SIGNED_BOT, &production, at),
        Err(InitDataError::NotSignedByTelegram)
    );
}

#[test]
fn the_name_shown_is_the_users_without_terminal_tricks() {
    let pair = test_pair();
    let raw = launch(&pair, BOT, &usual("a"));
    assert_eq!(
        verify(&raw, BOT, &key_of(&pair), NOW).unwrap().name,
        "Ana Silva (@ana_s)"
    );
    let mut fields = usual("a");
    fields[0].1 = "{\"id\":5,\"first_name\":\"Eve\\u001b[2J\\u202e\\u0007\"}".to_string();
    let raw = launch(&pair, BOT, &fields);
    assert_eq!(
        verify(&raw, BOT, &key_of(&pair), NOW).unwrap().name,
        "Eve[2J"
    );
}
