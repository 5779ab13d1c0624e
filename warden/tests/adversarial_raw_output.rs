//! Unredacted bytes must never leave the Warden, also from the reads it
//! makes for itself. A system tool the Warden asks to fill in a chore
//! action's placeholder fails with secrets in its error output; before the
//! exec layer handed out only redacted output, that error went raw into
//! the receipt, the answer and the journal.
//!
//! The failing tool is a stand-in bind-mounted over the real `systemctl`
//! in a mount namespace of this test's own (`unshare`), so the host's tool
//! is never touched; the Warden, its sockets and the cage are real. Needs
//! root and bubblewrap.

use aromba_testkit::warden as support;

use aromba_warden_proto::{Request, Response};
use std::os::unix::fs::PermissionsExt;
use support::Warden;

/// Set in the copy of this test that runs in its own mount namespace.
const INSIDE: &str = "AROMBA_TEST_IN_PRIVATE_MOUNTS";

/// What the stand-in prints to standard error: a password in a connection
/// string, a Stripe key, a GitHub token, a private key block.
const SECRETS: [&str; 4] = [
    "Pg5ecretPassw0rd",
    "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
    "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW",
];

/// Runs `test` again in a mount namespace of its own and checks it passed
/// there; true when this is that copy, which does the work.
fn in_private_mounts(test: &str) -> bool {
    if std::env::var_os(INSIDE).is_some() {
        return true;
    }
    let exe = std::env::current_exe().expect("the test binary");
    let out = assert_cmd::Command::new("unshare")
        .args(["--mount", "--propagation", "private", "--"])
        .arg(&exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(INSIDE, "1")
        .output()
        .expect("unshare runs");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "in its own mount namespace:\n{said}");
    // A filter that matched nothing would pass too: make sure it ran.
    assert!(said.contains("1 passed"), "it did not run:\n{said}");
    false
}

fn mount_over(fake: &std::path::Path, real: &str) {
    let out = assert_cmd::Command::new("mount")
        .arg("--bind")
        .arg(fake)
        .arg(real)
        .output()
        .expect("mount runs");
    assert!(
        out.status.success(),
        "mount --bind over {real}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_failing_placeholder_read_leaks_no_secret_from_its_stderr() {
    if !in_private_mounts("a_failing_placeholder_read_leaks_no_secret_from_its_stderr") {
        return;
    }
    let w = Warden::start("adv-raw-output", true, &[]);
    let fake = w.root.join("systemctl");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\n\
             echo 'Failed to connect to bus: postgres://aromba:{}@db:5432/app' >&2\n\
             echo 'STRIPE_KEY={}' >&2\n\
             echo 'token {}' >&2\n\
             printf -- '-----BEGIN OPENSSH PRIVATE KEY-----\\n{}\\n-----END OPENSSH PRIVATE KEY-----\\n' >&2\n\
             exit 1\n",
            SECRETS[0], SECRETS[1], SECRETS[2], SECRETS[3]
        ),
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    // The Warden picks the first of the rule's bins that exists.
    mount_over(&fake, "/usr/bin/systemctl");
    if !std::fs::symlink_metadata("/bin")
        .unwrap()
        .file_type()
        .is_symlink()
    {
        mount_over(&fake, "/bin/systemctl");
    }

    // `restart-failed` names @failed-services: its dry run makes the
    // Warden run `systemctl list-units --state=failed …` itself.
    let r = w.control(&Request::ChoreRun {
        name: "restart-failed".into(),
        dry_run: true,
    });
    let Response::Receipt {
        receipt,
        stdout,
        stderr,
        ..
    } = r
    else {
        panic!("no receipt: {r:?}")
    };
    assert!(receipt.contains("could not fill in"), "{receipt}");
    // The stand-in ran, and its error is reported redacted.
    for kept in [
        "Failed to connect to bus: postgres://aromba:[redacted:url-password]@db",
        "STRIPE_KEY=[redacted:stripe-key]",
        "token [redacted:github-token]",
        "[redacted:private-key]",
    ] {
        assert!(receipt.contains(kept), "{kept} not in {receipt}");
    }
    let Response::Chores { chores } = w.control(&Request::Chores) else {
        panic!("no chores")
    };
    let listed = chores
        .iter()
        .find(|c| c.name == "restart-failed")
        .map(|c| c.last_receipt.clone())
        .unwrap_or_default();
    let runs = w.layout().state_dir.join("runs");
    let kept: String = std::fs::read_dir(&runs)
        .unwrap()
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect();
    let places = [
        ("the receipt", receipt.clone()),
        (
            "the answer's stdout",
            String::from_utf8_lossy(&stdout).into_owned(),
        ),
        (
            "the answer's stderr",
            String::from_utf8_lossy(&stderr).into_owned(),
        ),
        ("the chore list", listed),
        ("the Warden's run records", kept),
        ("the journal", w.journal()),
    ];
    for secret in SECRETS {
        for (place, text) in &places {
            assert!(!text.contains(secret), "{secret} reached {place}:\n{text}");
        }
    }
}
