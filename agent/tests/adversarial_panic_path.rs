//! `/panic` while the chat is busy, end to end: a real relay with the fake
//! Bot API, a real Warden, `aromba pair` and `aromba run` as shipped.
//! Found by the review: the chat handled one delivery at a time and
//! awaited an approved run's receipt, so `/panic` sent 5 s into a 40 s red
//! chore took effect 35 s later, after the chore had done everything.

mod paired;
#[path = "../../relay/tests/support/mod.rs"]
mod relay_support;
mod support;

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
