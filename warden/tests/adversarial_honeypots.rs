//! The honeypots against a Worker that owns the directories they are in:
//! a read the moment the Warden starts, a honeypot deleted or moved (read
//! as "opened" and then left unwatched), and a link planted on the way to
//! one (which made `install`, the documented recovery from Disarm, refuse
//! to run). And the Worker's loops and swaps: a honeypot moved aside or
//! deleted again and again (root's inotify watches, the journal), its own
//! file renamed over one, one swapped for a link to root's file, a
//! directory put at one's name while the Warden is stopped; and the
//! Warden's own shutdown, after which none may be planted again. What
//! holds: each is a signal (once a window), watches and plantings stay
//! bounded, root's own files are never watched, and root listing the
//! directory is no read. Through a real Warden; root stands in for the
//! Worker's reads (inotify does not ask who).

use aromba_testkit::warden as support;

use aromba_warden::install::{InstallOptions, install};
use aromba_warden::layout::Layout;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use support::honeypots::{inotify_watched_inodes, is_planted, planted_within, replanted};
use support::{Warden, lines_with};

fn aws(layout: &Layout) -> std::path::PathBuf {
    layout.worker_home.join(".aws/credentials")
}

/// Waits (up to 5 s) for `path` to be a honeypot as install plants it.
fn planted_again(path: &Path) {
    for _ in 0..250 {
        if let Ok(m) = std::fs::symlink_metadata(path)
            && m.is_file()
            && m.uid() == 0
            && m.mode() & 0o7777 == 0o640
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{} was not planted again", path.display());
}

#[test]
fn a_honeypot_read_the_moment_the_warden_starts_is_caught() {
    // Bound, not serving yet: the Worker changes its home's mode and reads
    // a honeypot at once.
    let w = Warden::start_then("pots-at-start", |layout| {
        std::fs::set_permissions(&layout.worker_home, std::fs::Permissions::from_mode(0o755))
            .unwrap();
        std::fs::read(aws(layout)).unwrap();
    });
    let st = w.reaches("cut");
    assert!(
        st.ladder_reason.contains("honeypot"),
        "{}",
        st.ladder_reason
    );
}

#[test]
fn a_deleted_honeypot_is_not_read_as_opened_and_is_planted_and_watched_again() {
    let w = Warden::start("pots-deleted", false, &[]);
    let pot = aws(&w.layout());
    std::fs::remove_file(&pot).unwrap();
    let st = w.reaches("cut");
    assert!(
        st.ladder_reason.contains("deleted") && !st.ladder_reason.contains("opened"),
        "{}",
        st.ladder_reason
    );
    planted_again(&pot);
    w.resume();
    // The one planted again is watched: a read of it is caught.
    std::fs::read(&pot).unwrap();
    let st = w.reaches("cut");
    assert!(st.ladder_reason.contains("opened"), "{}", st.ladder_reason);
}

#[test]
fn a_moved_honeypot_is_its_own_signal_and_stays_watched_where_it_went() {
    let w = Warden::start("pots-moved", false, &[]);
    let pot = aws(&w.layout());
    let aside = pot.with_file_name("kept");
    std::fs::rename(&pot, &aside).unwrap();
    let st = w.reaches("cut");
    assert!(
        st.ladder_reason.contains("moved away") && !st.ladder_reason.contains("opened"),
        "{}",
        st.ladder_reason
    );
    planted_again(&pot);
    w.resume();
    std::fs::read(&aside).unwrap();
    let st = w.reaches("cut");
    assert!(st.ladder_reason.contains("opened"), "{}", st.ladder_reason);
}

#[test]
fn a_honeypots_directory_moved_aside_is_found_on_the_integrity_tick() {
    let w = Warden::start_with("pots-dir-moved", false, &[], |o| {
        o.integrity_interval = Duration::from_millis(200);
    });
    let layout = w.layout();
    let dir = layout.worker_home.join(".aws");
    std::fs::rename(&dir, layout.worker_home.join(".aws-aside")).unwrap();
    let st = w.reaches("cut");
    assert!(
        st.ladder_reason.contains("honeypot"),
        "{}",
        st.ladder_reason
    );
    planted_again(&aws(&layout));
}

#[test]
fn install_plants_around_a_link_on_the_way_to_a_honeypot_and_the_warden_journals_it() {
    let root = std::env::temp_dir().join(format!("aromba-pots-link-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let layout = Layout::rooted(&root);
    // The Worker's home holds a link where `.aws` must be a directory,
    // pointing at a directory of root's.
    let victim = root.join("roots-own");
    std::fs::create_dir_all(&victim).unwrap();
    std::fs::create_dir_all(&layout.worker_home).unwrap();
    std::os::unix::fs::symlink(&victim, layout.worker_home.join(".aws")).unwrap();
    std::fs::create_dir_all(root.join("bin")).unwrap();
    std::fs::copy("/bin/true", root.join("bin/aromba")).unwrap();
    let done = install(&InstallOptions {
        layout: &layout,
        warden_bin: Path::new("/proc/self/exe"),
        worker_bin: &root.join("bin/aromba"),
        worker_gid: 0,
        clock: Arc::new(aromba_warden::ladder::SystemClock),
        telegram_key: None,
    })
    .expect("install runs with a link planted on the way to a honeypot");
    assert_eq!(done.honeypots_skipped.len(), 1, "{done:?}");
    assert!(done.honeypots_skipped[0].1.contains("symbolic link"));
    assert_eq!(done.honeypots.len(), 2);
    assert_eq!(
        std::fs::read_dir(&victim).unwrap().count(),
        0,
        "something was written through the link"
    );
    // The Warden serves, and says which honeypot it does not watch; root's
    // own file behind the link is never watched.
    std::fs::write(victim.join("credentials"), "root's own").unwrap();
    let mut o = aromba_warden::server::ServeOptions::new(layout.clone(), 0, 0);
    o.watch_network = false;
    o.host = None;
    let server = aromba_warden::server::Server::bind(o).expect("the Warden starts");
    let handle = server.shutdown_handle();
    let thread = std::thread::spawn(move || server.run());
    std::fs::read(victim.join("credentials")).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let journal = std::fs::read_to_string(layout.journal_file()).unwrap();
    assert!(journal.contains("honeypot-unwatched"), "{journal}");
    assert!(
        !journal.contains("honeypot-read"),
        "root's own file behind the link was watched: {journal}"
    );
    handle.shutdown();
    let _ = thread.join();
    let _ = std::fs::remove_dir_all(&root);
}

// ---------------------------------------------------------------------------
// The Worker's loops and swaps, and the Warden's shutdown.

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
    // Thirty, about two seconds each (an integrity tick hashes the
    // binaries): twice the bound, so watches without one would show.
    for i in 0..30 {
        let m = replanted(&pot, None);
        let aside = pot.with_file_name(format!("kept-{i}"));
        std::fs::rename(&pot, &aside).unwrap();
        moved.push(m.ino());
    }
    replanted(&pot, None);
    std::thread::sleep(Duration::from_millis(200));
    let watched = inotify_watched_inodes();
    let still = moved.iter().filter(|i| watched.contains(i)).count();
    assert!(
        still <= 16,
        "{still} of 30 honeypots moved aside are still watched: the Worker grows root's inotify watches (max_user_watches is per uid, shared with systemd) without bound"
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
    // Past its plantings the honeypot waits for the next integrity tick,
    // and the journal says why (a planting deleted before its watch was
    // set counts as tampering too).
    assert!(
        journal.contains("planted again at the next integrity check"),
        "{journal}"
    );
}

/// The Worker deletes each planting before the Warden's watch on it is set
/// (a tight loop of deletes, or its own inotify watch on the directory it
/// owns): each planting it takes so is tampering. One signal every window
/// for as long as it goes on, never a honeypot left unwatched and silent
/// while the ladder decays.
#[test]
fn deleting_each_planting_before_its_watch_is_set_is_a_signal_every_window() {
    const WINDOW_S: u64 = 600;
    let w = Warden::start_with("r35-pots-watch-race", false, &[], |o| {
        o.integrity_interval = Duration::from_millis(200);
        o.flood_window_s = WINDOW_S;
    });
    let pot = aws(&w.layout());
    let stop = Arc::new(AtomicBool::new(false));
    let deleter = {
        let (pot, stop) = (pot.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut deleted = 0u64;
            while !stop.load(Ordering::Relaxed) {
                if std::fs::remove_file(&pot).is_ok() {
                    deleted += 1;
                }
            }
            deleted
        })
    };
    let before = w.journal().lines().count();
    let signals = |j: &str| lines_with(j, "ladder-signal");
    let capped = |j: &str| j.contains("planted again at the next integrity check");
    let wait_for = |done: &dyn Fn(&str) -> bool| {
        let mut journal = w.journal();
        for _ in 0..300 {
            if done(&journal) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
            journal = w.journal();
        }
        journal
    };
    // Three windows: the first delete's signal, then one in each later
    // window, raised by the plantings the loop takes at the integrity ticks.
    for want in 1..=3 {
        let journal = wait_for(&|j| signals(j) >= want);
        assert!(
            signals(&journal) >= want,
            "window {want}: {} signals while the Worker deleted every planting before its watch\n{journal}",
            signals(&journal)
        );
        if want < 3 {
            w.clock.advance(WINDOW_S + 1);
        }
    }
    // The last window is left open until the loop has used its plantings
    // (a slow journal can take a whole window's signal to the next
    // advance before that).
    let journal = wait_for(&capped);
    assert!(capped(&journal), "{journal}");
    stop.store(true, Ordering::Relaxed);
    let deleted = deleter.join().unwrap();
    let journal = w.journal();
    let grew = journal.lines().count() - before;
    assert!(deleted >= 3, "the loop deleted {deleted} plantings");
    assert!(
        grew < 40,
        "{deleted} plantings deleted in three windows wrote {grew} journal lines\n{journal}"
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
    let m = replanted(&pot, None);
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
        replanted(&pot, None);
        // Swap at once: the Warden races to plant.
        let tmp = pot.with_file_name("l");
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(&victim, &tmp).unwrap();
        std::fs::rename(&tmp, &pot).unwrap();
    }
    replanted(&pot, None);
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
