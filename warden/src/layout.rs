//! Where the Warden keeps its sockets, state, journal, configuration and
//! quarantine: the system's paths, or everything under one directory
//! (`--root DIR`) so tests and the local demo run a real Warden without
//! touching the system — and the check that no other account can change
//! any of them.
//!
//! Every path of the Warden's lies in a tree of root's: no directory from
//! `/` down to it may be a symbolic link, be owned by another account, or be
//! writable by one (group or other bits). Renaming an entry needs write
//! access to its directory only, so a Warden directory inside a directory
//! the Worker can write — as its state once was, in the Worker's home — can
//! be renamed aside and replaced whole. `Server::bind` and `install` refuse
//! to go on otherwise ([`Layout::check`]) and name the directory.
//!
//! One exception, on the way only: a sticky directory (mode 1777, as
//! `/tmp`) writable by others is accepted when the next directory on the
//! path is root's, because in a sticky directory the kernel lets only an
//! entry's owner, the directory's owner and root rename or remove it — no
//! other account can move root's entry aside, and one it made in its place
//! beforehand would be its own, and refused. (The tests' `--root`
//! directories live under `/tmp`.) A Warden directory itself must never be
//! writable by others, sticky or not.
//!
//! What the Warden writes outside these trees — the honeypots in the
//! Worker's home and configuration directory, the wipe of the AI key — goes
//! through `worker_dirs.rs`, descriptor-relative and following no link.

#![forbid(unsafe_code)]

use crate::writers::{Acl, Against, Dir, replaceable};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The two sockets.
    pub run_dir: PathBuf,
    /// The Warden's own state records (and `snapshots/`).
    pub state_dir: PathBuf,
    /// The journal (`journal.jsonl` and its rotated files).
    pub journal_dir: PathBuf,
    /// Configuration the install step writes (the policy rendering, the
    /// audit key, the fence list, the owner's chores in `mine/`).
    pub config_dir: PathBuf,
    /// Where chores of ours and undo move what they take away.
    pub quarantine_dir: PathBuf,
    /// The Worker's configuration (`network.toml`, the AI key's file): not
    /// the Warden's, and not trusted to be root's.
    pub worker_config_dir: PathBuf,
    /// The Worker's home, where honeypots are planted: the Worker's.
    pub worker_home: PathBuf,
}

impl Layout {
    /// The system's paths. The Warden's tree is `/var/lib/aromba-warden`
    /// (state, journal, quarantine), beside the Worker's home
    /// `/var/lib/aromba`, never inside it; the journal is not under
    /// `/var/log`, which some distributions make writable by group `syslog`.
    pub fn system() -> Layout {
        Layout {
            run_dir: PathBuf::from("/run/aromba"),
            state_dir: PathBuf::from("/var/lib/aromba-warden/state"),
            journal_dir: PathBuf::from("/var/lib/aromba-warden/journal"),
            config_dir: PathBuf::from("/etc/aromba/warden"),
            quarantine_dir: PathBuf::from("/var/lib/aromba-warden/quarantine"),
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
            quarantine_dir: root.join("quarantine"),
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

    /// Where a red run's snapshots are kept (in the state, hidden from
    /// every cage and from the Worker).
    pub fn snapshots_dir(&self) -> PathBuf {
        self.state_dir.join("snapshots")
    }

    /// The policy rendering `install` writes (never read back).
    pub fn policy_file(&self) -> PathBuf {
        self.config_dir.join("policy.toml")
    }

    /// What shows the Warden was installed, in a tree only root can
    /// change: `install` writes the policy rendering before it records the
    /// baseline, so a Warden that finds the rendering and no baseline lost
    /// its baseline, and that is an integrity failure, never "not
    /// installed". `None` when nothing shows an install.
    pub fn install_evidence(&self) -> Option<PathBuf> {
        let p = self.policy_file();
        std::fs::symlink_metadata(&p).is_ok().then_some(p)
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

    /// The fenced data folders the fence list names (none when it is
    /// missing or unreadable; lines that are not absolute paths are skipped).
    pub fn fenced_paths(&self) -> Vec<PathBuf> {
        std::fs::read_to_string(self.fences_file())
            .unwrap_or_default()
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with('/'))
            .map(PathBuf::from)
            .collect()
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

    /// Every directory of the Warden's own: each must lie in a tree of
    /// root's ([`Layout::check`]).
    pub fn warden_dirs(&self) -> Vec<PathBuf> {
        vec![
            self.run_dir.clone(),
            self.state_dir.clone(),
            self.snapshots_dir(),
            self.journal_dir.clone(),
            self.config_dir.clone(),
            self.quarantine_dir.clone(),
        ]
    }

    /// Refuses unless every directory from `/` down to each of the
    /// Warden's directories that exists is root's and writable by no one
    /// else (see the module doc); a directory not made yet is checked as
    /// far as it exists, and made later only under a checked chain
    /// ([`make_dir`]).
    pub fn check(&self) -> Result<(), Unfit> {
        for dir in self.warden_dirs() {
            check_chain(&dir)?;
        }
        Ok(())
    }
}

/// A directory on the way to one of the Warden's that another account
/// could change, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unfit {
    /// The directory at fault.
    pub dir: PathBuf,
    /// Why, as a phrase after its name ("is owned by uid 998 (mode 0755)").
    pub why: String,
    /// The Warden's directory it is on the way to (or is).
    pub warden_dir: PathBuf,
}

impl std::fmt::Display for Unfit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}, and every directory from / down to the Warden's {} must be root's and writable by no one else",
            self.dir.display(),
            self.why,
            self.warden_dir.display()
        )
    }
}

impl std::error::Error for Unfit {}

impl From<Unfit> for std::io::Error {
    fn from(u: Unfit) -> std::io::Error {
        std::io::Error::other(u.to_string())
    }
}

/// Checks every existing directory from `/` down to `dir` (see the module
/// doc); stops at the first that does not exist.
pub fn check_chain(dir: &Path) -> Result<(), Unfit> {
    let unfit = |at: &Path, why: String| Unfit {
        dir: at.to_path_buf(),
        why,
        warden_dir: dir.to_path_buf(),
    };
    // The ACL goes with the metadata, as every check of who can write takes
    // them (`writers.rs`).
    let dir_of = |at: &Path, meta: std::fs::Metadata| -> Result<Dir, Unfit> {
        let acl = Acl::of(at).map_err(|e| unfit(at, format!("cannot be inspected: {e}")))?;
        Ok(Dir { meta, acl })
    };
    let mut parts = Vec::new();
    for c in dir.components() {
        match c {
            Component::RootDir => {}
            Component::Normal(n) => parts.push(n),
            _ => {
                return Err(unfit(
                    dir,
                    "is not an absolute path without `.` or `..`".into(),
                ));
            }
        }
    }
    if !dir.is_absolute() {
        return Err(unfit(dir, "is not an absolute path".into()));
    }
    let mut at = PathBuf::from("/");
    let mut meta = std::fs::symlink_metadata(&at)
        .map_err(|e| unfit(&at, format!("cannot be inspected: {e}")))?;
    if meta.uid() != 0 {
        return Err(unfit(&at, owned_by(&meta)));
    }
    for name in parts {
        let child = at.join(name);
        let child_meta = match std::fs::symlink_metadata(&child) {
            Ok(m) => m,
            // Root makes it next: a sticky directory keeps root's entry
            // root's, and one squatted meanwhile would be another's, seen
            // when the chain is checked again after it is made.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return match replaceable(&dir_of(&at, meta)?, 0, Against::AllButRoot) {
                    Some(why) => Err(unfit(&at, why.to_string())),
                    None => Ok(()),
                };
            }
            Err(e) => return Err(unfit(&child, format!("cannot be inspected: {e}"))),
        };
        if child_meta.file_type().is_symlink() {
            return Err(unfit(&child, "is a symbolic link".into()));
        }
        if !child_meta.is_dir() {
            return Err(unfit(&child, "is not a directory".into()));
        }
        if child_meta.uid() != 0 {
            return Err(unfit(&child, owned_by(&child_meta)));
        }
        if let Some(why) = replaceable(&dir_of(&at, meta)?, 0, Against::AllButRoot) {
            return Err(unfit(&at, why.to_string()));
        }
        at = child;
        meta = child_meta;
    }
    own_dir(&meta).map_err(|why| unfit(&at, why))
}

fn owned_by(meta: &std::fs::Metadata) -> String {
    format!(
        "is owned by uid {} (mode {:04o})",
        meta.uid(),
        meta.mode() & 0o7777
    )
}

/// The Warden's directory itself: root's and writable by no one else,
/// sticky or not.
fn own_dir(meta: &std::fs::Metadata) -> Result<(), String> {
    let mode = meta.mode() & 0o7777;
    if meta.uid() != 0 {
        return Err(owned_by(meta));
    }
    if mode & 0o022 != 0 {
        return Err(format!(
            "is writable by accounts other than root (mode {mode:04o}, group {})",
            meta.gid()
        ));
    }
    Ok(())
}

/// Makes `dir` and whatever of its parents is missing (the parents 0755),
/// after checking the chain down to it, and gives `dir` `mode`: opened
/// without following a link, checked to be root's directory, then
/// `fchmod`. Every directory made is made under a checked chain, which no
/// other account can change, so none can be swapped meanwhile.
pub fn make_dir(dir: &Path, mode: u32) -> Result<(), MakeDirError> {
    check_chain(dir)?;
    let mut at = PathBuf::new();
    for c in dir.components() {
        at.push(c);
        match std::fs::symlink_metadata(&at) {
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(MakeDirError::io("inspect", &at, e)),
        }
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&at)
            .map_err(|e| MakeDirError::io("create", &at, e))?;
        if at != dir {
            set_mode(&at, 0o755)?;
        }
    }
    check_chain(dir)?;
    set_mode(dir, mode)?;
    check_chain(dir)?;
    Ok(())
}

/// `fchmod` of the directory `dir` opened without following a link, once
/// it is seen to be a directory of root's.
fn set_mode(dir: &Path, mode: u32) -> Result<(), MakeDirError> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(dir)
        .map_err(|e| MakeDirError::io("open", dir, e))?;
    let m = f
        .metadata()
        .map_err(|e| MakeDirError::io("inspect", dir, e))?;
    if !m.is_dir() || m.uid() != 0 {
        return Err(MakeDirError::Unfit(Unfit {
            dir: dir.to_path_buf(),
            why: format!("is owned by uid {}", m.uid()),
            warden_dir: dir.to_path_buf(),
        }));
    }
    f.set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(|e| MakeDirError::io("chmod", dir, e))
}

/// Why a directory of the Warden's could not be made.
#[derive(Debug)]
pub enum MakeDirError {
    Unfit(Unfit),
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

impl MakeDirError {
    fn io(what: &'static str, path: &Path, source: std::io::Error) -> MakeDirError {
        MakeDirError::Io {
            what,
            path: path.to_path_buf(),
            source,
        }
    }
}

impl From<Unfit> for MakeDirError {
    fn from(u: Unfit) -> MakeDirError {
        MakeDirError::Unfit(u)
    }
}

impl std::fmt::Display for MakeDirError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MakeDirError::Unfit(u) => write!(f, "{u}"),
            MakeDirError::Io { what, path, source } => {
                write!(f, "cannot {what} {}: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for MakeDirError {}

impl From<MakeDirError> for std::io::Error {
    fn from(e: MakeDirError) -> std::io::Error {
        std::io::Error::other(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let root =
            std::env::temp_dir().join(format!("aromba-layout-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
        root
    }

    #[test]
    fn no_path_of_the_wardens_lies_in_the_workers_directories() {
        for layout in [Layout::system(), Layout::rooted(Path::new("/srv/x"))] {
            let mut all = layout.warden_dirs();
            all.extend([
                layout.ladder_file(),
                layout.baseline_file(),
                layout.journal_file(),
            ]);
            all.extend([
                layout.policy_file(),
                layout.audit_key(),
                layout.fences_file(),
            ]);
            for p in all {
                for worker in [&layout.worker_home, &layout.worker_config_dir] {
                    assert!(
                        !p.starts_with(worker) && !worker.starts_with(&p),
                        "{} and the Worker's {}",
                        p.display(),
                        worker.display()
                    );
                }
            }
        }
    }

    #[test]
    fn a_tree_of_roots_under_a_sticky_directory_passes() {
        let root = scratch("sticky-ok");
        let layout = Layout::rooted(&root);
        make_dir(&layout.state_dir, 0o700).unwrap();
        assert!(
            std::fs::symlink_metadata("/tmp").unwrap().mode() & 0o1000 != 0
                || !root.starts_with("/tmp"),
            "the test's premise: /tmp is sticky"
        );
        layout.check().unwrap();
        let m = std::fs::symlink_metadata(&layout.state_dir).unwrap();
        assert_eq!(m.mode() & 0o7777, 0o700);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn each_way_another_account_could_change_the_chain_is_named() {
        let root = scratch("unfit");
        let layout = Layout::rooted(&root);
        make_dir(&layout.state_dir, 0o700).unwrap();
        let expect = |dir: &Path, why: &str| {
            let e = layout.check().unwrap_err();
            assert_eq!(e.dir, dir, "{e}");
            assert!(e.why.contains(why), "{e}");
            assert!(e.to_string().contains("must be root's"), "{e}");
        };
        // Owned by another account.
        std::os::unix::fs::chown(&root, Some(4_242_201), None).unwrap();
        expect(&root, "owned by uid 4242201");
        std::os::unix::fs::chown(&root, Some(0), None).unwrap();
        // Writable by a group, or by everyone, even sticky for the
        // Warden's own directory.
        for mode in [0o775, 0o757, 0o1777] {
            std::fs::set_permissions(&layout.state_dir, std::fs::Permissions::from_mode(mode))
                .unwrap();
            expect(&layout.state_dir, "writable by accounts other than root");
        }
        std::fs::set_permissions(&layout.state_dir, std::fs::Permissions::from_mode(0o700))
            .unwrap();
        // Sticky on the way is fine only for root's next directory.
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o1777)).unwrap();
        layout.check().unwrap();
        std::os::unix::fs::chown(&layout.state_dir, Some(4_242_201), None).unwrap();
        expect(&layout.state_dir, "owned by uid 4242201");
        std::os::unix::fs::chown(&layout.state_dir, Some(0), None).unwrap();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
        // A link in its place, even to a directory of root's.
        std::fs::rename(&layout.state_dir, root.join("aside")).unwrap();
        std::os::unix::fs::symlink(root.join("aside"), &layout.state_dir).unwrap();
        expect(&layout.state_dir, "symbolic link");
        assert!(make_dir(&layout.state_dir, 0o700).is_err());
        std::fs::remove_dir_all(&root).unwrap();
    }
}
