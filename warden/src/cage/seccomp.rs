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
//!   `userfaultfd`, `keyctl`, `add_key`, `request_key`;
//! - a setuid or setgid bit (`S_ISUID | S_ISGID`, 06000) in the mode of
//!   `chmod`, `fchmod`, `fchmodat`, `fchmodat2`, `mknod`, `mknodat`,
//!   `creat`, and of `open`/`openat` when their flags create a file
//!   (`O_CREAT`, or `__O_TMPFILE`, the bit of `O_TMPFILE` that makes the
//!   kernel use the mode): refused with EPERM, on the low 32 bits (the
//!   kernel reads the mode as a `umode_t` and the flags as an int). A file
//!   a chore leaves setuid is host root for anyone who runs it. `openat2`
//!   fails with ENOSYS (its mode is behind a pointer), so libc falls back
//!   to `openat`, which the filter judges;
//! - the `setxattr` family is left to the kernel: file capabilities
//!   (`security.capability`) need CAP_SETFCAP, which the cage drops, and a
//!   user namespace, where it could be regained, is refused above; the
//!   attribute's name is behind a pointer the filter cannot read, and
//!   refusing the whole family would break quiet things (`user.*`
//!   attributes, ACLs) to refuse what the kernel refuses already.
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

/// `S_ISUID | S_ISGID`: a mode with either bit is refused.
pub const SET_ID_BITS: u32 = 0o6000;

/// The flags with which `open` and `openat` use their mode: `O_CREAT`, and
/// `__O_TMPFILE` (`O_TMPFILE` is `__O_TMPFILE | O_DIRECTORY`; the kernel
/// takes the mode whenever `__O_TMPFILE` is set, and refuses the call with
/// EINVAL when `O_DIRECTORY` is missing, so the one bit is what to test).
pub const CREATING_FLAGS: u32 = O_CREAT | O_TMPFILE_BIT;
const O_CREAT: u32 = 0o100;
const O_TMPFILE_BIT: u32 = 0o2000_0000;

/// `struct seccomp_data` offsets.
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
/// The low 32 bits of `args[0]` on a little-endian machine.
const OFF_ARG0_LOW: u32 = 16;

/// The low 32 bits of `args[i]` on a little-endian machine.
const fn off_arg_low(i: u32) -> u32 {
    OFF_ARG0_LOW + 8 * i
}

/// System call numbers and the audit architecture of the build target.
#[cfg(target_arch = "x86_64")]
pub mod arch {
    pub const AUDIT_ARCH: u32 = 0xc000_003e;
    pub const X32_BIT: u32 = 0x4000_0000;
    pub const OPEN: u32 = 2;
    pub const SOCKET: u32 = 41;
    pub const SOCKETPAIR: u32 = 53;
    pub const CLONE: u32 = 56;
    pub const CREAT: u32 = 85;
    pub const CHMOD: u32 = 90;
    pub const FCHMOD: u32 = 91;
    pub const PTRACE: u32 = 101;
    pub const MKNOD: u32 = 133;
    pub const ADD_KEY: u32 = 248;
    pub const REQUEST_KEY: u32 = 249;
    pub const KEYCTL: u32 = 250;
    pub const OPENAT: u32 = 257;
    pub const MKNODAT: u32 = 259;
    pub const FCHMODAT: u32 = 268;
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
    pub const OPENAT2: u32 = 437;
    pub const FCHMODAT2: u32 = 452;
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

/// The calls whose mode is refused with a setuid or setgid bit, and the
/// argument that holds it.
pub const MODE_CALLS: [(u32, u32); 7] = [
    (arch::CHMOD, 1),
    (arch::FCHMOD, 1),
    (arch::CREAT, 1),
    (arch::MKNOD, 1),
    (arch::FCHMODAT, 2),
    (arch::FCHMODAT2, 2),
    (arch::MKNODAT, 2),
];

/// The calls that create a file with a mode when their flags say so: the
/// call, the argument that holds the flags, the one that holds the mode.
pub const OPEN_CALLS: [(u32, u32, u32); 2] = [(arch::OPEN, 1, 2), (arch::OPENAT, 2, 3)];

/// Where a jump goes: the next instruction, or one of the labelled blocks
/// at the end of the program.
#[derive(Clone, Copy, PartialEq, Eq)]
enum To {
    Next,
    /// Over the next instruction (a kill).
    OverOne,
    Family,
    Flags,
    /// The mode in this argument.
    Mode(u32),
    /// The open flags in this argument, then the mode in the next.
    Creating(u32),
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
        Jump(BPF_JEQ_K, arch::OPENAT2, To::Enosys, To::Next),
    ]);
    p.extend(
        MODE_CALLS
            .iter()
            .map(|(nr, arg)| Jump(BPF_JEQ_K, *nr, To::Mode(*arg), To::Next)),
    );
    p.extend(
        OPEN_CALLS
            .iter()
            .map(|(nr, flags, _)| Jump(BPF_JEQ_K, *nr, To::Creating(*flags), To::Next)),
    );
    p.extend([
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
    ]);
    // Every open call's mode follows its flags (`open`: 1 then 2,
    // `openat`: 2 then 3), so a creating open goes on to that mode's check.
    for (_, flags, mode) in OPEN_CALLS {
        p.extend([
            Label(To::Creating(flags)),
            Load(off_arg_low(flags)),
            Jump(BPF_JSET_K, CREATING_FLAGS, To::Mode(mode), To::Allow),
        ]);
    }
    let mut modes: Vec<u32> = MODE_CALLS
        .iter()
        .map(|(_, a)| *a)
        .chain(OPEN_CALLS.iter().map(|(_, _, m)| *m))
        .collect();
    modes.sort_unstable();
    modes.dedup();
    for arg in modes {
        p.extend([
            Label(To::Mode(arg)),
            Load(off_arg_low(arg)),
            Jump(BPF_JSET_K, SET_ID_BITS, To::Eperm, To::Allow),
        ]);
    }
    p.extend([
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
    evaluate_args(nr, arch_id, &[arg0])
}

/// As [`evaluate`], with the first arguments given (the rest are 0).
pub fn evaluate_args(nr: u32, arch_id: u32, args: &[u64]) -> u32 {
    let p = program();
    let mut a: u32 = 0;
    let mut pc = 0usize;
    // The evaluator knows only the fields the filter reads, and of the
    // arguments only their low 32 bits: a load of anything else is a bug in
    // the program, and ends the run as a kill.
    let load = |off: u32| match off {
        OFF_NR => Some(nr),
        OFF_ARCH => Some(arch_id),
        o if o >= OFF_ARG0_LOW && (o - OFF_ARG0_LOW).is_multiple_of(8) && o < off_arg_low(6) => {
            let i = ((o - OFF_ARG0_LOW) / 8) as usize;
            Some(args.get(i).copied().unwrap_or(0) as u32)
        }
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
    fn refuses_a_setuid_or_setgid_mode_on_every_call_that_sets_one() {
        // (call, argument count before the mode): the mode alone decides.
        for (nr, at) in MODE_CALLS {
            let at = at as usize;
            let with = |mode: u64| {
                let mut args = vec![0u64; at + 1];
                args[at] = mode;
                evaluate_args(nr, X86_64, &args)
            };
            for mode in [0o4755, 0o2755, 0o6755, 0o4000, 0o2000, 0o104755, 0o20_4755] {
                assert_eq!(with(mode), REFUSE, "{nr} {mode:o}");
                // High bits neither hide the bit nor stand for it.
                assert_eq!(with(mode | 0xffff_ffff_0000_0000), REFUSE, "{nr} {mode:o}");
            }
            for mode in [0, 0o755, 0o644, 0o1777, 0o777, 0o100644, 0o40755] {
                assert_eq!(with(mode), RET_ALLOW, "{nr} {mode:o}");
                let high = mode | 0x0000_0c00_0000_0000 | (0o6000 << 32);
                assert_eq!(with(high), RET_ALLOW, "{nr} {high:#x}: high bits only");
            }
        }
    }

    #[test]
    fn refuses_a_setuid_or_setgid_mode_when_open_creates_and_only_then() {
        const O_RDONLY: u64 = 0;
        const O_WRONLY_CREAT_TRUNC: u64 = 0o1101;
        const O_TMPFILE_RDWR: u64 = 0o2020_0002;
        const O_DIRECTORY: u64 = 0o200000;
        for (nr, flags_at, mode_at) in OPEN_CALLS {
            let call = |flags: u64, mode: u64| {
                let mut args = vec![0u64; mode_at as usize + 1];
                args[flags_at as usize] = flags;
                args[mode_at as usize] = mode;
                evaluate_args(nr, X86_64, &args)
            };
            for flags in [
                O_WRONLY_CREAT_TRUNC,
                0o100,
                O_TMPFILE_RDWR,
                // __O_TMPFILE without O_DIRECTORY: the kernel says EINVAL,
                // the filter refuses first.
                O_TMPFILE_RDWR & !O_DIRECTORY,
                O_WRONLY_CREAT_TRUNC | 0xffff_ffff_0000_0000,
            ] {
                for mode in [0o4755, 0o2755, 0o6777, 0o4755 | 0x1_0000_0000] {
                    assert_eq!(call(flags, mode), REFUSE, "{nr} {flags:o} {mode:o}");
                }
                for mode in [0o644, 0o755, 0o1777, 0o644 | (0o6000 << 32)] {
                    assert_eq!(call(flags, mode), RET_ALLOW, "{nr} {flags:o} {mode:o}");
                }
            }
            // Not creating: the kernel ignores the mode, so does the filter.
            for flags in [O_RDONLY, 0o2, O_DIRECTORY, 0o100 << 32] {
                assert_eq!(call(flags, 0o6777), RET_ALLOW, "{nr} {flags:o}");
            }
        }
        // openat2's mode is behind a pointer: ENOSYS, libc falls back to openat.
        for arg in [0, 0x7fff_0000_1000] {
            assert_eq!(
                evaluate_args(arch::OPENAT2, X86_64, &[arg, arg, arg, arg]),
                RET_ERRNO | ENOSYS
            );
        }
    }

    #[test]
    fn leaves_setxattr_to_the_kernel_which_refuses_file_capabilities_without_cap_setfcap() {
        // The name is a pointer: the filter cannot tell security.capability
        // from user.*; the kernel can, and the cage has no CAP_SETFCAP.
        for nr in [188u32, 189, 190, 463] {
            assert_eq!(evaluate_args(nr, X86_64, &[0, 0, 0, 0, 0]), RET_ALLOW);
        }
        assert_eq!(i64::from(188u32), libc::SYS_setxattr);
        assert_eq!(i64::from(189u32), libc::SYS_lsetxattr);
        assert_eq!(i64::from(190u32), libc::SYS_fsetxattr);
    }

    #[test]
    fn the_system_call_numbers_are_the_kernels() {
        let ours = [
            (arch::SOCKET, libc::SYS_socket),
            (arch::SOCKETPAIR, libc::SYS_socketpair),
            (arch::CLONE, libc::SYS_clone),
            (arch::CLONE3, libc::SYS_clone3),
            (arch::OPEN, libc::SYS_open),
            (arch::OPENAT, libc::SYS_openat),
            (arch::OPENAT2, libc::SYS_openat2),
            (arch::CREAT, libc::SYS_creat),
            (arch::CHMOD, libc::SYS_chmod),
            (arch::FCHMOD, libc::SYS_fchmod),
            (arch::FCHMODAT, libc::SYS_fchmodat),
            (arch::FCHMODAT2, libc::SYS_fchmodat2),
            (arch::MKNOD, libc::SYS_mknod),
            (arch::MKNODAT, libc::SYS_mknodat),
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
        assert_eq!(SET_ID_BITS, libc::S_ISUID | libc::S_ISGID);
        assert_eq!(O_CREAT as i32, libc::O_CREAT);
        assert_eq!((O_TMPFILE_BIT | 0o200000) as i32, libc::O_TMPFILE);
        assert_eq!(0o200000, libc::O_DIRECTORY);
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
            // 6..=17: the refused list, each to RET EPERM at 51.
            j(BPF_JEQ_K, arch::IO_URING_SETUP, 44, 0),
            j(BPF_JEQ_K, arch::IO_URING_ENTER, 43, 0),
            j(BPF_JEQ_K, arch::IO_URING_REGISTER, 42, 0),
            j(BPF_JEQ_K, arch::PTRACE, 41, 0),
            j(BPF_JEQ_K, arch::PROCESS_VM_READV, 40, 0),
            j(BPF_JEQ_K, arch::PROCESS_VM_WRITEV, 39, 0),
            j(BPF_JEQ_K, arch::PERF_EVENT_OPEN, 38, 0),
            j(BPF_JEQ_K, arch::BPF, 37, 0),
            j(BPF_JEQ_K, arch::USERFAULTFD, 36, 0),
            j(BPF_JEQ_K, arch::KEYCTL, 35, 0),
            j(BPF_JEQ_K, arch::ADD_KEY, 34, 0),
            j(BPF_JEQ_K, arch::REQUEST_KEY, 33, 0),
            // 18, 19: clone3 and openat2 to RET ENOSYS at 52.
            j(BPF_JEQ_K, arch::CLONE3, 33, 0),
            j(BPF_JEQ_K, arch::OPENAT2, 32, 0),
            // 20..=23: the mode in args[1], checked at 44.
            j(BPF_JEQ_K, arch::CHMOD, 23, 0),
            j(BPF_JEQ_K, arch::FCHMOD, 22, 0),
            j(BPF_JEQ_K, arch::CREAT, 21, 0),
            j(BPF_JEQ_K, arch::MKNOD, 20, 0),
            // 24..=26: the mode in args[2], checked at 46.
            j(BPF_JEQ_K, arch::FCHMODAT, 21, 0),
            j(BPF_JEQ_K, arch::FCHMODAT2, 20, 0),
            j(BPF_JEQ_K, arch::MKNODAT, 19, 0),
            // 27, 28: open's flags (args[1]) at 40, openat's (args[2]) at 42.
            j(BPF_JEQ_K, arch::OPEN, 12, 0),
            j(BPF_JEQ_K, arch::OPENAT, 13, 0),
            // 29, 30: the socket calls to the family check at 33.
            j(BPF_JEQ_K, arch::SOCKET, 3, 0),
            j(BPF_JEQ_K, arch::SOCKETPAIR, 2, 0),
            // 31, 32: unshare and clone to the flags check at 38; anything
            // else to RET ALLOW at 50.
            j(BPF_JEQ_K, arch::UNSHARE, 6, 0),
            j(BPF_JEQ_K, arch::CLONE, 5, 17),
            // 33: the family's low 32 bits; an allowed one to RET ALLOW.
            ld(OFF_ARG0_LOW),
            j(BPF_JEQ_K, AF_INET, 15, 0),
            j(BPF_JEQ_K, AF_INET6, 14, 0),
            j(BPF_JEQ_K, AF_NETLINK, 13, 0),
            ret(RET_ERRNO | EPERM),
            // 38: the flags' low 32 bits; CLONE_NEWUSER to RET EPERM.
            ld(OFF_ARG0_LOW),
            j(BPF_JSET_K, CLONE_NEWUSER, 11, 10),
            // 40: open's flags; creating goes on to the mode in args[2] (46).
            ld(OFF_ARG0_LOW + 8),
            j(BPF_JSET_K, O_CREAT | O_TMPFILE_BIT, 4, 8),
            // 42: openat's flags; creating goes on to the mode in args[3] (48).
            ld(OFF_ARG0_LOW + 16),
            j(BPF_JSET_K, O_CREAT | O_TMPFILE_BIT, 4, 6),
            // 44, 46, 48: the mode in args[1], args[2], args[3]; a setuid or
            // setgid bit to RET EPERM.
            ld(OFF_ARG0_LOW + 8),
            j(BPF_JSET_K, 0o6000, 5, 4),
            ld(OFF_ARG0_LOW + 16),
            j(BPF_JSET_K, 0o6000, 3, 2),
            ld(OFF_ARG0_LOW + 24),
            j(BPF_JSET_K, 0o6000, 1, 0),
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
