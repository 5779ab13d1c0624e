//! Review of round 30 (issue 30), as a hostile Worker, a hostile owner
//! chore and a hostile relay would attack it: the Cut wipe of the AI key,
//! signed journal anchors, pacing after a move down, the honeypots, the
//! layout tick, the cage's cgroup and the receipts' directory counts.
//! Through real Wardens (`support::Warden`), as root.

mod support;

use aromba_warden::cage::limits;
use aromba_warden::layout::Layout;
use aromba_warden_proto::{Request, Response};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;
use support::anchor::{ANCHOR_TEST_KEY, anchor_signature, relay_anchor};
use support::{Warden, dry_chore as dry, owner_chore};

// ---------------------------------------------------------------- helpers

fn cut(w: &Warden) {
    let Response::Ladder { name, .. } = w.ask(&Request::Panic) else {
        panic!("no ladder answer")
    };
    assert_eq!(name, "cut");
}

/// `Request::Panic` on the Worker socket from another thread, answered
/// within `secs` or `None`.
fn cut_within(w: &Warden, secs: u64) -> Option<Response> {
    let socket = w.layout().worker_socket();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use aromba_warden_proto::{
            MAX_RESPONSE, decode_response, encode_request, read_frame, write_frame,
        };
        let mut s = std::os::unix::net::UnixStream::connect(socket).unwrap();
        write_frame(&mut s, &encode_request(&Request::Panic), 1 << 16).unwrap();
        let r = decode_response(&read_frame(&mut s, MAX_RESPONSE).unwrap()).unwrap();
        let _ = tx.send(r);
    });
    rx.recv_timeout(Duration::from_secs(secs)).ok()
}

fn aws(layout: &Layout) -> PathBuf {
    layout.worker_home.join(".aws/credentials")
}

fn is_planted(path: &Path) -> Option<std::fs::Metadata> {
    std::fs::symlink_metadata(path)
        .ok()
        .filter(|m| m.is_file() && m.uid() == 0 && m.mode() & 0o7777 == 0o640)
}

fn planted_within(path: &Path, not: Option<u64>) -> Option<std::fs::Metadata> {
    for _ in 0..500 {
        if let Some(m) = is_planted(path)
            && Some(m.ino()) != not
        {
            return Some(m);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

/// Waits (up to 5 s) for `path` to be a honeypot as install plants it,
/// other than the inode `not`.
fn planted_again(path: &Path, not: Option<u64>) -> std::fs::Metadata {
    for _ in 0..500 {
        if let Some(m) = is_planted(path)
            && Some(m.ino()) != not
        {
            return m;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("{} was not planted again", path.display());
}

fn lines_with(journal: &str, what: &str) -> usize {
    journal.lines().filter(|l| l.contains(what)).count()
}

/// Inodes watched by any inotify descriptor of this process.
fn inotify_watched_inodes() -> Vec<u64> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc/self/fdinfo") else {
        return out;
    };
    for e in rd.flatten() {
        let Ok(text) = std::fs::read_to_string(e.path()) else {
            continue;
        };
        for l in text.lines().filter(|l| l.starts_with("inotify wd:")) {
            if let Some(ino) = l
                .split_whitespace()
                .find_map(|f| f.strip_prefix("ino:"))
                .and_then(|h| u64::from_str_radix(h, 16).ok())
            {
                out.push(ino);
            }
        }
    }
    out
}

fn error_of(r: Response) -> String {
    match r {
        Response::Error { message } => message,
        Response::Refused { reason, .. } => reason,
        other => panic!("not refused: {other:?}"),
    }
}

// ------------------------------------------------- 1. the Cut wipe

/// A key file that is a hard link to a file of root's (a host with
/// `fs.protected_hardlinks=0`, or a root file the Worker may read and
/// write): the wipe must not zero root's file through the link.
#[test]
fn a_key_file_hard_linked_to_a_root_file_is_not_zeroed_through_the_link() {
    let w = Warden::start("r30-wipe-hardlink", false, &[]);
    let key = w.layout().ai_key_file();
    std::fs::create_dir_all(key.parent().unwrap()).unwrap();
    let victim = w.root.join("roots-own-secret");
    std::fs::write(&victim, "root's own bytes\n").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
    let _ = std::fs::remove_file(&key);
    std::fs::hard_link(&victim, &key).unwrap();
    cut(&w);
    assert!(!key.exists(), "the key's name survived Cut");
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "root's own bytes\n",
        "root's file was overwritten through a hard link at the key's name"
    );
}

#[test]
fn a_fifo_at_the_key_name_neither_hangs_the_cut_nor_survives_it() {
    let w = Warden::start("r30-wipe-fifo", false, &[]);
    let key = w.layout().ai_key_file();
    std::fs::create_dir_all(key.parent().unwrap()).unwrap();
    let out = assert_cmd::Command::new("mkfifo")
        .arg(&key)
        .output()
        .unwrap();
    assert!(out.status.success());
    let r = cut_within(&w, 15).expect("the Cut hung on a fifo at the key's name");
    assert!(matches!(r, Response::Ladder { .. }), "{r:?}");
    assert!(
        std::fs::symlink_metadata(&key).is_err(),
        "the fifo survived"
    );
    assert!(w.journal().contains("not a regular file"));
}

#[test]
fn a_directory_at_the_key_name_does_not_stop_the_cut_and_is_said() {
    let w = Warden::start("r30-wipe-dir", false, &[]);
    let key = w.layout().ai_key_file();
    std::fs::create_dir_all(key.join("inner")).unwrap();
    std::fs::write(key.join("inner/secret"), "k").unwrap();
    cut(&w);
    assert_eq!(w.ladder(), 3);
    let journal = w.journal();
    assert!(journal.contains("ai-key-wiped"), "{journal}");
    assert!(journal.contains("is a directory"), "{journal}");
    // Nothing inside it was touched.
    assert_eq!(
        std::fs::read_to_string(key.join("inner/secret")).unwrap(),
        "k"
    );
}

#[test]
fn a_key_that_is_a_link_to_a_root_file_is_unlinked_and_the_target_kept() {
    let w = Warden::start("r30-wipe-symlink", false, &[]);
    let key = w.layout().ai_key_file();
    std::fs::create_dir_all(key.parent().unwrap()).unwrap();
    let victim = w.root.join("roots-linked");
    std::fs::write(&victim, "root's\n").unwrap();
    let _ = std::fs::remove_file(&key);
    std::os::unix::fs::symlink(&victim, &key).unwrap();
    cut(&w);
    assert!(std::fs::symlink_metadata(&key).is_err());
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root's\n");
}

/// The Worker's configuration directory itself swapped for a link to a
/// directory of root's holding a `secrets.toml`.
#[test]
fn a_config_dir_that_is_a_link_to_roots_dir_keeps_roots_file() {
    let w = Warden::start("r30-wipe-dirlink", false, &[]);
    let layout = w.layout();
    let dir = layout.worker_config_dir.clone();
    let roots = w.root.join("roots-config");
    std::fs::create_dir_all(&roots).unwrap();
    std::fs::write(roots.join("secrets.toml"), "root's own\n").unwrap();
    let aside = dir.with_file_name("aside-config");
    std::fs::rename(&dir, &aside).unwrap();
    std::os::unix::fs::symlink(&roots, &dir).unwrap();
    cut(&w);
    assert_eq!(
        std::fs::read_to_string(roots.join("secrets.toml")).unwrap(),
        "root's own\n"
    );
    let _ = std::fs::remove_file(&dir);
    let _ = std::fs::rename(&aside, &dir);
}

/// A key file made to grow while the wipe runs: never more than the bound
/// written, name removed.
#[test]
fn a_key_file_growing_during_the_wipe_costs_root_no_more_than_the_bound() {
    let w = Warden::start("r30-wipe-grow", false, &[]);
    let key = w.layout().ai_key_file();
    std::fs::create_dir_all(key.parent().unwrap()).unwrap();
    std::fs::write(&key, vec![b'k'; 60 * 1024]).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let grower = {
        let key = key.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            // Holds the inode open and keeps extending it (sparsely, far).
            let f = std::fs::OpenOptions::new().write(true).open(&key).unwrap();
            let mut len = 60 * 1024u64;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                len += 1 << 30;
                let _ = f.set_len(len);
                std::thread::sleep(Duration::from_millis(1));
            }
            f
        })
    };
    std::thread::sleep(Duration::from_millis(20));
    cut(&w);
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let f = grower.join().unwrap();
    assert!(
        std::fs::symlink_metadata(&key).is_err(),
        "the key's name survived"
    );
    // Blocks actually allocated to the inode: at most the bound plus a few
    // pages for the file's own first 60 KiB.
    let blocks = f.metadata().unwrap().blocks() * 512;
    assert!(
        blocks <= 2 * aromba_warden::worker_dirs::WIPE_BOUND + 8192,
        "{blocks} bytes allocated by the wipe"
    );
}

// ------------------------------------------------- 2. signed anchors

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
        None,
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

// ------------------------------------------------- 3. pacing

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

// ------------------------------------------------- 4. honeypots

/// The Worker moves a honeypot aside again and again: the ones moved stay
/// watched only up to a bound, and plantings stop after a few.
#[test]
fn moving_a_honeypot_aside_in_a_loop_does_not_grow_the_watches_without_bound() {
    let w = Warden::start_with("r30-pots-move-loop", false, &[], |o| {
        // Ticks plant it again each time: the bound on moved watches is
        // what is tested here.
        o.integrity_interval = Duration::from_millis(50);
    });
    let pot = aws(&w.layout());
    let mut moved = Vec::new();
    for i in 0..60 {
        let m = planted_again(&pot, None);
        let aside = pot.with_file_name(format!("kept-{i}"));
        std::fs::rename(&pot, &aside).unwrap();
        moved.push(m.ino());
    }
    planted_again(&pot, None);
    std::thread::sleep(Duration::from_millis(200));
    let watched = inotify_watched_inodes();
    let still = moved.iter().filter(|i| watched.contains(i)).count();
    assert!(
        still <= 16,
        "{still} of 60 honeypots moved aside are still watched: the Worker grows root's inotify watches (max_user_watches is per uid, shared with systemd) without bound"
    );
}
/// A file of the Worker's renamed over the honeypot (no delete of the
/// honeypot's name, no move of it): tampering all the same.
#[test]
fn a_workers_file_renamed_over_a_honeypot_is_tampering_and_it_is_planted_again() {
    let w = Warden::start_with("r30-pots-rename-over", false, &[], |o| {
        o.integrity_interval = Duration::from_millis(200);
    });
    let pot = aws(&w.layout());
    assert!(is_planted(&pot).is_some());
    let mine = pot.with_file_name("mine");
    std::fs::write(&mine, "[default]\naws_access_key_id = mine\n").unwrap();
    std::fs::rename(&mine, &pot).unwrap();
    let st = w.reaches("cut");
    assert!(
        st.ladder_reason.contains("honeypot") && !st.ladder_reason.contains("opened"),
        "{}",
        st.ladder_reason
    );
    let m = planted_again(&pot, None);
    w.resume();
    std::fs::read(&pot).unwrap();
    let st = w.reaches("cut");
    assert!(st.ladder_reason.contains("opened"), "{}", st.ladder_reason);
    assert_eq!(is_planted(&pot).unwrap().ino(), m.ino());
}

/// Deleted, then a link to root's file put in its place before the Warden
/// plants it again: the Warden must plant over the link, never watch
/// root's file (whose owner's reads would pass for the Worker's).
#[test]
fn a_honeypot_swapped_for_a_link_to_roots_file_never_watches_roots_file() {
    let w = Warden::start_with("r30-pots-link-swap", false, &[], |o| {
        o.integrity_interval = Duration::from_millis(50);
    });
    let pot = aws(&w.layout());
    let victim = w.root.join("roots-credentials");
    std::fs::write(&victim, "root's\n").unwrap();
    for _ in 0..20 {
        planted_again(&pot, None);
        // Swap at once: the Warden races to plant.
        let tmp = pot.with_file_name("l");
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(&victim, &tmp).unwrap();
        std::fs::rename(&tmp, &pot).unwrap();
    }
    planted_again(&pot, None);
    std::thread::sleep(Duration::from_millis(300));
    let victim_ino = std::fs::metadata(&victim).unwrap().ino();
    assert!(
        !inotify_watched_inodes().contains(&victim_ino),
        "root's own file is watched as a honeypot"
    );
    w.resume();
    std::fs::read(&victim).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(w.ladder(), 0, "{}", w.status().ladder_reason);
}
/// While the Warden is stopped (an update, a restart), the Worker puts a
/// directory where a honeypot was: the Warden starts with it unwatched and
/// never looks again. A deleted honeypot is an integrity failure; one
/// made impossible to plant must be too.
#[test]
fn a_directory_at_a_honeypots_name_while_the_warden_is_stopped_is_a_signal() {
    let mut w = Warden::start_with("r30-pots-dir-stopped", false, &[], |o| {
        o.integrity_interval = Duration::from_millis(200);
    });
    let pot = aws(&w.layout());
    w.stop();
    std::fs::remove_file(&pot).unwrap();
    std::fs::create_dir(&pot).unwrap();
    w.restart();
    std::thread::sleep(Duration::from_millis(800));
    let journal = w.journal();
    assert!(journal.contains("honeypot-unwatched"), "{journal}");
    assert!(
        w.ladder() >= 1,
        "the honeypot was disabled with no signal: {}",
        w.status().ladder_reason
    );
}

/// Root reading the planted honeypots' *directory* (a backup listing the
/// Worker's home, `ls`) is no honeypot read.
#[test]
fn listing_the_honeypots_directory_is_not_a_honeypot_read() {
    let w = Warden::start("r30-pots-listing", false, &[]);
    let pot = aws(&w.layout());
    for e in std::fs::read_dir(pot.parent().unwrap()).unwrap() {
        let _ = std::fs::symlink_metadata(e.unwrap().path());
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(w.ladder(), 0, "{}", w.status().ladder_reason);
}

/// Uninstall stops serving, then removes the honeypots: none is planted
/// again behind it, and none left in the Worker's home.
#[test]
fn a_honeypot_deleted_during_shutdown_is_not_planted_behind_it() {
    let mut w = Warden::start("r30-pots-shutdown", false, &[]);
    let pot = aws(&w.layout());
    w.stop();
    std::fs::remove_file(&pot).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        std::fs::symlink_metadata(&pot).is_err(),
        "a stopped Warden planted a honeypot again"
    );
}

// ------------------------------------------------- 5. layout tick

#[test]
fn a_warden_directory_made_writable_by_others_is_found_on_the_integrity_tick() {
    let w = Warden::start_with("r30-layout-tick", false, &[], |o| {
        o.integrity_interval = Duration::from_millis(200);
    });
    let dir = w.layout().state_dir.clone();
    let mode = std::fs::metadata(&dir).unwrap().mode();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let st = w.reaches("cut");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode & 0o7777)).unwrap();
    assert!(
        st.ladder_reason.contains("integrity"),
        "{}",
        st.ladder_reason
    );
    // Said once, not every tick.
    std::thread::sleep(Duration::from_millis(100));
    let n = lines_with(&w.journal(), "ladder-signal");
    assert!(n <= 3, "{n} signals for one unfit directory");
}

// ------------------------------------------------- 6. the cage's cgroup

#[test]
fn a_chore_cannot_move_itself_out_of_its_cgroup_and_stays_bounded() {
    let over = (limits::global().limits.memory_bytes >> 20) + 200;
    let chore = dry(
        "cg-escape",
        &format!(
            "cat /proc/self/cgroup\n\
             ls /sys/fs/cgroup 2>&1 | head -3\n\
             echo $$ > /sys/fs/cgroup/memory/cgroup.procs 2>/dev/null && echo ESCAPED-memory\n\
             echo $$ > /sys/fs/cgroup/pids/cgroup.procs 2>/dev/null && echo ESCAPED-pids\n\
             echo $$ > /sys/fs/cgroup/cgroup.procs 2>/dev/null && echo ESCAPED-v2\n\
             mkdir -p /tmp/cg && mount -t cgroup -o memory none /tmp/cg 2>/dev/null && echo ESCAPED-mount\n\
             mount -t cgroup2 none /tmp/cg 2>/dev/null && echo ESCAPED-mount2\n\
             head -c {over}M /dev/zero > /dev/fill\necho wrote-it-all"
        ),
    );
    let w = Warden::start("r30-cage-escape", false, &[chore]);
    let (receipt, stdout, ok) = w.dry_run_receipt("cg-escape");
    assert!(!stdout.contains("ESCAPED"), "{stdout}");
    assert!(!ok, "{receipt}");
    assert!(!stdout.contains("wrote-it-all"), "{stdout}\n{receipt}");
}

/// A chore that leaves a process behind in a new session (out of the
/// run's process group): the cgroup holds it, and it is gone with the run.
#[test]
fn a_chore_leaving_a_setsid_process_behind_leaves_nothing_running() {
    let chore = dry(
        "cg-straggler",
        "setsid sh -c 'exec sleep 4243' </dev/null >/dev/null 2>&1 &\n\
         (setsid sh -c 'exec sleep 4243' </dev/null >/dev/null 2>&1 &)\n\
         echo left",
    );
    let w = Warden::start("r30-cage-straggler", false, &[chore]);
    let (receipt, stdout, _) = w.dry_run_receipt("cg-straggler");
    assert!(stdout.contains("left"), "{receipt}");
    std::thread::sleep(Duration::from_millis(500));
    let mut left = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(c) = std::fs::read(e.path().join("cmdline"))
            && c == b"sleep\x004243\x00"
        {
            left.push(e.file_name());
        }
    }
    for pid in &left {
        let _ = assert_cmd::Command::new("kill").arg("-9").arg(pid).output();
    }
    assert!(left.is_empty(), "left running after the run: {left:?}");
}

/// Threads count against the cage's processes: a chore spawning threads
/// past the bound gets no more than it.
#[test]
fn a_program_forking_from_one_process_holds_no_more_than_the_cages_process_bound() {
    let chore = dry(
        "cg-threads",
        "perl -e 'use POSIX; my $n=0; for (1..700) { my $p = fork(); last unless defined $p; if ($p == 0) { sleep 20; POSIX::_exit(0) } $n++ } print \"spawned=$n\\n\"' 2>&1 || echo noperl",
    );
    let w = Warden::start("r30-cage-threads", false, &[chore]);
    let (receipt, stdout, _) = w.dry_run_receipt("cg-threads");
    // perl is essential on Debian and Ubuntu: a cage without it is a fault.
    let n: u64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("spawned="))
        .unwrap_or_else(|| panic!("perl did not run in the cage: {stdout}"))
        .trim()
        .parse()
        .unwrap();
    assert!(n <= limits::global().limits.pids, "{n}: {receipt}");
}

/// Many dry runs one after another: no cage group is left behind.
#[test]
fn dry_runs_leave_no_cage_cgroup_behind() {
    let chore = dry("cg-many", "sleep 0.05 &\necho ok");
    let w = Warden::start("r30-cage-many", false, &[chore]);
    for _ in 0..10 {
        let (_, stdout, _) = w.dry_run_receipt("cg-many");
        assert!(stdout.contains("ok"));
    }
    // The groups this process made that hold no process: left behind.
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let mem = own
        .lines()
        .find_map(|l| l.split_once(":memory:").map(|(_, p)| p.to_string()))
        .unwrap_or_default();
    let base = PathBuf::from("/sys/fs/cgroup/memory").join(mem.trim_start_matches('/'));
    std::thread::sleep(Duration::from_millis(300));
    let prefix = format!("aromba-cage-{}-", std::process::id());
    let mut empty = Vec::new();
    if let Ok(rd) = std::fs::read_dir(&base) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(&prefix)
                && std::fs::read_to_string(e.path().join("cgroup.procs"))
                    .is_ok_and(|t| t.trim().is_empty())
            {
                empty.push(name);
            }
        }
    }
    // Another test's cage may be between its run and its removal: give
    // them a moment, then look again.
    std::thread::sleep(Duration::from_millis(1500));
    let still: Vec<_> = empty
        .into_iter()
        .filter(|n| base.join(n).exists())
        .collect();
    assert!(still.is_empty(), "left behind: {still:?}");
}

// ------------------------------------------------- 7. receipts

/// A run that only removes directories (a tree of them, empty) must not be
/// receipted "nothing changed".
#[test]
fn a_red_run_that_only_removes_directories_says_so_in_its_receipt() {
    let name = "rmdirs";
    let w = Warden::start(
        "r30-receipt-rmdirs",
        false,
        &[owner_chore(
            name,
            "red",
            "",
            "[ \"$1\" = --dry-run ] && exit 0\nrm -r TOUCHED/tree",
        )],
    );
    for i in 0..12 {
        std::fs::create_dir_all(w.touched.join(format!("tree/d{i}/e"))).unwrap();
    }
    let receipt = w.red_run(name);
    assert!(!receipt.contains("nothing changed"), "{receipt}");
    assert!(receipt.contains("25 directories removed"), "{receipt}");
}

/// The watcher thread is not joined by `run`, and looks at the shutdown
/// flag only before its sleep: a tick due just after shutdown (uninstall
/// stops serving, then removes the honeypots) finds them gone and plants
/// them again — directories made anew included — behind the uninstall.
#[test]
fn honeypots_removed_after_shutdown_are_not_planted_again_by_a_late_tick() {
    let mut w = Warden::start_with("r30-pots-late-tick", false, &[], |o| {
        o.integrity_interval = Duration::from_millis(1);
        o.watch_interval = Duration::from_millis(400);
    });
    std::thread::sleep(Duration::from_millis(450));
    let layout = w.layout();
    w.stop();
    for p in layout.honeypots() {
        let _ = std::fs::remove_file(&p);
    }
    let _ = std::fs::remove_dir_all(layout.worker_home.join(".aws"));
    std::thread::sleep(Duration::from_millis(1500));
    let back: Vec<_> = layout
        .honeypots()
        .into_iter()
        .filter(|p| std::fs::symlink_metadata(p).is_ok())
        .collect();
    assert!(
        back.is_empty(),
        "planted again after the Warden stopped: {back:?}"
    );
}

/// The Worker deletes a honeypot as fast as the Warden plants it again:
/// one signal a window, and a few plantings, then it waits for the next
/// integrity tick (said once) — the journal and the disk are not the
/// Worker's to fill.
#[test]
fn deleting_a_honeypot_in_a_loop_does_not_flood_the_journal() {
    let w = Warden::start("r30-pots-delete-loop", false, &[]);
    let pot = aws(&w.layout());
    let before = w.journal().lines().count();
    let mut deletes = 0;
    for _ in 0..150 {
        let Some(_) = planted_within(&pot, None) else {
            break;
        };
        std::fs::remove_file(&pot).unwrap();
        deletes += 1;
    }
    std::thread::sleep(Duration::from_millis(200));
    let journal = w.journal();
    let grew = journal.lines().count() - before;
    assert!(deletes <= 4, "planted again {deletes} times in a row");
    assert!(
        grew < 20,
        "{deletes} deletes of a honeypot wrote {grew} journal lines: a Worker looping rm fills the disk"
    );
    assert_eq!(lines_with(&journal, "ladder-signal"), 1, "{journal}");
    assert!(journal.contains("planted again at the next integrity check"));
}
