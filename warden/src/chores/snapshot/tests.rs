//! The snapshot store's tests: what undo puts back, what it moves to
//! quarantine, and the hostile manifests `load` refuses.

#![forbid(unsafe_code)]

use super::*;

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
        take(
            &self.store,
            &id(n),
            "test-chore",
            std::slice::from_ref(&self.root),
            NOW,
            ROOMY,
        )
        .unwrap()
    }

    fn quarantined(&self, n: u8, path: &Path) -> PathBuf {
        self.quarantine
            .join(format!("{}-undo", id(n)))
            .join(path.strip_prefix("/").unwrap())
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
    assert!(!snap.diff().unwrap().is_empty());

    let done = snap.restore(&s.quarantine, NOW + 60).unwrap();
    assert_eq!(fs::read(s.at("a.txt")).unwrap(), b"alpha");
    assert_eq!(fs::read(s.at("sub/b.bin")).unwrap(), [0u8, 1, 2, 255]);
    assert_eq!(fs::read(s.at("c.log")).unwrap(), b"charlie");
    assert!(!s.at("d.log").exists());
    assert_eq!(
        fs::read(s.quarantined(1, &s.at("d.log"))).unwrap(),
        b"charlie"
    );
    assert_eq!(done.quarantined, 1);
    assert_eq!(done.restored, 4, "a.txt, sub, sub/b.bin, c.log");
    let bytes = 5 + 4 + 7;
    let unchanged = Diff {
        bytes_before: bytes,
        bytes_after: bytes,
        ..Diff::default()
    };
    assert_eq!(snap.diff().unwrap(), unchanged);
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
        NOW,
        ROOMY,
    )
    .unwrap();

    write(&s.at("new.txt"), b"new");
    write(&s.at("newdir/inner/deep.txt"), b"deep");
    write(&absent.join("made.txt"), b"made");

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

    let done = snap.restore(&s.quarantine, NOW).unwrap();
    assert_eq!(done.quarantined, 2);
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
    assert_eq!((d.added, d.removed, d.modified), (3, 1, 1), "{d:?}");
    assert_eq!(d.files(), 5);
    assert_eq!((d.bytes_before, d.bytes_after), (60, 145));
    assert_eq!(d.summary(), "3 added, 1 removed, 1 changed; 85 B added");
    assert_eq!(
        d.examples,
        vec![s.at("a"), s.at("d"), s.at("e"), s.at("e/f"), s.at("b")]
    );

    fs::remove_file(s.at("d")).unwrap();
    fs::remove_file(s.at("c")).unwrap();
    let d = snap.diff().unwrap();
    assert_eq!(d.bytes_after, 15);
    assert_eq!(d.summary(), "2 added, 2 removed, 1 changed; 45 B freed");
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
    snap.restore(&s.quarantine, NOW).unwrap();
    fs::remove_file(s.at("a")).unwrap();
    let again = load(&s.store, &id(5)).unwrap();
    assert!(matches!(
        again.restore(&s.quarantine, NOW),
        Err(SnapshotError::AlreadyUndone(_))
    ));
    assert!(!s.at("a").exists(), "the refused undo changed nothing");
}

#[test]
fn undo_after_seven_days_is_refused() {
    let s = Scratch::new("expired");
    write(&s.at("a"), b"a");
    let snap = s.take(6);
    fs::remove_file(s.at("a")).unwrap();
    let err = snap.restore(&s.quarantine, NOW + KEEP_S + 1).unwrap_err();
    assert!(matches!(err, SnapshotError::Expired(_)), "{err}");
    assert!(!s.at("a").exists());
    snap.restore(&s.quarantine, NOW + KEEP_S).unwrap();
    assert!(s.at("a").exists(), "exactly seven days is still in time");
}

#[test]
fn refuses_a_snapshot_bigger_than_the_space_allowed() {
    let s = Scratch::new("too-big");
    write(&s.at("a"), &[0; 600]);
    write(&s.at("b"), &[0; 600]);
    let err = take(
        &s.store,
        &id(7),
        "c",
        std::slice::from_ref(&s.root),
        NOW,
        1_000,
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            SnapshotError::TooBig {
                needed: 1_200,
                allowed: 1_000
            }
        ),
        "{err}"
    );
    assert!(!s.store.join(id(7)).exists());
    take(
        &s.store,
        &id(7),
        "c",
        std::slice::from_ref(&s.root),
        NOW,
        1_200,
    )
    .unwrap();
}

#[test]
fn refuses_too_many_entries_and_bad_ids_and_roots() {
    let s = Scratch::new("bounds");
    for i in 0..5 {
        write(&s.at(&format!("f{i}")), b"x");
    }
    let roots = [s.root.clone()];
    let err = take_bounded(&s.store, &id(8), "c", &roots, NOW, ROOMY, 5).unwrap_err();
    assert!(matches!(err, SnapshotError::TooManyEntries { limit: 5 }));
    take_bounded(&s.store, &id(8), "c", &roots, NOW, ROOMY, 6).unwrap();
    for bad in ["", "ABCDEF00000000000000000000000000", "../x", &id(9)[1..]] {
        let err = take(&s.store, bad, "c", &roots, NOW, ROOMY).unwrap_err();
        assert!(matches!(err, SnapshotError::BadId(_)), "{bad}: {err}");
    }
    for root in ["relative/path", "/tmp/../etc"] {
        let err = take(&s.store, &id(9), "c", &[root.into()], NOW, ROOMY).unwrap_err();
        assert!(matches!(err, SnapshotError::BadRoot { .. }), "{err}");
    }
    let err = take(&s.store, &id(8), "c", &roots, NOW, ROOMY).unwrap_err();
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
    let snap = s.take(10);
    let back = load(&s.store, &id(10)).unwrap();
    assert_eq!(back.id, snap.id);
    assert_eq!(back.chore, "test-chore");
    assert_eq!(back.created_at, NOW);
    assert_eq!(back.roots, vec![s.root.clone()]);
    let key = |e: &Entry| format!("{:?}", (&e.path, e.kind, e.mode, e.size, &e.target));
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
        let n = 20 + u8::try_from(i).unwrap();
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
fn load_refuses_malformed_manifests_and_ids() {
    let s = Scratch::new("malformed");
    write(&s.at("a"), b"a");
    symlink("/etc", s.at("link")).unwrap();
    s.take(30);
    // An entry below a recorded symlink would be written through it.
    let below = s.at("link/shadow");
    edit_manifest(&s, 30, |v| {
        let mut e = v["entries"][1].clone();
        e["path"] = below.to_str().unwrap().into();
        e["blob"] = 99.into();
        v["entries"].as_array_mut().unwrap().push(e);
    });
    let err = load(&s.store, &id(30)).unwrap_err();
    assert!(err.to_string().contains("not inside a directory"), "{err}");

    s.take(31);
    edit_manifest(&s, 31, |v| v["id"] = id(32).into());
    assert!(load(&s.store, &id(31)).is_err());

    s.take(33);
    fs::write(s.store.join(id(33)).join(MANIFEST), b"{not json").unwrap();
    assert!(matches!(
        load(&s.store, &id(33)),
        Err(SnapshotError::BadManifest { .. })
    ));
    assert!(matches!(
        load(&s.store, &id(34)),
        Err(SnapshotError::Io { .. })
    ));
    assert!(matches!(
        load(&s.store, "../etc"),
        Err(SnapshotError::BadId(_))
    ));
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
    let old = take(&s.store, &id(40), "c", &roots, now - KEEP_S - 1, ROOMY).unwrap();
    let young = take(&s.store, &id(41), "c", &roots, now - KEEP_S, ROOMY).unwrap();
    // Takes that died (no manifest): one just now, one two days ago.
    fs::create_dir(s.store.join(id(42))).unwrap();
    fs::create_dir(s.store.join(id(43))).unwrap();
    set_mtime(&s.store.join(id(43)), now - 2 * 86_400, 0);
    // Not ours, however old.
    fs::create_dir(s.store.join("not-a-snapshot")).unwrap();
    set_mtime(&s.store.join("not-a-snapshot"), 0, 0);

    assert_eq!(purge(&s.store, now).unwrap(), vec![id(40), id(43)]);
    assert!(!old.dir.exists());
    assert!(young.dir.exists());
    assert!(s.store.join(id(42)).exists());
    assert!(s.store.join("not-a-snapshot").exists());
    assert!(purge(&s.store, now).unwrap().is_empty());
    assert_eq!(purge(&s.store, now + 1).unwrap(), vec![id(41)]);
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
    let snap = s.take(50);
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
    let d = snap.diff().unwrap();
    assert_eq!((d.added, d.removed, d.modified), (0, 1, 2));

    let done = snap.restore(&s.quarantine, NOW).unwrap();
    assert_eq!(done.quarantined, 1, "the file that replaced a link");
    assert_eq!(fs::read_link(s.at("to-dir")).unwrap(), outside);
    assert_eq!(
        fs::read_link(s.at("to-file")).unwrap(),
        outside.join("secret")
    );
    assert_eq!(
        fs::read_link(s.at("dangling")).unwrap(),
        Path::new("nowhere")
    );
    assert_eq!(fs::read(outside.join("secret")).unwrap(), b"outside bytes");
    assert_eq!(fs::read_dir(&outside).unwrap().count(), 1);
    assert!(snap.diff().unwrap().is_empty());
}

#[test]
fn restores_mode_and_mtime() {
    let s = Scratch::new("attrs");
    write(&s.at("d/f"), b"payload");
    fs::set_permissions(s.at("d/f"), Permissions::from_mode(0o640)).unwrap();
    fs::set_permissions(s.at("d"), Permissions::from_mode(0o750)).unwrap();
    set_mtime(&s.at("d/f"), 1_600_000_000, 123_456_789);
    set_mtime(&s.at("d"), 1_500_000_000, 42);
    let snap = s.take(60);

    fs::set_permissions(s.at("d/f"), Permissions::from_mode(0o666)).unwrap();
    set_mtime(&s.at("d/f"), 1_650_000_000, 0);
    fs::set_permissions(s.at("d"), Permissions::from_mode(0o777)).unwrap();
    write(&s.at("d/new"), b"n");
    assert_eq!(snap.diff().unwrap().modified, 2);

    snap.restore(&s.quarantine, NOW).unwrap();
    assert_eq!(fs::read(s.at("d/f")).unwrap(), b"payload");
    assert_eq!(mode(&s.at("d/f")), 0o640);
    assert_eq!(mtime(&s.at("d/f")), (1_600_000_000, 123_456_789));
    assert_eq!(mode(&s.at("d")), 0o750);
    assert_eq!(mtime(&s.at("d")), (1_500_000_000, 42));

    // A removed directory comes back with its mode and mtime too.
    fs::remove_dir_all(s.at("d")).unwrap();
    fs::remove_file(snap.dir.join(UNDONE)).unwrap();
    snap.restore(&s.quarantine, NOW).unwrap();
    assert_eq!(mode(&s.at("d")), 0o750);
    assert_eq!(mtime(&s.at("d")), (1_500_000_000, 42));
    assert_eq!(mode(&s.at("d/f")), 0o640);
    assert_eq!(mtime(&s.at("d/f")), (1_600_000_000, 123_456_789));
}

#[test]
fn sockets_are_skipped_and_left_alone() {
    let s = Scratch::new("socket");
    write(&s.at("a"), b"a");
    let _old = std::os::unix::net::UnixListener::bind(s.at("old.sock")).unwrap();
    let snap = s.take(70);
    assert!(
        snap.entries
            .iter()
            .any(|e| e.kind == Kind::Skipped(Why::Socket))
    );
    let _new = std::os::unix::net::UnixListener::bind(s.at("new.sock")).unwrap();
    assert!(snap.diff().unwrap().is_empty());
    let done = snap.restore(&s.quarantine, NOW).unwrap();
    assert_eq!((done.restored, done.quarantined), (0, 0));
    assert!(s.at("old.sock").exists() && s.at("new.sock").exists());
}

#[test]
fn non_utf8_names_round_trip() {
    let s = Scratch::new("non-utf8");
    let name = s.root.join(std::ffi::OsStr::from_bytes(b"caf\xe9"));
    write(&name, b"latin-1 name");
    let snap = s.take(80);
    let back = load(&s.store, &id(80)).unwrap();
    fs::remove_file(&name).unwrap();
    back.restore(&s.quarantine, NOW).unwrap();
    assert_eq!(fs::read(&name).unwrap(), b"latin-1 name");
    assert!(snap.diff().unwrap().is_empty());
}

#[test]
fn a_store_inside_a_root_is_not_snapshotted_or_quarantined() {
    let s = Scratch::new("nested-store");
    write(&s.at("a"), b"a");
    let store = s.at("store");
    let quarantine = s.at("quarantine");
    let snap = take(
        &store,
        &id(90),
        "c",
        std::slice::from_ref(&s.root),
        NOW,
        ROOMY,
    )
    .unwrap();
    assert!(snap.entries.iter().all(|e| !e.path.starts_with(&store)));
    write(&s.at("b"), b"b");
    assert_eq!(snap.diff().unwrap().added, 1);
    let done = snap.restore(&quarantine, NOW).unwrap();
    assert_eq!(done.quarantined, 1);
    assert!(store.join(id(90)).join(MANIFEST).exists());
}

#[test]
fn corrupt_blobs_are_refused() {
    let s = Scratch::new("corrupt");
    write(&s.at("a"), b"original");
    let snap = s.take(91);
    fs::write(snap.blob_path(0), b"tampered").unwrap();
    fs::remove_file(s.at("a")).unwrap();
    let err = snap.restore(&s.quarantine, NOW).unwrap_err();
    assert!(matches!(err, SnapshotError::CorruptBlob(_)), "{err}");
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
    move_by_copy(&s.at("t"), &dest).unwrap();
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
    let snap = s.take(92);
    let dir = snap.dir.clone();
    assert!(snap.diff().unwrap().is_empty());
    snap.discard().unwrap();
    assert!(!dir.exists());
}
