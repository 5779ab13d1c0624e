//! Intent before action: a real chore run, an approval, an undo, the PIN,
//! prod mode and `resume` are journaled before they act, and refused when
//! the journal cannot take the line. Before, each acted first, journaled
//! after, and ignored a journal that could not be written: with the journal
//! failing, a run changed files and an approval was spent and ran, with no
//! line anywhere.
//!
//! The journal is made to fail as a full or broken disk would: the file the
//! Warden appends to is made immutable (`chattr +i`), so every append
//! through its open descriptor fails. Needs root, bubblewrap and a
//! filesystem with attributes (ext4 here).

use aromba_testkit::warden as support;

use aromba_warden_proto::{Request, Response};
use std::collections::BTreeMap;
use std::path::Path;
use support::{Warden, owner_chore};

/// A red chore of the owner's that rewrites one file, deletes another and
/// adds a third.
fn tidy() -> (String, String) {
    owner_chore(
        "tidy",
        "red",
        "",
        "[ \"$1\" = --dry-run ] && { echo would-tidy; exit 0; }\necho rewritten > TOUCHED/keep.txt\nrm TOUCHED/old.log\necho new > TOUCHED/new.txt",
    )
}

fn seed(w: &Warden) {
    std::fs::write(w.touched.join("keep.txt"), "original\n").unwrap();
    std::fs::write(w.touched.join("old.log"), "old\n").unwrap();
}

/// Every file under `dir` with its bytes.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                out.insert(format!("{}/", p.display()), Vec::new());
                stack.push(p);
            } else {
                out.insert(
                    p.display().to_string(),
                    std::fs::read(&p).unwrap_or_default(),
                );
            }
        }
    }
    out
}

fn receipt(r: Response) -> String {
    match r {
        Response::Receipt { receipt, ok, .. } => {
            assert!(ok, "{receipt}");
            receipt
        }
        other => panic!("no receipt: {other:?}"),
    }
}

fn refused_for_the_journal(r: Response) {
    match r {
        Response::Refused { reason, .. } => {
            assert!(reason.contains("journal cannot be written"), "{reason}")
        }
        other => panic!("not refused: {other:?}"),
    }
}

fn run(w: &Warden, dry_run: bool) -> Response {
    w.control(&Request::ChoreRun {
        name: "tidy".into(),
        dry_run,
    })
}

#[test]
fn a_real_run_is_refused_and_changes_nothing_when_the_journal_cannot_be_written() {
    let w = Warden::start("adv-intent-run", true, &[tidy()]);
    seed(&w);
    receipt(run(&w, true));
    let touched = tree(&w.touched);
    let state = tree(&w.layout().state_dir);
    w.make_journal_unwritable();
    refused_for_the_journal(run(&w, false));
    assert_eq!(tree(&w.touched), touched, "the run changed files");
    assert_eq!(
        tree(&w.layout().state_dir),
        state,
        "a snapshot or a record was made"
    );
}

#[test]
fn an_approval_is_refused_unspent_when_the_journal_cannot_be_written() {
    let w = Warden::start(
        "adv-intent-tap",
        true,
        &[owner_chore(
            "hello",
            "yellow",
            "",
            "[ \"$1\" = --dry-run ] && { echo would-write; exit 0; }\necho hello > TOUCHED/hello",
        )],
    );
    w.dry_run_shown("hello");
    let (action, server, _) = w.propose(&Request::Propose {
        chore: "hello".into(),
    });
    let tap = w.tap(&server, &action, "approve", None);
    let state = tree(&w.layout().state_dir);
    w.make_journal_unwritable();
    refused_for_the_journal(w.ask(&tap));
    assert!(!w.touched.join("hello").exists(), "the approved chore ran");
    assert_eq!(
        tree(&w.layout().state_dir),
        state,
        "the action id was spent"
    );
    assert_eq!(w.ladder(), 0);
}

#[test]
fn an_undo_is_refused_and_changes_nothing_when_the_journal_cannot_be_written() {
    let w = Warden::start("adv-intent-undo", true, &[tidy()]);
    seed(&w);
    receipt(run(&w, true));
    let done = receipt(run(&w, false));
    let at = done.find("undo id ").expect("an undo id") + 8;
    let id = done[at..at + 32].to_string();
    let touched = tree(&w.touched);
    let state = tree(&w.layout().state_dir);
    w.make_journal_unwritable();
    refused_for_the_journal(w.control(&Request::Undo { undo_id: id }));
    assert_eq!(tree(&w.touched), touched, "the undo changed files");
    assert_eq!(tree(&w.layout().state_dir), state, "the undo left a mark");
}

#[test]
fn the_pin_and_prod_mode_do_not_change_when_the_journal_cannot_be_written() {
    let w = Warden::start("adv-intent-pin", true, &[]);
    assert!(matches!(
        w.control(&Request::SetPin {
            pin: "472913".into()
        }),
        Response::Noted { .. }
    ));
    let state = tree(&w.layout().state_dir);
    w.make_journal_unwritable();
    refused_for_the_journal(w.control(&Request::SetPin {
        pin: "839201".into(),
    }));
    refused_for_the_journal(w.control(&Request::ProdMode {
        on: true,
        pin: None,
    }));
    assert_eq!(tree(&w.layout().state_dir), state);
}

#[test]
fn resume_is_refused_when_the_journal_cannot_be_written() {
    let w = Warden::start("adv-intent-resume", true, &[]);
    // `/panic` from the chat: the ladder at Cut.
    assert!(matches!(w.ask(&Request::Panic), Response::Ladder { .. }));
    assert_eq!(w.ladder(), 3);
    w.make_journal_unwritable();
    refused_for_the_journal(w.control(&Request::Resume));
    assert_eq!(w.ladder(), 3, "the ladder came down unjournaled");
}
