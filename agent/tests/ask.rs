//! `aromba ask` end to end: the real binary as user `aromba`, a real Warden
//! on real sockets, the real read commands, the journal.

use aromba_testkit::worker as support;

use aromba_warden::journal::verify;
use support::{TestWarden, account, text};

#[test]
fn ask_df_works_as_the_aromba_user_and_the_journal_verifies() {
    let warden = TestWarden::start("df", account("aromba"), 4);
    let out = warden.ask(&["df", "-h", "/"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("Filesystem"),
        "{}",
        text(&out.stdout)
    );
    let journal = warden.journal();
    assert!(journal.contains("\"cmd\":\"df\"") && journal.contains("\"verdict\":\"allowed\""));
    let report = verify(&warden.layout().journal_file(), None).expect("the journal verifies");
    assert!(report.lines >= 2);
}

#[test]
fn a_refusal_prints_the_reason_and_exits_1() {
    let warden = TestWarden::start("refusal", account("aromba"), 4);
    let out = warden.ask(&["du", "--files0-fr=/etc/shadow"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("refused"),
        "{}",
        text(&out.stderr)
    );
    let out = warden.ask(&["bash", "-c", "id"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(warden.journal().contains("\"verdict\":\"refused\""));
}

#[test]
fn a_secret_path_read_is_refused_and_journaled_as_a_ladder_signal() {
    let warden = TestWarden::start("signal", account("aromba"), 4);
    let out = warden.ask(&["ls", "-la", "/proc/self/environ"]);
    assert_eq!(out.status.code(), Some(1));
    let journal = warden.journal();
    assert!(journal.contains("\"kind\":\"ladder-signal\""), "{journal}");
    assert!(journal.contains("secret-path-read"));
}

#[test]
fn another_uid_on_the_worker_socket_is_refused() {
    let warden = TestWarden::start("other-uid", account("aromba"), 4);
    account("aromba-intruder");
    // The socket is 0660 root:aromba: another user cannot even connect…
    let out = warden.aromba_as("aromba-intruder", &["ask", "--", "df", "-h"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        text(&out.stderr).contains("permission denied"),
        "{}",
        text(&out.stderr)
    );
    // …and when the file mode lets it, SO_PEERCRED still refuses it.
    let sock = warden.layout().worker_socket();
    std::fs::set_permissions(&sock, std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();
    let out = warden.aromba_as("aromba-intruder", &["ask", "--", "df", "-h"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("serves only uid"),
        "{}",
        text(&out.stderr)
    );
    // Root is not the Worker either.
    let out = warden.aromba_as("root", &["ask", "--", "df", "-h"]);
    assert!(
        text(&out.stderr).contains("serves only uid"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        warden
            .journal()
            .matches("\"kind\":\"peer-refused\"")
            .count(),
        2
    );
}

#[test]
fn the_control_socket_serves_root_only() {
    let warden = TestWarden::start("control", account("aromba"), 4);
    let out = warden.aromba_as("root", &["status"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("journal: seq"));
    let out = warden.aromba_as("aromba", &["status"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("permission denied"),
        "{}",
        text(&out.stderr)
    );
    let sock = warden.layout().control_socket();
    std::fs::set_permissions(&sock, std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();
    let out = warden.aromba_as("aromba", &["status"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("serves only uid 0"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn ls_of_names_with_newlines_and_escape_sequences_arrives_safely() {
    let warden = TestWarden::start("names", account("aromba"), 4);
    let dir = warden.root.join("names");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a\nb"), "").unwrap();
    std::fs::write(dir.join("x\u{1b}[2Jy"), "").unwrap();
    let out = warden.ask(&["ls", "-1", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        !stdout.contains('\u{1b}'),
        "a raw escape reached the terminal: {stdout:?}"
    );
    assert!(stdout.contains("x\\x1b[2Jy"), "{stdout:?}");
    assert!(stdout.contains("a\nb"), "{stdout:?}");
    assert!(verify(&warden.layout().journal_file(), None).is_ok());
}

#[test]
fn output_past_the_cap_is_cut_and_said_so() {
    let warden = TestWarden::start("flood", account("aromba"), 4);
    // du -a over ~30,000 files prints well over the 1 MiB cap.
    let dir = warden.root.join("flood");
    for i in 0..300 {
        let sub = dir.join(format!("d{i:03}-{}", "x".repeat(40)));
        std::fs::create_dir_all(&sub).unwrap();
        for j in 0..100 {
            std::fs::write(sub.join(format!("f{j:03}-{}", "y".repeat(40))), "").unwrap();
        }
    }
    let out = warden.ask(&["du", "-a", dir.to_str().unwrap()]);
    assert!(
        text(&out.stderr).contains("byte cap"),
        "{}",
        text(&out.stderr)
    );
    assert!(
        out.stdout.len() <= (1 << 20) + 64,
        "{} bytes",
        out.stdout.len()
    );
    assert!(warden.journal().contains("\"cut\":true"));
}

#[test]
fn the_warden_redacts_what_a_read_returns() {
    let warden = TestWarden::start("redact", account("aromba"), 4);
    // A directory whose name is a secret-shaped token: ls prints it back.
    let dir = warden.root.join("redact");
    let token = "ghp_16C7e42F292c6912E7710c838347Ae178B4a";
    std::fs::create_dir_all(dir.join(token)).unwrap();
    let out = warden.ask(&["ls", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!text(&out.stdout).contains(token));
    assert!(text(&out.stdout).contains("[redacted:github-token]"));
    assert!(text(&out.stderr).contains("github-token 1"));
    assert!(warden.journal().contains("\"github-token\":1"));
}

#[test]
fn the_worker_can_read_the_journal_but_not_write_it() {
    let warden = TestWarden::start("journal-mode", account("aromba"), 4);
    let out = warden.ask(&["uptime"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let journal = warden.layout().journal_file();
    let read = assert_cmd::Command::new("runuser")
        .args(["-u", "aromba", "--", "cat"])
        .arg(&journal)
        .output()
        .unwrap();
    assert!(read.status.success(), "{}", text(&read.stderr));
    assert!(text(&read.stdout).contains("\"cmd\":\"uptime\""));
    let write = assert_cmd::Command::new("runuser")
        .args(["-u", "aromba", "--", "sh", "-c", "echo forged >> \"$0\""])
        .arg(&journal)
        .output()
        .unwrap();
    assert!(
        !write.status.success(),
        "the Worker appended to the journal"
    );
    assert!(
        text(&write.stderr).contains("Permission denied"),
        "{}",
        text(&write.stderr)
    );
    assert!(verify(&journal, None).is_ok());
}

#[test]
fn a_path_under_a_directory_the_aromba_user_owns_is_refused_as_swappable() {
    let worker = account("aromba");
    let warden = TestWarden::start("swappable", worker, 4);
    let dir = std::path::PathBuf::from(format!("/var/tmp/aromba-swappable-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("mine/inner")).unwrap();
    std::os::unix::fs::chown(dir.join("mine"), Some(worker.uid), Some(worker.gid)).unwrap();
    // The Worker could rename `inner` aside and put a link to /etc there
    // between the check and the read: refused before anything runs.
    let out = warden.ask(&["ls", dir.join("mine/inner").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("could be swapped"),
        "{}",
        text(&out.stderr)
    );
    // A root-owned chain is read as before.
    let out = warden.ask(&["ls", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    std::fs::remove_dir_all(&dir).unwrap();
}
