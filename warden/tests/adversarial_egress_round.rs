//! The egress proxy attacked again from inside a caged skill chore, through
//! a real Warden (each test its own): CONNECT line tricks, requests over
//! 4 KiB, ClientHello tricks (split, doubled, huge, odd names), pipelined
//! bytes, silent and trickled connections, tunnels half-closed to slip the
//! 16-connection cap, a backgrounded process holding a tunnel after the
//! chore ends, the proxy's port from the host or another run, every other
//! way out of the namespace (raw, packet, vsock, netlink, IPv6, UDP, DNS,
//! sysctls), a name resolving to several addresses, embedded IPv4 in
//! IPv6, descriptors the Warden keeps during and after a run, journal
//! floods, a journal that cannot be written, and a dry run's network.
//!
//! The chores are Python programs (`/usr/bin/python3`, visible in the
//! cage) writing `label|status|rest` lines.

use aromba_testkit::skills::{Publisher, bundle_file, chore, manifest};
use aromba_testkit::warden::Warden;
use aromba_warden::egress::{Resolver, address::not_public, hello};
use aromba_warden::journal::Rotation;
use aromba_warden::server::ServeOptions;
use aromba_warden_proto::{
    MAX_RESPONSE, Request, Response, decode_response, encode_request, read_frame, write_frame,
};
use serde_json::json;
use std::io::{Read, Write};
use std::net::{IpAddr, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

const PIN: &str = "4729135";
const ACME: &str = "acme.example.org";
/// The hang guard: every run must end within this.
const RUN_LIMIT: Duration = Duration::from_secs(120);

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn lookup(name: &str) -> Vec<IpAddr> {
    match name {
        "acme.example.org" => vec![ip("127.0.0.1")],
        // Private, metadata (plain and mapped), unspecified and loopback
        // first; the test's stand-in for a public address last.
        "mixed.example.org" => vec![
            ip("10.0.0.7"),
            ip("169.254.169.254"),
            ip("::ffff:169.254.169.254"),
            ip("0.0.0.0"),
            ip("::1"),
            ip("127.0.0.2"),
            ip("127.0.0.1"),
        ],
        "zero.example.org" => vec![ip("0.0.0.0")],
        "mapped.example.org" => vec![ip("::ffff:127.0.0.1")],
        "loop2.example.org" => vec![ip("127.0.0.2")],
        "v6loop.example.org" => vec![ip("::1"), ip("::")],
        "cgnat.example.org" => vec![ip("100.64.1.1"), ip("fd00:ec2::254")],
        _ => vec![],
    }
}

fn test_resolver(o: &mut ServeOptions) {
    o.egress_resolver = Resolver::Fixed {
        lookup: Arc::new(lookup),
        reachable: vec!["127.0.0.1".parse().unwrap()],
    };
}

/// As [`test_resolver`], with a journal that rotates (and drops) after a
/// few KiB.
fn small_journal(o: &mut ServeOptions) {
    test_resolver(o);
    o.journal_rotation = Rotation {
        max_bytes: 16 << 10,
        keep: 4,
        keep_bytes: 64 << 10,
        drop_alarm: 2,
        drop_window: Duration::from_secs(86_400),
        min_history: Duration::from_secs(7 * 86_400),
    };
}

/// A loopback server standing for the declared hosts.
#[derive(Clone)]
struct Upstream {
    port: u16,
    /// What each connection sent before its first answer.
    got: Arc<Mutex<Vec<Vec<u8>>>>,
    accepted: Arc<AtomicUsize>,
    open: Arc<AtomicUsize>,
    max_open: Arc<AtomicUsize>,
    closed: Arc<AtomicUsize>,
}

/// `hold`: after answering, keep the connection, say `SECOND` three seconds
/// later and keep writing a dot every half second until the peer is gone
/// (as a download does). Otherwise answer one line and close.
fn upstream(hold: bool) -> Upstream {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let up = Upstream {
        port: listener.local_addr().unwrap().port(),
        got: Arc::default(),
        accepted: Arc::default(),
        open: Arc::default(),
        max_open: Arc::default(),
        closed: Arc::default(),
    };
    let u = up.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let u = u.clone();
            u.accepted.fetch_add(1, Ordering::SeqCst);
            let now = u.open.fetch_add(1, Ordering::SeqCst) + 1;
            u.max_open.fetch_max(now, Ordering::SeqCst);
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = vec![0u8; 65536];
                let _ = s.set_read_timeout(Some(Duration::from_secs(3)));
                if let Ok(n) = s.read(&mut chunk) {
                    buf.extend_from_slice(&chunk[..n]);
                    let _ = s.set_read_timeout(Some(Duration::from_millis(300)));
                    while let Ok(n) = s.read(&mut chunk) {
                        if n == 0 {
                            break;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                    }
                }
                u.got.lock().unwrap().push(buf);
                let _ = s.write_all(b"UPSTREAM-SAYS-HELLO\n");
                if hold {
                    std::thread::sleep(Duration::from_secs(3));
                    let _ = s.write_all(b"SECOND\n");
                    for _ in 0..600 {
                        std::thread::sleep(Duration::from_millis(500));
                        if s.write_all(b".").is_err() {
                            break;
                        }
                    }
                }
                u.open.fetch_sub(1, Ordering::SeqCst);
                u.closed.fetch_add(1, Ordering::SeqCst);
            });
        }
    });
    up
}

/// What every chore program starts with.
const PRELUDE: &str = r#"import os, socket, sys, time, select, struct, errno, threading
PORT = int(os.environ.get('https_proxy', 'x:0').rsplit(':', 1)[1])
DIR = 'TOUCHED'
UP = UPPORT
HELLO = bytes.fromhex('HELLOHEX')
def out(*a):
    print('|'.join(str(x) for x in a), flush=True)
def conn(t=15):
    return socket.create_connection(('127.0.0.1', PORT), timeout=t)
def head(s):
    buf = b''
    while b'\r\n\r\n' not in buf:
        try:
            c = s.recv(4096)
        except Exception:
            break
        if not c:
            break
        buf += c
    status, _, rest = buf.partition(b'\r\n\r\n')
    return status.split(b'\r\n')[0].decode('latin-1'), rest
def tail(s, rest=b'', t=15):
    s.settimeout(t)
    buf = rest
    while True:
        try:
            c = s.recv(65536)
        except Exception:
            return buf.decode('latin-1').strip().replace('\n', ' ') + '<open>'
        if not c:
            return buf.decode('latin-1').strip().replace('\n', ' ')
        buf += c
def attempt(label, req, pieces=(), delay=0.3, shut=False):
    try:
        s = conn()
    except Exception as e:
        out(label, 'no connection', type(e).__name__)
        return
    try:
        s.sendall(req)
    except Exception:
        pass
    st, rest = head(s)
    if st.startswith('HTTP/1.1 200'):
        for i, p in enumerate(pieces):
            if i:
                time.sleep(delay)
            try:
                s.sendall(p)
            except Exception:
                pass
        if shut:
            try:
                s.shutdown(socket.SHUT_WR)
            except Exception:
                pass
    out(label, st, tail(s, rest))
    s.close()
def wait_for(name, secs=90):
    for _ in range(secs * 10):
        if os.path.exists(os.path.join(DIR, name)):
            return True
        time.sleep(0.1)
    return False
def touch(name, text=''):
    with open(os.path.join(DIR, name), 'w') as f:
        f.write(text)
"#;

/// A real run's body: the dry run does nothing, the real run writes
/// `TOUCHED/out`.
fn py_real(program: &str) -> String {
    format!(
        "[ \"$1\" = --dry-run ] && exit 0\npython3 - > TOUCHED/out 2>&1 <<'PY'\n{PRELUDE}{program}PY"
    )
}

/// A body that runs `program` whatever the mode, to standard output.
fn py_any(program: &str) -> String {
    format!("python3 - 2>&1 <<'PY'\n{PRELUDE}{program}PY")
}

/// `bytes` as a Python expression.
fn py(bytes: &[u8]) -> String {
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("bytes.fromhex('{hex}')")
}

/// `s` as a Python expression, its placeholders (`UPPORT`, `UPHEX`,
/// `PLUS65536`) left as text for `setup` to put the port in.
fn py_spelt(s: &str) -> String {
    let mut parts = Vec::new();
    let mut rest = s;
    while let Some((i, token)) = ["PLUS65536", "UPHEX", "UPPORT"]
        .iter()
        .filter_map(|t| rest.find(t).map(|i| (i, *t)))
        .min()
    {
        if i > 0 {
            parts.push(py(&rest.as_bytes()[..i]));
        }
        parts.push(format!("b'{token}'"));
        rest = &rest[i + token.len()..];
    }
    if !rest.is_empty() {
        parts.push(py(rest.as_bytes()));
    }
    parts.join(" + ")
}

fn connect_line(host: &str, port: u16) -> Vec<u8> {
    format!("CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n").into_bytes()
}

/// A skill `tag` with `hosts` (each at the upstream's port) and `chores`
/// (name, colour, body), installed with the PIN on a fresh Warden; each
/// green chore's dry run shown.
fn setup(
    tag: &str,
    adjust: fn(&mut ServeOptions),
    hold: bool,
    hosts: &[&str],
    chores: &[(&str, &str, String)],
) -> (Warden, Upstream) {
    let w = Warden::start_with(&format!("egress-round-{tag}"), true, &[], adjust);
    let up = upstream(hold);
    let acme = Publisher::new("acme-tools");
    acme.trust(&w);
    assert!(matches!(
        w.control(&Request::SetPin { pin: PIN.into() }),
        Response::Noted { .. }
    ));
    let names: Vec<&str> = chores.iter().map(|c| c.0).collect();
    let mut m = manifest(tag, "1.0.0", "acme-tools", &w.touched, &names);
    m["hosts"] = json!(
        hosts
            .iter()
            .map(|h| json!({"name": h, "port": up.port, "why": "a host of the tests"}))
            .collect::<Vec<_>>()
    );
    let touched = w.touched.to_string_lossy().into_owned();
    let hello_hex: String = hello::client_hello(ACME)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let scripts: Vec<(String, String)> = chores
        .iter()
        .map(|(name, color, body)| {
            let body = body
                .replace("TOUCHED", &touched)
                .replace("PLUS65536", &(u32::from(up.port) + 65536).to_string())
                .replace("UPHEX", &format!("{:x}", up.port))
                .replace("UPPORT", &up.port.to_string())
                .replace("HELLOHEX", &hello_hex);
            (
                format!("chores/{name}.sh"),
                chore(name, color, &w.touched, "# network: yes\n", &body),
            )
        })
        .collect();
    let files: Vec<(&str, &str)> = scripts
        .iter()
        .map(|(p, s)| (p.as_str(), s.as_str()))
        .collect();
    let path = bundle_file(&w, tag, &acme.bundle(m, &files));
    let Response::SkillShown { sha256, .. } =
        w.control(&Request::SkillCheck { path: path.clone() })
    else {
        panic!("the bundle was not shown")
    };
    let r = w.control(&Request::SkillInstall {
        path,
        sha256,
        pin: Some(PIN.into()),
    });
    assert!(matches!(r, Response::Noted { .. }), "{r:?}");
    for (name, color, _) in chores {
        if *color == "green" {
            w.dry_run_shown(name);
        }
    }
    (w, up)
}

fn on(socket: &Path, r: &Request) -> Response {
    let mut s = UnixStream::connect(socket).unwrap();
    write_frame(&mut s, &encode_request(r), 1 << 16).unwrap();
    decode_response(&read_frame(&mut s, MAX_RESPONSE).unwrap()).unwrap()
}

/// `r` on `socket` from a thread of its own: the answer, later.
fn in_background(socket: PathBuf, r: Request) -> mpsc::Receiver<Response> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(on(&socket, &r));
    });
    rx
}

/// A real run of `name` from a root terminal, started.
fn start_run(w: &Warden, name: &str) -> mpsc::Receiver<Response> {
    in_background(
        w.layout().control_socket(),
        Request::ChoreRun {
            name: name.into(),
            dry_run: false,
        },
    )
}

/// The answer, within the hang guard.
fn ended(rx: &mpsc::Receiver<Response>) -> Response {
    rx.recv_timeout(RUN_LIMIT)
        .expect("the run did not end within 120 s: the Warden hangs")
}

/// A real run of `name`, to its end (within the hang guard), and the
/// lines it wrote.
fn run(w: &Warden, name: &str) -> (Response, String) {
    let r = ended(&start_run(w, name));
    (r, output(w))
}

fn output(w: &Warden) -> String {
    std::fs::read_to_string(w.touched.join("out")).unwrap_or_default()
}

/// The `label|…` line of `text`, split.
fn line(text: &str, label: &str) -> Vec<String> {
    text.lines()
        .find(|l| l.starts_with(&format!("{label}|")))
        .unwrap_or_else(|| panic!("no {label} line in:\n{text}"))
        .split('|')
        .map(String::from)
        .collect()
}

fn egress_lines(w: &Warden) -> Vec<String> {
    w.journal()
        .lines()
        .filter(|l| l.contains("\"egress\""))
        .map(String::from)
        .collect()
}

fn wait_for_file(p: &Path, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if p.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

// ---- ClientHello building ---------------------------------------------

fn ext(kind: u16, data: &[u8]) -> Vec<u8> {
    let mut e = kind.to_be_bytes().to_vec();
    e.extend((data.len() as u16).to_be_bytes());
    e.extend(data);
    e
}

/// A server name extension listing `names` (type, bytes).
fn sni(names: &[(u8, &[u8])]) -> Vec<u8> {
    let mut list = Vec::new();
    for (kind, n) in names {
        list.push(*kind);
        list.extend((n.len() as u16).to_be_bytes());
        list.extend(*n);
    }
    let mut data = (list.len() as u16).to_be_bytes().to_vec();
    data.extend(list);
    ext(0, &data)
}

/// A ClientHello handshake message with `exts`.
fn handshake(exts: &[Vec<u8>]) -> Vec<u8> {
    let e = exts.concat();
    let mut h = vec![0x03, 0x03];
    h.extend([7u8; 32]);
    h.push(0);
    h.extend([0, 2, 0x13, 0x01]);
    h.extend([1, 0]);
    h.extend((e.len() as u16).to_be_bytes());
    h.extend(e);
    let mut hs = vec![0x01];
    hs.extend(&(h.len() as u32).to_be_bytes()[1..]);
    hs.extend(h);
    hs
}

fn record(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut r = vec![kind, 0x03, 0x01];
    r.extend((body.len() as u16).to_be_bytes());
    r.extend(body);
    r
}

fn hello_naming(name: &[u8]) -> Vec<u8> {
    record(0x16, &handshake(&[sni(&[(0, name)])]))
}

// ---- descriptors ------------------------------------------------------

/// The inode in `net:[N]`.
fn ns_inode(link: &str) -> u64 {
    link.trim()
        .trim_start_matches("net:[")
        .trim_end_matches(']')
        .parse()
        .unwrap_or_else(|_| panic!("not a namespace link: {link:?}"))
}

/// This process's descriptors (the Warden runs in it): how many are
/// sockets of the network namespace `ns`, and how many are that namespace
/// itself.
fn descriptors_in(ns: u64) -> (usize, usize) {
    let mut sockets = 0;
    let mut namespaces = 0;
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return (0, 0);
    };
    for e in dir.flatten() {
        let Ok(fd) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(link) = std::fs::read_link(e.path()) else {
            continue;
        };
        let link = link.to_string_lossy().into_owned();
        if link == format!("net:[{ns}]") {
            namespaces += 1;
        }
        if link.starts_with("socket:")
            && aromba_warden::system::socket_namespace(fd).is_ok_and(|ino| ino == ns)
        {
            sockets += 1;
        }
    }
    (sockets, namespaces)
}

// ---- the attacks ------------------------------------------------------

#[test]
fn connect_line_tricks_are_refused_and_only_the_declared_name_is_tunnelled() {
    // UPPORT, UPHEX and PLUS65536 are the upstream's port, in hex, and
    // plus 65536 (`setup` puts them in).
    let cases: Vec<(&str, String)> = vec![
        ("declared", "CONNECT acme.example.org:UPPORT HTTP/1.1"),
        (
            "upper-case-name",
            "CONNECT ACME.Example.ORG:UPPORT HTTP/1.1",
        ),
        ("http-1.0", "CONNECT acme.example.org:UPPORT HTTP/1.0"),
        (
            "lower-case-method",
            "connect acme.example.org:UPPORT HTTP/1.1",
        ),
        (
            "mixed-case-method",
            "Connect acme.example.org:UPPORT HTTP/1.1",
        ),
        (
            "absolute-form",
            "CONNECT https://acme.example.org:UPPORT/ HTTP/1.1",
        ),
        ("userinfo", "CONNECT x@acme.example.org:UPPORT HTTP/1.1"),
        ("tabs", "CONNECT\tacme.example.org:UPPORT\tHTTP/1.1"),
        ("double-space", "CONNECT  acme.example.org:UPPORT HTTP/1.1"),
        (
            "trailing-space",
            "CONNECT acme.example.org:UPPORT HTTP/1.1 ",
        ),
        ("leading-space", " CONNECT acme.example.org:UPPORT HTTP/1.1"),
        (
            "leading-crlf",
            "\r\nCONNECT acme.example.org:UPPORT HTTP/1.1",
        ),
        (
            "bare-lf-inside",
            "CONNECT acme.example.org:UPPORT HTTP/1.1\nX: y",
        ),
        ("http-2", "CONNECT acme.example.org:UPPORT HTTP/2"),
        ("http-1.2", "CONNECT acme.example.org:UPPORT HTTP/1.2"),
        ("lower-version", "CONNECT acme.example.org:UPPORT http/1.1"),
        ("nul-version", "CONNECT acme.example.org:UPPORT HTTP/1.1\0"),
        ("trailing-dot", "CONNECT acme.example.org.:UPPORT HTTP/1.1"),
        ("percent", "CONNECT acme%2eexample.org:UPPORT HTTP/1.1"),
        (
            "kelvin-sign",
            "CONNECT ac\u{212a}e.example.org:UPPORT HTTP/1.1",
        ),
        (
            "dotless-i",
            "CONNECT acme.examp\u{131}e.org:UPPORT HTTP/1.1",
        ),
        (
            "suffix",
            "CONNECT acme.example.org.evil.example.org:UPPORT HTTP/1.1",
        ),
        ("nul-host", "CONNECT acme.example.org\0:UPPORT HTTP/1.1"),
        ("port-plus", "CONNECT acme.example.org:+UPPORT HTTP/1.1"),
        ("port-zero-led", "CONNECT acme.example.org:0UPPORT HTTP/1.1"),
        (
            "port-overflow",
            "CONNECT acme.example.org:PLUS65536 HTTP/1.1",
        ),
        ("port-empty", "CONNECT acme.example.org: HTTP/1.1"),
        ("port-none", "CONNECT acme.example.org HTTP/1.1"),
        (
            "port-twice",
            "CONNECT acme.example.org:UPPORT:UPPORT HTTP/1.1",
        ),
        ("port-hex", "CONNECT acme.example.org:0xUPHEX HTTP/1.1"),
        ("ip", "CONNECT 127.0.0.1:UPPORT HTTP/1.1"),
        ("ip-decimal", "CONNECT 2130706433:UPPORT HTTP/1.1"),
        ("ip-hex-short", "CONNECT 0x7f.1:UPPORT HTTP/1.1"),
        ("ip-short", "CONNECT 127.1:UPPORT HTTP/1.1"),
        ("ip-octal", "CONNECT 0177.0.0.1:UPPORT HTTP/1.1"),
        ("ip-trailing-dot", "CONNECT 127.0.0.1.:UPPORT HTTP/1.1"),
        ("ip-zero", "CONNECT 0:UPPORT HTTP/1.1"),
        ("ip-bracketed-v4", "CONNECT [127.0.0.1]:UPPORT HTTP/1.1"),
        ("ip-mapped", "CONNECT [::ffff:127.0.0.1]:UPPORT HTTP/1.1"),
        ("ip-mapped-hex", "CONNECT [::ffff:7f00:1]:UPPORT HTTP/1.1"),
        ("ip-v6-loopback", "CONNECT [::1]:UPPORT HTTP/1.1"),
        ("ip-v6-zone", "CONNECT [::1%lo]:UPPORT HTTP/1.1"),
        ("ip-v6-any", "CONNECT [::]:UPPORT HTTP/1.1"),
        ("localhost", "CONNECT localhost:UPPORT HTTP/1.1"),
        ("metadata", "CONNECT 169.254.169.254:80 HTTP/1.1"),
    ]
    .into_iter()
    .map(|(l, s)| (l, s.to_string()))
    .collect();
    let mut program = String::new();
    for (label, l) in &cases {
        program.push_str(&format!(
            "attempt('{label}', {} + b'\\r\\nHost: acme.example.org\\r\\n\\r\\n', [HELLO])\n",
            py_spelt(l)
        ));
    }
    // A Host header naming the declared host does not make another
    // target one.
    program.push_str(
        "attempt('host-header', b'CONNECT evil.example.org:' + str(UP).encode() + b' HTTP/1.1\\r\\nHost: acme.example.org:' + str(UP).encode() + b'\\r\\n\\r\\n', [HELLO])\n",
    );
    program.push_str(
        "attempt('not-utf8', b'CONNECT acme.example.org\\xff:' + str(UP).encode() + b' HTTP/1.1\\r\\n\\r\\n', [HELLO])\n",
    );
    program.push_str(
        "attempt('long-name', b'CONNECT ' + b'a' * 300 + b'.example.org:' + str(UP).encode() + b' HTTP/1.1\\r\\n\\r\\n', [HELLO])\n",
    );
    let (w, up) = setup(
        "tricks",
        test_resolver,
        false,
        &[ACME],
        &[("tricks", "green", py_real(&program))],
    );
    let (r, text) = run(&w, "tricks");
    assert!(matches!(r, Response::Receipt { .. }), "{r:?}");
    let allowed = ["declared", "upper-case-name", "http-1.0"];
    for (label, _) in &cases {
        let l = line(&text, label);
        if allowed.contains(label) {
            assert_eq!(
                (l[1].as_str(), l[2].as_str()),
                ("HTTP/1.1 200 Connection established", "UPSTREAM-SAYS-HELLO"),
                "{label}: {text}"
            );
        } else {
            assert_eq!(
                l[1], "HTTP/1.1 403 Forbidden",
                "{label} was not refused: {text}"
            );
        }
    }
    for label in ["host-header", "not-utf8", "long-name"] {
        assert_eq!(
            line(&text, label)[1],
            "HTTP/1.1 403 Forbidden",
            "{label}: {text}"
        );
    }
    // Only the three declared connections reached the host, each with its
    // ClientHello whole, and every connection was journaled.
    let got = up.got.lock().unwrap();
    assert_eq!(got.len(), allowed.len(), "{got:?}");
    for g in got.iter() {
        assert_eq!(g, &hello::client_hello(ACME));
    }
    // Refusals are journaled one by one up to the run's bound, then
    // counted in one line at its end; every allowed one is a line.
    let egress = egress_lines(&w);
    let bound = aromba_warden::egress::MAX_REFUSED_LINES;
    assert!(cases.len() > bound);
    assert_eq!(egress.len(), bound + allowed.len() + 1, "{egress:#?}");
    assert_eq!(
        egress.iter().filter(|l| l.contains("\"allowed\"")).count(),
        allowed.len()
    );
    let more = format!(
        "{} more connections were refused in this run",
        cases.len() - bound
    );
    assert!(egress.iter().any(|l| l.contains(&more)), "{egress:#?}");
}

#[test]
fn a_request_over_4_kib_is_refused_and_one_under_it_is_read_whole() {
    let program = r#"
req = b'CONNECT acme.example.org:' + str(UP).encode() + b' HTTP/1.1\r\n'
attempt('long-header', req + b'X-Pad: ' + b'a' * 5000 + b'\r\n\r\n', [HELLO])
attempt('no-end', req + b'X-Pad: ' + b'a' * 9000, [HELLO])
attempt('long-line', b'CONNECT ' + b'a' * 5000 + b'.example.org:443 HTTP/1.1\r\n\r\n', [HELLO])
attempt('many-headers', req + b'X: y\r\n' * 1000 + b'\r\n', [HELLO])
attempt('under-4k', req + b'X-Pad: ' + b'a' * 3900 + b'\r\n\r\n', [HELLO])
"#;
    let (w, up) = setup(
        "size",
        test_resolver,
        false,
        &[ACME],
        &[("size", "green", py_real(program))],
    );
    let (_, text) = run(&w, "size");
    for label in ["long-header", "no-end", "long-line", "many-headers"] {
        let l = line(&text, label);
        assert_eq!(l[1], "HTTP/1.1 403 Forbidden", "{label}: {text}");
        assert!(l[2].contains("too long"), "{label}: {text}");
    }
    assert_eq!(line(&text, "under-4k")[2], "UPSTREAM-SAYS-HELLO", "{text}");
    assert_eq!(up.got.lock().unwrap().len(), 1);
}

#[test]
fn client_hello_tricks_reach_nothing_but_a_hello_naming_the_declared_host() {
    let acme = ACME.as_bytes();
    let evil = b"evil.example.org".as_slice();
    assert_eq!(hello_naming(acme), hello::client_hello(ACME), "the builder");
    let whole = hello_naming(acme);
    let hs = handshake(&[sni(&[(0, acme)])]);
    let mut huge = record(0x16, &handshake(&[sni(&[(0, evil)])]));
    huge[3] = 0xff;
    huge[4] = 0xff;
    // Its 70,000 bytes of padding are made in the cage (an argument that
    // long would not reach bubblewrap).
    let mut hello_len_lies = record(0x16, &hs);
    hello_len_lies[6] = 0x00;
    hello_len_lies[7] = 0xff;
    hello_len_lies[8] = 0xff;
    let no_sni = record(0x16, &handshake(&[ext(10, &[0, 2, 0, 0x1d])]));
    let evil_pieces: Vec<Vec<u8>> = {
        let e = hello_naming(evil);
        vec![e[..3].to_vec(), e[3..40].to_vec(), e[40..].to_vec()]
    };
    let acme_pieces = vec![
        whole[..3].to_vec(),
        whole[3..40].to_vec(),
        whole[40..].to_vec(),
    ];
    // (label, pieces sent after the 200, half-close after them, allowed)
    let cases: Vec<(&str, Vec<Vec<u8>>, bool, bool)> = vec![
        ("whole", vec![whole.clone()], false, true),
        ("segments", acme_pieces, false, true),
        ("segments-evil", evil_pieces, false, false),
        (
            "hello-then-extra",
            vec![[whole.clone(), b"EXTRA".to_vec()].concat()],
            false,
            true,
        ),
        (
            "sni-upper-case",
            vec![hello_naming(b"ACME.EXAMPLE.ORG")],
            false,
            true,
        ),
        (
            "split-records",
            vec![[record(0x16, &hs[..30]), record(0x16, &hs[30..])].concat()],
            false,
            false,
        ),
        (
            "two-sni-acme-first",
            vec![record(
                0x16,
                &handshake(&[sni(&[(0, acme)]), sni(&[(0, evil)])]),
            )],
            false,
            false,
        ),
        (
            "two-sni-evil-first",
            vec![record(
                0x16,
                &handshake(&[sni(&[(0, evil)]), sni(&[(0, acme)])]),
            )],
            false,
            false,
        ),
        (
            "two-names-in-one-list",
            vec![record(0x16, &handshake(&[sni(&[(0, acme), (0, evil)])]))],
            false,
            false,
        ),
        (
            "name-type-1",
            vec![record(0x16, &handshake(&[sni(&[(1, acme)])]))],
            false,
            false,
        ),
        (
            "sni-trailing-dot",
            vec![hello_naming(b"acme.example.org.")],
            false,
            false,
        ),
        (
            "sni-nul",
            vec![hello_naming(b"acme.example.org\0.evil.example.org")],
            false,
            false,
        ),
        (
            "sni-suffix",
            vec![hello_naming(b"acme.example.org.evil.example.org")],
            false,
            false,
        ),
        (
            "sni-prefix",
            vec![hello_naming(b"evil.acme.example.org")],
            false,
            false,
        ),
        ("sni-evil", vec![hello_naming(evil)], false, false),
        ("no-sni", vec![no_sni], false, false),
        (
            "huge-record",
            vec![[huge, b"HUGE".to_vec()].concat()],
            false,
            false,
        ),
        ("hello-len-lies", vec![hello_len_lies], false, false),
        (
            "record-cut",
            vec![record(0x16, &hs[..hs.len() - 5])],
            true,
            false,
        ),
        ("app-data-record", vec![record(0x17, &hs)], false, false),
        (
            "ccs-first",
            vec![[record(0x14, &[1]), whole.clone()].concat()],
            false,
            false,
        ),
        (
            "sslv2",
            vec![b"\x80\x2e\x01\x03\x01\x00\x15\x00\x00\x00\x10".to_vec()],
            true,
            false,
        ),
        (
            "plain-http",
            vec![b"GET / HTTP/1.1\r\nHost: acme.example.org\r\n\r\n".to_vec()],
            true,
            false,
        ),
        ("eof", vec![], true, false),
    ];
    let mut program = String::new();
    for (label, pieces, shut, _) in &cases {
        let pieces: Vec<String> = pieces
            .iter()
            .map(|p| match p.strip_suffix(b"HUGE") {
                Some(head) => format!("{} + bytes(70000)", py(head)),
                None => py(p),
            })
            .collect();
        program.push_str(&format!(
            "attempt('{label}', b'CONNECT acme.example.org:' + str(UP).encode() + b' HTTP/1.1\\r\\n\\r\\n', [{}], shut={})\n",
            pieces.join(", "),
            if *shut { "True" } else { "False" }
        ));
    }
    // Pipelined: the hello in the CONNECT's own write; a second CONNECT
    // where the hello should be.
    program.push_str(
        "attempt('pipelined-hello', b'CONNECT acme.example.org:' + str(UP).encode() + b' HTTP/1.1\\r\\n\\r\\n' + HELLO)\n",
    );
    program.push_str(
        "attempt('pipelined-connect', b'CONNECT acme.example.org:' + str(UP).encode() + b' HTTP/1.1\\r\\n\\r\\nCONNECT evil.example.org:' + str(UP).encode() + b' HTTP/1.1\\r\\n\\r\\n', shut=True)\n",
    );
    let (w, up) = setup(
        "hello",
        test_resolver,
        false,
        &[ACME],
        &[("hello", "green", py_real(&program))],
    );
    let (_, text) = run(&w, "hello");
    let mut allowed = 1; // pipelined-hello
    for (label, _, _, ok) in &cases {
        let l = line(&text, label);
        assert_eq!(
            l[1], "HTTP/1.1 200 Connection established",
            "{label}: {text}"
        );
        if *ok {
            allowed += 1;
            assert_eq!(l[2], "UPSTREAM-SAYS-HELLO", "{label}: {text}");
        } else {
            assert_eq!(l[2], "", "{label} reached something: {text}");
        }
    }
    assert_eq!(
        line(&text, "pipelined-hello")[2],
        "UPSTREAM-SAYS-HELLO",
        "{text}"
    );
    assert_eq!(line(&text, "pipelined-connect")[2], "", "{text}");
    // Whatever reached the host began with a ClientHello naming it.
    let got = up.got.lock().unwrap();
    assert_eq!(got.len(), allowed, "{got:?}");
    for g in got.iter() {
        let first = hello::record_len(g).unwrap().min(g.len());
        assert_eq!(hello::server_name(&g[..first]).as_deref(), Ok(ACME));
    }
}

#[test]
fn silent_connections_beyond_sixteen_are_refused_and_the_run_still_ends() {
    let program = r#"
silent = [conn() for _ in range(16)]
time.sleep(1)
s = conn()
s.sendall(b'CONNECT acme.example.org:' + str(UP).encode() + b' HTTP/1.1\r\n\r\n')
st, rest = head(s)
out('seventeenth', st, tail(s, rest, 5))
touch('silent')
# Kept open, never spoken on, past the chore's end: a child holds them.
pid = os.fork()
if pid == 0:
    os.setsid()
    time.sleep(1000)
    os._exit(0)
out('main', 'exits')
"#;
    let (w, _up) = setup(
        "silent",
        test_resolver,
        false,
        &[ACME],
        &[("silent", "green", py_real(program))],
    );
    let rx = start_run(&w, "silent");
    // While 16 sit silent, the Warden still answers its root terminal.
    assert!(wait_for_file(&w.touched.join("silent"), RUN_LIMIT));
    let _ = w.status();
    let r = ended(&rx);
    assert!(matches!(r, Response::Receipt { .. }), "{r:?}");
    let text = output(&w);
    let l = line(&text, "seventeenth");
    assert_eq!(l[1], "HTTP/1.1 403 Forbidden", "{text}");
    assert!(l[2].contains("more than 16 connections"), "{text}");
    assert!(
        egress_lines(&w)
            .iter()
            .any(|l| l.contains("more than 16 connections at once")),
    );
    let _ = w.status();
}

#[test]
fn a_trickled_request_or_hello_is_cut_at_the_handshake_deadline() {
    // One byte every 3 s: each read is under the proxy's 10 s timeout, the
    // whole exchange far over it.
    let program = r#"
def trickle(label, first, rest):
    s = conn()
    s.sendall(first)
    if first:
        st, _ = head(s)
        if not st.startswith('HTTP/1.1 200'):
            out(label, 'not tunnelled', st)
            return
    start = time.time()
    for b in rest:
        time.sleep(3)
        try:
            s.sendall(bytes([b]))
        except Exception:
            out(label, 'closed', int(time.time() - start))
            return
        r, _, _ = select.select([s], [], [], 0)
        if r:
            out(label, 'closed', int(time.time() - start))
            return
        if time.time() - start > 45:
            break
    out(label, 'open', int(time.time() - start))
req = b'CONNECT acme.example.org:' + str(UP).encode() + b' HTTP/1.1\r\nX-Pad: ' + b'a' * 100 + b'\r\n\r\n'
t = threading.Thread(target=trickle, args=('request', b'', req))
t.start()
trickle('hello', b'CONNECT acme.example.org:' + str(UP).encode() + b' HTTP/1.1\r\n\r\n', HELLO)
t.join()
"#;
    let (w, up) = setup(
        "trickle",
        test_resolver,
        false,
        &[ACME],
        &[("trickle", "green", py_real(program))],
    );
    let (_, text) = run(&w, "trickle");
    for label in ["request", "hello"] {
        let l = line(&text, label);
        let secs: u64 = l[2].parse().unwrap();
        assert!(
            l[1] == "closed" && secs <= 25,
            "{label}: a connection trickling one byte every 3 s was still open after {secs} s \
             (the proxy's HANDSHAKE_TIMEOUT is 10 s, per read, not per exchange): {text}"
        );
    }
    assert_eq!(up.accepted.load(Ordering::SeqCst), 0);
}

#[test]
fn half_closed_tunnels_do_not_slip_past_the_sixteen_connection_cap() {
    // Each tunnel: the request and its hello, then the client's half of
    // the connection closed; the host's answer keeps flowing back.
    let program = r#"
socks = []
for i in range(24):
    s = conn()
    s.sendall(b'CONNECT acme.example.org:' + str(UP).encode() + b' HTTP/1.1\r\n\r\n' + HELLO)
    st, rest = head(s)
    if not st.startswith('HTTP/1.1 200'):
        out('tunnel', i, st)
        s.close()
        continue
    s.shutdown(socket.SHUT_WR)
    socks.append((s, rest))
    time.sleep(0.2)
time.sleep(5)
flowing = 0
for s, rest in socks:
    s.settimeout(2)
    buf = rest
    try:
        while b'SECOND' not in buf:
            c = s.recv(4096)
            if not c:
                break
            buf += c
    except Exception:
        pass
    if b'SECOND' in buf:
        flowing += 1
out('flowing', flowing, len(socks))
"#;
    let (w, up) = setup(
        "halfclose",
        test_resolver,
        true,
        &[ACME],
        &[("halfclose", "green", py_real(program))],
    );
    let (_, text) = run(&w, "halfclose");
    let l = line(&text, "flowing");
    let flowing: usize = l[1].parse().unwrap();
    let max_open = up.max_open.load(Ordering::SeqCst);
    assert!(
        flowing <= 16 && max_open <= 16,
        "{flowing} tunnels carried the host's bytes at once and the host saw {max_open} \
         connections open at once: a half-closed tunnel frees its slot while its other \
         direction (a Warden thread, two sockets) lives on: {text}"
    );
}

#[test]
fn a_backgrounded_process_holding_a_tunnel_is_cut_when_the_run_ends() {
    let program = r#"
r, wr = os.pipe()
pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork():
        os._exit(0)
    s = conn()
    s.sendall(b'CONNECT acme.example.org:' + str(UP).encode() + b' HTTP/1.1\r\n\r\n' + HELLO)
    st, rest = head(s)
    s.settimeout(10)
    got = rest
    while b'UPSTREAM' not in got:
        got += s.recv(100)
    os.write(wr, b'held\n')
    time.sleep(1000)
    os._exit(0)
os.waitpid(pid, 0)
ready = select.select([r], [], [], 30)[0]
out('background', 'held' if ready else 'not held')
"#;
    let (w, up) = setup(
        "background",
        test_resolver,
        true,
        &[ACME],
        &[("background", "green", py_real(program))],
    );
    let (r, text) = run(&w, "background");
    assert!(matches!(r, Response::Receipt { .. }), "{r:?}");
    assert_eq!(line(&text, "background")[1], "held", "{text}");
    // The host sees its connection closed soon after the run.
    let start = Instant::now();
    while up.closed.load(Ordering::SeqCst) < 1 && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(up.accepted.load(Ordering::SeqCst), 1);
    assert_eq!(
        up.closed.load(Ordering::SeqCst),
        1,
        "the tunnel outlived the run"
    );
}

#[test]
fn the_proxy_port_is_not_reachable_from_the_host_or_from_another_run() {
    let holder = py_real(
        r#"
touch('port', str(PORT))
wait_for('go')
"#,
    );
    let peeker = py_any(
        r#"
other = int(open(os.path.join(DIR, 'port')).read())
if other == PORT:
    out('peek', 'same port')
else:
    try:
        s = socket.create_connection(('127.0.0.1', other), timeout=3)
        s.sendall(b'CONNECT acme.example.org:' + str(UP).encode() + b' HTTP/1.1\r\n\r\n')
        out('peek', 'connected', head(s)[0])
    except Exception as e:
        out('peek', 'no connection', type(e).__name__)
"#,
    );
    let (w, up) = setup(
        "ports",
        test_resolver,
        false,
        &[ACME],
        &[("holder", "green", holder), ("peeker", "red", peeker)],
    );
    let rx = start_run(&w, "holder");
    let port_file = w.touched.join("port");
    assert!(
        wait_for_file(&port_file, RUN_LIMIT),
        "the holder never started"
    );
    std::thread::sleep(Duration::from_millis(200));
    let port: u16 = std::fs::read_to_string(&port_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // From the host's namespace: nothing of the proxy's there.
    let from_host = match TcpStream::connect_timeout(
        &format!("127.0.0.1:{port}").parse().unwrap(),
        Duration::from_secs(2),
    ) {
        Err(e) => format!("no connection: {e}"),
        Ok(mut s) => {
            let _ = s.set_read_timeout(Some(Duration::from_secs(3)));
            let _ = s.write_all(&connect_line(ACME, up.port));
            let mut b = vec![0u8; 256];
            let n = s.read(&mut b).unwrap_or(0);
            String::from_utf8_lossy(&b[..n]).into_owned()
        }
    };
    eprintln!("from the host's namespace, port {port}: {from_host}");
    assert!(
        !from_host.contains("Connection established") && !from_host.contains("Aromba"),
        "{from_host}"
    );
    // From another run (a dry run, on the Worker's socket, meanwhile).
    let dry = in_background(
        w.layout().worker_socket(),
        Request::DryRun {
            chore: "peeker".into(),
        },
    );
    let dry = ended(&dry);
    std::fs::write(w.touched.join("go"), "").unwrap();
    let r = ended(&rx);
    assert!(matches!(r, Response::Receipt { .. }), "{r:?}");
    match dry {
        Response::Receipt { stdout, .. } => {
            let text = String::from_utf8_lossy(&stdout).into_owned();
            eprintln!("the other run: {text}");
            let l = line(&text, "peek");
            assert!(
                l[1] == "no connection" || l[1] == "same port",
                "another run reached this run's proxy: {text}"
            );
        }
        // Refused while the other runs: nothing reached either.
        Response::Refused { reason, .. } => eprintln!("the other run was refused: {reason}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(up.accepted.load(Ordering::SeqCst), 0);
}

#[test]
fn inside_the_namespace_there_is_no_other_way_out() {
    let program = r#"
def tryit(label, f):
    try:
        r = f()
        out(label, 'allowed', r)
    except Exception as e:
        out(label, 'refused', type(e).__name__ + ' ' + str(getattr(e, 'errno', '')))
def sock(*a):
    s = socket.socket(*a)
    s.close()
    return 'made'
tryit('raw-icmp', lambda: sock(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
tryit('raw-icmp6', lambda: sock(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6))
tryit('raw-tcp', lambda: sock(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP))
tryit('ping-socket', lambda: sock(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP))
tryit('ping6-socket', lambda: sock(socket.AF_INET6, socket.SOCK_DGRAM, socket.IPPROTO_ICMPV6))
tryit('packet', lambda: sock(17, socket.SOCK_RAW, 0))
tryit('vsock', lambda: sock(40, socket.SOCK_STREAM, 0))
tryit('unix', lambda: sock(socket.AF_UNIX, socket.SOCK_STREAM, 0))
tryit('vsock-high-bits', lambda: sock(40 | (1 << 32), socket.SOCK_STREAM, 0))
def nl(t, flags, payload):
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
    try:
        s.bind((0, 0))
        s.settimeout(3)
        s.send(struct.pack('=IHHII', 16 + len(payload), t, flags, 1, 0) + payload)
        r = s.recv(65536)
    finally:
        s.close()
    ty = struct.unpack('=H', r[4:6])[0]
    if ty == 2:
        err = struct.unpack('=i', r[16:20])[0]
        if err < 0:
            raise OSError(-err, os.strerror(-err))
        return 'acked'
    return 'answered %d' % ty
def rta(t, data):
    l = 4 + len(data)
    return struct.pack('=HH', l, t) + data + b'\0' * ((4 - l % 4) % 4)
NEW = 1 | 4 | 0x400 | 0x200
a = socket.inet_aton('192.0.2.9')
tryit('netlink-add-address', lambda: nl(20, NEW, struct.pack('=BBBBI', socket.AF_INET, 24, 0, 0, 1) + rta(2, a) + rta(1, a)))
tryit('netlink-add-route', lambda: nl(24, NEW, struct.pack('=BBBBBBBBI', socket.AF_INET, 0, 0, 0, 254, 3, 253, 1, 0) + rta(4, struct.pack('=i', 1))))
tryit('netlink-new-link', lambda: nl(16, NEW, struct.pack('=BxHiII', 0, 0, 0, 0, 0) + rta(3, b'evil0\0') + rta(18, rta(1, b'dummy'))))
def tcp(host, port, fam=socket.AF_INET):
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect((host, port))
        return 'connected'
    finally:
        s.close()
tryit('v6-loopback-proxy-port', lambda: tcp('::1', PORT, socket.AF_INET6))
tryit('v6-loopback-host-service', lambda: tcp('::1', UP, socket.AF_INET6))
tryit('v4-loopback-host-service', lambda: tcp('127.0.0.1', UP))
tryit('v4-other-loopback', lambda: tcp('127.0.0.2', PORT))
tryit('tcp-out', lambda: tcp('192.0.2.1', 443))
tryit('tcp6-out', lambda: tcp('2001:db8::1', 443, socket.AF_INET6))
def udp(host, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    try:
        s.sendto(b'x', (host, port))
        s.recvfrom(100)
        return 'answered'
    finally:
        s.close()
tryit('udp-loopback-53', lambda: udp('127.0.0.53', 53))
tryit('udp-out', lambda: udp('192.0.2.1', 53))
tryit('dns', lambda: socket.getaddrinfo('acme.example.org', 443))
def sysctl():
    f = open('/proc/sys/net/ipv4/ping_group_range', 'w')
    f.write('0 0')
    f.close()
    return 'written'
tryit('sysctl', sysctl)
# Last: taking loopback down would only cut the chore's own proxy.
tryit('netlink-lo-down', lambda: nl(16, 1 | 4, struct.pack('=BxHiII', 0, 0, 1, 0, 1)))
tryit('proxy-still-there', lambda: tcp('127.0.0.1', PORT))
"#;
    let (w, up) = setup(
        "noway",
        test_resolver,
        false,
        &[ACME],
        &[("noway", "green", py_real(program))],
    );
    let (_, text) = run(&w, "noway");
    for label in [
        "raw-icmp",
        "raw-icmp6",
        "raw-tcp",
        "ping-socket",
        "ping6-socket",
        "packet",
        "vsock",
        "unix",
        "vsock-high-bits",
        "netlink-add-address",
        "netlink-add-route",
        "netlink-new-link",
        "v6-loopback-proxy-port",
        "v6-loopback-host-service",
        "v4-loopback-host-service",
        "v4-other-loopback",
        "tcp-out",
        "tcp6-out",
        "udp-loopback-53",
        "udp-out",
        "dns",
        "sysctl",
        "netlink-lo-down",
    ] {
        assert_eq!(line(&text, label)[1], "refused", "{label}: {text}");
    }
    assert_eq!(line(&text, "proxy-still-there")[1], "allowed", "{text}");
    assert_eq!(up.accepted.load(Ordering::SeqCst), 0);
}

#[test]
fn a_name_resolving_to_several_addresses_is_dialed_only_where_it_may_go() {
    let hosts = [
        "mixed.example.org",
        "zero.example.org",
        "mapped.example.org",
        "loop2.example.org",
        "v6loop.example.org",
        "cgnat.example.org",
    ];
    let mut program = String::new();
    for h in hosts {
        program.push_str(&format!(
            "attempt('{h}', b'CONNECT {h}:' + str(UP).encode() + b' HTTP/1.1\\r\\n\\r\\n', [{}])\n",
            py(&hello_naming(h.as_bytes()))
        ));
    }
    let (w, up) = setup(
        "resolve",
        test_resolver,
        false,
        &hosts,
        &[("resolve", "green", py_real(&program))],
    );
    let (_, text) = run(&w, "resolve");
    assert_eq!(
        line(&text, "mixed.example.org")[2],
        "UPSTREAM-SAYS-HELLO",
        "{text}"
    );
    for h in &hosts[1..] {
        assert_eq!(line(&text, h)[2], "", "{h}: {text}");
    }
    assert_eq!(up.accepted.load(Ordering::SeqCst), 1);
    let egress = egress_lines(&w);
    let mixed = egress
        .iter()
        .find(|l| l.contains("mixed.example.org"))
        .unwrap();
    assert!(
        mixed.contains(&format!("\"127.0.0.1:{}\"", up.port)) && mixed.contains("\"allowed\""),
        "{mixed}"
    );
    for h in &hosts[1..] {
        assert!(
            egress
                .iter()
                .any(|l| l.contains(h) && l.contains("resolves to") && l.contains("\"refused\"")),
            "{h}: {egress:#?}"
        );
    }
}

#[test]
fn the_public_address_filter_sees_ipv4_embedded_in_ipv6_translation_prefixes() {
    // No traffic: the filter itself, on addresses a hostile skill's own
    // DNS could answer for its declared name.
    for a in [
        // NAT64's well-known prefix and RFC 8215's local-use one (judged
        // by their last 32 bits).
        "64:ff9b::a9fe:a9fe",
        "64:ff9b:1::a9fe:a9fe",
        "64:ff9b:1::7f00:1",
        // SIIT's IPv4-translated addresses (::ffff:0:0:0/96, RFC 2765),
        // which a stateless translator maps to the IPv4 address inside.
        "::ffff:0:a9fe:a9fe",
        "::ffff:0:7f00:1",
        "::ffff:0:a00:7",
    ] {
        assert!(
            not_public(a.parse().unwrap()).is_some(),
            "{a} (an IPv4 address of this machine or the metadata service behind a \
             translator) is let through as public"
        );
    }
}

#[test]
fn refused_connections_do_not_pile_up_descriptors_in_the_warden_during_a_run() {
    let program = r#"
out('ns', os.readlink('/proc/self/ns/net'))
for i in range(600):
    s = conn()
    s.sendall(b'GET / HTTP/1.1\r\n\r\n')
    head(s)
    s.close()
out('flooded', 600)
touch('flooded')
wait_for('go')
"#;
    let (w, _up) = setup(
        "fds",
        test_resolver,
        false,
        &[ACME],
        &[("fds", "green", py_real(program))],
    );
    let rx = start_run(&w, "fds");
    assert!(
        wait_for_file(&w.touched.join("flooded"), RUN_LIMIT),
        "the flood never ended: {}",
        output(&w)
    );
    let ns = ns_inode(&line(&output(&w), "ns")[1]);
    let (during, ns_fds) = descriptors_in(ns);
    std::fs::write(w.touched.join("go"), "").unwrap();
    let r = ended(&rx);
    assert!(matches!(r, Response::Receipt { .. }), "{r:?}");
    assert!(
        ns_fds >= 1,
        "the namespace was not found among the descriptors"
    );
    let egress = egress_lines(&w);
    let refused = egress
        .iter()
        .filter(|l| l.contains("only CONNECT is served"))
        .count();
    assert_eq!(refused, aromba_warden::egress::MAX_REFUSED_LINES);
    assert!(
        egress
            .iter()
            .any(|l| l.contains("568 more connections were refused in this run")),
        "{egress:#?}"
    );
    assert!(
        during <= 40,
        "after 600 refused connections, all closed by the chore, the Warden held {during} \
         sockets of the run's namespace (Proxy::open keeps a clone of every stream until the \
         run ends): at systemd's default 1024 descriptors, one run starves the Warden"
    );
}

#[test]
fn the_proxy_listener_and_namespace_are_closed_after_the_run() {
    let program = r#"
out('ns', os.readlink('/proc/self/ns/net'))
for l in open('/proc/net/tcp').read().splitlines()[1:]:
    f = l.split()
    if f[1] == '0100007F:%04X' % PORT and f[3] == '0A':
        out('listener', f[9])
attempt('declared', b'CONNECT acme.example.org:' + str(UP).encode() + b' HTTP/1.1\r\n\r\n', [HELLO])
for i in range(20):
    s = conn()
    s.sendall(b'GET / HTTP/1.1\r\n\r\n')
    head(s)
    s.close()
touch('ready')
wait_for('go')
"#;
    let (w, _up) = setup(
        "leak",
        test_resolver,
        false,
        &[ACME],
        &[("leak", "green", py_real(program))],
    );
    let rx = start_run(&w, "leak");
    assert!(wait_for_file(&w.touched.join("ready"), RUN_LIMIT));
    let text = output(&w);
    let ns = ns_inode(&line(&text, "ns")[1]);
    let listener = format!("socket:[{}]", line(&text, "listener")[1]);
    let holds_listener = || {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read_link(e.path()).ok())
            .any(|l| l.to_string_lossy() == listener)
    };
    let (sockets, ns_fds) = descriptors_in(ns);
    assert!(
        ns_fds >= 1 && sockets >= 1 && holds_listener(),
        "{sockets} {ns_fds}"
    );
    std::fs::write(w.touched.join("go"), "").unwrap();
    let r = ended(&rx);
    assert!(matches!(r, Response::Receipt { .. }), "{r:?}");
    assert_eq!(line(&text, "declared")[2], "UPSTREAM-SAYS-HELLO", "{text}");
    let (sockets, ns_fds) = descriptors_in(ns);
    assert_eq!(
        (sockets, ns_fds),
        (0, 0),
        "the run's sockets or namespace outlived it"
    );
    assert!(!holds_listener(), "the proxy's listener outlived the run");
}

/// Found by the round: each refused connection was one fsynced journal
/// line, without bound, so one chore could rotate the journal's history
/// away in seconds. A run journals its refusals one by one up to
/// `MAX_REFUSED_LINES`, then one line counting the rest.
#[test]
fn a_flood_of_refused_connections_writes_a_bounded_number_of_journal_lines() {
    let program = r#"
for i in range(400):
    s = conn()
    s.sendall(b'GET / HTTP/1.1\r\n\r\n')
    head(s)
    s.close()
out('flooded', 400)
"#;
    let (w, _up) = setup(
        "flood",
        small_journal,
        false,
        &[ACME],
        &[("flood", "green", py_real(program))],
    );
    assert_eq!(w.ladder(), 0, "the ladder moved before the flood");
    let (r, text) = run(&w, "flood");
    assert!(matches!(r, Response::Receipt { .. }), "{r:?}");
    assert_eq!(line(&text, "flooded")[1], "400");
    let egress = egress_lines(&w);
    assert_eq!(
        egress.len(),
        aromba_warden::egress::MAX_REFUSED_LINES + 1,
        "{egress:#?}"
    );
    assert!(
        egress
            .last()
            .is_some_and(|l| l.contains("368 more connections were refused in this run")),
        "{egress:#?}"
    );
    assert_eq!(w.ladder(), 0, "a bounded flood moved the ladder");
}

#[test]
fn a_connection_is_not_made_when_its_journal_line_cannot_be_written() {
    let program = r#"
touch('ready')
wait_for('go')
attempt('after', b'CONNECT acme.example.org:' + str(UP).encode() + b' HTTP/1.1\r\n\r\n', [HELLO])
"#;
    let (w, up) = setup(
        "journal-first",
        test_resolver,
        false,
        &[ACME],
        &[("jfirst", "green", py_real(program))],
    );
    let rx = start_run(&w, "jfirst");
    assert!(wait_for_file(&w.touched.join("ready"), RUN_LIMIT));
    w.make_journal_unwritable();
    std::fs::write(w.touched.join("go"), "").unwrap();
    let _ = ended(&rx);
    let text = output(&w);
    let l = line(&text, "after");
    assert_eq!(
        up.accepted.load(Ordering::SeqCst),
        0,
        "the journal refused every line, and the proxy still dialed the host and passed the \
         tunnel through ({}|{}): the egress line is written after the dial and its failure \
         is ignored",
        l[1],
        l[2]
    );
}

#[test]
fn a_red_skill_chores_dry_run_reaches_no_host() {
    // The script ignores --dry-run: what a hostile skill's red chore does
    // on every dry run the Worker asks for, with no tap.
    let program = r#"
attempt('dry', b'CONNECT acme.example.org:' + str(UP).encode() + b' HTTP/1.1\r\n\r\n', [HELLO])
"#;
    let (w, up) = setup(
        "dry",
        test_resolver,
        false,
        &[ACME],
        &[("wire", "red", py_any(program))],
    );
    let (_, stdout, _) = w.dry_run_receipt("wire");
    assert_eq!(
        up.accepted.load(Ordering::SeqCst),
        0,
        "a red chore's dry run (no approval, asked for by the Worker) reached the declared \
         host: {stdout}"
    );
}
