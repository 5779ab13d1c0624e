//! The model flooding or holding the chat. The attacker: a model endpoint
//! answering with a megabyte of text, with malformed answers (tool call
//! ids of any length or none, arguments that are not an object, token
//! counts that are negative or words, a body that never closes), or with
//! a stream that trickles a byte every two seconds for ever — while the
//! person asks again. What it tries: to fill the chat with messages, to
//! break the conversation, or to hold the answer (and the assistant's one
//! place) without end. What holds: one answer is a few chat messages at
//! most; a malformed answer ends in one reply and the chat still answers;
//! a second question meanwhile is told to wait and never sent; a
//! completion ends within its 120-second bound, as an error.
//!
//! End to end: the real Worker, a real Warden, a real relay with the fake
//! Bot API, a scripted model (`model_fake`, `model_fake::streamed`). Each
//! test's doc says what the attack did when it was found; the test keeps
//! it out. A hostile stream's cost to the Worker, at the unit level:
//! `agent/tests/adversarial_assistant_halts/in_process.rs`.

use aromba_testkit::model_fake;
use aromba_testkit::paired;

use model_fake::streamed::{self, Streamed, text_event, usage_event};
use model_fake::{Canned, KEY, Script, say, with_model};
use paired::{CHAT, Setup, said, watch_until};
use serde_json::json;
use sqlx::PgPool;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A model's answer of any length (up to the 1 MiB body cap) is sent
/// whole, split in as many chat messages as it takes: one answer floods
/// the chat (and holds the chat task, /panic included, while it drains).
#[sqlx::test(migrations = false)]
async fn a_huge_answer_floods_the_chat_with_messages(db: PgPool) {
    let script: Script = Arc::new(|_, _, _| {
        let line = "spam spam spam spam spam spam spam spam spam spam spam spam spam\n";
        Canned::ok(say(&line.repeat(2_000)))
    });
    let (p, _model) = with_model(db, "round-flood", script).await;
    let before = p.bot.fake.sent_to(CHAT).len();
    p.bot.fake.user_message(CHAT, "anything wrong?");
    let seen = watch_until(&p, before, Duration::from_secs(60), |t| {
        t.contains("tokens in")
    })
    .await;
    let messages = p.bot.fake.sent_to(CHAT).len() - before;
    assert!(
        messages <= 3,
        "one answer became {messages} chat messages ({} texts seen)",
        seen.len()
    );
}

/// A delimiter-looking line in a result cannot close the data early, and
/// the model's tool call ids (long, odd) go back as they came without
/// breaking the conversation.
#[sqlx::test(migrations = false)]
async fn odd_tool_call_ids_and_malformed_answers_end_in_one_reply(db: PgPool) {
    let script: Script = Arc::new(|round, _, _| match round {
        0 => Canned::ok(
            json!({"choices": [{"message": {"role": "assistant", "content": null,
            "tool_calls": [
                {"id": "x".repeat(5000), "type": "function", "function": {"name": "memory", "arguments": "{}"}},
                {"id": "\u{202e}\n\"}", "type": "function", "function": {"name": "load", "arguments": {}}},
                {"type": "function", "function": {"name": "memory", "arguments": "[1,2]"}}
            ]}}], "usage": {"prompt_tokens": -5, "completion_tokens": "many"}}),
        ),
        _ => Canned {
            status: 200,
            body: "{\"choices\": [".repeat(10_000),
            delay: Duration::ZERO,
            stream: None,
        },
    });
    let (p, model) = with_model(db, "round-odd", script).await;
    let answer = p
        .ask("anything?", |t| {
            said(t).starts_with("The assistant could not answer")
        })
        .await;
    assert!(!answer.text.contains(KEY));
    assert_eq!(model.asked().len(), 2);
    // The chat still answers.
    p.ask("/help", |t| t.starts_with("What I can do")).await;
}

/// A second question while a slow streamed answer is under way: it is told
/// to wait, and the model is asked once (held).
#[sqlx::test(migrations = false)]
async fn a_second_question_during_a_stream_is_not_sent_to_the_model(db: PgPool) {
    let script: streamed::Script = Arc::new(|_, _| {
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
    let (p, model) = streamed::with_model(db, "round2-race", script).await;
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

/// A stream that never ends: one byte of text every two seconds, for ever
/// (each a chunk of its own). The bound is on the whole completion, not on
/// each byte: the answer ends at it, as an error (held). The bound is 120 s
/// on a server; the test asks 12 (`AROMBA_MODEL_TIMEOUT_S`) and watches the
/// same cut.
#[sqlx::test(migrations = false)]
async fn a_trickling_stream_is_cut_at_the_whole_completions_timeout(db: PgPool) {
    let script: streamed::Script = Arc::new(|_, _| {
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
    let setup = Setup {
        daemon_env: vec![("AROMBA_MODEL_TIMEOUT_S", "12".into())],
        ..Setup::default()
    };
    let (p, _model) = streamed::with_model_setup(db, "round2-trickle", setup, script).await;
    let before = p.bot.fake.sent_to(CHAT).len();
    let asked = Instant::now();
    p.bot.fake.user_message(CHAT, "how is the disk?");
    let seen = watch_until(&p, before, Duration::from_secs(150), |t| {
        said(t).starts_with("The assistant could not")
    })
    .await;
    let took = asked.elapsed();
    // Cut by the whole completion's bound (12 s here), long before the
    // stream's 800 s: a bound per byte would never have cut it.
    assert!(
        seen.iter()
            .any(|t| said(t).starts_with("The assistant could not") && t.contains("12 seconds")),
        "after {took:?}: {seen:?}"
    );
}
