//! The cage from inside, with real bubblewrap as root: the probe tries what
//! a chore must not be able to do. These need root and bubblewrap; they
//! fail, never skip, without them.

use aromba_warden::cage::{
    CageSpec, Hidden, Host, SystemDir, bwrap_args, bwrap_args_with, run_caged, secret_paths,
    tool_spec,
};
use aromba_warden::exec::Bounds;
use aromba_warden::layout::Layout;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The probe, copied out of the build directory: the cage replaces /tmp,
/// and a checkout (CI's among them) may live there.
fn probe_bin() -> &'static str {
    static COPY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    COPY.get_or_init(|| {
        let dir = PathBuf::from(format!("/var/tmp/aromba-cage-probe-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let copy = dir.join("aromba-cage-probe");
        std::fs::copy(env!("CARGO_BIN_EXE_aromba-cage-probe"), &copy).unwrap();
        copy.to_string_lossy().into_owned()
    })
}

fn bounds() -> Bounds {
    Bounds {
        timeout: Duration::from_secs(30),
        max_output_bytes: 1 << 20,
        low_priority: false,
        keep_fd: None,
        stop: None,
        tripwire: None,
        cgroup: Default::default(),
        known_secrets: Vec::new(),
    }
}

fn caged(spec: &CageSpec, program: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    // The probe's copy lives where the cage shows nothing undeclared.
    let mut spec = spec.clone();
    if let Some(dir) = Path::new(probe_bin()).parent() {
        spec.reads.push(dir.to_path_buf());
    }
    let o = run_caged(&spec, Path::new(program), &args, &bounds())
        .expect("the cage runs (root and bubblewrap needed)");
    (
        o.exit_code,
        o.stdout.lossy().trim().to_string(),
        o.stderr.lossy().into_owned(),
    )
}

fn probe(spec: &CageSpec, args: &[&str]) -> String {
    let (code, out, err) = caged(spec, probe_bin(), args);
    assert_eq!(code, Some(0), "probe {args:?}: {err}");
    out
}

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("aromba-cage-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn a_unix_socket_is_refused_even_with_high_bits_in_the_family() {
    let spec = CageSpec::default();
    assert!(probe(&spec, &["socket-unix-high-bits"]).starts_with("refused"));
    assert!(probe(&spec, &["socket-unix"]).starts_with("refused"));
    assert!(probe(&spec, &["socketpair-unix"]).starts_with("refused"));
    // The filter is not simply refusing sockets: an inet socket is made
    // (in a network namespace with nothing in it).
    assert_eq!(probe(&spec, &["socket-inet"]), "allowed");
}

#[test]
fn core_pattern_and_sysrq_trigger_cannot_be_opened_for_writing_from_a_dry_run() {
    // A dry run's cage (nothing writable) and a chore's: uid 0 without
    // capabilities still passes the sysctl's check, so only the read-only
    // mount stands between a chore and `kernel.core_pattern = |command`,
    // which the host runs as root at the next crash. The probe opens for
    // writing and never writes a byte there.
    let root = temp("procsys");
    let layout = Layout::rooted(&root);
    for spec in [CageSpec::default(), tool_spec(&layout, Vec::new())] {
        let core = probe(&spec, &["open-write", "/proc/sys/kernel/core_pattern"]);
        assert!(core.contains("Read-only file system"), "{core}");
        if Path::new("/proc/sysrq-trigger").exists() {
            let sysrq = probe(&spec, &["open-write", "/proc/sysrq-trigger"]);
            assert!(sysrq.starts_with("refused"), "{sysrq}");
        }
        // A harmless sysctl, written back with the value it has: the write
        // itself fails, not only the open of one file.
        let rate = probe(&spec, &["rewrite", "/proc/sys/kernel/printk_ratelimit"]);
        assert!(rate.contains("Read-only file system"), "{rate}");
        // Each of the five is a read-only mount of its own in the cage (the
        // topmost mount at that point is the one a process meets).
        for dir in aromba_warden::cage::PROC_READ_ONLY {
            if Path::new(dir).exists() {
                let got = probe(&spec, &["mount-options", dir]);
                assert!(got.split(',').any(|o| o == "ro"), "{dir}: {got}");
            }
        }
        if Path::new("/proc/irq/default_smp_affinity").exists() {
            let irq = probe(&spec, &["open-write", "/proc/irq/default_smp_affinity"]);
            assert!(irq.starts_with("refused"), "{irq}");
        }
    }
    // The sysctls are still readable: chores read them.
    let spec = CageSpec::default();
    assert!(probe(&spec, &["read", "/proc/sys/kernel/core_pattern"]).starts_with("read"));
}

#[test]
fn kernel_memory_keys_timers_and_firmware_are_masked() {
    let root = temp("masked");
    let layout = Layout::rooted(&root);
    for spec in [CageSpec::default(), tool_spec(&layout, Vec::new())] {
        for file in [
            "/proc/kcore",
            "/proc/keys",
            "/proc/timer_list",
            "/proc/sched_debug",
        ] {
            let got = probe(&spec, &["read", file]);
            assert!(
                got == "read 0 bytes" || got.starts_with("refused"),
                "{file}: {got}"
            );
        }
        let firmware = probe(&spec, &["list", "/sys/firmware"]);
        assert!(
            firmware == "0 entries" || firmware.starts_with("refused"),
            "{firmware}"
        );
        let planted = probe(&spec, &["write", "/sys/firmware/aromba-cage-test"]);
        assert!(planted.starts_with("refused"), "{planted}");
    }
}

/// What the filter answers, exactly: the kernel's own refusals of these
/// calls (EINVAL, EFAULT, EAFNOSUPPORT, …) are not the filter's.
const FILTER_EPERM: &str = "refused: Operation not permitted (os error 1)";

#[test]
fn vsock_packet_sockets_user_namespaces_keys_bpf_perf_and_userfaultfd_are_refused() {
    let root = temp("surface");
    let layout = Layout::rooted(&root);
    for spec in [CageSpec::default(), tool_spec(&layout, Vec::new())] {
        for check in [
            // AF_VSOCK reaches the hypervisor, which no network namespace
            // scopes; with high bits in the family too.
            "socket-vsock",
            "socket-vsock-high-bits",
            "socketpair-vsock",
            "socket-packet",
            "socketpair-unix",
            "unshare-user",
            "clone-user",
            "keyctl",
            "bpf",
            "perf-event-open",
            "userfaultfd",
        ] {
            assert_eq!(probe(&spec, &[check]), FILTER_EPERM, "{check}");
        }
        // clone3's flags cannot be read by the filter: ENOSYS, so libc
        // falls back to clone, which the filter judges.
        assert_eq!(
            probe(&spec, &["clone3"]),
            "refused: Function not implemented (os error 38)"
        );
        // And that fallback works: a thread starts, a shell forks.
        assert_eq!(probe(&spec, &["thread"]), "allowed");
        let (code, out, err) = caged(&spec, "/bin/sh", &["-c", "/bin/true && echo forked"]);
        assert_eq!((code, out.as_str()), (Some(0), "forked"), "{err}");
        // The allowed families, high bits and all (in a network namespace
        // with nothing in it).
        assert_eq!(probe(&spec, &["socket-inet"]), "allowed");
        assert_eq!(probe(&spec, &["socket-inet-high-bits"]), "allowed");
    }
}

#[test]
fn remounting_the_root_writable_fails() {
    let (code, _, err) = caged(
        &CageSpec::default(),
        "/bin/mount",
        &["-o", "remount,rw", "/"],
    );
    assert_ne!(code, Some(0), "remount succeeded: {err}");
}

#[test]
fn the_cage_has_no_capabilities_and_no_new_privileges() {
    let out = probe(&CageSpec::default(), &["status"]);
    assert!(out.contains("CapEff:\t0000000000000000"), "{out}");
    assert!(out.contains("CapBnd:\t0000000000000000"), "{out}");
    assert!(out.contains("NoNewPrivs:\t1"), "{out}");
}

#[test]
fn a_setuid_binary_made_outside_the_cage_does_not_elevate_inside_it() {
    // The cage cannot make one (below), so the host does, in a touch: the
    // touch is mounted nosuid and the cage runs with no_new_privs.
    use std::os::unix::fs::PermissionsExt;
    let dir = temp("suidcopy");
    let copy = dir.join("p");
    std::fs::copy(probe_bin(), &copy).unwrap();
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let spec = CageSpec {
        touches: vec![dir.clone()],
        ..CageSpec::default()
    };
    let out = probe(&spec, &["mode", copy.to_str().unwrap()]);
    assert_eq!(out, "mode 104755");
    let (code, out, err) = caged(&spec, copy.to_str().unwrap(), &["status"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("CapEff:\t0000000000000000"), "{out}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn chmod_u_s_on_a_copied_binary_is_refused_in_the_cage() {
    let script = format!(
        "cp {} /tmp/p && chmod 0755 /tmp/p && chmod u+s /tmp/p; echo \"chmod $?\"; ls -l /tmp/p >&2",
        probe_bin()
    );
    let (code, out, err) = caged(&CageSpec::default(), "/bin/sh", &["-c", &script]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, "chmod 1", "{err}");
    assert!(err.contains("Operation not permitted"), "{err}");
    assert!(err.contains("-rwxr-xr-x"), "the copy is not setuid: {err}");
}

/// Every call that sets a mode, through the filter's eyes.
const MODE_SETTERS: [&str; 4] = ["chmod", "fchmod", "fchmodat", "fchmodat2"];
const MODE_CREATORS: [&str; 5] = ["creat", "mknod", "mknodat", "open-creat", "openat-creat"];
const TMPFILE_OPENERS: [&str; 2] = ["open-tmpfile", "openat-tmpfile"];

fn host_mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

#[test]
fn a_setuid_or_setgid_mode_is_refused_by_every_call_that_sets_one() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp("setid");
    let spec = CageSpec {
        touches: vec![dir.clone()],
        ..CageSpec::default()
    };
    for call in MODE_SETTERS {
        for mode in ["4755", "2755", "6755", "4000", "2000"] {
            for how in ["mode-call", "mode-call-high"] {
                let f = dir.join(format!("{call}-{mode}-{how}"));
                std::fs::write(&f, "x").unwrap();
                std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
                let got = probe(&spec, &[how, call, mode, f.to_str().unwrap()]);
                assert_eq!(got, FILTER_EPERM, "{how} {call} {mode}");
                assert_eq!(host_mode(&f), 0o644, "{how} {call} {mode}");
            }
        }
        // A plain mode still goes through, sticky bit included.
        let f = dir.join(format!("{call}-plain"));
        std::fs::write(&f, "x").unwrap();
        for (mode, want) in [("755", 0o755), ("1777", 0o1777), ("644", 0o644)] {
            assert_eq!(
                probe(&spec, &["mode-call", call, mode, f.to_str().unwrap()]),
                "allowed",
                "{call} {mode}"
            );
            assert_eq!(host_mode(&f), want, "{call} {mode}");
        }
    }
    for call in MODE_CREATORS {
        for mode in ["4755", "2755", "6777"] {
            let f = dir.join(format!("{call}-{mode}"));
            let got = probe(&spec, &["mode-call", call, mode, f.to_str().unwrap()]);
            assert_eq!(got, FILTER_EPERM, "{call} {mode}");
            assert!(!f.exists(), "{call} {mode} made the file");
        }
        let f = dir.join(format!("{call}-plain"));
        let got = probe(&spec, &["mode-call", call, "644", f.to_str().unwrap()]);
        assert_eq!(got, "allowed", "{call}");
        assert_eq!(host_mode(&f) & 0o6000, 0, "{call}");
    }
    for call in TMPFILE_OPENERS {
        let d = dir.to_str().unwrap();
        assert_eq!(
            probe(&spec, &["mode-call", call, "4755", d]),
            FILTER_EPERM,
            "{call}"
        );
        assert_eq!(
            probe(&spec, &["mode-call", call, "644", d]),
            "allowed",
            "{call}"
        );
    }
    // openat2's mode is behind a pointer: ENOSYS, and libc's callers fall
    // back to openat, which the filter judges.
    let f = dir.join("openat2");
    assert_eq!(
        probe(&spec, &["openat2", f.to_str().unwrap()]),
        "refused: Function not implemented (os error 38)"
    );
    assert!(!f.exists());
    // File capabilities: left to the kernel, which refuses them to a cage
    // without CAP_SETFCAP.
    let f = dir.join("cap");
    std::fs::write(&f, "x").unwrap();
    let got = probe(&spec, &["setcap", f.to_str().unwrap()]);
    assert_eq!(got, FILTER_EPERM, "the kernel refuses security.capability");
    let cap = aromba_warden::system::lgetxattr(&f, c"security.capability").unwrap();
    assert_eq!(cap, None);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn ordinary_chmod_create_mkdir_and_install_still_work_in_a_touch() {
    let dir = temp("plainmodes");
    let spec = CageSpec {
        touches: vec![dir.clone()],
        ..CageSpec::default()
    };
    let script = format!(
        "set -e; cd {d}; echo x > made; chmod 0755 made; mkdir sub; \
         install -m 0644 made sub/installed; cp -p made copied; echo done",
        d = dir.display()
    );
    let (code, out, err) = caged(&spec, "/bin/sh", &["-c", &script]);
    assert_eq!((code, out.as_str()), (Some(0), "done"), "{err}");
    assert_eq!(host_mode(&dir.join("made")), 0o755);
    assert_eq!(host_mode(&dir.join("sub/installed")), 0o644);
    assert_eq!(host_mode(&dir.join("copied")), 0o755);
    assert!(dir.join("sub").is_dir());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_touches_are_mounted_nosuid_and_nodev() {
    let dir = temp("nosuid");
    let spec = CageSpec {
        touches: vec![dir.clone()],
        ..CageSpec::default()
    };
    let got = probe(&spec, &["mount-options", dir.to_str().unwrap()]);
    let options: Vec<&str> = got.split(',').collect();
    assert!(options.contains(&"rw"), "{got}");
    assert!(options.contains(&"nosuid"), "{got}");
    assert!(options.contains(&"nodev"), "{got}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn only_the_touches_are_writable() {
    let touched = temp("touched");
    // Outside /tmp, which the cage replaces with an empty tmpfs: this one is
    // visible, read-only.
    let untouched = PathBuf::from(format!(
        "/var/tmp/aromba-cage-untouched-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&untouched).unwrap();
    let spec = CageSpec {
        touches: vec![touched.clone()],
        reads: vec![untouched.clone()],
        ..CageSpec::default()
    };
    assert_eq!(
        probe(&spec, &["write", touched.join("x").to_str().unwrap()]),
        "allowed"
    );
    let refused = probe(&spec, &["write", untouched.join("x").to_str().unwrap()]);
    assert!(refused.contains("Read-only file system"), "{refused}");
    assert!(!untouched.join("x").exists());
    std::fs::remove_dir_all(&untouched).unwrap();
    assert!(probe(&spec, &["write", "/etc/aromba-cage-test"]).starts_with("refused"));
}

#[test]
fn an_assistant_tool_can_write_nowhere_not_even_scratch_space() {
    let root = temp("tool");
    let layout = Layout::rooted(&root);
    std::fs::create_dir_all(layout.worker_home.join(".ssh")).unwrap();
    std::fs::write(layout.worker_home.join(".ssh/id_ed25519"), "key").unwrap();
    let spec = tool_spec(&layout, Vec::new());
    let outside = PathBuf::from(format!("/var/tmp/aromba-cage-tool-{}", std::process::id()));
    std::fs::create_dir_all(&outside).unwrap();
    for path in [
        outside.join("x"),
        "/tmp/x".into(),
        "/dev/shm/x".into(),
        "/dev/x".into(),
    ] {
        let got = probe(&spec, &["write", path.to_str().unwrap()]);
        assert!(got.starts_with("refused"), "{}: {got}", path.display());
    }
    std::fs::remove_dir_all(&outside).unwrap();
    let ssh = layout.worker_home.join(".ssh/id_ed25519");
    assert!(probe(&spec, &["read", ssh.to_str().unwrap()]).starts_with("refused"));
    // It can still read what is not secret, and write to /dev/null.
    assert_eq!(probe(&spec, &["write", "/dev/null"]), "allowed");
    assert!(probe(&spec, &["read", "/etc/passwd"]).starts_with("read"));
    let args = bwrap_args(&spec, 3, "/bin/true", &[]);
    assert!(
        !args.iter().any(|a| a == "--bind" || a == "--share-net"),
        "{args:?}"
    );
}

#[test]
fn a_secret_file_inside_a_hidden_directory_is_hidden_with_it() {
    // The Worker's configuration directory and its secrets file are both on
    // the list on a real install; the cage must still build.
    let dir = PathBuf::from(format!(
        "/var/tmp/aromba-cage-nested-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("secrets.toml"), "api_key = 1").unwrap();
    let spec = CageSpec {
        reads: vec![dir.clone()],
        hide: vec![
            Hidden::Dir(dir.clone()),
            Hidden::File(dir.join("secrets.toml")),
        ],
        ..CageSpec::default()
    };
    let args = bwrap_args(&spec, 3, "/bin/true", &[]);
    assert!(
        !args.iter().any(|a| a.ends_with("secrets.toml")),
        "the file is covered by its directory: {args:?}"
    );
    let secret = dir.join("secrets.toml");
    let got = probe(&spec, &["read", secret.to_str().unwrap()]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(got.starts_with("refused"), "{got}");
}

#[test]
fn the_tiocsti_probe_does_type_into_a_real_terminal_outside_the_cage() {
    // The control for the test above: given a terminal (script(1) makes
    // one), the same probe does push a byte into it, so "refused" in the
    // cage is the cage's doing.
    let out = assert_cmd::Command::new("script")
        .args(["-qec", &format!("{} tiocsti", probe_bin()), "/dev/null"])
        .output()
        .expect("script runs");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("injected through stdin"), "{said}");
}

#[test]
fn secret_paths_are_not_visible() {
    let root = temp("secrets");
    let layout = Layout::rooted(&root);
    std::fs::create_dir_all(&layout.config_dir).unwrap();
    std::fs::write(layout.config_dir.join("audit.key"), [7u8; 32]).unwrap();
    std::fs::create_dir_all(layout.worker_home.join(".ssh")).unwrap();
    std::fs::write(layout.worker_home.join(".ssh/id_ed25519"), "key").unwrap();
    // Shown (as a read), so that what hides the secrets in it is tested.
    let spec = CageSpec {
        reads: vec![root.clone()],
        hide: secret_paths(&layout),
        ..CageSpec::default()
    };
    let key = layout.config_dir.join("audit.key");
    assert!(probe(&spec, &["read", key.to_str().unwrap()]).starts_with("refused"));
    // The empty directory standing in for a secret one is read-only too.
    let planted = layout.config_dir.join("planted");
    let wrote = probe(&spec, &["write", planted.to_str().unwrap()]);
    assert!(wrote.contains("Read-only file system"), "{wrote}");
    let ssh = layout.worker_home.join(".ssh/id_ed25519");
    assert!(probe(&spec, &["read", ssh.to_str().unwrap()]).starts_with("refused"));
    // /etc/shadow is there, covered by /dev/null: nothing of it can be read.
    let shadow = probe(&spec, &["read", "/etc/shadow"]);
    assert!(
        shadow == "read 0 bytes" || shadow.starts_with("refused"),
        "{shadow}"
    );
}

#[test]
fn the_cage_sees_no_warden_process() {
    // A new PID namespace: bubblewrap's init and the probe, nothing of the
    // host (this test process, which stands in for the Warden, included).
    let out = probe(&CageSpec::default(), &["processes"]);
    let pids: Vec<u32> = out
        .lines()
        .filter_map(|l| l.split(' ').next().and_then(|p| p.parse().ok()))
        .collect();
    assert!(
        !pids.is_empty() && pids.len() <= 3,
        "processes visible in the cage: {out}"
    );
    assert!(pids.iter().all(|&p| p < 10), "{out}");
}

#[test]
fn the_terminal_cannot_be_reached() {
    assert!(probe(&CageSpec::default(), &["tty"]).starts_with("refused"));
    // TIOCSTI: no descriptor the cage leaves is a terminal to type into.
    let typed = probe(&CageSpec::default(), &["tiocsti"]);
    assert!(typed.starts_with("refused"), "{typed}");
}

#[test]
fn the_environment_is_the_fixed_path_and_what_the_chore_declares() {
    let spec = CageSpec {
        env: vec![("KEEP_DAYS".into(), "7".into())],
        ..CageSpec::default()
    };
    let (code, out, _) = caged(&spec, "/usr/bin/env", &[]);
    assert_eq!(code, Some(0));
    let mut lines: Vec<&str> = out.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            "KEEP_DAYS=7".to_string(),
            format!("PATH={}", aromba_warden::cage::CAGE_PATH),
            // bubblewrap adds PWD for --chdir.
            "PWD=/".to_string(),
        ]
    );
}

#[test]
fn bwrap_argument_vector_is_exactly_this() {
    let spec = CageSpec {
        touches: vec![PathBuf::from("/var/cache/apt")],
        reads: vec![PathBuf::from("/var/lib/dpkg")],
        network: false,
        join_net: None,
        env: vec![("LANG".into(), "C.UTF-8".into())],
        hide: vec![
            Hidden::Dir("/root/.ssh".into()),
            Hidden::File("/etc/shadow".into()),
        ],
        nothing_writable: false,
    };
    // A merged-/usr host with every kernel path the cage covers, a TLS key
    // under /etc and a resolver under /run.
    let all = |_: &Path| true;
    let host = Host {
        system: vec![
            SystemDir::Dir("/usr".into()),
            SystemDir::Link {
                path: "/bin".into(),
                target: "usr/bin".into(),
            },
            SystemDir::Link {
                path: "/lib64".into(),
                target: "usr/lib64".into(),
            },
            SystemDir::Dir("/etc".into()),
        ],
        found: vec![Hidden::File("/etc/ssl/private/web.key".into())],
        resolver: Some("/run/systemd/resolve/stub-resolv.conf".into()),
        exists: &all,
        tmp_size: Some(256 << 20),
    };
    let got = bwrap_args_with(
        &spec,
        &host,
        7,
        "/usr/lib/aromba/chores/apt-clean",
        &["--dry-run".into()],
    );
    let want = [
        "--die-with-parent",
        "--new-session",
        "--unshare-all",
        "--cap-drop",
        "ALL",
        "--clearenv",
        "--setenv",
        "PATH",
        "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "--setenv",
        "LANG",
        "C.UTF-8",
        "--ro-bind",
        "/usr",
        "/usr",
        "--symlink",
        "usr/bin",
        "/bin",
        "--symlink",
        "usr/lib64",
        "/lib64",
        "--ro-bind",
        "/etc",
        "/etc",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        // Memory, sized (and bounded by the cage's cgroup besides).
        "--size",
        "268435456",
        "--tmpfs",
        "/tmp",
        "--size",
        "268435456",
        "--tmpfs",
        "/dev/shm",
        "--ro-bind-try",
        "/var/lib/dpkg",
        "/var/lib/dpkg",
        "--bind",
        "/var/cache/apt",
        "/var/cache/apt",
        // /root is not shown: its .ssh needs no stand-in.
        "--ro-bind",
        "/dev/null",
        "/etc/shadow",
        "--ro-bind",
        "/dev/null",
        "/etc/ssl/private/web.key",
        "--ro-bind",
        "/proc/sys",
        "/proc/sys",
        "--ro-bind",
        "/proc/sysrq-trigger",
        "/proc/sysrq-trigger",
        "--ro-bind",
        "/proc/irq",
        "/proc/irq",
        "--ro-bind",
        "/proc/bus",
        "/proc/bus",
        "--ro-bind",
        "/proc/fs",
        "/proc/fs",
        "--ro-bind",
        "/dev/null",
        "/proc/kcore",
        "--ro-bind",
        "/dev/null",
        "/proc/keys",
        "--ro-bind",
        "/dev/null",
        "/proc/timer_list",
        "--ro-bind",
        "/dev/null",
        "/proc/sched_debug",
        "--tmpfs",
        "/sys/firmware",
        "--remount-ro",
        "/sys/firmware",
        "--remount-ro",
        "/",
        "--chdir",
        "/",
        "--seccomp",
        "7",
        "--",
        "/usr/lib/aromba/chores/apt-clean",
        "--dry-run",
    ];
    assert_eq!(got, want);
    // A read of /root shows it with its .ssh hidden; the resolver is bound
    // only for a chore with network.
    let root_read = bwrap_args_with(
        &CageSpec {
            reads: vec!["/root".into()],
            network: true,
            ..spec.clone()
        },
        &host,
        7,
        "/bin/true",
        &[],
    );
    let joined = root_read.join(" ");
    assert!(
        joined.contains("--ro-bind /run/systemd/resolve/stub-resolv.conf /run/systemd/resolve/stub-resolv.conf --ro-bind-try /root /root"),
        "{joined}"
    );
    assert!(
        joined.contains("--tmpfs /root/.ssh") && joined.contains("--remount-ro /root/.ssh"),
        "{joined}"
    );
    assert!(!got.iter().any(|a| a.contains("/run")), "{got:?}");
    // An assistant tool's cage: the same, with scratch space read-only and
    // no touch bound whatever the spec lists.
    // On a host without `/proc/sysrq-trigger`, `/proc/kcore` and
    // `/proc/sched_debug` (kernel options), those are left out: bubblewrap
    // cannot make a mount point in `/proc`.
    let missing = ["/proc/sysrq-trigger", "/proc/kcore", "/proc/sched_debug"];
    let some = |p: &Path| !missing.iter().any(|m| p == Path::new(m));
    let tool = bwrap_args_with(
        &CageSpec {
            nothing_writable: true,
            reads: Vec::new(),
            ..spec.clone()
        },
        &Host {
            exists: &some,
            system: host.system.clone(),
            found: host.found.clone(),
            resolver: None,
            // A bubblewrap before 0.7 sizes no tmpfs.
            tmp_size: None,
        },
        7,
        "/usr/lib/aromba/tools/disk-report",
        &[],
    );
    let tail: Vec<&str> = tool[32..].iter().map(String::as_str).collect();
    assert_eq!(
        tail,
        [
            "--ro-bind",
            "/dev/null",
            "/etc/shadow",
            "--ro-bind",
            "/dev/null",
            "/etc/ssl/private/web.key",
            "--ro-bind",
            "/proc/sys",
            "/proc/sys",
            "--ro-bind",
            "/proc/irq",
            "/proc/irq",
            "--ro-bind",
            "/proc/bus",
            "/proc/bus",
            "--ro-bind",
            "/proc/fs",
            "/proc/fs",
            "--ro-bind",
            "/dev/null",
            "/proc/keys",
            "--ro-bind",
            "/dev/null",
            "/proc/timer_list",
            "--tmpfs",
            "/sys/firmware",
            "--remount-ro",
            "/sys/firmware",
            "--remount-ro",
            "/",
            "--remount-ro",
            "/tmp",
            "--remount-ro",
            "/dev/shm",
            "--remount-ro",
            "/dev",
            "--chdir",
            "/",
            "--seccomp",
            "7",
            "--",
            "/usr/lib/aromba/tools/disk-report"
        ],
        "{tool:?}"
    );
    assert!(!tool.iter().any(|a| a == "--bind"), "{tool:?}");
    let with_net = bwrap_args(
        &CageSpec {
            network: true,
            ..CageSpec::default()
        },
        3,
        "/bin/true",
        &[],
    );
    assert_eq!(
        &with_net[..4],
        [
            "--die-with-parent",
            "--new-session",
            "--unshare-all",
            "--share-net"
        ]
    );
    // A skill's run keeps the namespace it entered before bubblewrap
    // (its own, with only the Warden's proxy), never the host's.
    let joined = bwrap_args(
        &CageSpec {
            join_net: Some(9),
            ..CageSpec::default()
        },
        3,
        "/bin/true",
        &[],
    );
    assert_eq!(&joined[..4], &with_net[..4]);
}

#[test]
fn this_hosts_system_directories_are_bound_once_and_its_links_made_again() {
    let dirs = aromba_warden::cage::system_dirs_here();
    for d in ["/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"] {
        let meta = std::fs::symlink_metadata(d);
        let got = dirs.iter().find(|s| match s {
            SystemDir::Dir(p) => p == d,
            SystemDir::Link { path, .. } => path == d,
        });
        match meta {
            Err(_) => assert!(got.is_none(), "{d} is not here: {got:?}"),
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(d).unwrap();
                assert_eq!(
                    got,
                    Some(&SystemDir::Link {
                        path: d.into(),
                        target: target.to_string_lossy().into_owned()
                    }),
                    "{d}"
                );
            }
            Ok(_) => assert_eq!(got, Some(&SystemDir::Dir(d.into())), "{d}"),
        }
    }
    assert!(dirs.contains(&SystemDir::Dir("/usr".into())));
    assert!(dirs.contains(&SystemDir::Dir("/etc".into())));
    // And a shell runs in that cage, its programs and libraries found.
    let (code, out, err) = caged(&CageSpec::default(), "/bin/sh", &["-c", "ls / && echo ran"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.ends_with("ran"), "{out}");
    for absent in ["root", "home", "srv", "opt", "mnt", "media", "run", "boot"] {
        assert!(
            !out.lines().any(|l| l == absent),
            "/{absent} is shown: {out}"
        );
    }
}
