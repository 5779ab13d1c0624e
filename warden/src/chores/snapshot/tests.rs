//! The snapshot store's tests: what undo puts back, what it moves to
//! quarantine, what it leaves alone, and the hostile records `load` refuses.

#![forbid(unsafe_code)]

use super::entry::Why;
use super::quarantine::{
    Left, copy_tree, move_across_within, move_by_copy, remove_copied, undo_dirs,
};
use super::safe_dir::{Staging, check_proc_at, fresh_dir};
use super::*;
use serde_json::Value;
use std::ffi::{OsStr, OsString};
use std::fs::{File, FileTimes, Permissions};
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt, symlink};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const NOW: u64 = 1_700_000_000;
const ROOMY: u64 = 1 << 30;

struct Scratch {
    base: PathBuf,
    root: PathBuf,
    store: PathBuf,
    quarantine: PathBuf,
}

impl Scratch {
    fn new(name: &str) -> Scratch {
        let base =
            std::env::temp_dir().join(format!("aromba-snapshot-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&base);
        let root = base.join("root");
        fs::create_dir_all(&root).unwrap();
        Scratch {
            store: base.join("store"),
            quarantine: base.join("quarantine"),
            root,
            base,
        }
    }

    fn at(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    fn take(&self, n: u8) -> Snapshot {
        self.take_excluding(n, &[])
    }

    fn take_excluding(&self, n: u8, exclude: &[PathBuf]) -> Snapshot {
        take(
            &self.store,
            &id(n),
            "test-chore",
            std::slice::from_ref(&self.root),
            exclude,
            NOW,
            ROOMY,
        )
        .unwrap()
    }

    /// Where undo `n` moved `path`: its own `<id>-undo-<hex>` directory.
    fn quarantined(&self, n: u8, path: &Path) -> PathBuf {
        let dirs = undo_dirs(&self.quarantine, &id(n));
        assert_eq!(dirs.len(), 1, "one quarantine directory per undo");
        dirs[0].join(path.strip_prefix("/").unwrap())
    }

    /// Everything the undo moved to quarantine for snapshot `n`, as paths
    /// relative to the quarantine's copy of the root (files only).
    fn quarantine_files(&self, n: u8) -> Vec<PathBuf> {
        if undo_dirs(&self.quarantine, &id(n)).is_empty() {
            return Vec::new();
        }
        let top = self.quarantined(n, &self.root);
        let mut out = Vec::new();
        let mut stack = vec![top.clone()];
        while let Some(d) = stack.pop() {
            let Ok(rd) = fs::read_dir(&d) else { continue };
            for item in rd {
                let p = item.unwrap().path();
                if fs::symlink_metadata(&p).unwrap().is_dir() {
                    stack.push(p);
                } else {
                    out.push(p.strip_prefix(&top).unwrap().to_path_buf());
                }
            }
        }
        out.sort();
        out
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.base);
    }
}

fn id(n: u8) -> String {
    format!("{n:032x}")
}

fn write(path: &Path, bytes: &[u8]) {
    if let Some(p) = path.parent() {
        fs::create_dir_all(p).unwrap();
    }
    fs::write(path, bytes).unwrap();
}

fn set_mtime(path: &Path, secs: u64, nanos: u32) {
    let t = UNIX_EPOCH + Duration::new(secs, nanos);
    File::open(path)
        .unwrap()
        .set_times(FileTimes::new().set_modified(t))
        .unwrap();
}

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().mode() & PERM_BITS
}

fn mtime(path: &Path) -> (i64, i64) {
    let m = fs::symlink_metadata(path).unwrap();
    (m.mtime(), m.mtime_nsec())
}

/// The ctime has a clock tick's granularity: a change made "later" must be
/// made at least a tick later to show in it.
fn tick() {
    std::thread::sleep(Duration::from_millis(20));
}

fn mkfifo(path: &Path) {
    assert_cmd::Command::new("mkfifo")
        .arg(path)
        .assert()
        .success();
}

#[test]
fn undo_restores_modified_removed_and_renamed_files() {
    let s = Scratch::new("undo-basic");
    write(&s.at("a.txt"), b"alpha");
    write(&s.at("sub/b.bin"), &[0u8, 1, 2, 255]);
    write(&s.at("c.log"), b"charlie");
    let snap = s.take(1);

    write(&s.at("a.txt"), b"something else entirely");
    fs::remove_file(s.at("sub/b.bin")).unwrap();
    fs::remove_dir(s.at("sub")).unwrap();
    fs::rename(s.at("c.log"), s.at("d.log")).unwrap();
    let d = snap.seal().unwrap();
    assert!(!d.is_empty());

    let done = snap.restore(&s.quarantine, NOW + 60).unwrap();
    assert_eq!(fs::read(s.at("a.txt")).unwrap(), b"alpha");
    assert_eq!(fs::read(s.at("sub/b.bin")).unwrap(), [0u8, 1, 2, 255]);
    assert_eq!(fs::read(s.at("c.log")).unwrap(), b"charlie");
    assert!(!s.at("d.log").exists());
    assert_eq!(
        fs::read(s.quarantined(1, &s.at("d.log"))).unwrap(),
        b"charlie"
    );
    assert_eq!(
        fs::read(s.quarantined(1, &s.at("a.txt"))).unwrap(),
        b"something else entirely",
        "the run's version is moved aside, not unlinked"
    );
    assert_eq!(done.quarantined, 2, "d.log, and the run's a.txt");
    assert_eq!(done.quarantined_added, 1, "d.log");
    assert_eq!(done.quarantined_replaced, 1, "the run's a.txt");
    assert_eq!(done.restored, 4, "a.txt, sub, sub/b.bin, c.log");
    assert_eq!(done.conflicts, 0);
    let d = snap.diff().unwrap();
    assert_eq!((d.added, d.removed), (0, 0), "{d:?}");
    assert_eq!((d.bytes_before, d.bytes_after), (16, 16));
    assert!(snap.dir.join(UNDONE).exists());
    assert!(!snap.dir.join(UNDOING).exists());
}

#[test]
fn undo_moves_files_the_run_created_to_quarantine() {
    let s = Scratch::new("undo-created");
    write(&s.at("keep.txt"), b"keep");
    let absent = s.base.join("absent-root");
    let snap = take(
        &s.store,
        &id(2),
        "test-chore",
        &[s.root.clone(), absent.clone()],
        &[],
        NOW,
        ROOMY,
    )
    .unwrap();

    write(&s.at("new.txt"), b"new");
    write(&s.at("newdir/inner/deep.txt"), b"deep");
    write(&absent.join("made.txt"), b"made");
    snap.seal().unwrap();

    let done = snap.restore(&s.quarantine, NOW).unwrap();
    assert_eq!(done.quarantined, 3, "new.txt, newdir, absent-root");
    assert_eq!(done.restored, 0);
    assert!(!s.at("new.txt").exists());
    assert!(!s.at("newdir").exists());
    assert!(!absent.exists());
    assert_eq!(fs::read(s.at("keep.txt")).unwrap(), b"keep");
    assert_eq!(
        fs::read(s.quarantined(2, &s.at("new.txt"))).unwrap(),
        b"new"
    );
    assert_eq!(
        fs::read(s.quarantined(2, &s.at("newdir/inner/deep.txt"))).unwrap(),
        b"deep"
    );
    assert_eq!(
        fs::read(s.quarantined(2, &absent.join("made.txt"))).unwrap(),
        b"made"
    );
}

#[test]
fn undo_puts_back_a_file_that_became_a_directory_and_back() {
    let s = Scratch::new("undo-kind");
    write(&s.at("was-file"), b"file bytes");
    write(&s.at("was-dir/x"), b"x");
    let snap = s.take(3);

    fs::remove_file(s.at("was-file")).unwrap();
    write(&s.at("was-file/y"), b"y");
    fs::remove_dir_all(s.at("was-dir")).unwrap();
    write(&s.at("was-dir"), b"now a file");
    snap.seal().unwrap();

    let done = snap.restore(&s.quarantine, NOW).unwrap();
    assert_eq!(done.quarantined, 2);
    assert_eq!(done.conflicts, 0);
    assert_eq!(fs::read(s.at("was-file")).unwrap(), b"file bytes");
    assert_eq!(fs::read(s.at("was-dir/x")).unwrap(), b"x");
    assert_eq!(
        fs::read(s.quarantined(3, &s.at("was-file/y"))).unwrap(),
        b"y"
    );
    assert_eq!(
        fs::read(s.quarantined(3, &s.at("was-dir"))).unwrap(),
        b"now a file"
    );
}

#[test]
fn diff_counts_added_removed_changed_and_bytes() {
    let s = Scratch::new("diff");
    write(&s.at("a"), &[1; 10]);
    write(&s.at("b"), &[2; 20]);
    write(&s.at("c"), &[3; 30]);
    set_mtime(&s.at("a"), 1_000, 0);
    let snap = s.take(4);
    assert!(snap.diff().unwrap().is_empty());
    assert_eq!(snap.diff().unwrap().summary(), "nothing changed");

    fs::remove_file(s.at("b")).unwrap();
    write(&s.at("a"), &[9; 10]);
    set_mtime(&s.at("a"), 2_000, 7);
    write(&s.at("d"), &[4; 100]);
    write(&s.at("e/f"), &[5; 5]);

    let d = snap.diff().unwrap();
    assert_eq!((d.added, d.removed, d.modified), (2, 1, 1), "{d:?}");
    assert_eq!(
        (d.dirs_added, d.dirs_removed, d.dirs_modified),
        (1, 0, 0),
        "{d:?}"
    );
    assert_eq!(d.files(), 4, "files and symlinks only, like the runner");
    assert_eq!((d.bytes_before, d.bytes_after), (60, 145));
    assert_eq!(
        d.summary(),
        "2 added, 1 removed, 1 changed; 85 B added; 1 directory added"
    );
    assert_eq!(
        d.examples,
        vec![s.at("a"), s.at("d"), s.at("e"), s.at("e/f"), s.at("b")]
    );

    fs::remove_file(s.at("d")).unwrap();
    fs::remove_file(s.at("c")).unwrap();
    let d = snap.diff().unwrap();
    assert_eq!(d.bytes_after, 15);
    assert_eq!(
        d.summary(),
        "1 added, 2 removed, 1 changed; 45 B freed; 1 directory added"
    );

    // A directory alone is a change to undo, but no file changed.
    fs::remove_file(s.at("e/f")).unwrap();
    fs::write(s.at("a"), [1; 10]).unwrap();
    let only_dirs = Diff {
        dirs_added: 1,
        ..Diff::default()
    };
    assert!(!only_dirs.is_empty());
    assert_eq!(only_dirs.files(), 0);
    assert_eq!(only_dirs.summary(), "no files changed; 1 directory added");
}

/// A red run that made a tree of 150,000 empty directories was receipted
/// "0 added": directories are counted in the receipt too.
#[test]
fn a_run_that_made_only_directories_says_how_many() {
    let tree = Diff {
        dirs_added: 150_000,
        ..Diff::default()
    };
    assert_eq!(tree.summary(), "no files changed; 150000 directories added");
    let mixed = Diff {
        added: 2,
        dirs_added: 3,
        dirs_removed: 1,
        bytes_after: 10,
        ..Diff::default()
    };
    assert_eq!(
        mixed.summary(),
        "2 added, 0 removed, 0 changed; 10 B added; 3 directories added, 1 removed"
    );
}

#[test]
fn summary_uses_binary_units() {
    let d = Diff {
        removed: 1,
        bytes_before: 1_300_000,
        ..Diff::default()
    };
    assert_eq!(d.summary(), "0 added, 1 removed, 0 changed; 1.2 MB freed");
    let d = Diff {
        added: 1,
        bytes_after: 4096,
        ..Diff::default()
    };
    assert_eq!(d.summary(), "1 added, 0 removed, 0 changed; 4.0 KB added");
}

#[test]
fn second_undo_is_refused() {
    let s = Scratch::new("second");
    write(&s.at("a"), b"a");
    let snap = s.take(5);
    fs::remove_file(s.at("a")).unwrap();
    snap.seal().unwrap();
    snap.restore(&s.quarantine, NOW).unwrap();
    fs::remove_file(s.at("a")).unwrap();
    let again = load(&s.store, &id(5)).unwrap();
    assert!(matches!(
        again.restore(&s.quarantine, NOW),
        Err(SnapshotError::AlreadyUndone(_))
    ));
    assert!(!s.at("a").exists(), "the refused undo changed nothing");
    assert!(
        !snap.dir.join(UNDOING).exists(),
        "a refusal lets go of its claim"
    );
}

#[test]
fn a_second_undo_while_one_is_under_way_is_refused() {
    let s = Scratch::new("under-way");
    write(&s.at("a"), b"a");
    let snap = s.take(6);
    fs::remove_file(s.at("a")).unwrap();
    snap.seal().unwrap();
    // Another undo holds the claim.
    fs::write(snap.dir.join(UNDOING), b"").unwrap();
    let err = snap.restore(&s.quarantine, NOW).unwrap_err();
    assert!(matches!(err, SnapshotError::UnderWay(_)), "{err}");
    assert!(
        err.to_string()
            .contains("an undo of this run is under way or was interrupted"),
        "{err}"
    );
    assert!(!s.at("a").exists(), "the refused undo changed nothing");
    assert!(matches!(
        peek(&s.store, &id(6), NOW),
        Err(SnapshotError::UnderWay(_))
    ));
    assert!(
        snap.dir.join(UNDOING).exists(),
        "the other undo's claim stays"
    );

    // An undo that stops part-way keeps its claim, so no other starts over it.
    fs::remove_file(snap.dir.join(UNDOING)).unwrap();
    fs::write(snap.blob_path(0), b"x").unwrap();
    let err = snap.restore(&s.quarantine, NOW).unwrap_err();
    assert!(matches!(err, SnapshotError::Partial { .. }), "{err}");
    assert!(err.to_string().contains("part-way"), "{err}");
    assert!(snap.dir.join(UNDOING).exists());
    assert!(!snap.dir.join(UNDONE).exists());
    assert!(matches!(
        snap.restore(&s.quarantine, NOW),
        Err(SnapshotError::UnderWay(_))
    ));
}

#[test]
fn undo_after_seven_days_is_refused() {
    let s = Scratch::new("expired");
    write(&s.at("a"), b"a");
    let snap = s.take(7);
    fs::remove_file(s.at("a")).unwrap();
    snap.seal().unwrap();
    let err = snap.restore(&s.quarantine, NOW + KEEP_S + 1).unwrap_err();
    assert!(matches!(err, SnapshotError::Expired(_)), "{err}");
    assert!(!s.at("a").exists());
    snap.restore(&s.quarantine, NOW + KEEP_S).unwrap();
    assert!(s.at("a").exists(), "exactly seven days is still in time");
}

#[test]
fn an_unsealed_snapshot_puts_back_only_what_is_missing() {
    let s = Scratch::new("unsealed");
    write(&s.at("a"), b"a");
    write(&s.at("c"), b"c");
    fs::create_dir(s.at("d")).unwrap();
    write(&s.at("d/e"), b"e");
    let snap = s.take(8);
    // The run, never sealed: a and d (with e) removed, c rewritten, b made.
    fs::remove_file(s.at("a")).unwrap();
    fs::remove_dir_all(s.at("d")).unwrap();
    tick();
    write(&s.at("c"), b"C");
    write(&s.at("b"), b"b");
    let r = snap.restore(&s.quarantine, NOW).unwrap();
    assert!(r.unsealed);
    assert_eq!(fs::read(s.at("a")).unwrap(), b"a");
    assert_eq!(fs::read(s.at("d/e")).unwrap(), b"e");
    // Not known to be the run's: left, and named.
    assert_eq!(fs::read(s.at("c")).unwrap(), b"C");
    assert!(s.at("b").exists());
    assert_eq!(r.conflict_examples, vec![s.at("c")]);
    assert_eq!(
        r.unlisted,
        vec![Unlisted {
            path: s.root.clone(),
            count: None
        }]
    );
    assert!(!snap.dir.join(UNDOING).exists());
}

#[test]
fn a_snapshot_is_sealed_once_only() {
    let s = Scratch::new("seal-once");
    write(&s.at("a"), b"a");
    let snap = s.take(8);
    fs::remove_file(s.at("a")).unwrap();
    write(&s.at("b"), b"b");
    snap.seal().unwrap();
    assert!(matches!(snap.seal(), Err(SnapshotError::AlreadySealed(_))));
    let r = snap.restore(&s.quarantine, NOW).unwrap();
    assert!(!r.unsealed);
    assert!(s.at("a").exists());
    assert!(!s.at("b").exists());
}

#[test]
fn undo_leaves_a_file_changed_after_the_run_and_reports_a_conflict() {
    let s = Scratch::new("conflict");
    write(&s.at("a.txt"), b"alpha");
    write(&s.at("gone.txt"), b"gone");
    write(&s.at("b.txt"), b"bravo");
    let snap = s.take(9);

    // The run.
    write(&s.at("a.txt"), b"run's");
    fs::remove_file(s.at("gone.txt")).unwrap();
    write(&s.at("b.txt"), b"run's b");
    write(&s.at("made.txt"), b"run's new file");
    assert_eq!(snap.seal().unwrap().files(), 4);

    // Someone else, after it: a.txt rewritten, gone.txt recreated, made.txt
    // edited. b.txt is left as the run left it.
    tick();
    write(&s.at("a.txt"), b"later");
    write(&s.at("gone.txt"), b"someone's new gone.txt");
    write(&s.at("made.txt"), b"edited later");

    let done = snap.restore(&s.quarantine, NOW).unwrap();
    assert_eq!(done.conflicts, 3, "{done:?}");
    assert_eq!(
        done.conflict_examples,
        vec![s.at("a.txt"), s.at("gone.txt"), s.at("made.txt")]
    );
    assert_eq!(fs::read(s.at("a.txt")).unwrap(), b"later");
    assert_eq!(
        fs::read(s.at("gone.txt")).unwrap(),
        b"someone's new gone.txt"
    );
    assert_eq!(fs::read(s.at("made.txt")).unwrap(), b"edited later");
    assert_eq!(
        fs::read(s.at("b.txt")).unwrap(),
        b"bravo",
        "still the run's"
    );
    assert_eq!((done.restored, done.quarantined), (1, 1));
    assert_eq!(s.quarantine_files(9), vec![PathBuf::from("b.txt")]);
}

#[test]
fn undo_never_touches_paths_the_run_did_not_change() {
    let s = Scratch::new("untouched");
    write(&s.at("ran.txt"), b"before");
    write(&s.at("other.txt"), b"other");
    write(&s.at("dir/kept"), b"kept");
    write(&s.at("dir/doomed"), b"doomed");
    fs::set_permissions(s.at("other.txt"), Permissions::from_mode(0o644)).unwrap();
    let snap = s.take(10);

    write(&s.at("ran.txt"), b"run");
    snap.seal().unwrap();

    // After the run, others change what the run left alone.
    write(&s.at("other.txt"), b"changed by someone later");
    fs::set_permissions(s.at("other.txt"), Permissions::from_mode(0o600)).unwrap();
    fs::remove_file(s.at("dir/doomed")).unwrap();
    write(&s.at("dir/kept"), b"edited later");
    let other_inode = fs::symlink_metadata(s.at("other.txt")).unwrap().ino();

    let done = snap.restore(&s.quarantine, NOW).unwrap();
    assert_eq!((done.restored, done.quarantined, done.conflicts), (1, 1, 0));
    assert_eq!(fs::read(s.at("ran.txt")).unwrap(), b"before");
    assert_eq!(
        fs::read(s.at("other.txt")).unwrap(),
        b"changed by someone later"
    );
    assert_eq!(mode(&s.at("other.txt")), 0o600);
    assert_eq!(
        fs::symlink_metadata(s.at("other.txt")).unwrap().ino(),
        other_inode
    );
    assert!(!s.at("dir/doomed").exists(), "not the run's to put back");
    assert_eq!(fs::read(s.at("dir/kept")).unwrap(), b"edited later");
}

#[test]
fn undo_does_not_quarantine_files_created_after_the_run() {
    let s = Scratch::new("later-files");
    write(&s.at("old.txt"), b"old");
    let snap = s.take(11);

    write(&s.at("run.txt"), b"the run's");
    write(&s.at("rundir/x"), b"the run's x");
    write(&s.at("rundir/sub/y"), b"the run's y");
    snap.seal().unwrap();

    write(&s.at("later.txt"), b"someone's");
    write(&s.at("rundir/later"), b"someone's, in the run's directory");

    let done = snap.restore(&s.quarantine, NOW).unwrap();
    assert_eq!(fs::read(s.at("later.txt")).unwrap(), b"someone's");
    assert_eq!(
        fs::read(s.at("rundir/later")).unwrap(),
        b"someone's, in the run's directory"
    );
    assert!(s.at("rundir").is_dir(), "it holds someone else's file");
    assert!(!s.at("run.txt").exists());
    assert!(!s.at("rundir/x").exists());
    assert!(!s.at("rundir/sub").exists());
    assert_eq!(
        s.quarantine_files(11),
        vec![
            PathBuf::from("run.txt"),
            PathBuf::from("rundir/sub/y"),
            PathBuf::from("rundir/x"),
        ]
    );
    assert_eq!(done.quarantined, 3, "run.txt, rundir/sub, rundir/x");
    assert_eq!(done.conflicts, 1, "rundir stays");
    assert_eq!(done.conflict_examples, vec![s.at("rundir")]);
}

#[test]
fn excluded_paths_are_neither_snapshotted_nor_restored() {
    let s = Scratch::new("excluded");
    write(&s.at("plain"), b"plain");
    write(&s.at("secret/key"), b"secret key");
    write(&s.at("own.state"), b"warden state");
    let exclude = [s.at("secret"), s.at("own.state"), s.at("made/keep")];
    let snap = s.take_excluding(12, &exclude);
    assert!(
        snap.entries.iter().all(|e| !excluded(&e.path, &exclude)),
        "nothing excluded was recorded"
    );
    assert_eq!(snap.entries.len(), 2, "the root and plain");

    // The run changes excluded and plain paths alike, and makes a directory
    // with an excluded path in it.
    write(&s.at("plain"), b"run");
    write(&s.at("secret/key"), b"rotated key");
    write(&s.at("secret/new"), b"new secret");
    fs::remove_file(s.at("own.state")).unwrap();
    write(&s.at("made/keep"), b"excluded, in a new directory");
    write(&s.at("made/other"), b"the run's");
    let d = snap.seal().unwrap();
    assert_eq!((d.added, d.removed, d.modified), (1, 0, 1), "{d:?}");
    assert_eq!(d.dirs_added, 1);
    assert!(d.examples.iter().all(|p| !excluded(p, &exclude)));

    let back = load(&s.store, &id(12)).unwrap();
    let mut sorted = exclude.to_vec();
    sorted.sort();
    assert_eq!(back.exclude, sorted);
    let done = back.restore(&s.quarantine, NOW).unwrap();
    assert_eq!(fs::read(s.at("plain")).unwrap(), b"plain");
    assert_eq!(fs::read(s.at("secret/key")).unwrap(), b"rotated key");
    assert_eq!(fs::read(s.at("secret/new")).unwrap(), b"new secret");
    assert!(!s.at("own.state").exists());
    assert_eq!(
        fs::read(s.at("made/keep")).unwrap(),
        b"excluded, in a new directory",
        "the directory holding it is not moved"
    );
    assert!(!s.at("made/other").exists());
    assert_eq!(
        s.quarantine_files(12),
        vec![PathBuf::from("made/other"), PathBuf::from("plain")]
    );
    assert_eq!(done.conflict_examples, vec![s.at("made")]);

    // Excluded paths must be absolute and plain; a root inside one is refused.
    for bad in ["relative", "/tmp/../etc"] {
        let err = take(
            &s.store,
            &id(13),
            "c",
            std::slice::from_ref(&s.root),
            &[bad.into()],
            NOW,
            ROOMY,
        )
        .unwrap_err();
        assert!(matches!(err, SnapshotError::BadRoot { .. }), "{err}");
    }
    let err = take(
        &s.store,
        &id(13),
        "c",
        &[s.at("secret/inner")],
        &exclude,
        NOW,
        ROOMY,
    )
    .unwrap_err();
    assert!(matches!(err, SnapshotError::BadRoot { .. }), "{err}");
    // A manifest that records an excluded path, or a bad exclusion, is refused.
    let n = 14;
    s.take_excluding(n, &exclude);
    edit_manifest(&s, n, |v| v["exclude"] = serde_json::json!(["relative"]));
    assert!(matches!(
        load(&s.store, &id(n)),
        Err(SnapshotError::BadManifest { .. })
    ));
    let n = 15;
    s.take_excluding(n, &exclude);
    edit_manifest(&s, n, |v| {
        v["exclude"] = serde_json::json!([s.at("plain").to_str().unwrap()])
    });
    assert!(matches!(
        load(&s.store, &id(n)),
        Err(SnapshotError::BadManifest { .. })
    ));
}

#[test]
fn a_rewrite_that_keeps_size_and_mtime_is_seen() {
    let s = Scratch::new("same-size");
    write(&s.at("f"), b"aaaa");
    set_mtime(&s.at("f"), 1_600_000_000, 5);
    let snap = s.take(16);
    let ino = fs::symlink_metadata(s.at("f")).unwrap().ino();

    // Same inode, same size, mtime put back: only the ctime tells.
    tick();
    fs::OpenOptions::new()
        .write(true)
        .open(s.at("f"))
        .unwrap()
        .write_all(b"bbbb")
        .unwrap();
    set_mtime(&s.at("f"), 1_600_000_000, 5);
    let m = fs::symlink_metadata(s.at("f")).unwrap();
    assert_eq!((m.ino(), m.size()), (ino, 4));
    assert_eq!(mtime(&s.at("f")), (1_600_000_000, 5));
    let d = snap.seal().unwrap();
    assert_eq!(d.modified, 1, "{d:?}");

    snap.restore(&s.quarantine, NOW).unwrap();
    assert_eq!(fs::read(s.at("f")).unwrap(), b"aaaa");
    assert_eq!(mtime(&s.at("f")), (1_600_000_000, 5));

    // A file swapped for another inode with the same size and times is seen.
    let s2 = Scratch::new("same-size-swap");
    write(&s2.at("g"), b"cccc");
    set_mtime(&s2.at("g"), 1_600_000_000, 0);
    let snap = s2.take(17);
    write(&s2.at("g.new"), b"dddd");
    set_mtime(&s2.at("g.new"), 1_600_000_000, 0);
    fs::rename(s2.at("g.new"), s2.at("g")).unwrap();
    assert_eq!(snap.diff().unwrap().modified, 1);
}

#[test]
fn refuses_a_root_behind_a_symlink() {
    let s = Scratch::new("symlinked-root");
    write(&s.at("real/f"), b"f");
    symlink(s.at("real"), s.at("link")).unwrap();
    for root in [s.at("link"), s.at("link/f")] {
        let err = take(
            &s.store,
            &id(18),
            "c",
            std::slice::from_ref(&root),
            &[],
            NOW,
            ROOMY,
        )
        .unwrap_err();
        assert!(
            matches!(err, SnapshotError::BadRoot { .. }),
            "{}: {err}",
            root.display()
        );
    }
    assert!(!s.store.join(id(18)).exists());

    // A root swapped for a symlink after the take is refused at undo.
    let real = s.at("real");
    let snap = take(
        &s.store,
        &id(19),
        "c",
        std::slice::from_ref(&real),
        &[],
        NOW,
        ROOMY,
    )
    .unwrap();
    let root_entry = snap.entries.iter().find(|e| e.path == real).unwrap();
    let m = fs::symlink_metadata(&real).unwrap();
    assert_eq!((root_entry.dev, root_entry.ino), (m.dev(), m.ino()));
    fs::remove_file(real.join("f")).unwrap();
    snap.seal().unwrap();
    let elsewhere = s.base.join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    fs::rename(&real, s.at("real.old")).unwrap();
    symlink(&elsewhere, &real).unwrap();
    let err = snap.restore(&s.quarantine, NOW).unwrap_err();
    assert!(matches!(err, SnapshotError::Unsafe { .. }), "{err}");
    assert!(!elsewhere.join("f").exists());
    assert!(!snap.dir.join(UNDOING).exists(), "nothing was done");

    // So is one that is now another directory.
    fs::remove_file(&real).unwrap();
    fs::create_dir(&real).unwrap();
    let err = snap.restore(&s.quarantine, NOW).unwrap_err();
    assert!(matches!(err, SnapshotError::Unsafe { .. }), "{err}");
    assert!(!real.join("f").exists());

    // The very directory, back in place, is fine.
    fs::remove_dir(&real).unwrap();
    fs::rename(s.at("real.old"), &real).unwrap();
    snap.restore(&s.quarantine, NOW).unwrap();
    assert_eq!(fs::read(real.join("f")).unwrap(), b"f");
}

#[test]
fn peek_refuses_undone_and_expired_but_not_unsealed() {
    let s = Scratch::new("peek");
    write(&s.at("a"), b"a");
    let snap = s.take(20);
    // Its copies are the only ones of what the run removed.
    peek(&s.store, &id(20), NOW).unwrap();
    fs::remove_file(s.at("a")).unwrap();
    snap.seal().unwrap();
    let meta = peek(&s.store, &id(20), NOW).unwrap();
    assert_eq!(
        meta,
        Meta {
            id: id(20),
            chore: "test-chore".into(),
            created_at: NOW,
            roots: vec![s.root.clone()],
        }
    );
    assert!(matches!(
        peek(&s.store, &id(20), NOW + KEEP_S + 1),
        Err(SnapshotError::Expired(_))
    ));
    assert!(matches!(
        peek(&s.store, "../x", NOW),
        Err(SnapshotError::BadId(_))
    ));
    assert!(matches!(
        peek(&s.store, &id(21), NOW),
        Err(SnapshotError::Io { .. })
    ));
    snap.restore(&s.quarantine, NOW).unwrap();
    assert!(matches!(
        peek(&s.store, &id(20), NOW),
        Err(SnapshotError::AlreadyUndone(_))
    ));

    // meta.json is read only up to 64 KiB, and must be a plain file.
    let snap = s.take(22);
    snap.seal().unwrap();
    let meta_path = snap.dir.join(META);
    let mut v: Value = serde_json::from_slice(&fs::read(&meta_path).unwrap()).unwrap();
    v["chore"] = "x".repeat(70_000).into();
    fs::write(&meta_path, serde_json::to_vec(&v).unwrap()).unwrap();
    let err = peek(&s.store, &id(22), NOW).unwrap_err();
    assert!(matches!(err, SnapshotError::BadManifest { .. }), "{err}");
    fs::remove_file(&meta_path).unwrap();
    symlink(snap.dir.join(MANIFEST), &meta_path).unwrap();
    assert!(peek(&s.store, &id(22), NOW).is_err());
}

#[test]
fn a_fifo_swapped_in_does_not_block_take() {
    let s = Scratch::new("fifo");
    write(&s.at("plain"), b"plain bytes");
    mkfifo(&s.at("pipe"));
    let (tx, rx) = std::sync::mpsc::channel();
    let (store, root) = (s.store.clone(), s.root.clone());
    std::thread::spawn(move || {
        let r = take(&store, &id(23), "c", &[root], &[], NOW, ROOMY);
        let _ = tx.send(r);
    });
    let snap = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("take blocked on a fifo")
        .unwrap();
    assert!(
        snap.entries
            .iter()
            .any(|e| e.path == s.at("pipe") && e.kind == Kind::Skipped(Why::Fifo))
    );
    assert_eq!(
        snap.entries.iter().filter(|e| e.blob.is_some()).count(),
        1,
        "the plain file, read with O_NONBLOCK"
    );

    // A file listed, then swapped for a fifo or a symlink before it is
    // opened: refused at once, neither read through nor waited on.
    let listed = fs::symlink_metadata(s.at("plain")).unwrap();
    fs::rename(s.at("plain"), s.at("plain.old")).unwrap();
    mkfifo(&s.at("plain"));
    let (tx, rx) = std::sync::mpsc::channel();
    let (root, want) = (s.root.clone(), (listed.dev(), listed.ino()));
    std::thread::spawn(move || {
        let got = open_dir(&root).open_listed(OsStr::new("plain"), want);
        let _ = tx.send(got.map(|_| ()));
    });
    let got = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("opening a fifo blocked");
    assert!(matches!(got, Err(SnapshotError::Changed(_))), "{got:?}");
    fs::remove_file(s.at("plain")).unwrap();
    symlink(s.at("plain.old"), s.at("plain")).unwrap();
    let root = open_dir(&s.root);
    let got = root.open_listed(OsStr::new("plain"), want).map(|_| ());
    assert!(matches!(got, Err(SnapshotError::Changed(_))), "{got:?}");
    // The file itself opens fine.
    let (mut f, _) = root.open_listed(OsStr::new("plain.old"), want).unwrap();
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes).unwrap();
    assert_eq!(bytes, b"plain bytes");

    // Undo leaves a fifo alone, and moves a fifo only with a directory the
    // run made whole.
    let s = Scratch::new("fifo-undo");
    write(&s.at("a"), b"a");
    let snap = s.take(24);
    mkfifo(&s.at("new-pipe"));
    write(&s.at("newdir/f"), b"f");
    mkfifo(&s.at("newdir/pipe"));
    snap.seal().unwrap();
    let done = snap.restore(&s.quarantine, NOW).unwrap();
    assert_eq!((done.quarantined, done.conflicts), (1, 0));
    assert!(
        fs::symlink_metadata(s.at("new-pipe"))
            .unwrap()
            .file_type()
            .is_fifo()
    );
    assert!(!s.at("newdir").exists());
}

#[test]
fn a_directory_swapped_for_a_symlink_is_not_listed() {
    let s = Scratch::new("swapped-dir");
    write(&s.at("d/own"), b"own");
    write(&s.base.join("elsewhere/theirs"), b"theirs");
    let listed = fs::symlink_metadata(s.at("d")).unwrap();
    let want = (listed.dev(), listed.ino());
    let root = open_dir(&s.root);
    let Sub::Dir(d) = root.child_dir_is(OsStr::new("d"), want).unwrap() else {
        panic!("d is the directory listed");
    };
    assert_eq!(d.list().unwrap(), vec![OsString::from("own")]);
    // Listed as a directory, then swapped for a symlink or another directory.
    fs::rename(s.at("d"), s.at("d.old")).unwrap();
    symlink(s.base.join("elsewhere"), s.at("d")).unwrap();
    let got = root.child_dir_is(OsStr::new("d"), want).unwrap();
    assert!(matches!(got, Sub::Symlink), "{got:?}");
    fs::remove_file(s.at("d")).unwrap();
    fs::create_dir(s.at("d")).unwrap();
    let got = root.child_dir_is(OsStr::new("d"), want).unwrap();
    assert!(matches!(got, Sub::Elsewhere), "{got:?}");
    // The walk refuses such a swap rather than list the other directory.
    fs::remove_dir(s.at("d")).unwrap();
    symlink(s.base.join("elsewhere"), s.at("d")).unwrap();
    let mut seen = Vec::new();
    walk(std::slice::from_ref(&s.root), &[], |at| {
        seen.push(at.path.to_path_buf());
        Ok(true)
    })
    .unwrap();
    assert!(!seen.iter().any(|p| p.starts_with(s.at("d/theirs"))));
}

fn open_dir(path: &Path) -> Dir {
    match Dir::open_path(path).unwrap() {
        Sub::Dir(d) => d,
        other => panic!("{}: {other:?}", path.display()),
    }
}

#[test]
fn refuses_a_snapshot_bigger_than_the_space_allowed() {
    let s = Scratch::new("too-big");
    write(&s.at("a"), &[1; 600]);
    write(&s.at("b"), &[1; 600]);
    // Counted by what they take on disk.
    let on_disk = |p: &Path| fs::metadata(p).unwrap().blocks() * 512;
    let needed = on_disk(&s.at("a")) + on_disk(&s.at("b"));
    assert!(needed >= 1_200);
    let roots = std::slice::from_ref(&s.root);
    let err = take(&s.store, &id(25), "c", roots, &[], NOW, needed - 1).unwrap_err();
    assert!(
        matches!(err, SnapshotError::TooBig { needed: n, .. } if n == needed),
        "{err}"
    );
    assert!(!s.store.join(id(25)).exists());
    take(&s.store, &id(25), "c", roots, &[], NOW, needed).unwrap();
}

#[test]
fn refuses_too_many_entries_and_bad_ids_and_roots() {
    let s = Scratch::new("bounds");
    for i in 0..5 {
        write(&s.at(&format!("f{i}")), b"x");
    }
    let roots = [s.root.clone()];
    let bounds = |max_entries| Bounds {
        max_bytes: ROOMY,
        max_entries,
    };
    let err = take_bounded(&s.store, &id(26), "c", &roots, &[], NOW, &bounds(5)).unwrap_err();
    assert!(matches!(err, SnapshotError::TooManyEntries { limit: 5 }));
    take_bounded(&s.store, &id(26), "c", &roots, &[], NOW, &bounds(6)).unwrap();
    for bad in ["", "ABCDEF00000000000000000000000000", "../x", &id(27)[1..]] {
        let err = take(&s.store, bad, "c", &roots, &[], NOW, ROOMY).unwrap_err();
        assert!(matches!(err, SnapshotError::BadId(_)), "{bad}: {err}");
    }
    for root in ["relative/path", "/tmp/../etc"] {
        let err = take(&s.store, &id(27), "c", &[root.into()], &[], NOW, ROOMY).unwrap_err();
        assert!(matches!(err, SnapshotError::BadRoot { .. }), "{err}");
    }
    let err = take(&s.store, &id(26), "c", &roots, &[], NOW, ROOMY).unwrap_err();
    assert!(
        matches!(err, SnapshotError::Io { .. }),
        "an id is used once"
    );
}

#[test]
fn load_reads_back_what_take_wrote() {
    let s = Scratch::new("load");
    write(&s.at("a"), b"a");
    write(&s.at("d/b"), b"bb");
    symlink("a", s.at("l")).unwrap();
    let snap = s.take(28);
    let back = load(&s.store, &id(28)).unwrap();
    assert_eq!(back.id, snap.id);
    assert_eq!(back.chore, "test-chore");
    assert_eq!(back.created_at, NOW);
    assert_eq!(back.roots, vec![s.root.clone()]);
    let key = |e: &Entry| {
        format!(
            "{:?}",
            (
                &e.path,
                e.kind,
                e.mode,
                e.size,
                &e.target,
                (e.ctime, e.ctime_ns, e.dev, e.ino)
            )
        )
    };
    let a: Vec<_> = snap.entries.iter().map(key).collect();
    let b: Vec<_> = back.entries.iter().map(key).collect();
    assert_eq!(a, b);
    assert!(back.diff().unwrap().is_empty());
}

fn edit_manifest(s: &Scratch, n: u8, edit: impl FnOnce(&mut Value)) {
    let path = s.store.join(id(n)).join(MANIFEST);
    let mut v: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    edit(&mut v);
    fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
}

fn edit_after(s: &Scratch, n: u8, edit: impl FnOnce(&mut Value)) {
    let path = s.store.join(id(n)).join(AFTER);
    let mut v: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    edit(&mut v);
    fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
}

#[test]
fn load_refuses_a_manifest_path_outside_its_roots() {
    let s = Scratch::new("hostile");
    write(&s.at("a"), b"a");
    let root = s.root.to_str().unwrap().to_string();
    let hostile = [
        "/etc/passwd".to_string(),
        format!("{root}/../../etc/passwd"),
        "relative/a".to_string(),
        format!("{root}-sibling/a"),
    ];
    for (i, path) in hostile.iter().enumerate() {
        let n = 30 + u8::try_from(i).unwrap();
        s.take(n);
        edit_manifest(&s, n, |v| v["entries"][1]["path"] = path.as_str().into());
        let err = load(&s.store, &id(n)).unwrap_err();
        assert!(
            matches!(err, SnapshotError::BadManifest { .. }),
            "{path}: {err}"
        );
    }
}

#[test]
fn restore_refuses_a_hostile_after_record() {
    let s = Scratch::new("hostile-after");
    write(&s.at("a"), b"a");
    let root = s.root.to_str().unwrap().to_string();
    let hostile = [
        "/etc/passwd".to_string(),
        format!("{root}/../../etc/passwd"),
        format!("{root}-sibling/a"),
    ];
    for (i, path) in hostile.iter().enumerate() {
        let n = 40 + u8::try_from(i).unwrap();
        let snap = s.take(n);
        write(&s.at("new"), b"new");
        snap.seal().unwrap();
        fs::remove_file(s.at("new")).unwrap();
        edit_after(&s, n, |v| v["changes"][0]["path"] = path.as_str().into());
        let err = snap.restore(&s.quarantine, NOW).unwrap_err();
        assert!(
            matches!(err, SnapshotError::BadManifest { .. }),
            "{path}: {err}"
        );
    }
    // A path absent before and after, twice listed, or with a bad state.
    let n = 45;
    let snap = s.take(n);
    write(&s.at("new"), b"new");
    snap.seal().unwrap();
    edit_after(&s, n, |v| v["changes"][0]["after"] = "absent".into());
    assert!(snap.restore(&s.quarantine, NOW).is_err());
    edit_after(&s, n, |v| {
        let c = v["changes"][0].clone();
        v["changes"].as_array_mut().unwrap().push(c);
    });
    assert!(snap.restore(&s.quarantine, NOW).is_err());
    edit_after(&s, n, |v| {
        v["changes"] =
            serde_json::json!([{"path": s.at("new").to_str().unwrap(), "after": {"kind": "file"}}]);
    });
    assert!(snap.restore(&s.quarantine, NOW).is_err());
    assert!(s.at("new").exists(), "nothing was done");
    assert!(!snap.dir.join(UNDOING).exists());
}

#[test]
fn load_refuses_malformed_manifests_and_ids() {
    let s = Scratch::new("malformed");
    write(&s.at("a"), b"a");
    symlink("/etc", s.at("link")).unwrap();
    s.take(50);
    // An entry below a recorded symlink would be written through it.
    let below = s.at("link/shadow");
    edit_manifest(&s, 50, |v| {
        let mut e = v["entries"][1].clone();
        e["path"] = below.to_str().unwrap().into();
        e["blob"] = 99.into();
        v["entries"].as_array_mut().unwrap().push(e);
    });
    let err = load(&s.store, &id(50)).unwrap_err();
    assert!(err.to_string().contains("not inside a directory"), "{err}");

    s.take(51);
    edit_manifest(&s, 51, |v| v["id"] = id(52).into());
    assert!(load(&s.store, &id(51)).is_err());

    s.take(53);
    fs::write(s.store.join(id(53)).join(MANIFEST), b"{not json").unwrap();
    assert!(matches!(
        load(&s.store, &id(53)),
        Err(SnapshotError::BadManifest { .. })
    ));
    assert!(matches!(
        load(&s.store, &id(54)),
        Err(SnapshotError::Io { .. })
    ));
    assert!(matches!(
        load(&s.store, "../etc"),
        Err(SnapshotError::BadId(_))
    ));
    s.take(55);
    edit_manifest(&s, 55, |v| v["format"] = 1.into());
    assert!(load(&s.store, &id(55)).is_err(), "the old format");
}

#[test]
fn purge_removes_only_expired_snapshots() {
    let s = Scratch::new("purge");
    write(&s.at("a"), b"a");
    // Directory mtimes are real time, so purge is asked about real time.
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let roots = [s.root.clone()];
    let old = take(&s.store, &id(60), "c", &roots, &[], now - KEEP_S - 1, ROOMY).unwrap();
    let young = take(&s.store, &id(61), "c", &roots, &[], now - KEEP_S, ROOMY).unwrap();
    // Takes that died (no manifest): one just now, one two days ago.
    fs::create_dir(s.store.join(id(62))).unwrap();
    fs::create_dir(s.store.join(id(63))).unwrap();
    set_mtime(&s.store.join(id(63)), now - 2 * 86_400, 0);
    // Not ours, however old.
    fs::create_dir(s.store.join("not-a-snapshot")).unwrap();
    set_mtime(&s.store.join("not-a-snapshot"), 0, 0);

    assert_eq!(purge(&s.store, now).unwrap(), vec![id(60), id(63)]);
    assert!(!old.dir.exists());
    assert!(young.dir.exists());
    assert!(s.store.join(id(62)).exists());
    assert!(s.store.join("not-a-snapshot").exists());
    assert!(purge(&s.store, now).unwrap().is_empty());
    assert_eq!(purge(&s.store, now + 1).unwrap(), vec![id(61)]);
    assert!(purge(&s.base.join("nowhere"), now).unwrap().is_empty());
}

#[test]
fn symlinks_are_restored_not_followed() {
    let s = Scratch::new("links");
    let outside = s.base.join("outside");
    write(&outside.join("secret"), b"outside bytes");
    symlink(&outside, s.at("to-dir")).unwrap();
    symlink(outside.join("secret"), s.at("to-file")).unwrap();
    symlink("nowhere", s.at("dangling")).unwrap();
    let snap = s.take(70);
    assert_eq!(
        snap.entries.iter().filter(|e| e.blob.is_some()).count(),
        0,
        "nothing behind a link was copied"
    );
    assert!(
        !snap
            .entries
            .iter()
            .any(|e| e.path.starts_with(s.at("to-dir")) && e.path != s.at("to-dir"))
    );

    fs::remove_file(s.at("to-dir")).unwrap();
    symlink("/", s.at("to-dir")).unwrap();
    fs::remove_file(s.at("to-file")).unwrap();
    write(&s.at("to-file"), b"a plain file now");
    fs::remove_file(s.at("dangling")).unwrap();
    let d = snap.seal().unwrap();
    assert_eq!((d.added, d.removed, d.modified), (0, 1, 2));

    let done = snap.restore(&s.quarantine, NOW).unwrap();
    assert_eq!(done.quarantined, 2, "the link to / and the file");
    assert_eq!(done.restored, 3);
    assert_eq!(fs::read_link(s.at("to-dir")).unwrap(), outside);
    assert_eq!(
        fs::read_link(s.at("to-file")).unwrap(),
        outside.join("secret")
    );
    assert_eq!(
        fs::read_link(s.at("dangling")).unwrap(),
        Path::new("nowhere")
    );
    assert_eq!(
        fs::read_link(s.quarantined(70, &s.at("to-dir"))).unwrap(),
        Path::new("/")
    );
    assert_eq!(fs::read(outside.join("secret")).unwrap(), b"outside bytes");
    assert_eq!(fs::read_dir(&outside).unwrap().count(), 1);
    let names: Vec<_> = fs::read_dir(&s.root)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 3, "no temporary left: {names:?}");
}

#[test]
fn restores_mode_and_mtime() {
    let s = Scratch::new("attrs");
    write(&s.at("d/f"), b"payload");
    fs::set_permissions(s.at("d/f"), Permissions::from_mode(0o640)).unwrap();
    fs::set_permissions(s.at("d"), Permissions::from_mode(0o750)).unwrap();
    set_mtime(&s.at("d/f"), 1_600_000_000, 123_456_789);
    set_mtime(&s.at("d"), 1_500_000_000, 42);
    let snap = s.take(80);

    fs::set_permissions(s.at("d/f"), Permissions::from_mode(0o666)).unwrap();
    set_mtime(&s.at("d/f"), 1_650_000_000, 0);
    fs::set_permissions(s.at("d"), Permissions::from_mode(0o777)).unwrap();
    write(&s.at("d/new"), b"n");
    let d = snap.seal().unwrap();
    assert_eq!((d.modified, d.dirs_modified, d.added), (1, 1, 1));

    snap.restore(&s.quarantine, NOW).unwrap();
    assert_eq!(fs::read(s.at("d/f")).unwrap(), b"payload");
    assert_eq!(mode(&s.at("d/f")), 0o640);
    assert_eq!(mtime(&s.at("d/f")), (1_600_000_000, 123_456_789));
    assert_eq!(mode(&s.at("d")), 0o750);
    assert_eq!(mtime(&s.at("d")), (1_500_000_000, 42));

    // A removed directory comes back with its mode and mtime too.
    let snap = s.take(81);
    fs::remove_dir_all(s.at("d")).unwrap();
    snap.seal().unwrap();
    snap.restore(&s.quarantine, NOW).unwrap();
    assert_eq!(mode(&s.at("d")), 0o750);
    assert_eq!(mtime(&s.at("d")), (1_500_000_000, 42));
    assert_eq!(mode(&s.at("d/f")), 0o640);
    assert_eq!(mtime(&s.at("d/f")), (1_600_000_000, 123_456_789));
}

#[test]
fn a_parent_deleted_after_the_run_is_a_conflict_not_recreated() {
    let s = Scratch::new("parents");
    write(&s.at("d/e/f"), b"f");
    fs::set_permissions(s.at("d/e"), Permissions::from_mode(0o710)).unwrap();
    let snap = s.take(82);
    fs::remove_file(s.at("d/e/f")).unwrap();
    snap.seal().unwrap();
    // After the run, someone removes the (now empty) directories: not the
    // run's doing, so not the undo's to make again.
    fs::remove_dir_all(s.at("d")).unwrap();
    let done = snap.restore(&s.quarantine, NOW).unwrap();
    assert!(!s.at("d").exists());
    assert_eq!((done.restored, done.conflicts), (0, 1));
    assert_eq!(done.conflict_examples, vec![s.at("d/e/f")]);

    // Directories the run itself removed come back, with their mode.
    let snap = s.take(84);
    write(&s.at("d/e/f"), b"f");
    fs::set_permissions(s.at("d/e"), Permissions::from_mode(0o710)).unwrap();
    let snap2 = s.take(85);
    fs::remove_dir_all(s.at("d")).unwrap();
    snap2.seal().unwrap();
    let done = snap2.restore(&s.quarantine, NOW).unwrap();
    assert_eq!(fs::read(s.at("d/e/f")).unwrap(), b"f");
    assert_eq!(mode(&s.at("d/e")), 0o710);
    assert_eq!((done.restored, done.conflicts), (3, 0));
    drop(snap);
}

#[test]
fn a_removed_file_under_a_directory_turned_file_since_is_a_conflict() {
    let s = Scratch::new("parent-file");
    write(&s.at("d/f"), b"f");
    write(&s.at("g"), b"g");
    let snap = s.take(83);
    fs::remove_file(s.at("d/f")).unwrap();
    fs::remove_file(s.at("g")).unwrap();
    snap.seal().unwrap();
    fs::remove_dir(s.at("d")).unwrap();
    write(&s.at("d"), b"someone's file");
    let done = snap.restore(&s.quarantine, NOW).unwrap();
    assert_eq!(done.conflict_examples, vec![s.at("d/f")]);
    assert_eq!(fs::read(s.at("d")).unwrap(), b"someone's file");
    assert_eq!(fs::read(s.at("g")).unwrap(), b"g");
}

#[test]
fn sockets_are_skipped_and_left_alone() {
    let s = Scratch::new("socket");
    write(&s.at("a"), b"a");
    let _old = std::os::unix::net::UnixListener::bind(s.at("old.sock")).unwrap();
    let snap = s.take(90);
    assert!(
        snap.entries
            .iter()
            .any(|e| e.kind == Kind::Skipped(Why::Socket))
    );
    let _new = std::os::unix::net::UnixListener::bind(s.at("new.sock")).unwrap();
    assert!(snap.seal().unwrap().is_empty());
    let done = snap.restore(&s.quarantine, NOW).unwrap();
    assert_eq!((done.restored, done.quarantined, done.conflicts), (0, 0, 0));
    assert!(s.at("old.sock").exists() && s.at("new.sock").exists());
}

#[test]
fn non_utf8_names_round_trip() {
    let s = Scratch::new("non-utf8");
    let name = s.root.join(std::ffi::OsStr::from_bytes(b"caf\xe9"));
    write(&name, b"latin-1 name");
    let snap = s.take(91);
    fs::remove_file(&name).unwrap();
    snap.seal().unwrap();
    let back = load(&s.store, &id(91)).unwrap();
    back.restore(&s.quarantine, NOW).unwrap();
    assert_eq!(fs::read(&name).unwrap(), b"latin-1 name");
}

#[test]
fn a_store_inside_a_root_is_not_snapshotted_or_quarantined() {
    let s = Scratch::new("nested-store");
    write(&s.at("a"), b"a");
    let store = s.at("store");
    let quarantine = s.at("quarantine");
    let snap = take(
        &store,
        &id(92),
        "c",
        std::slice::from_ref(&s.root),
        std::slice::from_ref(&quarantine),
        NOW,
        ROOMY,
    )
    .unwrap();
    assert!(snap.entries.iter().all(|e| !e.path.starts_with(&store)));
    write(&s.at("b"), b"b");
    assert_eq!(snap.seal().unwrap().added, 1);
    let done = snap.restore(&quarantine, NOW).unwrap();
    assert_eq!(done.quarantined, 1);
    assert!(store.join(id(92)).join(MANIFEST).exists());
    assert!(store.join(id(92)).join(UNDONE).exists());
}

#[test]
fn corrupt_blobs_are_refused() {
    let s = Scratch::new("corrupt");
    write(&s.at("a"), b"original");
    let snap = s.take(93);
    fs::write(snap.blob_path(0), b"tampered").unwrap();
    fs::remove_file(s.at("a")).unwrap();
    snap.seal().unwrap();
    let err = snap.restore(&s.quarantine, NOW).unwrap_err();
    assert!(
        matches!(&err, SnapshotError::Partial { done: 0, why } if why.contains("checksum")),
        "{err}"
    );
    assert!(!s.at("a").exists());
    assert_eq!(fs::read_dir(&s.root).unwrap().count(), 0, "no temp left");
}

#[test]
fn moving_across_filesystems_copies_then_removes() {
    let s = Scratch::new("cross");
    write(&s.at("t/f"), b"data");
    fs::set_permissions(s.at("t/f"), Permissions::from_mode(0o604)).unwrap();
    set_mtime(&s.at("t/f"), 1_234_567_890, 5);
    symlink("f", s.at("t/l")).unwrap();
    set_mtime(&s.at("t"), 1_111_111_111, 0);
    let dest = s.base.join("moved");
    let moved = move_by_copy(
        &open_dir(&s.root),
        OsStr::new("t"),
        &open_dir(&s.base),
        OsStr::new("moved"),
    )
    .unwrap();
    assert_eq!(moved.ids.len(), 3, "t, t/f and t/l: {moved:?}");
    assert!(moved.kept.is_empty());
    assert!(!s.at("t").exists());
    assert_eq!(fs::read(dest.join("f")).unwrap(), b"data");
    assert_eq!(mode(&dest.join("f")), 0o604);
    assert_eq!(mtime(&dest.join("f")), (1_234_567_890, 5));
    assert_eq!(fs::read_link(dest.join("l")).unwrap(), Path::new("f"));
    assert_eq!(mtime(&dest).0, 1_111_111_111);
}

#[test]
fn discard_deletes_the_snapshot() {
    let s = Scratch::new("discard");
    write(&s.at("a"), b"a");
    let snap = s.take(94);
    let dir = snap.dir.clone();
    assert!(snap.seal().unwrap().is_empty());
    snap.discard().unwrap();
    assert!(!dir.exists());
}

#[test]
fn a_parent_swapped_for_a_symlink_does_not_redirect_undo() {
    let s = Scratch::new("swap-parent");
    write(&s.at("d/f"), b"the snapshot's f");
    write(&s.at("d/g"), b"the snapshot's g");
    let outside = s.base.join("outside");
    write(&outside.join("g"), b"outside's g");
    write(&outside.join("new"), b"outside's new");
    let snap = s.take(100);
    // The run removes d/f, rewrites d/g and adds d/new.
    fs::remove_file(s.at("d/f")).unwrap();
    write(&s.at("d/g"), b"the run's g");
    write(&s.at("d/new"), b"the run's new");
    snap.seal().unwrap();

    // Then a user who can write the root swaps d for a symlink to a
    // directory outside the roots.
    fs::rename(s.at("d"), s.at("d.old")).unwrap();
    symlink(&outside, s.at("d")).unwrap();
    let done = snap.restore(&s.quarantine, NOW).unwrap();
    assert_eq!(done.conflicts, 3, "{done:?}");
    assert_eq!(
        done.conflict_examples,
        vec![s.at("d/f"), s.at("d/g"), s.at("d/new")]
    );
    assert_eq!((done.restored, done.quarantined), (0, 0));
    assert!(!outside.join("f").exists(), "nothing written outside");
    assert_eq!(fs::read(outside.join("g")).unwrap(), b"outside's g");
    assert_eq!(fs::read(outside.join("new")).unwrap(), b"outside's new");
    assert_eq!(fs::read_dir(&outside).unwrap().count(), 2);
    assert_eq!(fs::read_link(s.at("d")).unwrap(), outside);
    assert!(s.quarantine_files(100).is_empty());

    // Nor does another directory moved into its place.
    let s = Scratch::new("swap-parent-dir");
    write(&s.at("d/f"), b"f");
    let outside = s.base.join("outside");
    write(&outside.join("new"), b"outside's new");
    let snap = s.take(101);
    fs::remove_file(s.at("d/f")).unwrap();
    write(&s.at("d/new"), b"the run's new");
    snap.seal().unwrap();
    fs::rename(s.at("d"), s.at("d.old")).unwrap();
    fs::rename(&outside, s.at("d")).unwrap();
    let done = snap.restore(&s.quarantine, NOW).unwrap();
    assert_eq!(done.conflicts, 2, "{done:?}");
    assert!(!s.at("d/f").exists());
    assert_eq!(fs::read(s.at("d/new")).unwrap(), b"outside's new");
    assert_eq!(fs::read(s.at("d.old/new")).unwrap(), b"the run's new");
}

#[test]
fn a_directory_held_open_is_not_redirected_by_a_swap() {
    let s = Scratch::new("held");
    fs::create_dir(s.at("d")).unwrap();
    write(&s.at("d/old"), b"old");
    let outside = s.base.join("outside");
    fs::create_dir(&outside).unwrap();
    let d = open_dir(&s.at("d"));
    // Swapped between the check (the open) and the acts.
    fs::rename(s.at("d"), s.at("d.moved")).unwrap();
    symlink(&outside, s.at("d")).unwrap();
    d.mkdir(OsStr::new("made"), 0o700).unwrap();
    d.symlink(Path::new("/etc/shadow"), OsStr::new("l"))
        .unwrap();
    d.lchown(OsStr::new("l"), 0, 0).unwrap();
    d.create_file(OsStr::new("f"), 0o600).unwrap();
    d.link(OsStr::new("f"), &d, OsStr::new("f2")).unwrap();
    d.rename_to(OsStr::new("old"), &d, OsStr::new("renamed"))
        .unwrap();
    d.unlink(OsStr::new("f2")).unwrap();
    assert_eq!(fs::read_dir(&outside).unwrap().count(), 0, "all went to d");
    let mut names: Vec<_> = fs::read_dir(s.at("d.moved"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    assert_eq!(names, ["f", "l", "made", "renamed"]);
    assert_eq!(
        fs::read_link(s.at("d.moved/l")).unwrap(),
        Path::new("/etc/shadow")
    );
    // Names are one component: no `..`, no `/`.
    for bad in ["..", "a/b", ".", ""] {
        assert!(d.mkdir(OsStr::new(bad), 0o700).is_err(), "{bad:?}");
    }
}

#[test]
fn hard_linked_files_are_not_false_conflicts() {
    let s = Scratch::new("hard-links");
    write(&s.at("p"), b"pp");
    fs::hard_link(s.at("p"), s.at("q")).unwrap();
    let snap = s.take(102);
    // The run rewrites the shared inode in place, and makes two links of
    // a new one.
    fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(s.at("p"))
        .unwrap()
        .write_all(b"the run's")
        .unwrap();
    write(&s.at("x"), b"new");
    fs::hard_link(s.at("x"), s.at("y")).unwrap();
    snap.seal().unwrap();
    // Moving one link of an inode moves the ctime of all: a tick later, so
    // that it shows.
    tick();
    let done = snap.restore(&s.quarantine, NOW).unwrap();
    assert_eq!(done.conflicts, 0, "{done:?}");
    assert_eq!(fs::read(s.at("p")).unwrap(), b"pp");
    assert_eq!(fs::read(s.at("q")).unwrap(), b"pp");
    assert!(!s.at("x").exists() && !s.at("y").exists());
    assert_eq!((done.quarantined_added, done.quarantined_replaced), (2, 2));
    assert_eq!(done.restored, 2);
}

#[test]
fn a_quarantine_behind_a_symlink_is_refused() {
    let s = Scratch::new("bad-quarantine");
    write(&s.at("a"), b"a");
    let snap = s.take(103);
    fs::remove_file(s.at("a")).unwrap();
    snap.seal().unwrap();
    let real = s.base.join("real-q");
    fs::create_dir(&real).unwrap();
    fs::set_permissions(&real, Permissions::from_mode(0o700)).unwrap();
    let link = s.base.join("q-link");
    symlink(&real, &link).unwrap();
    let linked_parent = s.base.join("parent-link");
    symlink(&s.base, &linked_parent).unwrap();
    let open = s.base.join("open-q");
    fs::create_dir(&open).unwrap();
    fs::set_permissions(&open, Permissions::from_mode(0o777)).unwrap();
    let theirs = s.base.join("their-q");
    fs::create_dir(&theirs).unwrap();
    fs::set_permissions(&theirs, Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::chown(&theirs, Some(65_534), Some(65_534)).unwrap();
    let cases = [
        (link, "is a symlink"),
        (
            linked_parent.join("real-q"),
            "component of its path is a symlink",
        ),
        (open, "group or others can write"),
        (theirs, "not owned"),
    ];
    for (q, why) in cases {
        let err = snap.restore(&q, NOW).unwrap_err();
        assert!(
            matches!(err, SnapshotError::BadQuarantine { .. }),
            "{}: {err}",
            q.display()
        );
        assert!(err.to_string().contains(why), "{err}");
        assert!(!s.at("a").exists(), "nothing was done");
        assert!(!snap.dir.join(UNDOING).exists());
    }
    assert_eq!(fs::read_dir(&real).unwrap().count(), 0);
    snap.restore(&real, NOW).unwrap();
    assert_eq!(fs::read(s.at("a")).unwrap(), b"a");
}

#[test]
fn purge_skips_an_undo_under_way() {
    let s = Scratch::new("purge-undoing");
    write(&s.at("a"), b"a");
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let roots = [s.root.clone()];
    let old = take(
        &s.store,
        &id(104),
        "c",
        &roots,
        &[],
        now - KEEP_S - 1,
        ROOMY,
    )
    .unwrap();
    // An undo claimed it a moment ago (and may be reading its blobs).
    fs::write(old.dir.join(UNDOING), b"").unwrap();
    assert!(purge(&s.store, now).unwrap().is_empty());
    assert!(old.dir.exists());
    // A claim a day old is an undo that stopped: the snapshot goes.
    set_mtime(&old.dir.join(UNDOING), now - 2 * 86_400, 0);
    assert_eq!(purge(&s.store, now).unwrap(), vec![id(104)]);
    assert!(!old.dir.exists());
}

#[test]
fn a_cross_filesystem_move_loses_nothing_added_late() {
    let s = Scratch::new("late");
    write(&s.at("t/f"), b"first");
    write(&s.at("t/sub/g"), b"g");
    let dest_path = s.base.join("dest");
    fs::create_dir(&dest_path).unwrap();
    let (src, dest) = (open_dir(&s.root), open_dir(&dest_path));
    let t = OsStr::new("t");
    let meta = src.lstat(t).unwrap().unwrap();
    let copied = copy_tree(&src, t, &meta, &dest, t, meta.dev()).unwrap();
    // Between the copy and the removal, something appears and something
    // changes (through a descriptor or a working directory held inside).
    tick();
    write(&s.at("t/late"), b"late");
    fs::write(s.at("t/f"), b"second").unwrap();
    let mut removed = Vec::new();
    let left = remove_copied(&src, t, &copied, &mut removed, &mut Vec::new()).unwrap();
    assert_eq!(left, Left::Changed);
    assert_eq!(fs::read(s.at("t/late")).unwrap(), b"late", "not removed");
    assert_eq!(fs::read(s.at("t/f")).unwrap(), b"second", "not removed");
    assert!(!s.at("t/sub").exists(), "unchanged since the copy: removed");
    assert_eq!(removed.len(), 2, "t/sub and t/sub/g");
    assert_eq!(fs::read(dest_path.join("t/f")).unwrap(), b"first");
    assert_eq!(fs::read(dest_path.join("t/sub/g")).unwrap(), b"g");
    // The move copies what is left beside the first copy, then removes it.
    move_by_copy(&src, t, &dest, t).unwrap();
    assert!(!s.at("t").exists());
    assert_eq!(fs::read(dest_path.join("t.1/late")).unwrap(), b"late");
    assert_eq!(fs::read(dest_path.join("t.1/f")).unwrap(), b"second");

    // The staging step: the thing is renamed into a private directory
    // beside it first, copied from there, and the directory removed.
    write(&s.at("u/h"), b"h");
    let u = OsStr::new("u");
    let expect = src.lstat(u).unwrap().map(|m| (m.dev(), m.ino()));
    let moved = move_across_within(&src, u, expect, &dest, u, ROOMY).unwrap();
    assert_eq!(moved.ids.len(), 2, "u and u/h: {moved:?}");
    assert!(!s.at("u").exists());
    assert_eq!(fs::read(dest_path.join("u/h")).unwrap(), b"h");
    let left: Vec<_> = fs::read_dir(&s.root).unwrap().collect();
    assert!(left.is_empty(), "no staging left: {left:?}");
    // A staging directory is ours alone, on its parent's filesystem.
    let stage = Staging::create(&src).unwrap();
    let m = stage.dir.meta().unwrap();
    assert_eq!((m.mode() & 0o7777, m.dev()), (0o700, meta.dev()));
    let shown = stage.shown();
    assert!(shown.starts_with(&s.root), "{}", shown.display());
    stage.remove().unwrap();
    assert!(!shown.exists());
}

/// A filesystem of the test's own for the quarantine: a tmpfs (8 GiB of
/// address space, nothing allocated) mounted for the test and unmounted
/// after, so a move into it cannot be a rename and its room is known.
struct OtherFs {
    dir: PathBuf,
}

impl OtherFs {
    fn mount(name: &str) -> OtherFs {
        let dir = PathBuf::from(format!(
            "/var/tmp/aromba-otherfs-{name}-{}",
            std::process::id()
        ));
        let _ = assert_cmd::Command::new("umount").arg(&dir).output();
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let out = assert_cmd::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=8g,mode=0700", "tmpfs"])
            .arg(&dir)
            .output()
            .expect("mount runs");
        assert!(
            out.status.success(),
            "this test mounts a tmpfs (as root): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        OtherFs { dir }
    }
}

impl Drop for OtherFs {
    fn drop(&mut self) {
        let _ = assert_cmd::Command::new("umount").arg(&self.dir).output();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn undo_into_a_quarantine_on_another_filesystem() {
    let s = Scratch::new("other-fs");
    let other = OtherFs::mount("q");
    assert_ne!(
        fs::metadata(&other.dir).unwrap().dev(),
        fs::metadata(&s.root).unwrap().dev()
    );
    let q = other.dir.join("quarantine");
    let _ = fs::remove_dir_all(&q);
    write(&s.at("a"), b"a");
    write(&s.at("d/b"), b"b");
    let snap = s.take(105);
    write(&s.at("a"), b"the run's a");
    write(&s.at("new/x"), b"x");
    fs::remove_dir_all(s.at("d")).unwrap();
    snap.seal().unwrap();
    let done = snap.restore(&q, NOW);
    let moved = undo_dirs(&q, &id(105));
    let read = |rel: &str| fs::read(moved[0].join(s.root.strip_prefix("/").unwrap().join(rel)));
    let (a, x) = (read("a"), read("new/x"));
    let _ = fs::remove_dir_all(&q);
    let done = done.unwrap();
    assert_eq!((done.quarantined_added, done.quarantined_replaced), (1, 1));
    assert_eq!(a.unwrap(), b"the run's a");
    assert_eq!(x.unwrap(), b"x");
    assert_eq!(fs::read(s.at("a")).unwrap(), b"a");
    assert_eq!(fs::read(s.at("d/b")).unwrap(), b"b");
    let names: Vec<_> = fs::read_dir(&s.root)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 2, "no staging left: {names:?}");
}

#[test]
fn a_file_changing_while_copied_is_copied_again_or_refused() {
    let s = Scratch::new("torn");
    write(&s.at("a"), b"aaaa");
    let root = open_dir(&s.root);
    let m = fs::symlink_metadata(s.at("a")).unwrap();
    let want = (m.dev(), m.ino());
    let append = |bytes: &[u8]| {
        tick();
        fs::OpenOptions::new()
            .append(true)
            .open(s.at("a"))
            .unwrap()
            .write_all(bytes)
            .unwrap();
    };
    // Changed during the first copy: copied again, whole.
    let (mut f, meta) = root.open_listed(OsStr::new("a"), want).unwrap();
    let blob = s.base.join("blob");
    let mut dst = File::create(&blob).unwrap();
    let (n, _, after) = copy_stable(&mut f, meta, &s.at("a"), &mut dst, &blob, u64::MAX, |i| {
        if i == 0 {
            append(b"bb");
        }
    })
    .unwrap();
    assert_eq!((n, after.size()), (6, 6));
    assert_eq!(fs::read(&blob).unwrap(), b"aaaabb");
    // Changing all the time: refused.
    let (mut f, meta) = root.open_listed(OsStr::new("a"), want).unwrap();
    let mut dst = File::create(&blob).unwrap();
    let err = copy_stable(&mut f, meta, &s.at("a"), &mut dst, &blob, u64::MAX, |_| {
        append(b"c")
    })
    .unwrap_err();
    assert!(matches!(err, SnapshotError::Changed(_)), "{err}");
}

#[test]
fn a_directory_churned_during_seal_is_an_unknown_conflict_not_a_lost_undo() {
    let s = Scratch::new("churn");
    write(&s.at("a.txt"), b"alpha");
    write(&s.at("d/f"), b"f");
    let snap = s.take(110);
    // The run.
    write(&s.at("a.txt"), b"the run's");
    write(&s.at("d/g"), b"the run's g");
    // A user swaps d for a fresh directory each time a walk has listed it
    // and is about to open it: both seal walks see it churned.
    let (d, root) = (s.at("d"), s.root.clone());
    let mut n = 0;
    super::walk::churn::set(Some(Box::new(move |p: &Path| {
        if p == d {
            n += 1;
            fs::rename(&d, root.join(format!("d.{n}"))).unwrap();
            fs::create_dir(&d).unwrap();
        }
    })));
    let sealed = snap.seal();
    super::walk::churn::set(None);
    let diff = sealed.expect("a churned directory does not cost the run its undo");
    assert_eq!(diff.unknown, 1, "{diff:?}");
    assert_eq!(diff.modified, 1, "a.txt: {diff:?}");
    assert!(
        diff.summary().contains("1 could not be read"),
        "{}",
        diff.summary()
    );
    let after: Value = serde_json::from_slice(&fs::read(snap.dir.join(AFTER)).unwrap()).unwrap();
    let unknown: Vec<&Value> = after["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["after"] == "unknown")
        .collect();
    assert_eq!(unknown.len(), 1, "{after}");
    assert_eq!(unknown[0]["path"], s.at("d").to_str().unwrap());
    assert!(
        peek(&s.store, &id(110), NOW).is_ok(),
        "sealed, so it can be undone"
    );

    // The undo puts back what it knows and leaves the unknown alone.
    let done = snap.restore(&s.quarantine, NOW).unwrap();
    assert_eq!(fs::read(s.at("a.txt")).unwrap(), b"alpha");
    assert_eq!(done.conflicts, 1, "{done:?}");
    assert_eq!(done.conflict_examples, vec![s.at("d")]);
    assert!(s.at("d").is_dir());
    assert_eq!(fs::read_dir(s.at("d")).unwrap().count(), 0, "untouched");
    // The first swap's d.1, there at the second walk, was taken for the
    // run's and moved aside, never lost; d.2 came after that walk's listing.
    assert_eq!(
        fs::read(s.quarantined(110, &s.at("d.1/g"))).unwrap(),
        b"the run's g"
    );
    assert!(s.at("d.2").is_dir());

    // A swap seen only once gets a clean second walk: no unknown.
    let s = Scratch::new("churn-once");
    write(&s.at("d/f"), b"f");
    let snap = s.take(111);
    write(&s.at("d/g"), b"the run's g");
    let (d, root) = (s.at("d"), s.root.clone());
    let mut once = true;
    super::walk::churn::set(Some(Box::new(move |p: &Path| {
        if p == d && once {
            once = false;
            fs::rename(&d, root.join("d.tmp")).unwrap();
            fs::create_dir(root.join("d.swap")).unwrap();
            fs::rename(root.join("d.swap"), &d).unwrap();
            fs::remove_dir(&d).unwrap();
            fs::rename(root.join("d.tmp"), &d).unwrap();
        }
    })));
    let sealed = snap.seal();
    super::walk::churn::set(None);
    let diff = sealed.unwrap();
    assert_eq!((diff.unknown, diff.added), (0, 1), "{diff:?}");
}

#[test]
fn an_unknown_state_in_after_json_is_only_the_string() {
    let s = Scratch::new("unknown-json");
    write(&s.at("a"), b"a");
    let snap = s.take(112);
    write(&s.at("a"), b"the run's");
    snap.seal().unwrap();
    edit_after(&s, 112, |v| {
        v["changes"][0]["after"] = serde_json::json!({"kind": "unknown"});
    });
    let err = snap.restore(&s.quarantine, NOW).unwrap_err();
    assert!(matches!(err, SnapshotError::BadManifest { .. }), "{err}");
    edit_after(&s, 112, |v| v["changes"][0]["after"] = "unknown".into());
    let done = snap.restore(&s.quarantine, NOW).unwrap();
    assert_eq!(done.conflict_examples, vec![s.at("a")]);
    assert_eq!(fs::read(s.at("a")).unwrap(), b"the run's");
}

#[test]
fn a_first_pass_failure_releases_the_undo_claim() {
    let s = Scratch::new("first-pass");
    write(&s.at("a"), b"a");
    let snap = s.take(113);
    write(&s.at("a"), b"the run's");
    write(&s.at("new"), b"new");
    snap.seal().unwrap();
    // A name too long to look up makes the first (read-only) pass fail.
    let long = s.root.join("x".repeat(300));
    let saved = fs::read(snap.dir.join(AFTER)).unwrap();
    edit_after(&s, 113, |v| {
        let mut c = v["changes"][1].clone();
        c["path"] = long.to_str().unwrap().into();
        v["changes"].as_array_mut().unwrap().push(c);
    });
    let err = snap.restore(&s.quarantine, NOW).unwrap_err();
    assert!(
        !matches!(err, SnapshotError::Partial { .. }),
        "nothing was changed: {err}"
    );
    assert!(matches!(err, SnapshotError::Io { .. }), "{err}");
    assert!(!snap.dir.join(UNDOING).exists(), "the claim went");
    assert!(!snap.dir.join(UNDONE).exists());
    assert_eq!(fs::read(s.at("a")).unwrap(), b"the run's");
    assert!(s.at("new").exists());
    assert!(peek(&s.store, &id(113), NOW).is_ok(), "still undoable");
    fs::write(snap.dir.join(AFTER), saved).unwrap();
    snap.restore(&s.quarantine, NOW).unwrap();
    assert_eq!(fs::read(s.at("a")).unwrap(), b"a");
    assert!(!s.at("new").exists());
}

#[test]
fn a_quarantine_without_room_leaves_the_move_in_staging() {
    let s = Scratch::new("no-room");
    write(&s.at("t/f"), &[7u8; 10_000]);
    let dest_path = s.base.join("dest");
    fs::create_dir(&dest_path).unwrap();
    let (src, dest) = (open_dir(&s.root), open_dir(&dest_path));
    let t = OsStr::new("t");
    let expect = src.lstat(t).unwrap().map(|m| (m.dev(), m.ino()));
    let err = move_across_within(&src, t, expect, &dest, t, 8_192).unwrap_err();
    let SnapshotError::Stranded { path, why } = &err else {
        panic!("{err}");
    };
    assert!(why.contains("has room for"), "{err}");
    assert!(path.starts_with(&s.root), "beside where it was: {err}");
    assert_eq!(fs::read(path.join("f")).unwrap(), [7u8; 10_000], "whole");
    assert!(!s.at("t").exists());
    assert_eq!(
        fs::read_dir(&dest_path).unwrap().count(),
        0,
        "nothing copied"
    );

    // With room, it moves.
    write(&s.at("u/f"), &[7u8; 10_000]);
    let u = OsStr::new("u");
    let expect = src.lstat(u).unwrap().map(|m| (m.dev(), m.ino()));
    let moved = move_across_within(&src, u, expect, &dest, u, 1 << 20).unwrap();
    assert_eq!(moved.ids.len(), 2);
    assert_eq!(fs::read(dest_path.join("u/f")).unwrap(), [7u8; 10_000]);
    // The real measure keeps the larger of 1 GiB and a tenth free.
    assert_eq!(super::quarantine::reserve(1 << 40), (1 << 40) / 10);
    assert_eq!(super::quarantine::reserve(1 << 30), 1 << 30);
}

#[test]
fn fifos_in_a_cross_filesystem_move_stay_in_staging_and_are_reported() {
    let s = Scratch::new("fifo-across");
    write(&s.at("t/f"), b"f");
    fs::create_dir(s.at("t/sub")).unwrap();
    mkfifo(&s.at("t/sub/pipe"));
    let dest_path = s.base.join("dest");
    fs::create_dir(&dest_path).unwrap();
    let (src, dest) = (open_dir(&s.root), open_dir(&dest_path));
    let t = OsStr::new("t");
    let expect = src.lstat(t).unwrap().map(|m| (m.dev(), m.ino()));
    let moved = move_across_within(&src, t, expect, &dest, t, ROOMY).unwrap();
    assert_eq!(moved.kept.len(), 1, "{moved:?}");
    let kept = &moved.kept[0];
    assert!(kept.starts_with(&s.root) && kept.ends_with("staged/sub/pipe"));
    assert!(fs::symlink_metadata(kept).unwrap().file_type().is_fifo());
    assert_eq!(fs::read(dest_path.join("t/f")).unwrap(), b"f");
    assert!(!s.at("t").exists());
    assert!(!dest_path.join("t/sub/pipe").exists(), "no data to copy");
    // Only the inode looked at is recorded as moved.
    write(&s.at("v/f"), b"f");
    let v = OsStr::new("v");
    let moved = move_across_within(&src, v, Some((0, 0)), &dest, v, ROOMY).unwrap();
    assert!(moved.ids.is_empty(), "{moved:?}");
    assert_eq!(fs::read(dest_path.join("v/f")).unwrap(), b"f");
}

#[test]
fn undo_into_another_filesystem_reports_fifos_left_in_staging() {
    let s = Scratch::new("fifo-other-fs");
    let other = OtherFs::mount("qf");
    let q = other.dir.join("quarantine");
    let _ = fs::remove_dir_all(&q);
    write(&s.at("a"), b"a");
    let snap = s.take(114);
    write(&s.at("newdir/f"), b"f");
    mkfifo(&s.at("newdir/pipe"));
    snap.seal().unwrap();
    let done = snap.restore(&q, NOW);
    let _ = fs::remove_dir_all(&q);
    let done = done.unwrap();
    assert_eq!(done.quarantined_added, 1, "{done:?}");
    assert_eq!(done.left_in_staging.len(), 1, "{done:?}");
    assert!(
        fs::symlink_metadata(&done.left_in_staging[0])
            .unwrap()
            .file_type()
            .is_fifo()
    );
    assert!(!s.at("newdir").exists());
}

#[test]
fn undo_survives_changed_device_numbers() {
    let s = Scratch::new("dev-numbers");
    write(&s.at("a"), b"a");
    write(&s.at("d/b"), b"b");
    write(&s.at("d/e/c"), b"c");
    let snap = s.take(115);
    write(&s.at("a"), b"the run's a");
    fs::remove_file(s.at("d/e/c")).unwrap();
    write(&s.at("d/new"), b"new");
    snap.seal().unwrap();
    let dev = fs::symlink_metadata(&s.root).unwrap().dev();
    let other = dev + 1000;
    // As after a reboot that numbered the filesystem anew.
    edit_manifest(&s, 115, |v| {
        for e in v["entries"].as_array_mut().unwrap() {
            if e["dev"] == dev {
                e["dev"] = other.into();
            }
        }
    });
    edit_after(&s, 115, |v| {
        for c in v["changes"].as_array_mut().unwrap() {
            if c["after"]["dev"] == dev {
                c["after"]["dev"] = other.into();
            }
        }
    });
    let back = load(&s.store, &id(115)).unwrap();
    assert!(back.entries.iter().all(|e| e.dev != dev));
    let done = back.restore(&s.quarantine, NOW).unwrap();
    assert_eq!(done.conflicts, 0, "{done:?}");
    assert_eq!(fs::read(s.at("a")).unwrap(), b"a");
    assert_eq!(fs::read(s.at("d/e/c")).unwrap(), b"c");
    assert!(!s.at("d/new").exists());

    // The inode still counts: another directory in the root's place is
    // refused, whatever its device number.
    let snap = s.take(116);
    write(&s.at("x"), b"x");
    snap.seal().unwrap();
    edit_manifest(&s, 116, |v| {
        for e in v["entries"].as_array_mut().unwrap() {
            if e["dev"] == dev {
                e["dev"] = other.into();
                e["ino"] = (e["ino"].as_u64().unwrap() + 1_000_000).into();
            }
        }
    });
    let err = load(&s.store, &id(116))
        .unwrap()
        .restore(&s.quarantine, NOW)
        .unwrap_err();
    assert!(matches!(err, SnapshotError::Unsafe { .. }), "{err}");
    assert!(s.at("x").exists());
}

#[test]
fn a_directory_swapped_in_after_mkdir_is_refused() {
    let s = Scratch::new("fresh-dir");
    let root = open_dir(&s.root);
    let private = |p: &Path| fs::set_permissions(p, Permissions::from_mode(0o700)).unwrap();
    // What a mkdir just made: empty, ours, private.
    fs::create_dir(s.at("made")).unwrap();
    private(&s.at("made"));
    assert!(fresh_dir(&root, OsStr::new("made")).unwrap().is_some());
    // A directory of someone's, with something in it, moved into its place.
    write(&s.at("full/x"), b"x");
    private(&s.at("full"));
    assert!(fresh_dir(&root, OsStr::new("full")).unwrap().is_none());
    fs::create_dir_all(s.at("nested/sub")).unwrap();
    private(&s.at("nested"));
    assert!(fresh_dir(&root, OsStr::new("nested")).unwrap().is_none());
    // Not private, or a symlink.
    fs::create_dir(s.at("open")).unwrap();
    fs::set_permissions(s.at("open"), Permissions::from_mode(0o755)).unwrap();
    assert!(fresh_dir(&root, OsStr::new("open")).unwrap().is_none());
    symlink(s.at("made"), s.at("link")).unwrap();
    assert!(fresh_dir(&root, OsStr::new("link")).unwrap().is_none());
}

#[test]
fn snapshots_refuse_to_work_without_proc() {
    check_proc().unwrap();
    let s = Scratch::new("no-proc");
    let fake = s.base.join("fd");
    fs::create_dir(&fake).unwrap();
    let err = check_proc_at(&fake).unwrap_err();
    assert!(
        err.to_string().contains("snapshots need /proc mounted"),
        "{err}"
    );
}

/// Makes `levels` nested directories `n/n/…` under `at`, returning the
/// deepest.
fn nest(at: &Path, levels: usize) -> PathBuf {
    let mut p = at.to_path_buf();
    for _ in 0..levels {
        p.push("n");
    }
    fs::create_dir_all(&p).unwrap();
    p
}

#[test]
fn too_deep_a_tree_is_refused_not_a_crash() {
    let s = Scratch::new("deep");
    write(&s.at("a"), b"a");
    let deepest = nest(&s.root, 300);
    fs::write(deepest.join("f"), b"deep").unwrap();
    let err = take(
        &s.store,
        &id(117),
        "c",
        std::slice::from_ref(&s.root),
        &[],
        NOW,
        ROOMY,
    )
    .unwrap_err();
    assert!(err.to_string().contains("256 directories deep"), "{err}");
    // 256 levels are fine.
    fs::remove_dir_all(s.at("n")).unwrap();
    nest(&s.root, 255);
    let snap = s.take(118);
    fs::remove_dir_all(s.at("n")).unwrap();

    // A run that makes a tree too deep still gets its seal, with the part
    // too deep unknown, and the undo leaves that alone.
    write(&s.at("a"), b"the run's");
    nest(&s.root, 300);
    let d = snap.seal().unwrap();
    assert_eq!(d.unknown, 1, "{d:?}");
    let done = snap.restore(&s.quarantine, NOW).unwrap();
    assert_eq!(fs::read(s.at("a")).unwrap(), b"a");
    assert!(done.conflicts > 0);
    assert!(nest(&s.root, 300).exists(), "left alone");

    // Nor does a cross-filesystem copy go deeper.
    let src = open_dir(&s.root);
    let dest_path = s.base.join("dest");
    fs::create_dir(&dest_path).unwrap();
    let n = OsStr::new("n");
    let meta = src.lstat(n).unwrap().unwrap();
    let err = copy_tree(&src, n, &meta, &open_dir(&dest_path), n, meta.dev()).unwrap_err();
    assert!(err.to_string().contains("256 directories deep"), "{err}");
}

#[test]
fn a_file_growing_while_copied_across_stays_in_staging() {
    let s = Scratch::new("grows");
    write(&s.at("t/f"), b"first");
    write(&s.at("t/g"), b"g");
    let dest_path = s.base.join("dest");
    fs::create_dir(&dest_path).unwrap();
    let (src, dest) = (open_dir(&s.root), open_dir(&dest_path));
    let t = OsStr::new("t");
    let expect = src.lstat(t).unwrap().map(|m| (m.dev(), m.ino()));
    // Someone holding it open appends to f once it is copied.
    let mut once = true;
    super::walk::churn::set(Some(Box::new(move |p: &Path| {
        if once && p.ends_with("staged/f") {
            once = false;
            fs::OpenOptions::new()
                .append(true)
                .open(p)
                .unwrap()
                .write_all(b" and more")
                .unwrap();
        }
    })));
    let moved = move_across_within(&src, t, expect, &dest, t, ROOMY);
    super::walk::churn::set(None);
    let moved = moved.unwrap();
    assert_eq!(moved.kept.len(), 1, "{moved:?}");
    assert!(moved.kept[0].ends_with("staged/f"));
    assert_eq!(fs::read(&moved.kept[0]).unwrap(), b"first and more");
    assert!(!dest_path.join("t/f").exists(), "no partial copy");
    assert_eq!(fs::read(dest_path.join("t/g")).unwrap(), b"g");
    assert!(!s.at("t").exists());
}

/// Makes `path` a sparse file of `len` bytes holding `data` at `at`.
fn sparse(path: &Path, len: u64, at: u64, data: &[u8]) {
    use std::os::unix::fs::FileExt;
    let f = File::create(path).unwrap();
    f.set_len(len).unwrap();
    f.write_all_at(data, at).unwrap();
    f.sync_all().unwrap();
}

fn sha256_of(path: &Path) -> String {
    use sha2::{Digest, Sha256};
    let mut f = File::open(path).unwrap();
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    aromba_warden_proto::encode_hex(&h.finalize())
}

#[test]
fn a_sparse_file_is_copied_with_its_holes_and_put_back_sparse() {
    let s = Scratch::new("sparse");
    let len = 1u64 << 30;
    sparse(&s.at("big"), len, 100 << 20, b"data in the middle");
    let want = sha256_of(&s.at("big"));
    let on_disk = fs::metadata(s.at("big")).unwrap().blocks() * 512;
    assert!(on_disk < 1 << 20, "{on_disk}");
    // Room for what it takes on disk, far less than its length.
    let snap = take(
        &s.store,
        &id(40),
        "c",
        std::slice::from_ref(&s.root),
        &[],
        NOW,
        1 << 20,
    )
    .unwrap();
    let blob = snap.dir.join(BLOBS).join("0");
    let m = fs::metadata(&blob).unwrap();
    assert_eq!(m.len(), len);
    assert!(m.blocks() * 512 < 1 << 20, "{}", m.blocks());
    fs::remove_file(s.at("big")).unwrap();
    snap.seal().unwrap();
    snap.restore(&s.quarantine, NOW).unwrap();
    let m = fs::metadata(s.at("big")).unwrap();
    assert_eq!(m.len(), len);
    assert!(m.blocks() * 512 < 1 << 20, "{}", m.blocks());
    assert_eq!(sha256_of(&s.at("big")), want);
}

#[test]
fn a_file_whose_data_exceeds_the_room_is_refused_however_sparse_it_looked() {
    let s = Scratch::new("sparse-room");
    write(&s.at("full"), &[7u8; 64 * 1024]);
    let err = take(
        &s.store,
        &id(41),
        "c",
        std::slice::from_ref(&s.root),
        &[],
        NOW,
        16 * 1024,
    )
    .unwrap_err();
    assert!(matches!(err, SnapshotError::TooBig { .. }), "{err}");
    assert!(!s.store.join(id(41)).exists());
}

#[test]
fn new_entries_past_the_seal_limit_are_named_and_the_removed_files_still_come_back() {
    let s = Scratch::new("seal-limit");
    for i in 0..5 {
        write(&s.at(&format!("f{i}")), format!("file {i}").as_bytes());
    }
    let snap = s.take(42);
    for i in 0..5 {
        fs::remove_file(s.at(&format!("f{i}"))).unwrap();
    }
    for i in 0..50 {
        fs::create_dir(s.at(&format!("new{i:02}"))).unwrap();
    }
    let limits = SealLimits {
        max_listed: 10,
        ..SealLimits::default()
    };
    let d = snap.seal_within(&limits).unwrap();
    assert_eq!(d.removed, 5);
    assert_eq!(d.dirs_added, 50);
    assert_eq!(
        d.unlisted,
        vec![Unlisted {
            path: s.root.clone(),
            count: Some(40)
        }]
    );
    assert!(
        d.summary().contains("40 new entries under"),
        "{}",
        d.summary()
    );
    let r = snap.restore(&s.quarantine, NOW).unwrap();
    for i in 0..5 {
        assert_eq!(
            fs::read(s.at(&format!("f{i}"))).unwrap(),
            format!("file {i}").as_bytes()
        );
    }
    assert_eq!(r.quarantined_added, 10);
    assert_eq!(r.unlisted, d.unlisted);
    let left = fs::read_dir(&s.root)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("new")
        })
        .count();
    assert_eq!(left, 40);
}

#[test]
fn a_seal_walk_cut_short_looks_up_every_entry_it_did_not_reach() {
    let s = Scratch::new("seal-cut");
    fs::create_dir(s.at("d")).unwrap();
    for i in 0..5 {
        write(&s.at(&format!("d/f{i}")), format!("file {i}").as_bytes());
    }
    write(&s.at("kept"), b"kept");
    write(&s.at("changed"), b"before");
    fs::create_dir(s.at("gone")).unwrap();
    write(&s.at("gone/x"), b"x");
    let snap = s.take(43);
    for i in 0..5 {
        fs::remove_file(s.at(&format!("d/f{i}"))).unwrap();
    }
    fs::remove_dir_all(s.at("gone")).unwrap();
    tick();
    write(&s.at("changed"), b"after!");
    // The walk stops at the root's first entry: nothing below is reached.
    let limits = SealLimits {
        max_visits: 1,
        ..SealLimits::default()
    };
    let d = snap.seal_within(&limits).unwrap();
    assert_eq!((d.removed, d.modified, d.dirs_removed), (6, 1, 1));
    assert_eq!(d.unknown, 0);
    assert_eq!(
        d.unlisted,
        vec![Unlisted {
            path: s.root.clone(),
            count: None
        }]
    );
    let r = snap.restore(&s.quarantine, NOW).unwrap();
    assert_eq!(r.conflicts, 0, "{:?}", r.conflict_examples);
    for i in 0..5 {
        assert!(s.at(&format!("d/f{i}")).exists());
    }
    assert_eq!(fs::read(s.at("gone/x")).unwrap(), b"x");
    assert_eq!(fs::read(s.at("changed")).unwrap(), b"before");
    assert_eq!(fs::read(s.at("kept")).unwrap(), b"kept");
}

#[test]
fn a_seal_that_cannot_write_its_record_leaves_the_snapshot_whole() {
    let s = Scratch::new("seal-fails");
    write(&s.at("a"), b"only copy");
    let snap = s.take(44);
    fs::remove_file(s.at("a")).unwrap();
    // A directory where the seal writes its record: the write fails.
    fs::create_dir(snap.dir.join(AFTER_TMP)).unwrap();
    fs::create_dir(snap.dir.join(format!("{AFTER_TMP}/x"))).unwrap();
    assert!(snap.seal().is_err());
    assert!(snap.dir.join(MANIFEST).exists());
    fs::remove_dir_all(snap.dir.join(AFTER_TMP)).unwrap();
    peek(&s.store, &id(44), NOW).unwrap();
    let r = snap.restore(&s.quarantine, NOW).unwrap();
    assert!(r.unsealed);
    assert_eq!(fs::read(s.at("a")).unwrap(), b"only copy");
}

#[test]
fn a_cut_walk_looks_up_entries_through_a_directory_the_run_replaced() {
    let s = Scratch::new("seal-cut-replaced");
    fs::create_dir(s.at("d")).unwrap();
    write(&s.at("d/f0"), b"zero");
    write(&s.at("d/f1"), b"one");
    let snap = s.take(45);
    fs::rename(s.at("d"), s.base.join("old-d")).unwrap();
    fs::create_dir(s.at("d")).unwrap();
    write(&s.at("d/f1"), b"ONE");
    let limits = SealLimits {
        max_visits: 1,
        ..SealLimits::default()
    };
    let d = snap.seal_within(&limits).unwrap();
    assert_eq!(d.unknown, 0, "{:?}", d.examples);
    assert_eq!((d.removed, d.modified, d.dirs_modified), (1, 1, 1));
    let r = snap.restore(&s.quarantine, NOW).unwrap();
    assert_eq!(r.conflicts, 0, "{:?}", r.conflict_examples);
    assert_eq!(fs::read(s.at("d/f0")).unwrap(), b"zero");
    assert_eq!(fs::read(s.at("d/f1")).unwrap(), b"one");
}
