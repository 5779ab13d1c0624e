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

use super::diff::human;
use super::entry::{Kind, Why};
use super::error::{SnapshotError, io_err};
use super::safe_dir::{Dir, Ids, Staging, Sub, ids, our_uid, random_hex, set_attrs_fd};
use super::walk::{MAX_DEPTH, copy_hashed, too_deep, walk_below};
use std::ffi::{OsStr, OsString};
use std::fs::Metadata;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

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

    /// Moves `name` in `from` (the thing at `path`) into the quarantine.
    /// Only the very inode seen there just before is recorded as moved: a
    /// thing swapped in between is moved too (never lost), but excuses no
    /// ctime.
    pub(super) fn move_in(
        &mut self,
        from: &Dir,
        name: &OsStr,
        path: &Path,
    ) -> Result<Moved, SnapshotError> {
        let expect = from.lstat(name)?.map(|m| ids(&m));
        let (dest, dest_name) = self.dest(path)?;
        // The name is free, and only the Warden writes there.
        match from.rename_to(name, &dest, &dest_name) {
            Ok(()) => {
                let now = dest.lstat(&dest_name)?.map(|m| ids(&m));
                Ok(Moved {
                    ids: now.filter(|n| Some(*n) == expect).into_iter().collect(),
                    kept: Vec::new(),
                })
            }
            Err(e) if e.kind() == io::ErrorKind::CrossesDevices => {
                move_across(from, name, expect, &dest, &dest_name)
            }
            Err(e) => Err(io_err("move to quarantine", path)(e)),
        }
    }
}

/// What a move into the quarantine did.
#[derive(Debug, Default)]
pub(super) struct Moved {
    /// The inodes moved out of the roots (the move changed their ctime).
    pub(super) ids: Vec<Ids>,
    /// What a move across filesystems left in its staging directory, where
    /// each now is: fifos, sockets and device nodes (never unlinked, as
    /// they hold no data to copy), and files that changed while copied.
    pub(super) kept: Vec<PathBuf>,
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

/// Bytes kept free on the quarantine's filesystem by a move across
/// filesystems: the larger of 1 GiB and a tenth of it.
pub(super) fn reserve(total: u64) -> u64 {
    KeepFree::GigabyteOrTenth.of(total)
}

/// What a snapshot leaves free on the filesystem it is written to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KeepFree {
    /// The larger of 1 GiB and a tenth of the filesystem, so a snapshot
    /// never fills the disk the server's services write to.
    #[default]
    GigabyteOrTenth,
    /// Exactly this many bytes. For tests on a shared machine, whose disk
    /// may be mostly full of what is not theirs: they measure the Warden,
    /// not how much of the machine is free.
    Bytes(u64),
}

impl KeepFree {
    /// Bytes kept free on a filesystem of `total` bytes.
    pub fn of(self, total: u64) -> u64 {
        match self {
            KeepFree::GigabyteOrTenth => (1u64 << 30).max(total / 10),
            KeepFree::Bytes(n) => n,
        }
    }

    /// Bytes a snapshot may fill where `avail` of `total` are free.
    pub fn room(self, avail: u64, total: u64) -> u64 {
        avail.saturating_sub(self.of(total))
    }
}

/// Moves `name` in `from` (which was `expect` when looked at) to
/// `dest_name` in `dest`, on another filesystem: first renamed into a
/// private directory made in `from` (same filesystem), where no one else can
/// add to it or swap it; measured there, and refused if it needs more than
/// the quarantine's free space less [`reserve`]; then copied from there and
/// removed from there as far as it is unchanged. If the copy fails or is
/// refused, what was moved stays in the private directory (named in the
/// error), whole; fifos, sockets, devices and files that changed while
/// copied stay there too, and are named in [`Moved::kept`].
pub(super) fn move_across(
    from: &Dir,
    name: &OsStr,
    expect: Option<Ids>,
    dest: &Dir,
    dest_name: &OsStr,
) -> Result<Moved, SnapshotError> {
    let (avail, total) = dest.space()?;
    let room = avail.saturating_sub(reserve(total));
    move_across_within(from, name, expect, dest, dest_name, room)
}

/// [`move_across`] with `room` bytes to fill in the quarantine.
pub(super) fn move_across_within(
    from: &Dir,
    name: &OsStr,
    expect: Option<Ids>,
    dest: &Dir,
    dest_name: &OsStr,
    room: u64,
) -> Result<Moved, SnapshotError> {
    let stage = Staging::create(from)?;
    let staged = OsStr::new(STAGED);
    if let Err(e) = from.rename_to(name, &stage.dir, staged) {
        let _ = stage.remove();
        return Err(io_err("move to quarantine", &from.shown(name))(e));
    }
    let stranded = |why: String| SnapshotError::Stranded {
        path: stage.shown().join(STAGED),
        why,
    };
    let same = stage.dir.lstat(staged)?.map(|m| ids(&m)) == expect;
    let needed = measure(&stage.dir, staged).map_err(|e| stranded(e.to_string()))?;
    if needed > room {
        return Err(stranded(format!(
            "the quarantine's filesystem has room for {} (keeping the larger of 1 GiB and a tenth of it free), and this needs {}",
            human(room),
            human(needed)
        )));
    }
    match move_by_copy(&stage.dir, staged, dest, dest_name) {
        Ok(mut moved) => {
            if !same {
                moved.ids.clear();
            }
            if moved.kept.is_empty() {
                stage.remove()?;
            }
            Ok(moved)
        }
        Err(e) => Err(stranded(e.to_string())),
    }
}

/// Bytes a copy of `name` in `dir` takes at most: each regular file's size
/// and every entry's own block, rounded up to 4 KiB.
fn measure(dir: &Dir, name: &OsStr) -> Result<u64, SnapshotError> {
    const BLOCK: u64 = 4096;
    let size = |m: &Metadata| {
        let data = if m.is_file() { m.size() } else { 0 };
        data.div_ceil(BLOCK).saturating_add(1).saturating_mul(BLOCK)
    };
    let Some(meta) = dir.lstat(name)? else {
        return Ok(0);
    };
    let mut total = size(&meta);
    if !meta.is_dir() {
        return Ok(total);
    }
    let Sub::Dir(top) = dir.child_dir_is(name, ids(&meta))? else {
        return Err(SnapshotError::Changed(dir.shown(name)));
    };
    walk_below(
        top,
        &dir.shown(name),
        meta.dev(),
        &[],
        &mut |at| {
            total = total.saturating_add(size(at.meta));
            Ok(true)
        },
        &mut |_, e| Err(e),
    )?;
    Ok(total)
}

/// What one copy made: each entry's identity and ctime as copied, so that
/// only what is still so is removed. In path order, a directory before what
/// is in it, so all below an entry follows it at once.
#[derive(Debug, Default)]
pub(super) struct Copied {
    nodes: Vec<Node>,
}

#[derive(Debug)]
struct Node {
    /// The index of the directory it is in (the first node's is unused).
    parent: usize,
    name: OsString,
    what: What,
}

#[derive(Clone, Copy, Debug)]
enum What {
    /// A file or symlink.
    Leaf {
        ids: Ids,
        ctime: (i64, i64),
    },
    /// Not copied, and to stay where it is: a fifo, socket or device node
    /// (never unlinked), or a file that changed while it was copied (its
    /// partial copy is not kept).
    Kept {
        ids: Ids,
    },
    Dir {
        ids: Ids,
    },
}

/// What [`remove_copied`] left of an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Left {
    /// Nothing: all of it was removed (or is gone).
    Gone,
    /// Only what [`What::Kept`] says stays (and the directories holding it).
    Kept,
    /// Something appeared or changed since the copy.
    Changed,
}

/// Copies `name` in `src` to `dest_name` in `dest` and removes from `src`
/// what was copied and is unchanged since; what is left (appeared or
/// changed meanwhile) is copied again beside it (`dest_name.1`, …), up to
/// three rounds, after which it stays where it is and this fails. What is
/// kept ([`What::Kept`]) stays where it is, named in [`Moved::kept`].
pub(super) fn move_by_copy(
    src: &Dir,
    name: &OsStr,
    dest: &Dir,
    dest_name: &OsStr,
) -> Result<Moved, SnapshotError> {
    let mut removed = Vec::new();
    let mut target = free_name(dest, dest_name)?;
    for _ in 0..ROUNDS {
        let Some(meta) = src.lstat(name)? else {
            return Ok(Moved {
                ids: removed,
                kept: Vec::new(),
            });
        };
        let copied = copy_tree(src, name, &meta, dest, &target, meta.dev())?;
        dest.sync()?;
        let mut kept = Vec::new();
        match remove_copied(src, name, &copied, &mut removed, &mut kept)? {
            Left::Gone => {
                return Ok(Moved {
                    ids: removed,
                    kept: Vec::new(),
                });
            }
            Left::Kept => return Ok(Moved { ids: removed, kept }),
            Left::Changed => {}
        }
        target = free_name(dest, dest_name)?;
    }
    Err(SnapshotError::Changed(src.shown(name)))
}

/// Copies one entry (and all below a directory, at most [`MAX_DEPTH`]
/// levels, without recursion), never following a symlink: owner, mode and
/// mtime through the new files' descriptors. A file is copied only up to
/// the size it had when opened, and kept where it is if it changed while
/// copied. Refuses another filesystem mounted inside.
pub(super) fn copy_tree(
    src: &Dir,
    name: &OsStr,
    meta: &Metadata,
    dest: &Dir,
    dest_name: &OsStr,
    dev: u64,
) -> Result<Copied, SnapshotError> {
    /// A directory being copied: its node, where from and to, and the names
    /// in it still to copy.
    struct Level {
        node: usize,
        from: Dir,
        out: Dir,
        meta: Metadata,
        names: std::vec::IntoIter<OsString>,
    }
    let mut copied = Copied::default();
    let mut stack: Vec<Level> = Vec::new();
    let (what, opened) = copy_one(src, name, meta, dest, dest_name, dev)?;
    copied.nodes.push(Node {
        parent: 0,
        name: name.to_os_string(),
        what,
    });
    if let Some((from, out)) = opened {
        let names = from.list()?.into_iter();
        stack.push(Level {
            node: 0,
            from,
            out,
            meta: meta.clone(),
            names,
        });
    }
    loop {
        let depth = stack.len();
        let Some(top) = stack.last_mut() else {
            break;
        };
        let Some(n) = top.names.next() else {
            if let Some(done) = stack.pop() {
                let mtime = done
                    .meta
                    .modified()
                    .map_err(io_err("inspect", done.from.path()))?;
                set_attrs_fd(
                    done.out.file(),
                    done.out.path(),
                    done.meta.uid(),
                    done.meta.gid(),
                    done.meta.mode() & 0o7777,
                    mtime,
                )?;
            }
            continue;
        };
        let Some(m) = top.from.lstat(&n)? else {
            continue;
        };
        if m.is_dir() && depth >= MAX_DEPTH {
            return Err(too_deep(&top.from.shown(&n)));
        }
        let (what, opened) = copy_one(&top.from, &n, &m, &top.out, &n, dev)?;
        let node = copied.nodes.len();
        copied.nodes.push(Node {
            parent: top.node,
            name: n,
            what,
        });
        if let Some((from, out)) = opened {
            let names = from.list()?.into_iter();
            stack.push(Level {
                node,
                from,
                out,
                meta: m,
                names,
            });
        }
    }
    Ok(copied)
}

/// Copies one entry: a directory is made (its contents and attributes are
/// [`copy_tree`]'s to fill in), and returned open, with where it is copied
/// from.
fn copy_one(
    src: &Dir,
    name: &OsStr,
    meta: &Metadata,
    dest: &Dir,
    dest_name: &OsStr,
    dev: u64,
) -> Result<(What, Option<(Dir, Dir)>), SnapshotError> {
    let shown = src.shown(name);
    let to = dest.shown(dest_name);
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
            Ok((What::Dir { ids: ids(meta) }, Some((from, out))))
        }
        Kind::File => {
            let (mut f, m) = src.open_listed(name, ids(meta))?;
            let mut out = dest
                .create_file(dest_name, 0o600)
                .map_err(io_err("create", &to))?;
            let (copied, _) = copy_hashed(&mut f, &shown, &mut out, &to, m.size())?;
            #[cfg(test)]
            super::walk::churn::at(&shown);
            let after = f.metadata().map_err(io_err("inspect", &shown))?;
            let times = |m: &Metadata| {
                (
                    m.size(),
                    m.mtime(),
                    m.mtime_nsec(),
                    m.ctime(),
                    m.ctime_nsec(),
                )
            };
            if copied != m.size() || times(&after) != times(&m) {
                // Grew (or changed) while copied: the partial copy goes, the
                // file stays where it is.
                drop(out);
                dest.unlink(dest_name)
                    .map_err(io_err("remove the partial copy", &to))?;
                return Ok((What::Kept { ids: ids(&m) }, None));
            }
            let mtime = m.modified().map_err(io_err("inspect", &shown))?;
            set_attrs_fd(&out, &to, m.uid(), m.gid(), m.mode() & 0o7777, mtime)?;
            out.sync_all().map_err(io_err("sync", &to))?;
            // As opened: a change since the lstat shows in the ctime.
            let ctime = (m.ctime(), m.ctime_nsec());
            Ok((
                What::Leaf {
                    ids: ids(&m),
                    ctime,
                },
                None,
            ))
        }
        Kind::Symlink => {
            let target = src.read_link(name)?;
            dest.symlink(&target, dest_name)
                .map_err(io_err("create the link", &to))?;
            dest.lchown(dest_name, meta.uid(), meta.gid())
                .map_err(io_err("set the owner of", &to))?;
            let ctime = (meta.ctime(), meta.ctime_nsec());
            Ok((
                What::Leaf {
                    ids: ids(meta),
                    ctime,
                },
                None,
            ))
        }
        Kind::Skipped(Why::Mount) => Err(SnapshotError::Unsafe {
            path: shown,
            why: "another filesystem is mounted there",
        }),
        // Fifos, sockets and device nodes hold no data to copy, and are
        // never unlinked: they stay.
        Kind::Skipped(_) => Ok((What::Kept { ids: ids(meta) }, None)),
        Kind::Unknown => Err(SnapshotError::Changed(shown)),
    }
}

/// Removes from `parent` what [`copy_tree`] copied of `name`, where it is
/// still the same inode with the same ctime; a directory only once empty
/// (without recursion). What appeared or changed since the copy stays, and
/// so does what is kept ([`What::Kept`]; where it is, if still the same
/// inode, is added to `kept`). Says what is left.
pub(super) fn remove_copied(
    parent: &Dir,
    name: &OsStr,
    copied: &Copied,
    removed: &mut Vec<Ids>,
    kept: &mut Vec<PathBuf>,
) -> Result<Left, SnapshotError> {
    let nodes = &copied.nodes;
    let Some(first) = nodes.first() else {
        return Ok(Left::Gone);
    };
    let want = match first.what {
        What::Dir { ids } => ids,
        what => return remove_one(parent, name, what, removed, kept),
    };
    let mut stack = match parent.child_dir_is(name, want)? {
        Sub::Dir(dir) => vec![Open {
            node: 0,
            want,
            dir,
            stays: Vec::new(),
            worst: Left::Gone,
        }],
        Sub::Missing => return Ok(Left::Gone),
        _ => return Ok(Left::Changed),
    };
    let mut i = 1;
    loop {
        let next = nodes.get(i);
        // Done with every directory the next node is not in.
        while let Some(open) = stack.pop_if(|o| next.is_none_or(|n| n.parent != o.node)) {
            let dir_name = nodes.get(open.node).map_or(name, |n| n.name.as_os_str());
            let in_dir = stack.last().map_or(parent, |o| &o.dir);
            let left = remove_dir(in_dir, dir_name, &open, removed)?;
            let Some(up) = stack.last_mut() else {
                return Ok(left);
            };
            if left != Left::Gone {
                up.stays.push(dir_name.to_os_string());
            }
            up.worst = up.worst.max(left);
        }
        let (Some(n), Some(top)) = (next, stack.last_mut()) else {
            return Ok(Left::Changed);
        };
        let at = i;
        i += 1;
        let left = match n.what {
            What::Dir { ids: want } => match top.dir.child_dir_is(&n.name, want)? {
                Sub::Dir(dir) => {
                    stack.push(Open {
                        node: at,
                        want,
                        dir,
                        stays: Vec::new(),
                        worst: Left::Gone,
                    });
                    continue;
                }
                other => {
                    // Not gone into: all below it (next in order) is passed.
                    while nodes.get(i).is_some_and(|d| d.parent >= at) {
                        i += 1;
                    }
                    if matches!(other, Sub::Missing) {
                        Left::Gone
                    } else {
                        Left::Changed
                    }
                }
            },
            what => remove_one(&top.dir, &n.name, what, removed, kept)?,
        };
        if left != Left::Gone {
            top.stays.push(n.name.clone());
        }
        top.worst = top.worst.max(left);
    }
}

/// A directory [`remove_copied`] holds open for removing what is in it.
struct Open {
    node: usize,
    want: Ids,
    dir: Dir,
    /// Names in it that stay.
    stays: Vec<OsString>,
    worst: Left,
}

/// Removes the file or symlink `name` in `parent` if it is still as copied;
/// keeps what is to be kept.
fn remove_one(
    parent: &Dir,
    name: &OsStr,
    what: What,
    removed: &mut Vec<Ids>,
    kept: &mut Vec<PathBuf>,
) -> Result<Left, SnapshotError> {
    let Some(m) = parent.lstat(name)? else {
        return Ok(Left::Gone);
    };
    match what {
        What::Leaf { ids: want, ctime } => {
            if ids(&m) != want || (m.ctime(), m.ctime_nsec()) != ctime || m.is_dir() {
                return Ok(Left::Changed);
            }
            match parent.unlink(name) {
                Ok(()) => removed.push(want),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_err("remove the moved", &parent.shown(name))(e)),
            }
            Ok(Left::Gone)
        }
        What::Kept { ids: want } if ids(&m) == want && !m.is_dir() => {
            kept.push(parent.shown(name));
            Ok(Left::Kept)
        }
        What::Kept { .. } | What::Dir { .. } => Ok(Left::Changed),
    }
}

/// Removes the directory `name` in `parent` (`open`, all in it dealt
/// with) if it is empty, or says what stays in it.
fn remove_dir(
    parent: &Dir,
    name: &OsStr,
    open: &Open,
    removed: &mut Vec<Ids>,
) -> Result<Left, SnapshotError> {
    match parent.rmdir(name) {
        Ok(()) => {
            removed.push(open.want);
            Ok(Left::Gone)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Left::Gone),
        Err(e) if e.kind() == io::ErrorKind::DirectoryNotEmpty => {
            // Only what is kept may be left in it; anything else appeared
            // after the copy.
            if open.worst == Left::Kept && open.dir.list()?.iter().all(|n| open.stays.contains(n)) {
                Ok(Left::Kept)
            } else {
                Ok(Left::Changed)
            }
        }
        Err(e) => Err(io_err("remove the moved", &parent.shown(name))(e)),
    }
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
