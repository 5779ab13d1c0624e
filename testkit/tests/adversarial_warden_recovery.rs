//! Attacks on what a Warden killed mid-act closes when it starts again
//! (`warden/src/server/recover.rs`): a real Warden as a process of its own
//! (`aromba-test-warden`), SIGKILLed, and started again on the same root.
//!
//! A kill "just before line L is written" is made exactly: the Warden is
//! let run past L, then killed, and its journal cut right before L (whole
//! lines only, so the chain still verifies); everything else on disk (the
//! snapshot, the records) is as the act left it, which is what a kill at
//! that instant leaves too. Needs root and bubblewrap, as the chaos test.
//!
//! Tests marked "found by the attack round, fixed" failed on the code the
//! round attacked (588a0dd); the others held. Each doc comment says what
//! was found; the fix is in `recover.rs`, `journal/mod.rs` or
//! `cage/limits.rs`.

use aromba_testkit::warden::process::{answer, send};
use aromba_testkit::warden::{PROCESS_AHEAD, Warden, owner_chore};
use aromba_warden::journal::{AuditKey, Journal, JournalConfig, verify};
use aromba_warden::layout::Layout;
use aromba_warden_proto::{Request, Response};
use assert_cmd::cargo::CommandCargoExt;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

// ---------------------------------------------------------------- helpers

/// One test of this file at a time: a Warden's start sweeps the cage
/// groups of every Warden on the host (see the last test), so two of these
/// starting together can take each other's isolation away.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn lines(w: &Warden) -> Vec<Value> {
    w.journal()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a whole journal line"))
        .collect()
}

/// Cuts the journal right before its first line `at` holds for: the
/// journal of a Warden killed just before it wrote that line. Returns the
/// line cut.
fn cut_before(w: &Warden, at: impl Fn(&Value) -> bool) -> Value {
    let path = w.layout().journal_file();
    let text = std::fs::read_to_string(&path).unwrap();
    let mut offset = 0u64;
    for line in text.split_inclusive('\n') {
        let v: Value = serde_json::from_str(line.trim_end()).unwrap();
        if at(&v) {
            let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            f.set_len(offset).unwrap();
            f.sync_all().unwrap();
            return v;
        }
        offset += line.len() as u64;
    }
    panic!("no such line in the journal:\n{}", w.journal());
}

/// The seq of the last real run's intent of `chore`.
fn run_intent(w: &Warden, chore: &str) -> u64 {
    lines(w)
        .iter()
        .rev()
        .find(|l| {
            l["kind"] == "chore-run"
                && l["phase"] == "intent"
                && l["chore"] == chore
                && l["mode"] == "real"
        })
        .and_then(|l| l["seq"].as_u64())
        .expect("the run's intent")
}

fn outcomes_of(w: &Warden, seq: u64) -> Vec<Value> {
    lines(w)
        .into_iter()
        .filter(|l| l["phase"] == "outcome" && l["intent_seq"] == seq)
        .collect()
}

fn receipts_of(w: &Warden, seq: u64) -> Vec<Value> {
    lines(w)
        .into_iter()
        .filter(|l| l["kind"] == "receipt" && l["intent_seq"] == seq)
        .collect()
}

/// Every intent of the journal has exactly one outcome.
fn each_intent_closed_once(w: &Warden) {
    let all = lines(w);
    let mut outcomes: BTreeMap<u64, usize> = BTreeMap::new();
    for l in &all {
        if l["phase"] == "outcome" {
            *outcomes
                .entry(l["intent_seq"].as_u64().unwrap())
                .or_default() += 1;
        }
    }
    for l in all.iter().filter(|l| l["phase"] == "intent") {
        let seq = l["seq"].as_u64().unwrap();
        let n = outcomes.get(&seq).copied().unwrap_or(0);
        assert_eq!(n, 1, "intent {seq} has {n} outcomes: {l}\n{}", w.journal());
    }
}

fn journal_verifies(w: &Warden) {
    let layout = w.layout();
    let key = audit_key(&layout);
    verify(&layout.journal_file(), key.as_ref())
        .unwrap_or_else(|e| panic!("the journal does not verify: {e}"));
}

fn audit_key(layout: &Layout) -> Option<AuditKey> {
    let key = layout.audit_key();
    key.exists()
        .then(|| AuditKey::load(&key, Some(&layout.journal_dir)).unwrap())
}

fn undo_id_of(text: &str) -> String {
    let at = text
        .find("undo id ")
        .unwrap_or_else(|| panic!("no undo id in {text:?}"))
        + "undo id ".len();
    text[at..at + 32].to_string()
}

fn three_files(dir: &Path) {
    for i in 1..=3 {
        std::fs::write(dir.join(format!("f{i}")), format!("only copy {i}\n")).unwrap();
    }
}

fn three_files_back(dir: &Path, why: &str) {
    for i in 1..=3 {
        assert_eq!(
            std::fs::read_to_string(dir.join(format!("f{i}"))).unwrap_or_default(),
            format!("only copy {i}\n"),
            "f{i} not put back: {why}"
        );
    }
}

/// Removes the three files and writes one.
fn cut_chore() -> (String, String) {
    owner_chore(
        "cut",
        "red",
        "",
        "[ \"$1\" = --dry-run ] && exit 0\nrm TOUCHED/f1 TOUCHED/f2 TOUCHED/f3\necho new > TOUCHED/new",
    )
}

fn wait_for(path: &Path, secs: u64) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `aromba-test-warden` started on `w`'s root and SIGKILLed `ms` after,
/// whatever it is doing then (binding, recovering, serving).
fn start_and_kill_after(w: &Warden, ms: u64) {
    let mut child = std::process::Command::cargo_bin("aromba-test-warden")
        .expect("aromba-test-warden is built with the test kit's tests")
        .arg(&w.root)
        .arg(PROCESS_AHEAD.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("aromba-test-warden starts");
    std::thread::sleep(Duration::from_millis(ms));
    let _ = child.kill();
    let _ = child.wait();
}

// ---------------------------------------------------------------- attacks

/// Holds: a run cut after its seal and before its outcome is closed once,
/// across any number of later starts, with one receipt whose undo puts
/// everything back.
#[test]
fn a_run_cut_before_its_outcome_is_closed_once_across_restarts_and_its_undo_restores() {
    let _serial = serial();
    let mut w = Warden::start_process("adv-recov-once", &[cut_chore()]);
    three_files(&w.touched);
    w.red_run("cut");
    let run = run_intent(&w, "cut");
    w.kill();
    cut_before(&w, |l| l["phase"] == "outcome" && l["intent_seq"] == run);
    w.restart();
    w.kill();
    w.restart();
    w.kill();
    w.restart();
    let outcomes = outcomes_of(&w, run);
    assert_eq!(outcomes.len(), 1, "{}", w.journal());
    assert_eq!(outcomes[0]["verdict"], "interrupted");
    let receipts = receipts_of(&w, run);
    assert_eq!(receipts.len(), 1, "{}", w.journal());
    each_intent_closed_once(&w);
    journal_verifies(&w);
    let undo_id = outcomes[0]["undo_id"].as_str().expect("an undo offered");
    match w.control(&Request::Undo {
        undo_id: undo_id.into(),
    }) {
        Response::Receipt {
            ok: true, receipt, ..
        } => {
            three_files_back(&w.touched, &receipt);
            assert!(!w.touched.join("new").exists(), "{receipt}");
        }
        other => panic!("the undo of the cut run failed: {other:?}"),
    }
    assert_eq!(w.status().ladder_name, "normal");
}

/// **Found by the attack round, fixed.** A kill during recovery itself, after it journaled the cut
/// run's `interrupted` outcome and before its receipt: the next start sees
/// the intent closed and an outcome with no exit code, so the run is owed
/// nothing, and it never gets a receipt (nor is `.last` ever journaled):
/// the chaos test's "every run cut short has exactly one receipt" no
/// longer holds.
#[test]
fn a_kill_between_recoverys_interrupted_outcome_and_its_receipt_still_gives_the_cut_run_one_receipt()
 {
    let _serial = serial();
    let mut w = Warden::start_process("adv-recov-receipt", &[cut_chore()]);
    three_files(&w.touched);
    w.red_run("cut");
    let run = run_intent(&w, "cut");
    w.kill();
    cut_before(&w, |l| l["phase"] == "outcome" && l["intent_seq"] == run);
    w.restart();
    assert_eq!(receipts_of(&w, run).len(), 1, "recovery wrote the receipt");
    w.kill();
    // Killed once more, during that recovery: after the outcome line,
    // before the receipt line.
    cut_before(&w, |l| l["kind"] == "receipt" && l["intent_seq"] == run);
    w.restart();
    each_intent_closed_once(&w);
    let receipts = receipts_of(&w, run);
    assert_eq!(
        receipts.len(),
        1,
        "the run cut short has {} receipts after a kill during recovery:\n{}",
        receipts.len(),
        w.journal()
    );
}

/// **Found by the attack round, fixed.** A journal written by the Warden before this change: its
/// receipts do not name their intent (`intent_seq` is new). On the first
/// start of the new Warden every run of the current file and the newest
/// rotated one is "owed" a receipt, and gets a false late one ("the Warden
/// stopped before writing it"), and each chore's `.last` (what `aromba
/// chores` and the Trust page show, and where the Trust page's Undo takes
/// its undo id from) is overwritten with it.
#[test]
fn a_journal_from_before_receipts_named_their_intent_gets_no_false_late_receipts_on_upgrade() {
    let _serial = serial();
    let mut w = Warden::start_process("adv-recov-upgrade", &[cut_chore()]);
    three_files(&w.touched);
    let receipt = w.red_run("cut");
    let all = lines(&w);
    let run = run_intent(&w, "cut");
    let strip = |l: &Value, extra: &[&str]| -> Map<String, Value> {
        let mut m = l.as_object().unwrap().clone();
        for f in ["seq", "time", "prev", "mac"].iter().chain(extra) {
            m.remove(*f);
        }
        m
    };
    let intent = all.iter().find(|l| l["seq"] == run).unwrap();
    let outcome = all
        .iter()
        .find(|l| l["phase"] == "outcome" && l["intent_seq"] == run)
        .unwrap();
    let old_receipt = all
        .iter()
        .find(|l| l["kind"] == "receipt" && l["intent_seq"] == run)
        .unwrap();
    w.kill();
    // The same run as the previous release journaled it: no undo id in
    // the intent, no intent_seq in the receipt.
    let layout = w.layout();
    let mut config = JournalConfig::new(layout.journal_dir.clone());
    config.key = audit_key(&layout);
    let mut j = Journal::open(config).unwrap();
    let old_seq = j.append(strip(intent, &["undo_id"])).unwrap();
    let mut o = strip(outcome, &[]);
    o.insert("intent_seq".into(), Value::from(old_seq));
    j.append(o).unwrap();
    j.append(strip(old_receipt, &["intent_seq"])).unwrap();
    drop(j);
    let last = layout.state_dir.join("runs/cut.last");
    std::fs::write(&last, &receipt).unwrap();
    journal_verifies(&w);

    w.restart();
    let late: Vec<Value> = receipts_of(&w, old_seq);
    assert!(
        late.is_empty(),
        "a run that had its receipt got a false late one on upgrade: {late:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&last).unwrap(),
        receipt,
        "the chore's last receipt was overwritten"
    );
}

/// **Found by the attack round, fixed.** A red run that may write the quarantine: its receipt says
/// what it removed there, which no undo puts back. Cut before its outcome,
/// the run's receipt written at the next start names its undo id and
/// says nothing of the quarantine: the person is offered an undo as if it
/// took everything back. (What the quarantine held before was only in the
/// dead Warden's memory.)
#[test]
fn a_cut_run_that_may_have_emptied_the_quarantine_gets_a_receipt_saying_undo_cannot_put_it_back() {
    let _serial = serial();
    let name = "adv-recov-quarantine";
    let root = std::env::temp_dir().join(format!("aromba-{name}-{}", std::process::id()));
    let quarantine = Layout::rooted(&root).quarantine_dir;
    let chore = owner_chore(
        "empty-quarantine",
        "red",
        &format!("# touches: {}\n", quarantine.display()),
        &format!(
            "[ \"$1\" = --dry-run ] && exit 0\nrm -r {}/apt-clean-1\nrm TOUCHED/f1\necho x > TOUCHED/x",
            quarantine.display()
        ),
    );
    let mut w = Warden::start_process(name, &[chore]);
    assert_eq!(w.root, root);
    std::fs::create_dir_all(quarantine.join("apt-clean-1")).unwrap();
    std::fs::write(quarantine.join("apt-clean-1/kept.deb"), "deb").unwrap();
    three_files(&w.touched);
    let receipt = w.red_run("empty-quarantine");
    assert!(!quarantine.join("apt-clean-1").exists(), "{receipt}");
    assert!(receipt.contains("undo cannot put them back"), "{receipt}");
    let run = run_intent(&w, "empty-quarantine");
    w.kill();
    cut_before(&w, |l| l["phase"] == "outcome" && l["intent_seq"] == run);
    w.restart();
    let receipts = receipts_of(&w, run);
    assert_eq!(receipts.len(), 1, "{}", w.journal());
    let text = receipts[0]["receipt"].as_str().unwrap();
    assert!(text.contains("undo id "), "{text}");
    assert!(
        text.contains("undo cannot put"),
        "the receipt offers an undo and does not say the quarantine's loss is for good: {text}"
    );
}

/// **Found by the attack round, fixed.** An undo cut short is an act of its own, not a run:
/// its intent names the undo id it undoes, and recovery "seals" that
/// snapshot as if it were the undo's own. For an undo that had put
/// everything back (a run that only added files), the diff is empty and
/// recovery discards the run's snapshot — the record that it was undone
/// with it, so the receipt's Undo is then answered "no undo here" instead
/// of "already undone" — and it journals the undo's outcome as if the
/// undo had changed what the run changed.
#[test]
fn an_undo_cut_before_its_outcome_does_not_get_the_run_snapshot_sealed_or_discarded() {
    let _serial = serial();
    let add = owner_chore(
        "add",
        "red",
        "",
        "[ \"$1\" = --dry-run ] && exit 0\necho a > TOUCHED/a\necho b > TOUCHED/b",
    );
    let mut w = Warden::start_process("adv-recov-undo", &[add]);
    std::fs::write(w.touched.join("keep"), "keep").unwrap();
    let receipt = w.red_run("add");
    let undo_id = undo_id_of(&receipt);
    match w.control(&Request::Undo {
        undo_id: undo_id.clone(),
    }) {
        Response::Receipt { ok: true, .. } => {}
        other => panic!("undo: {other:?}"),
    }
    assert!(!w.touched.join("a").exists());
    let snapshot = w.layout().snapshots_dir().join(&undo_id);
    assert!(snapshot.join("undone").exists(), "the undo is recorded");
    let undo_intent = lines(&w)
        .iter()
        .rev()
        .find(|l| l["kind"] == "undo" && l["phase"] == "intent")
        .and_then(|l| l["seq"].as_u64())
        .unwrap();
    w.kill();
    // Killed once the undo put everything back, before its outcome.
    cut_before(&w, |l| {
        l["phase"] == "outcome" && l["intent_seq"] == undo_intent
    });
    w.restart();
    each_intent_closed_once(&w);
    let outcome = &outcomes_of(&w, undo_intent)[0];
    assert_eq!(outcome["verdict"], "interrupted");
    assert!(
        snapshot.exists(),
        "recovery of the undo discarded the run's snapshot (and its `undone` record): {outcome}"
    );
    // Asked again, the undo is refused as done, not as unknown.
    match w.control(&Request::Undo { undo_id }) {
        Response::Refused { reason, .. } => assert!(reason.contains("undone"), "{reason}"),
        other => panic!("a second undo: {other:?}"),
    }
}

/// Holds (hopefully): SIGKILLs at many moments of the start that follows a
/// run cut mid-way — while binding, while the cage groups are swept,
/// while the snapshot of thousands of files is sealed, while the outcome
/// and receipt are written — and the start after closes the run exactly
/// once, with one receipt, and its undo puts back what it removed.
#[test]
fn a_kill_during_recovery_closes_each_interrupted_run_once() {
    let _serial = serial();
    let slow = owner_chore(
        "slow-cut",
        "red",
        "",
        "[ \"$1\" = --dry-run ] && exit 0\n\
         rm TOUCHED/f1 TOUCHED/f2 TOUCHED/f3\n\
         echo started > TOUCHED/started\n\
         sleep 30\n\
         echo late > TOUCHED/late",
    );
    let mut w = Warden::start_process("adv-recov-kill-recovery", &[slow]);
    three_files(&w.touched);
    // Many files the seal compares one by one: a start that takes a while.
    let bulk = w.touched.join("bulk");
    std::fs::create_dir_all(&bulk).unwrap();
    for i in 0..6000 {
        std::fs::write(bulk.join(i.to_string()), "b").unwrap();
    }
    w.dry_run_shown("slow-cut");
    let run = send(
        &w.layout().control_socket(),
        &Request::ChoreRun {
            name: "slow-cut".into(),
            dry_run: false,
        },
    );
    wait_for(&w.touched.join("started"), 120);
    w.kill();
    drop(run);
    let intent = run_intent(&w, "slow-cut");
    for ms in [30, 80, 150, 250, 400, 600, 900, 1300, 1800, 2500] {
        start_and_kill_after(&w, ms);
        let all = lines(&w);
        eprintln!(
            "killed {ms} ms after start: {} starts journaled, the run closed: {}, receipts: {}",
            all.iter().filter(|l| l["kind"] == "warden-started").count(),
            !outcomes_of(&w, intent).is_empty(),
            receipts_of(&w, intent).len()
        );
    }
    w.restart();
    each_intent_closed_once(&w);
    journal_verifies(&w);
    let outcomes = outcomes_of(&w, intent);
    assert_eq!(outcomes[0]["verdict"], "interrupted", "{}", w.journal());
    assert_eq!(
        receipts_of(&w, intent).len(),
        1,
        "the cut run's receipts:\n{}",
        w.journal()
    );
    assert!(
        !w.touched.join("late").exists(),
        "the cage outlived its Warden"
    );
    let undo_id = outcomes[0]["undo_id"].as_str().expect("an undo offered");
    match w.control(&Request::Undo {
        undo_id: undo_id.into(),
    }) {
        Response::Receipt {
            ok: true, receipt, ..
        } => three_files_back(&w.touched, &receipt),
        other => panic!("the undo failed: {other:?}"),
    }
    assert_eq!(w.status().ladder_name, "normal");
}

/// Holds: a Warden starting kills only the cage groups of Wardens that are
/// gone (`aromba-cage-PID-N`, PID dead); the cage of another Warden, alive
/// and running a chore, is left to finish.
#[test]
fn a_warden_starting_leaves_alone_the_cage_another_live_warden_runs() {
    let _serial = serial();
    let slow = owner_chore(
        "slow",
        "red",
        "",
        "[ \"$1\" = --dry-run ] && exit 0\necho started > TOUCHED/started\nsleep 4\necho done > TOUCHED/done",
    );
    let a = Warden::start("adv-recov-live-a", false, &[slow]);
    a.dry_run_shown("slow");
    let run = send(
        &a.layout().control_socket(),
        &Request::ChoreRun {
            name: "slow".into(),
            dry_run: false,
        },
    );
    wait_for(&a.touched.join("started"), 60);
    let mut b = Warden::start_process("adv-recov-live-b", &[]);
    b.kill();
    b.restart();
    match answer(run) {
        Some(Response::Receipt { receipt, .. }) => {
            assert!(receipt.contains("exit 0"), "{receipt}");
            assert!(a.touched.join("done").exists(), "{receipt}");
        }
        other => panic!("the other Warden's run: {other:?}"),
    }
}

/// Holds: killed while the run's snapshot is being taken (its directory
/// there, its manifest not yet written), the run never started: the next
/// start removes the half-taken snapshot, closes the run `interrupted`
/// with no undo offered, and the files are as they were.
#[test]
fn a_kill_during_the_snapshot_take_closes_the_run_with_nothing_changed_and_no_undo() {
    let _serial = serial();
    let mut w = Warden::start_process("adv-recov-take", &[cut_chore()]);
    three_files(&w.touched);
    let bulk = w.touched.join("bulk");
    std::fs::create_dir_all(&bulk).unwrap();
    for i in 0..6000 {
        std::fs::write(bulk.join(i.to_string()), "b").unwrap();
    }
    w.dry_run_shown("cut");
    let run = send(
        &w.layout().control_socket(),
        &Request::ChoreRun {
            name: "cut".into(),
            dry_run: false,
        },
    );
    // The undo id is in the run's intent before the snapshot exists.
    let deadline = Instant::now() + Duration::from_secs(60);
    let undo_id = loop {
        if let Some(id) = lines(&w)
            .iter()
            .find(|l| l["kind"] == "chore-run" && l["mode"] == "real" && l["phase"] == "intent")
            .and_then(|l| l["undo_id"].as_str().map(str::to_string))
        {
            break id;
        }
        assert!(Instant::now() < deadline, "the run's intent never came");
        std::thread::sleep(Duration::from_millis(5));
    };
    let snapshot = w.layout().snapshots_dir().join(&undo_id);
    wait_for(&snapshot.join("blobs"), 60);
    assert!(
        !snapshot.join("manifest.json").exists(),
        "the take was quicker than the test"
    );
    w.kill();
    drop(run);
    w.restart();
    let intent = run_intent(&w, "cut");
    each_intent_closed_once(&w);
    let outcome = &outcomes_of(&w, intent)[0];
    assert_eq!(outcome["verdict"], "interrupted");
    assert!(outcome.get("undo_id").is_none(), "{outcome}");
    assert!(!snapshot.exists(), "the half-taken snapshot is left");
    for i in 1..=3 {
        assert!(w.touched.join(format!("f{i}")).exists(), "the run started");
    }
    let receipts = receipts_of(&w, intent);
    assert_eq!(receipts.len(), 1);
    assert!(!receipts[0]["receipt"].as_str().unwrap().contains("undo id"));
}

/// **Found by the attack round, fixed.** The receipt of a run cut short is not sent to
/// the chat; the person finds its undo in "the chore's last run" (what
/// `aromba chores` and the Trust page show, the Trust page's Undo checked
/// against it) or in the journal. One dry run of the same chore — which
/// the Worker may ask at will — replaces that last run, and the undo of
/// what the cut run removed is then named nowhere but the journal.
#[test]
fn one_dry_run_from_the_worker_does_not_hide_the_undo_of_a_run_cut_short() {
    let _serial = serial();
    let mut w = Warden::start_process("adv-recov-hidden-undo", &[cut_chore()]);
    three_files(&w.touched);
    w.red_run("cut");
    let run = run_intent(&w, "cut");
    w.kill();
    cut_before(&w, |l| l["phase"] == "outcome" && l["intent_seq"] == run);
    w.restart();
    let last = |w: &Warden| match w.control(&Request::Chores) {
        Response::Chores { chores } => chores
            .into_iter()
            .find(|c| c.name == "cut")
            .map(|c| c.last_receipt)
            .unwrap(),
        other => panic!("{other:?}"),
    };
    let before = last(&w);
    assert!(before.contains("undo id "), "{before}");
    // The hostile Worker, right after the Warden came back.
    assert!(matches!(
        w.ask(&Request::DryRun {
            chore: "cut".into()
        }),
        Response::Receipt { .. }
    ));
    let after = last(&w);
    assert!(
        after.contains(&undo_id_of(&before)),
        "the cut run's undo is named nowhere the person looks: {after}"
    );
}

/// **Found by the attack round, fixed.** The sweep kills only
/// the groups of Wardens that are gone, but removes every empty
/// `aromba-cage-*` group, a live Warden's included: one that Warden has
/// just made and bounded and that its child has not joined yet (a probe or
/// a run about to start). That Warden's probe then fails ("This server has
/// no isolation" for its whole life) or its run fails to start. Seen here
/// as a flake: two of these tests starting their Wardens together. Made
/// exact: an empty group named for this test's process (alive), then a
/// Warden started.
#[test]
fn a_warden_starting_does_not_remove_the_empty_group_a_live_warden_just_made() {
    let _serial = serial();
    let described = aromba_warden::cage::limits::global().describe();
    let Some(home) = described
        .split(" under ")
        .nth(1)
        .and_then(|r| r.strip_suffix(')'))
    else {
        eprintln!("no cage groups on this host: {described}");
        return;
    };
    let group = Path::new(home).join(format!("aromba-cage-{}-987654", std::process::id()));
    std::fs::create_dir(&group).unwrap();
    let mut w = Warden::start_process("adv-recov-live-group", &[]);
    w.kill();
    let kept = group.exists();
    let _ = std::fs::remove_dir(&group);
    assert!(
        kept,
        "a live Warden's group ({}) was removed by another Warden's start",
        group.display()
    );
}

/// Holds: a Warden killed in the middle of an undo (thousands of files
/// being put back) comes up again, closes the undo once as interrupted,
/// keeps its claim (a second undo is told one was interrupted, as
/// SECURITY.md says), and nothing of it moves the ladder.
#[test]
fn a_kill_in_the_middle_of_an_undo_closes_it_once_and_keeps_its_claim() {
    let _serial = serial();
    let wipe = owner_chore(
        "wipe-bulk",
        "red",
        "# max_changes: 10000 files, 1 GB\n",
        "[ \"$1\" = --dry-run ] && exit 0\nrm -r TOUCHED/bulk",
    );
    let mut w = Warden::start_process("adv-recov-mid-undo", &[wipe]);
    let bulk = w.touched.join("bulk");
    std::fs::create_dir_all(&bulk).unwrap();
    for i in 0..6000 {
        std::fs::write(bulk.join(i.to_string()), format!("{i}")).unwrap();
    }
    let r = w.control(&Request::ConfirmCap {
        chore: "wipe-bulk".into(),
    });
    assert!(matches!(r, Response::Noted { .. }), "{r:?}");
    let receipt = w.red_run("wipe-bulk");
    assert!(!bulk.exists(), "{receipt}");
    let undo_id = undo_id_of(&receipt);
    let undo = send(
        &w.layout().control_socket(),
        &Request::Undo {
            undo_id: undo_id.clone(),
        },
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::read_dir(&bulk).map_or(0, |d| d.count()) < 50 {
        assert!(Instant::now() < deadline, "the undo never started");
        std::thread::sleep(Duration::from_millis(2));
    }
    w.kill();
    drop(undo);
    let put_back = std::fs::read_dir(&bulk).unwrap().count();
    w.restart();
    each_intent_closed_once(&w);
    journal_verifies(&w);
    let undo_intent = lines(&w)
        .iter()
        .rev()
        .find(|l| l["kind"] == "undo" && l["phase"] == "intent")
        .and_then(|l| l["seq"].as_u64())
        .unwrap();
    let outcome = &outcomes_of(&w, undo_intent)[0];
    eprintln!("killed with {put_back} of 6000 put back; the undo's outcome: {outcome}");
    assert_eq!(outcome["verdict"], "interrupted", "{outcome}");
    match w.control(&Request::Undo { undo_id }) {
        Response::Refused { reason, .. } => {
            assert!(reason.contains("interrupted"), "{reason}")
        }
        other => panic!("a second undo over an interrupted one: {other:?}"),
    }
    assert_eq!(w.status().ladder_name, "normal");
}
