//! The cage's seccomp filter, built here as classic BPF (no libseccomp):
//! check the architecture, kill x32, refuse `socket` and `socketpair` for
//! `AF_UNIX` comparing only the low 32 bits of the family (the kernel
//! truncates the argument to an int: a filter comparing 64 bits lets
//! `socket(0x100000001, …)` through), and refuse `io_uring_setup/enter/
//! register`, `ptrace`, `process_vm_readv/writev`. Everything else is
//! allowed: the cage's mounts, capabilities and `no_new_privs` do the rest.

//! The cage's seccomp filter, built here as classic BPF (no libseccomp):
//! check the architecture, kill x32, then
//! - `socket` and `socketpair`: allowed only for `AF_INET`, `AF_INET6` and
//!   `AF_NETLINK`, every other family (`AF_UNIX`, `AF_VSOCK` — which no
//!   network namespace scopes —, `AF_PACKET`, …) refused with EPERM,
//!   comparing only the low 32 bits of the family (the kernel truncates
//!   the argument to an int: a filter comparing 64 bits lets
//!   `socket(0x100000001, …)` through);
//! - `unshare` and `clone` with `CLONE_NEWUSER` in the flags refused (a new
//!   user namespace gives back every capability inside it, and with them
//!   the kernel's less guarded code); `clone3` fails with ENOSYS, since its
//!   flags are behind a pointer seccomp cannot read, so libc falls back to
//!   `clone`, which the filter can judge (Docker's profile does the same);
//! - refused whatever their arguments: `io_uring_setup/enter/register`,
//!   `ptrace`, `process_vm_readv/writev`, `perf_event_open`, `bpf`,
//!   `userfaultfd`, `keyctl`, `add_key`, `request_key`.
//!
//! Everything else is allowed: the cage's mounts, capabilities and
//! `no_new_privs` do the rest.

#![forbid(unsafe_code)]

const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x15;
const BPF_JGE_K: u16 = 0x35;
const BPF_JSET_K: u16 = 0x45;
const BPF_RET_K: u16 = 0x06;

pub const RET_KILL_PROCESS: u32 = 0x8000_0000;
pub const RET_ERRNO: u32 = 0x0005_0000;
pub const RET_ALLOW: u32 = 0x7fff_0000;

pub const EPERM: u32 = 1;
pub const ENOSYS: u32 = 38;

/// The socket families a chore may open: the network (when its header
/// asks; otherwise an empty network namespace) and netlink, which `ip` and
/// friends read their own namespace through.
pub const ALLOWED_FAMILIES: [u32; 3] = [AF_INET, AF_INET6, AF_NETLINK];
const AF_INET: u32 = 2;
const AF_INET6: u32 = 10;
const AF_NETLINK: u32 = 16;

/// `CLONE_NEWUSER`, in the low 32 bits of both `clone`'s and `unshare`'s
/// flags.
pub const CLONE_NEWUSER: u32 = 0x1000_0000;

/// `struct seccomp_data` offsets.
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
/// The low 32 bits of `args[0]` on a little-endian machine.
const OFF_ARG0_LOW: u32 = 16;

/// System call numbers and the audit architecture of the build target.
#[cfg(target_arch = "x86_64")]
pub mod arch {
    pub const AUDIT_ARCH: u32 = 0xc000_003e;
    pub const X32_BIT: u32 = 0x4000_0000;
    pub const SOCKET: u32 = 41;
    pub const SOCKETPAIR: u32 = 53;
    pub const CLONE: u32 = 56;
    pub const PTRACE: u32 = 101;
    pub const ADD_KEY: u32 = 248;
    pub const REQUEST_KEY: u32 = 249;
    pub const KEYCTL: u32 = 250;
    pub const UNSHARE: u32 = 272;
    pub const PERF_EVENT_OPEN: u32 = 298;
    pub const PROCESS_VM_READV: u32 = 310;
    pub const PROCESS_VM_WRITEV: u32 = 311;
    pub const BPF: u32 = 321;
    pub const USERFAULTFD: u32 = 323;
    pub const IO_URING_SETUP: u32 = 425;
    pub const IO_URING_ENTER: u32 = 426;
    pub const IO_URING_REGISTER: u32 = 427;
    pub const CLONE3: u32 = 435;
}

#[cfg(not(target_arch = "x86_64"))]
compile_error!("the cage's seccomp filter knows the system call numbers of x86_64 only");

/// One `struct sock_filter`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insn {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

/// The system calls refused with EPERM whatever their arguments.
pub const REFUSED: [u32; 12] = [
    arch::IO_URING_SETUP,
    arch::IO_URING_ENTER,
    arch::IO_URING_REGISTER,
    arch::PTRACE,
    arch::PROCESS_VM_READV,
    arch::PROCESS_VM_WRITEV,
    arch::PERF_EVENT_OPEN,
    arch::BPF,
    arch::USERFAULTFD,
    arch::KEYCTL,
    arch::ADD_KEY,
    arch::REQUEST_KEY,
];

/// Where a jump goes: the next instruction, or one of the labelled blocks
/// at the end of the program.
#[derive(Clone, Copy, PartialEq, Eq)]
enum To {
    Next,
    /// Over the next instruction (a kill).
    OverOne,
    Family,
    Flags,
    Allow,
    Eperm,
    Enosys,
}

enum Op {
    Load(u32),
    Jump(u16, u32, To, To),
    Ret(u32),
    Label(To),
}

/// The program, with symbolic jumps; [`program`] resolves them.
fn ops() -> Vec<Op> {
    use Op::*;
    let mut p = vec![
        Load(OFF_ARCH),
        Jump(BPF_JEQ_K, arch::AUDIT_ARCH, To::OverOne, To::Next),
        Ret(RET_KILL_PROCESS),
        Load(OFF_NR),
        Jump(BPF_JGE_K, arch::X32_BIT, To::Next, To::OverOne),
        Ret(RET_KILL_PROCESS),
    ];
    p.extend(
        REFUSED
            .iter()
            .map(|nr| Jump(BPF_JEQ_K, *nr, To::Eperm, To::Next)),
    );
    p.extend([
        Jump(BPF_JEQ_K, arch::CLONE3, To::Enosys, To::Next),
        Jump(BPF_JEQ_K, arch::SOCKET, To::Family, To::Next),
        Jump(BPF_JEQ_K, arch::SOCKETPAIR, To::Family, To::Next),
        Jump(BPF_JEQ_K, arch::UNSHARE, To::Flags, To::Next),
        Jump(BPF_JEQ_K, arch::CLONE, To::Flags, To::Allow),
        Label(To::Family),
        Load(OFF_ARG0_LOW),
    ]);
    p.extend(
        ALLOWED_FAMILIES
            .iter()
            .map(|af| Jump(BPF_JEQ_K, *af, To::Allow, To::Next)),
    );
    p.extend([
        Ret(RET_ERRNO | EPERM),
        Label(To::Flags),
        Load(OFF_ARG0_LOW),
        Jump(BPF_JSET_K, CLONE_NEWUSER, To::Eperm, To::Allow),
        Label(To::Allow),
        Ret(RET_ALLOW),
        Label(To::Eperm),
        Ret(RET_ERRNO | EPERM),
        Label(To::Enosys),
        Ret(RET_ERRNO | ENOSYS),
    ]);
    p
}

/// The filter program.
pub fn program() -> Vec<Insn> {
    let ops = ops();
    // Each label's instruction index.
    let mut at = Vec::new();
    let mut n = 0usize;
    for op in &ops {
        match op {
            Op::Label(l) => at.push((*l, n)),
            _ => n += 1,
        }
    }
    let mut p = Vec::with_capacity(n);
    for op in &ops {
        let here = p.len();
        // Jumps are relative to the next instruction; the filter is a few
        // dozen instructions, far under the 255 a jump can skip.
        let off = |to: To| -> u8 {
            let target = match to {
                To::Next => here + 1,
                To::OverOne => here + 2,
                l => at
                    .iter()
                    .find(|(m, _)| *m == l)
                    .map_or(here + 1, |(_, i)| *i),
            };
            u8::try_from(target - here - 1).unwrap_or(u8::MAX)
        };
        match op {
            Op::Load(k) => p.push(Insn {
                code: BPF_LD_W_ABS,
                jt: 0,
                jf: 0,
                k: *k,
            }),
            Op::Jump(code, k, t, f) => p.push(Insn {
                code: *code,
                jt: off(*t),
                jf: off(*f),
                k: *k,
            }),
            Op::Ret(k) => p.push(Insn {
                code: BPF_RET_K,
                jt: 0,
                jf: 0,
                k: *k,
            }),
            Op::Label(_) => {}
        }
    }
    p
}

/// The program as the kernel (and bubblewrap's `--seccomp FD`) reads it:
/// an array of `struct sock_filter` in native byte order.
pub fn bytes() -> Vec<u8> {
    program()
        .iter()
        .flat_map(|i| {
            let mut b = Vec::with_capacity(8);
            b.extend_from_slice(&i.code.to_ne_bytes());
            b.push(i.jt);
            b.push(i.jf);
            b.extend_from_slice(&i.k.to_ne_bytes());
            b
        })
        .collect()
}

/// Runs the program on a `seccomp_data` the way the kernel would: for the
/// tests, which check every path through it.
pub fn evaluate(nr: u32, arch_id: u32, arg0: u64) -> u32 {
    let p = program();
    let mut a: u32 = 0;
    let mut pc = 0usize;
    // The evaluator knows only the fields the filter reads: a load of any
    // other one is a bug in the program, and ends the run as a kill.
    let load = |off: u32| match off {
        OFF_NR => Some(nr),
        OFF_ARCH => Some(arch_id),
        OFF_ARG0_LOW => Some(arg0 as u32),
        _ => None,
    };
    while let Some(i) = p.get(pc) {
        pc += 1;
        match i.code {
            BPF_LD_W_ABS => match load(i.k) {
                Some(v) => a = v,
                None => return RET_KILL_PROCESS,
            },
            BPF_JEQ_K => pc += usize::from(if a == i.k { i.jt } else { i.jf }),
            BPF_JGE_K => pc += usize::from(if a >= i.k { i.jt } else { i.jf }),
            BPF_JSET_K => pc += usize::from(if a & i.k != 0 { i.jt } else { i.jf }),
            BPF_RET_K => return i.k,
            _ => return RET_KILL_PROCESS,
        }
    }
    RET_KILL_PROCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    const X86_64: u32 = arch::AUDIT_ARCH;
    const REFUSE: u32 = RET_ERRNO | EPERM;

    #[test]
    fn kills_another_architecture_and_x32() {
        assert_eq!(evaluate(0, 0x4000_0003, 0), RET_KILL_PROCESS);
        assert_eq!(evaluate(arch::X32_BIT | 1, X86_64, 0), RET_KILL_PROCESS);
        assert_eq!(
            evaluate(arch::X32_BIT | arch::SOCKET, X86_64, 2),
            RET_KILL_PROCESS,
            "an x32 socket call is killed, not judged by its family"
        );
    }

    #[test]
    fn refuses_unix_sockets_on_the_low_32_bits_only() {
        assert_eq!(evaluate(arch::SOCKET, X86_64, 1), REFUSE);
        assert_eq!(
            evaluate(arch::SOCKET, X86_64, 0x1_0000_0001),
            REFUSE,
            "the high bits must not hide AF_UNIX"
        );
        assert_eq!(evaluate(arch::SOCKETPAIR, X86_64, 1), REFUSE);
        assert_eq!(
            evaluate(arch::SOCKET, X86_64, 2),
            RET_ALLOW,
            "AF_INET is the network's business"
        );
        assert_eq!(evaluate(arch::SOCKETPAIR, X86_64, 2), RET_ALLOW);
    }

    #[test]
    fn allows_only_inet_inet6_and_netlink_sockets_by_the_low_32_bits() {
        for call in [arch::SOCKET, arch::SOCKETPAIR] {
            for af in ALLOWED_FAMILIES {
                assert_eq!(evaluate(call, X86_64, af.into()), RET_ALLOW, "{call} {af}");
                // The kernel reads an int: high bits change nothing.
                let high = u64::from(af) | 0xffff_ffff_0000_0000;
                assert_eq!(evaluate(call, X86_64, high), RET_ALLOW, "{call} {high:#x}");
            }
            // Every other family the kernel knows (AF_MAX is under 64), and
            // more: refused, with or without high bits.
            for af in (0..=64u64).chain([255, 0xffff_ffff]) {
                if ALLOWED_FAMILIES.iter().any(|a| u64::from(*a) == af) {
                    continue;
                }
                assert_eq!(evaluate(call, X86_64, af), REFUSE, "{call} {af}");
                assert_eq!(
                    evaluate(call, X86_64, af | 0x1_0000_0000),
                    REFUSE,
                    "{call} {af} with high bits"
                );
            }
            // AF_VSOCK (40), which no network namespace scopes, and
            // AF_PACKET (17), raw frames, by name.
            assert_eq!(evaluate(call, X86_64, 40), REFUSE);
            assert_eq!(evaluate(call, X86_64, 0x7_0000_0028), REFUSE);
            assert_eq!(evaluate(call, X86_64, 17), REFUSE);
            // A family that is an allowed one in the high bits only is not.
            assert_eq!(evaluate(call, X86_64, 0x2_0000_0028), REFUSE);
        }
    }

    #[test]
    fn refuses_a_new_user_namespace_by_unshare_or_clone_and_clone3_falls_back() {
        for call in [arch::UNSHARE, arch::CLONE] {
            assert_eq!(evaluate(call, X86_64, CLONE_NEWUSER.into()), REFUSE);
            // Among other flags, and with high bits set.
            let flags = u64::from(CLONE_NEWUSER) | 0x0002_0000 | 0x11;
            assert_eq!(evaluate(call, X86_64, flags), REFUSE, "{call}");
            assert_eq!(
                evaluate(call, X86_64, flags | 0xffff_ffff_0000_0000),
                REFUSE
            );
            // Other namespaces and a plain fork: the cage runs as root
            // without capabilities, so the kernel refuses those itself, or
            // they are harmless.
            assert_eq!(evaluate(call, X86_64, 0x0002_0000), RET_ALLOW, "{call}");
            assert_eq!(evaluate(call, X86_64, 0), RET_ALLOW, "{call}");
            assert_eq!(evaluate(call, X86_64, 0x11), RET_ALLOW, "{call} SIGCHLD");
            assert_eq!(
                evaluate(call, X86_64, 0x1_0000_0011),
                RET_ALLOW,
                "high bits are not CLONE_NEWUSER"
            );
        }
        // clone3's flags are behind a pointer: ENOSYS whatever it points at,
        // so libc falls back to clone.
        for arg in [0, u64::from(CLONE_NEWUSER), 0x7fff_0000_1000] {
            assert_eq!(evaluate(arch::CLONE3, X86_64, arg), RET_ERRNO | ENOSYS);
        }
    }

    #[test]
    fn refuses_io_uring_ptrace_process_vm_perf_bpf_userfaultfd_and_keys() {
        for nr in REFUSED {
            for arg in [0, 1, 2, 0xffff_ffff_ffff_ffff] {
                assert_eq!(evaluate(nr, X86_64, arg), REFUSE, "syscall {nr}");
            }
        }
        for nr in [
            arch::PERF_EVENT_OPEN,
            arch::BPF,
            arch::USERFAULTFD,
            arch::KEYCTL,
            arch::ADD_KEY,
            arch::REQUEST_KEY,
        ] {
            assert!(REFUSED.contains(&nr), "{nr}");
        }
        assert_eq!(evaluate(0, X86_64, 0), RET_ALLOW, "read");
        assert_eq!(evaluate(59, X86_64, 0), RET_ALLOW, "execve");
        assert_eq!(evaluate(57, X86_64, 0), RET_ALLOW, "fork");
        assert_eq!(evaluate(58, X86_64, 0), RET_ALLOW, "vfork");
    }

    #[test]
    fn the_system_call_numbers_are_the_kernels() {
        let ours = [
            (arch::SOCKET, libc::SYS_socket),
            (arch::SOCKETPAIR, libc::SYS_socketpair),
            (arch::CLONE, libc::SYS_clone),
            (arch::CLONE3, libc::SYS_clone3),
            (arch::UNSHARE, libc::SYS_unshare),
            (arch::PTRACE, libc::SYS_ptrace),
            (arch::ADD_KEY, libc::SYS_add_key),
            (arch::REQUEST_KEY, libc::SYS_request_key),
            (arch::KEYCTL, libc::SYS_keyctl),
            (arch::PERF_EVENT_OPEN, libc::SYS_perf_event_open),
            (arch::PROCESS_VM_READV, libc::SYS_process_vm_readv),
            (arch::PROCESS_VM_WRITEV, libc::SYS_process_vm_writev),
            (arch::BPF, libc::SYS_bpf),
            (arch::USERFAULTFD, libc::SYS_userfaultfd),
            (arch::IO_URING_SETUP, libc::SYS_io_uring_setup),
            (arch::IO_URING_ENTER, libc::SYS_io_uring_enter),
            (arch::IO_URING_REGISTER, libc::SYS_io_uring_register),
        ];
        for (n, theirs) in ours {
            assert_eq!(i64::from(n), theirs);
        }
        assert_eq!(CLONE_NEWUSER as i32, libc::CLONE_NEWUSER);
        assert_eq!(
            ALLOWED_FAMILIES.map(|a| a as i32),
            [libc::AF_INET, libc::AF_INET6, libc::AF_NETLINK]
        );
    }

    #[test]
    fn the_program_is_exactly_this() {
        let j = |code, k, jt, jf| Insn { code, jt, jf, k };
        let ld = |k| j(BPF_LD_W_ABS, k, 0, 0);
        let ret = |k| j(BPF_RET_K, k, 0, 0);
        let want = vec![
            ld(OFF_ARCH),
            j(BPF_JEQ_K, arch::AUDIT_ARCH, 1, 0),
            ret(RET_KILL_PROCESS),
            ld(OFF_NR),
            j(BPF_JGE_K, arch::X32_BIT, 0, 1),
            ret(RET_KILL_PROCESS),
            // 6..=17: the refused list, each to RET EPERM at 31.
            j(BPF_JEQ_K, arch::IO_URING_SETUP, 24, 0),
            j(BPF_JEQ_K, arch::IO_URING_ENTER, 23, 0),
            j(BPF_JEQ_K, arch::IO_URING_REGISTER, 22, 0),
            j(BPF_JEQ_K, arch::PTRACE, 21, 0),
            j(BPF_JEQ_K, arch::PROCESS_VM_READV, 20, 0),
            j(BPF_JEQ_K, arch::PROCESS_VM_WRITEV, 19, 0),
            j(BPF_JEQ_K, arch::PERF_EVENT_OPEN, 18, 0),
            j(BPF_JEQ_K, arch::BPF, 17, 0),
            j(BPF_JEQ_K, arch::USERFAULTFD, 16, 0),
            j(BPF_JEQ_K, arch::KEYCTL, 15, 0),
            j(BPF_JEQ_K, arch::ADD_KEY, 14, 0),
            j(BPF_JEQ_K, arch::REQUEST_KEY, 13, 0),
            // 18: clone3 to RET ENOSYS at 32.
            j(BPF_JEQ_K, arch::CLONE3, 13, 0),
            // 19, 20: the socket calls to the family check at 23.
            j(BPF_JEQ_K, arch::SOCKET, 3, 0),
            j(BPF_JEQ_K, arch::SOCKETPAIR, 2, 0),
            // 21, 22: unshare and clone to the flags check at 28; anything
            // else to RET ALLOW at 30.
            j(BPF_JEQ_K, arch::UNSHARE, 6, 0),
            j(BPF_JEQ_K, arch::CLONE, 5, 7),
            // 23: the family's low 32 bits; an allowed one to RET ALLOW.
            ld(OFF_ARG0_LOW),
            j(BPF_JEQ_K, AF_INET, 5, 0),
            j(BPF_JEQ_K, AF_INET6, 4, 0),
            j(BPF_JEQ_K, AF_NETLINK, 3, 0),
            ret(RET_ERRNO | EPERM),
            // 28: the flags' low 32 bits; CLONE_NEWUSER to RET EPERM.
            ld(OFF_ARG0_LOW),
            j(BPF_JSET_K, CLONE_NEWUSER, 1, 0),
            ret(RET_ALLOW),
            ret(RET_ERRNO | EPERM),
            ret(RET_ERRNO | ENOSYS),
        ];
        assert_eq!(program(), want);
    }

    #[test]
    fn serialises_eight_bytes_an_instruction() {
        assert_eq!(bytes().len(), program().len() * 8);
    }
}
