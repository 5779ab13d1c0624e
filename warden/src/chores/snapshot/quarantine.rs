//! Moving a path aside into the quarantine, never deleting it: by rename
//! when the quarantine is on the same filesystem, and otherwise through a
//! private staging directory: copied from there, and removed from there
//! only as far as it is unchanged since the copy.
//!
//! The quarantine given to an undo is a base directory that must be the
//! Warden's: no symlink in any component of its path, owned by the Warden's
//! user, not writable by group or others (it is made, 0700, if missing and
//! its parent is there). Each undo makes its own `<id>-undo-<8 random hex>`
//! in it (never an existing one), and everything below is made and reached
//! through open descriptors.

#![forbid(unsafe_code)]

use super::entry::{Kind, Why};
use super::error::{SnapshotError, io_err};
use super::safe_dir::{Dir, Ids, Staging, Sub, ids, our_uid, random_hex, set_attrs_fd};
use super::walk::copy_hashed;
use std::ffi::{OsStr, OsString};
use std::fs::Metadata;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path};

/// The name a thing is given inside its staging directory.
const STAGED: &str = "staged";
/// How many times what is left after a cross-filesystem copy is copied
/// again before the move gives up (leaving it, whole, in staging).
const ROUNDS: u32 = 3;

/// The quarantine of one undo.
pub(super) struct Quarantine {
    base: Dir,
    id: String,
    /// `<base>/<id>-undo-<hex>/`, made at the first move.
    undo: Option<Dir>,
}

impl Quarantine {
    /// Opens (or makes, 0700, if missing) the base directory `path` and
    /// checks it is the Warden's; refuses it otherwise.
    pub(super) fn open(path: &Path, id: &str) -> Result<Quarantine, SnapshotError> {
        let refuse = |why: &'static str| SnapshotError::BadQuarantine {
            path: path.to_path_buf(),
            why,
        };
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(refuse("it is not a directory the undo can make its own in"));
        };
        let parent = match Dir::open_path(parent)? {
            Sub::Dir(d) => d,
            Sub::Symlink => return Err(refuse("a component of its path is a symlink")),
            Sub::Missing => return Err(refuse("its parent directory does not exist")),
            Sub::NotDir | Sub::Elsewhere => {
                return Err(refuse("a component of its path is not a directory"));
            }
        };
        let mut sub = parent.child_dir(name)?;
        if matches!(sub, Sub::Missing) {
            match parent.mkdir(name, 0o700) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io_err("create", path)(e)),
            }
            sub = parent.child_dir(name)?;
        }
        let base = match sub {
            Sub::Dir(d) => d,
            Sub::Symlink => return Err(refuse("it is a symlink")),
            Sub::Missing | Sub::NotDir | Sub::Elsewhere => {
                return Err(refuse("it is not a directory"));
            }
        };
        let m = base.meta()?;
        if m.uid() != our_uid() {
            return Err(refuse("it is not owned by the Warden's user (root)"));
        }
        if m.mode() & 0o022 != 0 {
            return Err(refuse("group or others can write to it"));
        }
        Ok(Quarantine {
            base,
            id: id.to_string(),
            undo: None,
        })
    }

    /// This undo's own directory, made afresh at the first call.
    fn undo_dir(&mut self) -> Result<&Dir, SnapshotError> {
        if self.undo.is_none() {
            let mut tries = 0;
            let name = loop {
                let name = OsString::from(format!("{}-undo-{}", self.id, random_hex(4)?));
                match self.base.mkdir(&name, 0o700) {
                    Ok(()) => break name,
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists && tries < 8 => tries += 1,
                    Err(e) => return Err(io_err("create", &self.base.shown(&name))(e)),
                }
            };
            let Sub::Dir(d) = self.base.child_dir(&name)? else {
                return Err(SnapshotError::Unsafe {
                    path: self.base.shown(&name),
                    why: "the quarantine directory just made is not there",
                });
            };
            self.undo = Some(d);
        }
        self.undo.as_ref().ok_or(SnapshotError::Unsafe {
            path: self.base.path().to_path_buf(),
            why: "the quarantine directory just made is not there",
        })
    }

    /// Where `path` goes: its parent's components made (0700) below this
    /// undo's directory, and a free name there (`name`, else `name.1`, …).
    fn dest(&mut self, path: &Path) -> Result<(Dir, OsString), SnapshotError> {
        let mut dir = self.undo_dir()?.try_clone()?;
        let comps: Vec<&OsStr> = path
            .components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n),
                _ => None,
            })
            .collect();
        let Some((last, parents)) = comps.split_last() else {
            return Err(SnapshotError::Unsafe {
                path: path.to_path_buf(),
                why: "it has no name",
            });
        };
        for c in parents {
            dir = sub_dir(&dir, c)?;
        }
        let name = free_name(&dir, last)?;
        Ok((dir, name))
    }

    /// Moves `name` in `from` (the thing at `path`) into the quarantine;
    /// returns the inodes it moved (whose ctime the move changed).
    pub(super) fn move_in(
        &mut self,
        from: &Dir,
        name: &OsStr,
        path: &Path,
    ) -> Result<Vec<Ids>, SnapshotError> {
        let (dest, dest_name) = self.dest(path)?;
        // The name is free, and only the Warden writes there.
        match from.rename_to(name, &dest, &dest_name) {
            Ok(()) => Ok(dest
                .lstat(&dest_name)?
                .map(|m| vec![ids(&m)])
                .unwrap_or_default()),
            Err(e) if e.kind() == io::ErrorKind::CrossesDevices => {
                move_across(from, name, &dest, &dest_name)
            }
            Err(e) => Err(io_err("move to quarantine", path)(e)),
        }
    }
}

/// The directory `name` in `dir` (ours, where only the Warden writes),
/// made 0700 if missing; if something else has the name, `name.1`, ….
fn sub_dir(dir: &Dir, name: &OsStr) -> Result<Dir, SnapshotError> {
    for n in 0..1000u32 {
        let try_name = suffixed(name, n);
        match dir.child_dir(&try_name)? {
            Sub::Dir(d) => return Ok(d),
            Sub::Missing => {
                dir.mkdir(&try_name, 0o700)
                    .map_err(io_err("create", &dir.shown(&try_name)))?;
                if let Sub::Dir(d) = dir.child_dir(&try_name)? {
                    return Ok(d);
                }
            }
            Sub::Symlink | Sub::NotDir | Sub::Elsewhere => {}
        }
    }
    Err(SnapshotError::Unsafe {
        path: dir.shown(name),
        why: "no free name is left for it in the quarantine",
    })
}

fn suffixed(name: &OsStr, n: u32) -> OsString {
    let mut s = name.to_os_string();
    if n > 0 {
        s.push(format!(".{n}"));
    }
    s
}

/// `name`, or `name.1`, `name.2`, … : the first not taken in `dir`.
fn free_name(dir: &Dir, name: &OsStr) -> Result<OsString, SnapshotError> {
    for n in 0..100_000u32 {
        let try_name = suffixed(name, n);
        if dir.lstat(&try_name)?.is_none() {
            return Ok(try_name);
        }
    }
    Err(SnapshotError::Unsafe {
        path: dir.shown(name),
        why: "no free name is left for it in the quarantine",
    })
}

/// Moves `name` in `from` to `dest_name` in `dest`, on another filesystem:
/// first renamed into a private directory made in `from` (same
/// filesystem), where no one else can add to it or swap it; then copied
/// from there and removed from there as far as it is unchanged. If the
/// copy fails, what was moved stays in the private directory (named in the
/// error), whole.
pub(super) fn move_across(
    from: &Dir,
    name: &OsStr,
    dest: &Dir,
    dest_name: &OsStr,
) -> Result<Vec<Ids>, SnapshotError> {
    let stage = Staging::create(from)?;
    if let Err(e) = from.rename_to(name, &stage.dir, OsStr::new(STAGED)) {
        let _ = stage.remove();
        return Err(io_err("move to quarantine", &from.shown(name))(e));
    }
    match move_by_copy(&stage.dir, OsStr::new(STAGED), dest, dest_name) {
        Ok(moved) => {
            stage.remove()?;
            Ok(moved)
        }
        Err(e) => Err(SnapshotError::Stranded {
            path: stage.shown().join(STAGED),
            why: e.to_string(),
        }),
    }
}

/// What one copy made: each entry's identity and ctime as copied, so that
/// only what is still so is removed.
#[derive(Debug)]
pub(super) enum Copied {
    /// A file, symlink, or a fifo, socket or device (not copied: no data).
    Leaf { ids: Ids, ctime: (i64, i64) },
    Dir {
        ids: Ids,
        children: Vec<(OsString, Copied)>,
    },
}

/// Copies `name` in `src` to `dest_name` in `dest` and removes from `src`
/// what was copied and is unchanged since; what is left (appeared or
/// changed meanwhile) is copied again beside it (`dest_name.1`, …), up to
/// three rounds, after which it stays where it is and this fails. Returns
/// the inodes removed.
pub(super) fn move_by_copy(
    src: &Dir,
    name: &OsStr,
    dest: &Dir,
    dest_name: &OsStr,
) -> Result<Vec<Ids>, SnapshotError> {
    let mut removed = Vec::new();
    let mut target = free_name(dest, dest_name)?;
    for _ in 0..ROUNDS {
        let Some(meta) = src.lstat(name)? else {
            return Ok(removed);
        };
        let copied = copy_tree(src, name, &meta, dest, &target, meta.dev())?;
        dest.sync()?;
        remove_copied(src, name, &copied, &mut removed)?;
        if src.lstat(name)?.is_none() {
            return Ok(removed);
        }
        target = free_name(dest, dest_name)?;
    }
    Err(SnapshotError::Changed(src.shown(name)))
}

/// Copies one entry (and all below a directory), never following a
/// symlink: owner, mode and mtime through the new files' descriptors.
/// Refuses another filesystem mounted inside.
pub(super) fn copy_tree(
    src: &Dir,
    name: &OsStr,
    meta: &Metadata,
    dest: &Dir,
    dest_name: &OsStr,
    dev: u64,
) -> Result<Copied, SnapshotError> {
    let shown = src.shown(name);
    let to = dest.shown(dest_name);
    let leaf = Copied::Leaf {
        ids: ids(meta),
        ctime: (meta.ctime(), meta.ctime_nsec()),
    };
    match Kind::of(meta, dev) {
        Kind::Dir => {
            let Sub::Dir(from) = src.child_dir_is(name, ids(meta))? else {
                return Err(SnapshotError::Changed(shown));
            };
            dest.mkdir(dest_name, 0o700)
                .map_err(io_err("create", &to))?;
            let Sub::Dir(out) = dest.child_dir(dest_name)? else {
                return Err(SnapshotError::Unsafe {
                    path: to,
                    why: "the quarantine directory just made is not there",
                });
            };
            let mut children = Vec::new();
            for n in from.list()? {
                let Some(m) = from.lstat(&n)? else {
                    continue;
                };
                let c = copy_tree(&from, &n, &m, &out, &n, dev)?;
                children.push((n, c));
            }
            let mtime = meta.modified().map_err(io_err("inspect", &shown))?;
            set_attrs_fd(
                out.file(),
                &to,
                meta.uid(),
                meta.gid(),
                meta.mode() & 0o7777,
                mtime,
            )?;
            Ok(Copied::Dir {
                ids: ids(meta),
                children,
            })
        }
        Kind::File => {
            let (mut f, m) = src.open_listed(name, ids(meta))?;
            let mut out = dest
                .create_file(dest_name, 0o600)
                .map_err(io_err("create", &to))?;
            copy_hashed(&mut f, &shown, &mut out, &to, u64::MAX)?;
            let mtime = m.modified().map_err(io_err("inspect", &shown))?;
            set_attrs_fd(&out, &to, m.uid(), m.gid(), m.mode() & 0o7777, mtime)?;
            out.sync_all().map_err(io_err("sync", &to))?;
            // As opened: a change since the lstat shows in the ctime.
            Ok(Copied::Leaf {
                ids: ids(&m),
                ctime: (m.ctime(), m.ctime_nsec()),
            })
        }
        Kind::Symlink => {
            let target = src.read_link(name)?;
            dest.symlink(&target, dest_name)
                .map_err(io_err("create the link", &to))?;
            dest.lchown(dest_name, meta.uid(), meta.gid())
                .map_err(io_err("set the owner of", &to))?;
            Ok(leaf)
        }
        Kind::Skipped(Why::Mount) => Err(SnapshotError::Unsafe {
            path: shown,
            why: "another filesystem is mounted there",
        }),
        // Fifos, sockets and device nodes hold no data to keep.
        Kind::Skipped(_) => Ok(leaf),
    }
}

/// Removes from `parent` what [`copy_tree`] copied of `name`, where it is
/// still the same inode with the same ctime; a directory only once empty.
/// What appeared or changed since the copy stays.
pub(super) fn remove_copied(
    parent: &Dir,
    name: &OsStr,
    copied: &Copied,
    removed: &mut Vec<Ids>,
) -> Result<(), SnapshotError> {
    let shown = parent.shown(name);
    match copied {
        Copied::Leaf { ids: want, ctime } => {
            let Some(m) = parent.lstat(name)? else {
                return Ok(());
            };
            if ids(&m) != *want || (m.ctime(), m.ctime_nsec()) != *ctime || m.is_dir() {
                return Ok(());
            }
            match parent.unlink(name) {
                Ok(()) => removed.push(*want),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_err("remove the moved", &shown)(e)),
            }
        }
        Copied::Dir {
            ids: want,
            children,
        } => {
            let Sub::Dir(d) = parent.child_dir_is(name, *want)? else {
                return Ok(());
            };
            for (n, c) in children {
                remove_copied(&d, n, c, removed)?;
            }
            match parent.rmdir(name) {
                Ok(()) => removed.push(*want),
                Err(e)
                    if e.kind() == io::ErrorKind::NotFound
                        || e.kind() == io::ErrorKind::DirectoryNotEmpty =>
                {
                    // Something appeared in it after the copy: it stays.
                }
                Err(e) => return Err(io_err("remove the moved", &shown)(e)),
            }
        }
    }
    Ok(())
}

/// For tests: where an undo's quarantine directory for `id` is.
#[cfg(test)]
pub(super) fn undo_dirs(base: &Path, id: &str) -> Vec<std::path::PathBuf> {
    let prefix = format!("{id}-undo-");
    let mut out: Vec<std::path::PathBuf> = std::fs::read_dir(base)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}
