//! The Warden's two sockets and what happens to a request.
//!
//! The Worker socket answers only the Worker's uid; the control socket only
//! root; the kernel says who the peer is (`SO_PEERCRED`) on every
//! connection. Each connection has a thread and a slot from its socket's own
//! pool, so the Worker can never take the control socket's; a request must
//! arrive whole, and an answer be taken whole, within a deadline for the
//! whole exchange. The commands running at once are bounded, so one slow
//! command does not hold up the others. Every request on the Worker socket
//! is counted and paced before it is decoded, and a flood is a ladder
//! signal. A read goes: policy → exec → redaction → one journal line →
//! answer. A request that cannot be journaled is not served.
//!
//! This file holds the server's state (`Shared`), binding and the journal
//! helpers; by job: `event` (every journal line, typed, and the one place
//! its fields are named), `connection` (accepting, peer check, pools,
//! deadlines, framing), `pace` (counting, Slow, floods, rate-limited journal
//! lines), `dispatch` (which socket serves which request; status and the
//! ladder's answers), `read` (the read path), `ladder_moves` (signals and
//! what each step means), `watch` (decay, connections, integrity, expiries,
//! honeypots), `chores` (chore requests), `chore_run` (a run, phase by
//! phase), `owner` (proposals, taps, the PIN and the root terminal's
//! decisions) and `scan` (what the Worker's scan asks: prod mode on,
//! fences; `network.toml` into the baseline).
//!
//! # A panic is a bug, never a lockout
//!
//! A panic while serving unwinds that connection's thread only (no profile
//! sets `panic = "abort"`): its slots are guards and come back. Every
//! `Mutex` here is taken with `lock().unwrap_or_else(|p| p.into_inner())`,
//! never `lock().unwrap()`: a lock poisoned by one panic must not refuse
//! root's `aromba status` and `aromba panic` from then on. Going on is safe
//! because no guarded state is trusted beyond what its own operation
//! re-checks (the journal's file is the truth; the ladder and the state
//! records are written atomically and read back). The watcher and the
//! honeypot threads are started once: each handles every error as a value.

#![forbid(unsafe_code)]

mod chore_run;
mod chores;
mod connection;
mod dispatch;
mod event;
mod health;
mod honeypots;
mod in_app;
mod intent;
mod ladder_moves;
mod owner;
mod pace;
mod read;
mod recover;
mod scan;
mod skills;
mod trust;
mod uninstall;
mod update;
mod watch;

pub use uninstall::{HostParts, UNITS};

use crate::integrity::Baseline;
use crate::journal::{AuditKey, Journal, JournalConfig, Rotation, sha256_hex};
use crate::ladder::{Clock, Ladder, LadderError, Step, SystemClock};
use crate::layout::Layout;
use crate::policy;
use crate::signal::Signal;
use aromba_warden_proto::Response;
use connection::{Slots, accept_loop};
use dispatch::serve;
use event::{Event, Rendered};
use honeypots::watch_honeypots;
use ladder_moves::{after_move, raise};
use read::read;
use std::io;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;
use watch::{check_integrity, isolation, watch};

/// Commands (reads, dry runs, approvals) in ten minutes above which the
/// ladder climbs a step. The Worker's own schedule asks for a handful of
/// health numbers every few minutes; a person in the chat, a few more.
pub const COMMAND_THRESHOLD: usize = 60;
/// Requests of any kind in ten minutes above which the ladder climbs a
/// step: the Worker keeps one connection and asks something (often a ping
/// or its events) every few seconds, about 200 in ten minutes at most.
pub const REQUEST_THRESHOLD: usize = 600;
/// Connections to the Worker socket in ten minutes above which the ladder
/// climbs a step (a client that connects for every request stays below).
pub const CONNECTION_THRESHOLD: usize = 600;
/// At Slow and above: one request a minute (pings, events and the chat's
/// panic excepted).
pub const SLOW_INTERVAL_S: u64 = 60;
/// At Slow, the Worker's background work (health, schedule, scans,
/// updates): one request in this many seconds, in a lane of its own.
pub const SLOW_BACKGROUND_INTERVAL_S: u64 = 600;

#[derive(Debug)]
pub struct ServeOptions {
    pub layout: Layout,
    /// The Worker's account: the only uid its socket answers.
    pub worker_uid: u32,
    pub worker_gid: u32,
    /// Commands running at once (the Worker's reads, dry runs and
    /// approvals; the root terminal's requests never wait for one).
    pub max_running: usize,
    /// Open connections to the Worker socket. The Worker keeps one.
    pub max_worker_connections: usize,
    /// Open connections to the control socket: a pool of its own, which
    /// only root's connections ever take.
    pub max_control_connections: usize,
    /// From when the Warden starts waiting for a request (a connection
    /// accepted, or the last answer taken) until that request has arrived
    /// whole; past it the connection is closed, however the bytes trickle.
    pub request_deadline: Duration,
    /// From the first byte of an answer until the peer has taken it whole.
    /// A command's own run time is in neither deadline.
    pub answer_deadline: Duration,
    pub fsync: bool,
    /// The ladder's clock (tests move it by hand).
    pub clock: Arc<dyn Clock>,
    /// How often the network tables are read and the ladder's decay checked.
    pub watch_interval: Duration,
    /// How often the integrity baseline is checked after start.
    pub integrity_interval: Duration,
    /// More commands than this in `command_window_s` is a ladder signal.
    pub command_threshold: usize,
    pub command_window_s: u64,
    /// More requests of any kind, or more connections, than these in
    /// `flood_window_s` is a ladder signal; so is a connection refused for
    /// a full pool. At most one such signal a window.
    pub request_threshold: usize,
    pub connection_threshold: usize,
    pub flood_window_s: u64,
    /// Lines a flood would repeat (paced requests, refused connections,
    /// missed deadlines) are journaled at most once per this many seconds
    /// each, with the count of those left out.
    pub quiet_interval_s: u64,
    /// When the journal rotates, what it keeps, and how fast a drop of
    /// history is a ladder signal.
    pub journal_rotation: Rotation,
    /// Read the Worker's TCP connections. Off only where the test's own uid
    /// stands in for the Worker, whose connections are the test machine's.
    pub watch_network: bool,
    /// The Worker as the path check sees it (whose writes could swap a
    /// path before a read opens it). `None`, the default: `worker_uid`
    /// with `worker_gid` and its groups in `/etc/group`, read at each
    /// request. Tests whose own uid (root) stands in for the Worker on the
    /// socket name a test account here.
    pub worker_account: Option<crate::users::WorkerAccount>,
    /// How much a red run's seal lists and walks (tests make it small).
    pub seal_limits: crate::chores::snapshot::SealLimits,
    /// What a red run's snapshot leaves free on the store's filesystem
    /// (tests, on a machine whose disk is not theirs, name a few bytes).
    pub snapshot_keep_free: crate::chores::snapshot::KeepFree,
    /// Where releases are installed (`/opt/aromba`).
    pub releases: crate::update::Releases,
    /// The release public keys (base64 lines); `None`: the compiled-in
    /// ones (a build without them refuses to update).
    pub release_keys: Option<Vec<String>>,
    /// How the egress proxy looks up a skill's hosts (tests name their own
    /// loopback servers).
    pub egress_resolver: crate::egress::Resolver,
    /// The release channel this server follows.
    pub channel: String,
    /// `systemctl`, which restarts both services after an update (a
    /// stand-in in tests: the test machines have no systemd as PID 1).
    pub systemctl: PathBuf,
    /// What Aromba put on the system beyond the Warden's tree: the units,
    /// the command's link, the user. `None` (a Warden under `--root`):
    /// no service is restarted or removed, no user removed.
    pub host: Option<uninstall::HostParts>,
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
            max_worker_connections: 16,
            max_control_connections: 8,
            request_deadline: Duration::from_secs(60),
            answer_deadline: Duration::from_secs(30),
            fsync: true,
            clock: Arc::new(SystemClock),
            watch_interval: Duration::from_secs(2),
            integrity_interval: Duration::from_secs(3600),
            command_threshold: COMMAND_THRESHOLD,
            command_window_s: 600,
            request_threshold: REQUEST_THRESHOLD,
            connection_threshold: CONNECTION_THRESHOLD,
            flood_window_s: 600,
            quiet_interval_s: 60,
            journal_rotation: Rotation::default(),
            watch_network: true,
            worker_account: None,
            seal_limits: crate::chores::snapshot::SealLimits::default(),
            snapshot_keep_free: crate::chores::snapshot::KeepFree::default(),
            releases: crate::update::Releases::system(),
            release_keys: None,
            egress_resolver: crate::egress::Resolver::System,
            channel: "stable".into(),
            systemctl: PathBuf::from("/usr/bin/systemctl"),
            host: Some(uninstall::HostParts::system()),
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

struct Shared {
    options: ServeOptions,
    journal: Mutex<Journal>,
    running: Slots,
    worker_connections: Slots,
    control_connections: Slots,
    policy_sha256: String,
    shutdown: AtomicBool,
    ladder: Mutex<Ladder>,
    /// The Worker's requests and connections counted, for Slow and floods.
    pacing: Mutex<pace::Pacing>,
    /// The baseline read at start; re-taken only through `state::change`.
    baseline: Mutex<Option<Baseline>>,
    integrity: Mutex<String>,
    /// The journal's last verification, in words (`trust.rs`).
    journal_checked: Mutex<String>,
    isolation: String,
    /// One PIN check at a time: the count of wrong PINs (in the Warden's
    /// state, `pin::Attempts`) is read, counted and written under it, so
    /// guesses sent at once cannot all pass the lock before one is counted.
    pin_check: Mutex<()>,
    /// One `run_due` decision at a time: its schedule is read and its time
    /// recorded as one step, so requests at once cannot all find the
    /// chore due.
    schedule_check: Mutex<()>,
    /// One `check_anchor` read at a time: each holds every journal file
    /// open while it reads them, so checks at once from every Worker
    /// connection could take more descriptors than the Warden has.
    anchor_check: Mutex<()>,
    /// Held through a chore's real run (snapshot, run, seal) and through an
    /// undo: what a seal records as the run's is then not another run's.
    changing: Mutex<()>,
    /// The stop switch of every chore run under way: the ladder reaching
    /// Freeze or Cut stops them all (a red run approved before `/panic`
    /// does not finish its work after it).
    runs_under_way: Mutex<Vec<std::sync::Weak<AtomicBool>>>,
    /// The honeypots' watch, armed before the sockets were bound (none
    /// when inotify is not to be had; journaled).
    honeypots: Option<honeypots::Honeypots>,
}

impl Shared {
    /// The ladder's step now.
    fn step(&self) -> crate::ladder::Step {
        self.ladder.lock().unwrap_or_else(|p| p.into_inner()).step()
    }

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

    /// A stop switch for a chore run about to start, already thrown when
    /// the ladder stands at Freeze or above (a move between the run's
    /// admission and this call still stops it).
    fn run_switch(&self) -> Arc<AtomicBool> {
        let switch = Arc::new(AtomicBool::new(false));
        let mut runs = self
            .runs_under_way
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        runs.retain(|r| r.strong_count() > 0);
        runs.push(Arc::downgrade(&switch));
        drop(runs);
        if self.step() >= crate::ladder::Step::Freeze {
            switch.store(true, Ordering::SeqCst);
        }
        switch
    }

    /// Stops every chore run under way (the ladder reached Freeze or Cut).
    fn stop_runs(&self) -> usize {
        let runs = self
            .runs_under_way
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let mut stopped = 0;
        for switch in runs.iter().filter_map(std::sync::Weak::upgrade) {
            if !switch.swap(true, Ordering::SeqCst) {
                stopped += 1;
            }
        }
        stopped
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
        let result = result.map_err(|e| e.to_string());
        journal(
            self,
            Event::StateRecord {
                record: name,
                written: bytes.is_some(),
                error: result.as_ref().err().map(String::as_str),
            },
        );
        result
    }

    fn wake(&self) {
        self.stop_serving();
        let layout = &self.options.layout;
        let _ = UnixStream::connect(layout.worker_socket());
        let _ = UnixStream::connect(layout.control_socket());
    }

    /// No request is read from now on, and the watching threads end at
    /// their next turn; the accept loops wait for [`Shared::stop_soon`].
    fn stop_serving(&self) {
        self.shutdown.store(true, Ordering::SeqCst);
        // Nothing is planted from now on (a planting under way ends first).
        if let Some(pots) = &self.honeypots {
            pots.stop();
        }
    }

    /// Stops serving: no connection is taken from now on, and the accept
    /// loops wake `after` this (time for the answer under way).
    fn stop_soon(&self, after: Duration) {
        self.stop_serving();
        let layout = &self.options.layout;
        let sockets = [layout.worker_socket(), layout.control_socket()];
        thread::spawn(move || {
            thread::sleep(after);
            for socket in sockets {
                let _ = UnixStream::connect(socket);
            }
        });
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
        config.rotation = options.journal_rotation.clone();
        config.key = key;
        config.fsync = options.fsync;
        config.reader_gid = Some(options.worker_gid);
        let opened = Journal::open(config).map_err(ServeError::Journal)?;
        let baseline = Baseline::read(layout);
        // Installed if the baseline is there, or if what install writes
        // before it is: a lost baseline is an integrity failure.
        let installed = !matches!(baseline, Ok(None)) || layout.install_evidence().is_some();
        let ladder = Ladder::load(layout.ladder_file(), options.clock.clone(), installed)
            .map_err(ServeError::Ladder)?;
        if ladder.step() == Step::Disarm {
            return Err(ServeError::Disarmed);
        }
        // Armed before the Worker's socket is bound: a read the moment the
        // Warden starts is caught like any other.
        let (honeypots, armed) = honeypots::arm_all(layout, options.worker_gid);
        let isolation = isolation();
        let worker = bind(&layout.worker_socket(), 0o660, Some(options.worker_gid))?;
        let control = bind(&layout.control_socket(), 0o600, None)?;
        let shared = Arc::new(Shared {
            running: Slots::new(options.max_running.max(1)),
            worker_connections: Slots::new(options.max_worker_connections.max(1)),
            control_connections: Slots::new(options.max_control_connections.max(1)),
            policy_sha256: sha256_hex(policy::render().as_bytes()),
            journal: Mutex::new(opened),
            shutdown: AtomicBool::new(false),
            ladder: Mutex::new(ladder),
            pacing: Mutex::default(),
            integrity: Mutex::new(String::from("not checked yet")),
            journal_checked: Mutex::new(String::from("not checked yet")),
            baseline: Mutex::new(baseline.as_ref().ok().cloned().flatten()),
            pin_check: Mutex::default(),
            schedule_check: Mutex::default(),
            anchor_check: Mutex::default(),
            changing: Mutex::default(),
            runs_under_way: Mutex::default(),
            honeypots,
            isolation,
            options,
        });
        let server = Server {
            shared,
            worker,
            control,
        };
        let _ = journal(&server.shared, Event::WardenStarted);
        recover::close_interrupted(&server.shared);
        honeypots::report_armed(&server.shared, &armed);
        if let Err(e) = baseline {
            raise(&server.shared, None, Signal::IntegrityMismatch { what: e });
        }
        update::finish_pending(&server.shared);
        check_integrity(&server.shared);
        Ok(server)
    }

    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle {
            shared: self.shared.clone(),
        }
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

/// Appends the line `event` renders (`event/`); `None` when the journal
/// could not take it.
fn journal(shared: &Shared, event: Event<'_>) -> Option<u64> {
    write(shared, event.render())
}

/// The line `aromba-warden rollback` journals itself, the Warden stopped
/// while it runs: rendered here with every other line.
pub fn rolled_back_line(
    failed: &str,
    restored: &str,
) -> serde_json::Map<String, serde_json::Value> {
    Event::ReleaseRolledBack { failed, restored }
        .render()
        .into_fields()
}

/// Appends a rendered line; `None` when the journal could not take it.
/// When rotation has dropped history faster than its configured rate, or
/// left the journal holding less than its minimum history, that is a
/// ladder signal (at most one a window; the journal keeps the count).
fn write(shared: &Shared, line: Rendered) -> Option<u64> {
    let (seq, alarm) = {
        let mut j = shared.journal.lock().unwrap_or_else(|p| p.into_inner());
        let seq = j.append(line.into_fields()).ok();
        (seq, j.take_drop_alarm())
    };
    if let Some(alarm) = alarm {
        raise(
            shared,
            None,
            Signal::TooManyCommands {
                count: alarm.dropped,
                window_s: alarm.window.as_secs(),
                what: if alarm.young {
                    "journal files rotated away, though the journal keeps at least the lines written"
                } else {
                    "journal files rotated away"
                },
            },
        );
    }
    seq
}

fn unjournaled() -> Response {
    Response::Error {
        message: "the journal cannot be written; the Warden serves nothing it cannot journal"
            .into(),
    }
}
