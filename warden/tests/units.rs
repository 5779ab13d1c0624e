//! The systemd units, through `systemd-analyze`: `verify` finds nothing
//! wrong with the three (run in a mount namespace of its own in which
//! `/opt` is a fresh tmpfs holding the binaries where the units name them,
//! so nothing is installed on this machine), and the Worker's unit scores
//! at most 2.0 in `security --offline=yes`.

use std::path::{Path, PathBuf};

fn units() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/systemd")
}

const UNITS: [&str; 3] = [
    "aromba.service",
    "aromba-warden.service",
    "aromba-rollback.service",
];

#[test]
fn systemd_analyze_verify_finds_nothing_wrong_with_the_units() {
    let warden = env!("CARGO_BIN_EXE_aromba-warden");
    let files: Vec<String> = UNITS
        .iter()
        .map(|u| units().join(u).display().to_string())
        .collect();
    let script = format!(
        "set -e\n\
         mount -t tmpfs tmpfs /opt\n\
         for r in current previous; do\n\
         \x20 mkdir -p /opt/aromba/$r\n\
         \x20 cp {warden} /opt/aromba/$r/aromba-warden\n\
         \x20 cp {warden} /opt/aromba/$r/aromba\n\
         done\n\
         exec systemd-analyze verify --man=no {}\n",
        files.join(" ")
    );
    let out = assert_cmd::Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .output()
        .expect("unshare runs");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    assert!(said.trim().is_empty(), "systemd-analyze said: {said}");
}

#[test]
fn the_workers_unit_scores_at_most_two_in_systemd_analyze_security() {
    let out = assert_cmd::Command::new("systemd-analyze")
        .args(["security", "--offline=yes", "--no-pager"])
        .arg(units().join("aromba.service"))
        .output()
        .expect("systemd-analyze runs");
    let said = String::from_utf8_lossy(&out.stdout);
    let line = said
        .lines()
        .find(|l| l.contains("Overall exposure level"))
        .unwrap_or_else(|| panic!("no overall level in: {said}"));
    let score: f64 = line
        .split(':')
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no score in {line:?}"));
    assert!(score <= 2.0, "{line}");
}
