//! The demo's Telegram: the strict fake Bot API for the relay, and the
//! chat page for the person, on two loopback addresses.

use aromba_botfake::Fake;
use aromba_botfake::page::Person;
use std::net::SocketAddr;

/// The bot's token, shared with the relay through the environment.
const TOKEN_ENV: &str = "AROMBA_DEMO_BOT_TOKEN";
/// The page's key (its secret path), from the script, never in argv.
const KEY_ENV: &str = "AROMBA_DEMO_PAGE_KEY";

pub async fn serve(
    api: SocketAddr,
    page: SocketAddr,
    username: &str,
    chat: i64,
    name: &str,
) -> Result<(), String> {
    // Colour codes only on a terminal: the demo writes this to a log file.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let token = std::env::var(TOKEN_ENV).map_err(|_| format!("{TOKEN_ENV} is not set"))?;
    let plausible = token.split_once(':').is_some_and(|(id, secret)| {
        !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) && secret.len() >= 30
    });
    if !plausible {
        return Err(format!("{TOKEN_ENV} is not a bot token (DIGITS:SECRET)"));
    }
    let key = std::env::var(KEY_ENV).map_err(|_| format!("{KEY_ENV} is not set"))?;
    if !aromba_botfake::page::valid_key(&key) {
        return Err(format!("{KEY_ENV} must be 16 or more of A-Z a-z 0-9 _ -"));
    }
    for addr in [api, page] {
        if !addr.ip().is_loopback() {
            return Err(format!(
                "{addr} is not a loopback address; the demo stays on this machine"
            ));
        }
    }
    let bind = |addr: SocketAddr| async move {
        tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| format!("cannot listen on {addr}: {e}"))
    };
    let fake = Fake::new(&token, username);
    fake.clone()
        .serve(bind(api).await?)
        .map_err(|e| format!("cannot serve the Bot API: {e}"))?;
    let person = Person {
        chat,
        name: name.to_string(),
        key,
    };
    fake.serve_page(bind(page).await?, person)
        .map_err(|e| format!("cannot serve the chat page: {e}"))?;
    tracing::info!(%api, %page, "the fake Telegram is up");
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| format!("cannot wait for a signal: {e}"))?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    Ok(())
}
