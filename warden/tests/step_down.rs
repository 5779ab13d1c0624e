//! "Was that you?": at Slow and Freeze the Warden asks the person, in
//! plain words, with buttons of its own. "Yes, it was me" — approved in the
//! Mini App, Telegram's signature verified by the Warden — brings the
//! ladder back to normal; "No, stop Aromba" runs nothing here (the Worker then sends
//! `/panic`). Cut and Disarm are never stepped down from the chat. At Slow
//! the person's commands and the Worker's background work are paced apart,
//! so the Worker's own reads never take the minute a person waits for.

use aromba_testkit::warden as support;

use aromba_warden::ladder::Clock;
use aromba_warden_proto::{Request, Response};
use support::{TEST_KEY, Warden, deny_list_hit, plain_read as read};

/// A paired Warden moved to Slow by one deny-list hit.
fn slowed(name: &str) -> Warden {
    support::slowed(&format!("step-down-{name}"), &[])
}

/// "Was that you?" asked: its action id, the server id and the text.
fn asked(w: &Warden) -> (String, String, String) {
    let (action, server, needs_pin) = w.propose(&Request::ProposeStepDown);
    assert!(!needs_pin, "a step down takes no PIN");
    let text = w.text_of(&action);
    (action, server, text)
}

#[test]
fn at_slow_the_warden_asks_in_plain_words_with_yes_and_no() {
    let w = slowed("words");
    let Response::Proposed { text, buttons, .. } = w.ask(&Request::ProposeStepDown) else {
        panic!("not asked")
    };
    let buttons: Vec<(String, String)> = buttons.into_iter().map(|b| (b.data, b.label)).collect();
    assert!(text.starts_with("Was that you?"), "{text}");
    assert!(
        text.contains("What I saw: something asked me to run a command I never run"),
        "{text}"
    );
    assert!(text.contains("aromba resume"), "{text}");
    assert!(text.contains("24 quiet hours"), "{text}");
    assert_eq!(
        buttons,
        [
            ("approve".to_string(), "Yes, it was me".to_string()),
            ("cancel".to_string(), "No, stop Aromba".to_string())
        ]
    );
}

#[test]
fn yes_it_was_me_brings_slow_back_to_normal() {
    let w = slowed("yes");
    let (action, server, _) = asked(&w);
    let tap = w.tap(&server, &action, "approve", None);
    assert!(
        matches!(w.ask(&tap), Response::Ladder { step: 0, .. }),
        "not stepped down"
    );
    assert_eq!(w.ladder(), 0);
    assert!(w.journal().contains("the person said it was them"));
}

#[test]
fn yes_it_was_me_brings_freeze_back_to_normal() {
    let w = slowed("freeze");
    w.clock.advance(120);
    assert!(matches!(w.ask(&deny_list_hit()), Response::Refused { .. }));
    assert_eq!(w.ladder(), 2);
    let (action, server, text) = asked(&w);
    assert!(text.contains("stopped my schedule"), "{text}");
    let tap = w.tap(&server, &action, "approve", None);
    assert!(matches!(w.ask(&tap), Response::Ladder { step: 0, .. }));
}

#[test]
fn no_stop_aromba_runs_nothing_and_leaves_the_ladder() {
    let w = slowed("no");
    let (action, server, _) = asked(&w);
    let tap = w.signed(&server, &action, "cancel", w.clock.now(), TEST_KEY);
    let Response::Refused { reason, .. } = w.ask(&tap) else {
        panic!("a No did something")
    };
    assert!(
        reason.starts_with(aromba_warden_proto::DECLINED),
        "{reason}"
    );
    assert_eq!(w.ladder(), 1, "a No moves nothing by itself");
}

#[test]
fn a_forged_yes_is_refused_and_climbs_the_ladder() {
    let w = slowed("forged");
    let (action, server, _) = asked(&w);
    let other = minisign::KeyPair::generate_unencrypted_keypair().unwrap();
    let other_key = other.sk.to_box(None).unwrap().into_string();
    let tap = w.signed(&server, &action, "approve", w.clock.now(), &other_key);
    assert!(matches!(w.ask(&tap), Response::Refused { .. }));
    assert_eq!(
        w.ladder(),
        2,
        "a forged Yes is a red action without approval"
    );
}

#[test]
fn a_yes_for_an_older_question_does_not_step_down_a_newer_move() {
    let w = slowed("older");
    let (action, server, _) = asked(&w);
    // Something else happens before the tap: the ladder is at Freeze now,
    // for another reason; the Yes was for what the person read.
    w.clock.advance(120);
    assert!(matches!(
        w.ask(&Request::Read {
            cmd: "cat".into(),
            args: vec!["/etc/shadow".into()]
        }),
        Response::Refused { .. }
    ));
    assert_eq!(w.ladder(), 2);
    // The move to Freeze withdrew the question: the person's late Yes
    // steps nothing down and is no signal (at Freeze it waits with every
    // other tap but a live question's).
    w.clock.advance(60);
    let tap = w.signed(&server, &action, "approve", w.clock.now(), TEST_KEY);
    let r = w.ask(&tap);
    assert!(
        matches!(
            &r,
            Response::AlreadyAnswered { .. } | Response::Refused { .. }
        ),
        "{r:?}"
    );
    assert_eq!(w.ladder(), 2);
    assert!(!w.journal().contains("red action"), "a signal");
}

#[test]
fn cut_is_never_stepped_down_from_the_chat() {
    let w = slowed("cut");
    assert!(matches!(w.ask(&Request::Panic), Response::Ladder { .. }));
    assert_eq!(w.ladder(), 3);
    let Response::Refused { reason, .. } = w.ask(&Request::ProposeStepDown) else {
        panic!("asked at Cut")
    };
    assert!(reason.contains("only Slow and Freeze"), "{reason}");
}

#[test]
fn one_question_is_asked_per_move() {
    let w = slowed("one");
    let (first, server, _) = asked(&w);
    let Response::Refused { reason, .. } = w.ask(&Request::ProposeStepDown) else {
        panic!("asked twice for one move")
    };
    assert!(reason.contains("asked already"), "{reason}");
    // The first is still the one to answer.
    let tap = w.tap(&server, &first, "approve", None);
    assert!(matches!(w.ask(&tap), Response::Ladder { step: 0, .. }));
}

#[test]
fn at_slow_the_workers_own_reads_do_not_take_the_persons_minute() {
    let w = slowed("lanes");
    w.clock.advance(60);
    // The Worker's health poll, in the background lane.
    assert!(matches!(
        w.ask_in_background(&read("uptime")),
        Response::Result(_)
    ));
    // The person's command a second later still runs.
    assert!(matches!(w.ask(&read("uptime")), Response::Result(_)));
    // A second command of the person's within the minute waits, and the
    // wait it gives is the one it keeps.
    w.clock.advance(20);
    let Response::Refused { reason, .. } = w.ask(&read("uptime")) else {
        panic!("not paced")
    };
    assert!(reason.starts_with(aromba_warden_proto::SLOWED), "{reason}");
    assert!(reason.contains("again in 40 seconds"), "{reason}");
    w.clock.advance(40);
    assert!(matches!(w.ask(&read("uptime")), Response::Result(_)));
    // The background gets one request in ten minutes.
    let Response::Refused { reason, .. } = w.ask_in_background(&read("uptime")) else {
        panic!("the background was not paced")
    };
    assert!(reason.contains("again in 540 seconds"), "{reason}");
    w.clock.advance(540);
    assert!(matches!(
        w.ask_in_background(&read("uptime")),
        Response::Result(_)
    ));
}

#[test]
fn a_lane_the_protocol_does_not_know_is_refused() {
    assert!(aromba_warden_proto::decode_request_in(br#"{"type":"ping","lane":"root"}"#).is_err());
    assert!(aromba_warden_proto::decode_request_in(br#"{"type":"ping","lane":7}"#).is_err());
    let (r, lane) =
        aromba_warden_proto::decode_request_in(&aromba_warden_proto::encode_request_in(
            &Request::Ping,
            aromba_warden_proto::Lane::Background,
        ))
        .unwrap();
    assert_eq!(
        (r, lane),
        (Request::Ping, aromba_warden_proto::Lane::Background)
    );
}
