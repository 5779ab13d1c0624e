//! Snapshots of a red chore's touches: taken before it runs, sealed after
//! it (which gives the receipt its diff), and restored by `undo` for
//! [`KEEP_S`] seconds. Taking, sealing and restoring need `/proc` (see
//! `safe_dir`), and refuse to start without it; walks and copies go at
//! most 256 directories below a root.
//!
//! On disk a snapshot is the directory `<store>/<id>/` (0700, root's):
//!
//! - `blobs/<n>` (0600): the bytes of the n-th regular file, as read, its
//!   holes kept as holes.
//! - `manifest.json` (0600), written through `manifest.json.tmp`, fsync'd,
//!   then renamed, so a snapshot with a manifest is whole:
//!
//!   ```text
//!   {"format": 2, "id": "<32 lower hex>", "chore": "apt-clean",
//!    "created_at": 1700000000, "roots": ["/var/cache/apt"],
//!    "exclude": ["/var/lib/aromba-warden/state"],
//!    "entries": [
//!     {"path": "/var/cache/apt", "kind": "dir", "mode": 493, "uid": 0,
//!      "gid": 0, "mtime": 1700000000, "mtime_ns": 0, "ctime": 1700000000,
//!      "ctime_ns": 0, "dev": 2049, "ino": 131073},
//!     {"path": "/var/cache/apt/x.bin", "kind": "file", "mode": 420, ...,
//!      "size": 12, "blob": 0, "sha256": "<64 lower hex>"},
//!     {"path": "/var/cache/apt/l", "kind": "symlink", "uid": 0, "gid": 0,
//!      ..., "target": "x.bin"},
//!     {"path": "/var/cache/apt/p", "kind": "skipped", "why": "fifo"}]}
//!   ```
//!
//!   Paths are absolute, sorted parent first; a path or link target that is
//!   not UTF-8 is `{"hex": "<its bytes>"}`. `mode` is the permission bits
//!   (with setuid, setgid and sticky). A root with no entry of its own did
//!   not exist; a root's entry carries the `dev` and `ino` that `restore`
//!   insists on finding again. `why` is `fifo`, `socket`, `device` or
//!   `mount` (another filesystem mounted below a root): such entries are
//!   never copied, compared or touched. Nothing at or under an `exclude`d
//!   path (the Warden's own directories, the cage's hidden paths, the
//!   quarantine) or the store is recorded, compared or touched.
//! - `meta.json` (0600): `{"format", "id", "chore", "created_at", "roots",
//!   "sealed"}`, written after the manifest and again by [`Snapshot::seal`],
//!   so [`peek`] can answer without reading a manifest of up to 256 MiB.
//! - `after.json` (0600), written by [`Snapshot::seal`] right after the run
//!   (through `after.json.tmp`, fsync'd, renamed): every path the run added,
//!   removed or changed, as the run left it:
//!
//!   ```text
//!   {"format": 2, "id": "<32 lower hex>", "changes": [
//!     {"path": "/var/cache/apt/x.bin", "after": "absent"},
//!     {"path": "/var/cache/apt/y", "after": {"kind": "file", "size": 3,
//!      "mtime": 1700000100, "mtime_ns": 0, "mode": 420, "uid": 0, "gid": 0,
//!      "ctime": 1700000100, "ctime_ns": 0, "ino": 131080, "dev": 2049}}]}
//!   ```
//!
//!   `kind` is `file`, `dir`, `symlink`, `fifo`, `socket`, `device` or
//!   `mount`. `"after": "unknown"` is a path the seal could not read (a
//!   directory swapped while walked, twice, as the seal walks again once
//!   when it meets one; EACCES, EMFILE; more than 256 directories deep):
//!   nothing below it is recorded, and undo leaves it, and all below it,
//!   alone as a conflict. `"unlisted": [{"path": "/var/cache/apt", "count":
//!   40}]` names where new entries were too many to list (`count` null: not
//!   all were reached); undo leaves those. Every change to an entry of the
//!   snapshot is listed, however many. A snapshot without `after.json` (its
//!   seal failed, or the Warden stopped during the run) is undone by what is
//!   missing alone (see [`Snapshot::restore`]).
//! - `undoing`: created (never overwritten) when an undo starts, removed
//!   when it ends well; one left behind means an undo stopped part-way, and
//!   no other undo of the snapshot runs while it is there.
//! - `undone`: written once the snapshot has been restored.
//!
//! Undo reverts only what the run did: each path in `after.json` is put
//! back only if it is still exactly as the run left it (same kind, inode,
//! owner and mode, and for all but directories the same size, mtime and
//! ctime; the ctime cannot be set from user space, so even a rewrite that
//! resets the mtime shows). Every path is checked before anything is done,
//! so two links to one inode (whose ctime moves when either is moved) are
//! not taken for changed. Anything else is left alone and counted as a
//! conflict, and so is a path whose directory is gone unless the run itself
//! removed it. Nothing is ever deleted: what the run created, and what
//! stands where a path is put back, is moved to the quarantine (into
//! `<quarantine>/<id>-undo-<8 random hex>/`, made afresh for each undo), and
//! a directory the run created is moved whole only if everything in it is
//! the run's.
//!
//! Entries are compared, for the diff, by kind, owner and mode, and: a file
//! by size, mtime, ctime and inode; a symlink by target, ctime and inode; a
//! directory by inode only besides, since its size and times move with every
//! entry added or removed in it, which are counted themselves. Not
//! restorable without `unsafe` (no `lutimes`): a symlink's own mtime. Hard
//! links come back as separate files.
//!
//! Device numbers can change across reboots: a root found with its
//! recorded inode but another device number is taken for the same
//! directory, and every recorded entry of that root is compared with the
//! new number.
//!
//! Nothing under a root is acted on by path (see [`safe_dir`]): each root's
//! parent is opened from `/` one component at a time without following a
//! symlink, and every directory below it is opened through its parent's
//! descriptor (`O_DIRECTORY | O_NOFOLLOW`) and checked by device and inode
//! against what the snapshot or `after.json` has there; every listing,
//! open, rename, link, unlink, mkdir and chown then goes through those
//! descriptors. So a directory inside a root swapped for a symlink (or for
//! another directory) at any moment cannot make the Warden read, write,
//! chown, move or remove anything outside the roots: the swap is either
//! seen and left as a conflict, or has no effect on a directory already
//! opened. Files are opened with `O_NOFOLLOW | O_NONBLOCK` and checked with
//! `fstat` against what was listed, so a path swapped for a symlink, fifo or
//! device cannot redirect or block the Warden, and re-checked after they
//! are copied, so a file changing meanwhile is copied again or refused.
//!
//! The quarantine must be a directory of the Warden's (no symlink on its
//! path, owned by the Warden's user, not writable by group or others).
//! Across filesystems, what goes there is first renamed into a private
//! directory made beside it (0700, out of everyone's reach), copied from
//! there, and removed from there only as far as it is unchanged since the
//! copy; what appeared or changed meanwhile is copied again, never lost.
//! A move that would leave the quarantine's filesystem with less than the
//! larger of 1 GiB and a tenth of it free is refused, and stays whole in
//! the private directory. Each file is copied only up to the size it had
//! when opened; one that changed while copied, and every fifo, socket and
//! device node (never unlinked), stay in the private directory, and where
//! is reported ([`Restored::left_in_staging`]).

#![forbid(unsafe_code)]

mod diff;
mod entry;
mod error;
mod manifest;
mod quarantine;
mod restore;
pub(crate) mod safe_dir;
mod walk;

pub use diff::{Diff, MAX_LISTED, SealLimits, Unlisted};
pub use error::SnapshotError;
pub use quarantine::KeepFree;
pub use restore::Restored;

use entry::{Entry, Kind, nanos};
use error::io_err;
use manifest::{check_id, is_plain_absolute, read_manifest, read_meta};
use safe_dir::{Chain, Dir, Expect, Ids, Reached, Sub, check_proc};
use std::collections::HashMap;
use std::fs::{self, DirBuilder, File, Metadata};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use walk::{absolute, copy_sparse, create_private, excluded, lstat, sync_dir, walk};

/// How long a snapshot can be undone, in seconds.
pub const KEEP_S: u64 = 7 * 86_400;

const MAX_ENTRIES: usize = 200_000;
/// A snapshot directory without a manifest this old is a take that died.
const HALF_TAKEN_S: u64 = 86_400;
const MAX_EXAMPLES: usize = 20;
/// 200 000 entries at well under a KiB each; anything bigger is not ours.
const MAX_MANIFEST_BYTES: u64 = 256 << 20;
const MAX_META_BYTES: u64 = 64 << 10;
const FORMAT: u64 = 2;
const MANIFEST: &str = "manifest.json";
const MANIFEST_TMP: &str = "manifest.json.tmp";
const META: &str = "meta.json";
const META_TMP: &str = "meta.json.tmp";
const AFTER: &str = "after.json";
const AFTER_TMP: &str = "after.json.tmp";
const UNDOING: &str = "undoing";
const UNDONE: &str = "undone";
const BLOBS: &str = "blobs";
const PERM_BITS: u32 = 0o7777;

/// One snapshot, as taken or loaded.
#[derive(Debug)]
pub struct Snapshot {
    pub id: String,
    pub chore: String,
    pub created_at: u64,
    /// The roots as recorded: cleaned, sorted, none inside another.
    pub roots: Vec<PathBuf>,
    /// What was left out (besides the store): cleaned and sorted.
    exclude: Vec<PathBuf>,
    store: PathBuf,
    dir: PathBuf,
    /// In path order, parents before children.
    entries: Vec<Entry>,
}

/// What [`peek`] reads: enough to propose an undo.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta {
    pub id: String,
    pub chore: String,
    pub created_at: u64,
    pub roots: Vec<PathBuf>,
}

/// How much a take may hold.
struct Bounds {
    max_bytes: u64,
    max_entries: usize,
}

/// Copies every entry under `roots` into `store/<id>/` (see the module
/// doc), leaving out everything at or under `exclude` (absolute paths) and
/// the store. Symlinks are recorded, not followed; fifos, sockets, devices
/// and other filesystems mounted below a root are recorded as skipped.
/// Refuses a root with a symlink anywhere in its path, a root that is
/// excluded or in the store, regular files taking more than `max_bytes` on
/// disk (the caller's measure of free space; counted by allocated blocks,
/// since holes are copied as holes, and each copy's data bounded by what is
/// left), more than 200 000 entries, and an `id` that is not 32 lower-case
/// hex characters.
pub fn take(
    store: &Path,
    id: &str,
    chore: &str,
    roots: &[PathBuf],
    exclude: &[PathBuf],
    now: u64,
    max_bytes: u64,
) -> Result<Snapshot, SnapshotError> {
    let bounds = Bounds {
        max_bytes,
        max_entries: MAX_ENTRIES,
    };
    take_bounded(store, id, chore, roots, exclude, now, &bounds)
}

fn take_bounded(
    store: &Path,
    id: &str,
    chore: &str,
    roots: &[PathBuf],
    exclude: &[PathBuf],
    now: u64,
    bounds: &Bounds,
) -> Result<Snapshot, SnapshotError> {
    check_id(id)?;
    check_proc()?;
    let roots = normalize_roots(roots)?;
    let exclude = normalize_excludes(exclude)?;
    let store = absolute(store)?;
    for r in &roots {
        if r.starts_with(&store) {
            return Err(SnapshotError::BadRoot {
                path: r.clone(),
                why: "it is the snapshot store or inside it",
            });
        }
        if excluded(r, &exclude) {
            return Err(SnapshotError::BadRoot {
                path: r.clone(),
                why: "it is excluded from snapshots (the Warden's own, hidden from chores, or the quarantine)",
            });
        }
        // As root, a symlink anywhere in the path could point the snapshot,
        // and later the undo, anywhere at all.
        if behind_a_symlink(r)? {
            return Err(SnapshotError::BadRoot {
                path: r.clone(),
                why: "a component of the path is a symlink",
            });
        }
    }
    // A store under a root would otherwise copy itself into itself.
    let mut skip = exclude.clone();
    skip.push(store.clone());
    let mut entries = Vec::new();
    walk(&roots, &skip, |at| {
        if entries.len() >= bounds.max_entries {
            return Err(SnapshotError::TooManyEntries {
                limit: bounds.max_entries,
            });
        }
        entries.push(Entry::of(at.path, at.meta, at.kind, at.target()?));
        Ok(true)
    })?;
    // What the copies will take on disk: holes are copied as holes, so a
    // sparse file counts by its allocated blocks, not its length.
    let needed = entries
        .iter()
        .filter(|e| e.kind == Kind::File)
        .fold(0u64, |sum, e| sum.saturating_add(e.allocated));
    if needed > bounds.max_bytes {
        return Err(SnapshotError::TooBig {
            needed,
            allowed: bounds.max_bytes,
        });
    }

    match lstat(&store)? {
        None => DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&store)
            .map_err(io_err("create", &store))?,
        Some(m) if m.is_dir() => {}
        Some(_) => {
            return Err(SnapshotError::Unsafe {
                path: store,
                why: "the snapshot store is not a directory",
            });
        }
    }
    let dir = store.join(id);
    // Not recursive: an existing directory of that id is refused.
    DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(io_err("create", &dir))?;
    let mut snapshot = Snapshot {
        id: id.to_string(),
        chore: chore.to_string(),
        created_at: now,
        roots,
        exclude,
        store,
        dir,
        entries,
    };
    if let Err(e) = snapshot.fill(bounds.max_bytes) {
        // Best effort: without a manifest, `purge` removes it a day later.
        let _ = fs::remove_dir_all(&snapshot.dir);
        return Err(e);
    }
    Ok(snapshot)
}

/// Whether `root` is a symlink or has one in any component (opened from `/`
/// one component at a time, none followed).
fn behind_a_symlink(root: &Path) -> Result<bool, SnapshotError> {
    let (Some(parent), Some(name)) = (root.parent(), root.file_name()) else {
        return Ok(false);
    };
    Ok(match Dir::open_path(parent)? {
        Sub::Symlink => true,
        Sub::Dir(d) => d.lstat(name)?.is_some_and(|m| m.file_type().is_symlink()),
        Sub::Missing | Sub::NotDir | Sub::Elsewhere => false,
    })
}

/// Roots cleaned (no trailing `/` or `.`), sorted, and without any root
/// inside another, so no entry is recorded twice. The whole filesystem is
/// no root.
fn normalize_roots(roots: &[PathBuf]) -> Result<Vec<PathBuf>, SnapshotError> {
    if roots.is_empty() {
        return Err(SnapshotError::BadRoot {
            path: PathBuf::new(),
            why: "a snapshot needs at least one path",
        });
    }
    let mut clean = Vec::with_capacity(roots.len());
    for r in roots {
        if !is_plain_absolute(r) {
            return Err(SnapshotError::BadRoot {
                path: r.clone(),
                why: "the path is not absolute or has `..`",
            });
        }
        let r: PathBuf = r.components().collect();
        if r.parent().is_none() {
            return Err(SnapshotError::BadRoot {
                path: r,
                why: "the whole filesystem cannot be snapshotted",
            });
        }
        clean.push(r);
    }
    clean.sort();
    let mut kept: Vec<PathBuf> = Vec::with_capacity(clean.len());
    for r in clean {
        if !kept.iter().any(|k| r.starts_with(k)) {
            kept.push(r);
        }
    }
    Ok(kept)
}

/// Excluded paths cleaned, sorted and without duplicates.
fn normalize_excludes(exclude: &[PathBuf]) -> Result<Vec<PathBuf>, SnapshotError> {
    let mut clean = Vec::with_capacity(exclude.len());
    for x in exclude {
        if !is_plain_absolute(x) {
            return Err(SnapshotError::BadRoot {
                path: x.clone(),
                why: "an excluded path is not absolute or has `..`",
            });
        }
        clean.push(x.components().collect::<PathBuf>());
    }
    clean.sort();
    clean.dedup();
    Ok(clean)
}

impl Snapshot {
    fn blob_path(&self, n: u64) -> PathBuf {
        self.dir.join(BLOBS).join(n.to_string())
    }

    /// What is never recorded, compared or touched: the caller's exclusions
    /// and the store.
    fn skipped_paths(&self) -> Vec<PathBuf> {
        let mut x = self.exclude.clone();
        x.push(self.store.clone());
        x
    }

    /// The root an entry path lies under.
    fn root_of(&self, path: &Path) -> Option<&Path> {
        self.roots
            .iter()
            .find(|r| path.starts_with(r))
            .map(PathBuf::as_path)
    }

    /// Copies the blobs, then writes the manifest, then `meta.json`. Each
    /// file is opened through its directory's descriptor, reached from its
    /// root's parent by a [`Chain`] checking every directory against the
    /// walk's entries, and must be the very file the walk listed.
    fn fill(&mut self, max_bytes: u64) -> Result<(), SnapshotError> {
        let blobs = self.dir.join(BLOBS);
        DirBuilder::new()
            .mode(0o700)
            .create(&blobs)
            .map_err(io_err("create", &blobs))?;
        let dirs: HashMap<PathBuf, Ids> = self
            .entries
            .iter()
            .filter(|e| e.kind == Kind::Dir)
            .map(|e| (e.path.clone(), (e.dev, e.ino)))
            .collect();
        let expect = |p: &Path| dirs.get(p).map_or(Expect::Unknown, |i| Expect::Is(*i));
        let mut chain: Option<(PathBuf, Chain)> = None;
        let mut total = 0u64;
        let mut next = 0u64;
        for i in 0..self.entries.len() {
            let Some(e) = self.entries.get(i).filter(|e| e.kind == Kind::File) else {
                continue;
            };
            let path = e.path.clone();
            let want = (e.dev, e.ino);
            let changed = || SnapshotError::Changed(path.clone());
            let (Some(root), Some(parent), Some(name)) =
                (self.root_of(&path), path.parent(), path.file_name())
            else {
                return Err(changed());
            };
            if chain.as_ref().is_none_or(|(r, _)| r != root) {
                let base = root.parent().ok_or_else(changed)?;
                let c = Chain::at(base)?.ok_or_else(changed)?;
                chain = Some((root.to_path_buf(), c));
            }
            let Some((_, c)) = chain.as_mut() else {
                return Err(changed());
            };
            let Reached::Dir(dir) = c.reach(parent, &expect)? else {
                return Err(changed());
            };
            // Not through a symlink, not blocking on a fifo or device swapped
            // in since the walk, and only the very file the walk listed.
            let (mut src, meta) = dir.open_listed(name, want)?;
            let blob = self.blob_path(next);
            let mut dst = create_private(&blob)?;
            // The copy may write no more data than the room left; what it
            // took on disk (holes are none) is what counts after it.
            let room = max_bytes.saturating_sub(total);
            let (copied, sha, meta) =
                copy_stable(&mut src, meta, &path, &mut dst, &blob, room, |_| {})?;
            let taken = dst
                .metadata()
                .map_err(io_err("inspect", &blob))?
                .blocks()
                .saturating_mul(512);
            total = total.saturating_add(taken);
            if total > max_bytes {
                return Err(SnapshotError::TooBig {
                    needed: total,
                    allowed: max_bytes,
                });
            }
            dst.sync_all().map_err(io_err("sync", &blob))?;
            let Some(e) = self.entries.get_mut(i) else {
                continue;
            };
            // Record the file as copied, not as listed a moment earlier.
            e.mode = meta.mode() & PERM_BITS;
            e.uid = meta.uid();
            e.gid = meta.gid();
            e.mtime = meta.mtime();
            e.mtime_ns = nanos(meta.mtime_nsec());
            e.ctime = meta.ctime();
            e.ctime_ns = nanos(meta.ctime_nsec());
            e.size = copied;
            e.blob = Some((next, sha));
            next += 1;
        }
        sync_dir(&blobs)?;
        self.write_manifest()?;
        self.write_meta(false)
    }

    /// Deletes the snapshot (a run that changed nothing needs no undo).
    pub fn discard(self) -> Result<(), SnapshotError> {
        fs::remove_dir_all(&self.dir).map_err(io_err("remove", &self.dir))
    }
}

/// Reads a snapshot back, refusing anything a snapshot of ours could not
/// be: a bad id, an unreadable manifest, a root or excluded path that is not
/// absolute or has `..`, an entry that is not absolute, has `..`, lies
/// outside every root or inside an excluded path, or sits below anything but
/// a directory of the snapshot.
pub fn load(store: &Path, id: &str) -> Result<Snapshot, SnapshotError> {
    check_id(id)?;
    let store = absolute(store)?;
    let dir = store.join(id);
    read_manifest(store, dir, id)
}

/// What an undo of snapshot `id` would be about, read from its small
/// `meta.json` alone. Refuses a snapshot that is undone, being undone (or
/// whose undo stopped part-way), or older than [`KEEP_S`] at `now`.
/// `restore` checks all of this again, and more.
pub fn peek(store: &Path, id: &str, now: u64) -> Result<Meta, SnapshotError> {
    check_id(id)?;
    let dir = absolute(store)?.join(id);
    if lstat(&dir.join(UNDONE))?.is_some() {
        return Err(SnapshotError::AlreadyUndone(id.to_string()));
    }
    if lstat(&dir.join(UNDOING))?.is_some() {
        return Err(SnapshotError::UnderWay(id.to_string()));
    }
    // A snapshot never sealed can still be undone (see `restore`): its
    // copies are the only ones of what the run removed.
    let (meta, _sealed) = read_meta(&dir, id)?;
    if now.saturating_sub(meta.created_at) > KEEP_S {
        return Err(SnapshotError::Expired(id.to_string()));
    }
    Ok(meta)
}

/// Removes snapshots older than [`KEEP_S`] at `now` (by the `created_at` of
/// their `meta.json`), and directories without a manifest (takes that died)
/// older than a day by mtime; one whose `meta.json` cannot be read goes
/// after [`KEEP_S`] by mtime. Anything in `store` not named like a snapshot
/// is left alone, and so is a snapshot with an `undoing` claim less than a
/// day old: an undo may be reading its blobs.
pub fn purge(store: &Path, now: u64) -> Result<Vec<String>, SnapshotError> {
    let rd = match fs::read_dir(store) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err("list", store)(e)),
    };
    let mut purged = Vec::new();
    for item in rd {
        let item = item.map_err(io_err("list", store))?;
        let name = item.file_name();
        let Some(id) = name.to_str() else {
            continue;
        };
        if check_id(id).is_err() {
            continue;
        }
        let path = item.path();
        let Some(meta) = lstat(&path)? else {
            continue;
        };
        if !meta.is_dir() {
            continue;
        }
        if let Some(claim) = lstat(&path.join(UNDOING))?
            && now.saturating_sub(u64::try_from(claim.mtime()).unwrap_or(0)) < HALF_TAKEN_S
        {
            continue;
        }
        let age_by_mtime = now.saturating_sub(u64::try_from(meta.mtime()).unwrap_or(0));
        let expired = match read_meta(&path, id) {
            Ok((m, _)) => now.saturating_sub(m.created_at) > KEEP_S,
            Err(_) => match lstat(&path.join(MANIFEST))? {
                None => age_by_mtime > HALF_TAKEN_S,
                Some(_) => age_by_mtime > KEEP_S,
            },
        };
        if expired {
            fs::remove_dir_all(&path).map_err(io_err("remove", &path))?;
            purged.push(id.to_string());
        }
    }
    purged.sort();
    Ok(purged)
}

/// Copies `src` (whose `fstat` was `before`) into `dst` sparse (see
/// [`copy_sparse`]), writing at most `room` bytes of data, then `fstat`s it
/// again: if its size, mtime or ctime moved during the copy, the copy is
/// torn, and is made once more from the start; if it moves again, the file
/// is refused ([`SnapshotError::Changed`]). Returns the bytes copied (holes
/// included), their hash, and the file's `fstat` as copied. `between` runs
/// after each copy, before the second `fstat` (tests change the file there).
fn copy_stable(
    src: &mut File,
    before: Metadata,
    shown: &Path,
    dst: &mut File,
    dst_path: &Path,
    room: u64,
    mut between: impl FnMut(u32),
) -> Result<(u64, String, Metadata), SnapshotError> {
    let same = |a: &Metadata, b: &Metadata| {
        (
            a.size(),
            a.mtime(),
            a.mtime_nsec(),
            a.ctime(),
            a.ctime_nsec(),
        ) == (
            b.size(),
            b.mtime(),
            b.mtime_nsec(),
            b.ctime(),
            b.ctime_nsec(),
        )
    };
    let mut before = before;
    for attempt in 0..2 {
        if attempt > 0 {
            dst.set_len(0).map_err(io_err("write", dst_path))?;
        }
        let c = copy_sparse(src, shown, dst, dst_path, before.size(), room)?;
        between(attempt);
        let after = src.metadata().map_err(io_err("inspect", shown))?;
        if same(&before, &after) && c.len == after.size() {
            return Ok((c.len, c.sha256, after));
        }
        before = after;
    }
    Err(SnapshotError::Changed(shown.to_path_buf()))
}

#[cfg(test)]
mod tests;
