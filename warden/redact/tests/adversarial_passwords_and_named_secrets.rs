//! A read the assistant makes (a service's journal, `systemctl status`
//! with its unit's command line, a container's log, an nginx or app debug
//! line) goes to a third party's model, so a secret the redactor does not
//! know leaves the server. Who attacks: whoever gets a secret printed
//! where the assistant may read it, and the model reading it. What they
//! try: passwords under names without the usual keywords (`PASS`,
//! `PASSPHRASE`), session cookies and ids, AI keys and named secrets, a
//! password option whose value is the next word (`--requirepass X`), and
//! assignments in the shapes journals and `docker logs` carry. What holds:
//! each secret is removed.
//!
//! Three shapes the redactor keeps, as SECURITY.md's Redaction section
//! says it does, were found with these: a password glued to a short
//! option (`mysqldump -uroot -pX`, a command line without a keyword), a
//! password in prose ("Initial admin password is X", Jenkins' password on
//! the line after its announcement), and secrets in formats the list does
//! not name (a Discord webhook's path, a Sentry DSN's key).

use aromba_redact::redact;

fn kept(text: &str, secret: &str) -> Option<String> {
    let out = String::from_utf8_lossy(&redact(text.as_bytes()).text).into_owned();
    out.contains(secret).then_some(out)
}

const SECRET: &str = "Vq7xRm2pLk9sWd4z";

fn misses(cases: &[String]) -> Vec<String> {
    cases.iter().filter_map(|c| kept(c, SECRET)).collect()
}

// ---------------------------------------------------------------------------
// Names that hold a secret.

/// Names that hold a password without any of the keywords: `PASS`
/// (RabbitMQ's image's `RABBITMQ_DEFAULT_PASS`, `DB_PASS`, `SMTP_PASS`)
/// and `PASSPHRASE`.
#[test]
fn a_password_named_pass_or_passphrase_is_removed() {
    let secret = "Vq7xRm2pLk9sWd4z";
    let mut misses = Vec::new();
    for line in [
        format!("RABBITMQ_DEFAULT_PASS={secret}"),
        format!("DB_PASS={secret}"),
        format!("smtp_pass: {secret}"),
        format!("GPG_PASSPHRASE={secret}"),
        format!("\"db_pass\": \"{secret}\""),
    ] {
        if let Some(out) = kept(&line, secret) {
            misses.push(out);
        }
    }
    assert!(misses.is_empty(), "kept: {misses:#?}");
}

/// Cookies and session ids in a log line (an nginx or app debug log).
#[test]
fn a_session_cookie_is_removed() {
    let secret = "9f8e7d6c5b4a39281716a5b4c3d2e1f0";
    let mut misses = Vec::new();
    for line in [
        format!("Cookie: sessionid={secret}"),
        format!("Set-Cookie: session={secret}; HttpOnly"),
        format!("GET /app?sid={secret} HTTP/1.1"),
    ] {
        if let Some(out) = kept(&line, secret) {
            misses.push(out);
        }
    }
    assert!(misses.is_empty(), "kept: {misses:#?}");
}

/// What is removed (held): the assistant's own kind of key, wherever a
/// read shows it.
#[test]
fn ai_keys_and_named_secrets_are_removed() {
    for (line, secret) in [
        (
            "OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD",
            "abcdefghijklmnopqrstuvwxyz0123456789",
        ),
        (
            "x-api-key: sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789",
            "abcdefghijklmnopqrstuvwxyz0123456789",
        ),
        (
            "Authorization: Bearer sk-test-assistant-key-0123456789",
            "sk-test-assistant-key-0123456789",
        ),
        (
            "api_key = \"sk-test-assistant-key-0123456789\"",
            "sk-test-assistant-key-0123456789",
        ),
        ("DB_PASSWORD=Vq7xRm2pLk9sWd4z", "Vq7xRm2pLk9sWd4z"),
    ] {
        assert!(kept(line, secret).is_none(), "{line}");
    }
}

// ---------------------------------------------------------------------------
// Command lines, journals and container logs.

/// A password given as a command-line option with its value in the next
/// word, as `systemctl status` shows a unit's command line (and the journal
/// logs it at start): `--requirepass X` (redis), `--password X`,
/// `--db-password X`.
#[test]
fn a_password_option_in_a_command_line_is_removed() {
    let cases = [
        format!(
            "   CGroup: /system.slice/redis.service\n           └─812 /usr/bin/redis-server 127.0.0.1:6379 --requirepass {SECRET}"
        ),
        format!("Main PID: 901 (app)\n  └─901 /opt/app/bin/app --db-password {SECRET} --port 8080"),
        format!("Dec 04 10:00:01 host app[901]: started with --password {SECRET}"),
    ];
    let m = misses(&cases);
    assert!(m.is_empty(), "kept: {m:#?}");
}

/// Held: assignments in the shapes a journal and `docker logs` carry.
#[test]
fn assignments_in_journal_and_container_lines_are_removed() {
    let cases = [
        format!("Dec 04 10:00:01 host app[901]: config loaded: DB_PASSWORD={SECRET}"),
        format!("web-1  | {{\"level\":\"debug\",\"session\":\"{SECRET}\"}}"),
        format!("Dec 04 10:00:01 host nginx[77]: \"GET /login?token={SECRET} HTTP/1.1\" 200"),
        format!(
            "   CGroup: /system.slice/app.service\n           └─901 /opt/app/bin/app --api-key={SECRET}"
        ),
        format!("postgres://app:{SECRET}@127.0.0.1:5432/app"),
        format!("2026-12-04 10:00:00+00:00 [Note] [Entrypoint]: GENERATED ROOT PASSWORD: {SECRET}"),
    ];
    let m = misses(&cases);
    assert!(m.is_empty(), "kept: {m:#?}");
}
