//! `aromba-relay`: the thin binary around [`aromba_relay::Relay::serve`].

#![forbid(unsafe_code)]

use aromba_relay::config::Cli;
use aromba_relay::{Listeners, Relay};
use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    if let Some(aromba_relay::config::Command::Healthcheck { metrics_listen }) = &cli.command {
        return healthcheck(*metrics_listen);
    }
    // rustls picks no provider by itself when two are linked.
    let _ = rustls::crypto::ring::default_provider().install_default();
    // Secrets come from files (`NAME_FILE`): a value in the environment
    // stays in /proc/<pid>/environ whatever the process does (removing
    // the variable changes only the process's own copy), so one given that
    // way is still taken, with a warning.
    let secrets = cli
        .secrets(std::env::var_os(aromba_relay::telegram::token::ENV))
        .and_then(|secrets| Ok((cli.checked(&secrets)?, secrets)));
    let (config, secrets) = match secrets {
        Ok(both) => both,
        Err(e) => {
            eprintln!("aromba-relay: {e}.");
            return ExitCode::from(2);
        }
    };
    // JSON lines on standard error, scrubbed of the bot token; standard
    // output stays empty.
    aromba_relay::logging::init(secrets.bot_token.clone());
    for given in &secrets.by_value {
        tracing::warn!(setting = given.name, "{}", given.warning());
    }
    if secrets.bot_token.is_none() {
        tracing::warn!(
            "neither TELEGRAM_BOT_TOKEN_FILE nor TELEGRAM_BOT_TOKEN is set: the relay serves servers but no chat"
        );
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("aromba-relay: cannot start the runtime: {e}.");
            return ExitCode::FAILURE;
        }
    };
    let database = secrets.database.clone();
    drop(secrets);
    let result = runtime.block_on(async move {
        let db = sqlx::postgres::PgPoolOptions::new()
            .max_connections(32)
            .acquire_timeout(std::time::Duration::from_secs(5))
            .connect_with(database)
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

/// `aromba-relay healthcheck`: GET /readyz on the metrics address.
fn healthcheck(addr: std::net::SocketAddr) -> ExitCode {
    use std::io::{Read, Write};
    let timeout = std::time::Duration::from_secs(3);
    let answer = (|| -> std::io::Result<String> {
        let mut stream = std::net::TcpStream::connect_timeout(&addr, timeout)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        stream.write_all(b"GET /readyz HTTP/1.1\r\nHost: relay\r\nConnection: close\r\n\r\n")?;
        let mut head = [0u8; 64];
        let n = stream.read(&mut head)?;
        Ok(String::from_utf8_lossy(&head[..n]).into_owned())
    })();
    match answer {
        Ok(status) if status.starts_with("HTTP/1.1 200") => ExitCode::SUCCESS,
        Ok(_) => {
            eprintln!("aromba-relay: the relay at {addr} is not ready.");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("aromba-relay: the relay at {addr} does not answer: {e}.");
            ExitCode::FAILURE
        }
    }
}

/// Help and version as clap prints them; any other mistake in one sentence
/// that names the setting.
fn usage_error(e: &clap::Error) -> ExitCode {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        ErrorKind::MissingRequiredArgument => {
            let names: Vec<String> = match e.get(ContextKind::InvalidArg) {
                Some(ContextValue::Strings(args)) => args.iter().map(|a| setting_name(a)).collect(),
                _ => Vec::new(),
            };
            eprintln!("aromba-relay: {} is not set.", names.join(" and "));
        }
        ErrorKind::InvalidValue | ErrorKind::ValueValidation => {
            let arg = match e.get(ContextKind::InvalidArg) {
                Some(ContextValue::String(a)) => setting_name(a),
                _ => "a setting".to_string(),
            };
            eprintln!("aromba-relay: {arg} has a value that cannot be used.");
        }
        _ => {
            let first = e.render().to_string();
            let first = first
                .lines()
                .next()
                .unwrap_or("")
                .trim_start_matches("error: ");
            eprintln!("aromba-relay: {first}");
        }
    }
    ExitCode::from(2)
}

/// `--database-url <DATABASE_URL>` → `DATABASE_URL (--database-url)`.
fn setting_name(arg: &str) -> String {
    let flag = arg.split_whitespace().next().unwrap_or(arg);
    let env = flag
        .trim_start_matches('-')
        .replace('-', "_")
        .to_uppercase();
    let env = match env.as_str() {
        "DATABASE_URL"
        | "DATABASE_URL_FILE"
        | "DATABASE_PASSWORD_FILE"
        | "AROMBA_TOKEN_PEPPER"
        | "AROMBA_TOKEN_PEPPER_FILE"
        | "AROMBA_TRUSTED_PROXIES" => env,
        "LISTEN" => "AROMBA_RELAY_LISTEN".into(),
        "METRICS_LISTEN" => "AROMBA_RELAY_METRICS_LISTEN".into(),
        "TOKEN_PEPPER" => "AROMBA_TOKEN_PEPPER".into(),
        "TOKEN_PEPPER_FILE" => "AROMBA_TOKEN_PEPPER_FILE".into(),
        "BOT_TOKEN_FILE" => "TELEGRAM_BOT_TOKEN_FILE".into(),
        "TRUSTED_PROXIES" => "AROMBA_TRUSTED_PROXIES".into(),
        "TLS_CERT" => "AROMBA_RELAY_TLS_CERT".into(),
        "TLS_KEY" => "AROMBA_RELAY_TLS_KEY".into(),
        "TELEGRAM_MODE" => "AROMBA_TELEGRAM_MODE".into(),
        "BOT_API_URL" => "AROMBA_BOT_API_URL".into(),
        "PUBLIC_URL" => "AROMBA_PUBLIC_URL".into(),
        "WEBHOOK_SECRET" => "TELEGRAM_WEBHOOK_SECRET".into(),
        "WEBHOOK_SECRET_PREVIOUS" => "TELEGRAM_WEBHOOK_SECRET_PREVIOUS".into(),
        "WEBHOOK_SECRET_FILE" => "TELEGRAM_WEBHOOK_SECRET_FILE".into(),
        "WEBHOOK_SECRET_PREVIOUS_FILE" => "TELEGRAM_WEBHOOK_SECRET_PREVIOUS_FILE".into(),
        "WEBHOOK_SECRET_OVERLAP_SECS" => "AROMBA_WEBHOOK_SECRET_OVERLAP_SECS".into(),
        "APPROVAL_KEY_FILE" => "AROMBA_APPROVAL_KEY_FILE".into(),
        other => other.to_string(),
    };
    format!("{env} ({flag})")
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
