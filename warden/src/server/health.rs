//! The health reads in one request: a fixed set of reads from the policy's
//! allow list, chosen here and not by the Worker, each run and journaled as
//! a read is. Asked once a minute, the whole set counts as one command
//! toward too-many-commands, where the same reads one by one would pass the
//! threshold on their own.

#![forbid(unsafe_code)]

use super::Shared;
use super::read::read;
use crate::system::PeerCred;
use aromba_warden_proto::Response;

/// Each read's name for the Worker, and the command. `aromba-health`
/// parses each; a read a host cannot answer (no `apt`, no systemd) comes
/// back refused or failed, and that part of the health is left empty.
const READS: &[(&str, &str, &[&str])] = &[
    ("loadavg", "cat", &["/proc/loadavg"]),
    ("nproc", "nproc", &[]),
    ("meminfo", "cat", &["/proc/meminfo"]),
    ("df_space", "df", &["-P", "-B1", "-T"]),
    ("df_inodes", "df", &["-P", "-i", "-T"]),
    (
        "failed_units",
        "systemctl",
        &[
            "list-units",
            "--failed",
            "--plain",
            "--no-legend",
            "--no-pager",
        ],
    ),
    ("updates", "apt", &["list", "--upgradable"]),
    ("clock", "timedatectl", &["show"]),
];

/// Read only when they exist: their presence is the answer.
const FLAG_FILES: &[(&str, &str)] = &[
    ("reboot_required", "/run/reboot-required"),
    ("reboot_required_pkgs", "/run/reboot-required.pkgs"),
];

fn succeeded(r: &Response) -> bool {
    matches!(r, Response::Result(res) if res.exit_code == Some(0))
}

pub(super) fn health(shared: &Shared, peer: &PeerCred) -> Response {
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let mut reads = Vec::new();
    for (name, cmd, a) in READS {
        let mut answer = read(shared, peer, cmd.to_string(), args(a));
        // busybox's df has no -B1: its 1024-byte blocks, as its header says.
        if *name == "df_space" && !succeeded(&answer) {
            answer = read(shared, peer, "df".into(), args(&["-P", "-k", "-T"]));
        }
        reads.push((name.to_string(), answer));
    }
    for (name, path) in FLAG_FILES {
        if std::fs::symlink_metadata(path).is_ok() {
            reads.push((
                name.to_string(),
                read(shared, peer, "cat".into(), args(&[path])),
            ));
        }
    }
    Response::Health { reads }
}
