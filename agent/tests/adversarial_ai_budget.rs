//! The AI token budget overspent. The attackers: a model endpoint (its
//! token counts, its rounds, a stream that breaks after it reported its
//! usage, an output it is never told to bound), a line planted in what the
//! model reads ("write the whole file out"), and a relay that types in the
//! chat (`/ai budget off`, `/ai budget 100000000`). What they try: to
//! spend the owner's tokens past the day's budget or one question's cap.
//! What holds: each completion's tokens count as they come (a failed
//! round's and a broken stream's too), the budget is looked at before each
//! round, counts near `u64::MAX` do not wrap, every completion asks for no
//! more output than the question has left, and neither `/ai budget off`
//! nor a raised budget lifts root's ceiling of 200,000 tokens a day.
//!
//! End to end: the real Worker and a real Warden, with a real relay and
//! the fake Bot API or, where the relay is the attacker, a relay played
//! over the real protocol (`hostile_relay`), and a scripted model
//! (`model_fake`, `model_fake::streamed`). Each test's doc says what the
//! attack did when it was found; the test keeps it out. The loop's count
//! at the unit level: `agent/tests/adversarial_ai_budget/in_process.rs`.

/// The same threat met in-process: the assistant's loop against a scripted
/// model, no relay, no Warden.
#[path = "adversarial_ai_budget/in_process.rs"]
mod in_process;

use aromba_testkit::hostile_relay;
use aromba_testkit::model_fake;
use aromba_testkit::paired;

use aromba_relay_proto::frame::{Body, Delivery};
use hostile_relay::up_with;
use model_fake::streamed::{self, Streamed, text_event, usage_event};
use model_fake::{Canned, Script, calls, fake_model, say, say_usage, with_model};
use paired::{CHAT, Setup, paired_with, said, settle, watch_until};
use serde_json::json;
use sqlx::PgPool;
use std::sync::Arc;
use std::time::Duration;

// ---------------------------------------------------------------------
// A hostile endpoint against the budget.
// ---------------------------------------------------------------------

/// Usage was added only when the whole answer succeeded: the tokens of
/// every round before a failed one were never counted. Now each
/// completion's tokens count as they come.
#[sqlx::test(migrations = false)]
async fn tokens_of_a_question_whose_last_round_fails_are_not_counted(db: PgPool) {
    let script: Script = Arc::new(|round, _, _| match round % 2 {
        0 => Canned::ok(calls(&[("memory", json!({}))], 5_000, 100)),
        _ => Canned {
            status: 500,
            body: json!({"error": {"message": "overloaded"}}).to_string(),
            delay: Duration::ZERO,
            stream: None,
        },
    });
    let (p, model) = with_model(db, "round-budget-fail", script).await;
    p.ask("/ai budget 20000", |t| {
        t.starts_with("The daily budget is 20000")
    })
    .await;
    p.ask("anything wrong?", |t| {
        said(t).starts_with("The assistant could not answer")
    })
    .await;
    p.ask("and now?", |t| {
        said(t).starts_with("The assistant could not answer")
    })
    .await;
    let status = p.ask("/ai", |t| t.starts_with("Today:")).await;
    assert_eq!(model.asked().len(), 4, "both questions reached the model");
    assert_eq!(
        status.text, "Today: 10200 of 20000 tokens (root's ceiling is 200000).",
        "10,200 tokens were spent"
    );
}

/// The endpoint streams its usage (5,000 tokens in, 50 out) and then an
/// event that is not JSON: the round fails, and `host.spent` is only called
/// for a round that succeeded — the tokens the stream reported (and the
/// provider billed) are never counted against the day's budget.
#[sqlx::test(migrations = false)]
async fn tokens_a_stream_reported_before_it_broke_are_counted(db: PgPool) {
    let script: streamed::Script = Arc::new(|_, _| Streamed {
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
    let (p, _model) = streamed::with_model(db, "round2-usage-broken", script).await;
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

/// The budget is looked at once, before the question: one question runs
/// its eight rounds whatever they cost.
#[sqlx::test(migrations = false)]
async fn one_question_spends_far_past_the_daily_budget(db: PgPool) {
    let tools = [
        "memory",
        "load",
        "containers",
        "listening_sockets",
        "pending_updates",
    ];
    let script: Script = Arc::new(move |round, _, _| match tools.get(round) {
        Some(t) => Canned::ok(calls(&[(t, json!({}))], 10_000, 100)),
        None => Canned::ok(say_usage("Fine.", 10_000, 100)),
    });
    let (p, model) = with_model(db, "round-budget-one", script).await;
    p.ask("/ai budget 1000", |t| {
        t.starts_with("The daily budget is 1000")
    })
    .await;
    p.ask("anything wrong?", |t| t.contains("tokens in")).await;
    let asked = model.asked().len();
    assert!(
        asked <= 1,
        "the model was asked {asked} times, 10,100 tokens each, on a budget of 1000"
    );
}

/// Token counts are the endpoint's word, summed unchecked: a count near
/// u64::MAX overflows (a panic in a debug build, which loses the answer;
/// a wrap in a release build, which resets the day's count).
#[sqlx::test(migrations = false)]
async fn usage_counts_near_u64_max_overflow_the_budget(db: PgPool) {
    let script: Script = Arc::new(|_, _, _| {
        Canned::ok(
            json!({"choices": [{"message": {"role": "assistant", "content": "Fine."}}],
                          "usage": {"prompt_tokens": u64::MAX, "completion_tokens": 2}}),
        )
    });
    let (p, _model) = with_model(db, "round-budget-overflow", script).await;
    p.ask("/ai budget 1000", |t| {
        t.starts_with("The daily budget is 1000")
    })
    .await;
    let before = p.bot.fake.sent_to(CHAT).len();
    p.bot.fake.user_message(CHAT, "anything wrong?");
    let seen = watch_until(&p, before, Duration::from_secs(20), |t| {
        t.contains("tokens in")
    })
    .await;
    assert!(
        seen.iter().any(|t| t.contains("tokens in")),
        "the answer never came: {seen:?}"
    );
    let status = p.ask("/ai", |t| t.starts_with("Today:")).await;
    assert!(
        !status.text.starts_with("Today: 0 of") && !status.text.starts_with("Today: 1 of"),
        "{:?}",
        status.text
    );
    p.ask("one more?", |t| {
        t.starts_with("Today's AI budget (1000 tokens) is spent")
    })
    .await;
}

/// Issue 29 item 6: "an injected instruction can make one question cost
/// about 0.7 M input tokens … check the budget within a round, not only
/// between rounds". The Worker caps a question at `MAX_PER_QUESTION`
/// (60,000) by looking before each round, but an OpenAI-shaped request
/// carries no bound on the answer it asks for (`max_tokens` /
/// `max_completion_tokens`): one round's output is the endpoint's to
/// choose, and a model told by a log line to "write the whole file out"
/// spends whatever the provider allows in one round. The request must
/// bound the completion by what is left of the question's cap.
#[sqlx::test(migrations = false)]
async fn one_completion_asks_for_no_more_tokens_than_the_question_has_left(db: PgPool) {
    let model = fake_model(Arc::new(|_, _, _| Canned::ok(say("All fine.")))).await;
    let url = model.url.clone();
    let p = paired_with(db, "r29-max-out", Setup::default(), move |w| {
        model_fake::assistant_files(w, &url, "max-out")
    })
    .await;
    let said = settle(&p, "how is the load today?").await;
    assert!(said.contains("tokens in"), "{said}");
    let asked = model.asked();
    assert!(!asked.is_empty(), "the model was asked");
    for a in &asked {
        let cap = a.body["max_tokens"]
            .as_u64()
            .or_else(|| a.body["max_completion_tokens"].as_u64());
        assert!(
            cap.is_some_and(|c| c <= 60_000),
            "a completion was asked for with no bound on its output: {}",
            serde_json::to_string(&a.body)
                .unwrap_or_default()
                .chars()
                .filter(|c| *c != '\n')
                .take(300)
                .collect::<String>()
        );
    }
}

// ---------------------------------------------------------------------
// A relay typing in the chat against the day's budget.
// ---------------------------------------------------------------------

/// Four questions, each answer reporting 150,000 tokens, after `first`
/// (if any) was typed; how many reached the model.
async fn four_costly_questions(name: &str, first: Option<&str>) -> usize {
    let model = model_fake::fake_model(Arc::new(|_, _, _| {
        model_fake::Canned::ok(model_fake::say_usage("All fine.", 150_000, 10))
    }))
    .await;
    let url = model.url.clone();
    let (_w, relay, _d) = up_with(name, move |w| {
        model_fake::assistant_files(w, &url, "budget")
    })
    .await;
    let message = |t: &str| Delivery::Message { text: t.into() };
    if let Some(first) = first {
        relay.deliver(message(first));
    }
    for i in 0..4 {
        let before = relay.seen().len();
        relay.deliver(message(&format!("question {i}: how is the disk?")));
        // Wait for the answer (an edit with the footer) or a refusal.
        for _ in 0..300 {
            let done = relay.seen().into_iter().skip(before).any(|b| match b {
                Body::Edit { text, .. } => text.contains("tokens in"),
                Body::Send { text, .. } => text.contains("budget"),
                _ => false,
            });
            if done {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    model.asked().len()
}

/// SECURITY.md, "The trust the relay holds": a relay can type "questions
/// to the assistant (spending the owner's tokens, up to the daily
/// budget)". The budget is the chat's to remove: a relay that types
/// `/ai budget off` first spends without a daily bound (one question at
/// most 60,000 tokens, a question every few seconds). Here each answer
/// reports 150,000 tokens; the default daily budget is 200,000, so the
/// third question should never reach the model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_cannot_spend_past_the_daily_budget_by_typing_ai_budget_off() {
    let _one = hostile_relay::alone().await;
    let asked = four_costly_questions("r29-budget-off", Some("/ai budget off")).await;
    assert!(
        asked <= 2,
        "the model was asked {asked} times, {} tokens in all, against a default daily budget of 200,000",
        asked * 150_010
    );
}

/// The same with `/ai budget 100000000` (the most the chat may set).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_cannot_spend_past_the_daily_budget_by_raising_it() {
    let _one = hostile_relay::alone().await;
    let asked = four_costly_questions("r29-budget-up", Some("/ai budget 100000000")).await;
    assert!(
        asked <= 2,
        "the model was asked {asked} times, {} tokens in all, against a default daily budget of 200,000",
        asked * 150_010
    );
}

/// Control (held): with the default budget untouched, the third costly
/// question is refused before the model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_daily_budget_stops_costly_questions() {
    let _one = hostile_relay::alone().await;
    let asked = four_costly_questions("r29-budget-default", None).await;
    assert!(asked <= 2, "the model was asked {asked} times");
}
