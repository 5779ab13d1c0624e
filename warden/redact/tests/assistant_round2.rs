//! The assistant's second attack round: secrets in realistic output of the
//! reads the assistant may make (a service's journal, `systemctl status`
//! with its command line, a container's log, `ps`-like lines) that would
//! go to a third party's model if the redactor missed them. Each test
//! asserts the secret is removed.
//!
//! The round also found three shapes the redactor keeps, as SECURITY.md's
//! Redaction section says it does: a password glued to a short option
//! (`mysqldump -uroot -pX`, a command line without a keyword), a password
//! in prose ("Initial admin password is X", Jenkins' password on the line
//! after its announcement), and secrets in formats the list does not name
//! (a Discord webhook's path, a Sentry DSN's key).

use aromba_redact::redact;

fn kept(text: &str, secret: &str) -> Option<String> {
    let out = String::from_utf8_lossy(&redact(text.as_bytes()).text).into_owned();
    out.contains(secret).then_some(out)
}

const SECRET: &str = "Vq7xRm2pLk9sWd4z";

fn misses(cases: &[String]) -> Vec<String> {
    cases.iter().filter_map(|c| kept(c, SECRET)).collect()
}

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
