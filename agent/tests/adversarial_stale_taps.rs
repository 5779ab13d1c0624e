//! The answered-in-place proposals attacked end to end: a hostile relay
//! that forges, replays and re-aims taps (written into its own database
//! and outbox, as a relay that was taken over would), and a person's odd
//! but normal taps (the app opened then Cancel tapped, a second approval
//! with the PIN in the app, Cancel and Approve in the same instant, a
//! tap while the Worker restarts, a proposal near a message's length). A
//! real relay with the fake Bot API, a real Warden, `aromba run`.

use aromba_testkit::paired;
use aromba_testkit::relay as relay_support;
use aromba_testkit::taken_over::{delivers as relay_delivers, known};
use aromba_testkit::worker as support;

use aromba_botfake::state::Sent;
use aromba_relay_proto::frame::{Delivery, TapProof};
use paired::{
    CHAT, Paired, Setup, button_data, paired_with, runs, start_daemon, with_counting_chore,
    with_counting_chore_in, write_mine,
};
use sqlx::PgPool;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The PIN `aromba pair` sets.
const PIN: &str = "Adv7Taps9Q";

const CANCELLED: &str = "Cancelled. Nothing was done.";
const DONE: &str = "Approved ✓ — done.";
const NOT_DONE: &str = "Approved, but not done: the reason is below.";

/// Paired with [`PIN`], prod mode on (turning it off asks for the PIN).
async fn with_prod_mode(db: PgPool, name: &str) -> Paired {
    let setup = Setup {
        pin: PIN,
        ..Setup::default()
    };
    let p = paired_with(db, name, setup, |_| {}).await;
    let on = p.warden.aromba_as("root", &["prod-mode", "on"]);
    assert!(on.status.success(), "{}", support::text(&on.stderr));
    p
}

async fn propose_count(p: &Paired) -> Sent {
    let proposal = p
        .ask("/run count", |t| {
            t.starts_with("Run the yellow chore \"count\"")
        })
        .await;
    p.bot.wait_recorded(&proposal).await;
    proposal
}

fn status(p: &Paired) -> String {
    support::text(&p.warden.aromba_as("root", &["status"]).stdout)
}

fn prod_mode(p: &Paired) -> String {
    status(p)
        .lines()
        .find(|l| l.contains("prod mode:"))
        .unwrap_or_default()
        .to_string()
}

/// Every text the chat was sent after the first `after`.
fn said_since(p: &Paired, after: usize) -> Vec<String> {
    p.bot
        .fake
        .sent_to(CHAT)
        .into_iter()
        .skip(after)
        .map(|m| m.text)
        .collect()
}

fn no_refusal_since(p: &Paired, after: usize) {
    for text in said_since(p, after) {
        assert!(
            !text.contains("refused")
                && !text.contains("Unusual activity")
                && !text.contains("Was that you?"),
            "the person's own taps were answered as an anomaly: {text}"
        );
    }
}

fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("now")
        .as_secs()
}

/// A tap the relay made up: well formed, its signature not the key's.
fn forged_tap(message: &str, action: &str, button: &str, label: &str) -> Delivery {
    Delivery::Tap {
        message: message.parse().expect("a uuid"),
        button: button.into(),
        proof: TapProof {
            action: Some(action.into()),
            label: label.into(),
            chat: CHAT,
            time: now_s(),
            text_sha256: "0".repeat(64),
            signature: "untrusted comment: forged\nRWQBAQEBAQEBAQHnot-a-signature\ntrusted comment: aromba tap\nAAAA".into(),
        },
    }
}

/// The relay keeps a copy of every delivery it queues from now on (a relay
/// taken over records the person's taps to play them again).
async fn record_deliveries(p: &Paired) {
    for statement in [
        "CREATE TABLE captured (id bigserial PRIMARY KEY, delivery jsonb NOT NULL)",
        "CREATE FUNCTION capture() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN INSERT INTO captured (delivery) VALUES (NEW.delivery); RETURN NEW; END $$",
        "CREATE TRIGGER capture AFTER INSERT ON outbox FOR EACH ROW EXECUTE FUNCTION capture()",
    ] {
        sqlx::query(statement)
            .execute(&p.bot.db)
            .await
            .expect("the recorder");
    }
}

/// The taps the relay recorded, in order.
async fn recorded_taps(p: &Paired) -> Vec<Delivery> {
    let rows: Vec<String> = sqlx::query_scalar(
        "SELECT delivery::text FROM captured WHERE delivery->>'kind' = 'tap' ORDER BY id",
    )
    .fetch_all(&p.bot.db)
    .await
    .expect("the recorded taps");
    rows.iter()
        .map(|r| serde_json::from_str(r).expect("a delivery"))
        .collect()
}

// ---------------------------------------------------------------------------
// The person, with a PIN action approved in the app (the PIN typed there,
// sealed for the Warden): the proposal keeps its text and keyboard until
// it is answered, and changing one's mind is never an anomaly.
// ---------------------------------------------------------------------------

/// `/prodmode off`, the app opened from its Approve and the proposal read
/// there, not approved yet: the proposal as it shows meanwhile.
async fn open_the_app_on_prod_mode_off(p: &Paired) -> Sent {
    let proposal = p
        .ask("/prodmode off", |t| t.starts_with("Turn prod mode off?"))
        .await;
    let launch = p.bot.open_app(CHAT, &proposal, "Approve (opens the app)");
    let view = p.bot.ask_app(&launch, "view").await;
    assert_eq!(view.status, 200, "{view:?}");
    assert_eq!(
        view.text(),
        proposal.text,
        "the app shows the Warden's text"
    );
    let now = p.now(&proposal);
    assert_eq!(now.text, proposal.text, "the proposal's text is kept");
    assert_eq!(now.buttons, proposal.buttons, "and its keyboard");
    now
}

#[sqlx::test(migrations = false)]
async fn the_app_opened_then_cancel_in_the_chat_is_no_anomaly(db: PgPool) {
    let p = with_prod_mode(db, "adv-taps-pin-cancel").await;
    let noted = open_the_app_on_prod_mode_off(&p).await;
    // The person changes their mind before typing the PIN.
    let before = p.bot.fake.sent_to(CHAT).len();
    p.tap(&noted, "Cancel").await;
    p.shows(&noted, |t| t.ends_with(CANCELLED)).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    no_refusal_since(&p, before);
    p.ladder_is_normal();
    // And approves in the app anyway, the PIN typed: already answered.
    let late = p
        .approve_in_app_with(&noted, "Approve", Some(PIN))
        .await
        .expect("the button still opens the app");
    assert!(late.text().starts_with("Already answered"), "{late:?}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(prod_mode(&p).contains("on"), "{}", prod_mode(&p));
    p.ladder_is_normal();
}

#[sqlx::test(migrations = false)]
async fn a_second_approval_in_the_app_after_the_pin_turned_prod_mode_off_is_already_answered(
    db: PgPool,
) {
    let p = with_prod_mode(db, "adv-taps-pin-twice").await;
    let noted = open_the_app_on_prod_mode_off(&p).await;
    let before = p.bot.fake.sent_to(CHAT).len();
    p.approve_in_app_with(&noted, "Approve", Some(PIN))
        .await
        .expect("Approve opens the app");
    let answer = p
        .next(before, |t| {
            t.starts_with("Done.") || t.contains("refused") || t.starts_with("Wrong PIN")
        })
        .await;
    assert!(answer.text.starts_with("Done."), "{}", answer.text);
    p.shows(&noted, |t| t.ends_with(DONE)).await;
    // Nothing seemed to happen on the person's side: they open the app
    // again and approve again.
    let again = p
        .approve_in_app_with(&noted, "Approve", Some(PIN))
        .await
        .expect("the button still opens the app");
    assert!(again.text().starts_with("Already answered"), "{again:?}");
    assert!(prod_mode(&p).contains("off"), "{}", prod_mode(&p));
    no_refusal_since(&p, before);
    p.ladder_is_normal();
}

#[sqlx::test(migrations = false)]
async fn cancel_on_a_pin_action_before_approve_is_no_anomaly(db: PgPool) {
    let p = with_prod_mode(db, "adv-taps-pin-plain-cancel").await;
    let proposal = p
        .ask("/prodmode off", |t| t.starts_with("Turn prod mode off?"))
        .await;
    let before = p.bot.fake.sent_to(CHAT).len();
    p.tap(&proposal, "Cancel").await;
    p.shows(&proposal, |t| t.ends_with(CANCELLED)).await;
    let late = p
        .approve_in_app_with(&proposal, "Approve", Some(PIN))
        .await
        .expect("the button still opens the app");
    assert!(late.text().starts_with("Already answered"), "{late:?}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    no_refusal_since(&p, before);
    p.ladder_is_normal();
    assert!(prod_mode(&p).contains("on"), "{}", prod_mode(&p));
}

// ---------------------------------------------------------------------------
// The person's races.
// ---------------------------------------------------------------------------

#[sqlx::test(migrations = false)]
async fn cancel_and_approve_in_the_same_instant_runs_nothing(db: PgPool) {
    let (p, dir) = with_counting_chore(db, "adv-taps-race-ca").await;
    let proposal = propose_count(&p).await;
    let before = p.bot.fake.sent_to(CHAT).len();
    let cancel = button_data(&proposal, "Cancel");
    let approve = button_data(&proposal, "Approve");
    p.bot.fake.tap(CHAT, proposal.message_id, &cancel);
    p.bot.fake.tap(CHAT, proposal.message_id, &approve);
    p.shows(&proposal, |t| t.ends_with(CANCELLED)).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(runs(&dir), 0, "Approve right after Cancel ran the chore");
    assert!(p.now(&proposal).text.ends_with(CANCELLED));
    no_refusal_since(&p, before);
    p.ladder_is_normal();
    let _ = std::fs::remove_dir_all(&dir);
}

#[sqlx::test(migrations = false)]
async fn approve_and_cancel_in_the_same_instant_runs_once_and_never_says_cancelled(db: PgPool) {
    let (p, dir) = with_counting_chore(db, "adv-taps-race-ac").await;
    let proposal = propose_count(&p).await;
    let before = p.bot.fake.sent_to(CHAT).len();
    let cancel = button_data(&proposal, "Cancel");
    let approve = button_data(&proposal, "Approve");
    p.bot.fake.tap(CHAT, proposal.message_id, &approve);
    p.bot.fake.tap(CHAT, proposal.message_id, &cancel);
    p.shows(&proposal, |t| t.ends_with(DONE)).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(runs(&dir), 1);
    let now = p.now(&proposal);
    assert!(now.text.ends_with(DONE), "{}", now.text);
    assert!(!now.text.contains("Cancelled"), "{}", now.text);
    no_refusal_since(&p, before);
    p.ladder_is_normal();
    let _ = std::fs::remove_dir_all(&dir);
}

#[sqlx::test(migrations = false)]
async fn a_tap_while_the_worker_restarts_runs_once_and_a_second_is_answered_already(db: PgPool) {
    let (mut p, dir) = with_counting_chore(db, "adv-taps-restart").await;
    let proposal = propose_count(&p).await;
    let before = p.bot.fake.sent_to(CHAT).len();
    let _ = p.daemon.0.kill();
    let _ = p.daemon.0.wait();
    // Tapped while the Worker is down: the relay keeps it for it.
    p.tap(&proposal, "Approve").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    p.daemon = start_daemon(&p.warden, None);
    p.shows(&proposal, |t| t.ends_with(DONE)).await;
    assert_eq!(runs(&dir), 1);
    let notice = p.tap_again(&proposal, "Approve").await;
    assert_eq!(
        notice.as_deref(),
        Some("Already answered: nothing more was done.")
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(runs(&dir), 1);
    no_refusal_since(&p, before);
    p.ladder_is_normal();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A yellow chore whose real run fails before it does anything.
fn failing_chore(dir: &Path) -> String {
    format!(
        "#!/bin/sh\n# aromba-chore: 1\n# name: count\n# description: Fails at once\n# color: yellow\n# touches: {d}\n# network: no\n# schedule: manual\n# end\nif [ \"$1\" = --dry-run ]; then echo would fail; exit 0; fi\nexit 3\n",
        d = dir.display()
    )
}

/// The Warden carried the approval out, but the run failed: the proposal
/// must not say "done" over a receipt that says it did not go well.
#[sqlx::test(migrations = false)]
async fn a_run_that_failed_is_not_said_done_under_its_proposal(db: PgPool) {
    let dir = PathBuf::from(format!("/var/tmp/aromba-adv-fail-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the chore's folder");
    let script = failing_chore(&dir);
    let p = paired_with(
        db,
        "adv-taps-failed-run",
        Setup {
            days_ago: 8,
            ..Setup::default()
        },
        |w| write_mine(w, "count", &script),
    )
    .await;
    p.ask("/run count", |t| t.starts_with("Before count runs"))
        .await;
    let proposal = propose_count(&p).await;
    let before = p.bot.fake.sent_to(CHAT).len();
    p.tap(&proposal, "Approve").await;
    p.next(before, |t| t.starts_with("It did not go well"))
        .await;
    let shown = p
        .shows(&proposal, |t| {
            !t.ends_with("Approved ✓ — running…") && t != proposal.text
        })
        .await;
    assert!(
        !shown.text.ends_with(DONE),
        "a failed run is said done: {}",
        shown.text
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A yellow chore whose real run takes a few seconds.
fn slow_chore(dir: &Path) -> String {
    format!(
        "#!/bin/sh\n# aromba-chore: 1\n# name: count\n# description: Counts its runs slowly\n# color: yellow\n# touches: {d}\n# network: no\n# schedule: manual\n# end\nif [ \"$1\" = --dry-run ]; then echo would add a line; exit 0; fi\nsleep 5\necho run >> {d}/runs\n",
        d = dir.display()
    )
}

/// The Worker stops while the Warden runs what was approved (a restart,
/// an update): the run goes on, and once the Worker is back the proposal
/// must not say "running…" for ever over a run that ended.
#[sqlx::test(migrations = false)]
async fn a_worker_restarted_during_an_approved_run_does_not_leave_it_running_for_ever(db: PgPool) {
    let dir = PathBuf::from(format!("/var/tmp/aromba-adv-slow-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the chore's folder");
    let script = slow_chore(&dir);
    let mut p = paired_with(
        db,
        "adv-taps-slow-restart",
        Setup {
            days_ago: 8,
            ..Setup::default()
        },
        |w| write_mine(w, "count", &script),
    )
    .await;
    p.ask("/run count", |t| t.starts_with("Before count runs"))
        .await;
    let proposal = propose_count(&p).await;
    p.tap(&proposal, "Approve").await;
    p.shows(&proposal, |t| t.ends_with("Approved ✓ — running…"))
        .await;
    let _ = p.daemon.0.kill();
    let _ = p.daemon.0.wait();
    for _ in 0..200 {
        if runs(&dir) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(runs(&dir), 1, "the approved run ended");
    p.daemon = start_daemon(&p.warden, None);
    p.ask("/help", |t| t.starts_with("What I can do")).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let now = p.now(&proposal);
    assert!(
        !now.text.ends_with("Approved ✓ — running…"),
        "the proposal still says it is running: {}",
        now.text
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A proposal near a message's length (a chore touching one very long
/// path): its outcome still goes under it in one edit, its keyboard off.
#[sqlx::test(migrations = false)]
async fn a_proposal_near_a_messages_length_is_closed_in_place(db: PgPool) {
    let mut dir = PathBuf::from(format!("/var/tmp/aromba-huge-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let top = dir.clone();
    // About 3,850 characters of path: with the rest of the proposal, over
    // 4,000 characters (the Worker's message) and under the Warden's 4,096
    // bytes, so the outcome under it must cut the text.
    for i in 0..18 {
        dir.push(format!("{i:02}{}", "d".repeat(200)));
    }
    dir.push("e".repeat(180));
    let (p, dir) = with_counting_chore_in(db, "adv-taps-huge", dir).await;
    let proposal = propose_count(&p).await;
    let len = proposal.text.chars().count();
    assert!(len > 4_000, "the proposal is {len} characters");
    let before = p.bot.fake.sent_to(CHAT).len();
    p.tap(&proposal, "Approve").await;
    let closed = p.shows(&proposal, |t| t.ends_with(DONE)).await;
    assert!(closed.buttons.iter().flatten().next().is_none());
    assert!(closed.text.chars().count() <= 4_096);
    assert_eq!(runs(&dir), 1);
    let notice = p.tap_again(&proposal, "Cancel").await;
    assert_eq!(
        notice.as_deref(),
        Some("Already answered: nothing more was done.")
    );
    no_refusal_since(&p, before);
    p.ladder_is_normal();
    let _ = std::fs::remove_dir_all(&top);
}

// ---------------------------------------------------------------------------
// A hostile relay.
// ---------------------------------------------------------------------------

#[sqlx::test(migrations = false)]
async fn a_relay_forging_a_cancel_tap_is_refused_and_said(db: PgPool) {
    let (p, dir) = with_counting_chore(db, "adv-taps-forged-cancel").await;
    let proposal = propose_count(&p).await;
    let k = known(&p, &proposal).await;
    let action = k.action.clone().expect("the proposal's action");
    let before = p.bot.fake.sent_to(CHAT).len();
    relay_delivers(
        &p,
        &k.server,
        &forged_tap(&k.message, &action, "cancel", "Cancel"),
    )
    .await;
    // Not the person's "the user chose": the refusal is said, and the
    // ladder moves.
    let said = p
        .next(before, |t| t.starts_with("The Warden refused"))
        .await;
    assert!(!said.text.contains("the user chose"), "{}", said.text);
    p.ladder_moves().await;
    assert_eq!(runs(&dir), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[sqlx::test(migrations = false)]
async fn a_relay_forging_an_approve_tap_runs_nothing_and_never_says_done(db: PgPool) {
    let (p, dir) = with_counting_chore(db, "adv-taps-forged-approve").await;
    let proposal = propose_count(&p).await;
    let k = known(&p, &proposal).await;
    let action = k.action.clone().expect("the proposal's action");
    let before = p.bot.fake.sent_to(CHAT).len();
    relay_delivers(
        &p,
        &k.server,
        &forged_tap(&k.message, &action, "approve", "Approve"),
    )
    .await;
    p.next(before, |t| t.starts_with("The Warden refused"))
        .await;
    let shown = p.shows(&proposal, |t| t.ends_with(NOT_DONE)).await;
    assert!(!shown.text.contains(DONE), "{}", shown.text);
    p.ladder_moves().await;
    assert_eq!(runs(&dir), 0, "a forged tap ran the chore");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The relay aims a forged tap at a message that is no proposal of that
/// action (a random id, the Worker's own reply): the Worker edits nothing
/// that is not its own, writes nothing the relay chose, and the Warden
/// refuses.
#[sqlx::test(migrations = false)]
async fn a_relay_aiming_a_forged_tap_at_an_unknown_message_edits_nothing(db: PgPool) {
    let (p, dir) = with_counting_chore(db, "adv-taps-forged-unknown").await;
    let proposal = propose_count(&p).await;
    let k = known(&p, &proposal).await;
    let action = k.action.clone().expect("the proposal's action");
    let shown_before = p.bot.fake.sent_to(CHAT);
    let random = "6f1c1d1e-1111-4222-8333-944445555666";
    relay_delivers(
        &p,
        &k.server,
        &forged_tap(random, &action, "approve", "Approve"),
    )
    .await;
    p.next(shown_before.len(), |t| t.starts_with("The Warden refused"))
        .await;
    p.ladder_moves().await;
    // Every message sent before shows as it did: the proposal still has
    // its buttons (the Worker did not know that message).
    for m in &shown_before {
        assert_eq!(p.now(m).text, m.text, "an old message was edited");
    }
    assert!(p.now(&proposal).buttons.iter().flatten().next().is_some());
    let shown: String = std::fs::read_to_string(p.warden.root.join("home/shown.json"))
        .or_else(|_| std::fs::read_to_string(p.warden.root.join("worker/home/shown.json")))
        .unwrap_or_default();
    assert!(!shown.contains(random), "the relay's id was remembered");
    assert_eq!(runs(&dir), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The person's own Approve, recorded by the relay and played again: on
/// the same message the Worker knows it answered (nothing runs, the
/// Warden is not asked); aimed at another proposal's message, it reaches
/// the Warden, which refuses the same tap again and raises the ladder.
#[sqlx::test(migrations = false)]
async fn a_relay_replaying_the_persons_approve_runs_nothing_more(db: PgPool) {
    let (p, dir) = with_counting_chore(db, "adv-taps-replay").await;
    record_deliveries(&p).await;
    let first = propose_count(&p).await;
    p.tap(&first, "Approve").await;
    p.shows(&first, |t| t.ends_with(DONE)).await;
    assert_eq!(runs(&dir), 1);
    let taps = recorded_taps(&p).await;
    assert_eq!(taps.len(), 1, "{taps:?}");
    let k = known(&p, &first).await;
    // The same tap again, as it was.
    let before = p.bot.fake.sent_to(CHAT).len();
    relay_delivers(&p, &k.server, &taps[0]).await;
    p.next(before, |t| t.starts_with("Already answered")).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(runs(&dir), 1, "a replayed tap ran the chore again");
    // The same tap, aimed at a new proposal of the same chore.
    let second = propose_count(&p).await;
    let k2 = known(&p, &second).await;
    let Delivery::Tap { button, proof, .. } = taps[0].clone() else {
        panic!("a tap");
    };
    let before = p.bot.fake.sent_to(CHAT).len();
    relay_delivers(
        &p,
        &k2.server,
        &Delivery::Tap {
            message: k2.message.parse().expect("a uuid"),
            button,
            proof,
        },
    )
    .await;
    let said = p
        .next(before, |t| t.starts_with("The Warden refused"))
        .await;
    assert!(said.text.contains("used already"), "{}", said.text);
    p.ladder_moves().await;
    assert_eq!(runs(&dir), 1, "a replayed tap ran the chore again");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The relay's "already answered" answer is for the paired chat's own
/// messages whose keyboard the server took off: another chat tapping the
/// same message number learns nothing (the button has expired for it).
#[sqlx::test(migrations = false)]
async fn another_chat_tapping_an_answered_message_number_learns_nothing(db: PgPool) {
    let (p, dir) = with_counting_chore(db, "adv-taps-other-chat").await;
    let proposal = propose_count(&p).await;
    let data = button_data(&proposal, "Approve");
    p.tap(&proposal, "Cancel").await;
    p.shows(&proposal, |t| t.ends_with(CANCELLED)).await;
    // A stranger's chat holding a message of its own with the same number
    // (Telegram numbers each private chat's messages on their own), on
    // which a modified client sends the paired chat's callback data.
    const OTHER: i64 = 5_550_777;
    {
        let mut state = p.bot.fake.state();
        let mut theirs = proposal.clone();
        theirs.chat_id = OTHER;
        state.sent.push(theirs);
    }
    let query = p
        .bot
        .fake
        .tap(OTHER, proposal.message_id, &data)
        .expect("a tap");
    let mut answer = None;
    for _ in 0..100 {
        answer = p.bot.fake.answer_of(&query);
        if answer.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let answer = answer
        .expect("the stranger's tap is answered")
        .unwrap_or_default();
    assert_ne!(answer, "Already answered: nothing more was done.");
    assert_ne!(answer, "Sent to your server.");
    // In the paired chat, the same tap is answered as answered.
    let notice = p.tap_again(&proposal, "Approve").await;
    assert_eq!(
        notice.as_deref(),
        Some("Already answered: nothing more was done.")
    );
    assert_eq!(runs(&dir), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------
// The relay's "already answered" lookup, flooded.
// ---------------------------------------------------------------------------

/// Taps `n` times with callback data no button has on `message_id`, one
/// after the other, each waited for; how long they took.
async fn bogus_taps(bot: &relay_support::bot::Bot, message_id: i64, n: usize) -> Duration {
    let start = std::time::Instant::now();
    for i in 0..n {
        let query = bot
            .fake
            .tap(CHAT, message_id, &format!("bogus-{i:016}"))
            .expect("a tap");
        let mut answer = None;
        for _ in 0..1_000 {
            answer = bot.fake.answer_of(&query);
            if answer.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(
            answer.flatten().as_deref(),
            Some("Already answered: nothing more was done.")
        );
    }
    start.elapsed()
}

/// The paired chat taps made-up data on a message of its server's without
/// buttons: each tap is looked up among the messages the server sent that
/// chat. With a week of a busy server's messages (one a second), the
/// lookup must go by an index on the chat and the message, not walk the
/// server's messages (found by the attack round: 42 ms more a tap).
#[sqlx::test(migrations = false)]
async fn a_chat_flooding_taps_on_a_message_without_buttons_costs_no_scan(db: PgPool) {
    let bot = relay_support::bot::start_bot(db, false).await;
    let (server, mut ws, mut session, _key) = relay_support::bot::paired(&bot, CHAT).await;
    relay_support::bot::send(&mut ws, &mut session, "A plain reply.", vec![]).await;
    let plain = relay_support::bot::eventually("the reply", || {
        bot.fake
            .sent_to(CHAT)
            .into_iter()
            .find(|m| m.text == "A plain reply.")
    })
    .await;
    sqlx::query(
        "INSERT INTO chat_messages (server_id, message, chat_id, telegram_id, text_sha256, sent_at)
         SELECT $1::text::uuid, gen_random_uuid(), $2, 10000000 + g, sha256(g::text::bytea), now()
         FROM generate_series(1, 604800) g",
    )
    .bind(server.id.to_string())
    .bind(CHAT)
    .execute(&bot.db)
    .await
    .expect("a week of messages");
    sqlx::query("ANALYZE chat_messages")
        .execute(&bot.db)
        .await
        .expect("analyze");
    // Still answered as answered, and the relay's own query is planned on
    // the index.
    let taken = bogus_taps(&bot, plain.message_id, 3).await;
    assert!(taken > Duration::ZERO);
    let plan: Vec<String> = sqlx::query_scalar(
        r#"EXPLAIN SELECT 1 AS "one!" FROM pairings p
               JOIN chat_messages m ON m.server_id = p.server_id AND m.chat_id = p.chat_id
               WHERE p.chat_id = $1 AND m.telegram_id = $2
                 AND NOT EXISTS (SELECT 1 FROM chat_buttons b
                                 WHERE b.server_id = m.server_id AND b.message = m.message)"#,
    )
    .bind(CHAT)
    .bind(plain.message_id)
    .fetch_all(&bot.db)
    .await
    .expect("the plan");
    let plan = plan.join("\n");
    assert!(plan.contains("chat_messages_by_chat"), "{plan}");
    assert!(!plan.contains("Seq Scan on chat_messages"), "{plan}");
}
