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
pub mod tools;

#[cfg(test)]
mod attack_round_tests;

use crate::config::{AssistantSettings, ConfigError};
use crate::net::Gate;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// The assistant as the daemon holds it.
pub struct Assistant {
    pub settings: AssistantSettings,
    pub gate: Gate,
    /// The API key; `None` once wiped (or for an endpoint without one).
    key: Mutex<Option<String>>,
    /// Wiped at Cut: no answer until `aromba resume` and a restart.
    off: std::sync::atomic::AtomicBool,
}

impl Assistant {
    pub fn new(settings: AssistantSettings, gate: Gate, key: Option<String>) -> Assistant {
        Assistant {
            settings,
            gate,
            key: Mutex::new(key),
            off: Default::default(),
        }
    }

    /// Drops the key from memory and turns the assistant off.
    pub fn wipe(&self) {
        if let Some(mut key) = self.key.lock().unwrap_or_else(|p| p.into_inner()).take() {
            // Overwritten before it is freed.
            key.replace_range(.., &"\0".repeat(key.len()));
        }
        self.off.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn is_off(&self) -> bool {
        self.off.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The model client for one question.
    pub fn model(&self) -> model::AnyModel {
        let dialer: Arc<dyn aromba_proto::client::Dialer> = Arc::new(self.gate.clone());
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
