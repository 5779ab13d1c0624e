//! What the chat says when it cannot do what was asked: the truth, in
//! plain words, and what to do — not "no log lines" for a service that
//! is not there, not "could not read" without a reason. The machines the
//! tests run on have no systemd as PID 1, as containers and some small
//! servers do not. The whole product runs (real relay, fake Bot API, real
//! Warden, `aromba run`).

use aromba_testkit::paired;

use paired::{CHAT, paired};
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

/// One table (`aromba_relay_proto::commands`) drives the menu the relay sets,
/// `/help`, and the Worker's answers: every command in it is in the menu,
/// has its line in `/help`, and is answered (none is "I don't know").
#[sqlx::test(migrations = false)]
async fn the_commands_table_drives_the_menu_help_and_the_answers(db: PgPool) {
    use aromba_relay_proto::commands::COMMANDS;
    let p = paired(db, "words-table").await;
    let help = p.ask("/help", |t| t.starts_with("What I can do")).await;
    let menu = p
        .bot
        .fake
        .state()
        .commands
        .get(&format!("chat:{CHAT}"))
        .cloned()
        .expect("the relay set the chat's menu at pairing");
    for row in COMMANDS {
        assert!(help.text.contains(row.help), "{} not in /help", row.name);
        assert!(
            menu.iter()
                .any(|(name, words)| name == row.name && words == row.menu),
            "{} not in the menu {menu:?}",
            row.name
        );
    }
    assert!(menu.iter().any(|(name, _)| name == "unpair"), "{menu:?}");
    // `/panic` is answered too, by stopping Aromba: left out, so the rest
    // are asked of a Worker at Normal.
    for row in COMMANDS.iter().filter(|r| r.name != "panic") {
        let answer = p.ask(&format!("/{}", row.name), |t| !t.is_empty()).await;
        assert!(
            !answer.text.starts_with("I don't know"),
            "/{} is in the table but not answered: {}",
            row.name,
            answer.text
        );
    }
}

#[sqlx::test(migrations = false)]
async fn digest_now_is_a_monospace_table_and_a_time_past_today_starts_tomorrow(db: PgPool) {
    let p = paired(db, "words-digest").await;
    // Only the digest: a health alert about the real disk the test runs on
    // may come meanwhile.
    let now = p
        .ask("/digest now", |t| t.starts_with("Daily digest"))
        .await;
    assert!(
        !now.monospace.is_empty(),
        "a plain, misaligned table: {now:?}"
    );
    // 00:00 has passed today (unless the test runs at midnight itself):
    // the first digest is tomorrow's, not one a minute from now.
    let set = p
        .ask("/digest 00:00", |t| {
            t.starts_with("The daily digest will come")
        })
        .await;
    assert!(set.text.ends_with("from tomorrow."), "{}", set.text);
    let kept: serde_json::Value = serde_json::from_slice(
        &std::fs::read(p.warden.root.join("home/digest.json")).expect("the digest's record"),
    )
    .expect("JSON");
    let today = jiff::ZonedDateTime::now();
    let today = today.year() as u64 * 10_000 + today.month() as u64 * 100 + today.day() as u64;
    assert_eq!(kept["last_day"].as_u64(), Some(today), "{kept}");
}
