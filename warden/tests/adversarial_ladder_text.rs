//! A hostile Worker writing what root reads about the ladder: the reason
//! `aromba status` shows and the events the chat is told. Through a real
//! Warden: the Worker's own words reach neither unbounded nor with bytes
//! that drive a terminal, and a `panic` that moves nothing (at Cut) leaves
//! the reason root sees as the Warden wrote it.

use aromba_testkit::warden as support;

use aromba_warden_proto::{Request, Response};
use support::Warden;

/// A deny-list hit from the Worker: one step up the ladder.
fn deny_hit(w: &Warden) {
    let r = w.ask(&Request::Read {
        cmd: "rm".into(),
        args: vec!["-rf".into(), "/".into()],
    });
    assert!(matches!(r, Response::Refused { .. }), "{r:?}");
}

#[test]
fn worker_panic_at_cut_leaves_the_reason_root_sees_unchanged() {
    let w = Warden::start("ladder-panic-cut", false, &[]);
    // Three deny-list hits, a minute apart: Slow, Freeze, Cut.
    for _ in 0..3 {
        deny_hit(&w);
        w.clock.advance(61);
    }
    let before = w.status();
    assert_eq!(before.ladder_name, "cut");
    assert!(before.ladder_reason.contains("deny-list"), "{before:?}");
    let lines = w.journal().lines().count();
    // `panic` passes at any pace; at Cut it moves nothing.
    for _ in 0..5 {
        let r = w.ask(&Request::Panic);
        assert!(matches!(r, Response::Ladder { .. }), "{r:?}");
    }
    let after = w.status();
    assert_eq!(after.ladder_name, "cut");
    assert_eq!(
        after.ladder_reason, before.ladder_reason,
        "a panic that moved nothing rewrote why the ladder is at Cut"
    );
    assert_eq!(
        w.journal().lines().count(),
        lines,
        "a panic that moved nothing wrote to the journal"
    );
}

#[test]
fn worker_text_in_a_signal_reaches_roots_status_bounded_and_without_control_bytes() {
    let w = Warden::start("ladder-worker-text", false, &[]);
    // A red action named by the Worker: a signal whose text is the name.
    // Escape sequences that would clear root's line and write a calm one,
    // then 60 000 bytes.
    let action = format!(
        "\r\x1b[2K\x1b]0;owned\x07ladder: normal (step 0)\n{}",
        "x".repeat(60_000)
    );
    let r = w.ask(&Request::RedAction {
        action,
        approval: None,
    });
    assert!(matches!(r, Response::Refused { .. }), "{r:?}");
    let st = w.status();
    assert_eq!(st.ladder_name, "slow");
    assert!(
        st.ladder_reason.contains("red action"),
        "{}",
        st.ladder_reason
    );
    assert!(
        !st.ladder_reason.chars().any(char::is_control),
        "control bytes from the Worker in root's status: {:?}",
        &st.ladder_reason[..st.ladder_reason.len().min(120)]
    );
    assert!(
        st.ladder_reason.len() <= 1024,
        "the Worker's text reached root's status unbounded: {} bytes",
        st.ladder_reason.len()
    );
    // The same text is the event the chat is told of.
    let Response::Events { events } = w.ask(&Request::Events { after: 0 }) else {
        panic!("no events");
    };
    let event = events.last().expect("the move to Slow");
    assert!(!event.reason.chars().any(char::is_control));
    assert!(event.reason.len() <= 1024);
}
