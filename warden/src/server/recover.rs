//! What a Warden that stopped mid-act left open, closed when it starts
//! again.
//!
//! Every act is an intent line before it is done and an outcome line after
//! (`intent.rs`), so an intent without an outcome is an act the Warden was
//! killed during (SIGKILL, the out-of-memory killer, a power cut). At start,
//! before it serves, the Warden reads the journal back to the previous
//! start, and gives each open intent the outcome
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
//! The journal is read back to the previous start's line, across rotated
//! files: every act since is there. An act left open before that (a start
//! killed during its own recovery, then its lines rotated away) is not.

#![forbid(unsafe_code)]

use super::event::{Event, Outcome};
use super::{Shared, journal, write};
use crate::chores::snapshot::{self, SnapshotError};
use crate::journal::{FILE_NAME, read_journal_file, rotated, rotated_count};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// An intent line without an outcome.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct OpenIntent {
    pub(super) seq: u64,
    pub(super) kind: String,
    /// A chore run's chore, mode and undo id, and whether it touches the
    /// quarantine (which undo never restores).
    pub(super) chore: Option<String>,
    pub(super) real: bool,
    pub(super) undo_id: Option<String>,
    pub(super) quarantine: bool,
}

/// How a run owed a receipt ended, as its outcome line says.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Ended {
    /// It ran to its end: its exit code (`None`: killed).
    Ran { exit_code: Option<i64> },
    /// Closed `interrupted` by an earlier start, itself stopped before the
    /// receipt: what the seal found changed.
    Interrupted { changed: Option<String> },
}

/// A run whose outcome the journal has but not its receipt: the Warden
/// stopped between the two (while the chore's actions ran, or while an
/// earlier start closed it).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Unreceipted {
    pub(super) intent: OpenIntent,
    pub(super) ended: Ended,
    pub(super) undo_id: Option<String>,
}

/// What the journal left open.
#[derive(Debug, Default)]
pub(super) struct Open {
    /// Intents no outcome closes.
    pub(super) intents: Vec<OpenIntent>,
    /// Runs with an outcome and no receipt.
    pub(super) unreceipted: Vec<Unreceipted>,
    /// Each chore's latest run (its intent's seq): only its receipt is kept
    /// as the chore's last run.
    pub(super) latest: BTreeMap<String, u64>,
}

/// What the journal in `lines` (oldest first) left open.
pub(super) fn open_acts<'a>(lines: impl Iterator<Item = &'a [u8]>) -> Open {
    let mut open: BTreeMap<u64, OpenIntent> = BTreeMap::new();
    let mut unreceipted: BTreeMap<u64, Unreceipted> = BTreeMap::new();
    let mut latest = BTreeMap::new();
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
                let chore = text("chore");
                if kind == "chore-run"
                    && let Some(c) = &chore
                {
                    latest.insert(c.clone(), seq);
                }
                open.insert(
                    seq,
                    OpenIntent {
                        seq,
                        kind,
                        chore,
                        real: text("mode").as_deref() == Some("real"),
                        undo_id: text("undo_id"),
                        quarantine: v.get("touches_quarantine") == Some(&Value::Bool(true)),
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
                if intent.kind != "chore-run" {
                    continue;
                }
                // A run that ran to its end (its exit code named, or `null`
                // when it was killed), or one an earlier start closed, is
                // owed a receipt.
                let ended = if v.get("exit_code").is_some() {
                    Ended::Ran {
                        exit_code: v.get("exit_code").and_then(Value::as_i64),
                    }
                } else if text("verdict").as_deref() == Some("interrupted") {
                    Ended::Interrupted {
                        changed: text("changed"),
                    }
                } else {
                    continue;
                };
                unreceipted.insert(
                    seq,
                    Unreceipted {
                        ended,
                        undo_id: text("undo_id"),
                        intent,
                    },
                );
            }
            _ if text("kind").as_deref() == Some("receipt") => match intent_seq {
                Some(seq) => {
                    unreceipted.remove(&seq);
                }
                // A receipt of a Warden from before receipts named their
                // run: it followed its run's outcome at once.
                None => {
                    let chore = text("chore");
                    unreceipted.retain(|_, u| u.intent.chore != chore);
                }
            },
            _ => {}
        }
    }
    Open {
        intents: open.into_values().collect(),
        unreceipted: unreceipted.into_values().collect(),
        latest,
    }
}

/// Closes every act the journal shows under way: called once, at start,
/// before the Warden serves. Returns how many it closed.
pub(super) fn close_interrupted(shared: &Shared) -> usize {
    let texts = window(&shared.options.layout.journal_dir.join(FILE_NAME));
    let open = open_acts(texts.iter().rev().flat_map(|t| t.split(|&b| b == b'\n')));
    for run in &open.unreceipted {
        receipt_after(shared, run, &open.latest);
    }
    if !open.intents.is_empty() {
        // Whatever a dead Warden's cages still run is stopped before a
        // snapshot is sealed under them.
        let _ = crate::cage::limits::global();
    }
    for intent in &open.intents {
        close(shared, intent, &open.latest);
    }
    open.intents.len() + open.unreceipted.len()
}

/// The texts of the journal's files recovery reads, newest first: back to
/// the file holding the previous start's line (the line of this start is
/// the newest), or all of them. Every act since that start is in them,
/// however many files its lines filled (found by the attack round: a
/// window of two files missed a run whose lines a flood rotated away).
fn window(current: &Path) -> Vec<Vec<u8>> {
    const STARTED: &[u8] = br#""kind":"warden-started""#;
    let mut texts = Vec::new();
    let mut starts = 0;
    for k in 0..=rotated_count(current) {
        let file = if k == 0 {
            current.to_path_buf()
        } else {
            rotated(current, k)
        };
        let Ok(text) = read_journal_file(&file) else {
            break;
        };
        starts += text
            .windows(STARTED.len())
            .filter(|w| *w == STARTED)
            .count();
        texts.push(text);
        if starts >= 2 {
            break;
        }
    }
    texts
}

/// The receipt of a run that ended before the Warden stopped but was not
/// written: what its outcome line holds.
fn receipt_after(shared: &Shared, run: &Unreceipted, latest: &BTreeMap<String, u64>) {
    let Some(chore) = &run.intent.chore else {
        return;
    };
    let receipt = match &run.ended {
        Ended::Ran { exit_code } => {
            let mut receipt = format!(
                "{chore}: {} run, {}; this receipt is late: the Warden stopped before writing it, so an action of the chore's it had not begun did not run",
                if run.intent.real { "real" } else { "dry" },
                match exit_code {
                    Some(code) => format!("exit {code}"),
                    None => "killed".to_string(),
                }
            );
            if let Some(id) = &run.undo_id {
                receipt.push_str(&format!("; undo id {id} (for 7 days)"));
            }
            receipt
        }
        Ended::Interrupted { changed } => {
            let sealed = run.undo_id.as_ref().map(|id| Sealed {
                id: id.clone(),
                changed: changed.clone().unwrap_or_default(),
                expired: false,
            });
            interrupted_receipt(chore, &run.intent, sealed.as_ref())
        }
    };
    write_receipt(shared, &run.intent, chore, &receipt, latest);
}

/// Journals `receipt` for the run of `chore` at `intent_seq`, and keeps it
/// as the chore's last run when no later run of the chore began.
fn write_receipt(
    shared: &Shared,
    run: &OpenIntent,
    chore: &str,
    receipt: &str,
    latest: &BTreeMap<String, u64>,
) {
    let intent_seq = run.seq;
    if latest.get(chore).is_none_or(|&seq| seq == intent_seq) {
        super::chores::keep_last(&super::chores::runs_dir(shared), chore, run.real, receipt);
    }
    journal(
        shared,
        Event::Receipt {
            chore,
            receipt,
            intent_seq,
        },
    );
}

fn close(shared: &Shared, intent: &OpenIntent, latest: &BTreeMap<String, u64>) {
    // Only a run's intent names its own snapshot; an undo's names the
    // snapshot it was undoing, which is not to be sealed or dropped here.
    let run = intent.kind == "chore-run";
    let sealed = match &intent.undo_id {
        Some(id) if run => seal(shared, id),
        _ => None,
    };
    let outcome = Outcome::Interrupted {
        undo_id: sealed.as_ref().map(|s| s.id.as_str()),
        changed: sealed.as_ref().map(|s| s.changed.as_str()),
    };
    let line = outcome
        .render("interrupted", intent.seq)
        .with_kind(&intent.kind);
    if write(shared, line).is_none() || !run {
        return;
    }
    let Some(chore) = &intent.chore else {
        return;
    };
    let receipt = interrupted_receipt(chore, intent, sealed.as_ref());
    write_receipt(shared, intent, chore, &receipt, latest);
}

/// A run cut short's snapshot, sealed: its undo id, what changed, and
/// whether its undo is past its seven days already (a long power cut).
struct Sealed {
    id: String,
    changed: String,
    expired: bool,
}

/// A run's receipt when the Warden stopped during it.
fn interrupted_receipt(chore: &str, intent: &OpenIntent, sealed: Option<&Sealed>) -> String {
    let mut receipt = format!(
        "{chore}: {} run, interrupted: the Warden stopped while it ran, and the run with it",
        if intent.real { "real" } else { "dry" }
    );
    match sealed {
        Some(s) if s.expired => receipt.push_str(&format!(
            "; changed: {}; its undo ({}) has expired: the run began more than 7 days before the Warden started again",
            s.changed, s.id
        )),
        Some(s) => receipt.push_str(&format!(
            "; changed: {}; undo id {} (for 7 days from the run)",
            s.changed, s.id
        )),
        None => {}
    }
    if intent.quarantine {
        // What the quarantine held before the run was known to the Warden
        // that died only.
        receipt
            .push_str("; what it removed from the quarantine, if anything, undo cannot put back");
    }
    receipt
}

/// Seals the snapshot `id` of a run cut short: its undo id and what the run
/// changed, or `None` when there is nothing to undo (the snapshot was never
/// finished, so the run never started, or the run changed nothing).
fn seal(shared: &Shared, id: &str) -> Option<Sealed> {
    let store = shared.options.layout.snapshots_dir();
    let dir = store.join(id);
    if !dir.is_dir() {
        return None;
    }
    let kept = |changed: String| {
        Some(Sealed {
            id: id.to_string(),
            changed,
            expired: false,
        })
    };
    let snap = match snapshot::load(&store, id) {
        Ok(s) => s,
        // Its take died: the run had not started.
        Err(SnapshotError::Io { .. } | SnapshotError::BadManifest { .. }) => {
            let _ = std::fs::remove_dir_all(&dir);
            return None;
        }
        Err(e) => return kept(format!("its snapshot cannot be read ({e})")),
    };
    let diff = match snap.seal_within(&shared.options.seal_limits) {
        // Sealed before the Warden stopped: what it found is there still.
        Err(SnapshotError::AlreadySealed(_)) => snap.diff(),
        other => other,
    };
    let expired = shared.options.clock.now().saturating_sub(snap.created_at) > snapshot::KEEP_S;
    match diff {
        Ok(d) if d.is_empty() => {
            let _ = snap.discard();
            None
        }
        Ok(d) => Some(Sealed {
            id: id.to_string(),
            changed: d.summary(),
            expired,
        }),
        // The snapshot holds the only copies of what the run removed: kept,
        // and its undo puts back what is missing.
        Err(e) => Some(Sealed {
            id: id.to_string(),
            changed: format!(
                "the seal failed ({e}): undo puts back what the run removed, and names what it cannot put back"
            ),
            expired,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acts(text: &str) -> Open {
        open_acts(text.lines().map(str::as_bytes))
    }

    fn intent(seq: u64, kind: &str, chore: Option<&str>) -> OpenIntent {
        OpenIntent {
            seq,
            kind: kind.into(),
            chore: chore.map(str::to_string),
            real: true,
            undo_id: None,
            quarantine: false,
        }
    }

    #[test]
    fn an_intent_with_its_outcome_is_closed_and_one_without_is_open() {
        let open = acts(concat!(
            r#"{"seq":1,"kind":"approval","phase":"intent"}"#,
            "\n",
            r#"{"seq":2,"kind":"approval","phase":"outcome","intent_seq":1,"verdict":"verified"}"#,
            "\n",
            r#"{"seq":3,"kind":"chore-run","phase":"intent","chore":"wipe","mode":"real","undo_id":"ab","touches_quarantine":true}"#,
            "\n",
            r#"{"seq":4,"event":"warden-started"}"#,
        ));
        assert_eq!(
            open.intents,
            vec![OpenIntent {
                undo_id: Some("ab".into()),
                quarantine: true,
                ..intent(3, "chore-run", Some("wipe"))
            }]
        );
        assert_eq!(open.latest.get("wipe"), Some(&3));
    }

    #[test]
    fn a_torn_or_foreign_line_is_passed_over() {
        let open = acts(concat!(
            r#"{"seq":1,"kind":"undo","phase":"intent"}"#,
            "\n",
            r#"{"seq":2,"kind":"undo","pha"#,
            "\n",
            "not json\n",
            r#"{"seq":3,"phase":"outcome","intent_seq":"1"}"#,
        ));
        assert_eq!(open.intents.len(), 1);
        assert_eq!(open.intents[0].seq, 1);
        assert!(!open.intents[0].real);
    }

    #[test]
    fn a_run_with_its_outcome_but_no_receipt_is_owed_one() {
        let open = acts(concat!(
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
        ));
        assert!(open.intents.is_empty());
        assert_eq!(
            open.unreceipted,
            vec![Unreceipted {
                intent: intent(1, "chore-run", Some("a")),
                ended: Ended::Ran { exit_code: Some(0) },
                undo_id: Some("u1".into()),
            }]
        );
    }

    /// Found by the attack round: a start killed between the `interrupted`
    /// outcome it wrote and the receipt lost the receipt for good.
    #[test]
    fn a_run_closed_interrupted_without_its_receipt_is_owed_one() {
        let open = acts(concat!(
            r#"{"seq":1,"kind":"chore-run","phase":"intent","chore":"a","mode":"real","undo_id":"u1"}"#,
            "\n",
            r#"{"seq":2,"kind":"warden-started"}"#,
            "\n",
            r#"{"seq":3,"kind":"chore-run","phase":"outcome","intent_seq":1,"verdict":"interrupted","undo_id":"u1","changed":"1 removed"}"#,
        ));
        assert_eq!(
            open.unreceipted[0].ended,
            Ended::Interrupted {
                changed: Some("1 removed".into())
            }
        );
    }

    /// Found by the attack round: the journal of an older Warden, whose
    /// receipts name no intent, would have had every run given a false
    /// late receipt on the first start after the upgrade.
    #[test]
    fn a_receipt_of_an_older_warden_settles_the_run_before_it() {
        let open = acts(concat!(
            r#"{"seq":1,"kind":"chore-run","phase":"intent","chore":"a","mode":"real"}"#,
            "\n",
            r#"{"seq":2,"kind":"chore-run","phase":"outcome","intent_seq":1,"exit_code":0,"verdict":"clean"}"#,
            "\n",
            r#"{"seq":3,"kind":"receipt","chore":"a","receipt":"a: real run, exit 0"}"#,
        ));
        assert!(open.unreceipted.is_empty());
    }

    #[test]
    fn an_interrupted_receipt_names_the_undo_of_what_changed_or_that_it_expired() {
        let mut sealed = Sealed {
            id: "0123".to_string(),
            changed: "0 added, 2 removed, 0 changed".to_string(),
            expired: false,
        };
        let run = intent(1, "chore-run", Some("wipe"));
        assert_eq!(
            interrupted_receipt("wipe", &run, Some(&sealed)),
            "wipe: real run, interrupted: the Warden stopped while it ran, and the run with it; changed: 0 added, 2 removed, 0 changed; undo id 0123 (for 7 days from the run)"
        );
        sealed.expired = true;
        assert!(
            interrupted_receipt("wipe", &run, Some(&sealed)).ends_with(
                "its undo (0123) has expired: the run began more than 7 days before the Warden started again"
            )
        );
        let dry = OpenIntent {
            real: false,
            quarantine: true,
            ..intent(2, "chore-run", Some("tidy"))
        };
        assert_eq!(
            interrupted_receipt("tidy", &dry, None),
            "tidy: dry run, interrupted: the Warden stopped while it ran, and the run with it; what it removed from the quarantine, if anything, undo cannot put back"
        );
    }
}
