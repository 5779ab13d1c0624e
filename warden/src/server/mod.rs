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
mod chores;
mod owner;

use chores::{RunSource, chore_run, chores_list, dry_run_shown};
use owner::{Proposal, approve, propose};
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
    /// The Worker as the path check sees it (whose writes could swap a
    /// path before a read opens it). `None`, the default: `worker_uid`
    /// with `worker_gid` and its groups in `/etc/group`, read at each
    /// request. Tests whose own uid (root) stands in for the Worker on the
    /// socket name a test account here.
    pub worker_account: Option<crate::users::WorkerAccount>,
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
            worker_account: None,
        }
    }

    /// Who a read from the Worker socket comes from, for the path check.
    pub fn requester(&self) -> io::Result<policy::Requester> {
        let account = match &self.worker_account {
            Some(a) => a.clone(),
            None => crate::users::WorkerAccount::system(self.worker_uid, self.worker_gid)?,
        };
        Ok(policy::Requester::Worker(account))
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
    /// A directory from `/` down to one of the Warden's is not root's
    /// alone (`layout.rs`).
    Layout(crate::layout::MakeDirError),
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
            ServeError::Layout(e) => write!(f, "{e}"),
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
    /// The baseline read at start; re-taken only through `state::change`.
    baseline: Mutex<Option<Baseline>>,
    integrity: Mutex<String>,
    isolation: String,
    /// Wrong PINs in a row (kept in memory: a restart of the Warden is
    /// root's doing, not a guesser's).
    pin_attempts: Mutex<crate::pin::Attempts>,
    /// Held through a chore's real run (snapshot, run, seal) and through an
    /// undo: what a seal records as the run's is then not another run's.
    changing: Mutex<()>,
}

impl Shared {
    /// The right to change files: one real run or undo at a time; another
    /// is refused rather than left waiting on a connection.
    fn one_change_at_a_time(&self) -> Result<std::sync::MutexGuard<'_, ()>, String> {
        match self.changing.try_lock() {
            Ok(g) => Ok(g),
            Err(std::sync::TryLockError::Poisoned(p)) => Ok(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => Err(
                "another chore's real run or an undo is under way; try again when it ends".into(),
            ),
        }
    }

    /// When the Warden was installed; `None` when it was not.
    fn installed_at(&self) -> Option<u64> {
        self.baseline
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|b| b.installed_at)
    }

    /// Changes one of the Warden's state records (`None` removes it) and
    /// re-takes the baseline, journaling the change.
    fn change_state(&self, name: &str, bytes: Option<&[u8]>) -> Result<(), String> {
        let bytes = bytes.map(<[u8]>::to_vec);
        self.change_state_with(name, |_| Ok(bytes))
    }

    /// As [`Shared::change_state`], the new bytes made from the record's
    /// current ones under the same lock, so two changes cannot lose one.
    fn change_state_with(
        &self,
        name: &str,
        make: impl FnOnce(Option<Vec<u8>>) -> Result<Option<Vec<u8>>, String>,
    ) -> Result<(), String> {
        let layout = &self.options.layout;
        let mut baseline = self.baseline.lock().unwrap_or_else(|p| p.into_inner());
        let bytes = match crate::state::read(layout, name) {
            Ok(current) => make(current)?,
            Err(e) => return Err(e.to_string()),
        };
        let result = crate::state::change(layout, &mut baseline, name, bytes.as_deref());
        drop(baseline);
        let mut m = Map::new();
        m.insert("record".into(), Value::from(name));
        m.insert(
            "change".into(),
            Value::from(if bytes.is_some() {
                "written"
            } else {
                "removed"
            }),
        );
        match &result {
            Ok(()) => {
                m.insert("baseline".into(), Value::from("re-taken"));
            }
            Err(e) => {
                m.insert("error".into(), Value::from(e.to_string()));
            }
        }
        journal(self, "state-record", m);
        result.map_err(|e| e.to_string())
    }

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
    /// Refuses unless every directory from `/` down to each of the
    /// Warden's is root's and writable by no one else (`layout.rs`), makes
    /// the missing ones, opens the journal and binds both sockets.
    pub fn bind(options: ServeOptions) -> Result<Server, ServeError> {
        let layout = &options.layout;
        layout.check().map_err(|u| ServeError::Layout(u.into()))?;
        for (dir, mode) in [
            (&layout.run_dir, 0o755),
            (&layout.state_dir, 0o700),
            (&layout.journal_dir, 0o755),
        ] {
            crate::layout::make_dir(dir, mode).map_err(ServeError::Layout)?;
        }
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
        // Installed if the baseline is there, or if what install writes
        // before it is: a lost baseline is an integrity failure.
        let installed = !matches!(baseline, Ok(None)) || layout.install_evidence().is_some();
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
            baseline: Mutex::new(baseline.as_ref().ok().cloned().flatten()),
            pin_attempts: Mutex::default(),
            changing: Mutex::default(),
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
            // A red action runs only through a proposal (the Warden issues
            // the action id) and a relay-signed tap on it; an action named
            // with an approval of the Worker's own making is refused, and
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
                "a red action runs only through a proposal and a relay-signed tap the Warden verifies (propose, then approve)"
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
        (Socket::Worker, Request::Propose { chore }) => propose(shared, peer, Proposal::Run(chore)),
        (Socket::Worker, Request::ProposeConfirmCap { chore }) => {
            propose(shared, peer, Proposal::ConfirmCap(chore))
        }
        (Socket::Worker, Request::ProposeUndo { undo_id }) => {
            propose(shared, peer, Proposal::Undo(undo_id))
        }
        (Socket::Worker, Request::ProposeProdModeOff) => {
            propose(shared, peer, Proposal::ProdModeOff)
        }
        (Socket::Control, Request::ConfirmCap { chore }) => {
            owner::confirm_cap_from_terminal(shared, &chore)
        }
        (Socket::Control, Request::SetPin { pin }) => owner::set_pin(shared, &pin),
        (Socket::Control, Request::ProdMode { on, pin }) => {
            owner::prod_mode_from_terminal(shared, on, pin.as_deref())
        }
        (Socket::Control, Request::Undo { undo_id }) => {
            owner::undo(shared, &undo_id, RunSource::RootTerminal)
        }
        (
            Socket::Worker,
            Request::Approve {
                action_id,
                button,
                chat,
                time,
                signature,
                pin,
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
            pin,
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
            m.insert("request".into(), Value::from(without_pin(other)));
            journal(shared, "wrong-socket", m);
            Response::Error {
                message: format!("that request is not served on the {} socket", socket.name()),
            }
        }
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
    let installed_at = shared.installed_at();
    let phase = match installed_at {
        None if shared.options.layout.install_evidence().is_some() => {
            "installed, but the integrity baseline is missing or unreadable".to_string()
        }
        None => "not installed".to_string(),
        Some(at) => {
            let day = now.saturating_sub(at) / 86_400 + 1;
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
        prod_mode: match crate::state::read(&shared.options.layout, "prod-mode") {
            Ok(Some(b)) => String::from_utf8_lossy(&b).trim().to_string(),
            Ok(None) => "off".into(),
            Err(e) => format!("unknown ({e})"),
        },
        pin_set: matches!(
            crate::state::read(&shared.options.layout, crate::pin::RECORD),
            Ok(Some(_))
        ),
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

/// At Cut the Worker's AI key goes: overwritten, synced, removed — in the
/// Worker's configuration directory, so through its descriptor, never
/// following a link (`worker_dirs.rs`). The Worker is told to drop its copy
/// by the ladder event it fetches.
fn wipe_ai_key(shared: &Shared) {
    let path = shared.options.layout.ai_key_file();
    let result = match crate::worker_dirs::wipe(&path) {
        Ok(crate::worker_dirs::Wiped::Absent) => return,
        other => other,
    };
    let mut m = Map::new();
    m.insert("path".into(), Value::from(path.to_string_lossy().as_ref()));
    match &result {
        Err(e) => {
            m.insert("error".into(), Value::from(e.to_string()));
        }
        Ok(crate::worker_dirs::Wiped::LinkRemoved) => {
            m.insert(
                "found".into(),
                Value::from("a symbolic link: removed, not followed"),
            );
        }
        Ok(_) => {}
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
            // And snapshots past their 7 days of Undo.
            if let Ok(expired) = crate::chores::snapshot::purge(
                &shared.options.layout.snapshots_dir(),
                shared.options.clock.now(),
            ) && !expired.is_empty()
            {
                let mut m = Map::new();
                m.insert("undo_ids".into(), Value::from(expired));
                journal(shared, "snapshots-purged", m);
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
    let verdict = shared
        .options
        .requester()
        .map_err(|e| policy::Refused {
            reason: format!("the Worker's groups cannot be read ({e}), so no path can be judged"),
            signal: None,
        })
        .and_then(|requester| policy::check(Table::Allow, &cmd, &args, &requester));
    let allowed = match verdict {
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

/// A request for the journal, with any PIN it carries left out.
fn without_pin(request: Request) -> String {
    let hidden = |pin: Option<String>| pin.map(|_| "[pin]".to_string());
    let shown = match request {
        Request::SetPin { .. } => Request::SetPin {
            pin: "[pin]".into(),
        },
        Request::ProdMode { on, pin } => Request::ProdMode {
            on,
            pin: hidden(pin),
        },
        Request::Approve {
            action_id,
            button,
            chat,
            time,
            signature,
            pin,
        } => Request::Approve {
            action_id,
            button,
            chat,
            time,
            signature,
            pin: hidden(pin),
        },
        other => other,
    };
    format!("{shown:?}")
}
