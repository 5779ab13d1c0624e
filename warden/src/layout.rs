//! Where the Warden keeps its sockets, state and journal: the system's
//! paths, or everything under one directory (`--root DIR`) so tests and the
//! local demo run a real Warden without touching the system.

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The two sockets.
    pub run_dir: PathBuf,
    /// The Warden's own state records.
    pub state_dir: PathBuf,
    /// The journal (`journal.jsonl` and its rotated files).
    pub journal_dir: PathBuf,
    /// Configuration the install step writes (the policy rendering, the
    /// audit key).
    pub config_dir: PathBuf,
    /// The Worker's configuration (`network.toml`, the AI key's file).
    pub worker_config_dir: PathBuf,
    /// The Worker's home, where honeypots are planted.
    pub worker_home: PathBuf,
}

impl Layout {
    pub fn system() -> Layout {
        Layout {
            run_dir: PathBuf::from("/run/aromba"),
            state_dir: PathBuf::from("/var/lib/aromba/warden"),
            journal_dir: PathBuf::from("/var/log/aromba"),
            config_dir: PathBuf::from("/etc/aromba/warden"),
            worker_config_dir: PathBuf::from("/etc/aromba/worker"),
            worker_home: PathBuf::from("/var/lib/aromba"),
        }
    }

    pub fn rooted(root: &Path) -> Layout {
        Layout {
            run_dir: root.join("run"),
            state_dir: root.join("state"),
            journal_dir: root.join("journal"),
            config_dir: root.join("etc"),
            worker_config_dir: root.join("worker"),
            worker_home: root.join("home"),
        }
    }

    pub fn from_root(root: Option<&Path>) -> Layout {
        root.map_or_else(Layout::system, Layout::rooted)
    }

    pub fn worker_socket(&self) -> PathBuf {
        self.run_dir.join("worker.sock")
    }

    pub fn control_socket(&self) -> PathBuf {
        self.run_dir.join("control.sock")
    }

    pub fn journal_file(&self) -> PathBuf {
        self.journal_dir.join(crate::journal::FILE_NAME)
    }

    /// The ladder's state: root's, 0600, not in the integrity baseline.
    pub fn ladder_file(&self) -> PathBuf {
        self.state_dir.join("ladder.json")
    }

    /// The integrity baseline `install` records.
    pub fn baseline_file(&self) -> PathBuf {
        self.state_dir.join("baseline.json")
    }

    /// The Worker's secrets (its AI key): wiped at Cut.
    pub fn ai_key_file(&self) -> PathBuf {
        self.worker_config_dir.join("secrets.toml")
    }

    /// The hosts the Worker may connect to.
    pub fn network_file(&self) -> PathBuf {
        self.worker_config_dir.join("network.toml")
    }

    /// The fence list (data folders no chore may touch), one path a line.
    pub fn fences_file(&self) -> PathBuf {
        self.config_dir.join("fences")
    }

    /// Decoy secrets where a compromised Worker would look.
    pub fn honeypots(&self) -> Vec<PathBuf> {
        vec![
            self.worker_home.join(".aws/credentials"),
            self.worker_home.join(".ssh/id_ed25519"),
            self.worker_config_dir.join("secrets.toml.bak"),
        ]
    }

    /// The audit key the Warden uses when the file exists.
    pub fn audit_key(&self) -> PathBuf {
        self.config_dir.join("audit.key")
    }
}
