//! Counting and pacing the Worker: the one place every frame read on the
//! Worker socket passes, before it is decoded, so no kind of request —
//! malformed, refused, a dry run, a proposal, a note — escapes the count.
//!
//! What is counted, over the Warden's clock:
//! - every frame (every request, decodable or not) toward the request
//!   flood (`request_threshold` in `flood_window_s`);
//! - every connection to the Worker socket toward the connection flood
//!   (`connection_threshold` in `flood_window_s`), and every connection
//!   refused for a full pool, which is a flood on its own;
//! - commands — reads, the health set (one command), dry runs, approvals:
//!   what makes the Warden run
//!   something — toward too-many-commands (`command_threshold` in
//!   `command_window_s`), the specification's "too many commands in ten
//!   minutes".
//!
//! All of these are the `too-many-commands` signal (the specification's
//! eight signals are fixed; its detail says which count passed). A flood
//! signal is raised at most once per flood window, so a flood moves the
//! ladder one step a window and cannot fill the journal with signals. A
//! move down (`resume`, a decay) starts every window again.
//!
//! Slow (and every step above it): one request a minute for the person,
//! one in ten minutes for the Worker's background work, each in its own
//! lane (the frame's `lane`, the Worker's word: a Worker that lies gains
//! one background request in ten minutes) so that the Worker's own health
//! poll never takes the minute a person's command waits for. Some kinds still
//! pass at any pace, because the Worker needs them to learn of the ladder
//! and to pull it up, and because none of them runs a command or writes
//! more than a line per ladder move: `ping`, `events` (how the Worker
//! hears that it was slowed down, and says so in the chat), `status` (the
//! Warden's state, which the chat's `/trust` shows and the anchor at each
//! move is sent from), `panic` (the chat's `/panic`, which only ever
//! raises the ladder), `propose_step_down` (the "Was that you?" question:
//! one per move, asked again refused before any journal line) and, at
//! Slow and Freeze only, the tap that answers it. They are still counted
//! toward the
//! request flood. Everything else — a malformed frame included, which
//! counts as the person's — is let through only a lane's interval
//! after the last one of its lane that was.
//!
//! Lines a flood would repeat — requests refused by pacing, connections
//! refused for a full pool or from the wrong uid, missed deadlines — are
//! journaled at most once per `quiet_interval_s` for each kind and peer
//! uid; the next such line (or the watcher, once the interval has passed)
//! says how many were left out.

#![forbid(unsafe_code)]

use super::dispatch::without_pin;
use super::event::{Event, Peer};
use super::{SLOW_BACKGROUND_INTERVAL_S, SLOW_INTERVAL_S, Shared, Socket, journal, raise, write};
use crate::ladder::Step;
use crate::signal::Signal;
use crate::system::PeerCred;
use aromba_warden_proto::{FrameError, Lane, Request, Response, decode_request_in};
use std::collections::{HashMap, VecDeque};

/// What the Worker has been doing, over the Warden's clock (seconds).
#[derive(Default)]
pub(super) struct Pacing {
    /// When the last request Slow paces was let through, for the person.
    last_person: Option<u64>,
    /// … and for the Worker's background work.
    last_background: Option<u64>,
    commands: Window,
    requests: Window,
    connections: Window,
    /// Connections refused for a full pool since the last flood signal.
    refused: usize,
    /// When a flood signal was last raised.
    flood_signaled: Option<u64>,
    /// The rate-limited journal lines, by kind and the peer's uid (so one
    /// account's flood does not hide another's refusals).
    quiet: HashMap<(&'static str, Option<u32>), Quiet>,
}

/// The times of the last events, at most `threshold + 1` of them: enough to
/// know whether more than `threshold` fell in the window, and no more, so
/// a flood costs no memory.
#[derive(Default)]
struct Window(VecDeque<u64>);

impl Window {
    /// Counts one at `now`; the count when more than `threshold` fell
    /// within `window_s`.
    fn count(&mut self, now: u64, window_s: u64, threshold: usize) -> Option<usize> {
        self.0.push_back(now);
        while self.0.len() > threshold.saturating_add(1) {
            self.0.pop_front();
        }
        while self
            .0
            .front()
            .is_some_and(|&t| now.saturating_sub(t) >= window_s)
        {
            self.0.pop_front();
        }
        (self.0.len() > threshold).then_some(self.0.len())
    }

    /// Starts a new window at the last event: one signal per burst.
    fn restart(&mut self) {
        let last = self.0.back().copied();
        self.0.clear();
        self.0.extend(last);
    }
}

#[derive(Default)]
struct Quiet {
    last: Option<u64>,
    left_out: u64,
}

/// What to do with one frame from the Worker.
pub(super) enum Admission {
    Serve(Request),
    /// Not a request: answer with the error, journal it, close.
    Malformed(String),
    /// Held back by Slow: answer with the refusal; close when the frame was
    /// not a request (the stream may be out of step).
    Paced {
        response: Response,
        close: bool,
    },
}

/// How a request is paced.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pace {
    /// Passes at any step (counted all the same).
    Always,
    /// One a minute at Slow and above.
    Slowed,
    /// One a minute at Slow and above, and a command.
    Command,
}

fn pace_of(shared: &Shared, step: Step, request: &Request) -> Pace {
    match request {
        // The answer to "Was that you?" is how Slow and Freeze come down:
        // there it waits for no minute (a forged one is refused and a
        // signal, as ever); at Cut it is paced like any approval.
        Request::Approve { action_id, .. }
            if matches!(step, Step::Slow | Step::Freeze)
                && crate::approvals::is_step_down(&shared.options.layout, action_id) =>
        {
            Pace::Always
        }
        Request::ApproveInApp { launch, .. }
            if matches!(step, Step::Slow | Step::Freeze)
                && super::in_app::claimed_action_id(launch).is_some_and(|id| {
                    crate::approvals::is_step_down(&shared.options.layout, id)
                }) =>
        {
            Pace::Always
        }
        // `socket_owner` too: the Worker asks it before each connection to
        // a loopback relay or model, and the chat must stay reachable at
        // every step (counted all the same; it reads a bounded table).
        // `status` too: it runs nothing and writes no journal line, and the
        // Worker sends the journal's head to the relay at each ladder move
        // from it (held back at Slow, the move's anchor was lost).
        Request::Ping
        | Request::Events { .. }
        | Request::Panic
        | Request::Status
        | Request::Trust
        | Request::SocketOwner { .. }
        | Request::ProposeStepDown => Pace::Always,
        Request::Read { .. }
        | Request::Health
        | Request::RunDue { .. }
        | Request::DryRun { .. }
        | Request::ProposeRelease
        | Request::ProposeSkill { .. }
        | Request::InstallRelease { .. }
        | Request::Approve { .. }
        | Request::ApproveInApp { .. } => Pace::Command,
        _ => Pace::Slowed,
    }
}

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, Pacing> {
    shared.pacing.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether a flood signal may be raised now (at most one a window); if so,
/// it counts as raised.
fn flood_signal_due(p: &mut Pacing, now: u64, window_s: u64) -> bool {
    let due = p
        .flood_signaled
        .is_none_or(|t| now.saturating_sub(t) >= window_s);
    if due {
        p.flood_signaled = Some(now);
    }
    due
}

fn flood(shared: &Shared, peer: &PeerCred, count: usize, what: &'static str) {
    raise(
        shared,
        Some(peer),
        Signal::TooManyCommands {
            count,
            window_s: shared.options.flood_window_s,
            what,
        },
    );
}

/// After a move down (`resume`, a decay): every window starts again, and
/// the next flood is signalled however recently the last one was. Without
/// this, a flood right after a resume fell in the window of the signal
/// that had raised the ladder, and passed unsignalled.
pub(super) fn restart_windows(shared: &Shared) {
    let mut p = lock(shared);
    p.last_person = None;
    p.last_background = None;
    p.commands = Window::default();
    p.requests = Window::default();
    p.connections = Window::default();
    p.refused = 0;
    p.flood_signaled = None;
}

/// Every frame read on the Worker socket, or the framing error in its
/// place, comes here first.
pub(super) fn admit(
    shared: &Shared,
    peer: &PeerCred,
    frame: Result<Vec<u8>, FrameError>,
) -> Admission {
    let o = &shared.options;
    let now = o.clock.now();
    // Counted before anything is made of it.
    let burst = {
        let mut p = lock(shared);
        match p.requests.count(now, o.flood_window_s, o.request_threshold) {
            Some(n) if flood_signal_due(&mut p, now, o.flood_window_s) => {
                p.requests.restart();
                Some(n)
            }
            _ => None,
        }
    };
    if let Some(n) = burst {
        flood(shared, peer, n, "requests");
    }
    let decoded = frame
        .map_err(|e| e.to_string())
        .and_then(|f| decode_request_in(&f).map_err(|e| e.to_string()));
    let lane = decoded.as_ref().map_or(Lane::Person, |(_, l)| *l);
    let request = decoded.map(|(r, _)| r);
    let step = shared.step();
    let pace = request
        .as_ref()
        .map_or(Pace::Slowed, |r| pace_of(shared, step, r));
    if pace == Pace::Always {
        return match request {
            Ok(r) => Admission::Serve(r),
            Err(why) => Admission::Malformed(why),
        };
    }
    let mut p = lock(shared);
    let (last, interval) = match lane {
        Lane::Person => (&mut p.last_person, SLOW_INTERVAL_S),
        Lane::Background => (&mut p.last_background, SLOW_BACKGROUND_INTERVAL_S),
    };
    if step >= Step::Slow
        && let Some(at) = *last
        && now.saturating_sub(at) < interval
    {
        drop(p);
        let pace = match lane {
            Lane::Person => "one command a minute",
            Lane::Background => "my own background work waits, one request in ten minutes",
        };
        let reason = format!(
            "{} {pace}. Send it again in {} seconds.",
            aromba_warden_proto::SLOWED,
            interval - now.saturating_sub(at)
        );
        let close = request.is_err();
        let what = match request {
            Ok(r) => without_pin(r),
            Err(why) => format!("malformed: {why}"),
        };
        let journal_seq = journal_quietly(
            shared,
            Event::Paced {
                peer: Peer::worker(peer),
                request: &what,
                reason: &reason,
            },
        );
        return Admission::Paced {
            response: Response::Refused {
                reason,
                journal_seq,
            },
            close,
        };
    }
    *last = Some(now);
    let too_many = if pace == Pace::Command {
        match p
            .commands
            .count(now, o.command_window_s, o.command_threshold)
        {
            Some(n) => {
                p.commands.restart();
                Some(n)
            }
            None => None,
        }
    } else {
        None
    };
    drop(p);
    if let Some(count) = too_many {
        raise(
            shared,
            Some(peer),
            Signal::TooManyCommands {
                count,
                window_s: o.command_window_s,
                what: "commands",
            },
        );
    }
    match request {
        Ok(r) => Admission::Serve(r),
        Err(why) => Admission::Malformed(why),
    }
}

/// A connection to the Worker socket from the Worker, before it takes a
/// slot.
pub(super) fn connection_arrived(shared: &Shared, peer: &PeerCred) {
    let o = &shared.options;
    let now = o.clock.now();
    let burst = {
        let mut p = lock(shared);
        match p
            .connections
            .count(now, o.flood_window_s, o.connection_threshold)
        {
            Some(n) if flood_signal_due(&mut p, now, o.flood_window_s) => {
                p.connections.restart();
                Some(n)
            }
            _ => None,
        }
    };
    if let Some(n) = burst {
        flood(shared, peer, n, "connections");
    }
}

/// A connection refused because its socket's pool is full: journaled
/// (quietly), and on the Worker socket a flood.
pub(super) fn pool_full(shared: &Shared, peer: &PeerCred, socket: Socket) {
    let o = &shared.options;
    journal_quietly(
        shared,
        Event::ConnectionRefused {
            peer: Peer::on(peer, socket),
            pool: match socket {
                Socket::Worker => o.max_worker_connections,
                Socket::Control => o.max_control_connections,
            },
        },
    );
    if socket != Socket::Worker {
        return;
    }
    let now = o.clock.now();
    let refused = {
        let mut p = lock(shared);
        p.refused += 1;
        if flood_signal_due(&mut p, now, o.flood_window_s) {
            Some(std::mem::take(&mut p.refused))
        } else {
            None
        }
    };
    if let Some(n) = refused {
        flood(shared, peer, n, "connections refused for a full pool");
    }
}

/// Journals a line a flood would repeat: at most one of each kind per peer
/// uid (the event's peer, if any) per `quiet_interval_s`, carrying how
/// many were left out since the last. `None` when this one was left out
/// (or the journal failed).
pub(super) fn journal_quietly(shared: &Shared, event: Event<'_>) -> Option<u64> {
    let now = shared.options.clock.now();
    let uid = event.peer_uid();
    let line = event.render();
    let kind = line.kind;
    let left_out = {
        let mut p = lock(shared);
        let q = p.quiet.entry((kind, uid)).or_default();
        if q.last
            .is_some_and(|t| now.saturating_sub(t) < shared.options.quiet_interval_s)
        {
            q.left_out += 1;
            return None;
        }
        q.last = Some(now);
        std::mem::take(&mut q.left_out)
    };
    write(shared, line.quiet(left_out))
}

/// Writes down, once their interval has passed, how many lines of each
/// kind were left out since the last one (called by the watcher, so a
/// flood that stopped is still counted).
pub(super) fn flush_quiet(shared: &Shared) {
    let now = shared.options.clock.now();
    let due: Vec<((&'static str, Option<u32>), u64)> = {
        let mut p = lock(shared);
        p.quiet
            .iter_mut()
            .filter(|(_, q)| {
                q.left_out > 0
                    && q.last
                        .is_none_or(|t| now.saturating_sub(t) >= shared.options.quiet_interval_s)
            })
            .map(|(key, q)| {
                q.last = Some(now);
                (*key, std::mem::take(&mut q.left_out))
            })
            .collect()
    };
    for ((of, peer_uid), left_out) in due {
        journal(
            shared,
            Event::LeftOut {
                of,
                peer_uid,
                left_out,
            },
        );
    }
}
