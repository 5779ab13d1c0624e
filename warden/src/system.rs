//! The Warden's only `unsafe`: the system calls the standard library does
//! not offer. Each call has a `// SAFETY:` line; every other module of the
//! Warden is `#![forbid(unsafe_code)]`.

#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::process::CommandExt;

/// Who is on the other end of a Unix socket, as the kernel says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerCred {
    pub pid: i32,
    pub uid: u32,
    pub gid: u32,
}

/// `getsockopt(SO_PEERCRED)`: the credentials the peer had when it
/// connected. (`UnixStream::peer_cred` is not stable.)
pub fn peer_cred(socket: &impl AsRawFd) -> io::Result<PeerCred> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: u32::MAX,
        gid: u32::MAX,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes of the sizes passed, and
    // the kernel writes at most `len` bytes; the fd is borrowed for the call.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut cred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    if len as usize != std::mem::size_of::<libc::ucred>() {
        return Err(io::Error::other("SO_PEERCRED returned a short structure"));
    }
    Ok(PeerCred {
        pid: cred.pid,
        uid: cred.uid,
        gid: cred.gid,
    })
}

const IOPRIO_WHO_PROCESS: libc::c_long = 1;
const IOPRIO_CLASS_IDLE: libc::c_long = 3;
const IOPRIO_CLASS_SHIFT: u32 = 13;

/// Arranges for the child, between fork and exec, to start a new session
/// (so it and everything it starts form one process group to kill whole),
/// to mark every inherited descriptor above stderr close-on-exec, and — for
/// `low_priority` — to lower its CPU priority to nice 19 and its IO class to
/// idle, by system calls (never by spawning `nice`).
///
/// `keep` is one descriptor to hand down across exec (the cage's seccomp
/// filter for bubblewrap); it keeps its number.
pub fn confine_child(
    cmd: &mut std::process::Command,
    low_priority: bool,
    keep: Option<RawFd>,
    join: crate::cage::limits::JoinFds,
) {
    let hook = move || -> io::Result<()> {
        // SAFETY: setsid, setpriority, write and raw syscalls are
        // async-signal-safe and touch no memory of the parent; this runs in
        // the forked child.
        unsafe {
            // Into the run's own network namespace first (a skill's run
            // whose only way out is the Warden's proxy): bubblewrap then
            // keeps it (`--share-net`) and unshares the rest.
            if let Some(fd) = join.net()
                && libc::setns(fd, libc::CLONE_NEWNET) != 0
            {
                return Err(io::Error::last_os_error());
            }
            // Into the cage's cgroups next: nothing it runs is outside
            // them ("0" is the writing process).
            for &fd in join.as_slice() {
                if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                    return Err(io::Error::last_os_error());
                }
            }
            // A cage is the first the OOM killer takes, never the Warden
            // (whose unit sets -900, which children inherit).
            if !join.as_slice().is_empty() {
                let fd = libc::open(
                    c"/proc/self/oom_score_adj".as_ptr(),
                    libc::O_WRONLY | libc::O_CLOEXEC,
                );
                if fd < 0 {
                    return Err(io::Error::last_os_error());
                }
                let wrote = libc::write(fd, b"1000".as_ptr().cast(), 4);
                libc::close(fd);
                if wrote != 4 {
                    return Err(io::Error::last_os_error());
                }
            }
            if libc::setsid() < 0 {
                return Err(io::Error::last_os_error());
            }
            // CLOEXEC rather than close: the standard library's own
            // exec-error pipe must stay open until exec.
            if libc::syscall(
                libc::SYS_close_range,
                3u32,
                u32::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
            if let Some(fd) = keep
                && libc::fcntl(fd, libc::F_SETFD, 0) != 0
            {
                return Err(io::Error::last_os_error());
            }
            if low_priority {
                if libc::setpriority(libc::PRIO_PROCESS, 0, 19) != 0 {
                    return Err(io::Error::last_os_error());
                }
                let prio = IOPRIO_CLASS_IDLE << IOPRIO_CLASS_SHIFT;
                if libc::syscall(libc::SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0, prio) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
        }
        Ok(())
    };
    // SAFETY: the hook only makes async-signal-safe system calls and does
    // not allocate or take locks.
    unsafe {
        cmd.pre_exec(hook);
    }
}

/// A network namespace of its own with only loopback, brought up, and a
/// TCP listener on 127.0.0.1 in it (its port chosen by the kernel): the
/// namespace's descriptor and the listener. Made by a thread of its own,
/// which alone enters the namespace and then ends; the descriptor and the
/// listening socket keep the namespace, whichever thread serves it.
pub fn loopback_namespace() -> io::Result<(std::os::fd::OwnedFd, std::net::TcpListener)> {
    std::thread::Builder::new()
        .name("netns".into())
        .spawn(
            || -> io::Result<(std::os::fd::OwnedFd, std::net::TcpListener)> {
                // SAFETY: unshare takes flags only; CLONE_NEWNET moves this
                // thread alone into a new network namespace.
                if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
                    return Err(io::Error::last_os_error());
                }
                loopback_up()?;
                let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
                let ns = std::fs::File::open("/proc/thread-self/ns/net")?;
                Ok((std::os::fd::OwnedFd::from(ns), listener))
            },
        )?
        .join()
        .map_err(|_| io::Error::other("the network namespace's thread panicked"))?
}

/// The inode of the network namespace socket `fd` belongs to
/// (`SIOCGSKNS`): how the egress tests tell a run's sockets from the
/// Warden's others.
pub fn socket_namespace(fd: RawFd) -> io::Result<u64> {
    const SIOCGSKNS: libc::c_ulong = 0x894C;
    // SAFETY: an ioctl on a descriptor number, taking no pointer; a number
    // that is not a socket (or was closed meanwhile) makes it fail.
    let ns = unsafe { libc::ioctl(fd, SIOCGSKNS) };
    if ns < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just gave us this descriptor; nothing else owns it.
    let ns = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(ns) };
    let file = std::fs::File::from(ns);
    Ok(std::os::unix::fs::MetadataExt::ino(&file.metadata()?))
}

/// Brings `lo` up in the calling thread's network namespace.
fn loopback_up() -> io::Result<()> {
    // SAFETY: socket takes integers and returns a new descriptor or -1.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a descriptor just made and owned by nothing else.
    let sock = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) };
    // SAFETY: `ifreq` is plain data; all zeroes is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (to, from) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *to = *from as libc::c_char;
    }
    // SAFETY: `req` is a valid `ifreq` the kernel reads and writes for
    // these two requests; the descriptor is borrowed for each call.
    unsafe {
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &raw mut req) != 0 {
            return Err(io::Error::last_os_error());
        }
        req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &raw const req) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// `struct perf_event_attr` as of its first version (64 bytes), which every
/// kernel takes: enough for a counting tracepoint.
#[repr(C)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

const PERF_TYPE_TRACEPOINT: u32 = 2;
const PERF_FLAG_PID_CGROUP: libc::c_ulong = 1 << 2;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
/// `_IOW('$', 6, char *)`.
const PERF_EVENT_IOC_SET_FILTER: libc::c_ulong = 0x4008_2406;

/// A kernel counter of the system calls of every process in one cgroup v2
/// group that ended as a tracepoint filter says (one counter per online
/// CPU, as a cgroup's events must be; their sum is the count). Counted in
/// the kernel as the calls return, so what is counted is what the kernel
/// did, whatever the process printed.
pub struct SyscallCounter {
    per_cpu: Vec<std::fs::File>,
}

impl SyscallCounter {
    /// Counts the exits of tracepoint `tracepoint` (`raw_syscalls:sys_exit`'s
    /// id) matching `filter` for the processes in the group `dir`.
    pub fn for_cgroup(
        dir: &std::path::Path,
        tracepoint: u64,
        filter: &std::ffi::CStr,
        cpus: &[i32],
    ) -> io::Result<SyscallCounter> {
        use std::os::fd::FromRawFd;
        let group = std::fs::File::open(dir)?;
        let attr = PerfEventAttr {
            kind: PERF_TYPE_TRACEPOINT,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config: tracepoint,
            sample_period: 0,
            sample_type: 0,
            read_format: 0,
            flags: 0,
            wakeup_events: 0,
            bp_type: 0,
            config1: 0,
        };
        let mut per_cpu = Vec::with_capacity(cpus.len());
        for &cpu in cpus {
            // SAFETY: `attr` is a valid, fully initialised attribute of the
            // size it states; the group descriptor is open for the call.
            let fd = unsafe {
                libc::syscall(
                    libc::SYS_perf_event_open,
                    &attr as *const PerfEventAttr,
                    group.as_raw_fd() as libc::c_long,
                    cpu as libc::c_long,
                    -1 as libc::c_long,
                    PERF_FLAG_PID_CGROUP | PERF_FLAG_FD_CLOEXEC,
                )
            };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            let fd =
                RawFd::try_from(fd).map_err(|_| io::Error::other("descriptor out of range"))?;
            // SAFETY: `fd` is a fresh descriptor nothing else owns.
            let file = unsafe { std::fs::File::from_raw_fd(fd) };
            // SAFETY: the filter is a NUL-terminated string alive for the call.
            if unsafe { libc::ioctl(file.as_raw_fd(), PERF_EVENT_IOC_SET_FILTER, filter.as_ptr()) }
                != 0
            {
                return Err(io::Error::last_os_error());
            }
            per_cpu.push(file);
        }
        Ok(SyscallCounter { per_cpu })
    }

    /// The count so far.
    pub fn total(&self) -> io::Result<u64> {
        use std::io::Read;
        let mut total = 0u64;
        for mut f in &self.per_cpu {
            let mut b = [0u8; 8];
            f.read_exact(&mut b)?;
            total = total.saturating_add(u64::from_ne_bytes(b));
        }
        Ok(total)
    }
}

/// The online CPUs, from `/sys/devices/system/cpu/online` (`0-3,6`).
pub fn online_cpus() -> io::Result<Vec<i32>> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online")?;
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let bad = || io::Error::other(format!("an unreadable CPU list: {text:?}"));
        let (a, b): (i32, i32) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
        if b < a || b - a > 4096 {
            return Err(bad());
        }
        cpus.extend(a..=b);
    }
    Ok(cpus)
}

/// Mounts the kernel's tracing filesystem at `at` (where systemd mounts it
/// too), for the ids of its tracepoints.
pub fn mount_tracefs(at: &std::path::Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let target = std::ffi::CString::new(at.as_os_str().as_bytes())
        .map_err(|_| io::Error::other("a path with a NUL byte"))?;
    // SAFETY: every pointer is a NUL-terminated string alive for the call.
    let rc = unsafe {
        libc::mount(
            c"tracefs".as_ptr(),
            target.as_ptr(),
            c"tracefs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sends SIGKILL to the process `pid` (a straggler in a cage's cgroup).
pub fn kill_pid(pid: u32) -> io::Result<()> {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return Err(io::Error::other("process id out of range"));
    };
    if pid <= 1 {
        return Err(io::Error::other("refusing to signal process 0 or 1"));
    }
    // SAFETY: kill takes plain integers.
    if unsafe { libc::kill(pid, libc::SIGKILL) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sends SIGKILL to every process of the group `pgid`.
pub fn kill_group(pgid: u32) -> io::Result<()> {
    let Ok(pgid) = libc::pid_t::try_from(pgid) else {
        return Err(io::Error::other("process group id out of range"));
    };
    if pgid <= 1 {
        return Err(io::Error::other("refusing to signal process group 0 or 1"));
    }
    // SAFETY: kill takes plain integers; a negative pid names the group.
    let rc = unsafe { libc::kill(-pgid, libc::SIGKILL) };
    if rc != 0 {
        let e = io::Error::last_os_error();
        // The group is already gone: that is what we wanted.
        if e.raw_os_error() != Some(libc::ESRCH) {
            return Err(e);
        }
    }
    Ok(())
}

/// The real and effective uid of this process.
pub fn euid() -> u32 {
    // SAFETY: geteuid cannot fail and takes no arguments.
    unsafe { libc::geteuid() }
}

pub fn raw_fd(fd: &impl AsRawFd) -> RawFd {
    fd.as_raw_fd()
}

/// What happened to a watched honeypot, from an inotify event's mask.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Touched {
    /// Opened or read.
    Opened,
    /// Its inode was renamed (within or out of its directory).
    Moved,
    /// Its last link was removed.
    Deleted,
    /// The kernel dropped the watch (after a delete, or an unmount).
    Unwatched,
    /// A name in a watched directory was removed, or renamed from or to.
    Entry,
    /// The queue overflowed: events were lost.
    Overflow,
    /// Nothing this watch asked for.
    Other,
}

impl Touched {
    fn of(mask: u32) -> Touched {
        if mask & libc::IN_Q_OVERFLOW != 0 {
            Touched::Overflow
        } else if mask & (libc::IN_OPEN | libc::IN_ACCESS) != 0 {
            Touched::Opened
        } else if mask & libc::IN_DELETE_SELF != 0 {
            Touched::Deleted
        } else if mask & libc::IN_MOVE_SELF != 0 {
            Touched::Moved
        } else if mask & libc::IN_IGNORED != 0 {
            Touched::Unwatched
        } else if mask & (libc::IN_DELETE | libc::IN_MOVED_FROM | libc::IN_MOVED_TO) != 0 {
            Touched::Entry
        } else {
            Touched::Other
        }
    }
}

/// What a honeypot's watch asks for: opens and reads, its removal, its
/// move.
const OPENS: u32 = libc::IN_OPEN | libc::IN_ACCESS | libc::IN_DELETE_SELF | libc::IN_MOVE_SELF;

fn proc_fd(file: &std::fs::File) -> std::path::PathBuf {
    std::path::PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()))
}

/// An inotify instance watching files for opens (honeypots).
pub struct Inotify {
    file: std::fs::File,
}

impl Inotify {
    pub fn new() -> io::Result<Inotify> {
        // SAFETY: inotify_init1 takes a flag and returns a new descriptor or -1.
        let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor nothing else owns.
        let owned = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        Ok(Inotify {
            file: std::fs::File::from(owned),
        })
    }

    /// Watches `path` for opens and reads, and for its removal or move;
    /// returns the watch descriptor. A symbolic link at `path` is watched
    /// itself, never followed (the honeypots lie in directories the Worker
    /// can write).
    pub fn watch_opens(&self, path: &std::path::Path) -> io::Result<i32> {
        self.add_watch(path, OPENS | libc::IN_DONT_FOLLOW)
    }

    /// Watches the file open as `file` for opens and reads, and for its
    /// removal or move: the inode itself, whatever name it has (through
    /// `/proc/self/fd/N`, which the kernel resolves to the open file).
    pub fn watch_opens_of(&self, file: &std::fs::File) -> io::Result<i32> {
        self.add_watch(&proc_fd(file), OPENS)
    }

    /// Watches the directory open as `dir` for names removed from it or
    /// renamed from or to it ([`Touched::Entry`]), and for its own removal
    /// or move: a delete shows here even while a descriptor keeps the
    /// file's inode alive (which holds back the file's own delete event).
    pub fn watch_entries_of(&self, dir: &std::fs::File) -> io::Result<i32> {
        let mask = libc::IN_DELETE
            | libc::IN_MOVED_FROM
            | libc::IN_MOVED_TO
            | libc::IN_DELETE_SELF
            | libc::IN_MOVE_SELF
            | libc::IN_ONLYDIR;
        self.add_watch(&proc_fd(dir), mask)
    }

    fn add_watch(&self, path: &std::path::Path, mask: u32) -> io::Result<i32> {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::other("a path with a NUL byte"))?;
        // SAFETY: `c` is a valid NUL-terminated string for the call's
        // duration; the descriptor is ours.
        let wd = unsafe { libc::inotify_add_watch(self.file.as_raw_fd(), c.as_ptr(), mask) };
        if wd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(wd)
    }

    /// Stops watching `wd` (an error for one the kernel dropped already
    /// is of no consequence to the caller).
    pub fn unwatch(&self, wd: i32) -> io::Result<()> {
        // SAFETY: plain integers; the descriptor is ours.
        if unsafe { libc::inotify_rm_watch(self.file.as_raw_fd(), wd) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Blocks until events arrive; returns each one's watch descriptor and
    /// what it says happened. Another thread may add or remove watches
    /// meanwhile (the kernel allows it on one instance).
    pub fn wait(&self) -> io::Result<Vec<(i32, Touched)>> {
        use std::io::Read;
        let mut buf = [0u8; 4096];
        let n = (&self.file).read(&mut buf)?;
        let mut events = Vec::new();
        let mut at = 0;
        // struct inotify_event { int wd; u32 mask, cookie, len; char name[len]; }
        while at + 16 <= n {
            let wd = i32::from_ne_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]]);
            let mask = u32::from_ne_bytes([buf[at + 4], buf[at + 5], buf[at + 6], buf[at + 7]]);
            let len = u32::from_ne_bytes([buf[at + 12], buf[at + 13], buf[at + 14], buf[at + 15]])
                as usize;
            events.push((wd, Touched::of(mask)));
            at += 16 + len;
        }
        Ok(events)
    }
}

/// `socket(2)` with the family passed as a full 64-bit register, as a caller
/// bent on slipping past a filter that compares only part of it would. The
/// cage's probe uses it to show the filter sees what the kernel sees.
pub fn socket_raw(family: u64, kind: i32) -> io::Result<std::os::fd::OwnedFd> {
    // SAFETY: socket takes plain integers; the result is a new descriptor
    // or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_socket,
            family,
            kind as libc::c_long,
            0 as libc::c_long,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = RawFd::try_from(fd).map_err(|_| io::Error::other("descriptor out of range"))?;
    // SAFETY: `fd` is a fresh descriptor nothing else owns.
    Ok(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
}

/// `ioctl(fd, TIOCSTI, &byte)`: pushes a byte into a terminal's input, as a
/// caged program bent on typing into the owner's shell would. The cage's
/// probe uses it to show the cage leaves no terminal to type into.
pub fn tiocsti(fd: &impl AsRawFd, byte: u8) -> io::Result<()> {
    // SAFETY: TIOCSTI reads one byte through the pointer, which points at a
    // live local; the descriptor is borrowed for the call.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCSTI, &byte as *const u8) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `fstatvfs`: the bytes an unprivileged writer may still use on the
/// filesystem holding `dir` (`f_bavail`: the Warden keeps root's reserve for
/// the system), and the filesystem's size.
pub fn space(dir: &std::path::Path) -> io::Result<(u64, u64)> {
    let f = std::fs::File::open(dir)?;
    // SAFETY: an all-zero statvfs is a valid value of this plain C struct.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is valid for writes of its size and the descriptor is
    // borrowed from `f` for the call.
    let rc = unsafe { libc::fstatvfs(f.as_raw_fd(), &mut st) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // The field types differ between targets; on some they are u64 already.
    #[allow(clippy::useless_conversion)]
    let (avail, blocks, size) = (
        u64::from(st.f_bavail),
        u64::from(st.f_blocks),
        u64::from(st.f_frsize),
    );
    Ok((avail.saturating_mul(size), blocks.saturating_mul(size)))
}

/// `lseek(SEEK_DATA)`: where the first byte of data at or after `offset`
/// in `file` is, or `None` when only a hole (or the end) follows. `Err`
/// with `EINVAL` or `EOPNOTSUPP` where the filesystem cannot say; the
/// caller then copies plainly. Moves the file's offset: use positioned
/// reads after it. (`std::io::SeekFrom` has no `SEEK_DATA`/`SEEK_HOLE`.)
pub fn seek_data(file: &std::fs::File, offset: u64) -> io::Result<Option<u64>> {
    match lseek(file, offset, libc::SEEK_DATA) {
        Err(e) if e.raw_os_error() == Some(libc::ENXIO) => Ok(None),
        other => other.map(Some),
    }
}

/// `lseek(SEEK_HOLE)`: where the first hole at or after `offset` in `file`
/// begins (the end of the file counts as one). As [`seek_data`].
pub fn seek_hole(file: &std::fs::File, offset: u64) -> io::Result<u64> {
    lseek(file, offset, libc::SEEK_HOLE)
}

fn lseek(file: &std::fs::File, offset: u64, whence: i32) -> io::Result<u64> {
    let off =
        libc::off_t::try_from(offset).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: lseek only reads its integer arguments; the descriptor is
    // borrowed from `file` for the call.
    let rc = unsafe { libc::lseek(file.as_raw_fd(), off, whence) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    u64::try_from(rc).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// The value of the extended attribute `name` of `path`, not following a
/// final symbolic link (`lgetxattr`); `None` when the entry has none or its
/// filesystem keeps none.
pub fn lgetxattr(path: &std::path::Path, name: &std::ffi::CStr) -> io::Result<Option<Vec<u8>>> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::other("a path with a NUL byte"))?;
    // The value may grow between the size query and the read: try again.
    for _ in 0..4 {
        // SAFETY: both strings are NUL-terminated and live across the call;
        // a null buffer of size 0 asks only for the value's size.
        let size = unsafe { libc::lgetxattr(c.as_ptr(), name.as_ptr(), std::ptr::null_mut(), 0) };
        if size < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::ENODATA) | Some(libc::ENOTSUP) => Ok(None),
                _ => Err(e),
            };
        }
        let mut buf = vec![0u8; usize::try_from(size).unwrap_or(0)];
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes, the size
        // passed; the kernel writes at most that many.
        let got = unsafe {
            libc::lgetxattr(
                c.as_ptr(),
                name.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        if got >= 0 {
            buf.truncate(usize::try_from(got).unwrap_or(0));
            return Ok(Some(buf));
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::ERANGE) => continue,
            Some(libc::ENODATA) | Some(libc::ENOTSUP) => return Ok(None),
            _ => return Err(e),
        }
    }
    Err(io::Error::other(
        "an extended attribute kept changing size while it was read",
    ))
}

/// Whether `path` has the extended attribute `name`, following a final
/// symbolic link (`getxattr`): meant for `/proc/self/fd/<fd>`, which leads
/// to exactly the inode the descriptor holds (an `O_PATH` one included).
pub fn has_xattr(path: &std::path::Path, name: &std::ffi::CStr) -> io::Result<bool> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::other("a path with a NUL byte"))?;
    // SAFETY: both strings are NUL-terminated and live across the call; a
    // null buffer of size 0 asks only for the value's size.
    let size = unsafe { libc::getxattr(c.as_ptr(), name.as_ptr(), std::ptr::null_mut(), 0) };
    if size >= 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::ENODATA) | Some(libc::ENOTSUP) => Ok(false),
        _ => Err(e),
    }
}

/// Removes the extended attribute `name` of `path`, following a final
/// symbolic link (`removexattr`): meant for `/proc/self/fd/<fd>`, which
/// leads to exactly the inode the descriptor holds. An attribute already
/// absent is no error.
pub fn removexattr(path: &std::path::Path, name: &std::ffi::CStr) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::other("a path with a NUL byte"))?;
    // SAFETY: both strings are NUL-terminated and live across the call.
    let rc = unsafe { libc::removexattr(c.as_ptr(), name.as_ptr()) };
    if rc != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::ENODATA) {
            return Err(e);
        }
    }
    Ok(())
}

/// The raw system calls the cage's probe (tests only) makes to show the
/// seccomp filter refuses them, each with arguments that do nothing lasting
/// if the kernel does take them: the probe runs on the host's kernel, and
/// on the code before a fix these calls go through. They live here because
/// this module is the only `unsafe` of ours; the Warden never calls them.
pub mod probe {
    use std::io;

    /// A result as the probe prints it: `allowed` or `refused: <errno>`.
    fn verdict(rc: libc::c_long) -> io::Result<libc::c_long> {
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(rc)
        }
    }

    /// Closes a descriptor a call returned, if it went through.
    fn close(fd: libc::c_long) {
        if let Ok(fd) = libc::c_int::try_from(fd) {
            // SAFETY: `fd` is a descriptor the call just made and nothing owns.
            unsafe { libc::close(fd) };
        }
    }

    /// `socket(family, kind, 0)` with the family a full 64-bit register.
    pub fn socket(family: u64, kind: i32) -> io::Result<()> {
        // SAFETY: plain integers; the result is a new descriptor or -1.
        let rc = unsafe { libc::syscall(libc::SYS_socket, family, libc::c_long::from(kind), 0) };
        verdict(rc).map(close)
    }

    /// `socketpair(family, kind, 0, sv)` with the family a full 64-bit
    /// register.
    pub fn socketpair(family: u64, kind: i32) -> io::Result<()> {
        let mut sv = [-1 as libc::c_int; 2];
        // SAFETY: `sv` is a live array of two ints the kernel fills.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_socketpair,
                family,
                libc::c_long::from(kind),
                0,
                sv.as_mut_ptr(),
            )
        };
        verdict(rc).map(|_| sv.iter().for_each(|fd| close((*fd).into())))
    }

    /// `unshare(CLONE_NEWUSER)`: the probe's own process, which exits next.
    pub fn unshare_user() -> io::Result<()> {
        // SAFETY: plain flags.
        let rc =
            unsafe { libc::syscall(libc::SYS_unshare, libc::c_long::from(libc::CLONE_NEWUSER)) };
        verdict(rc).map(drop)
    }

    /// `clone(CLONE_NEWUSER | SIGCHLD)` without a new stack: a fork whose child
    /// exits at once; the parent reaps it.
    pub fn clone_user() -> io::Result<()> {
        let flags = libc::c_long::from(libc::CLONE_NEWUSER | libc::SIGCHLD);
        // SAFETY: without CLONE_VM and with a null stack, clone behaves as fork:
        // the child gets a copy of the address space and leaves by `_exit`
        // before touching anything.
        let rc = unsafe { libc::syscall(libc::SYS_clone, flags, 0, 0, 0, 0) };
        if rc == 0 {
            // SAFETY: the child ends here, running no destructor of the
            // parent's state.
            unsafe { libc::_exit(0) };
        }
        let pid = verdict(rc)?;
        let mut status = 0;
        if let Ok(pid) = libc::pid_t::try_from(pid) {
            // SAFETY: `status` is a live int; `pid` is our own child.
            unsafe { libc::waitpid(pid, &mut status, 0) };
        }
        Ok(())
    }

    /// `clone3(NULL, 0)`: the kernel itself says EINVAL (no arguments); the
    /// filter answers first with ENOSYS.
    pub fn clone3() -> io::Result<()> {
        // SAFETY: a null pointer with size 0: the kernel reads nothing.
        let rc = unsafe { libc::syscall(libc::SYS_clone3, 0, 0) };
        verdict(rc).map(drop)
    }

    /// `keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER_KEYRING, 0)`: a lookup that
    /// creates nothing.
    pub fn keyctl() -> io::Result<()> {
        const KEYCTL_GET_KEYRING_ID: libc::c_long = 0;
        const KEY_SPEC_USER_KEYRING: libc::c_long = -4;
        // SAFETY: plain integers.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_keyctl,
                KEYCTL_GET_KEYRING_ID,
                KEY_SPEC_USER_KEYRING,
                0,
            )
        };
        verdict(rc).map(drop)
    }

    /// `bpf(BPF_MAP_CREATE, NULL, 0)`: an all-zero request, which the kernel
    /// refuses as invalid.
    pub fn bpf() -> io::Result<()> {
        // SAFETY: a null pointer with size 0: the kernel reads nothing.
        let rc = unsafe { libc::syscall(libc::SYS_bpf, 0, 0, 0) };
        verdict(rc).map(close)
    }

    /// `perf_event_open(NULL, 0, -1, -1, 0)`: no attributes, which the kernel
    /// refuses (EFAULT).
    pub fn perf_event_open() -> io::Result<()> {
        // SAFETY: a null pointer the kernel fails to read, no more.
        let rc = unsafe { libc::syscall(libc::SYS_perf_event_open, 0, 0, -1, -1, 0) };
        verdict(rc).map(close)
    }

    /// `userfaultfd(O_CLOEXEC | UFFD_USER_MODE_ONLY)`: the kind the kernel
    /// grants without privilege; closed at once.
    pub fn userfaultfd() -> io::Result<()> {
        const UFFD_USER_MODE_ONLY: libc::c_long = 1;
        let flags = libc::c_long::from(libc::O_CLOEXEC) | UFFD_USER_MODE_ONLY;
        // SAFETY: plain flags; the result is a new descriptor or -1.
        let rc = unsafe { libc::syscall(libc::SYS_userfaultfd, flags) };
        verdict(rc).map(close)
    }

    /// A path as the kernel reads it.
    fn c_path(path: &std::path::Path) -> io::Result<std::ffi::CString> {
        use std::os::unix::ffi::OsStrExt;
        std::ffi::CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::other("a path with a NUL byte"))
    }

    /// The calls that set a file's mode, each given the mode as a full
    /// 64-bit register (high bits and all), on a path the probe's cage
    /// owns (its `/tmp`): if the filter lets one through, the file it makes
    /// lives in a tmpfs that ends with the cage.
    #[derive(Clone, Copy, Debug)]
    pub enum ModeCall {
        Chmod,
        Fchmod,
        Fchmodat,
        Fchmodat2,
        Creat,
        Mknod,
        Mknodat,
        /// `open(path, O_WRONLY | O_CREAT, mode)`.
        OpenCreat,
        /// `openat(AT_FDCWD, path, O_WRONLY | O_CREAT, mode)`.
        OpenatCreat,
        /// `open(dir, O_TMPFILE | O_RDWR, mode)`.
        OpenTmpfile,
        /// `openat(AT_FDCWD, dir, O_TMPFILE | O_RDWR, mode)`.
        OpenatTmpfile,
    }

    impl ModeCall {
        pub fn parse(name: &str) -> Option<ModeCall> {
            Some(match name {
                "chmod" => ModeCall::Chmod,
                "fchmod" => ModeCall::Fchmod,
                "fchmodat" => ModeCall::Fchmodat,
                "fchmodat2" => ModeCall::Fchmodat2,
                "creat" => ModeCall::Creat,
                "mknod" => ModeCall::Mknod,
                "mknodat" => ModeCall::Mknodat,
                "open-creat" => ModeCall::OpenCreat,
                "openat-creat" => ModeCall::OpenatCreat,
                "open-tmpfile" => ModeCall::OpenTmpfile,
                "openat-tmpfile" => ModeCall::OpenatTmpfile,
                _ => return None,
            })
        }
    }

    /// Makes `call` on `path` with `mode` in a full register.
    pub fn set_mode(call: ModeCall, path: &std::path::Path, mode: u64) -> io::Result<()> {
        let c = c_path(path)?;
        let p = c.as_ptr();
        let at = libc::c_long::from(libc::AT_FDCWD);
        let creat = libc::c_long::from(libc::O_WRONLY | libc::O_CREAT);
        let tmpfile = libc::c_long::from(libc::O_TMPFILE | libc::O_RDWR);
        // mknod's mode with a regular file's type (no CAP_MKNOD needed).
        let node = mode | u64::from(libc::S_IFREG);
        // SAFETY: `p` is a NUL-terminated path that lives across each call;
        // the other arguments are plain integers; a descriptor the call
        // returns is closed by `close`.
        let rc = unsafe {
            match call {
                ModeCall::Chmod => libc::syscall(libc::SYS_chmod, p, mode),
                ModeCall::Fchmod => {
                    let f = std::fs::File::open(path)?;
                    use std::os::fd::AsRawFd;
                    libc::syscall(libc::SYS_fchmod, f.as_raw_fd(), mode)
                }
                ModeCall::Fchmodat => libc::syscall(libc::SYS_fchmodat, at, p, mode),
                ModeCall::Fchmodat2 => libc::syscall(libc::SYS_fchmodat2, at, p, mode, 0),
                ModeCall::Creat => libc::syscall(libc::SYS_creat, p, mode),
                ModeCall::Mknod => libc::syscall(libc::SYS_mknod, p, node, 0),
                ModeCall::Mknodat => libc::syscall(libc::SYS_mknodat, at, p, node, 0),
                ModeCall::OpenCreat => libc::syscall(libc::SYS_open, p, creat, mode),
                ModeCall::OpenatCreat => libc::syscall(libc::SYS_openat, at, p, creat, mode),
                ModeCall::OpenTmpfile => libc::syscall(libc::SYS_open, p, tmpfile, mode),
                ModeCall::OpenatTmpfile => libc::syscall(libc::SYS_openat, at, p, tmpfile, mode),
            }
        };
        let rc = verdict(rc)?;
        if matches!(
            call,
            ModeCall::Creat
                | ModeCall::OpenCreat
                | ModeCall::OpenatCreat
                | ModeCall::OpenTmpfile
                | ModeCall::OpenatTmpfile
        ) {
            close(rc);
        }
        Ok(())
    }

    /// `openat2(AT_FDCWD, path, {O_WRONLY | O_CREAT, 04755}, size)`: the
    /// filter cannot read the mode in the struct, so it answers ENOSYS.
    pub fn openat2_setuid(path: &std::path::Path) -> io::Result<()> {
        let c = c_path(path)?;
        let how: [u64; 3] = [(libc::O_WRONLY | libc::O_CREAT) as u64, 0o4755, 0];
        // SAFETY: the path and the three-word `struct open_how` live across
        // the call, whose size argument is the struct's.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                libc::AT_FDCWD,
                c.as_ptr(),
                how.as_ptr(),
                std::mem::size_of_val(&how),
            )
        };
        verdict(rc).map(close)
    }

    /// `lsetxattr(path, "security.capability", …)` with a version 2
    /// capability set granting CAP_SETUID, effective: what `setcap
    /// cap_setuid+ep` writes. The kernel wants CAP_SETFCAP for it.
    pub fn set_file_capability(path: &std::path::Path) -> io::Result<()> {
        const VFS_CAP_REVISION_2: u32 = 0x0200_0000;
        const VFS_CAP_FLAGS_EFFECTIVE: u32 = 1;
        const CAP_SETUID: u32 = 7;
        let words = [
            VFS_CAP_REVISION_2 | VFS_CAP_FLAGS_EFFECTIVE,
            1 << CAP_SETUID,
            0,
            0,
            0,
        ];
        let value: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        set_xattr(path, c"security.capability", &value)
    }

    /// `lsetxattr(path, name, value)`.
    pub fn set_xattr(
        path: &std::path::Path,
        name: &std::ffi::CStr,
        value: &[u8],
    ) -> io::Result<()> {
        let c = c_path(path)?;
        // SAFETY: both strings are NUL-terminated and `value` is valid for
        // reads of its length, all live across the call.
        let rc = unsafe {
            libc::lsetxattr(
                c.as_ptr(),
                name.as_ptr(),
                value.as_ptr().cast(),
                value.len(),
                0,
            )
        };
        verdict(libc::c_long::from(rc)).map(drop)
    }
}

/// Each wrapper against the real kernel, on the edges where a wrong size or
/// offset would read or write memory it should not: `.ci/run` also runs
/// these under AddressSanitizer (`scripts/test`), which checks every byte
/// the calls and the parsing after them touch.
#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// A fresh directory of its own under the system's temporary one.
    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("aromba-system-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn peer_cred_names_this_process_at_the_other_end_of_a_socket_pair() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let cred = peer_cred(&a).unwrap();
        assert_eq!(cred.pid, std::process::id() as i32);
        assert_eq!(cred.uid, euid());
    }

    #[test]
    fn inotify_reads_every_event_of_more_than_one_full_buffer_then_a_move_and_a_delete() {
        let dir = scratch("inotify");
        let path = dir.join("honeypot");
        std::fs::write(&path, b"bait").unwrap();
        let watch = Inotify::new().unwrap();
        let wd = watch.watch_opens(&path).unwrap();
        // An open and a read alternate, so the kernel merges none of them:
        // 600 events of 16 bytes, more than one 4 KiB read holds.
        for _ in 0..300 {
            let mut f = std::fs::File::open(&path).unwrap();
            let mut byte = [0u8; 1];
            f.read_exact(&mut byte).unwrap();
        }
        let mut opened = 0;
        while opened < 600 {
            let events = watch.wait().unwrap();
            assert!(
                events.len() <= 4096 / 16,
                "{} events from one read",
                events.len()
            );
            for (got, touched) in events {
                assert_eq!((got, touched), (wd, Touched::Opened));
                opened += 1;
            }
        }
        let moved = dir.join("moved");
        std::fs::rename(&path, &moved).unwrap();
        assert_eq!(watch.wait().unwrap(), vec![(wd, Touched::Moved)]);
        std::fs::remove_file(&moved).unwrap();
        let mut rest = watch.wait().unwrap();
        if rest.len() < 2 {
            rest.extend(watch.wait().unwrap());
        }
        assert_eq!(rest, vec![(wd, Touched::Deleted), (wd, Touched::Unwatched)]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_watch_through_a_descriptor_follows_the_inode_under_any_name() {
        let dir = scratch("inotify-fd");
        let tmp = dir.join(".tmp");
        let file = std::fs::File::create(&tmp).unwrap();
        let watch = Inotify::new().unwrap();
        let wd = watch.watch_opens_of(&file).unwrap();
        let named = dir.join("honeypot");
        std::fs::rename(&tmp, &named).unwrap();
        assert_eq!(watch.wait().unwrap(), vec![(wd, Touched::Moved)]);
        std::fs::read(&named).unwrap();
        assert!(
            watch.wait().unwrap().contains(&(wd, Touched::Opened)),
            "a read under the new name was not seen"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_directory_watch_sees_a_name_removed_while_a_descriptor_keeps_its_inode() {
        use std::os::unix::fs::OpenOptionsExt;
        let dir = scratch("inotify-entries");
        let path = dir.join("honeypot");
        std::fs::write(&path, b"decoy").unwrap();
        let opened_dir = std::fs::File::open(&dir).unwrap();
        let watch = Inotify::new().unwrap();
        let file_wd = watch.watch_opens(&path).unwrap();
        let dir_wd = watch.watch_entries_of(&opened_dir).unwrap();
        assert_ne!(file_wd, dir_wd);
        let held = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH)
            .open(&path)
            .unwrap();
        std::fs::remove_file(&path).unwrap();
        // Only the directory's event: the file's own waits for `held`.
        assert_eq!(watch.wait().unwrap(), vec![(dir_wd, Touched::Entry)]);
        drop(held);
        let mut rest = watch.wait().unwrap();
        if rest.len() < 2 {
            rest.extend(watch.wait().unwrap());
        }
        assert_eq!(
            rest,
            vec![(file_wd, Touched::Deleted), (file_wd, Touched::Unwatched)]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn extended_attributes_read_back_whole_and_absent_ones_read_as_none() {
        let dir = scratch("xattr");
        let path = dir.join("file");
        std::fs::write(&path, b"x").unwrap();
        let name = c"user.aromba_test";
        // Larger than a page, as large as ext4 keeps in one block.
        let value: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
        probe::set_xattr(&path, name, &value).unwrap();
        assert_eq!(lgetxattr(&path, name).unwrap(), Some(value));
        assert_eq!(lgetxattr(&path, c"user.aromba_absent").unwrap(), None);
        let file = std::fs::File::open(&path).unwrap();
        let by_fd = std::path::PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
        assert!(has_xattr(&by_fd, name).unwrap());
        removexattr(&by_fd, name).unwrap();
        removexattr(&by_fd, name).unwrap();
        assert!(!has_xattr(&by_fd, name).unwrap());
        assert_eq!(lgetxattr(&path, name).unwrap(), None);
        let nul = std::path::Path::new(std::ffi::OsStr::from_bytes(b"a\0b"));
        assert!(lgetxattr(nul, name).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn seek_data_and_hole_find_the_one_extent_of_a_sparse_file() {
        use std::os::unix::fs::FileExt;
        let dir = scratch("sparse");
        let path = dir.join("sparse");
        let file = std::fs::File::create(&path).unwrap();
        let at = 1u64 << 20;
        file.write_all_at(&[7u8; 4096], at).unwrap();
        file.set_len(4 * at).unwrap();
        file.sync_all().unwrap();
        let data = seek_data(&file, 0).unwrap().unwrap();
        assert!(data <= at, "data at {data}");
        let hole = seek_hole(&file, at).unwrap();
        assert!(hole >= at + 4096 && hole <= 4 * at, "hole at {hole}");
        assert_eq!(seek_data(&file, 4 * at).unwrap(), None);
        let too_far = seek_data(&file, u64::MAX).unwrap_err();
        assert_eq!(too_far.raw_os_error(), Some(libc::EINVAL));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn space_left_is_within_the_filesystems_size() {
        let (avail, total) = space(&std::env::temp_dir()).unwrap();
        assert!(total > 0 && avail <= total, "{avail} of {total}");
    }
}
