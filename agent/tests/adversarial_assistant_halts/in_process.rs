//! A hostile stream against the Worker. The attacker: a model endpoint
//! streaming its answer — in thousands of small events, as one event line
//! that never ends sent a byte at a time, with tool-call indexes far
//! apart, with events after `[DONE]`. What it tries: to keep a core of the
//! Worker busy (work quadratic in the answer), to make it keep calls
//! without bound, or to change the answer and its counted usage after it
//! ended. What holds: each costs the Worker little, tool-call indexes are
//! bounded, and nothing after `[DONE]` counts. End to end:
//! `agent/tests/adversarial_model_holds_the_chat.rs`.

use aromba::assistant::conversation::{self};
use aromba::assistant::model::{Message, Model, ModelError, Reply, Usage};
use aromba::assistant::stream::{Events, OpenAiStream};
use aromba_testkit::model::Quiet;

/// A model that streams `pieces` pieces of `each` characters to the
/// partial callback, as the real clients do for each event that grows the
/// text.
struct Streamer {
    pieces: usize,
    each: String,
}

impl Model for Streamer {
    async fn complete(
        &self,
        messages: &[Message],
        tools: Option<&serde_json::Value>,
    ) -> Result<Reply, ModelError> {
        self.complete_streamed(messages, tools, &|_: &str| {}).await
    }

    async fn complete_streamed(
        &self,
        _messages: &[Message],
        _tools: Option<&serde_json::Value>,
        partial: &dyn aromba::assistant::model::Progress,
    ) -> Result<Reply, ModelError> {
        let mut text = String::new();
        for _ in 0..self.pieces {
            text.push_str(&self.each);
            partial.text(&text);
        }
        Ok(Reply {
            text,
            calls: vec![],
            usage: Usage::default(),
        })
    }
}

/// The text so far is run through `without_links` (and capped) on every
/// event that grows it, before the host's 1.2 s throttle: an endpoint that
/// streams its answer in small events makes the Worker filter the whole
/// text again each time — quadratic work on the Worker's runtime. 1,000
/// events of 48 characters (about 95 KB of body, a tenth of the 1 MiB cap)
/// took 9.9 s in a debug build (500: 2.5 s, 2,000: 45 s); the cap allows
/// about 11,000 such events, so one completion keeps a core busy until the
/// 120 s timeout.
#[tokio::test]
async fn a_stream_of_small_events_costs_the_worker_little_cpu() {
    let model = Streamer {
        pieces: 1_000,
        each: "disk ok on sda1, see www notes for the detail. ".into(),
    };
    let started = std::time::Instant::now();
    let a = conversation::answer(&model, &Quiet, "q", aromba_testkit::model::NO_LIMITS)
        .await
        .expect("an answer");
    let took = started.elapsed();
    assert!(!a.text.is_empty());
    assert!(
        took < std::time::Duration::from_secs(1),
        "one streamed completion of {} characters in 1,000 events took {took:?} of the Worker's CPU",
        1_000 * 48
    );
}

/// An event line with no newline, sent a byte at a time (one chunk of a
/// chunked body each): every piece makes the parser search the whole line
/// so far for a newline again — quadratic in the line, up to the 1 MiB
/// body cap. 64 KiB in 1-byte pieces must cost little.
#[test]
fn an_endless_event_line_in_small_pieces_costs_little() {
    let mut s = OpenAiStream::default();
    let started = std::time::Instant::now();
    s.feed(b"data: {\"choices\":[{\"delta\":{\"content\":\"")
        .unwrap();
    for _ in 0..64 * 1024 {
        s.feed(b"x").unwrap();
    }
    let took = started.elapsed();
    assert!(
        took < std::time::Duration::from_secs(1),
        "64 KiB of one event line, a byte at a time, took {took:?}"
    );
}

/// Tool-call index gaps: indexes 0 and 15 make two calls, and index 16 is
/// refused (held).
#[test]
fn tool_call_index_gaps_are_bounded() {
    let mut s = OpenAiStream::default();
    for i in [0, 15] {
        let event = serde_json::json!({"choices": [{"delta": {"tool_calls": [
            {"index": i, "id": format!("c{i}"), "function": {"name": "memory", "arguments": "{}"}}]}}]});
        s.feed(format!("data: {event}\n\n").as_bytes()).unwrap();
    }
    assert_eq!(s.reply().unwrap().calls.len(), 2);
    let mut s = OpenAiStream::default();
    let event = serde_json::json!({"choices": [{"delta": {"tool_calls": [
        {"index": 16, "function": {"name": "memory"}}]}}]});
    assert!(s.feed(format!("data: {event}\n\n").as_bytes()).is_err());
}

/// Events after `[DONE]` (text, calls, a usage that would reset the
/// count) are ignored (held).
#[test]
fn events_after_done_change_nothing() {
    let mut s = OpenAiStream::default();
    s.feed(b"data: {\"choices\":[{\"delta\":{\"content\":\"ok\"}}]}\n\n")
        .unwrap();
    s.feed(b"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":900,\"completion_tokens\":90}}\n\ndata: [DONE]\n\n")
        .unwrap();
    s.feed(b"data: {\"choices\":[{\"delta\":{\"content\":\" evil.com\"}}],\"usage\":{\"prompt_tokens\":0,\"completion_tokens\":0}}\n\n")
        .unwrap();
    let r = s.reply().unwrap();
    assert_eq!(r.text, "ok");
    assert_eq!(
        r.usage,
        Usage {
            input: 900,
            output: 90
        }
    );
}
