//! Streamed answers: both APIs send a completion as server-sent events
//! when asked to (`"stream": true`), each event a `data:` line of JSON. The
//! pieces are put together here into the same [`Reply`] a whole answer
//! gives — text, tool calls, usage — and the text so far is there to show
//! while the rest comes. Bounds: the body's cap (the caller's), at most
//! [`MAX_CALLS`] tool calls, names and ids cut as in a whole answer.
//!
//! ```ignore
//! let mut s = OpenAiStream::default();
//! s.feed(b"data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n")?;
//! assert_eq!(s.text(), "Hi");
//! ```

use super::model::{ModelError, Reply, ToolCall, Usage};
use serde_json::Value;
use std::collections::BTreeMap;

/// The most tool calls one streamed answer may make (as a whole one).
pub const MAX_CALLS: u64 = 16;
/// A tool call's arguments, at most (bytes).
const MAX_ARGUMENTS: usize = 64 * 1024;

/// An event stream of one API, put together as its bytes come.
pub trait Events: Default + Send {
    /// More of the body.
    fn feed(&mut self, bytes: &[u8]) -> Result<(), ModelError>;
    /// The answer's text so far.
    fn text(&self) -> &str;
    /// The usage the endpoint reported so far.
    fn usage(&self) -> Usage;
    /// The whole answer, once the body ended.
    fn reply(self) -> Result<Reply, ModelError>;
}

/// The tool calls put together, in their order; each must have a name.
fn calls(
    calls: BTreeMap<u64, Partial>,
    empty_arguments: &str,
) -> Result<Vec<ToolCall>, ModelError> {
    if calls.values().any(|c| c.name.is_empty()) {
        return Err(ModelError::Malformed("a tool call without a name".into()));
    }
    Ok(calls
        .into_values()
        .map(|mut c| {
            if c.arguments.is_empty() {
                c.arguments = empty_arguments.into();
            }
            c.call()
        })
        .collect())
}

/// The `data:` payloads of an event stream, as its bytes come.
#[derive(Default)]
struct Lines {
    pending: Vec<u8>,
    /// How much of `pending` is known to hold no newline: a long line in
    /// small pieces is searched once, not again with every piece.
    searched: usize,
}

impl Lines {
    /// The complete `data:` lines in `bytes` (with what came before), in
    /// order, up to and with the first that is not UTF-8: the lines before
    /// it are read as they would be in any other cutting of the stream
    /// (found by the `sse_stream` fuzz target: a piece with good lines and
    /// then a bad one lost its good lines).
    fn feed(&mut self, bytes: &[u8]) -> Vec<Result<String, ModelError>> {
        self.pending.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some(at) = self.pending[self.searched..]
            .iter()
            .position(|&b| b == b'\n')
            .map(|i| i + self.searched)
        {
            self.searched = 0;
            let line: Vec<u8> = self.pending.drain(..=at).collect();
            let Ok(line) = std::str::from_utf8(&line) else {
                out.push(Err(ModelError::Malformed(
                    "an event that is not UTF-8".into(),
                )));
                return out;
            };
            if let Some(data) = line.trim_end_matches(['\r', '\n']).strip_prefix("data:") {
                out.push(Ok(data.trim_start().to_string()));
            }
        }
        self.searched = self.pending.len();
        out
    }
}

fn event(data: &str) -> Result<Value, ModelError> {
    serde_json::from_str(data).map_err(|e| {
        ModelError::Malformed(format!(
            "an event that is not JSON (line {}, column {})",
            e.line(),
            e.column()
        ))
    })
}

/// A tool call as its pieces come.
#[derive(Default)]
struct Partial {
    id: String,
    name: String,
    arguments: String,
}

impl Partial {
    fn call(self) -> ToolCall {
        ToolCall {
            id: self.id.chars().take(128).collect(),
            name: self.name.chars().take(64).collect(),
            arguments: self.arguments,
        }
    }

    fn more_arguments(&mut self, piece: &str) -> Result<(), ModelError> {
        if self.arguments.len() + piece.len() > MAX_ARGUMENTS {
            return Err(ModelError::Malformed(
                "a tool call's arguments are too long".into(),
            ));
        }
        self.arguments.push_str(piece);
        Ok(())
    }
}

fn index(v: &Value) -> Result<u64, ModelError> {
    let i = v.get("index").and_then(Value::as_u64).unwrap_or(0);
    if i >= MAX_CALLS {
        return Err(ModelError::Malformed(format!(
            "more than {MAX_CALLS} tool calls"
        )));
    }
    Ok(i)
}

fn error_event(v: &Value) -> Option<ModelError> {
    // The provider's own words are not kept (they go to the chat).
    v.get("error")
        .map(|_| ModelError::Malformed("the endpoint ended its answer with an error".into()))
}

/// An OpenAI-compatible stream: `choices[0].delta` pieces, `[DONE]` last,
/// the usage in a last event (`stream_options.include_usage`).
#[derive(Default)]
pub struct OpenAiStream {
    lines: Lines,
    text: String,
    calls: BTreeMap<u64, Partial>,
    usage: Usage,
    done: bool,
}

impl Events for OpenAiStream {
    fn feed(&mut self, bytes: &[u8]) -> Result<(), ModelError> {
        for data in self.lines.feed(bytes) {
            let data = data?;
            if self.done {
                continue;
            }
            if data == "[DONE]" {
                self.done = true;
                continue;
            }
            let v = event(&data)?;
            if let Some(e) = error_event(&v) {
                return Err(e);
            }
            if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
                let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
                self.usage = Usage {
                    input: n("prompt_tokens"),
                    output: n("completion_tokens"),
                };
            }
            let Some(delta) = v.pointer("/choices/0/delta") else {
                continue;
            };
            if let Some(t) = delta.get("content").and_then(Value::as_str) {
                self.text.push_str(t);
            }
            for c in delta
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let call = self.calls.entry(index(c)?).or_default();
                if let Some(id) = c.get("id").and_then(Value::as_str) {
                    call.id = id.chars().take(128).collect();
                }
                if let Some(name) = c.pointer("/function/name").and_then(Value::as_str) {
                    call.name.push_str(name);
                    call.name = call.name.chars().take(64).collect();
                }
                if let Some(a) = c.pointer("/function/arguments").and_then(Value::as_str) {
                    call.more_arguments(a)?;
                }
            }
        }
        Ok(())
    }

    fn text(&self) -> &str {
        &self.text
    }

    fn usage(&self) -> Usage {
        self.usage
    }

    fn reply(self) -> Result<Reply, ModelError> {
        Ok(Reply {
            calls: calls(self.calls, "")?,
            text: self.text,
            usage: self.usage,
        })
    }
}

/// An Anthropic Messages stream: `content_block_start` and
/// `content_block_delta` pieces, the usage in `message_start` (in) and
/// `message_delta` (out).
#[derive(Default)]
pub struct AnthropicStream {
    lines: Lines,
    text: String,
    calls: BTreeMap<u64, Partial>,
    usage: Usage,
}

impl Events for AnthropicStream {
    fn feed(&mut self, bytes: &[u8]) -> Result<(), ModelError> {
        for data in self.lines.feed(bytes) {
            let data = data?;
            let v = event(&data)?;
            if let Some(e) = error_event(&v) {
                return Err(e);
            }
            match v.get("type").and_then(Value::as_str).unwrap_or_default() {
                "message_start" => {
                    let n = |p: &str| v.pointer(p).and_then(Value::as_u64).unwrap_or(0);
                    self.usage.input = n("/message/usage/input_tokens");
                    self.usage.output = n("/message/usage/output_tokens");
                }
                "content_block_start" => {
                    let block = v.get("content_block").cloned().unwrap_or_default();
                    if block["type"] == "tool_use" {
                        let call = self.calls.entry(index(&v)?).or_default();
                        call.id = block["id"].as_str().unwrap_or_default().to_string();
                        call.name = block["name"]
                            .as_str()
                            .unwrap_or_default()
                            .chars()
                            .take(64)
                            .collect();
                    } else if let Some(t) = block.get("text").and_then(Value::as_str) {
                        self.text.push_str(t);
                    }
                }
                "content_block_delta" => {
                    let delta = v.get("delta").cloned().unwrap_or_default();
                    match delta["type"].as_str().unwrap_or_default() {
                        "text_delta" => self
                            .text
                            .push_str(delta["text"].as_str().unwrap_or_default()),
                        "input_json_delta" => {
                            let call = self.calls.entry(index(&v)?).or_default();
                            call.more_arguments(
                                delta["partial_json"].as_str().unwrap_or_default(),
                            )?;
                        }
                        _ => {}
                    }
                }
                "message_delta" => {
                    if let Some(out) = v.pointer("/usage/output_tokens").and_then(Value::as_u64) {
                        self.usage.output = out;
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn text(&self) -> &str {
        &self.text
    }

    fn usage(&self) -> Usage {
        self.usage
    }

    fn reply(self) -> Result<Reply, ModelError> {
        Ok(Reply {
            // A tool without parameters streams no arguments.
            calls: calls(self.calls, "{}")?,
            text: self.text,
            usage: self.usage,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn puts_an_openai_stream_together_across_any_cut() {
        let stream = concat!(
            "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"Disk \"}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"content\":\"is fine.\"}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"disk_usage\",\"arguments\":\"\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"path\\\":\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"/var\\\"}\"}}]}}]}\n\n",
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":40,\"completion_tokens\":9}}\n\n",
            "data: [DONE]\n\n",
        )
        .as_bytes();
        // Cut at every byte: the same reply.
        for cut in [1, 7, 64, stream.len()] {
            let mut s = OpenAiStream::default();
            for piece in stream.chunks(cut) {
                s.feed(piece).unwrap();
            }
            assert_eq!(s.text(), "Disk is fine.");
            let r = s.reply().unwrap();
            assert_eq!(r.calls.len(), 1);
            assert_eq!(r.calls[0].name, "disk_usage");
            assert_eq!(r.calls[0].id, "c1");
            assert_eq!(r.calls[0].arguments, "{\"path\":\"/var\"}");
            assert_eq!(
                r.usage,
                Usage {
                    input: 40,
                    output: 9
                }
            );
        }
    }

    #[test]
    fn puts_an_anthropic_stream_together() {
        let stream = concat!(
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Let me look.\"}}\n\n",
            "data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"memory\",\"input\":{}}}\n\n",
            "data: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t2\",\"name\":\"disk_usage\",\"input\":{}}}\n\n",
            "data: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"path\\\": \\\"/\\\"}\"}}\n\n",
            "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":15}}\n\n",
            "data: {\"type\":\"message_stop\"}\n\n",
        );
        let mut s = AnthropicStream::default();
        s.feed(stream.as_bytes()).unwrap();
        let r = s.reply().unwrap();
        assert_eq!(r.text, "Let me look.");
        assert_eq!(r.calls[0].name, "memory");
        assert_eq!(r.calls[0].arguments, "{}");
        assert_eq!(r.calls[1].arguments, "{\"path\": \"/\"}");
        assert_eq!(
            r.usage,
            Usage {
                input: 25,
                output: 15
            }
        );
    }

    #[test]
    fn refuses_a_hostile_stream() {
        let mut s = OpenAiStream::default();
        assert!(s.feed(b"data: {not json\n").is_err());
        let mut s = OpenAiStream::default();
        let many = format!(
            "data: {{\"choices\":[{{\"delta\":{{\"tool_calls\":[{{\"index\":{MAX_CALLS},\"function\":{{\"name\":\"load\"}}}}]}}}}]}}\n"
        );
        assert!(s.feed(many.as_bytes()).is_err());
        let mut s = OpenAiStream::default();
        assert!(
            s.feed(b"data: {\"error\":{\"message\":\"sk-secret-key quoted\"}}\n")
                .is_err_and(|e| !e.to_string().contains("sk-secret"))
        );
        let mut s = OpenAiStream::default();
        s.feed(b"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{}\"}}]}}]}\n")
            .unwrap();
        assert!(s.reply().is_err(), "a call without a name");
        let mut s = AnthropicStream::default();
        let long = format!(
            "data: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}}}\n",
            "x".repeat(MAX_ARGUMENTS + 1)
        );
        assert!(s.feed(long.as_bytes()).is_err());
    }
}
