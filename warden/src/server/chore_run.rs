//! A chore's run, phase by phase, each a function of its own:
//!
//! 1. [`admit`] — the ladder below Freeze, a real run's dry run seen, one
//!    change at a time, and the intent journaled before anything is done
//!    (a refusal here is journaled too);
//! 2. [`prepare`] — for a red run that may change files, the rules checked
//!    and then the snapshot its Undo needs; what the quarantine held when
//!    the run may write there;
//! 3. [`run_caged`] — the run in its cage, and what it removed from the
//!    quarantine (which no Undo puts back);
//! 4. [`settle`] — the snapshot sealed (or dropped when nothing ran or
//!    nothing changed), the verdict and the outcome journaled, the
//!    signals a run can raise;
//! 5. [`deliver`] — the receipt ([`receipt_line`], pure), the chore's
//!    actions once its outcome is journaled, the records later runs read,
//!    the receipt journaled and answered.

#![forbid(unsafe_code)]

use super::chores::{RunSource, chore_action, expand_action, frozen, quarantine_held, runs_dir};
use super::chores::{snapshot_roots, take_snapshot};
use super::event::{Event, Outcome, RunEnd, RunLeft};
use super::intent::{Intent, intend, outcome_not_journaled};
use super::owner::cap_confirmed;
use super::{Shared, journal, raise};
use crate::chores::header::Color;
use crate::chores::run::{self as run, Chore, Mode, Report, RunError};
use crate::chores::snapshot;
use crate::exec;
use crate::signal::Signal;
use crate::skills::{Settings, Skill};
use aromba_warden_proto::Response;
use std::collections::BTreeMap;
use std::ops::ControlFlow::{self, Break, Continue};
use std::path::PathBuf;
use std::time::Duration;

/// Runs `chore` as found (a tap's approval checked this very one). The
/// run is journaled — what, how and on whose approval — before anything
/// is done for it (snapshot, cage, actions), and refused when that line
/// cannot be written; its outcome and receipt are journaled after.
pub(super) fn run_chore(
    shared: &Shared,
    chore: Chore,
    dry_run: bool,
    source: RunSource,
) -> Response {
    let admitted = match admit(shared, &chore, dry_run, source) {
        Continue(a) => a,
        Break(refused) => return refused,
    };
    let prepared = match prepare(shared, &chore, &admitted) {
        Continue(p) => p,
        Break(refused) => return refused,
    };
    let ran = run_caged(shared, &chore, &admitted, &prepared);
    let settled = match settle(shared, &chore, &admitted, prepared, ran) {
        Continue(s) => s,
        Break(failed) => return failed,
    };
    deliver(shared, &chore, &admitted, settled)
}

/// A run let in: how it runs, on whose approval, and its intent in the
/// journal. Holds the one-change-at-a-time guard of a real run until the
/// run's answer is written.
struct Admitted<'a> {
    mode: Mode,
    source: RunSource,
    ctx: run::Context<'a>,
    now: u64,
    /// The Warden's records of this chore's runs.
    runs: PathBuf,
    /// The record that its dry run was seen.
    seen: PathBuf,
    intent: Intent,
    /// A red run's snapshot's id, named in its intent.
    undo_id: Option<String>,
    _changing: Option<std::sync::MutexGuard<'a, ()>>,
}

/// A skill's chore's skill, as installed and verified now (once a run):
/// `None` for any other chore.
fn skill_of(shared: &Shared, chore: &Chore) -> Result<Option<(Skill, Settings)>, String> {
    let crate::chores::run::Origin::Skill(skill) = &chore.origin else {
        return Ok(None);
    };
    let trust = super::chores::skill_trust(shared);
    let installed = match crate::skills::installed(&trust, skill) {
        Some(Ok(s)) => s,
        Some(Err(e)) => return Err(e),
        None => return Err(format!("no skill named {skill} is installed")),
    };
    let settings = crate::skills::settings(&trust, &installed);
    Ok(Some((installed, settings)))
}

/// What a skill's chore gets of its skill's settings: each as an
/// environment variable, and the secrets' values to take out of its
/// output; refused while one is not set.
fn skill_environment(
    chore: &Chore,
    skill: Option<&(Skill, Settings)>,
) -> Result<crate::skills::Environment, String> {
    let Some((installed, settings)) = skill else {
        return Ok(Default::default());
    };
    let name = &installed.manifest.name;
    // Its own folders (`/var/cache/aromba-restic`), which nothing else
    // makes: made before its first run, and again if removed since.
    crate::skills::make_writes(&installed.manifest)?;
    let unset = installed.unset(settings);
    if !unset.is_empty() {
        return Err(format!(
            "{} needs {name}'s settings first: {} (from a root terminal: aromba skill set {name} NAME)",
            chore.header.name,
            unset.join(", ")
        ));
    }
    Ok(installed.environment(settings, true))
}

/// The hosts a skill's chore with network may reach through the proxy:
/// those its manifest declares and the PIN granted; `None` for any other
/// chore, which gets no proxy.
fn egress_plan<'a>(
    shared: &'a Shared,
    chore: &Chore,
    skill: Option<&(Skill, Settings)>,
) -> Option<crate::egress::Plan<'a>> {
    let (installed, settings) = skill?;
    if !chore.header.network {
        return None;
    }
    let trust = super::chores::skill_trust(shared);
    let granted = crate::skills::network_granted(&trust, &installed.manifest.name);
    let hosts = installed
        .host_addresses(settings)
        .into_iter()
        .flatten()
        .filter(|a| granted.contains(a))
        .filter_map(|a| {
            let (name, port) = a.rsplit_once(':')?;
            Some((name.to_string(), port.parse().ok()?))
        })
        .collect();
    let name = chore.header.name.clone();
    Some(crate::egress::Plan {
        hosts,
        resolver: &shared.options.egress_resolver,
        journal: Box::new(move |connection| {
            journal(
                shared,
                Event::Egress {
                    chore: &name,
                    connection,
                },
            )
            .is_some()
        }),
    })
}

/// Phase 1: whether the run may start; its intent journaled.
fn admit<'a>(
    shared: &'a Shared,
    chore: &Chore,
    dry_run: bool,
    source: RunSource,
) -> ControlFlow<Response, Admitted<'a>> {
    let name = chore.header.name.as_str();
    let mode = if dry_run { Mode::DryRun } else { Mode::Real };
    // Refused before anything runs, and journaled all the same.
    let refuse = |reason: String| {
        let line = Event::ChoreRunRefused {
            chore: name,
            mode,
            source: &source,
            reason: &reason,
        };
        let journal_seq = journal(shared, line);
        Response::Refused {
            reason,
            journal_seq,
        }
    };
    if frozen(shared) {
        return Break(refuse(
            "the ladder is at Freeze or above: no chore runs until it comes down".into(),
        ));
    }
    let runs = runs_dir(shared);
    let seen = runs.join(format!("{name}.dry-run-seen"));
    if mode == Mode::Real && !super::chores::dry_run_seen(shared, chore) {
        return Break(refuse(format!(
            "{name}'s first real run needs a dry run of this script you saw first: `aromba chore run {name} --dry-run`"
        )));
    }
    let skill = match skill_of(shared, chore) {
        Ok(s) => s,
        Err(why) => return Break(refuse(why)),
    };
    let (settings, secrets) = match skill_environment(chore, skill.as_ref()) {
        Ok(e) => e,
        Err(why) => return Break(refuse(why)),
    };
    let now = shared.options.clock.now();
    let days_installed = shared
        .installed_at()
        .map_or(0, |at| now.saturating_sub(at) / 86_400);
    let ctx = run::Context {
        settings,
        secrets,
        layout: &shared.options.layout,
        isolation: shared.isolation.starts_with(super::watch::ISOLATED),
        days_installed,
        cap_confirmed: cap_confirmed(shared, chore),
        cap_interval: Duration::from_secs(5),
        timeout: Duration::from_secs(900),
        halt: Some(shared.run_switch()),
        egress: egress_plan(shared, chore, skill.as_ref()),
    };
    let changing = if mode == Mode::Real {
        match shared.one_change_at_a_time() {
            Ok(g) => Some(g),
            Err(why) => return Break(refuse(why)),
        }
    } else {
        None
    };
    let script_sha256 = crate::journal::sha256_hex(chore.script.as_bytes());
    // Named before the intent, so a Warden that dies during the run finds
    // the snapshot from the journal when it starts again (`recover.rs`).
    let red_real = mode == Mode::Real && chore.header.color == Color::Red;
    let undo_id = if red_real && !snapshot_roots(shared, chore).is_empty() {
        match crate::approvals::new_id(16) {
            Ok(id) => Some(id),
            Err(e) => return Break(refuse(format!("cannot make an undo id: {e}"))),
        }
    } else {
        None
    };
    let act = Event::ChoreRun {
        chore: name,
        mode,
        color: chore.header.color,
        script_sha256: &script_sha256,
        source: &source,
        undo_id: undo_id.as_deref(),
        touches_quarantine: red_real
            && chore
                .header
                .touches
                .contains(&shared.options.layout.quarantine_dir),
    };
    let intent = match intend(shared, act) {
        Ok(i) => i,
        Err(e) => return Break(e.into()),
    };
    let _ = std::fs::create_dir_all(&runs);
    Continue(Admitted {
        mode,
        source,
        ctx,
        now,
        runs,
        seen,
        intent,
        undo_id,
        _changing: changing,
    })
}

/// What the quarantine held: each path with its inode and change time.
type Held = BTreeMap<PathBuf, (u64, i64, i64)>;

/// What a run needs made before it starts.
struct Prepared {
    /// A red run's snapshot of its touches, for Undo.
    snap: Option<snapshot::Snapshot>,
    /// What the quarantine held before a red run that may write it (`None`
    /// inside: it could not be listed).
    held: Option<Option<Held>>,
}

/// Phase 2: a red run that may change files snapshots them first (the
/// rules checked before, so a refused run costs no snapshot); a red run
/// that may write the quarantine lists what it holds.
fn prepare(
    shared: &Shared,
    chore: &Chore,
    admitted: &Admitted<'_>,
) -> ControlFlow<Response, Prepared> {
    let red_real = admitted.mode == Mode::Real && chore.header.color == Color::Red;
    let snap = if let Some(undo_id) = &admitted.undo_id {
        match run::admissible(chore, admitted.mode, &admitted.ctx)
            .and_then(|()| take_snapshot(shared, chore, undo_id, admitted.now))
        {
            Ok(s) => Some(s),
            Err(why) => {
                let refused = Outcome::ChoreRun {
                    chore: &chore.header.name,
                    end: RunEnd::Refused { reason: &why },
                };
                let seq = admitted.intent.outcome(shared, refused);
                return Break(Response::Refused {
                    reason: why,
                    journal_seq: seq,
                });
            }
        }
    } else {
        None
    };
    // Undo never restores the quarantine, so what the run removes or
    // changes there is found after it and named on the receipt.
    let quarantine = &shared.options.layout.quarantine_dir;
    let held = (red_real && chore.header.touches.contains(quarantine))
        .then(|| quarantine_held(quarantine));
    Continue(Prepared { snap, held })
}

/// A run's result, and what it removed from the quarantine.
struct Ran {
    result: Result<Report, RunError>,
    /// "N paths the quarantine held before were removed or changed".
    quarantine_lost: Option<String>,
}

/// Phase 3: the run in its cage.
fn run_caged(shared: &Shared, chore: &Chore, admitted: &Admitted<'_>, prepared: &Prepared) -> Ran {
    let result = run::run(chore, admitted.mode, &admitted.ctx);
    let quarantine_lost = prepared.held.as_ref().and_then(|before| {
        let after = quarantine_held(&shared.options.layout.quarantine_dir);
        quarantine_lost(before.as_ref(), after.as_ref())
    });
    Ran {
        result,
        quarantine_lost,
    }
}

/// What of the quarantine `before` the run left changed or gone `after`,
/// in words; `None` when nothing.
fn quarantine_lost(before: Option<&Held>, after: Option<&Held>) -> Option<String> {
    match (before, after) {
        (Some(before), Some(after)) => {
            let n = before
                .iter()
                .filter(|(p, id)| after.get(*p) != Some(id))
                .count();
            (n > 0).then(|| format!("{n} paths the quarantine held before were removed or changed"))
        }
        _ => Some("the quarantine could not be listed before and after".to_string()),
    }
}

/// Whether nothing ran: the rules refused, or the cage never started. Any
/// other error may come after the chore changed files.
fn nothing_ran(result: &Result<Report, RunError>) -> bool {
    matches!(
        result,
        Err(RunError::Refused(_))
            | Err(RunError::Cage(
                crate::cage::CageError::NoBubblewrap(_) | crate::cage::CageError::Filter(_)
            ))
            | Err(RunError::Exec(exec::ExecError::NoBinary { .. }))
            | Err(RunError::Exec(exec::ExecError::UnsafeBinary { .. }))
    )
}

/// Entries that gained privilege, named one by one up to a bound, so no
/// run can make a journal line or a receipt unbounded.
fn gained_named(report: &Report) -> Vec<String> {
    const NAMED: usize = 20;
    let mut gained: Vec<String> = report
        .gained_privilege
        .iter()
        .take(NAMED)
        .map(|g| g.describe())
        .collect();
    if report.gained_privilege.len() > NAMED {
        gained.push(format!(
            "and {} more entries that gained setuid, setgid or capabilities",
            report.gained_privilege.len() - NAMED
        ));
    }
    gained
}

/// A run that went to its end, settled.
struct Settled {
    report: Report,
    /// The undo id and what the snapshot saw change.
    undo: Option<(String, String)>,
    quarantine_lost: Option<String>,
    gained: Vec<String>,
    clean: bool,
    /// Its outcome is in the journal (its actions run only then).
    ran_journaled: bool,
}

/// Phase 4: the snapshot sealed or dropped, the verdict and the outcome
/// journaled, the signals raised. A run that failed is answered here.
fn settle(
    shared: &Shared,
    chore: &Chore,
    admitted: &Admitted<'_>,
    prepared: Prepared,
    ran: Ran,
) -> ControlFlow<Response, Settled> {
    let name = chore.header.name.as_str();
    let never_ran = nothing_ran(&ran.result);
    let mut seal_failed = None;
    let undo = match prepared.snap {
        None => None,
        Some(s) if never_ran => {
            let _ = s.discard();
            None
        }
        Some(s) => match s.seal_within(&shared.options.seal_limits) {
            Ok(d) if d.is_empty() => {
                let _ = s.discard();
                None
            }
            Ok(d) => Some((s.id.clone(), d.summary())),
            Err(e) => {
                // The snapshot holds the only copies of what the run
                // removed: a failed seal keeps it, and its undo puts back
                // what is missing and names the rest.
                let why = format!(
                    "the seal failed ({e}): undo puts back what the run removed, and names what it cannot put back"
                );
                seal_failed = Some(why.clone());
                Some((s.id.clone(), why))
            }
        },
    };
    let left = RunLeft {
        quarantine_lost: ran.quarantine_lost.as_deref(),
        seal_failed: seal_failed.as_deref(),
        undo_id: undo.as_ref().map(|(id, _)| id.as_str()),
    };
    let report = match ran.result {
        Ok(r) => r,
        Err(e) => {
            let reason = e.to_string();
            let end = RunEnd::Stopped {
                left: &left,
                never_ran,
                reason: &reason,
            };
            let seq = admitted
                .intent
                .outcome(shared, Outcome::ChoreRun { chore: name, end });
            let reason = match &undo {
                Some((id, summary)) => {
                    format!("{e}; changed before it failed: {summary}; undo id {id} (for 7 days)")
                }
                None => e.to_string(),
            };
            return Break(Response::Refused {
                reason,
                journal_seq: seq,
            });
        }
    };
    let killed = report.outcome.cut
        || report.outcome.timed_out
        || report.outcome.stopped
        || report.outcome.memory_exceeded;
    let clean = report.outcome.exit_code == Some(0)
        && !report.over_cap
        && !report.outside_touches
        && report.gained_privilege.is_empty()
        && !killed;
    let gained = gained_named(&report);
    let end = RunEnd::Ran {
        left: &left,
        report: &report,
        gained: &gained,
        clean,
    };
    let ran_journaled = admitted
        .intent
        .outcome(shared, Outcome::ChoreRun { chore: name, end })
        .is_some();
    if !gained.is_empty() {
        // The spec's eight signals are a closed list; a privilege a file
        // gained is a change no touch grants, the nearest of them.
        raise(
            shared,
            None,
            Signal::FilesOutsideTouches {
                chore: name.to_string(),
                paths: gained.clone(),
            },
        );
    }
    if report.outside_touches {
        raise(
            shared,
            None,
            Signal::FilesOutsideTouches {
                chore: name.to_string(),
                // Found in the redacted output: exec hands out no other.
                paths: vec![
                    report
                        .refused_write
                        .clone()
                        .unwrap_or_else(|| "a write the cage refused".to_string()),
                ],
            },
        );
    }
    Continue(Settled {
        report,
        undo,
        quarantine_lost: ran.quarantine_lost,
        gained,
        clean,
        ran_journaled,
    })
}

/// The receipt's first part, as the journal, `aromba chores` and the chat
/// (which words it for people) read it: `NAME: real run, exit 0, N files
/// changed (B bytes)`, then each thing the run's end says, `; `-separated.
fn receipt_line(name: &str, dry: bool, s: &Settled, memory_mib: u64) -> String {
    let report = &s.report;
    let mut receipt = format!(
        "{name}: {} run, {}, {} files changed ({} bytes)",
        if dry { "dry" } else { "real" },
        match report.outcome.exit_code {
            Some(0) => "exit 0".to_string(),
            Some(c) => format!("exit {c}"),
            None => "killed".to_string(),
        },
        report.files_changed,
        report.bytes_changed
    );
    if report.over_cap {
        receipt.push_str("; killed at the damage cap");
    }
    if report.outcome.memory_exceeded {
        receipt.push_str(&format!(
            "; stopped: it used more memory than a chore may ({memory_mib} MiB, its /tmp included)"
        ));
    }
    if report.halted {
        receipt.push_str("; stopped part way: the ladder moved to Freeze (/panic or a signal)");
    }
    if let Some((id, summary)) = &s.undo {
        receipt.push_str(&format!("; changed: {summary}; undo id {id} (for 7 days)"));
    }
    if let Some(lost) = &s.quarantine_lost {
        receipt.push_str(&format!("; {lost}: undo cannot put them back"));
    }
    if report.outside_touches {
        receipt.push_str("; killed at its first write outside its touches");
    }
    for g in &s.gained {
        receipt.push_str(&format!("; {g}"));
    }
    receipt
}

/// Phase 5: the receipt, the chore's actions (only once the run's outcome
/// is in the journal), the records later runs read, the receipt journaled.
fn deliver(shared: &Shared, chore: &Chore, admitted: &Admitted<'_>, s: Settled) -> Response {
    let name = chore.header.name.as_str();
    let dry = admitted.mode == Mode::DryRun;
    let memory_mib = crate::cage::limits::global().limits.memory_bytes >> 20;
    let mut receipt = receipt_line(name, dry, &s, memory_mib);
    let exit_0 = s.report.outcome.exit_code == Some(0);
    if exit_0 && (dry || (s.clean && s.ran_journaled)) {
        let green = chore.header.color == Color::Green;
        for action in &chore.header.actions {
            let concrete = match expand_action(action) {
                Ok(c) => c,
                Err(e) => {
                    receipt.push_str(&format!("; {}: could not fill in ({e})", action.join(" ")));
                    continue;
                }
            };
            if concrete.is_empty() {
                receipt.push_str(&format!("; {}: nothing to do", action.join(" ")));
            }
            for a in concrete {
                receipt.push_str("; ");
                if dry {
                    receipt.push_str(&format!("would ask for: {}", a.join(" ")));
                } else {
                    receipt.push_str(&chore_action(shared, name, green, &a));
                }
            }
        }
    } else if s.clean && !s.ran_journaled {
        receipt
            .push_str("; its actions were not run (the journal could not take the run's outcome)");
    }
    if dry && exit_0 && s.ran_journaled {
        // From the root terminal the owner saw this dry run; the Worker
        // must still show it and say so. (A real run counts on it: only a
        // dry run the journal holds is recorded.)
        let record = if admitted.source == RunSource::RootTerminal {
            admitted.seen.clone()
        } else {
            admitted.runs.join(format!("{name}.dry-ran"))
        };
        let _ = std::fs::write(
            &record,
            super::chores::dry_run_record(&chore.script, &receipt).as_bytes(),
        );
    }
    super::chores::keep_last(&admitted.runs, name, !dry, &receipt);
    let line = Event::Receipt {
        chore: name,
        receipt: &receipt,
        intent_seq: admitted.intent.seq,
    };
    if journal(shared, line).is_none() || !s.ran_journaled {
        return outcome_not_journaled(&admitted.intent, &receipt);
    }
    Response::Receipt {
        receipt,
        stdout: s.report.outcome.stdout.into_text(),
        stderr: s.report.outcome.stderr.into_text(),
        ok: s.clean,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quarantine_lost_names_what_changed_or_that_it_could_not_tell() {
        let before: Held = [
            (PathBuf::from("/q/a"), (1, 2, 3)),
            (PathBuf::from("/q/b"), (4, 5, 6)),
        ]
        .into_iter()
        .collect();
        let mut after = before.clone();
        assert_eq!(quarantine_lost(Some(&before), Some(&after)), None);
        after.remove(&PathBuf::from("/q/a"));
        after.insert(PathBuf::from("/q/c"), (7, 8, 9));
        assert_eq!(
            quarantine_lost(Some(&before), Some(&after)).as_deref(),
            Some("1 paths the quarantine held before were removed or changed")
        );
        assert_eq!(
            quarantine_lost(None, Some(&after)).as_deref(),
            Some("the quarantine could not be listed before and after")
        );
    }

    #[test]
    fn the_receipt_line_is_the_one_the_chat_and_the_journal_read() {
        let quiet = exec::Output::quiet;
        let settled = Settled {
            report: Report {
                outcome: exec::Outcome {
                    exit_code: Some(0),
                    signal: None,
                    stdout: quiet(),
                    stderr: quiet(),
                    cut: false,
                    timed_out: false,
                    stopped: false,
                    memory_exceeded: false,
                    duration: Duration::ZERO,
                },
                files_changed: 4,
                bytes_changed: 12289,
                over_cap: false,
                halted: false,
                outside_touches: false,
                refused_write: None,
                gained_privilege: Vec::new(),
            },
            undo: Some((
                "0123456789abcdef0123456789abcdef".into(),
                "0 added, 3 removed, 0 changed; 48 B freed".into(),
            )),
            quarantine_lost: None,
            gained: Vec::new(),
            clean: true,
            ran_journaled: true,
        };
        assert_eq!(
            receipt_line("tidy-cache", false, &settled, 1024),
            "tidy-cache: real run, exit 0, 4 files changed (12289 bytes); changed: 0 added, 3 removed, 0 changed; 48 B freed; undo id 0123456789abcdef0123456789abcdef (for 7 days)"
        );
        let mut killed = settled;
        killed.report.outcome.exit_code = None;
        killed.report.outcome.memory_exceeded = true;
        killed.undo = None;
        killed.quarantine_lost =
            Some("2 paths the quarantine held before were removed or changed".into());
        assert_eq!(
            receipt_line("tidy-cache", true, &killed, 1024),
            "tidy-cache: dry run, killed, 4 files changed (12289 bytes); stopped: it used more memory than a chore may (1024 MiB, its /tmp included); 2 paths the quarantine held before were removed or changed: undo cannot put them back"
        );
    }

    #[test]
    fn a_refusal_or_a_cage_that_never_started_is_a_run_that_never_ran() {
        assert!(nothing_ran(&Err(RunError::Refused("no".into()))));
        assert!(!nothing_ran(&Err(RunError::Exec(exec::ExecError::Wait(
            std::io::Error::other("gone")
        )))));
    }
}
