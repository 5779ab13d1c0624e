//! Attacks on the Trust page (the Mini App opened from `/trust`) through
//! the whole product: a real relay with the fake Bot API, a real Warden,
//! `aromba pair` and `aromba run` as shipped. The person is played through
//! the fake; a replayed launch is what a page (or a relay) can send again.
//!
//! Attacks:
//! - the person's normal behaviour spending their read budget: `/trust`
//!   and its page opened ten times in a row must leave the person's next
//!   command answered (SECURITY.md: the page is "one command of the
//!   person's read budget");
//! - the page at Slow spending the person's one command a minute (the
//!   page's chores and releases asks are paced like commands), so the
//!   command they type next is refused;
//! - a launch from a proposal's button asking `trust`, `policy` or `undo`;
//!   an undo id that is not live; a live one replayed many times at once
//!   (each a proposal in the chat?); the link followed after the run was
//!   undone.

use aromba_testkit::paired;
use aromba_testkit::worker as support;

use paired::{CHAT, Paired, Setup, TEST_CLOCK, paired_on_the_test_clock, paired_with};
use sqlx::PgPool;
use std::time::Duration;

fn no_alarm(p: &Paired) {
    for m in p.bot.fake.sent_to(CHAT) {
        assert!(
            !m.text.contains("Unusual activity") && !m.text.contains("Was that you?"),
            "{}",
            m.text
        );
    }
}

fn is_reply_to_disk(t: &str) -> bool {
    // Whatever the Worker says next: the table, or a refusal.
    !t.starts_with("Open the Trust page") && !t.contains("\nLadder:")
}

/// `/trust` then its button then the page's two asks (the page asks
/// `trust`, then `policy`), as the page does when a person opens it.
async fn open_the_trust_page(p: &Paired) -> String {
    let trust = p.ask("/trust", |t| t.contains("\nLadder:")).await;
    let launch = p.bot.open_app(CHAT, &trust, "Open the Trust page");
    let page = p.bot.ask_app(&launch, "trust").await;
    assert_eq!(
        page.status,
        200,
        "{page:?}\nthe chat: {:#?}",
        p.chat_texts()
    );
    let policy = p.bot.ask_app(&launch, "policy").await;
    assert_eq!(
        policy.status,
        200,
        "{policy:?}\nthe chat: {:#?}",
        p.chat_texts()
    );
    launch
}

#[sqlx::test(migrations = false)]
async fn opening_the_trust_page_ten_times_in_a_row_answers_every_page(db: PgPool) {
    let p = paired_with(db, "adv-trust-ten", Setup::default(), |_| {}).await;
    // The person types /trust and opens its page, ten times in a row: ten
    // messages of theirs. Every page is answered (never "your server did
    // not answer"), and the chat never says they sent too many.
    for i in 0..10 {
        eprintln!("opening the Trust page, time {}", i + 1);
        open_the_trust_page(&p).await;
    }
    for m in p.bot.fake.sent_to(CHAT) {
        assert!(!m.text.starts_with("Too many messages"), "{}", m.text);
    }
    // The page is "one command of the person's read budget" (SECURITY.md):
    // ten looks with their /trust are twenty reads of thirty, and the
    // person's next command is answered.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let disk = p.ask("/disk", is_reply_to_disk).await;
    assert!(
        disk.text.starts_with("Disk space"),
        "ten looks at the Trust page spent the person's read budget: {}",
        disk.text
    );
    p.ladder_is_normal();
    no_alarm(&p);
}

#[sqlx::test(migrations = false)]
async fn the_trust_page_at_slow_does_not_take_the_persons_one_command_a_minute(db: PgPool) {
    let p = paired_on_the_test_clock(db, "adv-trust-slow").await;
    let before = p.bot.fake.sent_to(CHAT).len();
    p.warden.ask(&["rm", "-rf", "/"]);
    p.warden.wait_for_ladder("slow");
    p.next(before, |t| t.starts_with("Was that you?")).await;
    // A minute on: the person's one command of the minute is free.
    TEST_CLOCK.advance(61);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let trust = p.ask("/trust", |t| t.contains("\nLadder:")).await;
    let launch = p.bot.open_app(CHAT, &trust, "Open the Trust page");
    let page = p.bot.ask_app(&launch, "trust").await;
    assert_eq!(page.body["kind"], "page", "{page:?}");
    // Reading what the Warden says of itself ran nothing: the person's
    // command of this minute is still theirs.
    let disk = p.ask("/disk", is_reply_to_disk).await;
    assert!(
        disk.text.starts_with("Disk space"),
        "the Trust page at Slow took the person's one command a minute: {}",
        disk.text
    );
}

#[sqlx::test(migrations = false)]
async fn undo_links_from_a_proposal_not_live_replayed_or_after_the_undo_propose_nothing_more(
    db: PgPool,
) {
    let (p, dir) = paired::with_red_wipe(db, "adv-trust-undo").await;
    p.ask("/run wipe", |t| t.starts_with("Before wipe runs"))
        .await;
    let proposal = p
        .ask("/run wipe", |t| {
            t.starts_with("Run the red chore \"wipe\" now?")
        })
        .await;
    let before = p.bot.fake.sent_to(CHAT).len();
    p.tap(&proposal, "Approve").await;
    p.next(before, |t| t.starts_with("Done.")).await;

    let trust = p.ask("/trust", |t| t.contains("\nLadder:")).await;
    let launch = p.bot.open_app(CHAT, &trust, "Open the Trust page");
    let page = p.bot.ask_app(&launch, "trust").await;
    let undo_id = page.body["sections"]
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|s| s["undo"].as_str())
        .unwrap_or_else(|| panic!("an Undo link: {page:?}"))
        .to_string();

    // A page opened from a proposal's button asks for nothing of the
    // Trust page's.
    let from_proposal = p.bot.open_app(CHAT, &proposal, "Approve (opens the app)");
    for ask in ["trust", "policy"] {
        let r = p.bot.ask_app(&from_proposal, ask).await;
        assert_eq!(r.body["kind"], "closed", "{ask}: {r:?}");
        assert!(r.body.get("sections").is_none(), "{ask}: {r:?}");
    }
    let r = p.bot.undo_from_app(&from_proposal, &undo_id).await;
    assert_eq!(r.body["kind"], "closed", "{r:?}");

    // An undo id the Worker never offered: not proposed.
    let r = p
        .bot
        .undo_from_app(&launch, "0123456789abcdef0123456789abcdef")
        .await;
    assert!(r.text().starts_with("Not proposed"), "{r:?}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let undo_proposals = |p: &Paired| {
        p.bot
            .fake
            .sent_to(CHAT)
            .into_iter()
            .filter(|m| m.text.starts_with("Undo the run of \"wipe\""))
            .count()
    };
    assert_eq!(undo_proposals(&p), 0, "nothing proposed so far");

    // The live link followed five times (a page replayed, or the page
    // opened again and its Undo tapped again): one proposal in the chat,
    // not five; the others are answered "proposed already".
    // (The relay holds one ask a chat at a time, so they come one after
    // another.)
    let mut answers = Vec::new();
    for _ in 0..5 {
        let a = p.bot.undo_from_app(&launch, &undo_id).await;
        assert_eq!(a.status, 200, "{a:?}");
        answers.push(a.text());
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let proposed = undo_proposals(&p);
    // The first one approved: the run is undone, and its link, followed
    // again, proposes nothing more.
    let undo = p
        .bot
        .fake
        .sent_to(CHAT)
        .into_iter()
        .find(|m| m.text.starts_with("Undo the run of \"wipe\""))
        .expect("an Undo proposal");
    let before = p.bot.fake.sent_to(CHAT).len();
    p.tap(&undo, "Approve").await;
    p.next(before, |t| t.starts_with("Done.")).await;
    let again = p.bot.undo_from_app(&launch, &undo_id).await;
    assert!(again.text().starts_with("Not proposed"), "{again:?}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(undo_proposals(&p), proposed, "proposed after the undo");
    assert_eq!(
        proposed, 1,
        "one Undo link followed five times put {proposed} Undo proposals in the chat: {answers:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    let st = support::text(&p.warden.aromba_as("root", &["status"]).stdout);
    assert!(st.contains("ladder: normal"), "{st}");
}
