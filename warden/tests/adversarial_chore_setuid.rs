//! A chore that leaves a setuid or setgid file behind hands host root to
//! anyone who runs it: a yellow chore ran `cp /bin/bash rootsh && chmod
//! 4755 rootsh` in its touch, and afterwards any local user, the Worker
//! included, ran `rootsh -p` as euid 0. The cage's seccomp filter now
//! refuses a setuid or setgid mode on every call that sets one (`chmod`,
//! `fchmod`, `fchmodat`, `fchmodat2`, `mknod(at)`, `creat`, a creating
//! `open(at)`; `openat2` falls back). Each test runs the hostile chore of
//! the owner's through a real Warden and real bubblewrap, and checks from
//! inside the run that the bit was never set (the chore prints the mode it
//! sees after its attempt), not only that none is left afterwards.
//! Needs root and bubblewrap.

use aromba_testkit::warden as support;

use aromba_warden_proto::{Request, Response};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use support::{Warden, owner_chore};

/// Runs `body` as a yellow chore of the owner's (dry run first, as the
/// Worker would); the receipt, then the chore's stdout and stderr.
fn run_hostile(name: &str, body: &str) -> (Warden, String) {
    run_hostile_with(name, "", body)
}

/// As `run_hostile`, with `extra_header` lines in the chore's header.
fn run_hostile_with(name: &str, extra_header: &str, body: &str) -> (Warden, String) {
    // `seen F…` prints the mode of each file as the chore sees it.
    let script = format!(
        "[ \"$1\" = --dry-run ] && {{ echo would; exit 0; }}\n\
         seen() {{ for f; do echo \"seen $f $(stat -c %a \"$f\")\"; done; }}\n\
         cd TOUCHED\n{body}"
    );
    let w = Warden::start(
        name,
        false,
        &[owner_chore("hostile", "yellow", extra_header, &script)],
    );
    w.dry_run_shown("hostile");
    let r = w.control(&Request::ChoreRun {
        name: "hostile".into(),
        dry_run: false,
    });
    let receipt = match r {
        Response::Receipt {
            receipt,
            stdout,
            stderr,
            ..
        } => format!(
            "{receipt}\n{}\n{}",
            String::from_utf8_lossy(&stdout),
            String::from_utf8_lossy(&stderr)
        ),
        other => panic!("the chore did not run: {other:?}"),
    };
    (w, receipt)
}

/// Every entry under `dir` whose mode has a setuid or setgid bit.
fn set_id_files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            let Ok(m) = std::fs::symlink_metadata(&p) else {
                continue;
            };
            if m.permissions().mode() & 0o6000 != 0 {
                out.push(format!("{} {:o}", p.display(), m.permissions().mode()));
            }
            if m.is_dir() {
                stack.push(p);
            }
        }
    }
    out
}

/// The chore's stderr says the kernel refused the attempt, the modes the
/// chore saw right after (each of `files`) had no setuid or setgid bit,
/// and none is left.
fn refused_and_never_set(w: &Warden, receipt: &str, files: &[&str]) {
    assert!(receipt.contains("Operation not permitted"), "{receipt}");
    for f in files {
        let mode = receipt
            .lines()
            .find_map(|l| l.strip_prefix(&format!("seen {f} ")))
            .and_then(|m| u32::from_str_radix(m.trim(), 8).ok())
            .unwrap_or_else(|| panic!("no mode seen for {f}: {receipt}"));
        assert_eq!(mode & 0o6000, 0, "{f} had {mode:o} in the run: {receipt}");
    }
    assert!(!receipt.contains("went through"), "{receipt}");
    assert_eq!(set_id_files(&w.touched), Vec::<String>::new(), "{receipt}");
}

#[test]
fn a_chore_that_chmods_a_copy_of_bash_setuid_leaves_no_setuid_file() {
    let (w, receipt) = run_hostile(
        "adv-suid-chmod",
        "cp /bin/bash rootsh && chmod 4755 rootsh && echo 'chmod 4755 went through'\n\
         seen rootsh",
    );
    refused_and_never_set(&w, &receipt, &["rootsh"]);
    assert!(w.touched.join("rootsh").exists(), "{receipt}");
}

#[test]
fn a_chore_that_chmods_u_s_or_g_s_leaves_no_setuid_or_setgid_file() {
    let (w, receipt) = run_hostile(
        "adv-suid-chmod-us",
        "cp /bin/bash us && chmod u+s us && echo 'chmod u+s went through'\n\
         cp /bin/bash gs && chmod g+s gs && echo 'chmod g+s went through'\n\
         mkdir d && chmod g+s d && echo 'chmod g+s on a directory went through'\n\
         seen us gs d",
    );
    refused_and_never_set(&w, &receipt, &["us", "gs", "d"]);
}

#[test]
fn a_chore_that_installs_a_shell_with_mode_4755_leaves_no_setuid_file() {
    let (w, receipt) = run_hostile(
        "adv-suid-install",
        "install -m 4755 /bin/bash rootsh && echo 'install -m 4755 went through'\n\
         install -m 2755 /bin/bash gidsh && echo 'install -m 2755 went through'\n\
         seen rootsh gidsh",
    );
    // install makes the file, then fails to set the mode: what it left has
    // none of the bits.
    refused_and_never_set(&w, &receipt, &["rootsh", "gidsh"]);
}

#[test]
fn a_chore_that_copies_a_setuid_system_binary_with_its_mode_leaves_no_setuid_file() {
    for bin in ["/usr/bin/passwd", "/usr/bin/su"] {
        let m = std::fs::metadata(bin).unwrap().permissions().mode();
        assert_ne!(
            m & 0o4000,
            0,
            "{bin} is setuid on this host: the test needs it"
        );
    }
    let (w, receipt) = run_hostile(
        "adv-suid-cp",
        "cp --preserve=mode /usr/bin/passwd pw && echo 'cp --preserve=mode went through'\n\
         cp -a /usr/bin/su su && echo 'cp -a went through'\n\
         seen pw su",
    );
    refused_and_never_set(&w, &receipt, &["pw", "su"]);
}

#[test]
fn a_chore_that_unpacks_a_tar_holding_a_setuid_shell_leaves_no_setuid_file() {
    // The archive is made outside the cage, where setting the bit is
    // allowed; the chore extracts it preserving modes, as root does.
    let w0 = tempdir("adv-suid-tar-src");
    let sh = w0.join("rootsh");
    std::fs::copy("/bin/bash", &sh).unwrap();
    std::fs::set_permissions(&sh, std::fs::Permissions::from_mode(0o4755)).unwrap();
    // The cage shows it to the chore as a declared read.
    let tarball = format!("{}/rootsh.tar", w0.display());
    let out = assert_cmd::Command::new("tar")
        .args(["-cf", &tarball, "-C"])
        .arg(&w0)
        .arg("rootsh")
        .output()
        .unwrap();
    assert!(out.status.success());
    let (w, receipt) = run_hostile_with(
        "adv-suid-tar",
        &format!("# reads: {}\n", w0.display()),
        &format!(
            "tar -xpf {tarball} && echo 'tar -xp went through'\n\
             seen rootsh"
        ),
    );
    let _ = std::fs::remove_dir_all(&w0);
    refused_and_never_set(&w, &receipt, &["rootsh"]);
}

fn tempdir(name: &str) -> std::path::PathBuf {
    let d = std::path::PathBuf::from(format!("/var/tmp/aromba-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
