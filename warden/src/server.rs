//! The Warden's two sockets and what happens to a request.
//!
//! The Worker socket answers only the Worker's uid; the control socket only
//! root; the kernel says who the peer is (`SO_PEERCRED`) on every
//! connection. Each connection has a thread; the number of connections and
//! the number of commands running at once are bounded, so one slow command
//! does not hold up the others and a flood does not exhaust the Warden. A
//! read goes: policy → exec → redaction → one journal line → answer. A
//! request that cannot be journaled is not served.

#![forbid(unsafe_code)]

use crate::exec::{self, Bounds};
use crate::journal::{AuditKey, Journal, JournalConfig, sha256_hex, verify};
use crate::layout::Layout;
use crate::policy::{self, Table};
use crate::signal::Signal;
use crate::system::{self, PeerCred};
use aromba_warden_proto::{
    FrameError, MAX_REQUEST, MAX_RESPONSE, ReadResult, Request, Response, decode_request,
    encode_response, read_frame, write_frame,
};
use serde_json::{Map, Value};
use std::io;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::Duration;

#[derive(Debug)]
pub struct ServeOptions {
    pub layout: Layout,
    /// The Worker's account: the only uid its socket answers.
    pub worker_uid: u32,
    pub worker_gid: u32,
    /// Commands running at once.
    pub max_running: usize,
    /// Open connections, both sockets together.
    pub max_connections: usize,
    /// How long a connection may sit idle between requests.
    pub idle: Duration,
    pub fsync: bool,
}

impl ServeOptions {
    pub fn new(layout: Layout, worker_uid: u32, worker_gid: u32) -> ServeOptions {
        ServeOptions {
            layout,
            worker_uid,
            worker_gid,
            max_running: 4,
            max_connections: 64,
            idle: Duration::from_secs(60),
            fsync: true,
        }
    }
}

#[derive(Debug)]
pub enum ServeError {
    Io { what: String, source: io::Error },
    Journal(crate::journal::JournalError),
    Key(crate::journal::KeyError),
    NotASocket(std::path::PathBuf),
}

impl std::fmt::Display for ServeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServeError::Io { what, source } => write!(f, "{what}: {source}"),
            ServeError::Journal(e) => write!(f, "{e}"),
            ServeError::Key(e) => write!(f, "{e}"),
            ServeError::NotASocket(p) => write!(
                f,
                "{} exists and is not a socket; refusing to replace it",
                p.display()
            ),
        }
    }
}

impl std::error::Error for ServeError {}

fn io_err(what: String) -> impl FnOnce(io::Error) -> ServeError {
    move |source| ServeError::Io { what, source }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Socket {
    Worker,
    Control,
}

impl Socket {
    fn name(self) -> &'static str {
        match self {
            Socket::Worker => "worker",
            Socket::Control => "control",
        }
    }
}

/// A counting semaphore.
struct Slots {
    free: Mutex<usize>,
    freed: Condvar,
}

impl Slots {
    fn new(n: usize) -> Slots {
        Slots {
            free: Mutex::new(n),
            freed: Condvar::new(),
        }
    }

    fn try_take(&self) -> bool {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        if *free == 0 {
            return false;
        }
        *free -= 1;
        true
    }

    fn take(&self) {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        while *free == 0 {
            free = self.freed.wait(free).unwrap_or_else(|p| p.into_inner());
        }
        *free -= 1;
    }

    fn give(&self) {
        *self.free.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        self.freed.notify_one();
    }
}

struct Shared {
    options: ServeOptions,
    journal: Mutex<Journal>,
    running: Slots,
    connections: Slots,
    policy_sha256: String,
    shutdown: AtomicBool,
}

/// A bound Warden, ready to serve.
pub struct Server {
    shared: Arc<Shared>,
    worker: UnixListener,
    control: UnixListener,
}

/// Stops a running server from another thread.
#[derive(Clone)]
pub struct ShutdownHandle {
    shared: Arc<Shared>,
}

impl ShutdownHandle {
    pub fn shutdown(&self) {
        self.shared.shutdown.store(true, Ordering::SeqCst);
        // Wake both accept loops.
        let layout = &self.shared.options.layout;
        let _ = UnixStream::connect(layout.worker_socket());
        let _ = UnixStream::connect(layout.control_socket());
    }
}

fn bind(path: &Path, mode: u32, gid: Option<u32>) -> Result<UnixListener, ServeError> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            std::fs::remove_file(path).map_err(io_err(format!(
                "removing the old socket {}",
                path.display()
            )))?;
        }
        Ok(_) => return Err(ServeError::NotASocket(path.to_path_buf())),
        Err(_) => {}
    }
    let listener =
        UnixListener::bind(path).map_err(io_err(format!("binding {}", path.display())))?;
    if let Some(gid) = gid {
        std::os::unix::fs::chown(path, Some(0), Some(gid))
            .map_err(io_err(format!("chown {}", path.display())))?;
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(io_err(format!("chmod {}", path.display())))?;
    Ok(listener)
}

impl Server {
    /// Creates the directories, opens the journal and binds both sockets.
    pub fn bind(options: ServeOptions) -> Result<Server, ServeError> {
        let layout = &options.layout;
        for dir in [&layout.run_dir, &layout.state_dir, &layout.journal_dir] {
            std::fs::create_dir_all(dir).map_err(io_err(format!("creating {}", dir.display())))?;
        }
        std::fs::set_permissions(&layout.run_dir, std::fs::Permissions::from_mode(0o755))
            .map_err(io_err(format!("chmod {}", layout.run_dir.display())))?;
        let key = match layout.audit_key() {
            k if k.exists() => {
                Some(AuditKey::load(&k, Some(&layout.journal_dir)).map_err(ServeError::Key)?)
            }
            _ => None,
        };
        let mut config = JournalConfig::new(layout.journal_dir.clone());
        config.key = key;
        config.fsync = options.fsync;
        config.reader_gid = Some(options.worker_gid);
        let journal = Journal::open(config).map_err(ServeError::Journal)?;
        let worker = bind(&layout.worker_socket(), 0o660, Some(options.worker_gid))?;
        let control = bind(&layout.control_socket(), 0o600, None)?;
        let shared = Arc::new(Shared {
            running: Slots::new(options.max_running.max(1)),
            connections: Slots::new(options.max_connections.max(1)),
            policy_sha256: sha256_hex(policy::render().as_bytes()),
            journal: Mutex::new(journal),
            shutdown: AtomicBool::new(false),
            options,
        });
        let server = Server {
            shared,
            worker,
            control,
        };
        server.journal_event("warden-started", Map::new());
        Ok(server)
    }

    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle {
            shared: self.shared.clone(),
        }
    }

    fn journal_event(&self, event: &str, fields: Map<String, Value>) {
        let _ = journal(&self.shared, event, fields);
    }

    /// Serves until the shutdown handle is used.
    pub fn run(self) {
        let control_shared = self.shared.clone();
        let control = self.control;
        let control_loop =
            thread::spawn(move || accept_loop(control_shared, control, Socket::Control));
        accept_loop(self.shared.clone(), self.worker, Socket::Worker);
        let _ = control_loop.join();
    }
}

fn accept_loop(shared: Arc<Shared>, listener: UnixListener, socket: Socket) {
    for stream in listener.incoming() {
        if shared.shutdown.load(Ordering::SeqCst) {
            break;
        }
        let Ok(stream) = stream else { continue };
        if !shared.connections.try_take() {
            let _ = respond(
                &stream,
                &Response::Error {
                    message: "the Warden is serving too many connections; try again".into(),
                },
            );
            continue;
        }
        let shared = shared.clone();
        thread::spawn(move || {
            handle(&shared, stream, socket);
            shared.connections.give();
        });
    }
}

fn respond(mut stream: &UnixStream, r: &Response) -> Result<(), FrameError> {
    write_frame(&mut stream, &encode_response(r), MAX_RESPONSE)
}

/// Appends a line; `None` when the journal could not take it.
fn journal(shared: &Shared, kind: &str, mut fields: Map<String, Value>) -> Option<u64> {
    fields.insert("kind".into(), Value::from(kind));
    let mut j = shared.journal.lock().unwrap_or_else(|p| p.into_inner());
    j.append(fields).ok()
}

fn peer_fields(peer: &PeerCred, socket: Socket) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("socket".into(), Value::from(socket.name()));
    m.insert("peer_uid".into(), Value::from(peer.uid));
    m.insert("peer_pid".into(), Value::from(peer.pid));
    m
}

fn handle(shared: &Shared, stream: UnixStream, socket: Socket) {
    let peer = match system::peer_cred(&stream) {
        Ok(p) => p,
        Err(e) => {
            let mut m = Map::new();
            m.insert("socket".into(), Value::from(socket.name()));
            m.insert("error".into(), Value::from(e.to_string()));
            journal(shared, "peer-unknown", m);
            return;
        }
    };
    let allowed_uid = match socket {
        Socket::Worker => shared.options.worker_uid,
        Socket::Control => 0,
    };
    if peer.uid != allowed_uid {
        journal(shared, "peer-refused", peer_fields(&peer, socket));
        let _ = respond(
            &stream,
            &Response::Error {
                message: format!("the {} socket serves only uid {allowed_uid}", socket.name()),
            },
        );
        return;
    }
    let _ = stream.set_read_timeout(Some(shared.options.idle));
    let mut reader = &stream;
    loop {
        if shared.shutdown.load(Ordering::SeqCst) {
            return;
        }
        let frame = match read_frame(&mut reader, MAX_REQUEST) {
            Ok(f) => f,
            Err(FrameError::Closed) => return,
            Err(FrameError::Io(e))
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return;
            }
            Err(e) => {
                malformed(shared, &stream, &peer, socket, &e.to_string());
                return;
            }
        };
        let request = match decode_request(&frame) {
            Ok(r) => r,
            Err(e) => {
                malformed(shared, &stream, &peer, socket, &e.to_string());
                return;
            }
        };
        let response = serve(shared, &peer, socket, request);
        if respond(&stream, &response).is_err() {
            return;
        }
    }
}

fn malformed(shared: &Shared, stream: &UnixStream, peer: &PeerCred, socket: Socket, why: &str) {
    let mut m = peer_fields(peer, socket);
    m.insert("error".into(), Value::from(why));
    journal(shared, "malformed", m);
    let _ = respond(
        stream,
        &Response::Error {
            message: format!("malformed request: {why}"),
        },
    );
}

fn unjournaled() -> Response {
    Response::Error {
        message: "the journal cannot be written; the Warden serves nothing it cannot journal"
            .into(),
    }
}

fn serve(shared: &Shared, peer: &PeerCred, socket: Socket, request: Request) -> Response {
    match (socket, request) {
        (_, Request::Ping) => Response::Pong,
        (Socket::Worker, Request::Read { cmd, args }) => read(shared, peer, cmd, args),
        (Socket::Worker, Request::Note { text }) => {
            let mut m = peer_fields(peer, socket);
            m.insert("text".into(), Value::from(text));
            match journal(shared, "worker-note", m) {
                Some(journal_seq) => Response::Noted { journal_seq },
                None => unjournaled(),
            }
        }
        (Socket::Control, Request::Status) => {
            let j = shared.journal.lock().unwrap_or_else(|p| p.into_inner());
            Response::Status {
                journal_seq: j.head().seq,
                journal_head: j.head().hash.clone(),
                policy_sha256: shared.policy_sha256.clone(),
            }
        }
        (Socket::Control, Request::JournalVerify) => {
            let path = shared.options.layout.journal_file();
            let key = match shared.options.layout.audit_key() {
                k if k.exists() => {
                    AuditKey::load(&k, Some(&shared.options.layout.journal_dir)).ok()
                }
                _ => None,
            };
            // Hold the journal still while it is read.
            let _j = shared.journal.lock().unwrap_or_else(|p| p.into_inner());
            match verify(&path, key.as_ref()) {
                Ok(r) => Response::Verified {
                    ok: true,
                    report: format!(
                        "{} lines, seq {}..{}, head {}",
                        r.lines, r.first_seq, r.last_seq, r.head_hash
                    ),
                },
                Err(e) => Response::Verified {
                    ok: false,
                    report: e.to_string(),
                },
            }
        }
        (socket, other) => {
            let mut m = peer_fields(peer, socket);
            m.insert("request".into(), Value::from(format!("{other:?}")));
            journal(shared, "wrong-socket", m);
            Response::Error {
                message: format!("that request is not served on the {} socket", socket.name()),
            }
        }
    }
}

fn request_fields(peer: &PeerCred, cmd: &str, args: &[String]) -> Map<String, Value> {
    let mut m = peer_fields(peer, Socket::Worker);
    m.insert("cmd".into(), Value::from(cmd));
    m.insert("args".into(), Value::from(args.to_vec()));
    m
}

fn signal_line(shared: &Shared, peer: &PeerCred, signal: &Signal) {
    let mut m = peer_fields(peer, Socket::Worker);
    m.insert("signal".into(), Value::from(signal.kind()));
    m.insert("detail".into(), Value::from(signal.to_string()));
    journal(shared, "ladder-signal", m);
}

/// An allowed read that could not run: journaled, then answered as an error.
fn failed(shared: &Shared, mut m: Map<String, Value>, e: &exec::ExecError) -> Response {
    m.insert("verdict".into(), Value::from("failed"));
    m.insert("error".into(), Value::from(e.to_string()));
    match journal(shared, "read", m) {
        Some(_) => Response::Error {
            message: e.to_string(),
        },
        None => unjournaled(),
    }
}

fn read(shared: &Shared, peer: &PeerCred, cmd: String, args: Vec<String>) -> Response {
    let allowed = match policy::check(Table::Allow, &cmd, &args) {
        Ok(a) => a,
        Err(refused) => {
            let mut m = request_fields(peer, &cmd, &args);
            m.insert("verdict".into(), Value::from("refused"));
            m.insert("reason".into(), Value::from(refused.reason.as_str()));
            let seq = journal(shared, "read", m);
            if let Some(signal) = &refused.signal {
                signal_line(shared, peer, signal);
            }
            return match seq {
                Some(seq) => Response::Refused {
                    reason: refused.reason,
                    journal_seq: Some(seq),
                },
                None => unjournaled(),
            };
        }
    };
    let rule = allowed.rule;
    let mut m = request_fields(peer, &cmd, &args);
    m.insert("rule".into(), Value::from(allowed.rule_name()));
    let bin = match exec::pick_binary(rule.cmd, rule.bins) {
        Ok(b) => b,
        Err(e) => return failed(shared, m, &e),
    };
    let bounds = Bounds {
        timeout: Duration::from_secs(rule.timeout_s),
        max_output_bytes: usize::try_from(policy::LIMITS.max_output_bytes).unwrap_or(usize::MAX),
        low_priority: rule.low_priority,
    };
    let env: Vec<(String, String)> = rule
        .warden_env
        .iter()
        .filter_map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect();
    shared.running.take();
    let outcome = exec::run_program(&bin, &allowed.args, &env, &bounds);
    shared.running.give();
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => return failed(shared, m, &e),
    };
    // Killed mid-write (cap or timeout): the last line of each stream may
    // hold the start of a secret.
    let killed = outcome.cut || outcome.timed_out;
    let redact = |b: &[u8]| {
        if killed {
            aromba_redact::redact_cut(b)
        } else {
            aromba_redact::redact(b)
        }
    };
    let stdout = redact(&outcome.stdout);
    let stderr = redact(&outcome.stderr);
    let mut counts: Vec<(String, u64)> = Vec::new();
    for class in aromba_redact::Class::ALL {
        let n = u64::from(stdout.counts.get(class)) + u64::from(stderr.counts.get(class));
        if n > 0 {
            counts.push((class.name().to_string(), n));
        }
    }
    let duration_ms = u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX);
    m.insert("verdict".into(), Value::from("allowed"));
    m.insert("bin".into(), Value::from(bin.to_string_lossy().as_ref()));
    m.insert("run_args".into(), Value::from(allowed.args.clone()));
    m.insert(
        "exit_code".into(),
        outcome.exit_code.map_or(Value::Null, Value::from),
    );
    m.insert(
        "signal".into(),
        outcome.signal.map_or(Value::Null, Value::from),
    );
    m.insert(
        "bytes_out".into(),
        Value::from(stdout.text.len() + stderr.text.len()),
    );
    m.insert("cut".into(), Value::from(outcome.cut));
    m.insert("timed_out".into(), Value::from(outcome.timed_out));
    m.insert(
        "redactions".into(),
        Value::Object(
            counts
                .iter()
                .map(|(k, n)| (k.clone(), Value::from(*n)))
                .collect(),
        ),
    );
    // The journal binds to exactly the redacted bytes the Worker got.
    m.insert(
        "stdout_sha256".into(),
        Value::from(sha256_hex(&stdout.text)),
    );
    m.insert(
        "stderr_sha256".into(),
        Value::from(sha256_hex(&stderr.text)),
    );
    m.insert("duration_ms".into(), Value::from(duration_ms));
    let Some(journal_seq) = journal(shared, "read", m) else {
        return unjournaled();
    };
    Response::Result(ReadResult {
        exit_code: outcome.exit_code,
        signal: outcome.signal,
        stdout: stdout.text,
        stderr: stderr.text,
        cut: outcome.cut,
        timed_out: outcome.timed_out,
        redactions: counts,
        journal_seq,
        duration_ms,
    })
}
