//! Approvals the Warden verifies itself: a relay-signed tap (the test key
//! pair in keys/test/), over an action id the Warden issued, fresh, used
//! once. Everything else is refused and is a ladder signal.

use aromba_testkit::warden as support;

use aromba_warden::ladder::Clock;
use aromba_warden_proto::{Request, Response};
use support::{TEST_KEY, Warden, owner_chore};

/// A paired (or not) Warden with a yellow chore of the owner's that writes
/// one file.
fn warden(name: &str, paired: bool) -> Warden {
    Warden::start(
        &format!("approvals-{name}"),
        paired,
        &[owner_chore(
            "hello",
            "yellow",
            "",
            "[ \"$1\" = --dry-run ] && { echo would-write; exit 0; }\necho hello > TOUCHED/hello",
        )],
    )
}

trait Proposed {
    fn proposed(&self) -> (String, String);
}

impl Proposed for Warden {
    /// Dry run, shown, proposed: an action id and the server id to sign.
    fn proposed(&self) -> (String, String) {
        self.dry_run_shown("hello");
        let (action, server, needs_pin) = self.propose(&Request::Propose {
            chore: "hello".into(),
        });
        assert!(!needs_pin, "running a chore is not a PIN action");
        (action, server)
    }
}

#[test]
fn a_verified_fresh_tap_runs_the_chore_once() {
    let w = warden("ok", true);
    let (action, server) = w.proposed();
    let tap = w.signed(&server, &action, "approve", w.clock.now(), TEST_KEY);
    let Response::Receipt { ok, receipt, .. } = w.ask(&tap) else {
        panic!("did not run")
    };
    assert!(ok, "{receipt}");
    assert!(w.touched.join("hello").exists());
    assert_eq!(w.ladder(), 0);
    // The same tap again: spent.
    let Response::Refused { reason, .. } = w.ask(&tap) else {
        panic!("ran twice")
    };
    assert!(reason.contains("used already"), "{reason}");
    assert_eq!(w.ladder(), 1, "a replayed approval is a ladder signal");
}

#[test]
fn a_tap_signed_by_another_key_is_refused() {
    let w = warden("forged", true);
    let (action, server) = w.proposed();
    let other = minisign::KeyPair::generate_unencrypted_keypair().unwrap();
    let other_key = other.sk.to_box(None).unwrap().into_string();
    let Response::Refused { reason, .. } =
        w.ask(&w.signed(&server, &action, "approve", w.clock.now(), &other_key))
    else {
        panic!("a forged tap ran")
    };
    assert!(reason.contains("does not verify"), "{reason}");
    assert!(!w.touched.join("hello").exists());
    assert_eq!(w.ladder(), 1);
}

#[test]
fn a_stale_tap_is_refused() {
    let w = warden("stale", true);
    let (action, server) = w.proposed();
    let old = w.clock.now() - 601;
    let Response::Refused { reason, .. } =
        w.ask(&w.signed(&server, &action, "approve", old, TEST_KEY))
    else {
        panic!("a stale tap ran")
    };
    assert!(reason.contains("not fresh"), "{reason}");
}

#[test]
fn an_action_id_the_warden_did_not_issue_is_refused() {
    let w = warden("unissued", true);
    let (action, server) = w.proposed();
    let made_up = "0123456789abcdef0123456789abcdef";
    let Response::Refused { reason, .. } =
        w.ask(&w.signed(&server, made_up, "approve", w.clock.now(), TEST_KEY))
    else {
        panic!("an unissued action ran")
    };
    assert!(reason.contains("not issued"), "{reason}");
    // Signed for another server: the signature does not cover this one.
    // (The refusal above was a signal: at Slow, one request a minute.)
    w.clock.advance(61);
    let Response::Refused { reason, .. } = w.ask(&w.signed(
        "another-server",
        &action,
        "approve",
        w.clock.now(),
        TEST_KEY,
    )) else {
        panic!("a tap for another server ran")
    };
    assert!(reason.contains("does not verify"), "{reason}");
}

#[test]
fn a_declining_tap_runs_nothing() {
    let w = warden("decline", true);
    let (action, server) = w.proposed();
    let Response::Refused { reason, .. } =
        w.ask(&w.signed(&server, &action, "cancel", w.clock.now(), TEST_KEY))
    else {
        panic!("ran on cancel")
    };
    assert!(reason.contains("cancel"), "{reason}");
    assert!(!w.touched.join("hello").exists());
    assert_eq!(w.ladder(), 0, "declining is not suspicious");
}

#[test]
fn without_a_pinned_relay_key_nothing_can_be_approved() {
    let w = warden("unpaired", false);
    let (action, server) = w.proposed();
    let Response::Refused { reason, .. } =
        w.ask(&w.signed(&server, &action, "approve", w.clock.now(), TEST_KEY))
    else {
        panic!("ran unpaired")
    };
    assert!(reason.contains("not paired"), "{reason}");
}

#[test]
fn a_worker_cannot_flood_the_warden_with_proposals() {
    let w = warden("flood", true);
    w.dry_run_shown("hello");
    for _ in 0..aromba_warden::approvals::MAX_OPEN {
        w.propose(&Request::Propose {
            chore: "hello".into(),
        });
    }
    let Response::Refused { reason, .. } = w.ask(&Request::Propose {
        chore: "hello".into(),
    }) else {
        panic!("no bound on open proposals")
    };
    assert!(reason.contains("waiting for a tap"), "{reason}");
    // A day later the unanswered ones are dropped to make room.
    w.clock.advance(aromba_warden::approvals::OPEN_FOR_S + 1);
    w.propose(&Request::Propose {
        chore: "hello".into(),
    });
}

/// A person's double tap on a phone, or Approve after Cancel: a second
/// tap the relay signed, on a proposal answered already. It was answered
/// "used already" and moved the ladder to Slow ("Unusual activity…"), so
/// a newcomer's double tap sent them to a root terminal. Now it is said,
/// and nothing moves.
#[test]
fn a_second_tap_of_the_persons_on_an_answered_proposal_is_no_anomaly() {
    let w = warden("double-tap", true);
    let (action, server) = w.proposed();
    let now = w.clock.now();
    let first = w.signed(&server, &action, "approve", now, TEST_KEY);
    assert!(matches!(w.ask(&first), Response::Receipt { ok: true, .. }));
    let receipts = || {
        w.journal()
            .lines()
            .filter(|l| l.contains("\"kind\":\"receipt\""))
            .count()
    };
    let before = receipts();
    // The second tap of a double tap: signed by the relay a moment later.
    let second = w.signed(&server, &action, "approve", now + 1, TEST_KEY);
    let r = w.ask(&second);
    assert!(matches!(r, Response::AlreadyAnswered { .. }), "{r:?}");
    assert_eq!(w.ladder(), 0, "{}", w.status().ladder_reason);
    assert_eq!(receipts(), before, "the chore ran again");
}

#[test]
fn approve_after_cancel_runs_nothing_and_is_no_anomaly() {
    let w = warden("cancel-then-approve", true);
    let (action, server) = w.proposed();
    let now = w.clock.now();
    let cancel = w.signed(&server, &action, "cancel", now, TEST_KEY);
    assert!(matches!(w.ask(&cancel), Response::Refused { .. }));
    let approve = w.signed(&server, &action, "approve", now + 2, TEST_KEY);
    let r = w.ask(&approve);
    assert!(matches!(r, Response::AlreadyAnswered { .. }), "{r:?}");
    assert!(!w.touched.join("hello").exists());
    assert_eq!(w.ladder(), 0);
}

/// A tap the person could not have made, on a proposal answered already,
/// is still a signal: another key's, or a stale one.
#[test]
fn a_forged_or_stale_tap_on_an_answered_proposal_is_still_a_signal() {
    let w = warden("forged-after", true);
    let (action, server) = w.proposed();
    let now = w.clock.now();
    assert!(matches!(
        w.ask(&w.signed(&server, &action, "approve", now, TEST_KEY)),
        Response::Receipt { .. }
    ));
    let other = minisign::KeyPair::generate_unencrypted_keypair().unwrap();
    let other_key = other.sk.to_box(None).unwrap().into_string();
    let r = w.ask(&w.signed(&server, &action, "approve", now + 1, &other_key));
    assert!(matches!(r, Response::Refused { .. }), "{r:?}");
    assert_eq!(w.ladder(), 1);
    let stale = w.signed(&server, &action, "approve", now - 3600, TEST_KEY);
    w.clock.advance(61);
    let r = w.ask(&stale);
    assert!(matches!(r, Response::Refused { .. }), "{r:?}");
}

/// The journal keeps an issued action in its own words — its kind and
/// fields, as JSON — never a Rust `Debug` form that could change with the
/// code.
#[test]
fn an_issued_action_is_journaled_as_its_kind_and_fields() {
    let w = warden("journaled", true);
    let (action, _) = w.proposed();
    let issued: Vec<serde_json::Value> = w
        .journal()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|e: &serde_json::Value| {
            e["kind"] == "action-issued" && e["action_id"] == action.as_str()
        })
        .collect();
    assert_eq!(issued.len(), 1, "{}", w.journal());
    let recorded = &issued[0]["action"];
    assert_eq!(recorded["kind"], "run", "{recorded}");
    assert_eq!(recorded["chore"], "hello", "{recorded}");
    assert!(recorded["script_sha256"].is_string(), "{recorded}");
}
