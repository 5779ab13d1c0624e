//! The AI key leaking. The attackers: a model endpoint (or a proxy before
//! it) that quotes the key it was sent in its error message, and whoever
//! moves the ladder to Cut while an answer runs (here a honeypot opened as
//! the Worker's user). What they try: to have the owner's key shown in the
//! chat, or still sent with each round after the Warden wiped it. What
//! holds: an endpoint's error reaches the chat without the key, and at Cut
//! the Worker drops its key (`Assistant::wipe`) and the question under way
//! sends it no more.
//!
//! End to end: the real Worker, a real Warden, a real relay with the fake
//! Bot API, a scripted model (`model_fake`). Each test's doc says what the
//! attack did when it was found; the test keeps it out. The key and a
//! local user squatting the model's port: `adversarial_port_squat.rs`; the
//! key in a failed request's error, at the unit level:
//! `agent/tests/adversarial_ai_key/in_process.rs`.

/// The same threat met in-process: the assistant's loop against a scripted
/// model, no relay, no Warden.
#[path = "adversarial_ai_key/in_process.rs"]
mod in_process;

use aromba_testkit::model_fake;
use aromba_testkit::paired;
use aromba_testkit::worker as support;

use model_fake::{Asked, Canned, KEY, Script, slow_looker, with_model};
use paired::{CHAT, said};
use serde_json::json;
use sqlx::PgPool;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Some OpenAI-compatible servers (and proxies) quote the key they were
/// sent in their 401: the Worker puts that message in the chat, key and
/// all.
#[sqlx::test(migrations = false)]
async fn an_endpoint_error_quoting_the_key_puts_the_key_in_the_chat(db: PgPool) {
    let script: Script = Arc::new(|_, _, authorization| Canned {
        status: 401,
        body: json!({"error": {"message": format!(
            "Incorrect API key provided: {}",
            authorization.trim_start_matches("Bearer ")
        )}})
        .to_string(),
        delay: Duration::ZERO,
        stream: None,
    });
    let (p, _model) = with_model(db, "round-errkey", script).await;
    let answer = p
        .ask("anything wrong?", |t| {
            said(t).starts_with("The assistant could not answer")
        })
        .await;
    assert!(
        !answer.text.contains(KEY),
        "the AI key reached the chat: {:?}",
        answer.text
    );
}

/// At Cut the Worker drops its key (`Assistant::wipe`), but a question
/// under way holds its own copy in its model client: every later round
/// still sends it.
#[sqlx::test(migrations = false)]
async fn the_key_still_goes_to_the_model_after_cut_in_mid_question(db: PgPool) {
    let (p, model) = with_model(db, "round-cut-mid", slow_looker(Duration::from_secs(2))).await;
    let before = p.bot.fake.sent_to(CHAT).len();
    p.bot.fake.user_message(CHAT, "anything wrong?");
    for _ in 0..200 {
        if !model.asked().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A honeypot opened as the Worker's user: straight to Cut.
    let pot = p.warden.root.join("home/.aws/credentials");
    let out = assert_cmd::Command::new("runuser")
        .args(["-u", "aromba", "--", "cat"])
        .arg(&pot)
        .output()
        .expect("runuser");
    assert!(out.status.success(), "{}", support::text(&out.stderr));
    let secrets = p.warden.root.join("worker/secrets.toml");
    for _ in 0..100 {
        if !secrets.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!secrets.exists(), "the key's file was not wiped");
    // The Worker hears of the move within its events poll (5 s).
    p.next(before, |t| t.contains("AI key is wiped")).await;
    let wiped = Instant::now();
    p.next(before, |t| {
        t.contains("tokens in") || said(t).starts_with("The assistant could not")
    })
    .await;
    let after: Vec<Asked> = model
        .asked()
        .into_iter()
        .filter(|a| a.at > wiped && a.authorization.contains(KEY))
        .collect();
    assert!(
        after.is_empty(),
        "the key went to the model {} times after the Worker heard of Cut",
        after.len()
    );
}
