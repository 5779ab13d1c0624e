//! What root writes in directories another account can write — the
//! honeypots `install` plants in the Worker's home and configuration
//! directory, and the wipe of the Worker's AI key at Cut — done through
//! open directories, never following a link.
//!
//! The Worker owns its home (an installer's `useradd -m` leaves it so), so
//! any name in it may be a symbolic link, or a directory renamed aside and
//! replaced, by the time root acts. So nothing here is done by path: each
//! directory is opened from `/` one component at a time with
//! `O_DIRECTORY | O_NOFOLLOW` (the snapshot store's `Dir`), a missing one is
//! made through its parent's descriptor and checked to be the one made, a
//! file is created under a fresh random name with `O_CREAT | O_EXCL |
//! O_NOFOLLOW`, given its owner and mode through its own descriptor
//! (`fchown`, `fchmod`) and renamed over the name — which replaces a link
//! found there rather than following it. A directory that is a link is
//! refused and named.

#![forbid(unsafe_code)]

use crate::chores::snapshot::safe_dir::{Dir, Sub, fresh_dir, ids, random_hex};
use std::ffi::{OsStr, OsString};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, fchown};
use std::path::{Component, Path, PathBuf};

/// Why a write in another account's directory was refused or failed.
#[derive(Debug)]
pub enum WorkerDirError {
    /// A symbolic link or something else stands where a directory must.
    Refused { path: PathBuf, why: &'static str },
    Io {
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

impl std::fmt::Display for WorkerDirError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WorkerDirError::Refused { path, why } => write!(
                f,
                "{} {why}; root follows no link in a directory another account can write, so nothing was written there",
                path.display()
            ),
            WorkerDirError::Io { what, path, source } => {
                write!(f, "cannot {what} {}: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for WorkerDirError {}

impl From<WorkerDirError> for io::Error {
    fn from(e: WorkerDirError) -> io::Error {
        io::Error::other(e.to_string())
    }
}

fn io_at(what: &'static str, path: PathBuf) -> impl FnOnce(io::Error) -> WorkerDirError {
    move |source| WorkerDirError::Io { what, path, source }
}

fn snap(e: crate::chores::snapshot::SnapshotError, path: &Path) -> WorkerDirError {
    WorkerDirError::Io {
        what: "reach",
        path: path.to_path_buf(),
        source: io::Error::other(e.to_string()),
    }
}

/// The plain names of an absolute path without `.` or `..`.
fn names(path: &Path) -> Result<Vec<&OsStr>, WorkerDirError> {
    let mut out = Vec::new();
    for c in path.components() {
        match c {
            Component::RootDir => {}
            Component::Normal(n) => out.push(n),
            _ => {
                return Err(WorkerDirError::Refused {
                    path: path.to_path_buf(),
                    why: "is not an absolute path without `.` or `..`",
                });
            }
        }
    }
    if !path.is_absolute() {
        return Err(WorkerDirError::Refused {
            path: path.to_path_buf(),
            why: "is not an absolute path",
        });
    }
    Ok(out)
}

/// Opens the directory `path` from `/`, one component at a time, never
/// following a link; a missing directory is made (root's, `new_mode`)
/// through its parent's descriptor and checked to be the one made. One
/// that exists keeps its owner and mode: it may be the Worker's.
pub(crate) fn open_or_make(path: &Path, new_mode: u32) -> Result<Dir, WorkerDirError> {
    let root = Path::new("/");
    let mut dir = match Dir::open_path(root).map_err(|e| snap(e, root))? {
        Sub::Dir(d) => d,
        _ => {
            return Err(WorkerDirError::Refused {
                path: root.to_path_buf(),
                why: "cannot be opened as a directory",
            });
        }
    };
    for name in names(path)? {
        let shown = dir.shown(name);
        dir = match dir.child_dir(name).map_err(|e| snap(e, &shown))? {
            Sub::Dir(d) => d,
            Sub::Missing => {
                dir.mkdir(name, 0o700)
                    .map_err(io_at("create", shown.clone()))?;
                let Some((made, _)) = fresh_dir(&dir, name).map_err(|e| snap(e, &shown))? else {
                    return Err(WorkerDirError::Refused {
                        path: shown,
                        why: "was swapped right after root made it",
                    });
                };
                made.file()
                    .set_permissions(std::os::unix::fs::PermissionsExt::from_mode(new_mode))
                    .map_err(io_at("set the mode of", shown))?;
                made
            }
            Sub::Symlink => {
                return Err(WorkerDirError::Refused {
                    path: shown,
                    why: "is a symbolic link",
                });
            }
            Sub::NotDir | Sub::Elsewhere => {
                return Err(WorkerDirError::Refused {
                    path: shown,
                    why: "is not a directory",
                });
            }
        };
    }
    Ok(dir)
}

/// Writes `contents` as the file `path` (root's, group `gid`, `mode`):
/// its directories opened or made by [`open_or_make`] (`dir_mode` for the
/// ones made), the file made anew under a random name and renamed over
/// `path`. Whatever stood at `path` — a link, the Worker's own file — is
/// replaced, never written through; a directory there is refused.
pub fn write_file(
    path: &Path,
    contents: &[u8],
    gid: u32,
    mode: u32,
    dir_mode: u32,
) -> Result<(), WorkerDirError> {
    write_file_watched(path, contents, gid, mode, dir_mode, |_, _| Ok(()), |()| {})
}

/// [`write_file`], calling `watch` with the directory and the new file
/// once its bytes are written and before its group and mode let anyone
/// else open it, and `unwatch` with what `watch` gave when the file is not
/// put in place after all. A honeypot's watch is set there, so no open of
/// it goes unseen: not of the temporary name (which the Worker sees made in
/// its own directory), nor of the name between its rename and its watch.
pub(crate) fn write_file_watched<W>(
    path: &Path,
    contents: &[u8],
    gid: u32,
    mode: u32,
    dir_mode: u32,
    watch: impl FnOnce(&Dir, &std::fs::File) -> io::Result<W>,
    unwatch: impl FnOnce(W),
) -> Result<W, WorkerDirError> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(WorkerDirError::Refused {
            path: path.to_path_buf(),
            why: "names no file",
        });
    };
    let dir = open_or_make(parent, dir_mode)?;
    let mut tries = 0;
    let (tmp, mut file) = loop {
        let hex = random_hex(8).map_err(|e| snap(e, path))?;
        let tmp = OsString::from(format!(".{}.aromba-{hex}", name.to_string_lossy()));
        match dir.create_file(&tmp, 0o600) {
            Ok(f) => break (tmp, f),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && tries < 8 => tries += 1,
            Err(e) => return Err(io_at("create", dir.shown(&tmp))(e)),
        }
    };
    let shown = dir.shown(&tmp);
    let watched = file
        .write_all(contents)
        .map_err(io_at("write", shown.clone()))
        .and_then(|()| watch(&dir, &file).map_err(io_at("watch", shown.clone())));
    let watched = match watched {
        Ok(w) => w,
        Err(e) => {
            let _ = dir.unlink(&tmp);
            return Err(e);
        }
    };
    let written = fchown(&file, Some(0), Some(gid))
        .and_then(|()| file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode)))
        .and_then(|()| file.sync_all())
        .map_err(io_at("write", shown.clone()))
        .and_then(|()| {
            dir.rename_to(&tmp, &dir, name)
                .map_err(io_at("rename into place", path.to_path_buf()))
        });
    if let Err(e) = written {
        unwatch(watched);
        let _ = dir.unlink(&tmp);
        return Err(e);
    }
    if let Err(e) = dir.sync() {
        unwatch(watched);
        return Err(snap(e, parent));
    }
    Ok(watched)
}

/// Whether `path` is a honeypot as install plants it: root's regular file
/// of group `gid` and `mode`, reached with no link on the way.
pub fn is_planted(path: &Path, gid: u32, mode: u32) -> bool {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return false;
    };
    let Ok(Sub::Dir(dir)) = Dir::open_path(parent) else {
        return false;
    };
    dir.lstat(name)
        .ok()
        .flatten()
        .is_some_and(|m| planted_as(&m, gid, mode))
}

/// Whether `m` is root's regular file of group `gid` and `mode`: a
/// honeypot as install plants it.
pub fn planted_as(m: &std::fs::Metadata, gid: u32, mode: u32) -> bool {
    m.file_type().is_file() && m.uid() == 0 && m.gid() == gid && m.mode() & 0o7777 == mode
}

/// The most the wipe writes: a key is bytes, so a file above this is not
/// one the Worker was given, and overwriting it would only let the Worker
/// make root fill a disk (a sparse file of any apparent size costs it
/// nothing). Such a file is unlinked unwritten.
pub const WIPE_BOUND: u64 = 64 * 1024;

/// What [`wipe`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Wiped {
    /// Nothing was there.
    Absent,
    /// A regular file of at most [`WIPE_BOUND`] bytes: overwritten with
    /// zeros, synced and removed.
    Overwritten,
    /// A symbolic link: removed, and what it points to left alone.
    LinkRemoved,
    /// Removed without being overwritten, and why: larger than
    /// [`WIPE_BOUND`], not a regular file, or the overwrite failed (the
    /// error). The name is gone either way.
    RemovedUnwritten(String),
}

/// Removes the Worker's file `path` through its directory's descriptor,
/// overwriting it with zeros first when it is a regular file of at most
/// [`WIPE_BOUND`] bytes, of `owner`'s, with no other name (a hard link at
/// the name may be another account's file: root writes through no link of
/// either kind). A symbolic link is removed without being followed. The
/// name is removed whatever the overwrite did — a full disk, a file grown
/// or swapped meanwhile — and nothing more than the bound is ever written.
/// Only a directory at the name (no key is one) is refused.
pub fn wipe(path: &Path, owner: u32) -> Result<Wiped, WorkerDirError> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(WorkerDirError::Refused {
            path: path.to_path_buf(),
            why: "names no file",
        });
    };
    let dir = match Dir::open_path(parent).map_err(|e| snap(e, parent))? {
        Sub::Dir(d) => d,
        Sub::Missing => return Ok(Wiped::Absent),
        Sub::Symlink => {
            return Err(WorkerDirError::Refused {
                path: parent.to_path_buf(),
                why: "has a symbolic link on its way",
            });
        }
        Sub::NotDir | Sub::Elsewhere => {
            return Err(WorkerDirError::Refused {
                path: parent.to_path_buf(),
                why: "is not a directory",
            });
        }
    };
    let Some(before) = dir.lstat(name).map_err(|e| snap(e, path))? else {
        return Ok(Wiped::Absent);
    };
    let kind = before.file_type();
    if kind.is_dir() {
        return Err(WorkerDirError::Refused {
            path: path.to_path_buf(),
            why: "is a directory",
        });
    }
    let outcome = if kind.is_symlink() {
        Wiped::LinkRemoved
    } else if !kind.is_file() {
        Wiped::RemovedUnwritten("not a regular file".into())
    } else if before.nlink() != 1 || before.uid() != owner {
        Wiped::RemovedUnwritten(format!(
            "a file with {} names, of uid {}: only its name removed, nothing written through it",
            before.nlink(),
            before.uid()
        ))
    } else if before.size() > WIPE_BOUND {
        Wiped::RemovedUnwritten(format!(
            "{} bytes, more than any key ({WIPE_BOUND} at most): removed without writing",
            before.size()
        ))
    } else {
        match overwrite(&dir, name, &before) {
            Ok(()) => Wiped::Overwritten,
            Err(why) => Wiped::RemovedUnwritten(why),
        }
    };
    match dir.unlink(name) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_at("remove", path.to_path_buf())(e)),
    }
    let _ = dir.sync();
    Ok(outcome)
}

/// Zeros over the file `before` describes, at most [`WIPE_BOUND`] bytes
/// whatever it has grown to since; the error in words when it could not.
fn overwrite(dir: &Dir, name: &OsStr, before: &std::fs::Metadata) -> Result<(), String> {
    let mut file = dir.open_write(name).map_err(|e| format!("open: {e}"))?;
    let meta = file.metadata().map_err(|e| format!("inspect: {e}"))?;
    if !meta.is_file() || ids(&meta) != ids(before) || meta.nlink() != 1 {
        return Err("it changed while it was opened".into());
    }
    let mut left = meta.size().min(WIPE_BOUND);
    let zeros = [0u8; 8192];
    while left > 0 {
        let n = usize::try_from(left.min(zeros.len() as u64)).unwrap_or(zeros.len());
        file.write_all(&zeros[..n])
            .map_err(|e| format!("overwrite: {e}"))?;
        left -= n as u64;
    }
    file.sync_all().map_err(|e| format!("sync: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("aromba-wdirs-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_link_at_the_file_is_replaced_and_its_target_left_alone() {
        let d = scratch("file-link");
        let victim = d.join("victim");
        std::fs::write(&victim, "precious").unwrap();
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::create_dir_all(d.join("home")).unwrap();
        std::os::unix::fs::symlink(&victim, d.join("home/pot")).unwrap();
        write_file(&d.join("home/pot"), b"decoy", 7, 0o640, 0o755).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        let m = std::fs::symlink_metadata(&victim).unwrap();
        assert_eq!((m.mode() & 0o7777, m.gid()), (0o644, 0));
        let pot = std::fs::symlink_metadata(d.join("home/pot")).unwrap();
        assert!(pot.is_file());
        assert_eq!((pot.uid(), pot.gid(), pot.mode() & 0o7777), (0, 7, 0o640));
        assert_eq!(std::fs::read(d.join("home/pot")).unwrap(), b"decoy");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_link_on_the_way_is_refused_and_nothing_is_made_through_it() {
        let d = scratch("dir-link");
        std::fs::create_dir_all(d.join("elsewhere")).unwrap();
        std::os::unix::fs::symlink(d.join("elsewhere"), d.join("home")).unwrap();
        let e = write_file(&d.join("home/.aws/credentials"), b"x", 0, 0o640, 0o755).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read_dir(d.join("elsewhere")).unwrap().count(), 0);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_wipe_removes_a_link_without_writing_through_it() {
        let d = scratch("wipe");
        let victim = d.join("victim");
        std::fs::write(&victim, "precious").unwrap();
        std::os::unix::fs::symlink(&victim, d.join("secrets.toml")).unwrap();
        assert_eq!(
            wipe(&d.join("secrets.toml"), 0).unwrap(),
            Wiped::LinkRemoved
        );
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        std::fs::write(d.join("secrets.toml"), "api_key = \"sk-x\"").unwrap();
        assert_eq!(
            wipe(&d.join("secrets.toml"), 0).unwrap(),
            Wiped::Overwritten
        );
        assert!(!d.join("secrets.toml").exists());
        assert_eq!(wipe(&d.join("secrets.toml"), 0).unwrap(), Wiped::Absent);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
