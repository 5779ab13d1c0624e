//! The systemd units, through `systemd-analyze`: `verify` finds nothing
//! wrong with the three (run in a mount namespace of its own in which
//! `/opt` is a fresh tmpfs holding the binaries where the units name them,
//! so nothing is installed on this machine), and each unit scores at most
//! what SECURITY.md records in `security --offline=yes`: the Worker's 1.2,
//! the rollback's 1.4, the Warden's 7.7.

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
    // systemd before 254 (Debian 12, Ubuntu 22.04) does not know
    // RestartMode= and says so; it already has the meaning the key asks.
    let said: Vec<&str> = said
        .lines()
        .filter(|l| !l.contains("Unknown key 'RestartMode'") && !l.trim().is_empty())
        .collect();
    assert!(said.is_empty(), "systemd-analyze said: {}", said.join("\n"));
}

/// The unit's overall exposure in `systemd-analyze security
/// --offline=yes` (systemd 250 and later read a unit file without a
/// running systemd).
fn exposure(unit: &str) -> f64 {
    let out = assert_cmd::Command::new("systemd-analyze")
        .args(["security", "--offline=yes", "--no-pager"])
        .arg(units().join(unit))
        .output()
        .expect("systemd-analyze runs");
    let said = String::from_utf8_lossy(&out.stdout);
    let line = said
        .lines()
        .find(|l| l.contains("Overall exposure level"))
        .unwrap_or_else(|| panic!("no overall level for {unit} in: {said}"));
    line.split(':')
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no score in {line:?}"))
}

#[test]
fn each_unit_scores_at_most_what_security_md_records() {
    for (unit, at_most) in [
        ("aromba.service", 1.2),
        ("aromba-rollback.service", 1.4),
        ("aromba-warden.service", 7.7),
    ] {
        let score = exposure(unit);
        assert!(score <= at_most, "{unit} scores {score}, above {at_most}");
    }
    let security =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../SECURITY.md"))
            .unwrap();
    for recorded in [
        "aromba.service 1.2",
        "aromba-rollback.service 1.4",
        "aromba-warden.service 7.7",
    ] {
        assert!(
            security.contains(recorded),
            "SECURITY.md does not record {recorded:?}"
        );
    }
}
