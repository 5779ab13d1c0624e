//! `aromba uninstall` through a real Warden, under a test root with
//! stand-ins for `systemctl` and `userdel` (systemd is not PID 1 here,
//! and the machine's users are not the test's): only the control socket
//! serves it; it stops the Worker, removes the units, the releases, the
//! command's link, the Worker's files and the Warden's state, removes the
//! user, keeps the journal unless purged, and the Warden stops serving.
//! After an install from the Debian package it removes nothing and says to
//! run `apt purge aromba`.

use aromba_testkit::warden as support;

use aromba_warden::server::{HostParts, ServeOptions};
use aromba_warden_proto::{Request, Response};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use support::Warden;

fn adjust(o: &mut ServeOptions) {
    let root = o.layout.state_dir.parent().unwrap().to_path_buf();
    o.releases = aromba_warden::update::Releases::rooted(&root);
    o.systemctl = root.join("bin/systemctl");
    o.host = Some(HostParts {
        // Not under the rooted layout's `etc/`, which is the Warden's own
        // configuration here.
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

/// A Warden with what install.sh leaves around it.
fn installed(name: &str) -> Warden {
    let w = Warden::start_with(name, false, &[], adjust);
    let r = &w.root;
    stand_in(&r.join("bin/systemctl"), &r.join("systemctl.log"));
    stand_in(&r.join("bin/userdel"), &r.join("userdel.log"));
    let release = r.join("opt/aromba/releases/1.0.0");
    std::fs::create_dir_all(&release).unwrap();
    std::fs::write(release.join("aromba"), b"worker").unwrap();
    std::os::unix::fs::symlink("releases/1.0.0", r.join("opt/aromba/current")).unwrap();
    let units = r.join("systemd/system");
    std::fs::create_dir_all(&units).unwrap();
    for unit in aromba_warden::server::UNITS {
        std::fs::write(units.join(unit), "[Unit]\n").unwrap();
    }
    // Someone else's unit beside ours stays.
    std::fs::write(units.join("nginx.service"), "[Unit]\n").unwrap();
    std::fs::create_dir_all(r.join("usr/local/bin")).unwrap();
    std::os::unix::fs::symlink(
        r.join("opt/aromba/current/aromba"),
        r.join("usr/local/bin/aromba"),
    )
    .unwrap();
    std::fs::create_dir_all(w.layout().worker_config_dir).unwrap();
    std::fs::write(
        w.layout().worker_config_dir.join("relay.toml"),
        "token = \"x\"\n",
    )
    .unwrap();
    w
}

fn stopped_serving(w: &Warden) -> bool {
    for _ in 0..50 {
        if std::os::unix::net::UnixStream::connect(w.layout().control_socket()).is_err() {
            return true;
        }
        // Connected: the accept loop may still be ending.
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    false
}

#[test]
fn nothing_but_a_root_terminal_can_uninstall() {
    let w = installed("uninstall-worker");
    match w.ask(&Request::Uninstall { purge: true }) {
        Response::Error { message } => assert!(message.contains("worker socket"), "{message}"),
        other => panic!("{other:?}"),
    }
    assert!(w.root.join("opt/aromba/releases/1.0.0").exists());
    assert!(w.layout().journal_file().exists());
    assert!(!w.root.join("systemctl.log").exists());
    assert!(w.journal().contains("wrong-socket"));
}

#[test]
fn uninstall_removes_everything_but_the_journal_and_stops_the_warden() {
    let w = installed("uninstall-keep");
    let layout = w.layout();
    let Response::Uninstalled { removed, kept } = w.control(&Request::Uninstall { purge: false })
    else {
        panic!("not uninstalled");
    };
    for gone in [
        w.root.join("opt/aromba"),
        w.root.join("usr/local/bin/aromba"),
        w.root.join("systemd/system/aromba.service"),
        w.root.join("systemd/system/aromba-warden.service"),
        w.root.join("systemd/system/aromba-rollback.service"),
        layout.worker_config_dir.clone(),
        layout.worker_home.clone(),
        layout.config_dir.clone(),
        layout.state_dir.clone(),
    ] {
        assert!(
            std::fs::symlink_metadata(&gone).is_err(),
            "{} is still there",
            gone.display()
        );
        assert!(
            removed.contains(&gone.display().to_string()),
            "{} not reported: {removed:?}",
            gone.display()
        );
    }
    assert!(w.root.join("systemd/system/nginx.service").exists());
    assert!(
        kept.iter()
            .any(|k| k.starts_with(&layout.journal_dir.display().to_string())),
        "{kept:?}"
    );
    let journal = w.journal();
    assert!(journal.contains("\"uninstall\""), "{journal}");
    assert!(journal.contains("\"uninstalled\""), "{journal}");
    let systemctl = std::fs::read_to_string(w.root.join("systemctl.log")).unwrap();
    assert_eq!(
        systemctl,
        "disable --now aromba.service\ndisable aromba-warden.service\ndaemon-reload\n"
    );
    assert_eq!(
        std::fs::read_to_string(w.root.join("userdel.log")).unwrap(),
        "aromba\n"
    );
    assert!(stopped_serving(&w), "the Warden still serves");
}

#[test]
fn uninstall_with_purge_takes_the_journal_too() {
    let w = installed("uninstall-purge");
    let Response::Uninstalled { kept, .. } = w.control(&Request::Uninstall { purge: true }) else {
        panic!("not uninstalled");
    };
    assert!(!w.layout().journal_dir.exists());
    assert!(kept.iter().all(|k| !k.contains("journal")), "{kept:?}");
    assert!(stopped_serving(&w), "the Warden still serves");
}

/// What dpkg records for the package `scripts/deb` builds
/// (`/var/lib/dpkg/info/aromba.list`; `deb.rs` holds it to the package).
const DPKG_LIST: &str = "/.\n/lib\n/lib/systemd\n/lib/systemd/system\n/lib/systemd/system/aromba-rollback.service\n/lib/systemd/system/aromba-warden.service\n/lib/systemd/system/aromba.service\n/usr\n/usr/bin\n/usr/bin/aromba\n/usr/lib\n/usr/lib/aromba\n/usr/lib/aromba/seed\n/usr/lib/aromba/seed/aromba\n/usr/lib/aromba/seed/aromba-warden\n/usr/lib/sysusers.d\n/usr/lib/sysusers.d/aromba.conf\n";

#[test]
fn after_a_deb_install_uninstall_removes_nothing_and_says_apt_purge() {
    let w = installed("uninstall-deb");
    let info = w.root.join("var/lib/dpkg/info");
    std::fs::create_dir_all(&info).unwrap();
    std::fs::write(info.join("aromba.list"), DPKG_LIST).unwrap();
    let reason = match w.control(&Request::Uninstall { purge: true }) {
        Response::Refused { reason, .. } => reason,
        other => panic!("not refused: {other:?}"),
    };
    assert!(reason.contains("`apt purge aromba`"), "{reason}");
    assert!(reason.starts_with("Aromba was installed from its Debian package"));
    // Nothing was touched: no service stopped, no file or user removed.
    assert!(!w.root.join("systemctl.log").exists());
    assert!(!w.root.join("userdel.log").exists());
    for kept in [
        w.root.join("opt/aromba/releases/1.0.0/aromba"),
        w.root.join("systemd/system/aromba-warden.service"),
        w.layout().worker_config_dir.join("relay.toml"),
        w.layout().journal_file(),
    ] {
        assert!(kept.exists(), "{} was removed", kept.display());
    }
    // The refusal is journaled, and the Warden serves on.
    let journal = w.journal();
    assert!(journal.contains("\"refused\""), "{journal}");
    assert!(matches!(w.control(&Request::Status), Response::Status(_)));
}

#[test]
fn a_package_removed_but_not_purged_does_not_stop_the_uninstall() {
    // `apt remove` took the units; dpkg keeps a list without them until
    // the purge. Aromba's own files are then the uninstall's to remove.
    let w = installed("uninstall-deb-removed");
    let info = w.root.join("var/lib/dpkg/info");
    std::fs::create_dir_all(&info).unwrap();
    std::fs::write(
        info.join("aromba.list"),
        "/.\n/usr\n/usr/share/doc/aromba\n",
    )
    .unwrap();
    assert!(matches!(
        w.control(&Request::Uninstall { purge: false }),
        Response::Uninstalled { .. }
    ));
    assert!(!w.root.join("opt/aromba").exists());
}
