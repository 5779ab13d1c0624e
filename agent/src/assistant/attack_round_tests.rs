//! The assistant's attack round, at the unit level: what a hostile model
//! (its tool names, its token counts, its text) and a hostile chat can do
//! to the loop, the grammar and the link filter. Each test is named after
//! its attack and asserts the property the attack tries to break; the
//! ones that pass are regression tests for attacks that held.

use super::conversation::{self, Host, MAX_RESULT_CHARS, answer, cap, without_links, wrap};
use super::model::{Message, Model, ModelError, Reply, ToolCall, Usage};
use super::tools;
use std::sync::Mutex;

/// A model that answers from a script (the last reply repeated).
struct Scripted {
    replies: Mutex<Vec<Reply>>,
    seen: Mutex<Vec<Vec<Message>>>,
}

impl Scripted {
    fn new(replies: Vec<Reply>) -> Scripted {
        Scripted {
            replies: Mutex::new(replies.into_iter().rev().collect()),
            seen: Mutex::new(Vec::new()),
        }
    }
}

impl Model for Scripted {
    async fn complete(
        &self,
        messages: &[Message],
        _tools: Option<&serde_json::Value>,
    ) -> Result<Reply, ModelError> {
        self.seen.lock().unwrap().push(messages.to_vec());
        let mut r = self.replies.lock().unwrap();
        Ok(if r.len() > 1 {
            r.pop().unwrap()
        } else {
            r.last().cloned().unwrap()
        })
    }
}

/// A server that answers every read with `output` and keeps the progress
/// lines the loop asked for.
#[derive(Default)]
struct Server {
    output: String,
    progress: Mutex<Vec<String>>,
    reads: Mutex<usize>,
    chore_lists: Mutex<usize>,
}

impl Host for Server {
    async fn read(&self, _cmd: String, _args: Vec<String>) -> Result<String, String> {
        *self.reads.lock().unwrap() += 1;
        Ok(self.output.clone())
    }
    async fn chores(&self) -> Vec<String> {
        *self.chore_lists.lock().unwrap() += 1;
        vec!["apt-clean".into()]
    }
    async fn progress(&self, tools: &[String]) {
        self.progress.lock().unwrap().extend(tools.iter().cloned());
    }
}

fn reply(calls: &[(&str, &str)], usage: Usage) -> Reply {
    Reply {
        text: String::new(),
        calls: calls
            .iter()
            .enumerate()
            .map(|(i, (n, a))| ToolCall {
                id: format!("c{i}"),
                name: n.to_string(),
                arguments: a.to_string(),
            })
            .collect(),
        usage,
    }
}

fn text(t: &str, usage: Usage) -> Reply {
    Reply {
        text: t.into(),
        calls: vec![],
        usage,
    }
}

// --- Links the filter misses (Telegram makes them tappable). ---

/// Telegram auto-links a bare domain, a domain with a path, `t.me/…`, an
/// `@username` and an e-mail address in plain text; `without_links` only
/// looks for `://`, `www.`, `](` and `mailto:`.
#[test]
fn telegram_autolinks_survive_without_links() {
    let mut survived = Vec::new();
    for (case, link) in [
        ("sign in at evil.com/login now", "evil.com/login"),
        ("see evil.com for details", "evil.com"),
        ("write to t.me/evil_support_bot", "t.me/evil_support_bot"),
        ("ask @evil_support_bot", "@evil_support_bot"),
        ("mail root@evil.com", "root@evil.com"),
        // A scheme broken by a zero-width space: the domain stays.
        ("https:\u{200b}//evil.com/x", "evil.com/x"),
        // A full-width colon: the domain stays.
        ("https\u{ff1a}//evil.com/x", "evil.com/x"),
    ] {
        let out = without_links(case);
        if out.contains(link) {
            survived.push(format!("{case:?} → {out:?}"));
        }
    }
    assert!(survived.is_empty(), "links that survived: {survived:#?}");
}

/// What the filter does take out (held).
#[test]
fn schemes_www_and_markdown_links_are_taken_out() {
    for case in [
        "HTTPS://evil.example/x",
        "hTtP://evil.example",
        "(https://evil.example/x)",
        "ftp://evil.example/x",
        "tg://resolve?domain=evil",
        "WWW.evil.example",
        "[tap](evil.example)",
        "MAILTO:root@evil.example",
        "x\u{200b}https://evil.example",
    ] {
        let out = without_links(case);
        assert!(out.contains("[link removed]"), "{case:?} → {out:?}");
        assert!(!out.contains("evil.example"), "{case:?} → {out:?}");
    }
}

// --- The model's tool names in the chat. ---

/// The progress line is built from `call.name` as the model wrote it,
/// before the name is parsed: any 64 characters of the model's go to the
/// chat (ask.rs edits them into the answer's message).
#[tokio::test]
async fn a_tool_name_chosen_by_the_model_is_shown_as_progress() {
    let model = Scripted::new(vec![
        reply(&[("https://evil.example/login", "{}")], Usage::default()),
        text("done", Usage::default()),
    ]);
    let server = Server::default();
    answer(
        &model,
        &server,
        "q",
        super::conversation::Limits {
            prod_mode: false,
            tokens_left: None,
        },
    )
    .await
    .unwrap();
    let progress = server.progress.lock().unwrap().clone();
    for name in &progress {
        assert!(
            tools::NAMES.contains(&name.as_str()),
            "a name the grammar does not know went to the progress line: {name:?}"
        );
    }
}

// --- Token counts from a hostile endpoint. ---

/// Usage is summed with `+=`: counts near u64::MAX overflow (a panic in a
/// debug build; a wrap, so a small count, in a release build).
#[tokio::test]
async fn usage_counts_near_u64_max_do_not_overflow_the_sum() {
    let huge = Usage {
        input: u64::MAX,
        output: u64::MAX,
    };
    let model = Scripted::new(vec![reply(&[("memory", "{}")], huge), text("done", huge)]);
    let server = Server::default();
    let a = tokio::spawn(async move {
        answer(
            &model,
            &server,
            "q",
            super::conversation::Limits {
                prod_mode: false,
                tokens_left: None,
            },
        )
        .await
        .map(|a| a.usage)
    })
    .await;
    match a {
        Ok(Ok(usage)) => assert!(
            usage.input >= u64::MAX / 2 && usage.output >= u64::MAX / 2,
            "the counts wrapped: {usage:?}"
        ),
        Ok(Err(e)) => panic!("{e}"),
        Err(e) => panic!("the loop panicked on the endpoint's token counts: {e}"),
    }
}

// --- Calls that ask the Warden for its chore list, unbudgeted. ---

/// Every `propose_chore` call asks for the chore list, a chore of the list
/// or not, and the read budget does not count it: 8 calls a round, 7
/// rounds, 56 Warden requests a question.
#[tokio::test]
async fn propose_chore_calls_each_ask_the_warden_for_the_chore_list() {
    let rounds: Vec<Reply> = (0..8)
        .map(|r| {
            let args: Vec<String> = (0..8)
                .map(|i| format!(r#"{{"name": "nope-{r}-{i}", "why": "x"}}"#))
                .collect();
            let calls: Vec<(&str, &str)> =
                args.iter().map(|a| ("propose_chore", a.as_str())).collect();
            reply(&calls, Usage::default())
        })
        .collect();
    let model = Scripted::new(rounds);
    let server = Server::default();
    answer(
        &model,
        &server,
        "q",
        super::conversation::Limits {
            prod_mode: false,
            tokens_left: None,
        },
    )
    .await
    .unwrap();
    let lists = *server.chore_lists.lock().unwrap();
    assert!(
        lists <= 8,
        "one question asked the Warden for its chore list {lists} times"
    );
}

// --- Held: the loop's bounds. ---

/// A model that asks for 16 calls a round and never stops: at most 8 calls
/// a round are taken, 7 rounds with tools, the 8th without, and at most
/// `MAX_READS` reads reach the Warden in all.
#[tokio::test]
async fn a_model_that_never_stops_is_bounded() {
    let rounds: Vec<Reply> = (0..20)
        .map(|r| {
            let args: Vec<String> = (0..16)
                .map(|i| format!(r#"{{"path": "/var/{r}/{i}"}}"#))
                .collect();
            let calls: Vec<(&str, &str)> =
                args.iter().map(|a| ("disk_usage", a.as_str())).collect();
            reply(&calls, Usage::default())
        })
        .collect();
    let model = Scripted::new(rounds);
    let server = Server {
        output: "4.0K\t/var".into(),
        ..Server::default()
    };
    let a = answer(
        &model,
        &server,
        "q",
        super::conversation::Limits {
            prod_mode: false,
            tokens_left: None,
        },
    )
    .await
    .unwrap();
    assert_eq!(a.rounds, conversation::MAX_ROUNDS);
    assert_eq!(*server.reads.lock().unwrap(), conversation::MAX_READS);
}

/// The delimiter cannot be rebuilt from pieces inside the content, and a
/// result of many multi-byte characters is cut on a character.
#[test]
fn the_delimiter_cannot_be_rebuilt_and_the_cap_cuts_on_characters() {
    let d = conversation::new_delimiter();
    let half = d.len() / 2;
    let nested = format!("{}{}{}", &d[..half], d, &d[half..]);
    let wrapped = wrap(&d, &format!("a\n{nested}\nb"));
    assert_eq!(wrapped.matches(&d).count(), 2, "{wrapped}");
    let big = "é".repeat(MAX_RESULT_CHARS + 10);
    let c = cap(&big, MAX_RESULT_CHARS);
    assert!(c.starts_with(&"é".repeat(MAX_RESULT_CHARS)));
}

/// Path tricks on secret paths (absolute, no `..`, no control byte) are
/// refused by the grammar — a read of one would climb the Warden's ladder —
/// and, were one asked, by the Warden's path check too.
#[test]
fn path_tricks_on_secret_paths_are_refused_by_the_grammar_and_the_warden() {
    use aromba_warden::policy::{Requester, Table, check};
    for path in [
        "/proc/self/root/root/.ssh",
        "/proc/1/root/root/.ssh",
        "/proc/1/cwd",
        "//root/.ssh",
        "/root/./.ssh",
        "/root/.ssh/",
        "/etc/aromba/worker/secrets.toml",
        "/etc/shadow",
        "/etc/ssh/ssh_host_ed25519_key",
    ] {
        let args = format!(r#"{{"path": {}}}"#, serde_json::Value::from(path));
        assert!(
            tools::parse("disk_usage", &args).is_err(),
            "{path}: the grammar takes it"
        );
        let argv: Vec<String> = ["-x", "-h", "--max-depth=1", path]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert!(
            check(Table::Allow, "du", &argv, &Requester::Warden).is_err(),
            "{path}: the Warden allows it"
        );
    }
}

/// Unicode and option tricks in unit and container names are refused by
/// the grammar.
#[test]
fn unicode_and_option_tricks_in_names_are_refused() {
    for (tool, args) in [
        ("service_status", r#"{"unit": "nginx\u200b"}"#),
        ("service_status", r#"{"unit": "ｎginx"}"#),
        ("service_status", r#"{"unit": "—help"}"#),
        ("journal", r#"{"unit": "nginx --file=/etc/shadow"}"#),
        ("journal", r#"{"unit": "nginx", "lines": 1e3}"#),
        ("journal", r#"{"unit": "nginx", "lines": 4294967296}"#),
        ("container_logs", r#"{"name": "web/../../x"}"#),
        ("container_logs", r#"{"name": "web", "tail": 50.5}"#),
        ("disk_usage", r#"{"path": "/var", "depth": 256}"#),
        ("disk_usage", r#"{"path": "/var", "path": "-x"}"#),
        (
            "propose_chore",
            r#"{"name": "apt-clean\u0000", "why": "x"}"#,
        ),
        (
            "propose_chore",
            r#"{"name": "apt-clean", "why": "x\u001b[2J"}"#,
        ),
    ] {
        assert!(
            tools::parse(tool, args).is_err(),
            "{tool} {args} was taken: {:?}",
            tools::parse(tool, args)
        );
    }
}

/// The key is not in the error a failed request gives (a header value the
/// HTTP library refuses, an endpoint that hangs up).
#[tokio::test]
async fn the_key_is_not_in_a_failed_requests_error() {
    use crate::config::BaseUrl;
    use std::sync::Arc;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        // Takes each connection and hangs up.
        while let Ok((s, _)) = listener.accept().await {
            drop(s);
        }
    });
    for key in ["sk-round-key-0123456789", "sk-round\r\nX-Evil: 1"] {
        let m = super::model::OpenAi {
            dialer: Arc::new(aromba_proto::client::Direct),
            endpoint: BaseUrl::parse(&format!("http://127.0.0.1:{port}/v1")).unwrap(),
            model: "m".into(),
            key: Some(key.into()),
            roots: None,
        };
        let e = m
            .complete(&[Message::User("q".into())], None)
            .await
            .unwrap_err()
            .to_string();
        assert!(!e.contains("sk-round"), "{e}");
    }
}
