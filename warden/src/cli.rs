//! The Warden's command line, parsed by hand: the Warden links no argument
//! parser. Every token must be one this module knows; anything else is an
//! error that names it.

#![forbid(unsafe_code)]

use std::fmt;
use std::path::{Path, PathBuf};

pub const HELP: &str = "\
The root process of Aromba, and the only one that executes.

Usage: aromba-warden <COMMAND>

Commands:
  install [--root DIR] [--worker-bin PATH] [--worker-user NAME]
      [--installed-days-ago N]
          Refuse unless every directory from / down to each of the
          Warden's is root's and writable by no one else (naming the
          one that is not), plant the honeypots in the Worker's home
          and configuration directory without following a link, lay
          out the Warden's directories, write the policy rendering to
          /etc/aromba/warden/policy.toml (DIR/etc/policy.toml with
          --root), reset the ladder and record the integrity baseline
          of this binary and the Worker's (default
          /usr/local/bin/aromba). Run as root by the installer;
          running it again is how a disarmed Warden is recovered.
          --installed-days-ago N (with --root only, a tree apart from
          the system's own directories: the local demo)
          records the install N days back, so the demo can show
          what a server allows after its first week.
  rollback [--root DIR]
          Run by systemd (aromba-rollback.service) from the previous
          release when the Warden's unit failed to start three times:
          only when the new release's Warden never took over (its
          update still pending) — otherwise it refuses and changes
          nothing — point /opt/aromba/current back at the previous
          release, record the failed version (not installed again
          on the Worker's word; `aromba update` may), take this
          binary as the baseline, and restart both services.
  serve [--root DIR] [--worker-user NAME]
          Run the Warden: the Worker socket (only the Worker's uid)
          and the control socket (only root), the policy, exec,
          redaction and the journal. Must run as root, and refuses to
          start unless every directory down to each of its own is
          root's and writable by no one else. Without --root: sockets
          in /run/aromba/, state in /var/lib/aromba-warden/state/,
          journal in /var/lib/aromba-warden/journal/, quarantine in
          /var/lib/aromba-warden/quarantine/, audit key
          /etc/aromba/warden/audit.key if present. With --root DIR
          everything is under DIR (DIR/run, DIR/state, DIR/journal,
          DIR/quarantine, DIR/etc; the Worker's DIR/home and
          DIR/worker) — for tests and the local demo; DIR must be
          root's; the Worker's `aromba ask --root DIR` finds the
          socket there.
          --worker-user names the Worker's account (default aromba).
  redact [--cut]
          Read stdin, write it redacted to stdout, and the number of
          removals per class to stderr (one `CLASS N` line each, then
          `total N`). --cut treats the input as cut at a byte cap: its
          unfinished last line is removed too.
  policy render
          Print the compiled-in policy, as installed to
          /etc/aromba/warden/policy.toml (never read back).
  policy check [--worker-user NAME] -- CMD [ARG...]
          Judge a read request from the Worker against the policy
          and print the verdict and the rule or reason. Runs
          nothing. Path arguments are judged against the Worker's
          account (default aromba; its uid and groups from
          /etc/passwd and /etc/group). Exit 0 when allowed, 1 when
          refused, 2 when the account cannot be found.
  journal verify [PATH] [--key FILE] [--root DIR]
          Recompute the journal's hash chain (and HMACs, with the
          audit key) across its rotated, compressed files. PATH
          defaults to /var/lib/aromba-warden/journal/journal.jsonl,
          or DIR/journal/journal.jsonl with --root. Says how many
          earlier lines rotation dropped, if any. Exit 0 when the
          chain holds, 1 at the first break, which it names.
  help    Print this message

Options:
  -h, --help     Print help
  -V, --version  Print version
";

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    Help,
    Version,
    Redact,
    RedactCut,
    PolicyRender,
    PolicyCheck {
        cmd: String,
        args: Vec<String>,
        worker_user: String,
    },
    Install {
        root: Option<PathBuf>,
        worker_bin: PathBuf,
        worker_user: String,
        /// Days the install is recorded back; 0 but for a `--root` tree.
        installed_days_ago: u64,
        /// The key Telegram signs Mini App launches with, when not its
        /// production key (the demo's fake, Telegram's test environment).
        telegram_key: Option<crate::init_data::TelegramKey>,
    },
    /// Put the previous release back (systemd runs it after three failed
    /// starts).
    Rollback {
        root: Option<PathBuf>,
    },
    Serve {
        root: Option<PathBuf>,
        worker_user: String,
    },
    JournalVerify {
        path: Option<PathBuf>,
        key: Option<PathBuf>,
        root: Option<PathBuf>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CliError {
    NoCommand,
    NotUnicode(String),
    UnknownCommand(String),
    UnexpectedArgument { command: &'static str, arg: String },
    Usage(&'static str),
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::NoCommand => write!(f, "no command given; try `aromba-warden --help`"),
            CliError::NotUnicode(lossy) => write!(f, "argument {lossy:?} is not valid UTF-8"),
            CliError::UnknownCommand(c) => {
                write!(f, "unknown command {c:?}; try `aromba-warden --help`")
            }
            CliError::Usage(usage) => f.write_str(usage),
            CliError::UnexpectedArgument { command, arg } => {
                write!(
                    f,
                    "`{command}` does not take {arg:?}; try `aromba-warden --help`"
                )
            }
        }
    }
}

impl std::error::Error for CliError {}

/// Parses the arguments after the program name, as the OS gave them.
pub fn parse_os(args: impl IntoIterator<Item = std::ffi::OsString>) -> Result<Command, CliError> {
    let args = args
        .into_iter()
        .map(|a| {
            a.into_string()
                .map_err(|bad| CliError::NotUnicode(bad.to_string_lossy().into_owned()))
        })
        .collect::<Result<Vec<String>, CliError>>()?;
    parse(args)
}

/// Parses the arguments after the program name.
pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Command, CliError> {
    let mut args = args.into_iter();
    let Some(first) = args.next() else {
        return Err(CliError::NoCommand);
    };
    let rest: Vec<String> = args.collect();
    let no_more = |command: &'static str, cmd: Command| match rest.first() {
        None => Ok(cmd),
        Some(arg) => Err(CliError::UnexpectedArgument {
            command,
            arg: arg.clone(),
        }),
    };
    match first.as_str() {
        "-h" | "--help" | "help" => no_more("help", Command::Help),
        "-V" | "--version" => no_more("--version", Command::Version),
        "redact" => match rest.as_slice() {
            [] => Ok(Command::Redact),
            [cut] if cut == "--cut" => Ok(Command::RedactCut),
            [arg, ..] => Err(CliError::UnexpectedArgument {
                command: "redact",
                arg: arg.clone(),
            }),
        },
        "policy" => match rest.as_slice() {
            [render] if render == "render" => Ok(Command::PolicyRender),
            [check, tail @ ..] if check == "check" => parse_policy_check(tail),
            _ => Err(CliError::Usage(
                "Usage: aromba-warden policy render | policy check [--worker-user NAME] -- CMD [ARG...]",
            )),
        },
        "serve" => parse_serve(&rest),
        "install" => parse_install(&rest),
        "rollback" => match rest.as_slice() {
            [] => Ok(Command::Rollback { root: None }),
            [opt, dir] if opt == "--root" => Ok(Command::Rollback {
                root: Some(PathBuf::from(dir)),
            }),
            _ => Err(CliError::Usage(
                "Usage: aromba-warden rollback [--root DIR]",
            )),
        },
        "journal" => match rest.split_first() {
            Some((verify, opts)) if verify == "verify" => parse_journal_verify(opts),
            _ => Err(CliError::Usage(
                "Usage: aromba-warden journal verify [PATH] [--key FILE] [--root DIR]",
            )),
        },
        other => Err(CliError::UnknownCommand(other.to_string())),
    }
}

fn parse_policy_check(tail: &[String]) -> Result<Command, CliError> {
    const USAGE: &str = "Usage: aromba-warden policy check [--worker-user NAME] -- CMD [ARG...]";
    let (worker_user, rest) = match tail {
        [opt, name, rest @ ..] if opt == "--worker-user" => (name.clone(), rest),
        _ => ("aromba".to_string(), tail),
    };
    match rest {
        [dashes, cmd, args @ ..] if dashes == "--" => Ok(Command::PolicyCheck {
            cmd: cmd.clone(),
            args: args.to_vec(),
            worker_user,
        }),
        _ => Err(CliError::Usage(USAGE)),
    }
}

fn parse_install(opts: &[String]) -> Result<Command, CliError> {
    const USAGE: &str = "Usage: aromba-warden install [--root DIR] [--worker-bin PATH] [--worker-user NAME] [--installed-days-ago N] [--telegram-key HEX]";
    let (mut root, mut bin, mut user, mut days, mut key) = (None, None, None, None, None);
    let mut it = opts.iter();
    while let Some(a) = it.next() {
        let slot = match a.as_str() {
            "--root" => &mut root,
            "--worker-bin" => &mut bin,
            "--worker-user" => &mut user,
            "--installed-days-ago" => &mut days,
            "--telegram-key" => &mut key,
            _ => {
                return Err(CliError::UnexpectedArgument {
                    command: "install",
                    arg: a.clone(),
                });
            }
        };
        let value = it.next().ok_or(CliError::Usage(USAGE))?;
        if slot.is_some() {
            return Err(CliError::Usage(USAGE));
        }
        *slot = Some(value.clone());
    }
    let installed_days_ago = match days {
        None => 0,
        // A real server's first week is never skipped: only a tree of the
        // demo's or a test's own may start as if installed earlier.
        Some(_) if root.is_none() => {
            return Err(CliError::Usage(
                "--installed-days-ago is for a demo or test tree only: it needs --root DIR",
            ));
        }
        // A tree that holds or lies in the system's own (`--root
        // /var/lib/aromba-warden` is the real state directory) is the real
        // server's, whatever its name says.
        Some(_)
            if root
                .as_deref()
                .is_some_and(|r| overlaps_system(Path::new(r))) =>
        {
            return Err(CliError::Usage(
                "--installed-days-ago is for a demo or test tree only: its --root DIR must not hold or lie in the system's own directories",
            ));
        }
        Some(n) => Some(n.as_str())
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse::<u64>().ok())
            .filter(|n| *n <= 365)
            .ok_or(CliError::Usage(
                "--installed-days-ago takes a number of days from 0 to 365",
            ))?,
    };
    let telegram_key = key
        .map(|k| {
            crate::init_data::TelegramKey::from_hex(&k).map_err(|_| {
                CliError::Usage(
                    "--telegram-key takes Telegram's Ed25519 public key as 64 lower-case hex digits",
                )
            })
        })
        .transpose()?;
    Ok(Command::Install {
        root: root.map(PathBuf::from),
        worker_bin: PathBuf::from(bin.unwrap_or_else(|| "/usr/local/bin/aromba".to_string())),
        worker_user: user.unwrap_or_else(|| "aromba".to_string()),
        installed_days_ago,
        telegram_key,
    })
}

/// Whether a tree rooted at `root` shares a directory with the system's
/// layout: one of its directories is, holds or lies in one of the
/// system's (compared by components, so `//a/./b/` is `/a/b`; a `..` or a
/// link is refused later, by the layout's own check).
fn overlaps_system(root: &Path) -> bool {
    use crate::layout::Layout;
    let dirs = |l: Layout| {
        [
            l.run_dir,
            l.state_dir,
            l.journal_dir,
            l.config_dir,
            l.quarantine_dir,
            l.worker_config_dir,
            l.worker_home,
        ]
    };
    let system = dirs(Layout::system());
    dirs(Layout::rooted(root)).iter().any(|mine| {
        system
            .iter()
            .any(|s| mine.starts_with(s) || s.starts_with(mine))
    })
}

fn parse_serve(opts: &[String]) -> Result<Command, CliError> {
    const USAGE: &str = "Usage: aromba-warden serve [--root DIR] [--worker-user NAME]";
    let (mut root, mut user) = (None, None);
    let mut it = opts.iter();
    while let Some(a) = it.next() {
        let slot = match a.as_str() {
            "--root" => &mut root,
            "--worker-user" => &mut user,
            _ => {
                return Err(CliError::UnexpectedArgument {
                    command: "serve",
                    arg: a.clone(),
                });
            }
        };
        let value = it.next().ok_or(CliError::Usage(USAGE))?;
        if slot.is_some() {
            return Err(CliError::Usage(USAGE));
        }
        *slot = Some(value.clone());
    }
    Ok(Command::Serve {
        root: root.map(PathBuf::from),
        worker_user: user.unwrap_or_else(|| "aromba".to_string()),
    })
}

fn parse_journal_verify(opts: &[String]) -> Result<Command, CliError> {
    const USAGE: &str = "Usage: aromba-warden journal verify [PATH] [--key FILE] [--root DIR]";
    let (mut path, mut key, mut root) = (None, None, None);
    let mut it = opts.iter();
    while let Some(a) = it.next() {
        let slot = match a.as_str() {
            "--key" => &mut key,
            "--root" => &mut root,
            s if s.starts_with('-') => {
                return Err(CliError::UnexpectedArgument {
                    command: "journal verify",
                    arg: a.clone(),
                });
            }
            _ => {
                if path.is_some() {
                    return Err(CliError::Usage(USAGE));
                }
                path = Some(PathBuf::from(a));
                continue;
            }
        };
        let value = it.next().ok_or(CliError::Usage(USAGE))?;
        if slot.is_some() {
            return Err(CliError::Usage(USAGE));
        }
        *slot = Some(PathBuf::from(value));
    }
    Ok(Command::JournalVerify { path, key, root })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn refuses_an_abbreviated_command() {
        assert_eq!(
            parse(args(&["red"])),
            Err(CliError::UnknownCommand("red".into()))
        );
    }

    #[test]
    fn refuses_an_unknown_option_to_redact() {
        assert!(matches!(
            parse(args(&["redact", "--cu"])),
            Err(CliError::UnexpectedArgument { .. })
        ));
    }

    #[test]
    fn policy_check_requires_the_double_dash() {
        assert!(matches!(
            parse(args(&["policy", "check", "df", "-h"])),
            Err(CliError::Usage(_))
        ));
        assert_eq!(
            parse(args(&["policy", "check", "--", "df", "-h"])),
            Ok(Command::PolicyCheck {
                cmd: "df".into(),
                args: vec!["-h".into()],
                worker_user: "aromba".into(),
            })
        );
        assert_eq!(
            parse(args(&["policy", "check", "--worker-user", "w", "--", "df"])),
            Ok(Command::PolicyCheck {
                cmd: "df".into(),
                args: vec![],
                worker_user: "w".into(),
            })
        );
        assert!(matches!(
            parse(args(&["policy", "check", "--worker-user", "--", "df"])),
            Err(CliError::Usage(_))
        ));
    }

    #[test]
    fn parses_redact_with_and_without_cut() {
        assert_eq!(parse(args(&["redact"])), Ok(Command::Redact));
        assert_eq!(parse(args(&["redact", "--cut"])), Ok(Command::RedactCut));
    }

    #[test]
    fn rollback_takes_only_a_root() {
        assert_eq!(
            parse(args(&["rollback"])),
            Ok(Command::Rollback { root: None })
        );
        assert_eq!(
            parse(args(&["rollback", "--root", "/d"])),
            Ok(Command::Rollback {
                root: Some("/d".into())
            })
        );
        assert!(parse(args(&["rollback", "--force"])).is_err());
    }

    #[test]
    fn installed_days_ago_needs_a_demo_or_test_root() {
        assert!(matches!(
            parse(args(&["install", "--installed-days-ago", "8"])),
            Err(CliError::Usage(u)) if u.contains("--root")
        ));
        assert_eq!(
            parse(args(&[
                "install",
                "--root",
                "/d",
                "--installed-days-ago",
                "8"
            ])),
            Ok(Command::Install {
                root: Some("/d".into()),
                worker_bin: "/usr/local/bin/aromba".into(),
                worker_user: "aromba".into(),
                installed_days_ago: 8,
                telegram_key: None,
            })
        );
        for bad in ["-1", "366", "8d", "", "+8", " 8", "0x8", "8\n"] {
            assert!(
                parse(args(&[
                    "install",
                    "--root",
                    "/d",
                    "--installed-days-ago",
                    bad
                ]))
                .is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn installed_days_ago_refuses_a_root_that_is_the_systems_own_tree() {
        // `--root /var/lib/aromba-warden` puts the ladder and the baseline
        // in the real Warden's state directory: the real server's first
        // week would be skipped, which `--root` was to rule out.
        for root in [
            "/var/lib/aromba-warden",
            "/var/lib/aromba-warden/",
            "//var/lib//aromba-warden",
            "/var/lib/./aromba-warden",
            "/",
            "/var/lib/aromba",
            "/etc/aromba",
        ] {
            assert!(
                parse(args(&[
                    "install",
                    "--root",
                    root,
                    "--installed-days-ago",
                    "8"
                ]))
                .is_err(),
                "{root}"
            );
            // Without the flag it is the owner's own choice of tree.
            assert!(parse(args(&["install", "--root", root])).is_ok(), "{root}");
        }
        assert!(
            parse(args(&[
                "install",
                "--root",
                "/var/tmp/aromba-demo/root",
                "--installed-days-ago",
                "8"
            ]))
            .is_ok()
        );
    }
}
