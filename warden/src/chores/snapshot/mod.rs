//! Snapshots of a red chore's touches: taken before it runs, sealed after
//! it (which gives the receipt its diff), and restored by `undo` for
//! [`KEEP_S`] seconds.
//!
//! On disk a snapshot is the directory `<store>/<id>/` (0700, root's):
//!
//! - `blobs/<n>` (0600): the bytes of the n-th regular file, as read.
//! - `manifest.json` (0600), written through `manifest.json.tmp`, fsync'd,
//!   then renamed, so a snapshot with a manifest is whole:
//!
//!   ```text
//!   {"format": 2, "id": "<32 lower hex>", "chore": "apt-clean",
//!    "created_at": 1700000000, "roots": ["/var/cache/apt"],
//!    "exclude": ["/var/lib/aromba"],
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
//!   `mount`. A snapshot without it cannot be undone.
//! - `undoing`: created (never overwritten) when an undo starts, removed
//!   when it ends well; one left behind means an undo stopped part-way, and
//!   no other undo of the snapshot runs while it is there.
//! - `undone`: written once the snapshot has been restored.
//!
//! Undo reverts only what the run did: each path in `after.json` is put
//! back only if it is still exactly as the run left it (same kind, inode,
//! owner and mode, and for all but directories the same size, mtime and
//! ctime; the ctime cannot be set from user space, so even a rewrite that
//! resets the mtime shows). Anything else is left alone and counted as a
//! conflict. Nothing is ever deleted: what the run created, and what stands
//! where a path is put back, is moved to the quarantine, and a directory the
//! run created is moved whole only if everything in it is the run's.
//!
//! Entries are compared, for the diff, by kind, owner and mode, and: a file
//! by size, mtime, ctime and inode; a symlink by target, ctime and inode; a
//! directory by inode only besides, since its size and times move with every
//! entry added or removed in it, which are counted themselves. Not
//! restorable without `unsafe` (no `lutimes`): a symlink's own mtime. Hard
//! links come back as separate files.
//!
//! Every check here is by path, then acted on by path: a race remains
//! between the two that only `openat` and friends (hence `unsafe`) could
//! close. Files are opened with `O_NOFOLLOW | O_NONBLOCK` and checked with
//! `fstat` against what was listed, so a path swapped for a symlink, fifo or
//! device cannot redirect or block the Warden.

#![forbid(unsafe_code)]

use aromba_warden_proto::{decode_hex, encode_hex};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::ffi::OsString;
use std::fmt;
use std::fs::{self, DirBuilder, File, FileTimes, Metadata, OpenOptions, Permissions};
use std::io::{self, Read, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{
    DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt, fchown, lchown,
    symlink,
};
use std::os::unix::io::AsRawFd;
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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
/// How every file under a root is opened: never through a symlink, never
/// waiting on a fifo or device, never taking a terminal as ours.
const FILE_FLAGS: i32 = libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY;
const DIR_FLAGS: i32 = libc::O_DIRECTORY | libc::O_NOFOLLOW;

#[derive(Debug)]
pub enum SnapshotError {
    Io {
        action: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    BadId(String),
    BadRoot {
        path: PathBuf,
        why: &'static str,
    },
    BadManifest {
        path: PathBuf,
        why: String,
    },
    TooBig {
        needed: u64,
        allowed: u64,
    },
    TooManyEntries {
        limit: usize,
    },
    /// A file was replaced between listing and copying it.
    Changed(PathBuf),
    /// A blob does not hash to what the manifest says.
    CorruptBlob(PathBuf),
    /// Restoring would write through a symlink or over something unexpected.
    Unsafe {
        path: PathBuf,
        why: &'static str,
    },
    AlreadyUndone(String),
    Expired(String),
    /// The snapshot was never sealed after its run, so what the run did is
    /// not known and it cannot be undone.
    NotSealed(String),
    /// [`Snapshot::seal`] was called twice.
    AlreadySealed(String),
    /// Another undo holds the snapshot, or one stopped part-way.
    UnderWay(String),
    /// The undo began changing things and stopped; `undoing` stays.
    Partial {
        done: u64,
        why: String,
    },
}

impl fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SnapshotError::Io {
                action,
                path,
                source,
            } => write!(f, "could not {action} {}: {source}", path.display()),
            SnapshotError::BadId(id) => {
                write!(f, "snapshot id {id:?} is not 32 lower-case hex characters")
            }
            SnapshotError::BadRoot { path, why } => {
                write!(f, "cannot snapshot {}: {why}", path.display())
            }
            SnapshotError::BadManifest { path, why } => {
                write!(
                    f,
                    "the snapshot record {} is invalid: {why}",
                    path.display()
                )
            }
            SnapshotError::TooBig { needed, allowed } => write!(
                f,
                "the snapshot needs {} but only {} may be used",
                human(*needed),
                human(*allowed)
            ),
            SnapshotError::TooManyEntries { limit } => write!(
                f,
                "the paths hold more than {limit} entries, too many to snapshot"
            ),
            SnapshotError::Changed(path) => write!(
                f,
                "{} changed while it was being read (or is no longer a plain file)",
                path.display()
            ),
            SnapshotError::CorruptBlob(path) => write!(
                f,
                "the saved copy of {} does not match its checksum",
                path.display()
            ),
            SnapshotError::Unsafe { path, why } => {
                write!(f, "refusing to touch {}: {why}", path.display())
            }
            SnapshotError::AlreadyUndone(id) => write!(f, "snapshot {id} has already been undone"),
            SnapshotError::Expired(id) => write!(
                f,
                "snapshot {id} is older than 7 days and can no longer be undone"
            ),
            SnapshotError::NotSealed(id) => write!(
                f,
                "snapshot {id} was not sealed after its run, so what the run changed is not known and it cannot be undone"
            ),
            SnapshotError::AlreadySealed(id) => write!(f, "snapshot {id} is sealed already"),
            SnapshotError::UnderWay(id) => write!(
                f,
                "an undo of this run is under way or was interrupted (snapshot {id})"
            ),
            SnapshotError::Partial { done, why } => write!(
                f,
                "the undo stopped part-way, after {done} changes: {why}; what it did not reach is as the run left it"
            ),
        }
    }
}

impl std::error::Error for SnapshotError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SnapshotError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

fn io_err(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> SnapshotError {
    let path = path.to_path_buf();
    move |source| SnapshotError::Io {
        action,
        path,
        source,
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Why {
    Fifo,
    Socket,
    Device,
    Mount,
}

impl Why {
    fn name(self) -> &'static str {
        match self {
            Why::Fifo => "fifo",
            Why::Socket => "socket",
            Why::Device => "device",
            Why::Mount => "mount",
        }
    }

    fn from_name(name: &str) -> Option<Why> {
        match name {
            "fifo" => Some(Why::Fifo),
            "socket" => Some(Why::Socket),
            "device" => Some(Why::Device),
            "mount" => Some(Why::Mount),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    File,
    Dir,
    Symlink,
    Skipped(Why),
}

impl Kind {
    fn is_skipped(self) -> bool {
        matches!(self, Kind::Skipped(_))
    }

    /// What an entry is; `root_dev` marks anything on another filesystem
    /// (a mount point, or a bind-mounted file) as skipped.
    fn of(meta: &Metadata, root_dev: u64) -> Kind {
        let t = meta.file_type();
        if t.is_symlink() {
            Kind::Symlink
        } else if meta.dev() != root_dev {
            Kind::Skipped(Why::Mount)
        } else if t.is_dir() {
            Kind::Dir
        } else if t.is_file() {
            Kind::File
        } else if t.is_fifo() {
            Kind::Skipped(Why::Fifo)
        } else if t.is_socket() {
            Kind::Skipped(Why::Socket)
        } else {
            Kind::Skipped(Why::Device)
        }
    }

    /// The name `after.json` gives it.
    fn name(self) -> &'static str {
        match self {
            Kind::File => "file",
            Kind::Dir => "dir",
            Kind::Symlink => "symlink",
            Kind::Skipped(why) => why.name(),
        }
    }

    fn from_name(name: &str) -> Option<Kind> {
        match name {
            "file" => Some(Kind::File),
            "dir" => Some(Kind::Dir),
            "symlink" => Some(Kind::Symlink),
            other => Why::from_name(other).map(Kind::Skipped),
        }
    }
}

fn nanos(n: i64) -> u32 {
    u32::try_from(n).unwrap_or(0)
}

#[derive(Clone, Debug)]
struct Entry {
    path: PathBuf,
    kind: Kind,
    mode: u32,
    uid: u32,
    gid: u32,
    size: u64,
    mtime: i64,
    mtime_ns: u32,
    ctime: i64,
    ctime_ns: u32,
    target: Option<PathBuf>,
    /// Blob number and SHA-256 of a regular file's bytes.
    blob: Option<(u64, String)>,
    dev: u64,
    ino: u64,
}

impl Entry {
    fn of(path: &Path, meta: &Metadata, kind: Kind) -> Result<Entry, SnapshotError> {
        let target = match kind {
            Kind::Symlink => Some(fs::read_link(path).map_err(io_err("read the link", path))?),
            _ => None,
        };
        Ok(Entry {
            path: path.to_path_buf(),
            kind,
            // A symlink's mode means nothing on Linux and is not saved.
            mode: match kind {
                Kind::File | Kind::Dir => meta.mode() & PERM_BITS,
                Kind::Symlink | Kind::Skipped(_) => 0,
            },
            uid: meta.uid(),
            gid: meta.gid(),
            size: if kind == Kind::File { meta.size() } else { 0 },
            mtime: meta.mtime(),
            mtime_ns: nanos(meta.mtime_nsec()),
            ctime: meta.ctime(),
            ctime_ns: nanos(meta.ctime_nsec()),
            target,
            blob: None,
            dev: meta.dev(),
            ino: meta.ino(),
        })
    }

    /// Whether what is at `path` now (`meta`, `kind`) differs from this entry.
    fn differs(&self, path: &Path, meta: &Metadata, kind: Kind) -> bool {
        if self.kind.is_skipped() || kind.is_skipped() {
            return self.kind.is_skipped() != kind.is_skipped();
        }
        if self.kind != kind {
            return true;
        }
        let owner = meta.uid() != self.uid || meta.gid() != self.gid;
        let inode = meta.ino() != self.ino || meta.dev() != self.dev;
        // The ctime moves with every write, chmod, chown or rename and cannot
        // be set back from user space: a rewrite that resets the mtime shows.
        let ctime = meta.ctime() != self.ctime || meta.ctime_nsec() != i64::from(self.ctime_ns);
        let mode = meta.mode() & PERM_BITS != self.mode;
        match kind {
            Kind::File => {
                owner
                    || inode
                    || ctime
                    || mode
                    || meta.size() != self.size
                    || meta.mtime() != self.mtime
                    || meta.mtime_nsec() != i64::from(self.mtime_ns)
            }
            Kind::Dir => owner || inode || mode,
            Kind::Symlink => owner || inode || ctime || fs::read_link(path).ok() != self.target,
            Kind::Skipped(_) => false,
        }
    }

    fn mtime(&self) -> Result<SystemTime, SnapshotError> {
        let secs = Duration::from_secs(self.mtime.unsigned_abs());
        let base = if self.mtime >= 0 {
            UNIX_EPOCH.checked_add(secs)
        } else {
            UNIX_EPOCH.checked_sub(secs)
        };
        base.and_then(|t| t.checked_add(Duration::from_nanos(u64::from(self.mtime_ns))))
            .ok_or(SnapshotError::Unsafe {
                path: self.path.clone(),
                why: "its saved mtime is out of range",
            })
    }

    fn to_json(&self) -> Value {
        let mut o = Map::new();
        o.insert("path".into(), path_to_json(&self.path));
        let kind = match self.kind {
            Kind::File => "file",
            Kind::Dir => "dir",
            Kind::Symlink => "symlink",
            Kind::Skipped(why) => {
                o.insert("kind".into(), "skipped".into());
                o.insert("why".into(), why.name().into());
                return Value::Object(o);
            }
        };
        o.insert("kind".into(), kind.into());
        if self.kind != Kind::Symlink {
            o.insert("mode".into(), self.mode.into());
        }
        o.insert("uid".into(), self.uid.into());
        o.insert("gid".into(), self.gid.into());
        o.insert("mtime".into(), self.mtime.into());
        o.insert("mtime_ns".into(), self.mtime_ns.into());
        o.insert("ctime".into(), self.ctime.into());
        o.insert("ctime_ns".into(), self.ctime_ns.into());
        o.insert("dev".into(), self.dev.into());
        o.insert("ino".into(), self.ino.into());
        if let Some((n, sha)) = &self.blob {
            o.insert("size".into(), self.size.into());
            o.insert("blob".into(), (*n).into());
            o.insert("sha256".into(), sha.as_str().into());
        }
        if let Some(t) = &self.target {
            o.insert("target".into(), path_to_json(t));
        }
        Value::Object(o)
    }

    fn from_json(v: &Value) -> Result<Entry, String> {
        let o = v.as_object().ok_or("an entry is not an object")?;
        let path = o
            .get("path")
            .and_then(path_from_json)
            .ok_or("an entry has no valid path")?;
        let at = path.display();
        let text = |k: &str| o.get(k).and_then(Value::as_str);
        let number = |k: &str| {
            o.get(k)
                .and_then(Value::as_u64)
                .ok_or_else(|| format!("{at} has no valid {k}"))
        };
        let signed = |k: &str| {
            o.get(k)
                .and_then(Value::as_i64)
                .ok_or_else(|| format!("{at} has no valid {k}"))
        };
        let small = |k: &str| {
            number(k).and_then(|n| u32::try_from(n).map_err(|_| format!("{at} has a bad {k}")))
        };
        let ns = |k: &str| {
            small(k).and_then(|n| {
                if n < 1_000_000_000 {
                    Ok(n)
                } else {
                    Err(format!("{at} has a bad {k}"))
                }
            })
        };
        let kind = match text("kind") {
            Some("file") => Kind::File,
            Some("dir") => Kind::Dir,
            Some("symlink") => Kind::Symlink,
            Some("skipped") => match text("why").and_then(Why::from_name) {
                Some(why) => Kind::Skipped(why),
                None => return Err(format!("{at} is skipped for no known reason")),
            },
            _ => return Err(format!("{at} has no known kind")),
        };
        let mut e = Entry {
            path: path.clone(),
            kind,
            mode: 0,
            uid: 0,
            gid: 0,
            size: 0,
            mtime: 0,
            mtime_ns: 0,
            ctime: 0,
            ctime_ns: 0,
            target: None,
            blob: None,
            dev: 0,
            ino: 0,
        };
        if kind.is_skipped() {
            return Ok(e);
        }
        if kind != Kind::Symlink {
            e.mode = small("mode")?;
            if e.mode & !PERM_BITS != 0 {
                return Err(format!("{at} has a bad mode"));
            }
        }
        e.uid = small("uid")?;
        e.gid = small("gid")?;
        e.mtime = signed("mtime")?;
        e.mtime_ns = ns("mtime_ns")?;
        e.ctime = signed("ctime")?;
        e.ctime_ns = ns("ctime_ns")?;
        e.dev = number("dev")?;
        e.ino = number("ino")?;
        match kind {
            Kind::File => {
                e.size = number("size")?;
                let sha = text("sha256")
                    .filter(|s| s.len() == 64 && is_lower_hex(s))
                    .ok_or_else(|| format!("{at} has no valid sha256"))?;
                e.blob = Some((number("blob")?, sha.to_string()));
            }
            Kind::Symlink => {
                let target = o
                    .get("target")
                    .and_then(path_from_json)
                    .filter(|t| !t.as_os_str().is_empty())
                    .ok_or_else(|| format!("{at} has no valid target"))?;
                e.target = Some(target);
            }
            Kind::Dir | Kind::Skipped(_) => {}
        }
        Ok(e)
    }
}

/// A path as the run left it, from `after.json`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct State {
    kind: Kind,
    size: u64,
    mtime: i64,
    mtime_ns: u32,
    mode: u32,
    uid: u32,
    gid: u32,
    ctime: i64,
    ctime_ns: u32,
    ino: u64,
    dev: u64,
}

impl State {
    fn of(meta: &Metadata, kind: Kind) -> State {
        State {
            kind,
            size: meta.size(),
            mtime: meta.mtime(),
            mtime_ns: nanos(meta.mtime_nsec()),
            mode: meta.mode() & PERM_BITS,
            uid: meta.uid(),
            gid: meta.gid(),
            ctime: meta.ctime(),
            ctime_ns: nanos(meta.ctime_nsec()),
            ino: meta.ino(),
            dev: meta.dev(),
        }
    }

    /// Whether `now` is still this state. A directory's size and times move
    /// with what is added to or removed from it, which is judged entry by
    /// entry, so only its identity, owner and mode count.
    fn is(&self, now: &Metadata, root_dev: u64) -> bool {
        let kind = Kind::of(now, root_dev);
        let same = kind == self.kind
            && now.dev() == self.dev
            && now.ino() == self.ino
            && now.mode() & PERM_BITS == self.mode
            && now.uid() == self.uid
            && now.gid() == self.gid;
        same && (kind == Kind::Dir
            || (now.size() == self.size
                && now.mtime() == self.mtime
                && now.mtime_nsec() == i64::from(self.mtime_ns)
                && now.ctime() == self.ctime
                && now.ctime_nsec() == i64::from(self.ctime_ns)))
    }

    fn to_json(&self) -> Value {
        let mut o = Map::new();
        o.insert("kind".into(), self.kind.name().into());
        o.insert("size".into(), self.size.into());
        o.insert("mtime".into(), self.mtime.into());
        o.insert("mtime_ns".into(), self.mtime_ns.into());
        o.insert("mode".into(), self.mode.into());
        o.insert("uid".into(), self.uid.into());
        o.insert("gid".into(), self.gid.into());
        o.insert("ctime".into(), self.ctime.into());
        o.insert("ctime_ns".into(), self.ctime_ns.into());
        o.insert("ino".into(), self.ino.into());
        o.insert("dev".into(), self.dev.into());
        Value::Object(o)
    }

    fn from_json(v: &Value) -> Option<State> {
        let o = v.as_object()?;
        let u = |k: &str| o.get(k).and_then(Value::as_u64);
        let small = |k: &str| u(k).and_then(|n| u32::try_from(n).ok());
        let ns = |k: &str| small(k).filter(|n| *n < 1_000_000_000);
        let i = |k: &str| o.get(k).and_then(Value::as_i64);
        Some(State {
            kind: Kind::from_name(o.get("kind")?.as_str()?)?,
            size: u("size")?,
            mtime: i("mtime")?,
            mtime_ns: ns("mtime_ns")?,
            mode: small("mode").filter(|m| m & !PERM_BITS == 0)?,
            uid: small("uid")?,
            gid: small("gid")?,
            ctime: i("ctime")?,
            ctime_ns: ns("ctime_ns")?,
            ino: u("ino")?,
            dev: u("dev")?,
        })
    }
}

/// Whether what is at a path now is what `after.json` says the run left
/// there (`None`: nothing).
fn still(after: Option<&State>, now: Option<&Metadata>, root_dev: u64) -> bool {
    match (after, now) {
        (None, None) => true,
        (Some(s), Some(m)) => s.is(m, root_dev),
        _ => false,
    }
}

/// One path the run changed, and what it left there.
type Change = (PathBuf, Option<State>);

fn path_to_json(p: &Path) -> Value {
    match p.to_str() {
        Some(s) => s.into(),
        None => {
            let mut o = Map::new();
            o.insert("hex".into(), encode_hex(p.as_os_str().as_bytes()).into());
            Value::Object(o)
        }
    }
}

fn path_from_json(v: &Value) -> Option<PathBuf> {
    let bytes = match v {
        Value::String(s) => s.as_bytes().to_vec(),
        Value::Object(o) if o.len() == 1 => decode_hex(o.get("hex")?.as_str()?)?,
        _ => return None,
    };
    // A NUL can name no file; refuse rather than let a syscall trip on it.
    if bytes.contains(&0) {
        return None;
    }
    Some(PathBuf::from(OsString::from_vec(bytes)))
}

fn is_lower_hex(s: &str) -> bool {
    s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn check_id(id: &str) -> Result<(), SnapshotError> {
    if id.len() == 32 && is_lower_hex(id) {
        Ok(())
    } else {
        Err(SnapshotError::BadId(id.to_string()))
    }
}

/// Absolute with no `..`: the only paths a snapshot will ever write to.
fn is_plain_absolute(p: &Path) -> bool {
    p.is_absolute() && !p.components().any(|c| c == Component::ParentDir)
}

/// Roots cleaned (no trailing `/` or `.`), sorted, and without any root
/// inside another, so no entry is recorded twice.
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
        clean.push(r.components().collect::<PathBuf>());
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

fn absolute(p: &Path) -> Result<PathBuf, SnapshotError> {
    std::path::absolute(p).map_err(io_err("resolve", p))
}

fn excluded(path: &Path, exclude: &[PathBuf]) -> bool {
    exclude.iter().any(|x| path.starts_with(x))
}

fn lstat(path: &Path) -> Result<Option<Metadata>, SnapshotError> {
    match fs::symlink_metadata(path) {
        Ok(m) => Ok(Some(m)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err("inspect", path)(e)),
    }
}

/// The first component of `path` (itself included) that is a symlink.
fn symlink_in(path: &Path) -> Result<Option<PathBuf>, SnapshotError> {
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
fn children(dir: &Path, listed: &Metadata) -> Result<Vec<OsString>, SnapshotError> {
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
fn walk(
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
fn copy_hashed(
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

fn create_private(path: &Path) -> Result<File, SnapshotError> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(io_err("create", path))
}

fn sync_dir(path: &Path) -> Result<(), SnapshotError> {
    OpenOptions::new()
        .read(true)
        .custom_flags(DIR_FLAGS)
        .open(path)
        .and_then(|d| d.sync_all())
        .map_err(io_err("sync", path))
}

/// Owner, then mode (a chown clears setuid), then mtime, through an open
/// descriptor so a swapped path cannot redirect them.
fn set_attrs(file: &File, path: &Path, e: &Entry) -> Result<(), SnapshotError> {
    fchown(file, Some(e.uid), Some(e.gid)).map_err(io_err("set the owner of", path))?;
    file.set_permissions(Permissions::from_mode(e.mode))
        .map_err(io_err("set the mode of", path))?;
    file.set_times(FileTimes::new().set_modified(e.mtime()?))
        .map_err(io_err("set the mtime of", path))
}

/// Opens a directory without following a symlink, and checks that what was
/// opened is the directory at `path` itself, so a chown through it cannot
/// land on some other directory.
fn open_dir(path: &Path) -> Result<File, SnapshotError> {
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
fn open_listed_file(path: &Path, dev: u64, ino: u64) -> Result<(File, Metadata), SnapshotError> {
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

/// Reads one of the snapshot's own records, refusing anything but a
/// regular file of at most `cap` bytes.
fn read_record(path: &Path, cap: u64) -> Result<Vec<u8>, SnapshotError> {
    let bad = || SnapshotError::BadManifest {
        path: path.to_path_buf(),
        why: "it is not a regular file of a sane size".into(),
    };
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(FILE_FLAGS)
        .open(path)
        .map_err(io_err("read", path))?;
    let meta = file.metadata().map_err(io_err("inspect", path))?;
    if !meta.is_file() || meta.len() > cap {
        return Err(bad());
    }
    let mut bytes = Vec::new();
    file.take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io_err("read", path))?;
    if bytes.len() as u64 > cap {
        return Err(bad());
    }
    Ok(bytes)
}

/// Writes `dir/name` whole or not at all: through `dir/tmp`, fsync'd,
/// renamed, and the directory synced.
fn write_record(dir: &Path, name: &str, tmp: &str, v: &Value) -> Result<(), SnapshotError> {
    let path = dir.join(name);
    let tmp = dir.join(tmp);
    let bytes = serde_json::to_vec(v).map_err(|e| SnapshotError::BadManifest {
        path: path.clone(),
        why: e.to_string(),
    })?;
    // A leftover from a write that died; the directory is ours alone.
    match fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err("remove", &tmp)(e)),
    }
    let mut f = create_private(&tmp)?;
    f.write_all(&bytes).map_err(io_err("write", &tmp))?;
    f.sync_all().map_err(io_err("sync", &tmp))?;
    fs::rename(&tmp, &path).map_err(io_err("rename", &tmp))?;
    sync_dir(dir)
}

/// Writes a small marker file (`undone`) and syncs it.
fn write_marker(path: &Path, now: u64) -> Result<(), SnapshotError> {
    let mut f = create_private(path)?;
    f.write_all(format!("{now}\n").as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(io_err("write", path))
}

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
/// excluded or in the store, more than `max_bytes` in regular files (the
/// caller's measure of free space), more than 200 000 entries, and an `id`
/// that is not 32 lower-case hex characters.
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
        if symlink_in(r)?.is_some() {
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
    walk(&roots, &skip, |path, meta, kind| {
        if entries.len() >= bounds.max_entries {
            return Err(SnapshotError::TooManyEntries {
                limit: bounds.max_entries,
            });
        }
        entries.push(Entry::of(path, meta, kind)?);
        Ok(true)
    })?;
    let needed = entries
        .iter()
        .filter(|e| e.kind == Kind::File)
        .fold(0u64, |sum, e| sum.saturating_add(e.size));
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

/// Reads a list of plain absolute paths from a record.
fn paths_from_json(
    v: Option<&Value>,
    what: &str,
    bad: &dyn Fn(String) -> SnapshotError,
) -> Result<Vec<PathBuf>, SnapshotError> {
    let mut out = Vec::new();
    for p in v
        .and_then(Value::as_array)
        .ok_or_else(|| bad(format!("no {what}")))?
    {
        let p = path_from_json(p).ok_or_else(|| bad(format!("one of its {what} is not a path")))?;
        if !is_plain_absolute(&p) {
            return Err(bad(format!(
                "{} in its {what} is not absolute or has `..`",
                p.display()
            )));
        }
        out.push(p.components().collect::<PathBuf>());
    }
    Ok(out)
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
    let path = dir.join(MANIFEST);
    let bad = |why: String| SnapshotError::BadManifest {
        path: path.clone(),
        why,
    };
    let bytes = read_record(&path, MAX_MANIFEST_BYTES)?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|e| bad(format!("not JSON ({e})")))?;
    let o = v.as_object().ok_or_else(|| bad("not an object".into()))?;
    if o.get("format").and_then(Value::as_u64) != Some(FORMAT) {
        return Err(bad("unknown format".into()));
    }
    if o.get("id").and_then(Value::as_str) != Some(id) {
        return Err(bad("its id is not the directory's".into()));
    }
    let chore = o
        .get("chore")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("no chore".into()))?;
    let created_at = o
        .get("created_at")
        .and_then(Value::as_u64)
        .ok_or_else(|| bad("no created_at".into()))?;
    let roots = paths_from_json(o.get("roots"), "roots", &bad)?;
    if roots.is_empty() {
        return Err(bad("no roots".into()));
    }
    for (i, a) in roots.iter().enumerate() {
        if roots
            .iter()
            .skip(i + 1)
            .any(|b| a.starts_with(b) || b.starts_with(a))
        {
            return Err(bad(format!("root {} overlaps another", a.display())));
        }
    }
    let exclude = paths_from_json(o.get("exclude"), "excluded paths", &bad)?;
    if let Some(r) = roots.iter().find(|r| excluded(r, &exclude)) {
        return Err(bad(format!("root {} is excluded", r.display())));
    }
    let list = o
        .get("entries")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("no entries".into()))?;
    if list.len() > MAX_ENTRIES {
        return Err(bad("too many entries".into()));
    }
    let mut entries = Vec::with_capacity(list.len());
    for v in list {
        let mut e = Entry::from_json(v).map_err(&bad)?;
        if !is_plain_absolute(&e.path) {
            return Err(bad(format!(
                "{} is not absolute or has `..`",
                e.path.display()
            )));
        }
        e.path = e.path.components().collect();
        if !roots.iter().any(|r| e.path.starts_with(r)) {
            return Err(bad(format!("{} is outside its roots", e.path.display())));
        }
        if excluded(&e.path, &exclude) {
            return Err(bad(format!("{} is excluded", e.path.display())));
        }
        entries.push(e);
    }
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    let mut kinds: HashMap<&Path, Kind> = HashMap::with_capacity(entries.len());
    let mut blobs = HashSet::new();
    for e in &entries {
        if kinds.insert(&e.path, e.kind).is_some() {
            return Err(bad(format!("{} appears twice", e.path.display())));
        }
        if let Some((n, _)) = &e.blob
            && !blobs.insert(*n)
        {
            return Err(bad(format!("blob {n} is used twice")));
        }
        // Parents come first in path order, so each parent is already known;
        // only a directory of the snapshot may hold entries, which keeps a
        // restore from writing through a recorded symlink.
        if !roots.contains(&e.path) {
            let parent_is_dir = e
                .path
                .parent()
                .and_then(|p| kinds.get(p))
                .is_some_and(|k| *k == Kind::Dir);
            if !parent_is_dir {
                return Err(bad(format!(
                    "{} is not inside a directory of the snapshot",
                    e.path.display()
                )));
            }
        }
    }
    Ok(Snapshot {
        id: id.to_string(),
        chore: chore.to_string(),
        created_at,
        roots,
        exclude,
        store,
        dir,
        entries,
    })
}

/// Reads `dir/meta.json` (at most 64 KiB): the snapshot's summary and
/// whether it was sealed.
fn read_meta(dir: &Path, id: &str) -> Result<(Meta, bool), SnapshotError> {
    let path = dir.join(META);
    let bad = |why: String| SnapshotError::BadManifest {
        path: path.clone(),
        why,
    };
    let bytes = read_record(&path, MAX_META_BYTES)?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|e| bad(format!("not JSON ({e})")))?;
    let o = v.as_object().ok_or_else(|| bad("not an object".into()))?;
    if o.get("format").and_then(Value::as_u64) != Some(FORMAT) {
        return Err(bad("unknown format".into()));
    }
    if o.get("id").and_then(Value::as_str) != Some(id) {
        return Err(bad("its id is not the directory's".into()));
    }
    let chore = o
        .get("chore")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("no chore".into()))?;
    let created_at = o
        .get("created_at")
        .and_then(Value::as_u64)
        .ok_or_else(|| bad("no created_at".into()))?;
    let roots = paths_from_json(o.get("roots"), "roots", &bad)?;
    if roots.is_empty() {
        return Err(bad("no roots".into()));
    }
    let sealed = o
        .get("sealed")
        .and_then(Value::as_bool)
        .ok_or_else(|| bad("no sealed".into()))?;
    Ok((
        Meta {
            id: id.to_string(),
            chore: chore.to_string(),
            created_at,
            roots,
        },
        sealed,
    ))
}

/// What an undo of snapshot `id` would be about, read from its small
/// `meta.json` alone. Refuses a snapshot that is undone, being undone (or
/// whose undo stopped part-way), older than [`KEEP_S`] at `now`, or never
/// sealed. `restore` checks all of this again, and more.
pub fn peek(store: &Path, id: &str, now: u64) -> Result<Meta, SnapshotError> {
    check_id(id)?;
    let dir = absolute(store)?.join(id);
    if lstat(&dir.join(UNDONE))?.is_some() {
        return Err(SnapshotError::AlreadyUndone(id.to_string()));
    }
    if lstat(&dir.join(UNDOING))?.is_some() {
        return Err(SnapshotError::UnderWay(id.to_string()));
    }
    let (meta, sealed) = read_meta(&dir, id)?;
    if now.saturating_sub(meta.created_at) > KEEP_S {
        return Err(SnapshotError::Expired(id.to_string()));
    }
    if !sealed {
        return Err(SnapshotError::NotSealed(id.to_string()));
    }
    Ok(meta)
}

/// What a run changed under the roots.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Diff {
    /// Files and symlinks (whatever is not a directory) there now and not
    /// before, gone, or changed: what the runner counts as files changed.
    pub added: u64,
    pub removed: u64,
    pub modified: u64,
    /// Directories added, removed or changed (owner, mode or inode), kept
    /// out of the summary; a path that changed kind counts as a file.
    pub dirs_added: u64,
    pub dirs_removed: u64,
    pub dirs_modified: u64,
    /// Bytes of all regular files under the roots, before and after.
    pub bytes_before: u64,
    pub bytes_after: u64,
    /// Up to 20 changed paths, directories too: added and modified in path
    /// order, then removed.
    pub examples: Vec<PathBuf>,
}

impl Diff {
    /// Whether nothing at all changed, directories included.
    pub fn is_empty(&self) -> bool {
        self.files() == 0 && self.dirs_added + self.dirs_removed + self.dirs_modified == 0
    }

    /// Files and symlinks added, removed or changed.
    pub fn files(&self) -> u64 {
        self.added + self.removed + self.modified
    }

    /// One line for the receipt, e.g. `3 added, 1 removed, 2 changed; 1.2 MB
    /// freed`, counting files and symlinks only.
    pub fn summary(&self) -> String {
        if self.is_empty() {
            return "nothing changed".to_string();
        }
        if self.files() == 0 {
            return "no files changed, only directories".to_string();
        }
        let space = match self.bytes_before.cmp(&self.bytes_after) {
            std::cmp::Ordering::Greater => {
                format!("{} freed", human(self.bytes_before - self.bytes_after))
            }
            std::cmp::Ordering::Less => {
                format!("{} added", human(self.bytes_after - self.bytes_before))
            }
            std::cmp::Ordering::Equal => "same size".to_string(),
        };
        format!(
            "{} added, {} removed, {} changed; {space}",
            self.added, self.removed, self.modified
        )
    }

    /// Counts one change from `before` to `after` (`None`: absent).
    fn count(&mut self, path: &Path, before: Option<Kind>, after: Option<Kind>) {
        let dir = before.is_none_or(|k| k == Kind::Dir) && after.is_none_or(|k| k == Kind::Dir);
        let n = match (before, after, dir) {
            (None, _, false) => &mut self.added,
            (None, _, true) => &mut self.dirs_added,
            (Some(_), None, false) => &mut self.removed,
            (Some(_), None, true) => &mut self.dirs_removed,
            (Some(_), Some(_), false) => &mut self.modified,
            (Some(_), Some(_), true) => &mut self.dirs_modified,
        };
        *n += 1;
        if self.examples.len() < MAX_EXAMPLES {
            self.examples.push(path.to_path_buf());
        }
    }
}

/// Bytes in binary units with one decimal, as `du -h` users read them.
fn human(n: u64) -> String {
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64;
    let mut unit = "B";
    for u in ["KB", "MB", "GB", "TB", "PB"] {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    format!("{v:.1} {unit}")
}

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

    /// Copies the blobs, then writes the manifest, then `meta.json`.
    fn fill(&mut self, max_bytes: u64) -> Result<(), SnapshotError> {
        let blobs = self.dir.join(BLOBS);
        DirBuilder::new()
            .mode(0o700)
            .create(&blobs)
            .map_err(io_err("create", &blobs))?;
        let mut total = 0u64;
        let mut next = 0u64;
        for i in 0..self.entries.len() {
            if self.entries.get(i).map(|e| e.kind) != Some(Kind::File) {
                continue;
            }
            let blob = self.blob_path(next);
            let Some(e) = self.entries.get_mut(i) else {
                continue;
            };
            // Not through a symlink, not blocking on a fifo or device swapped
            // in since the walk, and only the very file the walk listed.
            let (mut src, meta) = open_listed_file(&e.path, e.dev, e.ino)?;
            total = total.saturating_add(meta.size());
            if total > max_bytes {
                return Err(SnapshotError::TooBig {
                    needed: total,
                    allowed: max_bytes,
                });
            }
            let mut dst = create_private(&blob)?;
            let (copied, sha) = copy_hashed(&mut src, &e.path, &mut dst, &blob, meta.size())?;
            dst.sync_all().map_err(io_err("sync", &blob))?;
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

    fn write_manifest(&self) -> Result<(), SnapshotError> {
        let mut o = Map::new();
        o.insert("format".into(), FORMAT.into());
        o.insert("id".into(), self.id.as_str().into());
        o.insert("chore".into(), self.chore.as_str().into());
        o.insert("created_at".into(), self.created_at.into());
        o.insert(
            "roots".into(),
            self.roots.iter().map(|r| path_to_json(r)).collect(),
        );
        o.insert(
            "exclude".into(),
            self.exclude.iter().map(|x| path_to_json(x)).collect(),
        );
        o.insert(
            "entries".into(),
            self.entries.iter().map(Entry::to_json).collect(),
        );
        write_record(&self.dir, MANIFEST, MANIFEST_TMP, &Value::Object(o))?;
        sync_dir(&self.store)
    }

    fn write_meta(&self, sealed: bool) -> Result<(), SnapshotError> {
        let mut o = Map::new();
        o.insert("format".into(), FORMAT.into());
        o.insert("id".into(), self.id.as_str().into());
        o.insert("chore".into(), self.chore.as_str().into());
        o.insert("created_at".into(), self.created_at.into());
        o.insert(
            "roots".into(),
            self.roots.iter().map(|r| path_to_json(r)).collect(),
        );
        o.insert("sealed".into(), sealed.into());
        write_record(&self.dir, META, META_TMP, &Value::Object(o))
    }

    /// Compares what is under the roots now with the snapshot; with `keep`,
    /// also lists every changed path, as it is now, in path order.
    fn compare(&self, keep: bool) -> Result<(Diff, Vec<Change>), SnapshotError> {
        let index: HashMap<&Path, usize> = self
            .entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.path.as_path(), i))
            .collect();
        let mut seen = vec![false; self.entries.len()];
        let mut d = Diff {
            bytes_before: self
                .entries
                .iter()
                .filter(|e| e.kind == Kind::File)
                .fold(0, |sum, e| sum.saturating_add(e.size)),
            ..Diff::default()
        };
        let mut changes: Vec<Change> = Vec::new();
        let keep_change = |changes: &mut Vec<Change>, change: Change| {
            if !keep {
                return Ok(());
            }
            if changes.len() >= MAX_ENTRIES {
                return Err(SnapshotError::TooManyEntries { limit: MAX_ENTRIES });
            }
            changes.push(change);
            Ok(())
        };
        walk(&self.roots, &self.skipped_paths(), |path, meta, kind| {
            let old = match index.get(path) {
                Some(&i) => {
                    if let Some(s) = seen.get_mut(i) {
                        *s = true;
                    }
                    self.entries.get(i)
                }
                None => None,
            };
            // What was skipped at the take is never compared or touched.
            if old.is_some_and(|o| o.kind.is_skipped()) {
                return Ok(false);
            }
            if kind == Kind::File {
                d.bytes_after = d.bytes_after.saturating_add(meta.size());
            }
            if old.is_none_or(|o| o.differs(path, meta, kind)) {
                // A new fifo, socket, device or mount is not counted, but is
                // kept: undo moves a new directory whole only if all in it is
                // the run's.
                if !(old.is_none() && kind.is_skipped()) {
                    d.count(path, old.map(|o| o.kind), Some(kind));
                }
                keep_change(
                    &mut changes,
                    (path.to_path_buf(), Some(State::of(meta, kind))),
                )?;
            }
            Ok(true)
        })?;
        for (e, seen) in self.entries.iter().zip(&seen) {
            if !seen && !e.kind.is_skipped() {
                d.count(&e.path, Some(e.kind), None);
                keep_change(&mut changes, (e.path.clone(), None))?;
            }
        }
        changes.sort_by(|a, b| a.0.cmp(&b.0));
        Ok((d, changes))
    }

    /// Compares what is under the roots now with the snapshot, changing
    /// nothing.
    pub fn diff(&self) -> Result<Diff, SnapshotError> {
        self.compare(false).map(|(d, _)| d)
    }

    /// Called once, right after the run: the diff, and `after.json`, which
    /// records every path the run added, removed or changed as the run left
    /// it, so that undo reverts those alone, and only while they are still
    /// so. A snapshot that was never sealed cannot be undone.
    pub fn seal(&self) -> Result<Diff, SnapshotError> {
        if lstat(&self.dir.join(AFTER))?.is_some() {
            return Err(SnapshotError::AlreadySealed(self.id.clone()));
        }
        let (diff, changes) = self.compare(true)?;
        let list: Vec<Value> = changes
            .iter()
            .map(|(path, after)| {
                let mut o = Map::new();
                o.insert("path".into(), path_to_json(path));
                o.insert(
                    "after".into(),
                    after
                        .as_ref()
                        .map_or_else(|| "absent".into(), State::to_json),
                );
                Value::Object(o)
            })
            .collect();
        let mut o = Map::new();
        o.insert("format".into(), FORMAT.into());
        o.insert("id".into(), self.id.as_str().into());
        o.insert("changes".into(), Value::Array(list));
        write_record(&self.dir, AFTER, AFTER_TMP, &Value::Object(o))?;
        self.write_meta(true)?;
        Ok(diff)
    }

    /// Reads `after.json` back, refusing what a seal could not have written:
    /// a path outside the roots, excluded, twice, or that the snapshot
    /// skipped; a path absent both before and after.
    fn load_after(&self) -> Result<Vec<Change>, SnapshotError> {
        let path = self.dir.join(AFTER);
        if lstat(&path)?.is_none() {
            return Err(SnapshotError::NotSealed(self.id.clone()));
        }
        let bad = |why: String| SnapshotError::BadManifest {
            path: path.clone(),
            why,
        };
        let bytes = read_record(&path, MAX_MANIFEST_BYTES)?;
        let v: Value =
            serde_json::from_slice(&bytes).map_err(|e| bad(format!("not JSON ({e})")))?;
        let o = v.as_object().ok_or_else(|| bad("not an object".into()))?;
        if o.get("format").and_then(Value::as_u64) != Some(FORMAT) {
            return Err(bad("unknown format".into()));
        }
        if o.get("id").and_then(Value::as_str) != Some(self.id.as_str()) {
            return Err(bad("its id is not the directory's".into()));
        }
        let list = o
            .get("changes")
            .and_then(Value::as_array)
            .ok_or_else(|| bad("no changes".into()))?;
        if list.len() > MAX_ENTRIES {
            return Err(bad("too many changes".into()));
        }
        let kinds: HashMap<&Path, Kind> = self
            .entries
            .iter()
            .map(|e| (e.path.as_path(), e.kind))
            .collect();
        let skipped = self.skipped_paths();
        let mut out: Vec<Change> = Vec::with_capacity(list.len());
        for c in list {
            let c = c
                .as_object()
                .ok_or_else(|| bad("a change is not an object".into()))?;
            let p = c
                .get("path")
                .and_then(path_from_json)
                .filter(|p| is_plain_absolute(p))
                .ok_or_else(|| bad("a change has no valid path".into()))?;
            let p: PathBuf = p.components().collect();
            if self.root_of(&p).is_none() {
                return Err(bad(format!("{} is outside its roots", p.display())));
            }
            if excluded(&p, &skipped) {
                return Err(bad(format!("{} is excluded", p.display())));
            }
            let after = match c.get("after") {
                Some(Value::String(s)) if s == "absent" => None,
                Some(v) => Some(
                    State::from_json(v)
                        .ok_or_else(|| bad(format!("{} has no valid state", p.display())))?,
                ),
                None => return Err(bad(format!("{} has no state", p.display()))),
            };
            match (kinds.get(p.as_path()), &after) {
                (Some(k), _) if k.is_skipped() => {
                    return Err(bad(format!(
                        "{} was skipped, so cannot have changed",
                        p.display()
                    )));
                }
                (None, None) => {
                    return Err(bad(format!(
                        "{} was neither there before nor after",
                        p.display()
                    )));
                }
                _ => {}
            }
            out.push((p, after));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        if let Some(w) = out.windows(2).find(|w| matches!(w, [a, b] if a.0 == b.0))
            && let Some((p, _)) = w.first()
        {
            return Err(bad(format!("{} appears twice", p.display())));
        }
        Ok(out)
    }

    /// The root an entry path lies under.
    fn root_of(&self, path: &Path) -> Option<&Path> {
        self.roots
            .iter()
            .find(|r| path.starts_with(r))
            .map(PathBuf::as_path)
    }

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

    /// Deletes the snapshot (a run that changed nothing needs no undo).
    pub fn discard(self) -> Result<(), SnapshotError> {
        fs::remove_dir_all(&self.dir).map_err(io_err("remove", &self.dir))
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

/// Moves `path` to `dir/<path without its leading />`, with a numeric
/// suffix if that is taken (an earlier, interrupted undo).
fn move_to_quarantine(path: &Path, dir: &Path) -> Result<(), SnapshotError> {
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
fn move_by_copy(src: &Path, dest: &Path) -> Result<(), SnapshotError> {
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

/// Removes snapshots older than [`KEEP_S`] at `now` (by the `created_at` of
/// their `meta.json`), and directories without a manifest (takes that died)
/// older than a day by mtime; one whose `meta.json` cannot be read goes
/// after [`KEEP_S`] by mtime. Anything in `store` not named like a snapshot
/// is left alone.
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

#[cfg(test)]
mod tests;
