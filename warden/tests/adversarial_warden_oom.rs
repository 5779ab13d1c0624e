//! The attack as found: the Warden inside a 400 MB cgroup, and a dry run
//! (which the Worker may start at will) of an owner chore writing 800 MB
//! into the cage's tmpfs mounts. The OOM killer took the Warden. Alone in
//! its test binary: it moves this whole process into a memory cgroup of
//! 400 MB before the Warden starts.

use aromba_testkit::warden as support;

use aromba_warden_proto::{Request, Response};
use std::path::{Path, PathBuf};
use support::{Warden, owner_chore};

const CEILING: u64 = 400 << 20;

/// This process in a memory cgroup of [`CEILING`] bytes, moved back out
/// and the group removed when dropped.
struct Confined {
    dir: PathBuf,
    back: PathBuf,
}

fn own_memory_group() -> (PathBuf, bool) {
    let fs = Path::new("/sys/fs/cgroup");
    let text = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    if fs.join("cgroup.controllers").exists() {
        let own = text
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .expect("a cgroup v2 path");
        (fs.join(own.trim_start_matches('/')), true)
    } else {
        let own = text
            .lines()
            .find_map(|l| {
                let mut p = l.splitn(3, ':');
                let (_, c, path) = (p.next()?, p.next()?, p.next()?);
                c.split(',').any(|c| c == "memory").then_some(path)
            })
            .expect("a cgroup v1 memory path");
        (fs.join("memory").join(own.trim_start_matches('/')), false)
    }
}

impl Confined {
    fn to_ceiling() -> Confined {
        let (own, v2) = own_memory_group();
        let name = format!("aromba-test-oom-{}", std::process::id());
        let dir = if v2 {
            Path::new("/sys/fs/cgroup").join(name)
        } else {
            own.join(name)
        };
        std::fs::create_dir(&dir).expect("a memory cgroup for the test (root)");
        let set = |file: &str, value: &str| {
            std::fs::write(dir.join(file), value)
                .unwrap_or_else(|e| panic!("{file} = {value}: {e}"));
        };
        if v2 {
            set("memory.max", &CEILING.to_string());
            if dir.join("memory.swap.max").exists() {
                set("memory.swap.max", "0");
            }
        } else {
            set("memory.limit_in_bytes", &CEILING.to_string());
            if dir.join("memory.memsw.limit_in_bytes").exists() {
                set("memory.memsw.limit_in_bytes", &CEILING.to_string());
            }
        }
        set("cgroup.procs", &std::process::id().to_string());
        Confined { dir, back: own }
    }
}

impl Drop for Confined {
    fn drop(&mut self) {
        let _ = std::fs::write(
            self.back.join("cgroup.procs"),
            std::process::id().to_string(),
        );
        let _ = std::fs::remove_dir(&self.dir);
    }
}

#[test]
fn a_dry_run_writing_800_mb_into_its_tmpfs_mounts_does_not_take_the_warden() {
    let _confined = Confined::to_ceiling();
    let body = "[ \"$1\" = --dry-run ] || exit 0\n\
                head -c 800M /dev/zero > /tmp/fill\n\
                head -c 800M /dev/zero > /dev/shm/fill\n\
                head -c 800M /dev/zero > /dev/fill\n\
                echo all-written";
    let chore = owner_chore("fill-all", "green", "", body);
    let w = Warden::start("warden-oom", false, &[chore]);
    let r = w.ask(&Request::DryRun {
        chore: "fill-all".into(),
    });
    let Response::Receipt { receipt, ok, .. } = r else {
        panic!("no receipt: {r:?}");
    };
    assert!(!ok, "{receipt}");
    // Still here, and still serving.
    assert!(matches!(w.ask(&Request::Ping), Response::Pong));
    assert_eq!(w.status().ladder_name, "normal");
}
