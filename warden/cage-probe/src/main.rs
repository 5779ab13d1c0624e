//! `aromba-cage-probe CHECK`: tries one thing from inside the cage and
//! prints what happened, for the cage's tests. Never shipped.

#![forbid(unsafe_code)]

use aromba_warden::system::probe;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::ExitCode;

const SOCK_STREAM: i32 = 1;
const SOCK_DGRAM: i32 = 2;
const AF_PACKET: u64 = 17;
const AF_VSOCK: u64 = 40;

fn outcome<T>(r: std::io::Result<T>) -> String {
    match r {
        Ok(_) => "allowed".into(),
        Err(e) => format!("refused: {e}"),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let line = match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["socket-unix-high-bits"] => outcome(aromba_warden::system::socket_raw(
            0x1_0000_0001,
            SOCK_STREAM,
        )),
        ["socket-unix"] => outcome(aromba_warden::system::socket_raw(1, SOCK_STREAM)),
        ["socket-inet"] => outcome(aromba_warden::system::socket_raw(2, SOCK_STREAM)),
        ["socketpair-unix"] => outcome(UnixDatagram::pair()),
        // The kernel's surface the filter refuses (raw.rs says why each
        // call's arguments are harmless where it is not refused).
        ["socket-vsock"] => outcome(probe::socket(AF_VSOCK, SOCK_STREAM)),
        ["socket-vsock-high-bits"] => outcome(probe::socket(0x7_0000_0000 | AF_VSOCK, SOCK_STREAM)),
        ["socket-packet"] => outcome(probe::socket(AF_PACKET, SOCK_DGRAM)),
        ["socket-inet-high-bits"] => outcome(probe::socket(0x1_0000_0002, SOCK_STREAM)),
        ["socketpair-vsock"] => outcome(probe::socketpair(AF_VSOCK, SOCK_STREAM)),
        ["unshare-user"] => outcome(probe::unshare_user()),
        ["clone-user"] => outcome(probe::clone_user()),
        ["clone3"] => outcome(probe::clone3()),
        ["keyctl"] => outcome(probe::keyctl()),
        ["bpf"] => outcome(probe::bpf()),
        ["perf-event-open"] => outcome(probe::perf_event_open()),
        ["userfaultfd"] => outcome(probe::userfaultfd()),
        // A setuid or setgid mode by each call that sets one; the mode in
        // octal, with the high 32 bits of the register set too for
        // `mode-call-high`. Paths in the cage's own /tmp.
        ["mode-call", call, mode, path] => mode_call(call, mode, path, 0),
        ["mode-call-high", call, mode, path] => mode_call(call, mode, path, 0xffff_ffff_0000_0000),
        ["openat2", path] => outcome(probe::openat2_setuid(Path::new(path))),
        ["setcap", path] => outcome(probe::set_file_capability(Path::new(path))),
        // The mode of `path` in octal, not following a final link.
        ["mode", path] => match std::fs::symlink_metadata(path) {
            Ok(m) => format!("mode {:o}", m.permissions().mode()),
            Err(e) => format!("refused: {e}"),
        },
        // A thread still starts: glibc's pthread_create tries clone3 first
        // and falls back to clone on ENOSYS.
        ["thread"] => outcome(
            std::thread::spawn(|| 7)
                .join()
                .map_err(|_| std::io::Error::other("the thread panicked")),
        ),
        ["status"] => std::fs::read_to_string("/proc/self/status")
            .map(|s| {
                s.lines()
                    .filter(|l| {
                        l.starts_with("CapEff")
                            || l.starts_with("CapBnd")
                            || l.starts_with("NoNewPrivs")
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_else(|e| format!("refused: {e}")),
        ["write", path] => outcome(std::fs::write(path, b"x")),
        // Opens for writing and writes nothing: the write itself is what
        // the cage must make impossible, and this machine is the host.
        ["open-write", path] => outcome(std::fs::OpenOptions::new().write(true).open(path)),
        // Writes back the value already there (read first): harmless if it
        // goes through, and shows a sysctl write would.
        ["rewrite", path] => outcome(std::fs::read(path).and_then(|v| {
            use std::io::Write;
            std::fs::OpenOptions::new()
                .write(true)
                .open(path)?
                .write_all(&v)
        })),
        // The options of the topmost mount at `path`, from mountinfo.
        ["mount-options", path] => match std::fs::read_to_string("/proc/self/mountinfo") {
            Ok(info) => info
                .lines()
                .rev()
                .find_map(|l| {
                    let f: Vec<&str> = l.split(' ').collect();
                    (f.get(4) == Some(path))
                        .then(|| f.get(5).map(|o| o.to_string()))
                        .flatten()
                })
                .unwrap_or_else(|| "no mount".into()),
            Err(e) => format!("refused: {e}"),
        },
        ["list", path] => match std::fs::read_dir(path) {
            Ok(d) => format!("{} entries", d.count()),
            Err(e) => format!("refused: {e}"),
        },
        ["read", path] => match std::fs::read(path) {
            Ok(b) => format!("read {} bytes", b.len()),
            Err(e) => format!("refused: {e}"),
        },
        ["processes"] => {
            let mut names: Vec<String> = std::fs::read_dir("/proc")
                .map(|d| {
                    d.filter_map(|e| e.ok())
                        .filter(|e| {
                            e.file_name()
                                .to_string_lossy()
                                .chars()
                                .all(|c| c.is_ascii_digit())
                        })
                        .map(|e| {
                            let comm =
                                std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
                            format!("{} {}", e.file_name().to_string_lossy(), comm.trim())
                        })
                        .collect()
                })
                .unwrap_or_default();
            names.sort();
            names.join("\n")
        }
        ["tty"] => outcome(
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/tty"),
        ),
        ["tiocsti"] => tiocsti(),
        _ => {
            eprintln!(
                "usage: aromba-cage-probe socket-unix-high-bits|socket-unix|socket-inet|socketpair-unix|socket-vsock|socket-vsock-high-bits|socket-packet|socket-inet-high-bits|socketpair-vsock|unshare-user|clone-user|clone3|keyctl|bpf|perf-event-open|userfaultfd|mode-call[-high] CALL MODE PATH|openat2 PATH|setcap PATH|mode PATH|thread|status|write PATH|open-write PATH|rewrite PATH|read PATH|list DIR|mount-options PATH|processes|tty|tiocsti"
            );
            return ExitCode::from(2);
        }
    };
    println!("{line}");
    ExitCode::SUCCESS
}

/// `mode-call CALL MODE PATH`: the call's verdict, or why the probe could
/// not make it.
fn mode_call(call: &str, mode: &str, path: &str, high: u64) -> String {
    let Some(call) = probe::ModeCall::parse(call) else {
        return format!("no such call: {call}");
    };
    let Ok(mode) = u64::from_str_radix(mode, 8) else {
        return format!("not an octal mode: {mode}");
    };
    outcome(probe::set_mode(call, Path::new(path), mode | high))
}

/// Tries to type into a terminal through every descriptor the cage left
/// the probe (0, 1, 2) and through `/dev/tty`; "refused: …" when none took
/// the byte.
fn tiocsti() -> String {
    use std::os::fd::AsFd;
    let mut why = Vec::new();
    for (name, fd) in [
        ("stdin", std::io::stdin().as_fd().try_clone_to_owned()),
        ("stdout", std::io::stdout().as_fd().try_clone_to_owned()),
        ("stderr", std::io::stderr().as_fd().try_clone_to_owned()),
    ] {
        match fd.and_then(|fd| aromba_warden::system::tiocsti(&fd, b'x')) {
            Ok(()) => return format!("injected through {name}"),
            Err(e) => why.push(format!("{name}: {e}")),
        }
    }
    match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
        .and_then(|tty| aromba_warden::system::tiocsti(&tty, b'x'))
    {
        Ok(()) => "injected through /dev/tty".into(),
        Err(e) => {
            why.push(format!("/dev/tty: {e}"));
            format!("refused: {}", why.join("; "))
        }
    }
}
