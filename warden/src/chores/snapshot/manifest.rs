//! The snapshot's own records (`manifest.json`, `meta.json`, `after.json`):
//! reading them capped and writing them whole, their JSON, and the checks
//! that refuse anything a snapshot of ours could not have written.

#![forbid(unsafe_code)]

use super::diff::{MAX_LISTED, Unlisted};
use super::entry::{Change, Entry, Kind, State};
use super::error::{SnapshotError, io_err};
use super::safe_dir::FILE_FLAGS;
use super::walk::{create_private, excluded, lstat, sync_dir};
use super::{
    AFTER, AFTER_TMP, FORMAT, MANIFEST, MANIFEST_TMP, MAX_ENTRIES, MAX_EXAMPLES,
    MAX_MANIFEST_BYTES, MAX_META_BYTES, META, META_TMP, Meta, Snapshot,
};

/// Directories `after.json` may name as holding unlisted new entries: one
/// per example, and one per root (a snapshot has few).
const MAX_UNLISTED: usize = MAX_EXAMPLES + 1024;
use aromba_warden_proto::{decode_hex, encode_hex};
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

pub(super) fn path_to_json(p: &Path) -> Value {
    match p.to_str() {
        Some(s) => s.into(),
        None => {
            let mut o = Map::new();
            o.insert("hex".into(), encode_hex(p.as_os_str().as_bytes()).into());
            Value::Object(o)
        }
    }
}

pub(super) fn path_from_json(v: &Value) -> Option<PathBuf> {
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

pub(super) fn is_lower_hex(s: &str) -> bool {
    s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

pub(super) fn check_id(id: &str) -> Result<(), SnapshotError> {
    if id.len() == 32 && is_lower_hex(id) {
        Ok(())
    } else {
        Err(SnapshotError::BadId(id.to_string()))
    }
}

/// Absolute with no `..`: the only paths a snapshot will ever write to.
pub(super) fn is_plain_absolute(p: &Path) -> bool {
    p.is_absolute() && !p.components().any(|c| c == Component::ParentDir)
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

/// The fields the manifest and `meta.json` share: format, id, chore,
/// creation time and roots.
fn read_header<'a>(
    o: &'a Map<String, Value>,
    bad: &dyn Fn(String) -> SnapshotError,
) -> Result<(&'a str, u64, Vec<PathBuf>), SnapshotError> {
    let chore = o
        .get("chore")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("no chore".into()))?;
    let created_at = o
        .get("created_at")
        .and_then(Value::as_u64)
        .ok_or_else(|| bad("no created_at".into()))?;
    let roots = paths_from_json(o.get("roots"), "roots", bad)?;
    if roots.is_empty() {
        return Err(bad("no roots".into()));
    }
    Ok((chore, created_at, roots))
}

/// Reads and checks `dir/manifest.json` (see [`load`](super::load)): the
/// snapshot `id` in `store`.
pub(super) fn read_manifest(
    store: PathBuf,
    dir: PathBuf,
    id: &str,
) -> Result<Snapshot, SnapshotError> {
    let path = dir.join(MANIFEST);
    let bad = |why: String| SnapshotError::BadManifest {
        path: path.clone(),
        why,
    };
    let o = read_object(&path, MAX_MANIFEST_BYTES, id)?;
    let (chore, created_at, roots) = read_header(&o, &bad)?;
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
pub(super) fn read_meta(dir: &Path, id: &str) -> Result<(Meta, bool), SnapshotError> {
    let path = dir.join(META);
    let bad = |why: String| SnapshotError::BadManifest {
        path: path.clone(),
        why,
    };
    let o = read_object(&path, MAX_META_BYTES, id)?;
    let (chore, created_at, roots) = read_header(&o, &bad)?;
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

/// Reads one of the snapshot's JSON records: an object of this format,
/// naming this snapshot's `id`.
fn read_object(path: &Path, cap: u64, id: &str) -> Result<Map<String, Value>, SnapshotError> {
    let bad = |why: &str| SnapshotError::BadManifest {
        path: path.to_path_buf(),
        why: why.into(),
    };
    let bytes = read_record(path, cap)?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|e| SnapshotError::BadManifest {
        path: path.to_path_buf(),
        why: format!("not JSON ({e})"),
    })?;
    let Value::Object(o) = v else {
        return Err(bad("not an object"));
    };
    if o.get("format").and_then(Value::as_u64) != Some(FORMAT) {
        return Err(bad("unknown format"));
    }
    if o.get("id").and_then(Value::as_str) != Some(id) {
        return Err(bad("its id is not the directory's"));
    }
    Ok(o)
}

/// Reads one of the snapshot's own records, refusing anything but a
/// regular file of at most `cap` bytes.
pub(super) fn read_record(path: &Path, cap: u64) -> Result<Vec<u8>, SnapshotError> {
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
pub(super) fn write_record(
    dir: &Path,
    name: &str,
    tmp: &str,
    v: &Value,
) -> Result<(), SnapshotError> {
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
pub(super) fn write_marker(path: &Path, now: u64) -> Result<(), SnapshotError> {
    let mut f = create_private(path)?;
    f.write_all(format!("{now}\n").as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(io_err("write", path))
}

impl Snapshot {
    pub(super) fn write_manifest(&self) -> Result<(), SnapshotError> {
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

    pub(super) fn write_meta(&self, sealed: bool) -> Result<(), SnapshotError> {
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

    /// Writes `after.json`: every path in `changes`, as the run left it,
    /// and where new entries were too many to list.
    pub(super) fn write_after(
        &self,
        changes: &[Change],
        unlisted: &[Unlisted],
    ) -> Result<(), SnapshotError> {
        let list: Vec<Value> = changes
            .iter()
            .map(|(path, after)| {
                let mut o = Map::new();
                o.insert("path".into(), path_to_json(path));
                o.insert(
                    "after".into(),
                    match after {
                        None => "absent".into(),
                        Some(s) if s.kind == Kind::Unknown => "unknown".into(),
                        Some(s) => s.to_json(),
                    },
                );
                Value::Object(o)
            })
            .collect();
        let mut o = Map::new();
        o.insert("format".into(), FORMAT.into());
        o.insert("id".into(), self.id.as_str().into());
        o.insert("changes".into(), Value::Array(list));
        let unlisted: Vec<Value> = unlisted
            .iter()
            .map(|u| {
                let mut o = Map::new();
                o.insert("path".into(), path_to_json(&u.path));
                o.insert("count".into(), u.count.map_or(Value::Null, Value::from));
                Value::Object(o)
            })
            .collect();
        o.insert("unlisted".into(), Value::Array(unlisted));
        write_record(&self.dir, AFTER, AFTER_TMP, &Value::Object(o))
    }

    /// Reads `after.json` back, refusing what a seal could not have written:
    /// a path outside the roots, excluded, twice, or that the snapshot
    /// skipped; a path absent both before and after. Also returns where the
    /// seal named new entries it could not list.
    pub(super) fn load_after(&self) -> Result<(Vec<Change>, Vec<Unlisted>), SnapshotError> {
        let path = self.dir.join(AFTER);
        if lstat(&path)?.is_none() {
            return Err(SnapshotError::NotSealed(self.id.clone()));
        }
        let bad = |why: String| SnapshotError::BadManifest {
            path: path.clone(),
            why,
        };
        let o = read_object(&path, MAX_MANIFEST_BYTES, &self.id)?;
        let list = o
            .get("changes")
            .and_then(Value::as_array)
            .ok_or_else(|| bad("no changes".into()))?;
        // Every entry of the snapshot, and the new ones a seal lists.
        if list.len() > MAX_ENTRIES + MAX_LISTED {
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
                Some(Value::String(s)) if s == "unknown" => Some(State::unknown()),
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
        let mut unlisted = Vec::new();
        // Absent from a seal before they were kept: none.
        let listed = o
            .get("unlisted")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        if listed.len() > MAX_UNLISTED {
            return Err(bad("too many unlisted directories".into()));
        }
        for u in listed {
            let path = u
                .get("path")
                .and_then(path_from_json)
                .filter(|p| is_plain_absolute(p) && self.root_of(p).is_some())
                .ok_or_else(|| bad("an unlisted entry has no valid path".into()))?;
            let count = match u.get("count") {
                Some(Value::Null) => None,
                Some(v) => Some(
                    v.as_u64()
                        .ok_or_else(|| bad("an unlisted count is not a number".into()))?,
                ),
                None => return Err(bad("an unlisted entry has no count".into())),
            };
            unlisted.push(Unlisted {
                path: path.components().collect(),
                count,
            });
        }
        Ok((out, unlisted))
    }
}
