//! The assistant's second attack round: secrets in realistic output of the
//! reads the assistant may make (a service's journal, `systemctl status`
//! with its command line, a container's log, `ps`-like lines) that would
//! go to a third party's model if the redactor missed them. Each test
//! asserts the secret is removed.

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

/// A MySQL client's password glued to its option (`-pSECRET`), as a
/// cron job's or a backup script's command line shows in the journal.
#[test]
fn a_glued_mysql_password_is_removed() {
    let cases = [
        format!(
            "Dec 04 03:00:01 host CRON[2211]: (root) CMD (mysqldump -uroot -p{SECRET} --all-databases > /var/backups/all.sql)"
        ),
        format!(
            "Dec 04 03:00:01 host CRON[2212]: (root) CMD (mysql -u root -p'{SECRET}' -e 'FLUSH LOGS')"
        ),
    ];
    let m = misses(&cases);
    assert!(m.is_empty(), "kept: {m:#?}");
}

/// What a database image prints in its container's log on first start:
/// MySQL's "GENERATED ROOT PASSWORD: X", and an app's "admin password is
/// X" or a password on the line after its announcement (Jenkins).
#[test]
fn a_generated_password_in_a_containers_log_is_removed() {
    let cases = [
        format!("2026-12-04 10:00:00+00:00 [Note] [Entrypoint]: GENERATED ROOT PASSWORD: {SECRET}"),
        format!("app-1  | Initial admin password is {SECRET}"),
        format!(
            "jenkins-1  | Please use the following password to proceed to installation:\njenkins-1  | \njenkins-1  | {SECRET}\njenkins-1  | "
        ),
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
    ];
    let m = misses(&cases);
    assert!(m.is_empty(), "kept: {m:#?}");
}

/// Secrets carried in a URL's path or user part, with no keyword near:
/// a Discord webhook (`/api/webhooks/<id>/<token>`), a Sentry DSN (the key
/// is the user part, no password), as an app's journal or container log
/// prints them when it starts or fails to post.
#[test]
fn a_webhook_or_dsn_in_a_url_is_removed() {
    let discord = "Xq3vT9bLm2Rk8Wd1Zp5Ys7Hc0Nf4Jg6Ua-Ve_Qo2Ib9Mx1Ct3Ls8Pz0Ka7Ow5Rn4";
    let sentry = "4f9a2c7e1b8d4e6fa3c5b7d9e1f2a4c6";
    let mut misses = Vec::new();
    for (line, secret) in [
        (
            format!(
                "Dec 04 10:00:01 host alerts[411]: POST https://discord.com/api/webhooks/1180123456789012345/{discord} failed: 429"
            ),
            discord,
        ),
        (
            format!(
                "app-1  | Sentry enabled: https://{sentry}@o123456.ingest.sentry.io/4505123456789"
            ),
            sentry,
        ),
    ] {
        if let Some(out) = kept(&line, secret) {
            misses.push(out);
        }
    }
    assert!(misses.is_empty(), "kept: {misses:#?}");
}
