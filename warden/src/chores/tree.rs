//! The touches as the damage cap and the setuid rule see them: every entry
//! under each touch (files, directories, symlinks, fifos, sockets, devices),
//! walked through open directory descriptors, with what a change to it can
//! alter.
//!
//! The walk opens each directory with `O_DIRECTORY | O_NOFOLLOW` relative
//! to its parent's descriptor (through [`Dir`], by `/proc/self/fd/<fd>/<name>`)
//! and lists and `lstat`s its entries relative to that descriptor, so no path
//! is ever resolved whole: a chain of names longer than `PATH_MAX` is walked
//! like any other, and a directory swapped for a symlink is never followed.
//! Paths are kept only to name entries (compared and shown, never resolved).
//!
//! A change is any difference in type, mode, owner, size, allocated bytes,
//! mtime, ctime, inode, device, link count or file capabilities. The ctime
//! is the kernel's: a process can put an mtime back (`touch -r`) but not a
//! ctime, so a same-size rewrite or a `chmod` is seen. A lookup that fails
//! counts as a change, and so does an entry that vanished; the walk is
//! bounded (entries, depth, bytes of names), and a tree past a bound is
//! over the cap, never half counted.
//!
//! The walk crosses into filesystems mounted under a touch: bubblewrap binds
//! a touch with everything mounted below it (`MS_REC`), so the chore can
//! write there as well, and what it can write is what the cap must see.

#![forbid(unsafe_code)]

use super::snapshot::safe_dir::{Dir, Sub};
use std::collections::HashMap;
use std::ffi::{CStr, OsStr, OsString};
use std::fs::{Metadata, OpenOptions, Permissions};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// At most this many entries in one walk: the two trees of a run and the
/// watcher's must fit in the Warden's memory whatever a chore makes.
pub const MAX_ENTRIES: usize = 500_000;
/// At most this many directories deep below a touch (far past `PATH_MAX`
/// with long names; each level holds one descriptor while it is walked).
pub const MAX_DEPTH: usize = 256;
/// At most this many bytes of paths kept in one walk.
pub const MAX_PATH_BYTES: usize = 128 << 20;

/// The setuid and setgid bits.
pub const SETID_BITS: u32 = 0o6000;
/// Where file capabilities live.
const CAPABILITY: &CStr = c"security.capability";

/// One entry as the walk saw it (`lstat`, never followed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Type and permission bits (`st_mode`).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    /// Apparent size.
    pub size: u64,
    /// Bytes on disk (`st_blocks` × 512).
    pub allocated: u64,
    pub mtime: (i64, i64),
    pub ctime: (i64, i64),
    pub ino: u64,
    pub dev: u64,
    pub nlink: u64,
    /// A regular file with a `security.capability` attribute.
    pub caps: bool,
}

impl Entry {
    fn of(m: &Metadata, caps: bool) -> Entry {
        Entry {
            mode: m.mode(),
            uid: m.uid(),
            gid: m.gid(),
            size: m.size(),
            allocated: m.blocks().saturating_mul(512),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
            ino: m.ino(),
            dev: m.dev(),
            nlink: m.nlink(),
            caps,
        }
    }

    fn is_dir(&self) -> bool {
        self.mode & libc::S_IFMT == libc::S_IFDIR
    }

    fn is_file(&self) -> bool {
        self.mode & libc::S_IFMT == libc::S_IFREG
    }

    /// What it weighs toward the cap: the larger of apparent and allocated
    /// size, so neither a sparse file nor a preallocated one weighs nothing.
    fn weight(&self) -> u64 {
        self.size.max(self.allocated)
    }

    /// Setuid and setgid bits, on the entries where they mean something.
    fn setid(&self) -> u32 {
        if self.is_file() || self.is_dir() {
            self.mode & SETID_BITS
        } else {
            0
        }
    }
}

/// Every entry under the touches.
#[derive(Clone, Debug, Default)]
pub struct Tree {
    pub entries: HashMap<PathBuf, Entry>,
    /// Lookups that failed (an entry that vanished while being read, a
    /// directory that could not be opened or listed): each is a change.
    pub failed: u64,
    /// The walk stopped at one of its bounds: the tree is over the cap.
    pub over_bounds: bool,
}

/// A path as the journal and the receipt show it: printable ASCII, every
/// other byte written as `\xNN`, so no name can start a line or drive a
/// terminal.
pub fn shown(path: &Path) -> String {
    path.as_os_str().as_bytes().escape_ascii().to_string()
}

/// [`shown`], its middle cut when it is longer than [`SHOWN_BOUND`] bytes
/// (a chain of names past `PATH_MAX` would fill a receipt): its start and
/// its end stay.
pub fn shown_short(path: &Path) -> String {
    let full = shown(path);
    if full.len() <= SHOWN_BOUND {
        return full;
    }
    // `shown` is ASCII: any byte is a boundary.
    let head = &full[..SHOWN_BOUND / 4];
    let tail = &full[full.len() - SHOWN_BOUND / 2..];
    format!("{head}...{tail}")
}

/// The most bytes of a path [`shown_short`] keeps.
pub const SHOWN_BOUND: usize = 400;

/// `/proc/self/fd/<fd>/<name>`: `name` looked up inside the open directory,
/// its ancestors never walked again.
fn at(dir: &Dir, name: &OsStr) -> PathBuf {
    let mut p = PathBuf::from(format!("/proc/self/fd/{}", dir.file().as_raw_fd()));
    p.push(name);
    p
}

/// Whether the regular file `name` in `dir` has file capabilities.
fn has_caps(dir: &Dir, name: &OsStr) -> std::io::Result<bool> {
    crate::system::lgetxattr(&at(dir, name), CAPABILITY).map(|v| v.is_some())
}

/// A directory still to list: its parent (kept open while any of its
/// children wait), its name there, its shown path and depth below the touch.
struct Pending {
    parent: Rc<Dir>,
    name: OsString,
    path: PathBuf,
    depth: usize,
    expect: (u64, u64),
}

struct Walker {
    tree: Tree,
    path_bytes: usize,
    stack: Vec<Pending>,
}

impl Walker {
    /// Records the entry `name` of `parent`, at `path`; a directory is
    /// queued to be listed.
    fn record(
        &mut self,
        parent: &Rc<Dir>,
        name: &OsStr,
        path: PathBuf,
        m: &Metadata,
        depth: usize,
    ) {
        if self.tree.entries.len() >= MAX_ENTRIES
            || self.path_bytes.saturating_add(path.as_os_str().len()) > MAX_PATH_BYTES
        {
            self.tree.over_bounds = true;
            return;
        }
        let caps = if m.file_type().is_file() {
            match has_caps(parent, name) {
                Ok(c) => c,
                Err(_) => {
                    // Unknown is not "none": count it.
                    self.tree.failed += 1;
                    false
                }
            }
        } else {
            false
        };
        let e = Entry::of(m, caps);
        self.path_bytes += path.as_os_str().len();
        if e.is_dir() {
            if depth >= MAX_DEPTH {
                self.tree.over_bounds = true;
            } else {
                self.stack.push(Pending {
                    parent: parent.clone(),
                    name: name.to_os_string(),
                    path: path.clone(),
                    depth: depth + 1,
                    expect: (e.dev, e.ino),
                });
            }
        }
        self.tree.entries.insert(path, e);
    }

    /// Opens and lists one queued directory.
    fn list(&mut self, p: Pending) {
        let dir = match p.parent.child_dir(&p.name) {
            Ok(Sub::Dir(d)) => d,
            // Gone, or swapped for something else since it was seen: the
            // tree is changing under the walk.
            Ok(_) | Err(_) => {
                self.tree.failed += 1;
                return;
            }
        };
        match dir.meta() {
            Ok(m) if (m.dev(), m.ino()) == p.expect => {}
            _ => {
                self.tree.failed += 1;
                return;
            }
        }
        let dir = Rc::new(dir);
        self.children(&dir, &p.path, p.depth);
    }

    /// Records every entry of the open directory `dir`.
    fn children(&mut self, dir: &Rc<Dir>, path: &Path, depth: usize) {
        let proc = PathBuf::from(format!("/proc/self/fd/{}", dir.file().as_raw_fd()));
        let listing = match std::fs::read_dir(&proc) {
            Ok(l) => l,
            Err(_) => {
                self.tree.failed += 1;
                return;
            }
        };
        for item in listing {
            if self.tree.over_bounds {
                return;
            }
            // `DirEntry::metadata` is `fstatat(AT_SYMLINK_NOFOLLOW)`
            // relative to the listed directory's own descriptor.
            let (name, meta) = match item.and_then(|i| Ok((i.file_name(), i.metadata()?))) {
                Ok(x) => x,
                Err(_) => {
                    self.tree.failed += 1;
                    continue;
                }
            };
            let child = path.join(&name);
            self.record(dir, &name, child, &meta, depth);
        }
    }
}

/// Walks every touch. A touch that does not exist holds nothing; a touch
/// that is a file (or a symlink, never followed) is one entry.
pub fn walk(touches: &[PathBuf]) -> Tree {
    let mut w = Walker {
        tree: Tree::default(),
        path_bytes: 0,
        stack: Vec::new(),
    };
    for touch in touches {
        let (Some(parent), Some(name)) = (touch.parent(), touch.file_name()) else {
            // `/`: its children, not itself.
            match Dir::open_path(touch) {
                Ok(Sub::Dir(d)) => w.children(&Rc::new(d), touch, 0),
                _ => w.tree.failed += 1,
            }
            w.drain();
            continue;
        };
        match Dir::open_path(parent) {
            Ok(Sub::Dir(d)) => {
                let d = Rc::new(d);
                match d.lstat(name) {
                    Ok(Some(m)) => w.record(&d, name, touch.clone(), &m, 0),
                    Ok(None) => {}
                    Err(_) => w.tree.failed += 1,
                }
            }
            // The parent is missing: so is the touch.
            Ok(Sub::Missing) => {}
            _ => w.tree.failed += 1,
        }
        w.drain();
    }
    w.tree
}

impl Walker {
    fn drain(&mut self) {
        while let Some(p) = self.stack.pop() {
            if self.tree.over_bounds {
                self.stack.clear();
                return;
            }
            self.list(p);
        }
    }
}

/// Entries added, removed or changed, and the bytes that moved: a new or
/// removed entry weighs the larger of its apparent and allocated size, a
/// changed one the larger of the two differences (at least 1). Every
/// failed lookup of either walk is one more change.
pub fn changes(before: &Tree, after: &Tree) -> (u64, u64) {
    let mut files = before.failed.saturating_add(after.failed);
    let mut bytes = 0u64;
    for (path, old) in &before.entries {
        match after.entries.get(path) {
            None => {
                files += 1;
                bytes = bytes.saturating_add(old.weight());
            }
            Some(new) if new != old => {
                files += 1;
                let d = new
                    .size
                    .abs_diff(old.size)
                    .max(new.allocated.abs_diff(old.allocated))
                    .max(1);
                bytes = bytes.saturating_add(d);
            }
            Some(_) => {}
        }
    }
    for (path, new) in &after.entries {
        if !before.entries.contains_key(path) {
            files += 1;
            bytes = bytes.saturating_add(new.weight());
        }
    }
    (files, bytes)
}

/// What was done about an entry that left a run with a privilege it did
/// not have before.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fix {
    /// The bits were cleared and the capabilities removed on the file.
    Stripped,
    /// The name was removed: it was a new link to a file whose privilege
    /// is not the chore's to take (the system's own setuid binary, or a
    /// file that had it before the run), which keeps its other names.
    Unlinked,
    /// Neither could be done.
    Failed(String),
}

/// An entry that gained setuid, setgid or file capabilities in a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gained {
    pub path: PathBuf,
    /// `setuid`, `setgid`, `file capabilities`, joined by `+`.
    pub what: String,
    pub fix: Fix,
}

impl Gained {
    /// One line for the journal and the receipt.
    pub fn describe(&self) -> String {
        let fix = match &self.fix {
            Fix::Stripped => "stripped".to_string(),
            Fix::Unlinked => "link removed".to_string(),
            Fix::Failed(why) => format!("could not be stripped: {why}"),
        };
        format!("{} gained {} ({fix})", shown_short(&self.path), self.what)
    }
}

/// The privilege of `e` that its inode did not have before: setid bits and
/// capabilities, against the same inode at the same path before.
fn gained_bits(e: &Entry, old: Option<&Entry>) -> (u32, bool) {
    let same = old.filter(|o| (o.dev, o.ino) == (e.dev, e.ino));
    let (old_bits, old_caps) = same.map_or((0, false), |o| (o.setid(), o.caps));
    (e.setid() & !old_bits, e.caps && !old_caps)
}

/// Finds every entry of `after` with setuid, setgid or file capabilities
/// that the same path did not have before the run, and takes it away
/// without following any link:
///
/// - a file whose every name lies under the touches and that did not carry
///   the privilege before the run is the chore's own: its bits are cleared
///   and its capabilities removed;
/// - a new name for a file that carried the privilege before the run (under
///   the touches, or with names outside them, such as a hard link to
///   `/usr/bin/passwd`) is removed, the file left as it is: clearing the
///   bits of the shared inode would break the system's own program, and
///   leaving the link would keep that program where its package cannot
///   replace it (a vulnerable setuid binary surviving an upgrade).
///
/// A file moved within the touches (one name, privilege it had before) is
/// left alone, and so is the setgid bit a new directory inherits from the
/// directory it was made in.
pub fn strip_gained(touches: &[PathBuf], before: &Tree, after: &Tree) -> Vec<Gained> {
    // Who had what before, by inode.
    let mut had: HashMap<(u64, u64), (u32, bool)> = HashMap::new();
    for e in before.entries.values() {
        let slot = had.entry((e.dev, e.ino)).or_insert((0, false));
        slot.0 |= e.setid();
        slot.1 |= e.caps;
    }
    let mut names: HashMap<(u64, u64), u64> = HashMap::new();
    for e in after.entries.values() {
        *names.entry((e.dev, e.ino)).or_insert(0) += 1;
    }
    let mut found = Vec::new();
    let mut paths: Vec<&PathBuf> = after.entries.keys().collect();
    paths.sort();
    for path in paths {
        let e = &after.entries[path];
        let (mut bits, caps) = gained_bits(e, before.entries.get(path));
        // The kernel gives a new directory the setgid bit of the directory
        // it is made in (with its group): inherited, not gained.
        if e.is_dir()
            && path
                .parent()
                .and_then(|p| after.entries.get(p))
                .is_some_and(|p| p.is_dir() && p.mode & 0o2000 != 0 && p.gid == e.gid)
        {
            bits &= !0o2000;
        }
        if bits == 0 && !caps {
            continue;
        }
        let ids = (e.dev, e.ino);
        let (had_bits, had_caps) = had.get(&ids).copied().unwrap_or((0, false));
        let inode_had_it = (bits & !had_bits) == 0 && (!caps || had_caps);
        let links_outside = !e.is_dir() && e.nlink > names.get(&ids).copied().unwrap_or(0);
        if inode_had_it && (e.is_dir() || e.nlink <= 1) {
            // Moved within the touches, privilege and all (a directory
            // has one name whatever its link count).
            continue;
        }
        let what = privileges(bits, caps);
        let unlink = !e.is_dir() && (inode_had_it || links_outside);
        let fix = match fix_entry(touches, path, e, bits, caps, unlink) {
            Ok(f) => f,
            Err(why) => Fix::Failed(why),
        };
        found.push(Gained {
            path: path.clone(),
            what: what.join("+"),
            fix,
        });
    }
    found
}

/// At most this many privileged files are pinned in one run's touches
/// ([`pin_privileged`]): each is a descriptor the Warden holds while the
/// chore runs. A touch holding more does not run.
pub const MAX_PINNED: usize = 256;

/// A regular file that carried setuid, setgid or file capabilities before
/// the run, held by an `O_PATH` descriptor so that it is found after the
/// run wherever its names went: renamed or linked past the walk's bounds,
/// or into a directory the walk cannot open.
#[derive(Debug)]
pub struct Pinned {
    path: PathBuf,
    before: Entry,
    file: std::fs::File,
    /// SHA-256 of its bytes before the run.
    sha256: [u8; 32],
}

/// SHA-256 of the bytes of the regular file held by `file` (an `O_PATH`
/// descriptor), read through `/proc/self/fd/<fd>`, which opens exactly
/// that inode.
fn content_hash(file: &std::fs::File) -> std::io::Result<[u8; 32]> {
    use sha2::Digest;
    use std::io::Read;
    let own = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
    let mut f = OpenOptions::new().read(true).open(own)?;
    let mut hasher = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher.finalize().into())
}

/// Pins every privileged regular file of `before` ([`Pinned`]). `Err` when
/// there are more than [`MAX_PINNED`], or one cannot be opened as the inode
/// the walk saw (the run must not start: what is not pinned is not checked).
pub fn pin_privileged(touches: &[PathBuf], before: &Tree) -> Result<Vec<Pinned>, String> {
    let mut paths: Vec<&PathBuf> = before
        .entries
        .iter()
        .filter(|(_, e)| e.is_file() && (e.setid() != 0 || e.caps))
        .map(|(p, _)| p)
        .collect();
    if paths.len() > MAX_PINNED {
        return Err(format!(
            "its touches hold {} setuid, setgid or capability files, more than the {MAX_PINNED} a run can watch",
            paths.len()
        ));
    }
    paths.sort();
    let mut pinned = Vec::new();
    for path in paths {
        let e = before.entries[path];
        let fail = |why: String| format!("{} could not be pinned: {why}", shown_short(path));
        let (dir, name) = parent_of(touches, path).map_err(fail)?;
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_NOFOLLOW)
            .open(at(&dir, &name))
            .map_err(|err| fail(format!("open: {err}")))?;
        let m = file
            .metadata()
            .map_err(|err| fail(format!("inspect: {err}")))?;
        if (m.dev(), m.ino()) != (e.dev, e.ino) || !m.is_file() {
            return Err(fail("it changed while it was pinned".into()));
        }
        let sha256 = content_hash(&file).map_err(|err| fail(format!("read: {err}")))?;
        pinned.push(Pinned {
            path: path.clone(),
            before: e,
            file,
            sha256,
        });
    }
    Ok(pinned)
}

/// After the run (and after [`strip_gained`] removed the new names it
/// found): a pinned file the run touched (its ctime, which no process sets
/// back, moved) loses its privilege when its bytes are not those it had
/// before, or it has more names than before. A write through a shared
/// `mmap` leaves the setuid bit where `write` would clear it, and a
/// `touch -r` puts the mtime back, so only the bytes tell; a hard link
/// into a directory the walk could not see is a name no strip can find.
/// A file only renamed or linked and unlinked again keeps its privilege. A
/// file whose last name is gone is left alone (nothing can run it).
pub fn strip_touched(pinned: Vec<Pinned>) -> Vec<Gained> {
    let mut found = Vec::new();
    for p in pinned {
        let Ok(m) = p.file.metadata() else {
            continue;
        };
        if m.nlink() == 0 {
            continue;
        }
        let now = match has_caps_fd(&p.file) {
            Ok(caps) => Entry::of(&m, caps),
            Err(_) => Entry::of(&m, true),
        };
        if (now.ctime, now.nlink) == (p.before.ctime, p.before.nlink) {
            continue;
        }
        let bits = now.setid();
        if bits == 0 && !now.caps {
            continue;
        }
        let why = if now.nlink > p.before.nlink {
            "a name the walk could not reach"
        } else if content_hash(&p.file).ok() != Some(p.sha256) {
            "bytes the run wrote"
        } else {
            continue;
        };
        let what = privileges(bits, now.caps);
        let own = PathBuf::from(format!("/proc/self/fd/{}", p.file.as_raw_fd()));
        let mut fix = Fix::Stripped;
        if now.caps
            && let Err(e) = crate::system::removexattr(&own, CAPABILITY)
        {
            fix = Fix::Failed(format!("removexattr: {e}"));
        }
        if bits != 0
            && let Err(e) = std::fs::set_permissions(
                &own,
                Permissions::from_mode(now.mode & 0o7777 & !SETID_BITS),
            )
        {
            fix = Fix::Failed(format!("chmod: {e}"));
        }
        found.push(Gained {
            path: p.path,
            what: format!("{} with {why}", what.join("+")),
            fix,
        });
    }
    found
}

/// Whether the file open as `file` (any descriptor, `O_PATH` included) has
/// file capabilities.
fn has_caps_fd(file: &std::fs::File) -> std::io::Result<bool> {
    let own = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
    crate::system::has_xattr(&own, CAPABILITY)
}

/// Opens the directory holding `path` from its touch down, one component
/// at a time relative to the last (no length limit, no symlink followed).
fn parent_of(touches: &[PathBuf], path: &Path) -> Result<(Dir, OsString), String> {
    let name = path
        .file_name()
        .ok_or_else(|| "it has no name".to_string())?
        .to_os_string();
    let parent = path
        .parent()
        .ok_or_else(|| "it has no parent".to_string())?;
    // The touch it lies under; the walk started at the touch's parent.
    let touch = touches
        .iter()
        .filter(|t| path.starts_with(t))
        .max_by_key(|t| t.as_os_str().len())
        .ok_or_else(|| "it lies under no touch".to_string())?;
    let top = touch.parent().unwrap_or(touch);
    let mut dir = match Dir::open_path(top) {
        Ok(Sub::Dir(d)) => d,
        _ => return Err("its touch could not be opened".into()),
    };
    let rest = parent
        .strip_prefix(top)
        .map_err(|_| "it lies under no touch".to_string())?;
    for c in rest.components() {
        dir = match dir.child_dir(c.as_os_str()) {
            Ok(Sub::Dir(d)) => d,
            _ => return Err("a directory above it changed".into()),
        };
    }
    Ok((dir, name))
}

fn fix_entry(
    touches: &[PathBuf],
    path: &Path,
    e: &Entry,
    bits: u32,
    caps: bool,
    unlink: bool,
) -> Result<Fix, String> {
    let (dir, name) = parent_of(touches, path)?;
    // `O_PATH | O_NOFOLLOW`: the entry itself, opened without reading it
    // (no fifo or device woken) and never through a symlink.
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_NOFOLLOW)
        .open(at(&dir, &name))
        .map_err(|e| format!("open: {e}"))?;
    let m = file.metadata().map_err(|e| format!("inspect: {e}"))?;
    if (m.dev(), m.ino()) != (e.dev, e.ino) || !(m.is_file() || m.is_dir()) {
        return Err("it was replaced after the run".into());
    }
    if unlink {
        dir.unlink(&name).map_err(|e| format!("unlink: {e}"))?;
        return Ok(Fix::Unlinked);
    }
    // `/proc/self/fd/<fd>` of an `O_PATH` descriptor leads to exactly the
    // inode opened: chmod and removexattr act on it, nothing else.
    let own = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
    if caps {
        crate::system::removexattr(&own, CAPABILITY).map_err(|e| format!("removexattr: {e}"))?;
    }
    if bits != 0 {
        let mode = m.mode() & 0o7777 & !bits;
        std::fs::set_permissions(&own, Permissions::from_mode(mode))
            .map_err(|e| format!("chmod: {e}"))?;
    }
    Ok(Fix::Stripped)
}

/// The privileges `bits` (a mode) and `caps` name, for a journal line.
fn privileges(bits: u32, caps: bool) -> Vec<&'static str> {
    let mut what = Vec::new();
    if bits & 0o4000 != 0 {
        what.push("setuid");
    }
    if bits & 0o2000 != 0 {
        what.push("setgid");
    }
    if caps {
        what.push("file capabilities");
    }
    what
}

#[cfg(test)]
mod tests;
