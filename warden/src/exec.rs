//! Runs a command the policy allowed — the one place in Aromba that spawns a
//! process.
//!
//! The binary is the first existing path of the rule's `bins`, refused
//! unless owned by root and not writable by group or others. The child gets
//! an empty environment (plus the rule's `warden_env`), `/` as its working
//! directory, `/dev/null` as stdin, no other inherited descriptor, a session
//! and process group of its own that is killed whole at the timeout or when
//! its output passes the cap, and — for `low_priority` — nice 19 and the
//! idle IO class.
//!
//! # Output leaves this module only redacted
//!
//! A program's output is handed out only as [`Output`], whose one
//! constructor (private to this module) runs the redactor — `redact_cut`
//! when the run was killed before it ended (at the byte cap, the timeout,
//! the caller's stop or the tripwire), since its last line may hold the
//! start of a secret. The raw bytes live in `RawOutcome`, which is private
//! to this module and is consumed (and dropped) by the redaction: no code
//! anywhere else in the Warden — the read path, the chore runner, the
//! placeholders the Warden fills in from its own reads, the cage's probe —
//! can reach a raw byte, so none can put one in a receipt, an answer, an
//! error or the journal. The compiler holds this:
//!
//! ```compile_fail,E0603
//! // The raw outcome is not visible outside this module.
//! fn raw(o: aromba_warden::exec::RawOutcome) -> Vec<u8> { o.stdout }
//! ```
//!
//! ```compile_fail,E0616
//! // An Output's bytes are private; `text()` gives the redacted ones.
//! fn raw(o: aromba_warden::exec::Output) -> Vec<u8> { o.redacted.text }
//! ```
//!
//! Inside this module, the [`Tripwire`] reads the raw error output line by
//! line as it arrives: it must end a chore at its first refused write, while
//! the run is still going, and redaction needs the whole buffer, which
//! exists only at the end. It yields a yes or no and no bytes; the line it
//! tripped on is looked up afterwards in the redacted output.

#![forbid(unsafe_code)]

use crate::system;
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// How one run is bounded.
#[derive(Clone, Debug)]
pub struct Bounds {
    pub timeout: Duration,
    /// stdout and stderr together.
    pub max_output_bytes: usize,
    pub low_priority: bool,
    /// A descriptor the child keeps across exec (the cage's seccomp filter).
    pub keep_fd: Option<std::os::fd::RawFd>,
    /// Set from another thread to kill the run (the chore runner's damage
    /// cap); checked every 50 ms.
    pub stop: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// The writes the cage refused, counted by the kernel: the command is
    /// killed at the first.
    pub tripwire: Option<Tripwire>,
    /// The cgroups the child joins before it execs (a cage's).
    pub cgroup: crate::cage::limits::JoinFds,
    /// Values taken out of the output before anything else reads it (a
    /// skill's secrets), each as `[redacted:skill-secret]`.
    pub known_secrets: Vec<String>,
}

/// The writes a cage refused, as the kernel counts them
/// (`cage::refused`): the command is killed at the first. Without a
/// counter (where the kernel cannot count) it never trips.
#[derive(Clone, Default)]
pub struct Tripwire {
    /// Set when a refused write was counted.
    pub hit: std::sync::Arc<std::sync::atomic::AtomicBool>,
    counter: Option<std::sync::Arc<system::SyscallCounter>>,
    refused: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl std::fmt::Debug for Tripwire {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tripwire")
            .field("counting", &self.counter.is_some())
            .field("refused", &self.refused())
            .finish()
    }
}

impl Tripwire {
    pub fn new() -> Tripwire {
        Tripwire::default()
    }

    /// The same tripwire, read from `counter`.
    pub fn counting(&self, counter: system::SyscallCounter) -> Tripwire {
        Tripwire {
            counter: Some(std::sync::Arc::new(counter)),
            ..self.clone()
        }
    }

    pub fn is_counting(&self) -> bool {
        self.counter.is_some()
    }

    /// Reads the counter; whether it has tripped.
    fn check(&self) -> bool {
        use std::sync::atomic::Ordering;
        if let Some(c) = &self.counter
            && let Ok(n) = c.total()
        {
            self.refused.fetch_max(n, Ordering::SeqCst);
            if n > 0 {
                self.hit.store(true, Ordering::SeqCst);
            }
        }
        self.was_hit()
    }

    pub fn was_hit(&self) -> bool {
        self.hit.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How many writes the kernel refused (at the last reading).
    pub fn refused(&self) -> u64 {
        self.refused.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Bounds {
    /// The bounds a policy rule sets: its timeout, the policy's output cap,
    /// its priority.
    pub fn for_rule(rule: &crate::policy::Rule) -> Bounds {
        Bounds {
            timeout: Duration::from_secs(rule.timeout_s),
            max_output_bytes: usize::try_from(crate::policy::LIMITS.max_output_bytes)
                .unwrap_or(usize::MAX),
            low_priority: rule.low_priority,
            keep_fd: None,
            stop: None,
            tripwire: None,
            cgroup: Default::default(),
            known_secrets: Vec::new(),
        }
    }
}

/// The environment a policy rule gives its command: its `warden_env`, and
/// nothing else.
pub fn rule_env(rule: &crate::policy::Rule) -> Vec<(String, String)> {
    rule.warden_env
        .iter()
        .filter_map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect()
}

/// What the program did, before redaction. Private to this module: it
/// becomes an [`Outcome`] (redacted) before `run_program` returns, and the
/// raw bytes are dropped there.
struct RawOutcome {
    exit_code: Option<i32>,
    signal: Option<i32>,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    cut: bool,
    timed_out: bool,
    stopped: bool,
    duration: Duration,
}

impl RawOutcome {
    /// The one way out of this module: both streams through the redactor.
    fn redacted(self, known: &[String]) -> Outcome {
        // Killed before it ended on its own: the last line of each stream
        // may hold the start of a secret, too short for its rule.
        let killed = self.cut || self.timed_out || self.stopped;
        Outcome {
            exit_code: self.exit_code,
            signal: self.signal,
            stdout: Output::redact(self.stdout, killed, known),
            stderr: Output::redact(self.stderr, killed, known),
            cut: self.cut,
            timed_out: self.timed_out,
            stopped: self.stopped,
            memory_exceeded: false,
            duration: self.duration,
        }
    }
}

/// One stream of a program's output, redacted. It can only be made in this
/// module, by the redactor: holding an `Output` means holding bytes that
/// passed it.
pub struct Output {
    redacted: aromba_redact::Redacted,
}

impl Output {
    /// No output at all, for the tests of what is built around one.
    #[cfg(test)]
    pub(crate) fn quiet() -> Output {
        Output::redact(Vec::new(), false, &[])
    }

    fn redact(raw: Vec<u8>, killed: bool, known: &[String]) -> Output {
        let redacted = if !known.is_empty() {
            aromba_redact::redact_known(&raw, known, killed)
        } else if killed {
            aromba_redact::redact_cut(&raw)
        } else {
            aromba_redact::redact(&raw)
        };
        // `raw` is dropped here, the last place it existed.
        Output { redacted }
    }

    /// The redacted bytes.
    pub fn text(&self) -> &[u8] {
        &self.redacted.text
    }

    /// The redacted bytes, as UTF-8 with invalid sequences replaced.
    pub fn lossy(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.redacted.text)
    }

    pub fn into_text(self) -> Vec<u8> {
        self.redacted.text
    }

    /// What the redactor removed, per class.
    pub fn counts(&self) -> &aromba_redact::Counts {
        &self.redacted.counts
    }
}

impl std::fmt::Debug for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Output({:?})", self.lossy())
    }
}

/// What the program did, its output redacted.
#[derive(Debug)]
pub struct Outcome {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: Output,
    pub stderr: Output,
    /// The output passed the cap; the program was killed and the output cut.
    pub cut: bool,
    pub timed_out: bool,
    /// Killed because `Bounds::stop` was set or the tripwire was hit.
    pub stopped: bool,
    /// The cage's memory ceiling made the kernel kill something in it.
    pub memory_exceeded: bool,
    pub duration: Duration,
}

impl Outcome {
    /// How much the redactor took out of stdout and stderr together, per
    /// class, the classes it took nothing of left out.
    pub fn redactions(&self) -> Vec<(String, u64)> {
        aromba_redact::Class::ALL
            .iter()
            .filter_map(|class| {
                let n = u64::from(self.stdout.counts().get(*class))
                    + u64::from(self.stderr.counts().get(*class));
                (n > 0).then(|| (class.name().to_string(), n))
            })
            .collect()
    }

    /// The answer a read or a skill tool sends back: the redacted output,
    /// how it ended, and the journal line that recorded it.
    pub fn into_result(self, journal_seq: u64) -> aromba_warden_proto::ReadResult {
        let redactions = self.redactions();
        aromba_warden_proto::ReadResult {
            exit_code: self.exit_code,
            signal: self.signal,
            cut: self.cut,
            timed_out: self.timed_out,
            redactions,
            journal_seq,
            duration_ms: u64::try_from(self.duration.as_millis()).unwrap_or(u64::MAX),
            stdout: self.stdout.into_text(),
            stderr: self.stderr.into_text(),
        }
    }
}

#[derive(Debug)]
pub enum ExecError {
    NoBinary { cmd: String, tried: Vec<String> },
    UnsafeBinary { path: PathBuf, why: String },
    Spawn { path: PathBuf, source: io::Error },
    Wait(io::Error),
}

impl std::fmt::Display for ExecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExecError::NoBinary { cmd, tried } => {
                write!(
                    f,
                    "{cmd} is not installed here (looked for {})",
                    tried.join(", ")
                )
            }
            ExecError::UnsafeBinary { path, why } => {
                write!(f, "refusing to run {}: {why}", path.display())
            }
            ExecError::Spawn { path, source } => {
                write!(f, "could not start {}: {source}", path.display())
            }
            ExecError::Wait(e) => write!(f, "could not wait for the command: {e}"),
        }
    }
}

impl std::error::Error for ExecError {}

/// The first of `bins` that exists, if it is root's and not writable by
/// group or others.
pub fn pick_binary(cmd: &str, bins: &[&str]) -> Result<PathBuf, ExecError> {
    for bin in bins {
        let path = Path::new(bin);
        let Ok(meta) = std::fs::metadata(path) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        if meta.uid() != 0 {
            return Err(ExecError::UnsafeBinary {
                path: path.to_path_buf(),
                why: format!("it is owned by uid {}, not root", meta.uid()),
            });
        }
        if meta.mode() & 0o022 != 0 {
            return Err(ExecError::UnsafeBinary {
                path: path.to_path_buf(),
                why: format!(
                    "it is writable by group or others (mode {:o})",
                    meta.mode() & 0o7777
                ),
            });
        }
        return Ok(path.to_path_buf());
    }
    Err(ExecError::NoBinary {
        cmd: cmd.to_string(),
        tried: bins.iter().map(|s| s.to_string()).collect(),
    })
}

enum Event {
    Closed,
    OverCap,
    Exited(io::Result<std::process::ExitStatus>),
}

type Shared = std::sync::Arc<std::sync::Mutex<Vec<u8>>>;

/// Reads one pipe to its end into `kept`, keeping at most what the shared
/// budget allows.
fn reader(
    mut pipe: impl Read + Send + 'static,
    budget: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    events: mpsc::Sender<Event>,
) -> Shared {
    use std::sync::atomic::Ordering;
    let kept: Shared = Shared::default();
    let sink = kept.clone();
    thread::spawn(move || {
        let mut buf = [0u8; 16 << 10];
        let mut over = false;
        loop {
            let n = match pipe.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            // Take what is left of the budget; past it, keep reading (and
            // dropping) until the kill closes the pipe.
            let left = budget
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |b| {
                    Some(b.saturating_sub(n))
                })
                .unwrap_or(0);
            let take = n.min(left);
            if take > 0 {
                // A poisoned lock means a reader panicked; keep what is there.
                let mut kept = sink.lock().unwrap_or_else(|p| p.into_inner());
                kept.extend_from_slice(&buf[..take]);
            }
            if take < n && !over {
                over = true;
                let _ = events.send(Event::OverCap);
            }
        }
        let _ = events.send(Event::Closed);
    });
    kept
}

fn take(shared: &Shared) -> Vec<u8> {
    std::mem::take(&mut *shared.lock().unwrap_or_else(|p| p.into_inner()))
}

/// Runs `bin args…` confined and bounded. `env` is the whole environment.
/// The output comes back redacted (see the module's documentation).
pub fn run_program(
    bin: &Path,
    args: &[String],
    env: &[(String, String)],
    bounds: &Bounds,
) -> Result<Outcome, ExecError> {
    run_raw(bin, args, env, bounds).map(|raw| raw.redacted(&bounds.known_secrets))
}

fn run_raw(
    bin: &Path,
    args: &[String],
    env: &[(String, String)],
    bounds: &Bounds,
) -> Result<RawOutcome, ExecError> {
    let start = Instant::now();
    #[allow(clippy::disallowed_methods)] // The Warden's exec module: the one sanctioned spawn.
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    system::confine_child(&mut cmd, bounds.low_priority, bounds.keep_fd, bounds.cgroup);
    let mut child: Child = cmd.spawn().map_err(|source| ExecError::Spawn {
        path: bin.to_path_buf(),
        source,
    })?;
    let pgid = child.id();
    let budget = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(bounds.max_output_bytes));
    let (tx, rx) = mpsc::channel();
    let (Some(out), Some(err)) = (child.stdout.take(), child.stderr.take()) else {
        let _ = system::kill_group(pgid);
        let _ = child.wait();
        return Err(ExecError::Wait(io::Error::other(
            "the child's pipes are missing",
        )));
    };
    let out = reader(out, budget.clone(), tx.clone());
    let err = reader(err, budget, tx.clone());
    let waiter = tx;
    thread::spawn(move || {
        let _ = waiter.send(Event::Exited(child.wait()));
    });

    let deadline = start + bounds.timeout;
    let mut closed = 0;
    let mut status = None;
    let mut cut = false;
    let mut timed_out = false;
    let mut killed = false;
    let mut stopped = false;
    let mut grace: Option<Instant> = None;
    // Done when the program has exited and both pipes are closed — or, once
    // the group was killed, after a short grace for a process that left the
    // group on purpose and holds a pipe open.
    while closed < 2 || status.is_none() {
        let now = Instant::now();
        let until = grace.unwrap_or(deadline);
        if now >= until {
            if grace.is_some() {
                break;
            }
            timed_out = true;
            let _ = system::kill_group(pgid);
            killed = true;
            grace = Some(now + Duration::from_secs(2));
            continue;
        }
        if !killed
            && let Some(stop) = &bounds.stop
            && stop.load(std::sync::atomic::Ordering::SeqCst)
        {
            stopped = true;
            let _ = system::kill_group(pgid);
            killed = true;
            grace = Some(now + Duration::from_secs(2));
            continue;
        }
        if !killed
            && let Some(t) = &bounds.tripwire
            && t.check()
        {
            stopped = true;
            let _ = system::kill_group(pgid);
            killed = true;
            grace = Some(now + Duration::from_secs(2));
            continue;
        }
        let polled =
            bounds.stop.is_some() || bounds.tripwire.as_ref().is_some_and(Tripwire::is_counting);
        let wait = if polled {
            (until - now).min(Duration::from_millis(50))
        } else {
            until - now
        };
        match rx.recv_timeout(wait) {
            Ok(Event::Closed) => closed += 1,
            Ok(Event::OverCap) => {
                cut = true;
                if !killed {
                    let _ = system::kill_group(pgid);
                    killed = true;
                    grace = Some(Instant::now() + Duration::from_secs(2));
                }
            }
            Ok(Event::Exited(result)) => {
                status = Some(result.map_err(ExecError::Wait)?);
                // Background children die with the command: they would
                // otherwise hold its pipes open until the timeout.
                let _ = system::kill_group(pgid);
                if grace.is_none() {
                    grace = Some(Instant::now() + Duration::from_secs(2));
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let Some(status) = status else {
        return Err(ExecError::Wait(io::Error::other(
            "the command did not end after SIGKILL to its process group",
        )));
    };
    // What was refused after the last reading is counted too.
    if let Some(t) = &bounds.tripwire {
        t.check();
    }
    let stdout = take(&out);
    let stderr = take(&err);
    Ok(RawOutcome {
        exit_code: status.code(),
        signal: status.signal(),
        stdout,
        stderr,
        cut,
        timed_out,
        stopped,
        duration: start.elapsed(),
    })
}
