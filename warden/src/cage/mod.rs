//! The cage: bubblewrap with only a chore's `touches` writable, secrets not
//! visible at all, no capabilities, a fixed `PATH`, an empty environment
//! but what the chore declares, no network unless asked, and a seccomp
//! filter the Warden builds itself (`seccomp.rs`).
//!
//! Real root inside bubblewrap keeps every capability unless dropped (seen
//! here: `mount -o remount,rw /` succeeded without `--cap-drop ALL`), so the
//! argument vector below always drops them, and bubblewrap sets
//! `no_new_privs` before running the chore. uid 0 without capabilities still
//! passes a sysctl's check, so the kernel's knobs in `/proc` and `/sys` are
//! covered read-only or masked (`PROC_READ_ONLY`, `KERNEL_MASKED_*`).

#![forbid(unsafe_code)]

pub mod seccomp;

use crate::exec::{self, Bounds, ExecError, Outcome};
use crate::layout::Layout;
use crate::policy::PATHS;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// The only `PATH` a caged program sees.
pub const CAGE_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// What one caged run may do.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CageSpec {
    /// Paths bound writable (they must exist).
    pub touches: Vec<PathBuf>,
    /// Keep the host's network (only when the chore's header asks).
    pub network: bool,
    /// The environment, beyond `PATH`.
    pub env: Vec<(String, String)>,
    /// Secret paths to make invisible: directories get an empty tmpfs,
    /// files `/dev/null`.
    pub hide: Vec<Hidden>,
    /// Not even the cage's own `/tmp` and `/dev` are writable: an assistant
    /// tool runs on the model's word, not on a button (see [`tool_spec`]).
    pub nothing_writable: bool,
}

/// The cage of an assistant tool: no touches, no network, secrets hidden,
/// and nothing writable at all, not even scratch space. A tool that needs
/// to write is a chore, with an approval, a snapshot and a receipt.
pub fn tool_spec(layout: &Layout, env: Vec<(String, String)>) -> CageSpec {
    CageSpec {
        touches: Vec::new(),
        network: false,
        env,
        hide: secret_paths(layout),
        nothing_writable: true,
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hidden {
    Dir(PathBuf),
    File(PathBuf),
}

/// The secret paths present on this host: the policy's secret prefixes
/// that are plain paths, the host keys, the secret directories of every
/// home, and the Warden's and the Worker's own directories.
pub fn secret_paths(layout: &Layout) -> Vec<Hidden> {
    let mut candidates: Vec<PathBuf> = PATHS
        .secret_prefixes
        .iter()
        .filter(|p| {
            ![
                "/proc/self",
                "/proc/thread-self",
                "/dev",
                "/sys/firmware",
                "/etc/ssh/ssh_host_",
            ]
            .contains(p)
        })
        .map(PathBuf::from)
        .collect();
    if let Ok(entries) = std::fs::read_dir("/etc/ssh") {
        candidates.extend(
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("ssh_host_"))
                }),
        );
    }
    let mut homes = vec![PathBuf::from("/root")];
    if let Ok(entries) = std::fs::read_dir("/home") {
        homes.extend(entries.filter_map(|e| e.ok().map(|e| e.path())));
    }
    homes.push(layout.worker_home.clone());
    for home in &homes {
        candidates.extend(PATHS.secret_dirs.iter().map(|d| home.join(d)));
    }
    candidates.extend([
        layout.config_dir.clone(),
        layout.state_dir.clone(),
        layout.journal_dir.clone(),
        layout.run_dir.clone(),
        layout.worker_config_dir.clone(),
    ]);
    let mut hidden = Vec::new();
    for path in candidates {
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => hidden.push(Hidden::Dir(path)),
            Ok(m) if m.is_file() => hidden.push(Hidden::File(path)),
            _ => {}
        }
    }
    hidden.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    hidden.dedup();
    hidden
}

/// The parts of `/proc` through which uid 0 without capabilities still
/// changes the host (sysctls: `kernel.core_pattern` set to a pipe runs a
/// command as host root; `sysrq-trigger`; interrupt affinity; PCI and
/// filesystem knobs), bound read-only over the cage's own `/proc`.
/// bubblewrap 0.8 covers some of them itself, but skips the cover when
/// `access()` says EACCES, which left `/proc/sys` writable. runc's and
/// Docker's list.
pub const PROC_READ_ONLY: [&str; 5] = [
    "/proc/sys",
    "/proc/sysrq-trigger",
    "/proc/irq",
    "/proc/bus",
    "/proc/fs",
];

/// Kernel files a chore has no business reading (kernel memory, the
/// kernel's keys, timers and scheduler internals): each covered by
/// `/dev/null`. runc's and Docker's list.
pub const KERNEL_MASKED_FILES: [&str; 4] = [
    "/proc/kcore",
    "/proc/keys",
    "/proc/timer_list",
    "/proc/sched_debug",
];

/// Kernel directories masked by an empty, read-only tmpfs (firmware
/// tables and variables, EFI ones writable by root).
pub const KERNEL_MASKED_DIRS: [&str; 1] = ["/sys/firmware"];

/// The bubblewrap argument vector. The order matters: bubblewrap applies
/// mounts in order, so the writable touches come after the read-only root
/// and the hidden secrets and the kernel's covers after both.
pub fn bwrap_args(spec: &CageSpec, seccomp_fd: i32, program: &str, args: &[String]) -> Vec<String> {
    bwrap_args_with(spec, seccomp_fd, program, args, &|p: &Path| {
        std::fs::symlink_metadata(p).is_ok()
    })
}

/// As [`bwrap_args`], with `exists` saying which of the kernel's paths this
/// host has (a path the kernel lacks cannot be covered: bubblewrap would
/// have to create it in `/proc`, and fail). Tests pass their own.
pub fn bwrap_args_with(
    spec: &CageSpec,
    seccomp_fd: i32,
    program: &str,
    args: &[String],
    exists: &dyn Fn(&Path) -> bool,
) -> Vec<String> {
    let mut v: Vec<String> = ["--die-with-parent", "--new-session", "--unshare-all"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if spec.network {
        v.push("--share-net".into());
    }
    v.extend(
        [
            "--cap-drop",
            "ALL",
            "--clearenv",
            "--setenv",
            "PATH",
            CAGE_PATH,
        ]
        .map(String::from),
    );
    for (k, val) in &spec.env {
        v.extend(["--setenv".to_string(), k.clone(), val.clone()]);
    }
    v.extend(
        [
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--tmpfs",
            "/tmp",
        ]
        .map(String::from),
    );
    if !spec.nothing_writable {
        for t in &spec.touches {
            let t = t.to_string_lossy().into_owned();
            v.extend(["--bind".to_string(), t.clone(), t]);
        }
    }
    // What is under a hidden directory is hidden with it: its own mount
    // would need a mount point inside the empty, read-only stand-in.
    let dirs: Vec<&PathBuf> = spec
        .hide
        .iter()
        .filter_map(|h| match h {
            Hidden::Dir(d) => Some(d),
            Hidden::File(_) => None,
        })
        .collect();
    let covered = |p: &Path| dirs.iter().any(|d| p != d.as_path() && p.starts_with(d));
    let mut read_only = Vec::new();
    for h in &spec.hide {
        match h {
            Hidden::Dir(d) if !covered(d) => {
                let d = d.to_string_lossy().into_owned();
                v.extend(["--tmpfs".to_string(), d.clone()]);
                read_only.push(d);
            }
            Hidden::File(f) if !covered(f) => v.extend([
                "--ro-bind".to_string(),
                "/dev/null".to_string(),
                f.to_string_lossy().into_owned(),
            ]),
            _ => {}
        }
    }
    // The kernel's covers, after the touches and the secrets so that no
    // other mount can undo them. The source of each read-only bind is the
    // host's own `/proc` entry: the same sysctls (their namespaced ones
    // follow the namespaces of the process that opens them, not the
    // mount), the same kernel files.
    for p in PROC_READ_ONLY.iter().filter(|p| exists(Path::new(p))) {
        v.extend(["--ro-bind".to_string(), p.to_string(), p.to_string()]);
    }
    for f in KERNEL_MASKED_FILES.iter().filter(|p| exists(Path::new(p))) {
        v.extend([
            "--ro-bind".to_string(),
            "/dev/null".to_string(),
            f.to_string(),
        ]);
    }
    for d in KERNEL_MASKED_DIRS.iter().filter(|p| exists(Path::new(p))) {
        v.extend(["--tmpfs".to_string(), d.to_string()]);
        read_only.push(d.to_string());
    }
    // The stand-ins are read-only, so a write there fails like any other
    // outside the touches instead of vanishing into a scratch tmpfs.
    for d in read_only {
        v.extend(["--remount-ro".to_string(), d]);
    }
    // Last among the mounts: bubblewrap makes the hidden paths' mount
    // points first, and cannot once their parents are read-only.
    if spec.nothing_writable {
        v.extend(["--remount-ro", "/tmp", "--remount-ro", "/dev"].map(String::from));
    }
    v.extend([
        "--chdir".to_string(),
        "/".to_string(),
        "--seccomp".to_string(),
        seccomp_fd.to_string(),
        "--".to_string(),
    ]);
    v.push(program.to_string());
    v.extend(args.iter().cloned());
    v
}

#[derive(Debug)]
pub enum CageError {
    /// bubblewrap is missing or not root's.
    NoBubblewrap(ExecError),
    Filter(std::io::Error),
    Run(ExecError),
}

impl std::fmt::Display for CageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CageError::NoBubblewrap(e) => write!(f, "no cage here: {e}"),
            CageError::Filter(e) => write!(f, "cannot hand the seccomp filter to bubblewrap: {e}"),
            CageError::Run(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for CageError {}

/// Runs `program args…` in the cage. The filter goes to bubblewrap through
/// a pipe the child keeps across exec. The output comes back redacted, as
/// from every run (`exec::Output`).
pub fn run_caged(
    spec: &CageSpec,
    program: &Path,
    args: &[String],
    bounds: &Bounds,
) -> Result<Outcome, CageError> {
    let bwrap = exec::pick_binary("bwrap", &["/usr/bin/bwrap", "/bin/bwrap"])
        .map_err(CageError::NoBubblewrap)?;
    run_caged_with(&bwrap, spec, program, args, bounds)
}

/// As [`run_caged`], with the bubblewrap binary named (tests make it fail).
pub fn run_caged_with(
    bwrap: &Path,
    spec: &CageSpec,
    program: &Path,
    args: &[String],
    bounds: &Bounds,
) -> Result<Outcome, CageError> {
    let (reader, mut writer) = std::io::pipe().map_err(CageError::Filter)?;
    // The filter is a few hundred bytes: it fits in the pipe's buffer, so
    // writing it all before bubblewrap starts cannot block.
    writer
        .write_all(&seccomp::bytes())
        .map_err(CageError::Filter)?;
    drop(writer);
    let fd = reader.as_raw_fd();
    let argv = bwrap_args(spec, fd, &program.to_string_lossy(), args);
    let bounds = Bounds {
        keep_fd: Some(fd),
        ..bounds.clone()
    };
    let outcome = exec::run_program(bwrap, &argv, &[], &bounds).map_err(CageError::Run);
    drop(reader);
    outcome
}

/// Whether a real cage can be built with `bwrap`: a caged `/bin/true`, with
/// every flag and the filter chores get. `Err` says why not.
pub fn probe(bwrap: &Path) -> Result<(), String> {
    let bounds = Bounds {
        timeout: std::time::Duration::from_secs(10),
        max_output_bytes: 4096,
        low_priority: false,
        keep_fd: None,
        stop: None,
        tripwire: None,
    };
    match run_caged_with(
        bwrap,
        &CageSpec::default(),
        Path::new("/bin/true"),
        &[],
        &bounds,
    ) {
        Ok(o) if o.exit_code == Some(0) => Ok(()),
        Ok(o) => Err(format!(
            "bubblewrap could not build the cage (exit {:?}): {}",
            o.exit_code,
            o.stderr.lossy().trim()
        )),
        Err(e) => Err(e.to_string()),
    }
}
