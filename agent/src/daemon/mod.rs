//! `aromba run`: the Worker's daemon, as user `aromba`.
//!
//! One tokio runtime, one task per concern, each restarted when it ends
//! badly, with bounded channels between them:
//!
//! - the relay link ([`relay_link`]): the one WebSocket, through the
//!   network gate; deliveries go to the chat task, messages come back;
//! - the chat ([`chat`]): commands and taps, answered from Warden reads,
//!   at a pace ([`replies`]) whatever they ask;
//! - the ladder ([`chat::ladder`]): `/panic` and `/trust`, on a path of
//!   their own that nothing else in the chat can hold back;
//! - the Warden's events ([`events`]): ladder moves become chat messages;
//! - the journal anchor: the journal's head to the relay every hour and at
//!   each ladder move;
//! - the health ([`crate::health`]): alerts and the daily digest;
//! - the schedule ([`schedule`]): chores when their time comes, dry runs
//!   shown first, proposals for the ones that need a tap;
//! - the scan ([`scan`]): the first look at the server (prod mode on when
//!   it looks like production) and data folders fenced, then weekly;
//! - updates ([`update`]): the daily look at the release folder, patch
//!   releases in the quiet window, minor and major ones proposed.
//!
//! Nothing here spawns a process: everything that touches the system is a
//! request to the Warden.

pub mod ask;
pub mod chat;
pub mod events;
pub mod in_app;
pub mod kept;
pub mod relay_link;
pub mod replies;
pub mod scan;
pub mod schedule;
pub mod shown;
pub mod skill_updates;
mod start;
pub mod trust_page;
pub mod undo;
pub mod update;

pub use start::{become_user, run};

use crate::config::ConfigError;
use crate::paths::Paths;
use aromba_relay_proto::client::{Endpoint, Outgoing};
use aromba_relay_proto::frame::Body;
use aromba_warden_proto::Lane;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use uuid::Uuid;

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error("{0}")]
    Setup(String),
}

/// What the daemon's tasks share.
pub struct Daemon {
    pub paths: Paths,
    /// Messages for the chat, kept until the relay acknowledges them.
    pub to_relay: mpsc::Sender<Outgoing>,
    /// When the person's last reads were asked, for [`PERSON_READS`].
    pub reads: std::sync::Mutex<std::collections::VecDeque<tokio::time::Instant>>,
    /// When the background's last reads were asked, for
    /// [`BACKGROUND_READS`].
    pub background_reads: std::sync::Mutex<std::collections::VecDeque<tokio::time::Instant>>,
    /// The ladder's step as the Warden's events last said it.
    pub step: std::sync::atomic::AtomicU64,
    /// The journal head the relay holds, and what the Warden made of it.
    pub anchor: std::sync::Mutex<Option<events::Anchor>>,
    /// The anchor last asked about, and when ([`events::check_anchor`]).
    pub anchor_checked: std::sync::Mutex<Option<(u64, String, tokio::time::Instant)>>,
    /// Where the daily update check looks; `None` when `network.toml`
    /// names no release folder.
    pub updates: Option<update::UpdateSource>,
    /// The assistant, when `network.toml` names a model and its host.
    pub assistant: Option<std::sync::Arc<crate::assistant::Assistant>>,
    /// The hosts `network.toml` lets the Worker reach (`name:port`), for
    /// the Trust page.
    pub network_hosts: Vec<String>,
    /// The policy a Trust page just shown asks for next
    /// ([`trust_page::owed`]).
    pub policy_owed: std::sync::Mutex<Option<trust_page::Owed>>,
    /// The chat's pace: deliveries answered, whatever they ask.
    pub replies: std::sync::Mutex<replies::Replies>,
    /// The messages with buttons sent, for their taps ([`shown`]).
    pub shown: std::sync::Mutex<shown::Record>,
}

/// Reads the Worker asks for in [`READ_WINDOW`], at most: the Warden
/// counts every read toward "too many commands in ten minutes" (60) and
/// climbs the ladder past it, so neither a chat that asks a lot nor the
/// schedule may take the Worker there. Held below the Warden's count, with
/// room for dry runs and taps, in two budgets: the person's (the chat, the
/// assistant) and the background's (health, schedule, scans, updates), so
/// that the Worker's own work never spends what a person's command needs.
pub const READ_BUDGET: usize = PERSON_READS + BACKGROUND_READS;
pub const PERSON_READS: usize = 30;
pub const BACKGROUND_READS: usize = 18;
// Below the Warden's "too many commands in ten minutes" (60), with room.
const _: () = assert!(READ_BUDGET <= 48);
pub const READ_WINDOW: Duration = Duration::from_secs(600);
/// At Slow, the Warden lets the background ask once in this long (its
/// lane's pace): the Worker holds its background reads to it rather than
/// have them refused.
pub const SLOW_BACKGROUND_EVERY: Duration = Duration::from_secs(600);

impl Daemon {
    /// Sends `text` (with `buttons`) to the chat; waits when the queue is
    /// full rather than dropping it.
    pub async fn say(&self, text: String, buttons: Vec<aromba_relay_proto::frame::Button>) -> Uuid {
        self.say_formatted(text, buttons, Vec::new()).await
    }

    /// [`Daemon::say`] with stretches of the text in a monospace font. A
    /// plain text longer than a chat message goes as several, split at
    /// lines.
    pub async fn say_formatted(
        &self,
        text: String,
        buttons: Vec<aromba_relay_proto::frame::Button>,
        monospace: Vec<aromba_relay_proto::frame::Span>,
    ) -> Uuid {
        if buttons.is_empty() && monospace.is_empty() && text.chars().count() > MESSAGE_CHARS {
            let mut last = Uuid::nil();
            for part in split_for_chat(&text, MESSAGE_CHARS) {
                last = self.send_one(part, Vec::new(), Vec::new()).await;
            }
            return last;
        }
        self.send_one(text, buttons, monospace).await
    }

    async fn send_one(
        &self,
        text: String,
        buttons: Vec<aromba_relay_proto::frame::Button>,
        monospace: Vec<aromba_relay_proto::frame::Span>,
    ) -> Uuid {
        let id = Uuid::new_v4();
        if !buttons.is_empty() {
            shown::remember(self, id, &text);
        }
        let body = Body::Send {
            id,
            text,
            buttons,
            monospace,
        };
        if self.to_relay.send(Outgoing(body)).await.is_err() {
            tracing::warn!("the relay link is gone; a message was not sent");
        }
        id
    }

    /// Replaces the text of a message this Worker sent, now, when the
    /// queue to the relay has room; else not at all (a streamed answer's
    /// text so far: a later edit brings it).
    pub fn try_edit(&self, message: Uuid, text: String) {
        let body = Body::Edit {
            id: Uuid::new_v4(),
            message,
            text,
            buttons: vec![],
        };
        if self.to_relay.try_send(Outgoing(body)).is_err() {
            tracing::debug!("the queue to the relay is full; a partial answer was not shown");
        }
    }

    /// Replaces the text (and buttons) of a message this Worker sent.
    pub async fn edit(
        &self,
        message: Uuid,
        text: String,
        buttons: Vec<aromba_relay_proto::frame::Button>,
    ) {
        let body = Body::Edit {
            id: Uuid::new_v4(),
            message,
            text,
            buttons,
        };
        if self.to_relay.send(Outgoing(body)).await.is_err() {
            tracing::warn!("the relay link is gone; an edit was not sent");
        }
    }

    /// Takes a turn to answer a delivery ([`replies`]).
    pub fn take_reply(&self) -> replies::Turn {
        self.replies
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take(tokio::time::Instant::now())
    }

    /// Takes one read from the budget, or says it is spent.
    pub fn take_read(&self) -> bool {
        self.take_read_leaving(0)
    }

    /// Takes one read from the budget when more than `reserve` are left:
    /// the assistant leaves some to the chat's own commands and the
    /// schedule.
    pub fn take_read_leaving(&self, reserve: usize) -> bool {
        self.try_read(reserve).is_ok()
    }

    /// Takes one read from the current lane's budget
    /// ([`crate::warden_client::lane`]) when more than `reserve` are left;
    /// else how long until one is free again.
    pub fn try_read(&self, reserve: usize) -> Result<(), Duration> {
        self.read_turn(reserve, true)
    }

    /// Whether the current lane may read now (taking the read when `take`),
    /// or how long until it may.
    fn read_turn(&self, reserve: usize, take: bool) -> Result<(), Duration> {
        let now = tokio::time::Instant::now();
        let person = crate::warden_client::lane() == Lane::Person;
        let (reads, budget) = if person {
            (&self.reads, PERSON_READS)
        } else {
            (&self.background_reads, BACKGROUND_READS)
        };
        let mut reads = reads.lock().unwrap_or_else(|p| p.into_inner());
        while reads
            .front()
            .is_some_and(|t| now.duration_since(*t) >= READ_WINDOW)
        {
            reads.pop_front();
        }
        if reads.len() + reserve >= budget {
            let oldest = reads.front().copied().unwrap_or(now);
            return Err(READ_WINDOW.saturating_sub(now.duration_since(oldest)));
        }
        // At Slow the background asks no more often than the Warden lets
        // its lane: one in ten minutes.
        if !person
            && self.step.load(std::sync::atomic::Ordering::Relaxed) >= events::SLOW
            && let Some(last) = reads.back()
            && now.duration_since(*last) < SLOW_BACKGROUND_EVERY
        {
            return Err(SLOW_BACKGROUND_EVERY.saturating_sub(now.duration_since(*last)));
        }
        if take {
            reads.push_back(now);
        }
        Ok(())
    }

    /// What the chat says when a read was refused: when to ask again, a
    /// wait the budget keeps.
    pub fn busy(&self) -> String {
        aromba_words::chat::busy_for(self.read_turn(0, false).err().unwrap_or(Duration::ZERO))
    }

    pub fn worker_socket(&self) -> std::path::PathBuf {
        self.paths.worker_socket()
    }

    /// The Warden, asked for one kind of answer per request.
    pub fn warden(&self) -> crate::warden_client::Warden {
        crate::warden_client::Warden::at(self.worker_socket())
    }
}

/// The longest text one chat message carries here (Telegram's limit is
/// 4096 characters; some room is left).
pub const MESSAGE_CHARS: usize = 4000;

/// `text` in parts of at most `max` characters, cut at line ends (a line
/// longer than `max` is cut at a character).
pub fn split_for_chat(text: &str, max: usize) -> Vec<String> {
    let max = max.max(1);
    let mut parts = Vec::new();
    let mut part = String::new();
    let mut part_chars = 0;
    for line in text.split('\n') {
        let mut line: Vec<char> = line.chars().collect();
        loop {
            let room = if part.is_empty() {
                max
            } else {
                max.saturating_sub(part_chars + 1)
            };
            if line.len() <= room {
                if !part.is_empty() {
                    part.push('\n');
                    part_chars += 1;
                }
                part_chars += line.len();
                part.extend(line);
                break;
            }
            if !part.is_empty() {
                parts.push(std::mem::take(&mut part));
                part_chars = 0;
                continue;
            }
            let rest = line.split_off(max);
            parts.push(line.into_iter().collect());
            line = rest;
        }
    }
    if !part.trim().is_empty() {
        parts.push(part);
    }
    parts
}

/// Messages waiting for the relay link, at most.
const OUTGOING: usize = 64;
/// Deliveries waiting for the chat task, at most.
const INCOMING: usize = 64;
/// `/trust`s waiting for the ladder task, at most (`/panic` is rung, never
/// queued: [`chat::PanicBell`]).
const LADDER_QUEUE: usize = 4;

pub(super) async fn serve(
    paths: Paths,
    endpoint: Endpoint,
    updates: Option<update::UpdateSource>,
    assistant: Option<Arc<crate::assistant::Assistant>>,
    network_hosts: Vec<String>,
) -> Result<(), DaemonError> {
    let (to_relay, outgoing) = mpsc::channel(OUTGOING);
    let (deliveries_tx, deliveries) = mpsc::channel(INCOMING);
    let (ladder_tx, ladder) = mpsc::channel(LADDER_QUEUE);
    let bell = Arc::new(chat::PanicBell::default());
    let shown = std::sync::Mutex::new(shown::load(&paths.home));
    let daemon = Arc::new(Daemon {
        shown,
        paths,
        to_relay,
        reads: Default::default(),
        background_reads: Default::default(),
        step: Default::default(),
        anchor: Default::default(),
        anchor_checked: Default::default(),
        updates,
        assistant,
        network_hosts,
        policy_owed: Default::default(),
        replies: Default::default(),
    });
    // Proposals a Worker stopped mid-run left "running…" say so.
    tokio::spawn({
        let daemon = daemon.clone();
        async move { shown::settle_interrupted(&daemon).await }
    });
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let link = tokio::spawn(relay_link::hold(
        endpoint,
        outgoing,
        deliveries_tx,
        ladder_tx,
        bell.clone(),
        stop.clone(),
    ));
    let ladder = tokio::spawn(supervise("ladder", Lane::Person, {
        let daemon = daemon.clone();
        let commands = Arc::new(tokio::sync::Mutex::new(ladder));
        move || chat::ladder(daemon.clone(), bell.clone(), commands.clone())
    }));
    let chat = tokio::spawn(supervise("chat", Lane::Person, {
        let daemon = daemon.clone();
        let deliveries = Arc::new(tokio::sync::Mutex::new(deliveries));
        move || chat::serve(daemon.clone(), deliveries.clone())
    }));
    let events = tokio::spawn(supervise("events", Lane::Background, {
        let daemon = daemon.clone();
        move || events::watch(daemon.clone())
    }));
    let health = tokio::spawn(supervise("health", Lane::Background, {
        let daemon = daemon.clone();
        move || crate::health::watch(daemon.clone())
    }));
    let schedule = tokio::spawn(supervise("schedule", Lane::Background, {
        let daemon = daemon.clone();
        move || schedule::keep(daemon.clone())
    }));
    let scan = tokio::spawn(supervise("scan", Lane::Background, {
        let daemon = daemon.clone();
        move || scan::keep(daemon.clone())
    }));
    let update = tokio::spawn(supervise("update", Lane::Background, {
        let daemon = daemon.clone();
        move || update::keep(daemon.clone())
    }));
    tracing::info!("the Worker is running");
    wait_for_signal().await;
    tracing::info!("stopping");
    let _ = stop_tx.send(true);
    chat.abort();
    ladder.abort();
    events.abort();
    health.abort();
    schedule.abort();
    scan.abort();
    update.abort();
    let _ = tokio::time::timeout(Duration::from_secs(5), link).await;
    Ok(())
}

/// Runs the task `make` makes, again after it ends (a second after a
/// quick end, so a task that fails at once does not spin). It asks the
/// Warden in `lane`: the chat's tasks in the person's, the rest in the
/// background's.
async fn supervise<F, Fut>(name: &'static str, lane: Lane, make: F)
where
    F: Fn() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    loop {
        let task = tokio::spawn(crate::warden_client::LANE.scope(lane, make()));
        match task.await {
            Ok(()) => tracing::warn!(task = name, "task ended; restarting it"),
            Err(e) => tracing::error!(task = name, error = %e, "task failed; restarting it"),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        _ => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::split_for_chat;

    #[test]
    fn a_long_text_is_split_at_lines_into_messages_that_fit() {
        let text: String = (0..500).map(|i| format!("• package-{i:03}\n")).collect();
        let parts = split_for_chat(text.trim_end(), 1000);
        assert!(parts.len() > 1);
        assert!(parts.iter().all(|p| p.chars().count() <= 1000));
        assert_eq!(parts.join("\n"), text.trim_end(), "nothing lost or added");
        assert!(parts.iter().all(|p| p.starts_with("• ")), "cut at lines");
    }

    #[test]
    fn a_line_longer_than_a_message_is_cut_at_characters() {
        let text = "é".repeat(25);
        let parts = split_for_chat(&text, 10);
        assert_eq!(
            parts.iter().map(|p| p.chars().count()).collect::<Vec<_>>(),
            vec![10, 10, 5]
        );
        assert_eq!(parts.concat(), text);
        assert_eq!(split_for_chat("short", 10), vec!["short".to_string()]);
    }
}
