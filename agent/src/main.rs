//! `aromba`: the command line. Every verb is a call into the library
//! (`lib.rs`), which holds the Worker and what the verbs share.

#![forbid(unsafe_code)]

use aromba::terminal::read_secret_line;
use aromba::warden_client::control;
use aromba::{daemon, lifecycle, out, pair, paths, skills_cli, warden_client};
use aromba_warden_proto::{Request, Response, printable, socket_paths};
use clap::{Parser, Subcommand};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Aromba on your server: the Worker that keeps the schedule, talks to the
/// chat and asks the Warden for everything.
#[derive(Parser, Debug)]
#[command(name = "aromba", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// The Worker's daemon (run as the aromba user, by systemd): holds the
    /// relay connection, answers the chat, watches health, keeps the
    /// schedule. Stops on SIGTERM.
    Run {
        /// The folder of a Warden started with `aromba-warden serve --root
        /// DIR` (the demo's); the Worker's files are then under DIR/worker
        /// and DIR/home. Default: the installed system's.
        #[arg(long, value_name = "DIR")]
        root: Option<PathBuf>,
        /// Started as root (a container's entry point, the tests): become
        /// USER before anything else, and for good. Without it, root is
        /// refused: the Worker never runs with rights.
        #[arg(long, value_name = "USER")]
        user: Option<String>,
    },
    /// Pair this server with your Telegram chat (run as root): registers
    /// it with the relay when needed, asks for a PIN when none is set,
    /// prints a link and a QR code, and waits for the chat.
    Pair {
        /// The relay, for a server not set up yet.
        #[arg(long, value_name = "URL")]
        relay: Option<String>,
        /// A CA certificate (PEM) to verify the relay's certificate with,
        /// instead of the public roots.
        #[arg(long, value_name = "FILE")]
        ca_file: Option<PathBuf>,
        /// Where the daily update check looks (the folder holding a
        /// release's manifest.json); default: what network.toml records,
        /// as the installer wrote it.
        #[arg(long, value_name = "URL")]
        releases: Option<String>,
        /// The Worker's account, owner of relay.toml.
        #[arg(long, value_name = "USER", default_value = "aromba")]
        worker_user: String,
        /// How Aromba was installed, for the relay's daily counts.
        #[arg(long, value_name = "SOURCE", default_value = "script")]
        install_source: String,
        /// The folder of a Warden started with `aromba-warden serve --root
        /// DIR` (the demo's: ./scripts/demo prints it). Default: the
        /// installed system's sockets under /run/aromba.
        #[arg(long, value_name = "DIR")]
        root: Option<PathBuf>,
    },
    /// Ask the Warden for a read from its policy and print the redacted
    /// result (run as the aromba user). Refusals print the reason and exit 1.
    Ask {
        /// The directory a Warden started with `aromba-warden serve --root DIR`
        /// keeps its sockets under (default: the system's, /run/aromba).
        #[arg(long, value_name = "DIR")]
        root: Option<PathBuf>,
        /// The command and its arguments, after `--`: `aromba ask -- df -h`.
        #[arg(last = true, required = true, value_name = "CMD ARG")]
        command: Vec<String>,
    },
    /// Show the Warden's state from its root-only control socket (run as
    /// root): the ladder, the phase, isolation, integrity, the journal's head.
    Status {
        /// The folder of a Warden started with `aromba-warden serve --root
        /// DIR` (the demo's: ./scripts/demo prints it). Default: the
        /// installed system's sockets under /run/aromba.
        #[arg(long, value_name = "DIR")]
        root: Option<PathBuf>,
    },
    /// Disarm Aromba for good: the Warden stops itself and will not start
    /// again until Aromba is reinstalled (run as root). The chat's /panic is
    /// the milder stop (reads only, undone by `aromba resume`).
    Panic {
        /// The folder of a Warden started with `aromba-warden serve --root
        /// DIR` (the demo's: ./scripts/demo prints it). Default: the
        /// installed system's sockets under /run/aromba.
        #[arg(long, value_name = "DIR")]
        root: Option<PathBuf>,
    },
    /// Bring Aromba back to normal after it slowed down or stopped (the
    /// chat's /panic, or unusual activity) (run as root). Not after
    /// `aromba panic`, which only a reinstall undoes.
    Resume {
        /// The folder of a Warden started with `aromba-warden serve --root
        /// DIR` (the demo's: ./scripts/demo prints it). Default: the
        /// installed system's sockets under /run/aromba.
        #[arg(long, value_name = "DIR")]
        root: Option<PathBuf>,
    },
    /// List every chore with its color, schedule and last receipt (run as root).
    Chores {
        /// The folder of a Warden started with `aromba-warden serve --root
        /// DIR` (the demo's: ./scripts/demo prints it). Default: the
        /// installed system's sockets under /run/aromba.
        #[arg(long, value_name = "DIR")]
        root: Option<PathBuf>,
    },
    /// Run one chore now, as the schedule would; from a root terminal this
    /// counts as your approval.
    Chore {
        #[command(subcommand)]
        verb: ChoreVerb,
    },
    /// Put the paths a red run changed back as they were, by the undo id
    /// on its receipt (run as root; for 7 days after the run).
    Undo {
        undo_id: String,
        /// The folder of a Warden started with `aromba-warden serve --root
        /// DIR` (the demo's: ./scripts/demo prints it). Default: the
        /// installed system's sockets under /run/aromba.
        #[arg(long, value_name = "DIR")]
        root: Option<PathBuf>,
    },
    /// The PIN that PIN actions (turning prod mode off) need (run as root).
    Pin {
        #[command(subcommand)]
        verb: PinVerb,
    },
    /// Install the newest release from the release folder (run as root):
    /// downloaded, then verified and installed by the Warden, which
    /// restarts both services. A minor or major release installs here
    /// without the chat's tap: a root terminal is the owner's word.
    Update {
        /// Install the release already downloaded into this folder
        /// (manifest.json, its .minisig and the two tarballs).
        #[arg(long, value_name = "DIR", conflicts_with = "releases")]
        from: Option<PathBuf>,
        /// The release folder to look in (default: network.toml's).
        #[arg(long, value_name = "URL")]
        releases: Option<String>,
        /// The folder of a Warden started with `aromba-warden serve --root
        /// DIR` (the demo's: ./scripts/demo prints it). Default: the
        /// installed system's sockets under /run/aromba.
        #[arg(long, value_name = "DIR")]
        root: Option<PathBuf>,
    },
    /// Stop Aromba and remove it from this server (run as root): the
    /// services, the releases, the state and the aromba user. The journal
    /// is kept unless --purge. Nothing in the chat can start this.
    Uninstall {
        /// Remove the journal too.
        #[arg(long)]
        purge: bool,
        /// Do not ask first.
        #[arg(long)]
        yes: bool,
        /// The folder of a Warden started with `aromba-warden serve --root
        /// DIR` (the demo's: ./scripts/demo prints it). Default: the
        /// installed system's sockets under /run/aromba.
        #[arg(long, value_name = "DIR")]
        root: Option<PathBuf>,
    },
    /// Skills: signed bundles of chores and assistant tools, each bounded
    /// by a manifest shown before install (run as root).
    Skill {
        #[command(subcommand)]
        verb: SkillVerb,
    },
    /// Prod mode: every chore red, nothing deleted, the assistant only
    /// proposes (run as root). Turning it off needs the PIN.
    ProdMode {
        #[arg(value_enum)]
        state: OnOff,
        /// The folder of a Warden started with `aromba-warden serve --root
        /// DIR` (the demo's: ./scripts/demo prints it). Default: the
        /// installed system's sockets under /run/aromba.
        #[arg(long, value_name = "DIR")]
        root: Option<PathBuf>,
    },
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum OnOff {
    On,
    Off,
}

#[derive(Subcommand, Debug)]
enum PinVerb {
    /// Set or replace the PIN: typed without echo at a terminal, or one
    /// line of standard input when that is a pipe.
    Set {
        /// The folder of a Warden started with `aromba-warden serve --root
        /// DIR` (the demo's: ./scripts/demo prints it). Default: the
        /// installed system's sockets under /run/aromba.
        #[arg(long, value_name = "DIR")]
        root: Option<PathBuf>,
    },
}

#[derive(Subcommand, Debug)]
enum SkillVerb {
    /// Show what the skill bundle FILE (or an https:// URL of one) asks
    /// for (what more than the version installed, first), then install it
    /// when you say yes; its hosts need the PIN.
    Install {
        #[arg(value_name = "FILE|URL")]
        file: String,
        /// Do not ask first (the PIN is still asked for when needed).
        #[arg(long)]
        yes: bool,
        /// The folder of a Warden started with `aromba-warden serve --root
        /// DIR` (the demo's: ./scripts/demo prints it). Default: the
        /// installed system's sockets under /run/aromba.
        #[arg(long, value_name = "DIR")]
        root: Option<PathBuf>,
    },
    /// The skills installed here, and what each may do on the network.
    List {
        /// The folder of a Warden started with `aromba-warden serve --root
        /// DIR` (the demo's: ./scripts/demo prints it). Default: the
        /// installed system's sockets under /run/aromba.
        #[arg(long, value_name = "DIR")]
        root: Option<PathBuf>,
    },
    /// One installed skill's manifest, in plain words.
    Show {
        name: String,
        /// The folder of a Warden started with `aromba-warden serve --root
        /// DIR` (the demo's: ./scripts/demo prints it). Default: the
        /// installed system's sockets under /run/aromba.
        #[arg(long, value_name = "DIR")]
        root: Option<PathBuf>,
    },
    /// Set a skill's setting: a text or host setting's VALUE on the
    /// command line, a secret typed without echo (never on the command
    /// line); a host setting asks for the PIN.
    Set {
        name: String,
        setting: String,
        value: Option<String>,
        /// The folder of a Warden started with `aromba-warden serve --root
        /// DIR` (the demo's: ./scripts/demo prints it). Default: the
        /// installed system's sockets under /run/aromba.
        #[arg(long, value_name = "DIR")]
        root: Option<PathBuf>,
    },
    /// Remove a skill: its bundle, its chores, their records, its hosts and
    /// settings.
    Remove {
        name: String,
        /// Do not ask first.
        #[arg(long)]
        yes: bool,
        /// The folder of a Warden started with `aromba-warden serve --root
        /// DIR` (the demo's: ./scripts/demo prints it). Default: the
        /// installed system's sockets under /run/aromba.
        #[arg(long, value_name = "DIR")]
        root: Option<PathBuf>,
    },
}

#[derive(Subcommand, Debug)]
enum ChoreVerb {
    /// `aromba chore run NAME [--dry-run]`.
    Run {
        name: String,
        /// Report what it would change, and change nothing.
        #[arg(long)]
        dry_run: bool,
        /// The folder of a Warden started with `aromba-warden serve --root
        /// DIR` (the demo's: ./scripts/demo prints it). Default: the
        /// installed system's sockets under /run/aromba.
        #[arg(long, value_name = "DIR")]
        root: Option<PathBuf>,
    },
    /// Confirm the damage cap above the default that a chore's header
    /// declares; editing the chore later needs a new confirmation.
    Confirm {
        name: String,
        /// The folder of a Warden started with `aromba-warden serve --root
        /// DIR` (the demo's: ./scripts/demo prints it). Default: the
        /// installed system's sockets under /run/aromba.
        #[arg(long, value_name = "DIR")]
        root: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Run { root, user } => run(root, user),
        Command::Pair {
            relay,
            ca_file,
            releases,
            worker_user,
            install_source,
            root,
        } => pair_verb(pair::PairOptions {
            root,
            relay,
            ca_file,
            releases,
            worker_user,
            install_source,
        }),
        Command::Ask { root, command } => ask(root, command),
        Command::Status { root } => status(root),
        Command::Panic { root } => ladder_verb(root, Request::Panic, "panic"),
        Command::Resume { root } => ladder_verb(root, Request::Resume, "resume"),
        Command::Chores { root } => chores(root),
        Command::Chore {
            verb:
                ChoreVerb::Run {
                    name,
                    dry_run,
                    root,
                },
        } => chore_run(root, name, dry_run),
        Command::Chore {
            verb: ChoreVerb::Confirm { name, root },
        } => noted(
            root,
            &Request::ConfirmCap {
                chore: name.clone(),
            },
            "chore confirm",
            &format!("{name}'s damage cap is confirmed"),
        ),
        Command::Undo { undo_id, root } => chore_run_like(root, &Request::Undo { undo_id }, "undo"),
        Command::Pin {
            verb: PinVerb::Set { root },
        } => match read_secret_line("new PIN: ") {
            Ok(pin) => noted(
                root,
                &Request::SetPin { pin: pin.into() },
                "pin set",
                "the PIN is set",
            ),
            Err(code) => code,
        },
        Command::ProdMode { state, root } => prod_mode(root, state),
        Command::Skill { verb } => match verb {
            SkillVerb::Install { file, yes, root }
                if file.starts_with("https://") || file.starts_with("http://") =>
            {
                skills_cli::install_from(root, &file, yes)
            }
            SkillVerb::Install { file, yes, root } => {
                skills_cli::install(root, std::path::Path::new(&file), yes)
            }
            SkillVerb::List { root } => skills_cli::list(root, None),
            SkillVerb::Show { name, root } => skills_cli::list(root, Some(&name)),
            SkillVerb::Set {
                name,
                setting,
                value,
                root,
            } => skills_cli::set(root, &name, &setting, value),
            SkillVerb::Remove { name, yes, root } => skills_cli::remove(root, &name, yes),
        },
        Command::Update {
            from,
            releases,
            root,
        } => lifecycle::update(lifecycle::UpdateOptions {
            root,
            from,
            releases,
        }),
        Command::Uninstall { purge, yes, root } => lifecycle::uninstall(root, purge, yes),
    }
}

fn run(root: Option<PathBuf>, user: Option<String>) -> ExitCode {
    if let Err(e) = daemon::become_user(user.as_deref()) {
        eprintln!("aromba: {e}");
        return ExitCode::from(1);
    }
    // tungstenite logs every WebSocket frame's bytes at trace (the hello's
    // token, every message, the PIN's secret): never logged, whatever
    // AROMBA_LOG says.
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("AROMBA_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_ansi(false)
        .finish()
        .with(tracing_subscriber::filter::filter_fn(|meta| {
            !(*meta.level() == tracing::Level::TRACE
                && ["tungstenite", "tokio_tungstenite"].iter().any(|c| {
                    meta.target()
                        .strip_prefix(c)
                        .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
                }))
        }))
        .init();
    match daemon::run(paths::Paths::new(root.as_deref())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("aromba: {e}");
            ExitCode::from(1)
        }
    }
}

fn pair_verb(options: pair::PairOptions) -> ExitCode {
    let read = |prompt: &str| read_secret_line(prompt).ok();
    match pair::pair(&options, read) {
        Ok(pair::Paired::Now { user_id, name }) => {
            out!(
                "Paired. Approvals are bound to Telegram account {user_id}{}; your chat now reaches this server: send /help there.",
                if name.is_empty() {
                    String::new()
                } else {
                    format!(" ({name})")
                }
            );
            ExitCode::SUCCESS
        }
        Ok(pair::Paired::Already) => {
            out!(
                "This server is paired with a chat already. To pair it with another one, send /unpair in the chat it has, then run `aromba pair` again."
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("aromba: {e}");
            ExitCode::from(1)
        }
    }
}

fn prod_mode(root: Option<PathBuf>, state: OnOff) -> ExitCode {
    if state == OnOff::On {
        return noted(
            root,
            &Request::ProdMode {
                on: true,
                pin: None,
            },
            "prod-mode on",
            "prod mode is on: every chore is red and nothing is deleted",
        );
    }
    out!("{}", aromba_warden_proto::PROD_MODE_OFF_CONSEQUENCES);
    match read_secret_line("PIN: ") {
        Ok(pin) => noted(
            root,
            &Request::ProdMode {
                on: false,
                pin: Some(pin.into()),
            },
            "prod-mode off",
            "prod mode is off",
        ),
        Err(code) => code,
    }
}

/// A control request answered with `Noted`: prints `done` and exits 0.
fn noted(root: Option<PathBuf>, request: &Request, verb: &str, done: &str) -> ExitCode {
    match control(root, request, verb) {
        Ok(Response::Noted { journal_seq }) => {
            out!("{done} (journal seq {journal_seq})");
            ExitCode::SUCCESS
        }
        Ok(Response::Refused { reason, .. }) => {
            eprintln!("aromba: refused: {reason}");
            ExitCode::from(1)
        }
        Ok(other) => {
            eprintln!("aromba: unexpected answer from the Warden: {other:?}");
            ExitCode::from(2)
        }
        Err(code) => code,
    }
}

fn chores(root: Option<PathBuf>) -> ExitCode {
    match control(root, &Request::Chores, "chores") {
        Ok(Response::Chores { chores }) => {
            for c in chores {
                out!(
                    "{:<20} {:<7} {:<22} {:<7} {}",
                    c.name,
                    c.color,
                    c.schedule,
                    c.origin,
                    c.last_receipt
                );
            }
            ExitCode::SUCCESS
        }
        Ok(other) => {
            eprintln!("aromba: unexpected answer from the Warden: {other:?}");
            ExitCode::from(2)
        }
        Err(code) => code,
    }
}

fn chore_run(root: Option<PathBuf>, name: String, dry_run: bool) -> ExitCode {
    chore_run_like(root, &Request::ChoreRun { name, dry_run }, "chore run")
}

/// A control request answered with a receipt.
fn chore_run_like(root: Option<PathBuf>, request: &Request, verb: &str) -> ExitCode {
    match control(root, request, verb) {
        Ok(Response::Receipt {
            receipt,
            stdout,
            stderr,
            ok,
        }) => {
            let _ = std::io::stdout().write_all(printable(&stdout).as_bytes());
            let _ = std::io::stderr().write_all(printable(&stderr).as_bytes());
            out!("receipt: {receipt}");
            if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Ok(Response::Refused { reason, .. }) => {
            eprintln!("aromba: refused: {reason}");
            ExitCode::from(1)
        }
        Ok(other) => {
            eprintln!("aromba: unexpected answer from the Warden: {other:?}");
            ExitCode::from(2)
        }
        Err(code) => code,
    }
}

fn ladder_verb(root: Option<PathBuf>, request: Request, verb: &str) -> ExitCode {
    match control(root, &request, verb) {
        Ok(Response::Ladder { name, message, .. }) => {
            out!("ladder: {name}");
            out!("{message}");
            ExitCode::SUCCESS
        }
        Ok(other) => {
            eprintln!("aromba: unexpected answer from the Warden: {other:?}");
            ExitCode::from(2)
        }
        Err(code) => code,
    }
}

fn status(root: Option<PathBuf>) -> ExitCode {
    match control(root, &Request::Status, "status") {
        Ok(Response::Status(st)) => {
            out!("warden: running");
            out!(
                "ladder: {} (step {}){}",
                st.ladder_name,
                st.ladder_step,
                if st.ladder_reason.is_empty() {
                    String::new()
                } else {
                    format!(" — {}", st.ladder_reason)
                }
            );
            out!("phase: {}", st.phase);
            out!("isolation: {}", st.isolation);
            out!("integrity: {}", st.integrity);
            out!("journal: seq {}, head {}", st.journal_seq, st.journal_head);
            out!("server: {}", st.server_id);
            out!("paired: {}", if st.paired { "yes" } else { "no" });
            match st.telegram_user {
                Some(user) => out!(
                    "approvals in the app: Telegram account {user}, checked with {}",
                    st.telegram_key
                ),
                None if st.paired => out!(
                    "approvals in the app: none — this server was paired before the Mini App, so red chores, Undo, caps above the default, installs and prod mode off are not proposed in the chat until it is bound to your Telegram account: send /unpair in the chat, then run `sudo aromba pair`"
                ),
                None => out!("approvals in the app: not paired yet"),
            }
            out!("policy: sha256 {}", st.policy_sha256);
            out!("prod mode: {}", st.prod_mode);
            out!("pin: {}", if st.pin_set { "set" } else { "not set" });
            ExitCode::SUCCESS
        }
        Ok(other) => {
            eprintln!("aromba: unexpected answer from the Warden: {other:?}");
            ExitCode::from(2)
        }
        Err(code) => code,
    }
}

fn ask(root: Option<PathBuf>, mut command: Vec<String>) -> ExitCode {
    let (socket, _) = socket_paths(root.as_deref());
    let cmd = command.remove(0);
    let request = Request::Read { cmd, args: command };
    let response = match warden_client::ask_blocking(&socket, &request) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("aromba: {e}");
            return ExitCode::from(2);
        }
    };
    match response {
        Response::Result(result) => {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(printable(&result.stdout).as_bytes());
            let _ = out.flush();
            let mut err = std::io::stderr().lock();
            let _ = err.write_all(printable(&result.stderr).as_bytes());
            if result.cut {
                let _ = writeln!(
                    err,
                    "aromba: the output passed the byte cap; the command was stopped and its output cut"
                );
            }
            if result.timed_out {
                let _ = writeln!(
                    err,
                    "aromba: the command ran past its time limit and was stopped"
                );
            }
            if !result.redactions.is_empty() {
                let list: Vec<String> = result
                    .redactions
                    .iter()
                    .map(|(c, n)| format!("{c} {n}"))
                    .collect();
                let _ = writeln!(err, "aromba: redacted: {}", list.join(", "));
            }
            match (result.exit_code, result.signal) {
                (Some(0), _) => ExitCode::SUCCESS,
                (Some(code), _) => ExitCode::from(u8::try_from(code.clamp(1, 125)).unwrap_or(1)),
                _ => ExitCode::FAILURE,
            }
        }
        Response::Refused { reason, .. } => {
            eprintln!("aromba: refused: {reason}");
            ExitCode::from(1)
        }
        Response::Error { message } => {
            eprintln!("aromba: the Warden could not serve this: {message}");
            ExitCode::from(2)
        }
        other => {
            eprintln!("aromba: unexpected answer from the Warden: {other:?}");
            ExitCode::from(2)
        }
    }
}
