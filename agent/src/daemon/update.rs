//! Updates, as the Worker sees them: once a day it looks at the release
//! folder `network.toml` names (through the network gate, like every
//! connection it makes), and when a release above the running one is
//! there it downloads it into its own folder (`updates/` in its home) and
//! asks the Warden — which verifies everything again and is the only one
//! that writes a binary:
//!
//! - a patch release is installed in the quiet window (03:00 to 05:00,
//!   the server's local time), without asking;
//! - a minor or major one is proposed in the chat, in the Warden's words,
//!   and installed on a tap on Approve (the tap goes to the Warden signed,
//!   as every approval does).
//!
//! After a rollback (a release that failed to start three times) the chat
//! is told once: the Warden keeps that it has not been told yet, and the
//! Worker says so when it is. After a start on a new version, the chat is
//! told that too.
//!
//! Once a day, after the release check, the installed skills' updates are
//! looked for in the same folder (`skill_updates.rs`).

use super::Daemon;
use crate::config::BaseUrl;
use crate::download::{self, DEADLINE, DownloadError};
use crate::net::Gate;
use crate::warden_client;
use aromba_release::version::Step;
use aromba_release::{Keys, Version};
use aromba_warden_proto::{Request, Response};
use aromba_words::updates as words;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Where releases come from, and how to reach them.
pub struct UpdateSource {
    pub gate: Gate,
    pub url: BaseUrl,
    pub roots: Option<Arc<rustls::RootCertStore>>,
}

/// How often the task looks at the clock.
const TICK: Duration = Duration::from_secs(5 * 60);
/// A first look this long after the start (the relay link comes first),
/// or `AROMBA_FIRST_UPDATE_LOOK_S` seconds (the tests', whose relay is
/// up at once).
const FIRST_LOOK: Duration = Duration::from_secs(20);
/// The release folder is looked at once a day.
const CHECK_EVERY_S: i64 = 86_400;
/// After a check that failed, the next one waits this long.
const RETRY_AFTER_S: i64 = 3600;
/// The quiet window, in the server's local time: from this hour...
const QUIET_FROM: i8 = 3;
/// ...to this one.
const QUIET_UNTIL: i8 = 5;

/// What the Worker keeps of its checks, in its home.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Checked {
    /// When the release folder was last looked at (Unix seconds).
    at: i64,
    /// When the last look failed, for the retry.
    failed_at: Option<i64>,
    /// A downloaded release waiting: its version.
    waiting: Option<String>,
    /// The release last proposed in the chat (proposed once).
    proposed: Option<String>,
    /// The version this Worker last ran as, to say when it changed.
    running: Option<String>,
    /// When a current (signed, unexpired) manifest was last seen.
    #[serde(default)]
    fresh_at: Option<i64>,
    /// When this Worker first looked (the count starts there when no
    /// current manifest was ever seen).
    #[serde(default)]
    since: Option<i64>,
    /// When the chat was last told that none was seen.
    #[serde(default)]
    stale_told: Option<i64>,
    /// When the catalogue was last looked at for the installed skills'
    /// updates (Unix seconds).
    #[serde(default)]
    skills_at: i64,
    /// The skill updates proposed in the chat, each once: name → version.
    #[serde(default)]
    skills_proposed: BTreeMap<String, String>,
}

const CHECKED: &str = "update-check.json";

/// No current manifest seen for this long: the chat is told (a mirror
/// stale or holding updates back looks exactly like "nothing new").
const STALE_AFTER_S: i64 = 3 * 86_400;
/// While it lasts, the chat is told again this often.
const STALE_RETELL_S: i64 = 7 * 86_400;

/// Days without a current manifest at `now`, when that is past
/// [`STALE_AFTER_S`].
fn stale_days(checked: &Checked, now: i64) -> Option<i64> {
    let since = checked.fresh_at.or(checked.since)?;
    let gone = now - since;
    (gone >= STALE_AFTER_S).then_some(gone / 86_400)
}

/// What `/trust` says of updates.
pub fn trust_line(daemon: &Daemon) -> String {
    if daemon.updates.is_none() {
        return words::TRUST_NO_RELEASE_FOLDER.into();
    }
    let checked: Checked = super::kept::load(daemon, CHECKED);
    let now = jiff::Timestamp::now().as_second();
    match (stale_days(&checked, now), checked.fresh_at) {
        (Some(days), _) => words::trust_stale(days),
        (None, Some(at)) => words::trust_seen_hours_ago((now - at).max(0) / 3600),
        (None, None) => words::TRUST_NOT_CHECKED.into(),
    }
}

/// Whether `hour` (local) is in the quiet window.
pub fn quiet(hour: i8) -> bool {
    (QUIET_FROM..QUIET_UNTIL).contains(&hour)
}

fn this_version() -> Option<Version> {
    Version::parse(env!("CARGO_PKG_VERSION")).ok()
}

/// The keys the Worker checks a manifest with before it downloads more:
/// those compiled in, or (the tests') `AROMBA_RELEASE_KEYS`. Only a first
/// look: the Warden checks again with its own compiled-in keys.
pub fn keys() -> Result<Keys, aromba_release::ReleaseError> {
    match std::env::var("AROMBA_RELEASE_KEYS") {
        Ok(list) if !list.trim().is_empty() => {
            let keys: Vec<&str> = list.split(',').collect();
            Keys::from_base64(&keys)
        }
        _ => Keys::compiled(),
    }
}

fn save(daemon: &Daemon, checked: &Checked) {
    if let Err(e) = super::kept::save(daemon, CHECKED, checked) {
        tracing::warn!(error = %e, "what the update check did was not kept");
    }
}

pub async fn keep(daemon: Arc<Daemon>) {
    let mut checked: Checked = super::kept::load(&daemon, CHECKED);
    tell_new_version(&daemon, &mut checked).await;
    tell_rollback(&daemon).await;
    tokio::time::sleep(first_look()).await;
    loop {
        if let Some(source) = &daemon.updates {
            look(&daemon, source, &mut checked).await;
        }
        tokio::time::sleep(TICK).await;
        tell_rollback(&daemon).await;
    }
}

fn first_look() -> Duration {
    std::env::var("AROMBA_FIRST_UPDATE_LOOK_S")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .map_or(FIRST_LOOK, |s| {
            Duration::from_secs(s.min(FIRST_LOOK.as_secs()))
        })
}

/// After a start on another version than the last one: say so.
async fn tell_new_version(daemon: &Daemon, checked: &mut Checked) {
    let now = env!("CARGO_PKG_VERSION").to_string();
    match checked.running.replace(now.clone()) {
        Some(before) if before != now => {
            daemon.say(words::now_running(&now, &before), vec![]).await;
            checked.waiting = None;
            checked.proposed = None;
        }
        _ => {}
    }
    save(daemon, checked);
}

/// A rollback the chat has not heard of: told, then marked told at the
/// Warden, which keeps it.
async fn tell_rollback(daemon: &Daemon) {
    let socket = daemon.worker_socket();
    let Ok(Response::Releases {
        current,
        rolled_back: Some(failed),
        ..
    }) = warden_client::ask(&socket, &Request::Releases).await
    else {
        return;
    };
    let back = current.unwrap_or_else(|| words::THE_PREVIOUS_RELEASE.into());
    daemon.say(words::rolled_back(&failed, &back), vec![]).await;
    let told = Request::RollbackTold { version: failed };
    if let Err(e) = daemon.warden().noted(&told).await {
        tracing::warn!(error = %e, "the rollback was told but not marked told");
    }
}

async fn look(daemon: &Daemon, source: &UpdateSource, checked: &mut Checked) {
    let now = jiff::ZonedDateTime::now();
    let seconds = now.timestamp().as_second();
    let due = seconds - checked.at >= CHECK_EVERY_S
        && checked
            .failed_at
            .is_none_or(|t| seconds - t >= RETRY_AFTER_S);
    if due {
        checked.since.get_or_insert(seconds);
        match check(daemon, source).await {
            Ok(found) => {
                checked.at = seconds;
                checked.failed_at = None;
                checked.fresh_at = Some(seconds);
                checked.stale_told = None;
                checked.waiting = found.map(|v| v.to_string());
            }
            Err(e) => {
                tracing::warn!(error = %e, "the update check failed");
                checked.failed_at = Some(seconds);
            }
        }
        save(daemon, checked);
        // The skills' after the release's, whatever became of it, once a
        // day (not at each retry of a failed release check); their own
        // failures are logged and tried again the next day.
        if seconds - checked.skills_at >= CHECK_EVERY_S {
            checked.skills_at = seconds;
            super::skill_updates::check(daemon, source, &mut checked.skills_proposed).await;
            save(daemon, checked);
        }
    }
    if let Some(days) = stale_days(checked, seconds)
        && checked
            .stale_told
            .is_none_or(|t| seconds - t >= STALE_RETELL_S)
    {
        daemon.say(words::held_back(days), vec![]).await;
        checked.stale_told = Some(seconds);
        save(daemon, checked);
    }
    let Some(waiting) = checked
        .waiting
        .as_deref()
        .and_then(|v| Version::parse(v).ok())
    else {
        return;
    };
    let Some(running) = this_version() else {
        return;
    };
    match waiting.step_from(&running) {
        None => {
            checked.waiting = None;
            save(daemon, checked);
        }
        Some(Step::Patch) => {
            if quiet(now.hour()) {
                install_patch(daemon, &waiting).await;
                // Asked once: a refusal waits for the next check.
                checked.waiting = None;
                save(daemon, checked);
            }
        }
        Some(Step::Minor | Step::Major) => {
            if checked.proposed.as_deref() != Some(&waiting.to_string()) {
                super::schedule::propose(
                    daemon,
                    &Request::ProposeRelease,
                    aromba_words::chores::THE_UPDATE,
                )
                .await;
                checked.proposed = Some(waiting.to_string());
                save(daemon, checked);
            }
        }
    }
}

/// Looks at the release folder; downloads a release above this one into
/// the Worker's folder. Returns its version, or `None` when there is
/// nothing newer.
async fn check(daemon: &Daemon, source: &UpdateSource) -> Result<Option<Version>, DownloadError> {
    let keys = keys()?;
    let Some(running) = this_version() else {
        return Ok(None);
    };
    tokio::time::timeout(DEADLINE, async {
        let offer = download::offer(&source.gate, &source.url, source.roots.clone(), &keys).await?;
        // An expired manifest is a failed check, not "nothing new": the
        // days without a current one are counted and told.
        let now = jiff::Timestamp::now().as_second().max(0) as u64;
        offer.manifest.fresh(now)?;
        let version = offer.manifest.version;
        if version <= running {
            return Ok(None);
        }
        // A release that failed here is never downloaded again.
        if let Ok(Response::Releases { failed, .. }) =
            warden_client::ask(&daemon.worker_socket(), &Request::Releases).await
            && failed
                .iter()
                .filter_map(|f| Version::parse(f).ok())
                .any(|f| f >= version)
        {
            return Ok(None);
        }
        let dir = daemon.paths.home.join("updates");
        make_folder(&dir)?;
        download::fetch_into(
            &source.gate,
            &source.url,
            source.roots.clone(),
            &offer,
            &dir,
        )
        .await?;
        tracing::info!(%version, "a release was downloaded");
        Ok(Some(version))
    })
    .await
    .map_err(|_| DownloadError::Timeout)?
}

fn make_folder(dir: &std::path::Path) -> Result<(), DownloadError> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(DownloadError::Io(dir.display().to_string(), e)),
    }
}

async fn install_patch(daemon: &Daemon, version: &Version) {
    let answer = warden_client::ask(
        &daemon.worker_socket(),
        &Request::InstallRelease { dir: None },
    )
    .await;
    match answer {
        Ok(Response::ReleaseInstalled { version, previous }) => {
            tracing::info!(%version, ?previous, "the Warden installed a patch release");
        }
        Ok(Response::Refused { reason, .. }) => {
            daemon
                .say(
                    words::patch_not_installed(&version.to_string(), &reason),
                    vec![],
                )
                .await;
        }
        other => tracing::warn!(answer = ?other, %version, "the patch release was not installed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quiet_window_is_three_to_five_in_the_morning() {
        assert!(!quiet(2));
        assert!(quiet(3));
        assert!(quiet(4));
        assert!(!quiet(5));
        assert!(!quiet(15));
    }

    #[test]
    fn a_record_kept_before_skill_updates_still_loads() {
        let old = r#"{"at": 5, "failed_at": null, "waiting": null, "proposed": "1.1.0",
            "running": "0.1.0", "fresh_at": 5, "since": 1, "stale_told": null}"#;
        let c: Checked = serde_json::from_str(old).expect("an old record");
        assert_eq!(c.proposed.as_deref(), Some("1.1.0"));
        assert_eq!(c.skills_at, 0);
        assert!(c.skills_proposed.is_empty());
    }

    #[test]
    fn days_without_a_current_release_list_count_from_the_last_one_seen() {
        let day = 86_400;
        let mut c = Checked::default();
        assert_eq!(stale_days(&c, 100 * day), None, "never looked");
        c.since = Some(10 * day);
        assert_eq!(stale_days(&c, 12 * day), None);
        assert_eq!(stale_days(&c, 13 * day), Some(3), "never one seen");
        c.fresh_at = Some(12 * day);
        assert_eq!(stale_days(&c, 14 * day), None);
        assert_eq!(stale_days(&c, 17 * day + 5), Some(5));
    }
}
