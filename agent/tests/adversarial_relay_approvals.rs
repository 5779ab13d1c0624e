//! A relay taken over — holding its own tap key, its database and the bot
//! token — against a server bound to the person's Telegram account: it
//! types `/run` and signs the Approve the Warden offers only in the Mini
//! App, signs Approve on an Undo, and forges the app's launch with a key of
//! its own (its HMAC with the bot token passes at the relay); signs Approve
//! on a release's install, and on prod mode off, then types the PIN. No
//! red chore runs, nothing is undone or installed, prod mode stays on, and
//! each forgery is a ladder signal; the same
//! flows with the person in the app succeed (`end_to_end.rs`, and below).
//! A real relay with the fake Bot API, a real Warden, `aromba run`.

use aromba_testkit::paired;
use aromba_testkit::relay as relay_support;
use aromba_testkit::taken_over;
use aromba_testkit::updates;
use aromba_testkit::worker as support;

use aromba_botfake::state::Sent;
use aromba_relay_proto::frame::Delivery;
use paired::{CHAT, Paired, runs, with_red_counting_chore};
use sqlx::PgPool;
use std::time::Duration;

fn status(p: &Paired) -> String {
    support::text(&p.warden.aromba_as("root", &["status"]).stdout)
}

/// The relay types `text` into the chat, as if the person had.
async fn relay_types(p: &Paired, server: &str, text: &str) {
    let typed = Delivery::Message { text: text.into() };
    taken_over::delivers(p, server, &typed).await;
}

/// The proposal to run `count`, typed by the relay, once in the chat with
/// its buttons recorded.
async fn relay_proposes_count(p: &Paired, server: &str) -> Sent {
    let before = p.bot.fake.sent_to(CHAT).len();
    relay_types(p, server, "/run count").await;
    let proposal = p
        .next(before, |t| t.starts_with("Run the red chore \"count\""))
        .await;
    p.bot.wait_recorded(&proposal).await;
    proposal
}

#[sqlx::test(migrations = false)]
async fn a_relay_that_types_run_and_signs_approve_runs_no_red_chore(db: PgPool) {
    let (p, dir) = with_red_counting_chore(db, "adv-relay-red").await;
    assert!(status(&p).contains("approvals in the app: Telegram account"));
    let server = taken_over::server(&p).await;
    let proposal = relay_proposes_count(&p, &server).await;
    assert!(
        proposal
            .buttons
            .iter()
            .flatten()
            .any(|(l, d)| l == "Approve (opens the app)" && aromba_botfake::is_link(d)),
        "the Approve of a red run opens the app: {proposal:?}"
    );
    taken_over::approves(&p, &server, &proposal).await;
    let moved = p.ladder_moves().await;
    assert!(!moved.contains("ladder: normal"), "{moved}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(runs(&dir), 0, "the relay's own signature ran the chore");
    let journal = p.warden.journal();
    assert!(
        journal.contains("approved only in the Mini App"),
        "the refusal is journaled"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[sqlx::test(migrations = false)]
async fn a_launch_the_relay_forged_with_its_bot_token_runs_nothing(db: PgPool) {
    let (p, dir) = with_red_counting_chore(db, "adv-relay-launch").await;
    let server = taken_over::server(&p).await;
    let proposal = relay_proposes_count(&p, &server).await;
    let link = proposal
        .buttons
        .iter()
        .flatten()
        .find(|(_, d)| aromba_botfake::is_link(d))
        .map(|(_, d)| d.clone())
        .expect("the app's button");
    let param = link.split("startapp=").nth(1).expect("a start parameter");
    // Launch data made by the relay: its HMAC with the bot token is right
    // (the relay holds the token), its Ed25519 signature a key of its own.
    let its_own = aromba_testkit::telegram::LaunchKey::generate().expect("a key");
    let forged = aromba_testkit::telegram::launch(
        &its_own,
        relay_support::bot::BOT_TOKEN,
        &aromba_testkit::telegram::Person::new(CHAT, "Person"),
        Some(param),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("now")
            .as_secs(),
    );
    let before = p.bot.fake.sent_to(CHAT).len();
    let reply = p.bot.ask_app(&forged, "approve").await;
    assert_eq!(reply.status, 200, "the relay passed it on: {reply:?}");
    // Said in the chat: the Warden refused it.
    p.next(before, |t| t.starts_with("The Warden refused"))
        .await;
    p.ladder_moves().await;
    assert_eq!(
        runs(&dir),
        0,
        "a launch Telegram never signed ran the chore"
    );
    assert!(
        p.warden
            .journal()
            .contains("not signed by Telegram for this bot"),
        "the refusal is journaled"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[sqlx::test(migrations = false)]
async fn an_undo_the_relay_signs_undoes_nothing_and_the_persons_does(db: PgPool) {
    let (p, dir) = with_red_counting_chore(db, "adv-relay-undo").await;
    let server = taken_over::server(&p).await;
    // The person runs it, in the app.
    let proposal = relay_proposes_count(&p, &server).await;
    let before = p.bot.fake.sent_to(CHAT).len();
    p.tap(&proposal, "Approve").await;
    let receipt = p.next(before, |t| t.starts_with("Done.")).await;
    assert_eq!(runs(&dir), 1);
    // The relay asks for the Undo (a tap that only proposes) and signs its
    // Approve.
    let before = p.bot.fake.sent_to(CHAT).len();
    p.tap(&receipt, "Undo").await;
    let undo = p
        .next(before, |t| t.starts_with("Undo the run of \"count\""))
        .await;
    taken_over::approves(&p, &server, &undo).await;
    p.ladder_moves().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(runs(&dir), 1, "the relay's signature undid the run");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A relay taken over (its tap key, its database) signs Approve on the
/// proposal of a major release: nothing is installed, the refusal is
/// journaled and the ladder moves.
#[sqlx::test(migrations = false)]
async fn a_relay_that_signs_approve_on_a_release_installs_nothing(db: PgPool) {
    let files = updates::scratch("major-relay");
    updates::publish(&files.0, "1.0.0");
    let (url, _) = updates::serve(files.0.clone());
    let p = paired::paired_with(
        db,
        "update-relay",
        updates::setup(&url),
        updates::installed_as_this_version,
    )
    .await;
    let proposal = p
        .next(0, |t| t.starts_with("Update Aromba to 1.0.0?"))
        .await;
    let server = taken_over::server(&p).await;
    taken_over::approves(&p, &server, &proposal).await;
    let moved = p.ladder_moves().await;
    assert!(!moved.contains("ladder: normal"), "{moved}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        updates::current(&p.warden),
        Some(updates::this_version()),
        "the relay's own signature installed a release"
    );
    assert!(p.warden.journal().contains("approved only in the Mini App"));
}

/// The line of `aromba status` about prod mode.
fn prod_mode(p: &Paired) -> String {
    status(p)
        .lines()
        .find(|l| l.contains("prod mode:"))
        .unwrap_or_default()
        .to_string()
}

/// A relay taken over types `/prodmode off`, signs Approve on the
/// Warden's proposal, then types the PIN it learned as if the person had:
/// prod mode stays on, no PIN is checked (the PIN-shaped message is kept
/// from everything, and a relay tap carries none), and the forged tap is
/// a ladder signal.
#[sqlx::test(migrations = false)]
async fn a_relay_that_types_prodmode_off_and_signs_approve_turns_nothing_off(db: PgPool) {
    let setup = paired::Setup {
        pin: "Qz4rPin91",
        ..paired::Setup::default()
    };
    let p = paired::paired_with(db, "adv-relay-prod", setup, |_| {}).await;
    let on = p.warden.aromba_as("root", &["prod-mode", "on"]);
    assert!(on.status.success(), "{}", support::text(&on.stderr));
    assert!(prod_mode(&p).contains("on"), "{}", prod_mode(&p));
    let server = taken_over::server(&p).await;
    let before = p.bot.fake.sent_to(CHAT).len();
    relay_types(&p, &server, "/prodmode off").await;
    let proposal = p
        .next(before, |t| t.starts_with("Turn prod mode off?"))
        .await;
    taken_over::approves(&p, &server, &proposal).await;
    relay_types(&p, &server, "Qz4rPin91").await;
    let moved = p.ladder_moves().await;
    assert!(!moved.contains("ladder: normal"), "{moved}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(prod_mode(&p).contains("on"), "{}", prod_mode(&p));
    let journal = p.warden.journal();
    assert!(
        journal.contains("approved only in the Mini App"),
        "{journal}"
    );
    assert!(!journal.contains("Qz4rPin91"), "the PIN is in the journal");
    assert!(
        !journal.contains("pin-wrong"),
        "a PIN was checked: {journal}"
    );
}
