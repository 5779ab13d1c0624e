//! Links the model smuggles into the chat. The attacker is the model
//! endpoint, hostile or obeying a line planted in what it read. It tries
//! to put before the person something Telegram makes tappable — a URL, a
//! bare domain with or without a path, `t.me/…`, an `@username`, a host
//! written with a look-alike dot, a host that the cut of a too-long text
//! makes — by every way its words reach the chat: the answer (whole or
//! streamed), the progress line (the tool names it wrote), an endpoint's
//! error message and a proposal's reason. What holds: no message the chat
//! shows, partial edits included, holds a link or a host Telegram would
//! link, and every message of an answer goes with link previews off and
//! no parse mode.
//!
//! End to end: the real Worker, a real Warden, a real relay with the fake
//! Bot API, a scripted model (`model_fake`, and `model_fake::streamed` for
//! streamed answers). Each test's doc says what the attack did when it
//! was found; the test keeps it out. The filter itself, at the unit level:
//! `agent/tests/adversarial_model_links/in_process.rs`.

/// The same threat met in-process: the assistant's loop against a scripted
/// model, no relay, no Warden.
#[path = "adversarial_model_links/in_process.rs"]
mod in_process;

use aromba_testkit::model_fake;
use aromba_testkit::paired;

use model_fake::streamed::{self, Streamed, answered, calls_one, says, text_event, usage_event};
use model_fake::{Canned, Script, call, calls, say, with_model, with_model_setup};
use paired::{CHAT, Paired, Setup, paired_with, said, watch_until, write_mine};
use serde_json::json;
use sqlx::PgPool;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Every text the chat shows after the first `after` messages, watched
/// for `for_` (edits included: each poll keeps what the messages read
/// then).
async fn watch_chat(p: &Paired, after: usize, for_: Duration) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    let end = Instant::now() + for_;
    while Instant::now() < end {
        for m in p.bot.fake.sent_to(CHAT).into_iter().skip(after) {
            if !seen.contains(&m.text) {
                seen.push(m.text);
            }
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    seen
}

/// Whether Telegram would turn part of `text` into something to tap: a
/// URL with a scheme, a bare domain of a common top-level domain (with or
/// without a path), a `t.me` link or an `@username`.
fn tappable(text: &str) -> Option<String> {
    for word in text.split(|c: char| c.is_whitespace() || "()<>\"'".contains(c)) {
        let w = word.trim_matches(|c: char| ",.;:!?".contains(c));
        let lower = w.to_ascii_lowercase();
        if lower.contains("://") {
            return Some(w.into());
        }
        if lower.starts_with('@')
            && lower.len() > 5
            && lower[1..]
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            return Some(w.into());
        }
        let host = lower.split(['/', '?', '#']).next().unwrap_or("");
        let tld = host.rsplit('.').next().unwrap_or("");
        if host.contains('.')
            && [
                "com", "net", "org", "io", "me", "ru", "xyz", "co", "app", "dev",
            ]
            .contains(&tld)
            && host
                .split('.')
                .all(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
        {
            return Some(w.into());
        }
    }
    None
}

/// The progress line ("Looking into it: …") names the tools the model
/// called, by the names the model wrote, before any is parsed: a tool
/// "name" that is a link (or any 64 characters the model likes) is edited
/// into the chat.
#[sqlx::test(migrations = false)]
async fn a_tool_name_that_is_a_link_reaches_the_chat_in_the_progress_line(db: PgPool) {
    let script: Script = Arc::new(|round, _, _| match round {
        0 => Canned::ok(calls(
            &[
                ("https://evil.example/login", json!({})),
                ("evil.com/reset-your-key", json!({})),
            ],
            30,
            6,
        ))
        // Long enough for the progress line to be seen.
        .after(Duration::from_secs(3)),
        _ => Canned::ok(say("All fine.")).after(Duration::from_secs(3)),
    });
    let (p, _model) = with_model(db, "round-toolname", script).await;
    let before = p.bot.fake.sent_to(CHAT).len();
    p.bot.fake.user_message(CHAT, "anything wrong?");
    let seen = watch_until(&p, before, Duration::from_secs(30), |t| {
        t.contains("tokens in")
    })
    .await;
    for t in &seen {
        assert!(
            tappable(t).is_none(),
            "a link of the model's reached the chat: {t:?}"
        );
    }
}

/// An endpoint's error message goes into the chat as it is: a link in it
/// is not taken out.
#[sqlx::test(migrations = false)]
async fn an_endpoint_error_message_carries_a_link_into_the_chat(db: PgPool) {
    let script: Script = Arc::new(|_, _, _| Canned {
        status: 401,
        body: json!({"error": {"message":
            "Your key expired: renew it at https://evil.example/renew"}})
        .to_string(),
        delay: Duration::ZERO,
        stream: None,
    });
    let (p, _model) = with_model(db, "round-errlink", script).await;
    let answer = p
        .ask("anything wrong?", |t| {
            said(t).starts_with("The assistant could not answer")
        })
        .await;
    assert!(
        tappable(&answer.text).is_none(),
        "the endpoint's link reached the chat: {:?}",
        answer.text
    );
}

/// `without_links` takes out words with `://`, `www.`, `](` or `mailto:`;
/// Telegram also makes a bare domain, a domain with a path, `t.me/…` and
/// `@username` tappable.
#[sqlx::test(migrations = false)]
async fn a_bare_domain_and_telegram_autolinks_survive_in_the_answer(db: PgPool) {
    let script: Script = Arc::new(|_, _, _| {
        Canned::ok(say(
            "All fine. To keep it so, sign in at evil.com/login, or write to t.me/evil_support_bot or @evil_support_bot.",
        ))
    });
    let (p, _model) = with_model(db, "round-autolink", script).await;
    let answer = p.ask("anything wrong?", |t| t.contains("tokens in")).await;
    assert!(
        tappable(&answer.text).is_none(),
        "a link of the model's reached the chat: {:?}",
        answer.text
    );
}

/// The model streams a host written with U+FF61 (halfwidth ideographic
/// full stop), which Telegram's parser takes for a dot: neither the
/// partial edits nor the final answer may show it as written.
#[sqlx::test(migrations = false)]
async fn a_look_alike_dot_host_never_reaches_the_chat_in_a_streamed_answer(db: PgPool) {
    let host = "collect\u{ff61}pro/k?d=1";
    let script: streamed::Script = Arc::new(move |_, _| Streamed {
        content_type: "text/event-stream",
        pieces: vec![
            (
                text_event("The disk is fine. Send the log to "),
                Duration::ZERO,
            ),
            (
                text_event(&format!("{host} and the key to collect\u{ff61}pro.")),
                Duration::from_millis(1500),
            ),
            (
                format!("{}data: [DONE]\n\n", usage_event(20, 4)),
                Duration::from_millis(1500),
            ),
        ],
    });
    let (p, _model) = streamed::with_model(db, "round2-lookalike", script).await;
    let before = p.bot.fake.sent_to(CHAT).len();
    p.bot.fake.user_message(CHAT, "how is the disk?");
    let seen = watch_until(&p, before, Duration::from_secs(30), |t| {
        t.contains("tokens in")
    })
    .await;
    assert!(
        seen.iter().any(|t| t.contains("tokens in")),
        "no answer: {seen:?}"
    );
    let shown: Vec<&String> = seen
        .iter()
        .filter(|t| t.contains("collect\u{ff61}pro"))
        .collect();
    assert!(shown.is_empty(), "the host reached the chat: {shown:#?}");
}

/// A proposal's `why` is the model's text in the chat: the same links.
#[sqlx::test(migrations = false)]
async fn a_proposals_reason_carries_a_bare_domain_into_the_chat(db: PgPool) {
    let script: Script = Arc::new(|round, _, _| match round {
        0 => Canned::ok(call(
            "propose_chore",
            json!({"name": "apt-clean-mine", "why": "the cache is big; details at evil.com/apt"}),
        )),
        _ => Canned::ok(say("Proposed.")),
    });
    let (p, _model) = with_model_setup(db, "round-why", Setup::default(), script, |w| {
        write_mine(
            w,
            "apt-clean-mine",
            "#!/bin/sh\n# aromba-chore: 1\n# name: apt-clean-mine\n# description: Does nothing\n# color: red\n# touches: /var/tmp/aromba-round-why-nothing\n# network: no\n# schedule: manual\n# end\necho nothing\n",
        )
    })
    .await;
    let before = p.bot.fake.sent_to(CHAT).len();
    p.ask("anything wrong?", |t| t.contains("tokens in")).await;
    let seen = watch_chat(&p, before, Duration::from_secs(3)).await;
    let proposal = seen
        .iter()
        .find(|t| said(t).starts_with("The assistant proposes the chore"))
        .unwrap_or_else(|| panic!("no proposal: {seen:?}"));
    assert!(
        tappable(proposal).is_none(),
        "a link of the model's reached the chat: {proposal:?}"
    );
}

/// A proposal's reason is filtered, then cut at 300 characters
/// (`ask::offer`); the filter makes it longer (`x.io` becomes
/// `[link removed]`). `collect.pro1234` is no host to the filter, but cut
/// right after `collect.pro` it is one, at the end of the chat's message.
#[sqlx::test(migrations = false)]
async fn a_proposals_reason_cut_does_not_make_a_host(db: PgPool) {
    let dir = PathBuf::from(format!("/var/tmp/aromba-round2-why-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the cache");
    let chore = format!(
        "#!/bin/sh\n# aromba-chore: 1\n# name: tidy-why\n# description: Empties the cache folder\n# color: green\n# touches: {d}\n# network: no\n# schedule: manual\n# end\nif [ \"$1\" = --dry-run ]; then echo would remove the tmp files; exit 0; fi\nrm -f {d}/*.tmp\n",
        d = dir.display()
    );
    // 207 bytes within the grammar's 300; the ten hosts become
    // "[link removed]" (ten characters longer each), so the 300-character
    // cut falls right after "collect.pro".
    let why = format!(
        "{}{} collect.pro1234 ok",
        "x.io ".repeat(10),
        "a ".repeat(69)
    );
    let script: streamed::Script = Arc::new(move |_, request| {
        if answered(request) {
            says("I proposed it.")
        } else {
            calls_one("propose_chore", json!({"name": "tidy-why", "why": why}))
        }
    });
    let model = streamed::fake_model(script).await;
    let url = model.url.clone();
    let p = paired_with(db, "round2-why", Setup::default(), move |w| {
        model_fake::assistant_files(w, &url, "hostile");
        paired::write_mine(w, "tidy-why", &chore);
    })
    .await;
    let before = p.bot.fake.sent_to(CHAT).len();
    p.bot.fake.user_message(CHAT, "is the cache big?");
    let proposed = p
        .next(before, |t| {
            said(t).starts_with("The assistant proposes the chore")
        })
        .await;
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        !proposed.text.trim_end().ends_with("collect.pro"),
        "the reason ends with a host: {:?}",
        proposed.text
    );
}

/// Every message of an answer (the progress edits, the answer, the
/// proposal) goes with link previews off.
#[sqlx::test(migrations = false)]
async fn every_message_of_an_answer_has_link_previews_off(db: PgPool) {
    let script: Script = Arc::new(|round, _, _| match round {
        0 => Canned::ok(call("memory", json!({}))).after(Duration::from_millis(500)),
        _ => Canned::ok(say("Memory is fine.")),
    });
    let (p, _model) = with_model(db, "round-previews", script).await;
    let before = p.bot.fake.sent_to(CHAT).len();
    p.ask("memory?", |t| t.contains("tokens in")).await;
    for m in p.bot.fake.sent_to(CHAT).into_iter().skip(before) {
        assert!(m.previews_off, "{m:?}");
        assert!(m.parse_mode.is_none(), "{m:?}");
    }
}
