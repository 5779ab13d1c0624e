//! The raw system calls the probe makes to show the seccomp filter refuses
//! them. Each is called with arguments that do nothing lasting if the
//! kernel does take them: the probe runs on the host's kernel, and on the
//! code before a fix these calls go through. The probe's only `unsafe`.

#![allow(unsafe_code)]

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
    let rc = unsafe { libc::syscall(libc::SYS_unshare, libc::c_long::from(libc::CLONE_NEWUSER)) };
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
