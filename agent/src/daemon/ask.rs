//! A question in the chat, to the assistant ([`crate::assistant`]): any
//! message that is not a command, when `network.toml` names a model and
//! `secrets.toml` holds its key.
//!
//! Each answer runs as a task of its own, one at a time, so that the chat
//! — `/panic` above all — is served meanwhile; a halt (Freeze, Cut,
//! `/panic`) drops its request to the model at once. The tools are Warden
//! reads, each taken from the Worker's read budget with some left to the
//! chat, at most [`conversation::MAX_READS`] a question. The answer goes to
//! the chat with its usage in a footer, counted against a daily token
//! budget (`/ai budget N`) kept in the Worker's home — failed and stopped
//! answers count too.
//!
//! A chore the model proposed is never run from here: its dry run is
//! shown, then the Warden's own proposal (its text and buttons), which only
//! a relay-signed tap approves — for a green chore too.

use super::Daemon;
use crate::assistant::conversation::{self, Host, Limits, without_links};
use crate::assistant::model::Usage;
use crate::assistant::{Assistant, Busy};
use crate::warden_client;
use aromba_warden_proto::{Request, Response, printable};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use uuid::Uuid;

const USAGE: &str = "assistant-usage.json";

const OFF: &str = "The assistant is off: its key was wiped when I stepped down to reads only. After `aromba resume`, put a key in secrets.toml and restart the Worker.";

const PIN_KEPT: &str = "That looks like a PIN, so I kept it from the assistant. I read a PIN only right after you tap Approve on an action that asks for one.";

const STILL_ANSWERING: &str =
    "I am still on your last question; ask again once its answer is here.";

const STOPPED: &str = "The assistant could not finish: I stopped it (the ladder moved, or /panic).";

/// Reads of the Worker's budget the assistant leaves to the chat's own
/// commands, dry runs and the schedule.
const LEFT_TO_THE_CHAT: usize = 16;

/// The longest reason of the model's shown with a proposal.
const MAX_WHY: usize = 300;

/// Today's tokens and the budget.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Spent {
    /// The day counted (local `YYYY-MM-DD`).
    day: String,
    used: u64,
    budget: Option<u64>,
}

fn today() -> String {
    jiff::ZonedDateTime::now().date().to_string()
}

fn spent(daemon: &Daemon) -> Spent {
    let mut s: Spent = super::kept::load(daemon, USAGE);
    if s.day != today() {
        s.day = today();
        s.used = 0;
    }
    s
}

fn keep(daemon: &Daemon, s: &Spent) {
    if let Err(e) = super::kept::save(daemon, USAGE, s) {
        tracing::warn!(error = %e, "the assistant's usage was not kept");
    }
}

/// Adds `used` to today's count (read again: `/ai budget` may have changed
/// the file while the answer ran).
fn count(daemon: &Daemon, used: u64) {
    let mut s = spent(daemon);
    s.used = s.used.saturating_add(used);
    keep(daemon, &s);
}

/// The Warden, as the conversation's [`Host`]; each round's tools are
/// shown by editing the answer's message in place.
struct Warden<'a> {
    daemon: &'a Daemon,
    message: Uuid,
    looked: std::sync::Mutex<Vec<String>>,
    /// Tokens of every completion so far: counted even when the answer
    /// fails or is stopped.
    used: std::sync::Mutex<Usage>,
    /// When the streamed text was last shown.
    shown_at: std::sync::Mutex<Option<tokio::time::Instant>>,
}

/// A streamed answer's text is shown at most this often (Telegram takes
/// about one edit a second in a chat).
const PARTIAL_EVERY: std::time::Duration = std::time::Duration::from_millis(1200);

impl Host for Warden<'_> {
    async fn read(&self, cmd: String, args: Vec<String>) -> Result<String, String> {
        if !self.daemon.take_read_leaving(LEFT_TO_THE_CHAT) {
            return Err("the Worker's reads for these ten minutes are spent".into());
        }
        match warden_client::ask(&self.daemon.worker_socket(), &Request::Read { cmd, args }).await {
            Ok(Response::Result(r)) => {
                let mut text = printable(&r.stdout);
                let err = printable(&r.stderr);
                if !err.trim().is_empty() {
                    text.push_str(&format!("\n[stderr]\n{err}"));
                }
                if r.exit_code != Some(0) {
                    text.push_str(&format!("\n[exit code {:?}]", r.exit_code));
                }
                Ok(text)
            }
            Ok(Response::Refused { reason, .. }) => Err(reason),
            Ok(Response::Error { message }) => Err(message),
            Ok(other) => Err(format!("an odd answer: {other:?}")),
            Err(e) => Err(format!("the Warden could not be asked: {e}")),
        }
    }

    async fn chores(&self) -> Vec<String> {
        match warden_client::ask(&self.daemon.worker_socket(), &Request::Chores).await {
            Ok(Response::Chores { chores }) => chores.into_iter().map(|c| c.name).collect(),
            _ => Vec::new(),
        }
    }

    async fn progress(&self, tools: &[String]) {
        let text = {
            let mut looked = self.looked.lock().unwrap_or_else(|p| p.into_inner());
            looked.extend(tools.iter().map(|t| t.replace('_', " ")));
            format!("Looking into it: {}…", looked.join(", "))
        };
        self.daemon.edit(self.message, text, vec![]).await;
    }

    fn resolve(&self, path: &str) -> Result<String, String> {
        // As the Worker sees it: a path it cannot resolve (missing, or
        // behind a folder closed to it) is not asked about — a link there
        // could lead anywhere, and the Warden's refusal would climb the
        // ladder and name where it leads.
        match std::fs::canonicalize(path) {
            Ok(real) => real
                .to_str()
                .map(String::from)
                .ok_or_else(|| format!("{path} does not resolve to a plain path")),
            Err(e) => Err(format!(
                "{path} cannot be resolved here ({}): ask about a folder above it",
                match e.kind() {
                    std::io::ErrorKind::NotFound => "it does not exist",
                    std::io::ErrorKind::PermissionDenied =>
                        "a folder on the way is closed to the Worker",
                    _ => "it cannot be looked at",
                }
            )),
        }
    }

    fn partial_due(&self) -> bool {
        let now = tokio::time::Instant::now();
        let mut at = self.shown_at.lock().unwrap_or_else(|p| p.into_inner());
        if at.is_some_and(|t| now.duration_since(t) < PARTIAL_EVERY) {
            return false;
        }
        *at = Some(now);
        true
    }

    fn partial(&self, text: &str) {
        if !text.is_empty() {
            self.daemon.try_edit(self.message, format!("{text} …"));
        }
    }

    fn spent(&self, usage: Usage) {
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        used.input = used.input.saturating_add(usage.input);
        used.output = used.output.saturating_add(usage.output);
    }
}

/// Whether `text` looks like a PIN (4 to 12 digits of any script, perhaps
/// split by spaces or punctuation, perhaps after "pin", "my pin is" or
/// "code"): not sent to a third party's model, whatever the chat was
/// waiting for.
pub fn looks_like_pin(text: &str) -> bool {
    const WORDS: [&str; 6] = ["my", "pin", "is", "code", "the", "here"];
    let rest: String = text
        .split_whitespace()
        .filter(|w| {
            let w = w
                .trim_matches(|c: char| !c.is_alphanumeric())
                .to_lowercase();
            !WORDS.contains(&w.as_str())
        })
        .collect();
    let mut digits = 0;
    for c in rest.chars() {
        if c.is_numeric() {
            digits += 1;
        } else if !(c.is_ascii_punctuation() || c.is_whitespace()) {
            return false;
        }
    }
    (4..=12).contains(&digits)
}

/// Takes a message that is not a command: `None` when there is no
/// assistant here; otherwise what to say at once (empty when the answer
/// comes from its own task).
pub fn take(daemon: &Arc<Daemon>, text: &str) -> Option<String> {
    let assistant = daemon.assistant.clone()?;
    if looks_like_pin(text) {
        return Some(PIN_KEPT.into());
    }
    let Some(busy) = assistant.begin() else {
        return Some(STILL_ANSWERING.into());
    };
    let daemon = daemon.clone();
    let text = text.to_string();
    tokio::spawn(async move { question(&daemon, &assistant, busy, &text).await });
    Some(String::new())
}

/// Answers `question` in the chat.
async fn question(daemon: &Daemon, assistant: &Assistant, _busy: Busy, question: &str) {
    // Watched from before the standing is read: a halt after it stops
    // this answer.
    let mut halts = assistant.halts();
    if assistant.is_off() {
        daemon.say(OFF.into(), vec![]).await;
        return;
    }
    let status = match warden_client::ask(&daemon.worker_socket(), &Request::Status).await {
        Ok(Response::Status(st)) => st,
        // The Warden paces the Worker above Normal: nothing goes to the
        // model while it cannot be asked how things stand.
        _ => {
            daemon
                .say(
                    "I cannot tell how things stand with the Warden right now, so I am not asking the assistant; try again in a minute."
                        .into(),
                    vec![],
                )
                .await;
            return;
        }
    };
    if status.ladder_step >= super::events::CUT {
        assistant.wipe();
    }
    if assistant.is_off() {
        daemon.say(OFF.into(), vec![]).await;
        return;
    }
    if status.ladder_step >= super::events::FREEZE {
        daemon
            .say(
                format!(
                    "The assistant is stopped while I am at {} ({}); it answers again once the ladder comes down.",
                    status.ladder_name, status.ladder_step
                ),
                vec![],
            )
            .await;
        return;
    }
    let s = spent(daemon);
    if let Some(budget) = s.budget
        && s.used >= budget
    {
        daemon
            .say(
                format!("Today's AI budget ({budget} tokens) is spent. /ai budget N sets another."),
                vec![],
            )
            .await;
        return;
    }
    let prod = status.prod_mode.starts_with("on");
    let limits = Limits {
        prod_mode: prod,
        tokens_left: s.budget.map(|b| b.saturating_sub(s.used)),
    };
    let model = assistant.model();
    // One message, edited as the answer comes: the tools looked at, then
    // the answer itself.
    let message = daemon.say("Looking into it…".into(), vec![]).await;
    let host = Warden {
        daemon,
        message,
        looked: Default::default(),
        used: Default::default(),
        shown_at: Default::default(),
    };
    let answered = tokio::select! {
        biased;
        _ = halts.changed() => None,
        a = conversation::answer(&model, &host, question, limits) => Some(a),
    };
    drop(model);
    let used = *host.used.lock().unwrap_or_else(|p| p.into_inner());
    count(daemon, used.total());
    let answer = match answered {
        None => {
            daemon.edit(message, STOPPED.into(), vec![]).await;
            return;
        }
        Some(Err(error)) => {
            daemon
                .edit(
                    message,
                    without_links(&format!("The assistant could not answer: {error}.")),
                    vec![],
                )
                .await;
            return;
        }
        Some(Ok(a)) => a,
    };
    let mut text = if answer.text.is_empty() {
        "(no answer)".to_string()
    } else {
        answer.text.clone()
    };
    text.push_str(&format!(
        "\n\n— {} tokens in, {} out",
        answer.usage.input, answer.usage.output
    ));
    if prod {
        text.push_str("; prod mode: I only propose");
    }
    daemon.edit(message, text, vec![]).await;
    for (name, why) in &answer.proposals {
        // A halt since the answer came: nothing more of it.
        if halts.has_changed().unwrap_or(true) {
            return;
        }
        offer(daemon, name, why).await;
    }
}

/// A chore the model proposed, offered and never run from here: its dry
/// run first, then a button the person taps.
async fn offer(daemon: &Daemon, name: &str, why: &str) {
    // Taken out, cut, and taken out again: a cut can make a host of what
    // was not one.
    let cut: String = without_links(why).chars().take(MAX_WHY).collect();
    let why = without_links(&cut);
    daemon
        .say(
            format!("The assistant proposes the chore {name}. Its reason, in its own words: {why}"),
            vec![],
        )
        .await;
    let Some(chore) = super::chat::chore(daemon, name).await else {
        return;
    };
    if chore.cap_unconfirmed {
        super::schedule::ask_for(daemon, &chore).await;
        return;
    }
    let heading = if chore.dry_run_seen {
        format!("Here is what {name} would do now (a dry run, nothing changed):")
    } else {
        format!(
            "Before {name} runs for the first time, here is what it would do (a dry run, nothing changed):"
        )
    };
    if !super::schedule::show_dry_run_headed(daemon, name, &heading).await {
        return;
    }
    if chore.color == "green" {
        // Never run as the schedule would: the Warden's proposal, its own
        // text and buttons, its signed tap.
        if !daemon.take_read() {
            daemon.say(super::chat::BUSY.into(), vec![]).await;
            return;
        }
        super::schedule::propose(
            daemon,
            &Request::Propose {
                chore: name.to_string(),
            },
            name,
        )
        .await;
    } else {
        // Its dry run is seen now: the Warden's proposal (or, in the first
        // seven days, why not yet).
        let seen = aromba_warden_proto::ChoreInfo {
            dry_run_seen: true,
            ..chore
        };
        super::schedule::ask_for(daemon, &seen).await;
    }
}

/// `/ai`, `/ai budget N`, `/ai budget off`.
pub fn budget(daemon: &Daemon, args: &[String]) -> String {
    let mut s = spent(daemon);
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        [] => match s.budget {
            Some(b) => format!("Today: {} of {b} tokens.", s.used),
            None => format!(
                "Today: {} tokens (no budget; /ai budget N sets one).",
                s.used
            ),
        },
        ["budget", "off"] => {
            s.budget = None;
            keep(daemon, &s);
            "No daily budget now.".into()
        }
        ["budget", n] => match n.parse::<u64>() {
            Ok(n) if n > 0 && n <= 100_000_000 => {
                s.budget = Some(n);
                keep(daemon, &s);
                format!("The daily budget is {n} tokens (today so far: {}).", s.used)
            }
            _ => "The budget is a number of tokens, 1 to 100000000: /ai budget 50000".into(),
        },
        _ => {
            "/ai shows today's tokens; /ai budget N sets a daily budget; /ai budget off removes it."
                .into()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::looks_like_pin;

    #[test]
    fn a_pin_looking_message_is_known() {
        for pin in [
            "472913",
            "1234",
            "4729 13",
            "123-456",
            " 000000000000 ",
            "４７２９１３",
            "472.913",
            "472_913",
            "pin 472913",
            "My PIN is: 472913",
        ] {
            assert!(looks_like_pin(pin), "{pin}");
        }
        for not in [
            "123",
            "1234567890123",
            "is nginx ok?",
            "disk 90%",
            "12a4",
            "port 8080?",
            "why is 8080 open",
        ] {
            assert!(!looks_like_pin(not), "{not}");
        }
    }
}
