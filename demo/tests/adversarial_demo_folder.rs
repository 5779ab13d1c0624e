//! `scripts/demo` as root against names another account made first in
//! the sticky /var/tmp: it must refuse them, and touch nothing they point
//! to. Needs root and the demo's system packages (the test command
//! installs them); fails, never skips, without them.

use assert_cmd::Command;
use std::path::{Path, PathBuf};

/// Root and the demo's system packages, or the test fails saying which.
fn require() {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout == b"0\n");
    assert!(root, "the demo's tests run as root (scripts/test does)");
    for cmd in ["bwrap", "runuser", "useradd"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {cmd}")])
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(found, "{cmd} is missing (scripts/test installs it)");
    }
    let pg = std::fs::read_dir("/usr/lib/postgresql").is_ok_and(|mut d| d.next().is_some());
    assert!(pg, "PostgreSQL is missing (scripts/test installs it)");
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/demo")
}

/// Runs the script on `dir` (as if built), as `--check`; its exit code and
/// what it said.
fn demo(dir: &Path) -> (i32, String) {
    let out = Command::new(script())
        .arg("--check")
        .env("AROMBA_DEMO_DIR", dir)
        .env("AROMBA_DEMO_PROFILE", "debug")
        .env("AROMBA_DEMO_BUILT", "debug")
        .output()
        .expect("the script runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn as_nobody(args: &[&str]) {
    let ok = Command::new("runuser")
        .args(["-u", "nobody", "--"])
        .args(args)
        .output()
        .expect("runuser")
        .status
        .success();
    assert!(ok, "{args:?}");
}

#[test]
fn a_demo_folder_another_account_made_first_is_refused() {
    require();
    let name = format!("/var/tmp/aromba-demo-adversarial-{}", std::process::id());
    let dir = Path::new(&name);
    // A folder of its own, with the marker in it.
    as_nobody(&["mkdir", &name]);
    as_nobody(&["touch", &format!("{name}/.aromba-demo")]);
    let (code, said) = demo(dir);
    assert_eq!(code, 1, "{said}");
    assert!(said.contains("is not a demo folder of root's"), "{said}");
    assert!(dir.join(".aromba-demo").exists(), "the script removed it");
    std::fs::remove_dir_all(dir).expect("cleaned up");

    // A link to a folder of root's that looks like a demo's.
    let target = std::env::temp_dir().join(format!("aromba-demo-target-{}", std::process::id()));
    std::fs::create_dir_all(&target).expect("the target");
    std::fs::write(target.join(".aromba-demo"), "").expect("its marker");
    std::fs::write(target.join("keep"), "root's").expect("a file of root's");
    as_nobody(&["ln", "-s", target.to_str().expect("UTF-8"), &name]);
    let (code, said) = demo(dir);
    assert_eq!(code, 1, "{said}");
    assert!(target.join("keep").exists(), "the script followed the link");
    std::fs::remove_file(dir).expect("cleaned up");
    std::fs::remove_dir_all(&target).expect("cleaned up");

    // A folder of someone else's on the way.
    let parent = format!("/var/tmp/aromba-demo-parent-{}", std::process::id());
    as_nobody(&["mkdir", &parent]);
    let (code, said) = demo(&Path::new(&parent).join("demo"));
    assert_eq!(code, 1, "{said}");
    assert!(
        said.contains("is not root's or others may write in it"),
        "{said}"
    );
    assert!(!Path::new(&parent).join("demo").exists());
    std::fs::remove_dir_all(&parent).expect("cleaned up");
}
