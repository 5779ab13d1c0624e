//! The Warden's events in the chat, and the journal's anchor at the relay.
//!
//! Every few seconds the Worker asks the Warden for the ladder's moves
//! after the last one it told, and says each in the chat in the Warden's
//! words. The journal's head (seq and hash, never an entry) goes to the
//! relay at each move and every hour, so the relay holds an anchor a cut
//! journal cannot extend.

use super::Daemon;
use crate::warden_client;
use aromba_relay_proto::client::Outgoing;
use aromba_relay_proto::frame::Body;
use aromba_warden_proto::{Request, Response};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

const POLL: Duration = Duration::from_secs(5);
/// The ladder's step at which the Worker is slowed down.
pub const SLOW: u64 = 1;
/// The ladder's step at which the assistant stops (the chat stays).
pub const FREEZE: u64 = 2;
/// The ladder's step at which the AI key is wiped.
pub const CUT: u64 = 3;
const ANCHOR_EVERY: Duration = Duration::from_secs(3600);

/// What the daemon remembers across restarts about the events.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Seen {
    /// The last ladder event told in the chat.
    events_after: u64,
}

const SEEN: &str = "events-seen.json";

fn save(daemon: &Daemon, seen: &Seen) {
    if let Err(e) = super::kept::save(daemon, SEEN, seen) {
        tracing::warn!(error = %e, "cannot save which events were told");
    }
}

pub async fn watch(daemon: Arc<Daemon>) {
    let warden = daemon.warden();
    let mut seen = match super::kept::read::<Seen>(&daemon, SEEN) {
        Some(seen) => seen,
        None => {
            // A first start tells nothing from before it.
            let last = match warden.events(0).await {
                Ok(events) => events.iter().map(|e| e.id).max().unwrap_or(0),
                Err(_) => 0,
            };
            let seen = Seen { events_after: last };
            save(&daemon, &seen);
            seen
        }
    };
    // The step the ladder stands on now (the events after `seen` move it
    // on), for the Worker's budgets and schedule: a restart at Slow must
    // not take it for Normal.
    if let Ok(st) = warden.status().await {
        daemon
            .step
            .store(st.ladder_step, std::sync::atomic::Ordering::Relaxed);
    }
    anchor(&daemon).await;
    let mut last_anchor = tokio::time::Instant::now();
    loop {
        tokio::time::sleep(POLL).await;
        let events = match warden.events(seen.events_after).await {
            Ok(events) => events,
            Err(e) => {
                tracing::warn!(error = %e, "the Warden's events could not be read");
                continue;
            }
        };
        let moved = !events.is_empty();
        for event in events {
            if event.id <= seen.events_after {
                continue;
            }
            // At Cut the Warden wipes the AI key's file; the Worker drops
            // its copy.
            // At Freeze the answer under way stops.
            if let Some(assistant) = &daemon.assistant {
                if event.to >= CUT {
                    assistant.wipe();
                } else if event.to >= FREEZE {
                    assistant.halt();
                }
            }
            daemon
                .step
                .store(event.to, std::sync::atomic::Ordering::Relaxed);
            if event.reason == aromba_warden_proto::PANIC_FROM_CHAT {
                // The chat's own `/panic`: its answer said it already.
            } else if event.to > event.from && (SLOW..FREEZE + 1).contains(&event.to) {
                was_that_you(&daemon, &event.message).await;
            } else {
                daemon.say(event.message.clone(), vec![]).await;
            }
            seen.events_after = event.id;
            save(&daemon, &seen);
        }
        if moved || last_anchor.elapsed() >= ANCHOR_EVERY {
            anchor(&daemon).await;
            last_anchor = tokio::time::Instant::now();
        }
    }
}

/// A move up to Slow or Freeze: "Was that you?" in the Warden's words,
/// with its buttons (Yes steps the ladder down on the person's signed tap;
/// No stops Aromba). When the Warden will not ask it, the move's message
/// alone.
async fn was_that_you(daemon: &Daemon, fallback: &str) {
    match warden_client::ask(&daemon.worker_socket(), &Request::ProposeStepDown).await {
        Ok(Response::Proposed {
            action_id,
            text,
            buttons,
            app,
            ..
        }) => {
            let buttons = super::in_app::buttons(&action_id, buttons, app.as_deref());
            let message = daemon.say(text, buttons).await;
            super::shown::update(daemon, message, |s| s.no_is_panic = true);
            super::in_app::remember(daemon, message, app);
        }
        other => {
            tracing::warn!(answer = ?other.map(|r| format!("{r:?}")), "no \"Was that you?\" to ask");
            daemon.say(fallback.to_string(), vec![]).await;
        }
    }
}

/// The journal head the relay holds, and what the Warden made of it.
#[derive(Clone, Debug)]
pub struct Anchor {
    pub seq: u64,
    pub ok: bool,
    pub report: String,
}

/// The relay's anchor, at each connection: the Warden checks the journal
/// still extends it (a cut or a rewrite is a signal there, and said here).
///
/// At most one check a minute, none for the anchor checked last, and each
/// from the read budget: a relay sending its anchor without end (found by
/// the attack round: 2,000 true anchors, each a Warden request, moved the
/// ladder to Slow) gets no more of the Warden than a chat does.
pub async fn check_anchor(daemon: &Daemon, seq: u64, hash: String, signature: Option<String>) {
    {
        let now = tokio::time::Instant::now();
        let mut last = daemon
            .anchor_checked
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let repeat = last.as_ref().is_some_and(|(s, h, at)| {
            (*s == seq && *h == hash) || now.duration_since(*at) < ANCHOR_CHECKS_EVERY
        });
        if repeat {
            tracing::debug!(
                seq,
                "an anchor checked already or a minute ago: not asked again"
            );
            return;
        }
        if !daemon.take_read() {
            tracing::info!(
                seq,
                "the read budget is spent: the anchor is not checked now"
            );
            return;
        }
        *last = Some((seq, hash.clone(), now));
    }
    let answer = warden_client::ask(
        &daemon.worker_socket(),
        &Request::CheckAnchor {
            seq,
            hash,
            signature,
        },
    )
    .await;
    let (ok, report) = match answer {
        Ok(Response::Verified { ok, report }) => (ok, report),
        Ok(other) => (true, super::chat::odd(&other)),
        Err(e) => (true, aromba_words::chat::warden_not_asked(&e)),
    };
    *daemon.anchor.lock().unwrap_or_else(|p| p.into_inner()) = Some(Anchor {
        seq,
        ok,
        report: report.clone(),
    });
    if !ok {
        daemon
            .say(aromba_words::trust::journal_changed(&report), vec![])
            .await;
    }
}

/// Anchors checked at most this often.
const ANCHOR_CHECKS_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// Sends the journal's head to the relay; never one below the relay's
/// anchor (which the relay refuses, and which the check above reports).
async fn anchor(daemon: &Daemon) {
    match daemon.warden().status().await {
        Ok(st) => {
            let below = daemon
                .anchor
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .as_ref()
                .is_some_and(|a| st.journal_seq < a.seq);
            if below {
                return;
            }
            let body = Body::JournalHead {
                seq: st.journal_seq,
                hash: st.journal_head,
            };
            if daemon.to_relay.send(Outgoing(body)).await.is_err() {
                tracing::warn!("the relay link is gone; the journal head was not sent");
            }
        }
        Err(e) => tracing::warn!(error = %e, "the Warden's status could not be read"),
    }
}
