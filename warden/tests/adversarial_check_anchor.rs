//! `check_anchor` under a hostile Worker (or the hostile relay whose
//! anchor it passes on), on a real Warden on real sockets: hash shapes the
//! relay never holds, the largest seq, line 0, lines in rotated files,
//! lines rotated away, and a line taken out of the middle of the journal,
//! which must not pass for one rotated away. And forged anchors: unsigned,
//! signed with another key, for another server or line, in signature
//! shapes of every kind (a tap's signature, a changed trusted comment),
//! on a Warden never paired, replayed, or flooded. What holds: only the
//! relay's signed anchor for this server and line is evidence; nothing
//! else moves the ladder or reads as a rewrite, and a flood is paced
//! without a journal line per refusal.

use aromba_testkit::warden as support;

use aromba_warden::journal::Rotation;
use aromba_warden_proto::{Request, Response};
use support::Warden;
use support::anchor::{ANCHOR_TEST_KEY, anchor_signature, relay_anchor};

/// The anchor `(seq, hash)` as the relay signs it.
fn check(w: &Warden, seq: u64, hash: &str) -> Response {
    w.ask(&relay_anchor(&w.layout(), seq, hash))
}

fn verdict(r: Response) -> (bool, String) {
    match r {
        Response::Verified { ok, report } => (ok, report),
        other => panic!("no verdict: {other:?}"),
    }
}

fn note(w: &Warden, text: &str) {
    assert!(matches!(
        w.ask(&Request::Note { text: text.into() }),
        Response::Noted { .. }
    ));
}

/// The journal's head now: `(seq, hash)`.
fn head(w: &Warden) -> (u64, String) {
    let st = w.status();
    (st.journal_seq, st.journal_head)
}

/// Rotates at about 2 KiB and keeps every rotated file.
fn small_files(o: &mut aromba_warden::server::ServeOptions) {
    o.journal_rotation = Rotation {
        max_bytes: 2048,
        keep: 1000,
        keep_bytes: 1 << 30,
        ..Rotation::default()
    };
}

/// Rotates at about 2 KiB and keeps one rotated file.
fn one_file(o: &mut aromba_warden::server::ServeOptions) {
    o.journal_rotation = Rotation {
        max_bytes: 2048,
        keep: 1,
        keep_bytes: 1 << 30,
        // Dropping files is what this test wants: no alarm for it.
        drop_alarm: 1_000_000,
        min_history: std::time::Duration::ZERO,
        ..Rotation::default()
    };
}

fn rotated(w: &Warden, n: usize) -> std::path::PathBuf {
    let j = w.layout().journal_file();
    j.with_file_name(format!(
        "{}.{n}.gz",
        j.file_name().unwrap().to_string_lossy()
    ))
}

#[test]
fn check_anchor_refuses_hash_shapes_the_relay_never_holds_and_moves_nothing() {
    let w = Warden::start("anchor-shapes", true, &[]);
    note(&w, "a line");
    let (seq, hash) = head(&w);
    for bad in [
        String::new(),
        "abc".to_string(),
        hash.to_uppercase(),
        hash[..63].to_string(),
        format!("{hash}0"),
        "g".repeat(64),
        format!("{} ", &hash[..63]),
        "é".repeat(32),
    ] {
        let r = check(&w, seq, &bad);
        assert!(
            matches!(r, Response::Error { .. }),
            "{bad:?} was judged: {r:?}"
        );
        assert_eq!(w.ladder(), 0, "{bad:?} moved the ladder");
    }
    // The true head in the relay's own shape still matches.
    let (ok, report) = verdict(check(&w, seq, &hash));
    assert!(ok, "{report}");
}

#[test]
fn check_anchor_at_the_largest_seq_is_a_cut_and_the_warden_goes_on() {
    let w = Warden::start("anchor-max", true, &[]);
    let (_, hash) = head(&w);
    let (ok, report) = verdict(check(&w, u64::MAX, &hash));
    assert!(!ok);
    assert!(report.contains("it was cut"), "{report}");
    assert!(matches!(w.ask(&Request::Ping), Response::Pong));
    assert_eq!(w.status().ladder_name, "cut");
}

#[test]
fn check_anchor_of_line_zero_matches_only_the_empty_journals_hash() {
    let w = Warden::start("anchor-zero", true, &[]);
    let (ok, report) = verdict(check(&w, 0, &"0".repeat(64)));
    assert!(ok, "{report}");
    assert_eq!(w.ladder(), 0);
    // Line 0 is before the journal's first line: nothing rotated it away,
    // and no other hash is its.
    let (ok, report) = verdict(check(&w, 0, &"1".repeat(64)));
    assert!(
        !ok,
        "an anchor at line 0 with another hash passed: {report}"
    );
}

#[test]
fn check_anchor_finds_its_line_in_a_rotated_file() {
    let w = Warden::start_with("anchor-rotated", true, &[], small_files);
    note(&w, "anchored here");
    let (seq, hash) = head(&w);
    for i in 0..60 {
        note(&w, &format!("later line {i} {}", "x".repeat(100)));
    }
    assert!(rotated(&w, 2).exists(), "the journal rotated twice");
    let (ok, report) = verdict(check(&w, seq, &hash));
    assert!(ok, "{report}");
    assert!(report.contains("extends"), "{report}");
    assert_eq!(w.ladder(), 0);
    // Another hash for the same rotated line is a rewrite.
    let (ok, report) = verdict(check(&w, seq, &"f".repeat(64)));
    assert!(!ok, "{report}");
    assert!(report.contains("rewritten"), "{report}");
}

#[test]
fn check_anchor_of_a_line_rotated_away_says_so() {
    let w = Warden::start_with("anchor-gone", true, &[], one_file);
    note(&w, "anchored here");
    let (seq, hash) = head(&w);
    for i in 0..60 {
        note(&w, &format!("later line {i} {}", "x".repeat(100)));
    }
    assert!(!rotated(&w, 2).exists(), "one rotated file is kept");
    let (ok, report) = verdict(check(&w, seq, &hash));
    assert!(ok, "{report}");
    assert!(report.contains("rotated away"), "{report}");
}

#[test]
fn check_anchor_of_a_line_cut_out_of_the_middle_of_the_journal_is_a_rewrite() {
    let w = Warden::start("anchor-gap", true, &[]);
    note(&w, "before");
    note(&w, "anchored here");
    let (seq, hash) = head(&w);
    note(&w, "after");
    note(&w, "after again");
    // Root (an attacker who got it) takes the anchored line out and leaves
    // the lines around it: the journal still holds lines before it, so it
    // was never rotated away.
    let path = w.layout().journal_file();
    let text = std::fs::read_to_string(&path).expect("the journal");
    let kept: String = text
        .lines()
        .filter(|l| !l.contains(&format!("\"seq\":{seq},")))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(kept.lines().count() + 1, text.lines().count());
    std::fs::write(&path, kept).expect("the journal rewritten");
    let (ok, report) = verdict(check(&w, seq, &hash));
    assert!(
        !ok,
        "a line cut out of the journal passed as rotated away: {report}"
    );
    assert_eq!(w.status().ladder_name, "cut");
}

#[test]
fn check_anchor_of_the_journals_first_lines_cut_away_without_a_rotation_is_a_cut() {
    let w = Warden::start("anchor-head-cut", true, &[]);
    note(&w, "anchored here");
    let (seq, hash) = head(&w);
    note(&w, "after");
    note(&w, "after again");
    // Every line up to the anchored one taken away: what is left starts
    // after it, as if rotated, but the journal never rotated.
    let path = w.layout().journal_file();
    assert!(!rotated(&w, 1).exists());
    let text = std::fs::read_to_string(&path).expect("the journal");
    let kept: String = text
        .lines()
        .skip(usize::try_from(seq).unwrap())
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(!kept.contains(&format!("\"seq\":{seq},")));
    std::fs::write(&path, kept).expect("the journal rewritten");
    let (ok, report) = verdict(check(&w, seq, &hash));
    assert!(
        !ok,
        "a journal cut at its start passed as rotated: {report}"
    );
}

/// A Worker asking again and again for a line deep in a long history makes
/// the Warden read every rotated file each time. That read held the
/// journal's lock, which every request that journals (and root's
/// `status`, on the control socket) waits for: a Worker could keep root
/// waiting as long as it liked.
#[test]
fn check_anchor_reading_a_long_history_does_not_hold_up_roots_status() {
    use std::io::Write;
    let w = Warden::start("anchor-long", true, &[]);
    for i in 0..10 {
        note(&w, &format!("line {i}"));
    }
    // A long history: the first lines rotated out (as far as the current
    // file shows), and large rotated files behind it.
    let path = w.layout().journal_file();
    let text = std::fs::read_to_string(&path).expect("the journal");
    let kept: String = text.lines().skip(5).map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, kept).expect("the journal rewritten");
    let big = rotated(&w, 1);
    {
        let file = std::fs::File::create(&big).expect("a rotated file");
        let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..100 {
            gz.write_all(&chunk).expect("write");
        }
        gz.finish().expect("gzip");
    }
    for n in 2..=3 {
        std::fs::copy(&big, rotated(&w, n)).expect("a rotated file");
    }
    // How long one check of line 3 takes: every rotated file is read.
    let started = std::time::Instant::now();
    let (ok, report) = verdict(check(&w, 3, &"a".repeat(64)));
    let one_check = started.elapsed();
    assert!(ok, "{report}");
    // The Worker asks again and again while root asks for its status.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let signed = relay_anchor(&w.layout(), 3, &"a".repeat(64));
    let spammer = {
        let stop = stop.clone();
        let socket = w.layout().worker_socket();
        std::thread::spawn(move || {
            use aromba_warden_proto::{MAX_RESPONSE, encode_request, read_frame, write_frame};
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let mut s = std::os::unix::net::UnixStream::connect(&socket).unwrap();
                let r = signed.clone();
                write_frame(&mut s, &encode_request(&r), 1 << 16).unwrap();
                let _ = read_frame(&mut s, MAX_RESPONSE);
            }
        })
    };
    std::thread::sleep(one_check / 4);
    let mut slowest = std::time::Duration::ZERO;
    for _ in 0..8 {
        let started = std::time::Instant::now();
        let _ = w.status();
        slowest = slowest.max(started.elapsed());
        std::thread::sleep(one_check / 8);
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    spammer.join().expect("the Worker's thread");
    assert!(
        slowest < one_check / 4,
        "root's status waited {slowest:?} behind checks of {one_check:?} each"
    );
}

/// Each check holds every journal file open while it reads them: checks
/// sent at once from every Worker connection, against a journal of many
/// files, must not take the Warden's descriptors (a service's soft limit
/// is often 1,024; the journal keeps up to 64 files and the Worker has 16
/// connections).
#[test]
fn check_anchors_sent_at_once_hold_one_checks_files_open_at_most() {
    use std::io::Write;
    let w = Warden::start("anchor-fds", true, &[]);
    for i in 0..10 {
        note(&w, &format!("line {i}"));
    }
    let path = w.layout().journal_file();
    let text = std::fs::read_to_string(&path).expect("the journal");
    let kept: String = text.lines().skip(5).map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, kept).expect("the journal rewritten");
    const FILES: usize = 40;
    let first = rotated(&w, 1);
    {
        let file = std::fs::File::create(&first).expect("a rotated file");
        let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..4 {
            gz.write_all(&chunk).expect("write");
        }
        gz.finish().expect("gzip");
    }
    for n in 2..=FILES {
        std::fs::copy(&first, rotated(&w, n)).expect("a rotated file");
    }
    let fds = || std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count());
    let before = fds();
    let start = std::sync::Arc::new(std::sync::Barrier::new(9));
    let signed = relay_anchor(&w.layout(), 3, &"a".repeat(64));
    let askers: Vec<_> = (0..8)
        .map(|_| {
            let (socket, start) = (w.layout().worker_socket(), start.clone());
            let signed = signed.clone();
            std::thread::spawn(move || {
                use aromba_warden_proto::{MAX_RESPONSE, encode_request, read_frame, write_frame};
                let mut s = std::os::unix::net::UnixStream::connect(&socket).unwrap();
                let r = signed.clone();
                start.wait();
                write_frame(&mut s, &encode_request(&r), 1 << 16).unwrap();
                let _ = read_frame(&mut s, MAX_RESPONSE);
            })
        })
        .collect();
    start.wait();
    let mut most = 0;
    while askers.iter().any(|t| !t.is_finished()) {
        most = most.max(fds());
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    for t in askers {
        t.join().expect("an asker");
    }
    // Each asker's socket on both ends, and one check's files.
    let allowed = before + 2 * 8 + FILES + 1 + 8;
    assert!(
        most <= allowed,
        "{most} descriptors open during the checks (before: {before}, allowed {allowed})"
    );
}

// ---------------------------------------------------------------------------
// Forged anchors: a line number the Worker made up sent the owner after a
// rewrite that never happened. Only the relay's signed anchor is evidence.

/// A key pair that is not the one this server pinned.
fn another_key() -> String {
    let pair = minisign::KeyPair::generate_unencrypted_keypair().unwrap();
    pair.sk.to_box(None).unwrap().to_string()
}

fn refused_and_unmoved(w: &Warden, r: Response, what: &str) {
    match r {
        Response::Error { message } => assert!(message.contains("no evidence"), "{message}"),
        other => panic!("{what} was judged: {other:?}"),
    }
    assert_eq!(w.ladder(), 0, "{what} moved the ladder");
    assert!(
        !w.journal().contains("integrity-mismatch"),
        "{what} was taken for a rewrite"
    );
}

#[test]
fn a_made_up_anchor_without_the_relays_signature_moves_nothing() {
    let w = Warden::start("anchor-forged-unsigned", true, &[]);
    let (_, hash) = head(&w);
    for seq in [u64::MAX, 1_000_000, 1] {
        let r = w.ask(&Request::CheckAnchor {
            seq,
            hash: hash.clone(),
            signature: None,
        });
        refused_and_unmoved(&w, r, &format!("an unsigned anchor at line {seq}"));
    }
}

#[test]
fn an_anchor_signed_with_another_key_moves_nothing() {
    let w = Warden::start("anchor-forged-key", true, &[]);
    let (_, hash) = head(&w);
    let server = aromba_warden::approvals::server_id(&w.layout()).unwrap();
    let signature = anchor_signature(&server, u64::MAX, &hash, &another_key());
    let r = w.ask(&Request::CheckAnchor {
        seq: u64::MAX,
        hash,
        signature: Some(signature),
    });
    refused_and_unmoved(&w, r, "an anchor signed with another key");
}

#[test]
fn the_relays_anchor_for_another_server_or_another_line_moves_nothing() {
    let w = Warden::start("anchor-forged-moved", true, &[]);
    let (_, hash) = head(&w);
    // Signed by the relay, for another server.
    let signature = anchor_signature(
        &"0".repeat(32),
        u64::MAX,
        &hash,
        support::anchor::ANCHOR_TEST_KEY,
    );
    let r = w.ask(&Request::CheckAnchor {
        seq: u64::MAX,
        hash: hash.clone(),
        signature: Some(signature),
    });
    refused_and_unmoved(&w, r, "another server's anchor");
    // Signed by the relay for line 1, sent as line 1,000,000.
    let server = aromba_warden::approvals::server_id(&w.layout()).unwrap();
    let signature = anchor_signature(&server, 1, &hash, support::anchor::ANCHOR_TEST_KEY);
    let r = w.ask(&Request::CheckAnchor {
        seq: 1_000_000,
        hash,
        signature: Some(signature),
    });
    refused_and_unmoved(&w, r, "an anchor moved to another line");
}

#[test]
fn an_anchor_on_a_server_never_paired_moves_nothing() {
    let w = Warden::start("anchor-unpaired", false, &[]);
    let (_, hash) = head(&w);
    let server = aromba_warden::approvals::server_id(&w.layout()).unwrap();
    let signature = anchor_signature(&server, u64::MAX, &hash, support::anchor::ANCHOR_TEST_KEY);
    let r = w.ask(&Request::CheckAnchor {
        seq: u64::MAX,
        hash,
        signature: Some(signature),
    });
    refused_and_unmoved(&w, r, "an anchor with no relay key pinned");
}

fn error_of(r: Response) -> String {
    match r {
        Response::Error { message } => message,
        Response::Refused { reason, .. } => reason,
        other => panic!("not refused: {other:?}"),
    }
}

fn verdict_moved_nothing(w: &Warden, r: Response) -> String {
    let why = error_of(r);
    assert_eq!(
        w.ladder(),
        0,
        "an unverified anchor moved the ladder: {why}"
    );
    why
}

#[test]
fn an_anchor_signed_for_another_server_is_no_evidence() {
    let w = Warden::start("r30-anchor-other", true, &[]);
    let other = "0123456789abcdef0123456789abcdef";
    let hash = "a".repeat(64);
    let sig = anchor_signature(other, 5, &hash, ANCHOR_TEST_KEY);
    let why = verdict_moved_nothing(
        &w,
        w.ask(&Request::CheckAnchor {
            seq: 5,
            hash: hash.clone(),
            signature: Some(sig),
        }),
    );
    assert!(why.contains("does not verify"), "{why}");
}

#[test]
fn an_anchor_at_u64_max_signed_or_not_puts_nothing_at_cut() {
    let w = Warden::start("r30-anchor-max", true, &[]);
    let hash = "f".repeat(64);
    let r = w.ask(&Request::CheckAnchor {
        seq: u64::MAX,
        hash: hash.clone(),
        signature: None,
    });
    verdict_moved_nothing(&w, r);
    // Signed by the relay: the relay's word that the journal had u64::MAX
    // lines. A journal cannot hold that many: no crash, an answer.
    let r = w.ask(&relay_anchor(&w.layout(), u64::MAX, &hash));
    assert!(
        matches!(r, Response::Verified { .. } | Response::Error { .. }),
        "{r:?}"
    );
    assert!(matches!(w.ask(&Request::Ping), Response::Pong));
}

#[test]
fn signature_shapes_are_refused_without_moving_the_ladder() {
    let w = Warden::start("r30-anchor-shapes", true, &[]);
    let (seq, hash) = {
        let st = w.status();
        (st.journal_seq + 1000, "b".repeat(64))
    };
    let good = anchor_signature(
        &aromba_warden::approvals::server_id(&w.layout()).unwrap(),
        seq,
        &hash,
        ANCHOR_TEST_KEY,
    );
    // Another key's signature over the very message.
    let kp = minisign::KeyPair::generate_unencrypted_keypair().unwrap();
    let other_key = minisign::sign(
        Some(&kp.pk),
        &kp.sk,
        std::io::Cursor::new(aromba_warden::approvals::anchor_message(
            &aromba_warden::approvals::server_id(&w.layout()).unwrap(),
            seq,
            &hash,
        )),
        None,
        None,
    )
    .unwrap()
    .into_string();
    // The relay's signature with its trusted comment changed.
    let mut lines: Vec<String> = good.lines().map(String::from).collect();
    if let Some(l) = lines.iter_mut().find(|l| l.starts_with("trusted comment:")) {
        *l = "trusted comment: made up".into();
    }
    let comment_changed = lines.join("\n") + "\n";
    // The relay's signature over another seq.
    let other_seq = anchor_signature(
        &aromba_warden::approvals::server_id(&w.layout()).unwrap(),
        seq + 1,
        &hash,
        ANCHOR_TEST_KEY,
    );
    // A tap's signature from the relay, reused as an anchor's.
    let tap = support::signed_over(
        "text",
        &aromba_warden::approvals::server_id(&w.layout()).unwrap(),
        "0123456789abcdef",
        "approve",
        support::now(),
        support::TEST_KEY,
    );
    let Request::Approve {
        signature: tap_sig, ..
    } = tap
    else {
        unreachable!()
    };
    let shapes = [
        String::new(),
        "x".repeat(1025),
        "x".repeat(50_000),
        other_key,
        comment_changed,
        other_seq,
        tap_sig,
        "untrusted comment: x\n\0\n".into(),
    ];
    for s in shapes {
        let r = w.ask(&Request::CheckAnchor {
            seq,
            hash: hash.clone(),
            signature: Some(s.clone()),
        });
        match r {
            Response::Error { .. } | Response::Refused { .. } => {}
            other => panic!("{:?} was taken: {other:?}", &s[..s.len().min(80)]),
        }
        assert_eq!(
            w.ladder(),
            0,
            "{:?} moved the ladder",
            &s[..s.len().min(80)]
        );
    }
    // And the good one is evidence: the journal is shorter than it says.
    let r = w.ask(&Request::CheckAnchor {
        seq,
        hash: hash.clone(),
        signature: Some(good),
    });
    assert!(matches!(r, Response::Verified { ok: false, .. }), "{r:?}");
}

#[test]
fn an_unpaired_warden_takes_no_anchor_as_evidence() {
    let w = Warden::start("r30-anchor-unpaired", false, &[]);
    let hash = "c".repeat(64);
    // Even one signed with the test key: no key is pinned.
    let r = w.ask(&relay_anchor(&w.layout(), 9_999, &hash));
    let why = verdict_moved_nothing(&w, r);
    assert!(why.contains("not paired"), "{why}");
}

/// A replayed (older) genuine anchor is still a line the journal extends:
/// it must not read as a rewrite.
#[test]
fn an_old_genuine_anchor_replayed_is_not_a_rewrite() {
    let w = Warden::start("r30-anchor-replay", true, &[]);
    let st = w.status();
    let (seq, hash) = (st.journal_seq, st.journal_head);
    for i in 0..5 {
        assert!(matches!(
            w.ask(&Request::Note {
                text: format!("n{i}")
            }),
            Response::Noted { .. }
        ));
    }
    for _ in 0..3 {
        let r = w.ask(&relay_anchor(&w.layout(), seq, &hash));
        assert!(matches!(r, Response::Verified { ok: true, .. }), "{r:?}");
    }
    assert_eq!(w.ladder(), 0);
}

/// Unsigned anchors are counted and paced like any request: a flood of
/// them is a signal, and the journal does not grow a line per refusal.
#[test]
fn a_flood_of_unsigned_anchors_is_counted_and_does_not_flood_the_journal() {
    let w = Warden::start_with("r30-anchor-flood", true, &[], |o| {
        o.request_threshold = 20;
    });
    let before = w.journal().lines().count();
    for i in 0..400u64 {
        let _ = w.ask(&Request::CheckAnchor {
            seq: i,
            hash: "d".repeat(64),
            signature: None,
        });
    }
    assert!(w.ladder() >= 1, "400 unsigned anchors passed unsignalled");
    let grew = w.journal().lines().count() - before;
    assert!(grew < 100, "{grew} journal lines for 400 unsigned anchors");
}
