//! The attack round on the approvals' route: every action but a non-red
//! chore run is approved only in the Mini App (Telegram's signature over
//! the person's launch), never by a tap the relay signs; a server without
//! a Telegram account proposes none of them; a record without a route or
//! issued more than a day ago is approved by nothing; a relay tap has no
//! field for a PIN; a damage cap's confirmation names who gave it.
//!
//! Each attack is made as a hostile relay (which signs taps) or a hostile
//! Worker (which writes anything on its socket) would make it, on a real
//! Warden. Each test is named for what it proves.

use aromba_testkit::telegram::PERSON;
use aromba_testkit::warden::{self as support, Warden, refused};

use aromba_warden::ladder::Clock;
use aromba_warden_proto::{Request, Response, encode_request};

const PIN: &str = "472913";

/// A green chore of the owner's with a damage cap above the default.
fn big(name: &str) -> (String, String) {
    support::owner_chore(
        name,
        "green",
        "# max_changes: 5000 files, 20 GB\n",
        "[ \"$1\" = --dry-run ] && exit 0\n: > TOUCHED/ran",
    )
}

/// A yellow chore of the owner's: its run is approved by the relay's tap.
fn hello() -> (String, String) {
    support::owner_chore(
        "hello",
        "yellow",
        "",
        "[ \"$1\" = --dry-run ] && exit 0\necho hello > TOUCHED/hello",
    )
}

/// A red chore that adds one line to `TOUCHED/count` each time it really
/// runs.
fn counter() -> (String, String) {
    support::owner_chore(
        "counter",
        "red",
        "",
        "[ \"$1\" = --dry-run ] && exit 0\necho ran >> TOUCHED/count",
    )
}

fn prod_mode_on(w: &Warden) -> bool {
    w.status().prod_mode.starts_with("on")
}

/// `name`'s dry run from the root terminal: refused while its cap waits
/// for a confirmation.
fn cap_waits_for_confirmation(w: &Warden, name: &str) -> bool {
    match w.control(&Request::ChoreRun {
        name: name.into(),
        dry_run: true,
    }) {
        Response::Refused { reason, .. } => reason.contains("confirm"),
        _ => false,
    }
}

/// The undo id a red run's receipt carries.
fn undo_id(receipt: &str) -> String {
    let at = receipt
        .find("undo id ")
        .expect("the receipt carries an undo id")
        + 8;
    receipt[at..at + 32].to_string()
}

/// The record of `action` on `w`'s disk.
fn record_of(w: &Warden, action: &str) -> std::path::PathBuf {
    w.layout()
        .state_dir
        .join("actions")
        .join(format!("{action}.json"))
}

/// The proposals `w` holds open (records not yet spent).
fn open_records(w: &Warden) -> Vec<String> {
    let dir = w.layout().state_dir.join("actions");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect()
}

// ---------------------------------------------------------------------------
// A relay tap has no field for a PIN

#[test]
fn a_relay_tap_with_a_pin_field_in_any_spelling_or_shape_does_not_decode() {
    let w = support::bound("route-r-pin-field");
    w.set_pin_and_prod_mode_on(PIN);
    let (action, server, param) = w.proposal(&Request::ProposeProdModeOff);
    let param = param.expect("prod mode off is approved in the app");
    let tap =
        String::from_utf8(encode_request(&w.relay_tap(&server, &action, "approve"))).expect("JSON");
    let long = "4".repeat(30_000);
    let fields = [
        format!(r#""pin":"{PIN}","#),
        // Named twice: whichever one a decoder keeps, a PIN is there.
        format!(r#""pin":"{PIN}","pin":"{PIN}","#),
        format!(r#""pin":"","pin":"{PIN}","#),
        // Written with escapes: the same key once decoded.
        format!(r#""\u0070in":"{PIN}","#),
        format!(r#""p\u0069\u006e":"{PIN}","#),
        // Other casings, and keys a lenient decoder might fold.
        format!(r#""PIN":"{PIN}","#),
        format!(r#""Pin":"{PIN}","#),
        format!(r#""pin ":"{PIN}","#),
        format!(r#""pin\u0000":"{PIN}","#),
        // Null, nested, a number, very long.
        r#""pin":null,"#.to_string(),
        format!(r#""pin":{{"pin":"{PIN}"}},"#),
        format!(r#""pin":[{PIN}],"#),
        format!(r#""pin":{PIN},"#),
        format!(r#""pin":"{long}","#),
        // In the background's lane.
        format!(r#""lane":"background","pin":"{PIN}","#),
    ];
    for field in &fields {
        let frame = tap.replacen('{', &format!("{{{field}"), 1);
        let answer = w.ask_raw(frame.as_bytes());
        assert!(
            matches!(&answer, Response::Error { message } if message.starts_with("malformed request")),
            "{}: {answer:?}",
            &field[..field.len().min(60)]
        );
        assert!(!format!("{answer:?}").contains(PIN), "{answer:?}");
    }
    // The PIN went into no journal line, and prod mode stays on.
    assert!(!w.journal().contains(PIN));
    assert!(prod_mode_on(&w));
    // None of it locked the person out: the right PIN, sealed in the app,
    // still turns prod mode off.
    w.clock.advance(61);
    let r = w.ask(&w.in_app_with_pin(PERSON, &param, PIN));
    assert!(matches!(r, Response::Noted { .. }), "{r:?}");
    assert!(!prod_mode_on(&w));
}

// ---------------------------------------------------------------------------
// Relay taps on every action of the app's route

#[test]
fn a_relay_signed_approve_confirms_no_cap_and_undoes_no_run_before_or_after_a_restart() {
    let mut w = Warden::start(
        "route-r-cap-undo",
        true,
        &[support::wipe_chore(), big("big")],
    );
    // The damage cap.
    let (cap, server, app) = w.proposal(&Request::ProposeConfirmCap {
        chore: "big".into(),
    });
    assert!(app.is_some(), "a cap is confirmed in the app");
    let why = refused(w.ask(&w.relay_tap(&server, &cap, "approve")));
    assert!(why.contains("only in the Mini App"), "{why}");
    assert!(cap_waits_for_confirmation(&w, "big"));
    assert_eq!(w.ladder(), 1, "a tap the person could not have made");
    w.resume();
    // An undo of a red run.
    let receipt = w.red_run("wipe");
    assert!(w.touched.join("wiped").exists());
    let id = undo_id(&receipt);
    let (undo, server, undo_param) = w.proposal(&Request::ProposeUndo {
        undo_id: id.clone(),
    });
    let undo_param = undo_param.expect("an undo is approved in the app");
    let why = refused(w.ask(&w.relay_tap(&server, &undo, "approve")));
    assert!(why.contains("only in the Mini App"), "{why}");
    assert!(w.touched.join("wiped").exists(), "the relay's tap undid it");
    w.resume();
    // After a restart, the records keep their route.
    w.restart();
    let why = refused(w.ask(&w.relay_tap(&server, &cap, "approve")));
    assert!(why.contains("only in the Mini App"), "{why}");
    assert!(cap_waits_for_confirmation(&w, "big"));
    w.resume();
    let why = refused(w.ask(&w.relay_tap(&server, &undo, "approve")));
    assert!(why.contains("only in the Mini App"), "{why}");
    assert!(w.touched.join("wiped").exists());
    w.resume();
    // Refused before they were spent: the person still approves both.
    let r = w.ask(&w.in_app(PERSON, &undo_param));
    assert!(matches!(r, Response::Receipt { ok: true, .. }), "{r:?}");
    assert!(!w.touched.join("wiped").exists());
    let (_, _, app) = w.proposal(&Request::ProposeConfirmCap {
        chore: "big".into(),
    });
    let r = w.ask(&w.in_app(PERSON, &app.expect("in the app")));
    assert!(matches!(r, Response::Noted { .. }), "{r:?}");
    assert!(!cap_waits_for_confirmation(&w, "big"));
}

#[test]
fn a_relay_cancel_on_app_route_actions_declines_them_without_an_alarm_or_a_lockout() {
    let w = Warden::start("route-r-cancel", true, &[big("big")]);
    w.set_pin_and_prod_mode_on(PIN);
    for (proposal, needs_pin) in [
        (Request::ProposeProdModeOff, true),
        (
            Request::ProposeConfirmCap {
                chore: "big".into(),
            },
            false,
        ),
    ] {
        let (action, server, param) = w.proposal(&proposal);
        let param = param.expect("approved in the app");
        let why = refused(w.ask(&w.relay_tap(&server, &action, "cancel")));
        assert!(why.contains("cancel"), "{why}");
        // Cancelled: the app cannot bring it back, and it is no anomaly.
        let approval = if needs_pin {
            w.in_app_with_pin(PERSON, &param, PIN)
        } else {
            w.in_app(PERSON, &param)
        };
        let r = w.ask(&approval);
        assert!(matches!(r, Response::AlreadyAnswered { .. }), "{r:?}");
        // The same Cancel tapped twice is the person's double tap.
        let r = w.ask(&w.relay_tap(&server, &action, "cancel"));
        assert!(matches!(r, Response::AlreadyAnswered { .. }), "{r:?}");
    }
    assert!(prod_mode_on(&w));
    assert!(cap_waits_for_confirmation(&w, "big"));
    // "No, stop Aromba" tapped through the relay at Slow: declined, the
    // ladder not raised.
    assert!(matches!(
        w.ask(&support::deny_list_hit()),
        Response::Refused { .. }
    ));
    assert_eq!(w.ladder(), 1);
    w.clock.advance(61);
    let (action, server, param) = w.proposal(&Request::ProposeStepDown);
    let param = param.expect("\"Was that you?\" is answered in the app");
    w.clock.advance(61);
    refused(w.ask(&w.relay_tap(&server, &action, "cancel")));
    assert_eq!(w.ladder(), 1, "a Cancel approves nothing and is no signal");
    w.clock.advance(61);
    let r = w.ask(&w.in_app(PERSON, &param));
    assert!(matches!(r, Response::AlreadyAnswered { .. }), "{r:?}");
    assert_eq!(w.ladder(), 1);
    // Not locked out: a fresh proposal, with the PIN, in the app.
    w.resume();
    let (_, _, param) = w.proposal(&Request::ProposeProdModeOff);
    let r = w.ask(&w.in_app_with_pin(PERSON, &param.expect("in the app"), PIN));
    assert!(matches!(r, Response::Noted { .. }), "{r:?}");
    assert!(!prod_mode_on(&w));
}

#[test]
fn a_relay_approve_racing_the_persons_app_approval_runs_the_red_chore_at_most_once() {
    let w = Warden::start("route-r-race", true, &[counter()]);
    w.dry_run_shown("counter");
    let (action, server, param) = w.proposal(&Request::Propose {
        chore: "counter".into(),
    });
    let param = param.expect("a red run is approved in the app");
    let taps: Vec<Request> = (0..4)
        .map(|_| w.relay_tap(&server, &action, "approve"))
        .collect();
    let launch = w.in_app(PERSON, &param);
    let answers: Vec<(bool, Response)> = std::thread::scope(|s| {
        let mut handles = Vec::new();
        for tap in &taps {
            handles.push(s.spawn(|| (false, w.ask(tap))));
        }
        handles.push(s.spawn(|| (true, w.ask(&launch))));
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (in_app, answer) in &answers {
        if !in_app {
            assert!(
                !matches!(answer, Response::Receipt { .. }),
                "a relay tap ran it: {answer:?}"
            );
        }
    }
    let runs = std::fs::read_to_string(w.touched.join("count"))
        .unwrap_or_default()
        .lines()
        .count();
    let app_ran = answers
        .iter()
        .any(|(in_app, a)| *in_app && matches!(a, Response::Receipt { ok: true, .. }));
    assert_eq!(runs, usize::from(app_ran), "{answers:?}");
}

#[test]
fn a_relay_tap_on_a_yellow_run_proposed_before_prod_mode_runs_nothing_after() {
    // Proposed yellow (the relay's route), then prod mode makes every
    // chore red (the app's route): the relay's tap on the old proposal
    // must not run what is now a red run.
    let w = Warden::start("route-r-prod-after", true, &[hello()]);
    w.dry_run_shown("hello");
    let (action, server, app) = w.proposal(&Request::Propose {
        chore: "hello".into(),
    });
    assert!(app.is_none(), "a yellow run: the relay's tap");
    w.set_pin_and_prod_mode_on(PIN);
    let r = w.ask(&w.relay_tap(&server, &action, "approve"));
    assert!(matches!(r, Response::Refused { .. }), "{r:?}");
    assert!(!w.touched.join("hello").exists(), "{r:?}");
}

// ---------------------------------------------------------------------------
// A server with no Telegram account

#[test]
fn a_server_without_an_account_proposes_no_app_route_action_and_issues_no_id() {
    let w = Warden::start_unbound(
        "route-r-unbound",
        &[support::wipe_chore(), big("big"), hello()],
    );
    let id = undo_id(&w.red_run("wipe"));
    w.dry_run_shown("wipe");
    for proposal in [
        Request::Propose {
            chore: "wipe".into(),
        },
        Request::ProposeConfirmCap {
            chore: "big".into(),
        },
        Request::ProposeUndo { undo_id: id },
    ] {
        let why = refused(w.ask(&proposal));
        assert!(why.contains("sudo aromba pair"), "{proposal:?}: {why}");
    }
    assert!(open_records(&w).is_empty(), "{:?}", open_records(&w));
    // A yellow run is the relay's: proposed, and its tap runs it.
    w.dry_run_shown("hello");
    let (action, server, app) = w.proposal(&Request::Propose {
        chore: "hello".into(),
    });
    assert!(app.is_none());
    let r = w.ask(&w.relay_tap(&server, &action, "approve"));
    assert!(matches!(r, Response::Receipt { ok: true, .. }), "{r:?}");
    // In prod mode every run is red, and prod mode off is the app's.
    w.set_pin_and_prod_mode_on(PIN);
    for proposal in [
        Request::ProposeProdModeOff,
        Request::Propose {
            chore: "hello".into(),
        },
    ] {
        let why = refused(w.ask(&proposal));
        assert!(why.contains("sudo aromba pair"), "{proposal:?}: {why}");
    }
    assert!(matches!(
        w.ask(&support::deny_list_hit()),
        Response::Refused { .. }
    ));
    assert_eq!(w.ladder(), 1);
    w.clock.advance(61);
    let why = refused(w.ask(&Request::ProposeStepDown));
    assert!(why.contains("sudo aromba pair"), "{why}");
    assert!(open_records(&w).is_empty(), "{:?}", open_records(&w));
    assert_eq!(w.ladder(), 1, "the person's own asks are no anomaly");
}

// ---------------------------------------------------------------------------
// The day limit

#[test]
fn a_proposal_recorded_as_issued_in_the_future_is_out_of_date() {
    // The clock stepped back (or the record was issued by a clock that was
    // ahead): the record says it was issued two days from now, so its age
    // is unknown, and "approved within a day of its issue" cannot hold for
    // it. As a record without a route, it must fail closed.
    let w = Warden::start("route-r-future", true, &[support::wipe_chore(), hello()]);
    let future = w.clock.now() + 2 * 86_400;
    let set_issued = |action: &str| {
        let path = record_of(&w, action);
        let text = std::fs::read_to_string(&path).expect("the record");
        let mut v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        v["issued_at"] = serde_json::Value::from(future);
        std::fs::write(&path, v.to_string()).expect("the record rewritten");
    };
    let (_, _, param) = w.proposed_wipe();
    let action = aromba_warden::telegram::parse_action_param(&param)
        .expect("an action's start_param")
        .action_id
        .to_string();
    set_issued(&action);
    let r = w.ask(&w.in_app(PERSON, &param));
    assert!(
        !w.touched.join("wiped").exists(),
        "a red run recorded as issued two days from now was approved: {r:?}"
    );
    assert!(
        matches!(&r, Response::Refused { reason, .. } if reason.contains("out of date")),
        "{r:?}"
    );
    w.dry_run_shown("hello");
    let (action, server, _) = w.proposal(&Request::Propose {
        chore: "hello".into(),
    });
    set_issued(&action);
    let r = w.ask(&w.relay_tap(&server, &action, "approve"));
    assert!(
        !w.touched.join("hello").exists(),
        "a run recorded as issued two days from now was approved: {r:?}"
    );
    assert_eq!(w.ladder(), 0, "the person's own old message is no anomaly");
}

// ---------------------------------------------------------------------------
// Who confirmed a damage cap

#[test]
fn a_cap_confirmation_naming_anyone_but_the_app_or_the_terminal_confirms_nothing() {
    let bys = [
        serde_json::json!("relay"),
        serde_json::json!("App"),
        serde_json::json!("TERMINAL"),
        serde_json::json!(" app"),
        serde_json::json!("app\u{0}"),
        serde_json::json!(""),
        serde_json::Value::Null,
        serde_json::json!(1),
        serde_json::json!(["app"]),
        serde_json::json!({"app": true}),
    ];
    let names: Vec<String> = (0..bys.len())
        .map(|i| format!("cap{}", (b'a' + i as u8) as char))
        .collect();
    let everyone: Vec<String> = names.iter().cloned().chain(["kept".to_string()]).collect();
    let chores: Vec<(String, String)> = everyone.iter().map(|n| big(n)).collect();
    let mut w = Warden::start("route-r-cap-by", true, &chores);
    for name in &everyone {
        assert!(matches!(
            w.control(&Request::ConfirmCap {
                chore: name.clone()
            }),
            Response::Noted { .. }
        ));
        assert!(!cap_waits_for_confirmation(&w, name), "{name}");
    }
    // The Worker cannot confirm one, nor say who did.
    let r = w.ask(&Request::ConfirmCap {
        chore: "capa".into(),
    });
    assert!(!matches!(r, Response::Noted { .. }), "{r:?}");
    let r = w.ask_raw(br#"{"type":"confirm_cap","chore":"capa","by":"app"}"#);
    assert!(!matches!(r, Response::Noted { .. }), "{r:?}");
    // The record rewritten, each cap naming someone else.
    w.rewrite_confirmed_caps(|all| {
        assert_eq!(all["kept"]["by"], "terminal", "{all}");
        for (name, by) in names.iter().zip(&bys) {
            all[name.as_str()]["by"] = by.clone();
        }
    });
    for (name, by) in names.iter().zip(&bys) {
        assert!(
            cap_waits_for_confirmation(&w, name),
            "a cap confirmed \"by\": {by} still holds"
        );
    }
    assert!(!cap_waits_for_confirmation(&w, "kept"));
    assert_eq!(w.ladder(), 0);
}
