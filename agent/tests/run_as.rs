//! The Worker never runs as root: `aromba run` started by root without
//! `--user`, or with `--user` naming an account that is root, refuses
//! before it reads anything or makes a thread (these tests run as root).

fn run_as_root(args: &[&str]) -> (Option<i32>, String) {
    let dir = std::env::temp_dir().join(format!("aromba-run-as-{}", std::process::id()));
    let out = assert_cmd::Command::new(assert_cmd::cargo::cargo_bin("aromba"))
        .arg("run")
        .arg("--root")
        .arg(&dir)
        .args(args)
        .output()
        .expect("aromba runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn aromba_run_started_by_root_without_user_refuses() {
    assert!(
        nix::unistd::Uid::effective().is_root(),
        "the test runs as root"
    );
    let (code, stderr) = run_as_root(&[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("the Worker does not run as root"),
        "{stderr}"
    );
}

#[test]
fn aromba_run_refuses_a_user_that_is_root_or_is_not_there() {
    let (code, stderr) = run_as_root(&["--user", "root"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("the Worker never runs as root"), "{stderr}");
    let (code, stderr) = run_as_root(&["--user", "no-such-account-here"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("there is no user"), "{stderr}");
}
