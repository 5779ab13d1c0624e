//! What the chat says when it cannot do what was asked: the truth, in
//! plain words, and what to do — not "no log lines" for a service that
//! is not there, not "could not read" without a reason. The machines the
//! tests run on have no systemd as PID 1, as containers and some small
//! servers do not. The whole product runs (real relay, fake Bot API, real
//! Warden, `aromba run`).

mod paired;
#[path = "../../relay/tests/support/mod.rs"]
mod relay_support;
mod support;

use paired::paired;
use sqlx::PgPool;

#[sqlx::test(migrations = false)]
async fn services_and_logs_say_the_server_does_not_run_systemd(db: PgPool) {
    let p = paired(db, "words-systemd").await;
    p.ask("/services", |t| {
        t == "This server does not run systemd, so I cannot list its services."
    })
    .await;
    p.ask("/logs nginx", |t| {
        t == "This server does not run systemd, so there is no journal of its services' log lines to show."
    })
    .await;
}

#[sqlx::test(migrations = false)]
async fn ai_without_a_key_says_there_is_no_assistant_and_how_to_add_one(db: PgPool) {
    let p = paired(db, "words-ai").await;
    let ai = p
        .ask("/ai", |t| t.starts_with("There is no assistant here"))
        .await;
    assert!(ai.text.contains("secrets.toml"), "{}", ai.text);
    let help = p.ask("/help", |t| t.starts_with("What I can do")).await;
    assert!(help.text.contains("/unpair"), "{}", help.text);
}
