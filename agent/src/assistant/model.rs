//! The model behind the assistant: one small trait ([`Model`]), the
//! OpenAI-compatible chat-completions client ([`OpenAi`], which also
//! serves Ollama, llama.cpp and vLLM) and Anthropic's Messages
//! ([`Anthropic`]), both over the Worker's network gate. The endpoint's
//! host must be listed in `network.toml` like any other. Both ask for a
//! streamed answer ([`super::stream`]) and take a whole one too.

use crate::config::BaseUrl;
use crate::http::{Ask, HttpError, request_streamed};
use aromba_relay_proto::client::Dialer;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// One message of the conversation, as the assistant keeps it.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    System(String),
    User(String),
    /// The model's turn: its text and the tools it called.
    Assistant {
        text: String,
        calls: Vec<ToolCall>,
    },
    /// A tool's result, for the call with this id.
    Tool {
        call_id: String,
        content: String,
    },
}

impl Message {
    /// Its characters as sent (bytes: a bound, not a count).
    pub fn chars(&self) -> usize {
        match self {
            Message::System(t) | Message::User(t) => t.len(),
            Message::Assistant { text, calls } => {
                text.len()
                    + calls
                        .iter()
                        .map(|c| c.id.len() + c.name.len() + c.arguments.len())
                        .sum::<usize>()
            }
            Message::Tool { call_id, content } => call_id.len() + content.len(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as the model wrote them (JSON text).
    pub arguments: String,
}

/// Tokens in and out of one completion.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
}

impl Usage {
    /// Tokens in and out together (saturating: the counts are the
    /// endpoint's word).
    pub fn total(&self) -> u64 {
        self.input.saturating_add(self.output)
    }
}

/// What the model answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub text: String,
    pub calls: Vec<ToolCall>,
    pub usage: Usage,
}

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("{0}")]
    Http(#[from] HttpError),
    /// The endpoint's own message is not kept: it may quote the key it
    /// was sent, or carry a link, and it would go to the chat.
    #[error("the model's endpoint answered {status}{}", status_hint(*.status))]
    Status { status: u16 },
    #[error("the model's answer is not one I can read: {0}")]
    Malformed(String),
    #[error("the model did not answer within {0} seconds")]
    Timeout(u64),
}

/// What an endpoint's status usually means, in the owner's words.
fn status_hint(status: u16) -> &'static str {
    match status {
        401 | 403 => " (it refused the key: check secrets.toml)",
        404 => " (no such model or path: check network.toml's [assistant])",
        429 => " (too many requests, or no credit left)",
        500..=599 => " (a problem on its side; try again later)",
        _ => "",
    }
}

/// A chat model with tools.
pub trait Model {
    /// One completion of `messages`; `tools` (OpenAI's shape) offered, or
    /// none (the last round, which must answer).
    fn complete(
        &self,
        messages: &[Message],
        tools: Option<&Value>,
    ) -> impl std::future::Future<Output = Result<Reply, ModelError>> + Send;

    /// [`Model::complete`], streamed where the model can: `progress` is
    /// given the answer's text and usage so far as they come.
    fn complete_streamed(
        &self,
        messages: &[Message],
        tools: Option<&Value>,
        progress: &dyn Progress,
    ) -> impl std::future::Future<Output = Result<Reply, ModelError>> + Send {
        let _ = progress;
        self.complete(messages, tools)
    }
}

/// What a streamed completion has so far, as it comes.
pub trait Progress: Send + Sync {
    /// The answer's text so far.
    fn text(&self, so_far: &str);
    /// The tokens the endpoint has reported so far for this completion
    /// (its word: they may come in pieces, or not at all).
    fn usage(&self, _so_far: Usage) {}
}

/// A closure of the text alone (tests, and callers that count no usage).
impl<F: Fn(&str) + Send + Sync> Progress for F {
    fn text(&self, so_far: &str) {
        self(so_far)
    }
}

/// The text and usage a stream has so far, handed on when they changed.
struct Shown<'a> {
    progress: &'a dyn Progress,
    len: usize,
    usage: Usage,
}

impl Shown<'_> {
    fn now(&mut self, text: &str, usage: Usage) {
        if usage != self.usage {
            self.usage = usage;
            self.progress.usage(usage);
        }
        if text.len() != self.len {
            self.len = text.len();
            self.progress.text(text);
        }
    }
}

/// An OpenAI-compatible `POST {endpoint}/chat/completions`.
pub struct OpenAi {
    pub dialer: Arc<dyn Dialer>,
    /// The API's base, e.g. `https://api.openai.com/v1`.
    pub endpoint: BaseUrl,
    pub model: String,
    pub key: Option<String>,
    pub roots: Option<Arc<rustls::RootCertStore>>,
}

/// How long one completion may take.
const TIMEOUT_S: u64 = 120;

/// [`TIMEOUT_S`], or less when `AROMBA_MODEL_TIMEOUT_S` asks (the tests',
/// which watch a stream that never ends be cut).
fn timeout_s() -> u64 {
    std::env::var("AROMBA_MODEL_TIMEOUT_S")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .filter(|s| *s > 0)
        .map_or(TIMEOUT_S, |s| s.min(TIMEOUT_S))
}
/// The largest answer read from the endpoint.
const MAX_ANSWER: usize = 1 << 20;

/// `messages` in OpenAI's shape.
pub fn openai_messages(messages: &[Message]) -> Value {
    Value::Array(
        messages
            .iter()
            .map(|m| match m {
                Message::System(t) => json!({"role": "system", "content": t}),
                Message::User(t) => json!({"role": "user", "content": t}),
                Message::Assistant { text, calls } if calls.is_empty() => {
                    json!({"role": "assistant", "content": text})
                }
                Message::Assistant { text, calls } => json!({
                    "role": "assistant",
                    "content": if text.is_empty() { Value::Null } else { Value::from(text.as_str()) },
                    "tool_calls": calls.iter().map(|c| json!({
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments},
                    })).collect::<Vec<_>>(),
                }),
                Message::Tool { call_id, content } => {
                    json!({"role": "tool", "tool_call_id": call_id, "content": content})
                }
            })
            .collect(),
    )
}

/// Reads an OpenAI chat-completions answer.
pub fn openai_reply(body: &[u8]) -> Result<Reply, ModelError> {
    let malformed = |why: &str| ModelError::Malformed(why.to_string());
    let v: Value = serde_json::from_slice(body).map_err(|e| {
        ModelError::Malformed(format!(
            "not JSON (line {}, column {})",
            e.line(),
            e.column()
        ))
    })?;
    let message = v
        .pointer("/choices/0/message")
        .ok_or_else(|| malformed("no choices[0].message"))?;
    let text = message
        .get("content")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let mut calls = Vec::new();
    if let Some(list) = message.get("tool_calls").and_then(Value::as_array) {
        for c in list.iter().take(16) {
            let id = c.get("id").and_then(Value::as_str).unwrap_or_default();
            let name = c
                .pointer("/function/name")
                .and_then(Value::as_str)
                .ok_or_else(|| malformed("a tool call without a name"))?;
            let arguments = match c.pointer("/function/arguments") {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            };
            calls.push(ToolCall {
                id: id.chars().take(128).collect(),
                name: name.chars().take(64).collect(),
                arguments,
            });
        }
    }
    let number = |p: &str| v.pointer(p).and_then(Value::as_u64).unwrap_or(0);
    Ok(Reply {
        text,
        calls,
        usage: Usage {
            input: number("/usage/prompt_tokens"),
            output: number("/usage/completion_tokens"),
        },
    })
}

impl Model for OpenAi {
    async fn complete(
        &self,
        messages: &[Message],
        tools: Option<&Value>,
    ) -> Result<Reply, ModelError> {
        self.complete_streamed(messages, tools, &|_: &str| {}).await
    }

    async fn complete_streamed(
        &self,
        messages: &[Message],
        tools: Option<&Value>,
        progress: &dyn Progress,
    ) -> Result<Reply, ModelError> {
        let mut body = json!({
            "model": self.model,
            "messages": openai_messages(messages),
            "stream": true,
            "stream_options": {"include_usage": true},
            // A bound on each answer, as Anthropic's API demands one: the
            // question's cap is looked at between rounds, so a round
            // without one could spend whatever the provider allows
            // (`max_tokens` is the field OpenAI's compatible servers —
            // Ollama, vLLM, llama.cpp — all take).
            "max_tokens": MAX_TOKENS,
        });
        if let Some(tools) = tools {
            body["tools"] = tools.clone();
        }
        let headers = self
            .key
            .iter()
            .map(|k| ("authorization", format!("Bearer {k}")))
            .collect();
        let endpoint = (&self.endpoint, self.dialer.as_ref(), self.roots.clone());
        exchange::<super::stream::OpenAiStream>(
            endpoint,
            &self.endpoint.file("chat/completions"),
            body,
            headers,
            progress,
            openai_reply,
        )
        .await
    }
}

/// One completion over HTTP: `body` posted to `path`, the answer put
/// together from its events (`S`) when the endpoint streams it, the text so
/// far handed to `progress`; read whole by `whole` when it does not.
async fn exchange<S: super::stream::Events>(
    (endpoint, dialer, roots): (&BaseUrl, &dyn Dialer, Option<Arc<rustls::RootCertStore>>),
    path: &str,
    body: Value,
    headers: Vec<(&'static str, String)>,
    progress: &dyn Progress,
    whole: fn(&[u8]) -> Result<Reply, ModelError>,
) -> Result<Reply, ModelError> {
    let ask = Ask {
        method: hyper::Method::POST,
        path,
        body: Some(("application/json", body.to_string())),
        cap: MAX_ANSWER,
        headers,
    };
    let mut stream = S::default();
    let mut broken: Option<ModelError> = None;
    let mut shown = Shown {
        progress,
        len: 0,
        usage: Usage::default(),
    };
    let limit = timeout_s();
    let answer = tokio::time::timeout(
        Duration::from_secs(limit),
        request_streamed(dialer, &endpoint.origin, roots, ask, &mut |piece| {
            if broken.is_none() {
                let fed = stream.feed(piece);
                // What came before a broken event still counts.
                shown.now(stream.text(), stream.usage());
                broken = fed.err();
            }
        }),
    )
    .await
    .map_err(|_| ModelError::Timeout(limit))??;
    if answer.status != 200 {
        return Err(ModelError::Status {
            status: answer.status,
        });
    }
    if !answer.event_stream {
        // An endpoint that does not stream answers whole.
        return whole(&answer.body);
    }
    match broken {
        Some(e) => Err(e),
        None => stream.reply(),
    }
}

/// Anthropic's `POST {endpoint}/messages`.
pub struct Anthropic {
    pub dialer: Arc<dyn Dialer>,
    /// The API's base, e.g. `https://api.anthropic.com/v1`.
    pub endpoint: BaseUrl,
    pub model: String,
    pub key: Option<String>,
    pub roots: Option<Arc<rustls::RootCertStore>>,
}

/// The most tokens one answer may take, of either API.
const MAX_TOKENS: u64 = 2048;

/// The system prompt and `messages` in Anthropic's shape.
pub fn anthropic_messages(messages: &[Message]) -> (String, Value) {
    let mut system = String::new();
    let mut out: Vec<Value> = Vec::new();
    for m in messages {
        match m {
            Message::System(t) => system = t.clone(),
            Message::User(t) => out.push(json!({"role": "user", "content": t})),
            Message::Assistant { text, calls } => {
                let mut content = Vec::new();
                if !text.is_empty() {
                    content.push(json!({"type": "text", "text": text}));
                }
                for c in calls {
                    let input: Value =
                        serde_json::from_str(&c.arguments).unwrap_or_else(|_| json!({}));
                    content.push(
                        json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input}),
                    );
                }
                out.push(json!({"role": "assistant", "content": content}));
            }
            Message::Tool { call_id, content } => {
                let block =
                    json!({"type": "tool_result", "tool_use_id": call_id, "content": content});
                // Results of one round go in one user turn.
                match out.last_mut() {
                    Some(last)
                        if last["role"] == "user"
                            && last["content"]
                                .as_array()
                                .is_some_and(|c| c.iter().all(|b| b["type"] == "tool_result")) =>
                    {
                        if let Some(list) = last["content"].as_array_mut() {
                            list.push(block);
                        }
                    }
                    _ => out.push(json!({"role": "user", "content": [block]})),
                }
            }
        }
    }
    (system, Value::Array(out))
}

/// OpenAI's tool definitions in Anthropic's shape.
pub fn anthropic_tools(tools: &Value) -> Value {
    Value::Array(
        tools
            .as_array()
            .map(|list| {
                list.iter()
                    .map(|t| {
                        json!({
                            "name": t["function"]["name"],
                            "description": t["function"]["description"],
                            "input_schema": t["function"]["parameters"],
                        })
                    })
                    .collect()
            })
            .unwrap_or_default(),
    )
}

/// Reads an Anthropic Messages answer.
pub fn anthropic_reply(body: &[u8]) -> Result<Reply, ModelError> {
    let v: Value = serde_json::from_slice(body).map_err(|e| {
        ModelError::Malformed(format!(
            "not JSON (line {}, column {})",
            e.line(),
            e.column()
        ))
    })?;
    let blocks = v
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| ModelError::Malformed("no content".into()))?;
    let mut text = String::new();
    let mut calls = Vec::new();
    for b in blocks.iter().take(32) {
        match b.get("type").and_then(Value::as_str) {
            Some("text") => {
                text.push_str(b.get("text").and_then(Value::as_str).unwrap_or_default())
            }
            Some("tool_use") => calls.push(ToolCall {
                id: b
                    .get("id")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .chars()
                    .take(128)
                    .collect(),
                name: b
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| ModelError::Malformed("a tool call without a name".into()))?
                    .chars()
                    .take(64)
                    .collect(),
                arguments: b.get("input").map(Value::to_string).unwrap_or_default(),
            }),
            _ => {}
        }
    }
    let number = |p: &str| v.pointer(p).and_then(Value::as_u64).unwrap_or(0);
    Ok(Reply {
        text,
        calls,
        usage: Usage {
            input: number("/usage/input_tokens"),
            output: number("/usage/output_tokens"),
        },
    })
}

impl Model for Anthropic {
    async fn complete(
        &self,
        messages: &[Message],
        tools: Option<&Value>,
    ) -> Result<Reply, ModelError> {
        self.complete_streamed(messages, tools, &|_: &str| {}).await
    }

    async fn complete_streamed(
        &self,
        messages: &[Message],
        tools: Option<&Value>,
        progress: &dyn Progress,
    ) -> Result<Reply, ModelError> {
        let (system, messages) = anthropic_messages(messages);
        let mut body = json!({
            "model": self.model,
            "max_tokens": MAX_TOKENS,
            "system": system,
            "messages": messages,
            "stream": true,
        });
        if let Some(tools) = tools {
            body["tools"] = anthropic_tools(tools);
        }
        let mut headers = vec![("anthropic-version", "2023-06-01".to_string())];
        if let Some(k) = &self.key {
            headers.push(("x-api-key", k.clone()));
        }
        let endpoint = (&self.endpoint, self.dialer.as_ref(), self.roots.clone());
        exchange::<super::stream::AnthropicStream>(
            endpoint,
            &self.endpoint.file("messages"),
            body,
            headers,
            progress,
            anthropic_reply,
        )
        .await
    }
}

/// The model `network.toml` names: one of the two APIs.
pub enum AnyModel {
    OpenAi(OpenAi),
    Anthropic(Anthropic),
}

impl Model for AnyModel {
    async fn complete(
        &self,
        messages: &[Message],
        tools: Option<&Value>,
    ) -> Result<Reply, ModelError> {
        match self {
            AnyModel::OpenAi(m) => m.complete(messages, tools).await,
            AnyModel::Anthropic(m) => m.complete(messages, tools).await,
        }
    }

    async fn complete_streamed(
        &self,
        messages: &[Message],
        tools: Option<&Value>,
        progress: &dyn Progress,
    ) -> Result<Reply, ModelError> {
        match self {
            AnyModel::OpenAi(m) => m.complete_streamed(messages, tools, progress).await,
            AnyModel::Anthropic(m) => m.complete_streamed(messages, tools, progress).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_an_answer_with_tool_calls_and_usage() {
        let body = br#"{"choices":[{"message":{"role":"assistant","content":null,
            "tool_calls":[{"id":"c1","type":"function","function":{"name":"memory","arguments":"{}"}}]}}],
            "usage":{"prompt_tokens":120,"completion_tokens":7}}"#;
        let r = openai_reply(body).unwrap();
        assert_eq!(r.text, "");
        assert_eq!(
            r.calls,
            vec![ToolCall {
                id: "c1".into(),
                name: "memory".into(),
                arguments: "{}".into()
            }]
        );
        assert_eq!(
            r.usage,
            Usage {
                input: 120,
                output: 7
            }
        );
        assert!(openai_reply(b"{}").is_err());
        assert!(openai_reply(b"not json").is_err());
    }

    #[test]
    fn writes_the_conversation_in_openais_shape() {
        let m = openai_messages(&[
            Message::System("s".into()),
            Message::User("u".into()),
            Message::Assistant {
                text: String::new(),
                calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "load".into(),
                    arguments: "{}".into(),
                }],
            },
            Message::Tool {
                call_id: "c1".into(),
                content: "up 3 days".into(),
            },
        ]);
        assert_eq!(m[2]["tool_calls"][0]["function"]["name"], "load");
        assert_eq!(m[2]["content"], Value::Null);
        assert_eq!(m[3]["tool_call_id"], "c1");
    }

    #[test]
    fn speaks_anthropics_messages_both_ways() {
        let (system, m) = anthropic_messages(&[
            Message::System("s".into()),
            Message::User("u".into()),
            Message::Assistant {
                text: "let me look".into(),
                calls: vec![
                    ToolCall {
                        id: "t1".into(),
                        name: "load".into(),
                        arguments: "{}".into(),
                    },
                    ToolCall {
                        id: "t2".into(),
                        name: "memory".into(),
                        arguments: "{}".into(),
                    },
                ],
            },
            Message::Tool {
                call_id: "t1".into(),
                content: "up".into(),
            },
            Message::Tool {
                call_id: "t2".into(),
                content: "free".into(),
            },
        ]);
        assert_eq!(system, "s");
        assert_eq!(m.as_array().unwrap().len(), 3, "{m}");
        assert_eq!(m[1]["content"][1]["type"], "tool_use");
        assert_eq!(m[2]["content"].as_array().unwrap().len(), 2);
        assert_eq!(m[2]["content"][1]["tool_use_id"], "t2");
        let tools = anthropic_tools(&crate::assistant::tools::definitions());
        assert_eq!(tools[0]["name"], "disk_usage");
        assert_eq!(tools[0]["input_schema"]["type"], "object");
        let r = anthropic_reply(
            br#"{"content":[{"type":"text","text":"Hi"},{"type":"tool_use","id":"t9","name":"load","input":{}}],
                "usage":{"input_tokens":11,"output_tokens":3}}"#,
        )
        .unwrap();
        assert_eq!(r.text, "Hi");
        assert_eq!(r.calls[0].name, "load");
        assert_eq!(r.calls[0].arguments, "{}");
        assert_eq!(
            r.usage,
            Usage {
                input: 11,
                output: 3
            }
        );
    }

    /// One request to a loopback endpoint that answers `reply` (with
    /// `content_type`); the request's head and body come back.
    async fn one_exchange(
        content_type: &'static str,
        reply: String,
    ) -> (String, tokio::task::JoinHandle<(String, Value)>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let served = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = Vec::new();
            let mut chunk = [0u8; 8192];
            let (head, body) = loop {
                let n = s.read(&mut chunk).await.unwrap();
                buf.extend_from_slice(&chunk[..n]);
                if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&buf[..i]).to_string();
                    let length: usize = head
                        .to_lowercase()
                        .lines()
                        .find_map(|l| {
                            l.strip_prefix("content-length:")
                                .map(|v| v.trim().parse().unwrap())
                        })
                        .unwrap();
                    while buf.len() < i + 4 + length {
                        let n = s.read(&mut chunk).await.unwrap();
                        buf.extend_from_slice(&chunk[..n]);
                    }
                    break (
                        head,
                        serde_json::from_slice(&buf[i + 4..i + 4 + length]).unwrap(),
                    );
                }
            };
            let answer = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nConnection: close\r\n\r\n{reply}"
            );
            s.write_all(answer.as_bytes()).await.unwrap();
            s.shutdown().await.unwrap();
            (head, body)
        });
        (url, served)
    }

    #[tokio::test]
    async fn anthropic_streams_over_http_with_its_headers_and_shows_the_text_as_it_comes() {
        let events = concat!(
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n",
            "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
            "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Load is \"}}\n\n",
            "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"low.\"}}\n\n",
            "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":4}}\n\n",
            "data: {\"type\":\"message_stop\"}\n\n",
        );
        let (url, served) = one_exchange("text/event-stream", events.to_string()).await;
        let model = Anthropic {
            dialer: Arc::new(aromba_relay_proto::client::Direct),
            endpoint: BaseUrl::parse(&url).unwrap(),
            model: "claude-test".into(),
            key: Some("sk-ant-test".into()),
            roots: None,
        };
        let shown = std::sync::Mutex::new(Vec::<String>::new());
        let reply = model
            .complete_streamed(
                &[Message::System("s".into()), Message::User("load?".into())],
                Some(&crate::assistant::tools::definitions()),
                &|t: &str| shown.lock().unwrap().push(t.to_string()),
            )
            .await
            .unwrap();
        assert_eq!(reply.text, "Load is low.");
        assert_eq!(
            reply.usage,
            Usage {
                input: 12,
                output: 4
            }
        );
        assert!(shown.lock().unwrap().contains(&"Load is low.".to_string()));
        let (head, body) = served.await.unwrap();
        let head = head.to_lowercase();
        assert!(head.starts_with("post /v1/messages "), "{head}");
        assert!(head.contains("x-api-key: sk-ant-test"), "{head}");
        assert!(head.contains("anthropic-version: 2023-06-01"), "{head}");
        assert!(!head.contains("authorization"), "{head}");
        assert_eq!(body["stream"], true);
        assert_eq!(body["system"], "s");
        assert_eq!(body["tools"][0]["name"], "disk_usage");
    }

    #[tokio::test]
    async fn an_endpoint_that_answers_whole_is_read_whole() {
        let whole = json!({"choices": [{"message": {"role": "assistant", "content": "Fine."}}],
                           "usage": {"prompt_tokens": 3, "completion_tokens": 1}});
        let (url, served) = one_exchange("application/json", whole.to_string()).await;
        let model = OpenAi {
            dialer: Arc::new(aromba_relay_proto::client::Direct),
            endpoint: BaseUrl::parse(&url).unwrap(),
            model: "local".into(),
            key: None,
            roots: None,
        };
        let reply = model
            .complete(&[Message::User("ok?".into())], None)
            .await
            .unwrap();
        assert_eq!(reply.text, "Fine.");
        let (head, body) = served.await.unwrap();
        assert!(
            head.to_lowercase()
                .starts_with("post /v1/chat/completions ")
        );
        assert!(
            !head.to_lowercase().contains("authorization"),
            "no key, no header"
        );
        assert_eq!(body["stream_options"]["include_usage"], true);
    }
}
