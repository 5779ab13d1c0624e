//! The one error type of the snapshot store, [`SnapshotError`], and the
//! helper that wraps an `io::Error` with what was being done and where.

#![forbid(unsafe_code)]

use super::diff::human;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

#[derive(Debug)]
pub enum SnapshotError {
    Io {
        action: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    BadId(String),
    BadRoot {
        path: PathBuf,
        why: &'static str,
    },
    BadManifest {
        path: PathBuf,
        why: String,
    },
    TooBig {
        needed: u64,
        allowed: u64,
    },
    TooManyEntries {
        limit: usize,
    },
    /// A file was replaced between listing and copying it.
    Changed(PathBuf),
    /// A blob does not hash to what the manifest says.
    CorruptBlob(PathBuf),
    /// Restoring would write through a symlink or over something unexpected.
    Unsafe {
        path: PathBuf,
        why: &'static str,
    },
    AlreadyUndone(String),
    Expired(String),
    /// The snapshot was never sealed after its run, so what the run did is
    /// not known and it cannot be undone.
    NotSealed(String),
    /// [`Snapshot::seal`](super::Snapshot::seal) was called twice.
    AlreadySealed(String),
    /// Another undo holds the snapshot, or one stopped part-way.
    UnderWay(String),
    /// The quarantine is not a directory of the Warden's alone.
    BadQuarantine {
        path: PathBuf,
        why: &'static str,
    },
    /// A move to a quarantine on another filesystem stopped after the thing
    /// was put in a private staging directory: it is kept there, whole.
    Stranded {
        path: PathBuf,
        why: String,
    },
    /// The undo began changing things and stopped; `undoing` stays.
    Partial {
        done: u64,
        why: String,
    },
}

impl fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SnapshotError::Io {
                action,
                path,
                source,
            } => write!(f, "could not {action} {}: {source}", path.display()),
            SnapshotError::BadId(id) => {
                write!(f, "snapshot id {id:?} is not 32 lower-case hex characters")
            }
            SnapshotError::BadRoot { path, why } => {
                write!(f, "cannot snapshot {}: {why}", path.display())
            }
            SnapshotError::BadManifest { path, why } => {
                write!(
                    f,
                    "the snapshot record {} is invalid: {why}",
                    path.display()
                )
            }
            SnapshotError::TooBig { needed, allowed } => write!(
                f,
                "the snapshot needs {} but only {} may be used",
                human(*needed),
                human(*allowed)
            ),
            SnapshotError::TooManyEntries { limit } => write!(
                f,
                "the paths hold more than {limit} entries, too many to snapshot"
            ),
            SnapshotError::Changed(path) => write!(
                f,
                "{} changed while it was being read (or is no longer a plain file)",
                path.display()
            ),
            SnapshotError::CorruptBlob(path) => write!(
                f,
                "the saved copy of {} does not match its checksum",
                path.display()
            ),
            SnapshotError::Unsafe { path, why } => {
                write!(f, "refusing to touch {}: {why}", path.display())
            }
            SnapshotError::AlreadyUndone(id) => write!(f, "snapshot {id} has already been undone"),
            SnapshotError::Expired(id) => write!(
                f,
                "snapshot {id} is older than 7 days and can no longer be undone"
            ),
            SnapshotError::NotSealed(id) => write!(
                f,
                "snapshot {id} was not sealed after its run, so what the run changed is not known and it cannot be undone"
            ),
            SnapshotError::AlreadySealed(id) => write!(f, "snapshot {id} is sealed already"),
            SnapshotError::UnderWay(id) => write!(
                f,
                "an undo of this run is under way or was interrupted (snapshot {id})"
            ),
            SnapshotError::BadQuarantine { path, why } => write!(
                f,
                "refusing to use {} as the quarantine: {why}",
                path.display()
            ),
            SnapshotError::Stranded { path, why } => write!(
                f,
                "{why}; what was being moved to the quarantine is kept, whole, at {}",
                path.display()
            ),
            SnapshotError::Partial { done, why } => write!(
                f,
                "the undo stopped part-way, after {done} changes: {why}; what it did not reach is as the run left it"
            ),
        }
    }
}

impl std::error::Error for SnapshotError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SnapshotError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

pub(super) fn io_err(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> SnapshotError {
    let path = path.to_path_buf();
    move |source| SnapshotError::Io {
        action,
        path,
        source,
    }
}
