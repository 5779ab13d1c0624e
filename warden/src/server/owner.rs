//! The owner's decisions. From the chat they arrive as a proposal (the
//! Warden issues an action id and renders the text the person will read)
//! and then a relay-signed tap the Warden verifies itself — over its own
//! text's hash and its own button label — with the PIN for a PIN action.
//! From a root terminal they arrive on the control socket, which is the
//! owner's word. Either way the same functions carry them out: confirming a
//! damage cap, undoing a run, turning prod mode on or off; each journals
//! its intent first (`intent.rs`).

#![forbid(unsafe_code)]

use super::chore_run::run_chore;
use super::chores::{RunSource, find_chore, frozen};
use super::event::{Event, Outcome, Peer, ProdModeBy};
use super::intent::{Intent, intend, not_journaled, outcome_not_journaled};
use super::{Shared, journal, raise};
use crate::approvals::{self, Action, Approval, Facts};
use crate::chores::header::{DEFAULT_MAX_FILES, DEFAULT_MAX_GB};
use crate::chores::run::Chore;
use crate::chores::{quarantine, snapshot};
use crate::journal::sha256_hex;
use crate::ladder::Step;
use crate::pin;
use crate::signal::Signal;
use crate::system::PeerCred;
use aromba_warden_proto::Pin;
use aromba_warden_proto::Response;
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

pub(super) fn above_default(c: &Chore) -> bool {
    c.header.max_files > DEFAULT_MAX_FILES || c.header.max_gb > DEFAULT_MAX_GB
}

/// Who confirmed a cap, as its record says: in the Mini App, or from a
/// root terminal. A record that names neither was written when the
/// relay's own tap could confirm a cap (before the Mini App), so it
/// confirms nothing now: the person confirms it again, where the relay
/// cannot (found by the review of the route change).
const CONFIRMED_BY: [&str; 2] = ["app", "terminal"];

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
            && v.get("by")
                .and_then(Value::as_str)
                .is_some_and(|by| CONFIRMED_BY.contains(&by))
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
    // A cap is confirmed only on the app's route or from root's terminal.
    let by = match source {
        RunSource::RootTerminal => CONFIRMED_BY[1],
        _ => CONFIRMED_BY[0],
    };
    let act = Event::CapConfirmed {
        chore,
        max_files: *max_files,
        max_gb: *max_gb,
        script_sha256,
        source: &source,
    };
    let intent = match intend(shared, act) {
        Ok(i) => i,
        Err(e) => return e.into(),
    };
    let mut entry = Map::new();
    entry.insert("max_files".into(), Value::from(*max_files));
    entry.insert("max_gb".into(), Value::from(*max_gb));
    entry.insert("script_sha256".into(), Value::from(script_sha256.as_str()));
    entry.insert("by".into(), Value::from(by));
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
    noted_outcome(
        shared,
        &intent,
        changed,
        &format!("{chore}'s damage cap is confirmed"),
    )
}

/// The outcome line of a change to the Warden's state, and the answer.
pub(super) fn noted_outcome(
    shared: &Shared,
    intent: &Intent,
    changed: Result<(), String>,
    done: &str,
) -> Response {
    match changed {
        Err(e) => {
            let seq = intent.outcome(shared, Outcome::Refused { reason: &e });
            Response::Refused {
                reason: e,
                journal_seq: seq,
            }
        }
        Ok(()) => match intent.outcome(shared, Outcome::Done) {
            Some(journal_seq) => Response::Noted { journal_seq },
            None => outcome_not_journaled(intent, done),
        },
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
    /// The release in the Worker's download folder.
    Release,
    /// "Was that you?" about the ladder as it stands.
    StepDown,
    /// The skill bundle the Worker downloaded from the catalogue.
    Skill(String),
}

/// What an action is about, as the Warden finds it now.
enum Subject {
    Chore(Chore),
    Snapshot(snapshot::Meta),
    Nothing,
    /// The ladder as it stands.
    Ladder {
        event: u64,
        step: u64,
        reason: String,
    },
    /// The release in the Worker's download folder, as verified now, and
    /// the one installed.
    Release {
        version: aromba_release::Version,
        installed: Option<aromba_release::Version>,
        commit: Option<String>,
    },
    /// The skill bundle in the Worker's download folder, as judged now.
    Skill(Box<approvals::SkillFacts>),
}

impl Subject {
    fn facts(&self) -> Facts<'_> {
        match self {
            Subject::Chore(c) => Facts::Chore(c),
            Subject::Snapshot(m) => Facts::Snapshot(m),
            Subject::Nothing => Facts::Nothing,
            Subject::Ladder {
                event,
                step,
                reason,
            } => Facts::Ladder {
                event: *event,
                step: *step,
                reason,
            },
            Subject::Release {
                version,
                installed,
                commit,
            } => Facts::Release {
                version: *version,
                installed: *installed,
                commit: commit.as_deref(),
            },
            Subject::Skill(f) => Facts::Skill(f),
        }
    }
}

/// Finds what `action` is about: the chore as it is here (in prod mode,
/// red), the undo's snapshot.
fn subject_of(shared: &Shared, action: &Action) -> Result<Subject, String> {
    match action {
        Action::Run { chore, .. } | Action::ConfirmCap { chore, .. } => find_chore(shared, chore)
            .map(Subject::Chore)
            .ok_or_else(|| format!("there is no chore named {chore:?}")),
        Action::Undo { undo_id } => {
            let now = shared.options.clock.now();
            snapshot::peek(&shared.options.layout.snapshots_dir(), undo_id, now)
                .map(Subject::Snapshot)
                .map_err(|e| format!("no undo {undo_id:?} here: {e}"))
        }
        Action::ProdModeOff => Ok(Subject::Nothing),
        Action::StepDown { .. } => {
            let l = shared.ladder.lock().unwrap_or_else(|p| p.into_inner());
            Ok(Subject::Ladder {
                event: l.last_event_id(),
                step: l.step() as u64,
                reason: l.reason().to_string(),
            })
        }
        Action::InstallRelease {
            manifest_sha256, ..
        } => {
            let (manifest, sha, installed) = super::update::offered(shared)?;
            if sha != *manifest_sha256 {
                return Err(
                    "the download is not the release that was proposed; propose it again".into(),
                );
            }
            Ok(Subject::Release {
                version: manifest.version,
                installed,
                commit: manifest.commit,
            })
        }
        Action::InstallSkill {
            name,
            bundle_sha256,
            ..
        } => {
            let judged = super::skills::offered(shared, name)?;
            if judged.skill.sha256 != *bundle_sha256 {
                return Err(
                    "the download is not the skill that was proposed; propose it again".into(),
                );
            }
            Ok(Subject::Skill(Box::new(judged)))
        }
    }
}

/// Issues an action id for `proposal`, with the text the person reads: the
/// Warden's rendering, which the Worker must send verbatim and whose
/// SHA-256 the relay-signed tap must cover.
pub(super) fn propose(shared: &Shared, peer: &PeerCred, proposal: Proposal) -> Response {
    // "Was that you?" is asked at Freeze too: it is how Freeze comes down.
    if !matches!(proposal, Proposal::StepDown) && frozen(shared) {
        return refuse("the ladder is at Freeze or above: nothing is proposed until it comes down");
    }
    let layout = &shared.options.layout;
    let action = match proposal {
        Proposal::Run(chore) => {
            let Some(c) = find_chore(shared, &chore) else {
                return refuse(format!("there is no chore named {chore:?}"));
            };
            // A green chore is proposed too: what the assistant proposes,
            // and a green chore without a schedule, run on a tap.
            Action::Run {
                chore,
                script_sha256: sha256_hex(c.script.as_bytes()),
            }
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
            cap_action(&c)
        }
        Proposal::Undo(undo_id) => Action::Undo { undo_id },
        Proposal::ProdModeOff => {
            if !quarantine::prod_mode_file(layout).exists() {
                return refuse("prod mode is off already");
            }
            if !matches!(crate::state::read(layout, pin::RECORD), Ok(Some(_))) {
                return refuse(
                    "no PIN is set: set one from a root terminal with `aromba pin set` first",
                );
            }
            Action::ProdModeOff
        }
        Proposal::StepDown => {
            let (event, step, reason) = {
                let l = shared.ladder.lock().unwrap_or_else(|p| p.into_inner());
                (l.last_event_id(), l.step(), l.reason().to_string())
            };
            if !matches!(step, Step::Slow | Step::Freeze) {
                return refuse(format!(
                    "the ladder is at {}: only Slow and Freeze are stepped down from the chat",
                    step.name()
                ));
            }
            // One "Was that you?" per move (every move withdraws the last):
            // asked again, it is refused before any journal line, so a
            // flood of asks writes nothing (found by the attack round).
            if approvals::step_down_open(layout) {
                return refuse("\"Was that you?\" is asked already for this move of the ladder");
            }
            Action::StepDown {
                event,
                step: step as u64,
                reason,
            }
        }
        Proposal::Release => match super::update::offered(shared) {
            Ok((manifest, manifest_sha256, _)) => Action::InstallRelease {
                version: manifest.version.to_string(),
                manifest_sha256,
            },
            Err(e) => return refuse(format!("no release to propose: {e}")),
        },
        Proposal::Skill(name) => match super::skills::offered(shared, &name) {
            Ok(judged) => Action::InstallSkill {
                name,
                version: judged.skill.manifest.version.to_string(),
                bundle_sha256: judged.skill.sha256,
                pin: judged.needs_pin,
            },
            Err(e) => return refuse(format!("the skill is not proposed: {e}")),
        },
    };
    let (text, route) = match subject_of(shared, &action).and_then(|subject| {
        let facts = subject.facts();
        approvals::render(&action, &facts).map(|t| (t, approvals::route(&action, &facts)))
    }) {
        Ok(t) => t,
        Err(e) => return refuse(e),
    };
    if route == approvals::Route::App && !matches!(crate::telegram::account(layout), Ok(Some(_))) {
        return refuse(approvals::NO_ACCOUNT);
    }
    let now = shared.options.clock.now();
    let reserved = approvals::reserve(layout, now)
        .and_then(|id| approvals::server_id(layout).map(|server| (id, server)));
    let (id, server_id) = match reserved {
        Ok(x) => x,
        Err(e) => return refuse(format!("cannot issue an action id: {e}")),
    };
    // Journaled before the id exists anywhere but here.
    let text_sha256 = approvals::text_sha256(&text);
    let act = Event::ActionIssued {
        peer: Peer::worker(peer),
        action: &action,
        action_id: id.id(),
        text_sha256: &text_sha256,
    };
    let intent = match intend(shared, act) {
        Ok(i) => i,
        Err(e) => return e.into(),
    };
    // The PIN of an action approved in the app is sealed by the page for
    // this one proposal's key.
    let seal = if route == approvals::Route::App && action.needs_pin() {
        match crate::seal::SealKey::generate() {
            Ok(k) => Some(k),
            Err(e) => {
                let error = e.to_string();
                intent.outcome(shared, Outcome::NotIssued { error: &error });
                return refuse(format!("cannot make the PIN's key: {e}"));
            }
        }
    } else {
        None
    };
    let action_id = match approvals::record(layout, id, &action, &text, route, seal.as_ref(), now) {
        Ok(id) => id,
        Err(e) => {
            let error = e.to_string();
            intent.outcome(shared, Outcome::NotIssued { error: &error });
            return refuse(format!("cannot issue an action id: {e}"));
        }
    };
    if intent.outcome(shared, Outcome::Issued).is_none() {
        // Recorded, but never handed out: an id nobody holds approves nothing.
        return outcome_not_journaled(&intent, "the action id was recorded and is not handed out");
    }
    let app = (route == approvals::Route::App).then(|| {
        let key = seal.as_ref().map(crate::seal::SealKey::public_hex);
        crate::telegram::action_param(&action_id, &text_sha256, key.as_deref())
    });
    Response::Proposed {
        action_id,
        server_id,
        text,
        buttons: approvals::buttons_for(&action)
            .iter()
            .map(|(data, label)| aromba_warden_proto::Button {
                data: (*data).into(),
                label: (*label).into(),
            })
            .collect(),
        app,
    }
}

/// Checks `given` against the PIN's hash, counting wrong ones in the
/// Warden's state (`pin::Attempts`); five in a row lock PIN actions and are
/// a ladder signal. The attempt is counted, and written, before the hash is
/// checked, so a Warden killed mid-check has counted it; a count that
/// cannot be read or written refuses the check.
pub(super) fn check_pin(
    shared: &Shared,
    peer: Option<&PeerCred>,
    given: Option<&str>,
) -> Result<(), String> {
    let now = shared.options.clock.now();
    let layout = &shared.options.layout;
    let _one_at_a_time = shared.pin_check.lock().unwrap_or_else(|p| p.into_inner());
    let path = pin::attempts_file(layout);
    let mut attempts = pin::Attempts::load(&path)?;
    let lock_check = attempts.check(now);
    if lock_check.is_err() {
        // A check that never finished may have just locked it: keep that.
        let _ = attempts.save(&path);
    }
    lock_check?;
    let hash = match crate::state::read(layout, pin::RECORD) {
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
    attempts.begin();
    attempts
        .save(&path)
        .map_err(|e| format!("cannot count the PIN attempt, so it is not checked: {e}"))?;
    if pin::matches(&hash, given) {
        attempts.succeeded();
        // Unsaved, the attempt stays counted as wrong: the safe side.
        let _ = attempts.save(&path);
        return Ok(());
    }
    let locked = attempts.failed(now);
    // Unsaved, the wrong PIN is counted all the same (by `begin`), and a
    // fifth one locks at the next check.
    let _ = attempts.save(&path);
    journal(shared, Event::PinWrong { locked });
    if locked {
        raise(
            shared,
            peer,
            Signal::RedActionWithoutApproval {
                action: format!("{} wrong PINs in a row", pin::MAX_FAILURES),
            },
        );
        return Err(format!(
            "{}; PIN actions are now locked for {} minutes",
            aromba_warden_proto::WRONG_PIN,
            pin::LOCK_S / 60
        ));
    }
    Err(aromba_warden_proto::WRONG_PIN.into())
}

/// A relay-signed tap, from the Worker. The tap is journaled before it is
/// verified or spent; the verdict after; the act it approves then journals
/// its own intent before it acts. It carries no PIN: an action that needs
/// one is of the app's route, which no relay tap approves.
pub(super) fn approve(shared: &Shared, peer: &PeerCred, a: Approval) -> Response {
    let tapped = Peer::worker(peer);
    let now = shared.options.clock.now();
    let step = shared.step();
    let answers_freeze =
        step == Step::Freeze && approvals::is_step_down(&shared.options.layout, &a.action_id);
    if step >= Step::Freeze && !answers_freeze {
        // Refused before it is spent: the tap stays good for when the
        // ladder comes down, within its freshness. "Was that you?" is
        // answered at Freeze: it is how Freeze comes down.
        let refused = Event::ApprovalRefused {
            peer: tapped,
            tap: &a,
            reason: "frozen",
        };
        let seq = journal(shared, refused);
        return Response::Refused {
            reason: "the ladder is at Freeze or above: nothing runs until it comes down".into(),
            journal_seq: seq,
        };
    }
    let act = Event::Approval {
        peer: tapped,
        tap: &a,
    };
    let intent = match intend(shared, act) {
        Ok(i) => i,
        Err(e) => return e.into(),
    };
    let refused = |why: String| {
        let seq = intent.outcome(shared, Outcome::Refused { reason: &why });
        Response::Refused {
            reason: why,
            journal_seq: seq,
        }
    };
    let verified = match approvals::verify_and_spend(&shared.options.layout, &a, now) {
        Ok(v) => v,
        Err(approvals::TapRefusal::AlreadyAnswered) => {
            // The person's own double tap, or Approve after Cancel: said,
            // and no anomaly.
            let seq = intent.outcome(shared, Outcome::AlreadyAnswered);
            return Response::AlreadyAnswered { journal_seq: seq };
        }
        // The person's own old proposal: refused, and no anomaly.
        Err(approvals::TapRefusal::Outdated) => return refused(approvals::OUTDATED.into()),
        Err(approvals::TapRefusal::Invalid(why)) => {
            let answer = refused(why);
            // An approval that does not verify is an action without one.
            raise(
                shared,
                Some(peer),
                Signal::RedActionWithoutApproval {
                    action: format!("action {}", a.action_id),
                },
            );
            return answer;
        }
    };
    carry_out(
        shared,
        peer,
        &intent,
        verified,
        &a.button,
        None,
        a.action_id.clone(),
    )
}

/// Carries out an approval that verified (a relay-signed tap or Telegram's
/// launch in the app): `button` is what was tapped, `action_id` what it
/// approved. The intent is the approval's, journaled already.
pub(super) fn carry_out(
    shared: &Shared,
    peer: &PeerCred,
    intent: &Intent,
    verified: approvals::Verified,
    button: &str,
    pin: Option<Pin>,
    action_id: String,
) -> Response {
    let refused = |why: String| {
        let seq = intent.outcome(shared, Outcome::Refused { reason: &why });
        Response::Refused {
            reason: why,
            journal_seq: seq,
        }
    };
    let action = verified.action;
    if button != "approve" {
        let seq = intent.outcome(shared, Outcome::Declined { action: &action });
        return Response::Refused {
            reason: format!(
                "{} {:?}, not to go ahead",
                aromba_warden_proto::DECLINED,
                button
            ),
            journal_seq: seq,
        };
    }
    // The person approved the text they were shown: if the Warden would now
    // say something else (the chore was edited, prod mode turned it red, …),
    // this tap does not cover what would run.
    let subject = match subject_of(shared, &action) {
        Ok(s) => s,
        Err(why) => return refused(why),
    };
    let now_text = approvals::render(&action, &subject.facts());
    if now_text.as_deref().map(approvals::text_sha256) != Ok(verified.text_sha256.clone()) {
        return refused(
            "what this action does changed since it was proposed: the text that was approved no longer describes it; propose it again".into(),
        );
    }
    if let (Action::Run { script_sha256, .. }, Subject::Chore(c)) = (&action, &subject)
        && sha256_hex(c.script.as_bytes()) != *script_sha256
    {
        return refused(
            "the chore's script changed since it was proposed; propose it again".into(),
        );
    }
    if action.needs_pin()
        && let Err(why) = check_pin(shared, Some(peer), pin.as_ref().map(Pin::expose))
    {
        return refused(why);
    }
    if intent
        .outcome(shared, Outcome::Verified { action: &action })
        .is_none()
    {
        return not_journaled(intent.kind());
    }
    let source = RunSource::Approved {
        action_id: action_id.clone(),
    };
    match (action, subject) {
        (Action::Run { .. }, Subject::Chore(chore)) => run_chore(shared, chore, false, source),
        (action @ Action::ConfirmCap { .. }, _) => confirm_cap(shared, &action, source),
        (Action::Undo { undo_id }, _) => undo(shared, &undo_id, source),
        (Action::ProdModeOff, _) => {
            let act = Event::ProdMode {
                on: false,
                by: ProdModeBy::Owner(&source),
            };
            match intend(shared, act) {
                Ok(intent) => set_prod_mode(shared, false, &intent),
                Err(e) => e.into(),
            }
        }
        (
            Action::InstallRelease {
                manifest_sha256, ..
            },
            _,
        ) => super::update::install_release(
            shared,
            &super::update::worker_downloads(shared),
            super::update::Origin::Approved {
                action_id,
                manifest_sha256,
            },
        ),
        (Action::StepDown { .. }, _) => {
            super::dispatch::move_ladder(shared, crate::ladder::Ladder::step_down_by_person)
        }
        (
            Action::InstallSkill {
                name,
                bundle_sha256,
                pin,
                ..
            },
            _,
        ) => super::skills::install_approved(shared, &name, &bundle_sha256, pin, action_id),
        (Action::Run { .. }, _) => refuse("the chore to run is gone"),
    }
}

/// `aromba pin set`: the PIN's argon2id hash becomes a state record.
pub(super) fn set_pin(shared: &Shared, given: &str) -> Response {
    let hash = match pin::hash(given) {
        Ok(h) => h,
        Err(why) => return refuse(why),
    };
    let act = Event::PinSet {
        source: &RunSource::RootTerminal,
    };
    let intent = match intend(shared, act) {
        Ok(i) => i,
        Err(e) => return e.into(),
    };
    let changed = shared.change_state(pin::RECORD, Some(hash.as_bytes()));
    noted_outcome(shared, &intent, changed, "the PIN is set")
}

/// `aromba pair` from a root terminal: pins the relay's tap-signing key,
/// as the relay sent it over the connection `aromba pair` made itself (the
/// Worker never hands it over: a key of its own would let it sign its own
/// approvals). The baseline is retaken with the state record.
pub(super) fn pin_relay_key(shared: &Shared, key: &str) -> Response {
    let key = key.trim();
    if key.len() > 128 || minisign_verify::PublicKey::from_base64(key).is_err() {
        return refuse("the relay key is not a minisign public key (base64)");
    }
    let act = Event::RelayKeyPinned {
        key_sha256: &crate::journal::sha256_hex(key.as_bytes()),
        source: &RunSource::RootTerminal,
    };
    let intent = match intend(shared, act) {
        Ok(i) => i,
        Err(e) => return e.into(),
    };
    let record = format!("{key}\n");
    let changed = shared.change_state(crate::approvals::RELAY_KEY_RECORD, Some(record.as_bytes()));
    noted_outcome(shared, &intent, changed, "the relay key is pinned")
}

/// `aromba prod-mode on|off` from a root terminal; off needs the PIN. The
/// intent is journaled before the PIN is checked.
pub(super) fn prod_mode_from_terminal(shared: &Shared, on: bool, given: Option<&str>) -> Response {
    let act = Event::ProdMode {
        on,
        by: ProdModeBy::Owner(&RunSource::RootTerminal),
    };
    let intent = match intend(shared, act) {
        Ok(i) => i,
        Err(e) => return e.into(),
    };
    if !on && let Err(why) = check_pin(shared, None, given) {
        intent.outcome(shared, Outcome::Refused { reason: &why });
        return refuse(why);
    }
    set_prod_mode(shared, on, &intent)
}

fn set_prod_mode(shared: &Shared, on: bool, intent: &Intent) -> Response {
    let now = shared.options.clock.now();
    let record = format!("on since {now}\n");
    let changed = shared.change_state("prod-mode", if on { Some(record.as_bytes()) } else { None });
    noted_outcome(
        shared,
        intent,
        changed,
        if on {
            "prod mode is on"
        } else {
            "prod mode is off"
        },
    )
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
    let act = Event::Undo {
        undo_id,
        chore: &snap.chore,
        roots: &snap.roots,
        source: &source,
    };
    let intent = match intend(shared, act) {
        Ok(i) => i,
        Err(e) => return e.into(),
    };
    match snap.restore(&dest, now) {
        Ok(r) => {
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
            if r.unsealed {
                let roots: Vec<String> = r
                    .unlisted
                    .iter()
                    .map(|u| u.path.display().to_string())
                    .collect();
                receipt.push_str(&format!(
                    "; the run was never sealed, so only what it removed was put back (and the owner and mode of its directories); what it made under {} was not removed",
                    roots.join(", ")
                ));
            } else {
                for u in &r.unlisted {
                    receipt.push_str("; ");
                    receipt.push_str(&u.note());
                }
            }
            if !r.left_in_staging.is_empty() {
                let left: Vec<String> = r
                    .left_in_staging
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect();
                receipt.push_str(&format!(
                    "; left where they are, in staging, not deleted: {}",
                    left.join(", ")
                ));
            }
            let undone = Outcome::Undone {
                undo_id,
                restored: &r,
                receipt: &receipt,
            };
            if intent.outcome(shared, undone).is_none() {
                return outcome_not_journaled(&intent, &receipt);
            }
            let line = Event::Receipt {
                chore: &snap.chore,
                receipt: &receipt,
                intent_seq: intent.seq,
            };
            journal(shared, line);
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
            let reason = e.to_string();
            let stopped = Outcome::UndoStopped {
                undo_id,
                partial,
                reason: &reason,
            };
            let seq = intent.outcome(shared, stopped);
            Response::Refused {
                reason: e.to_string(),
                journal_seq: seq,
            }
        }
    }
}
