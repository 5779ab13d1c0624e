//! The assistant: answers a question from the server's own numbers and
//! logs through typed, read-only tools ([`tools`]), each one request the
//! Warden judges; it proposes a chore of the Warden's list, and never
//! executes ([`conversation`]). The model is any OpenAI-compatible chat
//! API ([`model`]) named in `network.toml`'s `[assistant]`, reached through
//! the network gate; its key is the Worker's `secrets.toml`
//! (`api_key = "…"`), which the Warden wipes at ladder step Cut — and the
//! Worker drops its copy then (`Assistant::wipe`).

pub mod conversation;
pub mod model;
pub mod secret_paths;
pub mod stream;
pub mod tools;
pub mod voice;

use crate::config::{AssistantSettings, ConfigError};
use crate::net::Gate;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The one answer under way; its place is free again when dropped.
pub struct Busy(Arc<Assistant>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.store(false, Ordering::SeqCst);
    }
}

/// The assistant as the daemon holds it.
pub struct Assistant {
    pub settings: AssistantSettings,
    pub gate: Gate,
    /// The API key; `None` once wiped (or for an endpoint without one).
    key: Mutex<Option<String>>,
    /// Wiped at Cut: no answer until `aromba resume` and a restart.
    off: AtomicBool,
    /// Bumped to stop the answer under way (Freeze, Cut, `/panic`): it
    /// watches this and drops its request to the model at once.
    halts: tokio::sync::watch::Sender<u64>,
    /// An answer is under way (one at a time).
    busy: AtomicBool,
}

impl Assistant {
    pub fn new(settings: AssistantSettings, gate: Gate, key: Option<String>) -> Assistant {
        Assistant {
            settings,
            gate,
            key: Mutex::new(key),
            off: Default::default(),
            halts: tokio::sync::watch::Sender::new(0),
            busy: Default::default(),
        }
    }

    /// Drops the key from memory, turns the assistant off and stops the
    /// answer under way.
    pub fn wipe(&self) {
        if let Some(mut key) = self.key.lock().unwrap_or_else(|p| p.into_inner()).take() {
            // Overwritten before it is freed.
            key.replace_range(.., &"\0".repeat(key.len()));
        }
        self.off.store(true, Ordering::SeqCst);
        self.halt();
    }

    /// Stops the answer under way, if any.
    pub fn halt(&self) {
        self.halts.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A receiver that sees every later [`Assistant::halt`].
    pub fn halts(&self) -> tokio::sync::watch::Receiver<u64> {
        self.halts.subscribe()
    }

    /// Takes the one answer's place; `None` while another answer is under
    /// way. The place is given back when the guard is dropped (the answer
    /// ended, failed or was stopped).
    pub fn begin(self: &Arc<Self>) -> Option<Busy> {
        self.busy
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .ok()
            .map(|_| Busy(self.clone()))
    }

    pub fn is_off(&self) -> bool {
        self.off.load(Ordering::SeqCst)
    }

    /// The model client for one question.
    pub fn model(&self) -> model::AnyModel {
        let dialer: Arc<dyn aromba_relay_proto::client::Dialer> = Arc::new(self.gate.clone());
        let endpoint = self.settings.endpoint.clone();
        let model = self.settings.model.clone();
        let key = self.key.lock().unwrap_or_else(|p| p.into_inner()).clone();
        match self.settings.api {
            crate::config::Api::OpenAi => model::AnyModel::OpenAi(model::OpenAi {
                dialer,
                endpoint,
                model,
                key,
                roots: None,
            }),
            crate::config::Api::Anthropic => model::AnyModel::Anthropic(model::Anthropic {
                dialer,
                endpoint,
                model,
                key,
                roots: None,
            }),
        }
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct SecretsFile {
    api_key: Option<String>,
}

/// The key in `secrets.toml`: `None` when the file is not there; refused
/// when others than its owner may read it.
pub fn load_key(path: &Path) -> Result<Option<String>, ConfigError> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(ConfigError::Unreadable {
                path: path.to_path_buf(),
                why: e.to_string(),
            });
        }
    };
    if !meta.is_file() {
        return Err(ConfigError::Unreadable {
            path: path.to_path_buf(),
            why: "is not a regular file".into(),
        });
    }
    if meta.mode() & 0o077 != 0 {
        return Err(ConfigError::Ownership {
            path: path.to_path_buf(),
            why: format!(
                "holds the AI key, so only its owner may read it; its mode is {:04o}",
                meta.mode() & 0o7777
            ),
        });
    }
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Unreadable {
        path: path.to_path_buf(),
        why: e.to_string(),
    })?;
    let file: SecretsFile = toml::from_str(&text).map_err(|_| ConfigError::Malformed {
        path: path.to_path_buf(),
        line: 1,
        // The message could quote the key: not repeated.
        why: "is not `api_key = \"…\"`".into(),
    })?;
    Ok(file.api_key.filter(|k| !k.trim().is_empty()))
}
