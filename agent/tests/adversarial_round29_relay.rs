//! Attack round on issue 29's fixes, from a hostile relay's side, over the
//! real protocol: what the Worker answers (or asks the Warden) for frames
//! and deliveries other than a chat message or a tap. The chat's pace
//! (`daemon::replies`) covers only `Message` and `Tap` deliveries; the
//! issue asks the Worker to "rate-limit the Worker's replies per window
//! whatever the command", and that a relay cannot "flood the Warden's
//! pacing and move the ladder".
//!
//! The played relay is `hostile_relay`'s: it also sends any frame it
//! seals (an `anchor`) and can hang after its welcome. A real Warden,
//! `aromba pair` and `aromba run` as shipped. Each test here failed on
//! the code the round attacked and passes now.

mod hostile_relay;
mod model_fake;
mod support;

use aromba_proto::frame::{Body, Delivery};
use hostile_relay::{PING_SECS, PlayedRelay, daemon, honest_script, run_pair, sent_texts, warden};
use std::sync::Arc;
use std::time::Duration;

/// Pairs with `relay`, starts the daemon, waits for its connection.
async fn up(name: &str) -> (support::TestWarden, PlayedRelay, support::Running) {
    up_with(name, |_| {}).await
}

async fn up_with(
    name: &str,
    before: impl FnOnce(&support::TestWarden),
) -> (support::TestWarden, PlayedRelay, support::Running) {
    let warden = warden(name);
    before(&warden);
    let relay = PlayedRelay::start(honest_script()).await;
    let (ok, printed) = run_pair(&warden, Some(&relay.url())).await;
    assert!(ok, "aromba pair: {}", String::from_utf8_lossy(&printed));
    let before = relay.connections();
    let running = daemon(&warden);
    for _ in 0..300 {
        if relay.connections() > before {
            // The greeting and first look land before the flood.
            tokio::time::sleep(Duration::from_secs(3)).await;
            return (warden, relay, running);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the daemon never connected");
}

fn acks(relay: &PlayedRelay) -> usize {
    relay
        .seen()
        .iter()
        .filter(|b| matches!(b, Body::AckDelivery { .. }))
        .count()
}

/// Delivers `n` copies of `delivery` in batches the Worker's queue takes,
/// and waits for most of them to be acknowledged.
async fn flood(relay: &PlayedRelay, delivery: Delivery, n: usize) -> usize {
    let before = acks(relay);
    for batch in 0..n.div_ceil(25) {
        for _ in 0..25.min(n - batch * 25) {
            relay.deliver(delivery.clone());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for _ in 0..600 {
        if acks(relay) - before >= n * 9 / 10 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    acks(relay) - before
}

fn ladder(warden: &support::TestWarden) -> String {
    support::text(&warden.aromba_as("root", &["status"]).stdout)
}

/// A relay delivering `secret` without end (the frame it uses for a PIN
/// it deleted from the chat): each is answered "That message looked like
/// a PIN …", outside the chat's pace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_flooding_secret_deliveries_gets_paced_answers() {
    let _one = hostile_relay::alone().await;
    let (_w, relay, _d) = up("r29-secret-flood").await;
    let before = sent_texts(&relay).len();
    let took = flood(
        &relay,
        Delivery::Secret {
            text: "Tr0ub4dor&3".into(),
        },
        2_000,
    )
    .await;
    let answers = sent_texts(&relay).len() - before;
    assert!(
        answers <= 40,
        "{answers} messages sent for {took} secret deliveries (the pace answers about {} for a flood of messages)",
        20 + 1
    );
}

/// A relay delivering `paired` without end: "This chat is paired with the
/// server …" for each, outside the chat's pace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_flooding_paired_deliveries_gets_paced_answers() {
    let _one = hostile_relay::alone().await;
    let (_w, relay, _d) = up("r29-paired-flood").await;
    let before = sent_texts(&relay).len();
    let took = flood(
        &relay,
        Delivery::Paired {
            approval_key: hostile_relay::HOSTILE_KEY.into(),
        },
        2_000,
    )
    .await;
    let answers = sent_texts(&relay).len() - before;
    assert!(
        answers <= 40,
        "{answers} messages sent for {took} paired deliveries"
    );
}

/// A relay sending `anchor` frames without end — each the journal head
/// the Worker itself sent it, so true — makes the Worker ask the Warden
/// for each (`check_anchor`), outside the read budget; the Warden counts
/// every request toward its flood threshold and moves the ladder for the
/// Worker. (A wrong anchor signed with the pinned relay key moves it to
/// Cut at once, by design: the relay may always pull the ladder up, as
/// `/panic` does; an unsigned one, as these are, is no evidence.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_repeating_a_true_anchor_does_not_move_the_ladder() {
    let _one = hostile_relay::alone().await;
    let (warden, relay, _d) = up("r29-anchor-flood").await;
    assert!(
        ladder(&warden).contains("ladder: normal "),
        "{}",
        ladder(&warden)
    );
    let mut head = None;
    for _ in 0..600 {
        head = relay.seen().into_iter().rev().find_map(|b| match b {
            Body::JournalHead { seq, hash } => Some((seq, hash)),
            _ => None,
        });
        if head.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (seq, hash) = head.expect("the Worker sent its journal head");
    let before = sent_texts(&relay).len();
    for _ in 0..80u64 {
        for _ in 0..25u64 {
            relay.send_frame(Body::Anchor {
                seq,
                hash: hash.clone(),
                signature: None,
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(8)).await;
    let answers = sent_texts(&relay).len() - before;
    let status = ladder(&warden);
    assert!(
        status.contains("ladder: normal "),
        "2,000 true anchors from the relay moved the ladder ({answers} messages sent):\n{status}"
    );
    assert!(answers <= 40, "{answers} messages sent for 2,000 anchors");
}

/// Four questions, each answer reporting 150,000 tokens, after `first`
/// (if any) was typed; how many reached the model.
async fn four_costly_questions(name: &str, first: Option<&str>) -> usize {
    let model = model_fake::fake_model(Arc::new(|_, _, _| {
        model_fake::Canned::ok(model_fake::say_usage("All fine.", 150_000, 10))
    }))
    .await;
    let url = model.url.clone();
    let (_w, relay, _d) = up_with(name, move |w| {
        model_fake::assistant_files(w, &url, "budget")
    })
    .await;
    let message = |t: &str| Delivery::Message { text: t.into() };
    if let Some(first) = first {
        relay.deliver(message(first));
    }
    for i in 0..4 {
        let before = relay.seen().len();
        relay.deliver(message(&format!("question {i}: how is the disk?")));
        // Wait for the answer (an edit with the footer) or a refusal.
        for _ in 0..300 {
            let done = relay.seen().into_iter().skip(before).any(|b| match b {
                Body::Edit { text, .. } => text.contains("tokens in"),
                Body::Send { text, .. } => text.contains("budget"),
                _ => false,
            });
            if done {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    model.asked().len()
}

/// SECURITY.md, "The trust the relay holds": a relay can type "questions
/// to the assistant (spending the owner's tokens, up to the daily
/// budget)". The budget is the chat's to remove: a relay that types
/// `/ai budget off` first spends without a daily bound (one question at
/// most 60,000 tokens, a question every few seconds). Here each answer
/// reports 150,000 tokens; the default daily budget is 200,000, so the
/// third question should never reach the model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_cannot_spend_past_the_daily_budget_by_typing_ai_budget_off() {
    let _one = hostile_relay::alone().await;
    let asked = four_costly_questions("r29-budget-off", Some("/ai budget off")).await;
    assert!(
        asked <= 2,
        "the model was asked {asked} times, {} tokens in all, against a default daily budget of 200,000",
        asked * 150_010
    );
}

/// The same with `/ai budget 100000000` (the most the chat may set).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_cannot_spend_past_the_daily_budget_by_raising_it() {
    let _one = hostile_relay::alone().await;
    let asked = four_costly_questions("r29-budget-up", Some("/ai budget 100000000")).await;
    assert!(
        asked <= 2,
        "the model was asked {asked} times, {} tokens in all, against a default daily budget of 200,000",
        asked * 150_010
    );
}

/// Control (held): with the default budget untouched, the third costly
/// question is refused before the model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_daily_budget_stops_costly_questions() {
    let _one = hostile_relay::alone().await;
    let asked = four_costly_questions("r29-budget-default", None).await;
    assert!(asked <= 2, "the model was asked {asked} times");
}

/// `/panic` while the chat task is stuck in a 40-second dry run, its
/// queue full of `/help` (and the deliveries that did not fit left
/// unacknowledged), sent as `/panic@botname`: the bell still rings at
/// once (held).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panic_lands_while_the_chat_waits_on_a_dry_run_behind_a_full_queue() {
    use std::os::unix::fs::PermissionsExt;
    let _one = hostile_relay::alone().await;
    let (warden, relay, _d) = up_with("r29-panic-busy", |w| {
        std::fs::create_dir_all("/srv/aromba-r29-slow").expect("the folder");
        let mine = w.layout().config_dir.join("mine");
        std::fs::create_dir_all(&mine).expect("mine/");
        std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o755)).expect("0755");
        let path = mine.join("slow-look.sh");
        std::fs::write(
            &path,
            "#!/bin/sh\n# aromba-chore: 1\n# name: slow-look\n# description: Looks slowly\n# color: green\n# touches: /srv/aromba-r29-slow\n# network: no\n# schedule: manual\n# end\nif [ \"$1\" = --dry-run ]; then sleep 40; echo would look; exit 0; fi\nexit 0\n",
        )
        .expect("the chore");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("0644");
    })
    .await;
    let message = |t: &str| Delivery::Message { text: t.into() };
    relay.deliver(message("/run slow-look"));
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        !sent_texts(&relay).iter().any(|t| t.contains("did not run")),
        "the dry run was refused: {:#?}",
        sent_texts(&relay)
    );
    for _ in 0..200 {
        relay.deliver(message("/help"));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    // The chat is held: the dry run has not answered yet, and most of
    // the /help flood is not answered either.
    assert!(
        !sent_texts(&relay).iter().any(|t| t.contains("would look")),
        "the dry run ended already: {:#?}",
        sent_texts(&relay)
    );
    let sent = std::time::Instant::now();
    relay.deliver(message("/panic@aromba_test_bot"));
    let mut cut = false;
    while sent.elapsed() < Duration::from_secs(20) {
        if ladder(&warden).contains("ladder: cut") {
            cut = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let _ = std::fs::remove_dir("/srv/aromba-r29-slow");
    assert!(
        cut && sent.elapsed() < Duration::from_secs(10),
        "/panic took effect after {:?} (cut: {cut}):\n{}",
        sent.elapsed(),
        ladder(&warden)
    );
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

/// A relay that hangs after its welcome — never reads, never writes, the
/// socket open (a relay process stuck, or a link gone half-open: loopback
/// never times it out) — is dialed again after a few of its ping
/// intervals. The Worker reads `ping_secs` from the welcome and keeps it,
/// but its loop waits on the socket with no deadline: the chat, `/panic`
/// included, is gone until TCP gives up (never, here; hours on a real
/// network with keepalive off). ATTACKS.md: "every wait has a deadline".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_that_hangs_after_its_welcome_is_dialed_again() {
    let _one = hostile_relay::alone().await;
    let warden = warden("r29-hung");
    let relay = PlayedRelay::start(honest_script()).await;
    let (ok, printed) = run_pair(&warden, Some(&relay.url())).await;
    assert!(ok, "aromba pair: {}", String::from_utf8_lossy(&printed));
    relay.mute_next();
    let before = relay.connections();
    let _d = daemon(&warden);
    for _ in 0..300 {
        if relay.connections() > before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(relay.connections() > before, "the daemon never connected");
    let hung = relay.connections();
    // Four ping intervals and the Worker's backoff.
    for _ in 0..(4 * PING_SECS as usize + 30) * 10 {
        if relay.connections() > hung {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        relay.connections() > hung,
        "the Worker is still on a connection that has said nothing for {} s (ping every {PING_SECS} s)",
        4 * PING_SECS + 30
    );
}
