//! The Warden's half of the chaos test (issue 35: "kill everything, lose
//! nothing"). The Warden runs as a process of its own
//! (`aromba-test-warden`), bound to the test person's account, with one
//! red chore that removes a round's files and writes new ones, slowly. Each
//! round the person approves a run in the Mini App and, at a seeded random
//! moment, the test either SIGKILLs the Warden (during the approval, the
//! snapshot, the run or its receipt) and starts it again, or drops the
//! connection the approval came on (the Worker killed while it waited), or
//! lets it be. The person then opens the app again and approves once more,
//! as someone who saw no answer does. After a kill, the run the Warden was
//! killed during is undone from the root terminal when the journal offers
//! an undo for it.
//!
//! The checker reads the Warden's journal: it verifies; every intent has
//! exactly one outcome (an act cut short is closed `interrupted` when the
//! Warden starts again); no approval was verified twice and no approved run
//! ran twice; every run that ran or was cut short has exactly one receipt
//! naming it; a run that changed the round's files left an undo id, and
//! its undo put them back; and nothing of this moved the ladder.
//!
//! The seed is printed; `AROMBA_CHAOS_SEED=N` runs that schedule again.

use aromba_testkit::telegram::PERSON;
use aromba_testkit::warden::process::{answer, send};
use aromba_testkit::warden::{PROCESS_AHEAD, Warden, now, owner_chore};
use aromba_warden::journal::{AuditKey, verify};
use aromba_warden::ladder::Clock;
use aromba_warden_proto::{Request, Response};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

const ROUNDS: usize = 14;
/// Files of its round a run removes, one by one.
const OLD_FILES: usize = 5;
/// Files a run writes, one by one.
const NEW_FILES: usize = 8;

/// Removes the round's files, then writes new ones, a pause between each:
/// a run of about half a second, long enough to be killed in.
fn shuffle_chore() -> (String, String) {
    owner_chore(
        "shuffle",
        "red",
        "",
        &format!(
            "[ \"$1\" = --dry-run ] && exit 0\n\
             r=$(cat TOUCHED/round)\n\
             for f in TOUCHED/old-$r-*; do rm -f \"$f\"; sleep 0.03; done\n\
             for i in $(seq 1 {NEW_FILES}); do echo \"$i\" > TOUCHED/new-$r-$i; sleep 0.03; done"
        ),
    )
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Chaos {
    /// Left to finish.
    None,
    /// The Warden SIGKILLed this long after the tap was sent.
    KillWarden(u64),
    /// The tap's connection dropped this long after it was sent.
    DropConnection(u64),
}

fn journal_lines(w: &Warden) -> Vec<Value> {
    w.journal()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a whole journal line"))
        .collect()
}

/// Waits (up to 20 s) until the journal has a receipt for every run of
/// `chore` it has an intent of: the run a dropped connection left going.
fn runs_settled(w: &Warden) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let lines = journal_lines(w);
        let intents: BTreeSet<u64> = lines
            .iter()
            .filter(|l| l["kind"] == "chore-run" && l["phase"] == "intent")
            .filter_map(|l| l["seq"].as_u64())
            .collect();
        let closed: BTreeSet<u64> = lines
            .iter()
            .filter(|l| l["kind"] == "chore-run" && l["phase"] == "outcome")
            .filter_map(|l| l["intent_seq"].as_u64())
            .collect();
        if intents.is_subset(&closed) {
            return;
        }
        assert!(Instant::now() < deadline, "a run never ended");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn undo_id_of(text: &str) -> Option<String> {
    let at = text.find("undo id ")? + "undo id ".len();
    text.get(at..at + 32).map(str::to_string)
}

struct Round {
    round: usize,
    action: String,
    chaos: Chaos,
}

#[test]
fn a_warden_killed_during_approved_runs_loses_no_receipt_runs_nothing_twice_and_undoes_what_it_cut()
{
    let seed = std::env::var("AROMBA_CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    eprintln!("warden chaos seed: {seed} (AROMBA_CHAOS_SEED={seed} replays it)");
    let mut rng = StdRng::seed_from_u64(seed);
    let mut w = Warden::start_process("warden-killed", &[shuffle_chore()]);
    w.dry_run_shown("shuffle");
    let mut rounds = Vec::new();
    let mut kills = 0;
    for round in 0..ROUNDS {
        for k in 0..OLD_FILES {
            std::fs::write(w.touched.join(format!("old-{round}-{k}")), "old").unwrap();
        }
        std::fs::write(w.touched.join("round"), round.to_string()).unwrap();
        let (action, _server, param) = w.proposal(&Request::Propose {
            chore: "shuffle".into(),
        });
        let param = param.expect("a red run is approved in the app");
        w.keep_time();
        let opened = w.clock.now();
        let tap = w.in_app(PERSON, &param);
        // The first kill lands in the middle of the run whatever the seed
        // (the run starts a few milliseconds after the tap, and takes about
        // half a second); the others anywhere.
        let chaos = match rng.random_range(0..5) {
            _ if round == 0 => Chaos::KillWarden(250),
            0 => Chaos::None,
            1 => Chaos::DropConnection(rng.random_range(0..500)),
            _ => Chaos::KillWarden(rng.random_range(0..700)),
        };
        let socket = w.layout().worker_socket();
        let stream = send(&socket, &tap);
        match chaos {
            Chaos::None => {
                let r = answer(stream);
                assert!(
                    matches!(r, Some(Response::Receipt { .. })),
                    "round {round}: {r:?}"
                );
            }
            Chaos::DropConnection(ms) => {
                std::thread::sleep(Duration::from_millis(ms));
                drop(stream);
                runs_settled(&w);
            }
            Chaos::KillWarden(ms) => {
                std::thread::sleep(Duration::from_millis(ms));
                w.kill();
                kills += 1;
                drop(stream);
                w.restart();
            }
        }
        // With no answer (or to be sure), the person opens the app again
        // and approves: a new launch. A run begun already is not begun
        // again, and nothing of this is an anomaly.
        while now() + PROCESS_AHEAD <= opened {
            std::thread::sleep(Duration::from_millis(50));
        }
        w.keep_time();
        let ran = journal_lines(&w).iter().any(|l| {
            l["kind"] == "chore-run" && l["phase"] == "intent" && l["action_id"] == action.as_str()
        });
        let again = answer(send(&socket, &w.in_app(PERSON, &param)));
        assert!(
            !(ran && matches!(again, Some(Response::Receipt { .. }))),
            "round {round}: the second approval ran the chore again: {again:?}"
        );
        runs_settled(&w);
        if let Chaos::KillWarden(_) = chaos {
            undo_what_was_cut(&w, round, &action);
        }
        let status = w.status();
        assert_eq!(
            status.ladder_name,
            "normal",
            "round {round} ({chaos:?}): kills are not an anomaly: {}\n{}",
            status.ladder_reason,
            w.journal()
        );
        rounds.push(Round {
            round,
            action,
            chaos,
        });
    }
    let lines = journal_lines(&w);
    let interrupted: Vec<&Value> = lines
        .iter()
        .filter(|l| l["kind"] == "chore-run" && l["verdict"] == "interrupted")
        .collect();
    let undone = lines
        .iter()
        .filter(|l| l["kind"] == "undo" && l["verdict"] == "undone")
        .count();
    eprintln!(
        "warden chaos: {ROUNDS} rounds, {kills} kills; {} runs interrupted, {} of them with changes, {undone} undone; schedule {:?}",
        interrupted.len(),
        interrupted
            .iter()
            .filter(|l| l["undo_id"].is_string())
            .count(),
        rounds.iter().map(|r| r.chaos).collect::<Vec<_>>()
    );
    assert!(
        interrupted.iter().any(|l| l["undo_id"].is_string()),
        "the first round's kill, mid-run, left an interrupted run to undo"
    );
    check(&w, &rounds);
}

/// After a kill in `round`: the run approved as `action`, if it started,
/// changed the round's files only with an undo id to take them back — and
/// that undo, asked from the root terminal, takes them back.
fn undo_what_was_cut(w: &Warden, round: usize, action: &str) {
    let lines = journal_lines(w);
    let Some(intent) = lines
        .iter()
        .find(|l| l["kind"] == "chore-run" && l["phase"] == "intent" && l["action_id"] == action)
    else {
        return; // killed before the run's intent: nothing ran
    };
    let seq = intent["seq"].as_u64().unwrap();
    let outcome = lines
        .iter()
        .find(|l| l["kind"] == "chore-run" && l["intent_seq"] == seq)
        .expect("the run's outcome, written when the Warden started again");
    let old_left = (0..OLD_FILES)
        .filter(|k| w.touched.join(format!("old-{round}-{k}")).exists())
        .count();
    let new_made = (1..=NEW_FILES)
        .filter(|i| w.touched.join(format!("new-{round}-{i}")).exists())
        .count();
    let changed = old_left < OLD_FILES || new_made > 0;
    let Some(undo_id) = outcome["undo_id"].as_str() else {
        assert!(
            !changed,
            "round {round}: the run changed files ({old_left} old left, {new_made} new) and left no undo: {outcome:?}"
        );
        return;
    };
    match w.control(&Request::Undo {
        undo_id: undo_id.into(),
    }) {
        Response::Receipt { ok: true, .. } => {}
        other => panic!("round {round}: the undo of a run cut short failed: {other:?}"),
    }
    for k in 0..OLD_FILES {
        assert!(
            w.touched.join(format!("old-{round}-{k}")).exists(),
            "round {round}: undo did not put back old-{round}-{k}"
        );
    }
    for i in 1..=NEW_FILES {
        assert!(
            !w.touched.join(format!("new-{round}-{i}")).exists(),
            "round {round}: undo left new-{round}-{i}"
        );
    }
}

fn check(w: &Warden, rounds: &[Round]) {
    let layout = w.layout();
    let key = layout.audit_key();
    let key = key
        .exists()
        .then(|| AuditKey::load(&key, Some(&layout.journal_dir)).unwrap());
    let report = verify(&layout.journal_file(), key.as_ref())
        .unwrap_or_else(|e| panic!("the journal does not verify: {e}"));
    let lines = journal_lines(w);
    assert_eq!(report.lines, lines.len() as u64);

    let mut intents: BTreeMap<u64, &Value> = BTreeMap::new();
    let mut outcomes: BTreeMap<u64, Vec<&Value>> = BTreeMap::new();
    let mut receipts: BTreeMap<u64, usize> = BTreeMap::new();
    for l in &lines {
        match l.get("phase").and_then(Value::as_str) {
            Some("intent") => {
                intents.insert(l["seq"].as_u64().unwrap(), l);
            }
            Some("outcome") => outcomes
                .entry(l["intent_seq"].as_u64().unwrap())
                .or_default()
                .push(l),
            _ if l["kind"] == "receipt" => {
                *receipts
                    .entry(l["intent_seq"].as_u64().unwrap())
                    .or_default() += 1;
            }
            _ => {}
        }
    }
    for (seq, intent) in &intents {
        let n = outcomes.get(seq).map_or(0, Vec::len);
        assert_eq!(n, 1, "intent {seq} has {n} outcomes: {intent:?}");
    }
    assert!(
        outcomes.keys().all(|s| intents.contains_key(s)),
        "an outcome of no intent"
    );
    for r in rounds {
        let of_action = |kind: &str| -> Vec<u64> {
            intents
                .iter()
                .filter(|(_, l)| l["kind"] == kind && l["action_id"] == r.action.as_str())
                .map(|(s, _)| *s)
                .collect()
        };
        let verified = of_action("approval")
            .iter()
            .filter(|s| outcomes[s][0]["verdict"] == "verified")
            .count();
        assert!(
            verified <= 1,
            "round {}: approved {verified} times",
            r.round
        );
        let runs = of_action("chore-run");
        assert!(
            runs.len() <= verified,
            "round {}: {} runs on {verified} approvals",
            r.round,
            runs.len()
        );
        if r.chaos != Chaos::None && runs.is_empty() {
            continue;
        }
        assert_eq!(runs.len(), 1, "round {} ({:?}) never ran", r.round, r.chaos);
        let outcome = outcomes[&runs[0]][0];
        let verdict = outcome["verdict"].as_str().unwrap_or("");
        // A run that ran to an end (its exit code named) or was cut short.
        if outcome.get("exit_code").is_some() || verdict == "interrupted" {
            assert_eq!(
                receipts.get(&runs[0]).copied().unwrap_or(0),
                1,
                "round {}: the run's receipts ({verdict})",
                r.round
            );
        }
        if matches!(r.chaos, Chaos::None | Chaos::DropConnection(_)) {
            assert_eq!(verdict, "clean", "round {}: {outcome:?}", r.round);
            assert!(
                outcome["undo_id"].as_str().is_some(),
                "round {}: a run that changed files with no undo id",
                r.round
            );
        }
    }
    // A receipt kept for the chat names the undo the journal holds.
    let last = std::fs::read_to_string(layout.state_dir.join("runs/shuffle.last")).unwrap();
    if let Some(id) = undo_id_of(&last) {
        assert!(w.journal().contains(&id));
    }
    let status = w.status();
    assert_eq!(
        status.ladder_name, "normal",
        "kills are not an anomaly: {}",
        status.ladder_reason
    );
}
