//! A test Warden as a process of its own, for the tests that kill it with
//! SIGKILL in the middle of an act: serves the Warden rooted at `ROOT`
//! with every test Warden's options and a clock `AHEAD` seconds ahead of
//! the system's (the test's Warden is days old: past the first week),
//! installing it first when it is not installed (so the integrity
//! baseline holds this binary, the one that serves, and a restart finds
//! itself unchanged). Prints `serving` once its sockets are bound.
//!
//! ```text
//! aromba-test-warden ROOT AHEAD
//! ```
//!
//! A test binary: never installed, never linked by a shipped program.

#![forbid(unsafe_code)]

use aromba_testkit::warden::{install_here, process::READY, test_options};
use aromba_warden::ladder::Clock;
use aromba_warden::layout::Layout;
use aromba_warden::server::Server;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// The system's clock, this many seconds ahead.
struct Ahead(u64);

impl Clock for Ahead {
    fn now(&self) -> u64 {
        aromba_testkit::warden::now() + self.0
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [root, ahead] = args.as_slice() else {
        eprintln!("usage: aromba-test-warden ROOT AHEAD");
        return ExitCode::from(2);
    };
    let Ok(ahead) = ahead.parse::<u64>() else {
        eprintln!("aromba-test-warden: AHEAD must be a number of seconds.");
        return ExitCode::from(2);
    };
    let root = PathBuf::from(root);
    let layout = Layout::rooted(&root);
    if layout.install_evidence().is_none() {
        install_here(&root);
    }
    let server = match Server::bind(test_options(layout, Arc::new(Ahead(ahead)))) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("aromba-test-warden: the Warden did not start: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut out = std::io::stdout();
    if writeln!(out, "{READY}").and_then(|()| out.flush()).is_err() {
        return ExitCode::FAILURE;
    }
    server.run();
    ExitCode::SUCCESS
}
