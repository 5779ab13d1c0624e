//! `deploy/install.sh`, as `scripts/release` writes it with the test keys,
//! run under a temporary root against a local HTTP server holding a
//! release of this build's Warden: it installs, a second run changes
//! nothing, and a release it cannot verify installs nothing.

use aromba_testkit::release as releases;

use std::path::{Path, PathBuf};

/// Serves the files of `dir` on loopback; the base URL.
fn serve(dir: PathBuf) -> String {
    releases::serve(dir).url
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A release of this build's Warden (and a stand-in Worker) in
/// `server/stable/`, made by `scripts/release` with the test keys.
fn release(scratch: &Path, version: &str) -> PathBuf {
    let bins = scratch.join("bins");
    std::fs::create_dir_all(&bins).unwrap();
    std::fs::copy(
        env!("CARGO_BIN_EXE_aromba-warden"),
        bins.join("aromba-warden"),
    )
    .unwrap();
    std::fs::write(bins.join("aromba"), "#!/bin/sh\nexit 0\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
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

fn install(release: &Path, base: &str, root: &Path) -> std::process::Output {
    assert_cmd::Command::new("bash")
        .arg(release.join("install.sh"))
        .args(["--base-url", base, "--root"])
        .arg(root)
        .output()
        .unwrap()
}

fn scratch(name: &str) -> Scratch {
    let dir = PathBuf::from(format!(
        "/var/tmp/aromba-install-sh-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("root")).unwrap();
    Scratch(dir)
}

#[test]
fn install_sh_installs_a_verified_release_under_a_root_and_a_second_run_changes_nothing() {
    let s = scratch("good");
    let out = release(&s.0, "1.0.0");
    let base = serve(s.0.join("server"));
    let root = s.0.join("root");
    let first = install(&out, &base, &root);
    let said = String::from_utf8_lossy(&first.stdout);
    assert!(
        first.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert!(said.contains("aromba pair"), "{said}");
    assert_eq!(
        std::fs::read_link(root.join("opt/aromba/current")).unwrap(),
        Path::new("releases/1.0.0")
    );
    assert_eq!(
        std::fs::read(root.join("opt/aromba/current/aromba-warden")).unwrap(),
        std::fs::read(env!("CARGO_BIN_EXE_aromba-warden")).unwrap()
    );
    for unit in [
        "aromba.service",
        "aromba-warden.service",
        "aromba-rollback.service",
    ] {
        assert_eq!(
            std::fs::read_to_string(root.join("etc/systemd/system").join(unit)).unwrap(),
            std::fs::read_to_string(workspace().join("deploy/systemd").join(unit)).unwrap(),
            "{unit}"
        );
    }
    // The Worker's update check looks where the installer found the
    // release (`aromba pair` lists its host).
    let network = std::fs::read_to_string(root.join("worker/network.toml")).unwrap();
    assert!(
        network.contains(&format!("\nreleases = \"{base}/stable\"\n")),
        "{network}"
    );
    let baseline = std::fs::read(root.join("state/baseline.json")).unwrap();

    let again = install(&out, &base, &root);
    let said = String::from_utf8_lossy(&again.stdout);
    assert!(again.status.success(), "{said}");
    assert!(
        said.contains("already unpacked") && said.contains("baseline is kept"),
        "{said}"
    );
    assert_eq!(
        std::fs::read(root.join("state/baseline.json")).unwrap(),
        baseline
    );
}

#[test]
fn install_sh_installs_nothing_from_a_release_it_cannot_verify() {
    let s = scratch("bad");
    let out = release(&s.0, "1.0.0");
    let base = serve(s.0.join("server"));
    let root = s.0.join("root");
    // Signed by another key: only the standby key is in this copy, and it
    // did not sign.
    let script = std::fs::read_to_string(out.join("install.sh")).unwrap();
    let current = std::fs::read_to_string(workspace().join("keys/test/release.pub")).unwrap();
    let current = current.lines().nth(1).unwrap().trim();
    std::fs::write(
        out.join("install.sh"),
        script.replace(&format!("\"{current}\""), ""),
    )
    .unwrap();
    let refused = install(&out, &base, &root);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("nothing was installed"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    assert!(!root.join("opt").exists(), "something moved");

    // A tarball that is not the manifest's.
    std::fs::write(out.join("install.sh"), &script).unwrap();
    let tarball = out.join(format!("aromba-1.0.0-{}.tar.gz", std::env::consts::ARCH));
    let mut bytes = std::fs::read(&tarball).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&tarball, bytes).unwrap();
    let refused = install(&out, &base, &root);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("SHA-256"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    assert!(!root.join("opt").exists(), "something moved");

    // A copy of the template, without keys, refuses before anything.
    let template = assert_cmd::Command::new("bash")
        .arg(workspace().join("deploy/install.sh"))
        .args(["--base-url", &base, "--root"])
        .arg(&root)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&template.stderr).contains("carries no release key"));
}
