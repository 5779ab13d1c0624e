//! The cage: bubblewrap with only a chore's `touches` writable, secrets not
//! visible at all, no capabilities, a fixed `PATH`, an empty environment
//! but what the chore declares, no network unless asked, and a seccomp
//! filter the Warden builds itself (`seccomp.rs`).
//!
//! A chore sees only what it needs: the system directories read-only
//! (`SYSTEM_DIRS`, a merged-`/usr` host's links made again as links), `/etc`
//! with every secret in it hidden (found by walking it, [`secrets_under`]),
//! the paths its header `reads:` (read-only, their secrets hidden the same
//! way), its touches, and the cage's own `/dev`, `/proc` and `/tmp`. The
//! root they hang on is an empty tmpfs, read-only once they are mounted:
//! `/root`, `/home`, `/srv`, `/opt`, `/var/lib`, `/mnt`, `/media`, `/run`
//! are simply not there unless declared.
//!
//! Real root inside bubblewrap keeps every capability unless dropped (seen
//! here: `mount -o remount,rw /` succeeded without `--cap-drop ALL`), so the
//! argument vector below always drops them, and bubblewrap sets
//! `no_new_privs` before running the chore. uid 0 without capabilities still
//! passes a sysctl's check, so the kernel's knobs in `/proc` and `/sys` are
//! covered read-only or masked (`PROC_READ_ONLY`, `KERNEL_MASKED_*`).

#![forbid(unsafe_code)]

pub mod limits;
pub mod refused;
pub mod seccomp;

use crate::exec::{self, Bounds, ExecError, Outcome};
use crate::layout::Layout;
use crate::policy::PATHS;
use std::collections::VecDeque;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The only `PATH` a caged program sees.
pub const CAGE_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// What one caged run may do.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CageSpec {
    /// Paths bound writable (they must exist).
    pub touches: Vec<PathBuf>,
    /// Paths shown read-only beyond the system directories (a chore's
    /// `reads:`, and a dry run's touches); one the host lacks is left out.
    pub reads: Vec<PathBuf>,
    /// Keep the host's network (only when the chore's header asks).
    pub network: bool,
    /// The network namespace (a descriptor, open until the run ends) the
    /// cage enters before bubblewrap starts and keeps: a skill's run, whose
    /// only way out is the Warden's proxy on its loopback.
    pub join_net: Option<std::os::fd::RawFd>,
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
        reads: Vec::new(),
        network: false,
        join_net: None,
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
/// home, and the Warden's and the Worker's own directories (its home
/// included).
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
        // Whole, not only its secret directories: a read may hold it
        // (`/var/lib` holds `/var/lib/aromba`), and no chore reads the
        // Worker's own files.
        layout.worker_home.clone(),
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

/// The system directories: programs, libraries, configuration. Each one the
/// host has is shown read-only; `/etc` with its secrets hidden.
pub const SYSTEM_DIRS: [&str; 8] = [
    "/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", "/etc",
];

/// How the host holds one of [`SYSTEM_DIRS`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SystemDir {
    /// A directory: bound read-only at the same path.
    Dir(String),
    /// A link into `/usr` (a merged-`/usr` host's `/bin -> usr/bin`): made
    /// again as the same link, so `/usr` is not bound twice.
    Link { path: String, target: String },
}

/// What the host holds that the argument vector depends on. [`Host::here`]
/// looks; tests make their own.
pub struct Host<'a> {
    pub system: Vec<SystemDir>,
    /// Secrets found by walking `/etc` and the reads ([`secrets_under`]).
    pub found: Vec<Hidden>,
    /// The file `/etc/resolv.conf` leads to, when it lies under `/run`
    /// (`/run/systemd/resolve/…`), which the cage does not show: bound
    /// read-only, alone, for a chore with network, so that names resolve
    /// without `/run` being shown.
    pub resolver: Option<PathBuf>,
    /// Which of the kernel's paths this host has (a path the kernel lacks
    /// cannot be covered: bubblewrap would have to create it in `/proc`).
    pub exists: &'a dyn Fn(&Path) -> bool,
    /// The size of the cage's `/tmp` and `/dev/shm`, when this host's
    /// bubblewrap can size a tmpfs (0.7 and later; the cage's cgroup bounds
    /// their pages either way).
    pub tmp_size: Option<u64>,
}

fn exists_here(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok()
}

impl Host<'static> {
    /// This host, for `spec`: its system directories, the secrets under
    /// `/etc` and the reads, and for a chore with network its resolver.
    pub fn here(spec: &CageSpec) -> Host<'static> {
        let mut found = secrets_under(Path::new("/etc"), true);
        for r in &spec.reads {
            found.extend(secrets_under(r, false));
        }
        let resolver = spec
            .network
            .then(|| std::fs::canonicalize("/etc/resolv.conf").ok())
            .flatten()
            .filter(|r| {
                r.to_str()
                    .is_some_and(|s| crate::policy::secret_rule(s).is_ok())
                    && std::fs::metadata(r).is_ok_and(|m| m.is_file())
                    && r.starts_with("/run")
            });
        Host {
            system: system_dirs_here(),
            found,
            resolver,
            exists: &exists_here,
            tmp_size: tmpfs_sized().then(|| limits::global().limits.tmp_bytes),
        }
    }
}

/// The [`SYSTEM_DIRS`] this host has, and how.
pub fn system_dirs_here() -> Vec<SystemDir> {
    let mut out = Vec::new();
    for d in SYSTEM_DIRS {
        let Ok(meta) = std::fs::symlink_metadata(d) else {
            continue;
        };
        if meta.is_dir() {
            out.push(SystemDir::Dir(d.to_string()));
        } else if meta.file_type().is_symlink() {
            let (Ok(target), Ok(real)) = (std::fs::read_link(d), std::fs::canonicalize(d)) else {
                continue;
            };
            match target.to_str() {
                Some(t) if real.starts_with("/usr") && real.is_dir() => {
                    out.push(SystemDir::Link {
                        path: d.to_string(),
                        target: t.to_string(),
                    });
                }
                // A link elsewhere: bubblewrap binds what it leads to.
                _ if real.is_dir() => out.push(SystemDir::Dir(d.to_string())),
                _ => {}
            }
        }
    }
    out
}

/// Whether the cage may show `reads` (a chore's `reads:`, already parsed:
/// absolute, clean, no secret path of the policy). A read may not be one of
/// the Warden's or the Worker's directories or inside one (a read that
/// holds one shows it hidden, as `/etc` does), may not overlap a fenced data
/// folder either way, and may not pass through a symlink (bubblewrap would
/// bind the link's target, which nothing checked).
pub fn reads_allowed(name: &str, reads: &[PathBuf], layout: &Layout) -> Result<(), String> {
    let own = [
        &layout.state_dir,
        &layout.journal_dir,
        &layout.config_dir,
        &layout.run_dir,
        &layout.worker_config_dir,
        &layout.worker_home,
        &layout.quarantine_dir,
    ];
    let fences = layout.fenced_paths();
    for r in reads {
        if let Some(dir) = own.iter().find(|d| r.starts_with(d)) {
            return Err(format!(
                "{name} reads {}, which holds the Warden's or the Worker's own files ({})",
                r.display(),
                dir.display()
            ));
        }
        if let Some(f) = fences.iter().find(|f| r.starts_with(f) || f.starts_with(r)) {
            return Err(format!(
                "{name} reads {}, and {} is fenced as data: no chore may read it",
                r.display(),
                f.display()
            ));
        }
        let mut at = PathBuf::from("/");
        for part in r.components().skip(1) {
            at.push(part);
            if std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(format!(
                    "{name} reads {}, and {} is a symbolic link: a read must be the real path",
                    r.display(),
                    at.display()
                ));
            }
        }
        if let Some(why) = swappable_ancestor(r) {
            return Err(format!(
                "{name} reads {}, and {why}: another account could swap the path for a link before the cage binds it",
                r.display()
            ));
        }
    }
    Ok(())
}

/// Why an account other than root could swap a directory on the way to
/// `path` (a touch or a read) for a symbolic link between the Warden's
/// checks and bubblewrap's bind, which resolves the path again and follows
/// links: the bind would then show, or make writable, whatever the link
/// leads to. `None` when every directory above `path` is root's and
/// writable by nobody else (a sticky one, `/var/tmp`, protects root's
/// entries). A component that does not exist could be made by whoever may
/// write its parent, so that parent is judged as if for another's entry.
pub fn swappable_ancestor(path: &Path) -> Option<String> {
    use crate::writers::{Against, Dir, replaceable};
    let mut dir = PathBuf::from("/");
    for part in path.components().skip(1) {
        let child = dir.join(part);
        let Ok(here) = Dir::look(&dir) else {
            return Some(format!("{} cannot be inspected", dir.display()));
        };
        let child_uid = std::fs::symlink_metadata(&child).map_or(u32::MAX, |m| {
            use std::os::unix::fs::MetadataExt;
            m.uid()
        });
        if let Some(why) = replaceable(&here, child_uid, Against::AllButRoot) {
            return Some(format!("{} {why}", dir.display()));
        }
        if child_uid == u32::MAX {
            return None;
        }
        dir = child;
    }
    None
}

/// At most this many entries are looked at under one root; the directories
/// left unread past it are hidden whole (what was not looked at may hold a
/// secret).
pub const WALK_MAX_ENTRIES: usize = 100_000;
/// Past this many secrets under one root, the root itself is hidden whole:
/// each hidden file is a mount in the cage.
pub const WALK_MAX_HIDDEN: usize = 2_000;

/// The secrets under `root` by the policy's path rules (`secret_prefixes`,
/// `secret_dirs`, `secret_names`: `/etc/ssl/private/*.key`, a `.ssh` under a
/// declared `/home`, a directory named `*secret*`), found by walking it
/// without following links. A secret directory is hidden whole and not
/// walked. A link is left alone: it is judged where it leads (mounting over
/// it would cover its target instead). A directory that cannot be read, or
/// lies past [`WALK_MAX_ENTRIES`], or holds a name that is not UTF-8 (no
/// rule can judge it) is hidden whole.
///
/// With `private`, also every file that not every local user may read and
/// every directory not every local user may list (`/etc/ssl/private`,
/// `/etc/security/opasswd`, a `sasl_passwd` or `.htpasswd` kept `0600`):
/// no name rule lists every secret a package keeps under `/etc`, but what
/// it keeps from other users is what it keeps secret, and a chore runs as
/// uid 0, the owner of those files. `/etc` is walked so; a declared read
/// is shown as the owner declared it.
pub fn secrets_under(root: &Path, private: bool) -> Vec<Hidden> {
    let mut found = Vec::new();
    if !std::fs::symlink_metadata(root).is_ok_and(|m| m.is_dir()) {
        return found;
    }
    let mut seen = 0usize;
    let mut queue = VecDeque::from([root.to_path_buf()]);
    while let Some(dir) = queue.pop_front() {
        if seen >= WALK_MAX_ENTRIES {
            found.push(Hidden::Dir(dir));
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
                found.push(Hidden::Dir(dir));
            }
            continue;
        };
        let mut children = Vec::new();
        let mut unjudged = false;
        for e in entries {
            let Ok(e) = e else {
                unjudged = true;
                break;
            };
            seen += 1;
            let path = e.path();
            let (Some(text), Ok(kind)) = (path.to_str(), e.file_type()) else {
                unjudged = true;
                break;
            };
            if kind.is_symlink() {
                continue;
            }
            let hidden_from_others = private
                && (kind.is_file() || kind.is_dir())
                && e.metadata().map_or(true, |m| {
                    let others = m.permissions().mode() & 0o007;
                    if kind.is_dir() {
                        others & 0o005 != 0o005
                    } else {
                        others & 0o004 == 0
                    }
                });
            if hidden_from_others || crate::policy::secret_rule(text).is_err() {
                found.push(if kind.is_dir() {
                    Hidden::Dir(path)
                } else {
                    Hidden::File(path)
                });
            } else if kind.is_dir() {
                children.push(path);
            }
        }
        if unjudged {
            found.retain(|h| !matches!(h, Hidden::Dir(p) | Hidden::File(p) if p.starts_with(&dir)));
            found.push(Hidden::Dir(dir));
            continue;
        }
        queue.extend(children);
        if found.len() > WALK_MAX_HIDDEN {
            return vec![Hidden::Dir(root.to_path_buf())];
        }
    }
    found
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

/// The bubblewrap argument vector, for this host ([`Host::here`]).
pub fn bwrap_args(spec: &CageSpec, seccomp_fd: i32, program: &str, args: &[String]) -> Vec<String> {
    bwrap_args_with(spec, &Host::here(spec), seccomp_fd, program, args)
}

/// As [`bwrap_args`], for the host `host` describes. The order matters:
/// bubblewrap applies mounts in order, so the reads come after the system
/// directories, the writable touches after the reads (a touch inside a read
/// stays writable), the hidden secrets and the kernel's covers after all of
/// them, and the root goes read-only last, once every mount point in it is
/// made.
pub fn bwrap_args_with(
    spec: &CageSpec,
    host: &Host<'_>,
    seccomp_fd: i32,
    program: &str,
    args: &[String],
) -> Vec<String> {
    let exists = host.exists;
    let mut v: Vec<String> = ["--die-with-parent", "--new-session", "--unshare-all"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if spec.network || spec.join_net.is_some() {
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
    // What the chore sees: nothing but these, on an empty root.
    let mut shown: Vec<PathBuf> = Vec::new();
    for d in &host.system {
        match d {
            SystemDir::Dir(d) => {
                v.extend(["--ro-bind".to_string(), d.clone(), d.clone()]);
                shown.push(PathBuf::from(d));
            }
            SystemDir::Link { path, target } => {
                v.extend(["--symlink".to_string(), target.clone(), path.clone()]);
            }
        }
    }
    v.extend(["--dev", "/dev", "--proc", "/proc"].map(String::from));
    // Memory, both: sized where bubblewrap can, and counted against the
    // cage's cgroup in any case.
    for d in ["/tmp", "/dev/shm"] {
        if let Some(size) = host.tmp_size {
            v.extend(["--size".to_string(), size.to_string()]);
        }
        v.extend(["--tmpfs".to_string(), d.to_string()]);
    }
    if spec.network
        && let Some(r) = &host.resolver
    {
        let r = r.to_string_lossy().into_owned();
        v.extend(["--ro-bind".to_string(), r.clone(), r]);
    }
    for r in &spec.reads {
        let r = r.to_string_lossy().into_owned();
        v.extend(["--ro-bind-try".to_string(), r.clone(), r]);
    }
    shown.extend(spec.reads.iter().cloned());
    if !spec.nothing_writable {
        for t in &spec.touches {
            let t = t.to_string_lossy().into_owned();
            v.extend(["--bind".to_string(), t.clone(), t]);
        }
        shown.extend(spec.touches.iter().cloned());
    }
    // A secret is hidden where the cage shows it; elsewhere it is not there
    // at all, and a stand-in would only say that it exists.
    let hide: Vec<&Hidden> = {
        let mut all: Vec<&Hidden> = spec.hide.iter().chain(&host.found).collect();
        all.retain(|h| {
            let (Hidden::Dir(p) | Hidden::File(p)) = h;
            shown.iter().any(|s| p.starts_with(s))
        });
        all.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
        all.dedup();
        all
    };
    // What is under a hidden directory is hidden with it: its own mount
    // would need a mount point inside the empty, read-only stand-in.
    let dirs: Vec<&PathBuf> = hide
        .iter()
        .filter_map(|h| match h {
            Hidden::Dir(d) => Some(d),
            Hidden::File(_) => None,
        })
        .collect();
    let covered = |p: &Path| dirs.iter().any(|d| p != d.as_path() && p.starts_with(d));
    let mut read_only = Vec::new();
    for h in hide {
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
    // `/sys` is shown only when declared, and then without the firmware.
    for d in KERNEL_MASKED_DIRS.iter().filter(|p| exists(Path::new(p))) {
        v.extend(["--tmpfs".to_string(), d.to_string()]);
        read_only.push(d.to_string());
    }
    // The stand-ins are read-only, so a write there fails like any other
    // outside the touches instead of vanishing into a scratch tmpfs; so is
    // the root that holds the mount points.
    read_only.push("/".to_string());
    for d in read_only {
        v.extend(["--remount-ro".to_string(), d]);
    }
    // Last among the mounts: bubblewrap makes the hidden paths' mount
    // points first, and cannot once their parents are read-only.
    if spec.nothing_writable {
        v.extend(
            [
                "--remount-ro",
                "/tmp",
                "--remount-ro",
                "/dev/shm",
                "--remount-ro",
                "/dev",
            ]
            .map(String::from),
        );
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
    /// No cgroup can bound the cage's memory here: nothing is caged.
    Unbounded(String),
    Filter(std::io::Error),
    Run(ExecError),
}

impl std::fmt::Display for CageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CageError::NoBubblewrap(e) => write!(f, "no cage here: {e}"),
            CageError::Unbounded(why) => write!(
                f,
                "no cage here: its memory cannot be bounded ({why}), and an unbounded cage could take the host's memory"
            ),
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
    run_caged_on(bwrap, spec, &Host::here(spec), program, args, bounds)
}

fn run_caged_on(
    bwrap: &Path,
    spec: &CageSpec,
    host: &Host<'_>,
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
    let group = limits::global().cage().map_err(CageError::Unbounded)?;
    let argv = bwrap_args_with(spec, host, fd, &program.to_string_lossy(), args);
    // The tripwire reads the kernel's count for this cage's group, opened
    // before anything runs in it.
    let tripwire =
        bounds
            .tripwire
            .as_ref()
            .map(|t| match (refused::watch(), group.counting_dir()) {
                (Ok(w), Some(dir)) => match w.counter(dir) {
                    Ok(c) => t.counting(c),
                    Err(_) => t.clone(),
                },
                _ => t.clone(),
            });
    let bounds = Bounds {
        keep_fd: Some(fd),
        cgroup: group.join_fds().with_net(spec.join_net),
        tripwire,
        ..bounds.clone()
    };
    let outcome = exec::run_program(bwrap, &argv, &[], &bounds)
        .map_err(CageError::Run)
        .map(|mut o| {
            o.memory_exceeded = group.memory_exceeded();
            o
        });
    drop(reader);
    drop(group);
    outcome
}

/// Whether the kernel can count a cage's refused writes here
/// (`refused.rs`), tried on a group made for it; why not, in words.
pub fn refused_writes_counted() -> Result<(), String> {
    let w = refused::watch().map_err(String::from)?;
    let group = limits::global().cage()?;
    let dir = group
        .counting_dir()
        .ok_or("the cage has no cgroup v2 group to count in")?;
    w.counter(dir)
        .map(|_| ())
        .map_err(|e| format!("the kernel refused to count (perf events): {e}"))
}

/// Whether this host's bubblewrap sizes a tmpfs (`--size`, 0.7 and
/// later), found once by the isolation probe; unsized until then.
fn tmpfs_sized() -> bool {
    TMPFS_SIZED.get().copied().unwrap_or(false)
}

static TMPFS_SIZED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// Whether a real cage can be built with `bwrap`: a caged `/bin/true`, with
/// every flag and the filter chores get, in a bounded cgroup. `Err` says
/// why not. The first probe also finds whether this bubblewrap sizes a
/// tmpfs: a cage with sized mounts that it refuses is tried unsized.
pub fn probe(bwrap: &Path) -> Result<(), String> {
    limits::global()
        .available()
        .map_err(|why| CageError::Unbounded(why).to_string())?;
    if TMPFS_SIZED.get().is_none() {
        let spec = CageSpec::default();
        let sized = Host {
            tmp_size: Some(limits::global().limits.tmp_bytes),
            ..Host::here(&spec)
        };
        let took_it = (0..PROBE_TRIES).any(|_| caged_true(bwrap, &sized).is_ok());
        let _ = TMPFS_SIZED.set(took_it);
    }
    // A secret under /etc the walk found and another process removed
    // before bubblewrap bound it fails one cage (seen: a test's directory):
    // that is the host moving, not a host without isolation.
    let mut last = Ok(());
    for _ in 0..PROBE_TRIES {
        last = caged_true(bwrap, &Host::here(&CageSpec::default()));
        if last.is_ok() {
            break;
        }
    }
    last
}

/// How many caged `/bin/true` the probe tries before it says there is no
/// isolation.
const PROBE_TRIES: usize = 3;

fn caged_true(bwrap: &Path, host: &Host<'_>) -> Result<(), String> {
    let bounds = Bounds {
        timeout: std::time::Duration::from_secs(10),
        max_output_bytes: 4096,
        low_priority: false,
        keep_fd: None,
        stop: None,
        tripwire: None,
        cgroup: Default::default(),
        known_secrets: Vec::new(),
    };
    match run_caged_on(
        bwrap,
        &CageSpec::default(),
        host,
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
