//! The relay's secrets from files (`NAME_FILE`, Docker secrets'
//! convention): a relay given every secret that way never has one in its
//! environment, a secret given twice or in a file that cannot be used is
//! refused in one sentence naming the setting (and never showing what the
//! file holds), and a secret still given by value works, with a warning.

use aromba_testkit::relay as support;

use sqlx::PgPool;
use std::io::Read;
use std::path::Path;
use std::time::Duration;
use support::bot::{BOT_TOKEN, fake};
use support::{RelayProcess, TEST_PEPPER, free_port};

/// Planted in secret files: must never come out in an error.
const PLANTED: &str = "PLANTED-SECRET-CONTENT";

fn pepper() -> String {
    String::from_utf8(TEST_PEPPER.to_vec()).expect("an ASCII pepper")
}

/// Writes a secret file (with the newline `echo` adds); its path.
fn secret_file(dir: &Path, name: &str, contents: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, format!("{contents}\n")).expect("a secret file");
    path.display().to_string()
}

/// The relay binary with these settings and nothing inherited, on a free
/// port, standard error piped; not yet ready.
fn spawn(settings: &[(&str, String)], args: &[&str]) -> RelayProcess {
    use assert_cmd::cargo::CommandCargoExt;
    let addr: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().expect("addr");
    let mut command =
        std::process::Command::cargo_bin("aromba-relay").expect("the aromba-relay binary is built");
    command
        .env_clear()
        .env("AROMBA_RELAY_LISTEN", addr.to_string())
        .env(
            "AROMBA_RELAY_METRICS_LISTEN",
            format!("127.0.0.1:{}", free_port()),
        )
        .env("RUST_LOG", "warn")
        .env("AROMBA_TELEGRAM_APP", "aromba")
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    for (name, value) in settings {
        command.env(name, value);
    }
    let child = command.spawn().expect("the relay starts");
    RelayProcess { child, addr }
}

async fn wait_ready(process: &mut RelayProcess) {
    for _ in 0..400 {
        if let Ok(r) = reqwest::get(format!("http://{}/readyz", process.addr)).await
            && r.status() == 200
        {
            return;
        }
        if let Ok(Some(status)) = process.child.try_wait() {
            let mut log = String::new();
            if let Some(mut stderr) = process.child.stderr.take() {
                let _ = stderr.read_to_string(&mut log);
            }
            panic!("the relay exited ({status}): {log}");
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the relay did not become ready");
}

/// Stops the relay; everything it wrote on standard error.
fn stop(mut process: RelayProcess) -> String {
    let _ = process.child.kill();
    let _ = process.child.wait();
    let mut log = String::new();
    if let Some(mut stderr) = process.child.stderr.take() {
        let _ = stderr.read_to_string(&mut log);
    }
    log
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// The password in the test database's URL.
fn database_password(url: &str) -> String {
    url::Url::parse(url)
        .expect("DATABASE_URL is a URL")
        .password()
        .expect("the test DATABASE_URL has a password")
        .to_string()
}

/// A POST to the webhook route with this secret: its status.
async fn webhook_status(process: &RelayProcess, secret: &str) -> u16 {
    reqwest::Client::new()
        .post(format!("http://{}/v1/telegram/webhook", process.addr))
        .header("X-Telegram-Bot-Api-Secret-Token", secret)
        .body("{}")
        .send()
        .await
        .expect("the relay answers")
        .status()
        .as_u16()
}

#[sqlx::test(migrations = false)]
async fn a_relay_given_every_secret_in_a_file_is_ready_and_its_environ_holds_none_of_them(
    db: PgPool,
) {
    let (_fake, fake_addr) = fake().await;
    let dir = tempfile::tempdir().expect("a folder");
    let url = support::database_url(&db);
    let secret = "file-webhook-secret-0123456789";
    let previous = "file-previous-secret-9876543210";
    let mut process = spawn(
        &[
            (
                "DATABASE_URL_FILE",
                secret_file(dir.path(), "database_url", &url),
            ),
            (
                "AROMBA_TOKEN_PEPPER_FILE",
                secret_file(dir.path(), "token_pepper", &pepper()),
            ),
            (
                "TELEGRAM_BOT_TOKEN_FILE",
                secret_file(dir.path(), "bot_token", BOT_TOKEN),
            ),
            (
                "TELEGRAM_WEBHOOK_SECRET_FILE",
                secret_file(dir.path(), "webhook_secret", secret),
            ),
            (
                "TELEGRAM_WEBHOOK_SECRET_PREVIOUS_FILE",
                secret_file(dir.path(), "webhook_secret_previous", previous),
            ),
            ("AROMBA_TELEGRAM_MODE", "polling".into()),
            ("AROMBA_BOT_API_URL", format!("http://{fake_addr}")),
        ],
        &[],
    );
    wait_ready(&mut process).await;
    let environ = std::fs::read(format!("/proc/{}/environ", process.child.id()))
        .expect("the relay's environ");
    assert!(contains(&environ, "AROMBA_TOKEN_PEPPER_FILE="));
    for value in [
        url.as_str(),
        &database_password(&url),
        &pepper(),
        BOT_TOKEN,
        secret,
        previous,
    ] {
        assert!(
            !contains(&environ, value),
            "/proc/<pid>/environ holds a secret"
        );
    }
    // The webhook secrets are the files' (the current one and the one
    // before a rotation), not some default.
    assert_eq!(webhook_status(&process, secret).await, 200);
    assert_eq!(webhook_status(&process, previous).await, 200);
    assert_eq!(webhook_status(&process, "another-secret").await, 404);
    let log = stop(process);
    assert!(!log.contains("is given by value"), "{log}");
    assert!(
        !log.contains(&pepper()) && !log.contains(BOT_TOKEN),
        "{log}"
    );
}

#[sqlx::test(migrations = false)]
async fn a_database_password_file_completes_a_url_without_one(db: PgPool) {
    let dir = tempfile::tempdir().expect("a folder");
    let url = support::database_url(&db);
    let password = database_password(&url);
    let mut bare = url::Url::parse(&url).expect("a URL");
    bare.set_password(None).expect("a URL with a host");
    // PostgreSQL asks the test role for its password over TCP (scripts/test's
    // cluster), so a ready relay used the file's.
    let mut process = spawn(
        &[
            ("DATABASE_URL", bare.to_string()),
            (
                "DATABASE_PASSWORD_FILE",
                secret_file(dir.path(), "db_password", &password),
            ),
            (
                "AROMBA_TOKEN_PEPPER_FILE",
                secret_file(dir.path(), "token_pepper", &pepper()),
            ),
        ],
        &[],
    );
    wait_ready(&mut process).await;
    let log = stop(process);
    // A URL without a password is no secret: no warning.
    assert!(!log.contains("is given by value"), "{log}");
}

/// The relay's one sentence on standard error, for settings that stop it
/// before it reaches the database.
fn refusal(settings: &[(&str, String)]) -> String {
    let out = assert_cmd::Command::cargo_bin("aromba-relay")
        .expect("the aromba-relay binary is built")
        .env_clear()
        .env("AROMBA_TELEGRAM_APP", "aromba")
        .envs(settings.iter().map(|(n, v)| (*n, v.as_str())))
        .timeout(Duration::from_secs(30))
        .output()
        .expect("runs");
    let text = String::from_utf8_lossy(&out.stderr).trim_end().to_string();
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(
        text.starts_with("aromba-relay: ") && text.ends_with('.'),
        "{text}"
    );
    text
}

/// Every secret in a file, for a relay with a bot (that would go on to
/// the unreachable database).
fn all_in_files(dir: &Path) -> Vec<(&'static str, String)> {
    vec![
        (
            "DATABASE_URL_FILE",
            secret_file(dir, "database_url", "postgres://u:p@127.0.0.1:1/none"),
        ),
        (
            "AROMBA_TOKEN_PEPPER_FILE",
            secret_file(dir, "token_pepper", &pepper()),
        ),
        (
            "TELEGRAM_BOT_TOKEN_FILE",
            secret_file(dir, "bot_token", BOT_TOKEN),
        ),
        (
            "TELEGRAM_WEBHOOK_SECRET_FILE",
            secret_file(dir, "webhook_secret", "a-good-secret"),
        ),
        (
            "TELEGRAM_WEBHOOK_SECRET_PREVIOUS_FILE",
            secret_file(dir, "webhook_secret_previous", "a-good-old-secret"),
        ),
        ("AROMBA_PUBLIC_URL", "https://relay.example.com".into()),
    ]
}

#[test]
fn a_secret_given_by_value_and_in_a_file_is_refused_naming_both() {
    let dir = tempfile::tempdir().expect("a folder");
    for (name, value) in [
        ("DATABASE_URL", "postgres://u:p@127.0.0.1:1/none"),
        ("AROMBA_TOKEN_PEPPER", &pepper()),
        ("TELEGRAM_BOT_TOKEN", BOT_TOKEN),
        ("TELEGRAM_WEBHOOK_SECRET", "a-good-secret"),
        ("TELEGRAM_WEBHOOK_SECRET_PREVIOUS", "a-good-old-secret"),
    ] {
        let mut settings = all_in_files(dir.path());
        settings.push((name, value.to_string()));
        let text = refusal(&settings);
        assert!(
            text.contains(&format!("{name} and {name}_FILE are both set")),
            "{text}"
        );
    }
    // A password in the URL and in DATABASE_PASSWORD_FILE.
    let mut settings = all_in_files(dir.path());
    settings.push((
        "DATABASE_PASSWORD_FILE",
        secret_file(dir.path(), "db_password", PLANTED),
    ));
    let text = refusal(&settings);
    assert!(
        text.contains("DATABASE_URL_FILE holds a password and DATABASE_PASSWORD_FILE"),
        "{text}"
    );
}

#[test]
fn an_unreadable_empty_or_unusable_secret_file_is_refused_naming_it_without_its_content() {
    let dir = tempfile::tempdir().expect("a folder");
    let missing = dir.path().join("no-such-file").display().to_string();
    let folder = dir.path().display().to_string();
    let empty = secret_file(dir.path(), "empty", "  \n");
    let huge = secret_file(dir.path(), "huge", &PLANTED.repeat(4_000));
    let binary = dir.path().join("binary");
    std::fs::write(&binary, [PLANTED.as_bytes(), &[0xff, 0xfe]].concat()).expect("a file");
    let binary = binary.display().to_string();
    for name in [
        "DATABASE_URL_FILE",
        "DATABASE_PASSWORD_FILE",
        "AROMBA_TOKEN_PEPPER_FILE",
        "TELEGRAM_BOT_TOKEN_FILE",
        "TELEGRAM_WEBHOOK_SECRET_FILE",
        "TELEGRAM_WEBHOOK_SECRET_PREVIOUS_FILE",
    ] {
        for (path, why) in [
            (&missing, "cannot be read"),
            (&folder, "cannot be read"),
            (&empty, "is empty"),
            (&huge, "larger than 65536 bytes"),
            (&binary, "not UTF-8"),
        ] {
            let mut settings = all_in_files(dir.path());
            if name == "DATABASE_PASSWORD_FILE" {
                // A URL without a password, for the file to complete.
                settings.retain(|(n, _)| *n != "DATABASE_URL_FILE");
                settings.push(("DATABASE_URL", "postgres://u@127.0.0.1:1/none".into()));
            }
            settings.retain(|(n, _)| *n != name);
            settings.push((name, path.clone()));
            let text = refusal(&settings);
            assert!(
                text.contains(&format!("{name} names {path}, which")) && text.contains(why),
                "{name} {why}: {text}"
            );
            assert!(!text.contains(PLANTED), "{text}");
        }
    }
    // A file that can be read but holds no usable secret: named, not shown.
    for (name, content, want) in [
        (
            "TELEGRAM_BOT_TOKEN_FILE",
            "123456:PLANTED-SECRET-CONTENT",
            "which holds no bot token",
        ),
        (
            "AROMBA_TOKEN_PEPPER_FILE",
            PLANTED,
            "which holds 22 bytes; the pepper is at least 32",
        ),
        (
            "TELEGRAM_WEBHOOK_SECRET_FILE",
            "PLANTED-SECRET-CONTENT with spaces",
            "must be 1 to 256",
        ),
    ] {
        let mut settings = all_in_files(dir.path());
        settings.retain(|(n, _)| *n != name);
        let path = secret_file(dir.path(), "unusable", content);
        settings.push((name, path.clone()));
        let text = refusal(&settings);
        assert!(
            text.contains(name) && text.contains(&path) && text.contains(want),
            "{name}: {text}"
        );
        assert!(!text.contains(PLANTED), "{text}");
    }
}

#[sqlx::test(migrations = false)]
async fn a_secret_given_by_value_still_works_and_its_warning_names_it(db: PgPool) {
    let (_fake, fake_addr) = fake().await;
    let url = support::database_url(&db);
    let pepper = pepper();
    let mut process = spawn(
        &[
            ("DATABASE_URL", url.clone()),
            ("TELEGRAM_BOT_TOKEN", BOT_TOKEN.into()),
            ("AROMBA_TELEGRAM_MODE", "polling".into()),
            ("AROMBA_BOT_API_URL", format!("http://{fake_addr}")),
        ],
        // By flag: on the command line, which everyone can read.
        &["--token-pepper", &pepper],
    );
    wait_ready(&mut process).await;
    let log = stop(process);
    for name in ["DATABASE_URL", "TELEGRAM_BOT_TOKEN"] {
        let warnings: Vec<&str> = log
            .lines()
            .filter(|l| l.contains(&format!("{name} is given by value")))
            .collect();
        assert_eq!(warnings.len(), 1, "one warning for {name}: {log}");
        assert!(
            warnings[0].contains("/proc/<pid>/environ")
                && warnings[0].contains(&format!("set {name}_FILE instead"))
                && warnings[0].contains("\"level\":\"WARN\""),
            "{log}"
        );
    }
    let flag: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("--token-pepper gives AROMBA_TOKEN_PEPPER on the command line"))
        .collect();
    assert_eq!(flag.len(), 1, "{log}");
    assert!(flag[0].contains("/proc/<pid>/cmdline"), "{log}");
    for value in [database_password(&url).as_str(), pepper.as_str(), BOT_TOKEN] {
        assert!(!log.contains(value), "the log holds a secret: {log}");
    }
}
