//! `aromba chores` and `aromba chore run` from a root terminal, against a
//! real Warden: the embedded system chores, the owner's `mine/`, the
//! dry-run-first rule, receipts.

use aromba_testkit::worker as support;

use std::os::unix::fs::PermissionsExt;
use support::{TestWarden, account, text};

#[test]
fn chores_lists_the_system_chores() {
    let warden = TestWarden::start_with("chores-list", account("aromba"), true, |_| {});
    let out = warden.aromba_as("root", &["chores"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    for name in ["time-sync", "journal-vacuum", "apt-clean"] {
        assert!(s.contains(name), "{name} missing:\n{s}");
    }
    assert!(s.contains("never run"));
}

#[test]
fn a_first_real_run_needs_a_dry_run_first_and_both_leave_receipts() {
    let warden = TestWarden::start_with("chores-dry", account("aromba"), true, |_| {});
    let out = warden.aromba_as("root", &["chore", "run", "time-sync"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("needs a dry run"),
        "{}",
        text(&out.stderr)
    );
    let out = warden.aromba_as("root", &["chore", "run", "time-sync", "--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("would turn network time sync on"),
        "{}",
        text(&out.stdout)
    );
    assert!(text(&out.stdout).contains("receipt: time-sync: dry run, exit 0"));
    let out = warden.aromba_as("root", &["chore", "run", "time-sync"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.contains("receipt: time-sync: real run, exit 0"), "{s}");
    // Its two chore actions ran (or were tried) outside the cage afterwards.
    assert!(
        s.contains("timedatectl set-ntp true:")
            && s.contains("systemctl restart systemd-timesyncd.service:"),
        "{s}"
    );
    let journal = warden.journal();
    assert!(
        journal.contains("\"kind\":\"chore-action\"") && journal.contains("\"kind\":\"receipt\"")
    );
    let out = warden.aromba_as("root", &["chores"]);
    assert!(
        text(&out.stdout).contains("time-sync: real run"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn the_owners_chores_run_under_the_same_rules() {
    let warden = TestWarden::start_with("chores-mine", account("aromba"), true, |_| {});
    let mine = warden.layout().config_dir.join("mine");
    std::fs::create_dir_all(&mine).unwrap();
    std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o755)).unwrap();
    let touched = std::path::PathBuf::from(format!("/var/tmp/aromba-mine-{}", std::process::id()));
    std::fs::create_dir_all(&touched).unwrap();
    let script = format!(
        "#!/bin/sh\n# aromba-chore: 1\n# name: hello\n# description: Say hello\n# color: yellow\n# touches: {}\n# network: no\n# schedule: manual\n# end\nif [ \"$1\" = --dry-run ]; then echo would-say-hello; exit 0; fi\necho hello > {}/hello\n",
        touched.display(),
        touched.display()
    );
    std::fs::write(mine.join("hello.sh"), &script).unwrap();
    std::fs::set_permissions(
        mine.join("hello.sh"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let out = warden.aromba_as("root", &["chore", "run", "hello", "--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("would-say-hello"));
    // A yellow chore's real run waits out the first week.
    let out = warden.aromba_as("root", &["chore", "run", "hello"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("first 7 days"),
        "{}",
        text(&out.stderr)
    );
    assert!(!touched.join("hello").exists());
    // A script anyone could have edited is not a chore.
    std::fs::set_permissions(
        mine.join("hello.sh"),
        std::fs::Permissions::from_mode(0o666),
    )
    .unwrap();
    let out = warden.aromba_as("root", &["chores"]);
    assert!(
        !text(&out.stdout).contains("hello"),
        "{}",
        text(&out.stdout)
    );
    let out = warden.aromba_as("root", &["chore", "run", "hello", "--dry-run"]);
    assert_eq!(out.status.code(), Some(1));
    let _ = std::fs::remove_dir_all(&touched);
}

/// Writes `script` as the owner's chore `name` in `mine/`, root's and 0644.
fn write_mine(warden: &TestWarden, name: &str, script: &str) {
    let mine = warden.layout().config_dir.join("mine");
    std::fs::create_dir_all(&mine).unwrap();
    std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = mine.join(format!("{name}.sh"));
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
}

#[test]
fn a_chore_writing_outside_its_touches_is_killed_and_journaled() {
    // The home it writes is one it may read: the cage shows it read-only,
    // so the write is refused with EROFS, which the tripwire reads.
    let warden = TestWarden::start_with("chores-outside", account("aromba"), true, |_| {});
    let base = std::path::PathBuf::from(format!("/var/tmp/aromba-outside-{}", std::process::id()));
    let (touched, home) = (base.join("touched"), base.join("home"));
    std::fs::create_dir_all(&touched).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let script = format!(
        "#!/bin/sh\n# aromba-chore: 1\n# name: sneaky\n# description: Claims a cache, writes a home\n# color: green\n# touches: {t}\n# reads: {h}\n# network: no\n# schedule: manual\n# end\nif [ \"$1\" = --dry-run ]; then echo would-clean; exit 0; fi\necho x > {h}/planted\nsleep 50\necho y > {t}/after\n",
        t = touched.display(),
        h = home.display()
    );
    write_mine(&warden, "sneaky", &script);
    let out = warden.aromba_as("root", &["chore", "run", "sneaky", "--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = warden.aromba_as("root", &["chore", "run", "sneaky"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let s = text(&out.stdout);
    assert!(
        s.contains("killed at its first write outside its touches"),
        "{s}"
    );
    assert!(!home.join("planted").exists() && !touched.join("after").exists());
    let journal = warden.journal();
    assert!(
        journal.contains("files-outside-touches") && journal.contains("planted"),
        "{journal}"
    );
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn chores_are_refused_at_freeze_and_to_non_root() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let clock = aromba_warden::ladder::ManualClock::new(now);
    let c = clock.clone();
    let warden = TestWarden::start_with("chores-freeze", account("aromba"), true, move |o| {
        o.clock = c
    });
    let out = warden.aromba_as("aromba", &["chores"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    // Two deny-list hits a minute apart (Slow paces the second otherwise).
    warden.ask(&["rm", "-rf", "/"]);
    clock.advance(61);
    warden.ask(&["mkfs.ext4", "/dev/sda"]);
    warden.wait_for_ladder("freeze");
    let out = warden.aromba_as("root", &["chore", "run", "time-sync", "--dry-run"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("Freeze"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_dry_run_receipt_lists_the_actions_the_warden_would_fill_in() {
    let warden = TestWarden::start_with("chores-fill", account("aromba"), true, |_| {});
    let out = warden.aromba_as("root", &["chore", "run", "security-updates", "--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    // What the machine's apt lists hold decides which; each says so plainly.
    let listed = s.contains("would ask for: apt-get install -y --only-upgrade ")
        || s.contains("apt-get install -y --only-upgrade @security-upgrades: nothing to do")
        || s.contains("apt-get install -y --only-upgrade @security-upgrades: could not fill in");
    assert!(listed, "{s}");
    assert!(
        !s.contains("would ask for: apt-get install -y --only-upgrade @"),
        "{s}"
    );
}

#[test]
fn the_pin_guards_turning_prod_mode_off_from_the_root_terminal() {
    let warden = TestWarden::start_with("chores-pin", account("aromba"), true, |_| {});
    let out = warden.aromba_as_with_stdin("root", &["pin", "set"], "111111\n");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("too easy"),
        "{}",
        text(&out.stderr)
    );
    let out = warden.aromba_as_with_stdin("root", &["pin", "set"], "583016\n");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("the PIN is set"));
    // Only root sets it.
    let out = warden.aromba_as_with_stdin("aromba", &["pin", "set"], "583017\n");
    assert_eq!(out.status.code(), Some(1));
    let out = warden.aromba_as("root", &["prod-mode", "on"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let status = text(&warden.aromba_as("root", &["status"]).stdout);
    assert!(
        status.contains("prod mode: on since") && status.contains("pin: set"),
        "{status}"
    );
    let out = warden.aromba_as("root", &["chores"]);
    assert!(
        !text(&out.stdout).contains(" green "),
        "every chore is red in prod mode:\n{}",
        text(&out.stdout)
    );
    let out = warden.aromba_as_with_stdin("root", &["prod-mode", "off"], "583017\n");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stdout).contains("It needs your PIN"),
        "{}",
        text(&out.stdout)
    );
    assert!(
        text(&out.stderr).contains("wrong PIN"),
        "{}",
        text(&out.stderr)
    );
    let out = warden.aromba_as_with_stdin("root", &["prod-mode", "off"], "");
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no PIN on standard input"));
    let out = warden.aromba_as_with_stdin("root", &["prod-mode", "off"], "583016\n");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("prod mode is off"));
    let journal = warden.journal();
    assert!(
        !journal.contains("583016"),
        "the PIN never reaches the journal"
    );
}

#[test]
fn an_empty_pin_is_refused_before_it_reaches_the_warden() {
    let warden = TestWarden::start_with("chores-empty-pin", account("aromba"), true, |_| {});
    let out = warden.aromba_as_with_stdin("root", &["pin", "set"], "\n");
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("empty"), "{}", text(&out.stderr));
    // Read from a pipe, one line.
    let out = warden.aromba_as_with_stdin("root", &["pin", "set"], "583016\n");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = warden.aromba_as("root", &["prod-mode", "on"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // A stray Enter sends nothing: it would count as a wrong PIN.
    let out = warden.aromba_as_with_stdin("root", &["prod-mode", "off"], "\n");
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("empty"), "{}", text(&out.stderr));
    assert!(
        !aromba_warden::pin::attempts_file(&warden.layout()).exists(),
        "an attempt was counted"
    );
    assert!(text(&warden.aromba_as("root", &["status"]).stdout).contains("prod mode: on since"));
}

#[test]
fn a_damage_cap_is_confirmed_and_a_red_run_undone_from_the_root_terminal() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    // Eight days after install: red chores may run.
    let clock = aromba_warden::ladder::ManualClock::new(now + 8 * 86_400);
    let warden = TestWarden::start_with("chores-undo", account("aromba"), true, move |o| {
        o.clock = clock
    });
    let dir = std::path::PathBuf::from(format!("/var/tmp/aromba-undo-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("notes.txt"), "mine\n").unwrap();
    let script = format!(
        "#!/bin/sh\n# aromba-chore: 1\n# name: wipe\n# description: Empties a folder\n# color: red\n# touches: {d}\n# max_changes: 2000 files, 20 GB\n# network: no\n# schedule: manual\n# end\nif [ \"$1\" = --dry-run ]; then echo would-empty; exit 0; fi\nrm -f {d}/notes.txt\n",
        d = dir.display()
    );
    write_mine(&warden, "wipe", &script);
    let out = warden.aromba_as("root", &["chore", "run", "wipe", "--dry-run"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("confirm"),
        "{}",
        text(&out.stderr)
    );
    let out = warden.aromba_as("root", &["chore", "confirm", "wipe"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = warden.aromba_as("root", &["chore", "run", "wipe", "--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = warden.aromba_as("root", &["chore", "run", "wipe"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(!dir.join("notes.txt").exists());
    let at = s.find("undo id ").expect("an undo id on the receipt") + 8;
    let id = &s[at..at + 32];
    let out = warden.aromba_as("root", &["undo", id]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
        "mine\n"
    );
    let out = warden.aromba_as("root", &["undo", "not-an-id"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("no undo"),
        "{}",
        text(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
