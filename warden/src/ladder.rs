//! The ladder: how far the Warden has closed down because Aromba itself
//! behaved strangely.
//!
//! Steps above normal: 1 Slow (one command a minute), 2 Freeze (chores and
//! the assistant refused; reads and chat go on), 3 Cut (reads only; the AI
//! key wiped; the Worker told to drop it), 4 Disarm (the Warden stops
//! itself and will not start again until reinstalled). Honeypot reads,
//! integrity failures and unknown hosts jump straight to Cut; every other
//! signal climbs one step, never past Cut (only `aromba panic` disarms).
//! Slow and Freeze climb down one step after 24 quiet hours; Cut is left
//! only by `aromba resume` from a root terminal.
//!
//! The state lives in one file, root's, mode 0600, written atomically and
//! read back and validated at start. It is not in the integrity baseline,
//! because it changes whenever the ladder moves; a file that is missing
//! (once installed), unreadable, not root's, too open or malformed is taken
//! as tampering and puts the ladder at Cut.

#![forbid(unsafe_code)]

use crate::signal::Signal;
use aromba_warden_proto::hidden::invisible_or_separator;
use serde_json::{Map, Value};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

pub const QUIET_FOR_DECAY_S: u64 = 24 * 3600;
/// The most bytes of a move's reason kept: a reason may carry the Worker's
/// words (a red action's name, a path it asked for), and it is what
/// `aromba status` shows root and the event the chat is told of.
pub const REASON_BOUND: usize = 512;

/// A reason as the ladder keeps it: every control character written out
/// (`\u{1b}`, `\n`), so no byte of it can drive root's terminal or start
/// a line of its own, and cut to [`REASON_BOUND`] bytes on a character
/// boundary, with `…` where it was cut.
pub fn shown_reason(reason: &str) -> String {
    let mut out = String::new();
    for c in reason.chars() {
        let piece: String = if c.is_control() || invisible_or_separator(c) {
            c.escape_default().collect()
        } else {
            c.to_string()
        };
        if out.len() + piece.len() > REASON_BOUND - '…'.len_utf8() {
            out.push('…');
            return out;
        }
        out.push_str(&piece);
    }
    out
}
/// How many ladder events the Worker can still fetch.
const EVENTS_KEPT: usize = 64;

/// Seconds since the epoch; injectable so tests can move time.
pub trait Clock: Send + Sync {
    fn now(&self) -> u64;
}

pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0)
    }
}

/// A clock tests set by hand.
#[derive(Default)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    pub fn new(start: u64) -> Arc<ManualClock> {
        Arc::new(ManualClock(AtomicU64::new(start)))
    }

    pub fn advance(&self, seconds: u64) {
        self.0.fetch_add(seconds, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Step {
    Normal = 0,
    Slow = 1,
    Freeze = 2,
    Cut = 3,
    Disarm = 4,
}

impl Step {
    pub fn from_number(n: u64) -> Option<Step> {
        Some(match n {
            0 => Step::Normal,
            1 => Step::Slow,
            2 => Step::Freeze,
            3 => Step::Cut,
            4 => Step::Disarm,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Step::Normal => "normal",
            Step::Slow => "slow",
            Step::Freeze => "freeze",
            Step::Cut => "cut",
            Step::Disarm => "disarm",
        }
    }

    fn up(self) -> Step {
        match self {
            Step::Normal => Step::Slow,
            Step::Slow => Step::Freeze,
            other => other.max(Step::Cut),
        }
    }

    fn down(self) -> Step {
        match self {
            Step::Slow => Step::Normal,
            Step::Freeze => Step::Slow,
            other => other,
        }
    }

    /// What the chat says when the ladder reaches this step.
    pub fn message(self) -> &'static str {
        match self {
            Step::Normal => "Back to normal.",
            Step::Slow => "Unusual activity, I've slowed down. Was that you?",
            Step::Freeze => {
                "More unusual activity: I've stopped the schedule and the assistant. Chat still works. Was that you?"
            }
            Step::Cut => {
                "Something is wrong, so I stopped myself. I'm down to reads only: no chores, no assistant (its AI key is wiped), and I still answer /status, /trust and the like, one a minute. Run `sudo aromba resume` on the server to bring me back."
            }
            Step::Disarm => {
                "The Warden has stopped itself for good (aromba panic, or something it could not survive). I have no rights left; reinstall Aromba on the server to recover."
            }
        }
    }
}

/// The reason of the chat's `/panic` (and of "No, stop Aromba").
pub const PANIC_FROM_CHAT: &str = aromba_warden_proto::PANIC_FROM_CHAT;

/// What the chat says when the person stopped Aromba: their own act, not
/// "something is wrong".
pub const YOU_STOPPED: &str = "You stopped Aromba. I'm down to reads only: no chores, no assistant (its AI key is wiped), no updates, and I still answer /status, /trust and the like, one a minute. To bring me back, run `sudo aromba resume` on the server.";

/// What the chat says of a move to `to` for `reason`.
pub fn message_for(to: Step, reason: &str) -> &'static str {
    if to == Step::Cut && reason == PANIC_FROM_CHAT {
        YOU_STOPPED
    } else {
        to.message()
    }
}

/// A ladder move's reason (a signal as the journal words it) in words a
/// person reads.
pub fn plain_reason(reason: &str) -> String {
    if let Some(p) = reason.strip_prefix("deny-list hit (") {
        return format!(
            "something asked me to run a command I never run ({})",
            p.trim_end_matches(')')
        );
    }
    if let Some(p) = reason.strip_prefix("read of a secret or fenced path ") {
        let path = p.split(" (").next().unwrap_or(p);
        return format!("something asked to read a secret or protected file ({path})");
    }
    if let Some(p) = reason.strip_prefix("outbound connection to ") {
        let host = p.split(", which").next().unwrap_or(p);
        return format!("a connection to {host}, which is not on my list of hosts");
    }
    if let Some(p) = reason.strip_prefix("chore ")
        && let Some((chore, paths)) = p.split_once(" changed files outside its touches: ")
    {
        return format!(
            "the chore {chore} changed files outside the folders it said it would touch ({paths})"
        );
    }
    if reason.starts_with("red action ") {
        return "a tap or PIN that did not check out (a tap not signed as yours, or five wrong PINs in a row)".into();
    }
    if reason
        .split_whitespace()
        .next()
        .is_some_and(|n| n.parse::<u64>().is_ok())
        && reason.contains(" in ")
    {
        return format!("{reason}, more than I ever need");
    }
    reason.to_string()
}

/// One move of the ladder, for the journal and the chat.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub id: u64,
    pub time: u64,
    pub from: Step,
    pub to: Step,
    pub reason: String,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct State {
    step: Step,
    /// When the ladder last moved.
    since: u64,
    /// When the last signal came.
    last_signal: Option<u64>,
    reason: String,
    events: Vec<Event>,
    next_event: u64,
}

#[derive(Debug)]
pub enum LadderError {
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl std::fmt::Display for LadderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LadderError::Io { path, source } => {
                write!(f, "ladder state {}: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for LadderError {}

pub struct Ladder {
    path: PathBuf,
    clock: Arc<dyn Clock>,
    state: State,
    /// Why the state in memory is not on disk yet (a full disk, an
    /// unwritable directory). The step in memory is the one in force: a
    /// move up holds whether or not it could be saved, and saving is
    /// retried (`retry_save`).
    unsaved: Option<String>,
}

impl std::fmt::Debug for Ladder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ladder")
            .field("path", &self.path)
            .field("state", &self.state)
            .finish()
    }
}

fn encode(state: &State) -> Vec<u8> {
    let events: Vec<Value> = state
        .events
        .iter()
        .map(|e| {
            let mut m = Map::new();
            m.insert("id".into(), Value::from(e.id));
            m.insert("time".into(), Value::from(e.time));
            m.insert("from".into(), Value::from(e.from as u64));
            m.insert("to".into(), Value::from(e.to as u64));
            m.insert("reason".into(), Value::from(e.reason.as_str()));
            m.insert("message".into(), Value::from(e.message.as_str()));
            Value::Object(m)
        })
        .collect();
    let mut m = Map::new();
    m.insert("version".into(), Value::from(1));
    m.insert("step".into(), Value::from(state.step as u64));
    m.insert("since".into(), Value::from(state.since));
    m.insert(
        "last_signal".into(),
        state.last_signal.map_or(Value::Null, Value::from),
    );
    m.insert("reason".into(), Value::from(state.reason.as_str()));
    m.insert("next_event".into(), Value::from(state.next_event));
    m.insert("events".into(), Value::Array(events));
    serde_json::to_vec(&Value::Object(m)).unwrap_or_default()
}

fn decode(bytes: &[u8]) -> Option<State> {
    let v: Value = serde_json::from_slice(bytes).ok()?;
    let o = v.as_object()?;
    if o.get("version")?.as_u64()? != 1 || o.len() != 7 {
        return None;
    }
    let events = o
        .get("events")?
        .as_array()?
        .iter()
        .map(|e| {
            let e = e.as_object()?;
            Some(Event {
                id: e.get("id")?.as_u64()?,
                time: e.get("time")?.as_u64()?,
                from: Step::from_number(e.get("from")?.as_u64()?)?,
                to: Step::from_number(e.get("to")?.as_u64()?)?,
                reason: shown_reason(e.get("reason")?.as_str()?),
                message: e.get("message")?.as_str()?.to_string(),
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(State {
        step: Step::from_number(o.get("step")?.as_u64()?)?,
        since: o.get("since")?.as_u64()?,
        last_signal: match o.get("last_signal")? {
            Value::Null => None,
            v => Some(v.as_u64()?),
        },
        reason: shown_reason(o.get("reason")?.as_str()?),
        next_event: o.get("next_event")?.as_u64()?,
        events,
    })
}

/// Why a state file was not trusted.
fn distrust(path: &Path) -> Option<String> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) => return Some(format!("cannot read it: {e}")),
    };
    if !meta.file_type().is_file() {
        return Some("it is not a regular file".into());
    }
    if meta.uid() != 0 {
        return Some(format!("it is owned by uid {}", meta.uid()));
    }
    if meta.mode() & 0o077 != 0 {
        return Some(format!("its mode is {:o}", meta.mode() & 0o7777));
    }
    None
}

impl Ladder {
    /// Loads the state at `path`. A missing file is normal unless
    /// `installed` (install writes one); anything untrustworthy is Cut.
    pub fn load(
        path: PathBuf,
        clock: Arc<dyn Clock>,
        installed: bool,
    ) -> Result<Ladder, LadderError> {
        let now = clock.now();
        let fresh = |step: Step, reason: String| State {
            step,
            since: now,
            last_signal: None,
            reason,
            events: Vec::new(),
            next_event: 1,
        };
        let state = if !path.exists() {
            if installed {
                fresh(Step::Cut, "the ladder's state file is missing".into())
            } else {
                fresh(Step::Normal, String::new())
            }
        } else if let Some(why) = distrust(&path) {
            fresh(
                Step::Cut,
                format!("the ladder's state file is not trustworthy: {why}"),
            )
        } else {
            let bytes = std::fs::read(&path).map_err(|source| LadderError::Io {
                path: path.clone(),
                source,
            })?;
            decode(&bytes)
                .unwrap_or_else(|| fresh(Step::Cut, "the ladder's state file is malformed".into()))
        };
        let ladder = Ladder {
            path,
            clock,
            state,
            unsaved: None,
        };
        ladder.save()?;
        Ok(ladder)
    }

    /// A fresh ladder at Normal, written to `path` (install).
    pub fn reset(path: PathBuf, clock: Arc<dyn Clock>) -> Result<Ladder, LadderError> {
        let _ = std::fs::remove_file(&path);
        Ladder::load(path, clock, false)
    }

    pub fn step(&self) -> Step {
        self.state.step
    }

    pub fn reason(&self) -> &str {
        &self.state.reason
    }

    pub fn since(&self) -> u64 {
        self.state.since
    }

    pub fn now(&self) -> u64 {
        self.clock.now()
    }

    /// Events with an id above `after`, oldest first.
    pub fn events_after(&self, after: u64) -> Vec<Event> {
        self.state
            .events
            .iter()
            .filter(|e| e.id > after)
            .cloned()
            .collect()
    }

    /// Saves the state, or notes why it could not be: a move is never
    /// undone because the disk refused it (a Worker that fills the disk
    /// must not be able to talk the ladder down, or the Warden out of
    /// serving root).
    fn persist(&mut self) {
        self.unsaved = self.save().err().map(|e| e.to_string());
    }

    /// Why the state in memory is not on disk, if it is not.
    pub fn unsaved(&self) -> Option<&str> {
        self.unsaved.as_deref()
    }

    /// Tries again to save a state that could not be saved; `None` when
    /// there was nothing to save, else whether it is saved now.
    pub fn retry_save(&mut self) -> Option<Result<(), String>> {
        self.unsaved.as_ref()?;
        self.persist();
        Some(match &self.unsaved {
            None => Ok(()),
            Some(e) => Err(e.clone()),
        })
    }

    fn save(&self) -> Result<(), LadderError> {
        let err = |source| LadderError::Io {
            path: self.path.clone(),
            source,
        };
        crate::atomic_file::replace(&self.path, &encode(&self.state), 0o600).map_err(err)?;
        // Read back what was written: a write that did not land is an error.
        let back = std::fs::read(&self.path).map_err(err)?;
        if decode(&back).as_ref() != Some(&self.state) {
            return Err(err(std::io::Error::other(
                "the state read back differs from what was written",
            )));
        }
        Ok(())
    }

    /// Moves to `to` for `reason`. Only a move changes why the ladder is
    /// where it is: a signal or a `/panic` that leaves it on its step
    /// (journaled by the server all the same) does not rewrite the reason
    /// root reads in `aromba status`, and writes nothing.
    fn move_to(&mut self, to: Step, reason: String) -> Result<Option<Event>, LadderError> {
        let from = self.state.step;
        let now = self.clock.now();
        if to == from {
            return Ok(None);
        }
        let reason = shown_reason(&reason);
        self.state.reason = reason.clone();
        let event = Event {
            id: self.state.next_event,
            time: now,
            from,
            to,
            reason,
            message: message_for(to, &self.state.reason).to_string(),
        };
        self.state.next_event += 1;
        self.state.step = to;
        self.state.since = now;
        self.state.events.push(event.clone());
        let excess = self.state.events.len().saturating_sub(EVENTS_KEPT);
        self.state.events.drain(..excess);
        self.persist();
        Ok(Some(event))
    }

    /// Takes a signal: straight to Cut for the gravest, one step up for the
    /// rest (never past Cut).
    pub fn signal(&mut self, signal: &Signal) -> Result<Option<Event>, LadderError> {
        self.state.last_signal = Some(self.clock.now());
        let from = self.state.step;
        let to = if signal.jumps_to_cut() {
            from.max(Step::Cut)
        } else {
            from.up()
        };
        let moved = self.move_to(to, signal.to_string())?;
        if moved.is_none() {
            // No move, but the quiet hours Slow and Freeze wait for start
            // again: that much survives a restart.
            self.persist();
        }
        Ok(moved)
    }

    /// `/panic` from the chat.
    pub fn panic_from_chat(&mut self) -> Result<Option<Event>, LadderError> {
        let to = self.state.step.max(Step::Cut);
        self.move_to(to, PANIC_FROM_CHAT.into())
    }

    /// `aromba panic` from a root terminal.
    pub fn disarm(&mut self) -> Result<Option<Event>, LadderError> {
        self.move_to(Step::Disarm, "aromba panic from a root terminal".into())
    }

    /// `aromba resume` from a root terminal: back to normal from any step
    /// but Disarm.
    pub fn resume(&mut self) -> Result<Option<Event>, LadderError> {
        if self.state.step == Step::Disarm {
            return Ok(None);
        }
        self.state.last_signal = None;
        self.move_to(Step::Normal, "aromba resume from a root terminal".into())
    }

    /// The id of the ladder's last move (0 before any): a "Was that you?"
    /// is about one move.
    pub fn last_event_id(&self) -> u64 {
        self.state.next_event.saturating_sub(1)
    }

    /// "Yes, it was me": the person's verified tap on "Was that you?"
    /// brings Slow or Freeze back to normal; Cut and Disarm stay.
    pub fn step_down_by_person(&mut self) -> Result<Option<Event>, LadderError> {
        if !matches!(self.state.step, Step::Slow | Step::Freeze) {
            return Ok(None);
        }
        self.state.last_signal = None;
        self.move_to(
            Step::Normal,
            "the person said it was them (a tap on \"Yes, it was me\")".into(),
        )
    }

    /// Slow and Freeze step down once per 24 quiet hours.
    pub fn decay(&mut self) -> Result<Option<Event>, LadderError> {
        let step = self.state.step;
        if !matches!(step, Step::Slow | Step::Freeze) {
            return Ok(None);
        }
        let quiet_since = self.state.last_signal.unwrap_or(0).max(self.state.since);
        if self.clock.now().saturating_sub(quiet_since) < QUIET_FOR_DECAY_S {
            return Ok(None);
        }
        self.move_to(step.down(), "24 quiet hours".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One signal of each kind. The match has no wildcard: a new kind of
    /// signal does not compile here until it is listed, and then the test
    /// below says whether "Was that you?" has words for it.
    fn one_of_each_signal() -> Vec<Signal> {
        let all = vec![
            Signal::DenyListHit {
                pattern: "* /etc/shadow*",
            },
            Signal::SecretPathRead {
                path: "/root/.ssh/id_ed25519".into(),
                rule: "secret".into(),
            },
            Signal::TooManyCommands {
                count: 31,
                window_s: 600,
                what: "commands",
            },
            Signal::TooManyCommands {
                count: 4,
                window_s: 86_400,
                what: "journal files rotated away",
            },
            Signal::TooManyCommands {
                count: 9,
                window_s: 45,
                what: "connections",
            },
            Signal::UnknownHost {
                remote: "203.0.113.7:443".into(),
            },
            Signal::FilesOutsideTouches {
                chore: "apt-clean".into(),
                paths: vec!["/etc/passwd".into()],
            },
            Signal::IntegrityMismatch {
                what: "the fence list changed".into(),
            },
            Signal::RedActionWithoutApproval {
                action: "run wipe".into(),
            },
            Signal::HoneypotRead {
                path: "/root/.aws/credentials".into(),
            },
        ];
        for s in &all {
            match s {
                Signal::DenyListHit { .. }
                | Signal::SecretPathRead { .. }
                | Signal::TooManyCommands { .. }
                | Signal::UnknownHost { .. }
                | Signal::FilesOutsideTouches { .. }
                | Signal::IntegrityMismatch { .. }
                | Signal::RedActionWithoutApproval { .. }
                | Signal::HoneypotRead { .. } => {}
            }
        }
        all
    }

    /// The ladder keeps a move's reason as the signal's journal words, and
    /// "Was that you?" reads them back into plain ones: every signal that
    /// can step the ladder to Slow or Freeze (the ones not going straight
    /// to Cut) must be read back, not shown in the journal's words.
    #[test]
    fn every_signal_that_can_ask_was_that_you_is_said_in_plain_words() {
        for signal in one_of_each_signal() {
            if signal.jumps_to_cut() {
                continue;
            }
            let journal = signal.to_string();
            let plain = plain_reason(&journal);
            assert_ne!(plain, journal, "{:?} is not read back", signal.kind());
        }
    }

    fn ladder(name: &str) -> (Ladder, Arc<ManualClock>) {
        let dir = std::env::temp_dir().join(format!("aromba-ladder-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let clock = ManualClock::new(1_800_000_000);
        (
            Ladder::load(dir.join("ladder.json"), clock.clone(), false).unwrap(),
            clock,
        )
    }

    fn deny() -> Signal {
        Signal::DenyListHit { pattern: "rm-root" }
    }

    #[test]
    fn ordinary_signals_climb_one_step_and_stop_at_cut() {
        let (mut l, _) = ladder("climb");
        for want in [Step::Slow, Step::Freeze, Step::Cut, Step::Cut] {
            l.signal(&deny()).unwrap();
            assert_eq!(l.step(), want);
        }
    }

    #[test]
    fn every_ordinary_signal_climbs_exactly_one_step() {
        for s in [
            Signal::DenyListHit { pattern: "mkfs" },
            Signal::SecretPathRead {
                path: "/etc/shadow".into(),
                rule: "secret_prefixes".into(),
            },
            Signal::TooManyCommands {
                count: 61,
                window_s: 600,
                what: "commands",
            },
            Signal::FilesOutsideTouches {
                chore: "docker-cache".into(),
                paths: vec!["/home/u/x".into()],
            },
            Signal::RedActionWithoutApproval {
                action: "restart nginx".into(),
            },
        ] {
            let (mut l, _) = ladder(s.kind());
            let e = l.signal(&s).unwrap().expect("moved");
            assert_eq!((e.from, e.to), (Step::Normal, Step::Slow), "{}", s.kind());
        }
    }

    #[test]
    fn grave_signals_jump_to_cut() {
        for s in [
            Signal::HoneypotRead { path: "/x".into() },
            Signal::IntegrityMismatch { what: "x".into() },
            Signal::UnknownHost {
                remote: "1.2.3.4:5".into(),
            },
        ] {
            let (mut l, _) = ladder(s.kind());
            let e = l.signal(&s).unwrap().expect("moved");
            assert_eq!((e.from, e.to), (Step::Normal, Step::Cut));
        }
    }

    #[test]
    fn slow_and_freeze_decay_after_24_quiet_hours_but_cut_does_not() {
        let (mut l, clock) = ladder("decay");
        l.signal(&deny()).unwrap();
        l.signal(&deny()).unwrap();
        clock.advance(QUIET_FOR_DECAY_S - 1);
        assert_eq!(l.decay().unwrap(), None);
        clock.advance(1);
        assert_eq!(l.decay().unwrap().map(|e| e.to), Some(Step::Slow));
        assert_eq!(l.decay().unwrap(), None, "another 24 hours are needed");
        clock.advance(QUIET_FOR_DECAY_S);
        assert_eq!(l.decay().unwrap().map(|e| e.to), Some(Step::Normal));
        l.panic_from_chat().unwrap();
        clock.advance(10 * QUIET_FOR_DECAY_S);
        assert_eq!(l.decay().unwrap(), None);
        assert_eq!(l.step(), Step::Cut);
    }

    #[test]
    fn state_survives_a_reload_and_a_damaged_file_is_cut() {
        let (mut l, clock) = ladder("reload");
        l.signal(&deny()).unwrap();
        let path = l.path.clone();
        let again = Ladder::load(path.clone(), clock.clone(), true).unwrap();
        assert_eq!(again.step(), Step::Slow);
        assert_eq!(again.events_after(0).len(), 1);
        std::fs::write(&path, b"{\"version\":1}").unwrap();
        assert_eq!(
            Ladder::load(path.clone(), clock.clone(), true)
                .unwrap()
                .step(),
            Step::Cut
        );
        std::fs::remove_file(&path).unwrap();
        assert_eq!(
            Ladder::load(path.clone(), clock.clone(), true)
                .unwrap()
                .step(),
            Step::Cut
        );
        std::fs::remove_file(&path).unwrap();
        assert_eq!(
            Ladder::load(path, clock, false).unwrap().step(),
            Step::Normal
        );
    }

    #[test]
    fn a_shown_reason_escapes_control_and_reordering_characters_and_is_bounded() {
        let shown = shown_reason("a\x1b[2K\r\n\u{202e}b");
        assert_eq!(shown, "a\\u{1b}[2K\\r\\n\\u{202e}b");
        let long = shown_reason(&"é".repeat(1000));
        assert!(long.len() <= REASON_BOUND && long.ends_with('…'));
        assert_eq!(shown_reason(&long), long, "bounding twice changes nothing");
    }

    #[test]
    fn a_panic_or_signal_that_moves_nothing_keeps_the_reason() {
        let (mut l, _) = ladder("same-step");
        l.signal(&Signal::HoneypotRead { path: "/x".into() })
            .unwrap();
        let reason = l.reason().to_string();
        assert_eq!(l.panic_from_chat().unwrap(), None);
        assert_eq!(
            l.signal(&Signal::DenyListHit { pattern: "mkfs" }).unwrap(),
            None
        );
        assert_eq!(l.reason(), reason);
    }

    #[test]
    fn resume_returns_to_normal_but_not_from_disarm() {
        let (mut l, _) = ladder("resume");
        l.panic_from_chat().unwrap();
        assert_eq!(l.resume().unwrap().map(|e| e.to), Some(Step::Normal));
        l.disarm().unwrap();
        assert_eq!(l.resume().unwrap(), None);
        assert_eq!(l.step(), Step::Disarm);
    }
}
