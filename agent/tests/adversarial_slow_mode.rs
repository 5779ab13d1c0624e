//! Attacks on "Was that you?" through the whole product (a real relay with
//! the fake Bot API, a real Warden on the test's clock, `aromba run`): the
//! person's normal behaviour when the ladder moves twice.

use aromba_testkit::paired;
use aromba_testkit::worker as support;

use paired::{CHAT, Paired, TEST_CLOCK, paired_on_the_test_clock};
use sqlx::PgPool;

fn ladder(p: &Paired) -> String {
    support::text(&p.warden.aromba_as("root", &["status"]).stdout)
}

/// Slow, then Freeze: the chat asks "Was that you?" at each move. The
/// person answers the first question they read, the one asked at Slow,
/// with "No, stop Aromba": the chat says "I am stopping", so Aromba must
/// stop (Cut), whatever the Warden made of a tap on a question it had
/// since asked again.
#[sqlx::test(migrations = false)]
async fn no_on_the_slow_question_after_the_move_to_freeze_stops_aromba(db: PgPool) {
    let p = paired_on_the_test_clock(db, "adv-no-after-freeze").await;
    let before = p.bot.fake.sent_to(CHAT).len();
    p.warden.ask(&["rm", "-rf", "/"]);
    p.warden.wait_for_ladder("slow");
    let at_slow = p.next(before, |t| t.starts_with("Was that you?")).await;

    TEST_CLOCK.advance(60);
    let before = p.bot.fake.sent_to(CHAT).len();
    p.warden.ask(&["cat", "/etc/shadow"]);
    p.warden.wait_for_ladder("freeze");
    let at_freeze = p.next(before, |t| t.starts_with("Was that you?")).await;
    assert_ne!(at_slow.message_id, at_freeze.message_id);

    TEST_CLOCK.advance(60);
    p.tap(&at_slow, "No, stop Aromba").await;
    p.shows(&at_slow, |t| {
        t.ends_with("You said it was not you: I am stopping.")
    })
    .await;
    // The chat said it stops: it must.
    let mut status = String::new();
    for _ in 0..100 {
        status = ladder(&p);
        if status.contains("ladder: cut") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        status.contains("ladder: cut"),
        "the person said No and the chat said 'I am stopping'; the Warden: {status}\nthe chat: {:#?}",
        p.bot
            .fake
            .sent_to(CHAT)
            .into_iter()
            .map(|m| m.text)
            .collect::<Vec<_>>()
    );
}

/// Slow, its question asked, then root resumes (the move withdraws the
/// question: the Warden answers a tap on it "already answered"). The
/// person then answers the question they still see: No. The chat says it
/// stops, so it must, whatever the Warden made of the tap.
#[sqlx::test(migrations = false)]
async fn no_on_a_question_the_warden_answers_already_answered_still_stops_aromba(db: PgPool) {
    let p = paired_on_the_test_clock(db, "adv-no-after-resume").await;
    let before = p.bot.fake.sent_to(CHAT).len();
    p.warden.ask(&["rm", "-rf", "/"]);
    p.warden.wait_for_ladder("slow");
    let question = p.next(before, |t| t.starts_with("Was that you?")).await;
    let resumed = p.warden.aromba_as("root", &["resume"]);
    assert!(
        resumed.status.success(),
        "{}",
        support::text(&resumed.stderr)
    );
    p.next(before, |t| t.starts_with("Back to normal.")).await;

    let before = p.bot.fake.sent_to(CHAT).len();
    p.tap(&question, "No, stop Aromba").await;
    p.next(before, |t| t.starts_with("You stopped Aromba."))
        .await;
    assert!(ladder(&p).contains("ladder: cut"), "{}", ladder(&p));
}
