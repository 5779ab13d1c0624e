//! What a snapshot records about one path: its [`Kind`], its [`Entry`] in
//! the manifest and its [`State`] in `after.json`, with their JSON forms.

#![forbid(unsafe_code)]

use super::PERM_BITS;
use super::error::SnapshotError;
use super::manifest::{is_lower_hex, path_from_json, path_to_json};
use serde_json::{Map, Value};
use std::fs::Metadata;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Why {
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
pub(super) enum Kind {
    File,
    Dir,
    Symlink,
    Skipped(Why),
    /// What a seal could not read (see [`State::unknown`]): never in a
    /// manifest, never the kind of anything on disk, so never "as the run
    /// left it" to an undo.
    Unknown,
}

impl Kind {
    pub(super) fn is_skipped(self) -> bool {
        matches!(self, Kind::Skipped(_))
    }

    /// What an entry is; `root_dev` marks anything on another filesystem
    /// (a mount point, or a bind-mounted file) as skipped.
    pub(super) fn of(meta: &Metadata, root_dev: u64) -> Kind {
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
            Kind::Unknown => "unknown",
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

pub(super) fn nanos(n: i64) -> u32 {
    u32::try_from(n).unwrap_or(0)
}

#[derive(Clone, Debug)]
pub(super) struct Entry {
    pub(super) path: PathBuf,
    pub(super) kind: Kind,
    pub(super) mode: u32,
    pub(super) uid: u32,
    pub(super) gid: u32,
    pub(super) size: u64,
    pub(super) mtime: i64,
    pub(super) mtime_ns: u32,
    pub(super) ctime: i64,
    pub(super) ctime_ns: u32,
    pub(super) target: Option<PathBuf>,
    /// Blob number and SHA-256 of a regular file's bytes.
    pub(super) blob: Option<(u64, String)>,
    pub(super) dev: u64,
    pub(super) ino: u64,
    /// Bytes a regular file takes on disk (`st_blocks * 512`) when listed:
    /// what its sparse copy will take, for the room check. Not saved.
    pub(super) allocated: u64,
}

impl Entry {
    /// What `meta` says of `path`; `target` is a symlink's, read through
    /// its open parent.
    pub(super) fn of(path: &Path, meta: &Metadata, kind: Kind, target: Option<PathBuf>) -> Entry {
        Entry {
            path: path.to_path_buf(),
            kind,
            // A symlink's mode means nothing on Linux and is not saved.
            mode: match kind {
                Kind::File | Kind::Dir => meta.mode() & PERM_BITS,
                Kind::Symlink | Kind::Skipped(_) | Kind::Unknown => 0,
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
            allocated: if kind == Kind::File {
                meta.blocks().saturating_mul(512)
            } else {
                0
            },
        }
    }

    /// Whether what is at the entry's path now (`meta`, `kind`, and for a
    /// symlink the `target` read through its open parent) differs from it.
    pub(super) fn differs(
        &self,
        meta: &Metadata,
        kind: Kind,
        target: impl FnOnce() -> Option<PathBuf>,
    ) -> bool {
        if self.kind.is_skipped() || kind.is_skipped() {
            return self.kind.is_skipped() != kind.is_skipped();
        }
        if self.kind != kind || kind == Kind::Unknown {
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
            Kind::Symlink => owner || inode || ctime || target() != self.target,
            Kind::Skipped(_) => false,
            Kind::Unknown => true,
        }
    }

    pub(super) fn mtime(&self) -> Result<SystemTime, SnapshotError> {
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

    pub(super) fn to_json(&self) -> Value {
        let mut o = Map::new();
        o.insert("path".into(), path_to_json(&self.path));
        let kind = match self.kind {
            Kind::File => "file",
            Kind::Dir => "dir",
            Kind::Symlink => "symlink",
            Kind::Unknown => "unknown",
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

    pub(super) fn from_json(v: &Value) -> Result<Entry, String> {
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
            allocated: 0,
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
            Kind::Dir | Kind::Skipped(_) | Kind::Unknown => {}
        }
        Ok(e)
    }
}

/// A path as the run left it, from `after.json`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct State {
    pub(super) kind: Kind,
    pub(super) size: u64,
    pub(super) mtime: i64,
    pub(super) mtime_ns: u32,
    pub(super) mode: u32,
    pub(super) uid: u32,
    pub(super) gid: u32,
    pub(super) ctime: i64,
    pub(super) ctime_ns: u32,
    pub(super) ino: u64,
    pub(super) dev: u64,
}

impl State {
    /// A path the seal could not read (EACCES, EMFILE, a directory swapped
    /// as it was walked, too deep): `"unknown"` in `after.json`. It never
    /// matches what is on disk, so undo counts it (and all below it) as a
    /// conflict and leaves it alone.
    pub(super) fn unknown() -> State {
        State {
            kind: Kind::Unknown,
            size: 0,
            mtime: 0,
            mtime_ns: 0,
            mode: 0,
            uid: 0,
            gid: 0,
            ctime: 0,
            ctime_ns: 0,
            ino: 0,
            dev: 0,
        }
    }

    pub(super) fn of(meta: &Metadata, kind: Kind) -> State {
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
    /// entry, so only its identity, owner and mode count. With `any_ctime`,
    /// the ctime is not compared: for an inode the undo itself moved
    /// (moving one link to an inode changes the ctime of all its links),
    /// once every path was checked in full.
    pub(super) fn is_but_ctime(&self, now: &Metadata, root_dev: u64, any_ctime: bool) -> bool {
        let kind = Kind::of(now, root_dev);
        let same = kind == self.kind
            && kind != Kind::Unknown
            && now.dev() == self.dev
            && now.ino() == self.ino
            && now.mode() & PERM_BITS == self.mode
            && now.uid() == self.uid
            && now.gid() == self.gid;
        same && (kind == Kind::Dir
            || (now.size() == self.size
                && now.mtime() == self.mtime
                && now.mtime_nsec() == i64::from(self.mtime_ns)
                && (any_ctime
                    || (now.ctime() == self.ctime
                        && now.ctime_nsec() == i64::from(self.ctime_ns)))))
    }

    pub(super) fn to_json(&self) -> Value {
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

    pub(super) fn from_json(v: &Value) -> Option<State> {
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
/// there (`None`: nothing); with `any_ctime`, as [`State::is_but_ctime`].
pub(super) fn still(
    after: Option<&State>,
    now: Option<&Metadata>,
    root_dev: u64,
    any_ctime: bool,
) -> bool {
    match (after, now) {
        (None, None) => true,
        (Some(s), Some(m)) => s.is_but_ctime(m, root_dev, any_ctime),
        _ => false,
    }
}

/// One path the run changed, and what it left there.
pub(super) type Change = (PathBuf, Option<State>);
