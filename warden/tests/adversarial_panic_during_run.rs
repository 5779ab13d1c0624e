//! `/panic` sent while an approved red chore ran took effect only after
//! the chore had done everything: the ladder moved, but the run went on to
//! its end. A move to Freeze or Cut now stops every run under way, and the
//! receipt says so. Needs root and bubblewrap.

use aromba_testkit::warden as support;

use aromba_warden_proto::{Request, Response};
use std::time::Duration;
use support::{Warden, owner_chore};

/// A red chore that marks its start, works a long while, then marks its
/// end (a dry run only says what it would do).
fn slow_wipe() -> (String, String) {
    owner_chore(
        "slow-wipe",
        "red",
        "",
        "[ \"$1\" = --dry-run ] && { echo would-wipe; exit 0; }\n\
         echo started > TOUCHED/started\n\
         sleep 30\n\
         echo finished > TOUCHED/finished",
    )
}

/// Waits until the run has begun (its first mark is there).
fn wait_for_start(w: &Warden) {
    for _ in 0..600 {
        if w.touched.join("started").exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("the approved run never started");
}

#[test]
fn panic_during_an_approved_red_run_stops_the_run() {
    let w = Warden::start("adv-panic-run", true, &[slow_wipe()]);
    w.dry_run_shown("slow-wipe");
    let (action, server, _) = w.propose(&Request::Propose {
        chore: "slow-wipe".into(),
    });
    let tap = w.tap(&server, &action, "approve", None);
    let answer = std::thread::scope(|s| {
        let run = s.spawn(|| w.ask(&tap));
        wait_for_start(&w);
        assert!(
            matches!(w.ask(&Request::Panic), Response::Ladder { .. }),
            "the panic was taken"
        );
        run.join().expect("the tap's answer")
    });
    assert!(
        !w.touched.join("finished").exists(),
        "the run went on to its end after /panic"
    );
    match answer {
        Response::Receipt { receipt, ok, .. } => {
            assert!(!ok, "a stopped run is not clean: {receipt}");
            assert!(receipt.contains("stopped part way"), "{receipt}");
        }
        other => panic!("no receipt: {other:?}"),
    }
    assert!(w.ladder() >= 2, "the ladder stands at Freeze or above");
    assert!(w.journal().contains("\"runs-stopped\""), "journaled");
}

#[test]
fn a_run_asked_for_after_panic_does_not_start() {
    let w = Warden::start("adv-panic-before", true, &[slow_wipe()]);
    w.dry_run_shown("slow-wipe");
    let (action, server, _) = w.propose(&Request::Propose {
        chore: "slow-wipe".into(),
    });
    let tap = w.tap(&server, &action, "approve", None);
    assert!(matches!(w.ask(&Request::Panic), Response::Ladder { .. }));
    let answer = w.ask(&tap);
    assert!(
        !matches!(answer, Response::Receipt { ok: true, .. }),
        "{answer:?}"
    );
    assert!(!w.touched.join("started").exists(), "it ran at Freeze");
}
