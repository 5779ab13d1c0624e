//! What a run changed under the roots: [`Diff`], and the comparison behind
//! [`Snapshot::diff`] and [`Snapshot::seal`].

#![forbid(unsafe_code)]

use super::entry::{Change, Kind, State};
use super::error::SnapshotError;
use super::safe_dir::check_proc;
use super::walk::{Seen, lstat, walk_tolerant};
use super::{AFTER, MAX_ENTRIES, MAX_EXAMPLES, Snapshot};
use std::collections::{BTreeSet, HashMap};
use std::ops::Bound;
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
    /// Paths the seal could not read (a directory churned while it was
    /// walked, EACCES, EMFILE, too deep): recorded as unknown, which undo
    /// leaves alone (with all below them) and reports as conflicts.
    pub unknown: u64,
    /// Up to 20 changed paths, directories too: added and modified in path
    /// order, then removed.
    pub examples: Vec<PathBuf>,
}

impl Diff {
    /// Whether nothing at all changed, directories included.
    pub fn is_empty(&self) -> bool {
        self.files() == 0
            && self.dirs_added + self.dirs_removed + self.dirs_modified == 0
            && self.unknown == 0
    }

    /// Files and symlinks added, removed or changed.
    pub fn files(&self) -> u64 {
        self.added + self.removed + self.modified
    }

    /// One line for the receipt, e.g. `3 added, 1 removed, 2 changed; 1.2 MB
    /// freed`, counting files and symlinks only; paths that could not be
    /// read are added at the end.
    pub fn summary(&self) -> String {
        let unread = match self.unknown {
            0 => String::new(),
            n => format!("; {n} could not be read, and undo will leave them alone"),
        };
        if self.is_empty() {
            return "nothing changed".to_string();
        }
        if self.files() == 0 {
            if self.dirs_added + self.dirs_removed + self.dirs_modified == 0 {
                return format!("no files changed that could be read{unread}");
            }
            return format!("no files changed, only directories{unread}");
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
            "{} added, {} removed, {} changed; {space}{unread}",
            self.added, self.removed, self.modified
        )
    }

    fn count_unknown(&mut self, path: &Path) {
        self.unknown += 1;
        if self.examples.len() < MAX_EXAMPLES {
            self.examples.push(path.to_path_buf());
        }
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
    /// also lists every changed path, as it is now, in path order. What
    /// cannot be read is recorded as unknown (with nothing below it), except
    /// a directory swapped as it is walked when `swaps` is false: that stops
    /// the comparison with [`SnapshotError::Changed`], for a second look.
    fn compare(&self, keep: bool, swaps: bool) -> Result<(Diff, Vec<Change>), SnapshotError> {
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
        let mut unknown: BTreeSet<PathBuf> = BTreeSet::new();
        let mut unreadable = |path: &Path, e: SnapshotError| {
            if !swaps && matches!(e, SnapshotError::Changed(_)) {
                return Err(e);
            }
            unknown.insert(path.to_path_buf());
            Ok(())
        };
        let visit = |at: &Seen| {
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
        };
        walk_tolerant(&self.roots, &self.skipped_paths(), visit, &mut unreadable)?;
        // What the snapshot skipped is never compared, readable or not.
        unknown.retain(|u| {
            index
                .get(u.as_path())
                .and_then(|&i| self.entries.get(i))
                .is_none_or(|e| !e.kind.is_skipped())
        });
        // Unknown paths are disjoint subtrees (none is gone into), so the
        // greatest one not after a path is the only one it can lie under.
        let under_unknown = |p: &Path| {
            unknown
                .range::<Path, _>((Bound::Unbounded, Bound::Included(p)))
                .next_back()
                .is_some_and(|u| p.starts_with(u))
        };
        if !unknown.is_empty() {
            changes.retain(|(p, _)| !under_unknown(p));
        }
        for (e, seen) in self.entries.iter().zip(&seen) {
            if !seen && !e.kind.is_skipped() && !under_unknown(&e.path) {
                d.count(&e.path, Some(e.kind), None);
                keep_change(&mut changes, (e.path.clone(), None))?;
            }
        }
        for u in &unknown {
            d.count_unknown(u);
            keep_change(&mut changes, (u.clone(), Some(State::unknown())))?;
        }
        changes.sort_by(|a, b| a.0.cmp(&b.0));
        Ok((d, changes))
    }

    /// Compares what is under the roots now with the snapshot, changing
    /// nothing.
    pub fn diff(&self) -> Result<Diff, SnapshotError> {
        check_proc()?;
        self.compare(false, true).map(|(d, _)| d)
    }

    /// Called once, right after the run: the diff, and `after.json`, which
    /// records every path the run added, removed or changed as the run left
    /// it, so that undo reverts those alone, and only while they are still
    /// so. A snapshot that was never sealed cannot be undone, so what
    /// cannot be read does not stop a seal: a directory swapped while it is
    /// walked gets a second walk, and whatever still cannot be read then
    /// (a swapped directory, EACCES, EMFILE, too deep a tree) is recorded as
    /// unknown ([`Diff::unknown`]), which undo leaves alone as a conflict.
    pub fn seal(&self) -> Result<Diff, SnapshotError> {
        if lstat(&self.dir.join(AFTER))?.is_some() {
            return Err(SnapshotError::AlreadySealed(self.id.clone()));
        }
        check_proc()?;
        let (diff, changes) = match self.compare(true, false) {
            Err(SnapshotError::Changed(_)) => self.compare(true, true)?,
            other => other?,
        };
        self.write_after(&changes)?;
        self.write_meta(true)?;
        Ok(diff)
    }
}
