//! The update request: install a release downloaded into a folder — the
//! Worker's own download folder from the Worker socket, a folder root
//! names from the control socket (`aromba update`). The Warden reads the
//! download itself, verifies everything again (`crate::update`), writes
//! the release, records what it is about to become, swaps the link and
//! restarts both services. Refused at Freeze and above.

#![forbid(unsafe_code)]

use super::Shared;
use super::intent::intend;
use crate::update::{self, Pending, RECORD, Record};
use aromba_release::{Binary, Keys, Target};
use aromba_warden_proto::Response;
use serde_json::{Map, Value};
use std::path::Path;

/// The Worker's download folder, in its home.
pub(super) fn worker_downloads(shared: &Shared) -> std::path::PathBuf {
    shared.options.layout.worker_home.join("updates")
}

fn keys(shared: &Shared) -> Result<Keys, aromba_release::ReleaseError> {
    match &shared.options.release_keys {
        None => Keys::compiled(),
        Some(list) => {
            let refs: Vec<&str> = list.iter().map(String::as_str).collect();
            Keys::from_base64(&refs)
        }
    }
}

/// The `releases.json` record; a record the Warden cannot read refuses
/// every update (it would lose the failed versions).
pub(super) fn record(shared: &Shared) -> Result<Record, String> {
    match crate::state::read(&shared.options.layout, RECORD) {
        Ok(None) => Ok(Record::default()),
        Ok(Some(bytes)) => Record::parse(&bytes),
        Err(e) => Err(e.to_string()),
    }
}

fn refuse(reason: impl Into<String>, journal_seq: Option<u64>) -> Response {
    Response::Refused {
        reason: reason.into(),
        journal_seq,
    }
}

/// Installs the release in `dir`; `origin` says who asked.
pub(super) fn install_release(shared: &Shared, dir: &Path, origin: &str) -> Response {
    let mut m = Map::new();
    m.insert("origin".into(), Value::from(origin));
    let intent = match intend(shared, "release-install", m.clone()) {
        Ok(i) => i,
        Err(u) => return u.into(),
    };
    let refused = |m: &mut Map<String, Value>, why: String| {
        m.insert("verdict".into(), Value::from("refused"));
        m.insert("reason".into(), Value::from(why.as_str()));
        let seq = intent.outcome(shared, m.clone());
        refuse(why, seq)
    };
    if super::chores::frozen(shared) {
        return refused(
            &mut m,
            "updates are refused while the ladder is at Freeze or above".into(),
        );
    }
    // One change of the Warden's own files at a time.
    let _changing = shared.changing.lock().unwrap_or_else(|p| p.into_inner());
    let keys = match keys(shared) {
        Ok(k) => k,
        Err(e) => return refused(&mut m, e.to_string()),
    };
    let before = match record(shared) {
        Ok(r) => r,
        Err(e) => return refused(&mut m, format!("the release record cannot be read: {e}")),
    };
    let target = Target::this_machine(&shared.options.channel);
    let now = shared.options.clock.now();
    let releases = &shared.options.releases;
    // The release the link points at counts as installed too (the
    // installer put the first one there before any record existed).
    let mut judged = before.clone();
    judged.highest = judged.highest.max(releases.version_at(&releases.current()));
    let prepared = update::read_download(dir, &keys)
        .and_then(|(_, download)| update::prepare(&download, &keys, &target, now, &judged));
    let (manifest, binaries) = match prepared {
        Ok(p) => p,
        Err(e) => return refused(&mut m, e.to_string()),
    };
    let version = manifest.version;
    m.insert("version".into(), Value::from(version.to_string()));
    if let Err(e) = update::stage(releases, &version, &binaries) {
        return refused(&mut m, e.to_string());
    }
    let previous = releases.version_at(&releases.current());
    let mut after = before.clone();
    after.pending = Some(Pending {
        version,
        worker_sha256: aromba_release::sha256_hex(&binaries[0]),
        warden_sha256: aromba_release::sha256_hex(&binaries[1]),
    });
    after.highest = Some(version);
    after.current = Some(version);
    after.previous = previous;
    // Recorded before the link moves: a Warden started from the new
    // binaries finds what it may take as its baseline, and nothing else.
    let written = shared.change_state(RECORD, Some(&after.to_bytes()));
    if let Err(e) = written {
        return refused(&mut m, format!("the release record cannot be written: {e}"));
    }
    if let Err(e) = update::swap(releases, &version) {
        let _ = shared.change_state(RECORD, Some(&before.to_bytes()));
        return refused(&mut m, e.to_string());
    }
    if let Err(e) = update::prune(releases) {
        m.insert("prune_error".into(), Value::from(e.to_string()));
    }
    m.insert("verdict".into(), Value::from("installed"));
    m.insert(
        "previous".into(),
        previous.map_or(Value::Null, |v| Value::from(v.to_string())),
    );
    for binary in Binary::ALL {
        m.insert(
            format!("{}_sha256", binary.file_name()),
            Value::from(aromba_release::sha256_hex(
                &binaries[if binary == Binary::Worker { 0 } else { 1 }],
            )),
        );
    }
    let restart = update::restart_services(&shared.options.systemctl);
    m.insert(
        "restart".into(),
        Value::from(restart.err().unwrap_or_else(|| "asked".into())),
    );
    intent.outcome(shared, m);
    Response::ReleaseInstalled {
        version: version.to_string(),
        previous: previous.map(|v| v.to_string()),
    }
}

/// At start: when the record holds an update pending a restart, and this
/// Warden runs from exactly the binary that update wrote (and the Worker's
/// binary is the one it wrote too), the new binaries and this Warden's
/// policy become the baseline — and nothing else changes. Any other
/// difference stays a mismatch for the integrity check.
pub(super) fn finish_pending(shared: &Shared) {
    let Ok(record) = record(shared) else {
        return;
    };
    let Some(pending) = record.pending.clone() else {
        return;
    };
    let layout = &shared.options.layout;
    let file = |p: &Path| std::fs::read(p).map(|b| aromba_release::sha256_hex(&b));
    let worker_bin = shared
        .baseline
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
        .map(|b| b.worker_bin.clone());
    let (Ok(warden), Some(Ok(worker))) = (
        file(Path::new("/proc/self/exe")),
        worker_bin.as_deref().map(file),
    ) else {
        return;
    };
    if !update::takes_over(&pending, &warden, &worker) {
        return;
    }
    let rendered = crate::policy::render();
    if let Err(e) = crate::atomic_file::replace(
        &layout.config_dir.join("policy.toml"),
        rendered.as_bytes(),
        0o644,
    ) {
        let mut m = Map::new();
        m.insert("version".into(), Value::from(pending.version.to_string()));
        m.insert("error".into(), Value::from(e.to_string()));
        super::journal(shared, "release-started", m);
        return;
    }
    // The new hashes go to disk with the record's change (which writes the
    // whole baseline); should that fail, memory goes back to what disk has.
    let old = {
        let mut guard = shared.baseline.lock().unwrap_or_else(|p| p.into_inner());
        let old = guard.clone();
        if let Some(baseline) = guard.as_mut() {
            baseline.retake_release(&warden, &worker);
        }
        old
    };
    let mut done = record.clone();
    done.pending = None;
    let written = shared.change_state(RECORD, Some(&done.to_bytes()));
    if written.is_err() {
        *shared.baseline.lock().unwrap_or_else(|p| p.into_inner()) = old;
    }
    let mut m = Map::new();
    m.insert("version".into(), Value::from(pending.version.to_string()));
    m.insert(
        "baseline".into(),
        Value::from(if written.is_ok() {
            "re-taken"
        } else {
            "not written"
        }),
    );
    super::journal(shared, "release-started", m);
}
