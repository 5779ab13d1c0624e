//! Writes the cage refused, counted by the kernel: a write outside a
//! chore's touches fails with `EROFS` (everything else is mounted
//! read-only), and the count of system calls of the cage's processes that
//! returned `EROFS` is kept by the kernel itself (a perf event on the
//! `raw_syscalls:sys_exit` tracepoint, filtered in the kernel, for the
//! cage's cgroup v2 group). The Warden reads it while the chore runs and
//! kills the run at the first one.
//!
//! Deciding on the call's result, not on what the chore printed: a line of
//! error output saying "Read-only file system" is no longer evidence (a
//! file so named in a tree another account writes tripped it), and a
//! refused write whose error went to standard output, or nowhere, is
//! counted all the same. Access checks (`access`, `faccessat`,
//! `faccessat2`) also answer `EROFS` for a writable-looking path on a
//! read-only mount without writing anything, so they are left out.
//!
//! Where the kernel cannot count (no tracing filesystem, perf events
//! forbidden, no cgroup v2 group) a refused write is still refused, but
//! not seen: the isolation status says so.

#![forbid(unsafe_code)]

use crate::system::{SyscallCounter, mount_tracefs, online_cpus};
use std::ffi::CString;
use std::path::Path;
use std::sync::OnceLock;

/// What counting needs, found once.
#[derive(Debug)]
pub struct Watch {
    tracepoint: u64,
    filter: CString,
    cpus: Vec<i32>,
}

static WATCH: OnceLock<Result<Watch, String>> = OnceLock::new();

/// The counting set-up of this host, or why there is none.
pub fn watch() -> Result<&'static Watch, &'static str> {
    WATCH.get_or_init(discover).as_ref().map_err(String::as_str)
}

/// The tracepoint's id files, where tracefs is usually found.
const ID_FILES: [&str; 2] = [
    "/sys/kernel/tracing/events/raw_syscalls/sys_exit/id",
    "/sys/kernel/debug/tracing/events/raw_syscalls/sys_exit/id",
];
const TRACEFS: &str = "/sys/kernel/tracing";

fn tracepoint_id() -> Result<u64, String> {
    let read = || {
        ID_FILES
            .iter()
            .find_map(|f| std::fs::read_to_string(f).ok())
            .and_then(|t| t.trim().parse::<u64>().ok())
    };
    if let Some(id) = read() {
        return Ok(id);
    }
    // Not mounted (systemd mounts it; a bare host may not): mounted where
    // systemd would, if that is an empty directory.
    let at = Path::new(TRACEFS);
    let empty = std::fs::read_dir(at).is_ok_and(|mut d| d.next().is_none());
    if empty {
        mount_tracefs(at)
            .map_err(|e| format!("the tracing filesystem cannot be mounted at {TRACEFS}: {e}"))?;
    }
    read().ok_or_else(|| "the kernel's raw_syscalls:sys_exit tracepoint is not to be found (no tracing filesystem)".to_string())
}

/// The filter: `EROFS`, but for the access checks.
fn filter() -> CString {
    let mut f = format!("ret == -{}", libc::EROFS);
    #[cfg(target_arch = "x86_64")]
    f.push_str(&format!(" && id != {}", libc::SYS_access));
    f.push_str(&format!(
        " && id != {} && id != {}",
        libc::SYS_faccessat,
        libc::SYS_faccessat2
    ));
    // No NUL can be in what was formatted from numbers.
    CString::new(f).unwrap_or_default()
}

fn discover() -> Result<Watch, String> {
    let tracepoint = tracepoint_id()?;
    let cpus = online_cpus().map_err(|e| format!("the online CPUs cannot be read: {e}"))?;
    Ok(Watch {
        tracepoint,
        filter: filter(),
        cpus,
    })
}

impl Watch {
    /// A counter of the refused writes of the processes in the v2 group
    /// `dir`.
    pub fn counter(&self, dir: &Path) -> std::io::Result<SyscallCounter> {
        SyscallCounter::for_cgroup(dir, self.tracepoint, &self.filter, &self.cpus)
    }
}

/// In words, for the isolation status: `counted` is what
/// `cage::refused_writes_counted` found.
pub fn describe(counted: &Result<(), String>) -> String {
    match counted {
        Ok(()) => {
            "a write outside a chore's touches is counted by the kernel and stops the chore".into()
        }
        Err(why) => format!("a write outside a chore's touches is refused but not counted ({why})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_counts_erofs_but_not_access_checks() {
        let f = filter().into_string().unwrap();
        assert!(f.starts_with("ret == -30 && "), "{f}");
        assert!(
            f.contains(&format!("id != {}", libc::SYS_faccessat2)),
            "{f}"
        );
    }
}
