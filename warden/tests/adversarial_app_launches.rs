//! Attacks on the launch data itself and on approvals around it, against a
//! real Warden: as a hostile relay (it holds the bot token, sees every
//! launch it carries, and picks the `start_param` of every button it sends)
//! or a hostile Worker (it passes launches on, or makes its own) — parsing
//! differentials, re-encodings, replays, launches aimed at other actions,
//! the Freeze, floods, and proposals made before the account was pinned
//! (two breaks the attack round found: they kept the relay's route).
//!
//! Each test is named for its attack.

use aromba_testkit::telegram::{BOT_ID, BOT_TOKEN, PERSON, launch_of, test_pub};
use aromba_testkit::warden as support;

use aromba_testkit::telegram::{Person, launch, signature, test_key};
use aromba_warden::init_data::{InitDataError, TelegramKey, verify};
use aromba_warden::ladder::Clock;
use aromba_warden_proto::{Request, Response};
use support::{Warden, refused};

// ---- launch data made by hand, signed with the test "Telegram" key ----

/// Telegram's signature over `decoded` (key, value) fields for `bot_id`,
/// with the test key: base64url.
fn sign(decoded: &[(&str, &str)], bot_id: u64) -> String {
    let fields: Vec<(String, String)> = decoded
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    signature(&test_key(), bot_id, &fields)
}

fn key() -> TelegramKey {
    TelegramKey::from_hex(test_pub()).unwrap()
}

const USER: &str = r#"{"id":4242,"first_name":"Ana"}"#;
const USER_ENC: &str = "%7B%22id%22%3A4242%2C%22first_name%22%3A%22Ana%22%7D";

// ---- parsing differentials, on the Warden's own parser ----

#[test]
fn a_field_named_twice_in_two_encodings_is_refused() {
    let now = 1_800_000_000u64;
    let at = now.to_string();
    let sig = sign(&[("auth_date", &at), ("user", USER)], BOT_ID);
    // `us%65r` is `user` once decoded: a second user the relay slips in.
    let other = "%7B%22id%22%3A1%7D";
    for raw in [
        format!("auth_date={at}&user={USER_ENC}&us%65r={other}&signature={sig}"),
        format!("auth_date={at}&us%65r={other}&user={USER_ENC}&signature={sig}"),
        format!("auth_date={at}&user={USER_ENC}&signature={sig}&sign%61ture={sig}"),
        format!("auth_date={at}&user={USER_ENC}&signature={sig}&st%61rt_param=x&start_param=y"),
    ] {
        let r = verify(&raw, BOT_ID, &key(), now);
        assert!(
            matches!(r, Err(InitDataError::Malformed(ref w)) if w.contains("twice")),
            "{raw}: {r:?}"
        );
    }
}

#[test]
fn re_encoding_a_signed_launch_changes_nothing_it_vouches_for() {
    // The relay may re-encode what Telegram signed (it is the decoded
    // bytes that are signed): the result must vouch for the very same
    // fields, never for others.
    let now = 1_800_000_000u64;
    let at = now.to_string();
    let param = format!("{}_{}", "a".repeat(32), "b".repeat(64));
    let sig = sign(
        &[("auth_date", &at), ("user", USER), ("start_param", &param)],
        BOT_ID,
    );
    let plain = format!("auth_date={at}&user={USER_ENC}&start_param={param}&signature={sig}");
    let good = verify(&plain, BOT_ID, &key(), now).expect("the plain launch verifies");
    let encoded_param: String = param.bytes().map(|b| format!("%{b:02x}")).collect();
    let re_encoded =
        format!("%61uth_date={at}&user={USER_ENC}&start_param={encoded_param}&signature={sig}");
    let again = verify(&re_encoded, BOT_ID, &key(), now).expect("the same fields verify");
    assert_eq!(good.start_param, again.start_param);
    assert_eq!(good.user_id, again.user_id);
    // `+` is a space: a `+` in place of `%20` is the same byte, but a `+`
    // where Telegram signed a `+` (sent as %2B) is not.
    let with_plus = plain.replace("start_param=", "start_param=+");
    assert!(verify(&with_plus, BOT_ID, &key(), now).is_err());
}

#[test]
fn a_signature_hidden_in_the_user_json_or_an_empty_field_is_not_the_signature() {
    let now = 1_800_000_000u64;
    let at = now.to_string();
    let sig = sign(&[("auth_date", &at), ("user", USER)], BOT_ID);
    let user_with_sig = format!("%7B%22id%22%3A4242%2C%22signature%22%3A%22{sig}%22%7D");
    for raw in [
        format!("auth_date={at}&user={user_with_sig}"),
        format!("auth_date={at}&user={USER_ENC}&signature="),
        format!("auth_date={at}&user={USER_ENC}&signature={sig}&"),
        format!("auth_date={at}&user={USER_ENC}&signature={sig}&start_param="),
        format!("auth_date=&user={USER_ENC}&signature={sig}"),
        format!("auth_date=+{at}&user={USER_ENC}&signature={sig}"),
        format!("auth_date={at}&user={USER_ENC}&signature={sig}%00"),
        format!("auth_date={at}&user={USER_ENC}&signature={sig}&x=%ff"),
        format!("auth_date={at}&user={USER_ENC}&signature={sig}&x=%e2%80%ae"),
    ] {
        assert!(verify(&raw, BOT_ID, &key(), now).is_err(), "{raw}");
    }
}

#[test]
fn a_user_json_with_two_ids_names_one_account_only() {
    // serde_json keeps the last of two keys: the relay's HMAC check and
    // the Warden must read the same one, and Telegram signed it as is.
    let now = 1_800_000_000u64;
    let at = now.to_string();
    let user = r#"{"id":1,"id":4242}"#;
    let sig = sign(&[("auth_date", &at), ("user", user)], BOT_ID);
    let enc: String = user.bytes().map(|b| format!("%{b:02X}")).collect();
    let raw = format!("auth_date={at}&user={enc}&signature={sig}");
    match verify(&raw, BOT_ID, &key(), now) {
        // Refusing it is as good.
        Err(_) => {}
        Ok(l) => assert_eq!(
            l.user_id, 4242,
            "the Warden reads the last id, as the relay does"
        ),
    }
}

#[test]
fn a_launch_from_the_far_future_is_refused() {
    let now = 1_800_000_000u64;
    for at in [now + 601, u64::MAX, now + 10 * 365 * 86_400] {
        let at_s = at.to_string();
        let sig = sign(&[("auth_date", &at_s), ("user", USER)], BOT_ID);
        let raw = format!("auth_date={at_s}&user={USER_ENC}&signature={sig}");
        assert!(
            matches!(
                verify(&raw, BOT_ID, &key(), now),
                Err(InitDataError::NotFresh { .. })
            ),
            "{at}"
        );
    }
}

#[test]
fn an_over_long_launch_is_refused_before_any_signature_work() {
    let now = 1_800_000_000u64;
    let raw = format!("auth_date={now}&user={USER_ENC}&x={}", "a".repeat(5000));
    assert_eq!(
        verify(&raw, BOT_ID, &key(), now),
        Err(InitDataError::TooLong)
    );
}

#[test]
fn a_signature_re_encoded_in_base64_is_not_a_second_signature() {
    // The last base64url digit of 64 bytes carries 2 bits and 4 spare:
    // a relay that flips the spare bits makes another text for the same
    // signature, and the Warden would take a replay for a new launch.
    let now = 1_800_000_000u64;
    let at = now.to_string();
    let sig = sign(&[("auth_date", &at), ("user", USER)], BOT_ID);
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let last = sig.as_bytes()[sig.len() - 1];
    let idx = alphabet.iter().position(|c| *c == last).unwrap();
    for spare in 1..16usize {
        let other = alphabet[(idx & !0xf) | ((idx & 0xf) ^ spare)] as char;
        let mut variant = sig[..sig.len() - 1].to_string();
        variant.push(other);
        let raw = format!("auth_date={at}&user={USER_ENC}&signature={variant}");
        assert!(verify(&raw, BOT_ID, &key(), now).is_err(), "{variant}");
    }
}

// ---- against a running Warden ----

#[test]
fn a_launch_replayed_with_its_fields_re_encoded_is_still_the_same_launch() {
    let w = support::bound("app-r2-re-encoded-replay");
    let (_, _, param) = w.proposed_wipe();
    let once = match w.in_app(PERSON, &param) {
        Request::ApproveInApp { launch, .. } => launch,
        _ => unreachable!(),
    };
    assert!(matches!(
        w.ask(&Request::ApproveInApp {
            launch: once.clone(),
            sealed_pin: None,
        }),
        Response::Receipt { ok: true, .. }
    ));
    std::fs::remove_file(w.touched.join("wiped")).unwrap();
    // The same launch, its auth_date's digits escaped: a replay all the same.
    let re = once.replacen("auth_date=", "auth_d%61te=", 1);
    let r = w.ask(&Request::ApproveInApp {
        launch: re,
        sealed_pin: None,
    });
    assert!(!matches!(r, Response::Receipt { .. }), "{r:?}");
    assert!(!w.touched.join("wiped").exists());
    assert_eq!(w.ladder(), 1, "a replay is a signal, however it is spelled");
}

#[test]
fn a_launch_for_one_action_approves_no_other_action() {
    let w = support::bound("app-r2-cross-action");
    let (first, _, param_one) = w.proposed_wipe();
    let (second, _, param_two) = w.proposed_wipe();
    assert_ne!(first, second);
    // The relay takes the second action's text hash with the first's id.
    let (_, hash_two) = param_two.split_once('_').unwrap();
    let mixed = format!("{first}_{hash_two}");
    let _ = param_one;
    let r = w.ask(&w.in_app(PERSON, &mixed));
    // Both are the same chore's same text: this is the first action,
    // approved for its own text, which is no break. What must not happen
    // is two runs from one launch.
    if matches!(r, Response::Receipt { ok: true, .. }) {
        std::fs::remove_file(w.touched.join("wiped")).unwrap();
    }
    w.clock.advance(61);
    let again = w.ask(&w.in_app(PERSON, &mixed));
    assert!(!matches!(again, Response::Receipt { .. }), "{again:?}");
}

#[test]
fn a_pairing_launch_approves_no_action_and_an_action_launch_pins_no_account() {
    let w = support::bound("app-r2-pair-vs-action");
    let (_, _, param) = w.proposed_wipe();
    // The action's launch, offered as the pairing's.
    let r = w.control(&Request::PinTelegramAccount {
        launch: launch_of(PERSON + 7, Some(&param), w.clock.now()),
        bot_id: BOT_ID,
        start_param: param.clone(),
    });
    assert!(!matches!(r, Response::TelegramAccount { .. }), "{r:?}");
    assert_eq!(w.status().telegram_user, Some(PERSON as u64));
    // The pairing's `start_param` prefix glued before an action's.
    w.clock.advance(61);
    let why = refused(w.ask(&w.in_app(PERSON, &format!("pair_{param}"))));
    assert!(why.contains("not opened from a proposal"), "{why}");
    assert!(!w.touched.join("wiped").exists());
}

#[test]
fn an_app_approval_at_freeze_or_cut_runs_nothing_and_is_not_spent() {
    let w = support::bound("app-r2-freeze");
    let (_, _, param) = w.proposed_wipe();
    // Two deny-list hits: Slow, then Freeze.
    for _ in 0..2 {
        let _ = w.ask(&support::deny_list_hit());
        w.clock.advance(61);
    }
    let st = w.status();
    assert!(st.ladder_step >= 2, "{st:?}");
    let why = refused(w.ask(&w.in_app(PERSON, &param)));
    assert!(why.contains("Freeze"), "{why}");
    assert!(!w.touched.join("wiped").exists());
}

#[test]
fn a_launch_after_the_action_was_cancelled_runs_nothing() {
    let w = support::bound("app-r2-after-cancel");
    let (action, server, param) = w.proposed_wipe();
    let launch = w.in_app(PERSON, &param);
    refused(w.ask(&w.tap(&server, &action, "cancel", None)));
    let r = w.ask(&launch);
    assert!(!matches!(r, Response::Receipt { .. }), "{r:?}");
    assert!(!w.touched.join("wiped").exists());
}

#[test]
fn a_launch_on_the_prod_mode_off_proposal_does_not_skip_the_pin() {
    // The person's own launch, from the Warden's button, but no PIN with
    // it (a relay that drops the sealed PIN): prod mode off needs the PIN.
    // (A button the relay makes without the Warden's PIN key is
    // `adversarial_sealed_pin.rs`'s.)
    let w = support::bound("app-r2-prod-mode-off");
    w.set_pin_and_prod_mode_on("correct-horse-7");
    assert!(w.status().prod_mode.starts_with("on"));
    let (_, _, app) = w.proposal(&Request::ProposeProdModeOff);
    let param = app.expect("prod mode off is approved in the app");
    let r = w.ask(&w.in_app(PERSON, &param));
    assert!(!matches!(r, Response::Receipt { ok: true, .. }), "{r:?}");
    assert!(
        w.status().prod_mode.starts_with("on"),
        "no PIN, no prod mode off"
    );
}

#[test]
fn a_red_run_asked_before_the_account_was_pinned_needs_the_app_after() {
    // A hostile relay types `/run wipe` as the person just before root's
    // `sudo aromba pair` (the relay runs the pairing's flow and knows when
    // it happens). Found by the attack round when such a run was proposed
    // with the relay's route and stayed approvable by its tap for 24 h;
    // now a server without an account proposes no action of the app's
    // route at all, and once it has one the relay's tap approves none.
    let w = Warden::start_unbound("app-r2-before-pin", &[support::wipe_chore()]);
    w.dry_run_shown("wipe");
    let why = refused(w.ask(&Request::Propose {
        chore: "wipe".into(),
    }));
    assert!(why.contains("sudo aromba pair"), "{why}");
    assert!(matches!(
        w.pin_telegram_account(PERSON),
        Response::TelegramAccount { .. }
    ));
    assert_eq!(w.status().telegram_user, Some(PERSON as u64));
    let (action, server, app) = w.proposal(&Request::Propose {
        chore: "wipe".into(),
    });
    assert!(app.is_some(), "bound: approved in the app");
    let r = w.ask(&w.relay_tap(&server, &action, "approve"));
    assert!(
        !w.touched.join("wiped").exists(),
        "a red run approved by the relay alone after the account was pinned: {r:?}"
    );
}

#[test]
fn a_step_down_asked_before_the_account_was_pinned_needs_the_app_after() {
    // The same for "Was that you?": a relay that can step the ladder down
    // can undo what its own behaviour raised.
    let w = Warden::start_unbound("app-r2-step-before-pin", &[support::wipe_chore()]);
    assert!(matches!(
        w.ask(&support::deny_list_hit()),
        Response::Refused { .. }
    ));
    assert_eq!(w.ladder(), 1);
    refused(w.ask(&Request::ProposeStepDown));
    assert!(matches!(
        w.pin_telegram_account(PERSON),
        Response::TelegramAccount { .. }
    ));
    let (action, server, app) = w.proposal(&Request::ProposeStepDown);
    assert!(app.is_some());
    w.clock.advance(120);
    let r = w.ask(&w.relay_tap(&server, &action, "approve"));
    assert_ne!(
        w.status().ladder_name,
        "normal",
        "the relay alone stepped the ladder down after the account was pinned: {r:?}"
    );
}

#[test]
fn a_worker_flooding_forged_step_down_answers_at_slow_climbs_the_ladder() {
    let w = support::bound("app-r2-flood-step-down");
    assert!(matches!(
        w.ask(&support::deny_list_hit()),
        Response::Refused { .. }
    ));
    assert_eq!(w.ladder(), 1);
    let (action, _, param) = w.proposal(&Request::ProposeStepDown);
    let param = param.expect("asked in the app");
    let _ = action;
    // Signed by a key of the Worker's own: each is a signal, unpaced.
    let mallory = aromba_testkit::telegram::LaunchKey::generate().unwrap();
    for _ in 0..5 {
        let forged = launch(
            &mallory,
            BOT_TOKEN,
            &Person::new(PERSON, "Ana"),
            Some(&param),
            w.clock.now(),
        );
        let r = w.ask(&Request::ApproveInApp {
            launch: forged,
            sealed_pin: None,
        });
        assert!(!matches!(r, Response::Ladder { .. }), "{r:?}");
    }
    assert!(w.ladder() >= 2, "forged answers climb the ladder");
    assert_ne!(w.status().ladder_name, "normal");
}

#[test]
fn a_stale_launch_replayed_in_a_flood_at_slow_does_not_fill_the_journal() {
    // The Worker keeps an old launch of the person's for the open "Was
    // that you?" and sends it again and again: each is refused as stale
    // (no signal) and passes unpaced at Slow (a claimed step down). How
    // many journal lines does it cost?
    let w = support::bound("app-r2-stale-flood");
    assert!(matches!(
        w.ask(&support::deny_list_hit()),
        Response::Refused { .. }
    ));
    assert_eq!(w.ladder(), 1);
    let (_, _, param) = w.proposal(&Request::ProposeStepDown);
    let param = param.expect("asked in the app");
    let old = w.in_app(PERSON, &param);
    w.clock.advance(aromba_warden::init_data::FRESH_S + 1);
    let before = w.journal().lines().count();
    let n = 2_000;
    for _ in 0..n {
        let _ = w.ask(&old);
    }
    let after = w.journal().lines().count();
    let added = after - before;
    eprintln!(
        "{n} stale replays: {added} journal lines; ladder {}",
        w.ladder()
    );
    // Bounded by the request flood: one flood window's worth, then the
    // ladder moves, the question is withdrawn and the rest is paced.
    assert!(
        added <= aromba_warden::server::REQUEST_THRESHOLD + 20,
        "{n} stale replays wrote {added} journal lines and the ladder is at {}",
        w.ladder()
    );
    assert!(w.ladder() >= 2, "the flood is a signal");
}

/// The record of `action` on `w`'s disk.
fn record_of(w: &Warden, action: &str) -> std::path::PathBuf {
    w.layout()
        .state_dir
        .join("actions")
        .join(format!("{action}.json"))
}

#[test]
fn a_record_from_before_every_record_named_its_route_takes_no_relay_tap() {
    // Records issued before this version name no route: on a server paired
    // before the Mini App every action's was the relay's, a red run's
    // included. Found by a review: such a record stayed approvable by the
    // relay's tap after the update. It fails closed, and the person who
    // taps their own old message is told to ask again — no anomaly.
    let w = support::bound("app-r3-no-route");
    let (action, server, _) = w.proposed_wipe();
    let path = record_of(&w, &action);
    let text = std::fs::read_to_string(&path).expect("the record");
    let mut v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    v.as_object_mut().expect("an object").remove("route");
    std::fs::write(&path, v.to_string()).expect("the record as it was");
    let why = refused(w.ask(&w.relay_tap(&server, &action, "approve")));
    assert!(why.contains("out of date"), "{why}");
    assert!(!w.touched.join("wiped").exists(), "the relay's tap ran it");
    assert_eq!(w.ladder(), 0, "the person's own old message is no anomaly");
}

#[test]
fn a_proposal_older_than_a_day_is_approved_by_nothing() {
    let w = Warden::start(
        "app-r3-old",
        true,
        &[
            support::owner_chore(
                "hello",
                "yellow",
                "",
                "[ \"$1\" = --dry-run ] && exit 0\necho hello > TOUCHED/hello",
            ),
            support::wipe_chore(),
        ],
    );
    w.dry_run_shown("hello");
    let (action, server, app) = w.proposal(&Request::Propose {
        chore: "hello".into(),
    });
    assert!(app.is_none(), "a yellow run: the relay's tap");
    w.clock.advance(86_401);
    let why = refused(w.ask(&w.relay_tap(&server, &action, "approve")));
    assert!(why.contains("out of date"), "{why}");
    assert!(!w.touched.join("hello").exists());
    assert_eq!(w.ladder(), 0);
    // In the app too: a red run proposed, opened a day later.
    let (_, _, param) = w.proposed_wipe();
    w.clock.advance(86_401);
    let why = refused(w.ask(&w.in_app(PERSON, &param)));
    assert!(why.contains("out of date"), "{why}");
    assert!(!w.touched.join("wiped").exists());
}
