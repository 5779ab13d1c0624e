//! Attempts to get something past the policy, each named by its attack.
//! Every one must be refused; those that are ladder signals must say so.

use aromba_warden::policy::{Requester, Table, check};
use aromba_warden::signal::Signal;
use aromba_warden::users::WorkerAccount;
use std::os::unix::fs::symlink;

fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// The Worker, as a test account that owns nothing here.
fn worker() -> Requester {
    Requester::Worker(WorkerAccount {
        uid: 4_242_000,
        gids: vec![4_242_000],
    })
}

fn refused(cmd: &str, a: &[&str]) -> aromba_warden::policy::Refused {
    match check(Table::Allow, cmd, &args(a), &worker()) {
        Ok(allowed) => panic!("{cmd} {a:?} was allowed as {:?}", allowed.args),
        Err(r) => r,
    }
}

fn refused_with_secret_signal(cmd: &str, a: &[&str]) {
    let r = refused(cmd, a);
    assert!(
        matches!(
            r.signal,
            Some(Signal::SecretPathRead { .. }) | Some(Signal::DenyListHit { .. })
        ),
        "{cmd} {a:?} refused without a ladder signal: {}",
        r.reason
    );
}

#[test]
fn gnu_abbreviated_long_options_are_refused() {
    refused("du", &["--files0-fr=/etc/shadow"]);
    refused("du", &["--files0-from=/tmp/list"]);
    refused("du", &["--files0-f", "/tmp/list"]);
    refused("journalctl", &["--cursor-fi=/x"]);
    refused("ls", &["--time-sty=full-iso"]);
    refused("df", &["--out=source"]);
    refused("journalctl", &["--since=today", "--lin=5"]);
}

#[test]
fn journalctl_file_directory_root_cursor_and_vacuum_options_are_refused() {
    for a in [
        &["--file", "/var/log/journal/x.journal"][..],
        &["--file=/tmp/x"],
        &["-D", "/var/log/journal"],
        &["--directory=/var/log/journal"],
        &["--root", "/"],
        &["--root=/mnt"],
        &["--cursor-file=/tmp/c"],
        &["--cursor-file", "/tmp/c"],
        &["--vacuum-size=1K"],
        &["--vacuum-time=1s"],
        &["--vacuum-files=1"],
        &["--flush"],
        &["--rotate"],
        &["--setup-keys"],
        &["-m"],
        &["--output-fields=MESSAGE"],
    ] {
        refused("journalctl", a);
    }
}

#[test]
fn a_bundle_with_one_unlisted_letter_is_refused() {
    refused("df", &["-hZ"]);
    refused("ls", &["-laR", "/var/log"]);
    refused("ss", &["-tulpnK"]);
    refused("free", &["-hs", "1"]);
    refused("du", &["-shL", "/var"]);
}

#[test]
fn a_value_starting_with_a_dash_is_refused() {
    refused("journalctl", &["-n", "-5"]);
    refused("journalctl", &["-u", "-x"]);
    refused("journalctl", &["--since=-1h"]);
    refused("docker", &["logs", "--tail", "--follow", "web"]);
}

#[test]
fn a_second_subcommand_is_refused() {
    refused("docker", &["ps", "logs"]);
    refused("systemctl", &["status", "is-active"]);
    refused("apt", &["list", "list"]);
    refused("docker", &["ps", "images"]);
}

#[test]
fn a_double_dash_and_what_follows_it_are_refused() {
    refused("du", &["-s", "--", "/"]);
    refused("ls", &["--", "-la"]);
    refused("journalctl", &["--"]);
}

#[test]
fn nul_and_control_bytes_are_refused() {
    refused("ls", &["/tmp\0/etc/shadow"]);
    refused("ls", &["/tmp\n"]);
    refused("journalctl", &["--grep", "a\x1b[2J"]);
    refused("df\0", &[]);
}

#[test]
fn too_many_arguments_are_refused() {
    refused("nproc", &["1"]);
    refused("uptime", &["-p", "-s", "-p"]);
    let many: Vec<&str> = std::iter::repeat_n("/", 41).collect();
    refused("du", &many);
}

#[test]
fn commands_not_in_the_policy_are_refused() {
    refused("bash", &["-c", "id"]);
    refused("/usr/bin/df", &["-h"]);
    refused("sh", &[]);
    refused("", &[]);
    refused("find", &["/", "-exec", "sh", "{}", ";"]);
}

#[test]
fn positional_arguments_where_none_are_allowed_are_refused() {
    refused("free", &["/etc/shadow"]);
    refused("ps", &["e"]);
    refused("ps", &["auxe"]);
    refused("ps", &["-ef"]);
    refused("apt", &["list", "--installed", "openssl"]);
}

#[test]
fn relative_and_dotdot_paths_are_refused() {
    refused("ls", &["etc"]);
    refused("du", &["/var/../etc/shadow"]);
    refused("ls", &["/var/log/../../root"]);
    refused("ls", &["/nonexistent/aromba/test/path"]);
}

#[test]
fn secret_paths_named_directly_are_refused_as_ladder_signals() {
    refused_with_secret_signal("ls", &["-la", "/etc/shadow"]);
    refused_with_secret_signal("ls", &["/root/.ssh"]);
    refused_with_secret_signal("du", &["-sh", "/etc/aromba/warden"]);
    refused_with_secret_signal("ls", &["/dev"]);
    refused_with_secret_signal("cat", &["/etc/shadow"]);
}

#[test]
fn proc_environ_of_self_and_of_a_pid_is_refused() {
    refused_with_secret_signal("ls", &["-la", "/proc/self/environ"]);
    refused_with_secret_signal("ls", &["-la", "/proc/1/environ"]);
    refused_with_secret_signal("ls", &["/proc/thread-self/environ"]);
    refused_with_secret_signal("cat", &["/proc/self/environ"]);
    refused_with_secret_signal("cat", &["/proc/1/environ"]);
}

#[test]
fn cat_of_an_unlisted_file_is_refused() {
    refused("cat", &["/etc/passwd"]);
    refused("cat", &["/proc/meminfo/../self/environ"]);
    refused("cat", &["/etc//os-release"]);
}

/// A symlink in a temporary directory pointing into each kind of secret
/// rule is judged by where it points.
#[test]
fn symlink_escapes_into_each_secret_rule_are_refused() {
    let dir = std::env::temp_dir().join(format!("aromba-symlink-escape-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("home/u/.ssh")).unwrap();
    std::fs::create_dir_all(dir.join("home/u/.config/gcloud")).unwrap();
    std::fs::create_dir_all(dir.join("app")).unwrap();
    std::fs::create_dir_all(dir.join("links")).unwrap();
    for f in [
        "home/u/.ssh/id_ed25519",
        "app/.env",
        "app/site.pem",
        "app/secrets.toml",
        "app/api_key",
    ] {
        std::fs::write(dir.join(f), "x").unwrap();
    }
    let targets = [
        ("shadow", "/etc/shadow".into()),              // secret_prefixes
        ("procself", "/proc/self/environ".into()),     // secret_prefixes, resolved to /proc/PID
        ("dev", "/dev/null".into()),                   // secret_prefixes
        ("sshdir", dir.join("home/u/.ssh")),           // secret_dirs
        ("gcloud", dir.join("home/u/.config/gcloud")), // secret_dirs, two components
        ("idkey", dir.join("home/u/.ssh/id_ed25519")), // secret_dirs and names
        ("dotenv", dir.join("app/.env")),              // secret_names .env*
        ("pem", dir.join("app/site.pem")),             // secret_names *.pem
        ("secrets", dir.join("app/secrets.toml")),     // secret_names secrets.toml
        ("apikey", dir.join("app/api_key")),           // secret_names *_key
    ];
    for (name, target) in &targets {
        let link = dir.join("links").join(name);
        symlink(target, &link).unwrap();
        let link = link.to_str().unwrap();
        refused_with_secret_signal("ls", &["-la", link]);
        refused_with_secret_signal("du", &["-sh", link]);
    }
    // A symlinked directory on the way is resolved too.
    let via = dir.join("links/via");
    symlink(dir.join("home/u"), &via).unwrap();
    refused_with_secret_signal("ls", &[via.join(".ssh").to_str().unwrap()]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn chore_actions_refuse_what_the_rules_forbid() {
    let no = |cmd: &str, a: &[&str]| {
        if let Ok(ok) = check(Table::ChoreAction, cmd, &args(a), &Requester::Warden) {
            panic!("{cmd} {a:?} was allowed as {:?}", ok.args);
        }
    };
    no("systemctl", &["restart", "aromba-warden.service"]);
    no("systemctl", &["restart", "aromba"]);
    no("systemctl", &["restart", "dbus"]);
    no("systemctl", &["restart", "systemd-journald"]);
    no("systemctl", &["restart", "emergency.target"]);
    no("systemctl", &["stop", "nginx"]);
    no("systemctl", &["restart", "nginx", "ssh"]);
    no("timedatectl", &["set-ntp", "false"]);
    no("docker", &["image", "prune", "-a"]);
    no("docker", &["system", "prune", "-f"]);
    no("apt-get", &["install", "-y", "openssl;rm"]);
    no("apt-get", &["install", "-y", "aromba-not-a-real-package"]);
    no(
        "apt-get",
        &[
            "install",
            "-y",
            "--only-upgrade",
            "nginx-extras-never-installed",
        ],
    );
    no(
        "apt-get",
        &["install", "-y", "--allow-downgrades", "openssl"],
    );
    no("apt-get", &["remove", "-y", "openssl"]);
    no("apt-get", &["install", "-y", "-o", "APT::Get::Something=1"]);
}

#[test]
fn deny_patterns_refuse_and_signal_even_for_unknown_commands() {
    for (cmd, a) in [
        ("rm", &["-rf", "/"][..]),
        ("dd", &["if=/dev/zero", "of=/dev/sda"]),
        ("mkfs.ext4", &["/dev/sda1"]),
        ("chmod", &["-R", "777", "/srv"]),
        ("shutdown", &["-h", "now"]),
        ("iptables", &["-F"]),
    ] {
        let r = refused(cmd, a);
        assert!(
            matches!(r.signal, Some(Signal::DenyListHit { .. })),
            "{cmd} {a:?}: {}",
            r.reason
        );
    }
}
