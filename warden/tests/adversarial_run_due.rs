//! A hostile Worker against `run_due` and `health`, on a real Warden on
//! real sockets: the schedule's minimum interval, chores that are not
//! green, never dry-run or unscheduled, prod mode and Freeze, the count
//! toward too-many-commands, and the journal's record of what it refused.
//! Needs root and bubblewrap (a green run is a real caged run).

use aromba_testkit::warden as support;

use aromba_warden_proto::{Request, Response};
use support::Warden;

/// A chore of the owner's with a schedule: its real run leaves `ran` in
/// the touched directory (counted, one line a run); its dry run changes
/// nothing.
fn scheduled(name: &str, color: &str, schedule: &str) -> (String, String) {
    (
        name.to_string(),
        format!(
            "# aromba-chore: 1\n# name: {name}\n# description: A chore of the tests\n# color: {color}\n# touches: TOUCHED\n# network: no\n# schedule: {schedule}\n# end\nif [ \"$1\" = --dry-run ]; then echo would mark; exit 0; fi\necho run >> TOUCHED/ran-{name}\n"
        ),
    )
}

fn run_due(w: &Warden, chore: &str) -> Response {
    w.ask(&Request::RunDue {
        chore: chore.into(),
    })
}

/// How many real runs of `chore` happened.
fn runs(w: &Warden, chore: &str) -> usize {
    std::fs::read_to_string(w.touched.join(format!("ran-{chore}")))
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

fn refused(r: &Response) -> &str {
    match r {
        Response::Refused { reason, .. } => reason,
        other => panic!("not refused: {other:?}"),
    }
}

fn ran(r: &Response) {
    assert!(
        matches!(r, Response::Receipt { ok: true, .. }),
        "not a clean run: {r:?}"
    );
}

#[test]
fn run_due_refuses_a_yellow_and_a_red_chore_even_after_their_dry_runs() {
    let w = Warden::start(
        "due-colors",
        true,
        &[
            scheduled("tidy-yellow", "yellow", "daily 03:00"),
            scheduled("tidy-red", "red", "daily 03:00"),
        ],
    );
    for name in ["tidy-yellow", "tidy-red"] {
        w.dry_run_shown(name);
        let r = run_due(&w, name);
        assert!(
            refused(&r).contains("runs on a tap"),
            "{name}: {}",
            refused(&r)
        );
        assert_eq!(runs(&w, name), 0, "{name} ran on run_due alone");
    }
}

#[test]
fn run_due_refuses_a_chore_whose_dry_run_was_never_shown() {
    let w = Warden::start(
        "due-no-dry",
        true,
        &[scheduled("daily-mark", "green", "daily 03:00")],
    );
    let r = run_due(&w, "daily-mark");
    assert!(refused(&r).contains("dry run"), "{}", refused(&r));
    // A dry run the Worker never said it showed does not count either.
    let dry = w.ask(&Request::DryRun {
        chore: "daily-mark".into(),
    });
    assert!(matches!(dry, Response::Receipt { ok: true, .. }), "{dry:?}");
    let r = run_due(&w, "daily-mark");
    assert!(refused(&r).contains("dry run"), "{}", refused(&r));
    assert_eq!(runs(&w, "daily-mark"), 0);
    // Refused before the stamp: once shown, the chore runs at once.
    w.dry_run_shown("daily-mark");
    ran(&run_due(&w, "daily-mark"));
    assert_eq!(runs(&w, "daily-mark"), 1);
}

#[test]
fn run_due_refuses_a_manual_chore_and_one_that_does_not_exist() {
    let w = Warden::start(
        "due-manual",
        true,
        &[scheduled("by-hand", "green", "manual")],
    );
    w.dry_run_shown("by-hand");
    let r = run_due(&w, "by-hand");
    assert!(refused(&r).contains("no schedule"), "{}", refused(&r));
    for name in ["../by-hand", "by-hand\n", "BY-HAND", "", "by-hand.sh"] {
        let r = run_due(&w, name);
        assert!(
            refused(&r).contains("no chore named"),
            "{name:?}: {}",
            refused(&r)
        );
    }
    assert_eq!(runs(&w, "by-hand"), 0);
}

#[test]
fn run_due_asked_again_and_again_runs_a_daily_chore_once_a_day() {
    let w = Warden::start(
        "due-interval",
        true,
        &[
            scheduled("daily-mark", "green", "daily 03:00"),
            scheduled("weekly-mark", "green", "weekly sun 04:00"),
        ],
    );
    w.dry_run_shown("daily-mark");
    w.dry_run_shown("weekly-mark");
    ran(&run_due(&w, "daily-mark"));
    ran(&run_due(&w, "weekly-mark"));
    for _ in 0..5 {
        let r = run_due(&w, "daily-mark");
        assert!(refused(&r).contains("not due again"), "{}", refused(&r));
    }
    // Nineteen hours on: still too soon.
    w.clock.advance(19 * 3600);
    assert!(refused(&run_due(&w, "daily-mark")).contains("not due again"));
    // A restart forgets nothing: the time is on disk.
    let mut w = w;
    w.restart();
    assert!(refused(&run_due(&w, "daily-mark")).contains("not due again"));
    // Past twenty hours: due again, once.
    w.clock.advance(3600 + 1);
    ran(&run_due(&w, "daily-mark"));
    assert!(refused(&run_due(&w, "daily-mark")).contains("not due again"));
    assert_eq!(runs(&w, "daily-mark"), 2);
    // The weekly one is still not due after a day.
    assert!(refused(&run_due(&w, "weekly-mark")).contains("not due again"));
    assert_eq!(runs(&w, "weekly-mark"), 1);
}

#[test]
fn run_due_runs_nothing_in_prod_mode() {
    let w = Warden::start(
        "due-prod",
        true,
        &[scheduled("daily-mark", "green", "daily 03:00")],
    );
    w.dry_run_shown("daily-mark");
    w.set_pin_and_prod_mode_on("472913");
    let r = run_due(&w, "daily-mark");
    assert!(refused(&r).contains("red"), "{}", refused(&r));
    assert_eq!(runs(&w, "daily-mark"), 0);
}

#[test]
fn run_due_runs_nothing_at_freeze_or_above() {
    let w = Warden::start(
        "due-freeze",
        true,
        &[scheduled("daily-mark", "green", "daily 03:00")],
    );
    w.dry_run_shown("daily-mark");
    // The chat's /panic: Cut, above Freeze.
    assert!(matches!(w.ask(&Request::Panic), Response::Ladder { .. }));
    assert!(w.ladder() >= 2);
    // Past Slow's one command a minute, so the answer is Freeze's.
    w.clock.advance(61);
    let r = run_due(&w, "daily-mark");
    assert!(refused(&r).contains("Freeze"), "{}", refused(&r));
    assert_eq!(runs(&w, "daily-mark"), 0);
    // The refusal is journaled, and the answer names its line.
    assert!(matches!(
        r,
        Response::Refused {
            journal_seq: Some(_),
            ..
        }
    ));
    assert!(
        w.journal()
            .lines()
            .any(|l| l.contains("chore-run") && l.contains("daily-mark") && l.contains("refused")),
        "{}",
        w.journal()
    );
}

#[test]
fn run_due_counts_toward_too_many_commands() {
    let w = Warden::start_with(
        "due-count",
        true,
        &[scheduled("daily-mark", "green", "daily 03:00")],
        |o| o.command_threshold = 3,
    );
    // Refused requests are commands all the same: four in the window
    // climb the ladder.
    for _ in 0..4 {
        let _ = run_due(&w, "no-such-chore");
    }
    assert!(
        w.ladder() >= 1,
        "four run_due in the window left the ladder at normal"
    );
}

#[test]
fn run_due_refusals_are_journaled() {
    let w = Warden::start(
        "due-journal",
        true,
        &[
            scheduled("daily-mark", "green", "daily 03:00"),
            scheduled("tidy-red", "red", "daily 03:00"),
        ],
    );
    w.dry_run_shown("tidy-red");
    let before = w.journal().lines().count();
    let r = run_due(&w, "tidy-red");
    let _ = refused(&r);
    let r = run_due(&w, "daily-mark");
    let _ = refused(&r);
    let journal = w.journal();
    let added: Vec<&str> = journal.lines().skip(before).collect();
    for chore in ["tidy-red", "daily-mark"] {
        assert!(
            added
                .iter()
                .any(|l| l.contains("run-due") && l.contains(chore) && l.contains("refused")),
            "the refusal of {chore} is not in the journal: {added:#?}"
        );
    }
    // And the answer names the line.
    match run_due(&w, "tidy-red") {
        Response::Refused { journal_seq, .. } => assert!(journal_seq.is_some()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_health_set_is_paced_at_slow_like_any_command() {
    let w = Warden::start_with("health-slow", true, &[], |o| o.command_threshold = 1);
    // Two commands climb to Slow.
    let _ = w.ask(&Request::Health);
    let _ = w.ask(&Request::Health);
    assert!(w.ladder() >= 1);
    // At Slow one command a minute: the next health set waits.
    let r = w.ask(&Request::Health);
    assert!(
        refused(&r).contains("slowed down"),
        "a health set passed Slow's pace: {r:?}"
    );
}

#[test]
fn run_due_runs_no_green_chore_whose_big_damage_cap_is_unconfirmed() {
    let (name, script) = scheduled("big-green", "green", "daily 03:00");
    let script = script.replace(
        "# network: no\n",
        "# max_changes: 5000 files, 20 GB\n# network: no\n",
    );
    let w = Warden::start("due-cap", true, &[(name, script)]);
    // Its dry run is refused until the cap is confirmed, so it can never
    // be shown, and run_due has nothing to count on.
    let dry = w.ask(&Request::DryRun {
        chore: "big-green".into(),
    });
    assert!(refused(&dry).contains("damage cap"), "{}", refused(&dry));
    let shown = w.ask(&Request::DryRunShown {
        chore: "big-green".into(),
    });
    assert!(matches!(shown, Response::Refused { .. }), "{shown:?}");
    let r = run_due(&w, "big-green");
    assert!(refused(&r).contains("dry run"), "{}", refused(&r));
    assert_eq!(runs(&w, "big-green"), 0);
}

#[test]
fn run_due_asked_at_once_from_many_connections_runs_once() {
    let w = Warden::start_with(
        "due-race",
        true,
        &[scheduled("daily-mark", "green", "daily 03:00")],
        |o| o.max_running = 8,
    );
    w.dry_run_shown("daily-mark");
    let socket = w.layout().worker_socket();
    let start = std::sync::Arc::new(std::sync::Barrier::new(8));
    let askers: Vec<_> = (0..8)
        .map(|_| {
            let (socket, start) = (socket.clone(), start.clone());
            std::thread::spawn(move || {
                use aromba_warden_proto::{
                    MAX_RESPONSE, decode_response, encode_request, read_frame, write_frame,
                };
                let mut s = std::os::unix::net::UnixStream::connect(&socket).unwrap();
                let r = Request::RunDue {
                    chore: "daily-mark".into(),
                };
                start.wait();
                write_frame(&mut s, &encode_request(&r), 1 << 16).unwrap();
                decode_response(&read_frame(&mut s, MAX_RESPONSE).unwrap()).unwrap()
            })
        })
        .collect();
    let answers: Vec<Response> = askers.into_iter().map(|t| t.join().unwrap()).collect();
    let ran = answers
        .iter()
        .filter(|r| matches!(r, Response::Receipt { .. }))
        .count();
    assert!(ran <= 1, "{ran} runs: {answers:#?}");
    assert!(runs(&w, "daily-mark") <= 1);
    // The others were refused because it was not due, not because the
    // record of the run raced.
    for r in &answers {
        if let Response::Refused { reason, .. } = r {
            assert!(reason.contains("not due again"), "{answers:#?}");
        }
    }
}
