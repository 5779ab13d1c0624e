//! Approvals the Warden checks itself, trusting nothing the Worker says.
//!
//! For each proposed action — a run of a yellow or red chore, confirming a
//! higher damage cap, an undo, turning prod mode off — the Warden issues an
//! action id (random, kept in its state with what it stands for) and renders
//! the message the person will read ([`render`]): deterministic, made only
//! from what the Warden knows (the chore's header as it is here, the
//! snapshot's record), naming what the action does. The Worker gets that
//! text and the Warden's [`BUTTONS`] in the proposal's answer and must send
//! them verbatim; the SHA-256 of the text is recorded with the action id.
//!
//! The relay signs each button tap it forwards — minisign format, over the
//! message below — and the Worker only carries the signature. `text_sha256`
//! is the SHA-256 of the text of the message the relay delivered with the
//! tapped button, and `label` that button's label, as the relay delivered
//! them. The Warden builds the message itself from the hash it recorded at
//! proposal and the label it gave the button — never from a hash or a label
//! the Worker supplies — so a tap verifies only when the person was shown
//! the Warden's own text for that action id, on the Warden's own button. It
//! verifies against the relay key pinned in its state at pairing, checks
//! that the time is fresh (ten minutes either way), that the action id is
//! one it issued, and that it was not used before; it is then spent.
//!
//! ```text
//! aromba-approval-v2
//! server=<server id>
//! action=<action id>
//! text_sha256=<SHA-256 of the message text, 64 lower-case hex>
//! button=<the tapped button's callback data>
//! label=<the tapped button's label>
//! chat=<chat id>
//! time=<unix seconds>
//! ```
//!
//! Each line ends in one `\n` (the last too), no carriage returns, no
//! other whitespace. The text is hashed as the UTF-8 bytes the relay sent
//! as the message text (no parse mode, so what is shown is what is hashed).
//! `button` is `[a-z][a-z0-9_-]{0,31}` and `chat` `-?[0-9]{1,20}`; the
//! Warden refuses anything else before it looks at the signature.

#![forbid(unsafe_code)]

use crate::layout::Layout;
use crate::seal::SealKey;
use crate::telegram::ActionParam;
use aromba_warden_proto::hidden::invisible_or_separator;
use minisign_verify::{PublicKey, Signature};
use serde_json::{Map, Value};
use std::io::Read;
use std::path::PathBuf;

/// How far a tap's time may be from the Warden's clock.
pub const FRESH_S: u64 = 600;

/// A forwarded tap, as the Worker carries it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Approval {
    pub action_id: String,
    pub button: String,
    pub chat: String,
    pub time: u64,
    /// The minisign signature, as its text.
    pub signature: String,
}

/// What an action id stands for, as the Warden recorded it when it issued
/// the id: the tap approves exactly this, whatever the Worker says later.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// A real run of the chore, as its script was when proposed.
    Run {
        chore: String,
        script_sha256: String,
    },
    /// The chore's damage cap above the default, for this very script.
    ConfirmCap {
        chore: String,
        max_files: u64,
        max_gb: u64,
        script_sha256: String,
    },
    Undo {
        undo_id: String,
    },
    /// A PIN action: the tap must carry the PIN too.
    ProdModeOff,
    /// Installing the release the Worker downloaded: exactly this signed
    /// manifest (a minor or major release; a patch installs itself).
    InstallRelease {
        version: String,
        manifest_sha256: String,
    },
    /// Installing the skill bundle the Worker downloaded from the
    /// catalogue: exactly this bundle, shown in full; `pin` when it asks
    /// for hosts this server has not granted.
    InstallSkill {
        name: String,
        version: String,
        bundle_sha256: String,
        pin: bool,
    },
    /// "Was that you?": the person says the ladder's move `event` to Slow
    /// or Freeze (at `step`, for `reason`) was their own doing, and it
    /// steps back to normal. Cut and Disarm are never stepped down this
    /// way.
    StepDown {
        event: u64,
        step: u64,
        reason: String,
    },
}

impl Action {
    pub fn needs_pin(&self) -> bool {
        matches!(
            self,
            Action::ProdModeOff | Action::InstallSkill { pin: true, .. }
        )
    }

    /// The action as the journal keeps it: its kind and its fields, the
    /// same words as its record (never a Rust `Debug` form, which could
    /// change with the code).
    pub fn journal_value(&self) -> Value {
        Value::Object(self.fields(Map::new()))
    }

    fn record(&self, text_sha256: &str, route: Route, seal: Option<&SealKey>, now: u64) -> Value {
        let mut m = Map::new();
        m.insert("issued_at".into(), Value::from(now));
        m.insert("text_sha256".into(), Value::from(text_sha256));
        let route = match route {
            Route::App => APP_ROUTE,
            Route::Relay => RELAY_ROUTE,
        };
        m.insert("route".into(), Value::from(route));
        if let Some(key) = seal {
            m.insert(SEAL_SECRET.into(), Value::from(key.secret_hex()));
        }
        Value::Object(self.fields(m))
    }

    /// `m` with the action's kind and fields added.
    fn fields(&self, mut m: Map<String, Value>) -> Map<String, Value> {
        match self {
            Action::Run {
                chore,
                script_sha256,
            } => {
                m.insert("kind".into(), Value::from("run"));
                m.insert("chore".into(), Value::from(chore.as_str()));
                m.insert("script_sha256".into(), Value::from(script_sha256.as_str()));
            }
            Action::ConfirmCap {
                chore,
                max_files,
                max_gb,
                script_sha256,
            } => {
                m.insert("kind".into(), Value::from("confirm-cap"));
                m.insert("chore".into(), Value::from(chore.as_str()));
                m.insert("max_files".into(), Value::from(*max_files));
                m.insert("max_gb".into(), Value::from(*max_gb));
                m.insert("script_sha256".into(), Value::from(script_sha256.as_str()));
            }
            Action::Undo { undo_id } => {
                m.insert("kind".into(), Value::from("undo"));
                m.insert("undo_id".into(), Value::from(undo_id.as_str()));
            }
            Action::ProdModeOff => {
                m.insert("kind".into(), Value::from("prod-mode-off"));
            }
            Action::InstallRelease {
                version,
                manifest_sha256,
            } => {
                m.insert("kind".into(), Value::from("install-release"));
                m.insert("version".into(), Value::from(version.as_str()));
                m.insert(
                    "manifest_sha256".into(),
                    Value::from(manifest_sha256.as_str()),
                );
            }
            Action::InstallSkill {
                name,
                version,
                bundle_sha256,
                pin,
            } => {
                m.insert("kind".into(), Value::from("install-skill"));
                m.insert("skill".into(), Value::from(name.as_str()));
                m.insert("version".into(), Value::from(version.as_str()));
                m.insert("bundle_sha256".into(), Value::from(bundle_sha256.as_str()));
                m.insert("pin".into(), Value::from(*pin));
            }
            Action::StepDown {
                event,
                step,
                reason,
            } => {
                m.insert("kind".into(), Value::from(STEP_DOWN));
                m.insert("event".into(), Value::from(*event));
                m.insert("step".into(), Value::from(*step));
                m.insert("reason".into(), Value::from(reason.as_str()));
            }
        }
        m
    }

    fn from_record(v: &Value) -> Result<Action, String> {
        let s = |k: &str| {
            v.get(k)
                .and_then(Value::as_str)
                .map(String::from)
                .ok_or_else(|| format!("the action record lacks {k}"))
        };
        let n = |k: &str| {
            v.get(k)
                .and_then(Value::as_u64)
                .ok_or_else(|| format!("the action record lacks {k}"))
        };
        match s("kind")?.as_str() {
            "run" => Ok(Action::Run {
                chore: s("chore")?,
                script_sha256: s("script_sha256")?,
            }),
            "confirm-cap" => Ok(Action::ConfirmCap {
                chore: s("chore")?,
                max_files: n("max_files")?,
                max_gb: n("max_gb")?,
                script_sha256: s("script_sha256")?,
            }),
            "undo" => Ok(Action::Undo {
                undo_id: s("undo_id")?,
            }),
            "prod-mode-off" => Ok(Action::ProdModeOff),
            "install-release" => Ok(Action::InstallRelease {
                version: s("version")?,
                manifest_sha256: s("manifest_sha256")?,
            }),
            "install-skill" => Ok(Action::InstallSkill {
                name: s("skill")?,
                version: s("version")?,
                bundle_sha256: s("bundle_sha256")?,
                pin: v
                    .get("pin")
                    .and_then(Value::as_bool)
                    .ok_or("the action record lacks pin")?,
            }),
            STEP_DOWN => Ok(Action::StepDown {
                event: n("event")?,
                step: n("step")?,
                reason: s("reason")?,
            }),
            other => Err(format!("the action record has an unknown kind {other:?}")),
        }
    }
}

/// Who can approve an action: the person in the Mini App, with Telegram's
/// signature over the launch (the relay cannot make it), or a tap the
/// relay signs. SECURITY.md's table says which action goes which way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    App,
    Relay,
}

/// The record's word for [`Route::App`].
const APP_ROUTE: &str = "app";
/// The route word of an action a relay-signed tap approves.
const RELAY_ROUTE: &str = "relay";

/// The record's field holding the secret half of the key an action's PIN
/// is sealed for in the app (the record is the Warden's, mode 0600).
const SEAL_SECRET: &str = "seal_secret";

/// The route of `action`: a green or yellow chore's run is approved with
/// a relay-signed tap; a red run, a cap above the default, an undo, a
/// release install and "Was that you?" only in the app (a relay that could
/// step the ladder down could undo what its own behaviour raised), and
/// prod mode off, whose PIN the page seals for the Warden (`seal.rs`). On
/// a server bound to no Telegram account (paired before the Mini App) an
/// action of the app's route is not proposed at all ([`NO_ACCOUNT`]): the
/// relay's tap never stands in for the person's.
pub fn route(action: &Action, facts: &Facts<'_>) -> Route {
    use crate::chores::header::Color;
    match (action, facts) {
        (Action::Run { .. }, Facts::Chore(c)) if c.header.color != Color::Red => Route::Relay,
        _ => Route::App,
    }
}

/// Why an action of the app's route is not proposed on a server bound to
/// no Telegram account.
pub const NO_ACCOUNT: &str = "this is approved only in the Mini App, by the Telegram account bound at pairing, and this server has none (it was paired before the Mini App): send /unpair in the chat, then run `sudo aromba pair` on the server to bind it; meanwhile root can do it with `sudo aromba`";

/// The route an action record was issued with; `None` for a record
/// without one (issued before every record named its route, when a
/// server without an account took the relay's tap for everything), which
/// neither route approves: it fails closed (found by a review: such a
/// record of a red run stayed approvable by the relay's tap).
fn route_of_record(recorded: &[u8]) -> Option<Route> {
    let value = serde_json::from_slice::<Value>(recorded).ok()?;
    match value.get("route").and_then(Value::as_str) {
        Some(APP_ROUTE) => Some(Route::App),
        Some(RELAY_ROUTE) => Some(Route::Relay),
        _ => None,
    }
}

/// When the record was issued (Unix seconds).
fn issued_at(recorded: &[u8]) -> Option<u64> {
    serde_json::from_slice::<Value>(recorded)
        .ok()?
        .get("issued_at")
        .and_then(Value::as_u64)
}

/// Why a proposal is no longer approvable, said to the person who taps
/// it: no anomaly (it is their own old message).
pub const OUTDATED: &str = "this proposal is out of date (made before the last update, or more than a day ago): ask for it again";

/// The buttons a proposal's message carries: callback data and label. Only
/// `approve` goes ahead; the relay signs the label of the tapped one.
pub const BUTTONS: [(&str, &str); 2] = [("approve", "Approve"), ("cancel", "Cancel")];

/// The buttons of "Was that you?": a yes steps the ladder down, a no stops
/// Aromba (the Worker's `/panic`).
pub const STEP_DOWN_BUTTONS: [(&str, &str); 2] =
    [("approve", "Yes, it was me"), ("cancel", "No, stop Aromba")];

/// The record kind of a step down.
const STEP_DOWN: &str = "step-down";

/// The buttons the Warden gives an action of record kind `kind`.
pub fn buttons_of(kind: &str) -> [(&'static str, &'static str); 2] {
    if kind == STEP_DOWN {
        STEP_DOWN_BUTTONS
    } else {
        BUTTONS
    }
}

/// The buttons the Warden gives `action`.
pub fn buttons_for(action: &Action) -> [(&'static str, &'static str); 2] {
    match action {
        Action::StepDown { .. } => STEP_DOWN_BUTTONS,
        _ => BUTTONS,
    }
}

/// The label the Warden gave `button` on an action of record kind `kind`;
/// `None` for a button it never offered.
pub fn label_of(kind: &str, button: &str) -> Option<&'static str> {
    buttons_of(kind)
        .iter()
        .find(|(b, _)| *b == button)
        .map(|(_, l)| *l)
}

/// The record kind of an action record's bytes ("" when it has none).
fn kind_of(recorded: &[u8]) -> String {
    serde_json::from_slice::<Value>(recorded)
        .ok()
        .and_then(|v| v.get("kind").and_then(Value::as_str).map(String::from))
        .unwrap_or_default()
}

/// Whether the action `action_id` waiting for a tap is a step down (which
/// may be approved at Freeze, where nothing else may).
pub fn is_step_down(layout: &Layout, action_id: &str) -> bool {
    is_action_id(action_id)
        && std::fs::read(actions_dir(layout).join(format!("{action_id}.json")))
            .is_ok_and(|b| kind_of(&b) == STEP_DOWN)
}

/// The step downs still waiting for a tap.
fn open_step_downs(layout: &Layout) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(actions_dir(layout)) else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|path| {
            path.extension().is_some_and(|e| e == "json")
                && std::fs::read(path).is_ok_and(|b| kind_of(&b) == STEP_DOWN)
        })
        .collect()
}

/// Whether a "Was that you?" waits for a tap (one is asked per move).
pub fn step_down_open(layout: &Layout) -> bool {
    !open_step_downs(layout).is_empty()
}

/// Withdraws every step down still waiting for a tap (at every ladder
/// move: a question is about one move). Withdrawn as spent, not deleted:
/// the person's late tap on its buttons is then "already answered", not
/// an action this Warden never issued (found by the attack round: it
/// climbed the ladder).
pub fn withdraw_step_downs(layout: &Layout) {
    for path in open_step_downs(layout) {
        let _ = std::fs::rename(&path, path.with_extension("spent"));
    }
}

/// Withdraws every proposal still waiting (when the Telegram account is
/// pinned: each was issued under the relay's word, with the route it had
/// then; found by the attack round: a red run proposed just before the
/// pinning stayed approvable by a relay-signed tap). Withdrawn as spent,
/// so the person's late tap is "already answered", no anomaly.
pub fn withdraw_all(layout: &Layout) {
    let Ok(entries) = std::fs::read_dir(actions_dir(layout)) else {
        return;
    };
    for path in entries.flatten().map(|e| e.path()) {
        if path.extension().is_some_and(|e| e == "json") {
            let _ = std::fs::rename(&path, path.with_extension("spent"));
        }
    }
}

/// The most bytes a proposal's text may have: Telegram takes 4096
/// characters, and no character is less than a byte.
pub const MAX_TEXT: usize = 4096;

/// The bytes the relay signs for a tap on `a.button`, shown with the message
/// text whose SHA-256 is `text_sha256`. `None` for a button the Warden never
/// offered.
pub fn message(server_id: &str, text_sha256: &str, kind: &str, a: &Approval) -> Option<Vec<u8>> {
    let label = label_of(kind, &a.button)?;
    Some(
        format!(
            "aromba-approval-v2\nserver={server_id}\naction={}\ntext_sha256={text_sha256}\nbutton={}\nlabel={label}\nchat={}\ntime={}\n",
            a.action_id, a.button, a.chat, a.time
        )
        .into_bytes(),
    )
}

/// What the Warden knows of an action beyond its record, to say what it
/// does.
pub enum Facts<'a> {
    /// The chore a run or a cap confirmation is about, as it is here.
    Chore(&'a crate::chores::run::Chore),
    /// The snapshot an undo puts back.
    Snapshot(&'a crate::chores::snapshot::Meta),
    /// Turning prod mode off needs nothing else.
    Nothing,
    /// The ladder as it stands: its last move, its step and why it is
    /// there.
    Ladder {
        event: u64,
        step: u64,
        reason: &'a str,
    },
    /// The release an install is about, as verified in the download, and
    /// the one installed now.
    Release {
        version: aromba_release::Version,
        installed: Option<aromba_release::Version>,
        /// The commit its signature names ([`aromba_release::Manifest::commit`]).
        commit: Option<&'a str>,
    },
    /// The skill bundle an install is about, as verified in the download.
    Skill(&'a SkillFacts),
}

/// A skill bundle judged for an install here: the skill, the version
/// installed now, what it asks beyond it, and whether it needs the PIN.
pub struct SkillFacts {
    pub skill: crate::skills::Skill,
    pub installed: Option<crate::skills::Skill>,
    pub widening: Vec<String>,
    pub needs_pin: bool,
}

fn lines_of_touches(touches: &[PathBuf]) -> String {
    if touches.is_empty() {
        return "nothing on disk (it has no touches)".into();
    }
    touches
        .iter()
        .map(|t| t.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a placeholder in a chore action stands for, in words.
fn action_words(action: &[String]) -> String {
    let shown = action.join(" ");
    match action.last().map(String::as_str) {
        Some("@security-upgrades") => {
            format!(
                "{shown} (the installed packages with a security update, as apt lists them then)"
            )
        }
        Some("@failed-services") => {
            format!("{shown} (one restart per service systemd lists as failed then)")
        }
        _ => shown,
    }
}

/// The message the person reads for `action`: the Warden's words, the same
/// for the same action and facts (nothing in it is random or timed). `Err`
/// when the facts do not belong to the action or the text would not fit in
/// one message.
pub fn render(action: &Action, facts: &Facts<'_>) -> Result<String, String> {
    use crate::chores::header::{Color, DEFAULT_MAX_FILES, DEFAULT_MAX_GB};
    let text = match (action, facts) {
        (Action::Run { chore, .. }, Facts::Chore(c)) if c.header.name == *chore => {
            let h = &c.header;
            let mut t = format!(
                "Run the {} chore \"{}\" now?\nWhat it does: {}\nIt may change: {}",
                h.color.name(),
                h.name,
                h.description,
                lines_of_touches(&h.touches)
            );
            if h.color == Color::Red && !h.touches.is_empty() {
                t.push_str(" (copied first: Undo for 7 days)");
            }
            t.push_str(&format!(
                "\nAt most: {} files or {} GB changed\nNetwork: {}",
                h.max_files,
                h.max_gb,
                if h.network { "yes" } else { "no" }
            ));
            if h.actions.is_empty() {
                t.push_str("\nThen: nothing more");
            } else {
                let actions: Vec<String> = h.actions.iter().map(|a| action_words(a)).collect();
                t.push_str(&format!(
                    "\nThen, if it ends cleanly, the Warden runs for it: {}",
                    actions.join("; ")
                ));
            }
            t
        }
        (
            Action::ConfirmCap {
                chore,
                max_files,
                max_gb,
                script_sha256,
            },
            Facts::Chore(c),
        ) if c.header.name == *chore => format!(
            "Let the {} chore \"{chore}\" change up to {max_files} files or {max_gb} GB in one run?\nThe default cap is {DEFAULT_MAX_FILES} files or {DEFAULT_MAX_GB} GB.\nIt may change: {}\nThis holds for this exact script (SHA-256 {script_sha256}); an edited script needs a new confirmation.",
            c.header.color.name(),
            lines_of_touches(&c.header.touches)
        ),
        (Action::Undo { undo_id }, Facts::Snapshot(m)) if m.id == *undo_id => format!(
            "Undo the run of \"{}\" (undo id {undo_id})?\nPuts back as the run found them: {}\nWhat the run added, and the versions it left, go to quarantine; whatever changed since the run is left as it is.",
            m.chore,
            lines_of_touches(&m.roots)
        ),
        (
            Action::InstallRelease { version, .. },
            Facts::Release {
                version: v,
                installed,
                commit,
            },
        ) if v.to_string() == *version => {
            let kind = match installed.and_then(|i| v.step_from(&i)) {
                Some(aromba_release::version::Step::Major) => "a major release",
                Some(aromba_release::version::Step::Minor) => "a minor release",
                Some(aromba_release::version::Step::Patch) => "a patch release",
                None => "a release",
            };
            let now = installed.map_or("no recorded release".to_string(), |i| i.to_string());
            // Signed with the release (its signature's trusted comment):
            // which source this is, for whoever wants to read it first.
            let built = commit.map_or(String::new(), |c| {
                format!("\nIt was built from commit {}.", c.get(..12).unwrap_or(c))
            });
            format!(
                "Update Aromba to {version}?\nIt is {kind}; this server runs {now}.{built}\nThe Warden checked the release key's signature and both programs' hashes. It installs them beside the current ones, keeps {now} to go back to, and restarts Aromba's two services (a minute without the chat).\nIf the new release fails to start three times, {now} comes back by itself."
            )
        }
        (
            Action::InstallSkill {
                name,
                version,
                bundle_sha256,
                pin,
            },
            Facts::Skill(f),
        ) if f.skill.manifest.name == *name
            && f.skill.manifest.version.to_string() == *version
            && f.skill.sha256 == *bundle_sha256
            && f.needs_pin == *pin =>
        {
            skill_text(f)
        }
        (
            Action::StepDown {
                event,
                step,
                reason,
            },
            Facts::Ladder {
                event: last,
                step: now,
                reason: why,
            },
        ) if event == last && step == now && reason == why => step_down_text(*step, reason)?,
        (Action::ProdModeOff, Facts::Nothing) => format!(
            "Turn prod mode off?\n{}",
            aromba_warden_proto::PROD_MODE_OFF_CONSEQUENCES
        ),
        _ => return Err("the facts given are not those of this action".into()),
    };
    if text.len() > MAX_TEXT {
        return Err(format!(
            "the approval's text would take {} bytes, over the {MAX_TEXT} one message holds",
            text.len()
        ));
    }
    // What the relay hashes is what it sends: nothing a chat client could
    // trim or render otherwise — no line it breaks where the Warden did not
    // (U+2028, U+2029), no text it reorders or hides (found by the attack
    // round: a publisher's description painted lines of its own).
    if text.trim() != text
        || text
            .chars()
            .any(|c| (c.is_control() && c != '\n') || invisible_or_separator(c))
    {
        return Err(
            "the approval's text would hold a control, invisible or reordering character".into(),
        );
    }
    Ok(text)
}

/// A skill's install in plain words: the question, what it asks beyond
/// the version installed (an update that widens is a new install), its
/// whole manifest as `aromba skill install` shows it, and the PIN's why.
fn skill_text(f: &SkillFacts) -> String {
    let m = &f.skill.manifest;
    let mut t = match &f.installed {
        None => format!("Install the skill \"{}\" {}?", m.name, m.version),
        Some(old) => format!(
            "Update the skill \"{}\" from {} to {}?",
            m.name, old.manifest.version, m.version
        ),
    };
    if let Some(old) = &f.installed
        && !f.widening.is_empty()
    {
        t.push_str(&format!(
            "\nIt asks for more than {} has, so it waits for you like a new install. New:",
            old.manifest.version
        ));
        for w in &f.widening {
            t.push_str(&format!("\n  NEW: {w}"));
        }
    }
    t.push_str("\nWhat it is and what it may do:\n");
    t.push_str(f.skill.render().trim_end());
    t.push_str(&format!(
        "\n\nThe Warden checked the publisher's signature and every file's hash (bundle SHA-256 {}).",
        f.skill.sha256
    ));
    if f.needs_pin {
        t.push_str("\nYour PIN is needed too: it talks to hosts this server has not allowed yet.");
    }
    t
}

/// "Was that you?" in plain words: what was seen, what each answer does.
fn step_down_text(step: u64, reason: &str) -> Result<String, String> {
    let (now, since) = match step {
        1 => (
            "I've slowed down to one command a minute",
            "The chat and the assistant still work, one command a minute; my own schedule waits.",
        ),
        2 => (
            "I've stopped my schedule and the assistant",
            "The chat still works.",
        ),
        _ => return Err("only Slow and Freeze are stepped down by a tap".into()),
    };
    let seen = crate::ladder::plain_reason(reason);
    Ok(format!(
        "Was that you? Something I did looked unusual, so {now}. {since}\nWhat I saw: {seen}.\nIf it was you (for example you sent many commands quickly), tap \"Yes, it was me\" and I go back to normal.\nIf it was not you, tap \"No, stop Aromba\": I stop to reads only, and only `aromba resume` in a root terminal on the server brings me back.\nIf you do nothing, I step down by myself after 24 quiet hours."
    ))
}

fn random_hex(bytes: usize) -> std::io::Result<String> {
    let mut b = vec![0u8; bytes];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(aromba_warden_proto::encode_hex(&b))
}

fn actions_dir(layout: &Layout) -> PathBuf {
    layout.state_dir.join("actions")
}

pub fn server_id_file(layout: &Layout) -> PathBuf {
    layout.state_dir.join("server-id")
}

/// The state record of the relay's approval key, pinned at pairing.
pub const RELAY_KEY_RECORD: &str = "relay-approvals.pub";

/// The relay's approval key, pinned at pairing.
pub fn relay_key_file(layout: &Layout) -> PathBuf {
    layout.state_dir.join(RELAY_KEY_RECORD)
}

/// This server's id, made at install.
pub fn server_id(layout: &Layout) -> std::io::Result<String> {
    let path = server_id_file(layout);
    match std::fs::read_to_string(&path) {
        Ok(s) => Ok(s.trim().to_string()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let id = random_hex(16)?;
            std::fs::write(&path, format!("{id}\n"))?;
            Ok(id)
        }
        Err(e) => Err(e),
    }
}

fn is_action_id(s: &str) -> bool {
    s.len() == 32
        && s.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

/// Proposals waiting for a tap, at most: a Worker cannot fill the
/// Warden's state with action ids.
pub const MAX_OPEN: usize = 256;
/// An unanswered proposal older than this is dropped to make room.
pub const OPEN_FOR_S: u64 = 86_400;

/// Whether a proposal issued at `at` is still open at `now`: issued at
/// most [`OPEN_FOR_S`] ago, and not later than a tap's freshness allows
/// (found by the attack round: a record "issued" in the future — what a
/// clock stepped back leaves — counted as age 0 and stayed approvable for
/// the step back plus a day).
fn still_open(at: u64, now: u64) -> bool {
    at <= now.saturating_add(FRESH_S) && now.saturating_sub(at) <= OPEN_FOR_S
}

/// Drops unanswered proposals older than [`OPEN_FOR_S`]; returns how many
/// are still open.
fn prune_open(dir: &std::path::Path, now: u64) -> std::io::Result<usize> {
    let mut open = 0;
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let issued = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .and_then(|v| v.get("issued_at").and_then(Value::as_u64));
        match issued {
            Some(at) if still_open(at, now) => open += 1,
            _ => std::fs::remove_file(&path)?,
        }
    }
    Ok(open)
}

/// An action id made for a proposal, not yet recorded: the caller journals
/// it first, then [`record`]s it.
#[derive(Debug)]
pub struct Reserved(String);

impl Reserved {
    pub fn id(&self) -> &str {
        &self.0
    }
}

/// Makes an action id for a proposal, when fewer than [`MAX_OPEN`] wait.
pub fn reserve(layout: &Layout, now: u64) -> std::io::Result<Reserved> {
    let dir = actions_dir(layout);
    std::fs::create_dir_all(&dir)?;
    if prune_open(&dir, now)? >= MAX_OPEN {
        return Err(std::io::Error::other(format!(
            "{MAX_OPEN} proposals are waiting for a tap already"
        )));
    }
    Ok(Reserved(random_hex(16)?))
}

/// Records what the reserved id stands for and the SHA-256 of the text the
/// person will read; returns the id, now issued.
pub fn record(
    layout: &Layout,
    id: Reserved,
    action: &Action,
    text: &str,
    route: Route,
    seal: Option<&SealKey>,
    now: u64,
) -> std::io::Result<String> {
    let dir = actions_dir(layout);
    let path = dir.join(format!("{}.json", id.0));
    let bytes = serde_json::to_vec(&action.record(&text_sha256(text), route, seal, now))
        .unwrap_or_default();
    // Whole or not at all: the record a tap is checked against is never a
    // half-written one.
    crate::atomic_file::replace(&path, &bytes, 0o600)?;
    Ok(id.0)
}

/// The SHA-256 of a message text, as the relay signs it: lower-case hex.
pub fn text_sha256(text: &str) -> String {
    crate::journal::sha256_hex(text.as_bytes())
}

fn is_button(s: &str) -> bool {
    (1..=32).contains(&s.len())
        && s.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

fn is_chat(s: &str) -> bool {
    let digits = s.strip_prefix('-').unwrap_or(s);
    (1..=20).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit())
}

/// A tap that verified: the action it approves and the SHA-256 of the text
/// the person was shown for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    pub action: Action,
    pub text_sha256: String,
}

/// The bytes the relay signs for the journal anchor it holds of this
/// server (`docs/approvals.md`, "The anchor").
pub fn anchor_message(server_id: &str, seq: u64, hash: &str) -> Vec<u8> {
    format!("aromba-anchor-v1\nserver={server_id}\nseq={seq}\nhash={hash}\n").into_bytes()
}

/// The relay key pinned at pairing: what taps and anchors are verified
/// with.
fn pinned_key(layout: &Layout) -> Result<PublicKey, String> {
    let text = std::fs::read_to_string(relay_key_file(layout)).map_err(|_| {
        "no relay key is pinned: this server is not paired, so nothing the relay signs can be verified"
            .to_string()
    })?;
    PublicKey::from_base64(text.trim())
        .map_err(|e| format!("the pinned relay key is unreadable: {e}"))
}

/// The most a signature's text may be (minisign's are about 300 bytes).
pub const MAX_SIGNATURE: usize = 1024;

/// Whether `signature` is the pinned relay key's over the anchor
/// `(seq, hash)` of this server; why not, in words.
pub fn verify_anchor(
    layout: &Layout,
    seq: u64,
    hash: &str,
    signature: Option<&str>,
) -> Result<(), String> {
    let Some(signature) = signature else {
        return Err("the anchor is not signed by the relay".into());
    };
    if signature.len() > MAX_SIGNATURE {
        return Err("the anchor's signature is longer than any the relay makes".into());
    }
    let key = pinned_key(layout)?;
    let server = server_id(layout).map_err(|e| format!("cannot read this server's id: {e}"))?;
    let signature = Signature::decode(signature)
        .map_err(|e| format!("the anchor's signature cannot be read: {e}"))?;
    key.verify(&anchor_message(&server, seq, hash), &signature, false)
        .map_err(|_| "the anchor's signature does not verify against the pinned relay key".into())
}

/// Why a tap was not taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TapRefusal {
    /// A relay-signed tap, fresh, for a proposal answered already by
    /// another tap: what a person's double tap (or Approve after Cancel)
    /// is. Nothing is done, and it is no anomaly.
    AlreadyAnswered,
    /// A proposal too old to approve ([`OUTDATED`]): the person's own old
    /// message, tapped; nothing is done, and it is no anomaly.
    Outdated,
    /// Anything else: a tap the person could not have made (or the very tap
    /// that answered it, sent again), a ladder signal.
    Invalid(String),
}

impl From<String> for TapRefusal {
    fn from(why: String) -> TapRefusal {
        TapRefusal::Invalid(why)
    }
}

impl From<&str> for TapRefusal {
    fn from(why: &str) -> TapRefusal {
        TapRefusal::Invalid(why.to_string())
    }
}

/// The SHA-256 of the tap that spent an action, kept beside its record:
/// the same tap sent again is told from another tap of the person's.
fn spent_by(dir: &std::path::Path, action_id: &str) -> PathBuf {
    dir.join(format!("{action_id}.tap"))
}

/// A tap on an action spent already: another fresh, relay-signed tap over
/// the same text is the person's (already answered); the tap that spent
/// it, or one that does not verify, is not.
fn tap_on_spent(
    key: &PublicKey,
    server: &str,
    a: &Approval,
    now: u64,
    dir: &std::path::Path,
    spent: &std::path::Path,
) -> TapRefusal {
    let used = || TapRefusal::Invalid("the approval was used already".into());
    let Ok(recorded) = std::fs::read(spent) else {
        return used();
    };
    let Ok(text_hash) = recorded_text_sha256(&recorded) else {
        return used();
    };
    let Some(signed) = message(server, &text_hash, &kind_of(&recorded), a) else {
        return used();
    };
    let verifies = Signature::decode(&a.signature)
        .ok()
        .is_some_and(|s| key.verify(&signed, &s, false).is_ok());
    if !verifies || a.time.abs_diff(now) > FRESH_S {
        return used();
    }
    let this = text_sha256(&a.signature);
    match std::fs::read_to_string(spent_by(dir, &a.action_id)) {
        Ok(first) if first.trim() == this => {
            TapRefusal::Invalid("the approval was used already: the same tap again".into())
        }
        _ => TapRefusal::AlreadyAnswered,
    }
}

/// Verifies a tap and spends its action id; returns what it approves.
pub fn verify_and_spend(layout: &Layout, a: &Approval, now: u64) -> Result<Verified, TapRefusal> {
    let key = pinned_key(layout)?;
    if !is_action_id(&a.action_id) {
        return Err("the action id is not one this Warden could have issued".into());
    }
    if !is_button(&a.button) || !is_chat(&a.chat) {
        return Err("the tap's button or chat is not of the form the relay signs".into());
    }
    let server = server_id(layout).map_err(|e| format!("cannot read this server's id: {e}"))?;
    let dir = actions_dir(layout);
    let issued = dir.join(format!("{}.json", a.action_id));
    let spent = dir.join(format!("{}.spent", a.action_id));
    let recorded = match std::fs::read(&issued) {
        Ok(b) => b,
        Err(_) if spent.exists() => return Err(tap_on_spent(&key, &server, a, now, &dir, &spent)),
        Err(_) => return Err("the action id was not issued by this Warden".into()),
    };
    let text_hash = recorded_text_sha256(&recorded)?;
    if a.button == "approve" {
        match route_of_record(&recorded) {
            Some(Route::Relay) => {}
            // Checked before the signature: whatever the relay signed,
            // only Telegram's signature over the person's launch approves
            // this.
            Some(Route::App) => {
                return Err(
                    "this action is approved only in the Mini App, with Telegram's signature; a tap the relay signed does not approve it"
                        .into(),
                );
            }
            None => return Err(TapRefusal::Outdated),
        }
        if issued_at(&recorded).is_none_or(|at| !still_open(at, now)) {
            return Err(TapRefusal::Outdated);
        }
    }
    // The message is the Warden's: its recorded hash of its own text, the
    // label it gave the button. A tap shown with other words, or on a
    // button it did not offer, was not signed over these bytes.
    let signed = message(&server, &text_hash, &kind_of(&recorded), a)
        .ok_or_else(|| format!("{:?} is not a button the Warden offered", a.button))?;
    let signature = Signature::decode(&a.signature)
        .map_err(|e| format!("the signature cannot be read: {e}"))?;
    key.verify(&signed, &signature, false).map_err(|_| {
        "the approval's signature does not verify against the relay's key over this action and the Warden's text for it".to_string()
    })?;
    if a.time.abs_diff(now) > FRESH_S {
        return Err(format!("the approval is not fresh: signed at {}, now {now}", a.time).into());
    }
    spend(&dir, &a.action_id, &recorded, &a.signature, text_hash)
}

/// Spends the issued action `action_id` (recorded as `recorded`), approved
/// by `signature` (a tap's, or Telegram's over a launch): what it approves.
fn spend(
    dir: &std::path::Path,
    action_id: &str,
    recorded: &[u8],
    signature: &str,
    text_sha256: String,
) -> Result<Verified, TapRefusal> {
    let issued = dir.join(format!("{action_id}.json"));
    let spent = dir.join(format!("{action_id}.spent"));
    // Spending is a rename: of two uses racing, one finds the file gone.
    // The callers verified this approval, so the loser is the person's
    // second tap (already answered) unless it is the very approval that
    // won (a replay).
    if std::fs::rename(&issued, &spent).is_err() {
        if !spent.exists() {
            return Err("the action id was not issued by this Warden".into());
        }
        let same = std::fs::read_to_string(spent_by(dir, action_id))
            .is_ok_and(|t| t.trim() == self::text_sha256(signature));
        return Err(if same {
            TapRefusal::Invalid("the approval was used already".into())
        } else {
            TapRefusal::AlreadyAnswered
        });
    }
    // Which approval spent it: the same one again is a replay, another the
    // person's second tap.
    let _ = std::fs::write(
        spent_by(dir, action_id),
        format!("{}\n", self::text_sha256(signature)),
    );
    let bytes = std::fs::read(&spent).map_err(|e| e.to_string())?;
    if bytes != recorded {
        return Err("the action record changed while the approval was checked".into());
    }
    let record: Value = serde_json::from_slice(&bytes)
        .map_err(|e| format!("the action record is malformed: {e}"))?;
    Ok(Verified {
        action: Action::from_record(&record)?,
        text_sha256,
    })
}

/// An action approved in the app: what it approves, and the key its PIN
/// was sealed for when it needs one.
#[derive(Debug)]
pub struct InApp {
    pub verified: Verified,
    pub seal: Option<SealKey>,
}

/// Spends the action `param` names for an approval in the Mini App whose
/// launch Telegram signed (verified by the caller) with that `start_param`:
/// the action's text must be the one whose SHA-256 it names and its seal
/// key, if any, the record's. The same launch sent again is a replay;
/// another launch of the person's on an action already answered is their
/// second tap (already answered).
pub fn spend_in_app(
    layout: &Layout,
    param: &ActionParam<'_>,
    signature: &str,
    now: u64,
) -> Result<InApp, TapRefusal> {
    let action_id = param.action_id;
    if !is_action_id(action_id) {
        return Err("the action id is not one this Warden could have issued".into());
    }
    let dir = actions_dir(layout);
    let issued = dir.join(format!("{action_id}.json"));
    let spent = dir.join(format!("{action_id}.spent"));
    let recorded = match std::fs::read(&issued) {
        Ok(b) => b,
        Err(_) if spent.exists() => {
            let same = std::fs::read_to_string(spent_by(&dir, action_id))
                .is_ok_and(|t| t.trim() == self::text_sha256(signature));
            return Err(if same {
                TapRefusal::Invalid("this approval was used already".into())
            } else {
                TapRefusal::AlreadyAnswered
            });
        }
        Err(_) => return Err("the action id was not issued by this Warden".into()),
    };
    let recorded_hash = recorded_text_sha256(&recorded)?;
    match route_of_record(&recorded) {
        Some(Route::App) => {}
        // Never offered in the app: its Approve is a tap in the chat.
        Some(Route::Relay) => {
            return Err("this action is approved with a tap in the chat, not in the app".into());
        }
        None => return Err(TapRefusal::Outdated),
    }
    if issued_at(&recorded).is_none_or(|at| !still_open(at, now)) {
        return Err(TapRefusal::Outdated);
    }
    if recorded_hash != param.text_sha256 {
        return Err("the app was opened for another text than the Warden's for this action".into());
    }
    let seal = seal_of_record(&recorded)?;
    if seal.as_ref().map(SealKey::public_hex).as_deref() != param.seal_key {
        // A page given another key would seal the PIN for whoever holds it.
        return Err(
            "the app was opened with another PIN key than the Warden's for this action".into(),
        );
    }
    let verified = spend(&dir, action_id, &recorded, signature, recorded_hash)?;
    Ok(InApp { verified, seal })
}

/// The key an action record's PIN is sealed for, if it has one.
fn seal_of_record(bytes: &[u8]) -> Result<Option<SealKey>, String> {
    let record: Value = serde_json::from_slice(bytes)
        .map_err(|e| format!("the action record is malformed: {e}"))?;
    match record.get(SEAL_SECRET) {
        None => Ok(None),
        Some(v) => v
            .as_str()
            .and_then(SealKey::from_secret_hex)
            .map(Some)
            .ok_or_else(|| "the action record's PIN key is unreadable".to_string()),
    }
}

/// The text hash an action record holds; a record from before proposals
/// carried the Warden's text cannot be approved.
fn recorded_text_sha256(bytes: &[u8]) -> Result<String, String> {
    let record: Value = serde_json::from_slice(bytes)
        .map_err(|e| format!("the action record is malformed: {e}"))?;
    record
        .get("text_sha256")
        .and_then(Value::as_str)
        .filter(|h| h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
        .map(String::from)
        .ok_or_else(|| {
            "this proposal was made before approvals covered the Warden's text; propose it again"
                .to_string()
        })
}

/// A random id of `bytes` bytes, in lower-case hex (undo ids too).
pub fn new_id(bytes: usize) -> std::io::Result<String> {
    random_hex(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chores::catalog;
    use crate::chores::snapshot::Meta;

    fn system(name: &str) -> crate::chores::run::Chore {
        catalog::system()
            .into_iter()
            .find(|c| c.header.name == name)
            .unwrap()
    }

    fn run_of(c: &crate::chores::run::Chore) -> Action {
        Action::Run {
            chore: c.header.name.clone(),
            script_sha256: crate::journal::sha256_hex(c.script.as_bytes()),
        }
    }

    #[test]
    fn what_only_the_person_in_the_app_approves_once_an_account_is_bound() {
        let red = system("security-updates");
        let green = system("apt-clean");
        let meta = Meta {
            id: "u1".into(),
            chore: "x".into(),
            created_at: 1,
            roots: vec![],
        };
        let release = Facts::Release {
            version: aromba_release::Version::parse("1.2.0").unwrap(),
            installed: None,
            commit: None,
        };
        let ladder = Facts::Ladder {
            event: 1,
            step: 1,
            reason: "r",
        };
        let cases = [
            (run_of(&red), Facts::Chore(&red), Route::App),
            (run_of(&green), Facts::Chore(&green), Route::Relay),
            (
                Action::Undo {
                    undo_id: "u1".into(),
                },
                Facts::Snapshot(&meta),
                Route::App,
            ),
            (
                Action::InstallRelease {
                    version: "1.2.0".into(),
                    manifest_sha256: "0".repeat(64),
                },
                release,
                Route::App,
            ),
            (
                Action::StepDown {
                    event: 1,
                    step: 1,
                    reason: "r".into(),
                },
                ladder,
                Route::App,
            ),
            // The PIN sealed for the Warden in the page (`seal.rs`).
            (Action::ProdModeOff, Facts::Nothing, Route::App),
        ];
        for (action, facts, want) in &cases {
            assert_eq!(route(action, facts), *want, "{action:?}");
        }
    }

    #[test]
    fn a_run_is_rendered_the_same_each_time_and_names_what_it_does() {
        let c = system("security-updates");
        let action = run_of(&c);
        let text = render(&action, &Facts::Chore(&c)).unwrap();
        assert_eq!(text, render(&action, &Facts::Chore(&c)).unwrap());
        assert_eq!(
            text,
            "Run the red chore \"security-updates\" now?\n\
             What it does: Install the security updates of installed packages\n\
             It may change: nothing on disk (it has no touches)\n\
             At most: 1000 files or 20 GB changed\n\
             Network: no\n\
             Then, if it ends cleanly, the Warden runs for it: apt-get install -y --only-upgrade @security-upgrades (the installed packages with a security update, as apt lists them then)"
        );
        let other = system("restart-failed");
        assert_ne!(
            text,
            render(&run_of(&other), &Facts::Chore(&other)).unwrap()
        );
    }

    #[test]
    fn an_undo_a_cap_and_prod_mode_off_are_rendered_with_what_they_do() {
        let meta = Meta {
            id: "ab".repeat(16),
            chore: "tidy".into(),
            created_at: 1,
            roots: vec![PathBuf::from("/srv/app/cache")],
        };
        let undo = Action::Undo {
            undo_id: meta.id.clone(),
        };
        let text = render(&undo, &Facts::Snapshot(&meta)).unwrap();
        assert!(
            text.starts_with(&format!("Undo the run of \"tidy\" (undo id {})?", meta.id)),
            "{text}"
        );
        assert!(text.contains("/srv/app/cache"), "{text}");
        let c = system("apt-clean");
        let cap = Action::ConfirmCap {
            chore: "apt-clean".into(),
            max_files: 5000,
            max_gb: 40,
            script_sha256: "cd".repeat(32),
        };
        let text = render(&cap, &Facts::Chore(&c)).unwrap();
        for said in [
            "\"apt-clean\"",
            "5000 files or 40 GB",
            "/var/cache/apt/archives",
            &"cd".repeat(32),
        ] {
            assert!(text.contains(said), "{said} not in {text}");
        }
        let text = render(&Action::ProdModeOff, &Facts::Nothing).unwrap();
        assert!(text.contains(aromba_warden_proto::PROD_MODE_OFF_CONSEQUENCES));
        // Facts that are not the action's are refused, not rendered.
        assert!(render(&undo, &Facts::Chore(&c)).is_err());
        assert!(render(&run_of(&c), &Facts::Chore(&system("time-sync"))).is_err());
    }

    #[test]
    fn the_signed_message_is_the_documented_one() {
        let a = Approval {
            action_id: "0123456789abcdef0123456789abcdef".into(),
            button: "approve".into(),
            chat: "-1001".into(),
            time: 1_800_000_000,
            signature: String::new(),
        };
        let hash = text_sha256("Turn prod mode off?");
        assert_eq!(
            String::from_utf8(message("srv1", &hash, "run", &a).unwrap()).unwrap(),
            format!(
                "aromba-approval-v2\nserver=srv1\naction=0123456789abcdef0123456789abcdef\ntext_sha256={hash}\nbutton=approve\nlabel=Approve\nchat=-1001\ntime=1800000000\n"
            )
        );
        let other = Approval {
            button: "delete".into(),
            ..a
        };
        assert!(message("srv1", &hash, "run", &other).is_none());
        assert!(is_chat("-1001") && is_chat("42") && !is_chat("42\nx") && !is_chat(""));
        assert!(is_button("approve") && !is_button("Approve") && !is_button("a\nb"));
    }

    #[test]
    fn was_that_you_is_signed_over_its_own_labels() {
        let a = Approval {
            action_id: "0123456789abcdef0123456789abcdef".into(),
            button: "approve".into(),
            chat: "-1001".into(),
            time: 1_800_000_000,
            signature: String::new(),
        };
        let signed = String::from_utf8(message("srv1", "h", STEP_DOWN, &a).unwrap()).unwrap();
        assert!(signed.contains("\nlabel=Yes, it was me\n"), "{signed}");
        let no = Approval {
            button: "cancel".into(),
            ..a
        };
        let signed = String::from_utf8(message("srv1", "h", STEP_DOWN, &no).unwrap()).unwrap();
        assert!(signed.contains("\nlabel=No, stop Aromba\n"), "{signed}");
    }

    #[test]
    fn was_that_you_names_what_was_seen_in_plain_words() {
        let text = render(
            &Action::StepDown {
                event: 4,
                step: 1,
                reason: "61 commands in 10 minutes".into(),
            },
            &Facts::Ladder {
                event: 4,
                step: 1,
                reason: "61 commands in 10 minutes",
            },
        )
        .unwrap();
        assert!(text.starts_with("Was that you?"), "{text}");
        assert!(
            text.contains("What I saw: 61 commands in 10 minutes, more than I ever need."),
            "{text}"
        );
        // Another reason than the one asked about is not this action's.
        assert!(
            render(
                &Action::StepDown {
                    event: 4,
                    step: 1,
                    reason: "61 commands in 10 minutes".into(),
                },
                &Facts::Ladder {
                    event: 4,
                    step: 1,
                    reason: "honeypot /root/.aws was opened",
                },
            )
            .is_err()
        );
        // Cut is never asked about.
        assert!(
            render(
                &Action::StepDown {
                    event: 4,
                    step: 3,
                    reason: "x".into(),
                },
                &Facts::Ladder {
                    event: 4,
                    step: 3,
                    reason: "x"
                },
            )
            .is_err()
        );
    }
}
