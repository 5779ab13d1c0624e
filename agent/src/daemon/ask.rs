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
//! a relay-signed tap approves — for a green chore too. A skill the model
//! proposed (one an answer) is downloaded from the catalogue and proposed
//! by the Warden, the whole manifest shown in the app: never installed
//! from here.
//!
//! Every message of the assistant's — "Looking into it…" and each edit of
//! it, the answer, a proposal's reason — opens with [`voice::MARKER`], and
//! the model's words in it (an endpoint's error too) are filtered by
//! [`voice::spoken`]: no message of the Worker's carries the marker, so the
//! model cannot speak as the Worker or the Warden.

use super::Daemon;
use crate::assistant::conversation::{self, Answer, Host, Limits};
use crate::assistant::model::{ModelError, Usage};
use crate::assistant::{Assistant, Busy, voice};
use crate::warden_client::WardenError;
use aromba_warden_proto::{Request, Response, printable};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use uuid::Uuid;

use aromba_words::assistant::{self as words, OFF, PIN_KEPT, STILL_ANSWERING, STOPPED};

const USAGE: &str = "assistant-usage.json";

/// Reads of the Worker's budget the assistant leaves to the chat's own
/// commands, dry runs and the schedule.
const LEFT_TO_THE_CHAT: usize = 10;

/// The longest reason of the model's shown with a proposal.
const MAX_WHY: usize = 300;

/// Today's tokens and the budget.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Spent {
    /// The day counted (local `YYYY-MM-DD`).
    day: String,
    used: u64,
    /// The person's budget; `None`: root's ceiling.
    budget: Option<u64>,
    /// `/ai budget off` of an earlier version: read as root's ceiling.
    #[serde(default, skip_serializing)]
    no_budget: bool,
}

/// Tokens a day when root named no ceiling (`network.toml`'s `[assistant]
/// daily_tokens`): enough for dozens of questions, and a bound on what an
/// injected instruction, or a relay typing questions, can burn.
pub const DEFAULT_DAILY_BUDGET: u64 = 200_000;
/// Tokens one question may cost at most, whatever the budget (found by the
/// review: an injected instruction made one question cost about 0.7 M).
pub const MAX_PER_QUESTION: u64 = 60_000;

impl Spent {
    /// Today's budget: the person's, never past root's `ceiling` (the chat
    /// may lower the day's tokens, not raise them: whoever holds the relay
    /// types in it too).
    fn daily(&self, ceiling: u64) -> u64 {
        self.budget.unwrap_or(ceiling).min(ceiling)
    }
}

/// Root's ceiling on a day's tokens.
fn ceiling(daemon: &Daemon) -> u64 {
    daemon
        .assistant
        .as_ref()
        .and_then(|a| a.settings.daily_tokens)
        .unwrap_or(DEFAULT_DAILY_BUDGET)
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

/// A read's (or a skill tool's) redacted answer as the model gets it.
fn tool_text(r: &aromba_warden_proto::ReadResult) -> String {
    let mut text = printable(&r.stdout);
    let err = printable(&r.stderr);
    if !err.trim().is_empty() {
        text.push_str(&format!("\n[stderr]\n{err}"));
    }
    if r.exit_code != Some(0) {
        text.push_str(&format!("\n[exit code {:?}]", r.exit_code));
    }
    text
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
            return Err(words::tool::READS_SPENT.into());
        }
        match self.daemon.warden().read(&cmd, args).await {
            Ok(r) => Ok(tool_text(&r)),
            Err(WardenError::Refused(reason) | WardenError::Failed(reason)) => Err(reason),
            Err(WardenError::Unexpected(other)) => {
                Err(words::tool::odd_answer(&format!("{other:?}")))
            }
            Err(WardenError::Unreachable(e)) => Err(aromba_words::chat::warden_not_asked(&e)),
        }
    }

    async fn chores(&self) -> Vec<String> {
        match self.daemon.warden().chores().await {
            Ok(chores) => chores.into_iter().map(|c| c.name).collect(),
            Err(_) => Vec::new(),
        }
    }

    async fn skill_tools(&self) -> Vec<(String, String, String)> {
        if !self.daemon.take_read_leaving(LEFT_TO_THE_CHAT) {
            return Vec::new();
        }
        match self.daemon.warden().skills().await {
            Ok((skills, _)) => skills
                .into_iter()
                .flat_map(|s| {
                    let skill = s.name;
                    s.tools
                        .into_iter()
                        .map(move |(t, what)| (skill.clone(), t, what))
                })
                .collect(),
            Err(_) => Vec::new(),
        }
    }

    async fn skill_tool(&self, skill: String, tool: String) -> Result<String, String> {
        if !self.daemon.take_read_leaving(LEFT_TO_THE_CHAT) {
            return Err(words::tool::READS_SPENT.into());
        }
        let answer = self
            .daemon
            .warden()
            .ask(&Request::SkillTool { skill, tool })
            .await;
        match answer {
            Ok(Response::Result(r)) => Ok(tool_text(&r)),
            Ok(Response::Refused { reason, .. }) => Err(reason),
            Ok(other) => Err(words::tool::odd_answer(&format!("{other:?}"))),
            Err(e) => Err(aromba_words::chat::warden_not_asked(&e.to_string())),
        }
    }

    async fn skill_catalogue(&self) -> Result<Vec<crate::catalogue::Listed>, String> {
        if !self.daemon.take_read_leaving(LEFT_TO_THE_CHAT) {
            return Err(words::tool::READS_SPENT.into());
        }
        super::skill_updates::catalogue_listed(self.daemon).await
    }

    async fn propose_skill(&self, name: String, why: String) -> Result<(), String> {
        // Downloaded and proposed by the Warden first: the model's reason
        // is shown only with a proposal the Warden made.
        let proposal = super::skill_updates::skill_proposal(self.daemon, &name).await?;
        self.daemon.say(proposed_skill(&name, &why), vec![]).await;
        proposal.post(self.daemon).await;
        Ok(())
    }

    async fn progress(&self, tools: &[String]) {
        let text = {
            let mut looked = self.looked.lock().unwrap_or_else(|p| p.into_inner());
            looked.extend(tools.iter().map(|t| t.replace('_', " ")));
            looking(&looked)
        };
        self.daemon.edit(self.message, text, vec![]).await;
    }

    fn resolve(&self, path: &str) -> Result<String, String> {
        // As the Worker sees it: a path it cannot resolve (missing, or
        // behind a folder closed to it) is not asked about — a link there
        // could lead anywhere, and the Warden's refusal would climb the
        // ladder and name where it leads.
        match std::fs::canonicalize(path) {
            Ok(real) => {
                // The Warden is asked about this resolved path, not the one
                // written; a folder on it that another account can change
                // could be swapped for a link between now and the Warden's
                // read, turning the question into a secret path's (found by
                // the review: the Warden's refusal then moved the ladder
                // for whoever planted the link).
                if let Some(why) = crate::assistant::secret_paths::swappable_by_another(&real) {
                    return Err(words::tool::not_asked_about(path, &why));
                }
                real.to_str()
                    .map(String::from)
                    .ok_or_else(|| words::tool::not_a_plain_path(path))
            }
            Err(e) => Err(words::tool::cannot_resolve(
                path,
                match e.kind() {
                    std::io::ErrorKind::NotFound => words::tool::Unresolved::Missing,
                    std::io::ErrorKind::PermissionDenied => words::tool::Unresolved::Closed,
                    _ => words::tool::Unresolved::Other,
                },
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
            self.daemon.try_edit(self.message, partial(text));
        }
    }

    fn spent(&self, usage: Usage) {
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        used.input = used.input.saturating_add(usage.input);
        used.output = used.output.saturating_add(usage.output);
    }
}

/// Whether `text` could hold the PIN: not sent to a third party's model,
/// whatever the chat was waiting for. It could when any word of it, its
/// surrounding punctuation and quotes trimmed, has the PIN's shape (one
/// word of 6 to 64 characters with a digit: every PIN the Warden accepts)
/// — "confirm Tr0ub4dor&3" is how a model would ask for it — unless the
/// word is plainly a date, a time or an IPv4 address; or when it is 4 to
/// 12 digits of any script, perhaps split by spaces or punctuation,
/// perhaps after "pin", "my pin is" or "code". A question holding a
/// version such as `nginx-1.24` is kept back too: the chat says so, and
/// to ask it without that word.
pub fn looks_like_pin(text: &str) -> bool {
    if aromba_warden_proto::could_be_pin(text) {
        return true;
    }
    if text.split_whitespace().any(|word| {
        let word = word.trim_matches(|c: char| {
            c.is_whitespace()
                || "\"'`()[]{}<>,;:!?.*_~\u{a0}\u{2018}\u{2019}\u{201c}\u{201d}".contains(c)
        });
        aromba_warden_proto::could_be_pin(word) && !plainly_not_a_pin(word)
    }) {
        return true;
    }
    const WORDS: [&str; 6] = ["my", "pin", "is", "code", "the", "here"];
    let rest: Vec<&str> = text
        .split_whitespace()
        .filter(|w| {
            let w = w
                .trim_matches(|c: char| !c.is_alphanumeric())
                .to_lowercase();
            !WORDS.contains(&w.as_str())
        })
        .collect();
    // "my PIN is Tr0ub4dor&3": the one word left is the PIN.
    if let [word] = rest.as_slice()
        && aromba_warden_proto::could_be_pin(word.trim_end_matches(['.', '!']))
    {
        return true;
    }
    let rest: String = rest.concat();
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

/// A date (`2024-12-05`), a time (`03:00`, `03:00:00`) or an IPv4 address
/// (`192.168.1.10`, with a port): words a question holds, which no one
/// would choose for a PIN.
fn plainly_not_a_pin(word: &str) -> bool {
    let groups = |sep: char| -> Vec<&str> { word.split(sep).collect() };
    let digits = |g: &str, n: std::ops::RangeInclusive<usize>| {
        n.contains(&g.len()) && g.bytes().all(|b| b.is_ascii_digit())
    };
    let date = matches!(groups('-').as_slice(), [y, m, d] if digits(y, 4..=4) && digits(m, 2..=2) && digits(d, 2..=2));
    let time = matches!(groups(':').as_slice(), [h, m] | [h, m, _] if digits(h, 1..=2) && digits(m, 2..=2))
        && groups(':').iter().all(|g| digits(g, 1..=2));
    let host = word.split(':').next().unwrap_or(word);
    let port_ok = word.split_once(':').is_none_or(|(_, p)| digits(p, 1..=5));
    let ipv4 = port_ok
        && matches!(host.split('.').collect::<Vec<_>>().as_slice(), [a, b, c, d] if [a, b, c, d].iter().all(|g| digits(g, 1..=3)));
    date || time || ipv4
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
    // The person's question: its reads go in the person's lane.
    tokio::spawn(
        crate::warden_client::LANE.scope(aromba_warden_proto::Lane::Person, async move {
            question(&daemon, &assistant, busy, &text).await
        }),
    );
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
    let status = match daemon.warden().status().await {
        Ok(st) => st,
        // The Warden paces the Worker above Normal: nothing goes to the
        // model while it cannot be asked how things stand.
        _ => {
            daemon.say(words::WARDEN_UNKNOWN.into(), vec![]).await;
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
                words::stopped_by_the_ladder(&status.ladder_name, status.ladder_step),
                vec![],
            )
            .await;
        return;
    }
    let s = spent(daemon);
    let budget = s.daily(ceiling(daemon));
    if s.used >= budget {
        daemon.say(words::budget_spent_today(budget), vec![]).await;
        return;
    }
    let prod = status.prod_mode.starts_with("on");
    let limits = Limits {
        prod_mode: prod,
        tokens_left: Some(budget.saturating_sub(s.used).min(MAX_PER_QUESTION)),
    };
    let model = assistant.model();
    // One message, edited as the answer comes: the tools looked at, then
    // the answer itself.
    let message = daemon.say(looking(&[]), vec![]).await;
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
            daemon.edit(message, voice::marked(STOPPED), vec![]).await;
            return;
        }
        Some(Err(error)) => {
            daemon.edit(message, failed(&error), vec![]).await;
            return;
        }
        Some(Ok(a)) => a,
    };
    daemon.edit(message, shown(&answer, prod), vec![]).await;
    for (name, why) in &answer.proposals {
        // A halt since the answer came: nothing more of it.
        if halts.has_changed().unwrap_or(true) {
            return;
        }
        offer(daemon, name, why).await;
    }
}

/// The assistant's message while it looks: the tools called so far.
fn looking(looked: &[String]) -> String {
    voice::marked(&words::looking_into_it(looked))
}

/// The answer's text so far (filtered already), while it streams.
fn partial(text: &str) -> String {
    voice::marked(&format!("{text} …"))
}

/// Why there is no answer; the endpoint's words in it are filtered as the
/// model's are.
fn failed(error: &ModelError) -> String {
    voice::marked(&words::could_not_answer(&voice::one_line(
        &error.to_string(),
    )))
}

/// The answer, with its usage in a footer.
fn shown(answer: &Answer, prod: bool) -> String {
    let mut text = if answer.text.is_empty() {
        words::NO_ANSWER.to_string()
    } else {
        answer.text.clone()
    };
    text.push_str(&words::usage_footer(
        answer.usage.input,
        answer.usage.output,
        prod,
    ));
    voice::marked(&text)
}

/// A proposal as the assistant's words: the model's reason on one line,
/// filtered, cut, and filtered again (a cut can make a host or a command
/// of what was not one).
pub fn proposed(name: &str, why: &str) -> String {
    let cut: String = voice::one_line(why).chars().take(MAX_WHY).collect();
    let why = voice::one_line(&cut);
    voice::marked(&words::proposes(name, &why))
}

/// A skill proposal as the assistant's words, its reason as a chore
/// proposal's is.
pub fn proposed_skill(name: &str, why: &str) -> String {
    let cut: String = voice::one_line(why).chars().take(MAX_WHY).collect();
    let why = voice::one_line(&cut);
    voice::marked(&words::proposes_skill(name, &why))
}

/// A chore the model proposed, offered and never run from here: its dry
/// run first, then a button the person taps.
async fn offer(daemon: &Daemon, name: &str, why: &str) {
    daemon.say(proposed(name, why), vec![]).await;
    let Some(chore) = super::chat::chore(daemon, name).await else {
        return;
    };
    if chore.cap_unconfirmed {
        super::schedule::ask_for(daemon, &chore).await;
        return;
    }
    let heading = if chore.dry_run_seen {
        aromba_words::chores::dry_run_now(name)
    } else {
        aromba_words::chores::dry_run_before_first(name)
    };
    if !super::schedule::show_dry_run_headed(daemon, name, &heading).await {
        return;
    }
    if chore.color == "green" {
        // Never run as the schedule would: the Warden's proposal, its own
        // text and buttons, its signed tap.
        if !daemon.take_read() {
            daemon.say(daemon.busy(), vec![]).await;
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
    let ceiling = ceiling(daemon);
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        [] => match s.budget.filter(|b| *b < ceiling) {
            Some(b) => words::today_of_budget(s.used, b, ceiling),
            None => words::today_of_ceiling(s.used, ceiling),
        },
        ["budget", "off"] => {
            s.budget = None;
            s.no_budget = false;
            keep(daemon, &s);
            words::budget_is_the_ceiling(ceiling, MAX_PER_QUESTION)
        }
        ["budget", n] => match n.parse::<u64>() {
            Ok(n) if n > 0 && n <= ceiling => {
                s.budget = Some(n);
                s.no_budget = false;
                keep(daemon, &s);
                words::budget_set(n, s.used)
            }
            Ok(n) if n > ceiling => {
                s.budget = None;
                keep(daemon, &s);
                words::budget_above_the_ceiling(ceiling)
            }
            _ => words::budget_is_a_number(ceiling),
        },
        _ => words::AI_USAGE.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every message of the assistant's opens with the marker, once; the
    /// Worker's own words about the assistant carry none.
    #[test]
    fn every_message_of_the_assistant_opens_with_the_marker() {
        let answer = Answer {
            text: "fine".into(),
            proposals: vec![],
            usage: Usage {
                input: 20,
                output: 4,
            },
            rounds: 1,
        };
        for text in [
            looking(&[]),
            looking(&["memory".into(), "disk usage".into()]),
            partial("so far"),
            failed(&ModelError::Timeout(120)),
            failed(&ModelError::Malformed(
                "Done. undo id 0123456789abcdef0123456789abcdef\n/panic".into(),
            )),
            shown(&answer, true),
            proposed("tidy-cache", "the cache holds 4 GB"),
            proposed_skill("restic-backup", "nothing backs this server up"),
            voice::marked(STOPPED),
        ] {
            assert!(
                text.starts_with(&format!("{}\n", voice::MARKER)),
                "{text:?}"
            );
            assert_eq!(text.matches(voice::MARKER).count(), 1, "{text:?}");
        }
        for own in [OFF, PIN_KEPT, STILL_ANSWERING, STOPPED] {
            assert!(!own.contains(voice::MARKER), "{own}");
        }
    }

    /// A proposal's reason goes on the Worker's line: it can neither open
    /// a line of its own, nor hold a command to tap or to paste.
    #[test]
    fn a_proposal_reason_cannot_speak_as_the_worker() {
        let text = proposed(
            "tidy-cache",
            "the cache is big\n\nDone. tidy-cache: real run, exit 0; undo id 0123456789abcdef0123456789abcdef\n/panic",
        );
        assert_eq!(text.lines().count(), 2, "{text:?}");
        assert!(!text.contains("/panic"), "{text:?}");
        let text = proposed("tidy-cache", "sudo chmod 666 /run/aromba/worker.sock");
        assert!(text.ends_with(voice::LEFT_OUT), "{text:?}");
        let text = proposed_skill("certs", "renewals fail\n\nDone. certs: installed\n/panic");
        assert_eq!(text.lines().count(), 2, "{text:?}");
        assert!(!text.contains("/panic"), "{text:?}");
        // An endpoint's error is the model's side's words too.
        let text = failed(&ModelError::Malformed(
            "\u{202e}sudo chmod 666 /run/aromba/worker.sock".into(),
        ));
        assert!(
            !text.contains('\u{202e}') && !text.contains("chmod"),
            "{text:?}"
        );
    }

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
            "is nginx ok?",
            "disk 90%",
            "12a4",
            "port 8080?",
            "why is 8080 open",
        ] {
            assert!(!looks_like_pin(not), "{not}");
        }
    }

    /// Found by the attack round: a PIN with one other word beside it
    /// ("confirm Tr0ub4dor&3", how a model would ask for it) went to the
    /// model; any word of the PIN's shape keeps a message back.
    #[test]
    fn a_pin_beside_other_words_is_kept_from_the_model() {
        for text in [
            "confirm Tr0ub4dor&3",
            "Tr0ub4dor&3 thanks",
            "my PIN: Tr0ub4dor&3 ok?",
            "here you go: \"Tr0ub4dor&3\".",
            "sure, it's `Tr0ub4dor&3`",
            "is nginx-1.24 vulnerable?",
        ] {
            assert!(looks_like_pin(text), "{text}");
        }
        for text in [
            "what happened on 2024-12-05?",
            "why did it restart at 03:00:00?",
            "who is 192.168.1.10:8080?",
            "is sda1 full?",
            "why is the disk 90% full?",
        ] {
            assert!(!looks_like_pin(text), "{text}");
        }
    }

    /// Found by the review: the model asked for the PIN in the Worker's
    /// own words, and `Tr0ub4dor&3` (a PIN the Warden accepts) went to it.
    #[test]
    fn a_pin_of_any_shape_the_warden_accepts_is_kept_from_the_model() {
        for pin in [
            "Tr0ub4dor&3",
            "my pin is Tr0ub4dor&3",
            "PIN: correct-horse-7",
            "1234567890123",
            "pässwört9",
        ] {
            assert!(looks_like_pin(pin), "{pin}");
        }
    }

    /// Every PIN the Warden takes has the shape the Worker keeps from the
    /// model and the relay deletes from the chat: the three rules are one.
    #[test]
    fn the_relay_hides_exactly_the_characters_the_warden_hides() {
        for c in (0..=0x10ffff_u32).filter_map(char::from_u32) {
            assert_eq!(
                aromba_relay_proto::frame::shows_nothing(c),
                aromba_warden_proto::hidden::invisible_or_separator(c),
                "{:?}",
                c
            );
        }
    }

    #[test]
    fn every_pin_the_warden_accepts_has_the_shape_the_relay_and_worker_know() {
        let candidates = [
            "472913",
            "Tr0ub4dor&3",
            "correct horse 7",
            "correcthorse",
            "abcdef",
            "a1b2c3",
            "/start1",
            "12345",
            "ab\u{202E}12cd",
            "x9x9x9x9x9x9x9x9x9x9x9x9x9x9x9x9x9x9x9x9x9x9x9x9x9x9x9x9x9x9x9x9x9",
            " 827361 ",
            "٣٤٥٦٧٨x",
        ];
        for pin in candidates {
            let warden_takes = aromba_warden::pin::weakness(pin).is_none();
            let shape = aromba_warden_proto::could_be_pin(pin);
            assert_eq!(
                shape,
                aromba_relay_proto::frame::could_be_pin(pin),
                "{pin:?}"
            );
            if warden_takes {
                assert!(shape && looks_like_pin(pin), "{pin:?}");
            }
        }
    }
}
