//! Safe access to what lies under the roots: listing, walking, opening and
//! copying without following symlinks or blocking on fifos and devices
//! (`O_NOFOLLOW`, `O_NONBLOCK`), checking identities with `fstat`.

#![forbid(unsafe_code)]

use super::entry::{Entry, Kind};
use super::error::{SnapshotError, io_err};
use aromba_warden_proto::encode_hex;
use sha2::{Digest, Sha256};
use std::ffi::OsString;
use std::fs::{self, File, FileTimes, Metadata, OpenOptions, Permissions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt, fchown};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// How every file under a root is opened: never through a symlink, never
/// waiting on a fifo or device, never taking a terminal as ours.
pub(super) const FILE_FLAGS: i32 = libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY;

const DIR_FLAGS: i32 = libc::O_DIRECTORY | libc::O_NOFOLLOW;

pub(super) fn absolute(p: &Path) -> Result<PathBuf, SnapshotError> {
    std::path::absolute(p).map_err(io_err("resolve", p))
}

pub(super) fn excluded(path: &Path, exclude: &[PathBuf]) -> bool {
    exclude.iter().any(|x| path.starts_with(x))
}

pub(super) fn lstat(path: &Path) -> Result<Option<Metadata>, SnapshotError> {
    match fs::symlink_metadata(path) {
        Ok(m) => Ok(Some(m)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err("inspect", path)(e)),
    }
}

/// The first component of `path` (itself included) that is a symlink.
pub(super) fn symlink_in(path: &Path) -> Result<Option<PathBuf>, SnapshotError> {
    for a in path.ancestors() {
        if lstat(a)?.is_some_and(|m| m.file_type().is_symlink()) {
            return Ok(Some(a.to_path_buf()));
        }
    }
    Ok(None)
}

/// A directory's names, sorted so walks are in path order (parents first).
/// The directory is opened without following a symlink and must be the one
/// the walk listed (`listed`); its names are then read through that very
/// descriptor (`/proc/self/fd/<n>`), so a directory swapped for a symlink
/// meanwhile is not listed in its place.
pub(super) fn children(dir: &Path, listed: &Metadata) -> Result<Vec<OsString>, SnapshotError> {
    let fd = match OpenOptions::new()
        .read(true)
        .custom_flags(DIR_FLAGS)
        .open(dir)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) => {
            return Err(SnapshotError::Changed(dir.to_path_buf()));
        }
        Err(e) => return Err(io_err("open", dir)(e)),
    };
    let same = |m: &Metadata| m.is_dir() && (m.dev(), m.ino()) == (listed.dev(), listed.ino());
    if !same(&fd.metadata().map_err(io_err("inspect", dir))?) {
        return Err(SnapshotError::Changed(dir.to_path_buf()));
    }
    let via_fd = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
    let (rd, by_path) = match fs::read_dir(&via_fd) {
        Ok(rd) => (rd, false),
        // No /proc: by path, checked again once listed.
        Err(_) => (fs::read_dir(dir).map_err(io_err("list", dir))?, true),
    };
    let mut names = Vec::new();
    for item in rd {
        names.push(item.map_err(io_err("list", dir))?.file_name());
    }
    if by_path && !lstat(dir)?.is_some_and(|m| same(&m)) {
        return Err(SnapshotError::Changed(dir.to_path_buf()));
    }
    drop(fd);
    names.sort();
    Ok(names)
}

/// Visits every entry under `roots` in path order, without following
/// symlinks or leaving a root's filesystem; `visit` returns whether to go
/// into a directory. Entries that vanish mid-walk are passed over, and the
/// walk keeps only one directory's names at a time per level, so it does
/// not grow with what a run created.
pub(super) fn walk(
    roots: &[PathBuf],
    exclude: &[PathBuf],
    mut visit: impl FnMut(&Path, &Metadata, Kind) -> Result<bool, SnapshotError>,
) -> Result<(), SnapshotError> {
    for root in roots {
        if excluded(root, exclude) {
            continue;
        }
        let Some(meta) = lstat(root)? else {
            continue;
        };
        let dev = meta.dev();
        let kind = Kind::of(&meta, dev);
        if !visit(root, &meta, kind)? || kind != Kind::Dir {
            continue;
        }
        let mut stack = vec![(root.clone(), children(root, &meta)?.into_iter())];
        loop {
            let next = match stack.last_mut() {
                None => break,
                Some((dir, names)) => names.next().map(|n| dir.join(n)),
            };
            let Some(path) = next else {
                stack.pop();
                continue;
            };
            if excluded(&path, exclude) {
                continue;
            }
            let Some(meta) = lstat(&path)? else {
                continue;
            };
            let kind = Kind::of(&meta, dev);
            if visit(&path, &meta, kind)? && kind == Kind::Dir {
                let names = children(&path, &meta)?;
                stack.push((path, names.into_iter()));
            }
        }
    }
    Ok(())
}

/// Copies at most `limit` bytes, hashing them on the way.
pub(super) fn copy_hashed(
    src: &mut File,
    src_path: &Path,
    dst: &mut File,
    dst_path: &Path,
    limit: u64,
) -> Result<(u64, String), SnapshotError> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut src = src.take(limit);
    let mut copied = 0u64;
    loop {
        let n = match src.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_err("read", src_path)(e)),
        };
        let chunk = buf.get(..n).unwrap_or_default();
        hasher.update(chunk);
        dst.write_all(chunk).map_err(io_err("write", dst_path))?;
        copied += n as u64;
    }
    Ok((copied, encode_hex(&hasher.finalize())))
}

pub(super) fn create_private(path: &Path) -> Result<File, SnapshotError> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(io_err("create", path))
}

pub(super) fn sync_dir(path: &Path) -> Result<(), SnapshotError> {
    OpenOptions::new()
        .read(true)
        .custom_flags(DIR_FLAGS)
        .open(path)
        .and_then(|d| d.sync_all())
        .map_err(io_err("sync", path))
}

/// Owner, then mode (a chown clears setuid), then mtime, through an open
/// descriptor so a swapped path cannot redirect them.
pub(super) fn set_attrs(file: &File, path: &Path, e: &Entry) -> Result<(), SnapshotError> {
    fchown(file, Some(e.uid), Some(e.gid)).map_err(io_err("set the owner of", path))?;
    file.set_permissions(Permissions::from_mode(e.mode))
        .map_err(io_err("set the mode of", path))?;
    file.set_times(FileTimes::new().set_modified(e.mtime()?))
        .map_err(io_err("set the mtime of", path))
}

/// Opens a directory without following a symlink, and checks that what was
/// opened is the directory at `path` itself, so a chown through it cannot
/// land on some other directory.
pub(super) fn open_dir(path: &Path) -> Result<File, SnapshotError> {
    let dir = OpenOptions::new()
        .read(true)
        .custom_flags(DIR_FLAGS)
        .open(path)
        .map_err(io_err("open", path))?;
    let opened = dir.metadata().map_err(io_err("inspect", path))?;
    let there = lstat(path)?;
    let same = there.is_some_and(|m| {
        m.is_dir() && opened.is_dir() && m.dev() == opened.dev() && m.ino() == opened.ino()
    });
    if same {
        Ok(dir)
    } else {
        Err(SnapshotError::Unsafe {
            path: path.to_path_buf(),
            why: "it is no longer the directory it was",
        })
    }
}

/// Opens a regular file under a root for reading: never through a symlink,
/// never blocking on a fifo or device swapped in, and only if `fstat` finds
/// the very file that was listed (`dev`, `ino`).
pub(super) fn open_listed_file(
    path: &Path,
    dev: u64,
    ino: u64,
) -> Result<(File, Metadata), SnapshotError> {
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(FILE_FLAGS)
        .open(path)
    {
        Ok(f) => f,
        // O_NOFOLLOW on a symlink.
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(SnapshotError::Changed(path.to_path_buf()));
        }
        Err(e) => return Err(io_err("open", path)(e)),
    };
    let meta = file.metadata().map_err(io_err("inspect", path))?;
    if !meta.is_file() || meta.dev() != dev || meta.ino() != ino {
        return Err(SnapshotError::Changed(path.to_path_buf()));
    }
    Ok((file, meta))
}
