//! The chat: a person's commands and taps, answered from the Warden. A
//! command is a word the Worker knows; everything shown comes from the
//! Warden, already redacted. A tap on an approval is passed to the Warden
//! with the relay's signature, and the Warden alone decides.

use super::Daemon;
use crate::warden_client;
use aromba_relay_proto::client::Incoming;
use aromba_relay_proto::commands::{COMMANDS, Command};
use aromba_relay_proto::frame::{AppAsk, Button, Delivery, Span, TapProof};
use aromba_warden_proto::{Request, Response, printable};
use std::sync::Arc;
use tokio::sync::{Mutex, mpsc};

use aromba_words::approvals::{
    ALREADY_ANSWERED, ANSWERED_BEFORE, APPROVED_CUT_SHORT, APPROVED_DONE, APPROVED_INSTALLING,
    APPROVED_NOT_DONE, APPROVED_RUNNING, APPROVED_WENT_BADLY, CANCELLED, IT_WAS_ME, IT_WAS_NOT_ME,
    NOT_DONE_WRONG_PIN, STEPPING_BACK, UNDONE, YES_NOT_DONE,
};
use aromba_words::{assistant as ai_words, chat as words, trust as trust_words};

/// The commands that reach the ladder: handled by [`ladder`] on a path of
/// their own, so no other chat work (a run awaiting its receipt, a flood of
/// other commands) can hold them back.
pub const LADDER_COMMANDS: [Command; 2] = [Command::Panic, Command::Trust];

/// Whether `text` is one of [`LADDER_COMMANDS`].
pub fn is_ladder_command(text: &str) -> bool {
    command(text)
        .and_then(|(name, _)| Command::parse(&name))
        .is_some_and(|c| LADDER_COMMANDS.contains(&c))
}

/// `/panic` asked for, and not yet carried out: rung by the relay link,
/// answered by [`ladder`]. Rings while one is being carried out make one
/// more, never a queue.
#[derive(Debug, Default)]
pub struct PanicBell {
    rung: std::sync::atomic::AtomicBool,
    notify: tokio::sync::Notify,
}

impl PanicBell {
    pub fn ring(&self) {
        self.rung.store(true, std::sync::atomic::Ordering::SeqCst);
        self.notify.notify_one();
    }

    async fn rung(&self) {
        loop {
            if self.rung.swap(false, std::sync::atomic::Ordering::SeqCst) {
                return;
            }
            self.notify.notified().await;
        }
    }
}

/// Whether `text` is `/panic`.
pub fn is_panic(text: &str) -> bool {
    command(text).is_some_and(|(name, _)| name == "panic")
}

/// The ladder's commands on their own path: `/panic` first, always carried
/// out; its answer, like every answer, waits its turn in the chat's pace.
pub async fn ladder(
    daemon: Arc<Daemon>,
    bell: Arc<PanicBell>,
    commands: Arc<Mutex<mpsc::Receiver<Incoming>>>,
) {
    let mut commands = commands.lock().await;
    loop {
        let reply = tokio::select! {
            biased;
            () = bell.rung() => Reply::from(panic(&daemon).await),
            next = commands.recv() => match next {
                Some(Incoming::Delivery { delivery: Delivery::Message { text }, .. })
                    if is_ladder_command(&text) =>
                {
                    if daemon.take_read() { trust(&daemon).await } else { daemon.busy().into() }
                }
                Some(_) => continue,
                None => return,
            },
        };
        match daemon.take_reply() {
            super::replies::Turn::Answer => daemon.say(reply.text, reply.buttons).await,
            super::replies::Turn::FirstSkipped => daemon.say(words::TOO_MANY.into(), vec![]).await,
            super::replies::Turn::Skipped => uuid::Uuid::nil(),
        };
    }
}

pub async fn serve(daemon: Arc<Daemon>, deliveries: Arc<Mutex<mpsc::Receiver<Incoming>>>) {
    let mut deliveries = deliveries.lock().await;
    while let Some(incoming) = deliveries.recv().await {
        // Every delivery takes a turn, whatever it is (a secret, a
        // `paired`, a kind added later); past the pace it is dropped, and
        // the chat told so once: a relay delivering without end must not
        // make the Worker answer without end.
        // The Trust page's policy section rides on the turn of the page
        // it belongs to. A page past the pace is told so at once (it would
        // wait for nothing otherwise): no more than the acknowledgement
        // every delivery gets anyway.
        let app = match &incoming {
            Incoming::Delivery {
                delivery:
                    Delivery::App {
                        request,
                        ask,
                        launch,
                        ..
                    },
                ..
            } => Some((
                *request,
                *ask == AppAsk::Policy && super::trust_page::owed(&daemon, launch),
            )),
            _ => None,
        };
        let owed = app.is_some_and(|(_, owed)| owed);
        if matches!(&incoming, Incoming::Delivery { .. }) && !owed {
            match (daemon.take_reply(), app) {
                (super::replies::Turn::Answer, _) => {}
                (_, Some((request, _))) => {
                    super::in_app::too_many(&daemon, request).await;
                    continue;
                }
                (super::replies::Turn::FirstSkipped, None) => {
                    daemon.say(words::TOO_MANY.into(), vec![]).await;
                    continue;
                }
                (super::replies::Turn::Skipped, None) => continue,
            }
        }
        match incoming {
            Incoming::Delivery {
                delivery: Delivery::Message { text },
                ..
            } => {
                // A question: answered by a task of its own while the chat
                // goes on.
                if command(&text).is_none()
                    && let Some(said) = super::ask::take(&daemon, &text)
                {
                    if !said.is_empty() {
                        daemon.say(said, vec![]).await;
                    }
                    continue;
                }
                let reply = answer(&daemon, &text).await;
                if !reply.text.is_empty() {
                    daemon
                        .say_formatted(reply.text, reply.buttons, reply.monospace)
                        .await;
                }
            }
            Incoming::Delivery {
                delivery:
                    Delivery::Tap {
                        message,
                        button,
                        proof,
                    },
                ..
            } => tap(&daemon, message, &button, &proof).await,
            Incoming::Delivery {
                delivery:
                    Delivery::App {
                        request,
                        ask,
                        launch,
                        sealed_pin,
                        undo,
                    },
                ..
            } => {
                let asked = super::in_app::Asked {
                    request,
                    ask,
                    launch,
                    sealed_pin,
                    undo,
                };
                super::in_app::asked(&daemon, asked).await
            }
            Incoming::Anchor {
                seq,
                hash,
                signature,
            } => super::events::check_anchor(&daemon, seq, hash, signature).await,
            Incoming::Delivery {
                delivery: Delivery::Paired { .. },
                ..
            } => {
                // The key is pinned by `aromba pair` from its own
                // connection; one arriving here is not trusted.
                daemon.say(words::PAIRED.into(), vec![]).await;
            }
            _ => {}
        }
    }
}

pub struct Reply {
    pub text: String,
    pub buttons: Vec<Button>,
    /// Stretches of the text to show in a monospace font.
    pub monospace: Vec<Span>,
}

impl Reply {
    /// Nothing more to say: the answer was sent already.
    pub fn none() -> Reply {
        Reply {
            text: String::new(),
            buttons: vec![],
            monospace: vec![],
        }
    }
}

impl From<String> for Reply {
    fn from(text: String) -> Reply {
        Reply {
            text,
            buttons: vec![],
            monospace: vec![],
        }
    }
}

/// The command in a message: `/disk`, `/disk@SomeBot`, `/logs nginx`.
pub fn command(text: &str) -> Option<(String, Vec<String>)> {
    let text = text.trim();
    let rest = text.strip_prefix('/')?;
    let mut words = rest.split_whitespace();
    let first = words.next()?;
    let name = first
        .split('@')
        .next()
        .unwrap_or(first)
        .to_ascii_lowercase();
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') {
        return None;
    }
    Some((name, words.take(4).map(str::to_string).collect()))
}

pub(super) async fn ask(daemon: &Daemon, request: &Request) -> Result<Response, String> {
    warden_client::ask(&daemon.worker_socket(), request)
        .await
        .map_err(|e| words::could_not_ask_the_warden(&e))
}

/// A read's standard output, or the one sentence saying why not.
pub async fn read(daemon: &Daemon, cmd: &str, args: &[&str]) -> Result<String, String> {
    if !daemon.take_read() {
        return Err(daemon.busy());
    }
    let args = args.iter().map(|a| a.to_string()).collect();
    match daemon.warden().read(cmd, args).await {
        Ok(r) if r.exit_code == Some(0) => Ok(printable(&r.stdout)),
        Ok(r) => Err(words::read_failed(cmd, printable(&r.stderr).lines().next())),
        Err(e) => Err(said(&e)),
    }
}

async fn answer(daemon: &Daemon, text: &str) -> Reply {
    let Some((name, args)) = command(text) else {
        // Not a command, and no assistant here (`serve` gave it a question
        // otherwise).
        return words::ONLY_COMMANDS.to_string().into();
    };
    let Some(known) = Command::parse(&name) else {
        return words::unknown_command(&name).into();
    };
    // One arm per row of the commands' table: a command added there and
    // not answered here does not compile.
    match known {
        Command::Help => words::help(COMMANDS.iter().map(|row| row.help)).into(),
        Command::Trust if !daemon.take_read() => daemon.busy().into(),
        Command::Trust => trust(daemon).await,
        Command::Panic => panic(daemon).await.into(),
        Command::Logs => logs(
            daemon,
            args.first().map(String::as_str),
            args.get(1).is_some_and(|a| a == "all"),
        )
        .await
        .into(),
        Command::Status
        | Command::Disk
        | Command::Services
        | Command::Updates
        | Command::Digest => crate::health::chat::answer(daemon, &name, &args).await,
        // Each asks the Warden: out of the same budget as the reads, so
        // that no command, however often delivered, takes the Worker past
        // the Warden's count.
        Command::Chores | Command::Skills | Command::ProdMode | Command::Run
            if !daemon.take_read() =>
        {
            daemon.busy().into()
        }
        Command::Chores => chores(daemon).await.into(),
        Command::Skills => skills(daemon).await.into(),
        Command::Ai if daemon.assistant.is_none() => ai_words::NO_AI_KEY.to_string().into(),
        Command::Ai => super::ask::budget(daemon, &args).into(),
        Command::ProdMode => {
            prod_mode(daemon, args.first().map(String::as_str)).await;
            Reply::none()
        }
        Command::Run => {
            run(daemon, args.first().map(String::as_str)).await;
            Reply::none()
        }
    }
}

/// `/trust`: the Warden's state in a few lines, with the button that
/// opens the Trust page (everything, in the Mini App).
async fn trust(daemon: &Daemon) -> Reply {
    let text = trust_text(daemon).await;
    Reply {
        text,
        buttons: vec![Button::app(
            super::in_app::TRUST,
            aromba_words::trust::page::OPEN,
            super::in_app::TRUST,
        )],
        monospace: vec![],
    }
}

async fn trust_text(daemon: &Daemon) -> String {
    match daemon.warden().status().await {
        Ok(st) => {
            let anchor = daemon
                .anchor
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            let mut lines = vec![trust_verdict(&st, anchor.as_ref())];
            let prod_mode = plain_times(&st.prod_mode);
            lines.extend(
                trust_words::TrustLines {
                    ladder_name: &st.ladder_name,
                    ladder_step: st.ladder_step,
                    ladder_reason: &st.ladder_reason,
                    phase: &st.phase,
                    isolation: &st.isolation,
                    integrity: &st.integrity,
                    prod_mode: &prod_mode,
                    journal_entries: st.journal_seq,
                    journal_head: &st.journal_head,
                }
                .lines(),
            );
            lines.push(trust_words::anchor_line(
                anchor.as_ref().map(|a| (a.ok, a.report.as_str())),
            ));
            lines.push(super::update::trust_line(daemon));
            lines.join("\n")
        }
        Err(e) => said(&e),
    }
}

/// The line `/trust` leads with: whether all is well, in plain words.
pub(super) fn trust_verdict(
    st: &aromba_warden_proto::Status,
    anchor: Option<&super::events::Anchor>,
) -> String {
    if anchor.is_some_and(|a| !a.ok) {
        return trust_words::JOURNAL_DOES_NOT_MATCH.into();
    }
    if !st.integrity.starts_with("ok") {
        return trust_words::a_watched_file_changed(&st.integrity);
    }
    trust_words::ladder_verdict(st.ladder_step).into()
}

/// `text` with each "since <Unix seconds>" as the server's local time
/// (`on since 1796422984` → `on since 2026-12-05 09:10`).
pub fn plain_times(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("since ") {
        let (head, tail) = rest.split_at(at + "since ".len());
        out.push_str(head);
        let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
        let local = tail[..digits]
            .parse::<i64>()
            .ok()
            .filter(|_| digits >= 9)
            .and_then(|n| jiff::Timestamp::from_second(n).ok())
            .map(|t| {
                t.to_zoned_datetime(jiff::tz::TimeZone::system())
                    .strftime("%Y-%m-%d %H:%M")
                    .to_string()
            });
        match local {
            Some(l) => out.push_str(&l),
            None => out.push_str(&tail[..digits]),
        }
        rest = &tail[digits..];
    }
    out.push_str(rest);
    out
}

async fn panic(daemon: &Daemon) -> String {
    match ask(daemon, &Request::Panic).await {
        Ok(Response::Ladder { step, message, .. }) => {
            // At Cut the AI key goes: the Warden wipes its file, the Worker
            // its copy, at once.
            if let Some(assistant) = &daemon.assistant {
                if step >= super::events::CUT {
                    assistant.wipe();
                } else if step >= super::events::FREEZE {
                    assistant.halt();
                }
            }
            // The Warden's own words: "You stopped Aromba. …" and the way
            // back (its event for this move is not said again).
            message
        }
        Ok(Response::Refused { reason, .. }) => words::warden_refused(&reason),
        Ok(other) => odd(&other),
        Err(e) => e,
    }
}

/// A unit name as the policy takes it: letters, digits and `@._-:`.
fn unit_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && !s.starts_with('-')
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"@._-:".contains(&b))
}

/// Log lines `/logs` shows, and `/logs <unit> all` (split over messages).
const LOG_LINES: &str = "20";
const LOG_LINES_ALL: &str = "200";

async fn logs(daemon: &Daemon, unit: Option<&str>, all: bool) -> String {
    let Some(unit) = unit else {
        return words::WHICH_SERVICE.into();
    };
    if !unit_name(unit) {
        return words::NOT_A_SERVICE.into();
    }
    match read(
        daemon,
        "journalctl",
        &[
            "-u",
            unit,
            "-n",
            if all { LOG_LINES_ALL } else { LOG_LINES },
            "--no-pager",
            "-q",
            "-o",
            "short",
        ],
    )
    .await
    {
        Ok(out) if out.trim().is_empty() => no_log_lines(daemon, unit).await,
        Ok(out) if all => words::log_lines(unit, out.trim_end(), None),
        Ok(out) => words::log_lines(
            unit,
            &tail(&out, 3000),
            (out.len() > 3000).then_some(LOG_LINES_ALL),
        ),
        Err(e) if crate::health::no_systemd(&e) => words::NO_JOURNAL.to_string(),
        Err(e) => e,
    }
}

/// Why a service's log is empty: there is no such service here, or it has
/// written nothing (yet).
async fn no_log_lines(daemon: &Daemon, unit: &str) -> String {
    match read(
        daemon,
        "systemctl",
        &["status", "--no-pager", "--lines", "0", unit],
    )
    .await
    {
        Err(e) if e.contains(SYSTEMCTL_NO_SUCH_UNIT) => words::no_such_service(unit),
        Err(e) if crate::health::no_systemd(&e) => words::NO_JOURNAL.to_string(),
        Ok(_) => words::no_log_lines(unit),
        Err(e) => words::no_log_lines_unsure(unit, &e),
    }
}

/// How `systemctl status` says a unit is not there (its words, matched,
/// not said).
const SYSTEMCTL_NO_SUCH_UNIT: &str = "could not be found";

/// The end of `text`, at most `max` bytes, cut at a line.
fn tail(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.trim_end().to_string();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let cut = &text[start..];
    let cut = cut.split_once('\n').map_or(cut, |(_, rest)| rest);
    format!("…\n{}", cut.trim_end())
}

async fn chores(daemon: &Daemon) -> String {
    match daemon.warden().chores().await {
        Ok(chores) if chores.is_empty() => words::NO_CHORES.into(),
        Ok(chores) => chores
            .iter()
            .map(|c| words::chore_line(&c.name, &c.color, &c.schedule))
            .collect::<Vec<_>>()
            .join("\n"),
        Err(e) => said(&e),
    }
}

/// `/skills`: each skill installed, from whom, and what it may reach on
/// the network now; each that no longer loads, with the Warden's why.
async fn skills(daemon: &Daemon) -> String {
    match daemon.warden().skills().await {
        Ok((skills, refused)) if skills.is_empty() && refused.is_empty() => words::NO_SKILLS.into(),
        Ok((skills, refused)) => {
            let mut lines = vec![words::skills_verdict(skills.len(), refused.len())];
            lines.extend(skills.iter().map(|s| {
                let unset: Vec<&str> = s
                    .settings
                    .iter()
                    .filter(|t| t.shown.starts_with("not set"))
                    .map(|t| t.name.as_str())
                    .collect();
                words::skill_line(&s.name, &s.version, &s.publisher, &s.network, &unset)
            }));
            lines.extend(refused.iter().map(|r| words::skill_not_loaded(r)));
            lines.push(words::SKILLS_MORE.into());
            lines.join("\n")
        }
        Err(e) => said(&e),
    }
}

/// `/run NAME`: a person asks for a chore now. Its first real run waits
/// for its dry run, shown here; then a green chore is asked for as the
/// schedule would (the Warden decides whether it may), and a yellow or red
/// one is proposed with the Warden's own words and buttons.
async fn run(daemon: &Daemon, name: Option<&str>) {
    let Some(name) = name.filter(|n| {
        !n.is_empty()
            && n.len() <= 64
            && n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    }) else {
        daemon.say(words::WHICH_CHORE.into(), vec![]).await;
        return;
    };
    let Some(chore) = chore(daemon, name).await else {
        return;
    };
    let dry_run_first = !chore.cap_unconfirmed && !chore.dry_run_seen;
    if !super::schedule::ask_for(daemon, &chore).await && dry_run_first {
        daemon
            .say(words::run_again_for_real(&chore.name), vec![])
            .await;
    }
}

/// The chore `name` of the Warden's list; when there is none, or the list
/// cannot be read, the chat is told why.
pub(super) async fn chore(daemon: &Daemon, name: &str) -> Option<aromba_warden_proto::ChoreInfo> {
    let chore = match daemon.warden().chores().await {
        Ok(chores) => chores.into_iter().find(|c| c.name == name),
        Err(e) => {
            daemon.say(said(&e), vec![]).await;
            return None;
        }
    };
    if chore.is_none() {
        daemon.say(words::no_such_chore(name), vec![]).await;
    }
    chore
}

/// Why the Warden's answer is not the one asked for, in the chat's words.
pub fn said(e: &warden_client::WardenError) -> String {
    use warden_client::WardenError;
    match e {
        WardenError::Unreachable(e) => words::could_not_ask_the_warden(e),
        // Held back at Slow: the Warden's sentence is the chat's, with the
        // seconds it keeps.
        WardenError::Refused(reason) if reason.starts_with(aromba_warden_proto::SLOWED) => {
            reason.clone()
        }
        WardenError::Refused(reason) => words::warden_refused(reason),
        WardenError::Failed(message) => words::warden_could_not(message),
        WardenError::Unexpected(_) => words::warden_odd(),
    }
}

/// A Warden answer the chat did not expect, in one sentence.
pub fn odd(answer: &Response) -> String {
    said(&warden_client::WardenError::not_asked_for(answer.clone()))
}

/// A tap. On an approval (the button carries the Warden's action id) it
/// goes to the Warden with the relay's signature; the Warden verifies it
/// and runs what it approves, or refuses. The message answers at once,
/// its buttons off ([`super::shown`]); a second tap on it is a double tap,
/// said so and not asked of the Warden again. On a receipt's Undo button
/// it asks the Warden for a proposal to undo that run.
async fn tap(daemon: &Daemon, message: uuid::Uuid, button: &str, proof: &TapProof) {
    if proof.action.is_some() && super::shown::get(daemon, message).is_some_and(|s| s.answered) {
        daemon.say(ALREADY_ANSWERED.into(), vec![]).await;
        return;
    }
    if !daemon.take_read() {
        daemon.say(daemon.busy(), vec![]).await;
        return;
    }
    let Some(action_id) = &proof.action else {
        if button == super::undo::BUTTON
            && let Some(undo_id) = super::undo::offered(daemon, message)
        {
            if super::undo::propose(daemon, message, undo_id).await
                == super::undo::Proposed::Already
            {
                daemon
                    .say(words::UNDO_PROPOSED_ALREADY.into(), vec![])
                    .await;
            }
        } else {
            daemon.say(words::BUTTON_DOES_NOTHING.into(), vec![]).await;
        }
        return;
    };
    approve(daemon, message, action_id, button, proof).await;
}

/// What the chat is told after a wrong PIN: the approval is spent, so the
/// way to try again is to ask again.
pub fn wrong_pin(locked: bool) -> String {
    aromba_words::approvals::wrong_pin(
        locked,
        aromba_warden_proto::PIN_MAX_FAILURES,
        aromba_warden_proto::PIN_LOCK_S / 60,
    )
}

/// `/prodmode off`: the Warden's proposal, which needs the PIN; `/prodmode`
/// says where it stands.
async fn prod_mode(daemon: &Daemon, arg: Option<&str>) {
    match arg {
        Some("off") => {
            super::schedule::propose(
                daemon,
                &Request::ProposeProdModeOff,
                aromba_words::chores::PROD_MODE_OFF,
            )
            .await;
        }
        _ => {
            let text = match daemon.warden().status().await {
                Ok(st) => trust_words::prod_mode(
                    &plain_times(&st.prod_mode),
                    st.prod_mode.starts_with("on"),
                ),
                Err(e) => said(&e),
            };
            daemon.say(text, vec![]).await;
        }
    }
}

/// The relay-signed tap to the Warden (never with a PIN: an action that
/// needs one is approved in the Mini App); the Warden's answer to the
/// chat, and under the proposal.
async fn approve(
    daemon: &Daemon,
    message: uuid::Uuid,
    action_id: &str,
    button: &str,
    proof: &TapProof,
) {
    let approving = button == "approve";
    let request = Request::Approve {
        action_id: action_id.to_string(),
        button: button.to_string(),
        chat: proof.chat.to_string(),
        time: proof.time,
        signature: proof.signature.clone(),
    };
    carry(daemon, message, approving, &request).await;
}

/// An approval (a relay-signed tap, or the person's launch in the Mini
/// App) to the Warden, for the proposal `message`; the Warden's answer to
/// the chat, and under the proposal.
pub(super) async fn carry(
    daemon: &Daemon,
    message: uuid::Uuid,
    approving: bool,
    request: &Request,
) {
    let was_that_you = super::shown::get(daemon, message).is_some_and(|s| s.no_is_panic);
    match super::shown::answer(daemon, message) {
        Some(false) => {
            daemon.say(ALREADY_ANSWERED.into(), vec![]).await;
            return;
        }
        Some(true) => {
            let under = match (was_that_you, approving) {
                (true, true) => STEPPING_BACK,
                (true, false) => IT_WAS_NOT_ME,
                (false, true) => APPROVED_RUNNING,
                (false, false) => CANCELLED,
            };
            if under == APPROVED_RUNNING {
                super::shown::close_pending(daemon, message, under).await;
            } else {
                super::shown::close(daemon, message, under).await;
            }
        }
        None => {}
    }
    let asked = warden_client::ask(&daemon.worker_socket(), request).await;
    // The approval went to the Warden and no answer came back: it may have
    // run (a Warden killed mid-run closes the run when it starts again).
    let cut_short = approving
        && !was_that_you
        && matches!(
            asked,
            Err(warden_client::ClientError::Closed
                | warden_client::ClientError::Io(_)
                | warden_client::ClientError::TimedOut)
        );
    let answer = asked.map_err(|e| words::could_not_ask_the_warden(&e));
    let under = match &answer {
        Ok(Response::AlreadyAnswered { .. }) => Some(ANSWERED_BEFORE),
        // Said when it was tapped.
        _ if !approving => None,
        _ if cut_short => Some(APPROVED_CUT_SHORT),
        Ok(Response::Ladder { .. }) => Some(IT_WAS_ME),
        _ if was_that_you => Some(YES_NOT_DONE),
        Ok(Response::Receipt { ok: false, .. }) => Some(APPROVED_WENT_BADLY),
        Ok(Response::Receipt { .. } | Response::Noted { .. }) => Some(APPROVED_DONE),
        Ok(Response::ReleaseInstalled { .. }) => Some(APPROVED_INSTALLING),
        Ok(Response::Refused { reason, .. })
            if reason.starts_with(aromba_warden_proto::WRONG_PIN) =>
        {
            Some(NOT_DONE_WRONG_PIN)
        }
        _ => Some(APPROVED_NOT_DONE),
    };
    if let Some(under) = under {
        super::shown::close(daemon, message, under).await;
    }
    match answer {
        Ok(Response::Receipt { receipt, ok, .. }) => {
            let text = super::undo::receipt_text(ok, &receipt);
            super::undo::say_receipt(daemon, text, &receipt).await;
            if ok
                && let Some(receipt_message) =
                    super::shown::get(daemon, message).and_then(|s| s.undo_of)
            {
                super::undo::withdraw(daemon, receipt_message);
                super::shown::answer(daemon, receipt_message);
                super::shown::close(daemon, receipt_message, UNDONE).await;
            }
        }
        // "No, stop Aromba": the person says the unusual activity was not
        // theirs, so Aromba stops (the chat's `/panic`, which needs no
        // signature) — whatever the Warden made of the tap, "already
        // answered" included: a question a later move withdrew is still
        // the person's no (found by the attack round).
        _ if !approving && was_that_you => {
            let stopped = panic(daemon).await;
            daemon.say(stopped, vec![]).await;
        }
        Ok(Response::Noted { .. }) => {
            daemon
                .say(aromba_words::approvals::DONE.into(), vec![])
                .await;
        }
        Ok(Response::AlreadyAnswered { .. }) => {
            daemon.say(ALREADY_ANSWERED.into(), vec![]).await;
        }
        Ok(Response::ReleaseInstalled { version, .. }) => {
            daemon
                .say(aromba_words::approvals::installing(&version), vec![])
                .await;
        }
        // Cancel is refused by design: the person chose not to go ahead,
        // and the message says so already. Any other refusal is said.
        Ok(Response::Refused { reason, .. })
            if !approving && reason.starts_with(aromba_warden_proto::DECLINED) => {}
        // "Yes, it was me": the ladder stepped down; the Warden's event
        // says so in the chat.
        Ok(Response::Ladder { .. }) => {}
        Ok(Response::Refused { reason, .. })
            if reason.starts_with(aromba_warden_proto::WRONG_PIN) =>
        {
            daemon
                .say(wrong_pin(reason.contains("locked")), vec![])
                .await;
        }
        Ok(other) => {
            daemon.say(odd(&other), vec![]).await;
        }
        // Said under the proposal: a second sentence would only repeat it.
        Err(_) if cut_short => {}
        Err(e) => {
            daemon.say(e, vec![]).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_commands_with_a_bot_name_and_arguments() {
        assert_eq!(command("/disk"), Some(("disk".into(), vec![])));
        assert_eq!(command("/Disk@AROMBA_bot"), Some(("disk".into(), vec![])));
        assert_eq!(
            command(" /logs nginx extra"),
            Some(("logs".into(), vec!["nginx".into(), "extra".into()]))
        );
        assert_eq!(command("disk"), None);
        assert_eq!(command("/"), None);
        assert_eq!(command("/rm-rf"), None);
    }

    #[test]
    fn a_unit_name_cannot_be_an_option() {
        assert!(unit_name("nginx.service"));
        assert!(unit_name("getty@tty1"));
        assert!(!unit_name("--since=yesterday"));
        assert!(!unit_name("a b"));
        assert!(!unit_name(""));
    }

    #[test]
    fn a_time_since_is_shown_as_a_date_not_seconds() {
        let shown = plain_times("on since 1796422984");
        assert!(shown.starts_with("on since 2026-"), "{shown}");
        assert!(!shown.contains("1796422984"), "{shown}");
        assert_eq!(plain_times("off"), "off");
        assert_eq!(plain_times("on since 12"), "on since 12");
    }

    #[test]
    fn tail_cuts_at_a_line_and_a_character() {
        let text = "é".repeat(10) + "\nlast line\n";
        assert_eq!(tail(&text, 12), "…\nlast line");
        assert_eq!(tail("short\n", 100), "short");
    }
}
