//! Snapshots of a red chore's touches: taken before it runs, diffed after it
//! for the receipt, and restored by `undo` for [`KEEP_S`] seconds.
//!
//! On disk a snapshot is the directory `<store>/<id>/` (0700, root's):
//!
//! - `blobs/<n>` (0600): the bytes of the n-th regular file, as read.
//! - `manifest.json` (0600), written last through `manifest.json.tmp`,
//!   fsync'd, then renamed, so a snapshot with a manifest is whole:
//!
//!   ```text
//!   {"format": 1, "id": "<32 lower hex>", "chore": "apt-clean",
//!    "created_at": 1700000000, "roots": ["/var/cache/apt"],
//!    "entries": [
//!     {"path": "/var/cache/apt", "kind": "dir", "mode": 493, "uid": 0,
//!      "gid": 0, "mtime": 1700000000, "mtime_ns": 0},
//!     {"path": "/var/cache/apt/x.bin", "kind": "file", "mode": 420, "uid": 0,
//!      "gid": 0, "mtime": 1700000000, "mtime_ns": 5, "size": 12,
//!      "blob": 0, "sha256": "<64 lower hex>"},
//!     {"path": "/var/cache/apt/l", "kind": "symlink", "uid": 0, "gid": 0,
//!      "mtime": 1700000000, "mtime_ns": 0, "target": "x.bin"},
//!     {"path": "/var/cache/apt/p", "kind": "skipped", "why": "fifo"}]}
//!   ```
//!
//!   Paths are absolute, sorted parent first; a path or link target that is
//!   not UTF-8 is `{"hex": "<its bytes>"}`. `mode` is the permission bits
//!   (with setuid, setgid and sticky). A root with no entry of its own did
//!   not exist. `why` is `fifo`, `socket`, `device` or `mount` (another
//!   filesystem mounted below a root): such entries are never copied,
//!   compared or touched.
//! - `undone`: written once the snapshot has been restored.
//!
//! Not restorable without `unsafe` (no `lutimes`): a symlink's own mtime,
//! so a symlink is compared by target and owner only. A directory is
//! compared by mode and owner: its size and mtime move with every entry
//! added or removed in it, which are counted themselves. Hard links come
//! back as separate files.

#![forbid(unsafe_code)]

use aromba_warden_proto::{decode_hex, encode_hex};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::fmt;
use std::fs::{self, DirBuilder, File, FileTimes, Metadata, OpenOptions, Permissions};
use std::io::{self, Read, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{
    DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt, fchown, lchown,
    symlink,
};
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
const FORMAT: u64 = 1;
const MANIFEST: &str = "manifest.json";
const MANIFEST_TMP: &str = "manifest.json.tmp";
const UNDONE: &str = "undone";
const BLOBS: &str = "blobs";
const PERM_BITS: u32 = 0o7777;

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
                    "the snapshot manifest {} is invalid: {why}",
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
                "{} changed while it was being snapshotted",
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
    target: Option<PathBuf>,
    /// Blob number and SHA-256 of a regular file's bytes.
    blob: Option<(u64, String)>,
    /// Where the walk found it, to catch a swap before the copy; not saved.
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
            mtime_ns: u32::try_from(meta.mtime_nsec()).unwrap_or(0),
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
        let mode = meta.mode() & PERM_BITS != self.mode;
        match kind {
            Kind::File => {
                owner
                    || mode
                    || meta.size() != self.size
                    || meta.mtime() != self.mtime
                    || meta.mtime_nsec() != i64::from(self.mtime_ns)
            }
            Kind::Dir => owner || mode,
            Kind::Symlink => owner || fs::read_link(path).ok() != self.target,
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
        let small = |k: &str| {
            number(k).and_then(|n| u32::try_from(n).map_err(|_| format!("{at} has a bad {k}")))
        };
        let kind = match text("kind") {
            Some("file") => Kind::File,
            Some("dir") => Kind::Dir,
            Some("symlink") => Kind::Symlink,
            Some("skipped") => Kind::Skipped(match text("why") {
                Some("fifo") => Why::Fifo,
                Some("socket") => Why::Socket,
                Some("device") => Why::Device,
                Some("mount") => Why::Mount,
                _ => return Err(format!("{at} is skipped for no known reason")),
            }),
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
        e.mtime = o
            .get("mtime")
            .and_then(Value::as_i64)
            .ok_or_else(|| format!("{at} has no valid mtime"))?;
        e.mtime_ns = small("mtime_ns")?;
        if e.mtime_ns >= 1_000_000_000 {
            return Err(format!("{at} has a bad mtime_ns"));
        }
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

/// A directory's names, sorted so walks are in path order (parents first).
fn children(dir: &Path) -> Result<Vec<OsString>, SnapshotError> {
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err("list", dir)(e)),
    };
    let mut names = Vec::new();
    for item in rd {
        names.push(item.map_err(io_err("list", dir))?.file_name());
    }
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
        let mut stack = vec![(root.clone(), children(root)?.into_iter())];
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
                let names = children(&path)?;
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
    File::open(path)
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

/// Opens a directory, and checks that what was opened is the directory at
/// `path` itself: open follows a symlink, and a chown through one swapped
/// in would hand some other directory to the recorded owner.
fn open_dir(path: &Path) -> Result<File, SnapshotError> {
    let dir = File::open(path).map_err(io_err("open", path))?;
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

/// One snapshot, as taken or loaded.
#[derive(Debug)]
pub struct Snapshot {
    pub id: String,
    pub chore: String,
    pub created_at: u64,
    /// The roots as recorded: cleaned, sorted, none inside another.
    pub roots: Vec<PathBuf>,
    store: PathBuf,
    dir: PathBuf,
    /// In path order, parents before children.
    entries: Vec<Entry>,
}

/// Copies every entry under `roots` into `store/<id>/` (see the module
/// doc). Symlinks are recorded, not followed; fifos, sockets, devices and
/// other filesystems mounted below a root are recorded as skipped. Refuses
/// when the regular files hold more than `max_bytes` (the caller's measure
/// of free space), when there are more than 200 000 entries, or when `id`
/// is not 32 lower-case hex characters.
pub fn take(
    store: &Path,
    id: &str,
    chore: &str,
    roots: &[PathBuf],
    now: u64,
    max_bytes: u64,
) -> Result<Snapshot, SnapshotError> {
    take_bounded(store, id, chore, roots, now, max_bytes, MAX_ENTRIES)
}

fn take_bounded(
    store: &Path,
    id: &str,
    chore: &str,
    roots: &[PathBuf],
    now: u64,
    max_bytes: u64,
    max_entries: usize,
) -> Result<Snapshot, SnapshotError> {
    check_id(id)?;
    let roots = normalize_roots(roots)?;
    let store = absolute(store)?;
    if let Some(r) = roots.iter().find(|r| r.starts_with(&store)) {
        return Err(SnapshotError::BadRoot {
            path: r.clone(),
            why: "it is the snapshot store or inside it",
        });
    }
    // A store under a root would otherwise copy itself into itself.
    let exclude = [store.clone()];
    let mut entries = Vec::new();
    walk(&roots, &exclude, |path, meta, kind| {
        if entries.len() >= max_entries {
            return Err(SnapshotError::TooManyEntries { limit: max_entries });
        }
        entries.push(Entry::of(path, meta, kind)?);
        Ok(true)
    })?;
    let needed = entries
        .iter()
        .filter(|e| e.kind == Kind::File)
        .fold(0u64, |sum, e| sum.saturating_add(e.size));
    if needed > max_bytes {
        return Err(SnapshotError::TooBig {
            needed,
            allowed: max_bytes,
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
        store,
        dir,
        entries,
    };
    if let Err(e) = snapshot.fill(max_bytes) {
        // Best effort: without a manifest, `purge` removes it a day later.
        let _ = fs::remove_dir_all(&snapshot.dir);
        return Err(e);
    }
    Ok(snapshot)
}

/// Reads a snapshot back, refusing anything a snapshot of ours could not
/// be: a bad id, an unreadable manifest, a path that is not absolute, has
/// `..`, lies outside every root, or sits below anything but a directory
/// of the snapshot.
pub fn load(store: &Path, id: &str) -> Result<Snapshot, SnapshotError> {
    check_id(id)?;
    let store = absolute(store)?;
    let dir = store.join(id);
    let path = dir.join(MANIFEST);
    let bad = |why: String| SnapshotError::BadManifest {
        path: path.clone(),
        why,
    };
    let meta = fs::symlink_metadata(&path).map_err(io_err("read", &path))?;
    if !meta.is_file() || meta.len() > MAX_MANIFEST_BYTES {
        return Err(bad("it is not a regular file of a sane size".into()));
    }
    let mut bytes = Vec::new();
    File::open(&path)
        .and_then(|f| f.take(MAX_MANIFEST_BYTES).read_to_end(&mut bytes))
        .map_err(io_err("read", &path))?;
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
    let mut roots = Vec::new();
    for r in o
        .get("roots")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("no roots".into()))?
    {
        let r = path_from_json(r).ok_or_else(|| bad("a root is not a path".into()))?;
        if !is_plain_absolute(&r) {
            return Err(bad(format!(
                "root {} is not absolute or has `..`",
                r.display()
            )));
        }
        roots.push(r.components().collect::<PathBuf>());
    }
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
        store,
        dir,
        entries,
    })
}

/// What a run changed under the roots.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Diff {
    /// Entries (files, directories, symlinks) there now and not before.
    pub added: u64,
    pub removed: u64,
    pub modified: u64,
    /// Bytes of all regular files under the roots, before and after.
    pub bytes_before: u64,
    pub bytes_after: u64,
    /// Up to 20 changed paths: added and modified in path order, then removed.
    pub examples: Vec<PathBuf>,
}

impl Diff {
    pub fn is_empty(&self) -> bool {
        self.files() == 0
    }

    pub fn files(&self) -> u64 {
        self.added + self.removed + self.modified
    }

    /// One line for the receipt, e.g. `3 added, 1 removed, 2 changed; 1.2 MB freed`.
    pub fn summary(&self) -> String {
        if self.is_empty() {
            return "nothing changed".to_string();
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

    fn note(&mut self, path: &Path) {
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
    /// Entries moved to quarantine (a moved directory counts once).
    pub quarantined: u64,
}

impl Snapshot {
    fn blob_path(&self, n: u64) -> PathBuf {
        self.dir.join(BLOBS).join(n.to_string())
    }

    /// Copies the blobs, then writes the manifest.
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
            let mut src = File::open(&e.path).map_err(io_err("open", &e.path))?;
            let meta = src.metadata().map_err(io_err("inspect", &e.path))?;
            // Open follows symlinks: a file swapped for a link since the walk
            // must not pull some other file into the snapshot.
            if !meta.is_file() || meta.dev() != e.dev || meta.ino() != e.ino {
                return Err(SnapshotError::Changed(e.path.clone()));
            }
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
            e.mtime_ns = u32::try_from(meta.mtime_nsec()).unwrap_or(0);
            e.size = copied;
            e.blob = Some((next, sha));
            next += 1;
        }
        sync_dir(&blobs)?;
        self.write_manifest()
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
            "entries".into(),
            self.entries.iter().map(Entry::to_json).collect(),
        );
        let path = self.dir.join(MANIFEST);
        let bytes =
            serde_json::to_vec(&Value::Object(o)).map_err(|e| SnapshotError::BadManifest {
                path: path.clone(),
                why: e.to_string(),
            })?;
        let tmp = self.dir.join(MANIFEST_TMP);
        let mut f = create_private(&tmp)?;
        f.write_all(&bytes).map_err(io_err("write", &tmp))?;
        f.sync_all().map_err(io_err("sync", &tmp))?;
        fs::rename(&tmp, &path).map_err(io_err("rename", &tmp))?;
        sync_dir(&self.dir)?;
        sync_dir(&self.store)
    }

    /// Compares what is under the roots now with the snapshot.
    pub fn diff(&self) -> Result<Diff, SnapshotError> {
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
        walk(
            &self.roots,
            std::slice::from_ref(&self.store),
            |path, meta, kind| {
                let old = match index.get(path) {
                    Some(&i) => {
                        if let Some(s) = seen.get_mut(i) {
                            *s = true;
                        }
                        self.entries.get(i)
                    }
                    None => None,
                };
                // Skipped things (and anything where one was) are left out.
                if (kind.is_skipped() && old.is_none()) || old.is_some_and(|o| o.kind.is_skipped())
                {
                    return Ok(false);
                }
                if kind == Kind::File {
                    d.bytes_after = d.bytes_after.saturating_add(meta.size());
                }
                match old {
                    None => {
                        d.added += 1;
                        d.note(path);
                    }
                    Some(o) if o.differs(path, meta, kind) => {
                        d.modified += 1;
                        d.note(path);
                    }
                    Some(_) => {}
                }
                Ok(true)
            },
        )?;
        for (e, seen) in self.entries.iter().zip(&seen) {
            if !seen && !e.kind.is_skipped() {
                d.removed += 1;
                d.note(&e.path);
            }
        }
        Ok(d)
    }

    /// The root an entry path lies under.
    fn root_of(&self, path: &Path) -> Option<&Path> {
        self.roots
            .iter()
            .find(|r| path.starts_with(r))
            .map(PathBuf::as_path)
    }

    /// Refuses a path with a symlink between its root and itself: as root,
    /// writing through one could land anywhere. (A race remains between this
    /// check and the write; closing it needs `openat`, hence `unsafe`.)
    fn check_parents(&self, path: &Path) -> Result<(), SnapshotError> {
        let Some(root) = self.root_of(path) else {
            return Err(SnapshotError::Unsafe {
                path: path.to_path_buf(),
                why: "it is outside the snapshot's roots",
            });
        };
        for a in path.ancestors().skip(1) {
            if !a.starts_with(root) {
                break;
            }
            if lstat(a)?.is_some_and(|m| m.file_type().is_symlink()) {
                return Err(SnapshotError::Unsafe {
                    path: path.to_path_buf(),
                    why: "a directory above it is now a symlink",
                });
            }
        }
        Ok(())
    }

    /// Puts the roots back as they were at the snapshot; see the module doc.
    /// What the run created, and what changed type, is moved (never deleted)
    /// to `quarantine/<id>-undo/<path without its leading />`.
    pub fn restore(&self, quarantine: &Path, now: u64) -> Result<Restored, SnapshotError> {
        let marker = self.dir.join(UNDONE);
        if lstat(&marker)?.is_some() {
            return Err(SnapshotError::AlreadyUndone(self.id.clone()));
        }
        if now.saturating_sub(self.created_at) > KEEP_S {
            return Err(SnapshotError::Expired(self.id.clone()));
        }
        let quarantine = absolute(quarantine)?;
        let exclude = [self.store.clone(), quarantine.clone()];
        let moved_to = quarantine.join(format!("{}-undo", self.id));
        let index: HashMap<&Path, &Entry> =
            self.entries.iter().map(|e| (e.path.as_path(), e)).collect();
        let mut done = Restored::default();

        // 1. Move away what the run created or turned into another kind.
        walk(&self.roots, &exclude, |path, _meta, kind| {
            let keep = match index.get(path) {
                Some(old) if old.kind.is_skipped() => return Ok(false),
                Some(old) => old.kind == kind,
                // A new fifo, socket or mount is left alone, like old ones.
                None if kind.is_skipped() => return Ok(false),
                None => false,
            };
            if keep {
                return Ok(true);
            }
            self.check_parents(path)?;
            move_to_quarantine(path, &moved_to)?;
            done.quarantined += 1;
            Ok(false)
        })?;

        // 2. Recreate, parents first, what is missing or changed.
        let mut tmp_seq = 0u64;
        for old in &self.entries {
            if old.kind.is_skipped() || excluded(&old.path, &exclude) {
                continue;
            }
            self.check_parents(&old.path)?;
            let now_meta = lstat(&old.path)?;
            let changed = now_meta
                .as_ref()
                .is_none_or(|m| old.differs(&old.path, m, Kind::of(m, m.dev())));
            if !changed {
                continue;
            }
            match old.kind {
                Kind::Dir => {
                    if now_meta.is_none() {
                        // Private until its owner and mode are set below.
                        DirBuilder::new()
                            .mode(0o700)
                            .create(&old.path)
                            .map_err(io_err("create", &old.path))?;
                    }
                    let dir = open_dir(&old.path)?;
                    fchown(&dir, Some(old.uid), Some(old.gid))
                        .map_err(io_err("set the owner of", &old.path))?;
                    dir.set_permissions(Permissions::from_mode(old.mode))
                        .map_err(io_err("set the mode of", &old.path))?;
                }
                Kind::File => self.restore_file(old, &mut tmp_seq)?,
                Kind::Symlink => self.restore_link(old, &mut tmp_seq)?,
                Kind::Skipped(_) => continue,
            }
            done.restored += 1;
        }

        // 3. Directory mtimes last, deepest first: every rename above moved them.
        for old in self.entries.iter().rev() {
            if old.kind != Kind::Dir || excluded(&old.path, &exclude) {
                continue;
            }
            open_dir(&old.path)?
                .set_times(FileTimes::new().set_modified(old.mtime()?))
                .map_err(io_err("set the mtime of", &old.path))?;
        }

        let mut f = create_private(&marker)?;
        f.write_all(format!("{now}\n").as_bytes())
            .and_then(|()| f.sync_all())
            .map_err(io_err("write", &marker))?;
        Ok(done)
    }

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

    /// Writes the blob to a new file beside the path, sets its owner, mode
    /// and mtime, and renames it over whatever is there.
    fn restore_file(&self, old: &Entry, seq: &mut u64) -> Result<(), SnapshotError> {
        let Some((n, sha)) = &old.blob else {
            return Err(SnapshotError::CorruptBlob(old.path.clone()));
        };
        let blob = self.blob_path(*n);
        let mut src = File::open(&blob).map_err(io_err("open", &blob))?;
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
        let put = (|| {
            let (copied, got) = copy_hashed(&mut src, &blob, &mut dst, &tmp, u64::MAX)?;
            if copied != old.size || got != *sha {
                return Err(SnapshotError::CorruptBlob(old.path.clone()));
            }
            set_attrs(&dst, &tmp, old)?;
            dst.sync_all().map_err(io_err("sync", &tmp))?;
            fs::rename(&tmp, &old.path).map_err(io_err("put back", &old.path))
        })();
        if put.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        put
    }

    fn restore_link(&self, old: &Entry, seq: &mut u64) -> Result<(), SnapshotError> {
        let Some(target) = &old.target else {
            return Err(SnapshotError::Unsafe {
                path: old.path.clone(),
                why: "its saved link target is missing",
            });
        };
        let tmp = loop {
            let tmp = self.temp_name(&old.path, seq)?;
            match symlink(target, &tmp) {
                Ok(()) => break tmp,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(io_err("create the link", &tmp)(e)),
            }
        };
        let put = lchown(&tmp, Some(old.uid), Some(old.gid))
            .map_err(io_err("set the owner of", &tmp))
            .and_then(|()| fs::rename(&tmp, &old.path).map_err(io_err("put back", &old.path)));
        if put.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        put
    }

    /// Deletes the snapshot (a run that changed nothing needs no undo).
    pub fn discard(self) -> Result<(), SnapshotError> {
        fs::remove_dir_all(&self.dir).map_err(io_err("remove", &self.dir))
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
                let mut from = File::open(path).map_err(io_err("open", path))?;
                let now = from.metadata().map_err(io_err("inspect", path))?;
                if !now.is_file() || now.ino() != e.ino || now.dev() != e.dev {
                    return Err(SnapshotError::Changed(path.to_path_buf()));
                }
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

/// Removes snapshots older than [`KEEP_S`] at `now` (by `created_at`), and
/// directories without a manifest (takes that died) older than a day by
/// mtime; one whose manifest cannot be read goes after [`KEEP_S`] by mtime.
/// Anything in `store` not named like a snapshot is left alone.
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
        let expired = match lstat(&path.join(MANIFEST))? {
            None => age_by_mtime > HALF_TAKEN_S,
            Some(_) => match load(store, id) {
                Ok(s) => now.saturating_sub(s.created_at) > KEEP_S,
                Err(_) => age_by_mtime > KEEP_S,
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
