//! `aromba-warden policy check`: prints the verdict with its rule or reason,
//! runs nothing, exits 0 when allowed and 1 when refused — for every bypass
//! the read path must stop.

use assert_cmd::Command;

/// `policy check` for the Worker account `nobody` (every Debian system has
/// it; the tests do not depend on `aromba` existing yet).
fn check(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::cargo_bin("aromba-warden")
        .unwrap()
        .args(["policy", "check", "--worker-user", "nobody", "--"])
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn prints_the_rule_and_exits_0_when_allowed() {
    let (code, out) = check(&["journalctl", "-u", "nginx", "-n", "50"]);
    assert_eq!(code, Some(0));
    assert!(
        out.starts_with("allowed by [[allow]] \"journalctl\""),
        "{out}"
    );
}

#[test]
fn refuses_every_listed_bypass_with_exit_1() {
    let bypasses: &[&[&str]] = &[
        &["du", "--files0-fr=/etc/shadow"],
        &["du", "--files0-from=/etc/shadow"],
        &["journalctl", "--cursor-fi=/x"],
        &["journalctl", "--file", "/x"],
        &["journalctl", "-D", "/var/log/journal"],
        &["journalctl", "--root", "/"],
        &["journalctl", "--cursor-file", "/x"],
        &["journalctl", "--vacuum-size=1K"],
        &["journalctl", "--vacuum-time=1s"],
        &["journalctl", "--vacuum-files=1"],
        &["df", "-hZ"],
        &["journalctl", "-n", "-5"],
        &["docker", "ps", "logs"],
        &["du", "-s", "--", "/"],
        &["ls", "/tmp\n"], // (a NUL cannot cross argv; the library and protocol tests send one)
        &["nproc", "1"],
        &["ls", "/proc/self/environ"],
        &["ls", "/proc/1/environ"],
        &["cat", "/etc/shadow"],
        &["bash", "-c", "id"],
    ];
    for b in bypasses {
        let (code, out) = check(b);
        assert_eq!(code, Some(1), "{b:?} was not refused: {out}");
        assert!(out.starts_with("refused: "), "{b:?}: {out}");
    }
}

#[test]
fn names_the_ladder_signal_a_refusal_raises() {
    let (code, out) = check(&["ls", "-la", "/root/.ssh"]);
    assert_eq!(code, Some(1));
    assert!(out.contains("ladder signal:"), "{out}");
}

#[test]
fn judges_path_arguments_against_the_named_workers_account() {
    let dir = std::env::temp_dir().join(format!("aromba-cli-swap-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("owned/inner")).unwrap();
    let uid = aromba_warden::users::lookup(std::path::Path::new("/etc/passwd"), "nobody")
        .unwrap()
        .expect("nobody exists")
        .uid;
    std::os::unix::fs::chown(dir.join("owned"), Some(uid), None).unwrap();
    let inner = dir.join("owned/inner");
    let (code, out) = check(&["ls", inner.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("could be swapped"), "{out}");
    let missing = Command::cargo_bin("aromba-warden")
        .unwrap()
        .args([
            "policy",
            "check",
            "--worker-user",
            "no-such-account-here",
            "--",
        ])
        .args(["ls", "/"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(2));
    std::fs::remove_dir_all(&dir).unwrap();
}
