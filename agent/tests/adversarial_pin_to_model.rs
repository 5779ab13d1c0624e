//! The PIN reaching the model. The attacker: a model that asks for the
//! PIN "to confirm", and so the person who answers it — the PIN typed
//! alone when none is awaited, beside another word, after "pin", "code"
//! or "my PIN is", in other digits, spaced, quoted or with a period. What
//! it tries: to have the PIN sent, as a question, to the model's provider.
//! What holds: no message holding the PIN, in any of those shapes, reaches
//! the model endpoint.
//!
//! End to end: the real Worker, a real Warden, a real relay with the fake
//! Bot API, a scripted model (`model_fake`). Each test's doc says what the
//! attack did when it was found; the test keeps it out. The model's own
//! PIN prompt and the message deleted from the chat:
//! `adversarial_pin_phishing.rs`; the Worker's PIN filter at the unit
//! level: `agent/tests/adversarial_pin_to_model/in_process.rs`.

/// The same threat met in-process: the assistant's loop against a scripted
/// model, no relay, no Warden.
#[path = "adversarial_pin_to_model/in_process.rs"]
mod in_process;

use aromba_testkit::model_fake;
use aromba_testkit::paired;

use model_fake::{Canned, Script, fake_model, say, with_model};
use paired::{CHAT, Setup, paired_with, settle, watch_until};
use sqlx::PgPool;
use std::sync::Arc;
use std::time::Duration;

/// A PIN `aromba pair` accepts (and the example).
const PIN: &str = "Tr0ub4dor&3";

/// Everything the model endpoint was sent, as one text.
fn all_sent(model: &model_fake::FakeModel) -> String {
    model
        .asked()
        .iter()
        .map(|a| a.body.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A PIN typed as an ordinary message once no PIN is awaited (its wait
/// of five minutes over, or the Approve never tapped) is a question: it
/// goes to the model's provider as it is.
#[sqlx::test(migrations = false)]
async fn a_pin_typed_as_a_message_goes_to_the_model(db: PgPool) {
    let script: Script = Arc::new(|_, _, _| Canned::ok(say("I do not understand.")));
    let (p, model) = with_model(db, "round-pin", script).await;
    // Setup::default()'s PIN.
    let pin = "472913";
    let before = p.bot.fake.sent_to(CHAT).len();
    p.bot.fake.user_message(CHAT, pin);
    watch_until(&p, before, Duration::from_secs(15), |t| {
        t.contains("tokens in") || t.contains("PIN")
    })
    .await;
    let sent: String = model.asked().iter().map(|a| a.body.to_string()).collect();
    assert!(!sent.contains(pin), "the PIN went to the model");
}

/// The model asks for the PIN "to confirm" — the phishing the issue names
/// (item 3) — and the person answers with the PIN and one more word, as
/// people do. The Worker keeps from the model the PIN's one-word shape and
/// the PIN after "pin", "my pin is", "code"; any other word beside it
/// sends the PIN, word for word, to the model endpoint (and the relay,
/// which deletes only one-word messages, leaves it in the chat).
#[sqlx::test(migrations = false)]
async fn a_pin_typed_with_another_word_beside_it_never_reaches_the_model(db: PgPool) {
    let model = fake_model(Arc::new(|_, _, _| Canned::ok(say("Noted.")))).await;
    let url = model.url.clone();
    let p = paired_with(db, "r29-pin-words", Setup::default(), move |w| {
        model_fake::assistant_files(w, &url, "pin-words")
    })
    .await;
    let mut leaked = Vec::new();
    for text in [
        format!("confirm {PIN}"),
        format!("{PIN} thanks"),
        format!("ok {PIN}"),
        format!("my PIN: {PIN} ok?"),
        format!("{PIN} {PIN}"),
        format!("here you go: {PIN}"),
        format!("sure, it's {PIN}"),
    ] {
        let _ = settle(&p, &text).await;
        if all_sent(&model).contains(PIN) {
            leaked.push(text);
            // Only the first reaches it once; the rest are judged afresh.
            model.asked.lock().expect("the log").clear();
        }
    }
    assert!(
        leaked.is_empty(),
        "messages holding the PIN reached the model endpoint: {leaked:#?}"
    );
}

/// The shapes the fix claims to keep (held): one word, the PIN after
/// "pin"/"code", digits split by spaces or written in another script, a
/// trailing period, NBSP around it.
#[sqlx::test(migrations = false)]
async fn a_pin_in_the_shapes_the_fix_names_never_reaches_the_model(db: PgPool) {
    let model = fake_model(Arc::new(|_, _, _| Canned::ok(say("Noted.")))).await;
    let url = model.url.clone();
    let p = paired_with(db, "r29-pin-shapes", Setup::default(), move |w| {
        model_fake::assistant_files(w, &url, "pin-shapes")
    })
    .await;
    let cases = [
        PIN.to_string(),
        format!("{PIN}."),
        format!("\u{a0}{PIN}\u{a0}"),
        format!("pin: {PIN}"),
        format!("My PIN is {PIN}!"),
        format!("code {PIN}"),
        "４７２９１３".to_string(),
        "4729 13".to_string(),
        "٤٧٢٩١٣".to_string(),
        format!("`{PIN}`"),
    ];
    for text in &cases {
        let said = settle(&p, text).await;
        assert!(
            !said.contains("tokens in"),
            "{text:?} was answered by the model: {said}"
        );
    }
    let sent = all_sent(&model);
    for needle in [PIN, "472913", "４７２９１３", "٤٧٢٩١٣", "4729 13"] {
        assert!(!sent.contains(needle), "{needle:?} reached the model");
    }
}
