//! Approvals the Warden checks itself, trusting nothing the Worker says.
//!
//! For each proposed action — a run of a yellow or red chore, confirming a
//! higher damage cap, an undo, turning prod mode off — the Warden issues an
//! action id (random, kept in its state with what it stands for). The relay signs each button tap
//! it forwards — minisign format, over the message below — and the Worker
//! only carries the signature. The Warden verifies it against the relay
//! public key pinned in its state at pairing, checks that the time is fresh
//! (ten minutes either way), that the action id is one it issued, and that
//! it was not used before; it is then spent.
//!
//! ```text
//! aromba-approval-v1
//! server=<server id>
//! action=<action id>
//! button=<button>
//! chat=<chat id>
//! time=<unix seconds>
//! ```

#![forbid(unsafe_code)]

use crate::layout::Layout;
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
    Run {
        chore: String,
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
}

impl Action {
    pub fn needs_pin(&self) -> bool {
        matches!(self, Action::ProdModeOff)
    }

    fn record(&self, now: u64) -> Value {
        let mut m = Map::new();
        m.insert("issued_at".into(), Value::from(now));
        match self {
            Action::Run { chore } => {
                m.insert("kind".into(), Value::from("run"));
                m.insert("chore".into(), Value::from(chore.as_str()));
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
        }
        Value::Object(m)
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
        // A record from before actions had kinds stands for a run.
        if v.get("kind").is_none() {
            return Ok(Action::Run { chore: s("chore")? });
        }
        match s("kind")?.as_str() {
            "run" => Ok(Action::Run { chore: s("chore")? }),
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
            other => Err(format!("the action record has an unknown kind {other:?}")),
        }
    }
}

/// The bytes the relay signs.
pub fn message(server_id: &str, a: &Approval) -> Vec<u8> {
    format!(
        "aromba-approval-v1\nserver={server_id}\naction={}\nbutton={}\nchat={}\ntime={}\n",
        a.action_id, a.button, a.chat, a.time
    )
    .into_bytes()
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

/// The relay's approval key, pinned at pairing.
pub fn relay_key_file(layout: &Layout) -> PathBuf {
    layout.state_dir.join("relay-approvals.pub")
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
            Some(at) if now.saturating_sub(at) <= OPEN_FOR_S => open += 1,
            _ => std::fs::remove_file(&path)?,
        }
    }
    Ok(open)
}

/// Issues an action id for a proposed `action`.
pub fn issue(layout: &Layout, action: &Action, now: u64) -> std::io::Result<String> {
    let dir = actions_dir(layout);
    std::fs::create_dir_all(&dir)?;
    if prune_open(&dir, now)? >= MAX_OPEN {
        return Err(std::io::Error::other(format!(
            "{MAX_OPEN} proposals are waiting for a tap already"
        )));
    }
    let id = random_hex(16)?;
    std::fs::write(
        dir.join(format!("{id}.json")),
        serde_json::to_vec(&action.record(now)).unwrap_or_default(),
    )?;
    Ok(id)
}

/// Verifies a tap and spends its action id; returns the action it
/// approves.
pub fn verify_and_spend(layout: &Layout, a: &Approval, now: u64) -> Result<Action, String> {
    let key_text = std::fs::read_to_string(relay_key_file(layout)).map_err(|_| {
        "no relay key is pinned: this server is not paired, so no approval can be verified"
            .to_string()
    })?;
    let key = PublicKey::from_base64(key_text.trim())
        .map_err(|e| format!("the pinned relay key is unreadable: {e}"))?;
    if !is_action_id(&a.action_id) {
        return Err("the action id is not one this Warden could have issued".into());
    }
    let server = server_id(layout).map_err(|e| format!("cannot read this server's id: {e}"))?;
    let signature = Signature::decode(&a.signature)
        .map_err(|e| format!("the signature cannot be read: {e}"))?;
    key.verify(&message(&server, a), &signature, false)
        .map_err(|_| {
            "the approval's signature does not verify against the relay's key".to_string()
        })?;
    if a.time.abs_diff(now) > FRESH_S {
        return Err(format!(
            "the approval is not fresh: signed at {}, now {now}",
            a.time
        ));
    }
    let dir = actions_dir(layout);
    let issued = dir.join(format!("{}.json", a.action_id));
    let spent = dir.join(format!("{}.spent", a.action_id));
    // Spending is a rename: of two uses racing, one finds the file gone.
    std::fs::rename(&issued, &spent).map_err(|_| {
        if spent.exists() {
            "the approval was used already".to_string()
        } else {
            "the action id was not issued by this Warden".to_string()
        }
    })?;
    let record: Value = serde_json::from_slice(&std::fs::read(&spent).map_err(|e| e.to_string())?)
        .map_err(|e| format!("the action record is malformed: {e}"))?;
    Action::from_record(&record)
}

/// A random id of `bytes` bytes, in lower-case hex (undo ids too).
pub fn new_id(bytes: usize) -> std::io::Result<String> {
    random_hex(bytes)
}
