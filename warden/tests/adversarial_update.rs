//! Attacks on the update and uninstall paths of a real Warden, as a
//! hostile Worker (who owns its download folder, its home, its
//! configuration folder and the Worker socket) would make them. Each test
//! is named after the attack; those that hold are regression tests.

use aromba_testkit::release as releases;
use aromba_testkit::warden as support;

use aromba_warden::update::{RECORD, Record, Releases};
use aromba_warden_proto::{Request, Response};
use releases::{RELEASE_PUB, Release, key_line, tarball_name};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use support::Warden;

fn adjust(o: &mut aromba_warden::server::ServeOptions) {
    let root = o.layout.state_dir.parent().unwrap().to_path_buf();
    o.releases = Releases::rooted(&root);
    o.release_keys = Some(vec![key_line(RELEASE_PUB)]);
    o.systemctl = root.join("bin/systemctl");
    o.host = Some(aromba_warden::server::HostParts {
        units_dir: root.join("systemd/system"),
        cli_link: root.join("usr/local/bin/aromba"),
        userdel: root.join("bin/userdel"),
        worker_user: "aromba".into(),
    });
}

fn stand_in(path: &Path, log: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(
        path,
        format!("#!/bin/sh\necho \"$@\" >> {}\n", log.display()),
    )
    .unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn start(name: &str, paired: bool) -> Warden {
    let w = Warden::start_with(name, paired, &[], adjust);
    stand_in(&w.root.join("bin/systemctl"), &w.root.join("systemctl.log"));
    stand_in(&w.root.join("bin/userdel"), &w.root.join("userdel.log"));
    w
}

fn downloads(w: &Warden) -> PathBuf {
    let dir = w.layout().worker_home.join("updates");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn release(dir: &Path, version: &str) {
    Release::new(version).write(dir);
}

fn install_from_root(w: &Warden) -> Response {
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

fn record(w: &Warden) -> Record {
    Record::parse(&std::fs::read(w.layout().state_dir.join(RECORD)).unwrap()).unwrap()
}

fn refused(r: Response) -> String {
    match r {
        Response::Refused { reason, .. } => reason,
        other => panic!("not refused: {other:?}"),
    }
}

/// The peak resident memory of this process (the in-process Warden's),
/// in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb * 1024
}

/// A sparse file of `len` bytes: free to the Worker, `len` bytes of memory
/// to whoever reads it whole.
fn sparse(path: &Path, len: u64) {
    let _ = std::fs::remove_file(path);
    let f = std::fs::File::create(path).unwrap();
    f.set_len(len).unwrap();
}

// ------------------------------------------ broke once, fixed since

/// The Worker's unit (and the Warden's) run `aromba-rollback.service` on
/// failure; a Worker that fails three times in ten minutes — a crash
/// input, a kill of itself, a setting it breaks — has the rollback put the
/// previous release back and mark the running one failed for good (root's
/// `aromba update` included), however long it ran. A release that
/// started (its Warden took over the baseline) and ran is no longer on
/// trial: a later failure must not downgrade it nor blacklist it.
#[test]
fn a_release_that_started_and_ran_is_not_rolled_back_by_a_later_failure() {
    let mut w = start("adv-update-rollback-late", false);
    release(&downloads(&w), "1.0.0");
    assert!(matches!(
        install_from_root(&w),
        Response::ReleaseInstalled { .. }
    ));
    // 1.0.1 is made of the binaries this test runs as: the Worker's the
    // baseline names, the Warden's this very process. A Warden started
    // "from" it takes it over, as a good update does.
    let worker = std::fs::read(w.root.join("bin/aromba")).unwrap();
    let warden = std::fs::read("/proc/self/exe").unwrap();
    Release::of("1.0.1", &worker, &warden).write(&downloads(&w));
    assert!(matches!(
        install_from_root(&w),
        Response::ReleaseInstalled { .. }
    ));
    assert!(record(&w).pending.is_some());
    w.restart();
    assert!(
        record(&w).pending.is_none(),
        "the new Warden took over: the update is finished"
    );
    assert!(w.journal().contains("\"release-started\""));
    // Weeks later the Worker fails three times; systemd runs the rollback.
    w.clock.advance(30 * 86_400);
    w.stop();
    let rolled = aromba_warden::update::roll_back_installed(
        &w.layout(),
        &Releases::rooted(&w.root),
        Path::new("/proc/self/exe"),
    );
    let after = record(&w);
    assert!(
        rolled.is_err(),
        "a release that started and ran was rolled back: {rolled:?}"
    );
    assert_eq!(current(&w).as_deref(), Some("releases/1.0.1"));
    assert!(after.failed.is_empty(), "{:?} marked failed", after.failed);
}

/// The units, as systemd reads them: `(section, key)` to every value.
fn unit(name: &str) -> Vec<(String, String, String)> {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../deploy/systemd")
            .join(name),
    )
    .unwrap();
    let mut section = String::new();
    let mut out = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        if line.starts_with('[') {
            section = line.to_string();
        } else if let Some((k, v)) = line.split_once('=') {
            out.push((section.clone(), k.trim().to_string(), v.trim().to_string()));
        }
    }
    out
}

fn key<'a>(unit: &'a [(String, String, String)], section: &str, name: &str) -> Vec<&'a str> {
    unit.iter()
        .filter(|(s, k, _)| s == section && k == name)
        .map(|(_, _, v)| v.as_str())
        .collect()
}

/// The Worker exits three times within an hour of an update (a crash
/// input, a kill of itself): its unit's `OnFailure=` ran the rollback,
/// which put the previous release back and marked the new one failed —
/// even though the new Warden had started and taken over, and however the
/// release was installed — and root could not install it again. Now only
/// a release whose Warden never took over is rolled back, by the Warden's
/// unit alone; the same holds for a Warden the OOM killer stops three
/// times after it took over. Through the real `aromba-warden rollback`,
/// what the rollback unit runs.
#[test]
fn the_worker_failing_three_times_after_an_update_cannot_undo_it() {
    let mut w = start("adv-update-worker-undoes", false);
    release(&downloads(&w), "1.0.0");
    assert!(matches!(
        install_from_root(&w),
        Response::ReleaseInstalled { .. }
    ));
    // 1.0.1 is made of the binaries this test runs as: a Warden started
    // "from" it takes it over, as a good update does.
    let worker = std::fs::read(w.root.join("bin/aromba")).unwrap();
    let warden = std::fs::read("/proc/self/exe").unwrap();
    Release::of("1.0.1", &worker, &warden).write(&downloads(&w));
    assert!(matches!(
        install_from_root(&w),
        Response::ReleaseInstalled { .. }
    ));
    w.restart();
    assert!(record(&w).pending.is_none(), "the new Warden took over");
    // A minute later, the Worker has failed three times (or the Warden
    // was killed three times): systemd runs the rollback.
    w.stop();
    let out = assert_cmd::Command::new(env!("CARGO_BIN_EXE_aromba-warden"))
        .arg("rollback")
        .arg("--root")
        .arg(&w.root)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "a release that started was rolled back: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(said.contains("1.0.1 started"), "{said}");
    assert_eq!(current(&w).as_deref(), Some("releases/1.0.1"));
    let after = record(&w);
    assert!(after.failed.is_empty(), "{:?} marked failed", after.failed);
    assert_eq!(after.rolled_back, None);
    // And the units: only the Warden's may run the rollback, only after
    // its start limit (systemd 254 and later would run OnFailure= after
    // each failure of a restarting unit without RestartMode=direct), and
    // the memory killer passes it over.
    let worker = unit("aromba.service");
    assert!(
        key(&worker, "[Unit]", "OnFailure").is_empty(),
        "the Worker's unit runs the rollback"
    );
    let warden = unit("aromba-warden.service");
    assert_eq!(
        key(&warden, "[Unit]", "OnFailure"),
        ["aromba-rollback.service"]
    );
    assert_eq!(key(&warden, "[Unit]", "StartLimitBurst"), ["3"]);
    assert_eq!(key(&warden, "[Service]", "RestartMode"), ["direct"]);
    let oom: Vec<i32> = key(&warden, "[Service]", "OOMScoreAdjust")
        .iter()
        .map(|v| v.parse().unwrap())
        .collect();
    assert!(matches!(oom[..], [n] if n <= -900), "{oom:?}");
}

/// After a rollback the Worker cannot get the failed release installed
/// again, in any way it may ask: its own patch install, or a proposal.
#[test]
fn the_worker_cannot_get_a_failed_release_installed_again() {
    let mut w = start("adv-update-failed-stays", true);
    release(&downloads(&w), "1.0.0");
    assert!(matches!(
        install_from_root(&w),
        Response::ReleaseInstalled { .. }
    ));
    release(&downloads(&w), "1.0.1");
    assert!(matches!(
        install_from_root(&w),
        Response::ReleaseInstalled { .. }
    ));
    // Its Warden never took over (these are not this test's binaries).
    w.stop();
    aromba_warden::update::roll_back_installed(
        &w.layout(),
        &Releases::rooted(&w.root),
        Path::new("/proc/self/exe"),
    )
    .unwrap();
    w.restart();
    release(&downloads(&w), "1.0.1");
    let why = refused(w.ask(&Request::InstallRelease { dir: None }));
    assert!(why.contains("1.0.1"), "{why}");
    refused(w.ask(&Request::ProposeRelease));
    assert_eq!(current(&w).as_deref(), Some("releases/1.0.0"));
}

/// The proposal's text says "The Warden checked the release key's
/// signature and both programs' hashes", but `offered` reads the tarballs
/// and never checks them: the Worker can have the owner asked to install a
/// download whose programs are not the release's.
#[test]
fn a_download_whose_tarball_is_not_the_releases_is_not_proposed() {
    let w = start("adv-update-propose-bad-tarball", true);
    release(&downloads(&w), "1.0.0");
    assert!(matches!(
        install_from_root(&w),
        Response::ReleaseInstalled { .. }
    ));
    let dir = downloads(&w);
    release(&dir, "1.1.0");
    // The signed manifest is genuine; the tarball beside it is the Worker's.
    std::fs::write(
        dir.join(tarball_name("aromba", "1.1.0")),
        b"not the release's program",
    )
    .unwrap();
    match w.ask(&Request::ProposeRelease) {
        Response::Refused { .. } => {}
        Response::Proposed { text, .. } => {
            panic!("proposed with a tarball that is not the release's, saying: {text}")
        }
        other => panic!("{other:?}"),
    }
}

/// The Worker keeps a signed manifest it already has (the installed
/// release's, which is not above it) and puts 64 MiB sparse files under
/// the tarball names. Each ProposeRelease (no lock, no running slot, up to
/// 16 at once) and each InstallRelease reads both whole into the Warden's
/// memory before it finds the release not admissible or not the size its
/// manifest says: 128 MiB per request, 2 GiB with the Worker's 16
/// connections, for files that cost the Worker nothing.
#[test]
fn a_worker_cannot_make_the_warden_read_tarballs_it_will_refuse() {
    // In a process of its own: the peak memory measured is this Warden's
    // alone, not the other tests'.
    let out = assert_cmd::Command::new(std::env::current_exe().unwrap())
        .args([
            "sparse_tarballs_in_a_process_of_its_own",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed"));
}

#[test]
#[ignore = "run by a_worker_cannot_make_the_warden_read_tarballs_it_will_refuse"]
fn sparse_tarballs_in_a_process_of_its_own() {
    let w = start("adv-update-sparse", false);
    let dir = downloads(&w);
    release(&dir, "1.0.0");
    assert!(matches!(
        install_from_root(&w),
        Response::ReleaseInstalled { .. }
    ));
    const BIG: u64 = 64 << 20;
    let before = peak_rss();
    // The installed release's own manifest: never admissible again.
    for binary in ["aromba", "aromba-warden"] {
        sparse(&dir.join(tarball_name(binary, "1.0.0")), BIG);
    }
    let socket = w.layout().worker_socket();
    let askers: Vec<_> = (0..4)
        .map(|_| {
            let socket = socket.clone();
            std::thread::spawn(move || {
                use aromba_warden_proto::*;
                let mut s = std::os::unix::net::UnixStream::connect(socket).unwrap();
                write_frame(&mut s, &encode_request(&Request::ProposeRelease), 1 << 16).unwrap();
                decode_response(&read_frame(&mut s, MAX_RESPONSE).unwrap()).unwrap()
            })
        })
        .collect();
    for a in askers {
        let r = a.join().unwrap();
        assert!(matches!(r, Response::Refused { .. }), "{r:?}");
    }
    refused(w.ask(&Request::InstallRelease { dir: None }));
    // An admissible release whose tarballs are not the size its manifest
    // says: refused by their size, not read.
    let dir = downloads(&w);
    release(&dir, "1.0.1");
    for binary in ["aromba", "aromba-warden"] {
        sparse(&dir.join(tarball_name(binary, "1.0.1")), BIG);
    }
    refused(w.ask(&Request::InstallRelease { dir: None }));
    // Nor proposed: the proposal checks the tarballs as the install does.
    refused(w.ask(&Request::ProposeRelease));
    let grew = peak_rss().saturating_sub(before);
    assert!(
        grew < BIG,
        "the Warden's peak memory grew by {} MiB reading files it refused",
        grew >> 20
    );
    assert_eq!(current(&w).as_deref(), Some("releases/1.0.0"));
}

/// A hard link in the download folder to a file the Worker cannot read,
/// under a tarball's name: the Warden opens it as root and reads it; its
/// refusal must say nothing of it (here: its size, which the reason
/// carried as "is N bytes, its manifest says M"). Only where
/// `fs.protected_hardlinks` is 0 can the Worker make such a link.
#[test]
fn a_hard_link_to_a_root_file_named_as_a_tarball_tells_nothing_of_it() {
    let w = start("adv-update-hardlink", false);
    release(&downloads(&w), "1.0.0");
    assert!(matches!(
        install_from_root(&w),
        Response::ReleaseInstalled { .. }
    ));
    let secret = w.layout().state_dir.join("secret-of-roots");
    std::fs::write(&secret, vec![b's'; 12_345]).unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let dir = downloads(&w);
    release(&dir, "1.0.1");
    let name = dir.join(tarball_name("aromba", "1.0.1"));
    std::fs::remove_file(&name).unwrap();
    std::fs::hard_link(&secret, &name).unwrap();
    for r in [
        w.ask(&Request::InstallRelease { dir: None }),
        w.ask(&Request::ProposeRelease),
    ] {
        if let Response::Refused { reason, .. } = &r {
            assert!(!reason.contains("12345"), "the refusal tells: {reason}");
        }
        assert!(!matches!(r, Response::ReleaseInstalled { .. }));
    }
    assert!(!w.journal().contains("12345"));
    assert_eq!(std::fs::read(&secret).unwrap().len(), 12_345);
}

// ------------------------------------------------------- held from the start

/// The download folder swapped for a link to a folder of root's (holding
/// a good release), a link or a FIFO in place of a file: refused, nothing
/// installed, no hang.
#[test]
fn the_download_folder_or_its_files_as_links_or_fifos_are_refused() {
    let w = start("adv-update-links", false);
    release(&downloads(&w), "1.0.0");
    assert!(matches!(
        install_from_root(&w),
        Response::ReleaseInstalled { .. }
    ));
    // A good patch release in a folder of root's, the Worker's `updates`
    // a link to it.
    let roots = w.root.join("roots-release");
    std::fs::create_dir_all(&roots).unwrap();
    release(&roots, "1.0.1");
    let dir = downloads(&w);
    std::fs::remove_dir(&dir).unwrap();
    std::os::unix::fs::symlink(&roots, &dir).unwrap();
    let why = refused(w.ask(&Request::InstallRelease { dir: None }));
    assert!(why.contains("without a link"), "{why}");
    refused(w.ask(&Request::ProposeRelease));
    // The home's folder as a link to root's: the same.
    // A tarball that is a link to the root's good one.
    let dir = downloads(&w);
    release(&dir, "1.0.1");
    let name = tarball_name("aromba-warden", "1.0.1");
    std::fs::remove_file(dir.join(&name)).unwrap();
    std::os::unix::fs::symlink(roots.join(&name), dir.join(&name)).unwrap();
    refused(w.ask(&Request::InstallRelease { dir: None }));
    // A FIFO as the signature: refused at once, not waited on.
    let dir = downloads(&w);
    release(&dir, "1.0.1");
    std::fs::remove_file(dir.join("manifest.json.minisig")).unwrap();
    let made = assert_cmd::Command::new("mkfifo")
        .arg(dir.join("manifest.json.minisig"))
        .output()
        .unwrap();
    assert!(made.status.success());
    let (tx, rx) = std::sync::mpsc::channel();
    let socket = w.layout().worker_socket();
    std::thread::spawn(move || {
        use aromba_warden_proto::*;
        let mut s = std::os::unix::net::UnixStream::connect(socket).unwrap();
        write_frame(
            &mut s,
            &encode_request(&Request::InstallRelease { dir: None }),
            1 << 16,
        )
        .unwrap();
        let _ = tx.send(decode_response(&read_frame(&mut s, MAX_RESPONSE).unwrap()).unwrap());
    });
    let r = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the Warden waited on a FIFO");
    assert!(matches!(r, Response::Refused { .. }), "{r:?}");
    assert_eq!(current(&w).as_deref(), Some("releases/1.0.0"));
    let left: Vec<_> = std::fs::read_dir(w.root.join("opt/aromba/releases"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["1.0.0"]);
}

/// RollbackTold with versions that are not the waiting one, odd text, a
/// long string, a line break: refused, the record unchanged, nothing raw
/// in the journal.
#[test]
fn rollback_told_with_odd_versions_changes_nothing() {
    let w = start("adv-update-told", false);
    release(&downloads(&w), "1.0.0");
    assert!(matches!(
        install_from_root(&w),
        Response::ReleaseInstalled { .. }
    ));
    let before = std::fs::read(w.layout().state_dir.join(RECORD)).unwrap();
    for version in [
        String::new(),
        "1.0.0".into(),
        "../../etc".into(),
        "1.0.0\n{\"kind\":\"forged\"}".into(),
        "null".into(),
        "9".repeat(20_000),
    ] {
        refused(w.ask(&Request::RollbackTold { version }));
    }
    assert_eq!(
        std::fs::read(w.layout().state_dir.join(RECORD)).unwrap(),
        before
    );
    assert!(!w.journal().contains("\n{\"kind\":\"forged\"}"));
    assert_eq!(w.ladder(), 0);
}

/// An install tap is refused at Freeze and above; once used it cannot be
/// replayed, nor used for the next release in the folder.
#[test]
fn an_install_tap_is_refused_at_freeze_and_cannot_be_replayed() {
    let w = start("adv-update-tap", true);
    release(&downloads(&w), "1.0.0");
    assert!(matches!(
        install_from_root(&w),
        Response::ReleaseInstalled { .. }
    ));
    release(&downloads(&w), "1.1.0");
    let (action_id, server_id, _) = w.propose(&Request::ProposeRelease);
    assert!(matches!(w.ask(&Request::Panic), Response::Ladder { .. }));
    w.clock.advance(61);
    let why = refused(w.ask(&w.tap(&server_id, &action_id, "approve", None)));
    assert!(why.contains("Freeze"), "{why}");
    assert_eq!(current(&w).as_deref(), Some("releases/1.0.0"));
    assert!(matches!(
        w.control(&Request::Resume),
        Response::Ladder { step: 0, .. }
    ));
    w.clock.advance(61);
    let tap = w.tap(&server_id, &action_id, "approve", None);
    assert_eq!(
        w.ask(&tap),
        Response::ReleaseInstalled {
            version: "1.1.0".into(),
            previous: Some("1.0.0".into())
        }
    );
    // The same tap again, and for the next release in the folder.
    release(&downloads(&w), "1.2.0");
    w.clock.advance(61);
    refused(w.ask(&tap));
    assert_eq!(current(&w).as_deref(), Some("releases/1.1.0"));
}

/// A patch from the Worker cannot get past a failed release nor go down;
/// a minor one never installs on the Worker's word.
#[test]
fn the_worker_cannot_downgrade_skip_a_minor_step_or_reinstall() {
    let w = start("adv-update-steps", false);
    release(&downloads(&w), "1.1.0");
    assert!(matches!(
        install_from_root(&w),
        Response::ReleaseInstalled { .. }
    ));
    for (version, want) in [
        ("1.0.9", "not above"),
        ("1.1.0", "not above"),
        ("1.2.0", "on a tap"),
        ("2.0.0", "on a tap"),
        ("1.2.1", "on a tap"),
    ] {
        release(&downloads(&w), version);
        let why = refused(w.ask(&Request::InstallRelease { dir: None }));
        assert!(why.contains(want), "{version}: {why}");
    }
    assert_eq!(current(&w).as_deref(), Some("releases/1.1.0"));
}

/// Uninstall (root) removes the Worker's home and configuration whole, but
/// follows none of the links the Worker planted there: a link to a folder
/// of someone else's, to a file, a hard link, the download folder as a
/// link; nor removes the `aromba` command when it is not a link into the
/// releases.
#[test]
fn uninstall_follows_no_link_the_worker_planted() {
    let w = start("adv-uninstall-links", false);
    let layout = w.layout();
    let victim = std::env::temp_dir().join(format!("aromba-adv-victim-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&victim);
    std::fs::create_dir_all(victim.join("sub")).unwrap();
    std::fs::write(victim.join("file"), b"keep me").unwrap();
    std::fs::write(victim.join("sub/deep"), b"keep me too").unwrap();
    std::fs::write(victim.join("hard"), b"hard linked").unwrap();
    let home = &layout.worker_home;
    std::fs::create_dir_all(home.join("nested/deeper")).unwrap();
    std::fs::create_dir_all(&layout.worker_config_dir).unwrap();
    let link = |target: &Path, at: PathBuf| std::os::unix::fs::symlink(target, at).unwrap();
    link(&victim, home.join("dir-link"));
    link(&victim.join("file"), home.join("file-link"));
    link(&victim, home.join("nested/deeper/up"));
    link(&victim, home.join("updates"));
    link(&victim, layout.worker_config_dir.join("secrets.toml"));
    std::fs::hard_link(victim.join("hard"), home.join("hard")).unwrap();
    // The command's link pointing elsewhere than the releases stays.
    std::fs::create_dir_all(w.root.join("usr/local/bin")).unwrap();
    link(&victim.join("file"), w.root.join("usr/local/bin/aromba"));
    let Response::Uninstalled { .. } = w.control(&Request::Uninstall { purge: true }) else {
        panic!("not uninstalled");
    };
    assert!(std::fs::symlink_metadata(home).is_err());
    assert!(std::fs::symlink_metadata(&layout.worker_config_dir).is_err());
    assert_eq!(std::fs::read(victim.join("file")).unwrap(), b"keep me");
    assert_eq!(
        std::fs::read(victim.join("sub/deep")).unwrap(),
        b"keep me too"
    );
    assert_eq!(std::fs::read(victim.join("hard")).unwrap(), b"hard linked");
    assert!(std::fs::symlink_metadata(w.root.join("usr/local/bin/aromba")).is_ok());
    let _ = std::fs::remove_dir_all(&victim);
}

/// The Worker naming a folder of its choosing for an install (which the
/// real Worker never does: it installs only from its own folder) is
/// refused, but leaves no journal line: the audit trail forgets the
/// attempt. A wrong-socket request, a red action without approval are
/// journaled; this must be too.
#[test]
fn the_worker_naming_a_folder_to_install_from_is_journaled() {
    let w = start("adv-update-named-dir", false);
    let roots = w.root.join("roots-folder-named-by-the-worker");
    std::fs::create_dir_all(&roots).unwrap();
    release(&roots, "1.0.0");
    refused(w.ask(&Request::InstallRelease {
        dir: Some(roots.to_string_lossy().into_owned()),
    }));
    assert_eq!(current(&w), None);
    let journal = w.journal();
    assert!(
        journal.contains("roots-folder-named-by-the-worker"),
        "no journal line for the Worker's named folder:\n{journal}"
    );
}
