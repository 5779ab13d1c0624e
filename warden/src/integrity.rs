//! The integrity baseline: SHA-256 of both binaries, the policy rendering
//! (as compiled in and as written to disk), the fence list, the Worker's
//! `network.toml` (root's; `aromba pair` writes it and has the baseline
//! re-taken) and the Warden's own state records, taken at install and checked at start and every hour
//! (the Warden's own binary through `/proc/self/exe`). Any mismatch moves
//! the ladder to Cut. The ladder's file is left out: it changes whenever
//! the ladder moves, and is guarded by its own rules (see `ladder.rs`).

#![forbid(unsafe_code)]

use crate::journal::sha256_hex;
use crate::layout::Layout;
use crate::policy;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Baseline {
    pub installed_at: u64,
    pub warden_sha256: String,
    pub worker_bin: PathBuf,
    pub worker_sha256: String,
    pub policy_sha256: String,
    pub fences_sha256: String,
    pub network_sha256: String,
    pub state: BTreeMap<String, String>,
}

fn file_sha256(path: &Path) -> std::io::Result<String> {
    std::fs::read(path).map(|b| sha256_hex(&b))
}

/// The Warden's state records: every file of the state directory but the
/// ladder's, the count of wrong PINs (`pin.rs` says why), the baseline
/// itself and temporary files.
fn state_records(layout: &Layout) -> std::io::Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    let skip = [
        layout.ladder_file(),
        crate::pin::attempts_file(layout),
        layout.baseline_file(),
    ];
    let entries = match std::fs::read_dir(&layout.state_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let path = entry?.path();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if skip.contains(&path) || name.ends_with(".new") || !path.is_file() {
            continue;
        }
        out.insert(name, file_sha256(&path)?);
    }
    Ok(out)
}

fn fences_sha256(layout: &Layout) -> std::io::Result<String> {
    match std::fs::read(layout.fences_file()) {
        Ok(b) => Ok(sha256_hex(&b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(sha256_hex(b"")),
        Err(e) => Err(e),
    }
}

/// The hash of `network.toml`, or `absent` (not paired yet): a file made
/// where there was none is a change too.
fn network_sha256(layout: &Layout) -> std::io::Result<String> {
    match std::fs::read(layout.network_file()) {
        Ok(b) => Ok(sha256_hex(&b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok("absent".into()),
        Err(e) => Err(e),
    }
}

impl Baseline {
    /// Takes the baseline now: `warden_bin` is the Warden's binary as it
    /// runs (`/proc/self/exe`), `worker_bin` the Worker's.
    pub fn take(
        layout: &Layout,
        warden_bin: &Path,
        worker_bin: &Path,
        now: u64,
    ) -> std::io::Result<Baseline> {
        Ok(Baseline {
            installed_at: now,
            warden_sha256: file_sha256(warden_bin)?,
            worker_bin: worker_bin.to_path_buf(),
            worker_sha256: file_sha256(worker_bin)?,
            policy_sha256: sha256_hex(policy::render().as_bytes()),
            fences_sha256: fences_sha256(layout)?,
            network_sha256: network_sha256(layout)?,
            state: state_records(layout)?,
        })
    }

    pub fn write(&self, layout: &Layout) -> std::io::Result<()> {
        let mut m = Map::new();
        m.insert("version".into(), Value::from(1));
        m.insert("installed_at".into(), Value::from(self.installed_at));
        m.insert(
            "warden_sha256".into(),
            Value::from(self.warden_sha256.as_str()),
        );
        m.insert(
            "worker_bin".into(),
            Value::from(self.worker_bin.to_string_lossy().as_ref()),
        );
        m.insert(
            "worker_sha256".into(),
            Value::from(self.worker_sha256.as_str()),
        );
        m.insert(
            "policy_sha256".into(),
            Value::from(self.policy_sha256.as_str()),
        );
        m.insert(
            "fences_sha256".into(),
            Value::from(self.fences_sha256.as_str()),
        );
        m.insert(
            "network_sha256".into(),
            Value::from(self.network_sha256.as_str()),
        );
        m.insert(
            "state".into(),
            Value::Object(
                self.state
                    .iter()
                    .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
                    .collect(),
            ),
        );
        let bytes = serde_json::to_vec(&Value::Object(m)).unwrap_or_default();
        crate::atomic_file::replace(&layout.baseline_file(), &bytes, 0o600)
    }

    /// The recorded baseline; `Ok(None)` when not installed.
    pub fn read(layout: &Layout) -> Result<Option<Baseline>, String> {
        let bytes = match std::fs::read(layout.baseline_file()) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("cannot read the baseline: {e}")),
        };
        let v: Value = serde_json::from_slice(&bytes)
            .map_err(|e| format!("the baseline is malformed: {e}"))?;
        let get = |k: &str| {
            v.get(k)
                .and_then(Value::as_str)
                .map(String::from)
                .ok_or(format!("the baseline lacks {k}"))
        };
        let state = v
            .get("state")
            .and_then(Value::as_object)
            .ok_or("the baseline lacks state")?
            .iter()
            .map(|(k, v)| {
                v.as_str()
                    .map(|s| (k.clone(), s.to_string()))
                    .ok_or("bad state record")
            })
            .collect::<Result<BTreeMap<_, _>, _>>()?;
        Ok(Some(Baseline {
            installed_at: v
                .get("installed_at")
                .and_then(Value::as_u64)
                .ok_or("the baseline lacks installed_at")?,
            warden_sha256: get("warden_sha256")?,
            worker_bin: PathBuf::from(get("worker_bin")?),
            worker_sha256: get("worker_sha256")?,
            policy_sha256: get("policy_sha256")?,
            fences_sha256: get("fences_sha256")?,
            network_sha256: get("network_sha256")?,
            state,
        }))
    }

    /// Re-takes the hashes of the state records only: the Warden changed
    /// one itself (`state.rs`, which checks the rest still match first).
    pub fn retake_state(&mut self, layout: &Layout) -> std::io::Result<()> {
        self.state = state_records(layout)?;
        Ok(())
    }

    /// Re-takes the fence list's hash: the Warden changed the list itself
    /// (`server/fences.rs`, which checks the list still matched first).
    pub fn retake_fences(&mut self, layout: &Layout) -> std::io::Result<()> {
        self.fences_sha256 = fences_sha256(layout)?;
        Ok(())
    }

    /// Takes new binaries and this Warden's policy as the baseline's: a
    /// verified release the Warden installed itself is now running
    /// (`server/update.rs` checks it is exactly that one).
    pub fn retake_release(&mut self, warden_sha256: &str, worker_sha256: &str) {
        self.warden_sha256 = warden_sha256.to_string();
        self.worker_sha256 = worker_sha256.to_string();
        self.policy_sha256 = sha256_hex(policy::render().as_bytes());
    }

    /// Re-takes `network.toml`'s hash: `aromba pair` wrote it, from a root
    /// terminal.
    pub fn retake_network(&mut self, layout: &Layout) -> std::io::Result<()> {
        self.network_sha256 = network_sha256(layout)?;
        Ok(())
    }

    /// Compares what is on disk now with the baseline; returns every
    /// mismatch.
    pub fn check(&self, layout: &Layout) -> Vec<Mismatch> {
        let mut bad = Vec::new();
        let mut compare = |what: Watched, now: std::io::Result<String>, want: &str| match now {
            Ok(h) if h == want => {}
            Ok(_) => bad.push(Mismatch {
                what,
                how: How::Changed,
            }),
            Err(e) => bad.push(Mismatch {
                what,
                how: How::Unreadable(e.to_string()),
            }),
        };
        compare(
            Watched::WardenBinary,
            file_sha256(Path::new("/proc/self/exe")),
            &self.warden_sha256,
        );
        compare(
            Watched::WorkerBinary,
            file_sha256(&self.worker_bin),
            &self.worker_sha256,
        );
        compare(
            Watched::CompiledPolicy,
            Ok(sha256_hex(policy::render().as_bytes())),
            &self.policy_sha256,
        );
        compare(
            Watched::PolicyOnDisk,
            file_sha256(&layout.config_dir.join("policy.toml")),
            &self.policy_sha256,
        );
        compare(
            Watched::FenceList,
            fences_sha256(layout),
            &self.fences_sha256,
        );
        compare(
            Watched::Network,
            network_sha256(layout),
            &self.network_sha256,
        );
        match state_records(layout) {
            Ok(now) if now == self.state => {}
            Ok(_) => bad.push(Mismatch {
                what: Watched::StateRecords,
                how: How::Changed,
            }),
            Err(e) => bad.push(Mismatch {
                what: Watched::StateRecords,
                how: How::Unreadable(e.to_string()),
            }),
        }
        bad
    }
}

/// What the baseline holds a hash of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Watched {
    WardenBinary,
    WorkerBinary,
    CompiledPolicy,
    PolicyOnDisk,
    FenceList,
    Network,
    StateRecords,
}

impl Watched {
    fn name(self) -> &'static str {
        match self {
            Watched::WardenBinary => "the Warden's binary",
            Watched::WorkerBinary => "the Worker's binary",
            Watched::CompiledPolicy => "the compiled-in policy",
            Watched::PolicyOnDisk => "the policy rendering on disk",
            Watched::FenceList => "the fence list",
            Watched::Network => "the Worker's network.toml",
            Watched::StateRecords => "the Warden's state records",
        }
    }
}

/// How a watched thing no longer matches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum How {
    Changed,
    /// It could not be read: why.
    Unreadable(String),
}

/// One thing on disk that no longer matches the baseline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    pub what: Watched,
    pub how: How,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.how {
            How::Changed => write!(f, "{} changed", self.what.name()),
            How::Unreadable(e) => write!(f, "{} cannot be read: {e}", self.what.name()),
        }
    }
}

/// The mismatches as the journal, `aromba status` and the ladder's signal
/// say them: one sentence each, joined by `; `.
pub fn said(mismatches: &[Mismatch]) -> String {
    mismatches
        .iter()
        .map(Mismatch::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `aromba status`, the journal and the ladder's signal read these
    /// words; the callers that act on a mismatch match its kind, not them.
    #[test]
    fn a_mismatch_says_what_changed_or_why_it_could_not_be_read() {
        let changed = Mismatch {
            what: Watched::FenceList,
            how: How::Changed,
        };
        let unreadable = Mismatch {
            what: Watched::StateRecords,
            how: How::Unreadable("permission denied".into()),
        };
        assert_eq!(changed.to_string(), "the fence list changed");
        assert_eq!(
            said(&[changed, unreadable]),
            "the fence list changed; the Warden's state records cannot be read: permission denied"
        );
        assert_eq!(said(&[]), "");
    }
}
