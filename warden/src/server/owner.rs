//! The owner's decisions. From the chat they arrive as a proposal (the
//! Warden issues an action id and says what it stands for) and then a
//! relay-signed tap the Warden verifies itself, with the PIN for a PIN
//! action. From a root terminal they arrive on the control socket, which
//! is the owner's word. Either way the same functions carry them out:
//! confirming a damage cap, undoing a run, turning prod mode on or off.

#![forbid(unsafe_code)]

use super::chores::{RunSource, chore_run, find_chore, frozen};
use super::{Shared, Socket, journal, peer_fields, raise, unjournaled};
use crate::approvals::{self, Action, Approval};
use crate::chores::header::{Color, DEFAULT_MAX_FILES, DEFAULT_MAX_GB};
use crate::chores::run::Chore;
use crate::chores::{quarantine, snapshot};
use crate::journal::sha256_hex;
use crate::pin;
use crate::signal::Signal;
use crate::system::PeerCred;
use aromba_warden_proto::{PROD_MODE_OFF_CONSEQUENCES, Response};
use serde_json::{Map, Value};

/// The state record of confirmed damage caps.
pub(super) const CONFIRMED_CAPS: &str = "confirmed-caps";

fn refuse(reason: impl Into<String>) -> Response {
    Response::Refused {
        reason: reason.into(),
        journal_seq: None,
    }
}

/// What a chore's damage cap confirmation binds: its cap and its script.
fn cap_action(c: &Chore) -> Action {
    Action::ConfirmCap {
        chore: c.header.name.clone(),
        max_files: c.header.max_files,
        max_gb: c.header.max_gb,
        script_sha256: sha256_hex(c.script.as_bytes()),
    }
}

fn above_default(c: &Chore) -> bool {
    c.header.max_files > DEFAULT_MAX_FILES || c.header.max_gb > DEFAULT_MAX_GB
}

/// Whether the owner confirmed this chore's cap, for this very script: an
/// edited script or a changed cap needs confirming again.
pub(super) fn cap_confirmed(shared: &Shared, c: &Chore) -> bool {
    let Ok(Some(bytes)) = crate::state::read(&shared.options.layout, CONFIRMED_CAPS) else {
        return false;
    };
    let Ok(Value::Object(all)) = serde_json::from_slice::<Value>(&bytes) else {
        return false;
    };
    let Action::ConfirmCap {
        max_files,
        max_gb,
        script_sha256,
        ..
    } = cap_action(c)
    else {
        return false;
    };
    all.get(&c.header.name).is_some_and(|v| {
        v.get("max_files").and_then(Value::as_u64) == Some(max_files)
            && v.get("max_gb").and_then(Value::as_u64) == Some(max_gb)
            && v.get("script_sha256").and_then(Value::as_str) == Some(script_sha256.as_str())
    })
}

/// Records a confirmed cap, if `action` still describes the chore as it is.
fn confirm_cap(shared: &Shared, action: &Action, source: RunSource) -> Response {
    let Action::ConfirmCap {
        chore,
        max_files,
        max_gb,
        script_sha256,
    } = action
    else {
        return refuse("not a damage cap confirmation");
    };
    let Some(c) = find_chore(shared, chore) else {
        return refuse(format!("there is no chore named {chore:?}"));
    };
    if cap_action(&c) != *action {
        return refuse(format!(
            "{chore} changed since its damage cap was proposed; propose it again"
        ));
    }
    let mut entry = Map::new();
    entry.insert("max_files".into(), Value::from(*max_files));
    entry.insert("max_gb".into(), Value::from(*max_gb));
    entry.insert("script_sha256".into(), Value::from(script_sha256.as_str()));
    let changed = shared.change_state_with(CONFIRMED_CAPS, |current| {
        let mut all = match current {
            Some(b) => match serde_json::from_slice::<Value>(&b) {
                Ok(Value::Object(m)) => m,
                _ => return Err("the confirmed caps record is malformed".into()),
            },
            None => Map::new(),
        };
        all.insert(chore.clone(), Value::Object(entry));
        Ok(Some(
            serde_json::to_vec(&Value::Object(all)).unwrap_or_default(),
        ))
    });
    if let Err(e) = changed {
        return refuse(e);
    }
    let mut m = Map::new();
    m.insert("chore".into(), Value::from(chore.as_str()));
    m.insert("max_files".into(), Value::from(*max_files));
    m.insert("max_gb".into(), Value::from(*max_gb));
    m.insert("approval".into(), Value::from(source.name()));
    match journal(shared, "cap-confirmed", m) {
        Some(journal_seq) => Response::Noted { journal_seq },
        None => unjournaled(),
    }
}

/// `aromba chore confirm NAME` from a root terminal.
pub(super) fn confirm_cap_from_terminal(shared: &Shared, chore: &str) -> Response {
    let Some(c) = find_chore(shared, chore) else {
        return refuse(format!("there is no chore named {chore:?}"));
    };
    if !above_default(&c) {
        return refuse(format!(
            "{chore} keeps to the default damage cap; there is nothing to confirm"
        ));
    }
    confirm_cap(shared, &cap_action(&c), RunSource::RootTerminal)
}

/// What the Worker may propose for a tap.
pub(super) enum Proposal {
    Run(String),
    ConfirmCap(String),
    Undo(String),
    ProdModeOff,
}

/// Issues an action id for `proposal`, with what the user is asked.
pub(super) fn propose(shared: &Shared, peer: &PeerCred, proposal: Proposal) -> Response {
    if frozen(shared) {
        return refuse("the ladder is at Freeze or above: nothing is proposed until it comes down");
    }
    let layout = &shared.options.layout;
    let (action, summary) = match proposal {
        Proposal::Run(chore) => {
            let Some(c) = find_chore(shared, &chore) else {
                return refuse(format!("there is no chore named {chore:?}"));
            };
            if c.header.color == Color::Green {
                return refuse(format!("{chore} is green: it needs no approval"));
            }
            let summary = format!(
                "Run {chore} ({}): {}",
                c.header.color.name(),
                c.header.description
            );
            (Action::Run { chore }, summary)
        }
        Proposal::ConfirmCap(chore) => {
            let Some(c) = find_chore(shared, &chore) else {
                return refuse(format!("there is no chore named {chore:?}"));
            };
            if !above_default(&c) {
                return refuse(format!(
                    "{chore} keeps to the default damage cap; there is nothing to confirm"
                ));
            }
            let summary = format!(
                "Let {chore} change up to {} files or {} GB in one run (the default cap is {DEFAULT_MAX_FILES} files, {DEFAULT_MAX_GB} GB)",
                c.header.max_files, c.header.max_gb
            );
            (cap_action(&c), summary)
        }
        Proposal::Undo(undo_id) => {
            let now = shared.options.clock.now();
            let snap = match snapshot::peek(&shared.options.layout.snapshots_dir(), &undo_id, now) {
                Ok(s) => s,
                Err(e) => return refuse(format!("no undo {undo_id:?} here: {e}")),
            };
            let summary = format!(
                "Undo {}'s run: put {} back as they were; what the run added goes to quarantine",
                snap.chore,
                snap.roots
                    .iter()
                    .map(|r| r.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            (Action::Undo { undo_id }, summary)
        }
        Proposal::ProdModeOff => {
            if !quarantine::prod_mode_file(layout).exists() {
                return refuse("prod mode is off already");
            }
            if !matches!(crate::state::read(layout, pin::RECORD), Ok(Some(_))) {
                return refuse(
                    "no PIN is set: set one from a root terminal with `aromba pin set` first",
                );
            }
            (Action::ProdModeOff, PROD_MODE_OFF_CONSEQUENCES.to_string())
        }
    };
    let issued = approvals::issue(layout, &action, shared.options.clock.now())
        .and_then(|id| approvals::server_id(layout).map(|server| (id, server)));
    let (action_id, server_id) = match issued {
        Ok(x) => x,
        Err(e) => return refuse(format!("cannot issue an action id: {e}")),
    };
    let mut m = peer_fields(peer, Socket::Worker);
    m.insert("action".into(), Value::from(format!("{action:?}")));
    m.insert("action_id".into(), Value::from(action_id.as_str()));
    if journal(shared, "action-issued", m).is_none() {
        return unjournaled();
    }
    Response::Proposed {
        action_id,
        server_id,
        summary,
        needs_pin: action.needs_pin(),
    }
}

/// Checks `given` against the PIN's hash, counting wrong ones; five in a
/// row lock PIN actions and are a ladder signal.
fn check_pin(shared: &Shared, peer: Option<&PeerCred>, given: Option<&str>) -> Result<(), String> {
    let now = shared.options.clock.now();
    shared
        .pin_attempts
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .check(now)?;
    let hash = match crate::state::read(&shared.options.layout, pin::RECORD) {
        Ok(Some(h)) => String::from_utf8_lossy(&h).into_owned(),
        Ok(None) => {
            return Err(
                "no PIN is set: set one from a root terminal with `aromba pin set` first".into(),
            );
        }
        Err(e) => return Err(e.to_string()),
    };
    let Some(given) = given else {
        return Err("this is a PIN action: the PIN is needed too".into());
    };
    if pin::matches(&hash, given) {
        shared
            .pin_attempts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .succeeded();
        return Ok(());
    }
    let locked = shared
        .pin_attempts
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .failed(now);
    let mut m = Map::new();
    m.insert("locked".into(), Value::from(locked));
    journal(shared, "pin-wrong", m);
    if locked {
        raise(
            shared,
            peer,
            Signal::RedActionWithoutApproval {
                action: format!("{} wrong PINs in a row", pin::MAX_FAILURES),
            },
        );
        return Err(format!(
            "wrong PIN; PIN actions are now locked for {} minutes",
            pin::LOCK_S / 60
        ));
    }
    Err("wrong PIN".into())
}

/// A relay-signed tap, from the Worker.
pub(super) fn approve(
    shared: &Shared,
    peer: &PeerCred,
    a: Approval,
    pin: Option<String>,
) -> Response {
    let mut m = peer_fields(peer, Socket::Worker);
    m.insert("action_id".into(), Value::from(a.action_id.as_str()));
    m.insert("button".into(), Value::from(a.button.as_str()));
    let now = shared.options.clock.now();
    if frozen(shared) {
        // Refused before it is spent: the tap stays good for when the
        // ladder comes down, within its freshness.
        m.insert("verdict".into(), Value::from("refused"));
        m.insert("reason".into(), Value::from("frozen"));
        let seq = journal(shared, "approval", m);
        return Response::Refused {
            reason: "the ladder is at Freeze or above: nothing runs until it comes down".into(),
            journal_seq: seq,
        };
    }
    let action = match approvals::verify_and_spend(&shared.options.layout, &a, now) {
        Ok(action) => action,
        Err(why) => {
            m.insert("verdict".into(), Value::from("refused"));
            m.insert("reason".into(), Value::from(why.as_str()));
            let seq = journal(shared, "approval", m);
            // An approval that does not verify is an action without one.
            raise(
                shared,
                Some(peer),
                Signal::RedActionWithoutApproval {
                    action: format!("action {}", a.action_id),
                },
            );
            return Response::Refused {
                reason: why,
                journal_seq: seq,
            };
        }
    };
    m.insert("action".into(), Value::from(format!("{action:?}")));
    if a.button != "approve" {
        m.insert("verdict".into(), Value::from("declined"));
        let seq = journal(shared, "approval", m);
        return Response::Refused {
            reason: format!("the user chose {:?}, not to go ahead", a.button),
            journal_seq: seq,
        };
    }
    if action.needs_pin()
        && let Err(why) = check_pin(shared, Some(peer), pin.as_deref())
    {
        m.insert("verdict".into(), Value::from("refused"));
        m.insert("reason".into(), Value::from(why.as_str()));
        let seq = journal(shared, "approval", m);
        return Response::Refused {
            reason: why,
            journal_seq: seq,
        };
    }
    m.insert("verdict".into(), Value::from("verified"));
    journal(shared, "approval", m);
    match action {
        Action::Run { chore } => chore_run(shared, &chore, false, RunSource::Approved),
        Action::ConfirmCap { .. } => confirm_cap(shared, &action, RunSource::Approved),
        Action::Undo { undo_id } => undo(shared, &undo_id, RunSource::Approved),
        Action::ProdModeOff => set_prod_mode(shared, false, RunSource::Approved),
    }
}

/// `aromba pin set`: the PIN's argon2id hash becomes a state record.
pub(super) fn set_pin(shared: &Shared, given: &str) -> Response {
    let hash = match pin::hash(given) {
        Ok(h) => h,
        Err(why) => return refuse(why),
    };
    if let Err(e) = shared.change_state(pin::RECORD, Some(hash.as_bytes())) {
        return refuse(e);
    }
    match journal(shared, "pin-set", Map::new()) {
        Some(journal_seq) => Response::Noted { journal_seq },
        None => unjournaled(),
    }
}

/// `aromba prod-mode on|off` from a root terminal; off needs the PIN.
pub(super) fn prod_mode_from_terminal(shared: &Shared, on: bool, given: Option<&str>) -> Response {
    if !on && let Err(why) = check_pin(shared, None, given) {
        return refuse(why);
    }
    set_prod_mode(shared, on, RunSource::RootTerminal)
}

fn set_prod_mode(shared: &Shared, on: bool, source: RunSource) -> Response {
    let now = shared.options.clock.now();
    let record = format!("on since {now}\n");
    let change = shared.change_state("prod-mode", if on { Some(record.as_bytes()) } else { None });
    if let Err(e) = change {
        return refuse(e);
    }
    let mut m = Map::new();
    m.insert("on".into(), Value::from(on));
    m.insert("approval".into(), Value::from(source.name()));
    match journal(shared, "prod-mode", m) {
        Some(journal_seq) => Response::Noted { journal_seq },
        None => unjournaled(),
    }
}

/// Puts a run's paths back as its snapshot has them.
pub(super) fn undo(shared: &Shared, undo_id: &str, source: RunSource) -> Response {
    if frozen(shared) {
        return refuse("the ladder is at Freeze or above: nothing runs until it comes down");
    }
    let _changing = match shared.one_change_at_a_time() {
        Ok(g) => g,
        Err(why) => return refuse(why),
    };
    let snap = match snapshot::load(&shared.options.layout.snapshots_dir(), undo_id) {
        Ok(s) => s,
        Err(e) => return refuse(format!("no undo {undo_id:?} here: {e}")),
    };
    let now = shared.options.clock.now();
    // The snapshot store checks the quarantine itself (a real directory of
    // root's, nobody else writing), holding it open while it moves.
    let dest = shared.options.layout.quarantine_dir.clone();
    let mut m = Map::new();
    m.insert("undo_id".into(), Value::from(undo_id));
    m.insert("chore".into(), Value::from(snap.chore.as_str()));
    m.insert("approval".into(), Value::from(source.name()));
    match snap.restore(&dest, now) {
        Ok(r) => {
            m.insert("restored".into(), Value::from(r.restored));
            m.insert("quarantined".into(), Value::from(r.quarantined));
            m.insert("conflicts".into(), Value::from(r.conflicts));
            m.insert("verdict".into(), Value::from("undone"));
            let mut receipt = format!(
                "undo {undo_id} of {}: {} paths put back, {} the run added and {} versions it left moved to quarantine",
                snap.chore, r.restored, r.quarantined_added, r.quarantined_replaced
            );
            if r.conflicts > 0 {
                let examples: Vec<String> = r
                    .conflict_examples
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect();
                receipt.push_str(&format!(
                    "; {} changed since the run and left as they are ({})",
                    r.conflicts,
                    examples.join(", ")
                ));
            }
            if !r.left_in_staging.is_empty() {
                let left: Vec<String> = r
                    .left_in_staging
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect();
                m.insert("left_in_staging".into(), Value::from(left.clone()));
                receipt.push_str(&format!(
                    "; left where they are, in staging, not deleted: {}",
                    left.join(", ")
                ));
            }
            if journal(shared, "undo", m).is_none() {
                return unjournaled();
            }
            let mut r = Map::new();
            r.insert("chore".into(), Value::from(snap.chore.as_str()));
            r.insert("receipt".into(), Value::from(receipt.as_str()));
            journal(shared, "receipt", r);
            Response::Receipt {
                receipt,
                stdout: Vec::new(),
                stderr: Vec::new(),
                ok: true,
            }
        }
        Err(e) => {
            // Stopped part-way, it changed files: a failure, not a refusal.
            let partial = matches!(e, snapshot::SnapshotError::Partial { .. });
            m.insert(
                "verdict".into(),
                Value::from(if partial { "failed" } else { "refused" }),
            );
            m.insert("reason".into(), Value::from(e.to_string()));
            let seq = journal(shared, "undo", m);
            Response::Refused {
                reason: e.to_string(),
                journal_seq: seq,
            }
        }
    }
}
