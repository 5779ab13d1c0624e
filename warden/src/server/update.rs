//! The update request: install a release downloaded into a folder — the
//! Worker's own download folder from the Worker socket, a folder root
//! names from the control socket (`aromba update`). The Warden reads the
//! download itself, verifies everything again (`crate::update`), writes
//! the release, records what it is about to become, swaps the link and
//! restarts both services. Refused at Freeze and above.

#![forbid(unsafe_code)]

use super::Shared;
use super::event::{Event, InstallEnd, Outcome, Peer, ReleaseRead, TakenOver};
use super::intent::intend;
use crate::system::PeerCred;
use crate::update::{self, Pending, RECORD, Record};
use aromba_release::version::Step;
use aromba_release::{Keys, Target, Version};
use aromba_warden_proto::Response;
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

/// Who asked for an install, which decides what it may install.
pub(super) enum Origin {
    /// The Worker's daily check: a patch release only (a minor or major
    /// one installs on a tap).
    Worker,
    /// A relay-signed tap on the Warden's proposal: exactly the manifest
    /// proposed.
    Approved {
        action_id: String,
        manifest_sha256: String,
    },
    /// `aromba update` from a root terminal: the owner's word.
    RootTerminal,
}

/// The record with the release the link points at counted as installed
/// too (the installer put the first one there before any record existed).
fn judged(shared: &Shared, record: &Record) -> Record {
    let releases = &shared.options.releases;
    let mut judged = record.clone();
    judged.highest = judged.highest.max(releases.version_at(&releases.current()));
    judged
}

/// The release waiting in the Worker's download folder, verified and
/// admissible here: its manifest, the SHA-256 of the manifest's bytes, and
/// the release installed now. What a proposal to install it says.
pub(super) fn offered(
    shared: &Shared,
) -> Result<(aromba_release::Manifest, String, Option<Version>), String> {
    let keys = keys(shared).map_err(|e| e.to_string())?;
    let record = record(shared).map_err(|e| format!("the release record cannot be read: {e}"))?;
    let target = Target::this_machine(&shared.options.channel);
    let now = shared.options.clock.now();
    let judged = judged(shared, &record);
    // Everything the install checks, the programs unpacked and hashed too:
    // the proposal says so.
    let (_, download) = update::read_download(&worker_downloads(shared), &keys, |m| {
        admit(m, &target, now, &judged)
    })
    .map_err(|e| e.to_string())?;
    let (manifest, _) =
        update::prepare(&download, &keys, &target, now, &judged).map_err(|e| e.to_string())?;
    let releases = &shared.options.releases;
    Ok((
        manifest,
        aromba_release::sha256_hex(&download.manifest),
        releases.version_at(&releases.current()),
    ))
}

/// The record a release of `version` is judged against. Root (`aromba
/// update`) may install again a version that failed to start here: it is
/// then judged against the release running now only, not against the
/// failed versions nor the highest (which is the failed one). The Worker
/// never may: a failed release stays failed on its word.
fn retried(judged: &Record, version: Version, root: bool, running: Option<Version>) -> Record {
    if !(root && judged.failed.contains(&version)) {
        return judged.clone();
    }
    Record {
        highest: running,
        failed: Vec::new(),
        ..judged.clone()
    }
}

/// Whether the release `manifest` names may be installed here now.
fn admit(
    manifest: &aromba_release::Manifest,
    target: &Target,
    now: u64,
    judged: &Record,
) -> Result<(), update::UpdateError> {
    manifest
        .admissible(target, now, judged.highest, &judged.failed)
        .map_err(update::UpdateError::from)
}

/// Installs the release in `dir`; `origin` says who asked.
pub(super) fn install_release(shared: &Shared, dir: &Path, origin: Origin) -> Response {
    let intent = match intend(shared, Event::ReleaseInstall { origin: &origin }) {
        Ok(i) => i,
        Err(u) => return u.into(),
    };
    // Its outcome says what it was asked (and, once read, which release).
    let refused = |release: Option<&ReleaseRead<'_>>, why: String| {
        let end = InstallEnd::Refused { reason: &why };
        let seq = intent.outcome(
            shared,
            Outcome::ReleaseInstall {
                origin: &origin,
                release,
                end,
            },
        );
        refuse(why, seq)
    };
    if super::chores::frozen(shared) {
        return refused(
            None,
            "updates are refused while the ladder is at Freeze or above".into(),
        );
    }
    // One change of the Warden's own files at a time.
    let _changing = shared.changing.lock().unwrap_or_else(|p| p.into_inner());
    let keys = match keys(shared) {
        Ok(k) => k,
        Err(e) => return refused(None, e.to_string()),
    };
    let before = match record(shared) {
        Ok(r) => r,
        Err(e) => return refused(None, format!("the release record cannot be read: {e}")),
    };
    let target = Target::this_machine(&shared.options.channel);
    let now = shared.options.clock.now();
    let releases = &shared.options.releases;
    let installed = releases.version_at(&releases.current());
    let judged = judged(shared, &before);
    let root = matches!(origin, Origin::RootTerminal);
    let prepared = update::read_download(dir, &keys, |m| {
        admit(
            m,
            &target,
            now,
            &retried(&judged, m.version, root, installed),
        )
    })
    .and_then(|(m, download)| {
        let sha = aromba_release::sha256_hex(&download.manifest);
        let judged = retried(&judged, m.version, root, installed);
        update::prepare(&download, &keys, &target, now, &judged).map(|p| (p, sha))
    });
    let ((manifest, binaries), manifest_sha256) = match prepared {
        Ok(p) => p,
        Err(e) => return refused(None, e.to_string()),
    };
    let version = manifest.version;
    let read = ReleaseRead {
        version,
        // The commit the release key's signature names (in its trusted
        // comment, which it signs), or null for a release signed without one.
        commit: manifest.commit.as_deref(),
        manifest_sha256: &manifest_sha256,
    };
    let read = Some(&read);
    match &origin {
        Origin::Worker => {
            let step = installed.and_then(|i| version.step_from(&i));
            if step != Some(Step::Patch) {
                return refused(
                    read,
                    format!(
                        "{version} is not a patch release of the one installed ({}): it installs on a tap in the chat",
                        installed.map_or("none recorded".into(), |i| i.to_string())
                    ),
                );
            }
        }
        Origin::Approved {
            manifest_sha256: approved,
            ..
        } if *approved != manifest_sha256 => {
            return refused(
                read,
                "the download is not the release that was approved; propose it again".into(),
            );
        }
        Origin::Approved { .. } | Origin::RootTerminal => {}
    }
    if let Err(e) = update::stage(releases, &version, &binaries) {
        return refused(read, e.to_string());
    }
    let previous = installed;
    let mut after = before.clone();
    // Installed again on root's word: no longer a failed release.
    after.failed.retain(|f| *f != version);
    after.pending = Some(Pending {
        version,
        worker_sha256: aromba_release::sha256_hex(&binaries[0]),
        warden_sha256: aromba_release::sha256_hex(&binaries[1]),
    });
    after.highest = after.highest.max(Some(version));
    after.current = Some(version);
    after.previous = previous;
    after.installed_at = Some(now);
    // Recorded before the link moves: a Warden started from the new
    // binaries finds what it may take as its baseline, and nothing else.
    let written = shared.change_state(RECORD, Some(&after.to_bytes()));
    if let Err(e) = written {
        return refused(read, format!("the release record cannot be written: {e}"));
    }
    if let Err(e) = update::swap(releases, &version) {
        let _ = shared.change_state(RECORD, Some(&before.to_bytes()));
        return refused(read, e.to_string());
    }
    let prune_error = update::prune(releases).err().map(|e| e.to_string());
    let restarts = shared.options.host.is_some();
    let end = InstallEnd::Installed {
        prune_error: prune_error.as_deref(),
        previous,
        worker_sha256: &aromba_release::sha256_hex(&binaries[0]),
        warden_sha256: &aromba_release::sha256_hex(&binaries[1]),
        restart: if restarts {
            "asked next"
        } else {
            "not under --root"
        },
    };
    // The outcome is written before systemd is asked: the restart stops
    // this Warden, at once and maybe before a line after the asking, and
    // the next start would then close the install as interrupted though
    // it is in place.
    intent.outcome(
        shared,
        Outcome::ReleaseInstall {
            origin: &origin,
            release: read,
            end,
        },
    );
    if restarts && let Err(error) = update::restart_services(&shared.options.systemctl) {
        super::journal(
            shared,
            Event::ReleaseRestartFailed {
                version: &version.to_string(),
                error: &error,
            },
        );
    }
    Response::ReleaseInstalled {
        version: version.to_string(),
        previous: previous.map(|v| v.to_string()),
    }
}

/// `Request::Releases`: what is installed, and a rollback the chat has not
/// been told of.
pub(super) fn releases(shared: &Shared) -> Response {
    let record = match record(shared) {
        Ok(r) => r,
        Err(e) => {
            return Response::Error {
                message: format!("the release record cannot be read: {e}"),
            };
        }
    };
    let releases = &shared.options.releases;
    let show = |v: Option<Version>| v.map(|v| v.to_string());
    Response::Releases {
        current: show(releases.version_at(&releases.current()).or(record.current)),
        previous: show(releases.version_at(&releases.previous())),
        failed: record.failed.iter().map(Version::to_string).collect(),
        rolled_back: show(record.rolled_back),
    }
}

/// The Worker told the chat of the rollback from `version`: it is not
/// told again.
pub(super) fn rollback_told(shared: &Shared, peer: &PeerCred, version: &str) -> Response {
    let _changing = shared.changing.lock().unwrap_or_else(|p| p.into_inner());
    // Journaled as a value (escaped), cut: it comes from the Worker.
    let shown: String = version.chars().take(64).collect();
    let told = |refused: Option<&str>| {
        let line = Event::RollbackTold {
            peer: Peer::worker(peer),
            version: &shown,
            refused,
        };
        super::journal(shared, line)
    };
    let refused = |why: String| {
        let seq = told(Some(&why));
        refuse(why, seq)
    };
    let mut record = match record(shared) {
        Ok(r) => r,
        Err(e) => return refused(format!("the release record cannot be read: {e}")),
    };
    if record.rolled_back.map(|v| v.to_string()).as_deref() != Some(version) {
        return refused("no rollback from that version is waiting to be told".into());
    }
    record.rolled_back = None;
    if let Err(e) = shared.change_state(RECORD, Some(&record.to_bytes())) {
        return refused(format!("the release record cannot be written: {e}"));
    }
    match told(None) {
        Some(journal_seq) => Response::Noted { journal_seq },
        None => super::unjournaled(),
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
        let error = e.to_string();
        let taken = TakenOver::PolicyUnwritten { error: &error };
        let line = Event::ReleaseStarted {
            version: pending.version,
            taken,
        };
        super::journal(shared, line);
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
    // Started: no longer anything a rollback may undo (a release up to
    // 0.1.0, run as `previous`, reads a recent install time as a trial).
    done.installed_at = None;
    let written = shared.change_state(RECORD, Some(&done.to_bytes()));
    if written.is_err() {
        *shared.baseline.lock().unwrap_or_else(|p| p.into_inner()) = old;
    }
    let taken = TakenOver::Baseline {
        written: written.is_ok(),
    };
    let line = Event::ReleaseStarted {
        version: pending.version,
        taken,
    };
    super::journal(shared, line);
}
