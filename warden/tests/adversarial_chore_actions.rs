//! A chore action is judged on the unit systemd acts on, not on the name
//! it gives. `systemctl restart dbus-org.freedesktop.login1.service`, an
//! alias of systemd-logind (which `never_restart` names), passed the
//! policy's name check and ran. Now the Warden resolves the name with
//! `systemctl show` first, and refuses a restart it cannot resolve: here,
//! with no systemd running, every resolution fails, so the restart is
//! refused, journaled, and on the receipt. Needs root and bubblewrap.

use aromba_testkit::warden as support;

use aromba_warden_proto::{Request, Response};
use support::{Warden, owner_chore};

#[test]
fn restart_of_an_alias_of_systemd_logind_is_refused_when_not_resolved() {
    let w = Warden::start(
        "adv-action-alias",
        false,
        &[owner_chore(
            "bounce",
            "red",
            "# action: systemctl restart dbus-org.freedesktop.login1.service\n",
            "echo ok",
        )],
    );
    w.dry_run_shown("bounce");
    let r = w.control(&Request::ChoreRun {
        name: "bounce".into(),
        dry_run: false,
    });
    let Response::Receipt { receipt, ok, .. } = r else {
        panic!("no receipt: {r:?}")
    };
    assert!(ok, "{receipt}");
    assert!(
        receipt.contains(
            "systemctl restart dbus-org.freedesktop.login1.service: refused (cannot resolve"
        ),
        "the restart was tried: {receipt}"
    );
    let journal = w.journal();
    let actions: Vec<&str> = journal
        .lines()
        .filter(|l| l.contains("\"chore-action\""))
        .collect();
    assert!(!actions.is_empty(), "no chore-action line: {journal}");
    for l in &actions {
        assert!(l.contains("\"verdict\":\"refused\""), "{l}");
        assert!(!l.contains("run_args"), "the restart was intended: {l}");
    }
}
