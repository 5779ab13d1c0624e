//! Installing a release through a real Warden: the Worker's download
//! folder holds a release signed with the test key; the Warden reads it,
//! verifies it again, writes `releases/<version>/`, swaps `current`, keeps
//! `previous`, records the pending baseline and asks `systemctl` (a
//! stand-in that writes down its arguments) to restart both services.
//! Every refusal leaves the installed release as it was.

use aromba_testkit::release as releases;
use aromba_testkit::warden as support;

use aromba_warden::server::ServeOptions;
use aromba_warden::update::{RECORD, Record, Releases};
use aromba_warden_proto::{Request, Response};
use releases::{OTHER_KEY, RELEASE_PUB, Release, key_line};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use support::{Warden, now};

/// Releases under the test's root, the test release key, and the stand-in
/// `systemctl` beside them.
fn adjust(o: &mut ServeOptions) {
    let root = o.layout.state_dir.parent().unwrap().to_path_buf();
    o.releases = Releases::rooted(&root);
    o.release_keys = Some(vec![key_line(RELEASE_PUB)]);
    o.systemctl = root.join("systemctl");
    o.host = Some(aromba_warden::server::HostParts {
        units_dir: root.join("etc/systemd/system"),
        cli_link: root.join("usr/local/bin/aromba"),
        userdel: root.join("userdel"),
        worker_user: "aromba".into(),
    });
}

fn start(name: &str) -> Warden {
    start_with(name, false)
}

/// Paired: the relay's tap key is pinned, so taps verify.
fn start_with(name: &str, paired: bool) -> Warden {
    let w = Warden::start_with(name, paired, &[], adjust);
    let systemctl = w.root.join("systemctl");
    std::fs::write(
        &systemctl,
        format!(
            "#!/bin/sh\necho \"$@\" >> {}\n",
            w.root.join("systemctl.log").display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&systemctl, std::fs::Permissions::from_mode(0o755)).unwrap();
    w
}

fn downloads(w: &Warden) -> PathBuf {
    let dir = w.layout().worker_home.join("updates");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// From a root terminal (`aromba update --from`): any release above the
/// installed one.
fn install(w: &Warden) -> Response {
    let dir = w.layout().worker_home.join("updates");
    w.control(&Request::InstallRelease {
        dir: Some(dir.to_string_lossy().into_owned()),
    })
}

fn current(w: &Warden) -> Option<String> {
    std::fs::read_link(w.root.join("opt/aromba/current"))
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

#[test]
fn a_signed_release_is_installed_the_link_swapped_and_both_services_restarted() {
    let w = start("update-good");
    let dir = downloads(&w);
    Release::new("1.0.0").write(&dir);
    assert_eq!(
        install(&w),
        Response::ReleaseInstalled {
            version: "1.0.0".into(),
            previous: None
        }
    );
    assert_eq!(current(&w).as_deref(), Some("releases/1.0.0"));
    let release = w.root.join("opt/aromba/releases/1.0.0");
    assert_eq!(
        std::fs::read(release.join("aromba")).unwrap(),
        b"worker binary"
    );
    assert_eq!(
        std::fs::read(release.join("aromba-warden")).unwrap(),
        b"warden binary"
    );
    let log = std::fs::read_to_string(w.root.join("systemctl.log")).unwrap();
    assert_eq!(
        log,
        "--no-block restart aromba-warden.service aromba.service\n"
    );
    let record = Record::parse(&std::fs::read(w.layout().state_dir.join(RECORD)).unwrap()).unwrap();
    let pending = record.pending.expect("the baseline the new Warden takes");
    assert_eq!(
        pending.worker_sha256,
        aromba_release::sha256_hex(b"worker binary")
    );
    assert!(w.journal().contains("\"release-install\""));

    // The next one keeps this one as previous.
    let dir = downloads(&w);
    Release::new("1.0.1").write(&dir);
    assert_eq!(
        install(&w),
        Response::ReleaseInstalled {
            version: "1.0.1".into(),
            previous: Some("1.0.0".into())
        }
    );
    assert_eq!(
        std::fs::read_link(w.root.join("opt/aromba/previous")).unwrap(),
        Path::new("releases/1.0.0")
    );
    // The Warden's own change is in its baseline: the ladder did not move.
    assert_eq!(w.ladder(), 0);
}

fn refused(w: &Warden, what: &str, want: &str) {
    match install(w) {
        Response::Refused { reason, .. } => {
            assert!(reason.contains(want), "{what}: {reason} lacks {want:?}")
        }
        other => panic!("{what} was not refused: {other:?}"),
    }
    assert_eq!(
        current(w).as_deref(),
        Some("releases/1.0.0"),
        "{what} moved the link"
    );
    let mut left: Vec<String> = std::fs::read_dir(w.root.join("opt/aromba/releases"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    // A refused release may leave its staged folder only if it got that
    // far; none of these does.
    assert_eq!(left, ["1.0.0"], "{what} left a release behind");
    assert_eq!(
        std::fs::read(w.root.join("opt/aromba/current/aromba")).unwrap(),
        b"worker binary",
        "{what} changed the installed release"
    );
}

/// 1.0.0 installed, then `release` in the download folder: refused for a
/// reason holding `want`, and 1.0.0 left exactly as it was.
fn refused_over_an_installed_release(name: &str, release: Release, want: &str) {
    let w = start(name);
    Release::new("1.0.0").write(&downloads(&w));
    assert!(matches!(install(&w), Response::ReleaseInstalled { .. }));
    release.write(&downloads(&w));
    refused(&w, name, want);
}

#[test]
fn refuses_a_manifest_signed_by_another_key() {
    let release = Release {
        key: OTHER_KEY,
        ..Release::new("1.1.0")
    };
    refused_over_an_installed_release("update-bad-key", release, "signature");
}

#[test]
fn refuses_a_tarball_whose_hash_differs() {
    let release = Release {
        tamper: |m| m["binaries"][0]["sha256"] = json!("0".repeat(64)),
        ..Release::new("1.1.0")
    };
    refused_over_an_installed_release("update-bad-hash", release, "SHA-256");
}

#[test]
fn refuses_a_tarball_with_an_extra_file() {
    let release = Release {
        worker: vec![("aromba", b"w"), ("extra", b"x")],
        ..Release::new("1.1.0")
    };
    refused_over_an_installed_release("update-extra-file", release, "more than its one binary");
}

#[test]
fn refuses_a_tarball_holding_a_symlink() {
    let release = Release {
        worker: vec![("aromba@", b"")],
        ..Release::new("1.1.0")
    };
    refused_over_an_installed_release("update-symlink", release, "link");
}

#[test]
fn refuses_a_tarball_name_with_dot_dot() {
    let release = Release {
        tamper: |m| m["binaries"][0]["tarball"] = json!("../aromba.tar.gz"),
        ..Release::new("1.1.0")
    };
    refused_over_an_installed_release("update-dot-dot", release, "tarball name");
}

#[test]
fn refuses_an_equal_version() {
    refused_over_an_installed_release("update-equal", Release::new("1.0.0"), "not above");
}

#[test]
fn refuses_an_older_version() {
    refused_over_an_installed_release("update-older", Release::new("0.9.0"), "not above");
}

#[test]
fn refuses_an_expired_manifest() {
    let release = Release {
        expires: now() - 1,
        ..Release::new("1.1.0")
    };
    refused_over_an_installed_release("update-expired", release, "expired");
}

#[test]
fn refuses_another_channel() {
    let release = Release {
        channel: "beta",
        ..Release::new("1.1.0")
    };
    refused_over_an_installed_release("update-channel", release, "channel");
}

#[test]
fn refuses_an_oversize_tarball() {
    let release = Release {
        tamper: |m| m["binaries"][1]["size"] = json!(100u64 << 20),
        ..Release::new("1.1.0")
    };
    refused_over_an_installed_release("update-oversize", release, "size");
}

#[test]
fn refuses_a_manifest_that_is_a_link() {
    let w = start("update-linked-manifest");
    Release::new("1.0.0").write(&downloads(&w));
    assert!(matches!(install(&w), Response::ReleaseInstalled { .. }));
    let dir = downloads(&w);
    Release::new("1.1.0").write(&dir);
    std::fs::remove_file(dir.join("manifest.json")).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", dir.join("manifest.json")).unwrap();
    refused(&w, "a linked manifest", "cannot open");
}

#[test]
fn the_rollback_command_puts_the_previous_release_back_under_a_root() {
    let mut w = start("update-rollback-cli");
    for version in ["1.0.0", "1.0.1"] {
        Release::new(version).write(&downloads(&w));
        assert!(matches!(install(&w), Response::ReleaseInstalled { .. }));
    }
    // systemd runs it with both services down.
    w.stop();
    let out = assert_cmd::Command::new(env!("CARGO_BIN_EXE_aromba-warden"))
        .arg("rollback")
        .arg("--root")
        .arg(&w.root)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said.contains("release 1.0.1 failed to start; 1.0.0 is current again"),
        "{said}"
    );
    assert!(said.contains("not restarted"), "{said}");
    assert_eq!(current(&w).as_deref(), Some("releases/1.0.0"));
    assert!(w.journal().contains("release-rolled-back"));
    let record = Record::parse(&std::fs::read(w.layout().state_dir.join(RECORD)).unwrap()).unwrap();
    assert_eq!(record.failed.len(), 1);
    // Nothing left to roll back to: a second run changes nothing.
    let again = assert_cmd::Command::new(env!("CARGO_BIN_EXE_aromba-warden"))
        .arg("rollback")
        .arg("--root")
        .arg(&w.root)
        .output()
        .unwrap();
    assert!(!again.status.success());
    assert_eq!(current(&w).as_deref(), Some("releases/1.0.0"));
}

#[test]
fn updates_are_refused_at_freeze_and_the_worker_cannot_name_a_folder() {
    let w = start("update-freeze");
    let dir = downloads(&w);
    Release::new("1.0.0").write(&dir);
    match w.ask(&Request::InstallRelease {
        dir: Some(dir.to_string_lossy().into_owned()),
    }) {
        Response::Refused { reason, .. } => assert!(reason.contains("own download folder")),
        other => panic!("{other:?}"),
    }
    assert!(matches!(w.ask(&Request::Panic), Response::Ladder { .. }));
    // From the root terminal too (the Worker's socket is paced by then).
    match w.control(&Request::InstallRelease {
        dir: Some(dir.to_string_lossy().into_owned()),
    }) {
        Response::Refused { reason, .. } => assert!(reason.contains("Freeze"), "{reason}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        w.ask(&Request::InstallRelease { dir: None }),
        Response::Refused { .. }
    ));
    assert_eq!(current(&w), None);
}

#[test]
fn the_release_the_installer_linked_counts_as_installed_before_any_record() {
    let w = start("update-linked");
    // What install.sh leaves: a release folder and the link, no record.
    let releases = Releases::rooted(&w.root);
    std::fs::create_dir_all(releases.release(&aromba_release::Version::parse("1.0.0").unwrap()))
        .unwrap();
    std::os::unix::fs::symlink("releases/1.0.0", releases.current()).unwrap();
    std::fs::write(releases.current().join("aromba"), b"worker binary").unwrap();
    Release::new("1.0.0").write(&downloads(&w));
    refused(&w, "the linked release again", "not above");
}

#[test]
fn the_worker_installs_a_patch_release_itself_and_a_minor_one_only_on_a_tap() {
    let w = start_with("update-tap", true);
    Release::new("1.0.0").write(&downloads(&w));
    assert!(matches!(install(&w), Response::ReleaseInstalled { .. }));

    // A minor release, asked for without a tap: refused.
    Release::new("1.1.0").write(&downloads(&w));
    match w.ask(&Request::InstallRelease { dir: None }) {
        Response::Refused { reason, .. } => assert!(reason.contains("on a tap"), "{reason}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(current(&w).as_deref(), Some("releases/1.0.0"));

    // Proposed: the Warden's words name the version and the kind of step.
    let (action_id, server_id, needs_pin) = w.propose(&Request::ProposeRelease);
    assert!(!needs_pin);
    let text = w.text_of(&action_id);
    assert!(text.starts_with("Update Aromba to 1.1.0?"), "{text}");
    assert!(
        text.contains("a minor release; this server runs 1.0.0"),
        "{text}"
    );
    // A release signed without a commit: none is named.
    assert!(!text.contains("commit"), "{text}");

    // The download changed after the proposal (another signed release):
    // the tap does not cover it.
    Release::new("1.2.0").write(&downloads(&w));
    match w.ask(&w.tap(&server_id, &action_id, "approve", None)) {
        Response::Refused { reason, .. } => {
            assert!(
                reason.contains("not the release that was proposed"),
                "{reason}"
            )
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(current(&w).as_deref(), Some("releases/1.0.0"));

    // Proposed again and approved: installed.
    let (action_id, server_id, _) = w.propose(&Request::ProposeRelease);
    assert!(w.text_of(&action_id).contains("to 1.2.0?"));
    assert_eq!(
        w.ask(&w.tap(&server_id, &action_id, "approve", None)),
        Response::ReleaseInstalled {
            version: "1.2.0".into(),
            previous: Some("1.0.0".into())
        }
    );
    assert_eq!(current(&w).as_deref(), Some("releases/1.2.0"));
    assert!(w.journal().contains("\"approved tap\""));

    // A patch release: the Worker's word is enough.
    Release::new("1.2.1").write(&downloads(&w));
    assert_eq!(
        w.ask(&Request::InstallRelease { dir: None }),
        Response::ReleaseInstalled {
            version: "1.2.1".into(),
            previous: Some("1.2.0".into())
        }
    );
    // Nothing newer in the folder: nothing to propose.
    match w.ask(&Request::ProposeRelease) {
        Response::Refused { reason, .. } => assert!(reason.contains("not above"), "{reason}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_rollback_is_reported_until_the_chat_was_told_and_the_failed_release_never_returns() {
    let mut w = start("update-rollback");
    Release::new("1.0.0").write(&downloads(&w));
    assert!(matches!(install(&w), Response::ReleaseInstalled { .. }));
    Release::new("1.0.1").write(&downloads(&w));
    assert!(matches!(install(&w), Response::ReleaseInstalled { .. }));
    // What the rollback unit runs, with the Warden stopped: the previous
    // release's Warden puts its release back and takes itself as the
    // baseline (here the Warden that restarts is this test's binary).
    w.stop();
    let warden_exe = Path::new("/proc/self/exe");
    let (failed, restored) = aromba_warden::update::roll_back_installed(
        &w.layout(),
        &Releases::rooted(&w.root),
        warden_exe,
    )
    .unwrap();
    assert_eq!(
        (failed.to_string(), restored.to_string()),
        ("1.0.1".into(), "1.0.0".into())
    );
    w.restart();
    let waiting = Response::Releases {
        current: Some("1.0.0".into()),
        previous: None,
        failed: vec!["1.0.1".into()],
        rolled_back: Some("1.0.1".into()),
    };
    // Asked again and again, it stays until the Worker says it told.
    assert_eq!(w.ask(&Request::Releases), waiting);
    assert_eq!(w.ask(&Request::Releases), waiting);
    match w.ask(&Request::RollbackTold {
        version: "1.0.0".into(),
    }) {
        Response::Refused { .. } => {}
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        w.ask(&Request::RollbackTold {
            version: "1.0.1".into()
        }),
        Response::Noted { .. }
    ));
    match w.ask(&Request::Releases) {
        Response::Releases { rolled_back, .. } => assert_eq!(rolled_back, None),
        other => panic!("{other:?}"),
    }
    // Told once: a second telling is refused.
    assert!(matches!(
        w.ask(&Request::RollbackTold {
            version: "1.0.1".into()
        }),
        Response::Refused { .. }
    ));
    // The failed release is never installed again on the Worker's word.
    Release::new("1.0.1").write(&downloads(&w));
    match w.ask(&Request::InstallRelease { dir: None }) {
        Response::Refused { reason, .. } => assert!(reason.contains("1.0.1"), "{reason}"),
        other => panic!("{other:?}"),
    }
    // The release after it is.
    Release::new("1.0.2").write(&downloads(&w));
    assert!(matches!(
        w.ask(&Request::InstallRelease { dir: None }),
        Response::ReleaseInstalled { .. }
    ));
}

/// Root's `aromba update` installs again a release marked failed (it was
/// refused as "1.1.0 is not above 1.1.0"): root's word is the owner's. It
/// is then no longer failed; a release below the running one still is not
/// installed.
#[test]
fn root_installs_again_a_release_that_failed_to_start() {
    let mut w = start("update-root-retries-failed");
    Release::new("1.0.0").write(&downloads(&w));
    assert!(matches!(install(&w), Response::ReleaseInstalled { .. }));
    Release::new("1.1.0").write(&downloads(&w));
    assert!(matches!(install(&w), Response::ReleaseInstalled { .. }));
    w.stop();
    aromba_warden::update::roll_back_installed(
        &w.layout(),
        &Releases::rooted(&w.root),
        Path::new("/proc/self/exe"),
    )
    .unwrap();
    w.restart();
    Release::new("1.1.0").write(&downloads(&w));
    assert_eq!(
        install(&w),
        Response::ReleaseInstalled {
            version: "1.1.0".into(),
            previous: Some("1.0.0".into())
        }
    );
    assert_eq!(current(&w).as_deref(), Some("releases/1.1.0"));
    let record = Record::parse(&std::fs::read(w.layout().state_dir.join(RECORD)).unwrap()).unwrap();
    assert!(record.failed.is_empty(), "{:?}", record.failed);
    // Still nothing below what runs, nor the same again.
    for version in ["1.0.5", "1.1.0"] {
        Release::new(version).write(&downloads(&w));
        assert!(
            matches!(install(&w), Response::Refused { .. }),
            "{version} installed"
        );
    }
}

#[test]
fn the_proposal_and_the_journal_name_the_commit_the_release_key_signed() {
    let w = start_with("update-commit", true);
    Release::new("1.0.0").write(&downloads(&w));
    assert!(matches!(install(&w), Response::ReleaseInstalled { .. }));
    let commit = "0123456789abcdef0123456789abcdef01234567";
    let mut release = Release::new("1.1.0");
    release.commit = Some(commit);
    release.write(&downloads(&w));
    let (action_id, server_id, _) = w.propose(&Request::ProposeRelease);
    let text = w.text_of(&action_id);
    assert!(
        text.contains("this server runs 1.0.0.\nIt was built from commit 0123456789ab.\n"),
        "{text}"
    );
    assert!(matches!(
        w.ask(&w.tap(&server_id, &action_id, "approve", None)),
        Response::ReleaseInstalled { .. }
    ));
    let journal = w.journal();
    assert!(
        journal.contains(&format!("\"commit\":\"{commit}\"")),
        "{journal}"
    );
}

/// systemd's restart stops the Warden that asked for it, at once and maybe
/// before the asking returns: the install's outcome must already be in the
/// journal when `systemctl` runs, or the next start would close the
/// install as interrupted though it is in place. The stand-in keeps the
/// journal as it was when it ran.
#[test]
fn the_installs_outcome_is_journaled_before_systemd_is_asked_to_restart() {
    let w = start("update-outcome-first");
    let systemctl = w.root.join("systemctl");
    std::fs::write(
        &systemctl,
        format!(
            "#!/bin/sh\ncp {} {}\n",
            w.layout().journal_file().display(),
            w.root.join("journal-when-asked").display()
        ),
    )
    .unwrap();
    Release::new("1.0.0").write(&downloads(&w));
    assert!(matches!(install(&w), Response::ReleaseInstalled { .. }));
    let seen =
        std::fs::read_to_string(w.root.join("journal-when-asked")).expect("systemctl was asked");
    let outcome = seen
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|l| l["kind"] == "release-install" && l["phase"] == "outcome")
        .expect("the install's outcome was journaled before systemctl ran");
    assert_eq!(outcome["verdict"], "installed", "{outcome}");
    assert_eq!(outcome["restart"], "asked next", "{outcome}");
    assert!(!w.journal().contains("release-restart-failed"));
}

/// A restart systemd refused is journaled after the outcome, with its
/// error: the release is in place, the services still run the old one.
#[test]
fn a_restart_systemd_refuses_is_journaled_after_the_install() {
    let w = start("update-restart-refused");
    let systemctl = w.root.join("systemctl");
    std::fs::write(&systemctl, "#!/bin/sh\necho 'no bus here' >&2\nexit 1\n").unwrap();
    Release::new("1.0.0").write(&downloads(&w));
    assert!(matches!(install(&w), Response::ReleaseInstalled { .. }));
    assert_eq!(current(&w).as_deref(), Some("releases/1.0.0"));
    let journal = w.journal();
    let failed = journal
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|l| l["kind"] == "release-restart-failed")
        .expect("the refused restart is journaled");
    assert_eq!(failed["version"], "1.0.0");
    assert!(
        failed["error"]
            .as_str()
            .is_some_and(|e| e.contains("no bus here")),
        "{failed}"
    );
}
