//! A red run must stay undoable whatever it does after its damage. A
//! hostile red chore deleted the files of a directory in its touch and then
//! put something else where the directory was: a symbolic link to a
//! directory outside the touch, or a fifo. Undo put the directory back but
//! called every deleted file under it "changed since the run" and left it
//! gone (the first pass looked for each file through the link or the fifo
//! the run had left, found no directory there, and took it for someone
//! else's change), and a fifo in place of the directory was "left alone",
//! with all below it. The deleted files, whose only copy was the snapshot,
//! stayed lost. Each test runs the chore of the owner's through a real
//! Warden and real bubblewrap, then undoes it. Needs root and bubblewrap.

use aromba_testkit::warden as support;

use aromba_warden_proto::{Request, Response};
use std::path::{Path, PathBuf};
use support::{Warden, owner_chore};

/// A red chore of the owner's running `body` in its touch, whose directory
/// `d` holds two files (and `d/e` one) before the run; run for real, its
/// dry run shown first. The Warden and the run's receipt.
fn red_run(name: &str, body: &str) -> (Warden, String) {
    let script = format!("[ \"$1\" = --dry-run ] && exit 0\ncd TOUCHED\n{body}");
    let w = Warden::start(name, false, &[owner_chore("hostile", "red", "", &script)]);
    std::fs::create_dir_all(w.touched.join("d/e")).unwrap();
    for f in ["d/f1", "d/f2", "d/e/f3"] {
        std::fs::write(w.touched.join(f), format!("only copy of {f}\n")).unwrap();
    }
    w.dry_run_shown("hostile");
    let receipt = match w.control(&Request::ChoreRun {
        name: "hostile".into(),
        dry_run: false,
    }) {
        Response::Receipt { receipt, .. } => receipt,
        other => panic!("the chore did not run: {other:?}"),
    };
    (w, receipt)
}

fn undo(w: &Warden, receipt: &str) -> String {
    let at = receipt
        .find("undo id ")
        .unwrap_or_else(|| panic!("no undo offered: {receipt}"))
        + 8;
    match w.control(&Request::Undo {
        undo_id: receipt[at..at + 32].to_string(),
    }) {
        Response::Receipt { receipt, ok, .. } => {
            assert!(ok, "{receipt}");
            receipt
        }
        other => panic!("undo refused: {other:?}"),
    }
}

fn assert_all_back(touched: &Path, undo: &str) {
    assert!(
        std::fs::symlink_metadata(touched.join("d"))
            .unwrap()
            .is_dir(),
        "{undo}"
    );
    for f in ["d/f1", "d/f2", "d/e/f3"] {
        assert_eq!(
            std::fs::read_to_string(touched.join(f)).unwrap_or_default(),
            format!("only copy of {f}\n"),
            "{f} not put back: {undo}"
        );
    }
    assert!(!undo.contains("changed since the run"), "{undo}");
}

#[test]
fn a_directory_the_red_run_emptied_and_replaced_with_a_symlink_outside_is_undone_without_writing_through_it()
 {
    let outside = PathBuf::from(format!(
        "/var/tmp/aromba-adv-undo-link-outside-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&outside);
    std::fs::create_dir_all(outside.join("e")).unwrap();
    let (w, receipt) = red_run(
        "adv-undo-dir-to-link",
        &format!("rm -r d && ln -s {} d && echo swapped", outside.display()),
    );
    let done = undo(&w, &receipt);
    let mut written: Vec<_> = std::fs::read_dir(&outside)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    written.extend(
        std::fs::read_dir(outside.join("e"))
            .unwrap()
            .map(|e| e.unwrap().file_name()),
    );
    let _ = std::fs::remove_dir_all(&outside);
    assert_eq!(written, vec![std::ffi::OsString::from("e")], "{done}");
    assert_all_back(&w.touched, &done);
}

#[test]
fn a_directory_the_red_run_emptied_and_replaced_with_a_fifo_is_undone() {
    let (w, receipt) = red_run(
        "adv-undo-dir-to-fifo",
        "rm -r d && mkfifo d && echo swapped",
    );
    let done = undo(&w, &receipt);
    assert_all_back(&w.touched, &done);
}
