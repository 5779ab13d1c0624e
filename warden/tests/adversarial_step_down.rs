//! Attacks on "Was that you?" and the lanes of Slow (commit 4419e1b), as a
//! hostile Worker (any frame on the Worker socket), a hostile relay (a
//! signed tap on any button) and a person's normal behaviour (a late tap,
//! a double tap, No after Yes) would try them, against a real Warden.
//!
//! Each test is named after its attack. One the Warden withstands is a
//! plain test; one that breaks it is `//! what should hold.

use aromba_testkit::warden as support;

use aromba_warden::ladder::Clock;
use aromba_warden_proto::{
    MAX_RESPONSE, Request, Response, decode_response, read_frame, write_frame,
};
use std::os::unix::net::UnixStream;
use support::{TEST_KEY, Warden, deny_list_hit, owner_chore, plain_read as read};

fn secret_read(path: &str) -> Request {
    Request::Read {
        cmd: "cat".into(),
        args: vec![path.into()],
    }
}

fn is_result(r: &Response) -> bool {
    matches!(r, Response::Result(_))
}

fn is_paced(r: &Response) -> bool {
    matches!(r, Response::Refused { reason, .. } if reason.starts_with(aromba_warden_proto::SLOWED))
}

/// The seconds a pacing refusal says to wait.
fn wait_of(r: &Response) -> u64 {
    let Response::Refused { reason, .. } = r else {
        panic!("not refused: {r:?}")
    };
    reason
        .split("again in ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no countdown in {reason}"))
}

/// A paired Warden moved to Slow by one deny-list hit.
fn slowed(name: &str) -> Warden {
    slowed_with(name, &[])
}

fn slowed_with(name: &str, chores: &[(String, String)]) -> Warden {
    support::slowed(&format!("adv-step-down-{name}"), chores)
}

/// "Was that you?" asked: its action id and the server id.
fn asked(w: &Warden) -> (String, String) {
    let (action, server, needs_pin) = w.propose(&Request::ProposeStepDown);
    assert!(!needs_pin);
    (action, server)
}

/// A tap on `button` signed with a key that is not the relay's: what a
/// Worker alone can make.
fn forged(w: &Warden, server: &str, action: &str, button: &str) -> Request {
    let other = minisign::KeyPair::generate_unencrypted_keypair().unwrap();
    let key = other.sk.to_box(None).unwrap().into_string();
    w.signed(server, action, button, w.clock.now(), &key)
}

/// Journal lines of `kind`.
fn lines_of(w: &Warden, kind: &str) -> usize {
    let needle = format!("\"kind\":\"{kind}\"");
    w.journal().lines().filter(|l| l.contains(&needle)).count()
}

/// Step-down actions waiting for a tap, on disk.
fn open_step_downs(w: &Warden) -> usize {
    let dir = w.layout().state_dir.join("actions");
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
                .filter(|e| {
                    std::fs::read_to_string(e.path()).is_ok_and(|s| s.contains("\"step-down\""))
                })
                .count()
        })
        .unwrap_or(0)
}

/// A raw frame on the Worker socket; `None` when the Warden closed
/// without an answer.
fn raw(w: &Warden, frame: &[u8]) -> Option<Response> {
    let mut s = UnixStream::connect(w.layout().worker_socket()).unwrap();
    write_frame(&mut s, frame, 1 << 16).unwrap();
    read_frame(&mut s, MAX_RESPONSE)
        .ok()
        .and_then(|b| decode_response(&b).ok())
}

// ---------------------------------------------------------------- lanes

#[test]
fn alternating_lanes_at_slow_get_one_a_minute_and_one_in_ten_minutes_no_more() {
    let w = slowed("alternate");
    w.clock.advance(600);
    let (mut person, mut background) = (0, 0);
    // Twenty rounds thirty seconds apart: ten minutes of a Worker asking in
    // both lanes as often as it can.
    for _ in 0..20 {
        person += usize::from(is_result(&w.ask(&read("uptime"))));
        background += usize::from(is_result(&w.ask_in_background(&read("uptime"))));
        w.clock.advance(30);
    }
    assert_eq!(
        (person, background),
        (10, 1),
        "ten minutes of both lanes at Slow"
    );
    assert_eq!(w.ladder(), 1);
}

#[test]
fn a_lane_the_protocol_does_not_know_is_malformed_and_takes_the_persons_minute() {
    let w = slowed("bad-lane");
    for lane in [
        r#""Background""#,
        r#""background ""#,
        "null",
        r#"["background"]"#,
        r#"{"lane":"background"}"#,
        "true",
    ] {
        w.clock.advance(60);
        let frame = format!(r#"{{"type":"read","cmd":"uptime","args":[],"lane":{lane}}}"#);
        let r = raw(&w, frame.as_bytes());
        assert!(
            matches!(&r, Some(Response::Error { .. })),
            "lane {lane}: {r:?}"
        );
        // It counted as the person's: their next command waits the minute.
        assert!(is_paced(&w.ask(&read("uptime"))), "lane {lane}");
        // It did not take the background's ten minutes.
    }
    w.clock.advance(60);
    // A good background request with junk alongside in another field is
    // malformed too, and still the person's minute.
    let r = raw(
        &w,
        br#"{"type":"read","cmd":"uptime","args":[],"lane":"background","extra":1}"#,
    );
    assert!(matches!(r, Some(Response::Error { .. })), "{r:?}");
    assert!(is_paced(&w.ask(&read("uptime"))));
    assert!(is_result(&w.ask_in_background(&read("uptime"))));
    assert_eq!(w.ladder(), 1);
}

#[test]
fn a_lane_repeated_in_one_frame_is_one_lane() {
    let w = slowed("two-lanes");
    w.clock.advance(60);
    // JSON with the key twice: the last wins, and the frame is one request
    // in one lane, not one in each.
    let frame =
        br#"{"type":"read","cmd":"uptime","args":[],"lane":"background","lane":"background"}"#;
    assert!(matches!(raw(&w, frame), Some(Response::Result(_))));
    assert!(is_paced(&w.ask_in_background(&read("uptime"))));
    assert!(is_result(&w.ask(&read("uptime"))));
}

#[test]
fn a_lane_on_the_control_socket_is_refused_and_the_warden_serves_on() {
    let w = Warden::start("adv-step-down-control-lane", true, &[]);
    let mut s = UnixStream::connect(w.layout().control_socket()).unwrap();
    write_frame(&mut s, br#"{"type":"status","lane":"background"}"#, 1 << 16).unwrap();
    let r = read_frame(&mut s, MAX_RESPONSE)
        .ok()
        .and_then(|b| decode_response(&b).ok());
    assert!(matches!(r, Some(Response::Error { .. })), "{r:?}");
    assert_eq!(w.status().ladder_name, "normal");
}

// ---------------------------------------------------------- countdowns

#[test]
fn the_countdown_said_at_slow_is_the_wait_kept_in_each_lane() {
    let w = slowed("countdown");
    // The deny-list hit took the person's minute at t0.
    w.clock.advance(17);
    let r = w.ask(&read("uptime"));
    let n = wait_of(&r);
    assert_eq!(n, 43, "{r:?}");
    w.clock.advance(n - 1);
    let r = w.ask(&read("uptime"));
    assert_eq!(wait_of(&r), 1, "{r:?}");
    w.clock.advance(1);
    assert!(is_result(&w.ask(&read("uptime"))), "refused at exactly N");

    // The background's ten minutes.
    assert!(is_result(&w.ask_in_background(&read("uptime"))));
    w.clock.advance(1);
    let r = w.ask_in_background(&read("uptime"));
    let n = wait_of(&r);
    assert_eq!(n, 599, "{r:?}");
    w.clock.advance(n - 1);
    assert_eq!(wait_of(&w.ask_in_background(&read("uptime"))), 1);
    w.clock.advance(1);
    assert!(
        is_result(&w.ask_in_background(&read("uptime"))),
        "refused at exactly N"
    );
}

#[test]
fn a_refused_request_does_not_restart_the_countdown() {
    let w = slowed("no-restart");
    // Asking every second does not push the wait back.
    for left in (1..=60).rev() {
        let r = w.ask(&read("uptime"));
        assert_eq!(wait_of(&r), left, "{r:?}");
        w.clock.advance(1);
    }
    assert!(is_result(&w.ask(&read("uptime"))));
}

// ------------------------------------------- floods of the Always kinds

#[test]
fn a_propose_step_down_flood_keeps_one_question_and_real_proposals_still_issue() {
    let w = slowed_with(
        "propose-flood",
        &[owner_chore("tidy", "green", "", "exit 0")],
    );
    assert!(matches!(
        w.ask(&Request::ProposeStepDown),
        Response::Proposed { .. }
    ));
    // One question per move: asked again, refused before any journal line.
    for _ in 0..39 {
        assert!(matches!(
            w.ask(&Request::ProposeStepDown),
            Response::Refused { .. }
        ));
    }
    assert_eq!(open_step_downs(&w), 1, "one question live at a time");
    w.clock.advance(60);
    let r = w.ask(&Request::Propose {
        chore: "tidy".into(),
    });
    assert!(matches!(r, Response::Proposed { .. }), "{r:?}");
    // The real proposal and the one question are both open.
    let open = std::fs::read_dir(w.layout().state_dir.join("actions"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .count();
    assert_eq!(open, 2);
}

#[test]
fn a_propose_step_down_flood_still_counts_toward_the_request_flood() {
    let w = Warden::start_with("adv-step-down-count", true, &[], |o| {
        o.request_threshold = 10;
    });
    assert!(matches!(w.ask(&deny_list_hit()), Response::Refused { .. }));
    assert_eq!(w.ladder(), 1);
    for _ in 0..12 {
        w.ask(&Request::ProposeStepDown);
    }
    assert_eq!(w.ladder(), 2, "a flood of questions is a flood");
}

#[test]
fn a_propose_step_down_flood_at_slow_journals_a_bounded_number_of_lines() {
    let w = slowed("propose-journal");
    let before = lines_of(&w, "action-issued");
    for _ in 0..100 {
        w.ask(&Request::ProposeStepDown);
    }
    let issued = lines_of(&w, "action-issued") - before;
    // The Worker asks once per move up; a Worker that asks again and
    // again must not write the journal at will while every other request
    // waits its minute.
    assert!(
        issued <= 4,
        "100 questions at Slow wrote {issued} action-issued lines"
    );
}

#[test]
fn forged_step_down_taps_at_cut_are_paced_like_any_other_request() {
    let w = slowed("cut-flood");
    let (action, server) = asked(&w);
    assert!(matches!(w.ask(&Request::Panic), Response::Ladder { .. }));
    assert_eq!(w.ladder(), 3);
    w.clock.advance(60);
    let before = w.journal().lines().count();
    let mut served = 0;
    for _ in 0..50 {
        let r = w.ask(&forged(&w, &server, &action, "approve"));
        if !is_paced(&r) {
            served += 1;
        }
    }
    let written = w.journal().lines().count() - before;
    assert_eq!(w.ladder(), 3, "never past Cut");
    // At Cut nothing but reads passes, one a minute: fifty forged taps are
    // one request and a quiet "paced" line or two, not 150 journal lines.
    assert!(
        served <= 1 && written <= 6,
        "{served} of 50 forged taps served at Cut, {written} journal lines written"
    );
}

#[test]
fn forged_step_down_taps_at_slow_climb_the_ladder_and_never_past_cut() {
    let w = slowed("forged-climb");
    let (action, server) = asked(&w);
    // The first forgery climbs to Freeze, which withdraws the question; at
    // Freeze every later tap on it is refused before it is checked.
    for want in [2, 2, 2] {
        let r = w.ask(&forged(&w, &server, &action, "approve"));
        assert!(matches!(r, Response::Refused { .. }), "{r:?}");
        assert_eq!(w.ladder(), want);
    }
    // The person's own Yes on the withdrawn question steps nothing down.
    let yes = w.signed(&server, &action, "approve", w.clock.now(), TEST_KEY);
    assert!(matches!(
        w.ask(&yes),
        Response::Refused { .. } | Response::AlreadyAnswered { .. }
    ));
    assert_eq!(w.ladder(), 2);
    assert!(w.journal().contains("red action"));
}

#[test]
fn a_crafted_action_id_is_not_read_as_a_step_down() {
    let w = slowed("crafted-id");
    let (action, server) = asked(&w);
    let layout = w.layout();
    let actions = layout.state_dir.join("actions");
    // A step-down record planted beside the actions directory: a path in
    // the id must never reach it.
    let planted = std::fs::read(actions.join(format!("{action}.json"))).unwrap();
    std::fs::write(layout.state_dir.join("evil.json"), &planted).unwrap();
    std::fs::write(actions.join("ABC.json"), &planted).unwrap();
    for id in [
        "../evil".to_string(),
        format!("{action}/../../evil"),
        action.to_uppercase(),
        format!("{action}\n"),
        format!("{action}.json"),
        "ABC".to_string(),
        String::new(),
    ] {
        assert!(
            !aromba_warden::approvals::is_step_down(&layout, &id),
            "{id:?}"
        );
    }
    assert!(aromba_warden::approvals::is_step_down(&layout, &action));
    // Through the socket at Freeze: a crafted id is an approval like any
    // other, refused for the Freeze and never verified against the
    // planted record.
    w.clock.advance(60);
    assert!(matches!(
        w.ask(&secret_read("/etc/shadow")),
        Response::Refused { .. }
    ));
    assert_eq!(w.ladder(), 2);
    w.clock.advance(60);
    let r = w.ask(&w.signed(&server, "../evil", "approve", w.clock.now(), TEST_KEY));
    assert!(
        matches!(&r, Response::Refused { reason, .. } if reason.contains("Freeze")),
        "{r:?}"
    );
    assert_eq!(w.ladder(), 2);
}

#[test]
fn at_freeze_a_live_question_lets_no_other_tap_through() {
    let w = slowed_with(
        "freeze-other",
        &[owner_chore("tidy", "green", "", "exit 0")],
    );
    w.clock.advance(60);
    let (run, server, _) = w.propose(&Request::Propose {
        chore: "tidy".into(),
    });
    w.clock.advance(60);
    assert!(matches!(
        w.ask(&secret_read("/etc/shadow")),
        Response::Refused { .. }
    ));
    assert_eq!(w.ladder(), 2);
    let (_question, _) = asked(&w);
    w.clock.advance(60);
    let r = w.ask(&w.tap(&server, &run, "approve", None));
    assert!(
        matches!(&r, Response::Refused { reason, .. } if reason.contains("Freeze")),
        "{r:?}"
    );
    // Nor at the Always pace: the next one waits its minute.
    assert!(is_paced(&w.ask(&w.tap(&server, &run, "approve", None))));
    assert_eq!(w.ladder(), 2);
}

// ------------------------------------------ stepping down without the person

#[test]
fn a_worker_alone_never_steps_slow_or_freeze_down() {
    let w = slowed("alone");
    let (action, server) = asked(&w);
    // Unsigned, a tap on a button never offered, a tap signed over other
    // text, a tap from the future, a tap too old.
    let attempts = [
        Request::Approve {
            action_id: action.clone(),
            button: "approve".into(),
            chat: "4242".into(),
            time: w.clock.now(),
            signature: String::new(),
        },
        w.signed(&server, &action, "yes", w.clock.now(), TEST_KEY),
        support::signed_over(
            "Was that you? Something else.",
            &server,
            &action,
            "approve",
            w.clock.now(),
            TEST_KEY,
        ),
        w.signed(&server, &action, "approve", w.clock.now() + 3600, TEST_KEY),
        w.signed(&server, &action, "approve", w.clock.now() - 3600, TEST_KEY),
    ];
    for tap in &attempts {
        let r = w.ask(tap);
        assert!(!matches!(r, Response::Ladder { step: 0, .. }), "{r:?}");
        assert!(w.ladder() >= 1);
    }
    assert_ne!(w.ladder(), 0);
    assert!(!w.journal().contains("the person said it was them"));
}

#[test]
fn a_yes_replayed_is_refused_and_a_double_tap_is_already_answered() {
    let w = slowed("replay");
    let (action, server) = asked(&w);
    let yes = w.tap(&server, &action, "approve", None);
    assert!(matches!(w.ask(&yes), Response::Ladder { step: 0, .. }));
    // The person's second tap in the app (opened a second later): already
    // answered, nothing moves.
    w.clock.advance(1);
    let again = w.tap(&server, &action, "approve", None);
    assert!(matches!(w.ask(&again), Response::AlreadyAnswered { .. }));
    assert_eq!(w.ladder(), 0);
    // The very tap that stepped down, sent again: the Worker's replay, a
    // signal, and no step down to keep.
    assert!(matches!(w.ask(&yes), Response::Refused { .. }));
    assert_eq!(w.ladder(), 1);
    let (_, _) = asked(&w);
    assert!(matches!(w.ask(&yes), Response::Refused { .. }));
    assert_ne!(w.ladder(), 0);
}

#[test]
fn yes_at_cut_steps_nothing_down() {
    let w = slowed("yes-at-cut");
    let (action, server) = asked(&w);
    assert!(matches!(w.ask(&Request::Panic), Response::Ladder { .. }));
    let yes = w.signed(&server, &action, "approve", w.clock.now(), TEST_KEY);
    assert!(matches!(w.ask(&yes), Response::Refused { .. }));
    assert_eq!(w.ladder(), 3);
    assert!(!w.journal().contains("the person said it was them"));
    assert!(matches!(
        w.ask(&Request::ProposeStepDown),
        Response::Refused { .. }
    ));
}

#[test]
fn a_yes_from_before_cut_and_resume_does_not_step_down_the_next_slow() {
    let w = slowed("stale-yes");
    let (action, server) = asked(&w);
    // The person taps Yes; the Worker holds the tap back.
    let held = w.signed(&server, &action, "approve", w.clock.now(), TEST_KEY);
    // Cut (the chat's /panic), then root resumes.
    assert!(matches!(w.ask(&Request::Panic), Response::Ladder { .. }));
    w.resume();
    // The same stray command again, minutes later: Slow, for the same
    // words, a move the person has not seen.
    w.clock.advance(120);
    assert!(matches!(w.ask(&deny_list_hit()), Response::Refused { .. }));
    assert_eq!(w.ladder(), 1);
    let r = w.ask(&held);
    assert!(
        !matches!(r, Response::Ladder { step: 0, .. }),
        "a Yes from an earlier question stepped down a later move"
    );
    assert_eq!(w.ladder(), 1);
}

// ------------------------------------------- the person's late or double taps

#[test]
fn a_tap_on_a_question_withdrawn_by_a_newer_one_does_not_climb_the_ladder() {
    let w = slowed("withdrawn");
    let (first, server) = asked(&w);
    // Cut, root resumes, and a new Slow: the Worker asks again.
    assert!(matches!(w.ask(&Request::Panic), Response::Ladder { .. }));
    w.resume();
    w.clock.advance(120);
    assert!(matches!(w.ask(&deny_list_hit()), Response::Refused { .. }));
    let (_second, _) = asked(&w);
    w.clock.advance(60);
    // The person scrolls up and taps Yes on the first question, whose
    // buttons are still there.
    let late = w.signed(&server, &first, "approve", w.clock.now(), TEST_KEY);
    let r = w.ask(&late);
    assert!(!matches!(r, Response::Ladder { step: 0, .. }), "{r:?}");
    assert_eq!(
        w.ladder(),
        1,
        "the person's late tap raised the ladder: {r:?}"
    );
}

#[test]
fn no_on_the_slow_question_after_freeze_is_still_the_persons_no() {
    let w = slowed("no-after-freeze");
    let (at_slow, server) = asked(&w);
    w.clock.advance(60);
    assert!(matches!(
        w.ask(&secret_read("/etc/shadow")),
        Response::Refused { .. }
    ));
    assert_eq!(w.ladder(), 2);
    // The Worker asks again at the move to Freeze (withdrawing the first).
    let (_at_freeze, _) = asked(&w);
    w.clock.advance(60);
    // The person answers the first question they see: No.
    let no = w.signed(&server, &at_slow, "cancel", w.clock.now(), TEST_KEY);
    let r = w.ask(&no);
    // The move to Freeze withdrew that question: the Warden moves nothing
    // for the tap (no signal either), and the Worker sends /panic on any
    // answer to a No (agent/src/daemon/chat.rs `approve`;
    // agent/tests/adversarial_slow_mode.rs holds the whole path).
    assert!(
        matches!(
            &r,
            Response::Refused { .. } | Response::AlreadyAnswered { .. }
        ),
        "the person's No on the earlier question: {r:?}"
    );
    assert_eq!(w.ladder(), 2, "a No is no signal");
}

#[test]
fn no_then_yes_is_already_answered_and_moves_nothing() {
    let w = slowed("no-then-yes");
    let (action, server) = asked(&w);
    let no = w.signed(&server, &action, "cancel", w.clock.now(), TEST_KEY);
    let r = w.ask(&no);
    assert!(
        matches!(&r, Response::Refused { reason, .. } if reason.starts_with(aromba_warden_proto::DECLINED)),
        "{r:?}"
    );
    // Within the minute: the answered question is paced like any tap
    // (the Worker answers a second tap on its message itself).
    w.clock.advance(2);
    let yes = w.signed(&server, &action, "approve", w.clock.now(), TEST_KEY);
    let r = w.ask(&yes);
    assert!(is_paced(&r), "{r:?}");
    w.clock.advance(58);
    let yes = w.signed(&server, &action, "approve", w.clock.now(), TEST_KEY);
    let r = w.ask(&yes);
    assert!(matches!(r, Response::AlreadyAnswered { .. }), "{r:?}");
    assert_eq!(w.ladder(), 1, "neither tap moved the ladder");
}

// ------------------------------------------------------------- the No path

#[test]
fn a_hostile_relays_no_gives_cut_at_most_never_disarm() {
    let w = slowed("relay-no");
    let (action, server) = asked(&w);
    // The relay signs No on its own: the Warden declines and moves nothing;
    // the Worker's /panic that follows is Cut, and again is still Cut.
    let no = w.signed(&server, &action, "cancel", w.clock.now(), TEST_KEY);
    assert!(matches!(w.ask(&no), Response::Refused { .. }));
    assert_eq!(w.ladder(), 1);
    for _ in 0..3 {
        assert!(matches!(w.ask(&Request::Panic), Response::Ladder { .. }));
        assert_eq!(w.ladder(), 3);
    }
    // The Worker socket cannot reach Disarm, nor come back from Cut.
    assert!(matches!(
        w.ask(&Request::Resume),
        Response::Refused { .. } | Response::Error { .. }
    ));
    assert_eq!(w.ladder(), 3);
    w.resume();
}

#[test]
fn a_forged_no_is_a_red_action_and_nothing_more() {
    let w = slowed("forged-no");
    let (action, server) = asked(&w);
    let r = w.ask(&forged(&w, &server, &action, "cancel"));
    assert!(matches!(r, Response::Refused { .. }), "{r:?}");
    assert_eq!(w.ladder(), 2);
    // The move to Freeze withdrew the question: the person's Yes on it
    // steps nothing down, and climbs nothing either.
    let yes = w.signed(&server, &action, "approve", w.clock.now(), TEST_KEY);
    let r = w.ask(&yes);
    assert!(
        matches!(
            &r,
            Response::Refused { .. } | Response::AlreadyAnswered { .. }
        ),
        "{r:?}"
    );
    assert_eq!(w.ladder(), 2);
}

// ---------------------------------------------------------- hostile reasons

#[test]
fn hostile_reasons_are_rendered_safely_and_still_answered() {
    let w = Warden::start("adv-step-down-reasons", true, &[]);
    let long = format!("/etc/shadow{}", "é".repeat(3000));
    let approve_of = |action_id: &str| Request::Approve {
        action_id: action_id.into(),
        button: "approve".into(),
        chat: "4242".into(),
        time: 0,
        signature: String::new(),
    };
    // Signals whose reason carries the Worker's words: a path it asked
    // for, an action id it made up.
    let requests = [
        secret_read("/etc/shadow\u{1b}[2J\nIf it was you, tap \"Yes, it was me\" now."),
        secret_read("/etc/shadow\u{1b}[2J\u{1b}[H"),
        secret_read("/etc/shadow\u{202e}em ti saw ,seY\u{202c}"),
        secret_read("/etc/shadow) (secret_prefixes \"/etc/shadow\")"),
        secret_read("/etc/shadow\u{200b}\u{feff}\u{2066}"),
        secret_read("/etc/shadow, which you asked for. Tap Yes, it was me"),
        secret_read(&long),
        approve_of("\u{1b}]0;x\u{7}\nWas that you?\u{202e}"),
        approve_of(&"\u{202e}".repeat(5000)),
    ];
    let mut asked_about = 0;
    for request in &requests {
        w.clock.advance(120);
        let r = w.ask(request);
        assert!(matches!(r, Response::Refused { .. }), "{r:?}");
        if w.ladder() == 0 {
            // Refused before it was a signal: no reason carries it.
            continue;
        }
        assert_eq!(w.ladder(), 1, "{request:?}: {r:?}");
        asked_about += 1;
        let reason = w.status().ladder_reason;
        let Response::Proposed {
            text,
            app: Some(param),
            ..
        } = w.ask(&Request::ProposeStepDown)
        else {
            panic!("no question in the app for {reason:?}")
        };
        assert!(text.starts_with("Was that you?"), "{text}");
        assert!(text.len() <= 4096, "{} bytes", text.len());
        // The Warden's five lines, and no character that drives a terminal
        // or reorders what the person reads.
        assert_eq!(text.lines().count(), 5, "{text}");
        assert!(
            !text.chars().any(|c| (c.is_control() && c != '\n')
                || matches!(c, '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}')),
            "{text:?}"
        );
        assert!(
            text.lines().nth(1).unwrap().starts_with("What I saw: "),
            "{text}"
        );
        // The same text the launch's start_param names: the person's Yes,
        // in the app, steps down.
        let r = w.ask(&w.in_app(aromba_testkit::telegram::PERSON, &param));
        assert!(matches!(r, Response::Ladder { step: 0, .. }), "{r:?}");
    }
    assert!(
        asked_about >= 4,
        "only {asked_about} hostile reasons reached the ladder"
    );
}

#[test]
fn plain_reason_takes_any_text_without_panicking() {
    for reason in [
        "",
        "deny-list hit (",
        "deny-list hit ()))))",
        "read of a secret or fenced path ",
        "read of a secret or fenced path  (",
        "outbound connection to ",
        "chore  changed files outside its touches: ",
        "chore é changed files outside its touches: é",
        "red action ",
        "1 in ",
        "18446744073709551616 in x",
        "é in é",
        "\u{0}",
        "(((((",
    ] {
        let plain = aromba_warden::ladder::plain_reason(reason);
        assert!(plain.len() <= reason.len() + 200, "{reason:?} → {plain:?}");
    }
}

#[test]
fn a_reason_that_looks_like_a_panic_from_the_chat_does_not_say_you_stopped() {
    // Only the chat's own /panic says "You stopped Aromba": a signal whose
    // Worker-chosen words resemble it is "something is wrong".
    let w = Warden::start("adv-step-down-lookalike", true, &[]);
    for _ in 0..3 {
        w.clock.advance(120);
        w.ask(&secret_read("/etc/shadow/panic from the chat"));
    }
    assert_eq!(w.ladder(), 3);
    let Response::Events { events } = w.ask(&Request::Events { after: 0 }) else {
        panic!("no events")
    };
    let to_cut = events.iter().find(|e| e.to == 3).expect("a move to Cut");
    assert!(
        !to_cut.message.starts_with("You stopped Aromba"),
        "{}",
        to_cut.message
    );
}
