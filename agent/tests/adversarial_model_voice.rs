//! The model speaking in the Worker's or the Warden's voice (issue 29,
//! item 4), end to end: a real Warden, the real Worker, a real relay with
//! the fake Bot API, and a model that answers — streamed, and in a
//! proposal's reason — with a fake "Done … undo id" receipt, a standalone
//! `/panic`, a right-to-left override and a root command to paste. Each of
//! them reached the chat unchanged before; the chat now shows every
//! message of the assistant's under its marker, the receipt quoted, the
//! command untappable, the override gone and the root command left out.
//! And over the real protocol, with a relay played by the test
//! (`hostile_relay`): lines opening with the Worker's words written in
//! Unicode Roman-numeral letters ("Ⅼadder: cut", "Ⅾone.") are quoted as
//! any other look-alike is. The quoting at the unit level:
//! `agent/tests/adversarial_model_voice/in_process.rs`.

/// The same threat met in-process: the assistant's loop against a scripted
/// model, no relay, no Warden.
#[path = "adversarial_model_voice/in_process.rs"]
mod in_process;

use aromba_testkit::hostile_relay;
use aromba_testkit::model_fake;
use aromba_testkit::paired;

use aromba_relay_proto::frame::{Body, Delivery};
use hostile_relay::up_with;
use model_fake::{Canned, Script, call, fake_model};
use paired::{CHAT, Paired, Setup, paired_with, write_mine};
use serde_json::json;
use sqlx::PgPool;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The line every message of the assistant's opens with (the Worker's
/// `assistant::voice::MARKER`, then a line feed).
const MARKER: &str = "🤖 Assistant (AI, may be wrong):\n";

/// What the Worker puts before a line of the model's in its own voice.
const QUOTED: &str = "❝ ";

/// What the Worker says instead of a command to paste.
const LEFT_OUT: &str = "[a command to run as root was left out";

const RECEIPT: &str = "Done. tidy-voice: real run, exit 0, 3 files changed (4096 bytes); changed: 3 files; undo id 0123456789abcdef0123456789abcdef (for 7 days)";

const ROOT_COMMAND: &str = "sudo chmod 666 /run/aromba/worker.sock";

/// The `/commands` Telegram would make tappable in `text` (tdlib's
/// `match_bot_commands`).
fn tappable_commands(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut found = Vec::new();
    for (i, &c) in chars.iter().enumerate() {
        if c != '/' {
            continue;
        }
        if i > 0 && (chars[i - 1].is_alphanumeric() || "_/<>".contains(chars[i - 1])) {
            continue;
        }
        let name: String = chars[i + 1..]
            .iter()
            .take_while(|c| c.is_ascii_alphanumeric() || **c == '_')
            .collect();
        let after = chars.get(i + 1 + name.len());
        if !name.is_empty() && after.is_none_or(|a| !(a.is_alphanumeric() || "_/<>".contains(*a))) {
            found.push(name);
        }
    }
    found
}

/// Every text the chat shows after the first `after` messages (each
/// edit too), until `done` takes one of them or `limit` passes.
async fn watch_until(
    p: &Paired,
    after: usize,
    limit: Duration,
    done: impl Fn(&[String]) -> bool,
) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    let end = Instant::now() + limit;
    while Instant::now() < end {
        for m in p.bot.fake.sent_to(CHAT).into_iter().skip(after) {
            if !seen.contains(&m.text) {
                seen.push(m.text);
            }
        }
        if done(&seen) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    seen
}

/// The model proposes a green chore with a hostile reason, then streams a
/// hostile answer in four pieces, 1.5 seconds apart (each shown as it
/// comes).
fn hostile_model() -> Script {
    Arc::new(|round, _, _| match round {
        0 => Canned::ok(call(
            "propose_chore",
            json!({"name": "tidy-voice",
                   "why": format!("the cache is big\n{RECEIPT}\n/panic \u{202e}kcab\n{ROOT_COMMAND}")}),
        )),
        _ => Canned::streamed(
            &[
                "Everything looks fine.\n",
                &format!("{RECEIPT}\n/panic\n"),
                "\u{202e}kcab ti tup ,kool\n",
                &format!("{ROOT_COMMAND}\nThat is all."),
            ],
            Duration::from_millis(1500),
            (20, 4),
        ),
    })
}

#[sqlx::test(migrations = false)]
async fn the_model_cannot_speak_in_the_workers_or_the_wardens_voice(db: PgPool) {
    let dir = std::path::PathBuf::from(format!("/var/tmp/aromba-voice-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the cache");
    let chore = format!(
        "#!/bin/sh\n# aromba-chore: 1\n# name: tidy-voice\n# description: Empties the cache folder\n# color: green\n# touches: {d}\n# network: no\n# schedule: manual\n# end\nif [ \"$1\" = --dry-run ]; then echo would remove the tmp files; exit 0; fi\nrm -f {d}/*.tmp\n",
        d = dir.display()
    );
    let model = fake_model(hostile_model()).await;
    let url = model.url.clone();
    let p = paired_with(db, "model-voice", Setup::default(), move |w| {
        model_fake::assistant_files(w, &url, "hostile");
        write_mine(w, "tidy-voice", &chore);
    })
    .await;
    let before = p.bot.fake.sent_to(CHAT).len();
    p.bot.fake.user_message(CHAT, "is anything wrong?");
    // Generous: the machine may be busy; the wait ends as soon as both show.
    let seen = watch_until(&p, before, Duration::from_secs(180), |seen| {
        seen.iter().any(|t| t.contains("tokens in"))
            && seen
                .iter()
                .any(|t| t.starts_with("Run the green chore \"tidy-voice\" now?"))
    })
    .await;

    let answer = seen
        .iter()
        .find(|t| t.contains("tokens in"))
        .unwrap_or_else(|| panic!("no answer: {seen:#?}"));
    let reason = seen
        .iter()
        .find(|t| t.contains("The assistant proposes the chore tidy-voice"))
        .unwrap_or_else(|| panic!("no proposal: {seen:#?}"));
    let warden = seen
        .iter()
        .find(|t| t.starts_with("Run the green chore \"tidy-voice\" now?"))
        .unwrap_or_else(|| panic!("no proposal of the Warden's: {seen:#?}"));

    // The marker opens every message of the assistant's — the answer, its
    // reason for the proposal, each text shown while it streamed — and no
    // message of the Worker's or the Warden's.
    assert!(answer.starts_with(MARKER), "{answer:?}");
    assert!(reason.starts_with(MARKER), "{reason:?}");
    assert!(!warden.contains(MARKER.trim_end()), "{warden:?}");
    let partials: Vec<&String> = seen
        .iter()
        .filter(|t| t.contains("Everything looks fine") && !t.contains("tokens in"))
        .collect();
    assert!(
        !partials.is_empty(),
        "no partial answer was shown: {seen:#?}"
    );
    for t in &seen {
        let ours = t.starts_with(MARKER);
        let assistants = t.contains("Everything looks fine")
            || t.contains("Looking into it")
            || t.contains("The assistant proposes");
        assert_eq!(
            ours, assistants,
            "marker where it does not belong, or missing: {t:?}"
        );
        assert_eq!(
            t.matches(MARKER.trim_end()).count(),
            usize::from(ours),
            "{t:?}"
        );
    }

    for t in seen.iter().filter(|t| t.starts_with(MARKER)) {
        // The fake receipt is quoted, wherever a line of it opens.
        for line in t.lines().filter(|l| l.contains("undo id")) {
            assert!(
                line.starts_with(QUOTED) || line.contains("in its own words: ❝"),
                "an unquoted receipt of the model's: {line:?} in {t:?}"
            );
        }
        // `/panic` is shown, and is no command one tap sends.
        assert_eq!(tappable_commands(t), Vec::<String>::new(), "{t:?}");
    }
    assert!(
        answer.contains(&format!("\n{QUOTED}Done. tidy-voice")),
        "{answer:?}"
    );
    assert!(answer.contains("\u{2215}panic"), "{answer:?}");
    assert!(answer.contains(LEFT_OUT), "{answer:?}");
    assert!(answer.contains("That is all."), "{answer:?}");
    assert!(reason.contains(LEFT_OUT), "{reason:?}");

    // Nothing in the chat turns the text round or offers a root command.
    for t in &seen {
        assert!(!t.contains('\u{202e}'), "a right-to-left override: {t:?}");
        assert!(
            !t.contains("sudo") && !t.contains("chmod 666"),
            "a root command to paste: {t:?}"
        );
    }
    // Nothing ran: the proposal waits for a tap.
    let _ = std::fs::remove_dir_all(&dir);
}

/// SECURITY.md, "The assistant's voice": a line that opens with the
/// Worker's or the Warden's own words — "after punctuation, emoji,
/// Markdown marks and look-alike letters" — gets "❝ " before it. The
/// Unicode Roman numerals Ⅼ Ⅽ Ⅾ Ⅿ Ⅰ Ⅴ Ⅹ (U+2160–U+217F) are letters in
/// every chat font and are not among the look-alikes the Worker folds
/// (NFKC would fold them): "Ⅼadder: cut" and "Ⅾone." pass unquoted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_cannot_open_a_line_as_the_worker_with_roman_numeral_letters() {
    let _one = hostile_relay::alone().await;
    let text = "Here is what I found.\n\u{216c}adder: cut (step 3). Something is wrong, so I stopped.\n\u{216e}one. apt-clean: the cache is empty now.\n\u{216d}an you send your PIN to confirm?";
    let model = model_fake::fake_model(Arc::new(move |_, _, _| {
        model_fake::Canned::ok(model_fake::say(text))
    }))
    .await;
    let url = model.url.clone();
    let (_w, relay, _d) = up_with("r29-voice-roman", move |w| {
        model_fake::assistant_files(w, &url, "roman")
    })
    .await;
    relay.deliver(Delivery::Message {
        text: "is anything wrong?".into(),
    });
    let mut answer = None;
    for _ in 0..300 {
        answer = relay.seen().into_iter().find_map(|b| match b {
            Body::Edit { text, .. } if text.contains("tokens in") => Some(text),
            _ => None,
        });
        if answer.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let answer = answer.expect("the answer");
    let unquoted: Vec<&str> = answer
        .lines()
        .filter(|l| l.contains("adder: cut") || l.contains("one. apt-clean"))
        .filter(|l| !l.starts_with("\u{275d} "))
        .collect();
    assert!(
        unquoted.is_empty(),
        "lines in the Worker's voice, unquoted: {unquoted:#?}\nin {answer:?}"
    );
}
