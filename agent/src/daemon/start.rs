//! The Worker's start: root dropped for the Worker's account, the
//! configuration read and checked, the runtime started. What goes wrong
//! here is said on the terminal or in the service's journal — there is no
//! chat yet.

use super::{DaemonError, serve, update};
use crate::config::{NetworkConfig, RelayConfig, my_uid};
use crate::net::Gate;
use crate::paths::Paths;
use aromba_relay_proto::client::Endpoint;
use std::sync::Arc;

/// Drops root for `user` when asked (before any thread or file is made),
/// for good: groups, gid, then uid, and checks root cannot be taken back.
/// Without `user`, refuses to run as root.
pub fn become_user(user: Option<&str>) -> Result<(), DaemonError> {
    use nix::unistd::{Gid, Uid, User, setgid, setgroups, setuid};
    let setup = DaemonError::Setup;
    match user {
        None if Uid::effective().is_root() => Err(setup(
            "the Worker does not run as root: start it as the aromba user (or with --user aromba)"
                .into(),
        )),
        None => Ok(()),
        Some(_) if !Uid::effective().is_root() => Err(setup(
            "--user needs the Worker to be started as root".into(),
        )),
        Some(name) => {
            let account = User::from_name(name)
                .map_err(|e| setup(format!("cannot look up the user {name:?}: {e}")))?
                .ok_or_else(|| setup(format!("there is no user {name:?}")))?;
            if account.uid.is_root() {
                return Err(setup(format!(
                    "{name:?} is root; the Worker never runs as root"
                )));
            }
            setgroups(&[account.gid])
                .and_then(|()| setgid(account.gid))
                .and_then(|()| setuid(account.uid))
                .map_err(|e| setup(format!("cannot become {name:?}: {e}")))?;
            if setuid(Uid::from_raw(0)).is_ok() || setgid(Gid::from_raw(0)).is_ok() {
                return Err(setup("root could be taken back after dropping it".into()));
            }
            Ok(())
        }
    }
}

/// Reads the configuration and runs until SIGTERM or SIGINT.
pub fn run(paths: Paths) -> Result<(), DaemonError> {
    let uid = my_uid().map_err(|e| DaemonError::Setup(format!("cannot tell who I am: {e}")))?;
    let relay = RelayConfig::load(&paths.relay_file(), uid)?;
    let network = NetworkConfig::load(&paths.network_file())?;
    if network.host(&relay.relay.host, relay.relay.port).is_none() {
        return Err(DaemonError::Setup(format!(
            "{}: the relay {} is not listed, and the Worker connects nowhere else",
            paths.network_file().display(),
            relay.relay.base()
        )));
    }
    // The CA root recorded (`network.toml`, root's), never the Worker's own
    // file's say.
    let roots = crate::pair::roots(network.ca_file.as_deref()).map_err(DaemonError::Setup)?;
    let mut endpoint = Endpoint::new(
        relay.relay.connect_url(),
        relay.server_id,
        relay.token.clone(),
        roots,
    );
    let updates = match &network.releases {
        Some(url) if network.host(&url.origin.host, url.origin.port).is_some() => {
            Some(update::UpdateSource {
                gate: Gate::new(network.clone()).asking_the_warden(paths.worker_socket()),
                url: url.clone(),
                roots: None,
            })
        }
        Some(url) => {
            tracing::warn!(
                releases = %url,
                "network.toml does not list the release host, so updates are not checked (run `aromba pair` to list it)"
            );
            None
        }
        None => None,
    };
    let assistant = match &network.assistant {
        Some(a)
            if network
                .host(&a.endpoint.origin.host, a.endpoint.origin.port)
                .is_some() =>
        {
            let key = crate::assistant::load_key(&paths.config_dir.join("secrets.toml"))?;
            Some(Arc::new(crate::assistant::Assistant::new(
                a.clone(),
                Gate::new(network.clone()).asking_the_warden(paths.worker_socket()),
                key,
            )))
        }
        Some(a) => {
            tracing::warn!(
                endpoint = %a.endpoint,
                "network.toml does not list the assistant's endpoint, so there is no assistant (run `aromba pair` to list it)"
            );
            None
        }
        None => None,
    };
    let network_hosts = network
        .hosts
        .iter()
        .map(|h| format!("{}:{}", h.name, h.port))
        .collect();
    endpoint.dialer = Arc::new(
        Gate::new(network)
            .paused_by(paths.pairing_marker())
            .asking_the_warden(paths.worker_socket()),
    );
    // One thread: the Worker mostly waits, and stays small.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| DaemonError::Setup(format!("cannot start the runtime: {e}")))?;
    runtime.block_on(serve(paths, endpoint, updates, assistant, network_hosts))
}
