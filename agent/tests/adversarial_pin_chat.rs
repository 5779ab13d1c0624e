//! The PIN, attacked end to end: a real relay with the fake Bot API, a
//! real Warden, `aromba pair` and `aromba run` as shipped (its log kept, at
//! the finest level). The PIN is typed in the Mini App, sealed there for
//! the Warden; a hostile chat guesses PINs in the app, opens a spent
//! approval again, replays the launch with the right PIN, types the PIN
//! into the chat and commands while the proposal is open; then the PIN is
//! looked for everywhere: the Worker's log, every file under the test's
//! root (the Worker's home, the Warden's state and journal), and every
//! table of the relay.

use aromba_testkit::paired;
use aromba_testkit::worker as support;

use paired::{CHAT, Paired, Setup, paired_with};
use sqlx::PgPool;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The PIN `aromba pair` sets: letters too, so that no hash, time or id
/// holds it by chance.
const PIN: &str = "QzPin7Wk4x";

/// Paired with the PIN above, the daemon's log kept at the finest level,
/// and prod mode on (so that turning it off asks for the PIN).
async fn paired(db: PgPool, name: &str) -> Paired {
    let log = PathBuf::from(format!(
        "/var/tmp/aromba-pin-chat-{name}-{}.log",
        std::process::id()
    ));
    let setup = Setup {
        pin: PIN,
        daemon_log: Some(log),
        ..Setup::default()
    };
    let p = paired_with(db, name, setup, |_| {}).await;
    let on = p.warden.aromba_as("root", &["prod-mode", "on"]);
    assert!(on.status.success(), "{}", support::text(&on.stderr));
    p
}

/// The steps these tests take on a paired server (the type is the test
/// kit's, so they are a trait of this file's).
trait PinChat {
    fn log(&self) -> &Path;
    async fn approve_prod_mode_off(&self, pin: &str) -> aromba_botfake::state::Sent;
    fn prod_mode(&self) -> String;
    fn wrong_pins(&self) -> u64;
}

impl PinChat for Paired {
    fn log(&self) -> &Path {
        self.daemon_log.0.as_deref().expect("the daemon's log")
    }

    /// `/prodmode off`, approved in the app with `pin` typed there.
    async fn approve_prod_mode_off(&self, pin: &str) -> aromba_botfake::state::Sent {
        let proposal = self
            .ask("/prodmode off", |t| t.starts_with("Turn prod mode off?"))
            .await;
        let sent = self
            .approve_in_app_with(&proposal, "Approve", Some(pin))
            .await
            .expect("Approve opens the app");
        assert!(sent.text().starts_with("Sent to your server"), "{sent:?}");
        proposal
    }

    fn prod_mode(&self) -> String {
        let st = support::text(&self.warden.aromba_as("root", &["status"]).stdout);
        st.lines()
            .find(|l| l.contains("prod mode:"))
            .unwrap_or_default()
            .to_string()
    }

    /// The Warden's count of wrong PINs.
    fn wrong_pins(&self) -> u64 {
        let path = self.warden.layout().state_dir.join("pin-attempts.json");
        match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str::<serde_json::Value>(&text)
                .expect("the count")
                .get("failures")
                .and_then(serde_json::Value::as_u64)
                .expect("failures"),
            Err(_) => 0,
        }
    }
}

/// Every file under `dir` (links not followed) whose bytes hold `needle`.
fn files_holding(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            found.extend(files_holding(&path, needle));
        } else if meta.is_file()
            && let Ok(bytes) = std::fs::read(&path)
            && bytes.windows(needle.len()).any(|w| w == needle)
        {
            found.push(path);
        }
    }
    found
}

#[sqlx::test(migrations = false)]
async fn the_pin_is_in_no_log_file_or_table_even_with_the_worker_logging_at_trace(db: PgPool) {
    let p = paired(db, "pin-nowhere").await;
    let before = p.bot.fake.sent_to(CHAT).len();
    p.approve_prod_mode_off(PIN).await;
    p.next(before, |t| t.starts_with("Done.")).await;
    assert!(p.prod_mode().contains("off"), "{}", p.prod_mode());
    tokio::time::sleep(Duration::from_secs(1)).await;

    let log = std::fs::read_to_string(p.log()).expect("the Worker's log");
    assert!(!log.is_empty(), "the Worker logged nothing");
    assert!(!log.contains(PIN), "the Worker's log holds the PIN:\n{log}");
    let relay_toml =
        std::fs::read_to_string(p.warden.root.join("worker/relay.toml")).expect("relay.toml");
    let token = relay_toml
        .lines()
        .find_map(|l| l.strip_prefix("token = "))
        .map(|t| t.trim_matches('"').to_string())
        .expect("the token in relay.toml");
    assert!(
        !log.contains(&token),
        "the Worker's log holds its token:\n{log}"
    );
    let held = files_holding(&p.warden.root, PIN.as_bytes());
    assert!(held.is_empty(), "files holding the PIN: {held:?}");
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables
         WHERE table_schema = 'public' AND table_type = 'BASE TABLE'",
    )
    .fetch_all(&p.bot.db)
    .await
    .expect("the tables");
    for table in tables {
        // The table names are the database's own.
        let n: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT count(*) FROM \"{table}\" t WHERE t::text LIKE '%' || $1 || '%'"
        )))
        .bind(PIN)
        .fetch_one(&p.bot.db)
        .await
        .expect("a table");
        assert_eq!(n, 0, "{table} holds the PIN");
    }
}

#[sqlx::test(migrations = false)]
async fn a_wrong_pin_in_the_app_is_counted_once_and_its_approval_cannot_be_tried_again(db: PgPool) {
    let p = paired(db, "pin-wrong").await;
    let before = p.bot.fake.sent_to(CHAT).len();
    let proposal = p.approve_prod_mode_off("WrongPin-135792").await;
    let refused = p.next(before, |t| t.starts_with("Wrong PIN")).await;
    assert!(refused.text.contains("To try again"), "{}", refused.text);
    assert!(!refused.text.contains("WrongPin"), "{}", refused.text);
    p.shows(&proposal, |t| t.ends_with("Not done: the PIN was wrong."))
        .await;
    assert_eq!(p.wrong_pins(), 1, "one wrong PIN typed, one counted");
    assert!(p.prod_mode().contains("on"), "{}", p.prod_mode());
    // The app opened again from the same button, the right PIN typed: the
    // approval was spent with the wrong PIN, so nothing turns prod mode
    // off, and the page says it was answered (the person's own second try
    // is no anomaly).
    let again = p
        .approve_in_app_with(&proposal, "Approve", Some(PIN))
        .await
        .expect("the button still opens the app");
    assert!(again.text().starts_with("Already answered"), "{again:?}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        p.prod_mode().contains("on"),
        "a spent approval turned prod mode off: {}",
        p.prod_mode()
    );
    assert_eq!(p.wrong_pins(), 1);
}

#[sqlx::test(migrations = false)]
async fn five_wrong_pins_in_the_app_lock_pin_actions(db: PgPool) {
    let p = paired(db, "pin-five").await;
    for i in 1..=5u64 {
        let before = p.bot.fake.sent_to(CHAT).len();
        p.approve_prod_mode_off(&format!("WrongPin-{i}")).await;
        let refused = p.next(before, |t| t.starts_with("Wrong PIN")).await;
        if i < 5 {
            assert_eq!(p.wrong_pins(), i);
        } else {
            assert!(refused.text.contains("locked"), "{}", refused.text);
        }
    }
    let attempts = std::fs::read_to_string(p.warden.layout().state_dir.join("pin-attempts.json"))
        .expect("the count");
    let locked_until = serde_json::from_str::<serde_json::Value>(&attempts)
        .expect("the count")
        .get("locked_until")
        .and_then(serde_json::Value::as_u64)
        .expect("locked_until");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("now")
        .as_secs();
    assert!(
        locked_until > now + 10 * 60,
        "locked until {locked_until}, now {now}"
    );
    assert!(p.prod_mode().contains("on"), "{}", p.prod_mode());
}

/// The person types the PIN into the chat while the proposal is open (out
/// of habit): the relay deletes it as soon as it reads it and passes it on
/// to nobody, and it approves nothing; the proposal still opens in the
/// app.
#[sqlx::test(migrations = false)]
async fn a_pin_typed_into_the_chat_while_the_app_waits_is_deleted_and_goes_nowhere(db: PgPool) {
    let p = paired(db, "pin-orphan").await;
    let proposal = p
        .ask("/prodmode off", |t| t.starts_with("Turn prod mode off?"))
        .await;
    let before = p.bot.fake.sent_to(CHAT).len();
    p.bot.fake.user_message(CHAT, PIN);
    let told = p
        .next(before, |t| {
            t.starts_with("Deleted: that message looked like a PIN")
        })
        .await;
    assert!(!told.text.contains(PIN));
    assert_eq!(p.wrong_pins(), 0, "no PIN was checked");
    assert!(p.prod_mode().contains("on"), "{}", p.prod_mode());
    p.deleted_once().await;
    let before = p.bot.fake.sent_to(CHAT).len();
    p.approve_in_app_with(&proposal, "Approve", Some(PIN))
        .await
        .expect("Approve opens the app");
    p.next(before, |t| t.starts_with("Done.")).await;
    assert!(p.prod_mode().contains("off"), "{}", p.prod_mode());
}

#[sqlx::test(migrations = false)]
async fn a_command_while_the_app_waits_is_answered_and_never_taken_for_the_pin(db: PgPool) {
    let p = paired(db, "pin-command").await;
    let proposal = p
        .ask("/prodmode off", |t| t.starts_with("Turn prod mode off?"))
        .await;
    let trust = p.ask("/trust", |t| t.contains("\nLadder:")).await;
    assert!(trust.text.contains("Ladder: normal"), "{}", trust.text);
    assert_eq!(p.wrong_pins(), 0, "the command was not checked as a PIN");
    let before = p.bot.fake.sent_to(CHAT).len();
    p.approve_in_app_with(&proposal, "Approve", Some(PIN))
        .await
        .expect("Approve opens the app");
    p.next(before, |t| t.starts_with("Done.")).await;
    assert!(p.prod_mode().contains("off"), "{}", p.prod_mode());
}

/// Found by the review: a PIN typed where none was asked for (after a
/// model asked for it in the Worker's words) stayed in the chat, and went
/// on as a question. The relay now deletes any message with a PIN's shape
/// and passes it on to nobody: the Worker never sees it.
#[sqlx::test(migrations = false)]
async fn a_pin_typed_where_none_was_asked_for_is_deleted_from_the_chat_and_used_for_nothing(
    db: PgPool,
) {
    let p = paired(db, "pin-unasked").await;
    let before = p.bot.fake.sent_to(CHAT).len();
    p.bot.fake.user_message(CHAT, PIN);
    let told = p
        .next(before, |t| {
            t.starts_with("Deleted: that message looked like a PIN")
        })
        .await;
    assert!(!told.text.contains(PIN));
    p.deleted_once().await;
    assert_eq!(p.wrong_pins(), 0, "no PIN was checked");
    // A question in a few words is not taken for one.
    let answer = p
        .ask("is 7 the answer?", |t| {
            !t.starts_with("Deleted: that message looked")
        })
        .await;
    assert!(!answer.text.contains("PIN"), "{}", answer.text);
    assert_eq!(p.bot.fake.state().deleted_by_bot.len(), 1);
}
