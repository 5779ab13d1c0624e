//! Attacks on approvals in the Mini App, as a hostile relay (which holds
//! its tap key and sees every launch it carries) or a hostile Worker would
//! make them: each runs nothing, and each the person could not have made
//! is a ladder signal. The person's own slips (an app opened long ago, a
//! second approval) are no anomaly.

use aromba_testkit::telegram::{BOT_ID, BOT_TOKEN, PERSON, launch_of};
use aromba_testkit::warden as support;

use aromba_testkit::telegram::{LaunchKey, Person, launch};
use aromba_warden::ladder::Clock;
use aromba_warden_proto::{Request, Response};
use support::{Warden, refused};

#[test]
fn a_relay_signed_approve_on_a_red_run_runs_nothing_and_is_a_signal() {
    let w = support::bound("app-attack-relay-tap");
    let (action, server, _) = w.proposed_wipe();
    let why = refused(w.ask(&w.relay_tap(&server, &action, "approve")));
    assert!(why.contains("only in the Mini App"), "{why}");
    assert!(!w.touched.join("wiped").exists());
    assert_eq!(w.ladder(), 1, "a tap the person could not have made");
}

#[test]
fn a_relay_signed_cancel_still_declines_without_an_alarm() {
    let w = support::bound("app-attack-relay-cancel");
    let (action, server, param) = w.proposed_wipe();
    let why = refused(w.ask(&w.tap(&server, &action, "cancel", None)));
    assert!(why.contains("cancel"), "{why}");
    assert_eq!(w.ladder(), 0);
    // Cancelled: the app cannot bring it back.
    assert!(matches!(
        w.ask(&w.in_app(PERSON, &param)),
        Response::AlreadyAnswered { .. }
    ));
    assert!(!w.touched.join("wiped").exists());
}

#[test]
fn a_launch_replayed_by_the_relay_runs_nothing_twice_and_is_a_signal() {
    let w = support::bound("app-attack-replay");
    let (_, _, param) = w.proposed_wipe();
    let once = w.in_app(PERSON, &param);
    assert!(matches!(w.ask(&once), Response::Receipt { ok: true, .. }));
    std::fs::remove_file(w.touched.join("wiped")).unwrap();
    let why = refused(w.ask(&once));
    assert!(why.contains("used already"), "{why}");
    assert!(!w.touched.join("wiped").exists());
    assert_eq!(w.ladder(), 1);
}

#[test]
fn a_launch_of_another_telegram_account_is_refused_and_a_signal() {
    // The relay's operator opens the app from its own account.
    let w = support::bound("app-attack-other-user");
    let (_, _, param) = w.proposed_wipe();
    let why = refused(w.ask(&w.in_app(PERSON + 1, &param)));
    assert!(
        why.contains("not the one this server is paired with"),
        "{why}"
    );
    assert_eq!(w.ladder(), 1);
    // Not spent: the person can still approve it.
    assert!(matches!(
        w.ask(&w.in_app(PERSON, &param)),
        Response::Refused { .. } | Response::Receipt { .. }
    ));
}

#[test]
fn a_launch_signed_by_another_key_or_for_another_bot_is_refused() {
    let w = support::bound("app-attack-other-key");
    let (_, _, param) = w.proposed_wipe();
    let now = w.clock.now();
    // The relay signs with a key of its own (it has no Telegram key).
    let mallory = LaunchKey::generate().unwrap();
    let forged = launch(
        &mallory,
        BOT_TOKEN,
        &Person::new(PERSON, "Ana"),
        Some(&param),
        now,
    );
    let why = refused(w.ask(&Request::ApproveInApp {
        launch: forged,
        sealed_pin: None,
    }));
    assert!(why.contains("not signed by Telegram"), "{why}");
    // A launch Telegram signed for another bot (one the person also uses),
    // a minute later (the signal slowed the Warden down).
    w.clock.advance(61);
    let now = w.clock.now();
    let other_bot = launch(
        &aromba_testkit::telegram::test_key(),
        "7000000002:OTHER",
        &Person::new(PERSON, "Ana"),
        Some(&param),
        now,
    );
    let why = refused(w.ask(&Request::ApproveInApp {
        launch: other_bot,
        sealed_pin: None,
    }));
    assert!(why.contains("not signed by Telegram"), "{why}");
    assert!(!w.touched.join("wiped").exists());
    assert_eq!(w.status().telegram_user, Some(PERSON as u64));
    let _ = BOT_ID;
}

#[test]
fn a_launch_naming_another_text_or_no_action_approves_nothing() {
    let w = support::bound("app-attack-other-text");
    let (action, _, _) = w.proposed_wipe();
    let now = w.clock.now();
    let other_text = format!("{action}_{}", "0".repeat(64));
    let why = refused(w.ask(&Request::ApproveInApp {
        launch: launch_of(PERSON, Some(&other_text), now),
        sealed_pin: None,
    }));
    assert!(why.contains("another text"), "{why}");
    for param in [None, Some("pair_ABC234"), Some("trust")] {
        // Each signal slows the Warden to one command a minute.
        w.clock.advance(61);
        let why = refused(w.ask(&Request::ApproveInApp {
            launch: launch_of(PERSON, param, w.clock.now()),
            sealed_pin: None,
        }));
        assert!(
            why.contains("not opened from a proposal"),
            "{param:?}: {why}"
        );
    }
    assert!(!w.touched.join("wiped").exists());
}

#[test]
fn an_app_opened_long_ago_is_refused_without_an_alarm_and_a_fresh_one_works() {
    let w = support::bound("app-attack-stale");
    let (_, _, param) = w.proposed_wipe();
    let old = w.in_app(PERSON, &param);
    w.clock.advance(aromba_warden::init_data::FRESH_S + 1);
    let why = refused(w.ask(&old));
    assert!(why.contains("open it again"), "{why}");
    assert_eq!(w.ladder(), 0, "the person's slow tap is no anomaly");
    assert!(matches!(
        w.ask(&w.in_app(PERSON, &param)),
        Response::Receipt { ok: true, .. }
    ));
}

#[test]
fn the_worker_cannot_pin_a_telegram_account() {
    let w = support::bound("app-attack-worker-pins");
    let r = w.ask(&Request::PinTelegramAccount {
        launch: launch_of(PERSON + 1, Some("pair_ABC234"), w.clock.now()),
        bot_id: BOT_ID,
        start_param: "pair_ABC234".into(),
    });
    assert!(!matches!(r, Response::TelegramAccount { .. }), "{r:?}");
    assert_eq!(w.status().telegram_user, Some(PERSON as u64));
}

#[test]
fn pinning_needs_the_launch_of_the_pairings_own_button() {
    let w = Warden::start_unbound("app-attack-pairing", &[]);
    let now = w.clock.now();
    for (launch, param) in [
        // Opened from another button (an action's, the Trust page's).
        (launch_of(PERSON, Some("pair_OTHER1"), now), "pair_ABC234"),
        (launch_of(PERSON, None, now), "pair_ABC234"),
        // A start parameter that is not a pairing's.
        (launch_of(PERSON, Some("trust"), now), "trust"),
        // Opened long ago.
        (
            launch_of(PERSON, Some("pair_ABC234"), now - 3600),
            "pair_ABC234",
        ),
    ] {
        let r = w.control(&Request::PinTelegramAccount {
            launch,
            bot_id: BOT_ID,
            start_param: param.into(),
        });
        assert!(matches!(r, Response::Refused { .. }), "{param}: {r:?}");
    }
    assert_eq!(w.status().telegram_user, None);
}

#[test]
fn a_relay_signed_yes_cannot_step_the_ladder_down_once_bound() {
    let w = support::bound("app-attack-step-down");
    assert!(matches!(
        w.ask(&support::deny_list_hit()),
        Response::Refused { .. }
    ));
    assert_eq!(w.ladder(), 1);
    let (action, server, param) = w.proposal(&Request::ProposeStepDown);
    assert!(param.is_some(), "\"Was that you?\" is answered in the app");
    refused(w.ask(&w.relay_tap(&server, &action, "approve")));
    // The forged yes is one more signal: the ladder climbs, and the
    // question about the last move is withdrawn.
    let st = w.reaches("freeze");
    assert_eq!(st.ladder_step, 2);
    let (_, _, param) = w.proposal(&Request::ProposeStepDown);
    let param = param.expect("asked again about the new move");
    assert!(matches!(
        w.ask(&w.in_app(PERSON, &param)),
        Response::Ladder { .. }
    ));
    assert_eq!(w.status().ladder_name, "normal");
}
