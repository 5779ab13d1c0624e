//! What a run changed under the roots: [`Diff`], and the comparison behind
//! [`Snapshot::diff`] and [`Snapshot::seal`].

#![forbid(unsafe_code)]

use super::entry::{Change, Kind, State};
use super::error::SnapshotError;
use super::walk::{lstat, walk};
use super::{AFTER, MAX_ENTRIES, MAX_EXAMPLES, Snapshot};
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// What a run changed under the roots.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Diff {
    /// Files and symlinks (whatever is not a directory) there now and not
    /// before, gone, or changed: what the runner counts as files changed.
    pub added: u64,
    pub removed: u64,
    pub modified: u64,
    /// Directories added, removed or changed (owner, mode or inode), kept
    /// out of the summary; a path that changed kind counts as a file.
    pub dirs_added: u64,
    pub dirs_removed: u64,
    pub dirs_modified: u64,
    /// Bytes of all regular files under the roots, before and after.
    pub bytes_before: u64,
    pub bytes_after: u64,
    /// Up to 20 changed paths, directories too: added and modified in path
    /// order, then removed.
    pub examples: Vec<PathBuf>,
}

impl Diff {
    /// Whether nothing at all changed, directories included.
    pub fn is_empty(&self) -> bool {
        self.files() == 0 && self.dirs_added + self.dirs_removed + self.dirs_modified == 0
    }

    /// Files and symlinks added, removed or changed.
    pub fn files(&self) -> u64 {
        self.added + self.removed + self.modified
    }

    /// One line for the receipt, e.g. `3 added, 1 removed, 2 changed; 1.2 MB
    /// freed`, counting files and symlinks only.
    pub fn summary(&self) -> String {
        if self.is_empty() {
            return "nothing changed".to_string();
        }
        if self.files() == 0 {
            return "no files changed, only directories".to_string();
        }
        let space = match self.bytes_before.cmp(&self.bytes_after) {
            std::cmp::Ordering::Greater => {
                format!("{} freed", human(self.bytes_before - self.bytes_after))
            }
            std::cmp::Ordering::Less => {
                format!("{} added", human(self.bytes_after - self.bytes_before))
            }
            std::cmp::Ordering::Equal => "same size".to_string(),
        };
        format!(
            "{} added, {} removed, {} changed; {space}",
            self.added, self.removed, self.modified
        )
    }

    /// Counts one change from `before` to `after` (`None`: absent).
    fn count(&mut self, path: &Path, before: Option<Kind>, after: Option<Kind>) {
        let dir = before.is_none_or(|k| k == Kind::Dir) && after.is_none_or(|k| k == Kind::Dir);
        let n = match (before, after, dir) {
            (None, _, false) => &mut self.added,
            (None, _, true) => &mut self.dirs_added,
            (Some(_), None, false) => &mut self.removed,
            (Some(_), None, true) => &mut self.dirs_removed,
            (Some(_), Some(_), false) => &mut self.modified,
            (Some(_), Some(_), true) => &mut self.dirs_modified,
        };
        *n += 1;
        if self.examples.len() < MAX_EXAMPLES {
            self.examples.push(path.to_path_buf());
        }
    }
}

/// Bytes in binary units with one decimal, as `du -h` users read them.
pub(super) fn human(n: u64) -> String {
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64;
    let mut unit = "B";
    for u in ["KB", "MB", "GB", "TB", "PB"] {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    format!("{v:.1} {unit}")
}

impl Snapshot {
    /// Compares what is under the roots now with the snapshot; with `keep`,
    /// also lists every changed path, as it is now, in path order.
    fn compare(&self, keep: bool) -> Result<(Diff, Vec<Change>), SnapshotError> {
        let index: HashMap<&Path, usize> = self
            .entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.path.as_path(), i))
            .collect();
        let mut seen = vec![false; self.entries.len()];
        let mut d = Diff {
            bytes_before: self
                .entries
                .iter()
                .filter(|e| e.kind == Kind::File)
                .fold(0, |sum, e| sum.saturating_add(e.size)),
            ..Diff::default()
        };
        let mut changes: Vec<Change> = Vec::new();
        let keep_change = |changes: &mut Vec<Change>, change: Change| {
            if !keep {
                return Ok(());
            }
            if changes.len() >= MAX_ENTRIES {
                return Err(SnapshotError::TooManyEntries { limit: MAX_ENTRIES });
            }
            changes.push(change);
            Ok(())
        };
        walk(&self.roots, &self.skipped_paths(), |at| {
            let (path, meta, kind) = (at.path, at.meta, at.kind);
            let old = match index.get(path) {
                Some(&i) => {
                    if let Some(s) = seen.get_mut(i) {
                        *s = true;
                    }
                    self.entries.get(i)
                }
                None => None,
            };
            // What was skipped at the take is never compared or touched.
            if old.is_some_and(|o| o.kind.is_skipped()) {
                return Ok(false);
            }
            if kind == Kind::File {
                d.bytes_after = d.bytes_after.saturating_add(meta.size());
            }
            if old.is_none_or(|o| o.differs(meta, kind, || at.target().ok().flatten())) {
                // A new fifo, socket, device or mount is not counted, but is
                // kept: undo moves a new directory whole only if all in it is
                // the run's.
                if !(old.is_none() && kind.is_skipped()) {
                    d.count(path, old.map(|o| o.kind), Some(kind));
                }
                keep_change(
                    &mut changes,
                    (path.to_path_buf(), Some(State::of(meta, kind))),
                )?;
            }
            Ok(true)
        })?;
        for (e, seen) in self.entries.iter().zip(&seen) {
            if !seen && !e.kind.is_skipped() {
                d.count(&e.path, Some(e.kind), None);
                keep_change(&mut changes, (e.path.clone(), None))?;
            }
        }
        changes.sort_by(|a, b| a.0.cmp(&b.0));
        Ok((d, changes))
    }

    /// Compares what is under the roots now with the snapshot, changing
    /// nothing.
    pub fn diff(&self) -> Result<Diff, SnapshotError> {
        self.compare(false).map(|(d, _)| d)
    }

    /// Called once, right after the run: the diff, and `after.json`, which
    /// records every path the run added, removed or changed as the run left
    /// it, so that undo reverts those alone, and only while they are still
    /// so. A snapshot that was never sealed cannot be undone.
    pub fn seal(&self) -> Result<Diff, SnapshotError> {
        if lstat(&self.dir.join(AFTER))?.is_some() {
            return Err(SnapshotError::AlreadySealed(self.id.clone()));
        }
        let (diff, changes) = self.compare(true)?;
        self.write_after(&changes)?;
        self.write_meta(true)?;
        Ok(diff)
    }
}
