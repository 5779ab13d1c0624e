//! The assistant's attack round: secrets a model would be sent because the
//! redactor does not know them. What a read returns (a service's journal,
//! a container's log) goes to a third party's model now, so each miss here
//! leaves the server. Each test asserts the secret is removed.

use aromba_redact::redact;

fn kept(line: &str, secret: &str) -> Option<String> {
    let out = String::from_utf8_lossy(&redact(line.as_bytes()).text).into_owned();
    out.contains(secret).then_some(out)
}

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
