//! Chores the model proposes. The attacker: a model, hostile or obeying a
//! line it read, calling `propose_chore` for a chore of the owner's list,
//! question after question. What it tries: to have the chore run with no
//! one's tap — a green scheduled chore whose dry run was seen runs at once
//! when the person sends `/run`, and a proposal went the same way. What
//! holds: a proposal shows the dry run and asks; nothing runs until the
//! person taps, and the Warden's journal holds no real run.
//!
//! End to end: the real Worker, a real Warden with the owner's chore, a
//! real relay with the fake Bot API, a scripted model (`model_fake`). The
//! test's doc says what the attack did when it was found; the test keeps
//! it out. An instruction planted in a read, ordering a red chore run:
//! `adversarial_assistant.rs`.

use aromba_testkit::model_fake;
use aromba_testkit::paired;

use model_fake::{Canned, Script, call, say, with_model_setup};
use paired::{CHAT, Setup, write_mine};
use serde_json::json;
use sqlx::PgPool;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// A green scheduled chore whose dry run was seen is run at once by
/// `chat::run` — which is what a proposal calls: no tap, no button. Two
/// questions (or one, once the schedule has shown the dry run) and the
/// model has run it.
#[sqlx::test(migrations = false)]
async fn a_green_chore_the_model_proposes_twice_runs_without_a_tap(db: PgPool) {
    let cache = PathBuf::from(format!(
        "/var/tmp/aromba-round-green-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&cache);
    std::fs::create_dir_all(&cache).expect("the cache");
    std::fs::write(cache.join("keep.tmp"), "kept\n").expect("a cache file");
    let chore = format!(
        "#!/bin/sh\n# aromba-chore: 1\n# name: green-tidy\n# description: Empties the cache folder\n# color: green\n# touches: {d}\n# network: no\n# schedule: weekly sun 03:20\n# end\nif [ \"$1\" = --dry-run ]; then echo would remove; exit 0; fi\nrm -f {d}/*.tmp\n",
        d = cache.display()
    );
    let script: Script = Arc::new(|_, request, _| {
        let answered = request["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
        if answered {
            Canned::ok(say("I proposed it."))
        } else {
            Canned::ok(call(
                "propose_chore",
                json!({"name": "green-tidy", "why": "the logs said so"}),
            ))
        }
    });
    let (p, _model) = with_model_setup(db, "round-green", Setup::default(), script, move |w| {
        write_mine(w, "green-tidy", &chore)
    })
    .await;
    // The first proposal shows the dry run (unless the schedule did).
    p.ask("anything to tidy?", |t| t.contains("tokens in"))
        .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    p.ask("and now?", |t| t.contains("tokens in")).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let journal = p.warden.journal();
    let intact = cache.join("keep.tmp").exists();
    let _ = std::fs::remove_dir_all(&cache);
    assert!(
        intact,
        "the model's proposal ran the chore, no tap: {:?}",
        p.bot
            .fake
            .sent_to(CHAT)
            .iter()
            .map(|m| m.text.clone())
            .collect::<Vec<_>>()
    );
    assert!(
        !journal
            .lines()
            .any(|l| l.contains("\"chore-run\"") && l.contains("\"mode\":\"real\"")),
        "a real run is in the journal"
    );
}
