//! Undo: [`Snapshot::restore`] puts back what the run changed, path by path,
//! while each is still as the run left it, and moves what stands in the way
//! to the quarantine. Every path is checked first, then acted on; every act
//! goes through directories opened without following symlinks and checked
//! by device and inode (see [`safe_dir`](super::safe_dir)).

#![forbid(unsafe_code)]

use super::diff::{Found, Unlisted, under};
use super::entry::{Change, Entry, Kind, State, Why, still};
use super::error::{SnapshotError, io_err};
use super::manifest::write_marker;
use super::quarantine::Quarantine;
use super::safe_dir::{
    Chain, Dir, Expect, FILE_FLAGS, Ids, Reached, Staging, Sub, check_proc, fresh_dir, ids,
    set_attrs_fd,
};
use super::walk::{absolute, copy_hashed, create_private, excluded, lstat, sync_dir, walk_below};
use super::{KEEP_S, MAX_EXAMPLES, Snapshot, UNDOING, UNDONE};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::ffi::OsStr;
use std::fs::{self, File, FileTimes, Metadata, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt, fchown};
use std::path::{Path, PathBuf};

/// The name of what is put back, in its private staging directory.
const PUT_BACK: &str = "put-back";

/// What an undo did.
#[derive(Debug, Default)]
pub struct Restored {
    /// Entries recreated or whose content, owner or mode was put back.
    pub restored: u64,
    /// Entries moved to quarantine (a moved directory counts once):
    /// `quarantined_added + quarantined_replaced`.
    pub quarantined: u64,
    /// What the run added, moved to quarantine.
    pub quarantined_added: u64,
    /// The run's versions of paths the undo put back, moved to quarantine.
    pub quarantined_replaced: u64,
    /// Paths the run changed that were changed again since (or sit in
    /// something that was), and so were left as they are.
    pub conflicts: u64,
    /// Up to 20 of them, in path order.
    pub conflict_examples: Vec<PathBuf>,
    /// Fifos, sockets and device nodes (never unlinked), and files that grew
    /// while copied, that a move into a quarantine on another filesystem
    /// left in its private staging directory (0700, beside where they
    /// were): where each now is. Everything else went to the quarantine.
    pub left_in_staging: Vec<PathBuf>,
    /// New entries the seal could not list, by directory: left where they
    /// are, not moved away.
    pub unlisted: Vec<Unlisted>,
    /// The run was never sealed (the seal failed, or the Warden stopped
    /// first): only what is missing was put back (and the owner and mode of
    /// directories still there); every other difference is a conflict.
    pub unsealed: bool,
}

impl Restored {
    fn conflict(&mut self, path: &Path) {
        self.conflicts += 1;
        if self.conflict_examples.len() < MAX_EXAMPLES {
            self.conflict_examples.push(path.to_path_buf());
        }
    }

    fn added(&mut self) {
        self.quarantined_added += 1;
        self.quarantined += 1;
    }

    fn replaced(&mut self) {
        self.quarantined_replaced += 1;
        self.quarantined += 1;
    }

    fn changes(&self) -> u64 {
        self.restored + self.quarantined
    }
}

impl Snapshot {
    /// Opens each root's parent from `/` (no symlink followed) and refuses
    /// roots that are not what was snapshotted: a symlink anywhere in a
    /// root's path, or a root that existed and is now another file or
    /// directory (another inode or filesystem), unless the run itself left
    /// it so. A root whose parent is gone gets no chain: all under it is a
    /// conflict. Device numbers can change across reboots: a root with the
    /// inode recorded (before or after the run) but another device number
    /// is taken for the same directory, and its old device number is
    /// returned with the new one, for every entry of that root to be
    /// compared with the new number.
    fn open_roots(
        &self,
        changes: &[Change],
    ) -> Result<(Vec<Option<Chain>>, Vec<Remap>), SnapshotError> {
        let symlinked = |root: &Path| SnapshotError::Unsafe {
            path: root.to_path_buf(),
            why: "a component of the snapshot's path is now a symlink",
        };
        let mut chains = Vec::with_capacity(self.roots.len());
        let mut remaps = Vec::new();
        for root in &self.roots {
            let (Some(parent), Some(name)) = (root.parent(), root.file_name()) else {
                return Err(SnapshotError::Unsafe {
                    path: root.clone(),
                    why: "the whole filesystem cannot be restored",
                });
            };
            let base = match Dir::open_path(parent)? {
                Sub::Dir(d) => d,
                Sub::Symlink => return Err(symlinked(root)),
                Sub::Missing | Sub::NotDir | Sub::Elsewhere => {
                    chains.push(None);
                    continue;
                }
            };
            let now = base.lstat(name)?;
            if now.as_ref().is_some_and(|m| m.file_type().is_symlink()) {
                return Err(symlinked(root));
            }
            chains.push(Some(Chain::new(parent.to_path_buf(), base)));
            let Some(before) = self
                .entries
                .iter()
                .find(|e| &e.path == root && !e.kind.is_skipped())
            else {
                continue;
            };
            let Some(now) = now else {
                continue;
            };
            let by_the_run = changes
                .iter()
                .find(|(p, _)| p == root)
                .and_then(|(_, after)| after.as_ref())
                .filter(|s| s.kind != Kind::Unknown)
                .map(|s| (s.dev, s.ino));
            let known: Vec<Ids> = [Some((before.dev, before.ino)), by_the_run]
                .into_iter()
                .flatten()
                .collect();
            if known.contains(&ids(&now)) {
                continue;
            }
            if known.iter().any(|&(_, ino)| ino == now.ino()) {
                for &(dev, _) in &known {
                    if dev != now.dev() {
                        remaps.push((root.clone(), dev, now.dev()));
                    }
                }
                continue;
            }
            return Err(SnapshotError::Unsafe {
                path: root.clone(),
                why: "it is no longer the one that was snapshotted (another inode or filesystem)",
            });
        }
        Ok((chains, remaps))
    }

    /// This snapshot, and `changes`, with the device numbers of each root
    /// in `remaps` changed from the old to the new.
    fn remapped(&self, remaps: &[Remap], changes: &mut [Change]) -> Snapshot {
        let map = |path: &Path, dev: &mut u64| {
            if let Some((_, _, new)) = remaps
                .iter()
                .find(|(root, old, _)| path.starts_with(root) && *dev == *old)
            {
                *dev = *new;
            }
        };
        for (p, s) in changes.iter_mut() {
            if let Some(s) = s.as_mut().filter(|s| s.kind != Kind::Unknown) {
                map(p, &mut s.dev);
            }
        }
        Snapshot {
            id: self.id.clone(),
            chore: self.chore.clone(),
            created_at: self.created_at,
            roots: self.roots.clone(),
            exclude: self.exclude.clone(),
            store: self.store.clone(),
            dir: self.dir.clone(),
            entries: self
                .entries
                .iter()
                .map(|e| {
                    let mut e = e.clone();
                    if !e.kind.is_skipped() {
                        map(&e.path, &mut e.dev);
                    }
                    e
                })
                .collect(),
        }
    }

    /// Reverts what the run did, as `after.json` has it (see the module
    /// doc): a path is put back only while it is as the run left it, what
    /// stands in the way is moved (never deleted) to
    /// `quarantine/<id>-undo-<8 hex>/<path without its leading />`, and the
    /// rest is counted as conflicts and left alone. `quarantine` must be a
    /// directory of the Warden's (made 0700 if missing): no symlink in its
    /// path, owned by the Warden's user, not writable by group or others.
    /// A snapshot never sealed (the seal failed, or the Warden stopped
    /// during the run) is undone as [`Snapshot::unsealed_changes`] says:
    /// what is missing is put back, the rest named. Refuses a snapshot
    /// undone, older than [`KEEP_S`] at `now`, or being undone; and one
    /// whose roots are not what was snapshotted. An undo that fails part-way leaves the `undoing` claim,
    /// so no later one starts over it, and returns
    /// [`SnapshotError::Partial`]; one that fails while it only checks (the
    /// first pass, before anything is changed) lets go of its claim and
    /// returns the error itself.
    pub fn restore(&self, quarantine: &Path, now: u64) -> Result<Restored, SnapshotError> {
        if now.saturating_sub(self.created_at) > KEEP_S {
            return Err(SnapshotError::Expired(self.id.clone()));
        }
        check_proc()?;
        let (mut changes, unlisted, sealed) = match self.load_after() {
            Ok((c, u)) => (c, u, true),
            Err(SnapshotError::NotSealed(_)) => {
                let (c, u) = self.unsealed_changes()?;
                (c, u, false)
            }
            Err(e) => return Err(e),
        };
        let quarantine = absolute(quarantine)?;
        let q = Quarantine::open(&quarantine, &self.id)?;
        let claim = self.dir.join(UNDOING);
        // The claim comes first: a finished undo writes `undone` before it
        // lets go, so whoever gets the claim next sees that it is done.
        match create_private(&claim) {
            Ok(_) => {}
            Err(SnapshotError::Io { source, .. })
                if source.kind() == io::ErrorKind::AlreadyExists =>
            {
                return Err(SnapshotError::UnderWay(self.id.clone()));
            }
            Err(e) => return Err(e),
        }
        let ready = match lstat(&self.dir.join(UNDONE)) {
            Ok(Some(_)) => Err(SnapshotError::AlreadyUndone(self.id.clone())),
            Ok(None) => self.open_roots(&changes),
            Err(e) => Err(e),
        };
        let (chains, remaps) = match ready {
            Ok(c) => c,
            Err(e) => {
                // Nothing was changed: the claim goes.
                let _ = fs::remove_file(&claim);
                return Err(e);
            }
        };
        let remapped;
        let snap = if remaps.is_empty() {
            self
        } else {
            remapped = self.remapped(&remaps, &mut changes);
            &remapped
        };
        let (mut cx, as_left) = match snap.check(&changes, &quarantine, q, chains) {
            Ok(c) => c,
            Err(e) => {
                // Only checked so far, nothing changed: the claim goes.
                let _ = fs::remove_file(&claim);
                return Err(e);
            }
        };
        let mut done = Restored {
            unlisted,
            unsealed: !sealed,
            ..Restored::default()
        };
        let finished = cx
            .revert(&changes, as_left, &mut done)
            .and_then(|()| write_marker(&self.dir.join(UNDONE), now))
            .and_then(|()| fs::remove_file(&claim).map_err(io_err("remove", &claim)))
            .and_then(|()| sync_dir(&self.dir));
        match finished {
            Ok(()) => Ok(done),
            Err(e) => Err(SnapshotError::Partial {
                done: done.changes(),
                why: e.to_string(),
            }),
        }
    }

    /// What an undo of a snapshot never sealed goes by, as each entry of
    /// the snapshot is found now (looked up by itself, through checked
    /// directories): what is gone is put back; a directory still there (the
    /// same inode) gets its owner and mode back; anything else that differs
    /// may be the run's or someone's since, and is a conflict (unknown),
    /// with all below it. New entries are not known: each root is named as
    /// holding some that are left.
    fn unsealed_changes(&self) -> Result<(Vec<Change>, Vec<Unlisted>), SnapshotError> {
        let mut changes: Vec<Change> = Vec::new();
        let mut unknown: BTreeSet<PathBuf> = BTreeSet::new();
        let mut chain = None;
        let no_after = HashMap::new();
        for e in &self.entries {
            if e.kind.is_skipped() || under(&unknown, &e.path) {
                continue;
            }
            match self.look_up(e, &mut chain, &no_after)? {
                Found::Now(None, _) => changes.push((e.path.clone(), None)),
                Found::Now(Some(now), target) => {
                    let (meta, kind) = *now;
                    if !e.differs(&meta, kind, || target) {
                        continue;
                    }
                    if e.kind == Kind::Dir && kind == Kind::Dir && ids(&meta) == (e.dev, e.ino) {
                        changes.push((e.path.clone(), Some(State::of(&meta, kind))));
                    } else {
                        unknown.insert(e.path.clone());
                        changes.push((e.path.clone(), Some(State::unknown())));
                    }
                }
                Found::Unknown => {
                    unknown.insert(e.path.clone());
                    changes.push((e.path.clone(), Some(State::unknown())));
                }
            }
        }
        let unlisted = self
            .roots
            .iter()
            .map(|r| Unlisted {
                path: r.clone(),
                count: None,
            })
            .collect();
        Ok((changes, unlisted))
    }

    /// The first pass: the undo's state, and whether each of `changes` is
    /// still as the run left it. Changes nothing.
    fn check<'a>(
        &'a self,
        changes: &'a [Change],
        quarantine: &Path,
        q: Quarantine,
        chains: Vec<Option<Chain>>,
    ) -> Result<(Revert<'a>, Vec<bool>), SnapshotError> {
        let mut exclude = self.skipped_paths();
        exclude.push(quarantine.to_path_buf());
        let mut cx = Revert {
            snap: self,
            index: self
                .entries
                .iter()
                .filter(|e| !e.kind.is_skipped())
                .map(|e| (e.path.as_path(), e))
                .collect(),
            after: changes
                .iter()
                .map(|(p, s)| (p.as_path(), s.as_ref()))
                .collect(),
            exclude,
            q,
            chains,
            recreated: HashMap::new(),
            moved: HashSet::new(),
            touched: BTreeSet::new(),
            unsettled: HashSet::new(),
        };
        // First every path is checked as the run left it, before anything
        // is moved: moving one link to an inode changes the ctime of all.
        let mut as_left = vec![false; changes.len()];
        for ((path, state), ok) in changes.iter().zip(as_left.iter_mut()) {
            if !excluded(path, &cx.exclude) {
                *ok = cx.as_the_run_left(path, state.as_ref())?;
            }
        }
        Ok((cx, as_left))
    }
}

impl Revert<'_> {
    /// The second pass: reverts each of `changes` found as the run left it
    /// (`as_left`) by [`Snapshot::check`].
    fn revert(
        &mut self,
        changes: &[Change],
        as_left: Vec<bool>,
        done: &mut Restored,
    ) -> Result<(), SnapshotError> {
        let cx = self;
        // Changes are in path order, so what lies under a path follows it at
        // once: `skip` is the path whose subtree is dealt with (moved with
        // it, or left with it as a conflict).
        let mut skip: Option<(&Path, bool)> = None;
        for ((path, state), ok) in changes.iter().zip(as_left) {
            if excluded(path, &cx.exclude) {
                continue;
            }
            if let Some((prefix, conflict)) = skip {
                if path.starts_with(prefix) {
                    if conflict {
                        cx.conflict(done, path);
                    }
                    continue;
                }
                skip = None;
            }
            let outcome = if ok {
                cx.revert_one(path, state.as_ref(), done)?
            } else {
                Outcome::Conflict
            };
            match outcome {
                Outcome::Done => {}
                Outcome::DoneWithAllBelow => skip = Some((path, false)),
                Outcome::LeftAlone => skip = Some((path, false)),
                Outcome::Conflict => {
                    cx.conflict(done, path);
                    skip = Some((path, true));
                }
                Outcome::ConflictOnlyHere => cx.conflict(done, path),
            }
        }
        cx.put_back_dir_times()
    }
}

/// A root's device number as recorded, and as it is now.
type Remap = (PathBuf, u64, u64);

/// What became of one path of `after.json`.
enum Outcome {
    /// Reverted; what lies below it is dealt with path by path.
    Done,
    /// Reverted together with all below it (moved to quarantine whole).
    DoneWithAllBelow,
    /// Left alone, and all below it (a fifo, socket, device or mount the
    /// run made, like those the take skipped).
    LeftAlone,
    /// Changed since the run: left alone, and all below it too.
    Conflict,
    /// A directory the run made that holds something not the run's: it
    /// stays, and what below it is the run's is dealt with path by path.
    ConflictOnlyHere,
}

/// What is at a path of `after.json` now.
enum Look {
    /// Its directory, open and checked, and what is in it at the name.
    At {
        parent: Dir,
        now: Option<Box<Metadata>>,
        root_dev: u64,
    },
    /// A directory on the way is missing (its own parent is as expected).
    ParentMissing,
    /// A symlink, a file, or not the directory expected, on the way.
    Blocked,
}

/// An undo in progress.
struct Revert<'a> {
    snap: &'a Snapshot,
    /// The snapshot's entries (before the run), skipped ones left out.
    index: HashMap<&'a Path, &'a Entry>,
    /// `after.json`: every path the run changed, as it left it.
    after: HashMap<&'a Path, Option<&'a State>>,
    exclude: Vec<PathBuf>,
    q: Quarantine,
    /// One per root (`None`: its parent is gone), from the root's parent.
    chains: Vec<Option<Chain>>,
    /// Directories the undo made again, as they are now.
    recreated: HashMap<PathBuf, Ids>,
    /// Inodes the undo moved (their ctime moved with them).
    moved: HashSet<Ids>,
    /// Directories whose mtime the undo moved, to be put back at the end.
    touched: BTreeSet<PathBuf>,
    /// Conflicts and the directories holding them: their times stay.
    unsettled: HashSet<PathBuf>,
}

/// The directory expected at `p`: the one the undo made there, else the
/// one the run left there, else the snapshot's (if the run did not change
/// it). Anything else (the run removed it, or left something else) is not
/// gone into.
fn expect_at(
    index: &HashMap<&Path, &Entry>,
    after: &HashMap<&Path, Option<&State>>,
    recreated: &HashMap<PathBuf, Ids>,
    p: &Path,
) -> Expect {
    if let Some(i) = recreated.get(p) {
        return Expect::Is(*i);
    }
    match after.get(p) {
        Some(Some(s)) if s.kind == Kind::Dir => Expect::Is((s.dev, s.ino)),
        Some(_) => Expect::Unknown,
        None => match index.get(p) {
            Some(e) if e.kind == Kind::Dir => Expect::Is((e.dev, e.ino)),
            _ => Expect::Unknown,
        },
    }
}

impl Revert<'_> {
    fn conflict(&mut self, done: &mut Restored, path: &Path) {
        done.conflict(path);
        self.unsettled.insert(path.to_path_buf());
        if let Some(p) = path.parent() {
            self.unsettled.insert(p.to_path_buf());
        }
    }

    fn touch(&mut self, path: &Path, is_dir: bool) {
        if is_dir {
            self.touched.insert(path.to_path_buf());
        }
        if let Some(p) = path.parent() {
            self.touched.insert(p.to_path_buf());
        }
    }

    fn root_index(&self, path: &Path) -> Option<usize> {
        self.snap.roots.iter().position(|r| path.starts_with(r))
    }

    /// The directory at `dir`, reached from its root's parent through
    /// directories each checked against what is expected there.
    fn reach(&mut self, ri: usize, dir: &Path) -> Result<Reached, SnapshotError> {
        let (index, after, recreated) = (&self.index, &self.after, &self.recreated);
        let expect = |p: &Path| expect_at(index, after, recreated, p);
        match self.chains.get_mut(ri).and_then(Option::as_mut) {
            Some(c) => c.reach(dir, &expect),
            None => Ok(Reached::Blocked),
        }
    }

    fn forget(&mut self, ri: usize, path: &Path) {
        if let Some(Some(c)) = self.chains.get_mut(ri) {
            c.forget(path);
        }
    }

    fn look(&mut self, ri: usize, path: &Path) -> Result<Look, SnapshotError> {
        let (Some(pp), Some(name)) = (path.parent(), path.file_name()) else {
            return Ok(Look::Blocked);
        };
        let is_root = self.snap.roots.get(ri).is_some_and(|r| r == path);
        Ok(match self.reach(ri, pp)? {
            Reached::Dir(parent) => {
                let now = parent.lstat(name)?.map(Box::new);
                // A root's kind is judged against its own device, as the
                // walk does; all below it against the root's.
                let root_dev = if is_root {
                    now.as_deref().map_or(0, MetadataExt::dev)
                } else {
                    parent.meta()?.dev()
                };
                Look::At {
                    parent,
                    now,
                    root_dev,
                }
            }
            Reached::Missing(_) => Look::ParentMissing,
            Reached::Blocked => Look::Blocked,
        })
    }

    /// The first pass: whether `path` is still exactly as the run left it.
    /// A path whose directory is missing is as good as gone.
    fn as_the_run_left(
        &mut self,
        path: &Path,
        state: Option<&State>,
    ) -> Result<bool, SnapshotError> {
        let Some(ri) = self.root_index(path) else {
            return Ok(false);
        };
        Ok(match self.look(ri, path)? {
            Look::At { now, root_dev, .. } => still(state, now.as_deref(), root_dev, false),
            Look::ParentMissing => state.is_none(),
            // Removed by the run under a directory the run then replaced
            // (by a symlink, a file, a fifo): as good as gone, if that
            // replacement is still as the run left it; undo puts the
            // directory back first, then this.
            Look::Blocked => state.is_none() && self.replaced_above(path)?,
        })
    }

    /// Whether the nearest directory above `path` that the run did not
    /// simply remove is one the snapshot had as a directory and the run
    /// replaced with something else, still as the run left it.
    fn replaced_above(&mut self, path: &Path) -> Result<bool, SnapshotError> {
        for a in path.ancestors().skip(1) {
            if self.root_index(a).is_none() {
                return Ok(false);
            }
            match self.after.get(a).copied() {
                // Removed by the run too: look further up.
                Some(None) => continue,
                Some(Some(s)) => {
                    let was_dir = self.index.get(a).is_some_and(|e| e.kind == Kind::Dir);
                    if !was_dir || s.kind == Kind::Dir {
                        return Ok(false);
                    }
                    return self.as_the_run_left(a, Some(s));
                }
                None => return Ok(false),
            }
        }
        Ok(false)
    }

    fn revert_one(
        &mut self,
        path: &Path,
        state: Option<&State>,
        done: &mut Restored,
    ) -> Result<Outcome, SnapshotError> {
        let (Some(ri), Some(name)) = (self.root_index(path), path.file_name()) else {
            return Ok(Outcome::Conflict);
        };
        let before = self.index.get(path).copied();
        let (parent, now, root_dev) = match self.look(ri, path)? {
            Look::At {
                parent,
                now,
                root_dev,
            } => (parent, now.map(|m| *m), root_dev),
            Look::ParentMissing if state.is_none() => match self.make_parents(ri, path, done)? {
                Some(p) => {
                    let now = p.lstat(name)?;
                    let dev = p.meta()?.dev();
                    (p, now, dev)
                }
                None => return Ok(Outcome::Conflict),
            },
            Look::ParentMissing | Look::Blocked => return Ok(Outcome::Conflict),
        };
        // Checked again right before acting; the ctime only of inodes
        // other than those the undo itself moved.
        let ours = now.as_ref().is_some_and(|m| self.moved.contains(&ids(m)));
        if !still(state, now.as_ref(), root_dev, ours) {
            return Ok(Outcome::Conflict);
        }
        if state.is_some_and(|s| s.kind.is_skipped()) && before.is_none() {
            // Never touched: left as the run made it (a fifo, socket or
            // device the run added). Where the snapshot had something, the
            // run's fifo is moved to quarantine (a rename: it is never
            // opened) and the snapshot's entry put back below, so that a
            // fifo in place of a directory cannot keep what was in it.
            return Ok(Outcome::LeftAlone);
        }
        let outcome = match (before, state) {
            (None, None) => Outcome::Done,
            (None, Some(s)) => {
                if s.kind == Kind::Dir && !self.only_the_runs(&parent, name, path, s)? {
                    return Ok(Outcome::ConflictOnlyHere);
                }
                self.quarantine(ri, &parent, name, path, done)?;
                done.added();
                self.touch(path, false);
                Outcome::DoneWithAllBelow
            }
            (Some(b), Some(s)) if b.kind == Kind::Dir && s.kind == Kind::Dir => {
                if !reset_dir(&parent, name, b, s)? {
                    return Ok(Outcome::Conflict);
                }
                done.restored += 1;
                self.touch(path, true);
                Outcome::Done
            }
            (Some(b), state) => {
                // Something to put back; whatever is there now is moved to
                // quarantine first, a directory only if all in it is the run's.
                let moves_a_dir = state.filter(|s| s.kind == Kind::Dir);
                if let Some(s) = moves_a_dir
                    && !self.only_the_runs(&parent, name, path, s)?
                {
                    return Ok(Outcome::ConflictOnlyHere);
                }
                let placed = self.put_back(ri, &parent, b, state.is_some(), done)?;
                if placed {
                    done.restored += 1;
                    self.touch(path, b.kind == Kind::Dir);
                }
                match (placed, moves_a_dir.is_some()) {
                    (true, true) => Outcome::DoneWithAllBelow,
                    (true, false) => Outcome::Done,
                    // Someone made something there meanwhile: it stays.
                    (false, _) => Outcome::Conflict,
                }
            }
        };
        Ok(outcome)
    }

    /// Moves `name` in `parent` (at `path`) to the quarantine.
    fn quarantine(
        &mut self,
        ri: usize,
        parent: &Dir,
        name: &OsStr,
        path: &Path,
        done: &mut Restored,
    ) -> Result<(), SnapshotError> {
        let moved = self.q.move_in(parent, name, path)?;
        self.moved.extend(moved.ids);
        done.left_in_staging.extend(moved.kept);
        self.forget(ri, path);
        Ok(())
    }

    /// Makes again the missing directories from `path`'s root down to its
    /// parent, each only if `after.json` has the run removing it (the
    /// snapshot had a directory there); anything else missing is not the
    /// undo's to make, and the path is a conflict (`None`).
    fn make_parents(
        &mut self,
        ri: usize,
        path: &Path,
        done: &mut Restored,
    ) -> Result<Option<Dir>, SnapshotError> {
        let Some(parent) = path.parent() else {
            return Ok(None);
        };
        for _ in parent.ancestors() {
            let missing = match self.reach(ri, parent)? {
                Reached::Dir(d) => return Ok(Some(d)),
                Reached::Blocked => return Ok(None),
                Reached::Missing(m) => m,
            };
            let removed_by_the_run = matches!(self.after.get(missing.as_path()), Some(None));
            let Some(e) = self
                .index
                .get(missing.as_path())
                .copied()
                .filter(|e| e.kind == Kind::Dir && removed_by_the_run)
            else {
                return Ok(None);
            };
            let (Some(mp), Some(mn)) = (missing.parent(), missing.file_name()) else {
                return Ok(None);
            };
            let Reached::Dir(pd) = self.reach(ri, mp)? else {
                return Ok(None);
            };
            let Some(made) = create_dir(&pd, mn, e)? else {
                return Ok(None);
            };
            self.recreated.insert(missing.clone(), made);
            self.forget(ri, &missing);
            done.restored += 1;
            self.touch(&missing, true);
        }
        Ok(None)
    }

    /// Whether everything in the directory `name` of `parent` (at `path`,
    /// still the one the run left, `s`) is the run's, still as the run left
    /// it, and nothing excluded is in it: only then may it be moved to
    /// quarantine whole.
    fn only_the_runs(
        &self,
        parent: &Dir,
        name: &OsStr,
        path: &Path,
        s: &State,
    ) -> Result<bool, SnapshotError> {
        if self.exclude.iter().any(|x| x.starts_with(path)) {
            return Ok(false);
        }
        let Sub::Dir(dir) = parent.child_dir_is(name, (s.dev, s.ino))? else {
            return Ok(false);
        };
        let dev = dir.meta()?.dev();
        let mut clean = true;
        // What cannot be read there is not known to be the run's.
        let mut unread = false;
        let mut unreadable = |_: &Path, _: SnapshotError| {
            unread = true;
            Ok(())
        };
        walk_below(
            dir,
            path,
            dev,
            &[],
            &mut |at| {
                let ours = !self.index.contains_key(at.path)
                    && at.kind != Kind::Skipped(Why::Mount)
                    && self.after.get(at.path).is_some_and(|s| {
                        s.is_some_and(|s| {
                            s.is_but_ctime(at.meta, dev, self.moved.contains(&ids(at.meta)))
                        })
                    });
                clean &= ours;
                Ok(ours)
            },
            &mut unreadable,
        )?;
        Ok(clean && !unread)
    }

    /// Puts `old` back at its name in `parent`; with `replace`, first moves
    /// what is there to quarantine. A file or symlink is made whole (bytes
    /// checked, owner, mode and mtime set) in a private staging directory
    /// beside it, then linked into place: a link never replaces what
    /// someone put there meanwhile (false then).
    fn put_back(
        &mut self,
        ri: usize,
        parent: &Dir,
        old: &Entry,
        replace: bool,
        done: &mut Restored,
    ) -> Result<bool, SnapshotError> {
        let path = &old.path;
        let Some(name) = path.file_name() else {
            return Ok(false);
        };
        match old.kind {
            Kind::File | Kind::Symlink => {
                let stage = Staging::create(parent)?;
                let tmp = OsStr::new(PUT_BACK);
                let placed = self.make_in(&stage, tmp, old).and_then(|()| {
                    self.link_into_place(ri, &stage.dir, parent, old, replace, done)
                });
                let unlinked = match stage.dir.unlink(tmp) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => {
                        Err(io_err("remove", &stage.dir.shown(tmp))(e))
                    }
                    _ => Ok(()),
                };
                let removed = stage.remove();
                let placed = placed?;
                unlinked?;
                removed?;
                Ok(placed)
            }
            Kind::Dir => {
                if replace {
                    self.quarantine(ri, parent, name, path, done)?;
                    done.replaced();
                }
                let Some(made) = create_dir(parent, name, old)? else {
                    return Ok(false);
                };
                self.recreated.insert(path.clone(), made);
                self.forget(ri, path);
                Ok(true)
            }
            Kind::Skipped(_) | Kind::Unknown => Ok(false),
        }
    }

    /// Makes `old` (a file from its checked blob, or a symlink) as `tmp` in
    /// the private `stage`, with its owner, and for a file its mode and
    /// mtime.
    fn make_in(&self, stage: &Staging, tmp: &OsStr, old: &Entry) -> Result<(), SnapshotError> {
        let shown = stage.dir.shown(tmp);
        if old.kind == Kind::Symlink {
            let Some(target) = &old.target else {
                return Err(SnapshotError::Unsafe {
                    path: old.path.clone(),
                    why: "its saved link target is missing",
                });
            };
            stage
                .dir
                .symlink(target, tmp)
                .map_err(io_err("create the link", &shown))?;
            return stage
                .dir
                .lchown(tmp, old.uid, old.gid)
                .map_err(io_err("set the owner of", &shown));
        }
        let file = self.snap.write_blob(old, &stage.dir, tmp)?;
        set_attrs_fd(&file, &old.path, old.uid, old.gid, old.mode, old.mtime()?)?;
        file.sync_all().map_err(io_err("sync", &shown))
    }

    /// Moves what is at `old`'s name to quarantine (with `replace`), then
    /// links `from`'s [`PUT_BACK`] there; false if something took the name
    /// meanwhile.
    fn link_into_place(
        &mut self,
        ri: usize,
        from: &Dir,
        parent: &Dir,
        old: &Entry,
        replace: bool,
        done: &mut Restored,
    ) -> Result<bool, SnapshotError> {
        let Some(name) = old.path.file_name() else {
            return Ok(false);
        };
        if replace {
            self.quarantine(ri, parent, name, &old.path, done)?;
            done.replaced();
        }
        match from.link(OsStr::new(PUT_BACK), parent, name) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(io_err("put back", &old.path)(e)),
        }
    }

    /// Puts back the mtimes of the directories the undo changed, deepest
    /// first (every move and link above moved them), except where a
    /// conflict was left, and only on a directory that is still the one
    /// expected there (by device and inode).
    fn put_back_dir_times(&mut self) -> Result<(), SnapshotError> {
        let dirs: Vec<PathBuf> = self.touched.iter().rev().cloned().collect();
        for d in dirs {
            if excluded(&d, &self.exclude) || self.unsettled.contains(&d) {
                continue;
            }
            let Some(e) = self
                .index
                .get(d.as_path())
                .copied()
                .filter(|e| e.kind == Kind::Dir)
            else {
                continue;
            };
            let Some(ri) = self.root_index(&d) else {
                continue;
            };
            let Reached::Dir(dir) = self.reach(ri, &d)? else {
                continue;
            };
            dir.file()
                .set_times(FileTimes::new().set_modified(e.mtime()?))
                .map_err(io_err("set the mtime of", &d))?;
        }
        Ok(())
    }
}

/// Makes the directory `e` records as `name` in `parent`: private until
/// its owner and mode are set through its descriptor. `None` if something
/// is there already, or what was opened is not the directory just made.
fn create_dir(parent: &Dir, name: &OsStr, e: &Entry) -> Result<Option<Ids>, SnapshotError> {
    match parent.mkdir(name, 0o700) {
        Ok(()) => {}
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => return Ok(None),
        Err(err) => return Err(io_err("create", &e.path)(err)),
    }
    // Refused unless it is the very directory made: ours, private, empty,
    // on the parent's filesystem (not one swapped in after the mkdir).
    let Some((dir, m)) = fresh_dir(parent, name)? else {
        return Ok(None);
    };
    fchown(dir.file(), Some(e.uid), Some(e.gid)).map_err(io_err("set the owner of", &e.path))?;
    dir.file()
        .set_permissions(Permissions::from_mode(e.mode))
        .map_err(io_err("set the mode of", &e.path))?;
    Ok(Some(ids(&m)))
}

/// Puts back the owner and mode of the directory `name` in `parent`, if it
/// is still the directory the run left (`s`).
fn reset_dir(parent: &Dir, name: &OsStr, old: &Entry, s: &State) -> Result<bool, SnapshotError> {
    let Sub::Dir(dir) = parent.child_dir_is(name, (s.dev, s.ino))? else {
        return Ok(false);
    };
    fchown(dir.file(), Some(old.uid), Some(old.gid))
        .map_err(io_err("set the owner of", &old.path))?;
    dir.file()
        .set_permissions(Permissions::from_mode(old.mode))
        .map_err(io_err("set the mode of", &old.path))?;
    Ok(true)
}

impl Snapshot {
    /// Writes the blob of `old` as the new private file `name` in `dir`,
    /// checking size and hash.
    fn write_blob(&self, old: &Entry, dir: &Dir, name: &OsStr) -> Result<File, SnapshotError> {
        let Some((n, sha)) = &old.blob else {
            return Err(SnapshotError::CorruptBlob(old.path.clone()));
        };
        let blob = self.blob_path(*n);
        let mut src = OpenOptions::new()
            .read(true)
            .custom_flags(FILE_FLAGS)
            .open(&blob)
            .map_err(io_err("open", &blob))?;
        let shown = dir.shown(name);
        let mut dst = dir
            .create_file(name, 0o600)
            .map_err(io_err("create", &shown))?;
        let limit = old.size.saturating_add(1);
        let (copied, got) = copy_hashed(&mut src, &blob, &mut dst, &shown, limit)?;
        if copied != old.size || got != *sha {
            return Err(SnapshotError::CorruptBlob(old.path.clone()));
        }
        Ok(dst)
    }
}
