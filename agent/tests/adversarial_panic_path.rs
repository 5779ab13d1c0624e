//! `/panic` while the chat is busy. The attacker: whatever keeps the chat
//! busy — a long red chore the person approved, a relay that fills the
//! chat's queue with `/help` while a 40-second dry run holds it. What it
//! tries: to hold `/panic` back until the harm is done. What holds:
//! `/panic` (as `/panic@botname` too) is served apart from the chat's
//! queue, takes effect at once and stops the run under way.
//!
//! End to end: a real relay with the fake Bot API (or, for the flood, a
//! relay played over the real protocol: `hostile_relay`), a real Warden,
//! `aromba pair` and `aromba run` as shipped. Found by the review: the
//! chat handled one delivery at a time and awaited an approved run's
//! receipt, so `/panic` sent 5 s into a 40 s red chore took effect 35 s
//! later, after the chore had done everything. `/panic` while the
//! assistant answers: `adversarial_assistant_halts.rs`.

use aromba_testkit::hostile_relay;
use aromba_testkit::paired;

use aromba_relay_proto::frame::Delivery;
use hostile_relay::{sent_texts, status, up_with};
use paired::{CHAT, Setup, paired_with, write_mine};
use sqlx::PgPool;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A red chore that marks its start, works a long while, then marks its
/// end.
fn slow_wipe(dir: &Path) -> String {
    format!(
        "#!/bin/sh\n# aromba-chore: 1\n# name: slow-wipe\n# description: Empties a folder slowly\n# color: red\n# touches: {d}\n# network: no\n# schedule: manual\n# end\nif [ \"$1\" = --dry-run ]; then echo would empty the folder; exit 0; fi\necho started > {d}/started\nsleep 40\necho finished > {d}/finished\n",
        d = dir.display()
    )
}

#[sqlx::test(migrations = false)]
async fn panic_during_an_approved_red_run_takes_effect_at_once_and_stops_the_run(db: PgPool) {
    let dir = PathBuf::from(format!("/var/tmp/aromba-panic-path-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the folder");
    let chore = slow_wipe(&dir);
    let setup = Setup {
        days_ago: 10,
        ..Setup::default()
    };
    let p = paired_with(db, "adv-panic-path", setup, move |w| {
        write_mine(w, "slow-wipe", &chore)
    })
    .await;
    // Its dry run first, then the proposal.
    let mut proposal = None;
    for _ in 0..2 {
        let before = p.bot.fake.sent_to(CHAT).len();
        p.bot.fake.user_message(CHAT, "/run slow-wipe");
        let said = p
            .next(before, |t| {
                t.starts_with("Run the red chore \"slow-wipe\" now?")
                    || t.starts_with("Send /run slow-wipe again")
            })
            .await;
        if said.text.starts_with("Run the red chore") {
            proposal = Some(said);
            break;
        }
    }
    let proposal = proposal.expect("the red chore is proposed");
    p.tap(&proposal, "Approve").await;
    for _ in 0..600 {
        if dir.join("started").exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(dir.join("started").exists(), "the approved run started");
    let before = p.bot.fake.sent_to(CHAT).len();
    p.bot.fake.user_message(CHAT, "/panic");
    let ladder = p
        .next(before, |t| t.starts_with("You stopped Aromba."))
        .await;
    assert!(
        !dir.join("finished").exists(),
        "/panic was answered only after the run had done everything: {}",
        ladder.text
    );
    let receipt = p.next(before, |t| t.contains("stopped part way")).await;
    assert!(
        !dir.join("finished").exists(),
        "the run went on after /panic: {}",
        receipt.text
    );
    let _ = std::fs::remove_dir_all(&dir);
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
        if status(&warden).contains("ladder: cut") {
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
        status(&warden)
    );
}
