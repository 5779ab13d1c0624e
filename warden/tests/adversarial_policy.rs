//! Attempts to get something past the policy, each named by its attack.
//! Every one must be refused; those that are ladder signals must say so.

use aromba_testkit::warden as support;

use aromba_warden::policy::{OUTPUT_MODES, Requester, Table, check, template};
use aromba_warden::signal::Signal;
use aromba_warden::users::WorkerAccount;
use aromba_warden_proto::{Request, Response};
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

/// systemctl reads its verb as the first word that is not an option,
/// wherever it stands: `--failed` then any word ran that word as the verb
/// (`reboot`, `mask`, `stop`, `isolate`… passed as reads). The verb is now
/// matched first and `--failed` takes no word after it.
#[test]
fn systemctl_failed_then_reboot_is_not_a_read() {
    for verb in [
        &["reboot"][..],
        &["mask", "ssh.service"],
        &["stop", "nginx.service"],
        &["kill", "sshd.service"],
        &["isolate", "rescue.target"],
        &["daemon-reexec"],
        &["start", "modprobe@x.service"],
        &["poweroff"],
        &["edit", "nginx.service"],
    ] {
        let mut a = vec!["--failed"];
        a.extend_from_slice(verb);
        refused("systemctl", &a);
        // Nor after a verb that takes units, nor around an option.
        let mut a = vec!["--failed", "--no-pager"];
        a.extend_from_slice(verb);
        refused("systemctl", &a);
        let mut a = vec!["--no-pager"];
        a.extend_from_slice(verb);
        refused("systemctl", &a);
    }
    // A unit word is a unit only after the verbs that read units.
    refused("systemctl", &["list-units", "reboot"]);
    refused("systemctl", &["list-timers", "stop"]);
    refused("systemctl", &["is-active"]);
    refused("systemctl", &["--no-pager", "status", "nginx"]);
}

/// docker's `system` reads its next word as a sub-command: `prune` passed
/// as a container name. Only `system df` and `system info` are reads; a
/// container is a positional only after `logs` (exactly one) and `stats`.
#[test]
fn docker_system_prune_is_refused() {
    refused("docker", &["system", "prune"]);
    refused("docker", &["system", "prune", "-a"]);
    refused("docker", &["system", "events"]);
    refused("docker", &["system"]);
    refused("docker", &["system", "df", "prune"]);
    refused("docker", &["ps", "prune"]);
    refused("docker", &["images", "rm"]);
    refused("docker", &["info", "web"]);
    refused("docker", &["version", "web"]);
    refused("docker", &["logs"]);
    refused("docker", &["logs", "web", "db"]);
    // Each option only after the verb that has it.
    refused("docker", &["ps", "--tail", "5"]);
    refused("docker", &["images", "--no-stream"]);
    refused("docker", &["ps", "-v"]);
    refused("docker", &["logs", "--format", "{{.ID}}", "web"]);
    refused("docker", &["logs", "-a", "web"]);
    refused("docker", &["stats", "-q"]);
}

/// nginx with no mode flag starts the server — as root, outside the cage,
/// daemonised out of the Warden's reach. `-q` alone was allowed.
#[test]
fn nginx_without_a_test_flag_would_start_the_server_and_is_refused() {
    refused("nginx", &[]);
    refused("nginx", &["-q"]);
    refused("nginx", &["-qq"]);
    refused("nginx", &["-q", "-t"]);
    refused("nginx", &["-s", "stop"]);
    refused("nginx", &["-t", "-v"]);
}

/// The other tools with verbs, walked the same way: a word after the verb is
/// what that verb reads, and nothing else.
#[test]
fn a_verb_word_where_the_tool_reads_none_is_refused() {
    refused("apt", &["list", "install"]);
    refused("apt", &["--installed", "install"]);
    refused("fail2ban-client", &["status", "sshd", "cymru"]);
    refused("fail2ban-client", &["ping", "stop"]);
    refused("fail2ban-client", &["version", "unban"]);
    refused("timedatectl", &["show", "set-ntp"]);
    refused("timedatectl", &["--no-pager", "set-ntp", "false"]);
    refused("ufw", &["status", "verbose", "numbered"]);
    refused("ufw", &["status", "disable"]);
    refused("ufw", &["verbose"]);
    refused("nft", &["list", "ruleset", "flush"]);
    refused("nft", &["list"]);
    refused("nft", &["list", "ruleset", "-a"]);
    refused("nft", &["flush", "ruleset"]);
}

/// journalctl -o json renders a message holding colour codes as an array of
/// byte numbers, so the redactor saw no password; export and cat write its
/// raw bytes, so a key split by a colour code passed it. Only the modes the
/// redactor reads as written are allowed (`tests/adversarial_output_modes.rs` reads a
/// real journal through each).
#[test]
fn journalctl_json_output_is_refused() {
    for mode in [
        "json",
        "json-pretty",
        "json-sse",
        "json-seq",
        "export",
        "cat",
    ] {
        assert!(!OUTPUT_MODES.contains(&mode));
        refused("journalctl", &["-o", mode]);
        refused("journalctl", &["--output", mode]);
        refused("journalctl", &[&format!("--output={mode}")]);
        refused("journalctl", &["-u", "nginx", "-o", mode, "-n", "5"]);
    }
    refused("journalctl", &["--output-fields=MESSAGE", "-o", "short"]);
    refused("journalctl", &["-a", "-o", "short"]);
    refused("journalctl", &["--all"]);
}

/// Every function of Go's text/template and of docker's template package,
/// every keyword, pipe, variable and trim marker is refused in `--format`.
#[test]
fn docker_template_functions_are_refused() {
    const FUNCTIONS: &[&str] = &[
        // text/template's builtins
        "and",
        "call",
        "html",
        "index",
        "slice",
        "js",
        "len",
        "not",
        "or",
        "print",
        "printf",
        "println",
        "urlquery",
        "eq",
        "ge",
        "gt",
        "le",
        "lt",
        "ne",
        // docker's (cli/templates): json, split, join, title, lower, upper,
        // pad, truncate; and names other template packages add
        "json",
        "split",
        "join",
        "title",
        "lower",
        "upper",
        "pad",
        "truncate",
        "base64",
        "base64decode",
        // keywords
        "if",
        "else",
        "end",
        "range",
        "with",
        "define",
        "template",
        "block",
        "break",
        "continue",
        "nil",
    ];
    for f in FUNCTIONS {
        for t in [
            format!("{{{{{f} .Command}}}}"),
            format!("{{{{.Command | {f}}}}}"),
            format!("{{{{{f}}}}}"),
            format!("{{{{ {f} .Names }}}}"),
            format!("table {{{{.ID}}}} {{{{{f} .Command}}}}"),
            format!("{{{{{f} \"%x\" .Command}}}}"),
            format!("{{{{({f} .Command)}}}}"),
        ] {
            assert!(template::check(&t).is_err(), "{t} was accepted");
            refused("docker", &["ps", "--no-trunc", "--format", &t]);
        }
    }
    for t in [
        "{{urlquery .Command}}",
        "{{.Command | urlquery}}",
        "{{printf \"%x\" .Command}}",
        "{{json .}}",
        "{{.}}",
        "{{$c := .Command}}{{$c}}",
        "{{- .Command -}}",
        "{{.Command}}{{/* x */}}",
        "{{.Label \"com.docker.compose.project\"}}",
        "{{index .Labels \"x\"}}",
    ] {
        refused("docker", &["ps", "--no-trunc", "--format", t]);
        refused("docker", &["images", "--format", t]);
        refused("docker", &["stats", "--no-stream", "--format", t]);
        refused("docker", &["system", "df", "--format", t]);
        refused("docker", &["info", "--format", t]);
    }
}

fn read(cmd: &str, args: &[&str]) -> Request {
    Request::Read {
        cmd: cmd.into(),
        args: args.iter().map(|s| s.to_string()).collect(),
    }
}

fn assert_refused_by(w: &support::Warden, r: &Request) {
    match w.ask(r) {
        Response::Refused {
            journal_seq: Some(_),
            ..
        } => {}
        other => panic!("{r:?} was not refused: {other:?}"),
    }
}

/// The attacks of issue 9 (item 1 and 2) on the Worker's socket of a real
/// Warden: each is refused and journaled, and none runs. (A verb that is
/// harmless on this machine stands for `reboot`: here no systemd manager
/// answers, so the code before the fix ran it to an error.)
#[test]
fn the_verb_and_encoding_attacks_are_refused_by_a_real_warden() {
    let w = support::Warden::start("grammar-attacks", false, &[]);
    assert_refused_by(
        &w,
        &read(
            "systemctl",
            &["--failed", "start", "aromba-no-such-unit.service"],
        ),
    );
    assert_refused_by(&w, &read("docker", &["system", "prune"]));
    assert_refused_by(&w, &read("journalctl", &["-o", "json", "-n", "5"]));
    assert_refused_by(
        &w,
        &read(
            "docker",
            &["ps", "--no-trunc", "--format", "{{urlquery .Command}}"],
        ),
    );
    let journal = w.journal();
    assert_eq!(
        journal.matches("\"verdict\":\"refused\"").count(),
        4,
        "{journal}"
    );
    assert!(
        !journal.contains("\"exit_code\""),
        "something ran: {journal}"
    );
}

#[test]
fn listing_the_wardens_own_tree_is_a_secret_path_read() {
    // The Warden's state and journal moved out of the Worker's home into
    // /var/lib/aromba-warden: their names are as secret as
    // /etc/aromba/warden's.
    for (cmd, a) in [
        ("ls", &["-la", "/var/lib/aromba-warden/state"][..]),
        ("ls", &["/var/lib/aromba-warden/state/snapshots"]),
        ("du", &["-sh", "/var/lib/aromba-warden/journal"]),
    ] {
        refused_with_secret_signal(cmd, a);
    }
}

#[test]
fn journalctl_grep_is_refused_as_a_yes_or_no_oracle_on_redacted_text() {
    // `-g 'password=Tr0u[a-m]'` returned the line (its secret redacted) or
    // nothing: whether it matched the hidden text spelled the secret out a
    // character class at a time.
    for a in [
        &["-g", "password=Tr0u[a-m]", "-n", "1"][..],
        &["--grep", "password=T"],
        &["--grep=password=T"],
        &["--gre=password=T"],
    ] {
        refused("journalctl", a);
    }
}

#[test]
fn a_journal_match_on_what_an_entry_says_is_refused() {
    // An exact match on MESSAGE (or any field a program writes) answers yes
    // or no about the text the redactor hides.
    for m in [
        "MESSAGE=connecting with password=Tr0ub4dor3xyz99 to db",
        "MESSAGE=x",
        "_CMDLINE=psql --password=x",
        "PASSWORD=x",
        "CODE_FUNC=main",
    ] {
        refused("journalctl", &[m]);
    }
    let ok = check(
        Table::Allow,
        "journalctl",
        &args(&["_SYSTEMD_UNIT=nginx.service", "+", "SYSLOG_IDENTIFIER=sshd"]),
        &worker(),
    );
    assert!(ok.is_ok(), "{ok:?}");
}
