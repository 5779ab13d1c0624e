//! `aromba`: the unprivileged Worker (user `aromba`) and the root
//! command-line verbs. The Worker never spawns a process: everything that
//! touches the system is a request to the Warden.

#![forbid(unsafe_code)]

use clap::Parser;

/// Aromba on your server: the Worker that keeps the schedule, talks to the
/// chat and asks the Warden for everything.
#[derive(Parser, Debug)]
#[command(name = "aromba", version, about, long_about = None)]
struct Cli {}

fn main() {
    let _cli = Cli::parse();
    println!(
        "aromba {}: no verbs are built into this release yet; see `aromba --help`.",
        env!("CARGO_PKG_VERSION")
    );
}
