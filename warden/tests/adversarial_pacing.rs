//! A hostile Worker trying requests that used to escape pacing and the
//! ladder: dry runs (each builds a cage and runs a chore) flooded at Slow,
//! run side by side, or counted as nothing; a resume it sends itself to
//! restart the windows; a flood right after root's resume. Through a real
//! Warden, with the real cage.

use aromba_testkit::warden as support;

use aromba_warden_proto::{
    MAX_RESPONSE, Request, Response, decode_response, encode_request, read_frame, write_frame,
};
use assert_cmd::Command;
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};
use support::{Warden, owner_chore};

fn quick_chore() -> (String, String) {
    owner_chore(
        "tidy",
        "green",
        "",
        "[ \"$1\" = --dry-run ] && { echo would-tidy; exit 0; }\necho tidied",
    )
}

fn dry_run(w: &Warden) -> Response {
    w.ask(&Request::DryRun {
        chore: "tidy".into(),
    })
}

fn is_receipt(r: &Response) -> bool {
    matches!(r, Response::Receipt { .. })
}

fn is_paced(r: &Response) -> bool {
    matches!(r, Response::Refused { reason, .. } if reason.contains("one command a minute"))
}

#[test]
fn dry_runs_flooded_at_slow_are_paced_to_one_a_minute() {
    let w = Warden::start("dry-slow", false, &[quick_chore()]);
    // A deny-list hit: Slow.
    w.ask(&Request::Read {
        cmd: "rm".into(),
        args: vec!["-rf".into(), "/".into()],
    });
    assert_eq!(w.ladder(), 1);
    w.clock.advance(61);
    // Eight dry runs at once, each on its own connection.
    let answers: Vec<Response> = std::thread::scope(|s| {
        let runs: Vec<_> = (0..8).map(|_| s.spawn(|| dry_run(&w))).collect();
        runs.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let ran = answers.iter().filter(|r| is_receipt(r)).count();
    let paced = answers.iter().filter(|r| is_paced(r)).count();
    assert_eq!((ran, paced), (1, 7), "{answers:?}");
    let dry_runs_journaled = w
        .journal()
        .lines()
        .filter(|l| l.contains("\"kind\":\"chore-run\"") && l.contains("\"dry-run\""))
        .count();
    assert_eq!(dry_runs_journaled, 1);
}

#[test]
fn dry_runs_count_as_commands_and_move_the_ladder() {
    let w = Warden::start_with("dry-count", false, &[quick_chore()], |o| {
        o.command_threshold = 3;
    });
    for _ in 0..3 {
        assert!(is_receipt(&dry_run(&w)));
    }
    assert_eq!(w.ladder(), 0);
    dry_run(&w);
    let st = w.status();
    assert_eq!(st.ladder_name, "slow", "four dry runs counted as nothing");
    assert!(
        st.ladder_reason.contains("commands in"),
        "{}",
        st.ladder_reason
    );
}

/// Waits until a process is running `cat PATH` (also inside a cage, whose
/// processes the host's /proc still shows).
fn wait_for_cat(path: &Path) {
    let start = Instant::now();
    loop {
        let found = std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
            .any(|cmdline| {
                let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
                args.len() >= 2
                    && (args[0] == b"cat" || args[0].ends_with(b"/cat"))
                    && args[1] == path.as_os_str().as_encoded_bytes()
            });
        if found {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the dry run never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_dry_run_takes_a_running_slot_like_a_read() {
    let chore = owner_chore(
        "tidy",
        "green",
        "",
        "[ \"$1\" = --dry-run ] && { cat TOUCHED/gate >/dev/null; echo would-tidy; exit 0; }\necho tidied",
    );
    let w = Warden::start_with("dry-slot", false, &[chore], |o| {
        o.max_running = 1;
    });
    let gate = w.touched.join("gate");
    let out = Command::new("mkfifo").arg(&gate).output().unwrap();
    assert!(out.status.success());
    let socket = w.layout().worker_socket();
    let send = |r: &Request| {
        let mut s = UnixStream::connect(&socket).unwrap();
        write_frame(&mut s, &encode_request(r), 1 << 16).unwrap();
        s
    };
    // The dry run holds the only running slot, blocked in its cage…
    let mut dry = send(&Request::DryRun {
        chore: "tidy".into(),
    });
    wait_for_cat(&gate);
    // …so a read waits for it.
    let mut read = send(&Request::Read {
        cmd: "uptime".into(),
        args: vec![],
    });
    read.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    assert!(
        read_frame(&mut read, MAX_RESPONSE).is_err(),
        "a read ran beside a dry run with one running slot"
    );
    // Let the dry run finish: then the read runs.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&gate)
        .unwrap()
        .write_all(b"go\n")
        .unwrap();
    dry.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    read.set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let dry_answer = decode_response(&read_frame(&mut dry, MAX_RESPONSE).unwrap()).unwrap();
    assert!(is_receipt(&dry_answer), "{dry_answer:?}");
    let read_answer = decode_response(&read_frame(&mut read, MAX_RESPONSE).unwrap()).unwrap();
    assert!(
        matches!(read_answer, Response::Result(_)),
        "{read_answer:?}"
    );
    // In the journal, the read ran after the dry run's receipt.
    let journal = w.journal();
    let at = |kind: &str| {
        journal
            .lines()
            .position(|l| l.contains(&format!("\"kind\":\"{kind}\"")))
            .unwrap()
    };
    assert!(at("receipt") < at("read"));
}

fn note(w: &Warden, i: usize) {
    w.ask(&Request::Note {
        text: format!("note {i}"),
    });
}

/// A flood right after `aromba resume` fell in the window of the signal
/// that had raised the ladder, so the Worker sent 2.5 times the threshold
/// with no signal. A move down starts every window again.
#[test]
fn a_flood_right_after_resume_is_signalled_again() {
    let w = Warden::start_with("flood-after-resume", false, &[], |o| {
        o.request_threshold = 20;
    });
    for i in 0..25 {
        note(&w, i);
    }
    assert_eq!(w.status().ladder_name, "slow", "the first flood");
    assert!(matches!(
        w.control(&Request::Resume),
        Response::Ladder { .. }
    ));
    assert_eq!(w.status().ladder_name, "normal");
    // The same minute: a flood again.
    for i in 0..25 {
        note(&w, i);
    }
    let st = w.status();
    assert_eq!(
        st.ladder_name, "slow",
        "a flood right after resume passed unsignalled"
    );
    assert!(
        st.ladder_reason.contains("requests"),
        "{}",
        st.ladder_reason
    );
}

/// The same for commands: the count after a resume starts from nothing
/// (the reads before it are not held against the Worker) and a run of
/// commands above the threshold after it is signalled.
#[test]
fn commands_after_resume_are_counted_from_the_resume() {
    let w = Warden::start_with("commands-after-resume", false, &[quick_chore()], |o| {
        o.command_threshold = 3;
    });
    for _ in 0..4 {
        dry_run(&w);
    }
    assert_eq!(w.status().ladder_name, "slow");
    assert!(matches!(
        w.control(&Request::Resume),
        Response::Ladder { .. }
    ));
    for _ in 0..3 {
        assert!(is_receipt(&dry_run(&w)));
    }
    assert_eq!(
        w.status().ladder_name,
        "normal",
        "three after resume are not a flood"
    );
    dry_run(&w);
    assert_eq!(w.status().ladder_name, "slow", "four after resume are");
}

#[test]
fn the_worker_cannot_resume_itself_to_restart_the_pacing_windows() {
    let w = Warden::start("r30-pace-self-resume", false, &[]);
    // To Slow.
    let _ = w.ask(&Request::Read {
        cmd: "rm".into(),
        args: vec!["-rf".into(), "/".into()],
    });
    if w.ladder() == 0 {
        // Some other way up: a flood of requests.
        for _ in 0..300 {
            let _ = w.ask(&Request::Ping);
        }
    }
    assert!(w.ladder() >= 1);
    let step = w.ladder();
    let r = w.ask(&Request::Resume);
    assert!(
        !matches!(r, Response::Ladder { .. }),
        "the Worker resumed itself: {r:?}"
    );
    assert_eq!(w.ladder(), step);
    // Paced: one a minute, and the Worker's refused resume restarted
    // nothing.
    let _ = w.ask(&Request::Note { text: "one".into() });
    let r = w.ask(&Request::Note { text: "two".into() });
    assert!(matches!(r, Response::Refused { .. }), "{r:?}");
}

/// After root's resume the windows restart: the Worker's flood right
/// after is signalled once per window, not once per request, and moves
/// the ladder one step, not to Cut.
#[test]
fn a_flood_right_after_resume_moves_one_step_not_to_cut() {
    let w = Warden::start_with("r30-pace-resume-flood", false, &[], |o| {
        o.request_threshold = 20;
    });
    for _ in 0..30 {
        let _ = w.ask(&Request::Ping);
    }
    assert!(w.ladder() >= 1);
    w.resume();
    assert_eq!(w.ladder(), 0);
    for _ in 0..60 {
        let _ = w.ask(&Request::Ping);
    }
    let l = w.ladder();
    assert!(l >= 1, "a flood right after resume passed unsignalled");
    assert!(l <= 1, "one flood window moved the ladder {l} steps");
}
