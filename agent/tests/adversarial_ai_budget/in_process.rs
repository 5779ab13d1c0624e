//! The AI token budget overspent, at the unit level. The attackers: an
//! endpoint's token counts (near `u64::MAX`, in answers and in stream
//! events) and an injected loop of long reads. What they try: to wrap the
//! sum to a small count, or to spend far past what is left of a question's
//! budget in its rounds. What holds: the counts saturate, and a round that
//! would pass what is left is not begun. End to end:
//! `agent/tests/adversarial_ai_budget.rs`.

use aromba::assistant::conversation::{self, Host, Limits, answer};
use aromba::assistant::model::{Message, Model, ModelError, Reply, ToolCall, Usage};
use aromba::assistant::stream::{AnthropicStream, Events};
use aromba_testkit::model::{Scripted, Server, reply, text};

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
        answer(&model, &server, "q", aromba_testkit::model::NO_LIMITS)
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

/// Huge usage numbers in stream events saturate instead of wrapping
/// (held): u64::MAX in and out is still u64::MAX in total.
#[test]
fn huge_usage_in_stream_events_saturates() {
    let mut s = AnthropicStream::default();
    let max = u64::MAX;
    s.feed(format!("data: {{\"type\":\"message_start\",\"message\":{{\"usage\":{{\"input_tokens\":{max},\"output_tokens\":1}}}}}}\n").as_bytes())
        .unwrap();
    s.feed(
        format!("data: {{\"type\":\"message_delta\",\"usage\":{{\"output_tokens\":{max}}}}}\n")
            .as_bytes(),
    )
    .unwrap();
    let r = s.reply().unwrap();
    assert_eq!(r.usage.total(), u64::MAX);
}

/// A model that reads the biggest result it can, eight times a round, for
/// as long as it is let: what an injected "check everything again" does.
struct Burner;

impl Model for Burner {
    async fn complete(
        &self,
        messages: &[Message],
        _tools: Option<&serde_json::Value>,
    ) -> Result<Reply, ModelError> {
        let round = messages
            .iter()
            .filter(|m| matches!(m, Message::Assistant { .. }))
            .count();
        let input = messages.iter().map(Message::chars).sum::<usize>() as u64 / 4;
        Ok(Reply {
            text: String::new(),
            calls: (0..8)
                .map(|i| ToolCall {
                    id: format!("c{round}-{i}"),
                    name: "journal".into(),
                    arguments: serde_json::json!({"lines": 400 + round * 8 + i}).to_string(),
                })
                .collect(),
            usage: Usage { input, output: 50 },
        })
    }
}

/// A host whose journal is as long as a result may be.
struct Long;

impl Host for Long {
    async fn read(&self, _cmd: String, _args: Vec<String>) -> Result<String, String> {
        Ok("Dec 04 09:12:01 web1 app[812]: a long line of the journal\n".repeat(1_000))
    }

    async fn chores(&self) -> Vec<String> {
        vec![]
    }
}

/// Found by the review: an injected instruction made one question cost
/// about 0.7 M input tokens, the budget looked at only between rounds. The
/// round that would pass what is left is not begun.
#[tokio::test]
async fn an_injected_loop_of_long_reads_stops_at_the_questions_budget() {
    let left = aromba::daemon::ask::MAX_PER_QUESTION;
    let limits = Limits {
        prod_mode: false,
        tokens_left: Some(left),
    };
    let answer = conversation::answer(&Burner, &Long, "what is in the journal?", limits)
        .await
        .expect("an answer");
    assert!(
        answer.usage.total() < left,
        "{} tokens against {left} left",
        answer.usage.total()
    );
    assert_eq!(answer.text, conversation::BUDGET_SPENT);
}
