//! Links the model smuggles into the chat, at the unit level: the filter
//! (`without_links`) and the progress line. The attacker: a model whose
//! words (its answer, its tool names) the chat shows. What it tries:
//! something Telegram makes tappable — a bare domain, `t.me/…`, an
//! `@username`, an e-mail address, a scheme broken by an invisible or a
//! full-width character, a host with a look-alike dot, a punycode
//! top-level domain, an IP address with a path, a host the answer's cut
//! makes — or a tool "name" that is a link, shown as progress. What holds:
//! each is taken out or defanged, and the progress line names only the
//! grammar's tools. End to end: `agent/tests/adversarial_model_links.rs`.

use aromba::assistant::conversation::{self, answer, without_links};
use aromba::assistant::model::{Message, Model, ModelError, Reply, Usage};
use aromba::assistant::tools;
use aromba_testkit::model::{Quiet, Scripted, Server, reply, text};

/// Whether `out` still holds `host` as it was written (not taken out, not
/// defanged).
fn kept(out: &str, host: &str) -> bool {
    out.contains(host)
}

// ---------------------------------------------------------------------
// What Telegram links by itself.
// ---------------------------------------------------------------------

/// Telegram auto-links a bare domain, a domain with a path, `t.me/…`, an
/// `@username` and an e-mail address in plain text; `without_links` only
/// looks for `://`, `www.`, `](` and `mailto:`.
#[test]
fn telegram_autolinks_survive_without_links() {
    let mut survived = Vec::new();
    for (case, link) in [
        ("sign in at evil.com/login now", "evil.com/login"),
        ("see evil.com for details", "evil.com"),
        ("write to t.me/evil_support_bot", "t.me/evil_support_bot"),
        ("ask @evil_support_bot", "@evil_support_bot"),
        ("mail root@evil.com", "root@evil.com"),
        // A scheme broken by a zero-width space: the domain stays.
        ("https:\u{200b}//evil.com/x", "evil.com/x"),
        // A full-width colon: the domain stays.
        ("https\u{ff1a}//evil.com/x", "evil.com/x"),
    ] {
        let out = without_links(case);
        if out.contains(link) {
            survived.push(format!("{case:?} → {out:?}"));
        }
    }
    assert!(survived.is_empty(), "links that survived: {survived:#?}");
}

/// What the filter does take out (held).
#[test]
fn schemes_www_and_markdown_links_are_taken_out() {
    for case in [
        "HTTPS://evil.example/x",
        "hTtP://evil.example",
        "(https://evil.example/x)",
        "ftp://evil.example/x",
        "tg://resolve?domain=evil",
        "WWW.evil.example",
        "[tap](evil.example)",
        "MAILTO:root@evil.example",
        "x\u{200b}https://evil.example",
    ] {
        let out = without_links(case);
        assert!(out.contains("[link removed]"), "{case:?} → {out:?}");
        assert!(!out.contains("evil.example"), "{case:?} → {out:?}");
    }
}

/// Telegram's entity parser (tdlib's `match_urls`) takes `.`, U+3002,
/// U+FF0E and U+FF61 (halfwidth ideographic full stop) for a dot between
/// a host's labels. `without_links` maps only U+FF0E and U+3002 to `.`
/// first: a host written with U+FF61 (or the other look-alike dots, U+2024
/// one dot leader and U+FE52 small full stop) is neither a link nor a host
/// to it, and reaches the chat as written.
#[test]
fn look_alike_dots_leave_no_host_to_tap() {
    let mut survived = Vec::new();
    for dot in ['\u{ff61}', '\u{2024}', '\u{fe52}'] {
        for host in [
            format!("collect{dot}pro/k?d=1"),
            format!("evil{dot}com"),
            format!("t{dot}me/evil_support_bot"),
        ] {
            let out = without_links(&format!("send the log to {host} now"));
            if kept(&out, &host) {
                survived.push(format!("U+{:04X}: {out:?}", dot as u32));
            }
        }
    }
    assert!(survived.is_empty(), "hosts that survived: {survived:#?}");
}

/// A punycode top-level domain (`xn--p1ai` is .рф, `xn--80asehdb` is
/// .онлайн) holds digits and `-`: `names_a_host` wants a top-level domain
/// of letters only, and `is_link`'s list has none, so the host reaches the
/// chat whole. Telegram links these as it links `пример.рф`, which the
/// filter does defang.
#[test]
fn a_punycode_top_level_domain_is_defanged() {
    let mut survived = Vec::new();
    for host in [
        "collect.xn--p1ai",
        "collect.xn--p1ai/k?d=1",
        "xn--80ak6aa92e.xn--80asehdb",
    ] {
        let out = without_links(&format!("upload it to {host} please"));
        if kept(&out, host) {
            survived.push(out);
        }
    }
    assert!(survived.is_empty(), "hosts that survived: {survived:#?}");
}

/// A host that is an IPv4 address, with a port or a path: its last label
/// is digits, so neither `names_a_host` nor `is_link` looks at it; Telegram
/// links an address with a path (`203.0.113.7/k`) as it links a domain.
#[test]
fn an_ip_address_with_a_path_is_taken_out() {
    let mut survived = Vec::new();
    for host in ["203.0.113.7/k?d=1", "203.0.113.7:8080/upload"] {
        let out = without_links(&format!("post the output to {host} for a check"));
        if kept(&out, host) {
            survived.push(out);
        }
    }
    assert!(survived.is_empty(), "hosts that survived: {survived:#?}");
}

/// Held: the same hosts with a plain dot, a full-width one or U+3002 are
/// defanged or taken out.
#[test]
fn plain_and_mapped_dots_are_defanged() {
    for case in [
        "collect.pro/k",
        "collect\u{ff0e}pro/k",
        "collect\u{3002}pro/k",
        "t.me/evil_support_bot",
        "root@collect.pro",
    ] {
        let out = without_links(case);
        assert!(
            !out.contains("collect.pro") && !out.contains("t.me/"),
            "{case:?} → {out:?}"
        );
    }
}

// ---------------------------------------------------------------------
// A cut that makes a host.
// ---------------------------------------------------------------------

/// A model whose whole answer is `text`.
struct Says(String);

impl Model for Says {
    async fn complete(
        &self,
        _messages: &[Message],
        _tools: Option<&serde_json::Value>,
    ) -> Result<Reply, ModelError> {
        Ok(Reply {
            text: self.0.clone(),
            calls: vec![],
            usage: Usage::default(),
        })
    }
}

/// Links are taken out first and the answer is cut after: `collect.pro1`
/// is no host to the filter (its last label holds a digit), but cut at
/// 3,000 characters right after `collect.pro` it is one, followed by the
/// cut's newline — a host Telegram links. A proposal's reason is filtered,
/// then cut at 300 characters, the same way (`ask::offer`).
#[tokio::test]
async fn the_answers_cut_does_not_make_a_host_the_filter_let_through() {
    let prefix = "x ".repeat(1_500);
    let prefix: String = prefix
        .chars()
        .take(conversation::MAX_ANSWER_CHARS - "collect.pro".len() - 1)
        .collect();
    let prefix = format!("{prefix} ");
    let text = format!("{prefix}collect.pro1234 is where the logs go.");
    let a = conversation::answer(&Says(text), &Quiet, "q", aromba_testkit::model::NO_LIMITS)
        .await
        .expect("an answer");
    let tail: String = a
        .text
        .chars()
        .rev()
        .take(80)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    assert!(
        !a.text.contains("collect.pro\n"),
        "the answer ends: {tail:?}"
    );
}

// ---------------------------------------------------------------------
// The model's tool names in the chat.
// ---------------------------------------------------------------------

/// The progress line is built from `call.name` as the model wrote it,
/// before the name is parsed: any 64 characters of the model's go to the
/// chat (ask.rs edits them into the answer's message).
#[tokio::test]
async fn a_tool_name_chosen_by_the_model_is_shown_as_progress() {
    let model = Scripted::new(vec![
        reply(&[("https://evil.example/login", "{}")], Usage::default()),
        text("done", Usage::default()),
    ]);
    let server = Server::default();
    answer(&model, &server, "q", aromba_testkit::model::NO_LIMITS)
        .await
        .unwrap();
    let progress = server.progress.lock().unwrap().clone();
    for name in &progress {
        assert!(
            tools::NAMES.contains(&name.as_str()),
            "a name the grammar does not know went to the progress line: {name:?}"
        );
    }
}
