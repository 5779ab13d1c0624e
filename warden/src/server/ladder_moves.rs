//! Signals and the ladder's moves: what each step means when it is reached.

#![forbid(unsafe_code)]

use super::{Shared, Socket, journal, peer_fields};
use crate::ladder::{Event, LadderError, Step};
use crate::signal::Signal;
use crate::system::PeerCred;
use serde_json::{Map, Value};

/// Journals a ladder signal and moves the ladder.
pub(super) fn raise(shared: &Shared, peer: Option<&PeerCred>, signal: Signal) {
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
pub(super) fn after_move(shared: &Shared, moved: Result<Option<Event>, LadderError>) {
    let event = match moved {
        Ok(Some(e)) => e,
        Ok(None) => return,
        Err(e) => {
            let mut m = Map::new();
            m.insert("error".into(), Value::from(e.to_string()));
            journal(shared, "ladder-unwritable", m);
            return;
        }
    };
    let mut m = Map::new();
    m.insert("event_id".into(), Value::from(event.id));
    m.insert("from".into(), Value::from(event.from.name()));
    m.insert("to".into(), Value::from(event.to.name()));
    m.insert("reason".into(), Value::from(event.reason.as_str()));
    m.insert("message".into(), Value::from(event.message.as_str()));
    // The move holds even when its file could not be written (a full
    // disk): the Warden serves on at the new step and retries the save.
    let unsaved = shared
        .ladder
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .unsaved()
        .map(str::to_string);
    if let Some(why) = unsaved {
        m.insert("unsaved".into(), Value::from(why));
    }
    journal(shared, "ladder-move", m);
    // A "Was that you?" is about one move: every move withdraws the last.
    crate::approvals::withdraw_step_downs(&shared.options.layout);
    if event.to < event.from {
        super::pace::restart_windows(shared);
    }
    if event.to >= Step::Freeze {
        let stopped = shared.stop_runs();
        if stopped > 0 {
            let mut m = Map::new();
            m.insert("runs".into(), Value::from(stopped));
            m.insert("step".into(), Value::from(event.to.name()));
            journal(shared, "runs-stopped", m);
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
        Ok(crate::worker_dirs::Wiped::RemovedUnwritten(why)) => {
            m.insert("found".into(), Value::from(why.as_str()));
        }
        Ok(_) => {}
    }
    journal(shared, "ai-key-wiped", m);
}
