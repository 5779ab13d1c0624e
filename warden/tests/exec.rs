//! The exec path on real programs: what the child gets, and how it is
//! bounded. These run as root in CI (the Warden does).

use aromba_warden::exec::{Bounds, ExecError, pick_binary, run_program};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

fn bounds(timeout_ms: u64, cap: usize, low: bool) -> Bounds {
    Bounds {
        timeout: Duration::from_millis(timeout_ms),
        max_output_bytes: cap,
        low_priority: low,
        keep_fd: None,
        stop: None,
        tripwire: None,
        cgroup: Default::default(),
        known_secrets: Vec::new(),
    }
}

fn sh(script: &str, b: &Bounds) -> aromba_warden::exec::Outcome {
    run_program(Path::new("/bin/sh"), &["-c".into(), script.into()], &[], b).expect("runs")
}

fn stdout(o: &aromba_warden::exec::Outcome) -> String {
    o.stdout.lossy().into_owned()
}

#[test]
fn the_child_gets_an_empty_environment_root_cwd_and_dev_null_stdin() {
    let b = bounds(10_000, 1 << 20, false);
    let o = run_program(Path::new("/usr/bin/env"), &[], &[], &b).unwrap();
    assert_eq!(o.stdout.text(), b"", "environment: {}", stdout(&o));
    let o = sh("pwd; readlink /proc/self/fd/0", &b);
    assert_eq!(stdout(&o), "/\n/dev/null\n");
    let o = run_program(
        Path::new("/usr/bin/env"),
        &[],
        &[("DEBIAN_FRONTEND".into(), "noninteractive".into())],
        &b,
    )
    .unwrap();
    assert_eq!(stdout(&o), "DEBIAN_FRONTEND=noninteractive\n");
}

#[test]
fn the_child_inherits_no_descriptor_but_the_standard_three() {
    // Keep a descriptor open in this process; it must not reach the child.
    let _held = std::fs::File::open("/etc/hostname").unwrap();
    let o = run_program(
        Path::new("/bin/ls"),
        &["/proc/self/fd".into()],
        &[],
        &bounds(10_000, 1 << 20, false),
    )
    .unwrap();
    // 3 is ls's own handle on the directory it lists.
    assert_eq!(stdout(&o), "0\n1\n2\n3\n");
}

#[test]
fn the_child_leads_a_new_session_and_process_group() {
    let o = sh(
        "cut -d' ' -f1,5,6 /proc/$$/stat",
        &bounds(10_000, 1 << 20, false),
    );
    let text = stdout(&o);
    let fields: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(fields.len(), 3, "{}", stdout(&o));
    assert_eq!(fields[0], fields[1], "pgid is the pid");
    assert_eq!(fields[0], fields[2], "sid is the pid");
}

fn alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.split_whitespace().nth(2).is_none_or(|state| state != "Z"))
        .unwrap_or(false)
}

#[test]
fn a_timeout_kills_the_whole_group_including_a_background_child() {
    let o = sh(
        "sleep 1000 & echo $!; sleep 1000",
        &bounds(700, 1 << 20, false),
    );
    assert!(o.timed_out);
    assert_eq!(o.signal, Some(9));
    let pid = stdout(&o).trim().to_string();
    std::thread::sleep(Duration::from_millis(200));
    assert!(!alive(&pid), "background sleep {pid} survived");
}

#[test]
fn a_background_child_dies_when_the_command_exits() {
    let started = std::time::Instant::now();
    let o = sh("sleep 1000 & echo $!", &bounds(20_000, 1 << 20, false));
    assert!(!o.timed_out);
    assert_eq!(o.exit_code, Some(0));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "waited for the background child"
    );
    let pid = stdout(&o).trim().to_string();
    std::thread::sleep(Duration::from_millis(200));
    assert!(!alive(&pid), "background sleep {pid} survived");
}

#[test]
fn output_past_the_cap_kills_the_command_and_marks_it_cut() {
    let o = run_program(
        Path::new("/usr/bin/yes"),
        &[],
        &[],
        &bounds(20_000, 64 << 10, false),
    )
    .unwrap();
    assert!(o.cut);
    assert!(!o.timed_out);
    // `yes` writes whole lines of two bytes, so the cut at the cap ends a
    // line and redaction has nothing to take.
    assert_eq!(o.stdout.text().len() + o.stderr.text().len(), 64 << 10);
    assert_eq!(o.signal, Some(9));
}

#[test]
fn low_priority_sets_nice_19_and_the_idle_io_class() {
    let o = sh(
        "cut -d' ' -f19 /proc/self/stat; ionice -p $$",
        &bounds(10_000, 1 << 20, true),
    );
    assert_eq!(stdout(&o), "19\nidle\n");
    let o = sh(
        "cut -d' ' -f19 /proc/self/stat",
        &bounds(10_000, 1 << 20, false),
    );
    assert_eq!(stdout(&o), "0\n");
}

#[test]
fn a_binary_writable_by_others_or_not_roots_is_refused() {
    let dir = std::env::temp_dir().join(format!("aromba-exec-bins-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let open = dir.join("open");
    std::fs::copy("/bin/true", &open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let open_s = open.to_str().unwrap();
    assert!(matches!(
        pick_binary("x", &[open_s]),
        Err(ExecError::UnsafeBinary { .. })
    ));
    let owned = dir.join("owned");
    std::fs::copy("/bin/true", &owned).unwrap();
    std::os::unix::fs::chown(&owned, Some(65534), Some(65534)).unwrap();
    let owned_s = owned.to_str().unwrap();
    assert!(matches!(
        pick_binary("x", &[owned_s]),
        Err(ExecError::UnsafeBinary { .. })
    ));
    assert!(matches!(
        pick_binary("x", &["/nonexistent/x"]),
        Err(ExecError::NoBinary { .. })
    ));
    assert_eq!(
        pick_binary("x", &["/nonexistent/x", "/bin/true"]).unwrap(),
        Path::new("/bin/true")
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn setting_stop_kills_the_run() {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let b = Bounds {
        stop: Some(stop.clone()),
        ..bounds(20_000, 1 << 20, false)
    };
    let setter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    let o = run_program(Path::new("/bin/sleep"), &["1000".into()], &[], &b).unwrap();
    setter.join().unwrap();
    assert!(o.stopped && !o.timed_out);
    assert_eq!(o.signal, Some(9));
}
