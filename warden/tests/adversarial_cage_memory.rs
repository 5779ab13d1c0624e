//! A chore's memory and processes against a Worker that may dry-run an
//! owner chore at will: its `/tmp`, `/dev/shm` and `/dev` are tmpfs, so
//! writing there is taking memory, and nothing bounded it (800 MB in `/tmp`
//! got the Warden killed by the OOM killer inside a 400 MB cgroup). Each
//! cage now has a cgroup of its own (`cage::limits`). Through a real
//! Warden and the real cage.

mod support;

use aromba_warden::cage::limits;
use aromba_warden_proto::{Request, Response};
use support::{Warden, dry_chore as dry};

fn number_in(stdout: &str, key: &str) -> u64 {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {stdout:?}"))
}

#[test]
fn a_dry_run_filling_its_tmp_gets_no_more_than_its_bound() {
    let chore = dry(
        "fill-tmp",
        "head -c 800M /dev/zero > /tmp/fill 2>/dev/null\necho \"size=$(wc -c < /tmp/fill)\"",
    );
    let w = Warden::start("cage-fill-tmp", false, &[chore]);
    let (receipt, stdout, _) = w.dry_run_receipt("fill-tmp");
    let bound = limits::global().limits;
    let size = number_in(&stdout, "size=");
    assert!(
        size <= bound.memory_bytes,
        "the cage's /tmp took {size} bytes, more than the cage's {} ({receipt})",
        bound.memory_bytes
    );
    assert!(size < 800 << 20, "800 MB went into /tmp: {receipt}");
    // The Warden is there to answer.
    assert!(matches!(w.ask(&Request::Ping), Response::Pong));
}

#[test]
fn a_dry_run_filling_dev_past_the_memory_bound_is_stopped_and_said() {
    let over = (limits::global().limits.memory_bytes >> 20) + 200;
    let chore = dry(
        "fill-dev",
        &format!("head -c {over}M /dev/zero > /dev/fill\necho wrote-it-all"),
    );
    let w = Warden::start("cage-fill-dev", false, &[chore]);
    let (receipt, stdout, ok) = w.dry_run_receipt("fill-dev");
    assert!(!ok, "{receipt}");
    assert!(
        receipt.contains("more memory than a chore may"),
        "{receipt}\n{stdout}"
    );
    assert!(!stdout.contains("wrote-it-all"), "{stdout}");
    assert!(w.journal().contains("\"memory_exceeded\":true"));
    assert!(matches!(w.ask(&Request::Ping), Response::Pong));
}

#[test]
fn a_dry_run_forking_without_end_holds_no_more_processes_than_its_bound() {
    let chore = dry(
        "fork-many",
        // Each fork counted with a builtin: past the bound no fork works.
        "i=0\nwhile [ $i -lt 700 ]; do sleep 20 & i=$((i+1)); echo \"spawned=$i\"; done 2>/dev/null",
    );
    let w = Warden::start("cage-fork-many", false, &[chore]);
    let (receipt, stdout, _) = w.dry_run_receipt("fork-many");
    let procs = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("spawned="))
        .filter_map(|n| n.trim().parse::<u64>().ok())
        .max()
        .unwrap_or_else(|| panic!("nothing spawned: {receipt}"));
    assert!(
        procs <= limits::global().limits.pids,
        "{procs} processes in one cage: {receipt}"
    );
}

#[test]
fn status_says_how_each_cage_is_bounded() {
    let w = Warden::start("cage-bounds-status", false, &[]);
    let st = w.status();
    assert!(st.isolation.starts_with("available"), "{}", st.isolation);
    assert!(
        st.isolation.contains("MiB of memory") && st.isolation.contains("processes"),
        "{}",
        st.isolation
    );
}

/// The Warden's unit sets -900, which children inherit: a cage must not
/// share the Warden's protection from the OOM killer.
#[test]
fn a_caged_chore_is_the_first_the_oom_killer_takes() {
    let chore = dry("oom-score", "echo \"adj=$(cat /proc/self/oom_score_adj)\"");
    let w = Warden::start("cage-oom-score", false, &[chore]);
    let (receipt, stdout, _) = w.dry_run_receipt("oom-score");
    assert_eq!(number_in(&stdout, "adj="), 1000, "{receipt}");
}
