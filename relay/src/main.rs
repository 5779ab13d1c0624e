//! `aromba-relay`: the thin binary around [`aromba_relay::Relay::serve`].

#![forbid(unsafe_code)]

use aromba_relay::config::Cli;
use aromba_relay::{Listeners, Relay};
use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // rustls picks no provider by itself when two are linked.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (config, _tls) = match cli.checked() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("aromba-relay: {e}.");
            return ExitCode::from(2);
        }
    };
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("aromba-relay: cannot start the runtime: {e}.");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        let db = sqlx::postgres::PgPoolOptions::new()
            .max_connections(32)
            .acquire_timeout(std::time::Duration::from_secs(5))
            .connect(&cli.database_url)
            .await?;
        let api = tokio::net::TcpListener::bind(cli.listen).await?;
        let metrics = tokio::net::TcpListener::bind(cli.metrics_listen).await?;
        Relay::serve(
            Listeners {
                api,
                metrics: Some(metrics),
            },
            db,
            config,
            shutdown_signal(),
        )
        .await
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("aromba-relay: {e}.");
            ExitCode::FAILURE
        }
    }
}

/// SIGTERM or SIGINT.
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        // Without signal handlers the relay cannot stop gracefully; it
        // still stops when killed.
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}
