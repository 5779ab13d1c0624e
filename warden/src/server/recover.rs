//! What a Warden that stopped mid-act left open, closed when it starts
//! again.
//!
//! Every act is an intent line before it is done and an outcome line after
//! (`intent.rs`), so an intent without an outcome is an act the Warden was
//! killed during (SIGKILL, the out-of-memory killer, a power cut). At start,
//! before it serves, the Warden reads the journal's current file and the
//! newest rotated one, and gives each open intent the outcome
//! `interrupted`. A red run's intent names the undo id of its snapshot:
//! that snapshot is sealed now (the run's cage died with the Warden: it is
//! started with `--die-with-parent`, and leftover cage groups are killed
//! first), so the run's changes are named and can be undone, and the run's
//! receipt is journaled and kept as its last run. A run that ended but
//! whose receipt was not written (the Warden died between the two, while
//! the chore's actions ran) gets its receipt from its outcome line. An
//! undo cut short keeps
//! its claim on the snapshot, as an undo that failed part-way does; a
//! chore's action (apt, systemctl, run outside any cage) may have finished
//! after the Warden died, and its outcome says it may have.
//!
//! An intent older than the newest rotated file is not looked for: rotation
//! happens at 8 MiB of lines, far more than one act writes while it runs.

#![forbid(unsafe_code)]

use super::event::{Event, Outcome};
use super::{Shared, journal, write};
use crate::chores::snapshot::{self, SnapshotError};
use crate::journal::{FILE_NAME, read_journal_file, rotated};
use serde_json::Value;
use std::collections::BTreeMap;

/// An intent line without an outcome.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct OpenIntent {
    pub(super) seq: u64,
    pub(super) kind: String,
    /// A chore run's chore, mode and undo id.
    pub(super) chore: Option<String>,
    pub(super) real: bool,
    pub(super) undo_id: Option<String>,
}

/// A run whose outcome the journal has but not its receipt: the Warden
/// stopped between the two (while the chore's actions ran, say).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Unreceipted {
    pub(super) intent: OpenIntent,
    pub(super) exit_code: Option<i64>,
    pub(super) undo_id: Option<String>,
}

/// What the journal in `lines` (oldest first) left open: intents no
/// outcome closes, and runs that ran to an end with no receipt.
pub(super) fn open_acts<'a>(
    lines: impl Iterator<Item = &'a [u8]>,
) -> (Vec<OpenIntent>, Vec<Unreceipted>) {
    let mut open: BTreeMap<u64, OpenIntent> = BTreeMap::new();
    let mut unreceipted: BTreeMap<u64, Unreceipted> = BTreeMap::new();
    for line in lines {
        let Ok(v) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        let intent_seq = v.get("intent_seq").and_then(Value::as_u64);
        match v.get("phase").and_then(Value::as_str) {
            Some("intent") => {
                let (Some(seq), Some(kind)) = (v.get("seq").and_then(Value::as_u64), text("kind"))
                else {
                    continue;
                };
                open.insert(
                    seq,
                    OpenIntent {
                        seq,
                        kind,
                        chore: text("chore"),
                        real: text("mode").as_deref() == Some("real"),
                        undo_id: text("undo_id"),
                    },
                );
            }
            Some("outcome") => {
                let Some(seq) = intent_seq else {
                    continue;
                };
                let Some(intent) = open.remove(&seq) else {
                    continue;
                };
                // A run that ran to its end (its exit code is named, or
                // `null` when it was killed) is owed a receipt.
                if intent.kind == "chore-run" && v.get("exit_code").is_some() {
                    unreceipted.insert(
                        seq,
                        Unreceipted {
                            exit_code: v.get("exit_code").and_then(Value::as_i64),
                            undo_id: text("undo_id"),
                            intent,
                        },
                    );
                }
            }
            _ if text("kind").as_deref() == Some("receipt") => {
                if let Some(seq) = intent_seq {
                    unreceipted.remove(&seq);
                }
            }
            _ => {}
        }
    }
    (
        open.into_values().collect(),
        unreceipted.into_values().collect(),
    )
}

/// Closes every act the journal shows under way: called once, at start,
/// before the Warden serves. Returns how many it closed.
pub(super) fn close_interrupted(shared: &Shared) -> usize {
    let path = shared.options.layout.journal_dir.join(FILE_NAME);
    let older = read_journal_file(&rotated(&path, 1)).unwrap_or_default();
    let current = match read_journal_file(&path) {
        Ok(t) => t,
        Err(_) => return 0,
    };
    let (open, unreceipted) = open_acts(
        older
            .split(|&b| b == b'\n')
            .chain(current.split(|&b| b == b'\n')),
    );
    for run in &unreceipted {
        receipt_after(shared, run);
    }
    if open.is_empty() {
        return unreceipted.len();
    }
    // Whatever a dead Warden's cages still run is stopped before a snapshot
    // is sealed under them.
    let _ = crate::cage::limits::global();
    for intent in &open {
        close(shared, intent);
    }
    open.len() + unreceipted.len()
}

/// The receipt of a run that ended before the Warden stopped but was not
/// written: what its outcome line holds.
fn receipt_after(shared: &Shared, run: &Unreceipted) {
    let Some(chore) = &run.intent.chore else {
        return;
    };
    let mut receipt = format!(
        "{chore}: {} run, {}; this receipt is late: the Warden stopped before writing it, so an action of the chore's it had not begun did not run",
        if run.intent.real { "real" } else { "dry" },
        match run.exit_code {
            Some(code) => format!("exit {code}"),
            None => "killed".to_string(),
        }
    );
    if let Some(id) = &run.undo_id {
        receipt.push_str(&format!("; undo id {id} (for 7 days)"));
    }
    write_receipt(shared, chore, &receipt, run.intent.seq);
}

/// Journals `receipt` for the run of `chore` at `intent_seq`, and keeps it
/// as the chore's last run.
fn write_receipt(shared: &Shared, chore: &str, receipt: &str, intent_seq: u64) {
    let _ = std::fs::write(
        super::chores::runs_dir(shared).join(format!("{chore}.last")),
        receipt.as_bytes(),
    );
    journal(
        shared,
        Event::Receipt {
            chore,
            receipt,
            intent_seq,
        },
    );
}

fn close(shared: &Shared, intent: &OpenIntent) {
    let sealed = intent.undo_id.as_deref().and_then(|id| seal(shared, id));
    let changed = sealed.as_ref().map(|(_, summary)| summary.as_str());
    let undo_id = sealed.as_ref().map(|(id, _)| id.as_str());
    let outcome = Outcome::Interrupted { undo_id, changed };
    let line = outcome
        .render("interrupted", intent.seq)
        .with_kind(&intent.kind);
    if write(shared, line).is_none() {
        return;
    }
    if intent.kind != "chore-run" {
        return;
    }
    let Some(chore) = &intent.chore else {
        return;
    };
    let receipt = interrupted_receipt(chore, intent.real, sealed.as_ref());
    write_receipt(shared, chore, &receipt, intent.seq);
}

/// A run's receipt when the Warden stopped during it.
fn interrupted_receipt(chore: &str, real: bool, sealed: Option<&(String, String)>) -> String {
    let mut receipt = format!(
        "{chore}: {} run, interrupted: the Warden stopped while it ran, and the run with it",
        if real { "real" } else { "dry" }
    );
    if let Some((id, summary)) = sealed {
        receipt.push_str(&format!("; changed: {summary}; undo id {id} (for 7 days)"));
    }
    receipt
}

/// Seals the snapshot `id` of a run cut short: its undo id and what the run
/// changed, or `None` when there is nothing to undo (the snapshot was never
/// finished, so the run never started, or the run changed nothing).
fn seal(shared: &Shared, id: &str) -> Option<(String, String)> {
    let store = shared.options.layout.snapshots_dir();
    let dir = store.join(id);
    if !dir.is_dir() {
        return None;
    }
    let snap = match snapshot::load(&store, id) {
        Ok(s) => s,
        // Its take died: the run had not started.
        Err(SnapshotError::Io { .. } | SnapshotError::BadManifest { .. }) => {
            let _ = std::fs::remove_dir_all(&dir);
            return None;
        }
        Err(e) => return Some((id.to_string(), format!("its snapshot cannot be read ({e})"))),
    };
    let diff = match snap.seal_within(&shared.options.seal_limits) {
        // Sealed before the Warden stopped: what it found is there still.
        Err(SnapshotError::AlreadySealed(_)) => snap.diff(),
        other => other,
    };
    match diff {
        Ok(d) if d.is_empty() => {
            let _ = snap.discard();
            None
        }
        Ok(d) => Some((id.to_string(), d.summary())),
        // The snapshot holds the only copies of what the run removed: kept,
        // and its undo puts back what is missing.
        Err(e) => Some((
            id.to_string(),
            format!(
                "the seal failed ({e}): undo puts back what the run removed, and names what it cannot put back"
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<OpenIntent> {
        open_acts(text.lines().map(str::as_bytes)).0
    }

    #[test]
    fn an_intent_with_its_outcome_is_closed_and_one_without_is_open() {
        let open = lines(concat!(
            r#"{"seq":1,"kind":"approval","phase":"intent"}"#,
            "\n",
            r#"{"seq":2,"kind":"approval","phase":"outcome","intent_seq":1,"verdict":"verified"}"#,
            "\n",
            r#"{"seq":3,"kind":"chore-run","phase":"intent","chore":"wipe","mode":"real","undo_id":"ab"}"#,
            "\n",
            r#"{"seq":4,"event":"warden-started"}"#,
        ));
        assert_eq!(
            open,
            vec![OpenIntent {
                seq: 3,
                kind: "chore-run".into(),
                chore: Some("wipe".into()),
                real: true,
                undo_id: Some("ab".into()),
            }]
        );
    }

    #[test]
    fn a_torn_or_foreign_line_is_passed_over() {
        let open = lines(concat!(
            r#"{"seq":1,"kind":"undo","phase":"intent"}"#,
            "\n",
            r#"{"seq":2,"kind":"undo","pha"#,
            "\n",
            "not json\n",
            r#"{"seq":3,"phase":"outcome","intent_seq":"1"}"#,
        ));
        assert_eq!(open.len(), 1);
        assert_eq!(open[0].seq, 1);
        assert!(!open[0].real);
    }

    #[test]
    fn a_run_with_its_outcome_but_no_receipt_is_owed_one() {
        let (open, owed) = open_acts(
            concat!(
                r#"{"seq":1,"kind":"chore-run","phase":"intent","chore":"a","mode":"real"}"#,
                "\n",
                r#"{"seq":2,"kind":"chore-run","phase":"outcome","intent_seq":1,"exit_code":0,"undo_id":"u1","verdict":"clean"}"#,
                "\n",
                r#"{"seq":3,"kind":"chore-run","phase":"intent","chore":"b","mode":"real"}"#,
                "\n",
                r#"{"seq":4,"kind":"chore-run","phase":"outcome","intent_seq":3,"exit_code":0,"verdict":"clean"}"#,
                "\n",
                r#"{"seq":5,"kind":"receipt","chore":"b","intent_seq":3}"#,
                "\n",
                r#"{"seq":6,"kind":"chore-run","phase":"intent","chore":"c","mode":"real"}"#,
                "\n",
                r#"{"seq":7,"kind":"chore-run","phase":"outcome","intent_seq":6,"reason":"refused","verdict":"refused"}"#,
            )
            .lines()
            .map(str::as_bytes),
        );
        assert!(open.is_empty());
        assert_eq!(owed.len(), 1);
        assert_eq!(owed[0].intent.chore.as_deref(), Some("a"));
        assert_eq!(
            (owed[0].exit_code, owed[0].undo_id.as_deref()),
            (Some(0), Some("u1"))
        );
    }

    #[test]
    fn an_interrupted_receipt_names_the_undo_of_what_changed() {
        let sealed = (
            "0123".to_string(),
            "0 added, 2 removed, 0 changed".to_string(),
        );
        assert_eq!(
            interrupted_receipt("wipe", true, Some(&sealed)),
            "wipe: real run, interrupted: the Warden stopped while it ran, and the run with it; changed: 0 added, 2 removed, 0 changed; undo id 0123 (for 7 days)"
        );
        assert_eq!(
            interrupted_receipt("tidy", false, None),
            "tidy: dry run, interrupted: the Warden stopped while it ran, and the run with it"
        );
    }
}
