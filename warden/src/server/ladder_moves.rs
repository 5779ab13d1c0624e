//! Signals and the ladder's moves: what each step means when it is reached.

#![forbid(unsafe_code)]

use super::event::{Event, Peer};
use super::{Shared, journal};
use crate::ladder::{self, LadderError, Step};
use crate::signal::Signal;
use crate::system::PeerCred;

/// Journals a ladder signal and moves the ladder.
pub(super) fn raise(shared: &Shared, peer: Option<&PeerCred>, signal: Signal) {
    journal(
        shared,
        Event::LadderSignal {
            peer: peer.map(Peer::worker),
            signal: &signal,
        },
    );
    let moved = shared
        .ladder
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .signal(&signal);
    after_move(shared, moved);
}

/// Journals a move of the ladder and carries out what the new step means.
pub(super) fn after_move(shared: &Shared, moved: Result<Option<ladder::Event>, LadderError>) {
    let event = match moved {
        Ok(Some(e)) => e,
        Ok(None) => return,
        Err(e) => {
            let error = e.to_string();
            journal(shared, Event::LadderUnwritable { error: &error });
            return;
        }
    };
    // The move holds even when its file could not be written (a full
    // disk): the Warden serves on at the new step and retries the save.
    let unsaved = shared
        .ladder
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .unsaved()
        .map(str::to_string);
    journal(
        shared,
        Event::LadderMove {
            event: &event,
            unsaved: unsaved.as_deref(),
        },
    );
    // A "Was that you?" is about one move: every move withdraws the last.
    crate::approvals::withdraw_step_downs(&shared.options.layout);
    if event.to < event.from {
        super::pace::restart_windows(shared);
    }
    if event.to >= Step::Freeze {
        let stopped = shared.stop_runs();
        if stopped > 0 {
            let stopped = Event::RunsStopped {
                runs: stopped,
                step: event.to,
            };
            journal(shared, stopped);
        }
    }
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
pub(super) fn wipe_ai_key(shared: &Shared) {
    let path = shared.options.layout.ai_key_file();
    let result = match crate::worker_dirs::wipe(&path, shared.options.worker_uid) {
        Ok(crate::worker_dirs::Wiped::Absent) => return,
        other => other,
    };
    let wiped = Event::AiKeyWiped {
        path: &path,
        result: &result,
    };
    journal(shared, wiped);
}
