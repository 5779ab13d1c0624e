//! The egress proxy: a skill's networked run gets a network namespace of
//! its own with only loopback, and the Warden listens inside it on
//! 127.0.0.1 for the length of the run. That listener is the run's only
//! way out. It serves `CONNECT host:port` for the hosts the skill's
//! manifest declares and the PIN granted, and nothing else: the name must
//! be one of them (an IP address, another name, another port: refused),
//! the tunnel must start with a TLS ClientHello naming that same host
//! (SNI), the Warden resolves the name itself and dials the address it
//! checked — never one of this machine, a private network or the metadata
//! service — from the host's namespace, then passes the bytes through
//! untouched. Every connection, let through or refused, is one journal
//! line. No UDP: the namespace has no route but loopback.
//!
//! ```text
//! cage (its own netns: lo only) ──CONNECT──▶ 127.0.0.1:PORT (Warden's listener, same netns)
//!                                              │ name declared? SNI = name? address public?
//!                                              ▼
//!                                 Warden dials from the host's netns ──▶ the host
//! ```

#![forbid(unsafe_code)]

pub mod address;
pub mod connect;
pub mod hello;

use connect::Target;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Connections one run may hold open at once.
pub const MAX_CONNECTIONS: usize = 16;
/// How long the client has to send its request and its ClientHello, in
/// all; and how long dialing the host may take.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Refused connections journaled one by one in a run; the rest are
/// counted, and journaled as one line when the run ends.
pub const MAX_REFUSED_LINES: usize = 32;

/// A stand-in lookup: a name's addresses.
pub type Lookup = std::sync::Arc<dyn Fn(&str) -> Vec<IpAddr> + Send + Sync>;

/// How the Warden looks a host name up.
#[derive(Clone)]
pub enum Resolver {
    /// The system's resolver (`getaddrinfo`), from the Warden's namespace.
    System,
    /// A stand-in (tests): the addresses for a name, and the addresses it
    /// may reach though they are not the public internet's (the test's own
    /// loopback servers).
    Fixed {
        lookup: Lookup,
        reachable: Vec<IpAddr>,
    },
}

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Resolver::System => f.write_str("System"),
            Resolver::Fixed { reachable, .. } => write!(f, "Fixed(reachable: {reachable:?})"),
        }
    }
}

impl Resolver {
    fn lookup(&self, name: &str, port: u16) -> Result<Vec<IpAddr>, String> {
        match self {
            Resolver::System => (name, port)
                .to_socket_addrs()
                .map(|a| a.map(|s| s.ip()).collect())
                .map_err(|e| format!("{name} does not resolve: {e}")),
            Resolver::Fixed { lookup, .. } => Ok(lookup(name)),
        }
    }

    fn may_reach(&self, a: IpAddr) -> Result<(), &'static str> {
        match (self, address::not_public(a)) {
            (_, None) => Ok(()),
            (Resolver::Fixed { reachable, .. }, Some(_)) if reachable.contains(&a) => Ok(()),
            (_, Some(why)) => Err(why),
        }
    }
}

/// One connection's story, for the journal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Connection {
    /// What the CONNECT line asked for (escaped), or what could be read.
    pub target: String,
    /// The address dialed, once one was.
    pub address: Option<SocketAddr>,
    /// `Err(why)` when it was refused or failed.
    pub verdict: Result<(), String>,
}

/// What a run's proxy lets through, and where it tells of each connection.
pub struct Plan<'a> {
    /// The hosts (lower-case name, port) the manifest declares and the PIN
    /// granted.
    pub hosts: Vec<(String, u16)>,
    pub resolver: &'a Resolver,
    /// Journals a connection; `false` when the line could not be written
    /// (then an allowed connection is not made).
    pub journal: Box<dyn Fn(&Connection) -> bool + Sync + 'a>,
}

/// The namespace and port a run's cage enters and is told of.
#[derive(Clone, Copy, Debug)]
pub struct Way {
    pub netns: RawFd,
    pub port: u16,
}

impl Way {
    /// The environment that points a program at the proxy.
    pub fn env(&self) -> Vec<(String, String)> {
        let url = format!("http://127.0.0.1:{}", self.port);
        [
            "https_proxy",
            "HTTPS_PROXY",
            "http_proxy",
            "HTTP_PROXY",
            "ALL_PROXY",
        ]
        .iter()
        .map(|k| ((*k).to_string(), url.clone()))
        .collect()
    }
}

/// Runs `run` with a proxy serving `plan` in a namespace of its own; the
/// proxy stops, every connection of it closed, when `run` returns.
pub fn with_proxy<R>(plan: &Plan<'_>, run: impl FnOnce(Way) -> R) -> Result<R, String> {
    let (ns, listener) = crate::system::loopback_namespace()
        .map_err(|e| format!("cannot make the run's network namespace: {e}"))?;
    let port = listener
        .local_addr()
        .map_err(|e| format!("cannot read the proxy's port: {e}"))?
        .port();
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("cannot set up the proxy: {e}"))?;
    let proxy = Proxy {
        plan,
        stop: AtomicBool::new(false),
        open: Mutex::new(HashMap::new()),
        next: AtomicU64::new(0),
        active: AtomicUsize::new(0),
        refused: AtomicUsize::new(0),
    };
    let way = Way {
        netns: ns.as_raw_fd(),
        port,
    };
    let result = std::thread::scope(|s| {
        s.spawn(|| proxy.accept_loop(s, &listener));
        let r = run(way);
        proxy.stop.store(true, Ordering::SeqCst);
        for stream in proxy
            .open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
        {
            let _ = stream.shutdown(Shutdown::Both);
        }
        r
    });
    let refused = proxy.refused.load(Ordering::SeqCst);
    if refused > MAX_REFUSED_LINES {
        (plan.journal)(&Connection {
            target: "(more)".into(),
            address: None,
            verdict: Err(format!(
                "{} more connections were refused in this run, not journaled one by one",
                refused - MAX_REFUSED_LINES
            )),
        });
    }
    drop(ns);
    Ok(result)
}

struct Proxy<'p, 'a> {
    plan: &'p Plan<'a>,
    stop: AtomicBool,
    /// A clone of each stream open now, by its number: shut down when the
    /// run ends, taken out when its connection does.
    open: Mutex<HashMap<u64, TcpStream>>,
    next: AtomicU64,
    active: AtomicUsize,
    /// Refused connections so far in the run.
    refused: AtomicUsize,
}

/// Counts a connection while it lives.
struct Active<'c>(&'c AtomicUsize);

impl Drop for Active<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A stream's clone kept for the run's end, taken out when this drops.
struct Kept<'c> {
    open: &'c Mutex<HashMap<u64, TcpStream>>,
    id: u64,
}

impl Drop for Kept<'_> {
    fn drop(&mut self) {
        self.open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.id);
    }
}

/// Reads into `buf` what comes before `deadline`.
fn read_by(stream: &mut TcpStream, buf: &mut Vec<u8>, deadline: Instant) -> std::io::Result<usize> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(std::io::ErrorKind::TimedOut.into());
    }
    stream.set_read_timeout(Some(left))?;
    let mut chunk = [0u8; 4096];
    let n = stream.read(&mut chunk)?;
    buf.extend_from_slice(&chunk[..n]);
    Ok(n)
}

impl<'p, 'a> Proxy<'p, 'a> {
    fn accept_loop<'s>(&'s self, s: &'s std::thread::Scope<'s, '_>, listener: &TcpListener) {
        while !self.stop.load(Ordering::SeqCst) {
            match listener.accept() {
                Ok((stream, _)) => {
                    if stream.set_nonblocking(false).is_err() {
                        continue;
                    }
                    if self.active.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
                        let _guard = Active(&self.active);
                        self.refuse(
                            stream,
                            "?".into(),
                            format!("more than {MAX_CONNECTIONS} connections at once"),
                        );
                        continue;
                    }
                    let guard = Active(&self.active);
                    let Some(kept) = self.keep(&stream) else {
                        continue;
                    };
                    s.spawn(move || {
                        let _guard = guard;
                        let _kept = kept;
                        self.serve(s, stream);
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    /// Keeps a clone to shut down at the run's end; `None` when there is
    /// none or the run is ending (the stream is then closed).
    fn keep(&self, stream: &TcpStream) -> Option<Kept<'_>> {
        let clone = stream.try_clone().ok()?;
        let id = self.next.fetch_add(1, Ordering::SeqCst);
        self.open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, clone);
        let kept = Kept {
            open: &self.open,
            id,
        };
        // Stopped meanwhile: this one is closed too.
        if self.stop.load(Ordering::SeqCst) {
            let _ = stream.shutdown(Shutdown::Both);
            return None;
        }
        Some(kept)
    }

    /// Journals a refused connection: one by one up to the bound, counted
    /// past it.
    fn note_refused(&self, c: &Connection) {
        if self.refused.fetch_add(1, Ordering::SeqCst) < MAX_REFUSED_LINES {
            (self.plan.journal)(c);
        }
    }

    /// Answers 403 with why, closes, journals.
    fn refuse(&self, mut stream: TcpStream, target: String, why: String) {
        let body = format!("refused by the Aromba Warden: {why}\n");
        let _ = write!(
            stream,
            "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        self.close(stream, target, why);
    }

    /// Closes a tunnel already open (nothing is written into it: the
    /// client speaks TLS there), journals why.
    fn close(&self, stream: TcpStream, target: String, why: String) {
        let _ = stream.shutdown(Shutdown::Both);
        self.note_refused(&Connection {
            target,
            address: None,
            verdict: Err(why),
        });
    }

    fn serve<'s>(&'s self, s: &'s std::thread::Scope<'s, '_>, mut client: TcpStream) {
        // One deadline for the request and the ClientHello together: a
        // client trickling a byte at a time does not hold its slot longer.
        let deadline = Instant::now() + HANDSHAKE_TIMEOUT;
        let mut buf = Vec::new();
        let end = loop {
            if let Some(end) = connect::end_of_request(&buf) {
                break end;
            }
            if buf.len() >= connect::MAX_REQUEST {
                return self.refuse(client, "?".into(), "the request is too long".into());
            }
            match read_by(&mut client, &mut buf, deadline) {
                Ok(0) | Err(_) => {
                    return self.refuse(client, "?".into(), "no whole request came in time".into());
                }
                Ok(_) => {}
            }
        };
        let target = match connect::parse(&buf[..end]) {
            Ok(t) => t,
            Err(why) => {
                let line =
                    String::from_utf8_lossy(buf.split(|b| *b == b'\r').next().unwrap_or_default())
                        .into_owned();
                return self.refuse(client, connect::printable(&line), why);
            }
        };
        let shown = target.to_string();
        let (name, port) = match target {
            Target::Address(..) => {
                return self.refuse(
                    client,
                    shown,
                    "an IP address: a skill reaches only the host names its manifest declares"
                        .into(),
                );
            }
            Target::Name(name, port) => (name, port),
        };
        if !self
            .plan
            .hosts
            .iter()
            .any(|(n, p)| *n == name && *p == port)
        {
            return self.refuse(
                client,
                shown,
                "not a host its manifest declares and the PIN granted".into(),
            );
        }
        if client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .is_err()
        {
            return;
        }
        // The tunnel's first bytes: a whole TLS record holding the
        // ClientHello, whose server name must be the CONNECT line's.
        let mut record = buf.split_off(end);
        loop {
            if let Some(len) = hello::record_len(&record)
                && record.len() >= len.min(hello::MAX_RECORD)
            {
                break;
            }
            if record.len() >= hello::MAX_RECORD {
                break;
            }
            match read_by(&mut client, &mut record, deadline) {
                Ok(0) | Err(_) => {
                    return self.close(client, shown, "no TLS ClientHello came in time".into());
                }
                Ok(_) => {}
            }
        }
        let first = hello::record_len(&record)
            .unwrap_or(record.len())
            .min(record.len());
        match hello::server_name(&record[..first]) {
            Ok(sni) if sni == name => {}
            Ok(sni) => {
                return self.close(
                    client,
                    shown,
                    format!(
                        "its TLS names {}, not the host it asked for",
                        connect::printable(&sni)
                    ),
                );
            }
            Err(why) => return self.close(client, shown, why),
        }
        // Resolved once, checked, and dialed as checked: no second lookup
        // a rebinding name could answer otherwise.
        let addresses = match self.plan.resolver.lookup(&name, port) {
            Ok(a) if !a.is_empty() => a,
            Ok(_) => return self.close(client, shown, format!("{name} does not resolve")),
            Err(why) => return self.close(client, shown, why),
        };
        let mut refusal = None;
        let chosen = addresses
            .iter()
            .copied()
            .find(|a| match self.plan.resolver.may_reach(*a) {
                Ok(()) => true,
                Err(why) => {
                    refusal.get_or_insert(format!("{name} resolves to {a}: {why}"));
                    false
                }
            });
        let Some(ip) = chosen else {
            let why = refusal.unwrap_or_else(|| format!("{name} does not resolve"));
            return self.close(client, shown, why);
        };
        let addr = SocketAddr::new(ip, port);
        // Journaled before it is dialed: a connection the journal cannot
        // hold is not made.
        let allowed = Connection {
            target: shown.clone(),
            address: Some(addr),
            verdict: Ok(()),
        };
        if !(self.plan.journal)(&allowed) {
            let _ = client.shutdown(Shutdown::Both);
            return;
        }
        let upstream = match TcpStream::connect_timeout(&addr, HANDSHAKE_TIMEOUT) {
            Ok(u) => u,
            Err(e) => {
                let _ = client.shutdown(Shutdown::Both);
                self.note_refused(&Connection {
                    target: shown,
                    address: Some(addr),
                    verdict: Err(format!("cannot connect: {e}")),
                });
                return;
            }
        };
        let Some(_kept) = self.keep(&upstream) else {
            let _ = client.shutdown(Shutdown::Both);
            return;
        };
        let _ = client.set_read_timeout(None);
        let mut up_write = upstream;
        if up_write.write_all(&record).is_err() {
            let _ = client.shutdown(Shutdown::Both);
            return;
        }
        let (Ok(mut up_read), Ok(mut client_write)) = (up_write.try_clone(), client.try_clone())
        else {
            let _ = client.shutdown(Shutdown::Both);
            let _ = up_write.shutdown(Shutdown::Both);
            return;
        };
        let back = s.spawn(move || {
            let _ = std::io::copy(&mut up_read, &mut client_write);
            let _ = client_write.shutdown(Shutdown::Write);
        });
        let _ = std::io::copy(&mut client, &mut up_write);
        let _ = up_write.shutdown(Shutdown::Write);
        // The slot is held until both directions end: a half-closed tunnel
        // still counts against the run's bound.
        let _ = back.join();
    }
}
