//! The assistant's second attack round: streamed answers from a hostile
//! endpoint, halts in the middle of a stream, token counting of streams,
//! links in what the chat shows, and a read the grammar lets through that
//! the Warden judges secret — against the real Worker, a real Warden, a
//! real relay with the fake Bot API. Each test is named after its attack
//! and asserts the property the attack tries to break; the breaks it found
//! are fixed, and every test here keeps its attack out.
//!
//! The fake model here streams each answer as the script says (status,
//! content type, pieces each after a delay), and records when each request
//! came, the Authorization it carried, and when the Worker closed a stream
//! under way.

mod paired;
#[path = "../../relay/tests/support/mod.rs"]
mod relay_support;
mod support;

use paired::{CHAT, Paired, Setup, paired_with};
use serde_json::{Value, json};
use sqlx::PgPool;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::{TestWarden, account};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const KEY: &str = "sk-test-assistant-key-0123456789";

/// The line every message of the assistant's opens with (the Worker's
/// `assistant::voice::MARKER`, then a line feed).
const MARKER: &str = "🤖 Assistant (AI, may be wrong):\n";

/// A message's text after the assistant's marker (all of it when it has
/// none: a message of the Worker's own).
fn said(t: &str) -> &str {
    t.strip_prefix(MARKER).unwrap_or(t)
}

/// One request the fake model got.
#[derive(Clone, Debug)]
struct Asked {
    at: Instant,
    authorization: String,
    body: Value,
    /// When a write of the answer failed: the Worker had closed it.
    closed_at: Arc<Mutex<Option<Instant>>>,
}

/// What the fake model answers: the pieces of a body, each written after
/// its delay.
struct Streamed {
    content_type: &'static str,
    pieces: Vec<(String, Duration)>,
}

type Script = Arc<dyn Fn(usize, &Value) -> Streamed + Send + Sync>;

struct FakeModel {
    url: String,
    asked: Arc<Mutex<Vec<Asked>>>,
}

impl FakeModel {
    fn asked(&self) -> Vec<Asked> {
        self.asked.lock().expect("the log").clone()
    }
}

fn event(v: Value) -> String {
    format!("data: {v}\n\n")
}

fn text_event(t: &str) -> String {
    event(json!({"choices": [{"delta": {"content": t}}]}))
}

fn usage_event(input: u64, output: u64) -> String {
    event(json!({"choices": [], "usage": {"prompt_tokens": input, "completion_tokens": output}}))
}

/// A whole streamed answer of `text`, at once.
fn says(text: &str) -> Streamed {
    Streamed {
        content_type: "text/event-stream",
        pieces: vec![(
            format!("{}{}data: [DONE]\n\n", text_event(text), usage_event(20, 4)),
            Duration::ZERO,
        )],
    }
}

/// One tool call, streamed at once.
fn calls_one(name: &str, arguments: Value) -> Streamed {
    let call = event(
        json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "c0",
        "type": "function", "function": {"name": name, "arguments": arguments.to_string()}}]}}]}),
    );
    Streamed {
        content_type: "text/event-stream",
        pieces: vec![(
            format!("{call}{}data: [DONE]\n\n", usage_event(30, 6)),
            Duration::ZERO,
        )],
    }
}

/// Whether the request carries a tool result already.
fn answered(request: &Value) -> bool {
    request["messages"]
        .as_array()
        .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"))
}

/// Serves `script(round, request)` to each POST, streamed.
async fn fake_model(script: Script) -> FakeModel {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let addr = listener.local_addr().expect("its address");
    let asked = Arc::new(Mutex::new(Vec::new()));
    let log = asked.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            let log = log.clone();
            let script = script.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 8192];
                let (head, mut body) = loop {
                    let Ok(n) = s.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break (
                            String::from_utf8_lossy(&buf[..i]).into_owned(),
                            buf[i + 4..].to_vec(),
                        );
                    }
                };
                let header = |name: &str| {
                    head.lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
                        })
                        .unwrap_or_default()
                };
                let length: usize = header("content-length").parse().unwrap_or(0);
                while body.len() < length {
                    let Ok(n) = s.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        break;
                    }
                    body.extend_from_slice(&chunk[..n]);
                }
                let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let closed_at = Arc::new(Mutex::new(None));
                let round = {
                    let mut log = log.lock().expect("the log");
                    log.push(Asked {
                        at: Instant::now(),
                        authorization: header("authorization"),
                        body: request.clone(),
                        closed_at: closed_at.clone(),
                    });
                    log.len() - 1
                };
                let answer = script(round, &request);
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: {}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
                    answer.content_type
                );
                if s.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                for (piece, delay) in answer.pieces {
                    tokio::time::sleep(delay).await;
                    let framed = format!("{:x}\r\n{piece}\r\n", piece.len());
                    let wrote = s.write_all(framed.as_bytes()).await;
                    let flushed = s.flush().await;
                    if wrote.is_err() || flushed.is_err() {
                        *closed_at.lock().expect("closed") = Some(Instant::now());
                        return;
                    }
                }
                let _ = s.write_all(b"0\r\n\r\n").await;
                let _ = s.shutdown().await;
            });
        }
    });
    FakeModel {
        url: format!("http://{addr}/v1"),
        asked,
    }
}

fn assistant_files(w: &TestWarden, url: &str) {
    use std::os::unix::fs::PermissionsExt;
    let dir = w.root.join("worker");
    std::fs::create_dir_all(&dir).expect("worker/");
    let network = dir.join("network.toml");
    std::fs::write(
        &network,
        format!("[assistant]\nendpoint = \"{url}\"\nmodel = \"hostile\"\n"),
    )
    .expect("network.toml");
    std::fs::set_permissions(&network, std::fs::Permissions::from_mode(0o644)).expect("0644");
    let secrets = dir.join("secrets.toml");
    std::fs::write(&secrets, format!("api_key = \"{KEY}\"\n")).expect("secrets.toml");
    std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o600)).expect("0600");
    let worker = account("aromba");
    std::os::unix::fs::chown(&secrets, Some(worker.uid), Some(worker.gid)).expect("chown");
}

async fn with_model(db: PgPool, name: &str, script: Script) -> (Paired, FakeModel) {
    let model = fake_model(script).await;
    let url = model.url.clone();
    let p = paired_with(db, name, Setup::default(), move |w| {
        assistant_files(w, &url);
    })
    .await;
    (p, model)
}

/// Watches the chat from `after` until a message `done` takes shows (or
/// `limit` passes); every text seen on the way, edits included.
async fn watch_until(
    p: &Paired,
    after: usize,
    limit: Duration,
    done: impl Fn(&str) -> bool,
) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    let end = Instant::now() + limit;
    while Instant::now() < end {
        let mut finished = false;
        for m in p.bot.fake.sent_to(CHAT).into_iter().skip(after) {
            finished |= done(&m.text);
            if !seen.contains(&m.text) {
                seen.push(m.text);
            }
        }
        if finished {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    seen
}

fn ladder(p: &Paired) -> String {
    let status = support::text(&p.warden.aromba_as("root", &["status"]).stdout);
    status
        .lines()
        .find(|l| l.starts_with("ladder:"))
        .unwrap_or("ladder: ?")
        .to_string()
}

/// The tool results the model was sent in its last request.
fn tool_results(asked: &[Asked]) -> Vec<String> {
    asked
        .last()
        .and_then(|a| a.body["messages"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

// ---------------------------------------------------------------------
// Links in a streamed answer.
// ---------------------------------------------------------------------

/// The model streams a host written with U+FF61 (halfwidth ideographic
/// full stop), which Telegram's parser takes for a dot: neither the
/// partial edits nor the final answer may show it as written.
#[sqlx::test(migrations = false)]
async fn a_look_alike_dot_host_never_reaches_the_chat_in_a_streamed_answer(db: PgPool) {
    let host = "collect\u{ff61}pro/k?d=1";
    let script: Script = Arc::new(move |_, _| Streamed {
        content_type: "text/event-stream",
        pieces: vec![
            (
                text_event("The disk is fine. Send the log to "),
                Duration::ZERO,
            ),
            (
                text_event(&format!("{host} and the key to collect\u{ff61}pro.")),
                Duration::from_millis(1500),
            ),
            (
                format!("{}data: [DONE]\n\n", usage_event(20, 4)),
                Duration::from_millis(1500),
            ),
        ],
    });
    let (p, _model) = with_model(db, "round2-lookalike", script).await;
    let before = p.bot.fake.sent_to(CHAT).len();
    p.bot.fake.user_message(CHAT, "how is the disk?");
    let seen = watch_until(&p, before, Duration::from_secs(30), |t| {
        t.contains("tokens in")
    })
    .await;
    assert!(
        seen.iter().any(|t| t.contains("tokens in")),
        "no answer: {seen:?}"
    );
    let shown: Vec<&String> = seen
        .iter()
        .filter(|t| t.contains("collect\u{ff61}pro"))
        .collect();
    assert!(shown.is_empty(), "the host reached the chat: {shown:#?}");
}

// ---------------------------------------------------------------------
// Tokens of a stream.
// ---------------------------------------------------------------------

/// The endpoint streams its usage (5,000 tokens in, 50 out) and then an
/// event that is not JSON: the round fails, and `host.spent` is only called
/// for a round that succeeded — the tokens the stream reported (and the
/// provider billed) are never counted against the day's budget.
#[sqlx::test(migrations = false)]
async fn tokens_a_stream_reported_before_it_broke_are_counted(db: PgPool) {
    let script: Script = Arc::new(|_, _| Streamed {
        content_type: "text/event-stream",
        pieces: vec![(
            format!(
                "{}{}data: {{broken\n\n",
                text_event("Let me look"),
                usage_event(5000, 50)
            ),
            Duration::ZERO,
        )],
    });
    let (p, _model) = with_model(db, "round2-usage-broken", script).await;
    let before = p.bot.fake.sent_to(CHAT).len();
    p.bot.fake.user_message(CHAT, "anything wrong?");
    let seen = watch_until(&p, before, Duration::from_secs(30), |t| {
        said(t).starts_with("The assistant could not")
    })
    .await;
    assert!(
        seen.iter()
            .any(|t| said(t).starts_with("The assistant could not")),
        "{seen:?}"
    );
    let today = p.ask("/ai", |t| t.starts_with("Today")).await;
    assert!(
        today.text.contains("5050"),
        "the stream reported 5050 tokens before it broke; the Worker counts: {:?}",
        today.text
    );
}

// ---------------------------------------------------------------------
// Halts in the middle of a stream.
// ---------------------------------------------------------------------

/// A stream that trickles a piece every half second for a minute; once a
/// partial answer shows, /panic. The stream must be closed at once (the
/// model stops generating on the owner's key), the answer's message must
/// end as "stopped" (no partial edit lands after it), and no request with
/// the key may follow.
#[sqlx::test(migrations = false)]
async fn a_panic_mid_stream_closes_it_and_the_key_is_not_sent_again(db: PgPool) {
    let script: Script = Arc::new(|_, _| {
        let mut pieces = vec![(text_event("The disk "), Duration::ZERO)];
        for i in 0..120 {
            pieces.push((
                text_event(&format!("part {i}; ")),
                Duration::from_millis(500),
            ));
        }
        pieces.push((
            format!("{}data: [DONE]\n\n", usage_event(20, 4)),
            Duration::ZERO,
        ));
        Streamed {
            content_type: "text/event-stream",
            pieces,
        }
    });
    let (p, model) = with_model(db, "round2-panic-stream", script).await;
    let before = p.bot.fake.sent_to(CHAT).len();
    p.bot.fake.user_message(CHAT, "how is the disk?");
    // A partial answer shows.
    let mut partial_id = None;
    for _ in 0..400 {
        if let Some(m) = p
            .bot
            .fake
            .sent_to(CHAT)
            .into_iter()
            .skip(before)
            .find(|m| said(&m.text).starts_with("The disk") && m.text.contains("part"))
        {
            partial_id = Some(m.message_id);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let partial_id = partial_id.expect("a partial answer showed");
    let panicked = Instant::now();
    let before_panic = p.bot.fake.sent_to(CHAT).len();
    p.bot.fake.user_message(CHAT, "/panic");
    p.next(before_panic, |t| t.contains("reads only")).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let asked = model.asked();
    let closed = asked
        .first()
        .and_then(|a| *a.closed_at.lock().expect("closed"));
    let last = p
        .bot
        .fake
        .sent_to(CHAT)
        .into_iter()
        .find(|m| m.message_id == partial_id)
        .map(|m| m.text)
        .unwrap_or_default();
    let keyed_after = asked
        .iter()
        .filter(|a| a.at > panicked && a.authorization.contains(KEY))
        .count();
    assert!(
        closed.is_some_and(|c| c.duration_since(panicked) < Duration::from_secs(4)),
        "the stream was not closed within 4 s of /panic (closed: {:?})",
        closed.map(|c| c.saturating_duration_since(panicked))
    );
    assert!(
        last.contains("could not finish"),
        "the answer's message ends as {last:?}"
    );
    assert_eq!(keyed_after, 0, "the key went out after /panic");
}

// ---------------------------------------------------------------------
// A read the grammar lets through, the Warden judges secret.
// ---------------------------------------------------------------------

/// The grammar refuses a secret path as written and as the Worker can
/// resolve it; a symbolic link inside a folder only root may enter cannot
/// be resolved by the Worker, so the grammar lets it through — and the
/// Warden, resolving it as root, finds `/etc/shadow`, refuses it as secret
/// and climbs the ladder. A model (or a line it read) that names such a
/// link moves the ladder.
#[sqlx::test(migrations = false)]
async fn a_link_the_worker_cannot_follow_to_a_secret_leaves_the_ladder_where_it_is(db: PgPool) {
    use std::os::unix::fs::PermissionsExt;
    let dir = PathBuf::from(format!(
        "/var/tmp/aromba-round2-priv-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the folder");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).expect("0700");
    std::os::unix::fs::symlink("/etc/shadow", dir.join("backup")).expect("the link");
    let link = dir.join("backup").display().to_string();
    let target = link.clone();
    let script: Script = Arc::new(move |_, request| {
        if answered(request) {
            says("Done.")
        } else {
            calls_one("disk_usage", json!({"path": target}))
        }
    });
    let (p, model) = with_model(db, "round2-link-ladder", script).await;
    let at_first = ladder(&p);
    let before = p.bot.fake.sent_to(CHAT).len();
    p.bot.fake.user_message(CHAT, "how big is the backup?");
    let seen = watch_until(&p, before, Duration::from_secs(30), |t| {
        t.contains("tokens in")
    })
    .await;
    let now = ladder(&p);
    let results = tool_results(&model.asked());
    let _ = std::fs::remove_dir_all(&dir);
    assert!(seen.iter().any(|t| t.contains("tokens in")), "{seen:?}");
    assert_eq!(
        now, at_first,
        "the ladder moved on a read of {link}; the model was told {results:?}"
    );
}

/// The Warden's deny list is matched against the whole command line before
/// its rules, and a hit climbs the ladder; the grammar refuses only the
/// secret-path lists. `du` of `/etc/ssh/sshd_config` (a file a model
/// checking SSH would well look at, or a log line would name) passes the
/// grammar and hits the deny list's `protected-path`.
#[sqlx::test(migrations = false)]
async fn a_read_the_grammar_allows_never_hits_the_deny_list_and_moves_the_ladder(db: PgPool) {
    let script: Script = Arc::new(move |_, request| {
        if answered(request) {
            says("Done.")
        } else {
            calls_one("disk_usage", json!({"path": "/etc/ssh/sshd_config"}))
        }
    });
    let (p, model) = with_model(db, "round2-deny-ladder", script).await;
    let at_first = ladder(&p);
    let before = p.bot.fake.sent_to(CHAT).len();
    p.bot.fake.user_message(CHAT, "is ssh configured sanely?");
    let seen = watch_until(&p, before, Duration::from_secs(30), |t| {
        t.contains("tokens in")
    })
    .await;
    let now = ladder(&p);
    let results = tool_results(&model.asked());
    assert!(seen.iter().any(|t| t.contains("tokens in")), "{seen:?}");
    assert_eq!(
        now, at_first,
        "the ladder moved on a read the grammar allowed; the model was told {results:?}"
    );
}

/// A second question while a slow streamed answer is under way: it is told
/// to wait, and the model is asked once (held).
#[sqlx::test(migrations = false)]
async fn a_second_question_during_a_stream_is_not_sent_to_the_model(db: PgPool) {
    let script: Script = Arc::new(|_, _| {
        let mut pieces = vec![(text_event("The disk "), Duration::ZERO)];
        for i in 0..8 {
            pieces.push((
                text_event(&format!("part {i}; ")),
                Duration::from_millis(500),
            ));
        }
        pieces.push((
            format!("{}data: [DONE]\n\n", usage_event(20, 4)),
            Duration::ZERO,
        ));
        Streamed {
            content_type: "text/event-stream",
            pieces,
        }
    });
    let (p, model) = with_model(db, "round2-race", script).await;
    let before = p.bot.fake.sent_to(CHAT).len();
    p.bot.fake.user_message(CHAT, "how is the disk?");
    p.bot.fake.user_message(CHAT, "and the memory?");
    let seen = watch_until(&p, before, Duration::from_secs(30), |t| {
        t.contains("tokens in")
    })
    .await;
    assert!(
        seen.iter()
            .any(|t| t.contains("still on your last question")),
        "{seen:?}"
    );
    assert_eq!(model.asked().len(), 1, "{seen:?}");
}

/// A proposal's reason is filtered, then cut at 300 characters
/// (`ask::offer`); the filter makes it longer (`x.io` becomes
/// `[link removed]`). `collect.pro1234` is no host to the filter, but cut
/// right after `collect.pro` it is one, at the end of the chat's message.
#[sqlx::test(migrations = false)]
async fn a_proposals_reason_cut_does_not_make_a_host(db: PgPool) {
    let dir = PathBuf::from(format!("/var/tmp/aromba-round2-why-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the cache");
    let chore = format!(
        "#!/bin/sh\n# aromba-chore: 1\n# name: tidy-why\n# description: Empties the cache folder\n# color: green\n# touches: {d}\n# network: no\n# schedule: manual\n# end\nif [ \"$1\" = --dry-run ]; then echo would remove the tmp files; exit 0; fi\nrm -f {d}/*.tmp\n",
        d = dir.display()
    );
    // 207 bytes within the grammar's 300; the ten hosts become
    // "[link removed]" (ten characters longer each), so the 300-character
    // cut falls right after "collect.pro".
    let why = format!(
        "{}{} collect.pro1234 ok",
        "x.io ".repeat(10),
        "a ".repeat(69)
    );
    let script: Script = Arc::new(move |_, request| {
        if answered(request) {
            says("I proposed it.")
        } else {
            calls_one("propose_chore", json!({"name": "tidy-why", "why": why}))
        }
    });
    let model = fake_model(script).await;
    let url = model.url.clone();
    let p = paired_with(db, "round2-why", Setup::default(), move |w| {
        assistant_files(w, &url);
        paired::write_mine(w, "tidy-why", &chore);
    })
    .await;
    let before = p.bot.fake.sent_to(CHAT).len();
    p.bot.fake.user_message(CHAT, "is the cache big?");
    let proposed = p
        .next(before, |t| {
            said(t).starts_with("The assistant proposes the chore")
        })
        .await;
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        !proposed.text.trim_end().ends_with("collect.pro"),
        "the reason ends with a host: {:?}",
        proposed.text
    );
}

/// The Warden's clock for the escalation test (the ladder's pacing reads
/// it).
static CLOCK: std::sync::OnceLock<Arc<aromba_warden::ladder::ManualClock>> =
    std::sync::OnceLock::new();

fn manual_clock(o: &mut aromba_warden::server::ServeOptions) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("the time")
        .as_secs();
    let clock = CLOCK
        .get_or_init(|| aromba_warden::ladder::ManualClock::new(now))
        .clone();
    o.clock = clock;
}

/// The same deny-list hit, one a question (a planted line the model reads
/// each time, or a hostile model): could questions a paced minute apart
/// take the ladder on to Freeze — the schedule and the assistant stopped —
/// by reads the grammar allowed? Held: over four questions, each a paced
/// minute after the last, the ladder stayed at Slow (the first hit's step).
#[sqlx::test(migrations = false)]
async fn questions_whose_reads_the_grammar_allowed_never_freeze_the_server(db: PgPool) {
    let setup = Setup {
        adjust: manual_clock,
        ..Setup::default()
    };
    let script: Script = Arc::new(move |_, request| {
        if answered(request) {
            says("Done.")
        } else {
            calls_one("disk_usage", json!({"path": "/etc/ssh/sshd_config"}))
        }
    });
    let model = fake_model(script).await;
    let url = model.url.clone();
    let p = paired_with(db, "round2-deny-freeze", setup, move |w| {
        assistant_files(w, &url);
    })
    .await;
    let clock = CLOCK.get().expect("the clock").clone();
    let mut steps = Vec::new();
    for i in 0..4 {
        let before = p.bot.fake.sent_to(CHAT).len();
        p.bot
            .fake
            .user_message(CHAT, &format!("is ssh configured sanely ({i})?"));
        watch_until(&p, before, Duration::from_secs(30), |t| {
            t.contains("tokens in")
                || t.starts_with("I cannot tell")
                || said(t).starts_with("The assistant")
        })
        .await;
        let step = ladder(&p);
        let shown: Vec<String> = p
            .bot
            .fake
            .sent_to(CHAT)
            .into_iter()
            .skip(before)
            .map(|m| m.text)
            .collect();
        steps.push(format!("{step} after {shown:?}"));
        if step.starts_with("ladder: freeze") {
            break;
        }
        clock.advance(61);
    }
    assert!(
        !steps.iter().any(|s| s.starts_with("ladder: freeze")),
        "the ladder after each question: {steps:#?}"
    );
}

/// A stream that never ends: one byte of text every two seconds, for ever
/// (each a chunk of its own). The 120 s bound is on the whole completion,
/// not on each byte: the answer ends within it, as an error (held).
#[sqlx::test(migrations = false)]
async fn a_trickling_stream_is_cut_at_the_whole_completions_timeout(db: PgPool) {
    let script: Script = Arc::new(|_, _| {
        let mut pieces = vec![(
            "data: {\"choices\":[{\"delta\":{\"content\":\"".to_string(),
            Duration::ZERO,
        )];
        for _ in 0..400 {
            pieces.push(("x".to_string(), Duration::from_secs(2)));
        }
        Streamed {
            content_type: "text/event-stream",
            pieces,
        }
    });
    let (p, _model) = with_model(db, "round2-trickle", script).await;
    let before = p.bot.fake.sent_to(CHAT).len();
    let asked = Instant::now();
    p.bot.fake.user_message(CHAT, "how is the disk?");
    let seen = watch_until(&p, before, Duration::from_secs(150), |t| {
        said(t).starts_with("The assistant could not")
    })
    .await;
    let took = asked.elapsed();
    assert!(
        seen.iter()
            .any(|t| said(t).starts_with("The assistant could not") && t.contains("120 seconds")),
        "after {took:?}: {seen:?}"
    );
    assert!(
        took < Duration::from_secs(130),
        "the answer ended after {took:?}"
    );
}
