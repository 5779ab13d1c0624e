//! A model endpoint on loopback that streams each answer as the script
//! says (a content type, pieces each written after a delay, in a chunked
//! body), and records when each request came, the Authorization it
//! carried, and when the Worker closed a stream under way (a write of the
//! answer failed). The Worker's files are [`super::assistant_files`], its
//! key [`super::KEY`].
//!
//! ```ignore
//! use model_fake::streamed::{self, says};
//! let script: streamed::Script = Arc::new(|_, _| says("Fine."));
//! let (p, model) = streamed::with_model(db, "name", script).await;
//! ```

use super::assistant_files;
use crate::paired::{Paired, Setup, paired_with};
use serde_json::{Value, json};
use sqlx::PgPool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;

/// One request the fake model got.
#[derive(Clone, Debug)]
pub struct Asked {
    pub at: Instant,
    pub authorization: String,
    pub body: Value,
    /// When a write of the answer failed: the Worker had closed it.
    pub closed_at: Arc<Mutex<Option<Instant>>>,
}

/// What the fake model answers: the pieces of a body, each written after
/// its delay.
pub struct Streamed {
    pub content_type: &'static str,
    pub pieces: Vec<(String, Duration)>,
}

/// `script(round, request)` for each request.
pub type Script = Arc<dyn Fn(usize, &Value) -> Streamed + Send + Sync>;

pub struct FakeModel {
    pub url: String,
    pub asked: Arc<Mutex<Vec<Asked>>>,
}

impl FakeModel {
    pub fn asked(&self) -> Vec<Asked> {
        self.asked.lock().expect("the log").clone()
    }
}

/// One server-sent event of `v`.
pub fn event(v: Value) -> String {
    format!("data: {v}\n\n")
}

/// An event adding `t` to the answer's text.
pub fn text_event(t: &str) -> String {
    event(json!({"choices": [{"delta": {"content": t}}]}))
}

/// An event reporting the completion's usage.
pub fn usage_event(input: u64, output: u64) -> String {
    event(json!({"choices": [], "usage": {"prompt_tokens": input, "completion_tokens": output}}))
}

/// A whole streamed answer of `text`, at once.
pub fn says(text: &str) -> Streamed {
    Streamed {
        content_type: "text/event-stream",
        pieces: vec![(
            format!("{}{}data: [DONE]\n\n", text_event(text), usage_event(20, 4)),
            Duration::ZERO,
        )],
    }
}

/// One tool call, streamed at once.
pub fn calls_one(name: &str, arguments: Value) -> Streamed {
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
pub fn answered(request: &Value) -> bool {
    request["messages"]
        .as_array()
        .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"))
}

/// Serves `script(round, request)` to each POST, streamed.
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
                let Some((head, body)) = super::read_request(&mut s).await else {
                    return;
                };
                let header = |name: &str| super::header(&head, name);
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

/// A server paired with [`paired_with`] whose assistant asks a streaming
/// fake model (named `hostile`) answering from `script`.
pub async fn with_model(db: PgPool, name: &str, script: Script) -> (Paired, FakeModel) {
    with_model_setup(db, name, Setup::default(), script).await
}

/// [`with_model`] with the pairing's `setup`.
pub async fn with_model_setup(
    db: PgPool,
    name: &str,
    setup: Setup,
    script: Script,
) -> (Paired, FakeModel) {
    let model = fake_model(script).await;
    let url = model.url.clone();
    let p = paired_with(db, name, setup, move |w| {
        assistant_files(w, &url, "hostile");
    })
    .await;
    (p, model)
}
