//! The one place the Worker makes a connection. A host not in
//! `network.toml` is refused here, before any packet; a listed host is
//! dialed only at the addresses listed for it, since the Warden watches the
//! Worker's sockets against exactly those and takes any other address for
//! a compromise. DNS, when it answers, only orders them (its first choice
//! first); when the name does not resolve, the listed addresses are dialed
//! as they are. DNS is asked only while the system's resolvers are those
//! `network.toml` lists: the Warden watches the Worker's UDP too, and a
//! lookup sent to a resolver that changed since pairing (a DHCP lease, a
//! new `/etc/resolv.conf`) would be an unlisted host to it — a Cut; the
//! listed addresses are dialed then, without DNS. TLS above this is
//! verified against the host's name whatever address was dialed
//! (`aromba_relay_proto::client::dial`, `register`).
//!
//! A connection to this machine's loopback is spoken on only once the
//! socket at its other end is known to be served by the uid `network.toml`
//! names as the host's `owner` (`aromba_warden_proto::socket_owner`, asked
//! of the Warden by the daemon, whose user namespace hides other uids,
//! read here by `aromba pair`): any local user may bind
//! a free port there, and would get the key, the question and the reads
//! sent to a plain-HTTP model endpoint. With no owner named, only a host
//! `network.toml` reaches over TLS alone (https, wss) is spoken to there:
//! its certificate is checked above this. (The dialer is not told whether
//! TLS follows; the URLs root wrote in `network.toml` say it.)

use crate::config::{NetworkConfig, passwd_name};
use aromba_relay_proto::client::{Connecting, Dialer};
use aromba_warden_proto::socket_owner::{self, Unclear};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;
use tokio::net::TcpStream;

/// How long one address may take to answer.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the resolver may take before the listed addresses are used.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone)]
pub struct Gate {
    network: NetworkConfig,
    /// While this file exists (and is recent), no connection is made:
    /// `aromba pair` holds the relay connection meanwhile.
    paused_by: Option<PathBuf>,
    /// Where the system's resolvers are listed.
    resolv_conf: PathBuf,
    /// The Warden's Worker socket, when the Warden says who serves a
    /// socket on this machine (the daemon: its unit's user namespace shows
    /// every other uid as `nobody`); `None`: the kernel's tables are read
    /// here (`aromba pair`, as root).
    warden: Option<PathBuf>,
}

/// The system's resolvers.
pub const RESOLV_CONF: &str = "/etc/resolv.conf";
/// Where an owner's name is looked up.
const PASSWD: &str = "/etc/passwd";

/// `uid 998 (ollama)`, or `uid 998` for a uid `passwd` does not name.
pub fn who(passwd: &str, uid: u32) -> String {
    match passwd_name(passwd, uid) {
        Some(name) => format!("uid {uid} ({name})"),
        None => format!("uid {uid}"),
    }
}

/// An address that reaches this machine: a local user may be serving it.
fn on_this_machine(ip: IpAddr) -> bool {
    let ip = ip.to_canonical();
    ip.is_loopback() || ip.is_unspecified()
}

/// Whether every URL of `network.toml` that names `host:port` is TLS
/// (and one does): only then is a connection there certain to be checked
/// against a certificate. A host no URL names (listed by hand, or the
/// relay of an older file without `relay`) counts as plain.
fn tls_only(network: &NetworkConfig, host: &str, port: u16) -> bool {
    let urls = [
        network.relay.as_ref(),
        network.releases.as_ref().map(|r| &r.origin),
        network.assistant.as_ref().map(|a| &a.endpoint.origin),
    ];
    let mut naming = urls
        .into_iter()
        .flatten()
        .filter(|u| u.port == port && u.host.eq_ignore_ascii_case(host))
        .peekable();
    naming.peek().is_some() && naming.all(|u| u.secure)
}

/// The `nameserver` lines of a `resolv.conf`, as the addresses a lookup
/// goes to (port 53), at most eight.
pub fn nameservers(resolv_conf: &str) -> Vec<SocketAddr> {
    resolv_conf
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            (f.next() == Some("nameserver"))
                .then(|| f.next()?.parse::<IpAddr>().ok())
                .flatten()
        })
        .map(|ip| SocketAddr::new(ip, 53))
        .take(8)
        .collect()
}

/// The first `nameserver` of `resolv_conf` that is not one of `listed`,
/// as written. A value that is not an address as [`nameservers`] reads it
/// counts too: the C library reads more than that — an IPv6 address with
/// its interface (`fe80::1%eth0`, as NetworkManager writes a router's
/// link-local resolver), `127.1`, `0x7f000001` — and would send the
/// lookup there, where the Warden sees an unlisted host.
///
/// A file that names no resolver (or that cannot be read: the C library
/// reads it as the same process) means the C library's default, the
/// server on this machine (127.0.0.1): unlisted unless `network.toml`
/// lists it.
pub fn unlisted_resolver(resolv_conf: &str, listed: &[SocketAddr]) -> Option<String> {
    let mut named = false;
    let odd = resolv_conf.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        if f.next() != Some("nameserver") {
            return None;
        }
        let value = f.next()?;
        named = true;
        match value.parse::<IpAddr>() {
            Ok(ip) if listed.contains(&SocketAddr::new(ip, 53)) => None,
            _ => Some(value.to_string()),
        }
    });
    let default = SocketAddr::from(([127, 0, 0, 1], 53));
    match odd {
        Some(odd) => Some(odd),
        None if !named && !listed.contains(&default) => {
            Some("127.0.0.1 (no resolver named: the C library's default)".into())
        }
        None => None,
    }
}

/// A pause older than this is a leftover of a pairing that died.
const PAUSE_AT_MOST: Duration = Duration::from_secs(20 * 60);

/// Why a connection was not made.
fn refused(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, why)
}

impl Gate {
    pub fn new(network: NetworkConfig) -> Gate {
        Gate {
            network,
            paused_by: None,
            resolv_conf: PathBuf::from(RESOLV_CONF),
            warden: None,
        }
    }

    /// Asks the Warden on `worker_socket` who serves a socket on this
    /// machine.
    pub fn asking_the_warden(mut self, worker_socket: PathBuf) -> Gate {
        self.warden = Some(worker_socket);
        self
    }

    /// Why DNS may not be asked now: a resolver of the system's that
    /// `network.toml` does not list.
    fn unlisted_resolver(&self) -> Option<String> {
        let text = std::fs::read_to_string(&self.resolv_conf).unwrap_or_default();
        unlisted_resolver(&text, &self.network.resolvers)
    }

    /// No connection while `marker` exists and is recent.
    pub fn paused_by(mut self, marker: PathBuf) -> Gate {
        self.paused_by = Some(marker);
        self
    }

    fn paused(&self) -> bool {
        let Some(marker) = &self.paused_by else {
            return false;
        };
        std::fs::metadata(marker)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age < PAUSE_AT_MOST)
    }

    /// The addresses to dial for `host:port`, in order, or why none.
    pub async fn plan(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        if self.paused() {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "`aromba pair` holds the relay connection; waiting for it to end",
            ));
        }
        let entry = self.network.host(host, port).ok_or_else(|| {
            refused(format!(
                "{host}:{port} is not in network.toml, and the Worker connects nowhere else"
            ))
        })?;
        if entry.addresses.is_empty() {
            return Err(refused(format!(
                "network.toml lists no address for {host}:{port}"
            )));
        }
        let resolved: Vec<SocketAddr> = if host.parse::<IpAddr>().is_ok() {
            Vec::new()
        } else if let Some(resolver) = self.unlisted_resolver() {
            tracing::warn!(
                host,
                %resolver,
                "the system's resolvers changed since pairing; dialing the listed addresses without DNS (run `aromba pair` to list the new ones)"
            );
            Vec::new()
        } else {
            match tokio::time::timeout(RESOLVE_TIMEOUT, tokio::net::lookup_host((host, port))).await
            {
                Ok(Ok(addrs)) => addrs.collect(),
                Ok(Err(e)) => {
                    tracing::info!(host, error = %e, "the name does not resolve; dialing the listed addresses");
                    Vec::new()
                }
                Err(_) => {
                    tracing::info!(
                        host,
                        "the resolver did not answer; dialing the listed addresses"
                    );
                    Vec::new()
                }
            }
        };
        Ok(order(host, &entry.addresses, &resolved))
    }

    /// Connects to `host:port` at one of its listed addresses.
    pub async fn connect(&self, host: &str, port: u16) -> io::Result<TcpStream> {
        let plan = self.plan(host, port).await?;
        let mut last = None;
        for addr in plan {
            match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
                // Refused, the stream is dropped before a byte is sent.
                Ok(Ok(stream)) => match self.vouch(host, port, &stream).await {
                    Ok(()) => return Ok(stream),
                    Err(e) => last = Some(e),
                },
                Ok(Err(e)) => last = Some(e),
                Err(_) => {
                    last = Some(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("{addr} did not answer"),
                    ))
                }
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no address to dial")))
    }

    /// Who the Warden says serves `peer` for our connection from `ours`.
    async fn ask_warden(
        &self,
        socket: &std::path::Path,
        ours: SocketAddr,
        peer: SocketAddr,
    ) -> io::Result<Result<u32, Unclear>> {
        use aromba_warden_proto::{Request, Response};
        let request = Request::SocketOwner {
            local: ours.to_string(),
            peer: peer.to_string(),
        };
        match crate::warden_client::ask(socket, &request).await {
            Ok(Response::Served { uid }) => u32::try_from(uid)
                .map(Ok)
                .map_err(|_| refused(format!("the Warden named uid {uid} for {peer}"))),
            Ok(Response::Refused { reason, .. }) if reason.starts_with("no socket") => {
                Ok(Err(Unclear::Nobody))
            }
            Ok(Response::Refused { reason, .. }) => Err(refused(format!(
                "the Warden could not say who serves {peer} ({reason}); nothing was sent there"
            ))),
            Ok(_) => Err(refused(format!(
                "the Warden gave no owner for {peer}; nothing was sent there"
            ))),
            Err(e) => Err(refused(format!(
                "the Warden could not be asked who serves {peer} ({e}); nothing was sent there"
            ))),
        }
    }

    /// Whether `stream`, just connected to `host:port`, may be spoken on:
    /// yes when its other end is another machine; on this one, when the
    /// socket there is the named owner's, or, no owner named, when only
    /// TLS is spoken to the host.
    async fn vouch(&self, host: &str, port: u16, stream: &TcpStream) -> io::Result<()> {
        let peer = stream.peer_addr()?;
        if !on_this_machine(peer.ip()) {
            return Ok(());
        }
        let Some(owner) = self.network.host(host, port).and_then(|h| h.owner.clone()) else {
            if tls_only(&self.network, host, port) {
                return Ok(());
            }
            return Err(refused(format!(
                "{host}:{port} is served on this machine and spoken to without TLS, so any local user who binds the port first would get what is sent there; network.toml must name whose it is (`owner = \"ollama\"`, a user or a uid, under its [[host]]: `aromba pair` records who serves it when it runs), or the endpoint must be https"
            )));
        };
        let passwd = std::fs::read_to_string(PASSWD).unwrap_or_default();
        let expected = owner.uid(&passwd).ok_or_else(|| {
            refused(format!(
                "network.toml names {owner} as the owner of {host}:{port}, and there is no such user"
            ))
        })?;
        let ours = stream.local_addr()?;
        let named = who(&passwd, expected);
        let served = match &self.warden {
            Some(socket) => self.ask_warden(socket, ours, peer).await?,
            None => {
                let rows =
                    tokio::task::spawn_blocking(move || socket_owner::rows_on_port(peer.port()))
                        .await
                        .map_err(io::Error::other)??;
                socket_owner::serving_uid(&rows, ours, peer)
            }
        };
        match served {
            Ok(uid) if uid == expected => Ok(()),
            Ok(uid) => Err(refused(format!(
                "{peer} is served by {}, not by {named}, whom network.toml names as its owner: another local user may have taken the port, so nothing was sent there",
                who(&passwd, uid)
            ))),
            Err(Unclear::Nobody) => Err(refused(format!(
                "no socket on this machine could be found serving {peer}, so it cannot be told whether {named} serves it; nothing was sent there"
            ))),
            Err(Unclear::Several(uids)) => Err(refused(format!(
                "{peer} is listened on by several uids ({}), and network.toml names {named} alone as its owner; nothing was sent there",
                uids.iter()
                    .map(|u| who(&passwd, *u))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }
}

/// The listed addresses, those DNS gave first in its order; never one
/// that is not listed.
fn order(host: &str, listed: &[SocketAddr], resolved: &[SocketAddr]) -> Vec<SocketAddr> {
    let mut plan: Vec<SocketAddr> = resolved
        .iter()
        .filter(|a| listed.contains(a))
        .copied()
        .collect();
    if !resolved.is_empty() && plan.is_empty() {
        tracing::warn!(
            host,
            "the name resolves to no address network.toml lists; trying the listed ones (run `aromba pair` to refresh them)"
        );
    }
    for a in listed {
        if !plan.contains(a) {
            plan.push(*a);
        }
    }
    plan
}

impl Dialer for Gate {
    fn connect<'a>(&'a self, host: &'a str, port: u16) -> Connecting<'a> {
        Box::pin(Gate::connect(self, host, port))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Api, AssistantSettings, BaseUrl, HostEntry, Owner, RelayUrl, my_uid};

    /// A gate whose model endpoint is `http://ADDR/v1`, listed with `owner`.
    fn model_gate(addr: SocketAddr, owner: Option<Owner>) -> Gate {
        Gate::new(NetworkConfig {
            relay: None,
            ca_file: None,
            releases: None,
            assistant: Some(AssistantSettings {
                api: Api::OpenAi,
                endpoint: BaseUrl::parse(&format!("http://{addr}/v1")).unwrap(),
                model: "m".into(),
                daily_tokens: None,
            }),
            hosts: vec![HostEntry {
                name: addr.ip().to_string(),
                port: addr.port(),
                addresses: vec![addr],
                owner,
            }],
            resolvers: Vec::new(),
        })
    }

    async fn dial(gate: &Gate, addr: SocketAddr) -> io::Result<TcpStream> {
        gate.connect(&addr.ip().to_string(), addr.port()).await
    }

    #[tokio::test]
    async fn a_plain_loopback_endpoint_is_spoken_to_only_while_its_owner_serves_it() {
        // Never accepted: the waiting connection carries the listener's uid.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let me = my_uid().unwrap();
        let e = dial(&model_gate(addr, None), addr).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
        assert!(e.to_string().contains("owner = \"ollama\""), "{e}");
        let other = me.wrapping_add(1);
        let e = dial(&model_gate(addr, Some(Owner::Uid(other))), addr)
            .await
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
        assert!(
            e.to_string().contains(&format!("is served by uid {me}"))
                && e.to_string().contains(&format!("not by uid {other}")),
            "{e}"
        );
        dial(&model_gate(addr, Some(Owner::Uid(me))), addr)
            .await
            .unwrap();
        let e = dial(
            &model_gate(addr, Some(Owner::Name("no-such-user-x".into()))),
            addr,
        )
        .await
        .unwrap_err();
        assert!(e.to_string().contains("no such user"), "{e}");
    }

    #[tokio::test]
    async fn an_accepted_connection_to_a_dual_stack_listener_is_found() {
        let me = my_uid().unwrap();
        // `[::]` takes 127.0.0.1 too: its sockets are in `tcp6`, the
        // IPv4 ones as ::ffff:127.0.0.1.
        let listener = tokio::net::TcpListener::bind("[::]:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        // Accepted and held open: the other end is a socket of its own.
        let held = tokio::spawn(async move {
            let mut open = Vec::new();
            while let Ok((s, _)) = listener.accept().await {
                open.push(s);
            }
        });
        for ip in [
            IpAddr::from([127, 0, 0, 1]),
            IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
        ] {
            let addr = SocketAddr::new(ip, port);
            dial(&model_gate(addr, Some(Owner::Uid(me))), addr)
                .await
                .unwrap();
            let e = dial(
                &model_gate(addr, Some(Owner::Uid(me.wrapping_add(1)))),
                addr,
            )
            .await
            .unwrap_err();
            assert!(
                e.to_string().contains(&format!("served by uid {me}")),
                "{addr}: {e}"
            );
        }
        held.abort();
    }

    #[tokio::test]
    async fn a_loopback_host_reached_only_over_tls_needs_no_owner_but_one_named_holds() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut gate = model_gate(addr, None);
        gate.network.assistant = None;
        gate.network.relay = Some(RelayUrl::parse(&format!("https://{addr}")).unwrap());
        dial(&gate, addr).await.unwrap();
        // The same host named plain by another URL: plain it is.
        gate.network.releases = Some(BaseUrl::parse(&format!("http://{addr}/rel")).unwrap());
        assert!(dial(&gate, addr).await.is_err());
        gate.network.releases = None;
        gate.network.hosts[0].owner = Some(Owner::Uid(my_uid().unwrap().wrapping_add(1)));
        assert!(dial(&gate, addr).await.is_err());
    }

    fn gate(addrs: &[&str]) -> Gate {
        Gate::new(NetworkConfig {
            relay: None,
            ca_file: None,
            releases: None,
            assistant: None,
            hosts: vec![HostEntry {
                name: "localhost".into(),
                port: 4000,
                addresses: addrs.iter().map(|a| a.parse().unwrap()).collect(),
                owner: None,
            }],
            // The system's own, as `aromba pair` lists them.
            resolvers: nameservers(&std::fs::read_to_string(RESOLV_CONF).unwrap_or_default()),
        })
    }

    #[tokio::test]
    async fn asks_no_resolver_network_toml_does_not_list() {
        let dir = std::env::temp_dir().join(format!("aromba-net-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let conf = dir.join("resolv.conf");
        std::fs::write(&conf, "# a new lease\nnameserver 198.51.100.53\n").unwrap();
        // A name DNS would have to answer: none is asked, the listed
        // addresses are dialed as they are.
        let mut g = gate(&["192.0.2.1:4000"]);
        g.resolv_conf = conf.clone();
        g.network.hosts[0].name = "relay.invalid".into();
        let plan = g.plan("relay.invalid", 4000).await.unwrap();
        assert_eq!(plan, vec!["192.0.2.1:4000".parse::<SocketAddr>().unwrap()]);
        assert_eq!(g.unlisted_resolver().as_deref(), Some("198.51.100.53"));
        // Listed: DNS may be asked.
        g.network.resolvers = vec!["198.51.100.53:53".parse().unwrap()];
        assert_eq!(g.unlisted_resolver(), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_resolver_the_c_library_reads_but_not_as_an_address_here_stops_dns() {
        // Each of these is a resolver glibc sends lookups to; none is an
        // address `nameservers` keeps, so none could be listed — and DNS
        // was asked as if every resolver were.
        let listed: Vec<SocketAddr> = vec!["10.0.0.2:53".parse().unwrap()];
        for odd in [
            "fe80::1%eth0",
            "fe80::1%2",
            "127.1",
            "0x7f000001",
            "010.0.0.2",
        ] {
            let conf = format!("nameserver 10.0.0.2\nnameserver {odd}\n");
            assert_eq!(
                unlisted_resolver(&conf, &listed).as_deref(),
                Some(odd),
                "{conf:?}"
            );
        }
        let conf = "# lease\nsearch example\nnameserver 10.0.0.2 # ours\noptions edns0\n";
        assert_eq!(unlisted_resolver(conf, &listed), None);
    }

    #[test]
    fn a_resolv_conf_gone_or_naming_no_resolver_is_the_c_librarys_default_and_stops_dns() {
        // glibc then asks 127.0.0.1:53, which network.toml does not list:
        // to the Warden's watch, an unlisted host.
        let listed: Vec<SocketAddr> = vec!["10.0.0.2:53".parse().unwrap()];
        for conf in [
            "",
            "search example\n",
            "nameserver\n",
            "# nameserver 10.0.0.2\n",
        ] {
            assert!(unlisted_resolver(conf, &listed).is_some(), "{conf:?}");
        }
        let local: Vec<SocketAddr> = vec!["127.0.0.1:53".parse().unwrap()];
        assert_eq!(unlisted_resolver("", &local), None);
        let mut g = gate(&["192.0.2.1:4000"]);
        g.resolv_conf = PathBuf::from("/nonexistent/resolv.conf");
        g.network.resolvers = listed;
        assert!(g.unlisted_resolver().is_some());
    }

    #[test]
    fn reads_nameservers_as_resolv_conf_lists_them() {
        let conf = "search example\nnameserver 10.0.0.2\nnameserver ::1\n#nameserver 1.1.1.1\nnameserver bogus\n";
        assert_eq!(
            nameservers(conf),
            vec![
                "10.0.0.2:53".parse::<SocketAddr>().unwrap(),
                "[::1]:53".parse().unwrap()
            ]
        );
    }

    #[tokio::test]
    async fn refuses_a_host_network_toml_does_not_list() {
        let g = gate(&["127.0.0.1:4000"]);
        let e = g.connect("example.com", 443).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
        assert!(e.to_string().contains("not in network.toml"), "{e}");
        // The listed name on another port is another host.
        let e = g.connect("localhost", 4001).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
    }

    #[tokio::test]
    async fn dials_only_listed_addresses_whatever_dns_answers() {
        // localhost resolves to 127.0.0.1 and ::1; only ::1 is listed.
        let g = gate(&["[::1]:4000"]);
        let plan = g.plan("localhost", 4000).await.unwrap();
        assert_eq!(plan, vec!["[::1]:4000".parse::<SocketAddr>().unwrap()]);
    }

    #[test]
    fn a_name_that_does_not_resolve_dials_the_listed_addresses() {
        let listed: Vec<SocketAddr> = vec!["192.0.2.1:443".parse().unwrap()];
        assert_eq!(order("relay.example", &listed, &[]), listed);
    }

    #[test]
    fn dns_orders_the_listed_addresses_and_adds_none() {
        let a: SocketAddr = "192.0.2.1:443".parse().unwrap();
        let b: SocketAddr = "192.0.2.2:443".parse().unwrap();
        let elsewhere: SocketAddr = "198.51.100.9:443".parse().unwrap();
        assert_eq!(order("r", &[a, b], &[elsewhere, b]), vec![b, a]);
        assert_eq!(order("r", &[a], &[elsewhere]), vec![a]);
    }
}
