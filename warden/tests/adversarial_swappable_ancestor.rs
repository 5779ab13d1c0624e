//! The Warden checks that a chore's touches and reads pass through no
//! symbolic link, and then bubblewrap binds them by path, resolving the
//! path again and following links. Whoever may rename a directory on the
//! way (a service user who owns `/srv/app`, say, above a read of
//! `/srv/app/data` or a touch of `/srv/app/uploads`) can swap it for a link
//! between the two: the cage then shows `/root`, or makes `/etc` writable,
//! where the chore expects its own directory. A touch or a read is now
//! refused unless every directory above it is root's and writable by no
//! other account (a sticky one protects root's entries). Each test runs the
//! owner's chore through a real Warden. Needs root and bubblewrap.

use aromba_testkit::warden as support;

use aromba_warden_proto::{Request, Response};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use support::{Warden, owner_chore};

/// A uid no account on the host has: a service user's.
const SERVICE_UID: u32 = 4_242_123;

/// `/var/tmp/aromba-…/app` owned by the service user, holding a directory
/// of root's: `(top, app/data)`.
fn service_owned_parent(name: &str) -> (PathBuf, PathBuf) {
    let top = PathBuf::from(format!("/var/tmp/aromba-{name}-top-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&top);
    let data = top.join("app/data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("f"), "data\n").unwrap();
    std::os::unix::fs::chown(top.join("app"), Some(SERVICE_UID), Some(SERVICE_UID)).unwrap();
    (top, data)
}

/// Whether a dry run of `chore`, asked for from a root terminal, ran; and
/// what the Warden said.
fn dry_run(w: &Warden, chore: &str) -> (bool, String) {
    match w.control(&Request::ChoreRun {
        name: chore.into(),
        dry_run: true,
    }) {
        Response::Receipt { ok, receipt, .. } => (ok, receipt),
        other => (false, format!("{other:?}")),
    }
}

#[test]
fn a_read_below_a_directory_a_service_user_owns_is_refused() {
    let (top, data) = service_owned_parent("adv-swap-read");
    let w = Warden::start(
        "adv-swap-read",
        false,
        &[with_data(
            owner_chore(
                "reader",
                "yellow",
                &format!("# reads: {}\n", data.display()),
                "cat DATA/f",
            ),
            &data,
        )],
    );
    let (ran, said) = dry_run(&w, "reader");
    let _ = std::fs::remove_dir_all(&top);
    assert!(!ran, "it ran: {said}");
    assert!(
        said.contains(&format!("is owned by uid {SERVICE_UID}")),
        "{said}"
    );
}

#[test]
fn a_touch_below_a_directory_a_service_user_owns_is_refused() {
    let (top, data) = service_owned_parent("adv-swap-touch");
    let script = format!(
        "# aromba-chore: 1\n# name: toucher\n# description: A chore of the tests\n# color: yellow\n# touches: {}\n# network: no\n# schedule: manual\n# end\nls {}\n",
        data.display(),
        data.display()
    );
    let w = Warden::start("adv-swap-touch", false, &[("toucher".into(), script)]);
    let (ran, said) = dry_run(&w, "toucher");
    let _ = std::fs::remove_dir_all(&top);
    assert!(!ran, "it ran: {said}");
    assert!(
        said.contains(&format!("is owned by uid {SERVICE_UID}")),
        "{said}"
    );
}

/// `chore`'s script with `DATA` replaced by `data`.
fn with_data(chore: (String, String), data: &std::path::Path) -> (String, String) {
    (chore.0, chore.1.replace("DATA", &data.to_string_lossy()))
}

#[test]
fn a_touch_and_a_read_in_a_sticky_directory_of_roots_still_run() {
    // /var/tmp is 1777: only root may rename root's entries there.
    assert_eq!(
        std::fs::metadata("/var/tmp").unwrap().permissions().mode() & 0o7777,
        0o1777
    );
    let w = Warden::start(
        "adv-swap-sticky",
        false,
        &[owner_chore("fine", "yellow", "", "ls TOUCHED")],
    );
    let (ran, said) = dry_run(&w, "fine");
    assert!(ran, "{said}");
}
