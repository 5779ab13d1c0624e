//! Slow mode and `/panic` as a person lives them, the whole product
//! running (a real relay with the fake Bot API, a real Warden, `aromba
//! run`): at Slow the chat asks "Was that you?" in plain words with Yes
//! and No; the person's command is answered, or told exactly when it will
//! be (a wait the Warden keeps); Yes brings Aromba back to normal; No
//! stops it, in the person's words ("You stopped Aromba"), and reads are
//! still answered afterwards, as promised.
//!
//! The Warden serves on a clock of the test's, so that "a minute later"
//! takes no minute.

use aromba_testkit::paired;
use aromba_testkit::worker as support;

use aromba_warden::ladder::Clock;
use paired::{CHAT, Paired, TEST_CLOCK, paired_on_the_test_clock};
use sqlx::PgPool;

/// Moves the ladder to Slow the way a stray command would: one deny-list
/// hit (in the person's lane, as `aromba ask` is), and waits for the
/// chat's "Was that you?".
async fn slowed(p: &Paired) -> aromba_botfake::state::Sent {
    let before = p.bot.fake.sent_to(CHAT).len();
    p.warden.ask(&["rm", "-rf", "/"]);
    p.warden.wait_for_ladder("slow");
    p.next(before, |t| t.starts_with("Was that you?")).await
}

fn labels(m: &aromba_botfake::state::Sent) -> Vec<String> {
    m.buttons.iter().flatten().map(|(l, _)| l.clone()).collect()
}

fn ladder(p: &Paired) -> String {
    support::text(&p.warden.aromba_as("root", &["status"]).stdout)
}

#[sqlx::test(migrations = false)]
async fn at_slow_the_chat_asks_was_that_you_and_yes_brings_it_back(db: PgPool) {
    let p = paired_on_the_test_clock(db, "slow-yes").await;
    let question = slowed(&p).await;
    assert_eq!(
        labels(&question),
        ["Yes, it was me (opens the app)", "No, stop Aromba"]
    );
    assert!(
        question
            .text
            .contains("What I saw: something asked me to run a command I never run"),
        "{}",
        question.text
    );
    assert!(question.text.contains("aromba resume"), "{}", question.text);

    // `/trust` answers at once: the Warden's state is read at any pace.
    p.ask("/trust", |t| t.contains("\nLadder: slow")).await;
    // A command within the minute the stray one took: told exactly when,
    // in plain words.
    let paced = p
        .ask("/status", |t| {
            t.starts_with("I'm slowed down after unusual activity")
        })
        .await;
    let seconds: u64 = paced
        .text
        .split("again in ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no countdown in {}", paced.text));
    assert!((1..=60).contains(&seconds), "{}", paced.text);
    // The wait it gave is the one it keeps: then it is answered, though the
    // Worker's own background work ran meanwhile.
    TEST_CLOCK.advance(seconds);
    p.ask("/status", |t| t.starts_with("Server status")).await;

    // Yes: back to normal, at once, and said.
    let before = p.bot.fake.sent_to(CHAT).len();
    p.tap(&question, "Yes, it was me").await;
    p.shows(&question, |t| {
        t.ends_with("You said it was you ✓ — back to normal.")
    })
    .await;
    p.next(before, |t| t.starts_with("Back to normal.")).await;
    assert!(ladder(&p).contains("ladder: normal"), "{}", ladder(&p));
}

#[sqlx::test(migrations = false)]
async fn no_stop_aromba_stops_it_in_the_persons_words_and_reads_still_answer(db: PgPool) {
    let p = paired_on_the_test_clock(db, "slow-no").await;
    let question = slowed(&p).await;
    let before = p.bot.fake.sent_to(CHAT).len();
    p.tap(&question, "No, stop Aromba").await;
    let stopped = p
        .next(before, |t| t.starts_with("You stopped Aromba."))
        .await;
    assert!(
        stopped.text.contains("sudo aromba resume"),
        "{}",
        stopped.text
    );
    p.shows(&question, |t| {
        t.ends_with("You said it was not you: I am stopping.")
    })
    .await;
    assert!(ladder(&p).contains("ladder: cut"), "{}", ladder(&p));
    // Reads only, as promised: /status answers with numbers.
    TEST_CLOCK.advance(60);
    let status = p.ask("/status", |t| t.starts_with("Server status")).await;
    let load = status
        .text
        .lines()
        .find(|l| l.starts_with("Load"))
        .unwrap_or_default();
    assert!(!load.contains("unknown"), "{}", status.text);
}

#[sqlx::test(migrations = false)]
async fn panic_in_the_chat_says_you_stopped_aromba_once(db: PgPool) {
    let p = paired_on_the_test_clock(db, "panic-words").await;
    let before = p.bot.fake.sent_to(CHAT).len();
    p.bot.fake.user_message(CHAT, "/panic");
    let stopped = p
        .next(before, |t| t.starts_with("You stopped Aromba."))
        .await;
    assert!(
        !stopped.text.contains("Something is wrong"),
        "{}",
        stopped.text
    );
    // The Warden's event for the move is not said a second time.
    tokio::time::sleep(std::time::Duration::from_secs(8)).await;
    let said = p
        .bot
        .fake
        .sent_to(CHAT)
        .into_iter()
        .skip(before)
        .filter(|m| m.text.starts_with("You stopped Aromba."))
        .count();
    assert_eq!(said, 1);
    // Reads still answer at Cut.
    let trust = p.ask("/trust", |t| t.contains("\nLadder: cut")).await;
    assert!(!trust.text.contains("refused"), "{}", trust.text);
    let _ = TEST_CLOCK.now();
}
