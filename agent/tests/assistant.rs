//! The assistant end to end: a real relay with the fake Bot API, a real
//! Warden, `aromba pair` (which lists the model's host from
//! `network.toml`'s `[assistant]`), `aromba run` — and a fake
//! OpenAI-compatible model server on loopback that answers from a script
//! and keeps every request it was sent, so a test can see exactly what
//! reached the model.

use aromba_testkit::model_fake;
use aromba_testkit::paired;
use aromba_testkit::worker as support;

use model_fake::{Canned, KEY, Script, call, fake_model, say, say_usage, tool_results};
use paired::{CHAT, Setup, paired_with, write_mine};
use serde_json::json;
use sqlx::PgPool;
use std::sync::Arc;
use support::TestWarden;

/// The line every message of the assistant's opens with (the Worker's
/// `assistant::voice::MARKER`, then a line feed).
const MARKER: &str = "🤖 Assistant (AI, may be wrong):\n";

/// A message's text after the assistant's marker (all of it when it has
/// none: a message of the Worker's own).
fn said(t: &str) -> &str {
    t.strip_prefix(MARKER).unwrap_or(t)
}

fn assistant_files(w: &TestWarden, url: &str) {
    model_fake::assistant_files(w, url, "test-model");
}

#[sqlx::test(migrations = false)]
async fn a_question_is_answered_from_a_warden_read_with_its_usage(db: PgPool) {
    let model = fake_model(Arc::new(|round, _, _| match round {
        0 => Canned::ok(call("memory", json!({}))),
        _ => Canned::ok(say("Memory is fine: most of it is free.")),
    }))
    .await;
    let url = model.url.clone();
    let p = paired_with(db, "assistant-memory", Setup::default(), move |w| {
        assistant_files(w, &url)
    })
    .await;
    let answer = p
        .ask("how is my memory?", |t| {
            said(t).starts_with("Memory is fine")
        })
        .await;
    assert!(answer.text.starts_with(MARKER), "{}", answer.text);
    assert!(
        answer.text.ends_with("— 50 tokens in, 10 out"),
        "{}",
        answer.text
    );
    let asked = model.asked();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert_eq!(asked[0].authorization, format!("Bearer {KEY}"));
    assert_eq!(asked[0].body["model"], "test-model");
    assert!(asked[0].body["tools"].is_array());
    // The last round offers tools too here (only the eighth has none).
    let results = tool_results(&asked);
    assert_eq!(results.len(), 1);
    assert!(results[0].contains("Mem:"), "{}", results[0]);
    // The host was listed by `aromba pair`: the ladder did not move.
    let status = p.warden.aromba_as("root", &["status"]);
    assert!(support::text(&status.stdout).contains("ladder: normal"));
    let _ = CHAT;
}

#[sqlx::test(migrations = false)]
async fn a_secret_in_a_tool_result_is_redacted_before_the_model_sees_it(db: PgPool) {
    // A folder whose name is a token: `du` lists it.
    let planted =
        std::path::PathBuf::from(format!("/var/tmp/aromba-assistant-{}", std::process::id()));
    let secret = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB";
    let _ = std::fs::remove_dir_all(&planted);
    std::fs::create_dir_all(planted.join(secret)).expect("the planted folder");
    let path = planted.to_string_lossy().into_owned();
    let model = fake_model(Arc::new(move |round, _, _| match round {
        0 => Canned::ok(call("disk_usage", json!({"path": path, "depth": 1}))),
        _ => Canned::ok(say("Those folders are small.")),
    }))
    .await;
    let url = model.url.clone();
    let p = paired_with(db, "assistant-redact", Setup::default(), move |w| {
        assistant_files(w, &url)
    })
    .await;
    p.ask("what is in that folder?", |t| {
        said(t).starts_with("Those folders")
    })
    .await;
    let asked = model.asked();
    let everything: String = asked.iter().map(|a| a.body.to_string()).collect();
    assert!(!everything.contains(secret), "the token reached the model");
    let results = tool_results(&asked);
    assert!(results[0].contains("aromba-assistant"), "{}", results[0]);
    let _ = std::fs::remove_dir_all(&planted);
}

#[sqlx::test(migrations = false)]
async fn a_daily_budget_refuses_questions_past_it(db: PgPool) {
    // Each answer counts 25,000 tokens, as the endpoint reports them.
    let model = fake_model(Arc::new(|_, _, _| {
        Canned::ok(say_usage("Fine.", 24_000, 1_000))
    }))
    .await;
    let url = model.url.clone();
    let p = paired_with(db, "assistant-budget", Setup::default(), move |w| {
        assistant_files(w, &url)
    })
    .await;
    p.ask("/ai", |t| {
        t.starts_with("Today: 0 of 200000 tokens (root's ceiling")
    })
    .await;
    p.ask("/ai budget 50000", |t| {
        t.starts_with("The daily budget is 50000 tokens")
    })
    .await;
    p.ask("anything wrong?", |t| said(t).starts_with("Fine."))
        .await;
    p.ask("/ai", |t| t.starts_with("Today: 25000 of 50000 tokens"))
        .await;
    p.ask("and now?", |t| said(t).starts_with("Fine.")).await;
    // 50,000 of 50,000: refused, and the model is not asked.
    let asked = model.asked().len();
    p.ask("one more?", |t| {
        t.starts_with("Today's AI budget (50000 tokens) is spent")
    })
    .await;
    assert_eq!(model.asked().len(), asked);
}

/// A budget too small for a question's first round: the model is not
/// asked, and the chat is told what it would cost.
#[sqlx::test(migrations = false)]
async fn a_question_the_budget_left_cannot_cover_is_not_sent(db: PgPool) {
    let model = fake_model(Arc::new(|_, _, _| Canned::ok(say("Fine.")))).await;
    let url = model.url.clone();
    let p = paired_with(db, "assistant-budget-small", Setup::default(), move |w| {
        assistant_files(w, &url)
    })
    .await;
    p.ask("/ai budget 30", |t| {
        t.starts_with("The daily budget is 30 tokens")
    })
    .await;
    let told = p
        .ask("anything wrong?", |t| {
            said(t).starts_with("I did not ask the assistant")
        })
        .await;
    assert!(told.text.contains("30 are left"), "{}", told.text);
    assert!(model.asked().is_empty(), "the model was asked");
}

#[sqlx::test(migrations = false)]
async fn at_cut_the_key_is_wiped_and_the_assistant_is_off(db: PgPool) {
    let model = fake_model(Arc::new(|_, _, _| Canned::ok(say("Fine.")))).await;
    let url = model.url.clone();
    let p = paired_with(db, "assistant-cut", Setup::default(), move |w| {
        assistant_files(w, &url)
    })
    .await;
    p.ask("anything wrong?", |t| said(t).starts_with("Fine."))
        .await;
    // /panic from the chat is step 3, Cut: the Warden wipes secrets.toml.
    p.ask("/panic", |t| t.contains("reads only")).await;
    let secrets = p.warden.root.join("worker/secrets.toml");
    for _ in 0..100 {
        if !secrets.exists() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(!secrets.exists(), "the key's file is still there");
    let asked = model.asked().len();
    p.ask("still there?", |t| t.starts_with("The assistant is off"))
        .await;
    assert_eq!(model.asked().len(), asked, "the model was asked after Cut");
}

/// A chore script for `mine/`: removes the `*.tmp` files in `dir`; its dry
/// run says so and removes nothing.
fn tidy_chore(name: &str, color: &str, dir: &std::path::Path) -> String {
    format!(
        "#!/bin/sh\n# aromba-chore: 1\n# name: {name}\n# description: Empties the cache folder\n# color: {color}\n# touches: {d}\n# network: no\n# schedule: manual\n# end\nif [ \"$1\" = --dry-run ]; then echo would remove the tmp files; exit 0; fi\nrm -f {d}/*.tmp\n",
        d = dir.display()
    )
}

/// A model that proposes `chore` once, then says so.
fn proposer(chore: &'static str) -> Script {
    Arc::new(move |round, _, _| match round {
        0 => Canned::ok(call(
            "propose_chore",
            json!({"name": chore, "why": "the cache folder holds old files"}),
        )),
        _ => Canned::ok(say("I proposed tidying the cache.")),
    })
}

#[sqlx::test(migrations = false)]
async fn a_proposed_green_chore_shows_its_dry_run_and_runs_only_on_a_tap(db: PgPool) {
    let dir = std::path::PathBuf::from(format!(
        "/var/tmp/aromba-assistant-green-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the cache");
    std::fs::write(dir.join("old.tmp"), "old\n").expect("a cache file");
    let model = fake_model(proposer("tidy-green")).await;
    let url = model.url.clone();
    let chore = tidy_chore("tidy-green", "green", &dir);
    let p = paired_with(db, "assistant-green", Setup::default(), move |w| {
        assistant_files(w, &url);
        write_mine(w, "tidy-green", &chore);
    })
    .await;
    let before = p.bot.fake.sent_to(CHAT).len();
    p.bot.fake.user_message(CHAT, "is the cache big?");
    p.next(before, |t| {
        said(t).starts_with("The assistant proposes the chore tidy-green. Its reason, in its own words: the cache folder holds old files")
    })
    .await;
    let dry = p
        .next(before, |t| {
            t.starts_with("Before tidy-green runs for the first time")
        })
        .await;
    assert!(
        dry.text.contains("would remove the tmp files"),
        "{}",
        dry.text
    );
    let proposal = p
        .next(before, |t| {
            t.starts_with("Run the green chore \"tidy-green\" now?")
        })
        .await;
    let labels: Vec<&str> = proposal
        .buttons
        .iter()
        .flatten()
        .map(|(l, _)| l.as_str())
        .collect();
    assert_eq!(
        labels,
        ["Approve", "Cancel"],
        "the Warden's buttons, not the model's"
    );
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert!(dir.join("old.tmp").exists(), "it ran before the tap");
    // The tap runs it, once.
    let before = p.bot.fake.sent_to(CHAT).len();
    p.tap(&proposal, "Approve").await;
    let receipt = p.next(before, |t| t.starts_with("Done.")).await;
    assert!(!dir.join("old.tmp").exists(), "{}", receipt.text);
    // The person's second tap, on the keyboard already taken off: said,
    // and no anomaly.
    let notice = p.tap_again(&proposal, "Approve").await;
    assert_eq!(
        notice.as_deref(),
        Some("Already answered: nothing more was done.")
    );
    let status = p.warden.aromba_as("root", &["status"]);
    assert!(
        support::text(&status.stdout).contains("ladder: normal"),
        "{}",
        support::text(&status.stdout)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[sqlx::test(migrations = false)]
async fn a_proposed_red_chore_waits_for_the_wardens_signed_approval(db: PgPool) {
    let dir = std::path::PathBuf::from(format!(
        "/var/tmp/aromba-assistant-red-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the cache");
    std::fs::write(dir.join("old.tmp"), "old\n").expect("a cache file");
    let model = fake_model(proposer("tidy-red")).await;
    let url = model.url.clone();
    let chore = tidy_chore("tidy-red", "red", &dir);
    let setup = Setup {
        days_ago: 10,
        ..Setup::default()
    };
    let p = paired_with(db, "assistant-red", setup, move |w| {
        assistant_files(w, &url);
        write_mine(w, "tidy-red", &chore);
    })
    .await;
    let before = p.bot.fake.sent_to(CHAT).len();
    p.bot.fake.user_message(CHAT, "is the cache big?");
    p.next(before, |t| {
        t.starts_with("Before tidy-red runs for the first time")
    })
    .await;
    let proposal = p
        .next(before, |t| {
            t.starts_with("Run the red chore \"tidy-red\" now?")
        })
        .await;
    let labels: Vec<&str> = proposal
        .buttons
        .iter()
        .flatten()
        .map(|(l, _)| l.as_str())
        .collect();
    // A red run: Approve opens the Mini App, where Telegram signs the tap.
    assert_eq!(labels, ["Approve (opens the app)", "Cancel"]);
    assert!(dir.join("old.tmp").exists(), "it ran before the tap");
    let before = p.bot.fake.sent_to(CHAT).len();
    p.tap(&proposal, "Approve").await;
    p.next(before, |t| t.starts_with("Done.")).await;
    assert!(
        !dir.join("old.tmp").exists(),
        "the approved run did not run"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[sqlx::test(migrations = false)]
async fn a_streamed_answer_is_edited_into_its_message_as_it_comes(db: PgPool) {
    let model = fake_model(Arc::new(|_, _, _| {
        Canned::streamed(
            &["The disk ", "is 40% full; ", "nothing to do."],
            std::time::Duration::from_secs(2),
            (15, 7),
        )
    }))
    .await;
    let url = model.url.clone();
    let p = paired_with(db, "assistant-stream", Setup::default(), move |w| {
        assistant_files(w, &url)
    })
    .await;
    let before = p.bot.fake.sent_to(CHAT).len();
    p.bot.fake.user_message(CHAT, "how is the disk?");
    // Every text the answer's message shows, as it is edited.
    let mut seen: Vec<String> = Vec::new();
    for _ in 0..400 {
        for m in p.bot.fake.sent_to(CHAT).into_iter().skip(before) {
            if !seen.contains(&m.text) {
                seen.push(m.text);
            }
        }
        if seen.iter().any(|t| t.contains("tokens in")) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // The first look at the server, or a health alert about the real disk
    // the test runs on, may come meanwhile; the answer is one message,
    // edited in place.
    let messages = p
        .bot
        .fake
        .sent_to(CHAT)
        .into_iter()
        .skip(before)
        .filter(|m| m.text.starts_with("🤖 Assistant"))
        .count();
    assert_eq!(messages, 1, "one message, edited in place: {seen:?}");
    assert!(
        seen.iter()
            .any(|t| said(t).starts_with("The disk ") && !t.contains("nothing to do")),
        "no text of the answer was shown before its end: {seen:?}"
    );
    let last = seen
        .iter()
        .rfind(|t| !t.starts_with("I had a first look"))
        .expect("an answer");
    assert_eq!(
        last,
        &format!("{MARKER}The disk is 40% full; nothing to do.\n\n— 15 tokens in, 7 out"),
        "{seen:?}"
    );
    let asked = model.asked();
    assert_eq!(asked[0].body["stream"], true);
    assert_eq!(asked[0].body["stream_options"]["include_usage"], true);
}
