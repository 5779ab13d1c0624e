//! A path swapped between the check and the read. In review, a directory
//! the Worker owned on a requested path was swapped for a symbolic link to
//! `/etc` 3 ms after the policy checked the path, and `ls` listed
//! `/etc/sudoers.d`. The Warden now refuses a path on which the Worker
//! owns or can write any directory, so there is nothing left to swap.
//!
//! Through a real Warden: the socket serves the test's own uid (root); the
//! path check guards against a test account standing for the Worker, which
//! owns (or can write) the planted directories.

use aromba_testkit::warden as support;

use aromba_warden::users::WorkerAccount;
use aromba_warden_proto::{Request, Response};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use support::Warden;

const WORKER_UID: u32 = 4_242_101;
const WORKER_GID: u32 = 4_242_102;

fn start(name: &str) -> Warden {
    Warden::start_with(name, false, &[], |o| {
        o.worker_account = Some(WorkerAccount {
            uid: WORKER_UID,
            gids: vec![WORKER_GID],
        });
    })
}

/// `/var/tmp/aromba-swap-NAME-PID`, root's 0755.
fn scratch(name: &str) -> PathBuf {
    let d = PathBuf::from(format!(
        "/var/tmp/aromba-swap-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

fn mkdir(p: &Path, uid: u32, gid: u32, mode: u32) {
    std::fs::create_dir_all(p).unwrap();
    std::os::unix::fs::chown(p, Some(uid), Some(gid)).unwrap();
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn ls(w: &Warden, path: &Path) -> Response {
    w.ask(&Request::Read {
        cmd: "ls".into(),
        args: vec![path.to_string_lossy().into_owned()],
    })
}

fn assert_refused_naming(r: Response, dir: &Path) {
    match r {
        Response::Refused { reason, .. } => {
            assert!(
                reason.contains(&format!("{} ", dir.display()))
                    && reason.contains("could be swapped"),
                "{reason}"
            );
        }
        other => panic!("the read was served: {other:?}"),
    }
}

#[test]
fn a_worker_owned_ancestor_swapped_for_a_link_to_etc_is_refused_before_the_read() {
    let w = start("swap-owned");
    let d = scratch("owned");
    // The Worker's directory, with a root-owned one below it: the Worker
    // cannot touch `inner`, but it can rename `mine/inner` aside and put a
    // link to /etc in its place, any time after a check.
    let mine = d.join("mine");
    mkdir(&mine, WORKER_UID, WORKER_GID, 0o755);
    mkdir(&mine.join("inner/sudoers.d"), 0, 0, 0o755);
    assert_refused_naming(ls(&w, &mine.join("inner/sudoers.d")), &mine);
    // The swapped state itself is refused too (it resolves through the link
    // into /etc, a secret prefix).
    std::fs::rename(mine.join("inner"), mine.join("aside")).unwrap();
    std::os::unix::fs::symlink("/etc", mine.join("inner")).unwrap();
    assert!(matches!(
        ls(&w, &mine.join("inner/sudoers.d")),
        Response::Refused { .. }
    ));
    // Nothing of this was ever run.
    assert!(!w.journal().contains("\"verdict\":\"allowed\""));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn an_ancestor_writable_by_a_workers_group_is_refused() {
    let w = start("swap-group");
    let d = scratch("group");
    let shared = d.join("shared");
    mkdir(&shared, 0, WORKER_GID, 0o775);
    mkdir(&shared.join("inner"), 0, 0, 0o755);
    assert_refused_naming(ls(&w, &shared.join("inner")), &shared);
    // Another group's write bit is not the Worker's.
    std::os::unix::fs::chown(&shared, None, Some(WORKER_GID + 1000)).unwrap();
    assert!(matches!(ls(&w, &shared.join("inner")), Response::Result(_)));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn an_ancestor_writable_by_everyone_is_refused_unless_sticky_and_not_the_workers() {
    let w = start("swap-other");
    let d = scratch("other");
    let open = d.join("open");
    mkdir(&open, 0, 0, 0o777);
    mkdir(&open.join("inner"), 0, 0, 0o755);
    assert_refused_naming(ls(&w, &open.join("inner")), &open);
    // Sticky, as /tmp: root's entry cannot be renamed by the Worker...
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
    assert!(matches!(ls(&w, &open.join("inner")), Response::Result(_)));
    // ...but its own entry can.
    mkdir(&open.join("its"), WORKER_UID, WORKER_GID, 0o755);
    mkdir(&open.join("its/inner"), 0, 0, 0o755);
    assert_refused_naming(ls(&w, &open.join("its")), &open);
    std::fs::remove_dir_all(&d).unwrap();
}

/// `setfacl ARGS… PATH` (the `acl` package; scripts/test installs it).
fn setfacl(args: &[&str], path: &Path) {
    let out = assert_cmd::Command::new("setfacl")
        .args(args)
        .arg(path)
        .output()
        .expect("setfacl runs (apt-get install acl)");
    assert!(
        out.status.success(),
        "setfacl {args:?} {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A root-owned directory whose mode shows no write for the Worker's uid
/// or groups, but whose POSIX ACL names the Worker (or one of its groups)
/// with write access: the Worker renames the entry below aside and puts a
/// link to /etc in its place, as with a directory it owns. The group bits
/// show only the ACL's mask, so the mode alone cannot say whose writes
/// they are: the ACL itself is read.
#[test]
fn an_ancestor_the_worker_can_write_through_an_acl_is_refused() {
    let w = start("swap-acl");
    let d = scratch("acl");
    let shared = d.join("shared");
    mkdir(&shared, 0, 0, 0o755);
    mkdir(&shared.join("inner"), 0, 0, 0o755);
    setfacl(&["-m", &format!("u:{WORKER_UID}:rwx")], &shared);
    assert_refused_naming(ls(&w, &shared.join("inner")), &shared);
    // A named group of the Worker's does the same.
    setfacl(&["-b"], &shared);
    setfacl(&["-m", &format!("g:{WORKER_GID}:rwx")], &shared);
    assert_refused_naming(ls(&w, &shared.join("inner")), &shared);
    // The mask takes write away from every named entry: nothing to swap.
    setfacl(&["-m", "m::rx"], &shared);
    assert!(matches!(ls(&w, &shared.join("inner")), Response::Result(_)));
    // Another account's named entry is not the Worker's.
    setfacl(&["-b"], &shared);
    setfacl(&["-m", &format!("u:{}:rwx", WORKER_UID + 1000)], &shared);
    assert!(matches!(ls(&w, &shared.join("inner")), Response::Result(_)));
    std::fs::remove_dir_all(&d).unwrap();
}
