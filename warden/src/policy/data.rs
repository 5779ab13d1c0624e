//! The compiled-in policy: what the Worker may ask for without a button,
//! and what a chore may have the Warden run for it. This data is the policy;
//! `render` turns it into the text of `/etc/aromba/warden/policy.toml` and of
//! SECURITY.md's block, which the Warden never reads back.

#![forbid(unsafe_code)]

use super::types::{
    ChoreActionRules, Limits, PathRules, Positional, Rule, SUB, Sub, ValueType, Valued,
};
use aromba_warden_proto::rules;

/// An option and the type of its value.
const fn v(option: &'static str, value: ValueType) -> Valued {
    Valued { option, value }
}

pub const LIMITS: Limits = Limits {
    timeout_s: 30,
    max_output_bytes: 1048576,
};

pub const ALLOW: &[Rule] = &[
    Rule {
        cmd: "df",
        bins: &["/usr/bin/df", "/bin/df"],
        doc: "disk usage by filesystem, space and inodes",
        subs: &[Sub {
            flag_letters: "PhklTai",
            tokens: &[
                "--output=source,fstype,size,used,avail,pcent,target",
                "--output=target,pcent,avail,size",
                "-B1",
                "--block-size=1",
                "--total",
            ],
            valued: &[v("-t", ValueType::FsType), v("-x", ValueType::FsType)],
            positional: Positional::Path,
            ..SUB
        }],
        min_args: None,
        max_args: 12,
        warden_adds: &[],
        warden_env: &[],
        timeout_s: 30,
        low_priority: false,
    },
    Rule {
        cmd: "du",
        bins: &["/usr/bin/du", "/bin/du"],
        doc: "size of directories",
        subs: &[Sub {
            flag_letters: "sxkmhca",
            tokens: &[
                "-B1",
                "--block-size=1",
                "--max-depth=1",
                "--max-depth=2",
                "--max-depth=3",
                "--apparent-size",
                "--total",
            ],
            valued: &[v("-d", ValueType::Number)],
            positional: Positional::Path,
            ..SUB
        }],
        min_args: None,
        max_args: 40,
        warden_adds: &[],
        warden_env: &[],
        timeout_s: 300,
        low_priority: true,
    },
    Rule {
        cmd: "ls",
        bins: &["/usr/bin/ls", "/bin/ls"],
        doc: "list a directory",
        subs: &[Sub {
            flag_letters: "laAhtrS1dp",
            tokens: &[
                "--time-style=long-iso",
                "--time-style=iso",
                "--time-style=full-iso",
            ],
            positional: Positional::Path,
            ..SUB
        }],
        min_args: None,
        max_args: 12,
        warden_adds: &[],
        warden_env: &[],
        timeout_s: 30,
        low_priority: false,
    },
    Rule {
        cmd: "ps",
        bins: &["/usr/bin/ps", "/bin/ps"],
        doc: "process list",
        subs: &[Sub {
            tokens: &[
                "aux",
                "axo",
                "-eo",
                "-e",
                "-o",
                "-ww",
                "--no-headers",
                "--sort=-%mem",
                "--sort=-%cpu",
                "--sort=-rss",
                "pid,ppid,user,%cpu,%mem,rss,vsz,etime,stat,comm,args",
                "pid,user,%cpu,%mem,rss,etime,comm",
                "pid,ppid,user,etime,comm,args",
                "pid,comm,args",
            ],
            ..SUB
        }],
        min_args: None,
        max_args: 6,
        warden_adds: &[],
        warden_env: &[],
        timeout_s: 30,
        low_priority: false,
    },
    Rule {
        cmd: "docker",
        bins: &["/usr/bin/docker", "/usr/local/bin/docker"],
        doc: "containers, images, disk use and a container's own log — read only",
        subs: &[
            Sub {
                verbs: &["ps"],
                tokens: &["-a", "--all", "--no-trunc", "-q"],
                valued: &[
                    v("--filter", ValueType::Filter),
                    v("--format", ValueType::Template),
                    v("-n", ValueType::Number),
                ],
                ..SUB
            },
            Sub {
                verbs: &["images"],
                tokens: &["-a", "--all", "--no-trunc", "-q"],
                valued: &[
                    v("--filter", ValueType::Filter),
                    v("--format", ValueType::Template),
                ],
                ..SUB
            },
            Sub {
                verbs: &["version", "info", "system info"],
                valued: &[v("--format", ValueType::Template)],
                ..SUB
            },
            Sub {
                verbs: &["system df"],
                tokens: &["-v"],
                valued: &[v("--format", ValueType::Template)],
                ..SUB
            },
            Sub {
                verbs: &["stats"],
                tokens: &["-a", "--all", "--no-trunc", "--no-stream"],
                valued: &[v("--format", ValueType::Template)],
                positional: Positional::Container,
                ..SUB
            },
            Sub {
                verbs: &["logs"],
                tokens: &["-t", "--timestamps"],
                valued: &[
                    v("--since", ValueType::Since),
                    v("--tail", ValueType::Number),
                    v("--until", ValueType::Since),
                    v("-n", ValueType::Number),
                ],
                prefixed: &[
                    v("--since=", ValueType::Since),
                    v("--tail=", ValueType::Number),
                    v("--until=", ValueType::Since),
                ],
                positional: Positional::Container,
                min_positional: 1,
                max_positional: Some(1),
                ..SUB
            },
        ],
        min_args: None,
        max_args: 10,
        warden_adds: &[],
        warden_env: &[],
        timeout_s: 120,
        low_priority: false,
    },
    Rule {
        cmd: "systemctl",
        bins: &["/usr/bin/systemctl", "/bin/systemctl"],
        doc: "service state — read only",
        subs: &[
            Sub {
                verbs: &["status"],
                tokens: &["--no-pager", "--full", "-l", "--all", "-a"],
                valued: &[v("--lines", ValueType::Number), v("-n", ValueType::Number)],
                prefixed: &[v("--lines=", ValueType::Number)],
                positional: Positional::Unit,
                ..SUB
            },
            Sub {
                verbs: &["is-active", "is-enabled", "is-failed"],
                tokens: &["--quiet", "-q", "--no-pager"],
                positional: Positional::Unit,
                min_positional: 1,
                ..SUB
            },
            Sub {
                verbs: &["list-units"],
                tokens: &[
                    "--failed",
                    "--all",
                    "-a",
                    "--no-pager",
                    "--plain",
                    "--no-legend",
                    "-l",
                    "--full",
                    "--type=service",
                    "--type=timer",
                    "--state=failed",
                    "--state=running",
                    "--state=active",
                ],
                ..SUB
            },
            Sub {
                verbs: &["--failed"],
                tokens: &[
                    "--all",
                    "-a",
                    "--no-pager",
                    "--plain",
                    "--no-legend",
                    "-l",
                    "--full",
                    "--type=service",
                    "--type=timer",
                ],
                ..SUB
            },
            Sub {
                verbs: &["list-timers"],
                tokens: &["--all", "-a", "--no-pager", "--no-legend", "-l", "--full"],
                ..SUB
            },
            Sub {
                verbs: &["list-unit-files"],
                tokens: &[
                    "--no-pager",
                    "--no-legend",
                    "-l",
                    "--full",
                    "--type=service",
                    "--type=timer",
                ],
                ..SUB
            },
        ],
        min_args: None,
        max_args: 12,
        warden_adds: &[],
        warden_env: &[],
        timeout_s: 30,
        low_priority: false,
    },
    Rule {
        cmd: "journalctl",
        bins: &["/usr/bin/journalctl", "/bin/journalctl"],
        doc: "logs — read only, bounded",
        subs: &[Sub {
            tokens: &[
                "--no-pager",
                "-q",
                "--quiet",
                "-r",
                "--reverse",
                "-b",
                "--utc",
                "-k",
                "--dmesg",
                "-x",
                "--disk-usage",
                "--list-boots",
            ],
            valued: &[
                v("--lines", ValueType::Number),
                v("--output", ValueType::Output),
                v("--priority", ValueType::Priority),
                v("--since", ValueType::Since),
                v("--unit", ValueType::Unit),
                v("--until", ValueType::Since),
                v("-S", ValueType::Since),
                v("-U", ValueType::Since),
                v("-n", ValueType::Number),
                v("-o", ValueType::Output),
                v("-p", ValueType::Priority),
                v("-u", ValueType::Unit),
            ],
            prefixed: &[
                v("--lines=", ValueType::Number),
                v("--output=", ValueType::Output),
                v("--priority=", ValueType::Priority),
                v("--since=", ValueType::Since),
                v("--unit=", ValueType::Unit),
                v("--until=", ValueType::Since),
            ],
            positional: Positional::Match,
            ..SUB
        }],
        min_args: None,
        max_args: 16,
        warden_adds: &[],
        warden_env: &[],
        timeout_s: 120,
        low_priority: false,
    },
    Rule {
        cmd: "apt",
        bins: &["/usr/bin/apt"],
        doc: "pending updates — read only",
        subs: &[Sub {
            verbs: &["list"],
            tokens: &["--upgradable", "--upgradeable", "--installed", "-a"],
            ..SUB
        }],
        min_args: None,
        max_args: 4,
        warden_adds: &[],
        warden_env: &[],
        timeout_s: 120,
        low_priority: false,
    },
    Rule {
        cmd: "ss",
        bins: &["/usr/bin/ss", "/bin/ss"],
        doc: "listening sockets",
        subs: &[Sub {
            flag_letters: "tulnpasH46",
            tokens: &["state", "listening", "established"],
            ..SUB
        }],
        min_args: None,
        max_args: 8,
        warden_adds: &[],
        warden_env: &[],
        timeout_s: 30,
        low_priority: false,
    },
    Rule {
        cmd: "free",
        bins: &["/usr/bin/free", "/bin/free"],
        doc: "memory and swap",
        subs: &[Sub {
            flag_letters: "mhbkgwt",
            ..SUB
        }],
        min_args: None,
        max_args: 4,
        warden_adds: &[],
        warden_env: &[],
        timeout_s: 30,
        low_priority: false,
    },
    Rule {
        cmd: "uptime",
        bins: &["/usr/bin/uptime", "/bin/uptime"],
        doc: "uptime and load",
        subs: &[Sub {
            flag_letters: "ps",
            ..SUB
        }],
        min_args: None,
        max_args: 2,
        warden_adds: &[],
        warden_env: &[],
        timeout_s: 30,
        low_priority: false,
    },
    Rule {
        cmd: "hostname",
        bins: &["/usr/bin/hostname", "/bin/hostname"],
        doc: "host name",
        subs: &[Sub {
            flag_letters: "fsI",
            ..SUB
        }],
        min_args: None,
        max_args: 2,
        warden_adds: &[],
        warden_env: &[],
        timeout_s: 30,
        low_priority: false,
    },
    Rule {
        cmd: "nproc",
        bins: &["/usr/bin/nproc"],
        doc: "cpu count",
        subs: &[Sub { ..SUB }],
        min_args: None,
        max_args: 0,
        warden_adds: &[],
        warden_env: &[],
        timeout_s: 30,
        low_priority: false,
    },
    Rule {
        cmd: "cat",
        bins: &["/usr/bin/cat", "/bin/cat"],
        doc: "read one of the listed system files",
        subs: &[Sub {
            positional: Positional::File,
            ..SUB
        }],
        min_args: None,
        max_args: 4,
        warden_adds: &[],
        warden_env: &[],
        timeout_s: 30,
        low_priority: false,
    },
    Rule {
        cmd: "fail2ban-client",
        bins: &["/usr/bin/fail2ban-client"],
        doc: "jail status",
        subs: &[
            Sub {
                verbs: &["status"],
                positional: Positional::Jail,
                max_positional: Some(1),
                ..SUB
            },
            Sub {
                verbs: &["ping", "version"],
                ..SUB
            },
        ],
        min_args: None,
        max_args: 2,
        warden_adds: &[],
        warden_env: &[],
        timeout_s: 30,
        low_priority: false,
    },
    Rule {
        cmd: "timedatectl",
        bins: &["/usr/bin/timedatectl", "/bin/timedatectl"],
        doc: "clock and time sync state — read only",
        subs: &[Sub {
            verbs: &["show", "status", "timesync-status"],
            tokens: &["--no-pager"],
            ..SUB
        }],
        min_args: None,
        max_args: 2,
        warden_adds: &[],
        warden_env: &[],
        timeout_s: 30,
        low_priority: false,
    },
    Rule {
        cmd: "ufw",
        bins: &["/usr/sbin/ufw", "/usr/bin/ufw"],
        doc: "firewall state — read only",
        subs: &[Sub {
            verbs: &["status", "status verbose", "status numbered"],
            ..SUB
        }],
        min_args: None,
        max_args: 2,
        warden_adds: &[],
        warden_env: &[],
        timeout_s: 30,
        low_priority: false,
    },
    Rule {
        cmd: "nginx",
        bins: &["/usr/sbin/nginx", "/usr/bin/nginx"],
        doc: "test the configuration — read only",
        subs: &[
            Sub {
                verbs: &["-t"],
                tokens: &["-q"],
                ..SUB
            },
            Sub {
                verbs: &["-v"],
                ..SUB
            },
        ],
        min_args: None,
        max_args: 2,
        warden_adds: &[],
        warden_env: &[],
        timeout_s: 30,
        low_priority: false,
    },
    Rule {
        cmd: "nft",
        bins: &["/usr/sbin/nft", "/usr/bin/nft"],
        doc: "the firewall's ruleset — read only",
        subs: &[Sub {
            before: &["-a", "-n"],
            verbs: &["list ruleset", "list tables", "list chains"],
            ..SUB
        }],
        min_args: None,
        max_args: 4,
        warden_adds: &[],
        warden_env: &[],
        timeout_s: 30,
        low_priority: false,
    },
];

pub const CAT_FILES: &[&str] = &[
    "/etc/os-release",
    "/usr/lib/os-release",
    "/etc/debian_version",
    "/etc/lsb-release",
    "/etc/hostname",
    "/etc/timezone",
    "/etc/fstab",
    "/var/run/reboot-required",
    "/run/reboot-required",
    "/var/run/reboot-required.pkgs",
    "/run/reboot-required.pkgs",
    "/proc/loadavg",
    "/proc/meminfo",
    "/proc/uptime",
    "/proc/cpuinfo",
    "/proc/version",
    "/proc/stat",
    "/proc/swaps",
    "/proc/mounts",
    "/proc/diskstats",
    "/proc/vmstat",
    "/proc/net/dev",
    "/proc/sys/kernel/random/boot_id",
    "/proc/sys/kernel/hostname",
];

pub const CHORE_ACTIONS: &[Rule] = &[
    Rule {
        cmd: "systemctl",
        bins: &["/usr/bin/systemctl", "/bin/systemctl"],
        doc: "restart one service",
        subs: &[Sub {
            verbs: &["restart"],
            positional: Positional::Service,
            min_positional: 1,
            max_positional: Some(1),
            ..SUB
        }],
        min_args: Some(2),
        max_args: 2,
        warden_adds: &[],
        warden_env: &[],
        timeout_s: 120,
        low_priority: false,
    },
    Rule {
        cmd: "timedatectl",
        bins: &["/usr/bin/timedatectl", "/bin/timedatectl"],
        doc: "turn time sync on",
        subs: &[Sub {
            verbs: &["set-ntp true"],
            ..SUB
        }],
        min_args: Some(2),
        max_args: 2,
        warden_adds: &[],
        warden_env: &[],
        timeout_s: 30,
        low_priority: false,
    },
    Rule {
        cmd: "docker",
        bins: &["/usr/bin/docker"],
        doc: "remove dangling images, or the build cache not in use",
        subs: &[Sub {
            verbs: &["image prune", "builder prune"],
            tokens: &["-f", "--force"],
            ..SUB
        }],
        min_args: Some(3),
        max_args: 3,
        warden_adds: &[],
        warden_env: &[],
        timeout_s: 900,
        low_priority: true,
    },
    Rule {
        cmd: "apt-get",
        bins: &["/usr/bin/apt-get"],
        doc: "upgrade named installed packages, or install one of: fail2ban",
        subs: &[Sub {
            verbs: &["install"],
            tokens: &["-y", "--only-upgrade"],
            positional: Positional::Package,
            min_positional: 1,
            ..SUB
        }],
        min_args: Some(3),
        max_args: 24,
        warden_adds: &[
            "-qq",
            "--no-remove",
            "-o",
            "Dpkg::Options::=--force-confdef",
            "-o",
            "Dpkg::Options::=--force-confold",
            "-o",
            "DPkg::Lock::Timeout=120",
        ],
        warden_env: &["DEBIAN_FRONTEND=noninteractive"],
        timeout_s: 900,
        low_priority: true,
    },
];

pub const CHORE_ACTION_RULES: ChoreActionRules = ChoreActionRules {
    never_restart: r#"^(?:aromba.*|systemd-(?:reboot|poweroff|halt|kexec|suspend|hibernate|hybrid-sleep|suspend-then-hibernate|soft-reboot|exit)|emergency|rescue|dbus|dbus-broker|systemd-logind|systemd-journald|systemd-udevd)(?:@.*)?\.service$"#,
    new_packages: &["fail2ban"],
    package_name: "^[a-z0-9][a-z0-9+.-]{0,126}[a-z0-9+]$",
};

// The secret paths and the deny list are the contract crate's
// (`aromba_warden_proto::rules`): the Worker's assistant judges by the same
// copy before it asks.
pub const PATHS: PathRules = PathRules {
    secret_prefixes: rules::SECRET_PREFIXES,
    secret_dirs: rules::SECRET_DIRS,
    secret_names: rules::SECRET_NAMES,
    fences: &[],
};

/// Matched against the whole request; a hit refuses it and counts toward the ladder.
pub const DENY: &[(&str, &str)] = rules::DENY;
