//! The honeypots' watch itself against a hostile Worker, through a real
//! running Warden (root stands in for the Worker; inotify does not ask
//! who). Before, each of these went unseen or cost root without bound:
//! something put in a honeypot's way (one signal, then silence until a
//! restart), a new planting read before its watch was set, a delete while
//! a descriptor held the file (no event until the hourly tick), and a read
//! loop (a journal line a read). And attacks that held, kept: a hard link
//! then an unlink, the directory swapped for a link to root's, tampering
//! races on both honeypots at once, an event flood hiding a read.

use aromba_testkit::warden as support;

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use support::honeypots::{inotify_watched_inodes, replanted};
use support::{Warden, lines_with};

fn aws(w: &Warden) -> PathBuf {
    w.layout().worker_home.join(".aws/credentials")
}

fn ssh(w: &Warden) -> PathBuf {
    w.layout().worker_home.join(".ssh/id_ed25519")
}

fn signals(journal: &str) -> usize {
    lines_with(journal, "ladder-signal")
}

fn reads(journal: &str) -> usize {
    journal
        .lines()
        .filter(|l| l.contains("ladder-signal") && l.contains("honeypot-read"))
        .count()
}

fn wait_until(w: &Warden, done: &dyn Fn(&str) -> bool, ms: u64) -> String {
    let mut journal = w.journal();
    for _ in 0..ms / 50 {
        if done(&journal) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
        journal = w.journal();
    }
    journal
}

/// Waits for the ladder to reach Cut for a honeypot.
fn cut_for_a_honeypot(w: &Warden) {
    let st = w.reaches("cut");
    assert!(
        st.ladder_reason.contains("honeypot"),
        "{}",
        st.ladder_reason
    );
}

/// A Warden whose integrity tick runs every 100 ms.
fn ticking(name: &str) -> Warden {
    Warden::start_with(name, false, &[], |o| {
        o.integrity_interval = Duration::from_millis(100);
        o.watch_interval = Duration::from_millis(50);
        o.flood_window_s = WINDOW_S;
    })
}

const WINDOW_S: u64 = 600;

/// With something kept in `pot`'s way: a cut, a cut again at once after
/// the owner's resume, then one signal in each of three windows, and only
/// one (the ticks between are many).
fn signalled_every_window(w: &Warden, pot: &Path) {
    cut_for_a_honeypot(w);
    // Not `w.resume()`, which expects the ladder to stay at normal.
    let resumed = w.control(&aromba_warden_proto::Request::Resume);
    assert!(
        matches!(resumed, aromba_warden_proto::Response::Ladder { .. }),
        "{resumed:?}"
    );
    w.reaches("cut");
    for window in 1..=3 {
        let before = signals(&w.journal());
        w.clock.advance(WINDOW_S + 1);
        let journal = wait_until(w, &|j| signals(j) > before, 5_000);
        assert!(
            signals(&journal) > before,
            "window {window}: the honeypot {} kept from being planted raised nothing:\n{journal}",
            pot.display()
        );
        std::thread::sleep(Duration::from_millis(500));
        let journal = w.journal();
        assert_eq!(
            signals(&journal),
            before + 1,
            "window {window}: more than one signal\n{journal}"
        );
    }
}

/// The Worker renames `.aws` aside (no event on the file) and puts a
/// directory where `credentials` must be planted. Before, the tick's one
/// signal was followed by silence: every later tick failed to plant it and
/// said nothing, window after window, until a restart. Now it is
/// tampering for as long as it lasts: a signal a window (or at once after
/// a resume).
#[test]
fn an_obstacle_at_a_honeypots_name_is_a_signal_every_window_not_once() {
    let w = ticking("atk-pots-obstacle");
    let pot = aws(&w);
    let dir = pot.parent().unwrap().to_path_buf();
    std::fs::rename(&dir, dir.with_file_name(".aws-aside")).unwrap();
    std::fs::create_dir(&dir).unwrap();
    std::fs::create_dir(&pot).unwrap();
    signalled_every_window(&w, &pot);
    assert!(std::fs::symlink_metadata(&pot).unwrap().is_dir());
}

/// `.ssh` replaced by a plain file of the Worker's: the same, through the
/// directory.
#[test]
fn a_file_at_the_honeypots_directory_is_a_signal_every_window_not_once() {
    let w = ticking("atk-pots-notdir");
    let pot = ssh(&w);
    let dir = pot.parent().unwrap().to_path_buf();
    std::fs::rename(&dir, dir.with_file_name(".ssh-aside")).unwrap();
    std::fs::write(&dir, "not a directory\n").unwrap();
    signalled_every_window(&w, &pot);
}

/// After a signalled delete and the owner's resume, the Worker deletes the
/// honeypot again and opens and reads the new planting the moment its name
/// appears. Before, the watch was set after the rename into place (and the
/// temporary file was the Worker's group's to read before that): the read
/// raised nothing. Now the watch is on the new file while it is root's
/// alone, and listed before any of its events is read.
#[test]
fn a_planting_read_before_its_watch_is_set_is_a_honeypot_read() {
    let w = Warden::start_with("atk-pots-read-race", false, &[], |o| {
        o.flood_window_s = 600;
    });
    let pot = aws(&w);
    // The first tampering of the window: signalled; the owner resumes.
    replanted(&pot, None);
    std::fs::remove_file(&pot).unwrap();
    w.reaches("cut");
    // Deleted above, so whatever is planted is new (its inode number may
    // be the old one's, reused).
    replanted(&pot, None);
    std::thread::sleep(Duration::from_millis(200));
    w.resume();
    let before = reads(&w.journal());
    std::fs::remove_file(&pot).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut buf = Vec::new();
    loop {
        if let Ok(mut f) = std::fs::File::open(&pot) {
            buf.clear();
            let _ = f.read_to_end(&mut buf);
            // Deleted before the loop: whatever opens is a new planting
            // (its inode number may be the old one's, reused).
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not planted again:\n{}",
            w.journal()
        );
    }
    assert!(String::from_utf8_lossy(&buf).contains("aws_secret_access_key"));
    let journal = wait_until(&w, &|j| reads(j) > before, 1500);
    assert!(
        reads(&journal) > before,
        "a planting was opened and read with no honeypot-read (ladder {}):\n{journal}",
        w.ladder()
    );
}

/// The Worker takes an `O_PATH` descriptor of the honeypot (no open event:
/// the kernel makes none for `O_PATH`) and unlinks its name. The file's
/// delete event waits for the last reference to the inode, so before,
/// nothing was heard until the integrity tick (an hour by default); the
/// directory's watch now sees the name go at once.
#[test]
fn a_honeypot_unlinked_while_an_o_path_descriptor_holds_it_is_a_signal_at_once() {
    use std::os::unix::fs::OpenOptionsExt;
    let w = Warden::start_with("atk-pots-opath", false, &[], |o| {
        o.integrity_interval = Duration::from_secs(3600);
    });
    let pot = aws(&w);
    replanted(&pot, None);
    let held = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH)
        .open(&pot)
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(w.ladder(), 0, "an O_PATH open was taken for a read");
    std::fs::remove_file(&pot).unwrap();
    // The descriptor is still held: no event of the file's can have come,
    // and the integrity tick is an hour away.
    cut_for_a_honeypot(&w);
    replanted(&pot, None);
    drop(held);
}

/// A hard link made to the honeypot, then its name unlinked: no delete
/// event of the file's (the inode lives on), but its directory's watch sees
/// the name go (a signal, planted again), and the link, still the watched
/// inode, is caught when read.
#[test]
fn a_hard_linked_then_unlinked_honeypot_is_found_and_its_link_stays_watched() {
    // No integrity tick to find it: the directory's watch must.
    let w = Warden::start_with("atk-pots-hardlink", false, &[], |o| {
        o.integrity_interval = Duration::from_secs(3600);
    });
    let pot = aws(&w);
    let m = replanted(&pot, None);
    let link = w.layout().worker_home.join("kept-link");
    std::fs::hard_link(&pot, &link).unwrap();
    std::fs::remove_file(&pot).unwrap();
    cut_for_a_honeypot(&w);
    replanted(&pot, Some(m.ino()));
    w.resume();
    std::fs::read(&link).unwrap();
    let st = w.reaches("cut");
    assert!(st.ladder_reason.contains("opened"), "{}", st.ladder_reason);
}

/// `.aws` swapped for a link to a directory of root's holding a
/// `credentials` of root's: nothing is written there and root's file is
/// never watched; the swap is a signal.
#[test]
fn the_honeypots_directory_swapped_for_a_link_to_roots_never_writes_or_watches_there() {
    let w = Warden::start_with("atk-pots-dirlink", false, &[], |o| {
        o.integrity_interval = Duration::from_millis(50);
    });
    let pot = aws(&w);
    let victim = w.root.join("roots-dir");
    std::fs::create_dir_all(&victim).unwrap();
    std::fs::write(victim.join("credentials"), "root's own\n").unwrap();
    let dir = pot.parent().unwrap().to_path_buf();
    std::fs::rename(&dir, dir.with_file_name(".aws-aside")).unwrap();
    std::os::unix::fs::symlink(&victim, &dir).unwrap();
    w.reaches("cut");
    std::thread::sleep(Duration::from_millis(500));
    let names: Vec<_> = std::fs::read_dir(&victim)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "root wrote through the link: {names:?}");
    assert_eq!(
        std::fs::read_to_string(victim.join("credentials")).unwrap(),
        "root's own\n"
    );
    let ino = std::fs::metadata(victim.join("credentials")).unwrap().ino();
    assert!(
        !inotify_watched_inodes().contains(&ino),
        "root's file is watched"
    );
    // Root reading its own file is no honeypot read (a first read of a
    // watched honeypot would be signalled even at Cut).
    std::fs::read(victim.join("credentials")).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let journal = w.journal();
    assert_eq!(reads(&journal), 0, "{journal}");
}

/// Both home honeypots deleted and renamed over each other from
/// several threads at once, with integrity ticks racing the watcher: no
/// deadlock (the control socket answers, the Warden stops), journal lines
/// bounded, and once the Worker stops, a new window's tick plants and
/// watches both again.
#[test]
fn racing_tamperings_on_both_honeypots_stay_bounded_and_deadlock_nothing() {
    let w = Warden::start_with("atk-pots-race-both", false, &[], |o| {
        o.integrity_interval = Duration::from_millis(20);
        o.flood_window_s = 600;
    });
    let (a, s) = (aws(&w), ssh(&w));
    let before = w.journal().lines().count();
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for i in 0..4 {
        let (a, s, stop) = (a.clone(), s.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            let home = a.parent().unwrap().parent().unwrap().to_path_buf();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                match (i + n) % 5 {
                    0 => drop(std::fs::remove_file(&a)),
                    1 => drop(std::fs::rename(&a, &s)),
                    2 => drop(std::fs::rename(&s, &a)),
                    3 => drop(std::fs::rename(&s, home.join(format!("m{i}-{}", n % 3)))),
                    _ => drop(std::fs::remove_file(&s)),
                }
            }
        }));
    }
    std::thread::sleep(Duration::from_secs(3));
    // Deadlock check: status answers while the race goes on.
    let _ = w.status();
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    let journal = w.journal();
    let grew = journal.lines().count() - before;
    assert!(
        grew < 200,
        "three seconds of racing tamperings wrote {grew} journal lines"
    );
    // A new window: the next tick plants both again, and they are watched.
    w.clock.advance(601);
    replanted(&a, None);
    replanted(&s, None);
    std::thread::sleep(Duration::from_millis(300));
    w.resume();
    std::fs::read(&s).unwrap();
    let st = w.reaches("cut");
    assert!(st.ladder_reason.contains("opened"), "{}", st.ladder_reason);
    assert!(w.journal().lines().count() - before < 300);
}

/// The Worker reads a honeypot in a loop. Before, each read was a signal
/// and a journal line (2 000 reads, about a thousand lines): root filling
/// its own disk for the Worker. Now a read is signalled once a window, or
/// whenever the ladder is below Cut (after a resume, a read cuts again).
#[test]
fn reading_a_honeypot_in_a_loop_does_not_flood_the_journal() {
    let w = Warden::start("atk-pots-read-loop", false, &[]);
    let pot = aws(&w);
    let before = w.journal().lines().count();
    for _ in 0..2000 {
        let _ = std::fs::read(&pot);
    }
    std::thread::sleep(Duration::from_millis(1500));
    let journal = w.journal();
    let grew = journal.lines().count() - before;
    assert!(
        grew < 100,
        "2000 reads of a honeypot wrote {grew} journal lines ({} honeypot-read signals)",
        reads(&journal)
    );
}

/// The Worker, after one (signalled) move, renames two moved-away
/// copies (still watched, their moves no longer signalled) back and forth
/// from several threads to fill the inotify queue, and reads the live
/// honeypot meanwhile: the read must not be lost silently.
#[test]
fn an_event_flood_from_moved_copies_does_not_hide_a_read() {
    let w = Warden::start("atk-pots-overflow", false, &[]);
    let pot = aws(&w);
    let home = w.layout().worker_home.clone();
    let mut copies = Vec::new();
    for i in 0..2 {
        let m = replanted(&pot, copies.last().copied());
        let aside = home.join(format!("copy{i}"));
        std::fs::rename(&pot, &aside).unwrap();
        copies.push(m.ino());
    }
    replanted(&pot, copies.last().copied());
    w.reaches("cut");
    std::thread::sleep(Duration::from_millis(300));
    w.resume();
    let before = reads(&w.journal());
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for i in 0..2 {
        let (home, stop) = (home.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            let (x, y) = (
                home.join(format!("copy{i}")),
                home.join(format!("copy{i}-b")),
            );
            while !stop.load(Ordering::Relaxed) {
                let _ = std::fs::rename(&x, &y);
                let _ = std::fs::rename(&y, &x);
            }
        }));
    }
    std::thread::sleep(Duration::from_millis(300));
    let mut f = std::fs::File::open(&pot).unwrap();
    let mut buf = Vec::new();
    f.read_to_end(&mut buf).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    let journal = wait_until(&w, &|j| reads(j) > before, 3000);
    let lost = lines_with(&journal, "honeypot-events-lost");
    assert!(
        reads(&journal) > before,
        "the read under a flood of move events raised nothing ({lost} overflows journaled)"
    );
}
