//! Every `[[allow]]` entry accepts a call for each kind of field it has.

use aromba_warden::policy::{ALLOW, Requester, Table, check};
use aromba_warden::users::WorkerAccount;

/// The Worker, as a test account that owns nothing here.
fn worker() -> Requester {
    Requester::Worker(WorkerAccount {
        uid: 4_242_000,
        gids: vec![4_242_000],
    })
}

fn allowed(cmd: &str, args: &[&str]) {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    if let Err(refused) = check(Table::Allow, cmd, &args, &worker()) {
        panic!("{cmd} {args:?} was refused: {}", refused.reason);
    }
}

#[test]
fn every_allow_entry_is_covered_by_this_file() {
    let source = include_str!("policy_allowlist.rs");
    for rule in ALLOW {
        let call = format!("allowed(\"{}\"", rule.cmd);
        assert!(source.contains(&call), "no allowed call for {}", rule.cmd);
    }
}

#[test]
fn df_accepts_bundles_tokens_valued_and_paths() {
    allowed("df", &["-hT"]);
    allowed(
        "df",
        &[
            "--output=source,fstype,size,used,avail,pcent,target",
            "-B1",
            "--total",
        ],
    );
    allowed("df", &["-t", "ext4", "-x", "tmpfs", "/"]);
    allowed("df", &["-ih", "/var/log"]);
}

#[test]
fn du_accepts_depth_and_sizes() {
    allowed("du", &["-sh", "/var/log"]);
    allowed("du", &["--max-depth=1", "--apparent-size", "-B1", "/var"]);
    allowed("du", &["-d", "2", "-x", "/"]);
}

#[test]
fn ls_accepts_bundles_and_time_styles() {
    allowed("ls", &["-la", "/var/log"]);
    allowed("ls", &["-lAhtr", "--time-style=long-iso", "/etc"]);
}

#[test]
fn ps_accepts_its_listed_forms() {
    allowed("ps", &["aux"]);
    allowed(
        "ps",
        &[
            "-eo",
            "pid,ppid,user,%cpu,%mem,rss,vsz,etime,stat,comm,args",
            "--sort=-%mem",
        ],
    );
    allowed("ps", &["axo", "pid,comm,args", "--no-headers"]);
}

#[test]
fn docker_accepts_subcommands_values_and_containers() {
    allowed("docker", &["ps", "-a", "--no-trunc"]);
    allowed("docker", &["logs", "--tail", "50", "--timestamps", "web-1"]);
    allowed(
        "docker",
        &["logs", "--since=10m", "--until=2026-12-01T10:00:00Z", "web"],
    );
    allowed(
        "docker",
        &[
            "ps",
            "--format",
            "{{.Names}}\\t{{.Status}}",
            "--filter",
            "status=running",
        ],
    );
    allowed("docker", &["system", "df", "-v"]);
    allowed(
        "docker",
        &["system", "info", "--format", "{{.ServerVersion}}"],
    );
    allowed("docker", &["stats", "--no-stream"]);
    allowed("docker", &["stats", "--no-stream", "--all", "web", "db"]);
    allowed("docker", &["images", "-a", "--format", "json"]);
    allowed("docker", &["version", "--format", "{{.Server.Version}}"]);
    allowed("docker", &["info"]);
}

#[test]
fn systemctl_accepts_reads_of_units() {
    allowed("systemctl", &["status", "nginx", "--no-pager", "-n", "20"]);
    allowed("systemctl", &["--failed"]);
    allowed(
        "systemctl",
        &[
            "list-units",
            "--type=service",
            "--state=failed",
            "--plain",
            "--no-legend",
        ],
    );
    allowed(
        "systemctl",
        &["status", "postgresql@15-main.service", "--lines=5"],
    );
    allowed("systemctl", &["is-active", "nginx.service", "-q"]);
    allowed("systemctl", &["is-enabled", "nginx", "ssh"]);
    allowed("systemctl", &["status"]);
    allowed("systemctl", &["--failed", "--no-legend", "--plain"]);
    allowed("systemctl", &["list-units", "--failed", "--no-pager"]);
    allowed("systemctl", &["list-timers", "--all"]);
    allowed("systemctl", &["list-unit-files", "--type=service"]);
}

#[test]
fn journalctl_accepts_bounded_reads() {
    allowed("journalctl", &["-u", "nginx", "-n", "50", "--no-pager"]);
    allowed(
        "journalctl",
        &["--since", "1 hour ago", "-p", "err", "-o", "short-iso"],
    );
    allowed(
        "journalctl",
        &["-u", "nginx", "--output=verbose", "-n", "5"],
    );
    allowed("journalctl", &["--since=today", "--until=now", "-r"]);
    allowed(
        "journalctl",
        &["_SYSTEMD_UNIT=nginx.service", "+", "_COMM=sshd"],
    );
    allowed("journalctl", &["-k", "-b", "--priority=warning..emerg"]);
    allowed("journalctl", &["--disk-usage"]);
}

#[test]
fn the_small_reads_accept_their_forms() {
    allowed("apt", &["list", "--upgradable"]);
    allowed("ss", &["-tulpn"]);
    allowed("ss", &["-H", "state", "listening"]);
    allowed("free", &["-h"]);
    allowed("uptime", &["-p"]);
    allowed("hostname", &["-f"]);
    allowed("nproc", &[]);
    allowed("cat", &["/proc/meminfo", "/proc/loadavg"]);
    allowed("cat", &["/etc/os-release"]);
    allowed("fail2ban-client", &["status", "sshd"]);
    allowed("fail2ban-client", &["status"]);
    allowed("fail2ban-client", &["ping"]);
    allowed("timedatectl", &["show"]);
    allowed("timedatectl", &["timesync-status", "--no-pager"]);
    allowed("ufw", &["status", "verbose"]);
    allowed("ufw", &["status"]);
    allowed("nginx", &["-t"]);
    allowed("nginx", &["-t", "-q"]);
    allowed("nginx", &["-v"]);
    allowed("nft", &["list", "ruleset"]);
    allowed("nft", &["-a", "-n", "list", "chains"]);
}

#[test]
fn chore_actions_accept_their_forms() {
    let ok = |cmd: &str, args: &[&str]| {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        check(Table::ChoreAction, cmd, &args, &Requester::Warden)
            .unwrap_or_else(|r| panic!("{cmd}: {}", r.reason));
    };
    ok("systemctl", &["restart", "nginx"]);
    ok("systemctl", &["restart", "systemd-timesyncd.service"]);
    ok("timedatectl", &["set-ntp", "true"]);
    ok("docker", &["image", "prune", "-f"]);
    ok("docker", &["builder", "prune", "--force"]);
    ok(
        "apt-get",
        &["install", "-y", "--only-upgrade", "openssl", "libssl3"],
    );
    ok("apt-get", &["install", "-y", "fail2ban"]);
}

#[test]
fn resolves_path_arguments() {
    let args = vec!["-sh".to_string(), "/var/run".to_string()];
    let allowed = check(Table::Allow, "du", &args, &worker()).expect("allowed");
    assert_eq!(
        allowed.args,
        ["-sh", "/run"],
        "/var/run is a symlink to /run"
    );
}
