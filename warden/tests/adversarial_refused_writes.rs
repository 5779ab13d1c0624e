//! The tripwire against the chore's own words: it fired on any line of
//! error output holding "Read-only file system" (so a file so named, in a
//! tree another account writes, tripped it and raised a signal against the
//! owner's chore), and never on a refused write whose error went to
//! standard output or nowhere. It is decided now on the kernel's count of
//! the cage's calls that returned `EROFS` (`cage::refused`). Through a real
//! Warden and the real cage, with dry runs the Worker may start.

use aromba_testkit::warden as support;

use support::{Warden, dry_chore as dry};

fn tripped(receipt: &str) -> bool {
    receipt.contains("killed at its first write outside its touches")
}

#[test]
fn a_file_named_read_only_file_system_does_not_trip_the_wire() {
    let chore = dry(
        "named-so",
        "touch '/tmp/x: Read-only file system'\n\
         ls '/tmp/y: Read-only file system'\n\
         echo 'cp: cannot create regular file: Read-only file system' >&2\n\
         exit 0",
    );
    let w = Warden::start("refused-named", false, &[chore]);
    let (receipt, _, ok) = w.dry_run_receipt("named-so");
    assert!(!tripped(&receipt), "words alone tripped it: {receipt}");
    assert!(ok, "{receipt}");
    assert_eq!(w.status().ladder_name, "normal");
    assert!(!w.journal().contains("files-outside-touches"));
}

#[test]
fn a_refused_write_whose_error_goes_to_standard_output_trips_the_wire() {
    let chore = dry(
        "error-to-stdout",
        "(echo x > /usr/escaped) 2>&1\nsleep 20\necho lingered",
    );
    let w = Warden::start("refused-stdout", false, &[chore]);
    let (receipt, _, ok) = w.dry_run_receipt("error-to-stdout");
    assert!(!ok);
    assert!(tripped(&receipt), "{receipt}");
    assert!(w.journal().contains("files-outside-touches"));
}

#[test]
fn a_refused_write_with_no_error_printed_trips_the_wire() {
    let chore = dry(
        "silent",
        "(echo x > /etc/escaped) 2>/dev/null\nsleep 20\necho lingered",
    );
    let w = Warden::start("refused-silent", false, &[chore]);
    let started = std::time::Instant::now();
    let (receipt, _, ok) = w.dry_run_receipt("silent");
    assert!(!ok);
    assert!(tripped(&receipt), "{receipt}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(15),
        "not stopped at the refused write: {receipt}"
    );
    assert!(w.journal().contains("write(s) the cage refused"));
}

#[test]
fn checking_whether_a_read_only_path_is_writable_does_not_trip_the_wire() {
    let chore = dry(
        "checks",
        "[ -w /usr/bin/env ] && echo writable\n\
         test -w /etc || echo etc-read-only\n\
         exit 0",
    );
    let w = Warden::start("refused-checks", false, &[chore]);
    let (receipt, _, ok) = w.dry_run_receipt("checks");
    assert!(!tripped(&receipt), "{receipt}");
    assert!(ok, "{receipt}");
}

#[test]
fn status_says_refused_writes_are_counted_by_the_kernel() {
    let w = Warden::start("refused-status", false, &[]);
    let st = w.status();
    assert!(
        st.isolation.contains("counted by the kernel"),
        "{}",
        st.isolation
    );
}
