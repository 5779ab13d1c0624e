//! The binary: a missing or malformed setting stops the start with one
//! sentence naming it; SIGTERM stops it gracefully.

use aromba_testkit::relay as support;

use assert_cmd::Command;
use sqlx::PgPool;

fn relay() -> Command {
    let mut cmd = Command::cargo_bin("aromba-relay").expect("the aromba-relay binary is built");
    cmd.env_clear();
    cmd
}

fn one_sentence(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr).trim_end().to_string();
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(
        text.starts_with("aromba-relay: ") && text.ends_with('.'),
        "{text}"
    );
    text
}

#[test]
fn a_missing_database_url_is_named() {
    let out = relay()
        .env("AROMBA_TOKEN_PEPPER", "x".repeat(32))
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let text = one_sentence(&out.stderr);
    assert!(text.contains("DATABASE_URL"), "{text}");
}

#[test]
fn a_short_pepper_is_refused() {
    let out = relay()
        .env("DATABASE_URL", "postgres://127.0.0.1:1/none")
        .env("AROMBA_TOKEN_PEPPER", "short")
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let text = one_sentence(&out.stderr);
    assert!(text.contains("AROMBA_TOKEN_PEPPER is 5 bytes"), "{text}");
}

#[test]
fn a_malformed_setting_is_named() {
    for (name, value, want) in [
        (
            "AROMBA_TRUSTED_PROXIES",
            "10.0.0.0/8,proxy.example",
            "AROMBA_TRUSTED_PROXIES",
        ),
        ("AROMBA_RELAY_LISTEN", "everywhere", "AROMBA_RELAY_LISTEN"),
        (
            "AROMBA_RELAY_TLS_CERT",
            "/etc/cert.pem",
            "AROMBA_RELAY_TLS_KEY",
        ),
    ] {
        let out = relay()
            .env("DATABASE_URL", "postgres://127.0.0.1:1/none")
            .env("AROMBA_TOKEN_PEPPER", "x".repeat(32))
            .env(name, value)
            .output()
            .expect("runs");
        assert_eq!(out.status.code(), Some(2), "{name}");
        let text = one_sentence(&out.stderr);
        assert!(text.contains(want), "{text}");
    }
}

#[test]
fn an_unreachable_database_is_one_sentence() {
    let out = relay()
        .env(
            "DATABASE_URL",
            format!("postgres://u:p@127.0.0.1:{}/none", support::free_port()),
        )
        .env("AROMBA_TOKEN_PEPPER", "x".repeat(32))
        .env(
            "AROMBA_RELAY_LISTEN",
            format!("127.0.0.1:{}", support::free_port()),
        )
        .env(
            "AROMBA_RELAY_METRICS_LISTEN",
            format!("127.0.0.1:{}", support::free_port()),
        )
        .timeout(std::time::Duration::from_secs(30))
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stderr);
    let last = text.trim_end().lines().last().unwrap_or("");
    assert!(
        last.starts_with("aromba-relay: the database could not be reached"),
        "{text}"
    );
}

#[sqlx::test(migrations = false)]
async fn sigterm_stops_the_relay_gracefully(db: PgPool) {
    let mut process = support::RelayProcess::spawn(&db, support::free_port()).await;
    let pid = nix::unistd::Pid::from_raw(i32::try_from(process.child.id()).expect("pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("signal");
    let child = &mut process.child;
    let mut status = None;
    for _ in 0..200 {
        if let Some(s) = child.try_wait().expect("wait") {
            status = Some(s);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let status = status.expect("the relay exits within 10 s of SIGTERM");
    assert!(status.success(), "{status:?}");
}

#[sqlx::test(migrations = false)]
async fn healthcheck_answers_for_a_ready_relay_and_fails_without_one(db: PgPool) {
    let running = support::start(db, support::config()).await;
    let ready = running.metrics.to_string();
    let nobody = format!("127.0.0.1:{}", support::free_port());
    let (up, down) = tokio::task::spawn_blocking(move || {
        let up = relay()
            .args(["healthcheck", "--metrics-listen", &ready])
            .output()
            .expect("runs");
        let down = relay()
            .args(["healthcheck", "--metrics-listen", &nobody])
            .output()
            .expect("runs");
        (up, down)
    })
    .await
    .expect("joined");
    assert!(
        up.status.success(),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );
    assert_eq!(down.status.code(), Some(1));
    one_sentence(&down.stderr);
    running.stop().await;
}

/// A relay with a bot, with one setting changed or removed.
fn bot_relay(changes: &[(&str, Option<&str>)]) -> std::process::Output {
    let mut settings = vec![
        ("DATABASE_URL", Some("postgres://127.0.0.1:1/none")),
        (
            "AROMBA_TOKEN_PEPPER",
            Some("0123456789abcdef0123456789abcdef"),
        ),
        ("TELEGRAM_BOT_TOKEN", Some(support::bot::BOT_TOKEN)),
        ("AROMBA_PUBLIC_URL", Some("https://relay.example.com")),
        ("TELEGRAM_WEBHOOK_SECRET", Some("a-good-secret")),
        ("AROMBA_TELEGRAM_APP", Some("aromba")),
    ];
    for (name, value) in changes {
        settings.retain(|(n, _)| n != name);
        settings.push((name, *value));
    }
    let mut cmd = relay();
    for (name, value) in settings {
        if let Some(value) = value {
            cmd.env(name, value);
        }
    }
    cmd.output().expect("runs")
}

#[test]
fn the_telegram_settings_are_checked_and_named() {
    for (change, want) in [
        (("AROMBA_PUBLIC_URL", None), "AROMBA_PUBLIC_URL"),
        (
            ("AROMBA_PUBLIC_URL", Some("http://relay.example.com")),
            "AROMBA_PUBLIC_URL must be an https:// URL",
        ),
        (("TELEGRAM_WEBHOOK_SECRET", None), "TELEGRAM_WEBHOOK_SECRET"),
        (
            ("TELEGRAM_WEBHOOK_SECRET", Some("has spaces in it")),
            "TELEGRAM_WEBHOOK_SECRET must be 1 to 256",
        ),
        (
            ("AROMBA_TELEGRAM_MODE", Some("carrier-pigeon")),
            "AROMBA_TELEGRAM_MODE",
        ),
        (
            ("AROMBA_BOT_API_URL", Some("mailto:bot@example.com")),
            "AROMBA_BOT_API_URL",
        ),
        // The Mini App, where red actions are approved, is not optional.
        (("AROMBA_TELEGRAM_APP", None), "AROMBA_TELEGRAM_APP"),
        (("AROMBA_TELEGRAM_APP", Some("  ")), "AROMBA_TELEGRAM_APP"),
        (
            ("AROMBA_TELEGRAM_APP", Some("no/slashes")),
            "a Mini App's short name is 3 to 30",
        ),
        (
            (
                "AROMBA_APP_FRAME_ANCESTORS",
                Some("https://chat.example.com/path"),
            ),
            "AROMBA_APP_FRAME_ANCESTORS",
        ),
        (
            ("AROMBA_APP_FRAME_ANCESTORS", Some("'unsafe-inline'")),
            "AROMBA_APP_FRAME_ANCESTORS",
        ),
    ] {
        let out = bot_relay(&[change]);
        assert_eq!(out.status.code(), Some(2), "{change:?}");
        let text = one_sentence(&out.stderr);
        assert!(text.contains(want), "{change:?}: {text}");
    }
}

#[test]
fn a_malformed_bot_token_is_refused_without_being_echoed() {
    let bad = "123456:this-is-not-long-enough";
    let out = bot_relay(&[("TELEGRAM_BOT_TOKEN", Some(bad))]);
    assert_eq!(out.status.code(), Some(2));
    let text = one_sentence(&out.stderr);
    assert!(
        text.contains("TELEGRAM_BOT_TOKEN is not a bot token"),
        "{text}"
    );
    assert!(!text.contains("this-is-not-long-enough"), "{text}");
}

#[test]
fn a_webhook_secret_without_a_bot_token_is_refused() {
    let out = bot_relay(&[("TELEGRAM_BOT_TOKEN", None)]);
    assert_eq!(out.status.code(), Some(2));
    let text = one_sentence(&out.stderr);
    assert!(text.contains("TELEGRAM_BOT_TOKEN is not"), "{text}");
}

#[test]
fn polling_needs_neither_a_public_url_nor_a_secret() {
    // It gets as far as the database (which is not there).
    let out = bot_relay(&[
        ("AROMBA_TELEGRAM_MODE", Some("polling")),
        ("AROMBA_PUBLIC_URL", None),
        ("TELEGRAM_WEBHOOK_SECRET", None),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("database"), "{text}");
}
