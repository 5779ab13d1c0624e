//! Moving a path aside into the quarantine, never deleting it: by rename, or
//! across filesystems by a full copy removed at the source only once whole.

#![forbid(unsafe_code)]

use super::entry::{Entry, Kind, Why};
use super::error::{SnapshotError, io_err};
use super::walk::{
    copy_hashed, create_private, lstat, open_dir, open_listed_file, set_attrs, walk,
};
use std::fs::{self, DirBuilder};
use std::io;
use std::os::unix::fs::{DirBuilderExt, lchown, symlink};
use std::path::Path;

/// Moves `path` to `dir/<path without its leading />`, with a numeric
/// suffix if that is taken (an earlier, interrupted undo).
pub(super) fn move_to_quarantine(path: &Path, dir: &Path) -> Result<(), SnapshotError> {
    let rel = path.strip_prefix("/").unwrap_or(path);
    let mut dest = dir.join(rel);
    let mut n = 0u32;
    while lstat(&dest)?.is_some() {
        n += 1;
        let mut name = rel.as_os_str().to_os_string();
        name.push(format!(".{n}"));
        dest = dir.join(name);
    }
    if let Some(parent) = dest.parent() {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(io_err("create", parent))?;
    }
    match fs::rename(path, &dest) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::CrossesDevices => move_by_copy(path, &dest),
        Err(e) => Err(io_err("move to quarantine", path)(e)),
    }
}

/// Moves across filesystems: copies everything (owner, mode, mtime, links)
/// and removes the original only once the copy is complete. Refuses a tree
/// with another filesystem mounted in it, which removing would reach into.
pub(super) fn move_by_copy(src: &Path, dest: &Path) -> Result<(), SnapshotError> {
    let mut dirs = Vec::new();
    walk(&[src.to_path_buf()], &[], |path, meta, kind| {
        let rel = path.strip_prefix(src).unwrap_or(Path::new(""));
        let to = if rel.as_os_str().is_empty() {
            dest.to_path_buf()
        } else {
            dest.join(rel)
        };
        let mut e = Entry::of(path, meta, kind)?;
        match kind {
            Kind::Dir => {
                DirBuilder::new()
                    .mode(0o700)
                    .create(&to)
                    .map_err(io_err("create", &to))?;
                e.path = to;
                dirs.push(e);
            }
            Kind::File => {
                let (mut from, _) = open_listed_file(path, e.dev, e.ino)?;
                let mut out = create_private(&to)?;
                copy_hashed(&mut from, path, &mut out, &to, u64::MAX)?;
                set_attrs(&out, &to, &e)?;
                out.sync_all().map_err(io_err("sync", &to))?;
            }
            Kind::Symlink => {
                if let Some(t) = &e.target {
                    symlink(t, &to).map_err(io_err("create the link", &to))?;
                    lchown(&to, Some(e.uid), Some(e.gid))
                        .map_err(io_err("set the owner of", &to))?;
                }
            }
            Kind::Skipped(Why::Mount) => {
                return Err(SnapshotError::Unsafe {
                    path: path.to_path_buf(),
                    why: "another filesystem is mounted there",
                });
            }
            // Fifos, sockets and device nodes hold no data to keep.
            Kind::Skipped(_) => {}
        }
        Ok(true)
    })?;
    for d in dirs.iter().rev() {
        set_attrs(&open_dir(&d.path)?, &d.path, d)?;
    }
    let is_dir = lstat(src)?.is_some_and(|m| m.is_dir());
    let removed = if is_dir {
        fs::remove_dir_all(src)
    } else {
        fs::remove_file(src)
    };
    removed.map_err(io_err("remove the moved", src))
}
