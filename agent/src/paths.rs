//! Where the Worker's files are: the system's, or those under a `--root`
//! directory laid out as a Warden started with `--root` lays out its own
//! (the tests and the demo).

use std::path::{Path, PathBuf};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Paths {
    /// `relay.toml` and `network.toml`.
    pub config_dir: PathBuf,
    /// The Warden's sockets.
    pub run_dir: PathBuf,
    /// The Worker's own state (the user `aromba`'s home).
    pub home: PathBuf,
    /// Where the scan looks for data folders: `/`, or `ROOT/system`.
    pub system_root: PathBuf,
}

impl Paths {
    pub fn new(root: Option<&Path>) -> Paths {
        match root {
            None => Paths {
                config_dir: PathBuf::from("/etc/aromba/worker"),
                run_dir: PathBuf::from("/run/aromba"),
                home: PathBuf::from("/var/lib/aromba"),
                system_root: PathBuf::from("/"),
            },
            Some(root) => Paths {
                config_dir: root.join("worker"),
                run_dir: root.join("run"),
                home: root.join("home"),
                system_root: root.join("system"),
            },
        }
    }

    /// `rel` (a path without a leading `/`) under [`Paths::system_root`],
    /// as the argument of a read.
    pub fn system(&self, rel: &str) -> String {
        let path = if rel.is_empty() {
            self.system_root.clone()
        } else {
            self.system_root.join(rel)
        };
        path.to_string_lossy().into_owned()
    }

    pub fn relay_file(&self) -> PathBuf {
        self.config_dir.join("relay.toml")
    }

    /// The relay's CA, as `aromba pair` copied it: root's, in root's
    /// directory, whatever path root gave.
    pub fn relay_ca_file(&self) -> PathBuf {
        self.config_dir.join("relay-ca.pem")
    }

    pub fn network_file(&self) -> PathBuf {
        self.config_dir.join("network.toml")
    }

    /// Present while `aromba pair` holds the relay connection: the daemon
    /// stays off the relay meanwhile (a newer connection would replace the
    /// other one, back and forth).
    pub fn pairing_marker(&self) -> PathBuf {
        self.config_dir.join("pairing")
    }

    pub fn worker_socket(&self) -> PathBuf {
        self.run_dir.join("worker.sock")
    }

    pub fn control_socket(&self) -> PathBuf {
        self.run_dir.join("control.sock")
    }
}
