//! The owner's decisions, against a real Warden and the real cage: a red
//! run snapshots first and its receipt carries an undo id that puts every
//! path back; a damage cap above the default runs only once confirmed,
//! for that very script; the PIN (argon2id, in the Warden's state) guards
//! turning prod mode off; and the Warden's own changes to its state
//! records keep the integrity baseline true. Needs root and bubblewrap.

use aromba_testkit::warden as support;

use aromba_warden_proto::{Request, Response};
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;
use support::{Warden, owner_chore};

/// A red chore of the owner's that rewrites one file, deletes another and
/// adds a third in its touched directory.
fn tidy() -> (String, String) {
    owner_chore(
        "tidy",
        "red",
        "",
        "[ \"$1\" = --dry-run ] && { echo would-tidy; exit 0; }\necho rewritten > TOUCHED/keep.txt\nrm TOUCHED/old.log\necho new > TOUCHED/sub/new.txt",
    )
}

fn seed(w: &Warden) {
    std::fs::write(w.touched.join("keep.txt"), "original\n").unwrap();
    std::fs::set_permissions(
        w.touched.join("keep.txt"),
        std::fs::Permissions::from_mode(0o640),
    )
    .unwrap();
    std::fs::write(w.touched.join("old.log"), vec![b'x'; 5000]).unwrap();
    std::fs::create_dir_all(w.touched.join("sub")).unwrap();
}

/// A chore run from the root terminal.
fn run(w: &Warden, chore: &str, dry_run: bool) -> Response {
    w.control(&Request::ChoreRun {
        name: chore.into(),
        dry_run,
    })
}

/// The dry run every first real run needs, then the real run's receipt.
fn dry_then_real(w: &Warden, chore: &str) -> String {
    receipt(run(w, chore, true));
    receipt(run(w, chore, false))
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

fn undo_id(receipt: &str) -> String {
    let at = receipt
        .find("undo id ")
        .expect("the receipt carries an undo id")
        + 8;
    receipt[at..at + 32].to_string()
}

fn refused(r: Response) -> String {
    match r {
        Response::Refused { reason, .. } => reason,
        other => panic!("not refused: {other:?}"),
    }
}

#[test]
fn a_red_run_snapshots_first_and_undo_puts_everything_back() {
    let w = Warden::start("owner-undo", true, &[tidy()]);
    seed(&w);
    let done = dry_then_real(&w, "tidy");
    assert!(
        done.contains("changed: 1 added, 1 removed, 1 changed"),
        "{done}"
    );
    assert_eq!(
        std::fs::read_to_string(w.touched.join("keep.txt")).unwrap(),
        "rewritten\n"
    );
    let id = undo_id(&done);
    let undone = receipt(w.control(&Request::Undo {
        undo_id: id.clone(),
    }));
    assert!(undone.contains("moved to quarantine"), "{undone}");
    assert_eq!(
        std::fs::read_to_string(w.touched.join("keep.txt")).unwrap(),
        "original\n"
    );
    let mode = std::fs::metadata(w.touched.join("keep.txt"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o640);
    assert_eq!(
        std::fs::read(w.touched.join("old.log")).unwrap(),
        vec![b'x'; 5000]
    );
    assert!(!w.touched.join("sub/new.txt").exists());
    // What the run added went to quarantine, not away.
    let q = w.layout().quarantine_dir;
    let kept = walk(&q);
    assert!(kept.iter().any(|p| p.ends_with("sub/new.txt")), "{kept:?}");
    let again = refused(w.control(&Request::Undo { undo_id: id }));
    assert!(
        again.contains("undone already") || again.contains("already"),
        "{again}"
    );
    assert!(w.journal().contains("\"kind\":\"undo\""));
}

#[test]
fn a_red_run_whose_snapshot_has_no_room_is_refused_and_changes_nothing() {
    // Every byte of the disk is kept free: there is no room for a snapshot.
    let w = Warden::start_with("owner-no-room", true, &[tidy()], |o| {
        o.snapshot_keep_free = aromba_warden::chores::snapshot::KeepFree::Bytes(u64::MAX);
    });
    seed(&w);
    receipt(run(&w, "tidy", true));
    let why = refused(run(&w, "tidy", false));
    assert!(
        why.contains("snapshots what it may change first")
            && why.contains("but only 0 B may be used"),
        "{why}"
    );
    assert_eq!(
        std::fs::read_to_string(w.touched.join("keep.txt")).unwrap(),
        "original\n"
    );
    assert!(w.touched.join("old.log").exists());
    assert!(!w.touched.join("sub/new.txt").exists());
}

/// The rule a real Warden keeps: the larger of 1 GiB and a tenth of the
/// filesystem stays free.
#[test]
fn a_snapshot_keeps_a_gigabyte_or_a_tenth_of_the_disk_free() {
    use aromba_warden::chores::snapshot::KeepFree;
    let rule = KeepFree::default();
    assert_eq!(rule.of(1 << 40), (1 << 40) / 10);
    assert_eq!(rule.of(4 << 30), 1 << 30);
    assert_eq!(rule.room(3 << 30, 4 << 30), 2 << 30);
    assert_eq!(rule.room(1 << 29, 4 << 30), 0, "less free than the margin");
    assert_eq!(KeepFree::Bytes(10).room(15, 1 << 40), 5);
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn a_red_run_that_changes_nothing_has_no_undo() {
    let w = Warden::start(
        "owner-noop",
        true,
        &[owner_chore(
            "look",
            "red",
            "",
            "[ \"$1\" = --dry-run ] && exit 0\nls TOUCHED",
        )],
    );
    let done = dry_then_real(&w, "look");
    assert!(!done.contains("undo id"), "{done}");
    let store = w.layout().state_dir.join("snapshots");
    assert_eq!(std::fs::read_dir(store).unwrap().count(), 0, "discarded");
}

#[test]
fn undo_from_the_chat_needs_a_verified_tap() {
    let w = Warden::start("owner-undo-tap", true, &[tidy()]);
    seed(&w);
    let id = undo_id(&dry_then_real(&w, "tidy"));
    let (action, server, needs_pin) = w.propose(&Request::ProposeUndo {
        undo_id: id.clone(),
    });
    assert!(!needs_pin);
    receipt(w.ask(&w.tap(&server, &action, "approve", None)));
    assert_eq!(
        std::fs::read_to_string(w.touched.join("keep.txt")).unwrap(),
        "original\n"
    );
    // An undo id nobody issued cannot even be proposed.
    let why = refused(w.ask(&Request::ProposeUndo {
        undo_id: "0".repeat(32),
    }));
    assert!(why.contains("no undo"), "{why}");
}

#[test]
fn undo_is_refused_after_seven_days() {
    let w = Warden::start("owner-undo-late", true, &[tidy()]);
    seed(&w);
    let id = undo_id(&dry_then_real(&w, "tidy"));
    w.clock.advance(7 * 86_400 + 60);
    let why = refused(w.control(&Request::Undo { undo_id: id }));
    assert!(why.contains("7 days") || why.contains("expired"), "{why}");
    assert_eq!(
        std::fs::read_to_string(w.touched.join("keep.txt")).unwrap(),
        "rewritten\n"
    );
}

fn big() -> (String, String) {
    owner_chore(
        "big",
        "green",
        "# max_changes: 5000 files, 20 GB\n",
        "[ \"$1\" = --dry-run ] && exit 0\n: > TOUCHED/ran",
    )
}

#[test]
fn a_higher_damage_cap_runs_once_the_owner_confirmed_it_for_that_script() {
    let w = Warden::start("owner-cap", true, &[big()]);
    let why = refused(run(&w, "big", true));
    assert!(why.contains("confirm"), "{why}");
    assert!(matches!(
        w.control(&Request::ConfirmCap {
            chore: "big".into()
        }),
        Response::Noted { .. }
    ));
    dry_then_real(&w, "big");
    assert!(w.touched.join("ran").exists());
    // The confirmation is a state record; the baseline was re-taken.
    assert!(w.journal().contains("\"baseline\":\"re-taken\""));
    // Editing the script voids the confirmation.
    let path = w.layout().config_dir.join("mine/big.sh");
    let edited = std::fs::read_to_string(&path).unwrap() + "echo more\n";
    std::fs::write(&path, edited).unwrap();
    let why = refused(run(&w, "big", true));
    assert!(why.contains("confirm"), "{why}");
    // A chore at the default cap has nothing to confirm.
    let w2 = Warden::start("owner-cap-default", true, &[tidy()]);
    let why = refused(w2.control(&Request::ConfirmCap {
        chore: "tidy".into(),
    }));
    assert!(why.contains("nothing to confirm"), "{why}");
}

#[test]
fn a_damage_cap_confirmed_from_the_chat_needs_a_verified_tap() {
    let w = Warden::start("owner-cap-tap", true, &[big()]);
    let (action, server, _) = w.propose(&Request::ProposeConfirmCap {
        chore: "big".into(),
    });
    // Edited between the proposal and the tap: the tap confirms nothing.
    let path = w.layout().config_dir.join("mine/big.sh");
    let original = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, original.clone() + "echo more\n").unwrap();
    let why = refused(w.ask(&w.tap(&server, &action, "approve", None)));
    assert!(why.contains("changed since"), "{why}");
    std::fs::write(&path, original).unwrap();
    let (action, server, _) = w.propose(&Request::ProposeConfirmCap {
        chore: "big".into(),
    });
    assert!(matches!(
        w.ask(&w.tap(&server, &action, "approve", None)),
        Response::Noted { .. }
    ));
    receipt(run(&w, "big", true));
}

/// A cap confirmed before the Mini App — when the relay's own tap could
/// confirm one, so its record names no one — confirms nothing now: the
/// chore asks for it again, and the person's confirmation (here from the
/// terminal) holds.
#[test]
fn a_cap_confirmed_before_the_mini_app_must_be_confirmed_again() {
    let mut w = Warden::start("owner-cap-legacy", true, &[big()]);
    assert!(matches!(
        w.control(&Request::ConfirmCap {
            chore: "big".into()
        }),
        Response::Noted { .. }
    ));
    receipt(run(&w, "big", true));
    // The record as the Warden wrote it before: the same cap and script,
    // and no word of who confirmed it (the baseline re-taken with it, as
    // that Warden did).
    w.rewrite_confirmed_caps(|all| {
        assert_eq!(all["big"]["by"], "terminal", "{all}");
        all["big"].as_object_mut().unwrap().remove("by");
    });
    let why = refused(run(&w, "big", true));
    assert!(why.contains("confirm"), "{why}");
    assert_eq!(w.ladder(), 0, "the person's own old record is no anomaly");
    assert!(matches!(
        w.control(&Request::ConfirmCap {
            chore: "big".into()
        }),
        Response::Noted { .. }
    ));
    receipt(run(&w, "big", true));
}

const PIN: &str = "472913";

fn prod_mode_on(w: &Warden) {
    assert!(matches!(
        w.control(&Request::ProdMode {
            on: true,
            pin: None
        }),
        Response::Noted { .. }
    ));
}

#[test]
fn prod_mode_makes_every_chore_red_and_turning_it_off_needs_the_pin() {
    let w = Warden::start("owner-prod", true, &[]);
    // Weak PINs are refused; a good one is kept as an argon2id hash.
    let why = refused(w.control(&Request::SetPin {
        pin: "123456".into(),
    }));
    assert!(why.contains("consecutive"), "{why}");
    assert!(matches!(
        w.control(&Request::SetPin { pin: PIN.into() }),
        Response::Noted { .. }
    ));
    let stored = std::fs::read_to_string(w.layout().state_dir.join("pin")).unwrap();
    assert!(stored.starts_with("$argon2id$") && !stored.contains(PIN));
    prod_mode_on(&w);
    let Response::Chores { chores } = w.control(&Request::Chores) else {
        panic!("no chores")
    };
    assert!(chores.iter().all(|c| c.color == "red"), "{chores:?}");
    // From the chat: the proposal says what it means and asks for the PIN.
    let (action_id, server_id, needs_pin) = w.propose(&Request::ProposeProdModeOff);
    let text = w.text_of(&action_id);
    assert!(needs_pin && text.contains("purged after 7 days"), "{text}");
    let why = refused(w.ask(&w.tap(&server_id, &action_id, "approve", None)));
    assert!(why.contains("PIN"), "{why}");
    assert!(w.layout().state_dir.join("prod-mode").exists());
    let (action, server, _) = w.propose(&Request::ProposeProdModeOff);
    let why = refused(w.ask(&w.tap(&server, &action, "approve", Some("472914"))));
    assert_eq!(why, "wrong PIN");
    let (action, server, _) = w.propose(&Request::ProposeProdModeOff);
    assert!(matches!(
        w.ask(&w.tap(&server, &action, "approve", Some(PIN))),
        Response::Noted { .. }
    ));
    assert!(!w.layout().state_dir.join("prod-mode").exists());
    let Response::Chores { chores } = w.control(&Request::Chores) else {
        panic!("no chores")
    };
    assert!(chores.iter().any(|c| c.color == "green"));
    // From a root terminal too, the PIN is needed to turn it off.
    prod_mode_on(&w);
    let why = refused(w.control(&Request::ProdMode {
        on: false,
        pin: Some("000111".into()),
    }));
    assert_eq!(why, "wrong PIN");
    assert!(matches!(
        w.control(&Request::ProdMode {
            on: false,
            pin: Some(PIN.into())
        }),
        Response::Noted { .. }
    ));
}

#[test]
fn five_wrong_pins_lock_pin_actions_and_are_a_ladder_signal() {
    let w = Warden::start("owner-pin-guess", true, &[]);
    assert!(matches!(
        w.control(&Request::SetPin { pin: PIN.into() }),
        Response::Noted { .. }
    ));
    prod_mode_on(&w);
    for guess in ["100000", "200000", "300000", "400000"] {
        let (action, server, _) = w.propose(&Request::ProposeProdModeOff);
        assert_eq!(
            refused(w.ask(&w.tap(&server, &action, "approve", Some(guess)))),
            "wrong PIN"
        );
    }
    assert_eq!(w.ladder(), 0, "four wrong PINs are a typo, not an attack");
    let (action, server, _) = w.propose(&Request::ProposeProdModeOff);
    let why = refused(w.ask(&w.tap(&server, &action, "approve", Some("500000"))));
    assert!(why.contains("locked"), "{why}");
    assert_eq!(w.ladder(), 1);
    // Locked: even the right PIN waits out the fifteen minutes. (At Slow,
    // one request a minute.)
    w.clock.advance(61);
    let (action, server, _) = w.propose(&Request::ProposeProdModeOff);
    w.clock.advance(61);
    let why = refused(w.ask(&w.tap(&server, &action, "approve", Some(PIN))));
    assert!(why.contains("locked"), "{why}");
    w.clock.advance(15 * 60);
    let (action, server, _) = w.propose(&Request::ProposeProdModeOff);
    w.clock.advance(61);
    assert!(matches!(
        w.ask(&w.tap(&server, &action, "approve", Some(PIN))),
        Response::Noted { .. }
    ));
}

#[test]
fn the_wardens_own_state_changes_keep_integrity_but_a_tampered_record_does_not() {
    let w = Warden::start_with("owner-integrity", true, &[], |o| {
        o.integrity_interval = Duration::from_millis(200);
        o.watch_interval = Duration::from_millis(50);
    });
    assert!(matches!(
        w.control(&Request::SetPin { pin: PIN.into() }),
        Response::Noted { .. }
    ));
    prod_mode_on(&w);
    std::thread::sleep(Duration::from_millis(600));
    let st = w.status();
    assert!(st.integrity.starts_with("ok"), "{}", st.integrity);
    assert_eq!(st.ladder_step, 0);
    // Someone else rewrites the PIN's hash: a mismatch, the ladder to Cut.
    std::fs::write(w.layout().state_dir.join("pin"), "$argon2id$forged").unwrap();
    let mut st = w.status();
    for _ in 0..50 {
        if st.integrity.starts_with("MISMATCH") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        st = w.status();
    }
    assert!(
        st.integrity.contains("state records changed"),
        "{}",
        st.integrity
    );
    // And the Warden will not launder it by changing a record on top.
    let why = refused(w.control(&Request::SetPin {
        pin: "839201".into(),
    }));
    assert!(why.contains("do not match the baseline"), "{why}");
}

#[test]
fn undo_leaves_what_changed_since_the_run_and_says_so() {
    let w = Warden::start("owner-undo-conflict", true, &[tidy()]);
    seed(&w);
    let id = undo_id(&dry_then_real(&w, "tidy"));
    // The owner edits the file after the run, and adds one of their own.
    std::fs::write(w.touched.join("keep.txt"), "the owner's edit\n").unwrap();
    std::fs::write(w.touched.join("sub/owners.txt"), "mine\n").unwrap();
    let undone = receipt(w.control(&Request::Undo { undo_id: id }));
    assert!(undone.contains("changed since the run"), "{undone}");
    assert!(undone.contains("keep.txt"), "{undone}");
    assert_eq!(
        std::fs::read_to_string(w.touched.join("keep.txt")).unwrap(),
        "the owner's edit\n",
        "a newer version is never rolled back"
    );
    assert_eq!(
        std::fs::read_to_string(w.touched.join("sub/owners.txt")).unwrap(),
        "mine\n",
        "what others made after the run stays"
    );
    // What the run did and nobody touched since is undone.
    assert!(w.touched.join("old.log").exists());
    assert!(!w.touched.join("sub/new.txt").exists());
}
