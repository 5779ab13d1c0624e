//! The model behind the assistant: one small trait ([`Model`]) and the
//! OpenAI-compatible chat-completions client ([`OpenAi`], which also
//! serves Ollama, llama.cpp and vLLM) over the Worker's network gate. The
//! endpoint's host must be listed in `network.toml` like any other.

use crate::config::BaseUrl;
use crate::http::{Ask, HttpError, request};
use aromba_proto::client::Dialer;
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
    #[error("the model's endpoint answered {status}: {message}")]
    Status { status: u16, message: String },
    #[error("the model's answer is not one I can read: {0}")]
    Malformed(String),
    #[error("the model did not answer within {0} seconds")]
    Timeout(u64),
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
    let v: Value =
        serde_json::from_slice(body).map_err(|e| ModelError::Malformed(e.to_string()))?;
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
        let mut body = json!({
            "model": self.model,
            "messages": openai_messages(messages),
        });
        if let Some(tools) = tools {
            body["tools"] = tools.clone();
        }
        let path = self.endpoint.file("chat/completions");
        let ask = Ask {
            method: hyper::Method::POST,
            path: &path,
            body: Some(("application/json", body.to_string())),
            cap: MAX_ANSWER,
            bearer: self.key.clone(),
        };
        let answer = tokio::time::timeout(
            Duration::from_secs(TIMEOUT_S),
            request(
                self.dialer.as_ref(),
                &self.endpoint.origin,
                self.roots.clone(),
                ask,
            ),
        )
        .await
        .map_err(|_| ModelError::Timeout(TIMEOUT_S))??;
        if answer.status != 200 {
            let message = serde_json::from_slice::<Value>(&answer.body)
                .ok()
                .and_then(|v| {
                    v.pointer("/error/message")
                        .and_then(Value::as_str)
                        .map(String::from)
                })
                .unwrap_or_else(|| "no reason given".into());
            return Err(ModelError::Status {
                status: answer.status,
                message: message
                    .chars()
                    .filter(|c| !c.is_control())
                    .take(200)
                    .collect(),
            });
        }
        openai_reply(&answer.body)
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
}
