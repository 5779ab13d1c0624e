//! The demo's Telegram: the strict fake Bot API for the relay, and the
//! chat page for the person, on two loopback addresses.

use aromba_botfake::Fake;
use aromba_botfake::page::Person;
use std::net::SocketAddr;

/// The bot's token, shared with the relay through the environment.
const TOKEN_ENV: &str = "AROMBA_DEMO_BOT_TOKEN";
/// The page's key (its secret path), from the script, never in argv.
const KEY_ENV: &str = "AROMBA_DEMO_PAGE_KEY";
/// The seed of the key the fake signs Mini App launches with in
/// Telegram's place (the demo's Warden pins its public half).
pub const LAUNCH_SEED_ENV: &str = "AROMBA_DEMO_LAUNCH_SEED";

/// The demo's Mini App: where its proxy listens, and the relay it reaches.
pub struct App {
    pub proxy: SocketAddr,
    pub relay: String,
    pub ca: std::path::PathBuf,
}

/// The launch key, from [`LAUNCH_SEED_ENV`].
pub fn launch_key() -> Result<aromba_botfake::launch::LaunchKey, String> {
    let seed =
        std::env::var(LAUNCH_SEED_ENV).map_err(|_| format!("{LAUNCH_SEED_ENV} is not set"))?;
    aromba_botfake::launch::LaunchKey::from_seed_hex(&seed)
        .ok_or_else(|| format!("{LAUNCH_SEED_ENV} must be 64 hex digits"))
}

pub async fn serve(
    api: SocketAddr,
    page: SocketAddr,
    username: &str,
    chat: i64,
    name: &str,
    app: Option<App>,
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
    let proxy = app.as_ref().map(|a| a.proxy);
    for addr in [Some(api), Some(page), proxy].into_iter().flatten() {
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
    if let Some(app) = &app {
        // BotFather's /newapp: the app opens through the proxy, which
        // reaches the relay's page under the demo's own authority.
        fake.register_app("aromba", &format!("http://{}/app/", app.proxy));
        fake.set_launch_key(launch_key()?);
        crate::app_proxy::serve(
            bind(app.proxy).await?,
            &app.relay,
            &app.ca,
            &format!("http://{page}"),
        )?;
    }
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
