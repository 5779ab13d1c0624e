//! How much of the machine one cage may take: memory (its tmpfs pages
//! included) and processes, bounded by a cgroup around each caged run, and
//! the size of the cage's own `/tmp` and `/dev/shm`.
//!
//! Without a bound, a chore the Worker may dry-run at will could write
//! hundreds of megabytes into its `/tmp` (a tmpfs: memory) and have the
//! out-of-memory killer take the Warden, or, with no cgroup above it, the
//! largest process on the host (a database). So each cage gets a cgroup of
//! its own with a memory ceiling well below the host's (a quarter of it,
//! 1 GiB at most), no swap to spill into, and a process ceiling; the cage's
//! tmpfs mounts are sized below the memory ceiling where bubblewrap can
//! size them (0.7 and later). When no cgroup can be made, nothing is caged:
//! the isolation probe fails and says why, `/trust` shows it, and chores
//! are refused (`chores/run.rs`, `NO_ISOLATION`).
//!
//! Where the cgroups go, in order:
//! - cgroup v2 under systemd: the Warden's unit delegates `memory pids`
//!   (`Delegate=`); the Warden moves itself into a leaf `warden` of its
//!   service's cgroup (v2 lets no cgroup with processes enable controllers
//!   for its children) and makes each cage a sibling leaf, so stopping the
//!   unit stops every cage too;
//! - cgroup v2 otherwise (a Warden started by hand): a top-level
//!   `aromba-cages` group of root's, holding no process itself;
//! - cgroup v1 (a hybrid host): a group under the Warden's own in the
//!   `memory` and `pids` hierarchies.
//!
//! A child joins its group between fork and exec (`system::confine_child`,
//! writing `0` to each group's `cgroup.procs` through a descriptor opened
//! before the fork), so nothing it runs ever runs outside it.

#![forbid(unsafe_code)]

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// The most memory one cage may take, whatever the host has.
pub const MAX_CAGE_MEMORY: u64 = 1 << 30;
/// The least: below this nothing a chore runs would start.
pub const MIN_CAGE_MEMORY: u64 = 64 << 20;
/// Processes (threads included) one cage may hold at once.
pub const CAGE_PIDS: u64 = 512;

/// What one cage may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CageLimits {
    /// Memory, tmpfs pages included; no swap beyond it.
    pub memory_bytes: u64,
    /// The size of the cage's `/tmp`, and of its `/dev/shm`.
    pub tmp_bytes: u64,
    pub pids: u64,
}

impl CageLimits {
    /// For a host of `mem_total` bytes: a quarter of it, between
    /// [`MIN_CAGE_MEMORY`] and [`MAX_CAGE_MEMORY`]; `/tmp` half of that.
    pub fn for_memory(mem_total: u64) -> CageLimits {
        let memory_bytes = (mem_total / 4).clamp(MIN_CAGE_MEMORY, MAX_CAGE_MEMORY);
        CageLimits {
            memory_bytes,
            tmp_bytes: memory_bytes / 2,
            pids: CAGE_PIDS,
        }
    }

    /// For this host (`MemTotal` in `/proc/meminfo`; the least bound when
    /// it cannot be read).
    pub fn here() -> CageLimits {
        let total = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| mem_total(&m))
            .unwrap_or(0);
        CageLimits::for_memory(total)
    }

    /// Within a Warden whose own cgroup may hold `ceiling` bytes: half of
    /// it at most, so a cage at its bound leaves the Warden room (a cage
    /// charged to the Warden's group would otherwise meet the Warden's
    /// ceiling first, and the OOM killer would choose among both).
    pub fn within(self, ceiling: Option<u64>) -> CageLimits {
        let Some(ceiling) = ceiling else {
            return self;
        };
        let memory_bytes = self
            .memory_bytes
            .min(ceiling / 2)
            .max(MIN_CAGE_MEMORY.min(ceiling / 2));
        CageLimits {
            memory_bytes,
            tmp_bytes: self.tmp_bytes.min(memory_bytes / 2),
            pids: self.pids,
        }
    }

    /// In words, for `/trust`.
    pub fn describe(&self) -> String {
        format!(
            "each chore's cage is bounded to {} MiB of memory ({} MiB of it in /tmp), no swap, and {} processes",
            self.memory_bytes >> 20,
            self.tmp_bytes >> 20,
            self.pids
        )
    }
}

/// `MemTotal` from `/proc/meminfo`'s text, in bytes.
fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Where cage groups are made.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Home {
    /// cgroup v2: a group whose children get `memory` and `pids`.
    V2(PathBuf),
    /// cgroup v1: a group in each hierarchy; and on a hybrid host the
    /// v2 hierarchy too, where the kernel counts a cage's refused writes
    /// (perf events follow v2 groups when v1 has no `perf_event`).
    V1 {
        memory: PathBuf,
        pids: PathBuf,
        unified: Option<PathBuf>,
    },
}

/// The cage groups of this process.
#[derive(Debug)]
pub struct Cgroups {
    home: Result<Home, String>,
    pub limits: CageLimits,
    next: AtomicU64,
}

const CGROUP_FS: &str = "/sys/fs/cgroup";

static GLOBAL: OnceLock<Cgroups> = OnceLock::new();

/// This process's cage groups, found (and, under systemd, the Warden moved
/// into its leaf) on first use.
pub fn global() -> &'static Cgroups {
    GLOBAL.get_or_init(|| Cgroups::discover(CageLimits::here()))
}

impl Cgroups {
    fn discover(limits: CageLimits) -> Cgroups {
        let limits = limits.within(own_memory_ceiling());
        let home = find_home().and_then(|home| {
            sweep(&home);
            // A group made, bounded and removed: what every run will do.
            let probe = Cgroups {
                home: Ok(home.clone()),
                limits,
                next: AtomicU64::new(0),
            };
            probe.cage().map(|_| home)
        });
        Cgroups {
            home,
            limits,
            next: AtomicU64::new(0),
        }
    }

    /// Whether cages can be bounded here; why not, in words.
    pub fn available(&self) -> Result<(), String> {
        self.home.as_ref().map(|_| ()).map_err(Clone::clone)
    }

    /// Where the groups are, in words.
    pub fn describe(&self) -> String {
        match &self.home {
            Ok(Home::V2(dir)) => format!(
                "{} (cgroup v2 under {})",
                self.limits.describe(),
                dir.display()
            ),
            Ok(Home::V1 { memory, .. }) => {
                format!(
                    "{} (cgroup v1 under {})",
                    self.limits.describe(),
                    memory.display()
                )
            }
            Err(why) => format!("no cage can be bounded in memory: {why}"),
        }
    }

    /// A new group for one caged run, bounded; removed when dropped.
    pub fn cage(&self) -> Result<CageGroup, String> {
        let home = self.home.as_ref().map_err(Clone::clone)?;
        let name = format!(
            "aromba-cage-{}-{}",
            std::process::id(),
            self.next.fetch_add(1, Ordering::SeqCst)
        );
        let l = self.limits;
        let mut group = CageGroup {
            dirs: Vec::new(),
            procs: Vec::new(),
            v2: matches!(home, Home::V2(_)),
            counting: None,
        };
        match home {
            Home::V2(dir) => {
                let d = group.make(&dir.join(&name))?;
                write(&d, "memory.max", &l.memory_bytes.to_string())?;
                write_if_there(&d, "memory.swap.max", "0")?;
                // One process out of memory takes the whole cage with it.
                write_if_there(&d, "memory.oom.group", "1")?;
                write(&d, "pids.max", &l.pids.to_string())?;
                group.join_through(&d)?;
                group.counting = Some(d);
            }
            Home::V1 {
                memory,
                pids,
                unified,
            } => {
                let m = group.make(&memory.join(&name))?;
                write(&m, "memory.limit_in_bytes", &l.memory_bytes.to_string())?;
                // Swap accounting on: memory and swap together, no more.
                write_if_there(
                    &m,
                    "memory.memsw.limit_in_bytes",
                    &l.memory_bytes.to_string(),
                )?;
                group.join_through(&m)?;
                let p = group.make(&pids.join(&name))?;
                write(&p, "pids.max", &l.pids.to_string())?;
                group.join_through(&p)?;
                if let Some(u) = unified {
                    let u = group.make(&u.join(&name))?;
                    group.join_through(&u)?;
                    group.counting = Some(u);
                }
            }
        }
        Ok(group)
    }
}

/// One caged run's group (one per hierarchy on v1).
#[derive(Debug)]
pub struct CageGroup {
    dirs: Vec<PathBuf>,
    procs: Vec<std::fs::File>,
    v2: bool,
    /// The v2 group the kernel counts the cage's refused writes in.
    counting: Option<PathBuf>,
}

/// What a child joins before it execs: the descriptors it writes `0` to,
/// to join its groups — at most three (v1's memory and pids, and a hybrid
/// host's v2 group) — and the network namespace of a skill's run, copied
/// into the child without allocating.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JoinFds {
    fds: [RawFd; 3],
    len: usize,
    net: Option<RawFd>,
}

impl JoinFds {
    pub fn as_slice(&self) -> &[RawFd] {
        &self.fds[..self.len]
    }

    /// The network namespace to enter first, if any.
    pub fn net(&self) -> Option<RawFd> {
        self.net
    }

    /// These groups, and the network namespace `net` (a descriptor the
    /// caller keeps open until the child has started).
    pub fn with_net(self, net: Option<RawFd>) -> JoinFds {
        JoinFds { net, ..self }
    }
}

impl CageGroup {
    fn make(&mut self, dir: &Path) -> Result<PathBuf, String> {
        std::fs::create_dir(dir)
            .map_err(|e| format!("cannot make the cgroup {}: {e}", dir.display()))?;
        self.dirs.push(dir.to_path_buf());
        Ok(dir.to_path_buf())
    }

    fn join_through(&mut self, dir: &Path) -> Result<(), String> {
        let path = dir.join("cgroup.procs");
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        self.procs.push(f);
        Ok(())
    }

    /// What the child writes to, to join.
    pub fn join_fds(&self) -> JoinFds {
        let mut j = JoinFds::default();
        for f in self.procs.iter().take(3) {
            j.fds[j.len] = f.as_raw_fd();
            j.len += 1;
        }
        j
    }

    /// The v2 group the cage's refused writes are counted in, if any.
    pub fn counting_dir(&self) -> Option<&Path> {
        self.counting.as_deref()
    }

    /// Whether the memory ceiling made the kernel kill something in it.
    pub fn memory_exceeded(&self) -> bool {
        let Some(dir) = self.dirs.first() else {
            return false;
        };
        let (file, key) = if self.v2 {
            ("memory.events", "oom_kill")
        } else {
            ("memory.oom_control", "oom_kill")
        };
        let mut text = String::new();
        let read = std::fs::File::open(dir.join(file))
            .and_then(|mut f| f.read_to_string(&mut text))
            .is_ok();
        read && text.lines().any(|l| {
            let mut parts = l.split_whitespace();
            parts.next() == Some(key) && parts.next().is_some_and(|n| n != "0")
        })
    }

    /// The most memory the group held (v1 records it; v2 since 5.19).
    pub fn peak_memory(&self) -> Option<u64> {
        let dir = self.dirs.first()?;
        let file = if self.v2 {
            "memory.peak"
        } else {
            "memory.max_usage_in_bytes"
        };
        std::fs::read_to_string(dir.join(file))
            .ok()?
            .trim()
            .parse()
            .ok()
    }
}

impl Drop for CageGroup {
    fn drop(&mut self) {
        self.procs.clear();
        // The cage's init is gone with its run, and every process of its
        // namespace with it; a straggler is killed, then the group removed.
        for dir in self.dirs.iter().rev() {
            for attempt in 0..50 {
                match std::fs::remove_dir(dir) {
                    Ok(()) => break,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                    Err(_) if attempt < 49 => {
                        if self.v2 {
                            let _ = write(dir, "cgroup.kill", "1");
                        } else {
                            kill_all(dir);
                        }
                        std::thread::sleep(std::time::Duration::from_millis(20));
                    }
                    Err(e) => note_left_behind(dir, &e),
                }
            }
        }
    }
}

/// A group that could not be removed is left to the next start's sweep;
/// said on standard error (the journal is not reachable from here).
fn note_left_behind(dir: &Path, e: &std::io::Error) {
    eprintln!(
        "aromba-warden: the cgroup {} could not be removed: {e}",
        dir.display()
    );
}

/// The least memory ceiling on this process's cgroup and its ancestors
/// (v2 `memory.max`, v1 `memory.limit_in_bytes`), if any is set.
fn own_memory_ceiling() -> Option<u64> {
    let fs = Path::new(CGROUP_FS);
    let (v2, v1) = own_groups().ok()?;
    let (base, group, file) = if fs.join("cgroup.controllers").exists() {
        (fs.to_path_buf(), v2?, "memory.max")
    } else {
        let group = v1.into_iter().find(|(c, _)| c == "memory")?.1;
        (fs.join("memory"), group, "memory.limit_in_bytes")
    };
    let mut dir = under(&base, &group);
    let mut least: Option<u64> = None;
    loop {
        if let Ok(text) = std::fs::read_to_string(dir.join(file))
            && let Ok(n) = text.trim().parse::<u64>()
            // v1 writes "no limit" as a number near i64::MAX.
            && n < (1 << 60)
        {
            least = Some(least.map_or(n, |l| l.min(n)));
        }
        if dir == base || !dir.pop() || !dir.starts_with(&base) {
            return least;
        }
    }
}

/// Groups a Warden that stopped mid-run left behind: what still runs in
/// them is killed (a cage dies with its Warden, `--die-with-parent`, but
/// not at once), then they are removed. A group is a dead Warden's when
/// the process its name carries is gone; another Warden's, alive, is left
/// alone (tests run several at once).
fn sweep(home: &Home) {
    let dirs = match home {
        Home::V2(d) => vec![d.clone()],
        Home::V1 {
            memory,
            pids,
            unified,
        } => [Some(memory.clone()), Some(pids.clone()), unified.clone()]
            .into_iter()
            .flatten()
            .collect(),
    };
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            let Some(owner) = cage_owner(&name.to_string_lossy()) else {
                continue;
            };
            // A live Warden's group may be empty only because its run has
            // not joined it yet (found by the attack round): left alone.
            if owner != std::process::id() && !Path::new(&format!("/proc/{owner}")).exists() {
                stop_leftover(&e.path());
                let _ = std::fs::remove_dir(e.path());
            }
        }
    }
}

/// The Warden's pid in a cage group's name, `aromba-cage-PID-N`.
fn cage_owner(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("aromba-cage-")?;
    let (pid, n) = rest.split_once('-')?;
    n.parse::<u64>().ok()?;
    pid.parse().ok()
}

/// Kills every process of a leftover group and waits (a few seconds at
/// most) for them to be gone.
fn stop_leftover(dir: &Path) {
    if write(dir, "cgroup.kill", "1").is_err() {
        kill_all(dir);
    }
    for _ in 0..250 {
        match std::fs::read_to_string(dir.join("cgroup.procs")) {
            Ok(t) if t.trim().is_empty() => return,
            Ok(_) => {
                kill_all(dir);
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(_) => return,
        }
    }
}

fn kill_all(dir: &Path) {
    let Ok(text) = std::fs::read_to_string(dir.join("cgroup.procs")) else {
        return;
    };
    for pid in text.lines().filter_map(|l| l.trim().parse::<u32>().ok()) {
        let _ = crate::system::kill_pid(pid);
    }
}

fn write(dir: &Path, file: &str, value: &str) -> Result<(), String> {
    let path = dir.join(file);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .and_then(|mut f| f.write_all(value.as_bytes()))
        .map_err(|e| format!("cannot write {value} to {}: {e}", path.display()))
}

fn write_if_there(dir: &Path, file: &str, value: &str) -> Result<(), String> {
    if dir.join(file).exists() {
        write(dir, file, value)
    } else {
        Ok(())
    }
}

/// This process's groups, from `/proc/self/cgroup`: the v2 path (`0::`)
/// and v1's as `(controller, path)`.
type OwnGroups = (Option<String>, Vec<(String, String)>);

/// This process's group in each hierarchy, from `/proc/self/cgroup`.
fn own_groups() -> Result<OwnGroups, String> {
    let text = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
    let mut v2 = None;
    let mut v1 = Vec::new();
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if controllers.is_empty() {
            v2 = Some(path.to_string());
        } else {
            for c in controllers.split(',') {
                v1.push((c.to_string(), path.to_string()));
            }
        }
    }
    Ok((v2, v1))
}

fn under(base: &Path, group: &str) -> PathBuf {
    base.join(group.trim_start_matches('/'))
}

fn has_controllers(file: &Path) -> bool {
    std::fs::read_to_string(file).is_ok_and(|t| {
        let words: Vec<&str> = t.split_whitespace().collect();
        words.contains(&"memory") && words.contains(&"pids")
    })
}

fn find_home() -> Result<Home, String> {
    let fs = Path::new(CGROUP_FS);
    let (v2, v1) = own_groups()?;
    if fs.join("cgroup.controllers").exists() {
        return find_v2(fs, v2.as_deref().unwrap_or("/"));
    }
    let path_of = |c: &str| v1.iter().find(|(n, _)| n == c).map(|(_, p)| p.clone());
    let (Some(memory), Some(pids)) = (path_of("memory"), path_of("pids")) else {
        return Err(
            "this host mounts neither cgroup v2 nor v1's memory and pids controllers".into(),
        );
    };
    let memory = under(&fs.join("memory"), &memory);
    let pids = under(&fs.join("pids"), &pids);
    if !memory.join("memory.limit_in_bytes").exists() || !pids.is_dir() {
        return Err(format!(
            "the cgroup v1 groups {} and {} are not there",
            memory.display(),
            pids.display()
        ));
    }
    // A hybrid host's v2 hierarchy, for counting only.
    let unified = fs.join("unified");
    let unified = (unified.join("cgroup.procs").exists())
        .then(|| under(&unified, v2.as_deref().unwrap_or("/")));
    Ok(Home::V1 {
        memory,
        pids,
        unified,
    })
}

/// The leaf the Warden moves itself into under a delegated unit.
const WARDEN_LEAF: &str = "warden";
/// The top-level group of a Warden not started by its unit.
const TOP_LEVEL: &str = "aromba-cages";

fn find_v2(fs: &Path, own: &str) -> Result<Home, String> {
    let own_dir = under(fs, own);
    // Moved into our leaf already (a second discovery in one process).
    if own_dir.file_name().is_some_and(|n| n == WARDEN_LEAF)
        && let Some(parent) = own_dir.parent()
        && has_controllers(&parent.join("cgroup.subtree_control"))
    {
        return Ok(Home::V2(parent.to_path_buf()));
    }
    // Started by the unit, which delegates memory and pids to it.
    if own.ends_with("/aromba-warden.service")
        && has_controllers(&own_dir.join("cgroup.controllers"))
    {
        let leaf = own_dir.join(WARDEN_LEAF);
        match std::fs::create_dir(&leaf) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("cannot make {}: {e}", leaf.display())),
        }
        write(&leaf, "cgroup.procs", &std::process::id().to_string())?;
        write(&own_dir, "cgroup.subtree_control", "+memory +pids")?;
        return Ok(Home::V2(own_dir));
    }
    // Otherwise a group of root's at the top, holding no process itself.
    if !has_controllers(&fs.join("cgroup.subtree_control")) {
        return Err("the cgroup v2 root does not hand memory and pids to its children".into());
    }
    let top = fs.join(TOP_LEVEL);
    match std::fs::create_dir(&top) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("cannot make {}: {e}", top.display())),
    }
    write(&top, "cgroup.subtree_control", "+memory +pids")?;
    Ok(Home::V2(top))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cage_takes_a_quarter_of_the_host_between_the_bounds() {
        assert_eq!(
            CageLimits::for_memory(24 << 30).memory_bytes,
            MAX_CAGE_MEMORY
        );
        assert_eq!(CageLimits::for_memory(2 << 30).memory_bytes, 512 << 20);
        assert_eq!(CageLimits::for_memory(0).memory_bytes, MIN_CAGE_MEMORY);
        let l = CageLimits::for_memory(1 << 30);
        assert_eq!((l.memory_bytes, l.tmp_bytes), (256 << 20, 128 << 20));
    }

    #[test]
    fn a_cage_takes_at_most_half_of_a_warden_group_with_a_ceiling() {
        let host = CageLimits::for_memory(24 << 30);
        assert_eq!(host.within(None), host);
        let l = host.within(Some(400 << 20));
        assert_eq!((l.memory_bytes, l.tmp_bytes), (200 << 20, 100 << 20));
        assert_eq!(host.within(Some(8 << 30)), host);
    }

    #[test]
    fn a_cage_groups_owner_is_the_pid_in_its_name() {
        assert_eq!(cage_owner("aromba-cage-4242-7"), Some(4242));
        assert_eq!(cage_owner("aromba-cage-4242"), None);
        assert_eq!(cage_owner("aromba-cage-x-7"), None);
        assert_eq!(cage_owner("aromba-cages"), None);
        assert_eq!(cage_owner("warden"), None);
    }

    #[test]
    fn mem_total_is_read_in_kib() {
        let meminfo = "MemTotal:       24576000 kB\nMemFree:        1000 kB\n";
        assert_eq!(mem_total(meminfo), Some(24_576_000 * 1024));
        assert_eq!(mem_total("MemFree: 1 kB\n"), None);
        assert_eq!(mem_total("MemTotal: lots kB\n"), None);
    }
}
