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

/// Refused, or answered as an error, because the journal could not take
/// the line: nothing was served.
fn not_served_for_the_journal(r: Response) {
    match r {
        Response::Refused { reason, .. } => {
            assert!(reason.contains("journal cannot be written"), "{reason}")
        }
        Response::Error { message } => {
            assert!(message.contains("journal cannot be written"), "{message}")
        }
        other => panic!("served: {other:?}"),
    }
}

/// The acts a Worker may ask for itself — a fence, prod mode from the
/// scan, a dry run recorded as shown, a proposal's action id, a note —
/// each journal their line (an intent, for the acts) before they act, now
/// that each line is rendered from a typed event: with the journal
/// failing, each is refused and leaves the fence list, the state records
/// (prod mode, the dry run's mark, issued ids) and the config as they
/// were.
#[test]
fn the_workers_own_acts_change_nothing_when_the_journal_cannot_be_written() {
    let peek = support::dry_chore("peek", "echo peeked");
    let w = Warden::start("adv-intent-worker", true, &[tidy(), peek]);
    let data = w.touched.join("srv/shop/uploads");
    std::fs::create_dir_all(&data).unwrap();
    // A dry run made while the journal could be written: its showing is
    // what is asked below.
    assert!(matches!(
        w.ask(&Request::DryRun {
            chore: "peek".into()
        }),
        Response::Receipt { ok: true, .. }
    ));
    // Files only: a proposal makes the (empty) folder of action ids
    // before it journals, as it did before the lines were typed.
    let files = |dir: &Path| {
        let mut t = tree(dir);
        t.retain(|name, _| !name.ends_with('/'));
        t
    };
    let state = files(&w.layout().state_dir);
    let config = files(&w.layout().config_dir);
    w.make_journal_unwritable();
    not_served_for_the_journal(w.ask(&Request::AddFences {
        paths: vec![data.to_string_lossy().into_owned()],
    }));
    not_served_for_the_journal(w.ask(&Request::ProdModeOn {
        findings: vec!["a database with data: PostgreSQL".into()],
    }));
    not_served_for_the_journal(w.ask(&Request::DryRunShown {
        chore: "peek".into(),
    }));
    not_served_for_the_journal(w.ask(&Request::Propose {
        chore: "tidy".into(),
    }));
    not_served_for_the_journal(w.ask(&Request::Note {
        text: "noted without a line".into(),
    }));
    assert_eq!(files(&w.layout().state_dir), state, "a record was changed");
    assert_eq!(files(&w.layout().config_dir), config, "a fence was added");
    assert_eq!(w.status().prod_mode, "off");
}
