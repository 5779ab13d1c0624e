//! `aromba uninstall`, from a root terminal only (the control socket; no
//! request of the Worker's reaches here, so nothing in the chat can start
//! it): the Worker's service stopped, the three units removed, the
//! releases, the `aromba` command's link, the Worker's configuration and
//! home, the Warden's configuration, state and quarantine, and the
//! `aromba` user; the journal is kept unless `purge`. The outcome is
//! journaled before the journal goes (with `purge`); the Warden then stops
//! serving, a moment after it answered.
//!
//! A Warden under `--root` (tests, the demo) has no [`HostParts`]: it
//! removes only its own tree and says what it left.
//!
//! After an install from the Debian package it removes nothing: dpkg owns
//! the units, the command and the user's sysusers file, which would come
//! back or break dpkg's next step (`aromba_warden_proto::package`); the
//! answer tells root to run `apt purge aromba`, whose maintainer scripts
//! remove what the package's postinst and the Warden made.

#![forbid(unsafe_code)]

use super::Shared;
use super::event::{Event, Outcome};
use super::intent::intend;
use crate::update::Releases;
use aromba_warden_proto::Response;
use std::path::{Path, PathBuf};

/// What Aromba put on the system beyond the Warden's tree.
#[derive(Clone, Debug)]
pub struct HostParts {
    /// Where the systemd units are (`/etc/systemd/system`).
    pub units_dir: PathBuf,
    /// The `aromba` command in `PATH` (`/usr/local/bin/aromba`), removed
    /// when it is a link into the releases.
    pub cli_link: PathBuf,
    /// `userdel`, and the Worker's account it removes.
    pub userdel: PathBuf,
    pub worker_user: String,
}

impl HostParts {
    pub fn system() -> HostParts {
        HostParts {
            units_dir: PathBuf::from("/etc/systemd/system"),
            cli_link: PathBuf::from("/usr/local/bin/aromba"),
            userdel: PathBuf::from("/usr/sbin/userdel"),
            worker_user: "aromba".into(),
        }
    }
}

/// The units `install.sh` and the package write.
pub const UNITS: [&str; 3] = [
    "aromba.service",
    "aromba-warden.service",
    "aromba-rollback.service",
];

/// What was removed and kept, a line each.
#[derive(Default)]
struct Report {
    removed: Vec<String>,
    kept: Vec<String>,
    errors: Vec<String>,
}

impl Report {
    /// Removes `path` (a folder whole, a file, a link itself), when there.
    /// A folder a last write of the Warden's own threads refilled (they
    /// stop at the next turn of their loop) is tried again.
    fn remove(&mut self, path: &Path) {
        let mut removed = Ok(());
        for _ in 0..10 {
            removed = match std::fs::symlink_metadata(path) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
                Err(e) => Err(e),
                Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(path),
                Ok(_) => std::fs::remove_file(path),
            };
            match &removed {
                Err(e) if e.kind() == std::io::ErrorKind::DirectoryNotEmpty => {
                    std::thread::sleep(std::time::Duration::from_millis(300));
                }
                _ => break,
            }
        }
        match removed {
            Ok(()) => self.removed.push(path.display().to_string()),
            Err(e) => self.errors.push(format!("{}: {e}", path.display())),
        }
    }

    /// Removes `dir` when nothing is left in it.
    fn remove_if_empty(&mut self, dir: &Path) {
        if std::fs::remove_dir(dir).is_ok() {
            self.removed.push(dir.display().to_string());
        }
    }

    fn run(&mut self, program: &Path, args: &[&str]) {
        use crate::exec::{Bounds, run_program};
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let bounds = Bounds {
            timeout: std::time::Duration::from_secs(60),
            max_output_bytes: 64 * 1024,
            low_priority: false,
            keep_fd: None,
            stop: None,
            tripwire: None,
            cgroup: Default::default(),
            known_secrets: Vec::new(),
        };
        let what = format!("{} {}", program.display(), args.join(" "));
        match run_program(program, &args, &[], &bounds) {
            Ok(o) if o.exit_code == Some(0) => {}
            Ok(o) => self.errors.push(format!(
                "{what} failed ({:?}): {}",
                o.exit_code,
                o.stderr.lossy().trim()
            )),
            Err(e) => self.errors.push(format!("{what} could not run: {e}")),
        }
    }
}

/// Why the uninstall is dpkg's, when it is: dpkg's list of the package's
/// files, under the root the releases are under (`/`, or a Warden's
/// `--root`, where the package's scripts install it for `dpkg --root`),
/// names our units. A list that cannot be read refuses too: removing
/// files dpkg may own is what this guards against.
fn packaged(releases: &Releases) -> Option<String> {
    use aromba_warden_proto::package::{USE_APT_PURGE, dpkg_list, installed_by_dpkg};
    // `/opt/aromba` or `ROOT/opt/aromba`.
    let root = releases
        .base
        .parent()
        .and_then(Path::parent)
        .unwrap_or(Path::new("/"));
    match installed_by_dpkg(root) {
        Ok(false) => None,
        Ok(true) => Some(USE_APT_PURGE.into()),
        Err(e) => Some(format!(
            "nothing was removed: dpkg's list {} cannot be read ({e}), so the Warden cannot tell whether the Debian package owns Aromba's services",
            dpkg_list(root).display()
        )),
    }
}

pub(super) fn uninstall(shared: &Shared, purge: bool) -> Response {
    let intent = match intend(shared, Event::Uninstall { purge }) {
        Ok(i) => i,
        Err(e) => return e.into(),
    };
    if let Some(why) = packaged(&shared.options.releases) {
        let journal_seq = intent.outcome(shared, Outcome::Refused { reason: &why });
        return Response::Refused {
            reason: why,
            journal_seq,
        };
    }
    // Nothing else changes the Warden's files meanwhile, and nothing after:
    // no new request is read, the watching threads end.
    let _changing = shared.changing.lock().unwrap_or_else(|p| p.into_inner());
    shared.stop_serving();
    let options = &shared.options;
    let layout = &options.layout;
    let mut report = Report::default();
    if let Some(host) = &options.host {
        // The Worker first: it must not see its files go.
        report.run(&options.systemctl, &["disable", "--now", "aromba.service"]);
        report.run(&options.systemctl, &["disable", "aromba-warden.service"]);
        for unit in UNITS {
            report.remove(&host.units_dir.join(unit));
        }
        report.run(&options.systemctl, &["daemon-reload"]);
        let into_releases = std::fs::read_link(&host.cli_link)
            .is_ok_and(|target| target.starts_with(&options.releases.base));
        if into_releases {
            report.remove(&host.cli_link);
        }
    } else {
        report
            .kept
            .push("the services and the aromba user (a Warden under --root touches nothing outside its tree)".into());
    }
    report.remove(&options.releases.base);
    report.remove(&layout.worker_config_dir);
    report.remove(&layout.worker_home);
    report.remove(&layout.config_dir);
    report.remove(&layout.quarantine_dir);
    report.remove(&layout.state_dir);
    if let Some(host) = &options.host {
        report.run(&host.userdel, &[host.worker_user.as_str()]);
    }
    let uninstalled = Outcome::Uninstalled {
        removed: &report.removed,
        errors: &report.errors,
    };
    intent.outcome(shared, uninstalled);
    if purge {
        let journal = shared.journal.lock().unwrap_or_else(|p| p.into_inner());
        report.remove(&layout.journal_dir);
        drop(journal);
    } else {
        report.kept.push(format!(
            "{} (the journal: remove it yourself, or run `aromba uninstall --purge`)",
            layout.journal_dir.display()
        ));
    }
    for dir in [
        layout.worker_config_dir.parent(),
        layout.config_dir.parent(),
        layout.state_dir.parent(),
    ]
    .into_iter()
    .flatten()
    {
        report.remove_if_empty(dir);
    }
    report
        .kept
        .extend(report.errors.iter().map(|e| format!("not removed: {e}")));
    // A moment to answer, then the Warden stops serving: what it served
    // from is gone.
    shared.stop_soon(std::time::Duration::from_secs(1));
    Response::Uninstalled {
        removed: report.removed,
        kept: report.kept,
    }
}
