//! A chore runs as uid 0 without capabilities, and uid 0 owns nearly every
//! file under `/etc`: the cage hid only what a secret rule names, so a
//! hostile chore printed root-only files no name rule matches
//! (`/etc/security/opasswd`, a `sasl_passwd`, a `.htpasswd`, NetworkManager's
//! connections, a WireGuard configuration), base64-encoded past any
//! redactor. The cage now hides every file under `/etc` that not every
//! local user may read, and every directory not every local user may list.
//! The test plants real files in the host's `/etc` (removed after) and runs
//! a hostile `mine/` chore through a real Warden and real bubblewrap.
//! Needs root and bubblewrap.

use aromba_testkit::warden as support;

use aromba_warden_proto::{Request, Response};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use support::{Warden, owner_chore};

/// Paths planted in the host's `/etc`, removed however the test ends.
struct Planted(Vec<PathBuf>);

impl Drop for Planted {
    fn drop(&mut self) {
        for p in self.0.iter().rev() {
            if p.is_dir() {
                let _ = std::fs::remove_dir_all(p);
            } else {
                let _ = std::fs::remove_file(p);
            }
        }
    }
}

fn plant(path: &Path, content: &str, mode: u32) {
    std::fs::write(path, content).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// `text` as `base64 -w0` prints it.
fn base64(text: &str) -> String {
    let out = assert_cmd::Command::new("base64")
        .arg("-w0")
        .write_stdin(text)
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn a_chore_cannot_read_root_only_files_under_etc_that_no_secret_name_matches() {
    let id = format!("aromba-test-private-{}", std::process::id());
    // Names no secret rule matches (no "secret", "password", "key", …).
    let file = PathBuf::from(format!("/etc/{id}.conf"));
    let dir = PathBuf::from(format!("/etc/{id}.d"));
    let in_dir = dir.join("relay.conf");
    let public = PathBuf::from(format!("/etc/{id}-public.conf"));
    let mut planted = Planted(vec![]);
    planted.0.push(file.clone());
    plant(&file, "sasl-user:Hunter2-of-the-file\n", 0o600);
    planted.0.push(dir.clone());
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    // Readable by anyone, inside a directory others may not enter.
    plant(&in_dir, "wg-PrivateKey-of-the-dir\n", 0o644);
    planted.0.push(public.clone());
    plant(&public, "nothing-to-hide\n", 0o644);

    let script = format!(
        "[ \"$1\" = --dry-run ] && {{ echo would; exit 0; }}\n\
         cat {f}; base64 -w0 {f}; echo\n\
         cat {d}; base64 -w0 {d}; echo; ls {dd} | sed 's/^/listed: /'\n\
         cat {p}",
        f = file.display(),
        d = in_dir.display(),
        dd = dir.display(),
        p = public.display(),
    );
    let w = Warden::start(
        "adv-etc-private",
        false,
        &[owner_chore("hostile", "yellow", "", &script)],
    );
    w.dry_run_shown("hostile");
    let (out, receipt) = match w.control(&Request::ChoreRun {
        name: "hostile".into(),
        dry_run: false,
    }) {
        Response::Receipt {
            receipt,
            stdout,
            stderr,
            ..
        } => (
            format!(
                "{}\n{}",
                String::from_utf8_lossy(&stdout),
                String::from_utf8_lossy(&stderr)
            ),
            receipt,
        ),
        other => panic!("the chore did not run: {other:?}"),
    };
    drop(planted);
    for content in [
        "sasl-user:Hunter2-of-the-file\n",
        "wg-PrivateKey-of-the-dir\n",
    ] {
        assert!(
            !out.contains(content.trim_end()),
            "the chore printed it: {out}"
        );
        assert!(
            !out.contains(&base64(content)),
            "the chore printed it base64-encoded: {out}"
        );
    }
    assert!(
        !out.contains("listed: relay.conf"),
        "the directory was listed: {out}"
    );
    // The rest of /etc is there: the chore is not simply broken.
    assert!(out.contains("nothing-to-hide"), "{receipt}\n{out}");
}
