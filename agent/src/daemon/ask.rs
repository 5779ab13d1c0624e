//! A question in the chat, to the assistant ([`crate::assistant`]): any
//! message that is not a command, when `network.toml` names a model and
//! `secrets.toml` holds its key. The tools are Warden reads, each taken
//! from the Worker's read budget like the chat's own; the answer goes to
//! the chat with its usage in a footer; each chore the model proposed is
//! then offered as `/run` offers it (the dry run first, the Warden's own
//! text and buttons). A daily token budget (`/ai budget N`) is kept in the
//! Worker's home.

use super::Daemon;
use crate::assistant::conversation::{self, Host, without_links};
use crate::warden_client;
use aromba_warden_proto::{Request, Response, printable};
use serde::{Deserialize, Serialize};

const USAGE: &str = "assistant-usage.json";

const OFF: &str = "The assistant is off: its key was wiped when I stepped down to reads only. After `aromba resume`, put a key in secrets.toml and restart the Worker.";

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

/// The Warden, as the conversation's [`Host`]; each round's tools are
/// shown by editing the answer's message in place.
struct Warden<'a> {
    daemon: &'a Daemon,
    message: uuid::Uuid,
    looked: std::sync::Mutex<Vec<String>>,
}

impl Host for Warden<'_> {
    async fn read(&self, cmd: String, args: Vec<String>) -> Result<String, String> {
        if !self.daemon.take_read() {
            return Err("the Worker's read budget for these ten minutes is spent".into());
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
}

/// (prod mode on, the ladder at Cut or above), from the Warden's status;
/// `None` when it cannot be read now (the Warden paces the Worker above
/// Normal): then nothing goes to the model.
async fn standing(daemon: &Daemon) -> Option<(bool, bool)> {
    match warden_client::ask(&daemon.worker_socket(), &Request::Status).await {
        Ok(Response::Status(st)) => Some((
            st.prod_mode.starts_with("on"),
            st.ladder_step >= super::events::CUT,
        )),
        _ => None,
    }
}

/// Answers `question`; `None` when there is no assistant here.
pub async fn question(daemon: &Daemon, question: &str) -> Option<String> {
    let assistant = daemon.assistant.as_ref()?;
    if assistant.is_off() {
        return Some(OFF.into());
    }
    let Some((prod, cut)) = standing(daemon).await else {
        return Some(
            "I cannot tell how things stand with the Warden right now, so I am not asking the assistant; try again in a minute."
                .into(),
        );
    };
    if cut {
        assistant.wipe();
    }
    if assistant.is_off() {
        return Some(OFF.into());
    }
    let mut s = spent(daemon);
    if let Some(budget) = s.budget
        && s.used >= budget
    {
        return Some(format!(
            "Today's AI budget ({budget} tokens) is spent. /ai budget N sets another."
        ));
    }
    let model = assistant.model();
    // One message, edited as the answer comes: the tools looked at, then
    // the answer itself.
    let message = daemon.say("Looking into it…".into(), vec![]).await;
    let host = Warden {
        daemon,
        message,
        looked: Default::default(),
    };
    let answered = conversation::answer(&model, &host, question, prod).await;
    let answer = match answered {
        Ok(a) => a,
        Err(e) => {
            daemon
                .edit(
                    message,
                    format!("The assistant could not answer: {e}"),
                    vec![],
                )
                .await;
            return Some(String::new());
        }
    };
    s.used += answer.usage.input + answer.usage.output;
    keep(daemon, &s);
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
    if text.chars().count() <= super::MESSAGE_CHARS {
        daemon.edit(message, text, vec![]).await;
    } else {
        daemon
            .edit(message, "Here is what I found:".into(), vec![])
            .await;
        daemon.say(text, vec![]).await;
    }
    for (name, why) in &answer.proposals {
        daemon
            .say(
                format!("I propose the chore {name}: {}", without_links(why)),
                vec![],
            )
            .await;
        super::chat::run(daemon, Some(name)).await;
    }
    Some(String::new())
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
