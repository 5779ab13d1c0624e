//! Approvals in the Mini App: on a server paired with a Telegram account,
//! a red chore, an undo, a cap above the default, a release install and
//! "Was that you?" are approved by the launch Telegram signed when the
//! person opened the app from the proposal's button (the test key of
//! keys/test/telegram-launch.*, pinned at install as the demo pins its
//! own), and prod mode off with the PIN the page sealed for the Warden; a
//! green or yellow run keeps the relay-signed tap.

use aromba_testkit::telegram::{PERSON, launch_of};
use aromba_testkit::warden as support;

use aromba_warden::ladder::Clock;
use aromba_warden_proto::{Request, Response};
use support::{Warden, owner_chore, refused};

fn chores() -> Vec<(String, String)> {
    vec![
        owner_chore(
            "wipe",
            "red",
            "",
            "[ \"$1\" = --dry-run ] && { echo would-wipe; exit 0; }\necho wiped > TOUCHED/wiped",
        ),
        owner_chore(
            "hello",
            "yellow",
            "",
            "[ \"$1\" = --dry-run ] && exit 0\necho hello > TOUCHED/hello",
        ),
    ]
}

/// Paired with the relay and with the test person's Telegram account.
fn bound(name: &str) -> Warden {
    let w = Warden::start(&format!("app-{name}"), true, &chores());
    match w.pin_telegram_account(PERSON) {
        Response::TelegramAccount { user_id, name } => {
            assert_eq!(user_id, PERSON as u64);
            assert_eq!(name, "Ana");
        }
        other => panic!("the account was not pinned: {other:?}"),
    }
    w
}

#[test]
fn a_red_chore_approved_in_the_app_runs_once() {
    let w = bound("red");
    w.dry_run_shown("wipe");
    let (action, param) = w.propose_in_app(&Request::Propose {
        chore: "wipe".into(),
    });
    assert_eq!(
        param,
        format!(
            "{action}_{}",
            aromba_warden::approvals::text_sha256(&w.text_of(&action))
        ),
        "the start parameter names the action and the Warden's text"
    );
    let Response::Receipt { ok, receipt, .. } = w.ask(&w.in_app(PERSON, &param)) else {
        panic!("the red chore did not run")
    };
    assert!(ok, "{receipt}");
    assert!(w.touched.join("wiped").exists());
    assert_eq!(w.ladder(), 0, "the person's approval is no anomaly");
    let journal = w.journal();
    let line = journal
        .lines()
        .find(|l| l.contains("\"via\":\"app\"") && l.contains(&action))
        .expect("the approval is journaled");
    assert!(
        line.contains(&format!("\"telegram_user\":{PERSON}"))
            && line.contains("\"telegram_signature\":"),
        "Telegram's signature is kept as evidence: {line}"
    );
}

#[test]
fn opening_the_app_again_on_an_answered_action_is_already_answered_and_no_anomaly() {
    let w = bound("twice");
    w.dry_run_shown("wipe");
    let (_, param) = w.propose_in_app(&Request::Propose {
        chore: "wipe".into(),
    });
    assert!(matches!(
        w.ask(&w.in_app(PERSON, &param)),
        Response::Receipt { ok: true, .. }
    ));
    // A second launch (the person opened it again a second later).
    w.clock.advance(1);
    assert!(
        matches!(
            w.ask(&w.in_app(PERSON, &param)),
            Response::AlreadyAnswered { .. }
        ),
        "a double approval is answered, not run again"
    );
    assert_eq!(w.ladder(), 0);
}

#[test]
fn a_yellow_chore_keeps_the_relay_signed_tap() {
    let w = bound("yellow");
    w.dry_run_shown("hello");
    let (action, server, app) = w.proposal(&Request::Propose {
        chore: "hello".into(),
    });
    assert_eq!(app, None, "a yellow run has no app button");
    assert!(matches!(
        w.ask(&w.tap(&server, &action, "approve", None)),
        Response::Receipt { ok: true, .. }
    ));
}

#[test]
fn a_server_paired_before_the_mini_app_proposes_nothing_the_app_approves_and_says_how() {
    // Only the relay's key is pinned: its signed taps still approve what
    // they approve everywhere (a yellow run), and nothing else is proposed
    // — a red run would otherwise be the relay's alone to approve.
    let w = Warden::start_unbound("app-legacy", &chores());
    w.dry_run_shown("wipe");
    let why = refused(w.ask(&Request::Propose {
        chore: "wipe".into(),
    }));
    assert!(
        why.contains("/unpair") && why.contains("sudo aromba pair"),
        "{why}"
    );
    assert!(!w.touched.join("wiped").exists());
    w.dry_run_shown("hello");
    let (action, server, app) = w.proposal(&Request::Propose {
        chore: "hello".into(),
    });
    assert_eq!(app, None, "a yellow run: the relay's tap");
    assert!(matches!(
        w.ask(&w.tap(&server, &action, "approve", None)),
        Response::Receipt { ok: true, .. }
    ));
    assert!(w.status().telegram_user.is_none());
    assert_eq!(w.ladder(), 0, "nothing here is an anomaly");
}

#[test]
fn undo_and_a_cap_above_the_default_are_approved_in_the_app() {
    let w = Warden::start(
        "app-undo",
        true,
        &[owner_chore(
            "big",
            "red",
            "# max_changes: 5000 files, 20 GB\n",
            "[ \"$1\" = --dry-run ] && exit 0\necho big > TOUCHED/big",
        )],
    );
    assert!(matches!(
        w.pin_telegram_account(PERSON),
        Response::TelegramAccount { .. }
    ));
    let (_, cap) = w.propose_in_app(&Request::ProposeConfirmCap {
        chore: "big".into(),
    });
    assert!(
        matches!(w.ask(&w.in_app(PERSON, &cap)), Response::Noted { .. }),
        "the cap is confirmed in the app"
    );
    w.dry_run_shown("big");
    let (_, run) = w.propose_in_app(&Request::Propose {
        chore: "big".into(),
    });
    let Response::Receipt { receipt, ok, .. } = w.ask(&w.in_app(PERSON, &run)) else {
        panic!("did not run")
    };
    assert!(ok, "{receipt}");
    let undo_id = receipt
        .split("undo id ")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_hexdigit()).next())
        .expect("the receipt names its undo id")
        .to_string();
    let (_, undo) = w.propose_in_app(&Request::ProposeUndo { undo_id });
    assert!(
        matches!(
            w.ask(&w.in_app(PERSON, &undo)),
            Response::Receipt { ok: true, .. }
        ),
        "the undo is approved in the app"
    );
    assert!(!w.touched.join("big").exists());
}

#[test]
fn status_says_which_account_and_key_check_approvals() {
    let w = bound("status");
    let st = w.status();
    assert_eq!(st.telegram_user, Some(PERSON as u64));
    assert!(
        st.telegram_key.contains("pinned at install"),
        "the test key is not Telegram's: {}",
        st.telegram_key
    );
    // Pinned again (a new pairing): the new account replaces the old.
    let fresh = launch_of(777, Some("pair_NEW234"), w.clock.now());
    assert!(matches!(
        w.control(&Request::PinTelegramAccount {
            launch: fresh,
            bot_id: aromba_testkit::telegram::BOT_ID,
            start_param: "pair_NEW234".into(),
        }),
        Response::TelegramAccount { user_id: 777, .. }
    ));
    assert_eq!(w.status().telegram_user, Some(777));
}

const PIN: &str = "472913";

#[test]
fn prod_mode_off_is_approved_in_the_app_with_the_pin_sealed_for_the_warden() {
    let w = bound("prod-off");
    w.set_pin_and_prod_mode_on(PIN);
    let (action, param) = w.propose_in_app(&Request::ProposeProdModeOff);
    let parts: Vec<&str> = param.split('_').collect();
    assert_eq!(
        parts.len(),
        3,
        "the start parameter names the PIN's key: {param}"
    );
    assert_eq!(parts[0], action);
    assert_eq!(parts[2].len(), 64);
    let r = w.ask(&w.in_app_with_pin(PERSON, &param, PIN));
    assert!(matches!(r, Response::Noted { .. }), "{r:?}");
    assert_eq!(w.status().prod_mode, "off");
    assert_eq!(w.ladder(), 0);
    let journal = w.journal();
    assert!(journal.contains(&action) && journal.contains("\"via\":\"app\""));
    assert!(!journal.contains(PIN), "the PIN is in no journal line");
}

#[test]
fn a_wrong_pin_sealed_in_the_app_is_a_wrong_pin_and_counted() {
    let w = bound("prod-off-wrong");
    w.set_pin_and_prod_mode_on(PIN);
    let (_, param) = w.propose_in_app(&Request::ProposeProdModeOff);
    let r = w.ask(&w.in_app_with_pin(PERSON, &param, "913472"));
    assert_eq!(support::refused(r), "wrong PIN");
    assert!(w.status().prod_mode.starts_with("on"), "prod mode stays on");
    // Counted as any wrong PIN: the next proposal, with the right one, is
    // the person's second try.
    let (_, again) = w.propose_in_app(&Request::ProposeProdModeOff);
    assert!(matches!(
        w.ask(&w.in_app_with_pin(PERSON, &again, PIN)),
        Response::Noted { .. }
    ));
    assert_eq!(w.status().prod_mode, "off");
}

#[test]
fn prod_mode_off_on_a_server_paired_before_the_app_is_roots_alone() {
    let w = support::Warden::start_unbound("prod-off-legacy", &[]);
    w.set_pin_and_prod_mode_on(PIN);
    let why = refused(w.ask(&Request::ProposeProdModeOff));
    assert!(why.contains("sudo aromba pair"), "{why}");
    assert_ne!(w.status().prod_mode, "off");
    // Root's terminal, with the PIN, still turns it off.
    let r = w.control(&Request::ProdMode {
        on: false,
        pin: Some(PIN.into()),
    });
    assert!(matches!(r, Response::Noted { .. }), "{r:?}");
    assert_eq!(w.status().prod_mode, "off");
}
