//! A red run must stay undoable whatever it does after the damage it
//! means: hostile red chores of the owner's, run through a real Warden and
//! real bubblewrap, each deleting files and then trying to make its run
//! impossible to undo. Before, 200 001 new directories in the touch made
//! the seal mark the whole touch unknown (its listing was over the limit)
//! and undo put back nothing; more changes than the seal's list (tested at
//! full size once, then at a list of 2 000 configured) made the
//! seal fail, the receipt say "no undo", and the snapshot (the only copy of
//! the deleted files) be removed; and a 3 GB sparse file became a 3 GB
//! snapshot. And its receipt must say what it did to the disk: a tree of
//! directories made or removed is counted, never "nothing changed". Needs
//! root and bubblewrap.

use aromba_testkit::warden as support;

use aromba_warden::chores::snapshot::SealLimits;
use aromba_warden_proto::{Request, Response};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use support::{Warden, owner_chore};

/// Five files, each with its own bytes, in `dir`.
fn five_files(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    for i in 1..=5 {
        std::fs::write(dir.join(format!("f{i}")), format!("only copy {i}\n")).unwrap();
    }
}

fn assert_five_files_back(dir: &Path, undo: &str) {
    for i in 1..=5 {
        assert_eq!(
            std::fs::read_to_string(dir.join(format!("f{i}"))).unwrap_or_default(),
            format!("only copy {i}\n"),
            "f{i} not put back: {undo}"
        );
    }
}

fn undo_id(receipt: &str) -> String {
    let at = receipt
        .find("undo id ")
        .unwrap_or_else(|| panic!("no undo offered: {receipt}"))
        + 8;
    receipt[at..at + 32].to_string()
}

fn undo(w: &Warden, receipt: &str) -> String {
    match w.control(&Request::Undo {
        undo_id: undo_id(receipt),
    }) {
        Response::Receipt { receipt, ok, .. } => {
            assert!(ok, "{receipt}");
            receipt
        }
        other => panic!("undo refused: {other:?}"),
    }
}

fn confirm_cap(w: &Warden, name: &str) {
    let r = w.control(&Request::ConfirmCap { chore: name.into() });
    assert!(matches!(r, Response::Noted { .. }), "{r:?}");
}

/// A red chore with the highest damage cap a red run may have under a
/// seal that lists `listed` new entries, deleting the five files and then
/// running `then`.
fn flood_chore(name: &str, listed: usize, then: &str) -> (String, String) {
    owner_chore(
        name,
        "red",
        &format!("# max_changes: {listed} files, 20 GB\n"),
        &format!(
            "[ \"$1\" = --dry-run ] && exit 0\nrm TOUCHED/f1 TOUCHED/f2 TOUCHED/f3 TOUCHED/f4 TOUCHED/f5\n{then}"
        ),
    )
}

#[test]
fn five_files_deleted_then_200001_directories_in_the_touch_are_undone_and_the_rest_named() {
    let name = "flood-root";
    let w = Warden::start(
        "adv-undo-flood-root",
        false,
        &[flood_chore(
            name,
            SealLimits::default().max_listed,
            "cd TOUCHED && seq 200001 | xargs mkdir",
        )],
    );
    five_files(&w.touched);
    confirm_cap(&w, name);
    let receipt = w.red_run(name);
    let undone = undo(&w, &receipt);
    assert_five_files_back(&w.touched, &undone);
    // A watcher that counts directories may kill the run at its cap before
    // it made more than the seal lists; when it did not, the rest is named.
    if !receipt.contains("killed at the damage cap") {
        let named = format!(
            "new entries under {} were not removed: the run made more than the seal can list",
            w.touched.display()
        );
        assert!(undone.contains(&named), "{undone}");
        assert!(receipt.contains(&named), "{receipt}");
    }
}

/// At a hundredth of the real list's size (the test above floods it at
/// full size): the logic past the list is the same.
#[test]
fn five_files_deleted_then_more_changes_than_the_seal_lists_keep_the_snapshot_and_undo() {
    let name = "flood-deep";
    let w = Warden::start_with(
        "adv-undo-flood-deep",
        false,
        &[flood_chore(
            name,
            2_000,
            "for d in a b; do mkdir TOUCHED/$d && (cd TOUCHED/$d && seq 999 | xargs mkdir); done
mkdir TOUCHED/z && (cd TOUCHED/z && seq 10 | xargs touch)",
        )],
        |o| {
            o.seal_limits = SealLimits {
                max_listed: 2_000,
                ..SealLimits::default()
            };
        },
    );
    five_files(&w.touched);
    confirm_cap(&w, name);
    // 2 016 changes, 2 011 of them new entries.
    let receipt = w.red_run(name);
    assert!(!receipt.contains("no undo"), "{receipt}");
    let undone = undo(&w, &receipt);
    assert_five_files_back(&w.touched, &undone);
    if !receipt.contains("killed at the damage cap") {
        // The seal lists 2 000 new entries (a and b with all in them) and
        // names z, which it did not go into; undo leaves z.
        let named = format!(
            "1 new entries under {} were not removed: the run made more than the seal can list",
            w.touched.display()
        );
        assert!(undone.contains(&named), "{undone}");
        assert!(w.touched.join("z/10").exists(), "{undone}");
        assert!(!w.touched.join("a").exists(), "{undone}");
        assert!(!w.touched.join("b").exists(), "{undone}");
    }
}

#[test]
fn a_seal_walk_stopped_at_its_limit_still_undoes_the_five_deleted_files() {
    let name = "cut-walk";
    let chore = owner_chore(
        name,
        "red",
        "",
        "[ \"$1\" = --dry-run ] && exit 0\nrm TOUCHED/d/f1 TOUCHED/d/f2 TOUCHED/d/f3 TOUCHED/d/f4 TOUCHED/d/f5\nfor i in $(seq 50); do : > TOUCHED/new$i; done",
    );
    let w = Warden::start_with("adv-undo-cut-walk", false, &[chore], |o| {
        // The walk stops at the touch itself: nothing below it is reached.
        o.seal_limits = SealLimits {
            max_visits: 1,
            ..SealLimits::default()
        };
    });
    five_files(&w.touched.join("d"));
    let receipt = w.red_run(name);
    let undone = undo(&w, &receipt);
    assert_five_files_back(&w.touched.join("d"), &undone);
    assert!(
        undone.contains(&format!(
            "new entries under {} were not removed",
            w.touched.display()
        )),
        "{undone}"
    );
}

const GB: u64 = 1 << 30;

/// A 3 GB file holding 8 KB of data (4 KB at its start and 4 KB in the
/// middle), the rest holes.
fn sparse_3gb(path: &Path) {
    let f = std::fs::File::create(path).unwrap();
    f.set_len(3 * GB).unwrap();
    f.write_all_at(&[0x5a; 4096], 0).unwrap();
    f.write_all_at(&[0xa5; 4096], 3 * GB / 2).unwrap();
    f.sync_all().unwrap();
}

fn on_disk(path: &Path) -> u64 {
    std::fs::symlink_metadata(path).unwrap().blocks() * 512
}

#[test]
fn a_3_gb_sparse_file_in_a_red_touch_makes_a_small_snapshot_and_comes_back_sparse() {
    let name = "sparse";
    let chore = owner_chore(
        name,
        "red",
        "",
        "[ \"$1\" = --dry-run ] && exit 0\nrm TOUCHED/sparse\necho x > TOUCHED/x",
    );
    let w = Warden::start("adv-undo-sparse", false, &[chore]);
    let file = w.touched.join("sparse");
    sparse_3gb(&file);
    assert!(on_disk(&file) < 1 << 20);
    let receipt = w.red_run(name);
    assert!(!file.exists(), "{receipt}");
    // The snapshot's copy: as long, as small on disk.
    let blobs = w
        .layout()
        .snapshots_dir()
        .join(undo_id(&receipt))
        .join("blobs");
    let copies: Vec<_> = std::fs::read_dir(&blobs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(copies.len(), 1, "{copies:?}");
    assert_eq!(std::fs::metadata(&copies[0]).unwrap().len(), 3 * GB);
    assert!(
        on_disk(&copies[0]) < 1 << 20,
        "the snapshot takes {} bytes on disk",
        on_disk(&copies[0])
    );
    let undone = undo(&w, &receipt);
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 3 * GB, "{undone}");
    assert!(on_disk(&file) < 1 << 20, "{} on disk", on_disk(&file));
    let reference = w.touched.join("reference");
    sparse_3gb(&reference);
    let cmp = assert_cmd::Command::new("cmp")
        .arg(&file)
        .arg(&reference)
        .output()
        .unwrap();
    assert!(cmp.status.success(), "{cmp:?}");
}

#[test]
fn a_red_chore_with_a_cap_above_what_the_seal_lists_is_refused_before_it_runs() {
    let name = "too-wide";
    let chore = owner_chore(
        name,
        "red",
        "# max_changes: 200001 files, 20 GB\n",
        "[ \"$1\" = --dry-run ] && exit 0\necho ran > TOUCHED/ran",
    );
    let w = Warden::start("adv-undo-too-wide", false, &[chore]);
    confirm_cap(&w, name);
    w.dry_run_shown(name);
    match w.control(&Request::ChoreRun {
        name: name.into(),
        dry_run: false,
    }) {
        Response::Refused { reason, .. } => {
            assert!(reason.contains("at most 200000 files"), "{reason}")
        }
        other => panic!("ran: {other:?}"),
    }
    assert!(!w.touched.join("ran").exists());
}

/// A red run that made a tree of directories was receipted "0 added": the
/// person reading the receipt must see what the run did to the disk.
#[test]
fn a_red_run_that_made_a_tree_of_directories_says_how_many_in_its_receipt() {
    let name = "dir-tree";
    let w = Warden::start(
        "adv-receipt-dirs",
        false,
        &[flood_chore(
            name,
            SealLimits::default().max_listed,
            "cd TOUCHED && seq 1500 | xargs mkdir",
        )],
    );
    five_files(&w.touched);
    confirm_cap(&w, name);
    let receipt = w.red_run(name);
    assert!(receipt.contains("0 added, 5 removed"), "{receipt}");
    assert!(
        receipt.contains("1500 directories added"),
        "the directories went uncounted: {receipt}"
    );
}

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
