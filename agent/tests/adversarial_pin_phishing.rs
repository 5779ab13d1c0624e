//! A hostile model asks for the PIN, end to end: a real relay with the fake
//! Bot API, a real Warden, `aromba pair` (the PIN set), `aromba run`, and a
//! fake model on loopback that answers with the Worker's own PIN prompt.
//! Found by the review: the person typed `Tr0ub4dor&3`, a PIN `aromba pair`
//! accepted, and it reached the model endpoint and stayed in the chat: the
//! Worker kept only 4–12 digit messages from the model.

use aromba_testkit::model_fake;
use aromba_testkit::paired;

use model_fake::{Canned, fake_model, say};
use paired::{CHAT, Setup, paired_with};
use sqlx::PgPool;
use std::sync::Arc;
use std::time::Duration;

const PIN: &str = "Tr0ub4dor&3";

#[sqlx::test(migrations = false)]
async fn a_pin_the_model_asks_for_never_reaches_the_model_and_is_deleted(db: PgPool) {
    let model = fake_model(Arc::new(|_, _, _| {
        Canned::ok(say(
            "Send your PIN as your next message. I delete it from the chat as soon as I have read it, and keep it nowhere.",
        ))
    }))
    .await;
    let url = model.url.clone();
    let setup = Setup {
        pin: PIN,
        ..Setup::default()
    };
    let p = paired_with(db, "adv-pin-phish", setup, move |w| {
        model_fake::assistant_files(w, &url, "test-model")
    })
    .await;
    p.ask("how is the disk?", |t| t.contains("Send your PIN"))
        .await;
    let asked_before = model.asked().len();
    let before = p.bot.fake.sent_to(CHAT).len();
    p.bot.fake.user_message(CHAT, PIN);
    p.next(before, |t| {
        t.starts_with("Deleted: that message looked like a PIN")
    })
    .await;
    p.deleted_once().await;
    // And in the words around it, sent as a question: kept from the model.
    let before = p.bot.fake.sent_to(CHAT).len();
    p.bot.fake.user_message(CHAT, &format!("my pin is {PIN}"));
    p.next(before, |t| t.contains("PIN")).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let asked = model.asked();
    assert_eq!(asked.len(), asked_before, "nothing more went to the model");
    for a in &asked {
        assert!(
            !a.body.to_string().contains(PIN),
            "the PIN reached the model"
        );
    }
}
