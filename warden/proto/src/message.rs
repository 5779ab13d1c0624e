//! Typed messages and their strict JSON form.

use crate::hex::{decode_hex, encode_hex};
use crate::{Pin, SettingValue};
use serde_json::{Map, Value};
use std::fmt;

/// The most arguments a read request may carry (the policy's own limits are
/// lower; this bounds what the Warden has to look at).
pub const MAX_ARGS: usize = 64;
/// A journal note from the Worker.
pub const MAX_NOTE: usize = 2048;
/// The most reads a health answer may carry.
pub const MAX_HEALTH_READS: usize = 16;
/// The most folders one request may ask to fence.
pub const MAX_FENCES_ASKED: usize = 64;
/// The most findings one prod-mode request may carry, and the longest one.
pub const MAX_FINDINGS: usize = 8;
pub const MAX_FINDING: usize = 300;
/// The most lines a list of releases or of removed and kept paths holds.
pub const MAX_LISTED: usize = 64;

/// What a peer asks the Warden.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Worker socket: run a read from the policy's `[[allow]]` list.
    Read { cmd: String, args: Vec<String> },
    /// Worker socket: add a line to the journal.
    Note { text: String },
    /// Either socket: what the Trust page shows besides the status: the
    /// policy rendering, the fence list and the journal's last check.
    Trust,
    /// Either socket: is the Warden there?
    Ping,
    /// Control socket: the Warden's state.
    Status,
    /// Control socket: verify the journal's chain.
    JournalVerify,
    /// Worker socket: `/panic` from the chat (the ladder to Cut). Control
    /// socket: `aromba panic` (the ladder to Disarm).
    Panic,
    /// Control socket: `aromba resume`, back to normal.
    Resume,
    /// Worker socket: the ladder's moves after event `after`, for the chat.
    Events { after: u64 },
    /// Worker socket: the journal head the relay holds, with the relay's
    /// signature over it (`docs/approvals.md`); the Warden checks its
    /// journal still extends it. Only an anchor signed with the pinned
    /// relay key is evidence (a journal cut below it is a signal); one
    /// without is refused and moves nothing.
    CheckAnchor {
        seq: u64,
        hash: String,
        signature: Option<String>,
    },
    /// Worker socket: which uid serves the socket at the other end of the
    /// Worker's TCP connection from `local` to `peer` on this machine (the
    /// Worker's own view of the kernel's tables hides other uids under its
    /// unit's user namespace).
    SocketOwner { local: String, peer: String },
    /// Worker socket: the health reads, a fixed set the Warden chooses, in
    /// one request (one command toward too-many-commands).
    Health,
    /// Worker socket: a red action. Refused unless its approval verifies.
    RedAction {
        action: String,
        approval: Option<String>,
    },
    /// Control socket: every chore, its color, schedule and last receipt.
    Chores,
    /// Control socket: run one chore now, from a root terminal (the owner's
    /// approval).
    ChoreRun { name: String, dry_run: bool },
    /// Worker socket: a dry run of a chore, to show in the chat.
    DryRun { chore: String },
    /// Worker socket: the dry run was shown to the user.
    DryRunShown { chore: String },
    /// Worker socket: propose a real run; the Warden issues an action id.
    Propose { chore: String },
    /// Worker socket: a green chore's schedule says it is due; the Warden
    /// runs it when it is green, its dry run was seen, and it did not run
    /// on its schedule too recently.
    RunDue { chore: String },
    /// Worker socket: a relay-signed button tap approving an action. It
    /// carries no PIN: every action that needs one is approved in the Mini
    /// App, where the PIN comes sealed (`ApproveInApp`), so a `pin` here is
    /// a field the request does not have, and refused.
    Approve {
        action_id: String,
        button: String,
        chat: String,
        time: u64,
        signature: String,
    },
    /// Worker socket: the person approved an action in the Mini App:
    /// the launch data Telegram signed when they opened it from the
    /// proposal's button (its `start_param` names the action and the
    /// text), passed on untouched; for an action that needs the PIN, the
    /// PIN the page sealed for this Warden (`seal.rs`), which nothing on
    /// the way can open.
    ApproveInApp {
        launch: String,
        sealed_pin: Option<String>,
    },
    /// Worker socket: propose confirming a chore's damage cap above the
    /// default.
    ProposeConfirmCap { chore: String },
    /// Worker socket: propose undoing a run, by the undo id of its receipt.
    ProposeUndo { undo_id: String },
    /// Worker socket: propose turning prod mode off (a PIN action).
    ProposeProdModeOff,
    /// Worker socket: ask the person "Was that you?" about the ladder's
    /// last move to Slow or Freeze, with buttons that step it down (a
    /// signed tap) or stop Aromba.
    ProposeStepDown,
    /// Control socket: the owner confirms a chore's declared damage cap.
    ConfirmCap { chore: String },
    /// Control socket: set or replace the PIN.
    SetPin { pin: Pin },
    /// Control socket: pin the relay's tap-signing public key (minisign,
    /// base64), as `aromba pair` received it from the relay.
    PinRelayKey { key: String },
    /// Control socket: pin the Telegram account this server is paired
    /// with, from the launch data Telegram signed when the person opened
    /// the Mini App with the pairing's `start_param`; `bot_id` is the
    /// relay's bot, as `aromba pair` received it.
    PinTelegramAccount {
        launch: String,
        bot_id: u64,
        start_param: String,
    },
    /// Control socket: turn prod mode on, or off (which needs the PIN).
    ProdMode { on: bool, pin: Option<Pin> },
    /// Control socket: undo a run, by the undo id of its receipt.
    Undo { undo_id: String },
    /// Worker socket: the first scan saw a production server; turn prod
    /// mode on (never off: that is a PIN action), saying why.
    ProdModeOn { findings: Vec<String> },
    /// Worker socket: fence these data folders (the scan found them). A
    /// fence is only ever added from the Worker, never removed.
    AddFences { paths: Vec<String> },
    /// Control socket: `aromba pair` rewrote the Worker's `network.toml`;
    /// the Warden re-takes its hash in the integrity baseline.
    NetworkWritten,
    /// Install the release downloaded into a folder: on the Worker socket
    /// always the Worker's own download folder (`dir` must be `None`), on
    /// the control socket a folder root names (`aromba update`).
    InstallRelease { dir: Option<String> },
    /// Worker socket: propose installing the release in the Worker's
    /// download folder (a minor or major one, which installs on a tap).
    ProposeRelease,
    /// Either socket: the releases installed here, and a rollback the chat
    /// has not been told of.
    Releases,
    /// Worker socket: the chat was told of the rollback from `version`.
    RollbackTold { version: String },
    /// Control socket (`aromba uninstall`): stop and remove the services,
    /// the releases, the Worker's state and user; the journal is kept
    /// unless `purge`.
    Uninstall { purge: bool },
    /// Control socket: read the skill bundle at `path` and say what it
    /// asks for (and what more than the installed version), installing
    /// nothing.
    SkillCheck { path: String },
    /// Control socket: install the bundle at `path`, which must still be
    /// the one shown (`sha256`); `pin` when it asks for hosts not granted.
    SkillInstall {
        path: String,
        sha256: String,
        pin: Option<Pin>,
    },
    /// Control socket: remove skill `name` and everything of its.
    SkillRemove { name: String },
    /// Control socket: set `setting` of the installed skill `name`; `pin`
    /// when it is a host setting naming a host not granted before.
    SkillSet {
        name: String,
        setting: String,
        value: SettingValue,
        pin: Option<Pin>,
    },
    /// Worker socket: propose installing the skill bundle the Worker
    /// downloaded from the catalogue (`skill-downloads/NAME.skill` in its
    /// home),
    /// shown in full in the Mini App; a bundle asking for hosts not
    /// granted here needs the PIN there too.
    ProposeSkill { name: String },
    /// Worker socket: apply the update of the installed skill `name` the
    /// Worker downloaded (`skill-downloads/NAME.skill` in its home) when it asks
    /// for nothing more than the installed version; one that asks for
    /// more is refused with [`crate::SKILL_WIDENS`] and is proposed as a
    /// new install.
    SkillUpdate { name: String },
    /// Either socket: the skills installed here.
    Skills,
    /// Worker socket: run tool `tool` of the installed skill `skill` for
    /// the assistant: caged with nothing writable, its output capped and
    /// redacted as a read's (answered as a `Result`).
    SkillTool { skill: String, tool: String },
}

/// One installed skill, as `aromba skill list` and `/skills` show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkillInfo {
    pub name: String,
    pub version: String,
    pub publisher: String,
    /// Its manifest in plain words.
    pub text: String,
    /// What it may do on the network now, in words.
    pub network: String,
    /// Its assistant tools: each name and what it does (the publisher's
    /// words).
    pub tools: Vec<(String, String)>,
    /// Each setting of its manifest and what it holds.
    pub settings: Vec<SettingInfo>,
}

/// A setting of an installed skill.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SettingInfo {
    pub name: String,
    /// `text`, `host` or `secret`.
    pub kind: String,
    /// What it holds, in words: the value, or for a secret only whether it
    /// is set.
    pub shown: String,
}

/// One line of `aromba chores`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChoreInfo {
    pub name: String,
    pub color: String,
    pub schedule: String,
    pub origin: String,
    pub last_receipt: String,
    /// Whether the dry run that must come before the first real run was
    /// shown.
    pub dry_run_seen: bool,
    /// Its header declares a damage cap above the default that the owner
    /// has not confirmed (for this very script): nothing runs until then.
    pub cap_unconfirmed: bool,
}

/// A move of the ladder, as the Worker turns it into a chat message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LadderEvent {
    pub id: u64,
    pub time: u64,
    pub from: u64,
    pub to: u64,
    pub reason: String,
    pub message: String,
}

/// A button of a proposal's message: the callback data the relay forwards
/// with a tap, and the label the person sees.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Button {
    pub data: String,
    pub label: String,
}

/// What `aromba status` shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    pub ladder_step: u64,
    pub ladder_name: String,
    pub ladder_reason: String,
    pub phase: String,
    pub isolation: String,
    pub integrity: String,
    pub journal_seq: u64,
    pub journal_head: String,
    pub policy_sha256: String,
    /// `on since <time>` or `off`.
    pub prod_mode: String,
    /// Whether a PIN is set (never the PIN or its hash).
    pub pin_set: bool,
    /// This server's id, as the relay signs taps for it (32 hex digits).
    pub server_id: String,
    /// Whether a relay key is pinned (the server was paired).
    pub paired: bool,
    /// The day since install, from 1 (0: not installed); on days 1 to 7
    /// only green chores run.
    pub install_day: u64,
    /// The Telegram account approvals in the Mini App must come from,
    /// pinned at pairing (`None`: paired before the Mini App, or not yet).
    pub telegram_user: Option<u64>,
    /// Which key checks Telegram's signature, in words.
    pub telegram_key: String,
}

/// The outcome of a read, redacted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadResult {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// The output passed the byte cap: the command was killed and the output cut.
    pub cut: bool,
    pub timed_out: bool,
    /// Removals per redaction class.
    pub redactions: Vec<(String, u64)>,
    pub journal_seq: u64,
    pub duration_ms: u64,
}

/// What the Warden answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Response {
    Result(ReadResult),
    /// The policy (or the Warden's state) refused the request.
    Refused {
        reason: String,
        journal_seq: Option<u64>,
    },
    /// The request could not be understood or served.
    Error {
        message: String,
    },
    Noted {
        journal_seq: u64,
    },
    /// A tap the person made on a proposal they had answered already (a
    /// double tap, Approve after Cancel): nothing was done, and it is no
    /// anomaly. The same tap sent again is not this: it is refused.
    AlreadyAnswered {
        journal_seq: Option<u64>,
    },
    Pong,
    Status(Status),
    Verified {
        ok: bool,
        report: String,
    },
    /// The uid that serves a socket on this machine (`socket_owner`).
    Served {
        uid: u64,
    },
    /// Where the ladder is after a panic or resume.
    Ladder {
        step: u64,
        name: String,
        message: String,
    },
    Events {
        events: Vec<LadderEvent>,
    },
    Chores {
        chores: Vec<ChoreInfo>,
    },
    /// The health reads by name, each answered as a read is (`Result`,
    /// `Refused` or `Error`); a read whose file is not there is left out.
    Health {
        reads: Vec<(String, Response)>,
    },
    /// An action id for a proposed action, the server id the relay signs,
    /// the message text and buttons the Worker must send verbatim (the
    /// Warden's rendering: a tap verifies only when the relay signed the
    /// SHA-256 of exactly this text and the label it gave the button). An
    /// action that needs the PIN names the key it is sealed for in `app`.
    Proposed {
        action_id: String,
        server_id: String,
        text: String,
        buttons: Vec<Button>,
        /// The Mini App's `start_param` when the action is approved there
        /// (Telegram signs the tap, not the relay): the Approve button
        /// opens the app with it. `None`: a relay-signed tap approves it.
        app: Option<String>,
    },
    /// What the Trust page shows besides the status (`Request::Trust`).
    Trust {
        /// The policy rendering, verbatim (`aromba-warden policy render`).
        policy: String,
        /// The fenced folders, at most [`MAX_LISTED`] of them.
        fences: Vec<String>,
        /// How many folders the fence list holds in all.
        fences_total: u64,
        /// The journal's last verification, in words, with its time.
        journal: String,
    },
    /// The Telegram account pinned at pairing, as Telegram's signature
    /// names it: its user id and the name it shows (for root's terminal).
    TelegramAccount {
        user_id: u64,
        name: String,
    },
    /// A release was installed: the services restart into it.
    ReleaseInstalled {
        version: String,
        previous: Option<String>,
    },
    /// The releases installed here (`Request::Releases`).
    Releases {
        current: Option<String>,
        previous: Option<String>,
        /// Versions that failed to start here, never tried again.
        failed: Vec<String>,
        /// The version a rollback left, when the chat has not been told.
        rolled_back: Option<String>,
    },
    /// What `aromba uninstall` removed and what it kept, a line each.
    Uninstalled {
        removed: Vec<String>,
        kept: Vec<String>,
    },
    /// What a fence request did: the folders newly fenced (as resolved),
    /// and each one refused with its reason (`path: reason`).
    Fenced {
        added: Vec<String>,
        refused: Vec<String>,
        journal_seq: Option<u64>,
    },
    /// What a skill bundle asks for (`Request::SkillCheck`).
    SkillShown {
        name: String,
        version: String,
        /// The bundle's SHA-256, which the install must name.
        sha256: String,
        /// The manifest in plain words.
        text: String,
        /// The version installed now, if any.
        installed: Option<String>,
        /// What it asks for beyond the installed version, a line each.
        widening: Vec<String>,
        /// Installing it needs the PIN (hosts not granted before).
        needs_pin: bool,
    },
    /// The skills installed here, and each that no longer verifies, why.
    Skills {
        skills: Vec<SkillInfo>,
        refused: Vec<String>,
    },
    /// What one chore run did: the receipt, and its redacted output.
    Receipt {
        receipt: String,
        stdout: Vec<u8>,
        stderr: Vec<u8>,
        ok: bool,
    },
}

#[derive(Debug, PartialEq, Eq)]
pub struct ProtoError(pub String);

impl fmt::Display for ProtoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ProtoError {}

fn err(s: impl Into<String>) -> ProtoError {
    ProtoError(s.into())
}

/// A JSON object whose fields are taken one by one; leftovers are an error.
struct Fields(Map<String, Value>);

impl Fields {
    fn parse(bytes: &[u8]) -> Result<(String, Fields), ProtoError> {
        let value: Value =
            serde_json::from_slice(bytes).map_err(|e| err(format!("not JSON: {e}")))?;
        let Value::Object(map) = value else {
            return Err(err("a message must be a JSON object"));
        };
        let mut fields = Fields(map);
        let kind = fields.string("type")?;
        Ok((kind, fields))
    }

    fn take(&mut self, name: &str) -> Result<Value, ProtoError> {
        self.0
            .remove(name)
            .ok_or_else(|| err(format!("missing field {name:?}")))
    }

    fn string(&mut self, name: &str) -> Result<String, ProtoError> {
        match self.take(name)? {
            Value::String(s) => Ok(s),
            _ => Err(err(format!("{name:?} must be a string"))),
        }
    }

    fn bool(&mut self, name: &str) -> Result<bool, ProtoError> {
        self.take(name)?
            .as_bool()
            .ok_or_else(|| err(format!("{name:?} must be true or false")))
    }

    fn u64(&mut self, name: &str) -> Result<u64, ProtoError> {
        self.take(name)?
            .as_u64()
            .ok_or_else(|| err(format!("{name:?} must be a whole number")))
    }

    fn opt_i32(&mut self, name: &str) -> Result<Option<i32>, ProtoError> {
        match self.take(name)? {
            Value::Null => Ok(None),
            v => v
                .as_i64()
                .and_then(|n| i32::try_from(n).ok())
                .map(Some)
                .ok_or_else(|| err(format!("{name:?} must be a number or null"))),
        }
    }

    fn opt_u64(&mut self, name: &str) -> Result<Option<u64>, ProtoError> {
        match self.take(name)? {
            Value::Null => Ok(None),
            v => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| err(format!("{name:?} must be a number or null"))),
        }
    }

    fn opt_string(&mut self, name: &str) -> Result<Option<String>, ProtoError> {
        match self.take(name)? {
            Value::Null => Ok(None),
            Value::String(s) => Ok(Some(s)),
            _ => Err(err(format!("{name:?} must be a string or null"))),
        }
    }

    fn hex(&mut self, name: &str) -> Result<Vec<u8>, ProtoError> {
        let s = self.string(name)?;
        decode_hex(&s).ok_or_else(|| err(format!("{name:?} must be lower-case hex")))
    }

    fn strings(&mut self, name: &str, max: usize) -> Result<Vec<String>, ProtoError> {
        let Value::Array(items) = self.take(name)? else {
            return Err(err(format!("{name:?} must be an array of strings")));
        };
        if items.len() > max {
            return Err(err(format!("{name:?} has more than {max} items")));
        }
        items
            .into_iter()
            .map(|v| match v {
                Value::String(s) => Ok(s),
                _ => Err(err(format!("{name:?} must be an array of strings"))),
            })
            .collect()
    }

    fn done(self, kind: &str) -> Result<(), ProtoError> {
        match self.0.keys().next() {
            None => Ok(()),
            Some(extra) => Err(err(format!(
                "unknown field {extra:?} in a {kind:?} message"
            ))),
        }
    }
}

fn object(kind: &str, fields: Vec<(&str, Value)>) -> Vec<u8> {
    let mut map = Map::new();
    map.insert("type".into(), Value::from(kind));
    for (k, v) in fields {
        map.insert(k.into(), v);
    }
    // Serialising a map of JSON values cannot fail.
    serde_json::to_vec(&Value::Object(map)).unwrap_or_default()
}

fn strings_value(items: &[String]) -> Value {
    Value::from(
        items
            .iter()
            .map(|s| Value::from(s.as_str()))
            .collect::<Vec<_>>(),
    )
}

fn opt_str(s: &Option<String>) -> Value {
    s.as_deref().map_or(Value::Null, Value::from)
}

fn opt_pin(pin: &Option<Pin>) -> Value {
    pin.as_ref()
        .map_or(Value::Null, |p| Value::from(p.expose()))
}

pub fn encode_request(r: &Request) -> Vec<u8> {
    match r {
        Request::Read { cmd, args } => object(
            "read",
            vec![
                ("cmd", Value::from(cmd.as_str())),
                ("args", Value::from(args.clone())),
            ],
        ),
        Request::Note { text } => object("note", vec![("text", Value::from(text.as_str()))]),
        Request::Ping => object("ping", vec![]),
        Request::Status => object("status", vec![]),
        Request::Trust => object("trust", vec![]),
        Request::JournalVerify => object("journal_verify", vec![]),
        Request::Panic => object("panic", vec![]),
        Request::Chores => object("chores", vec![]),
        Request::DryRun { chore } => {
            object("dry_run", vec![("chore", Value::from(chore.as_str()))])
        }
        Request::DryRunShown { chore } => object(
            "dry_run_shown",
            vec![("chore", Value::from(chore.as_str()))],
        ),
        Request::Propose { chore } => {
            object("propose", vec![("chore", Value::from(chore.as_str()))])
        }
        Request::RunDue { chore } => {
            object("run_due", vec![("chore", Value::from(chore.as_str()))])
        }
        Request::Approve {
            action_id,
            button,
            chat,
            time,
            signature,
        } => object(
            "approve",
            vec![
                ("action_id", Value::from(action_id.as_str())),
                ("button", Value::from(button.as_str())),
                ("chat", Value::from(chat.as_str())),
                ("time", Value::from(*time)),
                ("signature", Value::from(signature.as_str())),
            ],
        ),
        Request::ApproveInApp { launch, sealed_pin } => object(
            "approve_in_app",
            vec![
                ("launch", Value::from(launch.as_str())),
                (
                    "sealed_pin",
                    sealed_pin.as_deref().map_or(Value::Null, Value::from),
                ),
            ],
        ),
        Request::ProposeConfirmCap { chore } => object(
            "propose_confirm_cap",
            vec![("chore", Value::from(chore.as_str()))],
        ),
        Request::ProposeUndo { undo_id } => object(
            "propose_undo",
            vec![("undo_id", Value::from(undo_id.as_str()))],
        ),
        Request::ProposeProdModeOff => object("propose_prod_mode_off", vec![]),
        Request::ProposeStepDown => object("propose_step_down", vec![]),
        Request::ConfirmCap { chore } => {
            object("confirm_cap", vec![("chore", Value::from(chore.as_str()))])
        }
        Request::SetPin { pin } => object("set_pin", vec![("pin", Value::from(pin.expose()))]),
        Request::PinRelayKey { key } => {
            object("pin_relay_key", vec![("key", Value::from(key.as_str()))])
        }
        Request::PinTelegramAccount {
            launch,
            bot_id,
            start_param,
        } => object(
            "pin_telegram_account",
            vec![
                ("launch", Value::from(launch.as_str())),
                ("bot_id", Value::from(*bot_id)),
                ("start_param", Value::from(start_param.as_str())),
            ],
        ),
        Request::ProdMode { on, pin } => object(
            "prod_mode",
            vec![("on", Value::from(*on)), ("pin", opt_pin(pin))],
        ),
        Request::Undo { undo_id } => {
            object("undo", vec![("undo_id", Value::from(undo_id.as_str()))])
        }
        Request::ChoreRun { name, dry_run } => object(
            "chore_run",
            vec![
                ("name", Value::from(name.as_str())),
                ("dry_run", Value::from(*dry_run)),
            ],
        ),
        Request::Resume => object("resume", vec![]),
        Request::Events { after } => object("events", vec![("after", Value::from(*after))]),
        Request::Health => object("health", vec![]),
        Request::SocketOwner { local, peer } => object(
            "socket_owner",
            vec![
                ("local", Value::from(local.as_str())),
                ("peer", Value::from(peer.as_str())),
            ],
        ),
        Request::CheckAnchor {
            seq,
            hash,
            signature,
        } => object(
            "check_anchor",
            vec![
                ("seq", Value::from(*seq)),
                ("hash", Value::from(hash.as_str())),
                ("signature", opt_str(signature)),
            ],
        ),
        Request::ProdModeOn { findings } => {
            object("prod_mode_on", vec![("findings", strings_value(findings))])
        }
        Request::AddFences { paths } => object("add_fences", vec![("paths", strings_value(paths))]),
        Request::NetworkWritten => object("network_written", vec![]),
        Request::InstallRelease { dir } => object("install_release", vec![("dir", opt_str(dir))]),
        Request::ProposeRelease => object("propose_release", vec![]),
        Request::Releases => object("releases", vec![]),
        Request::SkillCheck { path } => {
            object("skill_check", vec![("path", Value::from(path.as_str()))])
        }
        Request::SkillInstall { path, sha256, pin } => object(
            "skill_install",
            vec![
                ("path", Value::from(path.as_str())),
                ("sha256", Value::from(sha256.as_str())),
                ("pin", opt_pin(pin)),
            ],
        ),
        Request::SkillRemove { name } => {
            object("skill_remove", vec![("name", Value::from(name.as_str()))])
        }
        Request::SkillSet {
            name,
            setting,
            value,
            pin,
        } => object(
            "skill_set",
            vec![
                ("name", Value::from(name.as_str())),
                ("setting", Value::from(setting.as_str())),
                ("value", Value::from(value.expose())),
                ("pin", opt_pin(pin)),
            ],
        ),
        Request::ProposeSkill { name } => {
            object("propose_skill", vec![("name", Value::from(name.as_str()))])
        }
        Request::SkillUpdate { name } => {
            object("skill_update", vec![("name", Value::from(name.as_str()))])
        }
        Request::Skills => object("skills", vec![]),
        Request::SkillTool { skill, tool } => object(
            "skill_tool",
            vec![
                ("skill", Value::from(skill.as_str())),
                ("tool", Value::from(tool.as_str())),
            ],
        ),
        Request::RollbackTold { version } => object(
            "rollback_told",
            vec![("version", Value::from(version.as_str()))],
        ),
        Request::Uninstall { purge } => object("uninstall", vec![("purge", Value::from(*purge))]),
        Request::RedAction { action, approval } => object(
            "red_action",
            vec![
                ("action", Value::from(action.as_str())),
                (
                    "approval",
                    approval.as_deref().map_or(Value::Null, Value::from),
                ),
            ],
        ),
    }
}

fn event_value(e: &LadderEvent) -> Value {
    let mut m = Map::new();
    m.insert("id".into(), Value::from(e.id));
    m.insert("time".into(), Value::from(e.time));
    m.insert("from".into(), Value::from(e.from));
    m.insert("to".into(), Value::from(e.to));
    m.insert("reason".into(), Value::from(e.reason.as_str()));
    m.insert("message".into(), Value::from(e.message.as_str()));
    Value::Object(m)
}

fn event_from(v: Value) -> Result<LadderEvent, ProtoError> {
    let Value::Object(map) = v else {
        return Err(err("an event must be an object"));
    };
    let mut f = Fields(map);
    let e = LadderEvent {
        id: f.u64("id")?,
        time: f.u64("time")?,
        from: f.u64("from")?,
        to: f.u64("to")?,
        reason: f.string("reason")?,
        message: f.string("message")?,
    };
    f.done("event")?;
    Ok(e)
}

/// On whose behalf the Worker asks: the person's own command (or tap, or
/// question), or the Worker's background work (the health poll, the
/// schedule, the scans, the update check). The Warden paces the two apart
/// at Slow, so the person's command is not refused because the Worker's
/// own reads took the minute. It is the Worker's word: a Worker that lies
/// gains one background request in ten minutes, no more. A request that
/// names no lane is the person's (the pace of one command a minute, as
/// before lanes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Lane {
    #[default]
    Person,
    Background,
}

/// A request with the lane it is asked in (`"lane": "background"`; no
/// field is the person's).
pub fn encode_request_in(r: &Request, lane: Lane) -> Vec<u8> {
    let bytes = encode_request(r);
    if lane == Lane::Person {
        return bytes;
    }
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(mut map)) => {
            map.insert("lane".into(), Value::from("background"));
            serde_json::to_vec(&Value::Object(map)).unwrap_or(bytes)
        }
        _ => bytes,
    }
}

/// A request and the lane it was asked in.
pub fn decode_request_in(bytes: &[u8]) -> Result<(Request, Lane), ProtoError> {
    let (kind, mut f) = Fields::parse(bytes)?;
    let lane = match f.0.remove("lane") {
        None => Lane::Person,
        Some(Value::String(s)) if s == "background" => Lane::Background,
        Some(_) => return Err(err("\"lane\" must be \"background\" or absent")),
    };
    Ok((request_of(kind, f)?, lane))
}

pub fn decode_request(bytes: &[u8]) -> Result<Request, ProtoError> {
    let (kind, f) = Fields::parse(bytes)?;
    request_of(kind, f)
}

fn request_of(kind: String, mut f: Fields) -> Result<Request, ProtoError> {
    let req = match kind.as_str() {
        "read" => Request::Read {
            cmd: f.string("cmd")?,
            args: f.strings("args", MAX_ARGS)?,
        },
        "note" => {
            let text = f.string("text")?;
            if text.len() > MAX_NOTE {
                return Err(err(format!("a note is at most {MAX_NOTE} bytes")));
            }
            Request::Note { text }
        }
        "ping" => Request::Ping,
        "status" => Request::Status,
        "trust" => Request::Trust,
        "journal_verify" => Request::JournalVerify,
        "panic" => Request::Panic,
        "chores" => Request::Chores,
        "dry_run" => Request::DryRun {
            chore: f.string("chore")?,
        },
        "dry_run_shown" => Request::DryRunShown {
            chore: f.string("chore")?,
        },
        "propose" => Request::Propose {
            chore: f.string("chore")?,
        },
        "run_due" => Request::RunDue {
            chore: f.string("chore")?,
        },
        "approve" => Request::Approve {
            action_id: f.string("action_id")?,
            button: f.string("button")?,
            chat: f.string("chat")?,
            time: f.u64("time")?,
            signature: f.string("signature")?,
        },
        "approve_in_app" => Request::ApproveInApp {
            launch: f.string("launch")?,
            sealed_pin: f.opt_string("sealed_pin")?,
        },
        "propose_confirm_cap" => Request::ProposeConfirmCap {
            chore: f.string("chore")?,
        },
        "propose_undo" => Request::ProposeUndo {
            undo_id: f.string("undo_id")?,
        },
        "propose_prod_mode_off" => Request::ProposeProdModeOff,
        "propose_step_down" => Request::ProposeStepDown,
        "confirm_cap" => Request::ConfirmCap {
            chore: f.string("chore")?,
        },
        "set_pin" => Request::SetPin {
            pin: Pin::new(f.string("pin")?),
        },
        "pin_relay_key" => Request::PinRelayKey {
            key: f.string("key")?,
        },
        "pin_telegram_account" => Request::PinTelegramAccount {
            launch: f.string("launch")?,
            bot_id: f.u64("bot_id")?,
            start_param: f.string("start_param")?,
        },
        "prod_mode" => Request::ProdMode {
            on: f.bool("on")?,
            pin: f.opt_string("pin")?.map(Pin::new),
        },
        "undo" => Request::Undo {
            undo_id: f.string("undo_id")?,
        },
        "chore_run" => Request::ChoreRun {
            name: f.string("name")?,
            dry_run: f.bool("dry_run")?,
        },
        "resume" => Request::Resume,
        "events" => Request::Events {
            after: f.u64("after")?,
        },
        "health" => Request::Health,
        "socket_owner" => Request::SocketOwner {
            local: f.string("local")?,
            peer: f.string("peer")?,
        },
        "check_anchor" => Request::CheckAnchor {
            seq: f.u64("seq")?,
            hash: f.string("hash")?,
            signature: f.opt_string("signature")?,
        },
        "prod_mode_on" => {
            let findings = f.strings("findings", MAX_FINDINGS)?;
            if findings.iter().any(|s| s.len() > MAX_FINDING) {
                return Err(err(format!("a finding is at most {MAX_FINDING} bytes")));
            }
            Request::ProdModeOn { findings }
        }
        "add_fences" => Request::AddFences {
            paths: f.strings("paths", MAX_FENCES_ASKED)?,
        },
        "network_written" => Request::NetworkWritten,
        "install_release" => Request::InstallRelease {
            dir: f.opt_string("dir")?,
        },
        "propose_release" => Request::ProposeRelease,
        "releases" => Request::Releases,
        "skill_check" => Request::SkillCheck {
            path: f.string("path")?,
        },
        "skill_install" => Request::SkillInstall {
            path: f.string("path")?,
            sha256: f.string("sha256")?,
            pin: f.opt_string("pin")?.map(Pin::new),
        },
        "skill_remove" => Request::SkillRemove {
            name: f.string("name")?,
        },
        "skill_set" => Request::SkillSet {
            name: f.string("name")?,
            setting: f.string("setting")?,
            value: SettingValue::new(f.string("value")?),
            pin: f.opt_string("pin")?.map(Pin::new),
        },
        "propose_skill" => Request::ProposeSkill {
            name: f.string("name")?,
        },
        "skill_update" => Request::SkillUpdate {
            name: f.string("name")?,
        },
        "skills" => Request::Skills,
        "skill_tool" => Request::SkillTool {
            skill: f.string("skill")?,
            tool: f.string("tool")?,
        },
        "rollback_told" => Request::RollbackTold {
            version: f.string("version")?,
        },
        "uninstall" => Request::Uninstall {
            purge: f.bool("purge")?,
        },
        "red_action" => {
            let action = f.string("action")?;
            let approval = match f.take("approval")? {
                Value::Null => None,
                Value::String(s) => Some(s),
                _ => return Err(err("\"approval\" must be a string or null")),
            };
            Request::RedAction { action, approval }
        }
        other => return Err(err(format!("unknown request type {other:?}"))),
    };
    f.done(&kind)?;
    Ok(req)
}

pub fn encode_response(r: &Response) -> Vec<u8> {
    match r {
        Response::Result(res) => {
            let redactions: Map<String, Value> = res
                .redactions
                .iter()
                .map(|(k, n)| (k.clone(), Value::from(*n)))
                .collect();
            object(
                "result",
                vec![
                    ("exit_code", res.exit_code.map_or(Value::Null, Value::from)),
                    ("signal", res.signal.map_or(Value::Null, Value::from)),
                    ("stdout_hex", Value::from(encode_hex(&res.stdout))),
                    ("stderr_hex", Value::from(encode_hex(&res.stderr))),
                    ("cut", Value::from(res.cut)),
                    ("timed_out", Value::from(res.timed_out)),
                    ("redactions", Value::Object(redactions)),
                    ("journal_seq", Value::from(res.journal_seq)),
                    ("duration_ms", Value::from(res.duration_ms)),
                ],
            )
        }
        Response::Refused {
            reason,
            journal_seq,
        } => object(
            "refused",
            vec![
                ("reason", Value::from(reason.as_str())),
                ("journal_seq", journal_seq.map_or(Value::Null, Value::from)),
            ],
        ),
        Response::Error { message } => {
            object("error", vec![("message", Value::from(message.as_str()))])
        }
        Response::Noted { journal_seq } => {
            object("noted", vec![("journal_seq", Value::from(*journal_seq))])
        }
        Response::AlreadyAnswered { journal_seq } => object(
            "already_answered",
            vec![("journal_seq", journal_seq.map_or(Value::Null, Value::from))],
        ),
        Response::Pong => object("pong", vec![]),
        Response::Status(st) => object(
            "status",
            vec![
                ("ladder_step", Value::from(st.ladder_step)),
                ("ladder_name", Value::from(st.ladder_name.as_str())),
                ("ladder_reason", Value::from(st.ladder_reason.as_str())),
                ("phase", Value::from(st.phase.as_str())),
                ("isolation", Value::from(st.isolation.as_str())),
                ("integrity", Value::from(st.integrity.as_str())),
                ("journal_seq", Value::from(st.journal_seq)),
                ("journal_head", Value::from(st.journal_head.as_str())),
                ("policy_sha256", Value::from(st.policy_sha256.as_str())),
                ("prod_mode", Value::from(st.prod_mode.as_str())),
                ("pin_set", Value::from(st.pin_set)),
                ("server_id", Value::from(st.server_id.as_str())),
                ("paired", Value::from(st.paired)),
                ("install_day", Value::from(st.install_day)),
                (
                    "telegram_user",
                    st.telegram_user.map_or(Value::Null, Value::from),
                ),
                ("telegram_key", Value::from(st.telegram_key.as_str())),
            ],
        ),
        Response::Served { uid } => object("served", vec![("uid", Value::from(*uid))]),
        Response::Verified { ok, report } => object(
            "verified",
            vec![
                ("ok", Value::from(*ok)),
                ("report", Value::from(report.as_str())),
            ],
        ),
        Response::Ladder {
            step,
            name,
            message,
        } => object(
            "ladder",
            vec![
                ("step", Value::from(*step)),
                ("name", Value::from(name.as_str())),
                ("message", Value::from(message.as_str())),
            ],
        ),
        Response::Events { events } => object(
            "events",
            vec![(
                "events",
                Value::Array(events.iter().map(event_value).collect()),
            )],
        ),
        Response::Proposed {
            action_id,
            server_id,
            text,
            buttons,
            app,
        } => object(
            "proposed",
            vec![
                ("action_id", Value::from(action_id.as_str())),
                ("server_id", Value::from(server_id.as_str())),
                ("text", Value::from(text.as_str())),
                (
                    "buttons",
                    Value::Array(buttons.iter().map(button_value).collect()),
                ),
                ("app", app.as_deref().map_or(Value::Null, Value::from)),
            ],
        ),
        Response::TelegramAccount { user_id, name } => object(
            "telegram_account",
            vec![
                ("user_id", Value::from(*user_id)),
                ("name", Value::from(name.as_str())),
            ],
        ),
        Response::Health { reads } => object(
            "health",
            vec![(
                "reads",
                Value::Array(
                    reads
                        .iter()
                        .map(|(name, answer)| {
                            let answer: Value = serde_json::from_slice(&encode_response(answer))
                                .unwrap_or(Value::Null);
                            let mut m = Map::new();
                            m.insert("name".into(), Value::from(name.as_str()));
                            m.insert("answer".into(), answer);
                            Value::Object(m)
                        })
                        .collect(),
                ),
            )],
        ),
        Response::SkillShown {
            name,
            version,
            sha256,
            text,
            installed,
            widening,
            needs_pin,
        } => object(
            "skill_shown",
            vec![
                ("name", Value::from(name.as_str())),
                ("version", Value::from(version.as_str())),
                ("sha256", Value::from(sha256.as_str())),
                ("text", Value::from(text.as_str())),
                ("installed", opt_str(installed)),
                ("widening", strings_value(widening)),
                ("needs_pin", Value::from(*needs_pin)),
            ],
        ),
        Response::Skills { skills, refused } => object(
            "skills",
            vec![
                (
                    "skills",
                    Value::Array(skills.iter().map(skill_value).collect()),
                ),
                ("refused", strings_value(refused)),
            ],
        ),
        Response::Chores { chores } => object(
            "chores",
            vec![(
                "chores",
                Value::Array(chores.iter().map(chore_value).collect()),
            )],
        ),
        Response::Receipt {
            receipt,
            stdout,
            stderr,
            ok,
        } => object(
            "receipt",
            vec![
                ("receipt", Value::from(receipt.as_str())),
                ("stdout_hex", Value::from(encode_hex(stdout))),
                ("stderr_hex", Value::from(encode_hex(stderr))),
                ("ok", Value::from(*ok)),
            ],
        ),
        Response::ReleaseInstalled { version, previous } => object(
            "release_installed",
            vec![
                ("version", Value::from(version.as_str())),
                ("previous", opt_str(previous)),
            ],
        ),
        Response::Releases {
            current,
            previous,
            failed,
            rolled_back,
        } => object(
            "releases",
            vec![
                ("current", opt_str(current)),
                ("previous", opt_str(previous)),
                ("failed", strings_value(failed)),
                ("rolled_back", opt_str(rolled_back)),
            ],
        ),
        Response::Trust {
            policy,
            fences,
            fences_total,
            journal,
        } => object(
            "trust",
            vec![
                ("policy", Value::from(policy.as_str())),
                ("fences", strings_value(fences)),
                ("fences_total", Value::from(*fences_total)),
                ("journal", Value::from(journal.as_str())),
            ],
        ),
        Response::Uninstalled { removed, kept } => object(
            "uninstalled",
            vec![
                ("removed", strings_value(removed)),
                ("kept", strings_value(kept)),
            ],
        ),
        Response::Fenced {
            added,
            refused,
            journal_seq,
        } => object(
            "fenced",
            vec![
                ("added", strings_value(added)),
                ("refused", strings_value(refused)),
                ("journal_seq", journal_seq.map_or(Value::Null, Value::from)),
            ],
        ),
    }
}

fn button_value(b: &Button) -> Value {
    let mut m = Map::new();
    m.insert("data".into(), Value::from(b.data.as_str()));
    m.insert("label".into(), Value::from(b.label.as_str()));
    Value::Object(m)
}

/// The most buttons a proposal carries.
const MAX_BUTTONS: usize = 8;

fn buttons_from(v: Value) -> Result<Vec<Button>, ProtoError> {
    let Value::Array(items) = v else {
        return Err(err("\"buttons\" must be an array"));
    };
    if items.len() > MAX_BUTTONS {
        return Err(err(format!(
            "\"buttons\" has more than {MAX_BUTTONS} items"
        )));
    }
    items
        .into_iter()
        .map(|v| {
            let Value::Object(map) = v else {
                return Err(err("a button must be an object"));
            };
            let mut f = Fields(map);
            let b = Button {
                data: f.string("data")?,
                label: f.string("label")?,
            };
            f.done("button")?;
            Ok(b)
        })
        .collect()
}

/// A list of `[a, b]` string pairs.
fn pairs(v: Value, name: &str, max: usize) -> Result<Vec<(String, String)>, ProtoError> {
    let Value::Array(items) = v else {
        return Err(err(format!("{name:?} must be an array of pairs")));
    };
    if items.len() > max {
        return Err(err(format!("{name:?} has more than {max} items")));
    }
    items
        .into_iter()
        .map(|item| match item {
            Value::Array(p) => match p.as_slice() {
                [Value::String(a), Value::String(b)] => Ok((a.clone(), b.clone())),
                _ => Err(err(format!("{name:?} must hold pairs of strings"))),
            },
            _ => Err(err(format!("{name:?} must hold pairs of strings"))),
        })
        .collect()
}

fn setting_infos(v: Value) -> Result<Vec<SettingInfo>, ProtoError> {
    let bad = || err("\"settings\" must hold triples of strings");
    let Value::Array(items) = v else {
        return Err(bad());
    };
    if items.len() > MAX_LISTED {
        return Err(err(format!(
            "\"settings\" has more than {MAX_LISTED} items"
        )));
    }
    items
        .into_iter()
        .map(|item| match item {
            Value::Array(p) => match p.as_slice() {
                [Value::String(a), Value::String(b), Value::String(c)] => Ok(SettingInfo {
                    name: a.clone(),
                    kind: b.clone(),
                    shown: c.clone(),
                }),
                _ => Err(bad()),
            },
            _ => Err(bad()),
        })
        .collect()
}

fn skill_value(s: &SkillInfo) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), Value::from(s.name.as_str()));
    m.insert("version".into(), Value::from(s.version.as_str()));
    m.insert("publisher".into(), Value::from(s.publisher.as_str()));
    m.insert("text".into(), Value::from(s.text.as_str()));
    m.insert("network".into(), Value::from(s.network.as_str()));
    m.insert(
        "tools".into(),
        Value::Array(
            s.tools
                .iter()
                .map(|(n, d)| Value::from(vec![n.as_str(), d.as_str()]))
                .collect(),
        ),
    );
    m.insert(
        "settings".into(),
        Value::Array(
            s.settings
                .iter()
                .map(|t| Value::from(vec![t.name.as_str(), t.kind.as_str(), t.shown.as_str()]))
                .collect(),
        ),
    );
    Value::Object(m)
}

fn chore_value(c: &ChoreInfo) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), Value::from(c.name.as_str()));
    m.insert("color".into(), Value::from(c.color.as_str()));
    m.insert("schedule".into(), Value::from(c.schedule.as_str()));
    m.insert("origin".into(), Value::from(c.origin.as_str()));
    m.insert("last_receipt".into(), Value::from(c.last_receipt.as_str()));
    m.insert("dry_run_seen".into(), Value::from(c.dry_run_seen));
    m.insert("cap_unconfirmed".into(), Value::from(c.cap_unconfirmed));
    Value::Object(m)
}

pub fn decode_response(bytes: &[u8]) -> Result<Response, ProtoError> {
    let (kind, mut f) = Fields::parse(bytes)?;
    let resp = match kind.as_str() {
        "result" => {
            let Value::Object(red) = f.take("redactions")? else {
                return Err(err("\"redactions\" must be an object"));
            };
            let redactions = red
                .into_iter()
                .map(|(k, v)| {
                    v.as_u64()
                        .map(|n| (k, n))
                        .ok_or_else(|| err("redaction counts are numbers"))
                })
                .collect::<Result<Vec<_>, _>>()?;
            Response::Result(ReadResult {
                exit_code: f.opt_i32("exit_code")?,
                signal: f.opt_i32("signal")?,
                stdout: f.hex("stdout_hex")?,
                stderr: f.hex("stderr_hex")?,
                cut: f.bool("cut")?,
                timed_out: f.bool("timed_out")?,
                redactions,
                journal_seq: f.u64("journal_seq")?,
                duration_ms: f.u64("duration_ms")?,
            })
        }
        "refused" => Response::Refused {
            reason: f.string("reason")?,
            journal_seq: f.opt_u64("journal_seq")?,
        },
        "error" => Response::Error {
            message: f.string("message")?,
        },
        "noted" => Response::Noted {
            journal_seq: f.u64("journal_seq")?,
        },
        "already_answered" => Response::AlreadyAnswered {
            journal_seq: f.opt_u64("journal_seq")?,
        },
        "pong" => Response::Pong,
        "status" => Response::Status(Status {
            ladder_step: f.u64("ladder_step")?,
            ladder_name: f.string("ladder_name")?,
            ladder_reason: f.string("ladder_reason")?,
            phase: f.string("phase")?,
            isolation: f.string("isolation")?,
            integrity: f.string("integrity")?,
            journal_seq: f.u64("journal_seq")?,
            journal_head: f.string("journal_head")?,
            policy_sha256: f.string("policy_sha256")?,
            prod_mode: f.string("prod_mode")?,
            pin_set: f.bool("pin_set")?,
            server_id: f.string("server_id")?,
            paired: f.bool("paired")?,
            install_day: f.u64("install_day")?,
            telegram_user: f.opt_u64("telegram_user")?,
            telegram_key: f.string("telegram_key")?,
        }),
        "ladder" => Response::Ladder {
            step: f.u64("step")?,
            name: f.string("name")?,
            message: f.string("message")?,
        },
        "health" => {
            let Value::Array(items) = f.take("reads")? else {
                return Err(err("\"reads\" must be an array"));
            };
            if items.len() > MAX_HEALTH_READS {
                return Err(err("too many health reads"));
            }
            let reads = items
                .into_iter()
                .map(|v| {
                    let Value::Object(map) = v else {
                        return Err(err("a health read must be an object"));
                    };
                    let mut r = Fields(map);
                    let name = r.string("name")?;
                    let answer = r.take("answer")?;
                    r.done("health read")?;
                    let bytes = serde_json::to_vec(&answer).map_err(|e| err(e.to_string()))?;
                    let answer = decode_response(&bytes)?;
                    match answer {
                        Response::Result(_) | Response::Refused { .. } | Response::Error { .. } => {
                            Ok((name, answer))
                        }
                        _ => Err(err("a health read is answered as a read is")),
                    }
                })
                .collect::<Result<Vec<_>, _>>()?;
            Response::Health { reads }
        }
        "skill_shown" => Response::SkillShown {
            name: f.string("name")?,
            version: f.string("version")?,
            sha256: f.string("sha256")?,
            text: f.string("text")?,
            installed: f.opt_string("installed")?,
            widening: f.strings("widening", MAX_LISTED)?,
            needs_pin: f.bool("needs_pin")?,
        },
        "skills" => {
            let Value::Array(items) = f.take("skills")? else {
                return Err(err("\"skills\" must be an array"));
            };
            if items.len() > MAX_LISTED {
                return Err(err("\"skills\" has too many items"));
            }
            let skills = items
                .into_iter()
                .map(|v| {
                    let Value::Object(map) = v else {
                        return Err(err("a skill must be an object"));
                    };
                    let mut c = Fields(map);
                    let info = SkillInfo {
                        name: c.string("name")?,
                        version: c.string("version")?,
                        publisher: c.string("publisher")?,
                        text: c.string("text")?,
                        network: c.string("network")?,
                        tools: pairs(c.take("tools")?, "tools", MAX_LISTED)?,
                        settings: setting_infos(c.take("settings")?)?,
                    };
                    c.done("skill")?;
                    Ok(info)
                })
                .collect::<Result<_, _>>()?;
            Response::Skills {
                skills,
                refused: f.strings("refused", MAX_LISTED)?,
            }
        }
        "chores" => {
            let Value::Array(items) = f.take("chores")? else {
                return Err(err("\"chores\" must be an array"));
            };
            let chores = items
                .into_iter()
                .map(|v| {
                    let Value::Object(map) = v else {
                        return Err(err("a chore must be an object"));
                    };
                    let mut c = Fields(map);
                    let info = ChoreInfo {
                        name: c.string("name")?,
                        color: c.string("color")?,
                        schedule: c.string("schedule")?,
                        origin: c.string("origin")?,
                        last_receipt: c.string("last_receipt")?,
                        dry_run_seen: c.bool("dry_run_seen")?,
                        cap_unconfirmed: c.bool("cap_unconfirmed")?,
                    };
                    c.done("chore")?;
                    Ok(info)
                })
                .collect::<Result<_, _>>()?;
            Response::Chores { chores }
        }
        "proposed" => Response::Proposed {
            action_id: f.string("action_id")?,
            server_id: f.string("server_id")?,
            text: f.string("text")?,
            buttons: buttons_from(f.take("buttons")?)?,
            app: f.opt_string("app")?,
        },
        "telegram_account" => Response::TelegramAccount {
            user_id: f.u64("user_id")?,
            name: f.string("name")?,
        },
        "receipt" => Response::Receipt {
            receipt: f.string("receipt")?,
            stdout: f.hex("stdout_hex")?,
            stderr: f.hex("stderr_hex")?,
            ok: f.bool("ok")?,
        },
        "events" => {
            let Value::Array(items) = f.take("events")? else {
                return Err(err("\"events\" must be an array"));
            };
            Response::Events {
                events: items
                    .into_iter()
                    .map(event_from)
                    .collect::<Result<_, _>>()?,
            }
        }
        "served" => Response::Served { uid: f.u64("uid")? },
        "verified" => Response::Verified {
            ok: f.bool("ok")?,
            report: f.string("report")?,
        },
        "release_installed" => Response::ReleaseInstalled {
            version: f.string("version")?,
            previous: f.opt_string("previous")?,
        },
        "releases" => Response::Releases {
            current: f.opt_string("current")?,
            previous: f.opt_string("previous")?,
            failed: f.strings("failed", MAX_LISTED)?,
            rolled_back: f.opt_string("rolled_back")?,
        },
        "trust" => Response::Trust {
            policy: f.string("policy")?,
            fences: f.strings("fences", MAX_LISTED)?,
            fences_total: f.u64("fences_total")?,
            journal: f.string("journal")?,
        },
        "uninstalled" => Response::Uninstalled {
            removed: f.strings("removed", MAX_LISTED)?,
            kept: f.strings("kept", MAX_LISTED)?,
        },
        "fenced" => Response::Fenced {
            added: f.strings("added", MAX_FENCES_ASKED)?,
            refused: f.strings("refused", MAX_FENCES_ASKED)?,
            journal_seq: f.opt_u64("journal_seq")?,
        },
        other => return Err(err(format!("unknown response type {other:?}"))),
    };
    f.done(&kind)?;
    Ok(resp)
}

/// Bytes made safe for a terminal: line breaks and tabs kept, every other
/// control byte, DEL and invalid UTF-8 shown as `\xNN`, so output cannot
/// move the cursor, change colours or retitle the window.
pub fn printable(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\n' | '\t' => out.push(c),
                c if (c as u32) < 0x20 || c == '\u{7f}' || ('\u{80}'..='\u{9f}').contains(&c) => {
                    out.push_str(&format!("\\x{:02x}", c as u32));
                }
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_unknown_fields_and_types() {
        assert!(
            decode_request(br#"{"type":"read","cmd":"df","args":[],"env":{"LD_PRELOAD":"x"}}"#)
                .is_err()
        );
        assert!(decode_request(br#"{"type":"exec","cmd":"sh"}"#).is_err());
        assert!(decode_request(br#"{"type":"read","cmd":"df","args":"-h"}"#).is_err());
        assert!(decode_request(br#"{"type":"read","cmd":"df"}"#).is_err());
        assert!(decode_request(br#"["read"]"#).is_err());
        assert!(decode_request(b"\xff").is_err());
    }

    #[test]
    fn round_trips_a_result_with_arbitrary_bytes() {
        let r = Response::Result(ReadResult {
            exit_code: Some(0),
            signal: None,
            stdout: b"a\nb\x1b[2J\xff\x00".to_vec(),
            stderr: vec![],
            cut: false,
            timed_out: false,
            redactions: vec![("jwt".into(), 2)],
            journal_seq: 7,
            duration_ms: 3,
        });
        assert_eq!(decode_response(&encode_response(&r)).unwrap(), r);
    }

    #[test]
    fn round_trips_the_owners_requests_and_proposals() {
        let requests = [
            Request::Approve {
                action_id: "a".into(),
                button: "approve".into(),
                chat: "42".into(),
                time: 9,
                signature: "sig".into(),
            },
            Request::ProposeConfirmCap {
                chore: "big".into(),
            },
            Request::ProposeUndo {
                undo_id: "u".into(),
            },
            Request::ProposeProdModeOff,
            Request::ConfirmCap {
                chore: "big".into(),
            },
            Request::SetPin {
                pin: "472913".into(),
            },
            Request::PinRelayKey {
                key: "RWQf6LRCGA9i53mlYecO4IzT51TGPpvWucNSCh1CBM0QTaLn73Y7GFO3".into(),
            },
            Request::ProdMode {
                on: false,
                pin: None,
            },
            Request::Undo {
                undo_id: "u".into(),
            },
            Request::ApproveInApp {
                launch: "user=%7B%22id%22%3A1%7D&auth_date=1&signature=x".into(),
                sealed_pin: None,
            },
            Request::ApproveInApp {
                launch: "auth_date=1".into(),
                sealed_pin: Some("hSDwCYkw".into()),
            },
            Request::PinTelegramAccount {
                launch: "auth_date=1".into(),
                bot_id: 7_000_000_001,
                start_param: "pair_AB12".into(),
            },
        ];
        for r in requests {
            assert_eq!(decode_request(&encode_request(&r)).unwrap(), r);
        }
        let p = Response::Proposed {
            action_id: "a".into(),
            server_id: "s".into(),
            text: "Undo the run of \"tidy\"?\nPuts back: /srv".into(),
            buttons: vec![Button {
                data: "approve".into(),
                label: "Approve".into(),
            }],
            app: None,
        };
        assert_eq!(decode_response(&encode_response(&p)).unwrap(), p);
        let in_app = Response::Proposed {
            action_id: "a".into(),
            server_id: "s".into(),
            text: "Run the red chore \"wipe\" now?".into(),
            buttons: vec![],
            app: Some("0123_abcd".into()),
        };
        assert_eq!(decode_response(&encode_response(&in_app)).unwrap(), in_app);
        let account = Response::TelegramAccount {
            user_id: 424242,
            name: "Ana Silva (@ana_s)".into(),
        };
        assert_eq!(
            decode_response(&encode_response(&account)).unwrap(),
            account
        );
        for r in [
            Response::AlreadyAnswered {
                journal_seq: Some(7),
            },
            Response::AlreadyAnswered { journal_seq: None },
        ] {
            assert_eq!(decode_response(&encode_response(&r)).unwrap(), r);
        }
        // The PIN is a string or null, nothing else.
        assert!(decode_request(br#"{"type":"prod_mode","on":false,"pin":472913}"#).is_err());
        assert!(decode_request(br#"{"type":"prod_mode","on":false}"#).is_err());
    }

    #[test]
    fn round_trips_the_first_scans_requests_and_bounds_them() {
        let requests = [
            Request::ProdModeOn {
                findings: vec!["a database with data: PostgreSQL".into()],
            },
            Request::AddFences {
                paths: vec!["/var/lib/postgresql".into(), "/srv/app".into()],
            },
            Request::NetworkWritten,
            Request::InstallRelease { dir: None },
            Request::InstallRelease {
                dir: Some("/root/aromba-update".into()),
            },
            Request::ProposeRelease,
            Request::Releases,
            Request::Trust,
            Request::SkillCheck {
                path: "/root/tls-certs.skill".into(),
            },
            Request::SkillInstall {
                path: "/root/tls-certs.skill".into(),
                sha256: "ab".repeat(32),
                pin: Some(Pin::new("4729135")),
            },
            Request::SkillRemove {
                name: "tls-certs".into(),
            },
            Request::SkillSet {
                name: "restic-backup".into(),
                setting: "S3_HOST".into(),
                value: SettingValue::new("s3.example.com"),
                pin: Some(Pin::new("4729135")),
            },
            Request::ProposeSkill {
                name: "certs".into(),
            },
            Request::SkillUpdate {
                name: "nginx".into(),
            },
            Request::Skills,
            Request::SkillTool {
                skill: "certs".into(),
                tool: "certs-expiry".into(),
            },
            Request::RollbackTold {
                version: "1.4.2".into(),
            },
            Request::Uninstall { purge: true },
        ];
        for r in requests {
            assert_eq!(decode_request(&encode_request(&r)).unwrap(), r);
        }
        let fenced = Response::Fenced {
            added: vec!["/srv/app".into()],
            refused: vec!["/: a fence is a folder below a top-level one".into()],
            journal_seq: Some(7),
        };
        assert_eq!(decode_response(&encode_response(&fenced)).unwrap(), fenced);
        let installed = Response::ReleaseInstalled {
            version: "1.4.2".into(),
            previous: Some("1.4.1".into()),
        };
        assert_eq!(
            decode_response(&encode_response(&installed)).unwrap(),
            installed
        );
        for r in [
            Response::Releases {
                current: Some("1.4.1".into()),
                previous: None,
                failed: vec!["1.4.2".into()],
                rolled_back: Some("1.4.2".into()),
            },
            Response::Uninstalled {
                removed: vec!["/opt/aromba".into()],
                kept: vec!["/var/lib/aromba-warden/journal".into()],
            },
            Response::Trust {
                policy: "# Rendered by aromba-warden\n".into(),
                fences: vec!["/srv/app".into()],
                fences_total: 3,
                journal: "ok: 12 lines (checked at 2026-12-06T00:00:00Z)".into(),
            },
            Response::SkillShown {
                name: "tls-certs".into(),
                version: "1.1.0".into(),
                sha256: "cd".repeat(32),
                text: "tls-certs 1.1.0, from the publisher aromba".into(),
                installed: Some("1.0.0".into()),
                widening: vec!["talk to example.org:443".into()],
                needs_pin: true,
            },
            Response::Skills {
                skills: vec![SkillInfo {
                    name: "tls-certs".into(),
                    version: "1.0.0".into(),
                    publisher: "aromba".into(),
                    text: "tls-certs 1.0.0".into(),
                    network: "none".into(),
                    tools: vec![("tls-expiry".into(), "When each certificate expires".into())],
                    settings: vec![SettingInfo {
                        name: "SITE".into(),
                        kind: "host".into(),
                        shown: "example.org".into(),
                    }],
                }],
                refused: vec!["the installed skill x no longer verifies".into()],
            },
        ] {
            assert_eq!(decode_response(&encode_response(&r)).unwrap(), r);
        }
        let too_many = Request::AddFences {
            paths: vec!["/srv/a".into(); MAX_FENCES_ASKED + 1],
        };
        assert!(decode_request(&encode_request(&too_many)).is_err());
        let too_long = Request::ProdModeOn {
            findings: vec!["x".repeat(MAX_FINDING + 1)],
        };
        assert!(decode_request(&encode_request(&too_long)).is_err());
        assert!(decode_request(br#"{"type":"add_fences","paths":"/srv"}"#).is_err());
    }

    #[test]
    fn printable_escapes_terminal_controls() {
        assert_eq!(
            printable(b"a\nb\x1b[2J\r\xff\t"),
            "a\nb\\x1b[2J\\x0d\\xff\t"
        );
    }
}
