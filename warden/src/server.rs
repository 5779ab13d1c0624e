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
use crate::integrity::Baseline;
use crate::journal::{AuditKey, Journal, JournalConfig, sha256_hex, verify};
use crate::ladder::{Clock, Event, Ladder, LadderError, Step, SystemClock};
use crate::layout::Layout;
use crate::policy::{self, Table};
use crate::signal::Signal;
use crate::system::{self, PeerCred};
use aromba_warden_proto::{
    FrameError, LadderEvent, MAX_REQUEST, MAX_RESPONSE, ReadResult, Request, Response, Status,
    decode_request, encode_response, read_frame, write_frame,
};
use serde_json::{Map, Value};
use std::collections::VecDeque;
use std::io;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::Duration;

/// Reads in ten minutes above which the ladder climbs a step. The Worker's
/// own schedule asks for a handful of health numbers every few minutes; a
/// person in the chat, a few more.
pub const COMMAND_THRESHOLD: usize = 60;
/// At Slow and above: one command a minute.
pub const SLOW_INTERVAL_S: u64 = 60;

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
    /// The ladder's clock (tests move it by hand).
    pub clock: Arc<dyn Clock>,
    /// How often the network tables are read and the ladder's decay checked.
    pub watch_interval: Duration,
    /// How often the integrity baseline is checked after start.
    pub integrity_interval: Duration,
    /// More reads than this in `command_window_s` is a ladder signal.
    pub command_threshold: usize,
    pub command_window_s: u64,
    /// Read the Worker's TCP connections. Off only where the test's own uid
    /// stands in for the Worker, whose connections are the test machine's.
    pub watch_network: bool,
}

impl std::fmt::Debug for dyn Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Clock")
    }
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
            clock: Arc::new(SystemClock),
            watch_interval: Duration::from_secs(2),
            integrity_interval: Duration::from_secs(3600),
            command_threshold: COMMAND_THRESHOLD,
            command_window_s: 600,
            watch_network: true,
        }
    }
}

#[derive(Debug)]
pub enum ServeError {
    Io {
        what: String,
        source: io::Error,
    },
    Journal(crate::journal::JournalError),
    Key(crate::journal::KeyError),
    NotASocket(std::path::PathBuf),
    Ladder(LadderError),
    /// `aromba panic` stopped the Warden; it does not start again.
    Disarmed,
}

impl std::fmt::Display for ServeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServeError::Io { what, source } => write!(f, "{what}: {source}"),
            ServeError::Journal(e) => write!(f, "{e}"),
            ServeError::Key(e) => write!(f, "{e}"),
            ServeError::Ladder(e) => write!(f, "{e}"),
            ServeError::Disarmed => write!(
                f,
                "the Warden was disarmed (aromba panic) and will not start again; reinstall Aromba to recover"
            ),
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
    ladder: Mutex<Ladder>,
    /// When reads were served, for the too-many-commands signal and Slow.
    recent: Mutex<VecDeque<u64>>,
    baseline: Option<Baseline>,
    integrity: Mutex<String>,
    isolation: String,
}

impl Shared {
    fn wake(&self) {
        self.shutdown.store(true, Ordering::SeqCst);
        let layout = &self.options.layout;
        let _ = UnixStream::connect(layout.worker_socket());
        let _ = UnixStream::connect(layout.control_socket());
    }
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
        self.shared.wake();
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
        let baseline = Baseline::read(layout);
        let installed = !matches!(baseline, Ok(None));
        let ladder = Ladder::load(layout.ladder_file(), options.clock.clone(), installed)
            .map_err(ServeError::Ladder)?;
        if ladder.step() == Step::Disarm {
            return Err(ServeError::Disarmed);
        }
        let isolation = isolation();
        let worker = bind(&layout.worker_socket(), 0o660, Some(options.worker_gid))?;
        let control = bind(&layout.control_socket(), 0o600, None)?;
        let shared = Arc::new(Shared {
            running: Slots::new(options.max_running.max(1)),
            connections: Slots::new(options.max_connections.max(1)),
            policy_sha256: sha256_hex(policy::render().as_bytes()),
            journal: Mutex::new(journal),
            shutdown: AtomicBool::new(false),
            ladder: Mutex::new(ladder),
            recent: Mutex::new(VecDeque::new()),
            integrity: Mutex::new(String::from("not checked yet")),
            baseline: baseline.as_ref().ok().cloned().flatten(),
            isolation,
            options,
        });
        let server = Server {
            shared,
            worker,
            control,
        };
        server.journal_event("warden-started", Map::new());
        if let Err(e) = baseline {
            raise(&server.shared, None, Signal::IntegrityMismatch { what: e });
        }
        check_integrity(&server.shared);
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
        let watcher = self.shared.clone();
        thread::spawn(move || watch(&watcher));
        let honeypots = self.shared.clone();
        thread::spawn(move || watch_honeypots(&honeypots));
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
        (Socket::Control, Request::Status) => status(shared),
        (Socket::Worker, Request::Panic) => move_ladder(shared, Ladder::panic_from_chat),
        (Socket::Control, Request::Panic) => move_ladder(shared, Ladder::disarm),
        (Socket::Control, Request::Resume) => move_ladder(shared, Ladder::resume),
        (Socket::Worker, Request::Events { after }) => {
            let ladder = shared.ladder.lock().unwrap_or_else(|p| p.into_inner());
            Response::Events {
                events: ladder
                    .events_after(after)
                    .into_iter()
                    .map(|e| LadderEvent {
                        id: e.id,
                        time: e.time,
                        from: e.from as u64,
                        to: e.to as u64,
                        reason: e.reason,
                        message: e.message,
                    })
                    .collect(),
            }
        }
        (Socket::Worker, Request::RedAction { action, approval }) => {
            let mut m = peer_fields(peer, socket);
            m.insert("action".into(), Value::from(action.as_str()));
            m.insert("approval".into(), Value::from(approval.is_some()));
            m.insert("verdict".into(), Value::from("refused"));
            let seq = journal(shared, "red-action", m);
            // No relay key is pinned yet (pairing arrives with the relay), so
            // no approval can be verified: every red action is refused, and
            // asking for one is a signal.
            let frozen = shared
                .ladder
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .step()
                >= Step::Freeze;
            raise(
                shared,
                Some(peer),
                Signal::RedActionWithoutApproval { action },
            );
            let reason = if frozen {
                "the ladder is at Freeze or above: no chore or action runs until it comes down"
            } else {
                "a red action needs an approval the Warden can verify, and none can be verified here"
            };
            Response::Refused {
                reason: reason.into(),
                journal_seq: seq,
            }
        }
        (Socket::Control, Request::Chores) => chores_list(shared),
        (Socket::Control, Request::ChoreRun { name, dry_run }) => {
            chore_run(shared, &name, dry_run, RunSource::RootTerminal)
        }
        (Socket::Worker, Request::DryRun { chore }) => {
            chore_run(shared, &chore, true, RunSource::Worker)
        }
        (Socket::Worker, Request::DryRunShown { chore }) => dry_run_shown(shared, peer, &chore),
        (Socket::Worker, Request::Propose { chore }) => propose(shared, peer, &chore),
        (
            Socket::Worker,
            Request::Approve {
                action_id,
                button,
                chat,
                time,
                signature,
            },
        ) => approve(
            shared,
            peer,
            crate::approvals::Approval {
                action_id,
                button,
                chat,
                time,
                signature,
            },
        ),
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

fn runs_dir(shared: &Shared) -> std::path::PathBuf {
    shared.options.layout.state_dir.join("runs")
}

fn chores_list(shared: &Shared) -> Response {
    let (chores, _refused) = crate::chores::catalog::all(&shared.options.layout);
    let runs = runs_dir(shared);
    Response::Chores {
        chores: chores
            .iter()
            .map(|c| aromba_warden_proto::ChoreInfo {
                name: c.header.name.clone(),
                color: c.header.color.name().into(),
                schedule: c.header.schedule.to_string(),
                origin: match c.origin {
                    crate::chores::run::Origin::System => "system".into(),
                    crate::chores::run::Origin::Mine => "mine".into(),
                },
                last_receipt: std::fs::read_to_string(runs.join(format!("{}.last", c.header.name)))
                    .map(|s| s.trim().to_string())
                    .unwrap_or_else(|_| "never run".into()),
            })
            .collect(),
    }
}

/// Time-sync units: the only restart a green chore may ask for.
const TIME_SYNC_UNITS: &[&str] = &[
    "systemd-timesyncd.service",
    "chrony.service",
    "chronyd.service",
    "ntp.service",
    "ntpsec.service",
];

fn green_may_request(action: &[String]) -> bool {
    match action {
        [cmd, a, b] if cmd == "timedatectl" => a == "set-ntp" && b == "true",
        [cmd, a, unit] if cmd == "systemctl" => {
            a == "restart" && TIME_SYNC_UNITS.contains(&unit.as_str())
        }
        _ => false,
    }
}

/// Runs one chore action outside the cage, after a clean real run.
fn chore_action(shared: &Shared, chore: &str, green: bool, action: &[String]) -> String {
    let shown = action.join(" ");
    let Some((cmd, args)) = action.split_first() else {
        return format!("{shown}: empty");
    };
    let verdict = if green && !green_may_request(action) {
        Err("a green chore may request only time sync's two actions".to_string())
    } else {
        policy::check(Table::ChoreAction, cmd, args).map_err(|r| r.reason)
    };
    let mut m = Map::new();
    m.insert("chore".into(), Value::from(chore));
    m.insert("action".into(), Value::from(shown.as_str()));
    let line = match verdict {
        Err(reason) => {
            m.insert("verdict".into(), Value::from("refused"));
            m.insert("reason".into(), Value::from(reason.as_str()));
            format!("{shown}: refused ({reason})")
        }
        Ok(allowed) => {
            let rule = allowed.rule;
            let mut run_args = allowed.args.clone();
            if let Some((first, rest)) = run_args.split_first() {
                // The policy's own additions go right after the subcommand.
                let mut with = vec![first.clone()];
                with.extend(rule.warden_adds.iter().map(|s| s.to_string()));
                with.extend(rest.iter().cloned());
                run_args = with;
            }
            let env = exec::rule_env(rule);
            let bounds = Bounds::for_rule(rule);
            let result = exec::pick_binary(rule.cmd, rule.bins)
                .and_then(|bin| exec::run_program(&bin, &run_args, &env, &bounds));
            match result {
                Ok(o) => {
                    m.insert("verdict".into(), Value::from("ran"));
                    m.insert(
                        "exit_code".into(),
                        o.exit_code.map_or(Value::Null, Value::from),
                    );
                    format!(
                        "{shown}: exit {}",
                        o.exit_code.map_or("killed".into(), |c| c.to_string())
                    )
                }
                Err(e) => {
                    m.insert("verdict".into(), Value::from("failed"));
                    m.insert("error".into(), Value::from(e.to_string()));
                    format!("{shown}: failed ({e})")
                }
            }
        }
    };
    journal(shared, "chore-action", m);
    line
}

/// Who asked for a chore run, which is what stands for its approval.
#[derive(Clone, Copy, PartialEq, Eq)]
enum RunSource {
    /// `aromba chore run` in a root terminal: the owner's approval, and the
    /// owner saw any dry run there.
    RootTerminal,
    /// The Worker: dry runs only.
    Worker,
    /// A relay-signed tap the Warden verified.
    Approved,
}

impl RunSource {
    fn name(self) -> &'static str {
        match self {
            RunSource::RootTerminal => "root terminal",
            RunSource::Worker => "worker (dry run)",
            RunSource::Approved => "relay-signed tap",
        }
    }
}

fn dry_run_shown(shared: &Shared, peer: &PeerCred, chore: &str) -> Response {
    let runs = runs_dir(shared);
    let ran = runs.join(format!("{chore}.dry-ran"));
    let mut m = peer_fields(peer, Socket::Worker);
    m.insert("chore".into(), Value::from(chore));
    if !ran.exists() {
        m.insert("verdict".into(), Value::from("refused"));
        let seq = journal(shared, "dry-run-shown", m);
        return Response::Refused {
            reason: format!("no dry run of {chore:?} was made to show"),
            journal_seq: seq,
        };
    }
    let _ = std::fs::rename(&ran, runs.join(format!("{chore}.dry-run-seen")));
    m.insert("verdict".into(), Value::from("recorded"));
    match journal(shared, "dry-run-shown", m) {
        Some(journal_seq) => Response::Noted { journal_seq },
        None => unjournaled(),
    }
}

fn propose(shared: &Shared, peer: &PeerCred, chore: &str) -> Response {
    let refuse = |reason: String| Response::Refused {
        reason,
        journal_seq: None,
    };
    let (chores, _) = crate::chores::catalog::all(&shared.options.layout);
    let Some(c) = chores.iter().find(|c| c.header.name == chore) else {
        return refuse(format!("there is no chore named {chore:?}"));
    };
    if c.header.color == crate::chores::header::Color::Green {
        return refuse(format!("{chore} is green: it needs no approval"));
    }
    let layout = &shared.options.layout;
    let issued = crate::approvals::issue(layout, chore, shared.options.clock.now())
        .and_then(|id| crate::approvals::server_id(layout).map(|server| (id, server)));
    let (action_id, server_id) = match issued {
        Ok(x) => x,
        Err(e) => return refuse(format!("cannot issue an action id: {e}")),
    };
    let mut m = peer_fields(peer, Socket::Worker);
    m.insert("chore".into(), Value::from(chore));
    m.insert("action_id".into(), Value::from(action_id.as_str()));
    if journal(shared, "action-issued", m).is_none() {
        return unjournaled();
    }
    Response::Proposed {
        action_id,
        server_id,
    }
}

fn approve(shared: &Shared, peer: &PeerCred, a: crate::approvals::Approval) -> Response {
    let mut m = peer_fields(peer, Socket::Worker);
    m.insert("action_id".into(), Value::from(a.action_id.as_str()));
    m.insert("button".into(), Value::from(a.button.as_str()));
    let now = shared.options.clock.now();
    let chore = match crate::approvals::verify_and_spend(&shared.options.layout, &a, now) {
        Ok(c) => c,
        Err(why) => {
            m.insert("verdict".into(), Value::from("refused"));
            m.insert("reason".into(), Value::from(why.as_str()));
            let seq = journal(shared, "approval", m);
            // An approval that does not verify is an action without one.
            raise(
                shared,
                Some(peer),
                Signal::RedActionWithoutApproval {
                    action: format!("action {}", a.action_id),
                },
            );
            return Response::Refused {
                reason: why,
                journal_seq: seq,
            };
        }
    };
    m.insert("chore".into(), Value::from(chore.as_str()));
    if a.button != "approve" {
        m.insert("verdict".into(), Value::from("declined"));
        let seq = journal(shared, "approval", m);
        return Response::Refused {
            reason: format!("the user chose {:?}, not to run {chore}", a.button),
            journal_seq: seq,
        };
    }
    m.insert("verdict".into(), Value::from("verified"));
    journal(shared, "approval", m);
    chore_run(shared, &chore, false, RunSource::Approved)
}

/// Runs one of the policy's reads for the Warden's own use (filling in a
/// chore action's placeholder) and returns its output.
fn own_read(cmd: &str, args: &[&str]) -> Result<String, String> {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let allowed = policy::check(Table::Allow, cmd, &args).map_err(|r| r.reason)?;
    let bin = exec::pick_binary(allowed.rule.cmd, allowed.rule.bins).map_err(|e| e.to_string())?;
    let bounds = Bounds::for_rule(allowed.rule);
    let o = exec::run_program(&bin, &allowed.args, &[], &bounds).map_err(|e| e.to_string())?;
    if o.exit_code != Some(0) || o.cut {
        return Err(format!(
            "{cmd} failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

fn security_upgrades() -> Result<Vec<String>, String> {
    own_read("apt", &["list", "--upgradable"])
        .map(|out| crate::chores::placeholders::security_upgrades(&out))
}

fn failed_services() -> Result<Vec<String>, String> {
    own_read(
        "systemctl",
        &[
            "list-units",
            "--state=failed",
            "--type=service",
            "--plain",
            "--no-legend",
        ],
    )
    .map(|out| crate::chores::placeholders::failed_services(&out))
}

/// A chore action with its placeholder filled in: none, one or several
/// concrete actions.
fn expand_action(action: &[String]) -> Result<Vec<Vec<String>>, String> {
    let Some((last, head)) = action.split_last() else {
        return Ok(Vec::new());
    };
    let with = |items: Vec<String>, per: usize| -> Vec<Vec<String>> {
        items
            .chunks(per.max(1))
            .map(|c| head.iter().cloned().chain(c.iter().cloned()).collect())
            .collect()
    };
    match last.as_str() {
        // The policy allows apt-get 24 arguments after its name: the fixed
        // ones of the action, and as many packages as fit.
        "@security-upgrades" => Ok(with(
            security_upgrades()?,
            25usize.saturating_sub(head.len()),
        )),
        "@failed-services" => Ok(with(failed_services()?, 1)),
        _ => Ok(vec![action.to_vec()]),
    }
}

fn chore_run(shared: &Shared, name: &str, dry_run: bool, source: RunSource) -> Response {
    use crate::chores::run::{self as run, Mode};
    let refuse = |reason: String| Response::Refused {
        reason,
        journal_seq: None,
    };
    if shared
        .ladder
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .step()
        >= Step::Freeze
    {
        return refuse(
            "the ladder is at Freeze or above: no chore runs until it comes down".into(),
        );
    }
    let (chores, _) = crate::chores::catalog::all(&shared.options.layout);
    let Some(chore) = chores.into_iter().find(|c| c.header.name == name) else {
        return refuse(format!(
            "there is no chore named {name:?}; `aromba chores` lists them"
        ));
    };
    let mode = if dry_run { Mode::DryRun } else { Mode::Real };
    let runs = runs_dir(shared);
    let _ = std::fs::create_dir_all(&runs);
    let seen = runs.join(format!("{name}.dry-run-seen"));
    if mode == Mode::Real && !seen.exists() {
        return refuse(format!(
            "{name}'s first real run needs a dry run you saw first: `aromba chore run {name} --dry-run`"
        ));
    }
    let now = shared.options.clock.now();
    let days_installed = shared
        .baseline
        .as_ref()
        .map_or(0, |b| now.saturating_sub(b.installed_at) / 86_400);
    let ctx = run::Context {
        layout: &shared.options.layout,
        isolation: shared.isolation == "available",
        days_installed,
        cap_confirmed: false,
        cap_interval: Duration::from_secs(5),
        timeout: Duration::from_secs(900),
    };
    let mut m = Map::new();
    m.insert("chore".into(), Value::from(name));
    m.insert(
        "mode".into(),
        Value::from(if dry_run { "dry-run" } else { "real" }),
    );
    m.insert("approval".into(), Value::from(source.name()));
    let report = match run::run(&chore, mode, &ctx) {
        Ok(r) => r,
        Err(e) => {
            m.insert("verdict".into(), Value::from("refused"));
            m.insert("reason".into(), Value::from(e.to_string()));
            let seq = journal(shared, "chore-run", m);
            return Response::Refused {
                reason: e.to_string(),
                journal_seq: seq,
            };
        }
    };
    let killed = report.outcome.cut || report.outcome.timed_out || report.outcome.stopped;
    let redact = |b: &[u8]| {
        if killed {
            aromba_redact::redact_cut(b)
        } else {
            aromba_redact::redact(b)
        }
    };
    let (stdout, stderr) = (
        redact(&report.outcome.stdout),
        redact(&report.outcome.stderr),
    );
    let clean = report.outcome.exit_code == Some(0)
        && !report.over_cap
        && !report.outside_touches
        && !killed;
    m.insert(
        "exit_code".into(),
        report.outcome.exit_code.map_or(Value::Null, Value::from),
    );
    m.insert("files_changed".into(), Value::from(report.files_changed));
    m.insert("bytes_changed".into(), Value::from(report.bytes_changed));
    m.insert("over_cap".into(), Value::from(report.over_cap));
    m.insert(
        "outside_touches".into(),
        Value::from(report.outside_touches),
    );
    m.insert(
        "verdict".into(),
        Value::from(if clean { "clean" } else { "failed" }),
    );
    journal(shared, "chore-run", m);
    if report.outside_touches {
        raise(
            shared,
            None,
            Signal::FilesOutsideTouches {
                chore: name.to_string(),
                paths: vec![report.refused_write.as_deref().map_or_else(
                    || "a write the cage refused".to_string(),
                    |line| {
                        String::from_utf8_lossy(&aromba_redact::redact(line.as_bytes()).text)
                            .into_owned()
                    },
                )],
            },
        );
    }
    let mut receipt = format!(
        "{name}: {} run, {}, {} files changed ({} bytes)",
        if dry_run { "dry" } else { "real" },
        match report.outcome.exit_code {
            Some(0) => "exit 0".to_string(),
            Some(c) => format!("exit {c}"),
            None => "killed".to_string(),
        },
        report.files_changed,
        report.bytes_changed
    );
    if report.over_cap {
        receipt.push_str("; killed at the damage cap");
    }
    if report.outside_touches {
        receipt.push_str("; killed at its first write outside its touches");
    }
    if report.outcome.exit_code == Some(0) && (mode == Mode::DryRun || clean) {
        let green = chore.header.color == crate::chores::header::Color::Green;
        for action in &chore.header.actions {
            let concrete = match expand_action(action) {
                Ok(c) => c,
                Err(e) => {
                    receipt.push_str(&format!("; {}: could not fill in ({e})", action.join(" ")));
                    continue;
                }
            };
            if concrete.is_empty() {
                receipt.push_str(&format!("; {}: nothing to do", action.join(" ")));
            }
            for a in concrete {
                receipt.push_str("; ");
                if mode == Mode::DryRun {
                    receipt.push_str(&format!("would ask for: {}", a.join(" ")));
                } else {
                    receipt.push_str(&chore_action(shared, name, green, &a));
                }
            }
        }
    }
    if mode == Mode::DryRun && report.outcome.exit_code == Some(0) {
        // From the root terminal the owner saw this dry run; the Worker
        // must still show it and say so.
        let record = if source == RunSource::RootTerminal {
            seen.clone()
        } else {
            runs.join(format!("{name}.dry-ran"))
        };
        let _ = std::fs::write(&record, receipt.as_bytes());
    }
    let _ = std::fs::write(runs.join(format!("{name}.last")), receipt.as_bytes());
    let mut r = Map::new();
    r.insert("chore".into(), Value::from(name));
    r.insert("receipt".into(), Value::from(receipt.as_str()));
    journal(shared, "receipt", r);
    Response::Receipt {
        receipt,
        stdout: stdout.text,
        stderr: stderr.text,
        ok: clean,
    }
}

/// Moves the ladder by `how`, carries out the move, and answers with the step.
fn move_ladder(
    shared: &Shared,
    how: fn(&mut Ladder) -> Result<Option<Event>, LadderError>,
) -> Response {
    let moved = how(&mut shared.ladder.lock().unwrap_or_else(|p| p.into_inner()));
    after_move(shared, moved);
    ladder_response(shared)
}

fn ladder_response(shared: &Shared) -> Response {
    let step = shared
        .ladder
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .step();
    Response::Ladder {
        step: step as u64,
        name: step.name().into(),
        message: step.message().into(),
    }
}

fn status(shared: &Shared) -> Response {
    let (step, reason) = {
        let l = shared.ladder.lock().unwrap_or_else(|p| p.into_inner());
        (l.step(), l.reason().to_string())
    };
    let now = shared.options.clock.now();
    let phase = match &shared.baseline {
        None => "not installed".to_string(),
        Some(b) => {
            let day = now.saturating_sub(b.installed_at) / 86_400 + 1;
            if day <= 7 {
                format!("day {day}: green chores only until day 8")
            } else {
                format!("day {day}: yellow and red chores with approval")
            }
        }
    };
    let (journal_seq, journal_head) = {
        let j = shared.journal.lock().unwrap_or_else(|p| p.into_inner());
        (j.head().seq, j.head().hash.clone())
    };
    Response::Status(Status {
        ladder_step: step as u64,
        ladder_name: step.name().into(),
        ladder_reason: reason,
        phase,
        isolation: shared.isolation.clone(),
        integrity: shared
            .integrity
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone(),
        journal_seq,
        journal_head,
        policy_sha256: shared.policy_sha256.clone(),
    })
}

/// At Slow and above, one command a minute; and too many commands in the
/// window is a signal. Returns a refusal when the read must wait.
fn pace(shared: &Shared, peer: &PeerCred) -> Option<String> {
    let now = shared.options.clock.now();
    let step = shared
        .ladder
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .step();
    let mut recent = shared.recent.lock().unwrap_or_else(|p| p.into_inner());
    if step >= Step::Slow
        && let Some(&last) = recent.back()
        && now.saturating_sub(last) < SLOW_INTERVAL_S
    {
        return Some(format!(
            "I'm slowed down (ladder step {}): one command a minute; try again in {} s",
            step.name(),
            SLOW_INTERVAL_S - now.saturating_sub(last)
        ));
    }
    recent.push_back(now);
    let window = shared.options.command_window_s;
    while recent
        .front()
        .is_some_and(|&t| now.saturating_sub(t) >= window)
    {
        recent.pop_front();
    }
    if recent.len() > shared.options.command_threshold {
        let count = recent.len();
        // Start a new window: one signal per burst, not one per command.
        let last = recent.back().copied();
        recent.clear();
        recent.extend(last);
        drop(recent);
        raise(
            shared,
            Some(peer),
            Signal::TooManyCommands {
                count,
                window_s: window,
            },
        );
    }
    None
}

fn request_fields(peer: &PeerCred, cmd: &str, args: &[String]) -> Map<String, Value> {
    let mut m = peer_fields(peer, Socket::Worker);
    m.insert("cmd".into(), Value::from(cmd));
    m.insert("args".into(), Value::from(args.to_vec()));
    m
}

/// Journals a ladder signal and moves the ladder.
fn raise(shared: &Shared, peer: Option<&PeerCred>, signal: Signal) {
    let mut m = match peer {
        Some(p) => peer_fields(p, Socket::Worker),
        None => Map::new(),
    };
    m.insert("signal".into(), Value::from(signal.kind()));
    m.insert("detail".into(), Value::from(signal.to_string()));
    journal(shared, "ladder-signal", m);
    let moved = shared
        .ladder
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .signal(&signal);
    after_move(shared, moved);
}

/// Journals a move of the ladder and carries out what the new step means.
fn after_move(shared: &Shared, moved: Result<Option<Event>, LadderError>) {
    let event = match moved {
        Ok(Some(e)) => e,
        Ok(None) => return,
        Err(e) => {
            // The ladder's file could not be written: stop serving rather
            // than run on with a state that would not survive a restart.
            let mut m = Map::new();
            m.insert("error".into(), Value::from(e.to_string()));
            journal(shared, "ladder-unwritable", m);
            shared.wake();
            return;
        }
    };
    let mut m = Map::new();
    m.insert("event_id".into(), Value::from(event.id));
    m.insert("from".into(), Value::from(event.from.name()));
    m.insert("to".into(), Value::from(event.to.name()));
    m.insert("reason".into(), Value::from(event.reason.as_str()));
    m.insert("message".into(), Value::from(event.message.as_str()));
    journal(shared, "ladder-move", m);
    if event.to >= Step::Cut {
        wipe_ai_key(shared);
    }
    if event.to == Step::Disarm {
        shared.wake();
    }
}

/// At Cut the Worker's AI key goes: overwritten, synced, removed. The
/// Worker is told to drop its copy by the ladder event it fetches.
fn wipe_ai_key(shared: &Shared) {
    let path = shared.options.layout.ai_key_file();
    let Ok(meta) = std::fs::metadata(&path) else {
        return;
    };
    let result = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .and_then(|mut f| {
            use std::io::Write;
            f.write_all(&vec![0u8; usize::try_from(meta.len()).unwrap_or(0)])?;
            f.sync_all()?;
            std::fs::remove_file(&path)
        });
    let mut m = Map::new();
    m.insert("path".into(), Value::from(path.to_string_lossy().as_ref()));
    if let Err(e) = &result {
        m.insert("error".into(), Value::from(e.to_string()));
    }
    journal(shared, "ai-key-wiped", m);
}

/// Whether the cage can be built here: one real caged `/bin/true`, with the
/// same bubblewrap flags and seccomp filter chores get.
fn isolation() -> String {
    let probe = exec::pick_binary("bwrap", &["/usr/bin/bwrap", "/bin/bwrap"])
        .map_err(|e| e.to_string())
        .and_then(|bwrap| crate::cage::probe(&bwrap));
    match probe {
        Ok(()) => "available".into(),
        Err(why) => format!("none ({why})"),
    }
}

/// Compares the baseline with what is on disk; a mismatch is a signal.
fn check_integrity(shared: &Shared) {
    let Some(baseline) = &shared.baseline else {
        *shared.integrity.lock().unwrap_or_else(|p| p.into_inner()) =
            "no baseline (not installed)".into();
        return;
    };
    let bad = baseline.check(&shared.options.layout);
    let now = shared.options.clock.now();
    let state = if bad.is_empty() {
        format!(
            "ok (checked at {})",
            crate::journal::time::rfc3339(std::time::UNIX_EPOCH + Duration::from_secs(now))
        )
    } else {
        format!("MISMATCH: {}", bad.join("; "))
    };
    *shared.integrity.lock().unwrap_or_else(|p| p.into_inner()) = state;
    if !bad.is_empty() {
        raise(
            shared,
            None,
            Signal::IntegrityMismatch {
                what: bad.join("; "),
            },
        );
    }
}

/// The watcher: the ladder's decay, the Worker's connections, and the
/// integrity check every `integrity_interval`.
fn watch(shared: &Shared) {
    let mut last_integrity = std::time::Instant::now();
    while !shared.shutdown.load(Ordering::SeqCst) {
        thread::sleep(shared.options.watch_interval);
        let decayed = shared
            .ladder
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .decay();
        after_move(shared, decayed);
        let allowed = crate::netwatch::Allowed::read(&shared.options.layout.network_file());
        for remote in crate::netwatch::connections_of(shared.options.worker_uid) {
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
            // Hourly too: quarantined folders past their 7 days.
            if let Ok(purged) = crate::chores::quarantine::purge(
                &shared.options.layout,
                std::time::SystemTime::now(),
            ) && !purged.is_empty()
            {
                let mut m = Map::new();
                let names: Vec<String> = purged
                    .iter()
                    .map(|p| p.to_string_lossy().into_owned())
                    .collect();
                m.insert("purged".into(), Value::from(names));
                journal(shared, "quarantine-purged", m);
            }
        }
    }
}

/// Waits for opens of the honeypot files; each is a signal.
fn watch_honeypots(shared: &Shared) {
    let Ok(mut inotify) = crate::system::Inotify::new() else {
        journal(shared, "honeypots-unwatched", Map::new());
        return;
    };
    let mut watched = Vec::new();
    for path in shared.options.layout.honeypots() {
        if let Ok(wd) = inotify.watch_opens(&path) {
            watched.push((wd, path));
        }
    }
    if watched.is_empty() {
        return;
    }
    while !shared.shutdown.load(Ordering::SeqCst) {
        let Ok(wds) = inotify.wait() else { return };
        for wd in wds {
            if let Some((_, path)) = watched.iter().find(|(w, _)| *w == wd) {
                raise(
                    shared,
                    None,
                    Signal::HoneypotRead {
                        path: path.to_string_lossy().into_owned(),
                    },
                );
            }
        }
    }
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
    if let Some(reason) = pace(shared, peer) {
        let mut m = request_fields(peer, &cmd, &args);
        m.insert("verdict".into(), Value::from("refused"));
        m.insert("reason".into(), Value::from(reason.as_str()));
        return match journal(shared, "read", m) {
            Some(seq) => Response::Refused {
                reason,
                journal_seq: Some(seq),
            },
            None => unjournaled(),
        };
    }
    let allowed = match policy::check(Table::Allow, &cmd, &args) {
        Ok(a) => a,
        Err(refused) => {
            let mut m = request_fields(peer, &cmd, &args);
            m.insert("verdict".into(), Value::from("refused"));
            m.insert("reason".into(), Value::from(refused.reason.as_str()));
            let seq = journal(shared, "read", m);
            if let Some(signal) = refused.signal.clone() {
                raise(shared, Some(peer), signal);
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
    let bounds = Bounds::for_rule(rule);
    let env = exec::rule_env(rule);
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
