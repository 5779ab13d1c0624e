//! The cage's seccomp filter, built here as classic BPF (no libseccomp):
//! check the architecture, kill x32, refuse `socket` and `socketpair` for
//! `AF_UNIX` comparing only the low 32 bits of the family (the kernel
//! truncates the argument to an int: a filter comparing 64 bits lets
//! `socket(0x100000001, …)` through), and refuse `io_uring_setup/enter/
//! register`, `ptrace`, `process_vm_readv/writev`. Everything else is
//! allowed: the cage's mounts, capabilities and `no_new_privs` do the rest.

#![forbid(unsafe_code)]

const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x15;
const BPF_JGE_K: u16 = 0x35;
const BPF_RET_K: u16 = 0x06;

const RET_KILL_PROCESS: u32 = 0x8000_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const RET_ALLOW: u32 = 0x7fff_0000;

const EPERM: u32 = 1;
const AF_UNIX: u32 = 1;

/// `struct seccomp_data` offsets.
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
/// The low 32 bits of `args[0]` on a little-endian machine.
const OFF_ARG0_LOW: u32 = 16;

/// System call numbers and the audit architecture of the build target.
#[cfg(target_arch = "x86_64")]
mod arch {
    pub const AUDIT_ARCH: u32 = 0xc000_003e;
    pub const X32_BIT: u32 = 0x4000_0000;
    pub const SOCKET: u32 = 41;
    pub const SOCKETPAIR: u32 = 53;
    pub const PTRACE: u32 = 101;
    pub const PROCESS_VM_READV: u32 = 310;
    pub const PROCESS_VM_WRITEV: u32 = 311;
    pub const IO_URING_SETUP: u32 = 425;
    pub const IO_URING_ENTER: u32 = 426;
    pub const IO_URING_REGISTER: u32 = 427;
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

const fn stmt(code: u16, k: u32) -> Insn {
    Insn {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

const fn jump(code: u16, k: u32, jt: u8, jf: u8) -> Insn {
    Insn { code, jt, jf, k }
}

/// The system calls refused with EPERM whatever their arguments.
pub const REFUSED: [u32; 6] = [
    arch::IO_URING_SETUP,
    arch::IO_URING_ENTER,
    arch::IO_URING_REGISTER,
    arch::PTRACE,
    arch::PROCESS_VM_READV,
    arch::PROCESS_VM_WRITEV,
];

/// The filter program.
pub fn program() -> Vec<Insn> {
    let mut p = vec![
        stmt(BPF_LD_W_ABS, OFF_ARCH),
        jump(BPF_JEQ_K, arch::AUDIT_ARCH, 1, 0),
        stmt(BPF_RET_K, RET_KILL_PROCESS),
        stmt(BPF_LD_W_ABS, OFF_NR),
        jump(BPF_JGE_K, arch::X32_BIT, 0, 1),
        stmt(BPF_RET_K, RET_KILL_PROCESS),
    ];
    // After the refused list come: JEQ socket, JEQ socketpair, LD arg0,
    // JEQ AF_UNIX, RET ALLOW, RET ERRNO. Jumps are relative to the next
    // instruction.
    let n = REFUSED.len();
    for (i, nr) in REFUSED.iter().enumerate() {
        // From instruction i of the list to RET ERRNO: the rest of the list,
        // then the six instructions of the tail, minus one.
        let to_errno = (n - i - 1) + 5;
        p.push(jump(BPF_JEQ_K, *nr, to_errno as u8, 0));
    }
    p.extend([
        jump(BPF_JEQ_K, arch::SOCKET, 1, 0),
        jump(BPF_JEQ_K, arch::SOCKETPAIR, 0, 2),
        stmt(BPF_LD_W_ABS, OFF_ARG0_LOW),
        jump(BPF_JEQ_K, AF_UNIX, 1, 0),
        stmt(BPF_RET_K, RET_ALLOW),
        stmt(BPF_RET_K, RET_ERRNO | EPERM),
    ]);
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
    let load = |off: u32| match off {
        OFF_NR => nr,
        OFF_ARCH => arch_id,
        OFF_ARG0_LOW => arg0 as u32,
        _ => 0,
    };
    while let Some(i) = p.get(pc) {
        pc += 1;
        match i.code {
            BPF_LD_W_ABS => a = load(i.k),
            BPF_JEQ_K => pc += usize::from(if a == i.k { i.jt } else { i.jf }),
            BPF_JGE_K => pc += usize::from(if a >= i.k { i.jt } else { i.jf }),
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

    #[test]
    fn kills_another_architecture_and_x32() {
        assert_eq!(evaluate(0, 0x4000_0003, 0), RET_KILL_PROCESS);
        assert_eq!(evaluate(arch::X32_BIT | 1, X86_64, 0), RET_KILL_PROCESS);
    }

    #[test]
    fn refuses_unix_sockets_on_the_low_32_bits_only() {
        let errno = RET_ERRNO | EPERM;
        assert_eq!(evaluate(arch::SOCKET, X86_64, 1), errno);
        assert_eq!(
            evaluate(arch::SOCKET, X86_64, 0x1_0000_0001),
            errno,
            "the high bits must not hide AF_UNIX"
        );
        assert_eq!(evaluate(arch::SOCKETPAIR, X86_64, 1), errno);
        assert_eq!(
            evaluate(arch::SOCKET, X86_64, 2),
            RET_ALLOW,
            "AF_INET is the network's business"
        );
        assert_eq!(evaluate(arch::SOCKETPAIR, X86_64, 2), RET_ALLOW);
    }

    #[test]
    fn refuses_io_uring_ptrace_and_process_vm() {
        for nr in REFUSED {
            assert_eq!(evaluate(nr, X86_64, 0), RET_ERRNO | EPERM, "syscall {nr}");
        }
        assert_eq!(evaluate(0, X86_64, 0), RET_ALLOW, "read");
        assert_eq!(evaluate(59, X86_64, 0), RET_ALLOW, "execve");
    }

    #[test]
    fn serialises_eight_bytes_an_instruction() {
        assert_eq!(bytes().len(), program().len() * 8);
    }
}
