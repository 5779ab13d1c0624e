//! The policy against the real tools' verbs, differentially.
//!
//! A word the matcher takes for a positional argument may be the word the
//! tool reads as its verb: `systemctl --failed reboot` was allowed as a
//! read of the unit `reboot`, and systemctl runs `reboot`. Here every real verb
//! of each tool (committed under `fixtures/verbs/`, from the tool's own
//! `--help` where it is installed here, from its documentation otherwise)
//! is put at every position of requests built from each rule's own words —
//! alone, and with each of the rule's options and tokens — and every
//! request the matcher allows is read by a small model of how that tool
//! parses its command line (GNU getopt permutes options and the verb is the
//! first non-option wherever it stands; Python getopt stops at the first
//! non-option; docker walks its commands with cobra; nginx has modes, not
//! verbs; nft takes options only before its command). No allowed request
//! may make the tool run a verb that is not a read (or, for a chore action,
//! not the one action the rule names). A model that meets an option it does
//! not know fails the test: it must be taught how the tool reads it.

use aromba_warden::policy::{
    ALLOW, CHORE_ACTIONS, Positional, Requester, Rule, Table, ValueType, check,
};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::OnceLock;

/// What a tool does with an argument vector.
#[derive(Debug, PartialEq)]
enum Reading {
    /// It runs these verbs (a docker command path as `system df`, a mode
    /// such as nginx's `start`).
    Runs(Vec<String>),
    /// It refuses the command line and runs nothing.
    Rejected,
    /// The model cannot say: an option it does not know.
    Unknown(String),
}

use Reading::{Rejected, Runs, Unknown};

// ---------------------------------------------------------------- getopt

/// How a getopt-style parser reads options.
struct Getopt {
    /// Short options that take a value (the rest of the bundle or the next
    /// argument).
    short_value: &'static str,
    /// Short options whose value is optional: only the rest of the bundle.
    short_optional: &'static str,
    short_flag: &'static str,
    long_value: &'static [&'static str],
    long_optional: &'static [&'static str],
    long_flag: &'static [&'static str],
    /// GNU permutation: options anywhere, non-options collected. Without
    /// it (Python getopt, `+` optstrings) the first non-option ends them.
    permute: bool,
}

/// The options seen (`-x` or `--name`) and the non-option words in order.
type Parsed = (Vec<String>, Vec<String>);

impl Getopt {
    fn parse(&self, args: &[String]) -> Result<Parsed, Reading> {
        let mut options = Vec::new();
        let mut words = Vec::new();
        let mut i = 0;
        while i < args.len() {
            let a = args[i].as_str();
            if a == "--" {
                words.extend(args[i + 1..].iter().cloned());
                break;
            }
            if let Some(long) = a.strip_prefix("--") {
                let (name, attached) = match long.split_once('=') {
                    Some((n, _)) => (n, true),
                    None => (long, false),
                };
                if self.long_value.contains(&name) {
                    if !attached {
                        i += 1;
                        if i >= args.len() {
                            return Err(Rejected);
                        }
                    }
                } else if self.long_optional.contains(&name) {
                } else if self.long_flag.contains(&name) {
                    if attached {
                        return Err(Rejected);
                    }
                } else {
                    return Err(Unknown(a.to_string()));
                }
                options.push(format!("--{name}"));
                i += 1;
                continue;
            }
            if a.len() > 1 && a.starts_with('-') {
                let letters: Vec<char> = a[1..].chars().collect();
                let mut j = 0;
                while j < letters.len() {
                    let c = letters[j];
                    options.push(format!("-{c}"));
                    if self.short_value.contains(c) {
                        if j + 1 == letters.len() {
                            i += 1;
                            if i >= args.len() {
                                return Err(Rejected);
                            }
                        }
                        break;
                    } else if self.short_optional.contains(c) {
                        break;
                    } else if !self.short_flag.contains(c) {
                        return Err(Unknown(a.to_string()));
                    }
                    j += 1;
                }
                i += 1;
                continue;
            }
            if !self.permute {
                words.extend(args[i..].iter().cloned());
                break;
            }
            words.push(a.to_string());
            i += 1;
        }
        Ok((options, words))
    }
}

// ---------------------------------------------------------------- models

/// systemctl 252: GNU getopt; the verb is the first non-option, wherever it
/// stands; with none, `list-units`.
fn systemctl(args: &[String]) -> Reading {
    const G: Getopt = Getopt {
        short_value: "tpPsHMno",
        short_optional: "",
        short_flag: "halrTiqf",
        long_value: &[
            "type",
            "state",
            "property",
            "job-mode",
            "check-inhibitors",
            "kill-whom",
            "kill-value",
            "signal",
            "what",
            "legend",
            "preset-mode",
            "root",
            "image",
            "image-policy",
            "lines",
            "output",
            "host",
            "machine",
            "boot-loader-menu",
            "boot-loader-entry",
            "timestamp",
            "reboot-argument",
            "message",
            "drop-in",
            "when",
        ],
        long_optional: &[],
        long_flag: &[
            "help",
            "version",
            "system",
            "user",
            "failed",
            "all",
            "full",
            "recursive",
            "reverse",
            "with-dependencies",
            "show-transaction",
            "show-types",
            "value",
            "now",
            "dry-run",
            "quiet",
            "wait",
            "no-block",
            "no-wall",
            "no-reload",
            "no-legend",
            "no-pager",
            "no-ask-password",
            "global",
            "runtime",
            "force",
            "firmware-setup",
            "plain",
            "read-only",
            "mkdir",
            "marked",
            "no-warn",
            "irreversible",
            "ignore-dependencies",
            "ignore-inhibitors",
            "fail",
            "after",
            "before",
        ],
        permute: true,
    };
    match G.parse(args) {
        Err(r) => r,
        Ok((options, words)) => {
            if options.iter().any(|o| o == "-h" || o == "--help") {
                return Runs(vec!["help".into()]);
            }
            if options.iter().any(|o| o == "--version") {
                return Runs(vec!["version".into()]);
            }
            Runs(vec![
                words
                    .first()
                    .cloned()
                    .unwrap_or_else(|| "list-units".into()),
            ])
        }
    }
}

/// timedatectl: GNU getopt; the first non-option; with none, `status`.
fn timedatectl(args: &[String]) -> Reading {
    const G: Getopt = Getopt {
        short_value: "HMp",
        short_optional: "",
        short_flag: "ha",
        long_value: &["host", "machine", "property"],
        long_optional: &[],
        long_flag: &[
            "help",
            "version",
            "no-pager",
            "no-ask-password",
            "adjust-system-clock",
            "monitor",
            "all",
            "value",
        ],
        permute: true,
    };
    match G.parse(args) {
        Err(r) => r,
        Ok((_, words)) => Runs(vec![
            words.first().cloned().unwrap_or_else(|| "status".into()),
        ]),
    }
}

/// journalctl: GNU getopt; what it does is chosen by its command options
/// (the last one wins, so every one present is read); with none it prints
/// entries (`show`). Non-options are matches, never verbs.
fn journalctl(args: &[String]) -> Reading {
    const G: Getopt = Getopt {
        short_value: "DMSUcutpgoF",
        short_optional: "bn",
        short_flag: "hNmrxafqek",
        long_value: &[
            "directory",
            "file",
            "root",
            "image",
            "image-policy",
            "namespace",
            "since",
            "until",
            "cursor",
            "after-cursor",
            "cursor-file",
            "unit",
            "user-unit",
            "identifier",
            "priority",
            "facility",
            "grep",
            "output",
            "output-fields",
            "interval",
            "verify-key",
            "machine",
            "field",
            "vacuum-size",
            "vacuum-files",
            "vacuum-time",
        ],
        long_optional: &["boot", "lines", "case-sensitive"],
        long_flag: &[
            "system",
            "user",
            "merge",
            "dmesg",
            "reverse",
            "show-cursor",
            "utc",
            "catalog",
            "no-hostname",
            "no-full",
            "full",
            "all",
            "follow",
            "no-tail",
            "quiet",
            "no-pager",
            "pager-end",
            "force",
            "help",
            "version",
            "fields",
            "list-boots",
            "disk-usage",
            "verify",
            "sync",
            "relinquish-var",
            "smart-relinquish-var",
            "flush",
            "rotate",
            "header",
            "list-catalog",
            "dump-catalog",
            "update-catalog",
            "setup-keys",
            "new-id128",
        ],
        permute: true,
    };
    const COMMANDS: &[(&str, &str)] = &[
        ("-h", "help"),
        ("--help", "help"),
        ("--version", "version"),
        ("-N", "fields"),
        ("--fields", "fields"),
        ("-F", "field"),
        ("--field", "field"),
        ("--list-boots", "list-boots"),
        ("--disk-usage", "disk-usage"),
        ("--vacuum-size", "vacuum-size"),
        ("--vacuum-files", "vacuum-files"),
        ("--vacuum-time", "vacuum-time"),
        ("--verify", "verify"),
        ("--sync", "sync"),
        ("--relinquish-var", "relinquish-var"),
        ("--smart-relinquish-var", "smart-relinquish-var"),
        ("--flush", "flush"),
        ("--rotate", "rotate"),
        ("--header", "header"),
        ("--list-catalog", "list-catalog"),
        ("--dump-catalog", "dump-catalog"),
        ("--update-catalog", "update-catalog"),
        ("--setup-keys", "setup-keys"),
        ("--new-id128", "new-id128"),
    ];
    match G.parse(args) {
        Err(r) => r,
        Ok((options, _)) => {
            let verbs: Vec<String> = options
                .iter()
                .filter_map(|o| COMMANDS.iter().find(|(opt, _)| opt == o))
                .map(|(_, v)| v.to_string())
                .collect();
            Runs(if verbs.is_empty() {
                vec!["show".into()]
            } else {
                verbs
            })
        }
    }
}

/// ss: GNU getopt; what it does is a mode chosen by options (kill, events,
/// diag, a filter file, another netns), listing otherwise; non-options are
/// its filter expression.
fn ss(args: &[String]) -> Reading {
    const G: Getopt = Getopt {
        short_value: "fADFN",
        short_optional: "",
        short_flag: "hVnraloemTpisbEZz460tMSudwxKHO",
        long_value: &["family", "query", "socket", "diag", "filter", "net"],
        long_optional: &[],
        long_flag: &[
            "help",
            "version",
            "numeric",
            "resolve",
            "all",
            "listening",
            "options",
            "extended",
            "memory",
            "processes",
            "threads",
            "info",
            "tipcinfo",
            "summary",
            "tos",
            "cgroup",
            "bpf",
            "events",
            "context",
            "contexts",
            "ipv4",
            "ipv6",
            "packet",
            "tcp",
            "mptcp",
            "sctp",
            "udp",
            "dccp",
            "raw",
            "unix",
            "tipc",
            "vsock",
            "xdp",
            "kill",
            "no-header",
            "oneline",
            "inet-sockopt",
        ],
        permute: true,
    };
    const MODES: &[(&str, &str)] = &[
        ("-K", "kill"),
        ("--kill", "kill"),
        ("-E", "events"),
        ("--events", "events"),
        ("-D", "diag"),
        ("--diag", "diag"),
        ("-F", "filter-file"),
        ("--filter", "filter-file"),
        ("-N", "netns"),
        ("--net", "netns"),
    ];
    match G.parse(args) {
        Err(r) => r,
        Ok((options, _)) => {
            let modes: Vec<String> = options
                .iter()
                .filter_map(|o| MODES.iter().find(|(opt, _)| opt == o))
                .map(|(_, m)| m.to_string())
                .collect();
            Runs(if modes.is_empty() {
                vec!["list".into()]
            } else {
                modes
            })
        }
    }
}

/// apt and apt-get (apt-pkg's CommandLine): options anywhere, the command
/// is the first non-option.
fn apt_like(args: &[String], host_arch: bool) -> Reading {
    let g = Getopt {
        short_value: if host_arch { "octa" } else { "oct" },
        short_optional: "",
        short_flag: if host_arch {
            "yqsdfmuVhvb"
        } else {
            "yqsdfmuVhva"
        },
        long_value: &[
            "option",
            "config-file",
            "target-release",
            "default-release",
            "host-architecture",
        ],
        long_optional: &[],
        long_flag: &[
            "upgradable",
            "upgradeable",
            "installed",
            "manual-installed",
            "all-versions",
            "only-upgrade",
            "no-remove",
            "yes",
            "assume-yes",
            "quiet",
            "help",
            "version",
            "simulate",
            "dry-run",
            "download-only",
            "fix-broken",
            "no-install-recommends",
            "reinstall",
            "purge",
            "allow-downgrades",
        ],
        permute: true,
    };
    match g.parse(args) {
        Err(r) => r,
        Ok((_, words)) => match words.first() {
            Some(verb) => Runs(vec![verb.clone()]),
            None => Rejected,
        },
    }
}

fn apt(args: &[String]) -> Reading {
    apt_like(args, false)
}

fn apt_get(args: &[String]) -> Reading {
    apt_like(args, true)
}

/// fail2ban-client: Python getopt, which stops at the first non-option;
/// some options replace the command (`-i` interactive, `-d` dump, `-t`
/// test, `-h`, `-V`).
fn fail2ban_client(args: &[String]) -> Reading {
    const G: Getopt = Getopt {
        short_value: "csp",
        short_optional: "",
        short_flag: "hxfbdtviqV",
        long_value: &[
            "loglevel",
            "logtarget",
            "syslogsocket",
            "conf",
            "pidfile",
            "pname",
            "socket",
            "timeout",
            "str2sec",
        ],
        long_optional: &[],
        long_flag: &["test", "async", "help", "version", "dp", "dump-pretty"],
        permute: false,
    };
    const MODES: &[(&str, &str)] = &[
        ("-h", "client-help"),
        ("--help", "client-help"),
        ("-V", "client-version"),
        ("--version", "client-version"),
        ("-d", "dump"),
        ("--dp", "dump"),
        ("--dump-pretty", "dump"),
        ("-t", "test"),
        ("--test", "test"),
        ("-i", "interactive"),
        ("--str2sec", "str2sec"),
    ];
    match G.parse(args) {
        Err(r) => r,
        Ok((options, words)) => {
            let modes: Vec<String> = options
                .iter()
                .filter_map(|o| MODES.iter().find(|(opt, _)| opt == o))
                .map(|(_, m)| m.to_string())
                .collect();
            if !modes.is_empty() {
                return Runs(modes);
            }
            match words.first() {
                Some(verb) => Runs(vec![verb.clone()]),
                None => Rejected,
            }
        }
    }
}

/// ufw: `--dry-run`/`--force` first, then the command, with its second
/// word for the commands that have them.
fn ufw(args: &[String]) -> Reading {
    let rest: Vec<String> = args
        .iter()
        .skip_while(|a| *a == "--dry-run" || *a == "--force")
        .map(|a| a.to_lowercase())
        .collect();
    let Some(cmd) = rest.first() else {
        return Rejected;
    };
    let second: &[&str] = match cmd.as_str() {
        "status" => &["verbose", "numbered"],
        "show" => &[
            "raw",
            "before-rules",
            "user-rules",
            "after-rules",
            "logging-rules",
            "builtins",
            "listening",
            "added",
        ],
        "logging" => &["on", "off", "low", "medium", "high", "full"],
        "default" => &["allow", "deny", "reject"],
        "app" => &["list", "info", "update", "default"],
        _ => &[],
    };
    match rest.get(1) {
        Some(w) if second.contains(&w.as_str()) => Runs(vec![format!("{cmd} {w}")]),
        _ => Runs(vec![cmd.clone()]),
    }
}

/// nft: options only before the command (an option after a non-option is
/// refused); the rest is joined into command text, commands separated by
/// `;` or a newline; `-f` and `-i` take commands from elsewhere.
fn nft(args: &[String]) -> Reading {
    const G: Getopt = Getopt {
        short_value: "fIDdw",
        short_optional: "",
        short_flag: "hvVcijsnNSuyaetTpo",
        long_value: &["file", "includepath", "define", "debug", "netns"],
        long_optional: &[],
        long_flag: &[
            "help",
            "version",
            "check",
            "interactive",
            "json",
            "stateless",
            "numeric",
            "reversedns",
            "service",
            "guid",
            "numeric-priority",
            "numeric-protocol",
            "numeric-time",
            "handle",
            "echo",
            "terse",
            "optimize",
        ],
        permute: false,
    };
    let (options, words) = match G.parse(args) {
        Ok(parsed) => parsed,
        Err(r) => return r,
    };
    if words.iter().any(|w| w.starts_with('-')) {
        return Rejected;
    }
    for (o, mode) in [
        ("-f", "file"),
        ("--file", "file"),
        ("-i", "interactive"),
        ("--interactive", "interactive"),
        ("-h", "help"),
        ("--help", "help"),
    ] {
        if options.iter().any(|x| x == o) {
            return Runs(vec![mode.into()]);
        }
    }
    let text = words.join(" ");
    let verbs: Vec<String> = text
        .split([';', '\n'])
        .filter_map(|c| c.split_whitespace().next())
        .map(String::from)
        .collect();
    if verbs.is_empty() {
        Rejected
    } else {
        Runs(verbs)
    }
}

/// nginx: every argument is a bundle of option letters; `-c -e -g -p -s`
/// take a value. With no mode it starts the server.
fn nginx(args: &[String]) -> Reading {
    let mut flags = BTreeSet::new();
    let mut signal = None;
    let mut i = 0;
    while i < args.len() {
        let Some(bundle) = args[i].strip_prefix('-') else {
            return Rejected;
        };
        let letters: Vec<char> = bundle.chars().collect();
        for (j, &c) in letters.iter().enumerate() {
            match c {
                '?' | 'h' | 'v' | 'V' | 't' | 'T' | 'q' => {
                    flags.insert(c);
                }
                'p' | 'c' | 'e' | 'g' | 's' => {
                    let value = if j + 1 < letters.len() {
                        letters[j + 1..].iter().collect()
                    } else {
                        i += 1;
                        match args.get(i) {
                            Some(v) => v.clone(),
                            None => return Rejected,
                        }
                    };
                    if c == 's' {
                        signal = Some(value);
                    }
                    break;
                }
                _ => return Rejected,
            }
        }
        i += 1;
    }
    let mode = if flags.contains(&'h') || flags.contains(&'?') {
        "help".to_string()
    } else if flags.contains(&'T') {
        "dump".to_string()
    } else if flags.contains(&'t') {
        "test".to_string()
    } else if flags.contains(&'v') || flags.contains(&'V') {
        "version".to_string()
    } else if let Some(s) = signal {
        match s.as_str() {
            "stop" | "quit" | "reopen" | "reload" => format!("signal {s}"),
            _ => return Rejected,
        }
    } else {
        "start".to_string()
    };
    Runs(vec![mode])
}

/// docker (cobra, commands traversed): global flags, then the command; a
/// management command reads the next non-flag as its sub-command. A word
/// that is no command may be a CLI plugin (`docker-WORD`), which runs.
fn docker(args: &[String]) -> Reading {
    const GLOBAL_VALUE: &[&str] = &[
        "--config",
        "-c",
        "--context",
        "-H",
        "--host",
        "-l",
        "--log-level",
        "--tlscacert",
        "--tlscert",
        "--tlskey",
    ];
    const GLOBAL_FLAG: &[&str] = &["-D", "--debug", "--tls", "--tlsverify", "-h", "--help"];
    static COMMANDS: OnceLock<Vec<String>> = OnceLock::new();
    let commands = COMMANDS.get_or_init(|| fixture("docker"));
    let mut i = 0;
    while i < args.len() && args[i].starts_with('-') && args[i] != "-" {
        let a = args[i].as_str();
        let name = a.split('=').next().unwrap_or(a);
        if a == "-v" || a == "--version" {
            return Runs(vec!["version".into()]);
        }
        if GLOBAL_VALUE.contains(&name) {
            i += if a.contains('=') { 1 } else { 2 };
        } else if GLOBAL_FLAG.contains(&name) {
            i += 1;
        } else {
            // cobra refuses a flag the root does not define.
            return Rejected;
        }
    }
    let Some(cmd) = args.get(i) else {
        return Rejected;
    };
    let subs: Vec<&String> = commands
        .iter()
        .filter_map(|c| c.strip_prefix(&format!("{cmd} ")).map(|_| c))
        .collect();
    if subs.is_empty() {
        // A leaf command, or a plugin: everything after it is its own.
        return Runs(vec![cmd.clone()]);
    }
    // A management command: the next word is its sub-command; a flag before
    // it is one the management command does not define.
    match args.get(i + 1) {
        None => Runs(vec![cmd.clone()]),
        Some(w) if w.starts_with('-') => Rejected,
        Some(w) => {
            let path = format!("{cmd} {w}");
            if subs.iter().any(|s| **s == path) {
                Runs(vec![path])
            } else {
                Rejected
            }
        }
    }
}

// ---------------------------------------------------------------- the tools

struct Tool {
    cmd: &'static str,
    /// `fixtures/verbs/<fixture>.txt`.
    fixture: &'static str,
    model: fn(&[String]) -> Reading,
    /// What the rule may make the tool do: its reads (for `[[allow]]`), or
    /// the one action (for `[[chore_action]]`).
    may_run: &'static [&'static str],
}

const READS: &[Tool] = &[
    Tool {
        cmd: "systemctl",
        fixture: "systemctl",
        model: systemctl,
        may_run: &[
            "status",
            "show",
            "cat",
            "is-active",
            "check",
            "is-failed",
            "is-enabled",
            "is-system-running",
            "list-units",
            "list-automounts",
            "list-sockets",
            "list-timers",
            "list-paths",
            "list-unit-files",
            "list-dependencies",
            "list-machines",
            "list-jobs",
            "get-default",
            "show-environment",
            "whoami",
        ],
    },
    Tool {
        cmd: "journalctl",
        fixture: "journalctl",
        model: journalctl,
        may_run: &[
            "show",
            "version",
            "fields",
            "field",
            "list-boots",
            "disk-usage",
            "verify",
            "header",
            "list-catalog",
            "dump-catalog",
            "new-id128",
        ],
    },
    Tool {
        cmd: "docker",
        fixture: "docker",
        model: docker,
        may_run: &[
            "ps",
            "container ls",
            "container list",
            "container ps",
            "images",
            "image ls",
            "image list",
            "version",
            "info",
            "system info",
            "system df",
            "stats",
            "container stats",
            "logs",
            "container logs",
            "inspect",
            "container inspect",
            "image inspect",
            "top",
            "container top",
            "port",
            "container port",
            "diff",
            "container diff",
            "history",
            "image history",
        ],
    },
    Tool {
        cmd: "apt",
        fixture: "apt",
        model: apt,
        may_run: &[
            "list", "search", "show", "info", "policy", "depends", "rdepends", "showsrc",
        ],
    },
    Tool {
        cmd: "ss",
        fixture: "ss",
        model: ss,
        may_run: &["list"],
    },
    Tool {
        cmd: "fail2ban-client",
        fixture: "fail2ban-client",
        model: fail2ban_client,
        may_run: &["status", "ping", "version", "banned", "get", "echo", "help"],
    },
    Tool {
        cmd: "timedatectl",
        fixture: "timedatectl",
        model: timedatectl,
        may_run: &[
            "status",
            "show",
            "timesync-status",
            "show-timesync",
            "list-timezones",
        ],
    },
    Tool {
        cmd: "ufw",
        fixture: "ufw",
        model: ufw,
        may_run: &[
            "status",
            "status verbose",
            "status numbered",
            "show raw",
            "show before-rules",
            "show user-rules",
            "show after-rules",
            "show logging-rules",
            "show builtins",
            "show listening",
            "show added",
            "app list",
            "app info",
            "version",
            "help",
        ],
    },
    Tool {
        cmd: "nft",
        fixture: "nft",
        model: nft,
        may_run: &["list", "describe"],
    },
    Tool {
        cmd: "nginx",
        fixture: "nginx",
        model: nginx,
        may_run: &["test", "version", "help"],
    },
];

const ACTIONS: &[Tool] = &[
    Tool {
        cmd: "systemctl",
        fixture: "systemctl",
        model: systemctl,
        may_run: &["restart"],
    },
    Tool {
        cmd: "timedatectl",
        fixture: "timedatectl",
        model: timedatectl,
        may_run: &["set-ntp"],
    },
    Tool {
        cmd: "docker",
        fixture: "docker",
        model: docker,
        may_run: &["image prune", "builder prune"],
    },
    Tool {
        cmd: "apt-get",
        fixture: "apt-get",
        model: apt_get,
        may_run: &["install"],
    },
];

/// The verbs of a fixture, each as the arguments it takes (`system prune`
/// is two); a value the option needs (`--vacuum-size=BYTES`) is filled in.
fn fixture(name: &str) -> Vec<String> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/verbs")
        .join(format!("{name}.txt"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    assert!(
        text.starts_with("# source: "),
        "{} must say where it came from on its first line",
        path.display()
    );
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| match l.split_once('=') {
            Some((opt, _)) => format!("{opt}=1"),
            None => l.to_string(),
        })
        .collect()
}

fn words(s: &str) -> Vec<String> {
    s.split(' ').map(String::from).collect()
}

fn sample(t: ValueType) -> &'static str {
    match t {
        ValueType::Number => "5",
        ValueType::Since => "today",
        ValueType::Unit => "nginx.service",
        ValueType::Output => "short",
        ValueType::Priority => "err",
        ValueType::FsType => "ext4",
        ValueType::Filter => "status=running",
        ValueType::Template => "{{.Names}}",
    }
}

fn sample_positional(k: Positional) -> Option<&'static str> {
    match k {
        Positional::Path => Some("/var/log"),
        Positional::File => Some("/proc/loadavg"),
        Positional::Container => Some("web"),
        Positional::Unit => Some("nginx.service"),
        Positional::Match => Some("_COMM=sshd"),
        Positional::Jail => Some("sshd"),
        Positional::Service => Some("nginx"),
        Positional::Package => Some("dpkg"),
        Positional::None => None,
    }
}

/// The rule's own words as units a request is built from: each verb (one
/// or two arguments), `before` token, token, valued option with a value,
/// prefixed option with a value, flag letter, and a positional argument of
/// each kind.
fn units(rule: &Rule) -> Vec<Vec<String>> {
    let mut u: BTreeSet<Vec<String>> = BTreeSet::new();
    for s in rule.subs {
        for v in s.verbs {
            u.insert(words(v));
        }
        for t in s.before.iter().chain(s.tokens) {
            u.insert(vec![t.to_string()]);
        }
        for v in s.valued {
            u.insert(vec![v.option.to_string(), sample(v.value).to_string()]);
        }
        for p in s.prefixed {
            u.insert(vec![format!("{}{}", p.option, sample(p.value))]);
        }
        for c in s.flag_letters.chars() {
            u.insert(vec![format!("-{c}")]);
        }
        if let Some(p) = sample_positional(s.positional) {
            u.insert(vec![p.to_string()]);
        }
    }
    u.into_iter().collect()
}

/// Every allowed request made of at most `n` units, with its number of
/// units.
fn allowed_bases(table: Table, rule: &Rule, n: usize) -> Vec<(Vec<String>, usize)> {
    let units = units(rule);
    let mut all: Vec<(Vec<String>, usize)> = vec![(Vec::new(), 0)];
    let mut frontier: Vec<Vec<String>> = vec![Vec::new()];
    for k in 1..=n {
        let mut next = Vec::new();
        for base in &frontier {
            for u in &units {
                let mut r = base.clone();
                r.extend(u.iter().cloned());
                if r.len() <= rule.max_args {
                    next.push(r);
                }
            }
        }
        all.extend(next.iter().map(|r| (r.clone(), k)));
        frontier = next;
    }
    all.into_iter()
        .filter(|(r, _)| check(table, rule.cmd, r, &Requester::Warden).is_ok())
        .collect()
}

/// Puts every verb of the tool at every position of every allowed base,
/// and in place of every argument; returns what broke.
fn differential(table: Table, tool: &Tool) -> Vec<String> {
    let rules: &[Rule] = match table {
        Table::Allow => ALLOW,
        Table::ChoreAction => CHORE_ACTIONS,
    };
    let rule = rules
        .iter()
        .find(|r| r.cmd == tool.cmd)
        .unwrap_or_else(|| panic!("no rule for {}", tool.cmd));
    let verbs = fixture(tool.fixture);
    // A tool with verbs: the verb and up to two more units are judged as
    // they are, and every verb of the tool goes around and in place of the
    // verb with one option, token or positional. A tool without verbs: up to
    // two units, and its verbs (command options, modes) around one.
    let (judged, around) = if rule.verbless().is_some() {
        (2, 1)
    } else {
        (3, 2)
    };
    let bases = allowed_bases(table, rule, judged);
    assert!(
        !bases.is_empty(),
        "{}: no allowed request to start from",
        tool.cmd
    );
    let mut broken = Vec::new();
    let judge = |r: &[String], broken: &mut Vec<String>| {
        if check(table, rule.cmd, r, &Requester::Warden).is_err() {
            return;
        }
        match (tool.model)(r) {
            Rejected => {}
            Unknown(opt) => broken.push(format!(
                "{} {r:?}: the model does not know {opt:?}; teach it how the tool reads it",
                tool.cmd
            )),
            Runs(ran) => {
                for v in ran {
                    if !tool.may_run.contains(&v.as_str()) {
                        broken.push(format!("{} {r:?} is allowed and runs {v:?}", tool.cmd));
                    }
                }
            }
        }
    };
    let mut seen = BTreeSet::new();
    for (base, n) in &bases {
        judge(base, &mut broken);
        if *n > around {
            continue;
        }
        for verb in &verbs {
            let w = words(verb);
            for p in 0..=base.len() {
                let mut r = base.clone();
                r.splice(p..p, w.iter().cloned());
                if seen.insert(r.clone()) {
                    judge(&r, &mut broken);
                }
                if p < base.len() {
                    let mut r = base.clone();
                    r.splice(p..=p, w.iter().cloned());
                    if seen.insert(r.clone()) {
                        judge(&r, &mut broken);
                    }
                }
            }
        }
    }
    broken.sort();
    broken.dedup();
    broken
}

fn report(broken: Vec<String>) {
    assert!(
        broken.is_empty(),
        "{} allowed requests run what the rule must not:\n{}",
        broken.len(),
        broken
            .iter()
            .take(40)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn no_allowed_read_puts_a_verb_that_is_not_a_read_where_the_tool_reads_its_verb() {
    let mut broken = Vec::new();
    for tool in READS {
        broken.extend(differential(Table::Allow, tool));
    }
    report(broken);
}

#[test]
fn no_allowed_chore_action_runs_another_verb_than_its_own() {
    let mut broken = Vec::new();
    for tool in ACTIONS {
        broken.extend(differential(Table::ChoreAction, tool));
    }
    report(broken);
}

/// Every rule of a tool with verbs (or modes) is under the differential
/// test, and every fixture is used.
#[test]
fn every_tool_with_verbs_has_a_fixture_and_a_model() {
    for rule in ALLOW {
        if rule.verbless().is_none() {
            assert!(
                READS.iter().any(|t| t.cmd == rule.cmd),
                "[[allow]] {} has verbs and no model here",
                rule.cmd
            );
        }
    }
    for rule in CHORE_ACTIONS {
        assert!(
            ACTIONS.iter().any(|t| t.cmd == rule.cmd),
            "[[chore_action]] {} has no model here",
            rule.cmd
        );
    }
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/verbs");
    for entry in std::fs::read_dir(&dir).expect("the fixtures") {
        let name = entry.expect("an entry").file_name();
        let name = name.to_string_lossy();
        if let Some(tool) = name.strip_suffix(".txt") {
            assert!(
                READS.iter().chain(ACTIONS).any(|t| t.fixture == tool),
                "fixtures/verbs/{name} is used by no model"
            );
        }
    }
}

/// The models read the attacks the way the real tools did, so a test that
/// passes is not a model that reads nothing.
#[test]
fn the_models_read_the_attacks_as_the_tools_do() {
    let a = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        systemctl(&a(&["--failed", "reboot"])),
        Runs(vec!["reboot".into()])
    );
    assert_eq!(
        systemctl(&a(&["--failed"])),
        Runs(vec!["list-units".into()])
    );
    assert_eq!(
        systemctl(&a(&["-n", "5", "status", "x"])),
        Runs(vec!["status".into()])
    );
    assert_eq!(
        docker(&a(&["system", "prune"])),
        Runs(vec!["system prune".into()])
    );
    assert_eq!(docker(&a(&["logs", "prune"])), Runs(vec!["logs".into()]));
    assert_eq!(nginx(&a(&["-q"])), Runs(vec!["start".into()]));
    assert_eq!(nginx(&a(&[])), Runs(vec!["start".into()]));
    assert_eq!(nginx(&a(&["-tq"])), Runs(vec!["test".into()]));
    assert_eq!(
        journalctl(&a(&["-n", "5", "--vacuum-size=1"])),
        Runs(vec!["vacuum-size".into()])
    );
    assert_eq!(
        fail2ban_client(&a(&["status", "-i"])),
        Runs(vec!["status".into()])
    );
    assert_eq!(
        nft(&a(&["list", "ruleset;", "flush", "ruleset"])),
        Runs(vec!["list".into(), "flush".into()])
    );
    assert_eq!(nft(&a(&["list", "ruleset", "-a"])), Rejected);
    assert_eq!(
        ufw(&a(&["status", "numbered"])),
        Runs(vec!["status numbered".into()])
    );
    assert_eq!(ss(&a(&["-tK"])), Runs(vec!["kill".into()]));
    assert_eq!(
        apt(&a(&["-o", "x=y", "install", "list"])),
        Runs(vec!["install".into()])
    );
    assert_eq!(
        timedatectl(&a(&["--no-pager"])),
        Runs(vec!["status".into()])
    );
}

/// The options a `--help` text lists: every word of its option lines that
/// starts with `-`, without a `=VALUE` part or a trailing comma.
fn help_options(help: &str) -> BTreeSet<String> {
    help.lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with('-'))
        .flat_map(|l| l.split_whitespace().take(3))
        .filter(|w| w.starts_with('-'))
        .map(|w| {
            w.trim_end_matches(',')
                .split('=')
                .next()
                .unwrap_or(w)
                .to_string()
        })
        .collect()
}

fn help(cmd: &str, args: &[&str]) -> BTreeSet<String> {
    let out = assert_cmd::Command::new(cmd)
        .args(args)
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success(), "{cmd} {args:?} --help failed");
    help_options(&String::from_utf8_lossy(&out.stdout))
}

/// Each option of a form is one the real tool lists for that verb (docker
/// has options per command: `--tail` only for `logs`, `--no-stream` only for
/// `stats`, `-v` only for `system df`), checked against the `--help` of the
/// tools installed here.
#[test]
fn every_option_of_a_form_is_one_the_real_tool_has_for_that_verb() {
    for (cmd, per_verb) in [
        ("docker", true),
        ("systemctl", false),
        ("journalctl", false),
        ("timedatectl", false),
    ] {
        let rule = ALLOW.iter().find(|r| r.cmd == cmd).expect("a rule");
        let global = help(cmd, &[]);
        for sub in rule.subs {
            let verbs: Vec<&str> = if sub.verbs.is_empty() {
                vec![""]
            } else {
                sub.verbs.to_vec()
            };
            for verb in verbs {
                let listed = if per_verb {
                    help(cmd, &verb.split(' ').collect::<Vec<_>>())
                } else {
                    global.clone()
                };
                let options = sub
                    .tokens
                    .iter()
                    .chain(sub.before)
                    .copied()
                    .chain(sub.valued.iter().map(|v| v.option))
                    .chain(sub.prefixed.iter().map(|v| v.option.trim_end_matches('=')))
                    .filter(|o| o.starts_with('-') && *o != verb)
                    .map(|o| o.split('=').next().unwrap_or(o));
                for o in options {
                    if listed.contains(o) {
                        continue;
                    }
                    // A systemd tool keeps some options --help no longer
                    // lists (systemctl's --no-legend): it must still parse
                    // it, then print its version.
                    let parsed = !per_verb
                        && assert_cmd::Command::new(cmd)
                            .args([o, "--version"])
                            .output()
                            .unwrap()
                            .status
                            .success();
                    assert!(parsed, "{cmd} {verb}: {o} is not among {listed:?}");
                }
            }
        }
    }
}
