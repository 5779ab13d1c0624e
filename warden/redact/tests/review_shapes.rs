//! Each shape a review found passing whole or destroyed, as real programs
//! print it: a secret is gone, the text around it and every decoy stay.

use aromba_testkit::redaction as support;

use aromba_redact::Class;
use support::{L1, L2, L3, gone, out};

#[test]
fn the_tail_of_a_key_journalctl_shows_without_its_begin_line_is_removed() {
    let input = format!(
        "Dec 02 04:14:53 web-1 app[812]: {L1}\nDec 02 04:14:53 web-1 app[812]: {L2}\nDec 02 04:14:54 web-1 app[812]: {L3}\nDec 02 04:14:54 web-1 app[812]: AQAB\nDec 02 04:14:54 web-1 app[812]: -----END RSA PRIVATE KEY-----\nDec 02 04:14:55 web-1 app[812]: listening on :8080\n"
    );
    let counts = gone(&input, &[L1, L2, L3, "AQAB"], &["listening on :8080"]);
    assert_eq!(counts.get(Class::PrivateKey), 1);
}

#[test]
fn a_key_cut_before_its_end_line_takes_only_its_own_lines() {
    let after: String = (0..200)
        .map(|i| {
            format!(
                "Dec 02 04:15:{:02} web-1 app[812]: request {i} served.\n",
                i % 60
            )
        })
        .collect();
    let input = format!("-----BEGIN RSA PRIVATE KEY-----\n{L1}\n{L2}\n{after}");
    gone(
        &input,
        &[L1, L2],
        &["request 0 served.", "request 199 served."],
    );
}

#[test]
fn the_middle_of_a_key_with_neither_armor_line_is_removed() {
    let input = format!("$ sed -n 5,7p key.pem\n{L1}\n{L2}\n{L3}\ndone.\n");
    gone(&input, &[L1, L2, L3], &["sed -n 5,7p key.pem", "done."]);
}

#[test]
fn a_certificate_whole_or_cut_is_kept() {
    let input = format!(
        "-----BEGIN CERTIFICATE-----\n{L1}\n{L2}\n-----END CERTIFICATE-----\n{L3}\n{L2}\n-----END CERTIFICATE-----\n"
    );
    let (text, counts) = out(&input);
    assert_eq!(text, input);
    assert_eq!(counts.total(), 0);
}

#[test]
fn connection_string_passwords_with_reserved_bytes_are_removed_whole() {
    gone(
        "postgres://app:Hx7#kLq92mZpW4@db/app",
        &["Hx7#kLq92mZpW4", "kLq92mZpW4"],
        &["postgres://app:", "@db/app"],
    );
    gone(
        "redis://:my secret pass 42@cache/0",
        &["my secret pass 42", "pass 42"],
        &["redis://:", "@cache/0"],
    );
    gone(
        "mysql://root:p/ss?w0rd@10.0.0.5:3306/shop",
        &["p/ss?w0rd", "w0rd"],
        &["@10.0.0.5:3306/shop"],
    );
}

#[test]
fn json_escaped_and_percent_encoded_urls_are_read() {
    gone(
        r#"{"dsn":"postgres:\/\/app:Hx7kLq92mZpW4@db\/app"}"#,
        &["Hx7kLq92mZpW4"],
        &[r"@db\/app"],
    );
    gone(
        "GET /login?next=https%3A%2F%2Fadmin%3AHx7kLq92mZpW4%40intranet%2Fdash HTTP/1.1",
        &["Hx7kLq92mZpW4"],
        &["%40intranet%2Fdash"],
    );
}

#[test]
fn escaped_and_split_assignments_are_removed() {
    gone(
        r#"{"q":"user\u003dbob\u0026password\u003dHx7kLq92mZpW4\u0026x\u003d1"}"#,
        &["Hx7kLq92mZpW4"],
        &[r"\u0026x\u003d1"],
    );
    gone(
        r"{\u0022Password\u0022:\u0022Hx7kLq92mZpW4\u0022}",
        &["Hx7kLq92mZpW4"],
        &[r"\u0022Password\u0022:\u0022"],
    );
    gone(
        "grant_type=client_credentials&client_secret%3DHx7kLq92mZpW4%26scope%3Dall",
        &["Hx7kLq92mZpW4"],
        &["%26scope%3Dall"],
    );
    gone(
        "auth:\n  secret: >-\n    folded secret\n    value here\n  user: bob\n",
        &["folded secret", "value here"],
        &["  user: bob"],
    );
    gone(
        "Server=db;Database=shop;User Id=sa;Password=two words;Encrypt=true",
        &["two words"],
        &["Encrypt=true", "User Id=sa"],
    );
    gone(
        "POST https%3A%2F%2Fapi.telegram.org%2Fbot123456789%3AAAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1%2FsendMessage",
        &["AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1"],
        &["%2FsendMessage"],
    );
    let counts = gone(
        "> Authorization: token 0123456789abcdef0123456789abcdef01234567",
        &["0123456789abcdef0123456789abcdef01234567"],
        &["Authorization: token "],
    );
    assert_eq!(counts.get(Class::AuthHeader), 1);
}

#[test]
fn challenges_public_keys_and_digests_are_not_destroyed() {
    for decoy in [
        "WWW-Authenticate: Bearer realm=\"api\"",
        "< www-authenticate: Bearer realm=\"example\", error=\"invalid_token\"",
        "interface: wg0\n  public key: xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=\n  private key: (hidden)",
        "key_id=sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    ] {
        let (text, counts) = out(decoy);
        assert_eq!(text, decoy);
        assert_eq!(counts.total(), 0, "{decoy}");
    }
}

#[test]
fn a_token_as_a_url_user_name_is_removed_with_the_password() {
    let counts = gone(
        "origin\thttps://ghp_16C7e42F292c6912E7710c838347Ae178B4a:x-oauth-basic@github.com/acme/shop.git (fetch)",
        &["ghp_16C7e42F292c6912E7710c838347Ae178B4a", "x-oauth-basic"],
        &["@github.com/acme/shop.git (fetch)"],
    );
    assert_eq!(counts.get(Class::GitHubToken), 1);
    assert_eq!(counts.get(Class::UrlPassword), 1);
}
