//! What a run changed under the roots: [`Diff`], and the comparison behind
//! [`Snapshot::diff`] and [`Snapshot::seal`].

#![forbid(unsafe_code)]

use super::entry::{Change, Entry, Kind, State};
use super::error::SnapshotError;
use super::safe_dir::{Chain, Expect, Ids, Reached, check_proc, ids};
use super::walk::{Seen, lstat, walk_tolerant};
use super::{AFTER, MAX_EXAMPLES, Snapshot};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::Metadata;
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
    /// New entries the seal could not list, by directory: undo leaves them.
    pub unlisted: Vec<Unlisted>,
}

impl Diff {
    /// Whether nothing at all changed, directories included.
    pub fn is_empty(&self) -> bool {
        self.files() == 0
            && self.dirs_added + self.dirs_removed + self.dirs_modified == 0
            && self.unknown == 0
            && self.unlisted.is_empty()
    }

    /// Files and symlinks added, removed or changed.
    pub fn files(&self) -> u64 {
        self.added + self.removed + self.modified
    }

    /// The directories changed, in words (`150000 directories added, 1
    /// removed`), when any were: a run that made a tree of empty
    /// directories changed the disk as much as one that made files.
    fn dirs_phrase(&self) -> Option<String> {
        let parts: Vec<String> = [
            ("added", self.dirs_added),
            ("removed", self.dirs_removed),
            ("changed", self.dirs_modified),
        ]
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(what, n)| format!("{n} {what}"))
        .collect();
        let (first, rest) = parts.split_first()?;
        let noun = if self.dirs_added + self.dirs_removed + self.dirs_modified == 1 {
            "directory"
        } else {
            "directories"
        };
        let mut s = match first.split_once(' ') {
            Some((n, what)) => format!("{n} {noun} {what}"),
            None => first.clone(),
        };
        for r in rest {
            s.push_str(", ");
            s.push_str(r);
        }
        Some(s)
    }

    /// One line for the receipt, e.g. `3 added, 1 removed, 2 changed; 1.2 MB
    /// freed; 2 directories added`: files and symlinks first, then the
    /// directories; paths that could not be read are added at the end.
    pub fn summary(&self) -> String {
        let mut unread = match self.unknown {
            0 => String::new(),
            n => format!("; {n} could not be read, and undo will leave them alone"),
        };
        for u in &self.unlisted {
            unread.push_str("; ");
            unread.push_str(&u.note());
        }
        if self.is_empty() {
            return "nothing changed".to_string();
        }
        let dirs = self.dirs_phrase();
        if self.files() == 0 {
            return match dirs {
                None => format!("no files changed that could be read{unread}"),
                Some(d) => format!("no files changed; {d}{unread}"),
            };
        }
        let dirs = dirs.map(|d| format!("; {d}")).unwrap_or_default();
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
            "{} added, {} removed, {} changed; {space}{dirs}{unread}",
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

/// How much a seal lists and walks. The defaults hold for every run whose
/// damage cap the Warden accepts for a red chore (at most [`MAX_LISTED`]
/// entries); tests make them small.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SealLimits {
    /// New entries (there after the run, not before) that `after.json`
    /// lists for undo to move away. Past it, new entries are counted, named
    /// by the directory they are in ([`Unlisted`]), and not gone into.
    pub max_listed: usize,
    /// Entries the seal's walk looks at. Past it the walk stops, and each
    /// entry of the snapshot it did not reach is looked up by itself
    /// (through its checked directories), so nothing with a before-copy is
    /// left out; new entries past that point are named, not listed.
    pub max_visits: u64,
}

/// New entries `after.json` lists at most (and so the largest damage cap
/// a red chore may declare).
pub const MAX_LISTED: usize = 200_000;
/// Entries a seal's walk looks at, at most: a few seconds of `lstat`s.
pub const MAX_VISITS: u64 = 2_000_000;

impl Default for SealLimits {
    fn default() -> SealLimits {
        SealLimits {
            max_listed: MAX_LISTED,
            max_visits: MAX_VISITS,
        }
    }
}

/// New entries a seal could not list under `path`, so undo will not move
/// them away: `count` of them, or an unknown number when the walk did not
/// reach them all (a directory of more than 200 000 names, a walk stopped
/// at [`SealLimits::max_visits`], a run never sealed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unlisted {
    pub path: PathBuf,
    pub count: Option<u64>,
}

impl Unlisted {
    /// One line for a receipt.
    pub fn note(&self) -> String {
        match self.count {
            Some(n) => format!(
                "{n} new entries under {} were not removed: the run made more than the seal can list",
                self.path.display()
            ),
            None => format!(
                "new entries under {} were not removed: the run made more than the seal can list",
                self.path.display()
            ),
        }
    }
}

/// Records where a seal stops listing new entries: by the directory they
/// are in, at most [`MAX_EXAMPLES`] directories, the rest under their root.
#[derive(Default)]
struct Overflow {
    by_dir: BTreeMap<PathBuf, Option<u64>>,
}

impl Overflow {
    fn add(&mut self, dir: &Path, root: &Path, count: Option<u64>) {
        let key = if self.by_dir.contains_key(dir) || self.by_dir.len() < MAX_EXAMPLES {
            dir
        } else {
            root
        };
        let slot = self.by_dir.entry(key.to_path_buf()).or_insert(Some(0));
        *slot = match (*slot, count) {
            (Some(a), Some(b)) => Some(a.saturating_add(b)),
            _ => None,
        };
    }

    fn into_list(self) -> Vec<Unlisted> {
        self.by_dir
            .into_iter()
            .map(|(path, count)| Unlisted { path, count })
            .collect()
    }
}

/// What a lookup of one snapshot entry by itself found.
pub(super) enum Found {
    /// The entry's path now (`None`: nothing there), and its kind.
    Now(Option<Box<(Metadata, Kind)>>, Option<PathBuf>),
    /// A symlink, or a directory not the one expected, on the way; or the
    /// lookup failed: not known.
    Unknown,
}

impl Snapshot {
    /// Compares what is under the roots now with the snapshot; with `keep`,
    /// also lists every changed path, as it is now, in path order. What
    /// cannot be read is recorded as unknown (with nothing below it), except
    /// a directory swapped as it is walked when `swaps` is false: that stops
    /// the comparison with [`SnapshotError::Changed`], for a second look.
    ///
    /// Every change to an entry of the snapshot is kept (there are at most
    /// as many as it has entries); new entries are kept up to
    /// `limits.max_listed`, the rest named in the [`Unlisted`] list. Where
    /// the walk did not reach (a directory too large to list, a walk
    /// stopped at `limits.max_visits`), each entry of the snapshot is looked
    /// up by itself, never taken for removed.
    fn compare(
        &self,
        keep: bool,
        swaps: bool,
        limits: &SealLimits,
    ) -> Result<(Diff, Vec<Change>), SnapshotError> {
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
        let mut listed_new = 0usize;
        let mut overflow = Overflow::default();
        let mut visits = 0u64;
        // Set when the walk is stopped at `max_visits`: from the root it
        // was in on, nothing is known to be complete.
        let mut cut_at: Option<usize> = None;
        let mut last_root = 0usize;
        let mut unknown: BTreeSet<PathBuf> = BTreeSet::new();
        let mut run_dirs: HashMap<PathBuf, Ids> = HashMap::new();
        // Directories the walk could not list whole (too many names): what
        // is below them is looked up entry by entry.
        let mut partial: BTreeSet<PathBuf> = BTreeSet::new();
        let root_of = |p: &Path| {
            self.roots
                .iter()
                .position(|r| p.starts_with(r))
                .unwrap_or(0)
        };
        let mut unreadable = |path: &Path, e: SnapshotError| {
            if !swaps && matches!(e, SnapshotError::Changed(_)) {
                return Err(e);
            }
            if matches!(e, SnapshotError::TooManyEntries { .. }) {
                partial.insert(path.to_path_buf());
            } else {
                unknown.insert(path.to_path_buf());
            }
            Ok(())
        };
        let visit = |at: &Seen| {
            let (path, meta, kind) = (at.path, at.meta, at.kind);
            visits += 1;
            last_root = root_of(path);
            if visits > limits.max_visits {
                cut_at = Some(last_root);
                return Err(SnapshotError::TooManyEntries {
                    limit: usize::try_from(limits.max_visits).unwrap_or(usize::MAX),
                });
            }
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
                if old.is_none() {
                    if listed_new >= limits.max_listed {
                        // Named, not listed, and not gone into: nothing of
                        // the snapshot's can be below a new entry.
                        let root = self.roots.get(last_root).map_or(path, PathBuf::as_path);
                        overflow.add(path.parent().unwrap_or(root), root, Some(1));
                        return Ok(false);
                    }
                    listed_new += 1;
                }
                if keep {
                    changes.push((path.to_path_buf(), Some(State::of(meta, kind))));
                }
                // A directory of the snapshot's the run replaced: lookups go
                // through the run's.
                if old.is_some() && kind == Kind::Dir {
                    run_dirs.insert(path.to_path_buf(), ids(meta));
                }
            }
            Ok(true)
        };
        match walk_tolerant(&self.roots, &self.skipped_paths(), visit, &mut unreadable) {
            Err(SnapshotError::TooManyEntries { .. }) if cut_at.is_some() => {}
            other => other?,
        }
        // What the snapshot skipped is never compared, readable or not.
        unknown.retain(|u| {
            index
                .get(u.as_path())
                .and_then(|&i| self.entries.get(i))
                .is_none_or(|e| !e.kind.is_skipped())
        });
        if !unknown.is_empty() {
            changes.retain(|(p, _)| !under(&unknown, p));
        }
        for p in &partial {
            let root = self
                .roots
                .get(root_of(p))
                .map_or(p.as_path(), PathBuf::as_path);
            overflow.add(p, root, None);
        }
        if let Some(from) = cut_at {
            for r in self.roots.iter().skip(from) {
                overflow.add(r, r, None);
            }
        }
        let mut lookup: Option<(PathBuf, Chain)> = None;
        for (e, seen) in self.entries.iter().zip(&seen) {
            if *seen || e.kind.is_skipped() || under(&unknown, &e.path) {
                continue;
            }
            let not_reached =
                cut_at.is_some_and(|ri| root_of(&e.path) >= ri) || under(&partial, &e.path);
            if !not_reached {
                // The walk listed its directory whole: it is gone.
                d.count(&e.path, Some(e.kind), None);
                if keep {
                    changes.push((e.path.clone(), None));
                }
                continue;
            }
            match self.look_up(e, &mut lookup, &run_dirs)? {
                Found::Now(None, _) => {
                    d.count(&e.path, Some(e.kind), None);
                    if keep {
                        changes.push((e.path.clone(), None));
                    }
                }
                Found::Now(Some(now), target) => {
                    let (meta, kind) = *now;
                    if kind == Kind::File {
                        d.bytes_after = d.bytes_after.saturating_add(meta.size());
                    }
                    if e.differs(&meta, kind, || target) {
                        if kind == Kind::Dir {
                            run_dirs.insert(e.path.clone(), ids(&meta));
                        }
                        d.count(&e.path, Some(e.kind), Some(kind));
                        if keep {
                            changes.push((e.path.clone(), Some(State::of(&meta, kind))));
                        }
                    }
                }
                Found::Unknown => {
                    unknown.insert(e.path.clone());
                }
            }
        }
        for u in &unknown {
            d.count_unknown(u);
            if keep {
                changes.push((u.clone(), Some(State::unknown())));
            }
        }
        changes.sort_by(|a, b| a.0.cmp(&b.0));
        d.unlisted = overflow.into_list();
        Ok((d, changes))
    }

    /// Looks up the snapshot entry `e` by itself: its directory reached
    /// from its root's parent through directories each checked by device
    /// and inode (the run's, where `after_dirs` has it, else the
    /// snapshot's), never through a symlink. `chain` is reused while
    /// entries come in path order.
    pub(super) fn look_up(
        &self,
        e: &Entry,
        chain: &mut Option<(PathBuf, Chain)>,
        after_dirs: &HashMap<PathBuf, Ids>,
    ) -> Result<Found, SnapshotError> {
        let (Some(root), Some(parent), Some(name)) =
            (self.root_of(&e.path), e.path.parent(), e.path.file_name())
        else {
            return Ok(Found::Unknown);
        };
        if chain.as_ref().is_none_or(|(r, _)| r != root) {
            let Some(base) = root.parent() else {
                return Ok(Found::Unknown);
            };
            match Chain::at(base) {
                Ok(Some(c)) => *chain = Some((root.to_path_buf(), c)),
                Ok(None) => return Ok(Found::Now(None, None)),
                Err(_) => return Ok(Found::Unknown),
            }
        }
        let Some((_, c)) = chain.as_mut() else {
            return Ok(Found::Unknown);
        };
        let expect = |p: &Path| match after_dirs.get(p) {
            Some(i) => Expect::Is(*i),
            None => self.entry_dir(p).map_or(Expect::Unknown, Expect::Is),
        };
        let dir = match c.reach(parent, &expect) {
            Ok(Reached::Dir(d)) => d,
            Ok(Reached::Missing(_)) => return Ok(Found::Now(None, None)),
            Ok(Reached::Blocked) | Err(_) => return Ok(Found::Unknown),
        };
        let now = match dir.lstat(name) {
            Ok(n) => n,
            Err(_) => return Ok(Found::Unknown),
        };
        let Some(meta) = now else {
            return Ok(Found::Now(None, None));
        };
        let is_root = e.path == root;
        let dev = if is_root {
            meta.dev()
        } else {
            match dir.meta() {
                Ok(m) => m.dev(),
                Err(_) => return Ok(Found::Unknown),
            }
        };
        let kind = Kind::of(&meta, dev);
        let target = match kind {
            Kind::Symlink => dir.read_link(name).ok(),
            _ => None,
        };
        Ok(Found::Now(Some(Box::new((meta, kind))), target))
    }

    /// The device and inode the snapshot has for the directory at `p`.
    fn entry_dir(&self, p: &Path) -> Option<Ids> {
        self.entries
            .binary_search_by(|e| e.path.as_path().cmp(p))
            .ok()
            .and_then(|i| self.entries.get(i))
            .filter(|e| e.kind == Kind::Dir)
            .map(|e| (e.dev, e.ino))
    }

    /// Compares what is under the roots now with the snapshot, changing
    /// nothing.
    pub fn diff(&self) -> Result<Diff, SnapshotError> {
        check_proc()?;
        self.compare(false, true, &SealLimits::default())
            .map(|(d, _)| d)
    }

    /// [`Snapshot::seal_within`] the default [`SealLimits`].
    pub fn seal(&self) -> Result<Diff, SnapshotError> {
        self.seal_within(&SealLimits::default())
    }

    /// Called once, right after the run: the diff, and `after.json`, which
    /// records every path the run added, removed or changed as the run left
    /// it, so that undo reverts those alone, and only while they are still
    /// so. What the seal cannot account for never stops it, and never costs
    /// a before-copy: a directory swapped while it is walked gets a second
    /// walk, and whatever still cannot be read then (a swapped directory,
    /// EACCES, EMFILE, too deep a tree) is recorded as unknown
    /// ([`Diff::unknown`]), which undo leaves alone as a conflict; new
    /// entries past `limits` are named ([`Diff::unlisted`]) and every entry
    /// of the snapshot the walk did not reach is looked up by itself. An
    /// error (no `/proc`, `after.json` cannot be written) leaves the
    /// snapshot as it is: [`Snapshot::restore`] then puts back what is
    /// missing.
    pub fn seal_within(&self, limits: &SealLimits) -> Result<Diff, SnapshotError> {
        if lstat(&self.dir.join(AFTER))?.is_some() {
            return Err(SnapshotError::AlreadySealed(self.id.clone()));
        }
        check_proc()?;
        let (diff, changes) = match self.compare(true, false, limits) {
            Err(SnapshotError::Changed(_)) => self.compare(true, true, limits)?,
            other => other?,
        };
        self.write_after(&changes, &diff.unlisted)?;
        self.write_meta(true)?;
        Ok(diff)
    }
}

/// Whether `p` is at or under one of `set`, disjoint subtrees (none is
/// gone into): the greatest one not after `p` is the only one it can lie
/// under.
pub(super) fn under(set: &BTreeSet<PathBuf>, p: &Path) -> bool {
    set.range::<Path, _>((Bound::Unbounded, Bound::Included(p)))
        .next_back()
        .is_some_and(|u| p.starts_with(u))
}
