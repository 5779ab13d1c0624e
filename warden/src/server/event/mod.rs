//! The journal's lines, typed. Every kind of line the server writes is a
//! variant of [`Event`] (an act's intent is one too), how an act went is an
//! [`Outcome`], and this file is the only place in the server that writes
//! a line's field names: [`Event::render`] and [`Outcome::render`] turn
//! them into the JSON object `Journal::append` takes (whose keys serde_json
//! keeps sorted). The rest of the server says what happened, never how a
//! line spells it.
//!
//! A kind written in two shapes — an act refused before its intent could
//! be journaled (`chore-run`, `chore-action`, `approval`,
//! `release-install`) — has a variant for each, side by side, rendering
//! to the same kind.
//!
//! The words are the journal's, and the journal is permanent: a field
//! renamed here is a field a reader of older lines no longer finds. The
//! tests below pin each shape to the bytes it had before it was typed.

#![forbid(unsafe_code)]

use super::Socket;
use super::chores::RunSource;
use super::update::Origin;
use crate::approvals::{Action, Approval};
use crate::chores::header::Color;
use crate::chores::run::{Mode, Report};
use crate::chores::snapshot::Restored;
use crate::ladder::Step;
use crate::signal::Signal;
use crate::system::PeerCred;
use crate::worker_dirs::{Wiped, WorkerDirError};
use aromba_release::{Binary, Version};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// Who is on the other end of a socket: `socket`, `peer_uid`, `peer_pid`.
#[derive(Clone, Copy)]
pub(super) struct Peer<'a> {
    cred: &'a PeerCred,
    socket: Socket,
}

impl<'a> Peer<'a> {
    pub(super) fn on(cred: &'a PeerCred, socket: Socket) -> Peer<'a> {
        Peer { cred, socket }
    }

    pub(super) fn worker(cred: &'a PeerCred) -> Peer<'a> {
        Peer::on(cred, Socket::Worker)
    }
}

/// An approval in the Mini App, as Telegram's signature vouches for it.
pub(super) struct AppTap<'a> {
    pub(super) action_id: &'a str,
    pub(super) user_id: u64,
    /// When Telegram made the launch (`auth_date`).
    pub(super) opened_at: u64,
    pub(super) signature: &'a str,
}

/// Which deadline of an exchange passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Deadline {
    /// For the request to arrive whole.
    Request,
    /// For the answer to be taken whole.
    Answer,
}

/// How a read went.
pub(super) enum ReadVerdict<'a> {
    /// The policy refused it (nothing ran).
    Refused { reason: &'a str },
    /// Allowed by `rule`, and it could not run.
    Failed { rule: &'a str, error: &'a str },
    /// It ran; what the Worker got.
    Allowed(ReadRun<'a>),
}

/// A read that ran, as the journal binds it: to exactly the redacted bytes
/// the Worker got.
pub(super) struct ReadRun<'a> {
    pub(super) rule: &'a str,
    pub(super) bin: &'a Path,
    pub(super) run_args: &'a [String],
    pub(super) exit_code: Option<i32>,
    pub(super) signal: Option<i32>,
    pub(super) bytes_out: usize,
    pub(super) cut: bool,
    pub(super) timed_out: bool,
    /// Each redaction class with its count (only those above zero).
    pub(super) redactions: &'a [(String, u64)],
    pub(super) stdout_sha256: &'a str,
    pub(super) stderr_sha256: &'a str,
    pub(super) duration_ms: u64,
}

/// Who turns prod mode on or off.
pub(super) enum ProdModeBy<'a> {
    /// The owner: a root terminal or a verified tap.
    Owner(&'a RunSource),
    /// The Worker's scan, with what it found (on only).
    Scan { findings: &'a [String] },
}

/// How a release that was pending a restart was taken over at start.
pub(super) enum TakenOver<'a> {
    /// The policy's rendering could not be written: nothing was taken.
    PolicyUnwritten { error: &'a str },
    /// The new binaries and policy in the baseline, on disk or not.
    Baseline { written: bool },
}

/// One line of the journal: its kind, and what it says. Intents are
/// written with [`super::intent::intend`], their outcomes as [`Outcome`]s.
/// None of these types is `Debug`: a line is rendered here, never printed
/// (a `Debug` form changes with the code; the journal is permanent).
pub(super) enum Event<'a> {
    // The Warden itself.
    /// `warden-started`: bound, about to serve.
    WardenStarted,
    /// `state-record`: one of the Warden's state records written or
    /// removed; the baseline re-taken with it, or the error.
    StateRecord {
        record: &'a str,
        written: bool,
        error: Option<&'a str>,
    },

    // Connections (a flood repeats these: journaled quietly).
    /// `peer-unknown`: the kernel did not say who is on the other end.
    PeerUnknown { socket: Socket, error: &'a str },
    /// `peer-refused`: a uid the socket does not serve.
    PeerRefused { peer: Peer<'a> },
    /// `connection-refused`: the socket's pool of `pool` was full.
    ConnectionRefused { peer: Peer<'a>, pool: usize },
    /// `connection-thread-failed`: no thread for the connection.
    ConnectionThreadFailed { peer: Peer<'a>, error: &'a str },
    /// `deadline-missed`.
    DeadlineMissed {
        peer: Peer<'a>,
        deadline: Deadline,
        deadline_ms: u64,
    },
    /// `paced`: held back by Slow (`request` as `without_pin` shows it).
    Paced {
        peer: Peer<'a>,
        request: &'a str,
        reason: &'a str,
    },
    /// `left-out`: how many quiet lines of kind `of` were left out.
    LeftOut {
        of: &'static str,
        peer_uid: Option<u32>,
        left_out: u64,
    },

    // Requests.
    /// `malformed`: a frame that is not a request.
    Malformed { peer: Peer<'a>, error: &'a str },
    /// `wrong-socket`: a request the socket does not serve.
    WrongSocket { peer: Peer<'a>, request: &'a str },
    /// `read`: a read from the Worker socket, and how it went.
    Read {
        peer: Peer<'a>,
        cmd: &'a str,
        args: &'a [String],
        verdict: ReadVerdict<'a>,
    },
    /// `worker-note`.
    WorkerNote { peer: Peer<'a>, text: &'a str },
    /// `red-action`: named by the Worker, always refused.
    RedAction {
        peer: Peer<'a>,
        action: &'a str,
        approval: bool,
    },
    /// `run-due`, refused (a run let in is a `chore-run`).
    RunDueRefused {
        peer: Peer<'a>,
        chore: &'a str,
        reason: &'a str,
    },
    /// `dry-run-shown`: recorded, or refused (no dry run to show).
    DryRunShown {
        peer: Peer<'a>,
        chore: &'a str,
        recorded: bool,
    },
    /// `rollback-told`: told, or refused with the reason.
    RollbackTold {
        peer: Peer<'a>,
        version: &'a str,
        refused: Option<&'a str>,
    },
    /// `release-rolled-back`: `aromba-warden rollback` put the release
    /// before back, the Warden stopped meanwhile.
    ReleaseRolledBack { failed: &'a str, restored: &'a str },
    /// `release-restart-failed`: the install's outcome was written, then
    /// systemd could not be asked to restart the services onto it.
    ReleaseRestartFailed { version: &'a str, error: &'a str },

    // The ladder.
    /// `ladder-signal`.
    LadderSignal {
        peer: Option<Peer<'a>>,
        signal: &'a Signal,
    },
    /// `ladder-unwritable`: a move could not be made.
    LadderUnwritable { error: &'a str },
    /// `ladder-move`, and why its file was not saved.
    LadderMove {
        event: &'a crate::ladder::Event,
        unsaved: Option<&'a str>,
    },
    /// `ladder-saved`: a save that had failed went through.
    LadderSaved,
    /// `runs-stopped`: the ladder reached `step`.
    RunsStopped { runs: usize, step: Step },
    /// `ai-key-wiped`: what the wipe found.
    AiKeyWiped {
        path: &'a Path,
        result: &'a Result<Wiped, WorkerDirError>,
    },
    /// `resume` (an intent), from a root terminal.
    Resume { peer: Peer<'a> },

    // What the watcher and the honeypots' thread find.
    /// `quarantine-purged`.
    QuarantinePurged { purged: &'a [PathBuf] },
    /// `snapshots-purged`.
    SnapshotsPurged { undo_ids: &'a [String] },
    /// `honeypots-unwatched`: no honeypot is watched at all.
    HoneypotsUnwatched,
    /// `honeypot-planted`.
    HoneypotPlanted { path: &'a Path },
    /// `honeypot-unwatched`: this one is not watched, and why.
    HoneypotUnwatched { path: &'a Path, why: &'a str },
    /// `honeypot-events-lost`: inotify's queue overflowed.
    HoneypotEventsLost,

    // Chores.
    /// `chore-run` (an intent): what runs, how, on whose approval, and
    /// the undo id its snapshot will take (a red run that may change files),
    /// so a run cut short can be sealed and undone after a restart.
    ChoreRun {
        chore: &'a str,
        mode: Mode,
        color: Color,
        script_sha256: &'a str,
        source: &'a RunSource,
        undo_id: Option<&'a str>,
        /// A red run that may write the quarantine, which undo never
        /// restores (named only when so).
        touches_quarantine: bool,
    },
    /// `chore-run`, refused before its intent.
    ChoreRunRefused {
        chore: &'a str,
        mode: Mode,
        source: &'a RunSource,
        reason: &'a str,
    },
    /// `receipt`: a run's or an undo's, naming the intent it closes.
    Receipt {
        chore: &'a str,
        receipt: &'a str,
        intent_seq: u64,
    },
    /// `chore-action` (an intent): the action as the chore asked it, and
    /// as it runs.
    ChoreAction {
        chore: &'a str,
        action: &'a str,
        run_args: &'a [String],
    },
    /// `chore-action`, refused (nothing runs).
    ChoreActionRefused {
        chore: &'a str,
        action: &'a str,
        reason: &'a str,
    },
    /// `undo` (an intent).
    Undo {
        undo_id: &'a str,
        chore: &'a str,
        roots: &'a [PathBuf],
        source: &'a RunSource,
    },

    // The owner's word.
    /// `action-issued` (an intent): an action id about to be handed out.
    ActionIssued {
        peer: Peer<'a>,
        action: &'a Action,
        action_id: &'a str,
        text_sha256: &'a str,
    },
    /// `approval` (an intent): a tap, before it is verified or spent.
    Approval { peer: Peer<'a>, tap: &'a Approval },
    /// `approval`, refused before it was spent.
    ApprovalRefused {
        peer: Peer<'a>,
        tap: &'a Approval,
        reason: &'a str,
    },
    /// `approval` in the Mini App (an intent): the launch Telegram signed,
    /// verified — the evidence of the person's tap.
    AppApproval { peer: Peer<'a>, tap: &'a AppTap<'a> },
    /// `approval` in the Mini App, refused before it was spent: the
    /// launch's SHA-256 (it is not kept whole), and why.
    AppApprovalRefused {
        peer: Peer<'a>,
        launch_sha256: &'a str,
        reason: &'a str,
    },
    /// `telegram-account-pinned` (an intent): the account `aromba pair`
    /// pinned from launch data Telegram signed.
    TelegramAccountPinned {
        bot_id: u64,
        user_id: u64,
        signature: &'a str,
        source: &'a RunSource,
    },
    /// `pin-wrong`.
    PinWrong { locked: bool },
    /// `pin-set` (an intent).
    PinSet { source: &'a RunSource },
    /// `relay-key-pinned` (an intent).
    RelayKeyPinned {
        key_sha256: &'a str,
        source: &'a RunSource,
    },
    /// `cap-confirmed` (an intent).
    CapConfirmed {
        chore: &'a str,
        max_files: u64,
        max_gb: u64,
        script_sha256: &'a str,
        source: &'a RunSource,
    },
    /// `prod-mode` (an intent).
    ProdMode { on: bool, by: ProdModeBy<'a> },

    // What the scan and `aromba pair` ask.
    /// `fences` (an intent): the folders asked for.
    Fences { asked: &'a [String] },
    /// `network-written` (an intent).
    NetworkWritten { file: &'a Path },

    // Releases and uninstalling.
    /// `release-install` (an intent).
    ReleaseInstall { origin: &'a Origin },
    /// `release-install`, refused: the Worker named a folder.
    ReleaseInstallRefused { peer: Peer<'a>, dir: &'a str },
    /// `release-started`: a pending release taken over at start.
    ReleaseStarted {
        version: Version,
        taken: TakenOver<'a>,
    },
    /// `uninstall` (an intent), from a root terminal.
    Uninstall { purge: bool },

    // Skills.
    /// `skill-install` (an intent): the skill, its bundle's SHA-256, the
    /// hosts granted, what it asked beyond the version before, and where
    /// the install comes from.
    SkillInstall {
        name: &'a str,
        version: &'a str,
        publisher: &'a str,
        sha256: &'a str,
        previous: Option<&'a str>,
        hosts: &'a [String],
        widening: &'a [String],
        origin: &'a super::skills::InstallOrigin,
    },
    /// `skill-remove` (an intent).
    SkillRemove { name: &'a str, version: &'a str },
    /// `skill-set` (an intent): a setting of a skill, its value unless it
    /// is a secret, and the hosts granted after it.
    SkillSet {
        name: &'a str,
        setting: &'a str,
        shown: &'a str,
        hosts: &'a [String],
    },
    /// `skill-tool`: an assistant tool of a skill, run for the Worker in a
    /// cage with nothing writable: refused and why, or how it ran, bound
    /// to the redacted bytes the Worker got by their hashes.
    SkillTool {
        peer: Peer<'a>,
        skill: &'a str,
        tool: &'a str,
        ran: Result<&'a ToolRun<'a>, &'a str>,
    },
    /// `egress`: one connection of a skill's chore through the Warden's
    /// proxy, let through (with the address dialed) or refused and why.
    Egress {
        chore: &'a str,
        connection: &'a crate::egress::Connection,
    },
}

/// How a skill's tool ran.
pub(super) struct ToolRun<'a> {
    pub script_sha256: &'a str,
    pub exit_code: Option<i32>,
    pub cut: bool,
    pub timed_out: bool,
    pub redactions: &'a [(String, u64)],
    pub stdout_sha256: &'a str,
    pub stderr_sha256: &'a str,
    pub duration_ms: u64,
}

/// What an act came to: the second line of its kind (`"phase":"outcome"`).
/// Most acts end in one of the first few; the rest are their kind's own.
pub(super) enum Outcome<'a> {
    /// `done`.
    Done,
    /// `refused`, and why.
    Refused { reason: &'a str },
    /// `failed`, and why.
    Failed { reason: &'a str },
    /// `interrupted`: the Warden stopped (killed, the machine lost power)
    /// while the act was under way; found and closed when it started again.
    /// A red run's snapshot, sealed then: its undo id and what changed.
    Interrupted {
        undo_id: Option<&'a str>,
        changed: Option<&'a str>,
    },

    /// `chore-run`'s: the chore, and what it came to.
    ChoreRun { chore: &'a str, end: RunEnd<'a> },
    /// `chore-action`'s: `ran` with its exit code (`None`: killed), or
    /// `failed` with the error.
    ChoreAction {
        action: &'a str,
        ran: Result<Option<i32>, &'a str>,
    },
    /// `undo`'s: undone, with what it did and its receipt.
    Undone {
        undo_id: &'a str,
        restored: &'a Restored,
        receipt: &'a str,
    },
    /// `undo`'s: stopped, part-way (`failed`: it changed files) or before
    /// changing anything (`refused`).
    UndoStopped {
        undo_id: &'a str,
        partial: bool,
        reason: &'a str,
    },
    /// `action-issued`'s: the id is recorded.
    Issued,
    /// `action-issued`'s: the id could not be recorded.
    NotIssued { error: &'a str },
    /// `approval`'s: a second tap, no anomaly.
    AlreadyAnswered,
    /// `approval`'s: a button other than approve.
    Declined { action: &'a Action },
    /// `approval`'s: the tap holds; the act journals its own intent next.
    Verified { action: &'a Action },
    /// `prod-mode`'s from the scan: it was on already.
    AlreadyOn,
    /// `fences`'s: what was added, how many refused, written or not.
    Fences {
        added: &'a [String],
        refused: usize,
        written: Result<(), &'a str>,
    },
    /// `uninstall`'s.
    Uninstalled {
        removed: &'a [String],
        errors: &'a [String],
    },
    /// `release-install`'s: the intent's fields again, the release once it
    /// was read, and how it ended.
    ReleaseInstall {
        origin: &'a Origin,
        release: Option<&'a ReleaseRead<'a>>,
        end: InstallEnd<'a>,
    },
}

/// How a chore run ended.
pub(super) enum RunEnd<'a> {
    /// Refused before it ran (`refused`), with nothing of the run's.
    Refused { reason: &'a str },
    /// Went no further than `reason`: `refused` when nothing ran,
    /// `failed` otherwise.
    Stopped {
        left: &'a RunLeft<'a>,
        never_ran: bool,
        reason: &'a str,
    },
    /// Ran to its end.
    Ran {
        left: &'a RunLeft<'a>,
        report: &'a Report,
        /// The entries that gained privilege, as named (bounded).
        gained: &'a [String],
        clean: bool,
    },
}

/// What a run left behind besides its report: what it did to the
/// quarantine, a seal that failed, its undo id.
#[derive(Default)]
pub(super) struct RunLeft<'a> {
    /// What Undo cannot put back of the quarantine.
    pub(super) quarantine_lost: Option<&'a str>,
    /// Why the seal failed (the snapshot is kept).
    pub(super) seal_failed: Option<&'a str>,
    pub(super) undo_id: Option<&'a str>,
}

/// A release as read from its download, before it was judged further.
pub(super) struct ReleaseRead<'a> {
    pub(super) version: Version,
    /// The commit the release key's signature names, if any.
    pub(super) commit: Option<&'a str>,
    pub(super) manifest_sha256: &'a str,
}

/// How an install ended.
pub(super) enum InstallEnd<'a> {
    Refused {
        reason: &'a str,
    },
    Installed {
        prune_error: Option<&'a str>,
        previous: Option<Version>,
        worker_sha256: &'a str,
        warden_sha256: &'a str,
        /// "asked next" (the line is written first: the restart ends this
        /// process, maybe before a line after it), or why not.
        restart: &'a str,
    },
}

/// A line rendered: its kind, and its fields (`kind` among them).
pub(super) struct Rendered {
    pub(super) kind: &'static str,
    fields: Map<String, Value>,
}

impl Rendered {
    /// The fields, for `Journal::append`.
    pub(super) fn into_fields(self) -> Map<String, Value> {
        self.fields
    }

    /// The line as one of `kind`, a kind read back from the journal (an
    /// intent closed after a restart).
    pub(super) fn with_kind(mut self, kind: &str) -> Rendered {
        self.fields.insert("kind".into(), kind.into());
        self
    }

    /// The line as an intent: `"phase":"intent"`.
    pub(super) fn intent(mut self) -> Rendered {
        self.fields.insert("phase".into(), "intent".into());
        self
    }

    /// A quiet line, with how many of its kind (and peer) were left out
    /// since the last one written.
    pub(super) fn quiet(mut self, left_out_before: u64) -> Rendered {
        self.fields
            .insert("left_out_before".into(), left_out_before.into());
        self
    }
}

/// A line's fields as they are put in.
struct Fields(Map<String, Value>);

impl Fields {
    fn new() -> Fields {
        Fields(Map::new())
    }

    fn put(&mut self, key: &str, value: impl Into<Value>) -> &mut Fields {
        debug_assert!(
            !crate::journal::CHAIN_FIELDS.contains(&key),
            "{key} is written by the journal itself"
        );
        self.0.insert(key.into(), value.into());
        self
    }

    /// `key` only when there is a value.
    fn put_some(&mut self, key: &str, value: Option<impl Into<Value>>) -> &mut Fields {
        if let Some(v) = value {
            self.put(key, v);
        }
        self
    }

    /// A number, or `null` when there is none.
    fn put_or_null(&mut self, key: &str, value: Option<impl Into<Value>>) -> &mut Fields {
        self.put(key, value.map_or(Value::Null, Into::into))
    }

    fn peer(&mut self, peer: Peer<'_>) -> &mut Fields {
        self.put("socket", peer.socket.name())
            .put("peer_uid", peer.cred.uid)
            .put("peer_pid", peer.cred.pid)
    }

    /// On whose approval: `approval`, and the tap's `action_id`.
    fn source(&mut self, source: &RunSource) -> &mut Fields {
        self.put("approval", source_name(source));
        if let RunSource::Approved { action_id } = source {
            self.put("action_id", action_id.as_str());
        }
        self
    }

    fn tap(&mut self, tap: &Approval) -> &mut Fields {
        self.put("action_id", tap.action_id.as_str())
            .put("button", tap.button.as_str())
            .put("chat", tap.chat.as_str())
            // The time the relay signed: `time` is the line's own.
            .put("tap_time", tap.time)
    }

    fn refused(&mut self, reason: &str) -> &mut Fields {
        self.verdict("refused").put("reason", reason)
    }

    fn verdict(&mut self, verdict: &str) -> &mut Fields {
        self.put("verdict", verdict)
    }
}

/// Redactions per class, as a journal line holds them.
fn redaction_counts(counts: &[(String, u64)]) -> Value {
    Value::Object(
        counts
            .iter()
            .map(|(k, n)| (k.clone(), Value::from(*n)))
            .collect(),
    )
}

fn lossy(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

fn lossy_all(paths: &[PathBuf]) -> Vec<String> {
    paths.iter().map(|p| lossy(p)).collect()
}

/// On whose approval a chore run (or another act of the owner's) is made.
fn source_name(source: &RunSource) -> &'static str {
    match source {
        RunSource::RootTerminal => "root terminal",
        RunSource::Worker => "worker (dry run)",
        RunSource::Approved { .. } => "relay-signed tap",
        RunSource::Schedule => "schedule (green chore)",
    }
}

fn origin_name(origin: &Origin) -> &'static str {
    match origin {
        Origin::Worker => "worker",
        Origin::Approved { .. } => "approved tap",
        Origin::RootTerminal => "root terminal",
    }
}

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::DryRun => "dry-run",
        Mode::Real => "real",
    }
}

impl Event<'_> {
    /// The uid of the peer the line is about, if any: quiet lines are
    /// counted per kind and uid.
    pub(super) fn peer_uid(&self) -> Option<u32> {
        match self {
            Event::PeerRefused { peer }
            | Event::ConnectionRefused { peer, .. }
            | Event::ConnectionThreadFailed { peer, .. }
            | Event::DeadlineMissed { peer, .. }
            | Event::Paced { peer, .. }
            | Event::Malformed { peer, .. }
            | Event::WrongSocket { peer, .. }
            | Event::WorkerNote { peer, .. }
            | Event::RedAction { peer, .. }
            | Event::RunDueRefused { peer, .. }
            | Event::DryRunShown { peer, .. }
            | Event::RollbackTold { peer, .. }
            | Event::LadderSignal {
                peer: Some(peer), ..
            }
            | Event::Resume { peer }
            | Event::ActionIssued { peer, .. }
            | Event::Approval { peer, .. }
            | Event::ApprovalRefused { peer, .. }
            | Event::AppApproval { peer, .. }
            | Event::AppApprovalRefused { peer, .. }
            | Event::ReleaseInstallRefused { peer, .. }
            | Event::Read { peer, .. } => Some(peer.cred.uid),
            Event::LeftOut { peer_uid, .. } => *peer_uid,
            _ => None,
        }
    }

    /// The line: its kind and its fields. The one place a line's field
    /// names are written (with [`Outcome::render`] for outcomes).
    pub(super) fn render(&self) -> Rendered {
        let mut f = Fields::new();
        let kind = match self {
            Event::WardenStarted => "warden-started",
            Event::StateRecord {
                record,
                written,
                error,
            } => {
                f.put("record", *record)
                    .put("change", if *written { "written" } else { "removed" });
                match error {
                    None => f.put("baseline", "re-taken"),
                    Some(e) => f.put("error", *e),
                };
                "state-record"
            }
            Event::PeerUnknown { socket, error } => {
                f.put("socket", socket.name()).put("error", *error);
                "peer-unknown"
            }
            Event::PeerRefused { peer } => {
                f.peer(*peer);
                "peer-refused"
            }
            Event::ConnectionRefused { peer, pool } => {
                f.peer(*peer).put("pool", *pool);
                "connection-refused"
            }
            Event::ConnectionThreadFailed { peer, error } => {
                f.peer(*peer).put("error", *error);
                "connection-thread-failed"
            }
            Event::DeadlineMissed {
                peer,
                deadline,
                deadline_ms,
            } => {
                let which = match deadline {
                    Deadline::Request => "request",
                    Deadline::Answer => "answer",
                };
                f.peer(*peer)
                    .put("deadline", which)
                    .put("deadline_ms", *deadline_ms);
                "deadline-missed"
            }
            Event::Paced {
                peer,
                request,
                reason,
            } => {
                f.peer(*peer)
                    .put("request", *request)
                    .put("reason", *reason);
                "paced"
            }
            Event::LeftOut {
                of,
                peer_uid,
                left_out,
            } => {
                f.put("of", *of)
                    .put_some("peer_uid", *peer_uid)
                    .put("left_out", *left_out);
                "left-out"
            }
            Event::Malformed { peer, error } => {
                f.peer(*peer).put("error", *error);
                "malformed"
            }
            Event::WrongSocket { peer, request } => {
                f.peer(*peer).put("request", *request);
                "wrong-socket"
            }
            Event::Read {
                peer,
                cmd,
                args,
                verdict,
            } => {
                f.peer(*peer).put("cmd", *cmd).put("args", *args);
                match verdict {
                    ReadVerdict::Refused { reason } => {
                        f.refused(reason);
                    }
                    ReadVerdict::Failed { rule, error } => {
                        f.put("rule", *rule).verdict("failed").put("error", *error);
                    }
                    ReadVerdict::Allowed(r) => {
                        f.put("rule", r.rule)
                            .verdict("allowed")
                            .put("bin", lossy(r.bin))
                            .put("run_args", r.run_args)
                            .put_or_null("exit_code", r.exit_code)
                            .put_or_null("signal", r.signal)
                            .put("bytes_out", r.bytes_out)
                            .put("cut", r.cut)
                            .put("timed_out", r.timed_out)
                            .put("redactions", redaction_counts(r.redactions))
                            .put("stdout_sha256", r.stdout_sha256)
                            .put("stderr_sha256", r.stderr_sha256)
                            .put("duration_ms", r.duration_ms);
                    }
                }
                "read"
            }
            Event::WorkerNote { peer, text } => {
                f.peer(*peer).put("text", *text);
                "worker-note"
            }
            Event::RedAction {
                peer,
                action,
                approval,
            } => {
                f.peer(*peer)
                    .put("action", *action)
                    .put("approval", *approval)
                    .verdict("refused");
                "red-action"
            }
            Event::RunDueRefused {
                peer,
                chore,
                reason,
            } => {
                f.peer(*peer).put("chore", *chore).refused(reason);
                "run-due"
            }
            Event::DryRunShown {
                peer,
                chore,
                recorded,
            } => {
                f.peer(*peer).put("chore", *chore).verdict(if *recorded {
                    "recorded"
                } else {
                    "refused"
                });
                "dry-run-shown"
            }
            Event::RollbackTold {
                peer,
                version,
                refused,
            } => {
                f.peer(*peer).put("version", *version);
                match refused {
                    None => f.verdict("told"),
                    Some(why) => f.refused(why),
                };
                "rollback-told"
            }
            Event::ReleaseRolledBack { failed, restored } => {
                f.put("failed", *failed).put("restored", *restored);
                "release-rolled-back"
            }
            Event::ReleaseRestartFailed { version, error } => {
                f.put("version", *version).put("error", *error);
                "release-restart-failed"
            }
            Event::LadderSignal { peer, signal } => {
                if let Some(peer) = peer {
                    f.peer(*peer);
                }
                f.put("signal", signal.kind())
                    .put("detail", signal.to_string());
                "ladder-signal"
            }
            Event::LadderUnwritable { error } => {
                f.put("error", *error);
                "ladder-unwritable"
            }
            Event::LadderMove { event, unsaved } => {
                f.put("event_id", event.id)
                    .put("from", event.from.name())
                    .put("to", event.to.name())
                    .put("reason", event.reason.as_str())
                    .put("message", event.message.as_str())
                    .put_some("unsaved", *unsaved);
                "ladder-move"
            }
            Event::LadderSaved => "ladder-saved",
            Event::RunsStopped { runs, step } => {
                f.put("runs", *runs).put("step", step.name());
                "runs-stopped"
            }
            Event::AiKeyWiped { path, result } => {
                f.put("path", lossy(path));
                match result {
                    Err(e) => {
                        f.put("error", e.to_string());
                    }
                    Ok(Wiped::LinkRemoved) => {
                        f.put("found", "a symbolic link: removed, not followed");
                    }
                    Ok(Wiped::RemovedUnwritten(why)) => {
                        f.put("found", why.as_str());
                    }
                    Ok(Wiped::Absent | Wiped::Overwritten) => {}
                }
                "ai-key-wiped"
            }
            Event::Resume { peer } => {
                f.peer(*peer);
                "resume"
            }
            Event::QuarantinePurged { purged } => {
                f.put("purged", lossy_all(purged));
                "quarantine-purged"
            }
            Event::SnapshotsPurged { undo_ids } => {
                f.put("undo_ids", *undo_ids);
                "snapshots-purged"
            }
            Event::HoneypotsUnwatched => "honeypots-unwatched",
            Event::HoneypotPlanted { path } => {
                f.put("path", lossy(path));
                "honeypot-planted"
            }
            Event::HoneypotUnwatched { path, why } => {
                f.put("path", lossy(path)).put("why", *why);
                "honeypot-unwatched"
            }
            Event::HoneypotEventsLost => "honeypot-events-lost",
            Event::ChoreRun {
                chore,
                mode,
                color,
                script_sha256,
                source,
                undo_id,
                touches_quarantine,
            } => {
                f.put("chore", *chore)
                    .put("mode", mode_name(*mode))
                    .put("color", color.name())
                    .put("script_sha256", *script_sha256)
                    .source(source)
                    .put_some("undo_id", *undo_id)
                    .put_some("touches_quarantine", touches_quarantine.then_some(true));
                "chore-run"
            }
            Event::ChoreRunRefused {
                chore,
                mode,
                source,
                reason,
            } => {
                f.put("chore", *chore)
                    .put("mode", mode_name(*mode))
                    .source(source)
                    .refused(reason);
                "chore-run"
            }
            Event::Receipt {
                chore,
                receipt,
                intent_seq,
            } => {
                f.put("chore", *chore)
                    .put("receipt", *receipt)
                    .put("intent_seq", *intent_seq);
                "receipt"
            }
            Event::ChoreAction {
                chore,
                action,
                run_args,
            } => {
                f.put("chore", *chore)
                    .put("action", *action)
                    .put("run_args", *run_args);
                "chore-action"
            }
            Event::ChoreActionRefused {
                chore,
                action,
                reason,
            } => {
                f.put("chore", *chore)
                    .put("action", *action)
                    .refused(reason);
                "chore-action"
            }
            Event::Undo {
                undo_id,
                chore,
                roots,
                source,
            } => {
                f.put("undo_id", *undo_id)
                    .put("chore", *chore)
                    .put("roots", lossy_all(roots))
                    .source(source);
                "undo"
            }
            Event::ActionIssued {
                peer,
                action,
                action_id,
                text_sha256,
            } => {
                f.peer(*peer)
                    .put("action", action.journal_value())
                    .put("action_id", *action_id)
                    .put("text_sha256", *text_sha256);
                "action-issued"
            }
            Event::Approval { peer, tap } => {
                f.peer(*peer).tap(tap);
                "approval"
            }
            Event::ApprovalRefused { peer, tap, reason } => {
                f.peer(*peer).tap(tap).refused(reason);
                "approval"
            }
            Event::AppApproval { peer, tap } => {
                f.peer(*peer)
                    .put("via", "app")
                    .put("action_id", tap.action_id)
                    .put("button", "approve")
                    .put("telegram_user", tap.user_id)
                    .put("opened_at", tap.opened_at)
                    .put("telegram_signature", tap.signature);
                "approval"
            }
            Event::AppApprovalRefused {
                peer,
                launch_sha256,
                reason,
            } => {
                f.peer(*peer)
                    .put("via", "app")
                    .put("launch_sha256", *launch_sha256)
                    .refused(reason);
                "approval"
            }
            Event::TelegramAccountPinned {
                bot_id,
                user_id,
                signature,
                source,
            } => {
                f.put("bot_id", *bot_id)
                    .put("telegram_user", *user_id)
                    .put("telegram_signature", *signature)
                    .source(source);
                "telegram-account-pinned"
            }
            Event::PinWrong { locked } => {
                f.put("locked", *locked);
                "pin-wrong"
            }
            Event::PinSet { source } => {
                f.source(source);
                "pin-set"
            }
            Event::RelayKeyPinned { key_sha256, source } => {
                f.put("key_sha256", *key_sha256).source(source);
                "relay-key-pinned"
            }
            Event::CapConfirmed {
                chore,
                max_files,
                max_gb,
                script_sha256,
                source,
            } => {
                f.put("chore", *chore)
                    .put("max_files", *max_files)
                    .put("max_gb", *max_gb)
                    .put("script_sha256", *script_sha256)
                    .source(source);
                "cap-confirmed"
            }
            Event::ProdMode { on, by } => {
                f.put("on", *on);
                match by {
                    ProdModeBy::Owner(source) => {
                        f.source(source);
                    }
                    ProdModeBy::Scan { findings } => {
                        f.put("source", "scan").put("findings", *findings);
                    }
                }
                "prod-mode"
            }
            Event::Fences { asked } => {
                f.put("asked", *asked);
                "fences"
            }
            Event::NetworkWritten { file } => {
                f.put("file", lossy(file));
                "network-written"
            }
            Event::ReleaseInstall { origin } => {
                release_origin(&mut f, origin);
                "release-install"
            }
            Event::SkillInstall {
                name,
                version,
                publisher,
                sha256,
                previous,
                hosts,
                widening,
                origin,
            } => {
                f.put("skill", *name)
                    .put("version", *version)
                    .put("publisher", *publisher)
                    .put("bundle_sha256", *sha256)
                    .put_some("previous", *previous)
                    .put("hosts", hosts.to_vec())
                    .put("widening", widening.to_vec())
                    .put("origin", origin.name());
                if let super::skills::InstallOrigin::Approved { action_id } = origin {
                    f.put("action_id", action_id.as_str());
                }
                "skill-install"
            }
            Event::SkillRemove { name, version } => {
                f.put("skill", *name).put("version", *version);
                "skill-remove"
            }
            Event::SkillSet {
                name,
                setting,
                shown,
                hosts,
            } => {
                f.put("skill", *name)
                    .put("setting", *setting)
                    .put("value", *shown)
                    .put("hosts", hosts.to_vec());
                "skill-set"
            }
            Event::SkillTool {
                peer,
                skill,
                tool,
                ran,
            } => {
                f.peer(*peer).put("skill", *skill).put("tool", *tool);
                match ran {
                    Err(why) => {
                        f.refused(why);
                    }
                    Ok(r) => {
                        f.verdict("allowed")
                            .put("script_sha256", r.script_sha256)
                            .put_or_null("exit_code", r.exit_code)
                            .put("cut", r.cut)
                            .put("timed_out", r.timed_out)
                            .put("redactions", redaction_counts(r.redactions))
                            .put("stdout_sha256", r.stdout_sha256)
                            .put("stderr_sha256", r.stderr_sha256)
                            .put("duration_ms", r.duration_ms);
                    }
                }
                "skill-tool"
            }
            Event::Egress { chore, connection } => {
                f.put("chore", *chore)
                    .put("target", connection.target.as_str())
                    .put_some("address", connection.address.map(|a| a.to_string()));
                match &connection.verdict {
                    Ok(()) => f.verdict("allowed"),
                    Err(why) => f.refused(why),
                };
                "egress"
            }
            Event::ReleaseInstallRefused { peer, dir } => {
                f.peer(*peer).put("dir", *dir).verdict("refused");
                "release-install"
            }
            Event::ReleaseStarted { version, taken } => {
                f.put("version", version.to_string());
                match taken {
                    TakenOver::PolicyUnwritten { error } => f.put("error", *error),
                    TakenOver::Baseline { written } => f.put(
                        "baseline",
                        if *written { "re-taken" } else { "not written" },
                    ),
                };
                "release-started"
            }
            Event::Uninstall { purge } => {
                f.put("purge", *purge).put("origin", "root terminal");
                "uninstall"
            }
        };
        f.put("kind", kind);
        Rendered { kind, fields: f.0 }
    }
}

/// Who asked for an install: `origin`, and the tap's `action_id`.
fn release_origin(f: &mut Fields, origin: &Origin) {
    f.put("origin", origin_name(origin));
    if let Origin::Approved { action_id, .. } = origin {
        f.put("action_id", action_id.as_str());
    }
}

impl Outcome<'_> {
    /// The kind whose act ends this way, for an outcome of one kind only;
    /// `None` for the verdicts any act may end in.
    pub(super) fn of_kind(&self) -> Option<&'static str> {
        Some(match self {
            Outcome::Done
            | Outcome::Refused { .. }
            | Outcome::Failed { .. }
            | Outcome::Interrupted { .. } => return None,
            Outcome::ChoreRun { .. } => "chore-run",
            Outcome::ChoreAction { .. } => "chore-action",
            Outcome::Undone { .. } | Outcome::UndoStopped { .. } => "undo",
            Outcome::Issued | Outcome::NotIssued { .. } => "action-issued",
            Outcome::AlreadyAnswered | Outcome::Declined { .. } | Outcome::Verified { .. } => {
                "approval"
            }
            Outcome::AlreadyOn => "prod-mode",
            Outcome::Fences { .. } => "fences",
            Outcome::Uninstalled { .. } => "uninstall",
            Outcome::ReleaseInstall { .. } => "release-install",
        })
    }

    /// The outcome line of the intent of `kind` at `intent_seq`.
    pub(super) fn render(&self, kind: &'static str, intent_seq: u64) -> Rendered {
        let mut f = Fields::new();
        match self {
            Outcome::Done => {
                f.verdict("done");
            }
            Outcome::Refused { reason } => {
                f.refused(reason);
            }
            Outcome::Failed { reason } => {
                f.verdict("failed").put("reason", *reason);
            }
            Outcome::Interrupted { undo_id, changed } => {
                f.verdict("interrupted")
                    .put(
                        "reason",
                        "the Warden stopped while this was under way; found when it started again",
                    )
                    .put_some("undo_id", *undo_id)
                    .put_some("changed", *changed);
            }
            Outcome::ChoreRun { chore, end } => {
                f.put("chore", *chore);
                run_end(&mut f, end);
            }
            Outcome::ChoreAction { action, ran } => {
                f.put("action", *action);
                match ran {
                    Ok(exit_code) => f.verdict("ran").put_or_null("exit_code", *exit_code),
                    Err(error) => f.verdict("failed").put("error", *error),
                };
            }
            Outcome::Undone {
                undo_id,
                restored: r,
                receipt,
            } => {
                f.put("undo_id", *undo_id)
                    .put("restored", r.restored)
                    .put("quarantined", r.quarantined)
                    .put("conflicts", r.conflicts)
                    .verdict("undone")
                    .put("receipt", *receipt);
                if !r.unlisted.is_empty() {
                    f.put(
                        "unlisted",
                        r.unlisted.iter().map(|u| u.note()).collect::<Vec<_>>(),
                    );
                }
                if !r.left_in_staging.is_empty() {
                    f.put(
                        "left_in_staging",
                        r.left_in_staging
                            .iter()
                            .map(|p| p.display().to_string())
                            .collect::<Vec<_>>(),
                    );
                }
            }
            Outcome::UndoStopped {
                undo_id,
                partial,
                reason,
            } => {
                f.put("undo_id", *undo_id)
                    .verdict(if *partial { "failed" } else { "refused" })
                    .put("reason", *reason);
            }
            Outcome::Issued => {
                f.verdict("issued");
            }
            Outcome::NotIssued { error } => {
                f.verdict("failed").put("error", *error);
            }
            Outcome::AlreadyAnswered => {
                f.verdict("already-answered");
            }
            Outcome::Declined { action } => {
                f.verdict("declined").put("action", action.journal_value());
            }
            Outcome::Verified { action } => {
                f.verdict("verified").put("action", action.journal_value());
            }
            Outcome::AlreadyOn => {
                f.verdict("already on");
            }
            Outcome::Fences {
                added,
                refused,
                written,
            } => {
                f.put("added", *added).put("refused", *refused);
                match written {
                    Ok(()) => f.verdict("done"),
                    Err(why) => f.verdict("failed").put("reason", *why),
                };
            }
            Outcome::Uninstalled { removed, errors } => {
                f.verdict(if errors.is_empty() {
                    "uninstalled"
                } else {
                    "uninstalled, with errors"
                })
                .put("removed", *removed)
                .put("errors", *errors);
            }
            Outcome::ReleaseInstall {
                origin,
                release,
                end,
            } => {
                release_origin(&mut f, origin);
                if let Some(r) = release {
                    f.put("version", r.version.to_string())
                        .put_or_null("commit", r.commit)
                        .put("manifest_sha256", r.manifest_sha256);
                }
                match end {
                    InstallEnd::Refused { reason } => {
                        f.refused(reason);
                    }
                    InstallEnd::Installed {
                        prune_error,
                        previous,
                        worker_sha256,
                        warden_sha256,
                        restart,
                    } => {
                        f.put_some("prune_error", *prune_error)
                            .verdict("installed")
                            .put_or_null("previous", previous.map(|v| v.to_string()))
                            .put(
                                &format!("{}_sha256", Binary::Worker.file_name()),
                                *worker_sha256,
                            )
                            .put(
                                &format!("{}_sha256", Binary::Warden.file_name()),
                                *warden_sha256,
                            )
                            .put("restart", *restart);
                    }
                }
            }
        }
        f.put("kind", kind)
            .put("phase", "outcome")
            .put("intent_seq", intent_seq);
        Rendered { kind, fields: f.0 }
    }
}

/// A chore run's end, into its outcome line.
fn run_end(f: &mut Fields, end: &RunEnd<'_>) {
    let left = |f: &mut Fields, left: &RunLeft<'_>| {
        f.put_some(
            "quarantine",
            left.quarantine_lost
                .map(|lost| format!("{lost}: undo cannot put them back")),
        )
        .put_some("snapshot", left.seal_failed)
        .put_some("undo_id", left.undo_id);
    };
    match end {
        RunEnd::Refused { reason } => {
            f.refused(reason);
        }
        RunEnd::Stopped {
            left: l,
            never_ran,
            reason,
        } => {
            left(f, l);
            f.verdict(if *never_ran { "refused" } else { "failed" })
                .put("reason", *reason);
        }
        RunEnd::Ran {
            left: l,
            report,
            gained,
            clean,
        } => {
            left(f, l);
            let o = &report.outcome;
            f.put_or_null("exit_code", o.exit_code)
                .put("files_changed", report.files_changed)
                .put("bytes_changed", report.bytes_changed)
                .put("over_cap", report.over_cap)
                .put_some("memory_exceeded", o.memory_exceeded.then_some(true))
                .put_some("halted", report.halted.then_some(true))
                .put("outside_touches", report.outside_touches);
            if !gained.is_empty() {
                f.put("gained_privilege", *gained);
            }
            f.verdict(if *clean { "clean" } else { "failed" });
        }
    }
}

#[cfg(test)]
mod tests;
