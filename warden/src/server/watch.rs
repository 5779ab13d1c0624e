//! What the Warden watches on its own: the ladder's decay, the Worker's
//! connections, integrity, expiries; and the isolation probe. The
//! honeypots have a thread of their own (`honeypots.rs`).

#![forbid(unsafe_code)]

use super::event::Event;
use super::{Shared, after_move, journal, raise};
use crate::exec;
use crate::signal::Signal;
use std::sync::atomic::Ordering;
use std::thread;
use std::time::Duration;

/// How the isolation status starts when cages can be built.
pub(super) const ISOLATED: &str = "available";

/// Whether the cage can be built here: one real caged `/bin/true`, with the
/// same bubblewrap flags, seccomp filter and bounded cgroup chores get.
pub(super) fn isolation() -> String {
    let probe = exec::pick_binary("bwrap", &["/usr/bin/bwrap", "/bin/bwrap"])
        .map_err(|e| e.to_string())
        .and_then(|bwrap| crate::cage::probe(&bwrap));
    match probe {
        Ok(()) => format!(
            "{ISOLATED}; {}; {}",
            crate::cage::limits::global().describe(),
            crate::cage::refused::describe(&crate::cage::refused_writes_counted())
        ),
        Err(why) => format!("none ({why})"),
    }
}

/// Compares the baseline with what is on disk; a mismatch is a signal.
pub(super) fn check_integrity(shared: &Shared) {
    // Held through the check, so a change of a state record by the Warden
    // (which re-takes the baseline) is never seen half-done.
    let guard = shared.baseline.lock().unwrap_or_else(|p| p.into_inner());
    let Some(baseline) = guard.as_ref() else {
        drop(guard);
        let layout = &shared.options.layout;
        let Some(evidence) = layout.install_evidence() else {
            *shared.integrity.lock().unwrap_or_else(|p| p.into_inner()) =
                "no baseline (not installed)".into();
            return;
        };
        let baseline_file = layout.baseline_file();
        let what = format!(
            "the integrity baseline {} is {}, yet {} shows the Warden was installed",
            baseline_file.display(),
            if std::fs::symlink_metadata(&baseline_file).is_ok() {
                "unreadable"
            } else {
                "missing"
            },
            evidence.display()
        );
        *shared.integrity.lock().unwrap_or_else(|p| p.into_inner()) = format!("MISMATCH: {what}");
        raise(shared, None, Signal::IntegrityMismatch { what });
        return;
    };
    let bad = baseline.check(&shared.options.layout);
    drop(guard);
    let now = shared.options.clock.now();
    let state = if bad.is_empty() {
        format!(
            "ok (checked at {})",
            crate::journal::time::rfc3339(std::time::UNIX_EPOCH + Duration::from_secs(now))
        )
    } else {
        format!("MISMATCH: {}", crate::integrity::said(&bad))
    };
    *shared.integrity.lock().unwrap_or_else(|p| p.into_inner()) = state;
    if !bad.is_empty() {
        raise(
            shared,
            None,
            Signal::IntegrityMismatch {
                what: crate::integrity::said(&bad),
            },
        );
    }
}

/// The watcher: the ladder's decay, the Worker's connections, and the
/// integrity check every `integrity_interval`.
pub(super) fn watch(shared: &Shared) {
    let mut last_integrity = std::time::Instant::now();
    // The journal's first verification, off the start's path.
    super::trust::check_journal(shared);
    let mut untrusted_network: Option<String> = None;
    let mut unfit_layout: Option<String> = None;
    while !shared.shutdown.load(Ordering::SeqCst) {
        thread::sleep(shared.options.watch_interval);
        // Stopped while asleep: nothing more (an uninstall may be removing
        // what a tick would look at).
        if shared.shutdown.load(Ordering::SeqCst) {
            break;
        }
        let decayed = shared
            .ladder
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .decay();
        after_move(shared, decayed);
        let retried = shared
            .ladder
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retry_save();
        if let Some(Ok(())) = retried {
            journal(shared, Event::LadderSaved);
        }
        super::pace::flush_quiet(shared);
        let allowed = match crate::netwatch::Allowed::read(&shared.options.layout.network_file()) {
            Ok(a) => {
                untrusted_network = None;
                a
            }
            Err(why) => {
                // Said once for each way it is wrong, not every few seconds.
                if untrusted_network.as_deref() != Some(why.as_str()) {
                    raise(
                        shared,
                        None,
                        Signal::IntegrityMismatch { what: why.clone() },
                    );
                    untrusted_network = Some(why);
                }
                crate::netwatch::Allowed::default()
            }
        };
        let watched = if shared.options.watch_network {
            crate::netwatch::connections_of(shared.options.worker_uid)
        } else {
            Vec::new()
        };
        for remote in watched {
            if !allowed.permits(remote) {
                raise(
                    shared,
                    None,
                    Signal::UnknownHost {
                        remote: remote.to_string(),
                    },
                );
            }
        }
        if last_integrity.elapsed() >= shared.options.integrity_interval {
            last_integrity = std::time::Instant::now();
            check_integrity(shared);
            super::trust::check_journal(shared);
            super::honeypots::check_honeypots(shared);
            // The chain of directories bind checked: one made writable by
            // another account since is an integrity failure, said once for
            // each way it is wrong.
            match shared.options.layout.check() {
                Ok(()) => unfit_layout = None,
                Err(unfit) => {
                    let what = unfit.to_string();
                    if unfit_layout.as_deref() != Some(what.as_str()) {
                        raise(
                            shared,
                            None,
                            Signal::IntegrityMismatch { what: what.clone() },
                        );
                        unfit_layout = Some(what);
                    }
                }
            }
            // Hourly too: quarantined folders past their 7 days.
            if let Ok(purged) = crate::chores::quarantine::purge(
                &shared.options.layout,
                std::time::SystemTime::now(),
            ) && !purged.is_empty()
            {
                journal(shared, Event::QuarantinePurged { purged: &purged });
            }
            // And snapshots past their 7 days of Undo.
            if let Ok(expired) = crate::chores::snapshot::purge(
                &shared.options.layout.snapshots_dir(),
                shared.options.clock.now(),
            ) && !expired.is_empty()
            {
                journal(shared, Event::SnapshotsPurged { undo_ids: &expired });
            }
        }
    }
}
