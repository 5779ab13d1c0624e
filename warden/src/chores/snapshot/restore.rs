//! Undo: [`Snapshot::restore`] puts back what the run changed, path by path,
//! while each is still as the run left it, and moves what stands in the way
//! to the quarantine.

#![forbid(unsafe_code)]

use super::entry::{Change, Entry, Kind, State, Why, still};
use super::error::{SnapshotError, io_err};
use super::manifest::write_marker;
use super::quarantine::move_to_quarantine;
use super::walk::{
    FILE_FLAGS, absolute, copy_hashed, create_private, excluded, lstat, open_dir, set_attrs,
    symlink_in, sync_dir, walk,
};
use super::{KEEP_S, MAX_EXAMPLES, Snapshot, UNDOING, UNDONE};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs::{self, DirBuilder, File, FileTimes, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{
    DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt, fchown, lchown, symlink,
};
use std::path::{Path, PathBuf};

/// What an undo did.
#[derive(Debug, Default)]
pub struct Restored {
    /// Entries recreated or whose content, owner or mode was put back.
    pub restored: u64,
    /// Entries moved to quarantine (a moved directory counts once): what the
    /// run created, and what stood where an entry was put back.
    pub quarantined: u64,
    /// Paths the run changed that were changed again since (or sit in
    /// something that was), and so were left as they are.
    pub conflicts: u64,
    /// Up to 20 of them, in path order.
    pub conflict_examples: Vec<PathBuf>,
}

impl Restored {
    fn conflict(&mut self, path: &Path) {
        self.conflicts += 1;
        if self.conflict_examples.len() < MAX_EXAMPLES {
            self.conflict_examples.push(path.to_path_buf());
        }
    }

    fn changes(&self) -> u64 {
        self.restored + self.quarantined
    }
}

impl Snapshot {
    /// Whether a symlink stands between `path`'s root and `path`: as root,
    /// writing through one could land anywhere. (A race remains between this
    /// check and the write; closing it needs `openat`, hence `unsafe`.)
    fn symlink_above(&self, path: &Path) -> Result<bool, SnapshotError> {
        let Some(root) = self.root_of(path) else {
            return Ok(true);
        };
        for a in path.ancestors().skip(1) {
            if !a.starts_with(root) {
                break;
            }
            if lstat(a)?.is_some_and(|m| m.file_type().is_symlink()) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Refuses roots that are not what was snapshotted: a symlink anywhere
    /// in a root's path, or a root that existed and is now another file or
    /// directory (another inode or filesystem), unless the run itself left
    /// it so.
    fn check_roots(&self, changes: &[Change]) -> Result<(), SnapshotError> {
        for root in &self.roots {
            if symlink_in(root)?.is_some() {
                return Err(SnapshotError::Unsafe {
                    path: root.clone(),
                    why: "a component of the snapshot's path is now a symlink",
                });
            }
            let Some(before) = self
                .entries
                .iter()
                .find(|e| &e.path == root && !e.kind.is_skipped())
            else {
                continue;
            };
            let Some(now) = lstat(root)? else {
                continue;
            };
            if (now.dev(), now.ino()) == (before.dev, before.ino) {
                continue;
            }
            let by_the_run = changes.iter().any(|(p, after)| {
                p == root
                    && after
                        .as_ref()
                        .is_some_and(|s| (s.dev, s.ino) == (now.dev(), now.ino()))
            });
            if !by_the_run {
                return Err(SnapshotError::Unsafe {
                    path: root.clone(),
                    why: "it is no longer the one that was snapshotted (another inode or filesystem)",
                });
            }
        }
        Ok(())
    }

    /// Reverts what the run did, as `after.json` has it (see the module
    /// doc): a path is put back only while it is as the run left it, what
    /// stands in the way is moved (never deleted) to
    /// `quarantine/<id>-undo/<path without its leading />`, and the rest is
    /// counted as conflicts and left alone. Refuses a snapshot never sealed,
    /// undone, older than [`KEEP_S`] at `now`, or being undone; and one
    /// whose roots are not what was snapshotted. An undo that fails
    /// part-way leaves the `undoing` claim, so no later one starts over it,
    /// and returns [`SnapshotError::Partial`].
    pub fn restore(&self, quarantine: &Path, now: u64) -> Result<Restored, SnapshotError> {
        let changes = self.load_after()?;
        if now.saturating_sub(self.created_at) > KEEP_S {
            return Err(SnapshotError::Expired(self.id.clone()));
        }
        let quarantine = absolute(quarantine)?;
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
            Ok(None) => self.check_roots(&changes),
            Err(e) => Err(e),
        };
        if let Err(e) = ready {
            // Nothing was changed: the claim goes.
            let _ = fs::remove_file(&claim);
            return Err(e);
        }
        let mut done = Restored::default();
        let finished = self
            .revert(&changes, &quarantine, &mut done)
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

    fn revert(
        &self,
        changes: &[Change],
        quarantine: &Path,
        done: &mut Restored,
    ) -> Result<(), SnapshotError> {
        let mut exclude = self.skipped_paths();
        exclude.push(quarantine.to_path_buf());
        let moved_to = quarantine.join(format!("{}-undo", self.id));
        let index: HashMap<&Path, &Entry> = self
            .entries
            .iter()
            .filter(|e| !e.kind.is_skipped())
            .map(|e| (e.path.as_path(), e))
            .collect();
        let after: HashMap<&Path, Option<&State>> = changes
            .iter()
            .map(|(p, s)| (p.as_path(), s.as_ref()))
            .collect();
        let mut cx = Revert {
            snap: self,
            index: &index,
            after: &after,
            exclude: &exclude,
            moved_to: &moved_to,
            touched: BTreeSet::new(),
            unsettled: HashSet::new(),
            seq: 0,
        };
        // Changes are in path order, so what lies under a path follows it at
        // once: `skip` is the path whose subtree is dealt with (moved with
        // it, or left with it as a conflict).
        let mut skip: Option<(&Path, bool)> = None;
        for (path, state) in changes {
            if excluded(path, &exclude) {
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
            match cx.revert_one(path, state.as_ref(), done)? {
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

/// An undo in progress.
struct Revert<'a> {
    snap: &'a Snapshot,
    /// The snapshot's entries (before the run), skipped ones left out.
    index: &'a HashMap<&'a Path, &'a Entry>,
    /// `after.json`: every path the run changed, as it left it.
    after: &'a HashMap<&'a Path, Option<&'a State>>,
    exclude: &'a [PathBuf],
    moved_to: &'a Path,
    /// Directories whose mtime the undo moved, to be put back at the end.
    touched: BTreeSet<PathBuf>,
    /// Conflicts and the directories holding them: their times stay.
    unsettled: HashSet<PathBuf>,
    seq: u64,
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

    fn revert_one(
        &mut self,
        path: &Path,
        state: Option<&State>,
        done: &mut Restored,
    ) -> Result<Outcome, SnapshotError> {
        let snap = self.snap;
        let Some(root) = snap.root_of(path) else {
            return Ok(Outcome::Conflict);
        };
        let before = self.index.get(path).copied();
        let root_dev = lstat(root)?.map_or(0, |m| m.dev());
        // A parent turned into a file since makes the path as good as gone.
        let now = match fs::symlink_metadata(path) {
            Ok(m) => Some(m),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => None,
            Err(e) => return Err(io_err("inspect", path)(e)),
        };
        if !still(state, now.as_ref(), root_dev) {
            return Ok(Outcome::Conflict);
        }
        if state.is_some_and(|s| s.kind.is_skipped()) {
            // Never touched: left as the run made it. Where the snapshot had
            // something else, that is not put back, which is a conflict.
            return Ok(if before.is_some() {
                Outcome::Conflict
            } else {
                Outcome::LeftAlone
            });
        }
        if state.is_none() && !self.make_parents(path, root, done)? {
            return Ok(Outcome::Conflict);
        }
        if snap.symlink_above(path)? {
            return Ok(Outcome::Conflict);
        }
        let outcome = match (before, state) {
            (None, None) => Outcome::Done,
            (None, Some(s)) => {
                if s.kind == Kind::Dir && !self.only_the_runs(path)? {
                    return Ok(Outcome::ConflictOnlyHere);
                }
                move_to_quarantine(path, self.moved_to)?;
                done.quarantined += 1;
                self.touch(path, false);
                Outcome::DoneWithAllBelow
            }
            (Some(b), Some(s)) if b.kind == Kind::Dir && s.kind == Kind::Dir => {
                if !reset_dir(b, s)? {
                    return Ok(Outcome::Conflict);
                }
                done.restored += 1;
                self.touch(path, true);
                Outcome::Done
            }
            (Some(b), state) => {
                // Something to put back; whatever is there now is moved to
                // quarantine first, a directory only if all in it is the run's.
                let moves_a_dir = state.is_some_and(|s| s.kind == Kind::Dir);
                if moves_a_dir && !self.only_the_runs(path)? {
                    return Ok(Outcome::ConflictOnlyHere);
                }
                let placed = self.put_back(b, state.is_some(), done)?;
                if placed {
                    done.restored += 1;
                    self.touch(path, b.kind == Kind::Dir);
                }
                match (placed, moves_a_dir) {
                    (true, true) => Outcome::DoneWithAllBelow,
                    (true, false) => Outcome::Done,
                    // Someone made something there meanwhile: it stays.
                    (false, _) => Outcome::Conflict,
                }
            }
        };
        Ok(outcome)
    }

    /// Makes sure every directory from `path`'s root down to its parent is
    /// there, on the root's filesystem, recreating missing ones from the
    /// snapshot. False if one is in the way or cannot be recreated.
    fn make_parents(
        &mut self,
        path: &Path,
        root: &Path,
        done: &mut Restored,
    ) -> Result<bool, SnapshotError> {
        let mut chain: Vec<&Path> = path
            .ancestors()
            .skip(1)
            .take_while(|a| a.starts_with(root))
            .collect();
        chain.reverse();
        // The root's own parent is not the snapshot's to make.
        let top = chain.first().copied().unwrap_or(path);
        match top.parent() {
            Some(p) if lstat(p)?.is_some_and(|m| m.is_dir()) => {}
            _ => return Ok(false),
        }
        let mut dev = None;
        for a in chain {
            let meta = match lstat(a)? {
                Some(m) => m,
                None => {
                    let Some(e) = self.index.get(a).copied().filter(|e| e.kind == Kind::Dir) else {
                        return Ok(false);
                    };
                    if !create_dir(e)? {
                        return Ok(false);
                    }
                    done.restored += 1;
                    self.touch(a, true);
                    match lstat(a)? {
                        Some(m) => m,
                        None => return Ok(false),
                    }
                }
            };
            if !meta.is_dir() || dev.is_some_and(|d| d != meta.dev()) {
                return Ok(false);
            }
            dev.get_or_insert(meta.dev());
        }
        Ok(true)
    }

    /// Whether everything in the directory at `dir` is the run's, still as
    /// the run left it, and nothing excluded is in it: only then may it be
    /// moved to quarantine whole.
    fn only_the_runs(&self, dir: &Path) -> Result<bool, SnapshotError> {
        if self.exclude.iter().any(|x| x.starts_with(dir)) {
            return Ok(false);
        }
        let Some(meta) = lstat(dir)? else {
            return Ok(false);
        };
        let dev = meta.dev();
        let mut clean = true;
        walk(&[dir.to_path_buf()], &[], |p, meta, kind| {
            if p == dir {
                return Ok(true);
            }
            let ours = !self.index.contains_key(p)
                && kind != Kind::Skipped(Why::Mount)
                && self
                    .after
                    .get(p)
                    .is_some_and(|s| s.is_some_and(|s| s.is(meta, dev)));
            clean &= ours;
            Ok(ours)
        })?;
        Ok(clean)
    }

    /// Puts `old` back at its path; with `replace`, first moves what is
    /// there to quarantine. Never overwrites: false if something took the
    /// path meanwhile.
    fn put_back(
        &mut self,
        old: &Entry,
        replace: bool,
        done: &mut Restored,
    ) -> Result<bool, SnapshotError> {
        let path = &old.path;
        match old.kind {
            Kind::File => {
                // The saved copy is checked before anything is moved.
                let (tmp, file) = self.snap.write_temp(old, &mut self.seq)?;
                let placed = self.link_into_place(&tmp, path, replace, done);
                let removed = fs::remove_file(&tmp).map_err(io_err("remove", &tmp));
                let placed = placed?;
                removed?;
                if placed {
                    // Through the descriptor: the path could be swapped.
                    set_attrs(&file, path, old)?;
                    file.sync_all().map_err(io_err("sync", path))?;
                }
                Ok(placed)
            }
            Kind::Symlink => {
                let Some(target) = &old.target else {
                    return Err(SnapshotError::Unsafe {
                        path: path.clone(),
                        why: "its saved link target is missing",
                    });
                };
                let tmp = loop {
                    let tmp = self.snap.temp_name(path, &mut self.seq)?;
                    match symlink(target, &tmp) {
                        Ok(()) => break tmp,
                        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                        Err(e) => return Err(io_err("create the link", &tmp)(e)),
                    }
                };
                let placed = lchown(&tmp, Some(old.uid), Some(old.gid))
                    .map_err(io_err("set the owner of", &tmp))
                    .and_then(|()| self.link_into_place(&tmp, path, replace, done));
                let removed = fs::remove_file(&tmp).map_err(io_err("remove", &tmp));
                let placed = placed?;
                removed?;
                Ok(placed)
            }
            Kind::Dir => {
                if replace {
                    move_to_quarantine(path, self.moved_to)?;
                    done.quarantined += 1;
                }
                create_dir(old)
            }
            Kind::Skipped(_) => Ok(false),
        }
    }

    /// Moves what is at `path` to quarantine (with `replace`), then links
    /// `tmp` there; a link, unlike a rename, never replaces what someone put
    /// there meanwhile.
    fn link_into_place(
        &self,
        tmp: &Path,
        path: &Path,
        replace: bool,
        done: &mut Restored,
    ) -> Result<bool, SnapshotError> {
        if replace {
            move_to_quarantine(path, self.moved_to)?;
            done.quarantined += 1;
        }
        match fs::hard_link(tmp, path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(io_err("put back", path)(e)),
        }
    }

    /// Puts back the mtimes of the directories the undo changed, deepest
    /// first (every move and link above moved them), except where a
    /// conflict was left.
    fn put_back_dir_times(&self) -> Result<(), SnapshotError> {
        for d in self.touched.iter().rev() {
            if excluded(d, self.exclude) || self.unsettled.contains(d) {
                continue;
            }
            let Some(e) = self.index.get(d.as_path()).filter(|e| e.kind == Kind::Dir) else {
                continue;
            };
            if !lstat(d)?.is_some_and(|m| m.is_dir()) {
                continue;
            }
            open_dir(d)?
                .set_times(FileTimes::new().set_modified(e.mtime()?))
                .map_err(io_err("set the mtime of", d))?;
        }
        Ok(())
    }
}

/// Creates the directory `e` records (private until its owner and mode are
/// set); false if something is there already.
fn create_dir(e: &Entry) -> Result<bool, SnapshotError> {
    match DirBuilder::new().mode(0o700).create(&e.path) {
        Ok(()) => {}
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => return Ok(false),
        Err(err) => return Err(io_err("create", &e.path)(err)),
    }
    let dir = open_dir(&e.path)?;
    fchown(&dir, Some(e.uid), Some(e.gid)).map_err(io_err("set the owner of", &e.path))?;
    dir.set_permissions(Permissions::from_mode(e.mode))
        .map_err(io_err("set the mode of", &e.path))?;
    Ok(true)
}

/// Puts back the owner and mode of a directory the run changed, if it is
/// still the directory the run left (`s`).
fn reset_dir(old: &Entry, s: &State) -> Result<bool, SnapshotError> {
    let dir = open_dir(&old.path)?;
    let m = dir.metadata().map_err(io_err("inspect", &old.path))?;
    if (m.dev(), m.ino()) != (s.dev, s.ino) {
        return Ok(false);
    }
    fchown(&dir, Some(old.uid), Some(old.gid)).map_err(io_err("set the owner of", &old.path))?;
    dir.set_permissions(Permissions::from_mode(old.mode))
        .map_err(io_err("set the mode of", &old.path))?;
    Ok(true)
}

impl Snapshot {
    /// A fresh name beside `path` for a file being put in place.
    fn temp_name(&self, path: &Path, seq: &mut u64) -> Result<PathBuf, SnapshotError> {
        let parent = path.parent().ok_or_else(|| SnapshotError::Unsafe {
            path: path.to_path_buf(),
            why: "it has no parent directory",
        })?;
        *seq += 1;
        let short = self.id.get(..8).unwrap_or(&self.id);
        Ok(parent.join(format!(".aromba-undo-{short}-{seq}")))
    }

    /// Writes the blob of `old` to a new private file beside its path,
    /// checking size and hash; on any failure nothing is left behind.
    fn write_temp(&self, old: &Entry, seq: &mut u64) -> Result<(PathBuf, File), SnapshotError> {
        let Some((n, sha)) = &old.blob else {
            return Err(SnapshotError::CorruptBlob(old.path.clone()));
        };
        let blob = self.blob_path(*n);
        let mut src = OpenOptions::new()
            .read(true)
            .custom_flags(FILE_FLAGS)
            .open(&blob)
            .map_err(io_err("open", &blob))?;
        let (tmp, mut dst) = loop {
            let tmp = self.temp_name(&old.path, seq)?;
            // create_new: never opens (or follows) anything already there.
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)
            {
                Ok(f) => break (tmp, f),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(io_err("create", &tmp)(e)),
            }
        };
        let written = (|| {
            let (copied, got) = copy_hashed(&mut src, &blob, &mut dst, &tmp, u64::MAX)?;
            if copied != old.size || got != *sha {
                return Err(SnapshotError::CorruptBlob(old.path.clone()));
            }
            dst.sync_all().map_err(io_err("sync", &tmp))
        })();
        match written {
            Ok(()) => Ok((tmp, dst)),
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                Err(e)
            }
        }
    }
}
