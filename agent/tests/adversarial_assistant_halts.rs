//! Halts while the assistant answers. The attacker: a model endpoint that
//! answers slowly, round after round, or streams without end, the owner's
//! key in every request it gets. What it tries: to go on being asked, and
//! sent the key, after the owner's `/panic` or once the ladder is at
//! Freeze, and to hold the chat so that `/panic` waits for the whole
//! answer. What holds: `/panic` is answered at once; the stream under way
//! is closed within seconds and its message ends as stopped; no request
//! with the key follows; and at Freeze no question reaches the model.
//!
//! End to end: the real Worker, a real Warden (on a clock the test moves),
//! a real relay with the fake Bot API, a scripted model (`model_fake`,
//! `model_fake::streamed`). Each test's doc says what the attack did when
//! it was found; the test keeps it out. Cut while an answer runs:
//! `adversarial_ai_key.rs`; `/panic` while the chat is busy with a chore:
//! `adversarial_panic_path.rs`.

/// The same threat met in-process: the assistant's loop against a scripted
/// model, no relay, no Warden.
#[path = "adversarial_assistant_halts/in_process.rs"]
mod in_process;

use aromba_testkit::model_fake;
use aromba_testkit::paired;

use model_fake::streamed::{self, Streamed, text_event, usage_event};
use model_fake::{Canned, KEY, Script, say, slow_looker, with_model, with_model_setup};
use paired::{CHAT, Setup, TEST_CLOCK, ladder, said};
use sqlx::PgPool;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The chat serves one message at a time: a /panic sent while a question
/// is being answered waits for the whole answer (up to eight rounds of two
/// minutes each from a slow endpoint), and the key goes on being sent.
#[sqlx::test(migrations = false)]
async fn a_panic_sent_during_a_slow_answer_waits_for_the_whole_answer(db: PgPool) {
    let (p, model) = with_model(db, "round-panic-slow", slow_looker(Duration::from_secs(3))).await;
    p.bot.fake.user_message(CHAT, "anything wrong?");
    for _ in 0..200 {
        if !model.asked().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!model.asked().is_empty(), "the model was never asked");
    let sent = Instant::now();
    let before = p.bot.fake.sent_to(CHAT).len();
    p.bot.fake.user_message(CHAT, "/panic");
    p.next(before, |t| t.contains("reads only")).await;
    let took = sent.elapsed();
    let keyed_after: usize = model
        .asked()
        .iter()
        .filter(|a| a.at > sent + Duration::from_millis(200) && a.authorization.contains(KEY))
        .count();
    assert!(
        took < Duration::from_secs(5) && keyed_after == 0,
        "/panic was answered {took:?} after it was sent; the key went to the model {keyed_after} times after it"
    );
}

/// A stream that trickles a piece every half second for a minute; once a
/// partial answer shows, /panic. The stream must be closed at once (the
/// model stops generating on the owner's key), the answer's message must
/// end as "stopped" (no partial edit lands after it), and no request with
/// the key may follow.
#[sqlx::test(migrations = false)]
async fn a_panic_mid_stream_closes_it_and_the_key_is_not_sent_again(db: PgPool) {
    let script: streamed::Script = Arc::new(|_, _| {
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
    let (p, model) = streamed::with_model(db, "round2-panic-stream", script).await;
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

/// SECURITY.md, the ladder: "2 Freeze — every chore and assistant request
/// is refused". The Worker refuses the assistant only at Cut
/// (`ask::standing`): at Freeze, once the minute of pacing has passed, the
/// question goes to the model, key and all.
#[sqlx::test(migrations = false)]
async fn at_freeze_the_assistant_still_asks_the_model(db: PgPool) {
    let setup = Setup {
        adjust: |o| o.clock = TEST_CLOCK.clone(),
        ..Setup::default()
    };
    let script: Script = Arc::new(|_, _, _| Canned::ok(say("Fine.")));
    let (p, model) = with_model_setup(db, "round-freeze", setup, script, |_| {}).await;
    let clock = TEST_CLOCK.clone();
    // Two reads of a secret path, a paced minute apart: Slow, then Freeze.
    for _ in 0..10 {
        if ladder(&p).starts_with("ladder: freeze") {
            break;
        }
        clock.advance(61);
        let _ = p
            .warden
            .ask(&["du", "-x", "-h", "--max-depth=1", "/root/.ssh"]);
    }
    let step = ladder(&p);
    assert!(step.starts_with("ladder: freeze"), "{step}");
    // The Worker tells the chat (and would have stopped its assistant).
    // The move to Freeze, as the chat says it: "Was that you?" with what
    // stopped (or the Warden's own sentence when it cannot ask).
    p.next(0, |t| {
        t.contains("More unusual activity")
            || t.contains("I've stopped my schedule and the assistant")
    })
    .await;
    // The paced minute passes; the person asks.
    let mut replies = Vec::new();
    for i in 0..4 {
        clock.advance(61);
        let reply = p
            .ask(&format!("anything wrong {i}?"), |t| {
                t.contains("tokens in") || t.starts_with("I cannot tell") || t.contains("assistant")
            })
            .await;
        replies.push(reply.text.clone());
        if reply.text.contains("tokens in") {
            break;
        }
    }
    let asked = model.asked();
    assert!(
        asked.is_empty(),
        "at Freeze the model was asked {} times (key: {}): {replies:?}",
        asked.len(),
        asked.iter().any(|a| a.authorization.contains(KEY))
    );
}
