//! A person's taps as a phone makes them: a double tap, Cancel then
//! Approve, a button tapped after its message was answered. Every tap is
//! answered with a short notice, the message says what became of it with
//! its buttons taken off, nothing runs twice, and none of it is taken for
//! an anomaly (the ladder stays where it was). The whole product runs: a
//! real relay with the fake Bot API, a real Warden, `aromba run`.

use aromba_testkit::paired;

use paired::{CHAT, Paired, button_data, runs, with_counting_chore};
use sqlx::PgPool;
use std::time::Duration;

fn no_alarm(p: &Paired) {
    for m in p.bot.fake.sent_to(CHAT) {
        assert!(
            !m.text.contains("Unusual activity")
                && !m.text.contains("Was that you?")
                && !m.text.contains("refused"),
            "{}",
            m.text
        );
    }
}

#[sqlx::test(migrations = false)]
async fn cancel_then_approve_runs_nothing_and_is_answered_already(db: PgPool) {
    let (p, dir) = with_counting_chore(db, "taps-cancel").await;
    let proposal = p
        .ask("/run count", |t| {
            t.starts_with("Run the yellow chore \"count\"")
        })
        .await;
    p.tap(&proposal, "Cancel").await;
    let cancelled = p
        .shows(&proposal, |t| t.ends_with("Cancelled. Nothing was done."))
        .await;
    assert!(cancelled.buttons.iter().flatten().next().is_none());
    let notice = p.tap_again(&proposal, "Approve").await;
    assert_eq!(
        notice.as_deref(),
        Some("Already answered: nothing more was done.")
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(runs(&dir), 0, "Approve after Cancel ran the chore");
    p.ladder_is_normal();
    no_alarm(&p);
    let _ = std::fs::remove_dir_all(&dir);
}

#[sqlx::test(migrations = false)]
async fn a_double_tap_on_approve_runs_once_and_every_tap_is_answered(db: PgPool) {
    let (p, dir) = with_counting_chore(db, "taps-double").await;
    let proposal = p
        .ask("/run count", |t| {
            t.starts_with("Run the yellow chore \"count\"")
        })
        .await;
    p.bot.wait_recorded(&proposal).await;
    // Two taps in the same instant, as a thumb makes them: both reach the
    // relay before the Worker has taken the keyboard off.
    let data = button_data(&proposal, "Approve");
    let first = p
        .bot
        .fake
        .tap(CHAT, proposal.message_id, &data)
        .expect("a tap");
    let second = p
        .bot
        .fake
        .tap(CHAT, proposal.message_id, &data)
        .expect("a tap");
    let before = p.bot.fake.sent_to(CHAT).len();
    p.next(before.saturating_sub(1), |t| t.starts_with("Done."))
        .await;
    p.shows(&proposal, |t| t.ends_with("Approved ✓ — done."))
        .await;
    let mut notices = Vec::new();
    for query in [&first, &second] {
        let mut answer = None;
        for _ in 0..100 {
            answer = p.bot.fake.answer_of(query);
            if answer.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        notices.push(answer.expect("every tap is answered"));
    }
    assert_eq!(notices[0].as_deref(), Some("Sent to your server."));
    // The second is answered by the relay (the keyboard was off by then)
    // or passed on and said in the chat by the Worker.
    match notices[1].as_deref() {
        Some("Already answered: nothing more was done.") => {}
        Some("Sent to your server.") => {
            p.next(0, |t| t.starts_with("Already answered")).await;
        }
        other => panic!("the second tap was answered {other:?}"),
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(runs(&dir), 1, "a double tap ran the chore twice");
    p.ladder_is_normal();
    no_alarm(&p);
    let _ = std::fs::remove_dir_all(&dir);
}

#[sqlx::test(migrations = false)]
async fn a_tap_after_the_worker_restarted_is_still_known_as_answered(db: PgPool) {
    let (mut p, dir) = with_counting_chore(db, "taps-restart").await;
    let proposal = p
        .ask("/run count", |t| {
            t.starts_with("Run the yellow chore \"count\"")
        })
        .await;
    p.bot.wait_recorded(&proposal).await;
    let action: String =
        sqlx::query_scalar("SELECT action FROM chat_buttons WHERE callback_id = $1")
            .bind(&proposal.buttons[0][0].1)
            .fetch_one(&p.bot.db)
            .await
            .expect("the Approve button's action");
    p.tap(&proposal, "Approve").await;
    p.shows(&proposal, |t| t.ends_with("Approved ✓ — done."))
        .await;
    assert_eq!(runs(&dir), 1);
    // The Worker restarts; a keyboard still on the person's screen (a
    // phone that missed the edit) sends the old tap, which the relay is
    // made to hold as a button again: the Worker's kept record answers it,
    // without asking the Warden.
    p.daemon = paired::start_daemon(&p.warden, None);
    p.ask("/help", |t| t.starts_with("What I can do")).await;
    sqlx::query(
        "INSERT INTO chat_buttons (callback_id, server_id, message, button, label, action)
         SELECT 'stale-approve-01234567', server_id, message, 'approve', 'Approve', $1
         FROM chat_messages WHERE chat_id = $2 AND telegram_id = $3",
    )
    .bind(&action)
    .bind(CHAT)
    .bind(proposal.message_id)
    .execute(&p.bot.db)
    .await
    .expect("the old button");
    let before = p.bot.fake.sent_to(CHAT).len();
    p.bot
        .fake
        .tap(CHAT, proposal.message_id, "stale-approve-01234567")
        .expect("a tap");
    p.next(before, |t| t.starts_with("Already answered")).await;
    assert_eq!(runs(&dir), 1);
    p.ladder_is_normal();
    no_alarm(&p);
    let _ = std::fs::remove_dir_all(&dir);
}
