//! `old-logs` runs as root and moves files a service user may have
//! planted: it streamed `find … -print | while read f; mv "$f" …`, so
//! every path was printed, read back a line at a time and resolved again.
//! A user who owns a directory under `/var/log` steered it: a directory
//! named with a newline made one found path read as two, the second any
//! path the user wrote (a recent log, a file in the journal the chore
//! leaves alone), and a directory swapped for a symbolic link between the
//! `find` and the `mv` sent the move through the link. The chore now walks
//! by descriptor without following links, skips directories root does not
//! own, and moves each file by name from the directory find opened
//! (`-execdir`). The system script runs as one of the owner's chores here,
//! its `/var/log` and quarantine redirected into the test's directories.
//! Needs root and bubblewrap.

use aromba_testkit::warden as support;

use aromba_warden::layout::Layout;
use aromba_warden_proto::{Request, Response};
use std::os::unix::fs::{chown, lchown, symlink};
use std::path::{Path, PathBuf};
use support::Warden;

/// A service user's uid: not root, owning the planted directories.
const SERVICE_UID: u32 = 4242;

fn old_logs_here(quarantine: &Path) -> (String, String) {
    let script = include_str!("../chores/old-logs.sh")
        .replace("# name: old-logs\n", "# name: old-logs-here\n")
        .replace(
            "/var/lib/aromba-warden/quarantine",
            &quarantine.to_string_lossy(),
        )
        .replace("/var/log", "TOUCHED/log");
    ("old-logs-here".into(), script)
}

fn start(name: &str) -> Warden {
    let root = std::env::temp_dir().join(format!("aromba-{name}-{}", std::process::id()));
    let quarantine = Layout::rooted(&root).quarantine_dir;
    let w = Warden::start(name, false, &[old_logs_here(&quarantine)]);
    assert_eq!(w.layout().quarantine_dir, quarantine);
    std::fs::create_dir_all(w.touched.join("log/journal")).unwrap();
    w
}

fn aged(path: &Path) {
    let out = assert_cmd::Command::new("touch")
        .args(["-h", "-d", "40 days ago"])
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success());
}

fn write_aged(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    aged(path);
}

/// The real run's receipt, stdout and stderr, and whether it was clean.
fn run(w: &Warden) -> (bool, String) {
    w.dry_run_shown("old-logs-here");
    match w.control(&Request::ChoreRun {
        name: "old-logs-here".into(),
        dry_run: false,
    }) {
        Response::Receipt {
            receipt,
            stdout,
            stderr,
            ok,
        } => (
            ok,
            format!(
                "{receipt}\n{}\n{}",
                String::from_utf8_lossy(&stdout),
                String::from_utf8_lossy(&stderr)
            ),
        ),
        other => panic!("old-logs did not run: {other:?}"),
    }
}

/// Every path under `dir`, relative, symbolic links as links.
fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if let Ok(rel) = p.strip_prefix(dir) {
                out.push(format!("{rel:?}"));
            }
            if std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_dir()) {
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

/// A directory the service user owns under the log root, holding a
/// directory named with a newline under which the absolute path of
/// `victim` is built again, ending in an old rotated log: found, it prints
/// as `<dir>/` and, on the next line, `victim`.
fn newline_plant(owned: &Path, victim: &Path) {
    std::fs::create_dir_all(owned).unwrap();
    let leaf = owned.join("\n").join(victim.strip_prefix("/").unwrap());
    write_aged(&leaf, "planted");
    let mut p = leaf.parent().unwrap().to_path_buf();
    while p != *owned {
        chown(&p, Some(SERVICE_UID), Some(SERVICE_UID)).unwrap();
        p = p.parent().unwrap().to_path_buf();
    }
    chown(&leaf, Some(SERVICE_UID), Some(SERVICE_UID)).unwrap();
    chown(owned, Some(SERVICE_UID), Some(SERVICE_UID)).unwrap();
    // Writable by anyone, as its owner may make it: nothing stops root
    // moving things in and out of it.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(owned, std::fs::Permissions::from_mode(0o777)).unwrap();
}

#[test]
fn a_directory_named_with_a_newline_cannot_steer_old_logs_into_moving_a_recent_or_journal_log() {
    let w = start("adv-oldlogs-newline");
    let log = w.touched.join("log");
    // What the chore must leave: a recent rotated log (no older than a
    // day), and an old one in the journal, which it never touches.
    let recent = log.join("auth.log.1");
    std::fs::write(&recent, "yesterday's logins").unwrap();
    let journal = log.join("journal/kept.1");
    write_aged(&journal, "journal");
    // What it must move: an old rotated log of root's.
    write_aged(&log.join("syslog.2.gz"), "old");
    newline_plant(&log.join("app"), &recent);
    newline_plant(&log.join("app2"), &journal);

    let (_, out) = run(&w);
    assert_eq!(
        std::fs::read_to_string(&recent).ok().as_deref(),
        Some("yesterday's logins"),
        "the recent log was moved: {out}"
    );
    assert_eq!(
        std::fs::read_to_string(&journal).ok().as_deref(),
        Some("journal"),
        "the journal's file was moved: {out}"
    );
    // The service user's directories are left as they were; root's old
    // log went to quarantine.
    assert!(log.join("app/\n").is_dir(), "{out}");
    assert!(log.join("app2/\n").is_dir(), "{out}");
    assert!(!log.join("syslog.2.gz").exists(), "{out}");
    let quarantined = tree(&w.layout().quarantine_dir);
    assert!(
        quarantined.iter().any(|p| p.ends_with("syslog.2.gz\"")),
        "{quarantined:?}: {out}"
    );
}

#[test]
fn a_directory_swapped_for_a_symlink_during_the_run_cannot_redirect_old_logs() {
    let w = start("adv-oldlogs-swap");
    let log = w.touched.join("log");
    let journal = log.join("journal");
    // Outside every touch, and in the journal the chore leaves alone: old
    // rotated logs behind links.
    let outside = PathBuf::from(format!(
        "/var/tmp/aromba-adv-oldlogs-outside-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&outside);
    write_aged(&outside.join("secret.1"), "outside");
    for i in 0..100 {
        write_aged(&journal.join(format!("f{i}.1")), "journal");
    }
    // From the start: a directory that is a link into the journal, and a
    // service user's directory of links named like old logs.
    symlink(&journal, log.join("linked")).unwrap();
    let svc = log.join("svc");
    std::fs::create_dir_all(&svc).unwrap();
    symlink(outside.join("secret.1"), svc.join("evil.1")).unwrap();
    symlink(journal.join("f0.1"), svc.join("evil2.1")).unwrap();
    for l in ["evil.1", "evil2.1"] {
        lchown(svc.join(l), Some(SERVICE_UID), Some(SERVICE_UID)).unwrap();
        aged(&svc.join(l));
    }
    chown(&svc, Some(SERVICE_UID), Some(SERVICE_UID)).unwrap();
    // During the run: a directory of old logs named as the journal's,
    // swapped again and again for a link to the journal once the moves
    // have begun (the first thing in quarantine), so the walk found it a
    // directory. Few enough that every path found fits in one write of
    // find's output buffer: the listing was whole before the first move.
    let flip = log.join("flip");
    for i in 0..50 {
        write_aged(&flip.join(format!("f{i}.1")), "flip");
    }
    let journal_before = tree(&journal);
    let outside_before = tree(&outside);
    let svc_before = tree(&svc);

    w.dry_run_shown("old-logs-here");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flipper = {
        let (stop, flip, journal) = (stop.clone(), flip.clone(), journal.clone());
        let quarantine = w.layout().quarantine_dir;
        let real = flip.with_extension("real");
        let link = flip.with_extension("link");
        symlink(&journal, &link).unwrap();
        std::thread::spawn(move || {
            // Each swap is two renames, so the name is missing only
            // between them; it is a link as long as it is a directory.
            let pause = std::time::Duration::from_millis(2);
            while !stop.load(std::sync::atomic::Ordering::SeqCst)
                && std::fs::read_dir(&quarantine).map_or(true, |mut d| d.next().is_none())
            {
                std::thread::sleep(pause / 2);
            }
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                if std::fs::rename(&flip, &real).is_ok() {
                    let _ = std::fs::rename(&link, &flip);
                    std::thread::sleep(pause);
                    let _ = std::fs::rename(&flip, &link);
                    let _ = std::fs::rename(&real, &flip);
                }
                std::thread::sleep(pause);
            }
            // Leave the real directory in place.
            if std::fs::symlink_metadata(&flip).is_ok_and(|m| m.is_symlink()) {
                let _ = std::fs::rename(&flip, &link);
            }
            let _ = std::fs::rename(&real, &flip);
            let _ = std::fs::remove_file(&link);
        })
    };
    let r = w.control(&Request::ChoreRun {
        name: "old-logs-here".into(),
        dry_run: false,
    });
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    flipper.join().unwrap();
    let r = match r {
        Response::Receipt {
            receipt, stderr, ..
        } => format!("{receipt}\n{}", String::from_utf8_lossy(&stderr)),
        other => panic!("old-logs did not run: {other:?}"),
    };

    assert_eq!(tree(&journal), journal_before, "{r:?}");
    assert_eq!(tree(&outside), outside_before, "{r:?}");
    assert_eq!(tree(&svc), svc_before, "{r:?}");
    assert!(
        std::fs::symlink_metadata(log.join("linked")).is_ok_and(|m| m.is_symlink()),
        "{r:?}"
    );
    for i in 0..100 {
        let f = journal.join(format!("f{i}.1"));
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "journal", "{r:?}");
    }
    let _ = std::fs::remove_dir_all(&outside);
}
