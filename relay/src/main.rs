//! `aromba-relay`: the thin binary around [`aromba_relay::Relay::serve`].

// One `unsafe` block in the whole relay: removing the bot token from the
// environment (`take_bot_token`), before any other thread exists.
#![deny(unsafe_code)]

use aromba_relay::config::Cli;
use aromba_relay::telegram::token::BotToken;
use aromba_relay::{Listeners, Relay};
use clap::Parser;
use std::process::ExitCode;

/// Takes `TELEGRAM_BOT_TOKEN` out of the environment: read, checked and
/// removed here, while the process has one thread, so that no later code,
/// log line or child sees it. `Ok(None)` when it is not set.
#[allow(unsafe_code)]
fn take_bot_token() -> Result<Option<BotToken>, String> {
    const NAME: &str = aromba_relay::telegram::token::ENV;
    let value = std::env::var_os(NAME);
    // SAFETY: called first thing in `main`, before the runtime (or any
    // other thread) starts, so nothing reads the environment concurrently.
    unsafe { std::env::remove_var(NAME) };
    let Some(value) = value else {
        return Ok(None);
    };
    let text = value
        .into_string()
        .map_err(|_| format!("{NAME} is not UTF-8"))?;
    if text.trim().is_empty() {
        return Ok(None);
    }
    BotToken::new(&text).map(Some).map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let token = match take_bot_token() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("aromba-relay: {e}.");
            return ExitCode::from(2);
        }
    };
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    if let Some(aromba_relay::config::Command::Healthcheck { metrics_listen }) = &cli.command {
        return healthcheck(*metrics_listen);
    }
    // rustls picks no provider by itself when two are linked.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let telegram_configured = token.is_some();
    let log_token = token.clone();
    let config = match cli.checked(token) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("aromba-relay: {e}.");
            return ExitCode::from(2);
        }
    };
    // JSON lines on standard error, scrubbed of the bot token; standard
    // output stays empty.
    aromba_relay::logging::init(log_token);
    if !telegram_configured {
        tracing::warn!("TELEGRAM_BOT_TOKEN is not set: the relay serves servers but no chat");
    }
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
            .connect(cli.database_url.as_deref().unwrap_or_default())
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
        "DATABASE_URL" | "AROMBA_TOKEN_PEPPER" | "AROMBA_TRUSTED_PROXIES" => env,
        "LISTEN" => "AROMBA_RELAY_LISTEN".into(),
        "METRICS_LISTEN" => "AROMBA_RELAY_METRICS_LISTEN".into(),
        "TOKEN_PEPPER" => "AROMBA_TOKEN_PEPPER".into(),
        "TRUSTED_PROXIES" => "AROMBA_TRUSTED_PROXIES".into(),
        "TLS_CERT" => "AROMBA_RELAY_TLS_CERT".into(),
        "TLS_KEY" => "AROMBA_RELAY_TLS_KEY".into(),
        "TELEGRAM_MODE" => "AROMBA_TELEGRAM_MODE".into(),
        "BOT_API_URL" => "AROMBA_BOT_API_URL".into(),
        "PUBLIC_URL" => "AROMBA_PUBLIC_URL".into(),
        "WEBHOOK_SECRET" => "TELEGRAM_WEBHOOK_SECRET".into(),
        "WEBHOOK_SECRET_PREVIOUS" => "TELEGRAM_WEBHOOK_SECRET_PREVIOUS".into(),
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
