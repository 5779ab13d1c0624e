//! The Debian package: `scripts/deb` packs this build's two binaries with
//! cargo-deb and lintian finds no error in it; it ships nothing under
//! /opt (the updater's, never dpkg's); its postinst, run under a root
//! folder as dpkg runs it for `--root` (`DPKG_ROOT`), seeds the first
//! release there, installs the Warden, and leaves a release the updater
//! installed since alone; its postrm purges what the postinst made; the
//! list dpkg keeps of its files is what `aromba uninstall` recognizes.
//!
//! Needs cargo-deb, lintian and dpkg-deb (the test command installs them);
//! fails without them.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn run(cmd: &mut assert_cmd::Command) -> Output {
    cmd.output().expect("the command runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The package, built once for this file's tests.
fn package() -> &'static Path {
    static DEB: OnceLock<PathBuf> = OnceLock::new();
    DEB.get_or_init(|| {
        let warden = PathBuf::from(env!("CARGO_BIN_EXE_aromba-warden"));
        let worker = warden.with_file_name("aromba");
        assert!(
            worker.exists(),
            "{} is missing: build the workspace first (cargo build --workspace)",
            worker.display()
        );
        let out = std::env::temp_dir().join(format!("aromba-deb-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        std::fs::create_dir_all(&out).unwrap();
        let made = run(assert_cmd::Command::new(workspace().join("scripts/deb"))
            .current_dir(workspace())
            .arg("--binaries")
            .arg(warden.parent().unwrap())
            .arg("--out")
            .arg(&out));
        assert!(
            made.status.success(),
            "scripts/deb failed: {}{}",
            text(&made.stdout),
            text(&made.stderr)
        );
        PathBuf::from(text(&made.stdout).trim())
    })
}

struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The package unpacked into `root`, its maintainer scripts into `ctl`.
fn unpacked(name: &str) -> (Scratch, PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("aromba-deb-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (root, ctl) = (dir.join("root"), dir.join("ctl"));
    std::fs::create_dir_all(&root).unwrap();
    let x = run(assert_cmd::Command::new("dpkg-deb")
        .arg("-x")
        .arg(package())
        .arg(&root));
    assert!(x.status.success(), "{}", text(&x.stderr));
    let e = run(assert_cmd::Command::new("dpkg-deb")
        .arg("-e")
        .arg(package())
        .arg(&ctl));
    assert!(e.status.success(), "{}", text(&e.stderr));
    (Scratch(dir), root, ctl)
}

fn script(ctl: &Path, name: &str, arg: &str, root: &Path) -> Output {
    run(assert_cmd::Command::new("sh")
        .arg(ctl.join(name))
        .arg(arg)
        .env("DPKG_ROOT", root))
}

#[test]
fn the_package_passes_lintian_and_ships_no_file_under_opt() {
    let deb = package();
    let listed = run(assert_cmd::Command::new("dpkg-deb").arg("-c").arg(deb));
    assert!(listed.status.success());
    let listing = text(&listed.stdout);
    for path in [
        "./usr/lib/aromba/seed/aromba",
        "./usr/lib/aromba/seed/aromba-warden",
        "./usr/bin/aromba",
        "./usr/lib/sysusers.d/aromba.conf",
        "./lib/systemd/system/aromba.service",
        "./lib/systemd/system/aromba-warden.service",
        "./lib/systemd/system/aromba-rollback.service",
    ] {
        assert!(listing.contains(path), "{path} not in:\n{listing}");
    }
    assert!(
        !listing.contains("./opt"),
        "the package owns /opt:\n{listing}"
    );
    // scripts/deb ran lintian and stops on an error; again, to be sure.
    let lint = run(assert_cmd::Command::new("lintian")
        .args(["--fail-on", "error"])
        .arg(deb));
    assert!(
        lint.status.success(),
        "{}{}",
        text(&lint.stdout),
        text(&lint.stderr)
    );
    assert!(
        !text(&lint.stdout).contains("\nE: "),
        "{}",
        text(&lint.stdout)
    );
}

/// `aromba uninstall` refuses after a `.deb` install by reading dpkg's
/// list of the package's files (`/var/lib/dpkg/info/aromba.list`): the
/// list dpkg writes for this very package must name our units as that
/// check looks for them, and the package must still ship the sysusers file
/// and units it says dpkg owns.
#[test]
fn the_uninstall_check_recognizes_this_packages_file_list() {
    let listed = run(assert_cmd::Command::new("dpkg-deb")
        .arg("-c")
        .arg(package()));
    assert!(listed.status.success());
    // dpkg's form: one absolute path a line, no trailing slash, `/.` for
    // the top.
    let list: String = text(&listed.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().last())
        .map(|p| {
            let p = p.trim_start_matches('.').trim_end_matches('/');
            if p.is_empty() {
                "/.\n".to_string()
            } else {
                format!("{p}\n")
            }
        })
        .collect();
    assert!(
        aromba_warden_proto::package::lists_our_units(&list),
        "the check misses this package's units:\n{list}"
    );
    for owned in [
        "/usr/lib/sysusers.d/aromba.conf\n",
        "/usr/bin/aromba\n",
        "/lib/systemd/system/aromba-warden.service\n",
    ] {
        assert!(list.contains(owned), "{owned} not in:\n{list}");
    }
    // Without its units (removed, not purged) the list is not an install.
    let without: String = list
        .lines()
        .filter(|l| !l.ends_with(".service"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(!aromba_warden_proto::package::lists_our_units(&without));
}

#[test]
fn the_postinst_seeds_the_first_release_and_leaves_a_newer_one_alone() {
    let (_s, root, ctl) = unpacked("postinst");
    let version = env!("CARGO_PKG_VERSION");
    let first = script(&ctl, "postinst", "configure", &root);
    assert!(
        first.status.success(),
        "{}{}",
        text(&first.stdout),
        text(&first.stderr)
    );
    assert!(text(&first.stdout).contains("sudo aromba pair"));
    let release = root.join("opt/aromba/releases").join(version);
    assert_eq!(
        std::fs::read(release.join("aromba-warden")).unwrap(),
        std::fs::read(root.join("usr/lib/aromba/seed/aromba-warden")).unwrap()
    );
    assert_eq!(
        std::fs::read_link(root.join("opt/aromba/current")).unwrap(),
        Path::new("releases").join(version)
    );
    let network = std::fs::read_to_string(root.join("worker/network.toml")).unwrap();
    assert!(
        network.contains("releases = \"https://aro.mba/releases/stable\""),
        "{network}"
    );
    let baseline = std::fs::read(root.join("state/baseline.json")).expect("the Warden installed");

    // The updater installed a newer release since; the package's postinst
    // runs again (an upgrade, a reconfigure): the running release stays.
    let newer = root.join("opt/aromba/releases/9.9.9");
    std::fs::create_dir_all(&newer).unwrap();
    std::fs::remove_file(root.join("opt/aromba/current")).unwrap();
    std::os::unix::fs::symlink("releases/9.9.9", root.join("opt/aromba/current")).unwrap();
    let again = script(&ctl, "postinst", "configure", &root);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert!(text(&again.stdout).contains("Aromba 9.9.9 is running"));
    assert_eq!(
        std::fs::read_link(root.join("opt/aromba/current")).unwrap(),
        Path::new("releases/9.9.9")
    );
    assert_eq!(
        std::fs::read(root.join("state/baseline.json")).unwrap(),
        baseline
    );

    // Purged: what the postinst and the Warden made goes, the journal stays.
    std::fs::create_dir_all(root.join("var/lib/aromba-warden/journal")).unwrap();
    let purged = script(&ctl, "postrm", "purge", &root);
    assert!(purged.status.success(), "{}", text(&purged.stderr));
    assert!(!root.join("opt/aromba").exists());
    assert!(root.join("var/lib/aromba-warden/journal").exists());
}
