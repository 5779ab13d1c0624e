//! `aromba pair` (root): sets the server up at the relay and pairs it with
//! a chat. It registers the server when it is not yet (its id is the
//! Warden's own, its token fresh), asks for a PIN when none is set, writes
//! `network.toml` (root's) and `relay.toml` (the Worker's, 0600), asks the
//! relay for a pairing code over a connection of its own, prints the link
//! and a QR code, waits for the chat to take it, and pins the relay's
//! tap-signing key in the Warden: from this connection, never from the
//! Worker, which could otherwise hand over a key of its own.

use crate::config::{
    BaseUrl, HostEntry, NetworkConfig, Owner, RelayConfig, RelayUrl, my_uid, passwd_name,
};
use crate::net::{Gate, who};
use crate::paths::Paths;
use crate::register::{Registered, register};
use crate::warden_client;
use aromba_relay_proto::client::{Endpoint, dial, handshake};
use aromba_relay_proto::frame::{Body, Delivery};
use aromba_relay_proto::token::ServerToken;
use aromba_warden_proto::socket_owner;
use aromba_warden_proto::{Request, Response};
use std::net::{IpAddr, SocketAddr};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

#[derive(Debug, thiserror::Error)]
pub enum PairError {
    #[error("{0}")]
    Config(#[from] crate::config::ConfigError),
    #[error("{0}")]
    Warden(String),
    #[error("{0}")]
    Register(#[from] crate::register::RegisterError),
    #[error("the relay connection failed: {0}")]
    Relay(#[from] aromba_relay_proto::client::ClientError),
    #[error("{0}")]
    Setup(String),
    #[error("the pairing code expired before a chat took it; run `aromba pair` again")]
    Expired,
    #[error(
        "the chat is paired at the relay, but nobody confirmed in the app within {0} minutes, so nothing was saved on this server and nothing can be approved from the chat; send /unpair in the chat, then run `sudo aromba pair` again"
    )]
    NotConfirmed(u64),
    #[error(
        "the chat is paired at the relay, but the confirmation in the app did not arrive ({0}), so nothing was saved on this server and nothing can be approved from the chat; send /unpair in the chat, then run `sudo aromba pair` again"
    )]
    ConfirmationLost(String),
}

/// How long `aromba pair` waits for the person to confirm in the app.
pub const CONFIRM_WITHIN: Duration = Duration::from_secs(10 * 60);

pub struct PairOptions {
    pub root: Option<PathBuf>,
    /// The relay, for a server not set up yet (`https://HOST[:PORT]`).
    pub relay: Option<String>,
    pub ca_file: Option<PathBuf>,
    /// Where the daily update check looks; else the one `network.toml`
    /// records (the installer writes it).
    pub releases: Option<String>,
    /// The Worker's account, owner of `relay.toml`.
    pub worker_user: String,
    pub install_source: String,
}

/// The outcome, for the caller to print.
pub enum Paired {
    /// Paired, and approvals bound to this Telegram account.
    Now {
        user_id: u64,
        name: String,
    },
    Already,
}

async fn warden(paths: &Paths, request: &Request) -> Result<Response, PairError> {
    match warden_client::ask(&paths.control_socket(), request).await {
        Ok(Response::Error { message }) => {
            Err(PairError::Warden(format!("the Warden refused: {message}")))
        }
        Ok(Response::Refused { reason, .. }) => {
            Err(PairError::Warden(format!("the Warden refused: {reason}")))
        }
        Ok(r) => Ok(r),
        Err(e) => Err(PairError::Warden(e.to_string())),
    }
}

/// The Worker's uid and gid from `/etc/passwd`.
fn account(name: &str) -> Result<(u32, u32), PairError> {
    let text = std::fs::read_to_string("/etc/passwd")
        .map_err(|e| PairError::Setup(format!("cannot read /etc/passwd: {e}")))?;
    text.lines()
        .find_map(|line| {
            let f: Vec<&str> = line.split(':').collect();
            (f.len() >= 4 && f[0] == name)
                .then(|| Some((f[2].parse().ok()?, f[3].parse().ok()?)))
                .flatten()
        })
        .ok_or_else(|| {
            PairError::Setup(format!(
                "there is no user {name:?} for the Worker: install Aromba first"
            ))
        })
}

/// Writes `text` to `path` whole (a temporary file renamed over it), with
/// `mode` and owner.
fn write_file(path: &Path, text: &str, mode: u32, owner: (u32, u32)) -> Result<(), PairError> {
    let fail =
        |e: std::io::Error| PairError::Setup(format!("cannot write {}: {e}", path.display()));
    let dir = path
        .parent()
        .ok_or_else(|| PairError::Setup(format!("{} has no directory", path.display())))?;
    own_dir(dir)?;
    let tmp = dir.join(format!(
        ".{}.{}",
        path.file_name()
            .map_or("file".into(), |n| n.to_string_lossy()),
        std::process::id()
    ));
    let _ = std::fs::remove_file(&tmp);
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode_0600()
            .open(&tmp)
            .map_err(fail)?;
        f.write_all(text.as_bytes()).map_err(fail)?;
        f.sync_all().map_err(fail)?;
    }
    std::os::unix::fs::chown(&tmp, Some(owner.0), Some(owner.1)).map_err(fail)?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode)).map_err(fail)?;
    std::fs::rename(&tmp, path).map_err(fail)
}

/// The directory of the files `aromba pair` writes: made root's, 0755, when
/// missing; refused when someone else owns it or may write in it (they
/// could swap a file between its writing and its renaming).
fn own_dir(dir: &Path) -> Result<(), PairError> {
    use std::os::unix::fs::MetadataExt;
    let fail = |e: std::io::Error| PairError::Setup(format!("cannot make {}: {e}", dir.display()));
    if std::fs::symlink_metadata(dir).is_err() {
        std::fs::create_dir_all(dir).map_err(fail)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).map_err(fail)?;
    }
    let meta = std::fs::symlink_metadata(dir).map_err(fail)?;
    if !meta.is_dir() || meta.uid() != 0 || meta.mode() & 0o022 != 0 {
        return Err(PairError::Setup(format!(
            "{} must be a directory of root's that no one else may write in",
            dir.display()
        )));
    }
    Ok(())
}

trait Mode0600 {
    fn mode_0600(&mut self) -> &mut Self;
}

impl Mode0600 for std::fs::OpenOptions {
    fn mode_0600(&mut self) -> &mut Self {
        std::os::unix::fs::OpenOptionsExt::mode(self, 0o600)
    }
}

/// The nameservers `/etc/resolv.conf` names, on port 53: the Worker's
/// lookups go to them, so the Warden must know them.
fn resolvers() -> Vec<SocketAddr> {
    crate::net::nameservers(&std::fs::read_to_string(crate::net::RESOLV_CONF).unwrap_or_default())
}

/// The relay's addresses now, for `network.toml`.
async fn relay_addresses(relay: &RelayUrl) -> Result<Vec<SocketAddr>, PairError> {
    if let Ok(ip) = relay.host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, relay.port)]);
    }
    let found: Vec<SocketAddr> = tokio::net::lookup_host((relay.host.as_str(), relay.port))
        .await
        .map_err(|e| {
            PairError::Setup(format!(
                "the relay's name {} does not resolve: {e}",
                relay.host
            ))
        })?
        .take(16)
        .collect();
    if found.is_empty() {
        return Err(PairError::Setup(format!(
            "the relay's name {} resolves to no address",
            relay.host
        )));
    }
    Ok(found)
}

/// The uids listening at `addresses` now.
fn listening(addresses: &[SocketAddr]) -> std::io::Result<Vec<u32>> {
    let mut uids = Vec::new();
    for addr in addresses {
        let rows = socket_owner::rows_on_port(addr.port())?;
        uids.extend(socket_owner::listening_uids(&rows, *addr));
    }
    uids.sort_unstable();
    uids.dedup();
    Ok(uids)
}

/// The `owner` `network.toml` records for `origin` (the `what`, at
/// `addresses`): the one it names already — root's word, maybe written by
/// hand, never replaced by whoever holds the port now — else, for a
/// plain-HTTP endpoint, the uid listening there as root pairs, shown to
/// root. The Worker speaks plain HTTP on this machine only to a socket of
/// that uid's (`crate::net`): any local user may bind a free port.
fn owner_for(
    origin: &RelayUrl,
    addresses: &[SocketAddr],
    what: &str,
    recorded: &[HostEntry],
) -> Option<Owner> {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let base = origin.base();
    let named = recorded
        .iter()
        .find(|h| h.port == origin.port && h.name.eq_ignore_ascii_case(&origin.host))
        .and_then(|h| h.owner.clone());
    if let Some(owner) = named {
        if let (Some(uid), Ok(uids)) = (owner.uid(&passwd), listening(addresses))
            && !uids.is_empty()
            && uids != [uid]
        {
            out!(
                "network.toml names {owner} as the owner of the {what} at {base}, but {} listens there now: the Worker will not connect to it until they agree.",
                list(&passwd, &uids)
            );
        }
        return Some(owner);
    }
    if origin.secure {
        // Its certificate is checked: whoever serves it.
        return None;
    }
    match listening(addresses).as_deref() {
        Ok([uid]) => {
            out!(
                "The {what} at {base} is served by {}: network.toml records it as its owner, and the Worker speaks to it (without TLS) only while that uid serves it. If that is not the service you meant, change `owner` under its [[host]] there and run `aromba pair` again.",
                who(&passwd, *uid)
            );
            Some(passwd_name(&passwd, *uid).map_or(Owner::Uid(*uid), |n| Owner::Name(n.into())))
        }
        Ok([]) => {
            out!(
                "Nothing listens at {base} now, so who serves the {what} is not known: the Worker will not use it until network.toml names its owner (`owner = \"ollama\"`, a user or a uid, under its [[host]]), or `aromba pair` runs again while it listens."
            );
            None
        }
        Ok(uids) => {
            out!(
                "Several uids listen at {base} ({}): none is recorded as the {what}'s owner. Name the right one in network.toml (`owner = …` under its [[host]]).",
                list(&passwd, uids)
            );
            None
        }
        Err(e) => {
            out!(
                "Who serves the {what} at {base} cannot be read ({e}): name its owner in network.toml (`owner = …` under its [[host]])."
            );
            None
        }
    }
}

fn list(passwd: &str, uids: &[u32]) -> String {
    uids.iter()
        .map(|u| who(passwd, *u))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The relay's CA from `ca_file` (`None`: the webpki roots), which must be
/// root's and written by no one else, in a directory of root's the same:
/// read at every start, a file another account could change would let it
/// choose whom the Worker takes for the relay.
pub fn roots(ca_file: Option<&Path>) -> Result<Option<Arc<rustls::RootCertStore>>, String> {
    let Some(path) = ca_file else {
        return Ok(None);
    };
    roots_only(path)?;
    roots_from(path).map(Some)
}

/// Why `path` is not a file only root may change, if it is not.
fn roots_only(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let refuse = |why: String| {
        Err(format!(
            "{}: the relay's CA {why}; run `aromba pair --ca-file FILE` again to copy it into place",
            path.display()
        ))
    };
    let meta = std::fs::symlink_metadata(path)
        .map_err(|e| format!("{}: cannot read the relay's CA: {e}", path.display()))?;
    if !meta.file_type().is_file() {
        return refuse("is not a plain file".into());
    }
    if meta.uid() != 0 || meta.mode() & 0o022 != 0 {
        return refuse(format!(
            "must be root's and written by no one else (uid {}, mode {:o})",
            meta.uid(),
            meta.mode() & 0o7777
        ));
    }
    let dir = path.parent().unwrap_or(Path::new("/"));
    match std::fs::metadata(dir) {
        Ok(d) if d.uid() == 0 && d.mode() & 0o022 == 0 => Ok(()),
        Ok(_) => refuse(format!(
            "is in {}, which another account may change",
            dir.display()
        )),
        Err(e) => refuse(format!(
            "is in {}, which cannot be read: {e}",
            dir.display()
        )),
    }
}

/// The most a CA file may hold: a few certificates.
const MAX_CA_BYTES: u64 = 256 * 1024;

/// `path`'s text: a regular file, opened without following a last link
/// and without waiting on a FIFO, at most [`MAX_CA_BYTES`].
fn read_ca(path: &Path) -> Result<String, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let fail = |e: std::io::Error| format!("{}: cannot read the relay's CA: {e}", path.display());
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
        .map_err(fail)?;
    if !file.metadata().map_err(fail)?.file_type().is_file() {
        return Err(format!(
            "{}: the relay's CA is not a plain file",
            path.display()
        ));
    }
    let mut text = String::new();
    file.take(MAX_CA_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(fail)?;
    if text.len() as u64 > MAX_CA_BYTES {
        return Err(format!(
            "{}: the relay's CA is larger than {MAX_CA_BYTES} bytes",
            path.display()
        ));
    }
    Ok(text)
}

/// The certificates in `path`, at least one.
fn roots_from(path: &Path) -> Result<Arc<rustls::RootCertStore>, String> {
    store_of(&read_ca(path)?, path)
}

/// The certificates in `text` (read from `path`), at least one.
fn store_of(text: &str, path: &Path) -> Result<Arc<rustls::RootCertStore>, String> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    let mut store = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(text.as_bytes()) {
        let cert = cert.map_err(|e| format!("{}: not a PEM certificate: {e}", path.display()))?;
        store
            .add(cert)
            .map_err(|e| format!("{}: not a usable CA certificate: {e}", path.display()))?;
    }
    if store.is_empty() {
        return Err(format!("{}: holds no certificate", path.display()));
    }
    Ok(Arc::new(store))
}

/// The relay's CA root named (`given`, read now, whoever owns it), copied
/// whole into root's configuration directory; the copy's path. A CA
/// already copied there is kept.
fn copied_ca(paths: &Paths, given: &Path) -> Result<PathBuf, PairError> {
    let target = paths.relay_ca_file();
    if given == target {
        roots_only(&target).map_err(PairError::Setup)?;
        return Ok(target);
    }
    // Read once, bounded, and what was read is both checked and copied:
    // the file root named may be changed by someone meanwhile.
    let text = read_ca(given).map_err(PairError::Setup)?;
    store_of(&text, given).map_err(PairError::Setup)?;
    write_file(&target, &text, 0o644, (0, 0))?;
    out!(
        "The relay's CA is copied to {} (the Worker reads it there, whatever happens to {}).",
        target.display(),
        given.display()
    );
    Ok(target)
}

/// Removes the marker that keeps the daemon off the relay, however
/// pairing ends.
struct Marker(PathBuf);

impl Drop for Marker {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Six to twelve capital letters and digits.
fn plain_code(code: &str) -> bool {
    (6..=12).contains(&code.len())
        && code
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
}

/// An https link of printable ASCII, no spaces, at most 256 bytes.
fn plain_link(link: &str) -> bool {
    link.starts_with("https://") && link.len() <= 256 && link.bytes().all(|b| b.is_ascii_graphic())
}

/// Prints the link and its QR code.
fn show_code(code: &str, link: &str, expires_at: i64) {
    out!();
    out!("Open this link on your phone to pair this server with your Telegram chat:");
    out!();
    out!("  {link}");
    out!();
    if let Ok(qr) = qrcode::QrCode::new(link.as_bytes()) {
        let picture = qr
            .render::<qrcode::render::unicode::Dense1x2>()
            .quiet_zone(true)
            .build();
        out!("{picture}");
    }
    let minutes = (expires_at / 1000 - now_s()).max(0) / 60;
    out!("Or send the bot: /start {code}   (valid for {minutes} more minutes, once)");
    out!();
    out!("Waiting for the chat…");
}

fn now_s() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn boot_id() -> Uuid {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .and_then(|s| Uuid::try_parse(s.trim()).ok())
        .unwrap_or_else(Uuid::new_v4)
}

pub fn pair(
    options: &PairOptions,
    read_pin: impl Fn(&str) -> Option<String>,
) -> Result<Paired, PairError> {
    if my_uid().ok() != Some(0) {
        return Err(PairError::Setup(
            "`aromba pair` needs a root terminal (it sets up files only root may write)".into(),
        ));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| PairError::Setup(format!("cannot start: {e}")))?;
    runtime.block_on(pair_async(options, read_pin))
}

async fn pair_async(
    options: &PairOptions,
    read_pin: impl Fn(&str) -> Option<String>,
) -> Result<Paired, PairError> {
    let paths = Paths::new(options.root.as_deref());
    let paths = &paths;
    let Response::Status(status) = warden(paths, &Request::Status).await? else {
        return Err(PairError::Warden(
            "the Warden's status could not be read".into(),
        ));
    };
    let server_id = Uuid::try_parse(&status.server_id).map_err(|_| {
        PairError::Warden(format!(
            "the Warden's server id {:?} is not 32 hex digits",
            status.server_id
        ))
    })?;
    let worker = account(&options.worker_user)?;
    if !status.pin_set {
        out!("Choose a PIN. Turning prod mode off will ask for it, in the chat.");
        let first =
            read_pin("new PIN: ").ok_or_else(|| PairError::Setup("no PIN was given".into()))?;
        let again = read_pin("the PIN again: ")
            .ok_or_else(|| PairError::Setup("no PIN was given".into()))?;
        if first != again {
            return Err(PairError::Setup(
                "the two PINs differ; nothing was set".into(),
            ));
        }
        warden(paths, &Request::SetPin { pin: first.into() }).await?;
        out!("The PIN is set.");
    }
    // The relay and its CA are root's to choose: from this command line,
    // else from root's own record in `network.toml`. `relay.toml` is the
    // Worker's file, and a relay it names (one of its own, on a loopback
    // port) would hand over a tap key the Worker signs with.
    let recorded = match std::fs::symlink_metadata(paths.network_file()) {
        Ok(_) => Some(NetworkConfig::load(&paths.network_file())?),
        Err(_) => None,
    };
    let relay = match (
        &options.relay,
        recorded.as_ref().and_then(|n| n.relay.clone()),
    ) {
        (Some(relay), _) => RelayUrl::parse(relay).map_err(PairError::Setup)?,
        (None, Some(relay)) => relay,
        (None, None) => RelayUrl::parse("https://aro.mba").map_err(PairError::Setup)?,
    };
    let releases = match &options.releases {
        Some(url) => Some(BaseUrl::parse(url).map_err(PairError::Setup)?),
        None => recorded.as_ref().and_then(|n| n.releases.clone()),
    };
    let assistant = recorded.as_ref().and_then(|n| n.assistant.clone());
    let recorded_hosts = recorded
        .as_ref()
        .map(|n| n.hosts.clone())
        .unwrap_or_default();
    let ca_file = options
        .ca_file
        .clone()
        .or_else(|| recorded.and_then(|n| n.ca_file))
        .map(|given| copied_ca(paths, &given))
        .transpose()?;
    let existing = match std::fs::symlink_metadata(paths.relay_file()) {
        Ok(_) => Some(RelayConfig::load(&paths.relay_file(), worker.0)?),
        Err(_) => None,
    };
    let mut config = match existing {
        // Only the token is taken from the Worker's file: it is the
        // Worker's own secret anyway.
        Some(c) if c.server_id == server_id => RelayConfig {
            relay,
            ca_file,
            ..c
        },
        Some(_) => {
            return Err(PairError::Setup(format!(
                "{} names another server than this Warden's ({}); remove it and run `aromba pair` again",
                paths.relay_file().display(),
                server_id.as_simple()
            )));
        }
        None => RelayConfig {
            server_id,
            token: ServerToken::generate(),
            relay,
            approval_key: None,
            ca_file,
        },
    };
    let roots = roots(config.ca_file.as_deref()).map_err(PairError::Setup)?;
    let addresses = relay_addresses(&config.relay).await?;
    let mut hosts = vec![HostEntry {
        name: config.relay.host.to_ascii_lowercase(),
        port: config.relay.port,
        owner: owner_for(&config.relay, &addresses, "relay", &recorded_hosts),
        addresses,
    }];
    // The release folder's host and the assistant's endpoint are listed
    // beside the relay, with the addresses they have now.
    let others = [
        releases.as_ref().map(|r| (&r.origin, "release host")),
        assistant
            .as_ref()
            .map(|a| (&a.endpoint.origin, "assistant's endpoint")),
    ];
    for (origin, what) in others.into_iter().flatten() {
        if hosts
            .iter()
            .any(|h| h.port == origin.port && h.name.eq_ignore_ascii_case(&origin.host))
        {
            continue;
        }
        let addresses = relay_addresses(origin)
            .await
            .map_err(|e| PairError::Setup(e.to_string().replacen("relay", what, 1)))?;
        hosts.push(HostEntry {
            name: origin.host.to_ascii_lowercase(),
            port: origin.port,
            owner: owner_for(origin, &addresses, what, &recorded_hosts),
            addresses,
        });
    }
    let network = NetworkConfig {
        relay: Some(config.relay.clone()),
        ca_file: config.ca_file.clone(),
        releases,
        assistant,
        hosts,
        resolvers: resolvers(),
    };
    write_file(&paths.network_file(), &network.render(), 0o644, (0, 0))?;
    // The file is in the Warden's integrity baseline: re-taken at once, or
    // the next hourly check would call it tampered.
    warden(paths, &Request::NetworkWritten).await?;
    write_file(&paths.relay_file(), &config.render(), 0o600, worker)?;
    let gate = Gate::new(network);
    match register(
        &gate,
        &config,
        roots.clone(),
        boot_id(),
        &options.install_source,
    )
    .await?
    {
        Registered::New => out!("This server is registered with the relay."),
        Registered::Unchanged => {}
        Registered::Duplicate => out!(
            "The relay knows this server's id from another machine or boot: the chat will ask you which it is."
        ),
    }
    // The daemon stays off the relay while this connection pairs.
    let marker = Marker(paths.pairing_marker());
    write_file(&marker.0, &format!("{}\n", now_s()), 0o644, (0, 0))?;
    let mut endpoint = Endpoint::new(
        config.relay.connect_url(),
        config.server_id,
        config.token.clone(),
        roots,
    );
    endpoint.dialer = Arc::new(gate);
    let mut ws = dial(&endpoint).await?;
    let mut session = handshake(&mut ws, &endpoint).await?;
    session.send(&mut ws, &Body::PairingRequest {}).await?;
    let mut deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut shown_code = None;
    let (key, bot_id, confirm) = loop {
        let frame = tokio::time::timeout_at(deadline, session.recv(&mut ws))
            .await
            .map_err(|_| PairError::Expired)??;
        match frame {
            Body::PairingCode {
                code,
                link,
                expires_at,
            } => {
                // Printed to a root terminal: only what a code and a link
                // are made of, never an escape sequence the relay sent.
                if !plain_code(&code) || !plain_link(&link) {
                    return Err(PairError::Setup(
                        "the relay sent a pairing code or link that is not one".into(),
                    ));
                }
                show_code(&code, &link, expires_at);
                shown_code = Some(code);
                let left = (expires_at / 1000 - now_s()).clamp(0, 3600) as u64;
                deadline = tokio::time::Instant::now() + Duration::from_secs(left);
            }
            Body::AlreadyPaired {} => {
                drop(marker);
                return Ok(Paired::Already);
            }
            Body::Deliver {
                id,
                delivery:
                    Delivery::Paired {
                        approval_key,
                        bot_id,
                        confirm,
                    },
            } => {
                session.send(&mut ws, &Body::AckDelivery { id }).await?;
                break (approval_key, bot_id, confirm);
            }
            // Anything else is the daemon's to handle: not acknowledged
            // here, it is delivered again on the daemon's connection.
            _ => {}
        }
    };
    // The confirmation button is this pairing's: it names the code shown
    // here (a relay cannot send the person another pairing's launch).
    if shown_code.map(|c| format!("pair_{c}")).as_deref() != Some(confirm.as_str()) {
        return Err(PairError::Setup(
            "the relay sent a confirmation button that is not this pairing's".into(),
        ));
    }
    out!(
        "The chat is paired. One more step: in the chat, tap \"Confirm it is you\" and confirm in the app."
    );
    out!("Waiting for your confirmation…");
    // The relay's tap key is pinned only once the person's account is: a
    // relay that withheld the confirmation would otherwise be left holding
    // a key that approves everything on a server bound to nobody.
    let (user_id, name) = confirmed(paths, &mut ws, &mut session, bot_id, &confirm)
        .await
        .map_err(|e| match e {
            PairError::NotConfirmed(_) | PairError::Setup(_) => e,
            other => PairError::ConfirmationLost(other.to_string()),
        })?;
    warden(paths, &Request::PinRelayKey { key: key.clone() }).await?;
    config.approval_key = Some(key);
    write_file(&paths.relay_file(), &config.render(), 0o600, worker)?;
    let _ = ws.close(None).await;
    drop(marker);
    Ok(Paired::Now { user_id, name })
}

/// Waits for the person to confirm in the app: answers the page, and pins
/// the account Telegram's signature names when they confirm. Deliveries
/// other than the app's stay for the daemon.
async fn confirmed(
    paths: &Paths,
    ws: &mut aromba_relay_proto::client::Socket,
    session: &mut aromba_relay_proto::client::Session,
    bot_id: u64,
    confirm: &str,
) -> Result<(u64, String), PairError> {
    use aromba_relay_proto::frame::{AppAnswer, AppAnswerKind, AppAsk};
    use aromba_words::approvals as words;
    let deadline = tokio::time::Instant::now() + CONFIRM_WITHIN;
    loop {
        let frame = tokio::time::timeout_at(deadline, session.recv(ws))
            .await
            .map_err(|_| PairError::NotConfirmed(CONFIRM_WITHIN.as_secs() / 60))??;
        let Body::Deliver {
            id,
            delivery:
                Delivery::App {
                    request,
                    ask,
                    launch,
                    ..
                },
        } = frame
        else {
            continue;
        };
        session.send(ws, &Body::AckDelivery { id }).await?;
        let (answer, pinned) = match ask {
            AppAsk::View => (
                AppAnswer {
                    kind: AppAnswerKind::Proposal,
                    text: words::PAIR_CONFIRM.into(),
                    sections: Vec::new(),
                },
                None,
            ),
            AppAsk::Approve => {
                let pin = Request::PinTelegramAccount {
                    launch,
                    bot_id,
                    start_param: confirm.to_string(),
                };
                match warden_client::ask(&paths.control_socket(), &pin).await {
                    Ok(Response::TelegramAccount { user_id, name }) => (
                        AppAnswer {
                            kind: AppAnswerKind::Outcome,
                            text: words::PAIR_CONFIRMED.into(),
                            sections: Vec::new(),
                        },
                        Some((user_id, name)),
                    ),
                    Ok(Response::Refused { reason, .. })
                    | Ok(Response::Error { message: reason }) => (
                        AppAnswer {
                            kind: AppAnswerKind::Outcome,
                            text: words::pair_not_confirmed(&reason),
                            sections: Vec::new(),
                        },
                        None,
                    ),
                    Ok(other) => {
                        return Err(PairError::Warden(format!(
                            "the Warden answered the confirmation oddly: {other:?}"
                        )));
                    }
                    Err(e) => return Err(PairError::Warden(e.to_string())),
                }
            }
            // The Trust page before the pairing is over: nothing to show.
            AppAsk::Trust | AppAsk::Policy | AppAsk::Undo => (
                AppAnswer::said(AppAnswerKind::Closed, words::APP_PAIRING_FIRST),
                None,
            ),
        };
        session
            .send(ws, &Body::AppAnswer { request, answer })
            .await?;
        if let Some(account) = pinned {
            return Ok(account);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ca_pem() -> String {
        let key = rcgen::KeyPair::generate().expect("a key");
        let mut params =
            rcgen::CertificateParams::new(vec!["relay.test".to_string()]).expect("params");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.self_signed(&key).expect("a certificate").pem()
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = PathBuf::from(format!("/var/tmp/aromba-ca-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a folder");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("0755");
        dir
    }

    /// Found by the review: the Worker read `ca_file` from whatever path
    /// root once gave, at every start; one in another account's reach let
    /// it choose whom the Worker takes for the relay.
    #[test]
    fn a_relay_ca_another_account_can_change_is_refused_at_start() {
        let dir = scratch("start");
        let ca = dir.join("ca.pem");
        std::fs::write(&ca, ca_pem()).expect("the CA");
        std::fs::set_permissions(&ca, std::fs::Permissions::from_mode(0o644)).expect("0644");
        assert!(roots(Some(&ca)).is_ok(), "root's, written by no one else");
        std::os::unix::fs::chown(&ca, Some(65_534), None).expect("chown");
        let why = roots(Some(&ca)).expect_err("another account's");
        assert!(why.contains("must be root's"), "{why}");
        std::os::unix::fs::chown(&ca, Some(0), None).expect("chown");
        std::fs::set_permissions(&ca, std::fs::Permissions::from_mode(0o666)).expect("0666");
        assert!(roots(Some(&ca)).is_err(), "written by anyone");
        std::fs::set_permissions(&ca, std::fs::Permissions::from_mode(0o644)).expect("0644");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).expect("0777");
        assert!(roots(Some(&ca)).is_err(), "in a folder anyone may write");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn pairing_copies_the_relay_ca_into_roots_configuration() {
        let dir = scratch("copy");
        let given = dir.join("theirs.pem");
        let pem = ca_pem();
        std::fs::write(&given, &pem).expect("the CA");
        std::os::unix::fs::chown(&given, Some(65_534), None).expect("chown");
        let root = dir.join("root");
        let paths = Paths::new(Some(&root));
        let copied = copied_ca(&paths, &given).expect("copied");
        assert_eq!(copied, paths.relay_ca_file());
        assert_eq!(std::fs::read_to_string(&copied).expect("the copy"), pem);
        assert!(roots(Some(&copied)).is_ok(), "the copy is root's");
        // What happens to the file root named changes nothing any more.
        std::fs::write(&given, ca_pem()).expect("changed");
        assert_eq!(std::fs::read_to_string(&copied).expect("the copy"), pem);
        // Paired again, the copy is kept as it is.
        assert_eq!(copied_ca(&paths, &copied).expect("kept"), copied);
        std::fs::write(&given, "not a certificate").expect("changed");
        assert!(
            copied_ca(&paths, &given).is_err(),
            "not a CA: nothing copied"
        );
        assert_eq!(std::fs::read_to_string(&copied).expect("the copy"), pem);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_code_or_link_with_terminal_escapes_is_not_printed() {
        assert!(plain_code("ABC346"));
        assert!(!plain_code("ABC\u{1b}[2J"));
        assert!(!plain_code("abc346"));
        assert!(plain_link("https://t.me/aromba_bot?start=ABC346"));
        assert!(!plain_link("https://t.me/x\u{1b}]0;owned\u{7}"));
        assert!(!plain_link("https://t.me/a b"));
        assert!(!plain_link("javascript:alert(1)"));
    }
}
