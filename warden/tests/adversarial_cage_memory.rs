//! A chore's memory and processes against a Worker that may dry-run an
//! owner chore at will: its `/tmp`, `/dev/shm` and `/dev` are tmpfs, so
//! writing there is taking memory, and nothing bounded it (800 MB in `/tmp`
//! got the Warden killed by the OOM killer inside a 400 MB cgroup). Each
//! cage now has a cgroup of its own (`cage::limits`). A chore also tries
//! to leave it: moving itself to another cgroup, mounting its own, leaving
//! a process behind in a new session, forking past the bound; and many
//! runs must leave no group behind. Through a real Warden and the real
//! cage.

use aromba_testkit::warden as support;

use aromba_warden::cage::limits;
use aromba_warden_proto::{Request, Response};
use std::path::PathBuf;
use std::time::Duration;
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

// ---------------------------------------------------------------------------
// Out of the cage's cgroup, and after it.

#[test]
fn a_chore_cannot_move_itself_out_of_its_cgroup_and_stays_bounded() {
    let over = (limits::global().limits.memory_bytes >> 20) + 200;
    let chore = dry(
        "cg-escape",
        &format!(
            "cat /proc/self/cgroup\n\
             ls /sys/fs/cgroup 2>&1 | head -3\n\
             echo $$ > /sys/fs/cgroup/memory/cgroup.procs 2>/dev/null && echo ESCAPED-memory\n\
             echo $$ > /sys/fs/cgroup/pids/cgroup.procs 2>/dev/null && echo ESCAPED-pids\n\
             echo $$ > /sys/fs/cgroup/cgroup.procs 2>/dev/null && echo ESCAPED-v2\n\
             mkdir -p /tmp/cg && mount -t cgroup -o memory none /tmp/cg 2>/dev/null && echo ESCAPED-mount\n\
             mount -t cgroup2 none /tmp/cg 2>/dev/null && echo ESCAPED-mount2\n\
             head -c {over}M /dev/zero > /dev/fill\necho wrote-it-all"
        ),
    );
    let w = Warden::start("r30-cage-escape", false, &[chore]);
    let (receipt, stdout, ok) = w.dry_run_receipt("cg-escape");
    assert!(!stdout.contains("ESCAPED"), "{stdout}");
    assert!(!ok, "{receipt}");
    assert!(!stdout.contains("wrote-it-all"), "{stdout}\n{receipt}");
}

/// A chore that leaves a process behind in a new session (out of the
/// run's process group): the cgroup holds it, and it is gone with the run.
#[test]
fn a_chore_leaving_a_setsid_process_behind_leaves_nothing_running() {
    let chore = dry(
        "cg-straggler",
        "setsid sh -c 'exec sleep 4243' </dev/null >/dev/null 2>&1 &\n\
         (setsid sh -c 'exec sleep 4243' </dev/null >/dev/null 2>&1 &)\n\
         echo left",
    );
    let w = Warden::start("r30-cage-straggler", false, &[chore]);
    let (receipt, stdout, _) = w.dry_run_receipt("cg-straggler");
    assert!(stdout.contains("left"), "{receipt}");
    std::thread::sleep(Duration::from_millis(500));
    let mut left = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(c) = std::fs::read(e.path().join("cmdline"))
            && c == b"sleep\x004243\x00"
        {
            left.push(e.file_name());
        }
    }
    for pid in &left {
        let _ = assert_cmd::Command::new("kill").arg("-9").arg(pid).output();
    }
    assert!(left.is_empty(), "left running after the run: {left:?}");
}

/// Threads count against the cage's processes: a chore spawning threads
/// past the bound gets no more than it.
#[test]
fn a_program_forking_from_one_process_holds_no_more_than_the_cages_process_bound() {
    let chore = dry(
        "cg-threads",
        "perl -e 'use POSIX; my $n=0; for (1..700) { my $p = fork(); last unless defined $p; if ($p == 0) { sleep 20; POSIX::_exit(0) } $n++ } print \"spawned=$n\\n\"' 2>&1 || echo noperl",
    );
    let w = Warden::start("r30-cage-threads", false, &[chore]);
    let (receipt, stdout, _) = w.dry_run_receipt("cg-threads");
    // perl is essential on Debian and Ubuntu: a cage without it is a fault.
    let n: u64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("spawned="))
        .unwrap_or_else(|| panic!("perl did not run in the cage: {stdout}"))
        .trim()
        .parse()
        .unwrap();
    assert!(n <= limits::global().limits.pids, "{n}: {receipt}");
}

/// Many dry runs one after another: no cage group is left behind.
#[test]
fn dry_runs_leave_no_cage_cgroup_behind() {
    let chore = dry("cg-many", "sleep 0.05 &\necho ok");
    let w = Warden::start("r30-cage-many", false, &[chore]);
    for _ in 0..10 {
        let (_, stdout, _) = w.dry_run_receipt("cg-many");
        assert!(stdout.contains("ok"));
    }
    // The groups this process made that hold no process: left behind.
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let mem = own
        .lines()
        .find_map(|l| l.split_once(":memory:").map(|(_, p)| p.to_string()))
        .unwrap_or_default();
    let base = PathBuf::from("/sys/fs/cgroup/memory").join(mem.trim_start_matches('/'));
    std::thread::sleep(Duration::from_millis(300));
    let prefix = format!("aromba-cage-{}-", std::process::id());
    let mut empty = Vec::new();
    if let Ok(rd) = std::fs::read_dir(&base) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(&prefix)
                && std::fs::read_to_string(e.path().join("cgroup.procs"))
                    .is_ok_and(|t| t.trim().is_empty())
            {
                empty.push(name);
            }
        }
    }
    // Another test's cage may be between its run and its removal: give
    // them a moment, then look again.
    std::thread::sleep(Duration::from_millis(1500));
    let still: Vec<_> = empty
        .into_iter()
        .filter(|n| base.join(n).exists())
        .collect();
    assert!(still.is_empty(), "left behind: {still:?}");
}
