//! `aromba-demo`: what `scripts/demo` needs that a shell does not have —
//! the demo's certificate authority, free loopback ports, the fake
//! Telegram with its chat page, and the person's side for the headless
//! check. Never part of a release: the demo's processes are the shipped
//! binaries, started by the script.
//!
//! ```text
//! aromba-demo tls DIR                    # DIR/ca.pem, DIR/relay.pem, DIR/relay-key.pem
//! aromba-demo ports 3                    # three free ports on 127.0.0.1
//! AROMBA_DEMO_BOT_TOKEN=… AROMBA_DEMO_PAGE_KEY=… aromba-demo telegram --api 127.0.0.1:P --page 127.0.0.1:Q
//! AROMBA_DEMO_PAGE=http://127.0.0.1:Q/KEY aromba-demo say "/start ABC234"
//! AROMBA_DEMO_PAGE=http://127.0.0.1:Q/KEY aromba-demo confirm
//! AROMBA_DEMO_PAGE=http://127.0.0.1:Q/KEY aromba-demo check
//! AROMBA_DEMO_LAUNCH_SEED=… aromba-demo launch-key
//! ```

#![forbid(unsafe_code)]

mod app_proxy;
mod person;
mod telegram;
mod tls;

use clap::{Parser, Subcommand};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "aromba-demo",
    about = "Helpers of Aromba's local demo (scripts/demo)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Makes a certificate authority and, under it, the relay's
    /// certificate for 127.0.0.1 and localhost: DIR/ca.pem, DIR/relay.pem,
    /// DIR/relay-key.pem (0600). The authority's key is never written.
    Tls { dir: PathBuf },
    /// Prints N free TCP ports on 127.0.0.1, one a line.
    Ports { count: u16 },
    /// Serves the fake Bot API (for the relay) and the chat page (for the
    /// person) until interrupted. The bot's token comes from
    /// AROMBA_DEMO_BOT_TOKEN, the page's key (its secret path, which
    /// keeps other accounts on this machine out) from AROMBA_DEMO_PAGE_KEY.
    Telegram {
        /// Where the relay reaches the Bot API.
        #[arg(long)]
        api: SocketAddr,
        /// Where the person opens the chat page.
        #[arg(long)]
        page: SocketAddr,
        /// The bot's username.
        #[arg(long, default_value = "aromba_demo_bot")]
        username: String,
        /// The person's chat id.
        #[arg(long, default_value_t = 7_000_001)]
        chat: i64,
        /// The person's first name.
        #[arg(long, default_value = "You")]
        name: String,
        /// Where the Mini App's proxy listens (with --relay and
        /// --relay-ca); the launch key's seed comes from
        /// AROMBA_DEMO_LAUNCH_SEED.
        #[arg(long, requires_all = ["relay", "relay_ca"])]
        app_proxy: Option<SocketAddr>,
        /// The relay the Mini App is served by (https://127.0.0.1:R).
        #[arg(long)]
        relay: Option<String>,
        /// The demo's certificate authority, which signed the relay's.
        #[arg(long)]
        relay_ca: Option<PathBuf>,
    },
    /// Prints the public key (64 hex digits) of the launch key whose seed
    /// is in AROMBA_DEMO_LAUNCH_SEED: what the demo's Warden pins with
    /// `install --telegram-key`.
    LaunchKey,
    /// As the person: opens the app from the pairing's "Confirm it is you"
    /// button and confirms, through the chat page (--page or
    /// AROMBA_DEMO_PAGE).
    Confirm {
        #[arg(long)]
        page: Option<String>,
    },
    /// Sends TEXT as the person, through the chat page at URL (with its
    /// key: http://127.0.0.1:Q/KEY), from --page or AROMBA_DEMO_PAGE.
    Say {
        #[arg(long)]
        page: Option<String>,
        text: String,
    },
    /// Sends /status as the person and waits for the bot's answer; prints
    /// it and exits 0, or says what was missing and exits 1.
    Check {
        /// The page's address with its key; default AROMBA_DEMO_PAGE.
        #[arg(long)]
        page: Option<String>,
        /// How long to wait for the answer, in seconds.
        #[arg(long, default_value_t = 120)]
        timeout: u64,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Tls { dir } => tls::write(&dir),
        Command::Ports { count } => tls::free_ports(count).map(|ports| {
            for p in ports {
                println!("{p}");
            }
        }),
        Command::Telegram {
            api,
            page,
            username,
            chat,
            name,
            app_proxy,
            relay,
            relay_ca,
        } => {
            let app = match (app_proxy, relay, relay_ca) {
                (Some(proxy), Some(relay), Some(ca)) => Some(telegram::App { proxy, relay, ca }),
                _ => None,
            };
            runtime()
                .and_then(|rt| rt.block_on(telegram::serve(api, page, &username, chat, &name, app)))
        }
        Command::LaunchKey => telegram::launch_key().map(|k| println!("{}", k.public_hex())),
        Command::Confirm { page } => page_url(page)
            .and_then(|page| runtime().and_then(|rt| rt.block_on(person::confirm(&page)))),
        Command::Say { page, text } => page_url(page)
            .and_then(|page| runtime().and_then(|rt| rt.block_on(person::say(&page, &text)))),
        Command::Check { page, timeout } => page_url(page)
            .and_then(|page| runtime().and_then(|rt| rt.block_on(person::check(&page, timeout)))),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("aromba-demo: {e}.");
            ExitCode::FAILURE
        }
    }
}

/// The page's address: given, or from AROMBA_DEMO_PAGE (which keeps its
/// key out of the process list).
fn page_url(given: Option<String>) -> Result<String, String> {
    given
        .or_else(|| std::env::var("AROMBA_DEMO_PAGE").ok())
        .ok_or_else(|| "name the chat page with --page or AROMBA_DEMO_PAGE".to_string())
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Runtime::new().map_err(|e| format!("cannot start the runtime: {e}"))
}
