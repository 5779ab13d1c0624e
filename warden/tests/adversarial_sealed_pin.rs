//! A relay that carries the sealed PIN, or that makes the buttons, attacks
//! prod mode off on a server bound to the person's Telegram account: it
//! signs a tap and passes the PIN it once saw, drops or garbles the seal,
//! replays a seal made for another proposal, or puts a key of its own in
//! the button so the page seals the PIN for it. Prod mode stays on each
//! time; only the person's launch with the PIN sealed for this proposal's
//! key turns it off.

use aromba_testkit::telegram::{PERSON, launch_of, seal_pin, seal_pin_with};
use aromba_testkit::warden::{self as support, bound, refused};

use aromba_warden::approvals::text_sha256;
use aromba_warden::ladder::Clock;
use aromba_warden::seal::SealKey;
use aromba_warden::telegram::action_param;
use aromba_warden_proto::{Request, Response};
use support::Warden;

const PIN: &str = "472913";

fn prod_mode_on(w: &Warden) -> bool {
    w.status().prod_mode.starts_with("on")
}

fn bound_in_prod_mode(name: &str) -> Warden {
    let w = bound(name);
    w.set_pin_and_prod_mode_on(PIN);
    w
}

fn approve(w: &Warden, param: &str, sealed_pin: Option<String>) -> Response {
    w.ask(&Request::ApproveInApp {
        launch: launch_of(PERSON, Some(param), w.clock.now()),
        sealed_pin,
    })
}

#[test]
fn a_relay_signed_tap_with_the_pin_cannot_turn_prod_mode_off() {
    let w = bound_in_prod_mode("adv-seal-tap");
    let (action, server, app) = w.proposal(&Request::ProposeProdModeOff);
    assert!(
        app.is_some(),
        "on a bound server prod mode off is in the app"
    );
    // The relay learned the PIN somehow, and signs the tap itself: a
    // relay tap has no field for a PIN, so with one the request does not
    // decode, and without one it is of the wrong route.
    let tap = aromba_warden_proto::encode_request(&w.relay_tap(&server, &action, "approve"));
    let with_pin =
        String::from_utf8(tap)
            .unwrap()
            .replacen('{', &format!(r#"{{"pin":"{PIN}","#), 1);
    let answer = w.ask_raw(with_pin.as_bytes());
    assert!(
        matches!(&answer, Response::Error { message } if message.starts_with("malformed request")),
        "a relay tap with a PIN: {answer:?}"
    );
    assert!(!format!("{answer:?}").contains(PIN), "{answer:?}");
    let why = refused(w.ask(&w.relay_tap(&server, &action, "approve")));
    assert!(why.contains("only in the Mini App"), "{why}");
    assert!(prod_mode_on(&w));
    assert!(
        w.ladder() >= 1,
        "a relay approving an app action is a signal"
    );
}

#[test]
fn an_approval_without_its_sealed_pin_turns_nothing_off_and_counts_no_wrong_pin() {
    let w = bound_in_prod_mode("adv-seal-dropped");
    for _ in 0..6 {
        let (_, param) = w.propose_in_app(&Request::ProposeProdModeOff);
        let why = refused(approve(&w, &param, None));
        assert!(why.contains("did not arrive sealed"), "{why}");
    }
    assert!(prod_mode_on(&w));
    assert_eq!(w.ladder(), 0, "a dropped seal is the relay's to drop");
    // Six dropped seals locked nothing: the PIN still works.
    let (_, param) = w.propose_in_app(&Request::ProposeProdModeOff);
    assert!(matches!(
        approve(&w, &param, Some(seal_pin(&param, PIN))),
        Response::Noted { .. }
    ));
    assert!(!prod_mode_on(&w));
}

#[test]
fn a_garbled_seal_turns_nothing_off_and_moves_no_ladder() {
    let w = bound_in_prod_mode("adv-seal-garbled");
    let (_, param) = w.propose_in_app(&Request::ProposeProdModeOff);
    let sealed = seal_pin(&param, PIN);
    // One character changed in the ciphertext.
    let mut garbled: Vec<char> = sealed.chars().collect();
    let at = garbled.len() - 20;
    garbled[at] = if garbled[at] == 'A' { 'B' } else { 'A' };
    let why = refused(approve(&w, &param, Some(garbled.into_iter().collect())));
    assert!(why.contains("does not open"), "{why}");
    assert!(prod_mode_on(&w));
    assert_eq!(w.ladder(), 0);
}

#[test]
fn a_pin_sealed_for_an_earlier_proposal_opens_for_no_other() {
    let w = bound_in_prod_mode("adv-seal-replayed");
    let (_, first) = w.propose_in_app(&Request::ProposeProdModeOff);
    let seen = seal_pin(&first, PIN);
    let (_, second) = w.propose_in_app(&Request::ProposeProdModeOff);
    assert_ne!(first, second, "each proposal has its own key");
    let why = refused(approve(&w, &second, Some(seen)));
    assert!(why.contains("does not open"), "{why}");
    assert!(prod_mode_on(&w));
}

#[test]
fn a_button_naming_the_relays_own_key_is_refused_before_the_pin_is_looked_at() {
    let w = bound_in_prod_mode("adv-seal-swapped-key");
    let (action, _) = w.propose_in_app(&Request::ProposeProdModeOff);
    // The relay makes the button: the Warden's action and text, its own key.
    let relays = SealKey::generate().unwrap();
    let hash = text_sha256(&w.text_of(&action));
    let param = action_param(&action, &hash, Some(&relays.public_hex()));
    let sealed = seal_pin(&param, PIN);
    assert_eq!(
        relays.open(&sealed, param.as_bytes()).unwrap().expose(),
        PIN,
        "the relay can read what the page sealed for its key"
    );
    let why = refused(approve(&w, &param, Some(sealed)));
    assert!(why.contains("another PIN key"), "{why}");
    assert!(prod_mode_on(&w));
    assert!(w.ladder() >= 1, "a swapped key is the relay's doing");
}

#[test]
fn a_button_without_the_pin_key_is_refused() {
    let w = bound_in_prod_mode("adv-seal-no-key");
    let (action, _) = w.propose_in_app(&Request::ProposeProdModeOff);
    let param = action_param(&action, &text_sha256(&w.text_of(&action)), None);
    let why = refused(approve(&w, &param, None));
    assert!(why.contains("another PIN key"), "{why}");
    assert!(prod_mode_on(&w));
}

#[test]
fn a_sealed_pin_sent_again_turns_prod_mode_off_once() {
    let w = bound_in_prod_mode("adv-seal-twice");
    let (_, param) = w.propose_in_app(&Request::ProposeProdModeOff);
    let request = Request::ApproveInApp {
        launch: launch_of(PERSON, Some(&param), w.clock.now()),
        sealed_pin: Some(seal_pin(&param, PIN)),
    };
    assert!(matches!(w.ask(&request), Response::Noted { .. }));
    w.set_pin_and_prod_mode_on(PIN);
    let again = w.ask(&request);
    assert!(!matches!(again, Response::Noted { .. }), "{again:?}");
    assert!(prod_mode_on(&w), "the replay turned nothing off");
}

#[test]
fn a_seal_on_an_action_without_a_pin_is_ignored_and_reveals_nothing() {
    // A seal sent with a red run (which needs no PIN) is not opened: the
    // approval is judged as without it.
    let w = bound("adv-seal-on-run");
    let (_, _, param) = w.proposed_wipe();
    let r = approve(&w, &param, Some("AAAA".repeat(20)));
    assert!(matches!(r, Response::Receipt { ok: true, .. }), "{r:?}");
}

// ---- Attack round: the sealed PIN against the running Warden. ----

use base64ct::{Base64UrlUnpadded, Encoding};

fn hex32(h: &str) -> Vec<u8> {
    aromba_warden_proto::decode_hex(h).unwrap()
}

fn pin_wrong_lines(w: &Warden) -> usize {
    support::lines_with(&w.journal(), "pin-wrong")
}

#[test]
fn a_low_order_or_non_canonical_zero_page_key_is_no_page_key_and_moves_nothing() {
    let w = bound_in_prod_mode("adv-seal-low-order");
    let p_minus_1 = format!("ec{}7f", "ff".repeat(30));
    let p = format!("ed{}7f", "ff".repeat(30));
    let p_plus_1 = format!("ee{}7f", "ff".repeat(30));
    let low_order = [
        "0".repeat(64),
        format!("01{}", "0".repeat(62)),
        "e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800".into(),
        "5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157".into(),
        p_minus_1,
        p,
        p_plus_1,
        // The order-8 point with its top bit set (RFC 7748 masks it).
        "e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b880".into(),
    ];
    for key in low_order {
        let (_, param) = w.propose_in_app(&Request::ProposeProdModeOff);
        let sealed = [hex32(&key), vec![7u8; 12], vec![0x41u8; 6 + 16]].concat();
        let why = refused(approve(
            &w,
            &param,
            Some(Base64UrlUnpadded::encode_string(&sealed)),
        ));
        assert!(why.contains("did not arrive sealed"), "{key}: {why}");
        assert!(
            why.contains("no page makes") || why.contains("not of the page's form"),
            "{key}: {why}"
        );
        assert!(prod_mode_on(&w), "{key}");
    }
    assert_eq!(
        w.ladder(),
        0,
        "what the relay carries is the relay's to garble"
    );
    assert_eq!(pin_wrong_lines(&w), 0);
}

#[test]
fn a_page_key_with_its_top_bit_flipped_does_not_open_the_persons_seal() {
    // X25519 ignores the top bit, so the shared secret is the same; the
    // HKDF salt holds the key as sent, so the relay's flip must not open.
    let w = bound_in_prod_mode("adv-seal-top-bit");
    let (_, param) = w.propose_in_app(&Request::ProposeProdModeOff);
    let mut bytes = Base64UrlUnpadded::decode_vec(&seal_pin(&param, PIN)).unwrap();
    bytes[31] ^= 0x80;
    let why = refused(approve(
        &w,
        &param,
        Some(Base64UrlUnpadded::encode_string(&bytes)),
    ));
    assert!(why.contains("does not open"), "{why}");
    assert!(prod_mode_on(&w));
    assert_eq!(w.ladder(), 0);
}

#[test]
fn a_seal_for_this_key_under_another_start_param_encoding_does_not_open() {
    // The right Warden key, the associated data written another way than
    // the launch's decoded start_param: percent-encoded, upper case, with
    // an extra part, a trailing newline, the field's name, or nothing.
    let w = bound_in_prod_mode("adv-seal-aad");
    let variants: Vec<fn(&str) -> String> = vec![
        |p| p.replace('_', "%5F"),
        |p| p.to_uppercase(),
        |p| format!("x_{p}"),
        |p| format!("{p}\n"),
        |p| format!("start_param={p}"),
        |_| String::new(),
    ];
    for (i, aad) in variants.iter().enumerate() {
        let (_, param) = w.propose_in_app(&Request::ProposeProdModeOff);
        let key = &param[param.len() - 64..];
        let sealed = seal_pin_with(
            key,
            aad(&param).as_bytes(),
            PIN.as_bytes(),
            [i as u8 + 1; 32],
            [0; 12],
        );
        let why = refused(approve(&w, &param, Some(sealed)));
        assert!(why.contains("does not open"), "variant {i}: {why}");
        assert!(prod_mode_on(&w), "variant {i}");
    }
    assert_eq!(w.ladder(), 0);
    assert_eq!(pin_wrong_lines(&w), 0);
    // The same helper with the start_param itself opens: the variants
    // failed for their associated data alone.
    let (_, param) = w.propose_in_app(&Request::ProposeProdModeOff);
    let key = &param[param.len() - 64..];
    let sealed = seal_pin_with(key, param.as_bytes(), PIN.as_bytes(), [9; 32], [0; 12]);
    assert!(matches!(
        approve(&w, &param, Some(sealed)),
        Response::Noted { .. }
    ));
    assert!(!prod_mode_on(&w));
}

#[test]
fn a_percent_encoded_start_param_in_the_launch_opens_the_same_seal_once() {
    // Telegram signs the decoded fields, so a relay (or Worker) may write
    // the launch's start_param percent-encoded without breaking the
    // signature: the seal is over the decoded start_param, so it opens,
    // and the raw launch after it is the same approval (spent).
    let w = bound_in_prod_mode("adv-seal-pct-launch");
    let (_, param) = w.propose_in_app(&Request::ProposeProdModeOff);
    let launch = launch_of(PERSON, Some(&param), w.clock.now());
    let encoded = launch.replace(
        &format!("start_param={param}"),
        &format!("start_param={}", param.replace('_', "%5F")),
    );
    assert_ne!(launch, encoded);
    let sealed = seal_pin(&param, PIN);
    let r = w.ask(&Request::ApproveInApp {
        launch: encoded,
        sealed_pin: Some(sealed.clone()),
    });
    assert!(matches!(r, Response::Noted { .. }), "{r:?}");
    assert!(!prod_mode_on(&w));
    w.set_pin_and_prod_mode_on(PIN);
    let again = w.ask(&Request::ApproveInApp {
        launch,
        sealed_pin: Some(sealed),
    });
    assert!(!matches!(again, Response::Noted { .. }), "{again:?}");
    assert!(prod_mode_on(&w));
}

#[test]
fn a_start_param_with_an_upper_case_key_or_extra_parts_opens_nothing_and_spends_nothing() {
    // The relay makes the button's link, so the person's launch can carry
    // a start_param of another shape: refused (a signal: the relay's
    // doing), nothing opened, and the proposal not spent.
    for (i, bad) in [
        |h: &str, k: &str| format!("{h}_{}", k.to_uppercase()),
        |h: &str, k: &str| format!("{h}_{k}_{k}"),
        |h: &str, k: &str| format!("{h}_{k}_"),
        |h: &str, k: &str| format!("{h}__{k}"),
    ]
    .iter()
    .enumerate()
    {
        let w = bound_in_prod_mode(&format!("adv-seal-param-shape-{i}"));
        let (_, param) = w.propose_in_app(&Request::ProposeProdModeOff);
        let (head, key) = param.rsplit_once('_').unwrap();
        let bad = bad(head, key);
        let r = approve(&w, &bad, Some(seal_pin(&param, PIN)));
        assert!(!matches!(r, Response::Noted { .. }), "{bad}: {r:?}");
        assert!(prod_mode_on(&w), "{bad}");
        assert_eq!(pin_wrong_lines(&w), 0);
        w.resume();
        let r = approve(&w, &param, Some(seal_pin(&param, PIN)));
        assert!(matches!(r, Response::Noted { .. }), "{bad}: {r:?}");
        assert!(!prod_mode_on(&w));
    }
}

#[test]
fn a_validly_sealed_odd_pin_is_a_wrong_pin_and_an_unreadable_one_is_not() {
    let w = bound_in_prod_mode("adv-seal-odd-pin");
    // Sealed properly, but a PIN no `aromba pin set` takes: checked (and
    // counted) as any wrong PIN, never a crash, never prod mode off; the
    // right PIN after it still works (one wrong PIN locks nothing).
    let odd = [
        format!("{PIN}\n"),
        format!("{PIN}\0"),
        format!(" {PIN}"),
        PIN.repeat(40),           // 240 characters
        "\u{10ffff}".repeat(64),  // 64 four-byte characters
        format!("{PIN}\u{202e}"), // a bidi override
    ];
    for pin in &odd {
        let (_, param) = w.propose_in_app(&Request::ProposeProdModeOff);
        let why = refused(approve(&w, &param, Some(seal_pin(&param, pin))));
        assert!(why.contains("wrong PIN"), "{pin:?}: {why}");
        assert!(prod_mode_on(&w), "{pin:?}");
        let (_, param) = w.propose_in_app(&Request::ProposeProdModeOff);
        let r = approve(&w, &param, Some(seal_pin(&param, PIN)));
        assert!(matches!(r, Response::Noted { .. }), "{pin:?}: {r:?}");
        w.set_pin_and_prod_mode_on(PIN);
    }
    assert_eq!(pin_wrong_lines(&w), odd.len());
    let wrong_before = pin_wrong_lines(&w);
    // Sealed, but nothing, no text, or more than the Warden reads inside:
    // not the person's PIN, and no wrong PIN.
    let (_, param) = w.propose_in_app(&Request::ProposeProdModeOff);
    let why = refused(approve(&w, &param, Some(seal_pin(&param, ""))));
    assert!(why.contains("did not arrive sealed"), "{why}");
    let (_, param) = w.propose_in_app(&Request::ProposeProdModeOff);
    let key = param[param.len() - 64..].to_string();
    let not_text = seal_pin_with(
        &key,
        param.as_bytes(),
        &[0xff, 0xfe, 0x34],
        [3; 32],
        [1; 12],
    );
    let why = refused(approve(&w, &param, Some(not_text)));
    assert!(why.contains("holds no text"), "{why}");
    let (_, param) = w.propose_in_app(&Request::ProposeProdModeOff);
    let why = refused(approve(
        &w,
        &param,
        Some(seal_pin(&param, &"\u{10ffff}".repeat(65))),
    ));
    assert!(why.contains("did not arrive sealed"), "{why}");
    assert!(prod_mode_on(&w));
    assert_eq!(pin_wrong_lines(&w), wrong_before);
    assert_eq!(w.ladder(), 0);
}

#[test]
fn a_relay_resealing_its_own_guess_for_the_public_key_gets_a_counted_guess_only() {
    // The Warden's key is public (in the start_param) and a seal names no
    // sender: a relay holding the person's launch can drop the person's
    // seal and seal a guess of its own. It must not be a free guess.
    let w = bound_in_prod_mode("adv-seal-reseal-guess");
    let (_, param) = w.propose_in_app(&Request::ProposeProdModeOff);
    let why = refused(approve(&w, &param, Some(seal_pin(&param, "000000"))));
    assert!(why.contains("wrong PIN"), "{why}");
    assert_eq!(pin_wrong_lines(&w), 1, "the relay's guess is counted");
    assert!(prod_mode_on(&w));
    // The launch it used is spent: no second guess on it.
    let r = approve(&w, &param, Some(seal_pin(&param, "111111")));
    assert!(!matches!(r, Response::Noted { .. }), "{r:?}");
    assert_eq!(pin_wrong_lines(&w), 1, "a spent launch opens no seal");
    assert!(prod_mode_on(&w));
}

#[test]
fn racing_two_launches_with_the_right_and_a_wrong_pin_spends_the_action_once() {
    let w = bound_in_prod_mode("adv-seal-race");
    // Four rounds: were the wrong PIN to win each, four wrong PINs lock
    // nothing (five would, and rightly move the ladder).
    for round in 0..4 {
        let (_, param) = w.propose_in_app(&Request::ProposeProdModeOff);
        let now = w.clock.now();
        // Two launches of the person's (two opens of the app): two
        // signatures.
        let right = Request::ApproveInApp {
            launch: launch_of(PERSON, Some(&param), now),
            sealed_pin: Some(seal_pin(&param, PIN)),
        };
        let wrong = Request::ApproveInApp {
            launch: launch_of(PERSON, Some(&param), now - 1),
            sealed_pin: Some(seal_pin(&param, "999999")),
        };
        let before = pin_wrong_lines(&w);
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(|| w.ask(&right));
            let b = s.spawn(|| w.ask(&wrong));
            (a.join().unwrap(), b.join().unwrap())
        });
        let noted = [&a, &b]
            .iter()
            .filter(|r| matches!(r, Response::Noted { .. }))
            .count();
        let answered = [&a, &b]
            .iter()
            .filter(|r| matches!(r, Response::AlreadyAnswered { .. }))
            .count();
        assert_eq!(answered, 1, "round {round}: {a:?} {b:?}");
        assert!(noted <= 1);
        let wrongs = pin_wrong_lines(&w) - before;
        assert_eq!(
            noted + wrongs,
            1,
            "round {round}: one PIN checked: {a:?} {b:?}"
        );
        assert_eq!(prod_mode_on(&w), noted == 0, "round {round}");
        if noted == 1 {
            w.set_pin_and_prod_mode_on(PIN);
        }
    }
    assert_eq!(w.ladder(), 0, "the person's two opens are no anomaly");
}

#[test]
fn a_seal_that_did_not_open_spent_the_action_and_the_same_launch_is_no_free_retry() {
    let w = bound_in_prod_mode("adv-seal-no-retry");
    let (_, param) = w.propose_in_app(&Request::ProposeProdModeOff);
    let launch = launch_of(PERSON, Some(&param), w.clock.now());
    let why = refused(w.ask(&Request::ApproveInApp {
        launch: launch.clone(),
        sealed_pin: Some("A".repeat(80)),
    }));
    assert!(why.contains("did not arrive sealed"), "{why}");
    // The same launch again, now with the right seal (the relay held it
    // back to try something first): spent, nothing turned off.
    let r = w.ask(&Request::ApproveInApp {
        launch,
        sealed_pin: Some(seal_pin(&param, PIN)),
    });
    assert!(!matches!(r, Response::Noted { .. }), "{r:?}");
    assert!(prod_mode_on(&w));
    assert_eq!(pin_wrong_lines(&w), 0);
    // The same launch twice is a replay: a signal, as for a tap.
    assert!(w.ladder() >= 1);
    w.clock.advance(61);
    // The person, proposing again, is not locked out.
    let (_, param) = w.propose_in_app(&Request::ProposeProdModeOff);
    w.clock.advance(61);
    let r = approve(&w, &param, Some(seal_pin(&param, PIN)));
    assert!(matches!(r, Response::Noted { .. }), "{r:?}");
    assert!(!prod_mode_on(&w));
}

#[test]
fn a_server_without_a_telegram_account_takes_no_sealed_pin_from_the_app() {
    // Paired before the Mini App: prod mode off is not proposed at all (it
    // is approved only in the app, and there is no account to approve
    // it). A Worker passing an app approval with a seal gets nothing.
    let w = Warden::start_unbound("adv-seal-legacy", &[]);
    w.set_pin_and_prod_mode_on(PIN);
    let why = refused(w.ask(&Request::ProposeProdModeOff));
    assert!(why.contains("sudo aromba pair"), "{why}");
    let key = SealKey::generate().unwrap();
    let param = action_param(
        &"0".repeat(32),
        &text_sha256("Turn prod mode off?"),
        Some(&key.public_hex()),
    );
    let why = refused(approve(&w, &param, Some(seal_pin(&param, PIN))));
    assert!(why.contains("no Telegram account is pinned"), "{why}");
    assert!(prod_mode_on(&w));
    assert_eq!(pin_wrong_lines(&w), 0);
}

#[test]
fn at_freeze_a_sealed_approval_is_held_unspent_and_unopened() {
    let w = bound_in_prod_mode("adv-seal-freeze");
    let (_, param) = w.propose_in_app(&Request::ProposeProdModeOff);
    for _ in 0..2 {
        let _ = w.ask(&support::deny_list_hit());
        w.clock.advance(61);
    }
    assert!(w.ladder() >= 2);
    let wrong = refused(approve(&w, &param, Some(seal_pin(&param, "000000"))));
    assert!(wrong.contains("Freeze"), "{wrong}");
    assert_eq!(pin_wrong_lines(&w), 0, "nothing opened at Freeze");
    assert!(prod_mode_on(&w));
    w.resume();
    // Not spent: the person's approval works once the ladder is down.
    let r = approve(&w, &param, Some(seal_pin(&param, PIN)));
    assert!(matches!(r, Response::Noted { .. }), "{r:?}");
    assert!(!prod_mode_on(&w));
}

#[test]
fn neither_the_pin_nor_its_seal_reaches_the_journal_or_a_refusal() {
    let w = bound_in_prod_mode("adv-seal-leak");
    let guess = "Guess-SECRET-4711";
    let (_, param) = w.propose_in_app(&Request::ProposeProdModeOff);
    let wrong_seal = seal_pin(&param, guess);
    let r = approve(&w, &param, Some(wrong_seal.clone()));
    let why = refused(r);
    assert!(!why.contains(guess) && !why.contains(&wrong_seal), "{why}");
    let (_, param) = w.propose_in_app(&Request::ProposeProdModeOff);
    let garbled = format!("{}AB", &seal_pin(&param, PIN)[..60]);
    let why = refused(approve(&w, &param, Some(garbled.clone())));
    assert!(!why.contains(&garbled), "{why}");
    let (action, param) = w.propose_in_app(&Request::ProposeProdModeOff);
    let right_seal = seal_pin(&param, PIN);
    assert!(matches!(
        approve(&w, &param, Some(right_seal.clone())),
        Response::Noted { .. }
    ));
    let journal = w.journal();
    for secret in [guess, PIN, &wrong_seal, &garbled, &right_seal] {
        assert!(!journal.contains(secret), "{secret} in the journal");
    }
    // Nor the seal key's secret half: it stays in the action's record.
    let record = std::fs::read_to_string(
        w.layout()
            .state_dir
            .join("actions")
            .join(format!("{action}.spent")),
    )
    .unwrap_or_default();
    if let Some(secret) = serde_json::from_str::<serde_json::Value>(&record)
        .ok()
        .and_then(|v| {
            v.get("seal_secret")
                .and_then(|s| s.as_str())
                .map(String::from)
        })
    {
        assert!(
            !journal.contains(&secret),
            "the seal's secret in the journal"
        );
    }
    let st = format!("{:?}", w.status());
    assert!(!st.contains(PIN) && !st.contains(guess));
}

#[test]
fn the_right_pin_sealed_with_a_red_runs_launch_is_not_checked_or_counted() {
    // A Worker attaching the person's prod-mode-off seal to a red run's
    // launch: the run goes ahead as approved (it needs no PIN) and the
    // seal is neither opened nor counted; prod mode stays on.
    let w = bound("adv-seal-cross-action");
    w.set_pin_and_prod_mode_on(PIN);
    let (_, pmo) = w.propose_in_app(&Request::ProposeProdModeOff);
    let (_, _, run) = w.proposed_wipe();
    let r = approve(&w, &run, Some(seal_pin(&pmo, "000000")));
    assert!(!matches!(r, Response::Noted { .. }), "{r:?}");
    assert!(prod_mode_on(&w));
    assert_eq!(pin_wrong_lines(&w), 0);
    // The prod-mode-off proposal is untouched.
    assert!(matches!(
        approve(&w, &pmo, Some(seal_pin(&pmo, PIN))),
        Response::Noted { .. }
    ));
}

#[test]
fn a_huge_or_otherwise_encoded_seal_is_not_the_pages_form_and_counts_nothing() {
    let w = bound_in_prod_mode("adv-seal-encodings");
    let (_, param) = w.propose_in_app(&Request::ProposeProdModeOff);
    let honest = seal_pin(&param, PIN);
    let bytes = Base64UrlUnpadded::decode_vec(&honest).unwrap();
    let standard = base64ct::Base64::encode_string(&bytes);
    for (i, odd) in [
        "A".repeat(60_000),
        format!("{honest}="),
        format!("{honest}=="),
        standard.replace('=', ""),
        format!(" {honest}"),
        format!("{honest}\n"),
        honest.to_uppercase(),
    ]
    .into_iter()
    .enumerate()
    {
        let (_, param) = if i == 0 {
            (String::new(), param.clone())
        } else {
            w.propose_in_app(&Request::ProposeProdModeOff)
        };
        let r = approve(&w, &param, Some(odd));
        assert!(!matches!(r, Response::Noted { .. }), "{i}: {r:?}");
        assert!(prod_mode_on(&w), "{i}");
    }
    assert_eq!(pin_wrong_lines(&w), 0);
    assert_eq!(w.ladder(), 0);
}
