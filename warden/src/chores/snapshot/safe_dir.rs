//! Acting on what lies under the roots through open directories, never
//! through a path re-resolved at each system call.
//!
//! A [`Dir`] is a directory opened with `O_DIRECTORY | O_NOFOLLOW` (and
//! `O_CLOEXEC`, which std always adds). Everything done in it goes through
//! `/proc/self/fd/<fd>/<name>`: Linux resolves `/proc/self/fd/<fd>` to the
//! very directory the descriptor holds, without walking its ancestors again,
//! and looks `name` up inside it; rename, unlink, link, symlink and mkdir do
//! not follow a final symlink, and opens here add `O_NOFOLLOW`. Owner, mode
//! and times are set through an opened descriptor (`fchown`, `fchmod`,
//! `futimens`), a symlink's owner with `lchown` on its procfs path. So a
//! directory swapped for a symlink, or moved elsewhere, after it was opened
//! cannot redirect anything done through it: it acts on the directory that
//! was opened and checked, wherever that now is.
//!
//! Paths are resolved from `/` one component at a time ([`Dir::open_path`]),
//! and below a root by a [`Chain`] that checks each directory's device and
//! inode against what the snapshot expects there.

#![forbid(unsafe_code)]

use super::MAX_ENTRIES;
use super::error::{SnapshotError, io_err};
use std::ffi::{OsStr, OsString};
use std::fs::{self, DirBuilder, File, FileTimes, Metadata, OpenOptions, Permissions};
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{
    DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt, fchown, lchown, symlink,
};
use std::os::unix::io::AsRawFd;
use std::path::{Component, Path, PathBuf};
use std::time::SystemTime;

/// How every file under a root is opened: never through a symlink, never
/// waiting on a fifo or device, never taking a terminal as ours.
pub(super) const FILE_FLAGS: i32 = libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY;

/// How every directory is opened (std adds `O_CLOEXEC`).
pub(super) const DIR_FLAGS: i32 = libc::O_DIRECTORY | libc::O_NOFOLLOW;

/// A device and inode: what a file is, wherever it is.
pub(crate) type Ids = (u64, u64);

pub(crate) fn ids(m: &Metadata) -> Ids {
    (m.dev(), m.ino())
}

/// The effective user the Warden runs as (root in production): the owner
/// required of the quarantine and of every directory the undo makes.
pub(super) fn our_uid() -> u32 {
    crate::system::euid()
}

/// `n` random bytes from `/dev/urandom`, in lower hex.
pub(crate) fn random_hex(n: usize) -> Result<String, SnapshotError> {
    let path = Path::new("/dev/urandom");
    let mut bytes = vec![0u8; n];
    File::open(path)
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(io_err("read", path))?;
    Ok(aromba_warden_proto::encode_hex(&bytes))
}

/// An open directory.
#[derive(Debug)]
pub(crate) struct Dir {
    fd: File,
    /// Where it was when opened: for messages only, never acted on.
    path: PathBuf,
}

/// What is found at a name where a directory is wanted.
#[derive(Debug)]
pub(crate) enum Sub {
    Dir(Dir),
    Missing,
    /// A symlink: never followed.
    Symlink,
    /// A file, fifo or the like.
    NotDir,
    /// A directory, but not the one expected (another inode or device).
    Elsewhere,
}

impl Dir {
    fn open(path: &Path) -> io::Result<File> {
        OpenOptions::new()
            .read(true)
            .custom_flags(DIR_FLAGS)
            .open(path)
    }

    /// Opens `path` (absolute) from `/` one component at a time, none of
    /// them followed if it is a symlink: the directory reached is the one
    /// `path` names with no symlink in any component.
    pub(crate) fn open_path(path: &Path) -> Result<Sub, SnapshotError> {
        if !path.is_absolute() {
            return Err(SnapshotError::Unsafe {
                path: path.to_path_buf(),
                why: "the path is not absolute",
            });
        }
        let root = Path::new("/");
        let mut dir = Dir {
            fd: Dir::open(root).map_err(io_err("open", root))?,
            path: root.to_path_buf(),
        };
        for c in path.components() {
            match c {
                Component::RootDir | Component::CurDir => {}
                Component::Normal(name) => match dir.child_dir(name)? {
                    Sub::Dir(d) => dir = d,
                    other => return Ok(other),
                },
                Component::ParentDir | Component::Prefix(_) => {
                    return Err(SnapshotError::Unsafe {
                        path: path.to_path_buf(),
                        why: "the path has `..`",
                    });
                }
            }
        }
        Ok(Sub::Dir(dir))
    }

    /// Where it was when opened (for messages).
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// `/proc/self/fd/<fd>`: the directory itself.
    fn proc(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))
    }

    /// `name` in this directory as a path through the directory's
    /// descriptor (`/proc/self/fd/N/name`): no component before `name` can
    /// be swapped or followed by whoever uses it.
    pub(crate) fn at(&self, name: &OsStr) -> io::Result<PathBuf> {
        let b = name.as_bytes();
        if b.is_empty() || b == b"." || b == b".." || b.contains(&b'/') || b.contains(&0) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a plain file name",
            ));
        }
        Ok(self.proc().join(name))
    }

    /// `name` in this directory, as the messages show it.
    pub(crate) fn shown(&self, name: &OsStr) -> PathBuf {
        self.path.join(name)
    }

    pub(super) fn try_clone(&self) -> Result<Dir, SnapshotError> {
        Ok(Dir {
            fd: self.fd.try_clone().map_err(io_err("open", &self.path))?,
            path: self.path.clone(),
        })
    }

    /// The directory's own `fstat`.
    pub(crate) fn meta(&self) -> Result<Metadata, SnapshotError> {
        self.fd.metadata().map_err(io_err("inspect", &self.path))
    }

    /// The descriptor, for `fchown`, `fchmod`, `futimens` and `fsync`.
    pub(crate) fn file(&self) -> &File {
        &self.fd
    }

    /// Opens the directory `name`, never through a symlink.
    pub(crate) fn child_dir(&self, name: &OsStr) -> Result<Sub, SnapshotError> {
        let shown = self.shown(name);
        let at = self.at(name).map_err(io_err("open", &shown))?;
        match Dir::open(&at) {
            Ok(fd) => Ok(Sub::Dir(Dir { fd, path: shown })),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Sub::Missing),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) => {
                Ok(match self.lstat(name)? {
                    None => Sub::Missing,
                    Some(m) if m.file_type().is_symlink() => Sub::Symlink,
                    Some(_) => Sub::NotDir,
                })
            }
            Err(e) => Err(io_err("open", &shown)(e)),
        }
    }

    /// Opens the directory `name` only if it is the one with `want`'s
    /// device and inode.
    pub(super) fn child_dir_is(&self, name: &OsStr, want: Ids) -> Result<Sub, SnapshotError> {
        match self.child_dir(name)? {
            Sub::Dir(d) => {
                if ids(&d.meta()?) == want {
                    Ok(Sub::Dir(d))
                } else {
                    Ok(Sub::Elsewhere)
                }
            }
            other => Ok(other),
        }
    }

    /// `lstat` of `name` (not followed); `None` if nothing is there.
    pub(crate) fn lstat(&self, name: &OsStr) -> Result<Option<Metadata>, SnapshotError> {
        let shown = self.shown(name);
        let at = self.at(name).map_err(io_err("inspect", &shown))?;
        match fs::symlink_metadata(&at) {
            Ok(m) => Ok(Some(m)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err("inspect", &shown)(e)),
        }
    }

    pub(super) fn read_link(&self, name: &OsStr) -> Result<PathBuf, SnapshotError> {
        let shown = self.shown(name);
        self.at(name)
            .and_then(fs::read_link)
            .map_err(io_err("read the link", &shown))
    }

    /// The names in the directory, sorted (so walks go in path order).
    /// Reads at most [`MAX_ENTRIES`] + 1 names: a directory holding more is
    /// [`SnapshotError::TooManyEntries`], never read whole into memory.
    pub(super) fn list(&self) -> Result<Vec<OsString>, SnapshotError> {
        let rd = fs::read_dir(self.proc()).map_err(io_err("list", &self.path))?;
        let mut names = Vec::new();
        for item in rd.take(MAX_ENTRIES + 1) {
            names.push(item.map_err(io_err("list", &self.path))?.file_name());
        }
        if names.len() > MAX_ENTRIES {
            return Err(SnapshotError::TooManyEntries { limit: MAX_ENTRIES });
        }
        names.sort();
        Ok(names)
    }

    /// Free and total bytes of the directory's filesystem.
    pub(super) fn space(&self) -> Result<(u64, u64), SnapshotError> {
        crate::system::space(&self.proc()).map_err(io_err("measure the free space of", &self.path))
    }

    /// Opens the regular file `name` for reading: never through a symlink,
    /// never blocking on a fifo or device.
    pub(crate) fn open_file(&self, name: &OsStr) -> io::Result<File> {
        OpenOptions::new()
            .read(true)
            .custom_flags(FILE_FLAGS)
            .open(self.at(name)?)
    }

    /// Opens the existing file `name` for writing (never through a
    /// symlink, never blocking on a fifo or device; the caller checks what
    /// it opened with `fstat`).
    pub(crate) fn open_write(&self, name: &OsStr) -> io::Result<File> {
        OpenOptions::new()
            .write(true)
            .custom_flags(FILE_FLAGS)
            .open(self.at(name)?)
    }

    /// Opens the file `name` only if it is a regular file with `want`'s
    /// device and inode; [`SnapshotError::Changed`] otherwise (a symlink,
    /// fifo, device or another file swapped in).
    pub(super) fn open_listed(
        &self,
        name: &OsStr,
        want: Ids,
    ) -> Result<(File, Metadata), SnapshotError> {
        let shown = self.shown(name);
        let file = match self.open_file(name) {
            Ok(f) => f,
            // O_NOFOLLOW on a symlink.
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(SnapshotError::Changed(shown));
            }
            Err(e) => return Err(io_err("open", &shown)(e)),
        };
        let meta = file.metadata().map_err(io_err("inspect", &shown))?;
        if !meta.is_file() || ids(&meta) != want {
            return Err(SnapshotError::Changed(shown));
        }
        Ok((file, meta))
    }

    /// Creates the file `name` (which must not exist; never follows a
    /// symlink there) with `mode`, for writing.
    pub(crate) fn create_file(&self, name: &OsStr, mode: u32) -> io::Result<File> {
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NOCTTY)
            .open(self.at(name)?)
    }

    /// Renames `name` here to `name2` in `to`. Like rename(2), it replaces
    /// what is at `name2`: use it only into a directory no one else can
    /// write, after checking the name is free.
    pub(crate) fn rename_to(&self, name: &OsStr, to: &Dir, name2: &OsStr) -> io::Result<()> {
        fs::rename(self.at(name)?, to.at(name2)?)
    }

    /// Links `name` here (a symlink itself, not followed) as `name2` in
    /// `to`; never replaces anything (`AlreadyExists`).
    pub(super) fn link(&self, name: &OsStr, to: &Dir, name2: &OsStr) -> io::Result<()> {
        fs::hard_link(self.at(name)?, to.at(name2)?)
    }

    pub(super) fn symlink(&self, target: &Path, name: &OsStr) -> io::Result<()> {
        symlink(target, self.at(name)?)
    }

    /// Sets a symlink's owner (the link itself, not what it points to).
    pub(super) fn lchown(&self, name: &OsStr, uid: u32, gid: u32) -> io::Result<()> {
        lchown(self.at(name)?, Some(uid), Some(gid))
    }

    /// Makes the directory `name` (fails if anything is there).
    pub(crate) fn mkdir(&self, name: &OsStr, mode: u32) -> io::Result<()> {
        DirBuilder::new().mode(mode).create(self.at(name)?)
    }

    pub(crate) fn unlink(&self, name: &OsStr) -> io::Result<()> {
        fs::remove_file(self.at(name)?)
    }

    pub(super) fn rmdir(&self, name: &OsStr) -> io::Result<()> {
        fs::remove_dir(self.at(name)?)
    }

    pub(crate) fn sync(&self) -> Result<(), SnapshotError> {
        self.fd.sync_all().map_err(io_err("sync", &self.path))
    }
}

/// Owner, then mode (a chown clears setuid), then mtime, through an open
/// descriptor so no path can redirect them.
pub(super) fn set_attrs_fd(
    file: &File,
    shown: &Path,
    uid: u32,
    gid: u32,
    mode: u32,
    mtime: SystemTime,
) -> Result<(), SnapshotError> {
    fchown(file, Some(uid), Some(gid)).map_err(io_err("set the owner of", shown))?;
    file.set_permissions(Permissions::from_mode(mode))
        .map_err(io_err("set the mode of", shown))?;
    file.set_times(FileTimes::new().set_modified(mtime))
        .map_err(io_err("set the mtime of", shown))
}

/// What a [`Chain`] expects of a directory at a path below its base.
#[derive(Clone, Copy, Debug)]
pub(super) enum Expect {
    /// The directory with this device and inode.
    Is(Ids),
    /// Nothing known: what is there is not to be gone into.
    Unknown,
}

/// Where a [`Chain`] got to.
#[derive(Debug)]
pub(super) enum Reached {
    Dir(Dir),
    /// This directory (the first one missing on the way) is not there, or
    /// is a file (or the like) now; its parent was reached and is as
    /// expected.
    Missing(PathBuf),
    /// A symlink, or a directory not the one expected, stands on the way
    /// (or the path is not below the base).
    Blocked,
}

/// Open directories from a base (a root's parent, opened from `/` without
/// following symlinks) down to the last one asked for, reused while paths
/// are asked for in order. Each directory below the base is opened without
/// following a symlink and must be the one [`Expect`]ed there.
pub(super) struct Chain {
    stack: Vec<(PathBuf, Dir)>,
}

impl Chain {
    pub(super) fn new(base_path: PathBuf, base: Dir) -> Chain {
        Chain {
            stack: vec![(base_path, base)],
        }
    }

    /// Opens the base `path` (from `/`, no symlink followed); `None` if it
    /// is missing or not a directory, an error if a component is a symlink.
    pub(super) fn at(path: &Path) -> Result<Option<Chain>, SnapshotError> {
        match Dir::open_path(path)? {
            Sub::Dir(d) => Ok(Some(Chain::new(path.to_path_buf(), d))),
            Sub::Symlink => Err(SnapshotError::Unsafe {
                path: path.to_path_buf(),
                why: "a component of the path is a symlink",
            }),
            Sub::Missing | Sub::NotDir | Sub::Elsewhere => Ok(None),
        }
    }

    /// The directory at `dir` (at or below the base), as a new descriptor.
    pub(super) fn reach(
        &mut self,
        dir: &Path,
        expect: &dyn Fn(&Path) -> Expect,
    ) -> Result<Reached, SnapshotError> {
        while self.stack.len() > 1 && self.stack.last().is_some_and(|(p, _)| !dir.starts_with(p)) {
            self.stack.pop();
        }
        loop {
            let Some((top_path, top)) = self.stack.last() else {
                return Ok(Reached::Blocked);
            };
            let Ok(rest) = dir.strip_prefix(top_path) else {
                return Ok(Reached::Blocked);
            };
            let name = match rest.components().next() {
                None => return top.try_clone().map(Reached::Dir),
                Some(Component::Normal(n)) => n,
                Some(_) => return Ok(Reached::Blocked),
            };
            let path = top_path.join(name);
            let d = match top.child_dir(name)? {
                Sub::Dir(d) => d,
                // A file where a directory was: whatever was below is gone.
                Sub::Missing | Sub::NotDir => return Ok(Reached::Missing(path)),
                Sub::Symlink | Sub::Elsewhere => return Ok(Reached::Blocked),
            };
            match expect(&path) {
                Expect::Is(want) if ids(&d.meta()?) == want => self.stack.push((path, d)),
                Expect::Is(_) | Expect::Unknown => return Ok(Reached::Blocked),
            }
        }
    }

    /// Lets go of the directories at or below `path` (moved away or made
    /// anew), so they are opened and checked again when next needed.
    pub(super) fn forget(&mut self, path: &Path) {
        while self.stack.len() > 1 && self.stack.last().is_some_and(|(p, _)| p.starts_with(path)) {
            self.stack.pop();
        }
    }
}

/// A private directory (0700, ours) made in another, on its filesystem:
/// what is moved or made in it is out of everyone else's reach. Removed by
/// [`Staging::remove`] once empty.
#[derive(Debug)]
pub(super) struct Staging {
    pub(super) dir: Dir,
    parent: Dir,
    name: OsString,
    ids: Ids,
}

impl Staging {
    /// Makes `.aromba-undo-<16 random hex>` in `parent`, which fails if
    /// anything is there, and checks that what it opens is the directory it
    /// made: ours, 0700, on `parent`'s filesystem.
    pub(super) fn create(parent: &Dir) -> Result<Staging, SnapshotError> {
        let mut tries = 0;
        let name = loop {
            let name = OsString::from(format!(".aromba-undo-{}", random_hex(8)?));
            match parent.mkdir(&name, 0o700) {
                Ok(()) => break name,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && tries < 8 => tries += 1,
                Err(e) => return Err(io_err("create", &parent.shown(&name))(e)),
            }
        };
        let Some((dir, m)) = fresh_dir(parent, &name)? else {
            return Err(SnapshotError::Unsafe {
                path: parent.shown(&name),
                why: "the private directory the undo made was swapped",
            });
        };
        Ok(Staging {
            dir,
            parent: parent.try_clone()?,
            name,
            ids: ids(&m),
        })
    }

    /// Where it is, for messages.
    pub(super) fn shown(&self) -> PathBuf {
        self.parent.shown(&self.name)
    }

    /// Removes the directory, if it is still ours where it was made and
    /// empty.
    pub(super) fn remove(self) -> Result<(), SnapshotError> {
        let shown = self.shown();
        if self
            .parent
            .lstat(&self.name)?
            .is_some_and(|m| ids(&m) == self.ids)
        {
            self.parent
                .rmdir(&self.name)
                .map_err(io_err("remove", &shown))?;
        }
        Ok(())
    }
}

/// Opens the directory `name` that was just made (0700) in `parent`, and
/// checks it is that very directory: ours, private, on `parent`'s
/// filesystem, and empty (no entry, no subdirectory: at most 2 links, as an
/// empty directory has on Linux filesystems that count them). `None` if
/// what is there is anything else, e.g. a directory swapped in after the
/// mkdir.
pub(crate) fn fresh_dir(
    parent: &Dir,
    name: &OsStr,
) -> Result<Option<(Dir, Metadata)>, SnapshotError> {
    let Sub::Dir(dir) = parent.child_dir(name)? else {
        return Ok(None);
    };
    let m = dir.meta()?;
    if m.uid() != our_uid()
        || m.mode() & 0o077 != 0
        || m.dev() != parent.meta()?.dev()
        || m.nlink() > 2
        || !dir.list()?.is_empty()
    {
        return Ok(None);
    }
    Ok(Some((dir, m)))
}

/// Checks once that `/proc/self/fd/<fd>` resolves to the very directory
/// the descriptor holds (everything under the roots is reached that way):
/// without `/proc`, every root would look absent.
pub(super) fn check_proc() -> Result<(), SnapshotError> {
    check_proc_at(Path::new("/proc/self/fd"))
}

/// [`check_proc`] with the descriptor directory at `fds` (tests).
pub(super) fn check_proc_at(fds: &Path) -> Result<(), SnapshotError> {
    let root = Path::new("/");
    let fd = Dir::open(root).map_err(io_err("open", root))?;
    let want = ids(&fd.metadata().map_err(io_err("inspect", root))?);
    let through = fds.join(fd.as_raw_fd().to_string());
    match fs::metadata(&through) {
        Ok(m) if m.is_dir() && ids(&m) == want => Ok(()),
        _ => Err(SnapshotError::Unsafe {
            path: fds.to_path_buf(),
            why: "snapshots need /proc mounted (every path is reached through /proc/self/fd)",
        }),
    }
}
