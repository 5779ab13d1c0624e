//! `aromba-relay`: the multi-tenant service between Telegram and the servers.
//! Its service (webhook, Bot API, WebSocket hub, Postgres) arrives with its
//! issue; today the binary parses its command line.

#![forbid(unsafe_code)]

use clap::Parser;

/// Aromba's relay: receives Telegram's webhook, calls the Bot API, and keeps
/// one WebSocket to every paired server.
#[derive(Parser, Debug)]
#[command(name = "aromba-relay", version, about, long_about = None)]
struct Cli {}

fn main() {
    let _cli = Cli::parse();
    println!(
        "aromba-relay {}: no service is built into this release yet; see `aromba-relay --help`.",
        env!("CARGO_PKG_VERSION")
    );
}
