//! `aromba update` and `aromba uninstall`, from a root terminal. Neither
//! changes a file of Aromba's itself: `update` downloads a release into a
//! fresh folder of root's and asks the Warden, which verifies it again and
//! installs it (as it does for the Worker's daily check, but without the
//! chat's tap: root's word is the owner's); `uninstall` asks the Warden,
//! which is the only thing that executes, to stop and remove everything
//! (but after an install from the Debian package, which `apt purge` is for).
//! Both go through the control socket, which only root reaches.

use crate::config::{BaseUrl, NetworkConfig, my_uid};
use crate::download;
use crate::paths::Paths;
use aromba_relay_proto::client::Direct;
use aromba_warden_proto::{Request, Response};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

fn fail(why: impl std::fmt::Display) -> ExitCode {
    eprintln!("aromba: {why}");
    ExitCode::from(1)
}

fn root_only(verb: &str) -> Result<(), ExitCode> {
    if my_uid().ok() == Some(0) {
        Ok(())
    } else {
        Err(fail(format!("`aromba {verb}` needs a root terminal")))
    }
}

/// What `aromba update` was given.
pub struct UpdateOptions {
    pub root: Option<PathBuf>,
    /// A folder holding a downloaded release, installed as it is.
    pub from: Option<PathBuf>,
    /// The release folder to download from, instead of `network.toml`'s.
    pub releases: Option<String>,
}

pub fn update(options: UpdateOptions) -> ExitCode {
    if let Err(code) = root_only("update") {
        return code;
    }
    let paths = Paths::new(options.root.as_deref());
    let root = options.root.clone();
    if let Some(from) = &options.from {
        let from = match std::path::absolute(from) {
            Ok(p) => p,
            Err(e) => return fail(format!("{}: {e}", from.display())),
        };
        return install(root, &from);
    }
    let url = match &options.releases {
        Some(text) => match BaseUrl::parse(text) {
            Ok(u) => u,
            Err(e) => return fail(e),
        },
        None => match NetworkConfig::load(&paths.network_file()).map(|n| n.releases) {
            Ok(Some(u)) => u,
            Ok(None) => {
                return fail(format!(
                    "{} names no release folder; give one with --releases URL",
                    paths.network_file().display()
                ));
            }
            Err(e) => return fail(e),
        },
    };
    let installed = match crate::warden_client::control(root.clone(), &Request::Releases, "update")
    {
        Ok(Response::Releases { current, .. }) => current,
        Ok(other) => return fail(format!("unexpected answer from the Warden: {other:?}")),
        Err(code) => return code,
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return fail(format!("cannot start: {e}")),
    };
    let keys = match crate::daemon::update::keys() {
        Ok(k) => k,
        Err(e) => return fail(e),
    };
    out!("looking at {url}");
    // One deadline for the whole download, manifest to last tarball.
    let deadline = tokio::time::Instant::now() + download::DEADLINE;
    let offer = runtime.block_on(async {
        tokio::time::timeout_at(deadline, download::offer(&Direct, &url, None, &keys))
            .await
            .map_err(|_| download::DownloadError::Timeout)?
    });
    let offer = match offer {
        Ok(o) => o,
        Err(e) => return fail(format!("the release could not be read: {e}")),
    };
    // An expired manifest is the mirror's staleness (or its holding
    // updates back), not "nothing to do": said, and a failure.
    let now = jiff::Timestamp::now().as_second().max(0) as u64;
    if let Err(e) = offer.manifest.fresh(now) {
        return fail(format!("{url} cannot be trusted to be current: {e}"));
    }
    let version = offer.manifest.version;
    if let Some(installed) = installed
        .as_deref()
        .and_then(|v| aromba_release::Version::parse(v).ok())
        && version <= installed
    {
        out!("Aromba {installed} is installed; {url} offers {version}: nothing to do.");
        return ExitCode::SUCCESS;
    }
    let dir = match fresh_folder() {
        Ok(d) => d,
        Err(e) => return fail(e),
    };
    let _cleanup = Cleanup(dir.clone());
    // The commit the release key's signature names: which source this is.
    match offer.manifest.short_commit() {
        Some(commit) => out!("downloading {version}, built from commit {commit}"),
        None => out!("downloading {version} (its signature names no commit)"),
    }
    let fetched = runtime.block_on(async {
        tokio::time::timeout_at(
            deadline,
            download::fetch_into(&Direct, &url, None, &offer, &dir),
        )
        .await
        .map_err(|_| download::DownloadError::Timeout)?
    });
    if let Err(e) = fetched {
        return fail(format!("the release could not be downloaded: {e}"));
    }
    install(root, &dir)
}

fn install(root: Option<PathBuf>, dir: &Path) -> ExitCode {
    let request = Request::InstallRelease {
        dir: Some(dir.to_string_lossy().into_owned()),
    };
    match crate::warden_client::control(root, &request, "update") {
        Ok(Response::ReleaseInstalled { version, previous }) => {
            match previous {
                Some(p) => out!(
                    "Aromba {version} is installed ({p} is kept to go back to); both services restart now."
                ),
                None => out!("Aromba {version} is installed; both services restart now."),
            }
            ExitCode::SUCCESS
        }
        Ok(Response::Refused { reason, .. }) => fail(format!("the update was refused: {reason}")),
        Ok(other) => fail(format!("unexpected answer from the Warden: {other:?}")),
        Err(code) => code,
    }
}

/// A folder only root may enter, made new (never one that was there).
pub(crate) fn fresh_folder() -> Result<PathBuf, String> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = PathBuf::from("/var/tmp").join(format!("aromba-update-{}", uuid::Uuid::new_v4()));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    Ok(dir)
}

pub(crate) struct Cleanup(pub(crate) PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `aromba uninstall [--purge] [--yes]`.
pub fn uninstall(root: Option<PathBuf>, purge: bool, yes: bool) -> ExitCode {
    if let Err(code) = root_only("uninstall") {
        return code;
    }
    // dpkg's install is dpkg's to remove: said before the question, which
    // the Warden would refuse anyway (it judges the same list, and says so
    // too when it cannot read it).
    let system = root.clone().unwrap_or_else(|| PathBuf::from("/"));
    if let Ok(true) = aromba_warden_proto::package::installed_by_dpkg(&system) {
        return fail(format!(
            "nothing was removed. {}",
            aromba_warden_proto::package::USE_APT_PURGE
        ));
    }
    if !yes {
        use std::io::{BufRead, IsTerminal, Write};
        if !std::io::stdin().is_terminal() {
            return fail(
                "uninstall removes Aromba from this server; add --yes to do it without a question",
            );
        }
        print!(
            "This stops Aromba and removes its services, releases, state and user{}. Type yes to go on: ",
            if purge {
                ", and its journal"
            } else {
                " (the journal is kept)"
            }
        );
        let _ = std::io::stdout().flush();
        let mut line = String::new();
        if std::io::stdin().lock().read_line(&mut line).is_err() || line.trim() != "yes" {
            return fail("nothing was removed");
        }
    }
    match crate::warden_client::control(root, &Request::Uninstall { purge }, "uninstall") {
        Ok(Response::Uninstalled { removed, kept }) => {
            for r in &removed {
                out!("removed {r}");
            }
            for k in &kept {
                out!("kept {k}");
            }
            out!("Aromba is uninstalled.");
            if kept.iter().any(|k| k.starts_with("not removed")) {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            }
        }
        Ok(Response::Refused { reason, .. }) => fail(format!("uninstall was refused: {reason}")),
        Ok(other) => fail(format!("unexpected answer from the Warden: {other:?}")),
        Err(code) => code,
    }
}
