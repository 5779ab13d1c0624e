//! `install.sh` under `curl | bash`, its download cut short: bash runs
//! what it read as it reads it, so a script that acts line by line ran
//! the lines it got and exited 0 — binaries linked with no units and no
//! baseline, or a half-written unit. The script is now one function
//! called on its last line: a cut anywhere runs nothing.

use aromba_testkit::release as releases;

use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A release of this build's Warden (and a stand-in Worker), made by
/// `scripts/release` with the test keys, in `scratch/server/stable/`.
fn release(scratch: &Path, version: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let bins = scratch.join("bins");
    std::fs::create_dir_all(&bins).unwrap();
    std::fs::copy(
        env!("CARGO_BIN_EXE_aromba-warden"),
        bins.join("aromba-warden"),
    )
    .unwrap();
    std::fs::write(bins.join("aromba"), "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(bins.join("aromba"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = scratch.join("server/stable");
    let made = assert_cmd::Command::new(workspace().join("scripts/release"))
        .current_dir(workspace())
        .args(["--version", version, "--key", "keys/test/release.key"])
        .args([
            "--public-keys",
            "keys/test/release.pub,keys/test/release-standby.pub",
        ])
        .arg("--binaries")
        .arg(&bins)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    out
}

/// `script` fed to `bash -s` on its standard input, as `curl | bash`
/// does.
fn piped(script: &[u8], base: &str, root: &Path) -> std::process::Output {
    assert_cmd::Command::new("bash")
        .args(["-s", "--", "--base-url", base, "--root"])
        .arg(root)
        .write_stdin(script.to_vec())
        .output()
        .unwrap()
}

fn empty(dir: &Path) -> bool {
    std::fs::read_dir(dir).unwrap().next().is_none()
}

#[test]
fn a_cut_off_install_sh_under_curl_bash_runs_nothing() {
    let scratch = Scratch(PathBuf::from(format!(
        "/var/tmp/aromba-adv-install-sh-cut-{}",
        std::process::id()
    )));
    let _ = std::fs::remove_dir_all(&scratch.0);
    let out = release(&scratch.0, "1.0.0");
    let base = releases::serve(scratch.0.join("server")).url;
    let script = std::fs::read(out.join("install.sh")).unwrap();
    let root = scratch.0.join("root");
    // Cut at every line's end but the last (the call), and inside lines.
    let mut cuts: Vec<usize> = script
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .map(|(i, _)| i + 1)
        .filter(|&i| i < script.len())
        .collect();
    cuts.extend((1..script.len()).step_by(97));
    for cut in cuts {
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let ran = piped(&script[..cut], &base, &root);
        let said = String::from_utf8_lossy(&ran.stdout);
        assert!(
            empty(&root),
            "cut at byte {cut} (exit {:?}) installed part of Aromba: {said}",
            ran.status.code()
        );
        assert!(!said.contains("==>"), "cut at byte {cut} ran: {said}");
    }
    // The whole script, the same way, installs: the cuts ran nothing
    // because they were cut.
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let whole = piped(&script, &base, &root);
    assert!(
        whole.status.success(),
        "{}{}",
        String::from_utf8_lossy(&whole.stdout),
        String::from_utf8_lossy(&whole.stderr)
    );
    assert!(root.join("opt/aromba/current").exists());
}
