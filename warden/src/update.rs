//! Installing a release, the Warden's part: the only place a binary of
//! Aromba is written. The Worker downloads a release into its own folder;
//! the Warden reads it whole into memory (so what it checks is what it
//! writes), verifies the manifest's signature and every tarball again
//! (`aromba-release`), refuses a version not above the highest it has
//! installed, an expired manifest, another architecture or channel, and a
//! version after which a failed one has not been passed; then it writes
//! the two binaries into a folder of their own, `releases/<version>/`,
//! and swaps one link, `current`, keeping the one before as `previous`.
//!
//! What it remembers is one state record, `releases.json` (in the
//! integrity baseline like every state record): the highest version
//! installed, the current and previous ones, the versions that failed to
//! start here, and the update pending a restart (the new binaries'
//! hashes, which a Warden started from them takes as its new baseline).
//!
//! ```text
//! /opt/aromba/releases/1.4.1/{aromba,aromba-warden}
//! /opt/aromba/releases/1.4.2/{aromba,aromba-warden}
//! /opt/aromba/current  -> releases/1.4.2
//! /opt/aromba/previous -> releases/1.4.1
//! ```

#![forbid(unsafe_code)]

use aromba_release::{Binary, Keys, Manifest, ReleaseError, Target, Version, tarball};
use serde_json::{Map, Value};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The state record's name.
pub const RECORD: &str = "releases.json";

/// Where releases live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Releases {
    /// `/opt/aromba`, or `ROOT/opt/aromba` under `--root`.
    pub base: PathBuf,
}

impl Releases {
    pub fn system() -> Releases {
        Releases {
            base: PathBuf::from("/opt/aromba"),
        }
    }

    pub fn rooted(root: &Path) -> Releases {
        Releases {
            base: root.join("opt/aromba"),
        }
    }

    pub fn folder(&self) -> PathBuf {
        self.base.join("releases")
    }

    pub fn release(&self, version: &Version) -> PathBuf {
        self.folder().join(version.to_string())
    }

    pub fn current(&self) -> PathBuf {
        self.base.join("current")
    }

    pub fn previous(&self) -> PathBuf {
        self.base.join("previous")
    }

    /// The version a link points at (`releases/<version>`), if any.
    pub fn version_at(&self, link: &Path) -> Option<Version> {
        let target = std::fs::read_link(link).ok()?;
        let mut parts = target.components();
        let first = parts.next()?.as_os_str().to_str()?;
        let second = parts.next()?.as_os_str().to_str()?;
        if first != "releases" || parts.next().is_some() {
            return None;
        }
        Version::parse(second).ok()
    }
}

/// An update a restart finishes: the Warden started from these binaries
/// takes them as its baseline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    pub version: Version,
    pub warden_sha256: String,
    pub worker_sha256: String,
}

/// Whether a Warden running from a binary hashed `warden_sha256`, with the
/// Worker's binary hashed `worker_sha256`, is the update `pending` wrote.
pub fn takes_over(pending: &Pending, warden_sha256: &str, worker_sha256: &str) -> bool {
    pending.warden_sha256 == warden_sha256 && pending.worker_sha256 == worker_sha256
}

/// The `releases.json` record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Record {
    /// The highest version ever installed here: a release must be above.
    pub highest: Option<Version>,
    pub current: Option<Version>,
    pub previous: Option<Version>,
    /// Versions that failed to start here: never tried again, and no
    /// release up to the highest of them.
    pub failed: Vec<Version>,
    pub pending: Option<Pending>,
    /// A rollback the chat has not been told of yet.
    pub rolled_back: Option<Version>,
    /// When the current release was installed (Unix seconds), until its
    /// Warden takes over. Only a record: a rollback is decided by
    /// `pending` alone. (A release before 0.x read it as "on trial for an
    /// hour", so the Warden that takes over clears it: an older release's
    /// rollback, run as `previous`, then refuses too.)
    pub installed_at: Option<u64>,
}

fn version_field(v: &Value, name: &str) -> Result<Option<Version>, String> {
    match v.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Version::parse(s)
            .map(Some)
            .map_err(|_| format!("{RECORD}: {name} is not a version")),
        Some(_) => Err(format!("{RECORD}: {name} is not a version")),
    }
}

fn hex64(v: &Value, name: &str) -> Result<String, String> {
    match v.get(name).and_then(Value::as_str) {
        Some(s) if s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()) => Ok(s.to_string()),
        _ => Err(format!("{RECORD}: {name} is not a SHA-256")),
    }
}

fn version_value(v: &Option<Version>) -> Value {
    v.map_or(Value::Null, |v| Value::from(v.to_string()))
}

impl Record {
    pub fn parse(bytes: &[u8]) -> Result<Record, String> {
        let v: Value =
            serde_json::from_slice(bytes).map_err(|e| format!("{RECORD} is not JSON: {e}"))?;
        let failed = match v.get("failed") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(list)) => list
                .iter()
                .map(|f| {
                    f.as_str()
                        .and_then(|s| Version::parse(s).ok())
                        .ok_or_else(|| format!("{RECORD}: failed holds a non-version"))
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(format!("{RECORD}: failed is not a list")),
        };
        let pending = match v.get("pending") {
            None | Some(Value::Null) => None,
            Some(p) => Some(Pending {
                version: version_field(p, "version")?
                    .ok_or_else(|| format!("{RECORD}: pending lacks its version"))?,
                warden_sha256: hex64(p, "warden_sha256")?,
                worker_sha256: hex64(p, "worker_sha256")?,
            }),
        };
        Ok(Record {
            highest: version_field(&v, "highest")?,
            current: version_field(&v, "current")?,
            previous: version_field(&v, "previous")?,
            failed,
            pending,
            rolled_back: version_field(&v, "rolled_back")?,
            installed_at: match v.get("installed_at") {
                None | Some(Value::Null) => None,
                Some(t) => Some(
                    t.as_u64()
                        .ok_or_else(|| format!("{RECORD}: installed_at is not a time"))?,
                ),
            },
        })
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut m = Map::new();
        m.insert("highest".into(), version_value(&self.highest));
        m.insert("current".into(), version_value(&self.current));
        m.insert("previous".into(), version_value(&self.previous));
        m.insert(
            "failed".into(),
            Value::Array(
                self.failed
                    .iter()
                    .map(|v| Value::from(v.to_string()))
                    .collect(),
            ),
        );
        m.insert(
            "pending".into(),
            match &self.pending {
                None => Value::Null,
                Some(p) => {
                    let mut pm = Map::new();
                    pm.insert("version".into(), Value::from(p.version.to_string()));
                    pm.insert(
                        "warden_sha256".into(),
                        Value::from(p.warden_sha256.as_str()),
                    );
                    pm.insert(
                        "worker_sha256".into(),
                        Value::from(p.worker_sha256.as_str()),
                    );
                    Value::Object(pm)
                }
            },
        );
        m.insert("rolled_back".into(), version_value(&self.rolled_back));
        m.insert(
            "installed_at".into(),
            self.installed_at.map_or(Value::Null, Value::from),
        );
        let mut bytes = Value::Object(m).to_string().into_bytes();
        bytes.push(b'\n');
        bytes
    }
}

/// Why an update is refused or failed, in one sentence.
#[derive(Debug)]
pub enum UpdateError {
    /// The release itself: its signature, manifest, tarballs.
    Release(ReleaseError),
    /// Updates are refused now (the ladder, a file the Worker left).
    Refused(String),
    /// Writing the release or swapping the link failed.
    Io(String),
}

impl std::fmt::Display for UpdateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UpdateError::Release(e) => write!(f, "{e}"),
            UpdateError::Refused(why) => write!(f, "the update is refused: {why}"),
            UpdateError::Io(why) => write!(f, "the update failed: {why}"),
        }
    }
}

impl std::error::Error for UpdateError {}

impl From<ReleaseError> for UpdateError {
    fn from(e: ReleaseError) -> UpdateError {
        UpdateError::Release(e)
    }
}

fn io(what: &str, path: &Path, e: std::io::Error) -> UpdateError {
    UpdateError::Io(format!("{what} {}: {e}", path.display()))
}

/// A downloaded release, as read from the Worker's folder.
pub struct Download {
    pub manifest: Vec<u8>,
    pub signature: String,
    /// Each tarball's bytes, by the file name the manifest gives it.
    pub tarballs: Vec<(String, Vec<u8>)>,
}

/// Largest file read from the Worker's folder: the biggest tarball a
/// manifest may name.
const MAX_READ: u64 = aromba_release::manifest::MAX_TARBALL;

/// Reads `name` from `dir`, a folder the Worker owns: every component of
/// `dir` opened from `/` without following a link (the Worker cannot
/// swap its folder for a link to one of root's between a check and the
/// open), the file opened at that folder without following a link nor
/// blocking (a FIFO, a device), a regular file of at most `cap` bytes,
/// read into memory.
pub fn read_from(dir: &Path, name: &str, cap: u64) -> Result<Vec<u8>, UpdateError> {
    use crate::chores::snapshot::safe_dir::{Dir, Sub};
    use std::io::Read;
    if name.is_empty() || name.contains('/') || name.starts_with('.') {
        return Err(UpdateError::Refused(format!(
            "{name:?} is not a plain file name"
        )));
    }
    let path = dir.join(name);
    let folder = match Dir::open_path(dir) {
        Ok(Sub::Dir(d)) => d,
        Ok(_) => {
            return Err(UpdateError::Refused(format!(
                "{} is not a folder reached without a link",
                dir.display()
            )));
        }
        Err(e) => {
            return Err(UpdateError::Refused(format!(
                "cannot open {}: {e}",
                dir.display()
            )));
        }
    };
    let file = folder
        .open_file(std::ffi::OsStr::new(name))
        .map_err(|e| io("cannot open", &path, e))?;
    let meta = file.metadata().map_err(|e| io("cannot read", &path, e))?;
    if !meta.is_file() {
        return Err(UpdateError::Refused(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    // A name of its own: where the kernel lets the Worker hard-link a file
    // of root's into its folder, it is not read as a download.
    if std::os::unix::fs::MetadataExt::nlink(&meta) != 1 {
        return Err(UpdateError::Refused(format!(
            "{} has another name too (a hard link): a download is a file of its own",
            path.display()
        )));
    }
    if meta.len() > cap {
        return Err(UpdateError::Refused(format!(
            "{} is over {cap} bytes",
            path.display()
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io("cannot read", &path, e))?;
    if bytes.len() as u64 > cap {
        return Err(UpdateError::Refused(format!(
            "{} grew past {cap} bytes",
            path.display()
        )));
    }
    Ok(bytes)
}

/// Reads a download from the Worker's folder `dir`: `manifest.json` and
/// its `.minisig`; then, only when the signature verifies and `admit`
/// takes the manifest (the release may be installed here), the tarballs it
/// names, each only when its size is exactly the manifest's (a file of
/// another size is refused before a byte of it is read).
pub fn read_download(
    dir: &Path,
    keys: &Keys,
    admit: impl FnOnce(&Manifest) -> Result<(), UpdateError>,
) -> Result<(Manifest, Download), UpdateError> {
    let manifest = read_from(
        dir,
        "manifest.json",
        aromba_release::manifest::MAX_MANIFEST as u64,
    )?;
    let signature = read_from(
        dir,
        "manifest.json.minisig",
        aromba_release::manifest::MAX_SIGNATURE as u64,
    )?;
    let signature = String::from_utf8(signature)
        .map_err(|_| UpdateError::Release(ReleaseError::BadSignature("not text".into())))?;
    let parsed = Manifest::verified(&manifest, &signature, keys)?;
    admit(&parsed)?;
    let mut tarballs = Vec::new();
    for entry in &parsed.binaries {
        let bytes = read_from(dir, &entry.tarball, entry.size.min(MAX_READ))?;
        if bytes.len() as u64 != entry.size {
            return Err(UpdateError::Refused(format!(
                "{} is not the size its manifest says ({} bytes)",
                entry.tarball, entry.size
            )));
        }
        tarballs.push((entry.tarball.clone(), bytes));
    }
    Ok((
        parsed,
        Download {
            manifest,
            signature,
            tarballs,
        },
    ))
}

/// The two binaries of a verified, admissible release, unpacked in
/// memory: the Worker's, then the Warden's.
pub fn prepare(
    download: &Download,
    keys: &Keys,
    target: &Target,
    now: u64,
    record: &Record,
) -> Result<(Manifest, [Vec<u8>; 2]), UpdateError> {
    let manifest = Manifest::verified(&download.manifest, &download.signature, keys)?;
    manifest.admissible(target, now, record.highest, &record.failed)?;
    let mut out: [Vec<u8>; 2] = [Vec::new(), Vec::new()];
    for (i, binary) in Binary::ALL.iter().enumerate() {
        let entry = manifest.entry(*binary);
        let bytes = download
            .tarballs
            .iter()
            .find(|(name, _)| *name == entry.tarball)
            .map(|(_, b)| b)
            .ok_or_else(|| UpdateError::Refused(format!("{} was not downloaded", entry.tarball)))?;
        out[i] = tarball::extract(entry, bytes)?;
    }
    Ok((manifest, out))
}

fn write_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), UpdateError> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(|e| io("cannot write", path, e))?;
    f.write_all(bytes)
        .map_err(|e| io("cannot write", path, e))?;
    f.sync_all().map_err(|e| io("cannot write", path, e))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| io("cannot write", path, e))
}

fn sync_dir(dir: &Path) -> Result<(), UpdateError> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io("cannot sync", dir, e))
}

/// Writes the release's two binaries into `releases/<version>/`, whole:
/// into a `.new` folder first (one a failed attempt left is removed), then
/// renamed into place. A folder of that version already there was left by
/// an attempt that never swapped (its version is above every installed
/// one): it is replaced.
pub fn stage(
    releases: &Releases,
    version: &Version,
    binaries: &[Vec<u8>; 2],
) -> Result<PathBuf, UpdateError> {
    let folder = releases.folder();
    std::fs::create_dir_all(&folder).map_err(|e| io("cannot make", &folder, e))?;
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| io("cannot set the mode of", &folder, e))?;
    let fresh = folder.join(format!("{version}.new"));
    let _ = std::fs::remove_dir_all(&fresh);
    std::fs::create_dir(&fresh).map_err(|e| io("cannot make", &fresh, e))?;
    std::fs::set_permissions(&fresh, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| io("cannot set the mode of", &fresh, e))?;
    for (binary, bytes) in Binary::ALL.iter().zip(binaries) {
        write_new(&fresh.join(binary.file_name()), bytes, 0o755)?;
    }
    sync_dir(&fresh)?;
    let dest = releases.release(version);
    if std::fs::symlink_metadata(&dest).is_ok() {
        std::fs::remove_dir_all(&dest).map_err(|e| io("cannot replace", &dest, e))?;
    }
    std::fs::rename(&fresh, &dest).map_err(|e| io("cannot move into place", &dest, e))?;
    sync_dir(&folder)?;
    Ok(dest)
}

/// Points `link` at `releases/<version>` in one step: a new link under a
/// temporary name, renamed over the old one.
fn point(releases: &Releases, link: &Path, version: &Version) -> Result<(), UpdateError> {
    let tmp = releases.base.join(format!(
        ".{}.new",
        link.file_name().and_then(|n| n.to_str()).unwrap_or("link")
    ));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(format!("releases/{version}"), &tmp)
        .map_err(|e| io("cannot make", &tmp, e))?;
    std::fs::rename(&tmp, link).map_err(|e| io("cannot swap", link, e))?;
    sync_dir(&releases.base)
}

/// Makes `version` current, the current one previous; returns the version
/// that was current.
pub fn swap(releases: &Releases, version: &Version) -> Result<Option<Version>, UpdateError> {
    let before = releases.version_at(&releases.current());
    if let Some(before) = &before
        && before != version
    {
        point(releases, &releases.previous(), before)?;
    }
    point(releases, &releases.current(), version)?;
    Ok(before)
}

/// Puts the previous release back as current: the current one failed to
/// start. Returns (the failed version, the restored one).
pub fn roll_back(releases: &Releases) -> Result<(Version, Version), UpdateError> {
    let failed = releases
        .version_at(&releases.current())
        .ok_or_else(|| UpdateError::Refused("no current release to roll back from".into()))?;
    let restored = releases
        .version_at(&releases.previous())
        .ok_or_else(|| UpdateError::Refused("no previous release to roll back to".into()))?;
    if failed == restored {
        return Err(UpdateError::Refused(
            "the previous release is the current one".into(),
        ));
    }
    point(releases, &releases.current(), &restored)?;
    // Nothing is left to roll back to.
    let _ = std::fs::remove_file(releases.previous());
    Ok((failed, restored))
}

/// Asks systemd (`systemctl`, a stand-in in tests) to restart both
/// services without waiting: the Warden's own restart ends the process
/// that asks. `Err` says how it failed.
pub fn restart_services(systemctl: &Path) -> Result<(), String> {
    use crate::exec::{Bounds, run_program};
    let args: Vec<String> = [
        "--no-block",
        "restart",
        "aromba-warden.service",
        "aromba.service",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let bounds = Bounds {
        timeout: std::time::Duration::from_secs(30),
        max_output_bytes: 64 * 1024,
        low_priority: false,
        keep_fd: None,
        stop: None,
        tripwire: None,
        cgroup: Default::default(),
        known_secrets: Vec::new(),
    };
    match run_program(systemctl, &args, &[], &bounds) {
        Ok(o) if o.exit_code == Some(0) => Ok(()),
        Ok(o) => Err(format!(
            "systemctl failed ({:?}): {}",
            o.exit_code,
            o.stderr.lossy().trim()
        )),
        Err(e) => Err(format!("systemctl could not run: {e}")),
    }
}

/// Removes the release folders neither link points at (and `.new` ones a
/// failed attempt left): two releases are kept, the current and the
/// previous.
pub fn prune(releases: &Releases) -> Result<Vec<String>, UpdateError> {
    let keep: Vec<String> = [releases.current(), releases.previous()]
        .iter()
        .filter_map(|l| releases.version_at(l))
        .map(|v| v.to_string())
        .collect();
    let folder = releases.folder();
    let mut removed = Vec::new();
    let entries = std::fs::read_dir(&folder).map_err(|e| io("cannot read", &folder, e))?;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if keep.contains(&name) {
            continue;
        }
        std::fs::remove_dir_all(entry.path()).map_err(|e| io("cannot remove", &entry.path(), e))?;
        removed.push(name);
    }
    Ok(removed)
}

/// After the Warden's unit failed to start three times (systemd's
/// `OnFailure=`, running the previous release's Warden): puts the previous
/// release back as current, records the failed version (never tried
/// again on the Worker's word; root may) and that the chat has yet to
/// hear of it, writes this Warden's policy rendering and takes its binary
/// (`warden_exe`) and the restored Worker's as the baseline. Returns (the
/// failed version, the restored one).
///
/// Only a release whose new Warden never took over is rolled back: the
/// update is still pending. A Warden that started from the new binaries
/// and took their baseline has started, so whatever stops it later — the
/// Worker failing on purpose, the OOM killer, a kill — is not a failed
/// start, and must neither downgrade the release nor mark it failed.
pub fn roll_back_installed(
    layout: &crate::layout::Layout,
    releases: &Releases,
    warden_exe: &Path,
) -> Result<(Version, Version), UpdateError> {
    let state_err = |e: crate::state::StateError| UpdateError::Io(e.to_string());
    let record = match crate::state::read(layout, RECORD).map_err(state_err)? {
        Some(bytes) => Record::parse(&bytes).map_err(UpdateError::Io)?,
        None => Record::default(),
    };
    if record.pending.is_none() {
        return Err(UpdateError::Refused(format!(
            "{} started (its Warden took over), so what stopped it is not a failed start; it stays",
            record
                .current
                .map_or("the current release".to_string(), |v| v.to_string()),
        )));
    }
    let mut baseline = crate::integrity::Baseline::read(layout)
        .map_err(UpdateError::Io)?
        .ok_or_else(|| UpdateError::Refused("the Warden is not installed here".into()))?;
    let hash = |p: &Path| {
        std::fs::read(p)
            .map(|b| aromba_release::sha256_hex(&b))
            .map_err(|e| io("cannot read", p, e))
    };
    let warden = hash(warden_exe)?;
    let (failed, restored) = roll_back(releases)?;
    let worker = hash(&baseline.worker_bin)?;
    let policy = layout.config_dir.join("policy.toml");
    crate::atomic_file::replace(&policy, crate::policy::render().as_bytes(), 0o644)
        .map_err(|e| io("cannot write", &policy, e))?;
    baseline.retake_release(&warden, &worker);
    let mut after = record;
    if !after.failed.contains(&failed) {
        after.failed.push(failed);
    }
    after.current = Some(restored);
    after.previous = None;
    after.pending = None;
    after.installed_at = None;
    after.rolled_back = Some(failed);
    let mut held = Some(baseline);
    crate::state::change(layout, &mut held, RECORD, Some(&after.to_bytes())).map_err(state_err)?;
    Ok((failed, restored))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn releases(name: &str) -> Releases {
        let dir = std::env::temp_dir().join(format!("aromba-update-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Releases { base: dir }
    }

    fn v(t: &str) -> Version {
        Version::parse(t).unwrap()
    }

    #[test]
    fn the_record_round_trips_and_refuses_odd_fields() {
        let r = Record {
            highest: Some(v("1.4.2")),
            current: Some(v("1.4.2")),
            previous: Some(v("1.4.1")),
            failed: vec![v("1.3.0")],
            pending: Some(Pending {
                version: v("1.4.2"),
                warden_sha256: "a".repeat(64),
                worker_sha256: "b".repeat(64),
            }),
            rolled_back: None,
            installed_at: Some(1_764_800_000),
        };
        assert_eq!(Record::parse(&r.to_bytes()), Ok(r));
        assert_eq!(Record::parse(b"{}"), Ok(Record::default()));
        assert!(Record::parse(br#"{"installed_at": "yesterday"}"#).is_err());
        assert!(Record::parse(br#"{"highest": "1.2"}"#).is_err());
        assert!(Record::parse(br#"{"failed": ["x"]}"#).is_err());
        assert!(
            Record::parse(br#"{"pending": {"version": "1.0.0", "warden_sha256": "z"}}"#).is_err()
        );
    }

    #[test]
    fn only_the_binaries_the_update_wrote_take_over_the_baseline() {
        let p = Pending {
            version: v("1.0.0"),
            warden_sha256: "a".repeat(64),
            worker_sha256: "b".repeat(64),
        };
        assert!(takes_over(&p, &"a".repeat(64), &"b".repeat(64)));
        assert!(!takes_over(&p, &"a".repeat(64), &"c".repeat(64)));
        assert!(!takes_over(&p, &"c".repeat(64), &"b".repeat(64)));
    }

    #[test]
    fn a_release_is_staged_whole_and_the_links_swap_keeping_the_previous() {
        let r = releases("swap");
        stage(
            &r,
            &v("1.0.0"),
            &[b"worker 1".to_vec(), b"warden 1".to_vec()],
        )
        .unwrap();
        assert_eq!(swap(&r, &v("1.0.0")).unwrap(), None);
        stage(
            &r,
            &v("1.1.0"),
            &[b"worker 2".to_vec(), b"warden 2".to_vec()],
        )
        .unwrap();
        assert_eq!(swap(&r, &v("1.1.0")).unwrap(), Some(v("1.0.0")));
        assert_eq!(
            std::fs::read(r.current().join("aromba")).unwrap(),
            b"worker 2"
        );
        assert_eq!(
            std::fs::read(r.previous().join("aromba-warden")).unwrap(),
            b"warden 1"
        );
        let mode = std::fs::metadata(r.current().join("aromba-warden"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o755);
        // A third: the first is pruned, two are kept.
        stage(
            &r,
            &v("1.2.0"),
            &[b"worker 3".to_vec(), b"warden 3".to_vec()],
        )
        .unwrap();
        swap(&r, &v("1.2.0")).unwrap();
        assert_eq!(prune(&r).unwrap(), vec!["1.0.0".to_string()]);
        let _ = std::fs::remove_dir_all(&r.base);
    }

    #[test]
    fn a_rollback_puts_the_previous_release_back() {
        let r = releases("rollback");
        for (ver, tag) in [("1.0.0", "one"), ("1.1.0", "two")] {
            stage(
                &r,
                &v(ver),
                &[tag.as_bytes().to_vec(), tag.as_bytes().to_vec()],
            )
            .unwrap();
            swap(&r, &v(ver)).unwrap();
        }
        assert_eq!(roll_back(&r).unwrap(), (v("1.1.0"), v("1.0.0")));
        assert_eq!(std::fs::read(r.current().join("aromba")).unwrap(), b"one");
        // Nothing to roll back to twice.
        assert!(roll_back(&r).is_err());
        let _ = std::fs::remove_dir_all(&r.base);
    }

    #[test]
    fn a_rollback_of_an_installed_release_records_the_failure_and_rebaselines() {
        use crate::layout::Layout;
        let r = releases("rollback-installed");
        let root = r.base.clone();
        let releases = Releases::rooted(&root);
        let layout = Layout::rooted(&root);
        for (ver, tag) in [("1.0.0", "one"), ("1.1.0", "two")] {
            stage(
                &releases,
                &v(ver),
                &[tag.as_bytes().to_vec(), tag.as_bytes().to_vec()],
            )
            .unwrap();
            swap(&releases, &v(ver)).unwrap();
        }
        crate::install::install(&crate::install::InstallOptions {
            layout: &layout,
            warden_bin: &releases.current().join("aromba-warden"),
            worker_bin: &releases.current().join("aromba"),
            worker_gid: 0,
            clock: std::sync::Arc::new(crate::ladder::SystemClock),
            telegram_key: None,
        })
        .unwrap();
        // 1.1.0 was installed a moment ago, and its Warden took over.
        let mut installed = Record {
            current: Some(v("1.1.0")),
            highest: Some(v("1.1.0")),
            installed_at: None,
            ..Record::default()
        };
        let mut held = crate::integrity::Baseline::read(&layout).unwrap();
        crate::state::change(&layout, &mut held, RECORD, Some(&installed.to_bytes())).unwrap();
        let warden = releases.previous().join("aromba-warden");
        let started = roll_back_installed(&layout, &releases, &warden);
        assert!(
            matches!(started, Err(UpdateError::Refused(_))),
            "{started:?}"
        );
        assert_eq!(releases.version_at(&releases.current()), Some(v("1.1.0")));
        // Its Warden never took over: the update is pending.
        installed.pending = Some(Pending {
            version: v("1.1.0"),
            warden_sha256: "a".repeat(64),
            worker_sha256: "b".repeat(64),
        });
        installed.installed_at = Some(1000);
        crate::state::change(&layout, &mut held, RECORD, Some(&installed.to_bytes())).unwrap();
        let (failed, restored) = roll_back_installed(&layout, &releases, &warden).unwrap();
        assert_eq!((failed, restored), (v("1.1.0"), v("1.0.0")));
        let record = Record::parse(&crate::state::read(&layout, RECORD).unwrap().unwrap()).unwrap();
        assert_eq!(record.failed, vec![v("1.1.0")]);
        assert_eq!(record.rolled_back, Some(v("1.1.0")));
        assert_eq!(record.current, Some(v("1.0.0")));
        assert_eq!(record.installed_at, None);
        let baseline = crate::integrity::Baseline::read(&layout).unwrap().unwrap();
        assert_eq!(baseline.worker_sha256, aromba_release::sha256_hex(b"one"));
        assert_eq!(baseline.warden_sha256, aromba_release::sha256_hex(b"one"));
        // Only the binaries differ from what is on disk: the Warden's own
        // binary here is the test's.
        let mismatches = baseline.check(&layout);
        assert_eq!(
            mismatches,
            vec![crate::integrity::Mismatch {
                what: crate::integrity::Watched::WardenBinary,
                how: crate::integrity::How::Changed,
            }]
        );
        assert_eq!(
            crate::integrity::said(&mismatches),
            "the Warden's binary changed"
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_link_or_a_fifo_in_the_workers_folder_is_not_read() {
        let dir = releases("read").base;
        std::fs::write(dir.join("manifest.json"), b"{}").unwrap();
        assert_eq!(read_from(&dir, "manifest.json", 10).unwrap(), b"{}");
        std::os::unix::fs::symlink("/etc/shadow", dir.join("link")).unwrap();
        assert!(read_from(&dir, "link", 1 << 20).is_err());
        let made = assert_cmd::Command::new("mkfifo")
            .arg(dir.join("fifo"))
            .output()
            .unwrap();
        assert!(made.status.success());
        assert!(read_from(&dir, "fifo", 1 << 20).is_err());
        assert!(read_from(&dir, "../etc", 10).is_err());
        assert!(read_from(&dir, "manifest.json", 1).is_err(), "over the cap");
        // The folder itself swapped for a link is not followed either.
        let linked = dir.with_extension("link");
        let _ = std::fs::remove_file(&linked);
        std::os::unix::fs::symlink(&dir, &linked).unwrap();
        assert!(read_from(&linked, "manifest.json", 10).is_err());
        let _ = std::fs::remove_file(&linked);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
