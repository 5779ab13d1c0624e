//! A model endpoint on loopback for the assistant's end-to-end tests: an
//! OpenAI-compatible `POST /v1/chat/completions` answering from a script
//! (a status, a body or a stream of events, after a delay of its choosing)
//! and keeping every request — when it came, its Authorization, its body —
//! so a test sees exactly what reached the model. And the Worker's files
//! that point the assistant at it:
//!
//! ```ignore
//! use aromba_testkit::model_fake;
//! let model = model_fake::fake_model(Arc::new(|round, _, _| Canned::ok(say("Fine.")))).await;
//! ```
//!
//! [`with_model`] pairs a server (`paired`) whose assistant asks it;
//! [`streamed`] is a fake model that streams each answer in pieces of the
//! script's choosing and sees the Worker close a stream under way.

pub mod streamed;

use crate::paired::{Paired, Setup, paired_with};
use crate::worker::{TestWarden, account};
use serde_json::{Value, json};
use sqlx::PgPool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The key the Worker's `secrets.toml` holds in these tests.
pub const KEY: &str = "sk-test-assistant-key-0123456789";

/// One request the fake model got.
#[derive(Clone, Debug)]
pub struct Asked {
    pub at: Instant,
    pub authorization: String,
    pub body: Value,
}

/// What the fake model answers one request with.
pub struct Canned {
    pub status: u16,
    pub body: String,
    pub delay: Duration,
    /// Server-sent events instead of `body`: the pieces of the answer's
    /// text, `gap` apart, then its usage.
    pub stream: Option<(Vec<String>, Duration, (u64, u64))>,
}

impl Canned {
    pub fn ok(v: Value) -> Canned {
        Canned::status(200, v)
    }

    pub fn status(status: u16, v: Value) -> Canned {
        Canned {
            status,
            body: v.to_string(),
            delay: Duration::ZERO,
            stream: None,
        }
    }

    /// The answer's text streamed in `pieces`, `gap` apart.
    pub fn streamed(pieces: &[&str], gap: Duration, usage: (u64, u64)) -> Canned {
        Canned {
            status: 200,
            body: String::new(),
            delay: Duration::ZERO,
            stream: Some((pieces.iter().map(|p| p.to_string()).collect(), gap, usage)),
        }
    }

    pub fn after(mut self, delay: Duration) -> Canned {
        self.delay = delay;
        self
    }
}

/// `script(round, request, authorization)` for each request.
pub type Script = Arc<dyn Fn(usize, &Value, &str) -> Canned + Send + Sync>;

pub struct FakeModel {
    pub url: String,
    pub asked: Arc<Mutex<Vec<Asked>>>,
}

impl FakeModel {
    pub fn asked(&self) -> Vec<Asked> {
        self.asked.lock().expect("the log").clone()
    }
}

/// A chat-completions answer with `text` (20 tokens in, 4 out).
pub fn say(text: &str) -> Value {
    say_usage(text, 20, 4)
}

pub fn say_usage(text: &str, input: u64, output: u64) -> Value {
    json!({"choices": [{"message": {"role": "assistant", "content": text}}],
           "usage": {"prompt_tokens": input, "completion_tokens": output}})
}

/// A round of tool calls, each `(name, arguments)`.
pub fn calls(list: &[(&str, Value)], input: u64, output: u64) -> Value {
    let calls: Vec<Value> = list
        .iter()
        .enumerate()
        .map(|(i, (name, arguments))| {
            json!({"id": format!("call-{i}"), "type": "function",
                   "function": {"name": name, "arguments": arguments.to_string()}})
        })
        .collect();
    json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": calls}}],
           "usage": {"prompt_tokens": input, "completion_tokens": output}})
}

/// One tool call (30 tokens in, 6 out).
pub fn call(name: &str, arguments: Value) -> Value {
    calls(&[(name, arguments)], 30, 6)
}

/// A request's head and body (by its Content-Length); `None` when the
/// connection ends first.
pub async fn read_request(s: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let (head, mut body) = loop {
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break (
                String::from_utf8_lossy(&buf[..i]).into_owned(),
                buf[i + 4..].to_vec(),
            );
        }
    };
    let length: usize = header(&head, "content-length").parse().unwrap_or(0);
    while body.len() < length {
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some((head, body))
}

/// A header's value in `head`, or "".
pub fn header(head: &str, name: &str) -> String {
    head.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
        .unwrap_or_default()
}

/// Serves `script` to each request, each connection on its own (a slow
/// answer holds no other).
pub async fn fake_model(script: Script) -> FakeModel {
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
                let Some((head, body)) = read_request(&mut s).await else {
                    return;
                };
                let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let authorization = header(&head, "authorization");
                let round = {
                    let mut log = log.lock().expect("the log");
                    log.push(Asked {
                        at: Instant::now(),
                        authorization: authorization.clone(),
                        body: request.clone(),
                    });
                    log.len() - 1
                };
                let canned = script(round, &request, &authorization);
                tokio::time::sleep(canned.delay).await;
                match canned.stream {
                    None => {
                        let reply = format!(
                            "HTTP/1.1 {} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
                            canned.status,
                            canned.body.len(),
                            canned.body
                        );
                        let _ = s.write_all(reply.as_bytes()).await;
                    }
                    Some((pieces, gap, (input, output))) => {
                        stream(&mut s, &pieces, gap, input, output).await;
                    }
                }
            });
        }
    });
    FakeModel {
        url: format!("http://{addr}/v1"),
        asked,
    }
}

/// An answer as server-sent events, the connection closed at its end.
async fn stream(s: &mut TcpStream, pieces: &[String], gap: Duration, input: u64, output: u64) {
    let _ = s
        .write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n",
        )
        .await;
    for (i, piece) in pieces.iter().enumerate() {
        let event = json!({"choices": [{"delta": {"content": piece}}]});
        let _ = s.write_all(format!("data: {event}\n\n").as_bytes()).await;
        let _ = s.flush().await;
        if i + 1 < pieces.len() {
            tokio::time::sleep(gap).await;
        }
    }
    let usage =
        json!({"choices": [], "usage": {"prompt_tokens": input, "completion_tokens": output}});
    let _ = s
        .write_all(format!("data: {usage}\n\ndata: [DONE]\n\n").as_bytes())
        .await;
    let _ = s.shutdown().await;
}

/// The Worker's files for an assistant at `url`: `[assistant]` in root's
/// `network.toml` (which `aromba pair` keeps, and lists the host of) and
/// the key in the Worker's own `secrets.toml`.
pub fn assistant_files(w: &TestWarden, url: &str, model: &str) {
    use std::os::unix::fs::PermissionsExt;
    let dir = w.root.join("worker");
    std::fs::create_dir_all(&dir).expect("worker/");
    let network = dir.join("network.toml");
    std::fs::write(
        &network,
        format!("[assistant]\nendpoint = \"{url}\"\nmodel = \"{model}\"\n"),
    )
    .expect("network.toml");
    std::fs::set_permissions(&network, std::fs::Permissions::from_mode(0o644)).expect("0644");
    let secrets = dir.join("secrets.toml");
    std::fs::write(&secrets, format!("api_key = \"{KEY}\"\n")).expect("secrets.toml");
    std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o600)).expect("0600");
    let worker = account("aromba");
    std::os::unix::fs::chown(&secrets, Some(worker.uid), Some(worker.gid)).expect("chown");
}

/// Every tool result the model was sent, across all requests.
pub fn tool_results(asked: &[Asked]) -> Vec<String> {
    asked
        .iter()
        .flat_map(|a| a.body["messages"].as_array().cloned().unwrap_or_default())
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["content"].as_str().map(String::from))
        .collect()
}

/// A server paired with [`paired_with`] whose assistant asks a fake model
/// (named `hostile`) answering from `script`.
pub async fn with_model(db: PgPool, name: &str, script: Script) -> (Paired, FakeModel) {
    with_model_setup(db, name, Setup::default(), script, |_| {}).await
}

/// As [`with_model`], set up as `setup` says, and `more` done to the
/// Warden before the daemon starts.
pub async fn with_model_setup(
    db: PgPool,
    name: &str,
    setup: Setup,
    script: Script,
    more: impl FnOnce(&TestWarden),
) -> (Paired, FakeModel) {
    let model = fake_model(script).await;
    let url = model.url.clone();
    let p = paired_with(db, name, setup, move |w| {
        assistant_files(w, &url, "hostile");
        more(w);
    })
    .await;
    (p, model)
}

/// A model that calls a (different) tool in each of seven rounds, each
/// answer after `delay`.
pub fn slow_looker(delay: Duration) -> Script {
    Arc::new(move |round, _, _| {
        let tools = [
            ("memory", json!({})),
            ("load", json!({})),
            ("containers", json!({})),
            ("listening_sockets", json!({})),
            ("pending_updates", json!({})),
            ("disk_usage", json!({"path": "/var"})),
            ("disk_usage", json!({"path": "/tmp"})),
        ];
        match tools.get(round) {
            Some((name, args)) => Canned::ok(call(name, args.clone())).after(delay),
            None => Canned::ok(say("Fine.")).after(delay),
        }
    })
}
