//! The whole product on one machine: a real relay (on a fresh database)
//! with the fake Bot API standing in for Telegram, a real Warden on real
//! sockets, `aromba pair` as root and `aromba run` as the aromba user —
//! the binaries as shipped. The person is played through the fake.

use aromba_testkit::paired;
use aromba_testkit::relay as relay_support;
use aromba_testkit::worker as support;

use paired::{CHAT, Paired, Setup, paired, paired_with, write_mine};
use relay_support::bot::Bot;
use sqlx::PgPool;
use std::time::Duration;
use support::{TestWarden, account};

#[sqlx::test(migrations = false)]
async fn pairing_pins_the_relay_key_and_sets_the_chat_menu(db: PgPool) {
    let p = paired(db, "e2e-pair").await;
    let worker = account("aromba");
    let st = p.warden.aromba_as("root", &["status"]);
    assert!(support::text(&st.stdout).contains("pin: set"));
    let pinned = std::fs::read_to_string(p.warden.layout().state_dir.join("relay-approvals.pub"))
        .expect("the relay key is pinned");
    let relay_toml =
        std::fs::read_to_string(p.warden.root.join("worker/relay.toml")).expect("relay.toml");
    assert!(
        relay_toml.contains(pinned.trim()),
        "relay.toml keeps the key it pinned"
    );
    // The token's file is the Worker's, 0600; network.toml is root's.
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(p.warden.root.join("worker/relay.toml")).expect("relay.toml");
    assert_eq!((meta.uid(), meta.mode() & 0o777), (worker.uid, 0o600));
    let meta = std::fs::metadata(p.warden.root.join("worker/network.toml")).expect("network.toml");
    assert_eq!((meta.uid(), meta.mode() & 0o777), (0, 0o644));
    let menu = p
        .bot
        .fake
        .state()
        .commands
        .get(&format!("chat:{CHAT}"))
        .cloned();
    let menu = menu.expect("setMyCommands for the chat");
    for command in ["status", "disk", "trust", "panic", "ai", "unpair"] {
        assert!(
            menu.iter().any(|(c, _)| c == command),
            "{command} in {menu:?}"
        );
    }
}

#[sqlx::test(migrations = false)]
async fn disk_answers_with_the_numbers_df_gives(db: PgPool) {
    let p = paired(db, "e2e-disk").await;
    let answer = p.ask("/disk", |t| t.starts_with("Disk space")).await;
    // The table is shown in a monospace block: the lines after the first.
    let block_start = answer.text.find('\n').expect("a block") + 1;
    let units_before = answer.text[..block_start].encode_utf16().count();
    assert_eq!(
        answer.monospace,
        vec![(
            units_before,
            answer.text[block_start..].encode_utf16().count()
        )]
    );
    let df = assert_cmd::Command::new("df")
        .args(["-P", "-B1", "-T", "/"])
        .output()
        .expect("df runs");
    let df = String::from_utf8_lossy(&df.stdout).into_owned();
    let root = df.lines().nth(1).expect("df's line for /");
    let used = root
        .split_whitespace()
        .nth(5)
        .expect("df's capacity column");
    let line = answer
        .text
        .lines()
        .find(|l| l.split_whitespace().next() == Some("/"))
        .unwrap_or_else(|| panic!("/ in the answer: {}", answer.text));
    assert_eq!(
        line.split_whitespace().nth(1),
        Some(used),
        "{line} against df's {root}"
    );
}

#[sqlx::test(migrations = false)]
async fn status_trust_and_panic_answer_from_the_warden(db: PgPool) {
    let p = paired(db, "e2e-trust").await;
    let status = p.ask("/status", |t| t.starts_with("Server status")).await;
    assert!(!status.monospace.is_empty(), "{status:?}");
    let trust = p.ask("/trust", |t| t.contains("\nLadder:")).await;
    assert!(trust.text.contains("Ladder: normal"), "{}", trust.text);
    assert!(trust.text.contains("Journal: "), "{}", trust.text);
    let panicked = p
        .ask("/panic", |t| t.starts_with("You stopped Aromba."))
        .await;
    assert!(panicked.text.contains("aromba resume"), "{}", panicked.text);
    p.warden.wait_for_ladder("cut");
}

#[sqlx::test(migrations = false)]
async fn a_red_chore_in_the_first_week_is_explained_and_its_big_cap_confirmed_first(db: PgPool) {
    let dir = std::path::PathBuf::from(format!("/var/tmp/aromba-e2e-big-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("the chore's folder");
    let script = format!(
        "#!/bin/sh\n# aromba-chore: 1\n# name: big\n# description: Tidies a lot\n# color: red\n# touches: {d}\n# max_changes: 5000 files, 20 GB\n# network: no\n# schedule: manual\n# end\nif [ \"$1\" = --dry-run ]; then echo would tidy; exit 0; fi\ntrue\n",
        d = dir.display()
    );
    let p = paired_with(db, "e2e-big", Setup::default(), |w| {
        write_mine(w, "big", &script)
    })
    .await;
    // A cap above the default: the Warden's question first.
    let confirm = p
        .ask("/run big", |t| {
            t.starts_with("Let the red chore \"big\" change up to 5000 files")
        })
        .await;
    let before = p.bot.fake.sent_to(CHAT).len();
    p.tap(&confirm, "Approve").await;
    p.next(before, |t| t.starts_with("Done.")).await;
    // Then its dry run, then, on day 1, words instead of a proposal.
    p.ask("/run big", |t| t.starts_with("Before big runs"))
        .await;
    let week = p.ask("/run big", |t| t.starts_with("This is day 1")).await;
    assert!(week.text.contains("green chores only"), "{}", week.text);
    assert!(week.buttons.is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[sqlx::test(migrations = false)]
async fn a_red_chore_is_shown_dry_approved_by_a_tap_run_in_the_cage_and_undone(db: PgPool) {
    let (p, dir) = aromba_testkit::paired::with_red_wipe(db, "e2e-wipe").await;

    // The first time: its dry run, shown, and nothing changed.
    let dry = p
        .ask("/run wipe", |t| t.starts_with("Before wipe runs"))
        .await;
    assert!(dry.text.contains("would remove notes.txt"), "{}", dry.text);
    assert!(dir.join("notes.txt").exists());

    // Then the Warden's own proposal, with its buttons.
    let proposal = p
        .ask("/run wipe", |t| {
            t.starts_with("Run the red chore \"wipe\" now?")
        })
        .await;
    let labels: Vec<&str> = proposal
        .buttons
        .iter()
        .flatten()
        .map(|(l, _)| l.as_str())
        .collect();
    // A red run is approved in the Mini App (Telegram signs the person's
    // tap there); Cancel stays a tap through the relay.
    assert_eq!(labels, ["Approve (opens the app)", "Cancel"]);
    assert!(
        aromba_botfake::is_link(&proposal.buttons[0][0].1),
        "{proposal:?}"
    );
    assert!(
        dir.join("notes.txt").exists(),
        "nothing runs before the tap"
    );

    let before = p.bot.fake.sent_to(CHAT).len();
    p.tap(&proposal, "Approve").await;
    let receipt = p.next(before, |t| t.starts_with("Done.")).await;
    assert!(!dir.join("notes.txt").exists(), "the run removed the file");
    // The proposal says what became of it, its buttons off.
    let answered = p
        .shows(&proposal, |t| t.ends_with("Approved ✓ — done."))
        .await;
    assert!(
        answered.buttons.iter().flatten().next().is_none(),
        "{answered:?}"
    );
    assert!(
        answered.text.starts_with(&proposal.text),
        "{}",
        answered.text
    );
    assert!(
        receipt.text.starts_with("Done. wipe removed 1 file"),
        "{}",
        receipt.text
    );
    assert!(!receipt.text.contains("undo id"), "{}", receipt.text);
    let undo_labels: Vec<&str> = receipt
        .buttons
        .iter()
        .flatten()
        .map(|(l, _)| l.as_str())
        .collect();
    assert_eq!(undo_labels, ["Undo"]);

    // The app opened again from the same button (a double tap on a
    // phone): answered "already answered", nothing runs, and nothing is
    // taken for an anomaly (the ladder stays where it was).
    std::fs::write(dir.join("notes.txt"), "again\n").expect("a file");
    let again = p
        .approve_in_app(&proposal, "Approve")
        .await
        .expect("the button opens the app");
    assert!(again.text().starts_with("Already answered"), "{again:?}");
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert!(
        dir.join("notes.txt").exists(),
        "a second tap ran the chore again"
    );
    std::fs::remove_file(dir.join("notes.txt")).expect("put back as the run left it");
    let status = p.warden.aromba_as("root", &["status"]);
    assert!(
        support::text(&status.stdout).contains("ladder: normal"),
        "{}",
        support::text(&status.stdout)
    );

    // The Trust page, opened from /trust's button: every section from
    // this very stack, the policy verbatim, and the run's Undo link.
    let trust = p.ask("/trust", |t| t.contains("\nLadder:")).await;
    let launch = p.bot.open_app(CHAT, &trust, "Open the Trust page");
    let page = p.bot.ask_app(&launch, "trust").await;
    assert_eq!(page.status, 200, "{page:?}");
    assert_eq!(page.body["kind"], "page", "{page:?}");
    assert!(page.text().starts_with("All good"), "{page:?}");
    let sections = page.body["sections"].as_array().expect("sections");
    let heading = |s: &serde_json::Value| s["heading"].as_str().unwrap_or_default().to_string();
    let lines = |want: &str| -> String {
        let s = sections
            .iter()
            .find(|s| heading(s) == want)
            .unwrap_or_else(|| panic!("no {want} section: {page:?}"));
        s["lines"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|l| l.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let headings: Vec<String> = sections.iter().map(heading).collect();
    assert_eq!(
        headings,
        aromba_testkit::paired::trust_page_headings("wipe"),
        "{page:?}"
    );
    assert!(
        lines("Isolation").starts_with("Isolation: available"),
        "{page:?}"
    );
    assert!(lines("Ladder").contains("Now: normal (step 0)"), "{page:?}");
    assert!(
        lines("Integrity").contains("Integrity: ok (checked at"),
        "{page:?}"
    );
    let journal = lines("Journal");
    assert!(journal.contains("Verification: verified at"), "{journal}");
    assert!(journal.contains("Relay's anchor:"), "{journal}");
    assert!(
        lines("Prod mode and fenced folders").starts_with("Prod mode: off"),
        "{page:?}"
    );
    assert!(lines("Chores").contains("wipe (red, manual)"), "{page:?}");
    assert!(lines("Network").contains("127.0.0.1:"), "{page:?}");
    assert!(lines("Approvals").contains("Telegram account"), "{page:?}");
    let policy = p.bot.ask_app(&launch, "policy").await;
    assert_eq!(policy.body["sections"][0]["verbatim"], true, "{policy:?}");
    let rendering: Vec<&str> = policy.body["sections"][0]["lines"]
        .as_array()
        .expect("the policy's lines")
        .iter()
        .filter_map(|l| l.as_str())
        .collect();
    assert_eq!(
        rendering.join("\n"),
        aromba_warden::policy::render().trim_end(),
        "the policy rendering, verbatim"
    );
    // A page opened from a proposal's button cannot ask for the Trust page.
    let from_proposal = p.bot.open_app(CHAT, &proposal, "Approve (opens the app)");
    let refused = p.bot.ask_app(&from_proposal, "trust").await;
    assert_eq!(refused.body["kind"], "closed", "{refused:?}");

    // Undo from the Trust page's link: the Warden's proposal for it goes
    // to the chat, and approved there it puts the file back.
    let undo_section = sections
        .iter()
        .find(|s| heading(s) == "Undo: wipe")
        .expect("the Undo link");
    let undo_id = undo_section["undo"].as_str().expect("its undo id");
    let before = p.bot.fake.sent_to(CHAT).len();
    let linked = p.bot.undo_from_app(&launch, undo_id).await;
    assert!(
        linked.text().starts_with("Proposed in your chat"),
        "{linked:?}"
    );
    let undo = p
        .next(before, |t| t.starts_with("Undo the run of \"wipe\""))
        .await;
    let before = p.bot.fake.sent_to(CHAT).len();
    p.tap(&undo, "Approve").await;
    p.next(before, |t| t.starts_with("Done.")).await;
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.txt")).expect("put back"),
        "mine\n"
    );
    // The receipt says it was undone, and offers Undo no more.
    let undone = p
        .shows(&receipt, |t| t.ends_with("Undone ✓ (see below)."))
        .await;
    assert!(
        undone.buttons.iter().flatten().next().is_none(),
        "{undone:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[sqlx::test(migrations = false)]
async fn the_relay_restarted_mid_conversation_loses_nothing(db: PgPool) {
    let p = paired(db, "e2e-restart").await;
    p.ask("/trust", |t| t.contains("\nLadder:")).await;
    let Paired {
        daemon,
        daemon_log,
        warden,
        bot,
        one,
        machine,
    } = p;
    let Bot {
        relay,
        fake,
        fake_addr,
        db,
    } = bot;
    let addr = relay.addr;
    relay.stop().await;
    // While the relay is down the person writes; Telegram keeps the update
    // and tries the webhook again until it is taken.
    let before = fake.sent_to(CHAT).len();
    fake.user_message(CHAT, "/help");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .expect("the relay's address again");
    let mut config = relay_support::config();
    config.telegram = Some(relay_support::bot::telegram_config(fake_addr, addr, false));
    let relay = relay_support::start_on(db.clone(), config, listener).await;
    let p = Paired {
        daemon,
        daemon_log,
        warden,
        bot: Bot {
            relay,
            fake,
            fake_addr,
            db,
        },
        one,
        machine,
    };
    let help = p.next(before, |t| t.starts_with("What I can do:")).await;
    assert!(help.text.contains("/panic"), "{}", help.text);
    // And the conversation goes on; the relay gave back the journal head it
    // held, and the Warden found the journal still extends it.
    let trust = p.ask("/trust", |t| t.contains("\nLadder:")).await;
    assert!(
        trust
            .text
            .contains("Relay's anchor: the journal extends the relay's anchor"),
        "{}",
        trust.text
    );
}

#[sqlx::test(migrations = false)]
async fn the_pin_typed_in_the_app_turns_prod_mode_off_and_is_kept_nowhere(db: PgPool) {
    let p = paired(db, "e2e-pin").await;
    let on = p.warden.aromba_as("root", &["prod-mode", "on"]);
    assert!(on.status.success(), "{}", support::text(&on.stderr));

    let proposal = p
        .ask("/prodmode off", |t| t.starts_with("Turn prod mode off?"))
        .await;
    // The app opened without the PIN (a page that could not seal it, or a
    // relay that dropped it): nothing changes.
    let before = p.bot.fake.sent_to(CHAT).len();
    let launch = p.bot.open_app(CHAT, &proposal, "Approve (opens the app)");
    let sent = p.bot.ask_app(&launch, "approve").await;
    assert_eq!(sent.status, 200, "{sent:?}");
    p.next(before, |t| t.contains("did not arrive sealed"))
        .await;
    assert!(
        support::text(&p.warden.aromba_as("root", &["status"]).stdout).contains("prod mode: on"),
        "nothing changes without the PIN"
    );

    let proposal = p
        .ask("/prodmode off", |t| t.starts_with("Turn prod mode off?"))
        .await;
    let before = p.bot.fake.sent_to(CHAT).len();
    let sent = p
        .approve_in_app_with(&proposal, "Approve", Some("472913"))
        .await
        .expect("Approve opens the app");
    assert!(sent.text().starts_with("Sent to your server"), "{sent:?}");
    let done = p.next(before, |t| t.starts_with("Done.")).await;
    assert!(
        support::text(&p.warden.aromba_as("root", &["status"]).stdout).contains("prod mode: off"),
        "{}",
        done.text
    );
    // Kept nowhere: not in the chat, the Warden's journal or the relay.
    assert!(
        p.bot
            .fake
            .state()
            .said
            .iter()
            .all(|m| !m.text.contains("472913")),
        "the PIN was never typed in the chat"
    );
    assert!(!p.warden.journal().contains("472913"));
    let kept: i64 = sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM outbox WHERE delivery::text LIKE '%472913%')
              + (SELECT count(*) FROM chat_outbox WHERE body::text LIKE '%472913%')",
    )
    .fetch_one(&p.bot.db)
    .await
    .expect("the relay's tables");
    assert_eq!(kept, 0);
}

#[sqlx::test(migrations = false)]
async fn the_first_scan_sees_a_database_with_data_turns_prod_mode_on_and_fences_the_data(
    db: PgPool,
) {
    // The folders the scan looks at are under ROOT/system with --root.
    let plant = |w: &TestWarden| {
        let system = w.root.join("system");
        let base = system.join("var/lib/postgresql/15/main/base");
        for oid in ["1", "4", "5", "16384"] {
            std::fs::create_dir_all(base.join(oid)).expect("a database folder");
            std::fs::write(base.join(oid).join("1259"), vec![0u8; 8192]).expect("a table");
        }
        std::fs::create_dir_all(system.join("srv/shop/.git")).expect("a repository");
        std::fs::create_dir_all(system.join("srv/shop/public/uploads")).expect("uploads");
        std::fs::create_dir_all(system.join("home/ann/Maildir/new")).expect("mail");
        std::fs::create_dir_all(system.join("home/ann/notes")).expect("a plain folder");
    };
    let p = paired_with(db, "e2e-scan", Setup::default(), plant).await;
    let system = p.warden.root.join("system");
    let seen = p
        .next(0, |t| t.starts_with("I had a first look at this server."))
        .await;
    assert!(
        seen.text.contains("It looks like production"),
        "{}",
        seen.text
    );
    assert!(
        seen.text
            .contains("a database with data: PostgreSQL, 1 database of its own"),
        "{}",
        seen.text
    );
    assert!(seen.text.contains("So prod mode is on"), "{}", seen.text);
    for (folder, why) in [
        ("var/lib/postgresql", "a database"),
        ("srv/shop", "a repository"),
        ("home/ann/Maildir", "mail"),
    ] {
        let line = format!("- {} ({why})", system.join(folder).display());
        assert!(seen.text.contains(&line), "{line} in {}", seen.text);
    }
    assert!(!seen.text.contains("notes"), "{}", seen.text);
    let status = support::text(&p.warden.aromba_as("root", &["status"]).stdout);
    assert!(status.contains("prod mode: on"), "{status}");
    let fences = std::fs::read_to_string(p.warden.layout().fences_file()).expect("the fence list");
    for folder in ["var/lib/postgresql", "srv/shop", "home/ann/Maildir"] {
        assert!(
            fences
                .lines()
                .any(|l| l == system.join(folder).to_str().unwrap()),
            "{folder} in {fences}"
        );
    }
    // The Warden's own change is inside its baseline: no mismatch.
    assert!(status.contains("ladder: normal"), "{status}");
    // What the chat shows of prod mode now.
    let prod = p.ask("/prodmode", |t| t.starts_with("Prod mode:")).await;
    assert!(
        prod.text.starts_with("Prod mode: on since"),
        "{}",
        prod.text
    );
}

/// Makes `systemctl` answer, for this thread and what it starts (the
/// in-process Warden's threads, their children), as a system with one
/// failed unit while `failed` exists: a private mount namespace with a
/// script bound over the real binary. The machines the tests run on have
/// no systemd as PID 1, so the real one has nothing to list.
fn stand_in_systemctl(dir: &std::path::Path) -> std::path::PathBuf {
    use nix::mount::{MsFlags, mount};
    use nix::sched::{CloneFlags, unshare};
    use std::os::unix::fs::PermissionsExt;
    let failed = dir.join("failed");
    let script = dir.join("systemctl");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n\
             # list-units --failed --plain --no-legend --no-pager, as systemd prints it\n\
             if [ -e {failed} ]; then\n\
             \x20 echo 'nginx.service loaded failed failed A high performance web server and a reverse proxy server'\n\
             fi\n\
             exit 0\n",
            failed = failed.display()
        ),
    )
    .expect("the stand-in");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("mode");
    unshare(CloneFlags::CLONE_NEWNS).expect("a mount namespace of this thread's own");
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .expect("mounts made private");
    mount(
        Some(&script),
        "/usr/bin/systemctl",
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )
    .expect("systemctl is there to stand in for (the systemd package)");
    failed
}

#[sqlx::test(migrations = false)]
async fn a_failed_unit_raises_an_alert_and_its_recovery_clears_it_once(db: PgPool) {
    let dir = std::path::PathBuf::from(format!("/var/tmp/aromba-e2e-units-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a directory of root's");
    let failed = stand_in_systemctl(&dir);
    std::fs::write(&failed, "").expect("nginx fails");
    // The health set is read every 15 s here (a minute on a server).
    let setup = Setup {
        daemon_env: vec![("AROMBA_HEALTH_EVERY_S", "15".into())],
        ..Setup::default()
    };
    let p = paired_with(db, "e2e-units", setup, |_| {}).await;
    let raised = |t: &str| t == "Service nginx.service has failed.";
    let cleared = |t: &str| t == "Service nginx.service is no longer failed.";
    // The health set is read 15 s after the daemon starts, then every 15 s.
    p.next(0, raised).await;
    let services = p.ask("/services", |t| t.contains("nginx.service")).await;
    assert!(services.text.contains("failed"), "{}", services.text);
    let every = p
        .ask("/services all", |t| t.contains("nginx.service"))
        .await;
    assert_eq!(every.text, services.text, "one unit: the list is whole");
    std::fs::remove_file(&failed).expect("nginx recovers");
    for _ in 0..90 {
        if p.bot.fake.sent_to(CHAT).iter().any(|m| cleared(&m.text)) {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    // Two more reads: neither is said again.
    tokio::time::sleep(Duration::from_secs(32)).await;
    let sent = p.bot.fake.sent_to(CHAT);
    let count = |f: &dyn Fn(&str) -> bool| sent.iter().filter(|m| f(&m.text)).count();
    assert_eq!(count(&raised), 1, "raised once");
    assert_eq!(count(&cleared), 1, "cleared once");
    let _ = std::fs::remove_dir_all(&dir);
}
