//! Walking what lies under the roots through open directories ([`Dir`]),
//! never following symlinks, never leaving a root's filesystem; copying
//! with a hash; and the snapshot store's own small file helpers (the store
//! is the Warden's, out of everyone else's reach, so it is used by path).

#![forbid(unsafe_code)]

use super::entry::Kind;
use super::error::{SnapshotError, io_err};
use super::safe_dir::{DIR_FLAGS, Dir, Sub, ids};
use aromba_warden_proto::encode_hex;
use sha2::{Digest, Sha256};
use std::ffi::{OsStr, OsString};
use std::fs::{self, File, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

pub(super) fn absolute(p: &Path) -> Result<PathBuf, SnapshotError> {
    std::path::absolute(p).map_err(io_err("resolve", p))
}

pub(super) fn excluded(path: &Path, exclude: &[PathBuf]) -> bool {
    exclude.iter().any(|x| path.starts_with(x))
}

/// `lstat` by path: only for the snapshot store, which is the Warden's.
pub(super) fn lstat(path: &Path) -> Result<Option<Metadata>, SnapshotError> {
    match fs::symlink_metadata(path) {
        Ok(m) => Ok(Some(m)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err("inspect", path)(e)),
    }
}

/// One entry met by [`walk`]: where it is, what it is, and the open
/// directory it is in, through which alone it is read.
pub(super) struct Seen<'a> {
    pub(super) path: &'a Path,
    pub(super) meta: &'a Metadata,
    pub(super) kind: Kind,
    pub(super) parent: &'a Dir,
    pub(super) name: &'a OsStr,
}

impl Seen<'_> {
    /// A symlink's target, read through the open parent.
    pub(super) fn target(&self) -> Result<Option<PathBuf>, SnapshotError> {
        match self.kind {
            Kind::Symlink => self.parent.read_link(self.name).map(Some),
            _ => Ok(None),
        }
    }
}

/// How many directories deep a walk or a copy goes below a root; deeper is
/// refused (or, in a seal, recorded as unknown), never a crash.
pub(super) const MAX_DEPTH: usize = 256;

/// The error for a path nested deeper than [`MAX_DEPTH`].
pub(super) fn too_deep(path: &Path) -> SnapshotError {
    SnapshotError::Unsafe {
        path: path.to_path_buf(),
        why: "it is nested more than 256 directories deep",
    }
}

/// What a walk does with an entry it cannot read (its `lstat` fails, it is
/// a directory that cannot be opened or listed, was swapped since it was
/// listed, or lies too deep): `Err` stops the walk, `Ok` passes over it and
/// all below it.
pub(super) type Unreadable<'a> =
    &'a mut dyn FnMut(&Path, SnapshotError) -> Result<(), SnapshotError>;

/// Visits every entry under `roots` in path order, without following
/// symlinks or leaving a root's filesystem; `visit` returns whether to go
/// into a directory. Each root's parent is opened from `/` one component at
/// a time, never through a symlink (a symlink there is an error); each
/// directory is then opened through its parent's descriptor and must be the
/// one just listed, so a directory swapped meanwhile is
/// [`SnapshotError::Changed`], never listed in its place. Entries that
/// vanish mid-walk are passed over; any entry that cannot be read stops
/// the walk with its error.
pub(super) fn walk(
    roots: &[PathBuf],
    exclude: &[PathBuf],
    visit: impl FnMut(&Seen) -> Result<bool, SnapshotError>,
) -> Result<(), SnapshotError> {
    walk_tolerant(roots, exclude, visit, &mut |_, e| Err(e))
}

/// [`walk`], handing what cannot be read to `unreadable` (see
/// [`Unreadable`]).
pub(super) fn walk_tolerant(
    roots: &[PathBuf],
    exclude: &[PathBuf],
    mut visit: impl FnMut(&Seen) -> Result<bool, SnapshotError>,
    unreadable: Unreadable,
) -> Result<(), SnapshotError> {
    for root in roots {
        if excluded(root, exclude) {
            continue;
        }
        let (Some(parent_path), Some(name)) = (root.parent(), root.file_name()) else {
            return Err(SnapshotError::BadRoot {
                path: root.clone(),
                why: "the whole filesystem cannot be snapshotted",
            });
        };
        let parent = match Dir::open_path(parent_path)? {
            Sub::Dir(d) => d,
            Sub::Symlink => {
                return Err(SnapshotError::Unsafe {
                    path: root.clone(),
                    why: "a component of the path is a symlink",
                });
            }
            Sub::Missing | Sub::NotDir | Sub::Elsewhere => continue,
        };
        let meta = match parent.lstat(name) {
            Ok(Some(m)) => m,
            Ok(None) => continue,
            Err(e) => {
                unreadable(root, e)?;
                continue;
            }
        };
        let dev = meta.dev();
        let kind = Kind::of(&meta, dev);
        let seen = Seen {
            path: root,
            meta: &meta,
            kind,
            parent: &parent,
            name,
        };
        if !visit(&seen)? || kind != Kind::Dir {
            continue;
        }
        match parent.child_dir_is(name, ids(&meta)) {
            Ok(Sub::Dir(d)) => walk_below(d, root, dev, exclude, &mut visit, unreadable)?,
            Ok(Sub::Missing) => {}
            Ok(_) => unreadable(root, SnapshotError::Changed(root.clone()))?,
            Err(e) => unreadable(root, e)?,
        }
    }
    Ok(())
}

/// Visits everything below the open directory `top` (at `top_path`) as
/// [`walk_tolerant`] does; entries not on `dev` are passed to `visit` as
/// mounts and never entered. Keeps one directory's names and descriptor per
/// level, at most [`MAX_DEPTH`] levels.
pub(super) fn walk_below(
    top: Dir,
    top_path: &Path,
    dev: u64,
    exclude: &[PathBuf],
    visit: &mut impl FnMut(&Seen) -> Result<bool, SnapshotError>,
    unreadable: Unreadable,
) -> Result<(), SnapshotError> {
    type Level = (PathBuf, Dir, std::vec::IntoIter<OsString>);
    let names = match top.list() {
        Ok(n) => n,
        Err(e) => return unreadable(top_path, e),
    };
    let mut stack: Vec<Level> = vec![(top_path.to_path_buf(), top, names.into_iter())];
    while let Some((dir_path, dir, names)) = stack.last_mut() {
        let Some(name) = names.next() else {
            stack.pop();
            continue;
        };
        let path = dir_path.join(&name);
        if excluded(&path, exclude) {
            continue;
        }
        let meta = match dir.lstat(&name) {
            Ok(Some(m)) => m,
            Ok(None) => continue,
            Err(e) => {
                unreadable(&path, e)?;
                continue;
            }
        };
        let kind = Kind::of(&meta, dev);
        let seen = Seen {
            path: &path,
            meta: &meta,
            kind,
            parent: dir,
            name: &name,
        };
        if !visit(&seen)? || kind != Kind::Dir {
            continue;
        }
        #[cfg(test)]
        churn::at(&path);
        let next = match dir.child_dir_is(&name, ids(&meta)) {
            Ok(Sub::Dir(d)) => d,
            Ok(Sub::Missing) => continue,
            Ok(_) => {
                unreadable(&path, SnapshotError::Changed(path.clone()))?;
                continue;
            }
            Err(e) => {
                unreadable(&path, e)?;
                continue;
            }
        };
        if stack.len() >= MAX_DEPTH {
            unreadable(&path, too_deep(&path))?;
            continue;
        }
        let names = match next.list() {
            Ok(n) => n,
            Err(e) => {
                unreadable(&path, e)?;
                continue;
            }
        };
        stack.push((path, next, names.into_iter()));
    }
    Ok(())
}

/// Copies at most `limit` bytes from the start of `src` into the empty
/// `dst`, hashing them on the way; holes stay holes (see [`copy_sparse`]).
pub(super) fn copy_hashed(
    src: &mut File,
    src_path: &Path,
    dst: &mut File,
    dst_path: &Path,
    limit: u64,
) -> Result<(u64, String), SnapshotError> {
    copy_sparse(src, src_path, dst, dst_path, limit, u64::MAX).map(|c| (c.len, c.sha256))
}

/// What [`copy_sparse`] did.
pub(super) struct Copied {
    /// The file's length as copied, holes included.
    pub(super) len: u64,
    /// SHA-256 of all `len` bytes, a hole read as zeros.
    pub(super) sha256: String,
}

/// Copies at most `limit` bytes from the start of `src` into the empty
/// `dst` at the same offsets, hashing every byte (a hole as zeros), but
/// writing only the data `lseek(SEEK_DATA/SEEK_HOLE)` finds: a hole stays
/// a hole, so a 3 GB sparse file of 8 KB on disk takes 8 KB in the copy.
/// Where the filesystem cannot tell holes, all is copied as data. More than
/// `room` bytes of data to write is [`SnapshotError::TooBig`]: the caller's
/// room is never exceeded, sparse or not. Positioned reads and writes, so
/// neither file's offset matters.
pub(super) fn copy_sparse(
    src: &File,
    src_path: &Path,
    dst: &File,
    dst_path: &Path,
    limit: u64,
    room: u64,
) -> Result<Copied, SnapshotError> {
    let unsupported =
        |e: &io::Error| matches!(e.raw_os_error(), Some(libc::EINVAL | libc::EOPNOTSUPP));
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let zeros = vec![0u8; 64 * 1024];
    let hash_zeros = |hasher: &mut Sha256, mut n: u64| {
        while n > 0 {
            let k = n.min(zeros.len() as u64);
            hasher.update(zeros.get(..k as usize).unwrap_or_default());
            n -= k;
        }
    };
    let mut pos = 0u64;
    let mut written = 0u64;
    let mut plain = false;
    while pos < limit {
        // The next stretch of data: [data, hole).
        let (data, hole) = if plain {
            (pos, limit)
        } else {
            match crate::system::seek_data(src, pos) {
                Ok(Some(d)) => {
                    let h = match crate::system::seek_hole(src, d) {
                        Ok(h) => h,
                        Err(e) => return Err(io_err("read", src_path)(e)),
                    };
                    (d.min(limit), h.min(limit))
                }
                // Only a hole to the end of the file (as it is now).
                Ok(None) => {
                    let end = src
                        .metadata()
                        .map_err(io_err("inspect", src_path))?
                        .size()
                        .clamp(pos, limit);
                    hash_zeros(&mut hasher, end - pos);
                    pos = end;
                    break;
                }
                Err(e) if unsupported(&e) && pos == 0 => {
                    plain = true;
                    continue;
                }
                Err(e) => return Err(io_err("read", src_path)(e)),
            }
        };
        hash_zeros(&mut hasher, data.saturating_sub(pos));
        pos = data.max(pos);
        let mut ended = false;
        while pos < hole {
            let want = (hole - pos).min(buf.len() as u64) as usize;
            let chunk = buf.get_mut(..want).unwrap_or_default();
            let n = match src.read_at(chunk, pos) {
                Ok(0) => {
                    ended = true;
                    break;
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io_err("read", src_path)(e)),
            };
            written = written.saturating_add(n as u64);
            if written > room {
                return Err(SnapshotError::TooBig {
                    needed: written,
                    allowed: room,
                });
            }
            let chunk = buf.get(..n).unwrap_or_default();
            hasher.update(chunk);
            dst.write_all_at(chunk, pos)
                .map_err(io_err("write", dst_path))?;
            pos += n as u64;
        }
        if ended || plain {
            break;
        }
    }
    // A trailing hole: the length without a byte written.
    dst.set_len(pos).map_err(io_err("write", dst_path))?;
    Ok(Copied {
        len: pos,
        sha256: encode_hex(&hasher.finalize()),
    })
}

/// Creates one of the store's own files (0600; never an existing one).
pub(super) fn create_private(path: &Path) -> Result<File, SnapshotError> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(io_err("create", path))
}

/// Syncs one of the store's own directories.
pub(super) fn sync_dir(path: &Path) -> Result<(), SnapshotError> {
    OpenOptions::new()
        .read(true)
        .custom_flags(DIR_FLAGS)
        .open(path)
        .and_then(|d| d.sync_all())
        .map_err(io_err("sync", path))
}

/// For tests: something done to a directory between its listing and its
/// opening by a walk on this thread, or to a file while a copy across
/// filesystems reads it, as a user churning it would.
#[cfg(test)]
pub(super) mod churn {
    use std::cell::RefCell;
    use std::path::Path;

    type Hook = Box<dyn FnMut(&Path)>;

    thread_local! {
        static HOOK: RefCell<Option<Hook>> = RefCell::new(None);
    }

    pub(in super::super) fn set(hook: Option<Hook>) {
        HOOK.with(|h| *h.borrow_mut() = hook);
    }

    /// Runs the hook on `path`: a directory a walk is about to open, or a
    /// file a cross-filesystem copy has just copied.
    pub(in super::super) fn at(path: &Path) {
        HOOK.with(|h| {
            if let Some(f) = h.borrow_mut().as_mut() {
                f(path);
            }
        });
    }
}
