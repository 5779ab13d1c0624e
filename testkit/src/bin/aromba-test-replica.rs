//! One replica of the relay as a process of its own, for the tests that
//! kill it with SIGKILL: the relay library run as `aromba-relay` runs it
//! ([`Relay::serve`]), polling the fake Bot API the test gives, with the
//! test kit's limits — the Telegram pacing and lock retries of
//! [`test_limits`], so that the locks of a replica killed mid-round pass to
//! another within a test's time rather than the seconds production waits.
//!
//! ```text
//! aromba-test-replica DATABASE_URL LISTEN_ADDRESS BOT_API_ADDRESS
//! ```
//!
//! Logs (scrubbed JSON lines, `RUST_LOG`) go to standard error. A test
//! binary: never installed, never linked by a shipped program.
//!
//! [`test_limits`]: aromba_testkit::relay::bot::test_limits

#![forbid(unsafe_code)]

use aromba_relay::{Listeners, Relay};
use aromba_testkit::relay::bot::telegram_config;
use aromba_testkit::relay::config;
use std::net::SocketAddr;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [database, listen, bot_api] = args.as_slice() else {
        eprintln!("usage: aromba-test-replica DATABASE_URL LISTEN_ADDRESS BOT_API_ADDRESS");
        return ExitCode::from(2);
    };
    let (Ok(listen), Ok(bot_api)) = (listen.parse::<SocketAddr>(), bot_api.parse::<SocketAddr>())
    else {
        eprintln!("aromba-test-replica: the addresses must be IP:PORT.");
        return ExitCode::from(2);
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    aromba_relay::logging::init(None);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("aromba-test-replica: cannot start the runtime: {e}.");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        let db = sqlx::postgres::PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(std::time::Duration::from_secs(5))
            .connect(database)
            .await?;
        let api = tokio::net::TcpListener::bind(listen).await?;
        let mut config = config();
        config.telegram = Some(telegram_config(bot_api, listen, true));
        Relay::serve(
            Listeners { api, metrics: None },
            db,
            config,
            std::future::pending(),
        )
        .await
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("aromba-test-replica: {e}.");
            ExitCode::FAILURE
        }
    }
}
