//! The relay's settings: flags with environment fallbacks, checked at start.
//! A missing or malformed setting stops the start with one sentence naming
//! it.

use crate::clock::{Clock, SystemClock};
use crate::secrets::{Given, MAX_SECRET_FILE, Secrets, WEBHOOK_SECRET};
use clap::Parser;
use ipnet::IpNet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

/// The shortest pepper the relay accepts, in bytes.
pub const MIN_PEPPER: usize = 32;

/// Aromba's relay: registers servers, holds one authenticated WebSocket to
/// each, and keeps what waits for them in PostgreSQL.
#[derive(Parser, Debug)]
#[command(name = "aromba-relay", version, about, long_about = None, subcommand_negates_reqs = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// PostgreSQL connection URL (postgres://user@host/db). A password in
    /// it stays readable in /proc/PID/environ: give it with
    /// --database-password-file, or the whole URL with --database-url-file.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// A file holding the database URL, instead of DATABASE_URL.
    #[arg(long, env = "DATABASE_URL_FILE", value_name = "FILE")]
    pub database_url_file: Option<PathBuf>,
    /// A file holding the database password, for a URL without one.
    #[arg(long, env = "DATABASE_PASSWORD_FILE", value_name = "FILE")]
    pub database_password_file: Option<PathBuf>,
    /// Address for the API and the WebSocket.
    #[arg(long, env = "AROMBA_RELAY_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Address for GET /metrics (Prometheus text format), apart from the API.
    #[arg(
        long,
        env = "AROMBA_RELAY_METRICS_LISTEN",
        default_value = "127.0.0.1:9090"
    )]
    pub metrics_listen: SocketAddr,
    /// Secret key for the stored hashes of server tokens and addresses: at
    /// least 32 bytes. Changing it invalidates every registered server.
    #[arg(long, env = "AROMBA_TOKEN_PEPPER", hide_env_values = true)]
    pub token_pepper: Option<String>,
    /// A file holding the pepper, instead of AROMBA_TOKEN_PEPPER.
    #[arg(long, env = "AROMBA_TOKEN_PEPPER_FILE", value_name = "FILE")]
    pub token_pepper_file: Option<PathBuf>,
    /// Reverse proxies whose X-Forwarded-For is believed, as CIDRs separated
    /// by commas (e.g. 10.0.0.0/8,::1/128). Empty: the peer address counts.
    #[arg(
        long,
        env = "AROMBA_TRUSTED_PROXIES",
        default_value = "",
        value_name = "CIDRS"
    )]
    pub trusted_proxies: String,
    /// PEM certificate chain: with --tls-key, the relay terminates TLS
    /// itself and rereads both files on SIGHUP. Without them it serves plain
    /// HTTP for a reverse proxy in front.
    #[arg(long, env = "AROMBA_RELAY_TLS_CERT", value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// Sockets one address (an IPv6 /64) may hold open before their hello;
    /// raise it when many servers share one address (a large NAT).
    #[arg(long, env = "AROMBA_RELAY_HELLOS_PER_ADDRESS", default_value_t = 64)]
    pub hellos_per_address: u32,
    /// PEM private key for --tls-cert.
    #[arg(long, env = "AROMBA_RELAY_TLS_KEY", value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
    /// How Telegram's updates arrive: `webhook` (Telegram POSTs them to
    /// AROMBA_PUBLIC_URL) or `polling` (for a relay without public HTTPS).
    #[arg(long, env = "AROMBA_TELEGRAM_MODE", default_value = "webhook")]
    pub telegram_mode: String,
    /// A file holding the bot token @BotFather gave. The token itself is
    /// never a flag; TELEGRAM_BOT_TOKEN still works, but stays readable in
    /// /proc/PID/environ.
    #[arg(long, env = "TELEGRAM_BOT_TOKEN_FILE", value_name = "FILE")]
    pub bot_token_file: Option<PathBuf>,
    /// The Bot API's base URL (a local Bot API server, or the demo's fake).
    #[arg(long, env = "AROMBA_BOT_API_URL", default_value = crate::telegram::TELEGRAM_API)]
    pub bot_api_url: String,
    /// The relay's public https:// URL, where Telegram sends the webhook.
    #[arg(long, env = "AROMBA_PUBLIC_URL", value_name = "URL")]
    pub public_url: Option<String>,
    /// The webhook secret Telegram sends with every update: 1–256 of
    /// letters, digits, `_` and `-` (e.g. `openssl rand -hex 32`).
    #[arg(long, env = "TELEGRAM_WEBHOOK_SECRET", hide_env_values = true)]
    pub webhook_secret: Option<String>,
    /// A file holding the webhook secret, instead of TELEGRAM_WEBHOOK_SECRET.
    #[arg(long, env = "TELEGRAM_WEBHOOK_SECRET_FILE", value_name = "FILE")]
    pub webhook_secret_file: Option<PathBuf>,
    /// The secret before a rotation, still accepted for
    /// --webhook-secret-overlap-secs after the start.
    #[arg(long, env = "TELEGRAM_WEBHOOK_SECRET_PREVIOUS", hide_env_values = true)]
    pub webhook_secret_previous: Option<String>,
    /// A file holding the previous webhook secret.
    #[arg(
        long,
        env = "TELEGRAM_WEBHOOK_SECRET_PREVIOUS_FILE",
        value_name = "FILE"
    )]
    pub webhook_secret_previous_file: Option<PathBuf>,
    #[arg(
        long,
        env = "AROMBA_WEBHOOK_SECRET_OVERLAP_SECS",
        default_value_t = 3600
    )]
    pub webhook_secret_overlap_secs: u64,
    /// The short name of the bot's Mini App, registered with @BotFather's
    /// /newapp with the URL <public url>/app/: red actions, undos and
    /// updates are approved there, with Telegram's own signature.
    #[arg(long, env = "AROMBA_TELEGRAM_APP", value_name = "NAME")]
    pub telegram_app: Option<String>,
    /// Origins, space-separated, that may show the Mini App's page in a
    /// frame besides Telegram's web client (the demo's chat page).
    #[arg(long, env = "AROMBA_APP_FRAME_ANCESTORS", value_name = "ORIGINS")]
    pub app_frame_ancestors: Option<String>,
    /// A minisign secret key (unencrypted) to sign taps with; without it
    /// the relay makes one at its first start and keeps it in the database.
    #[arg(long, env = "AROMBA_APPROVAL_KEY_FILE", value_name = "FILE")]
    pub approval_key_file: Option<PathBuf>,
}

#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Exit 0 when the relay on this host is ready (GET /readyz on the
    /// metrics address, which is always plain HTTP), 1 otherwise: for a
    /// container's healthcheck, where there is no shell or curl.
    Healthcheck {
        /// The metrics address to ask.
        #[arg(
            long,
            env = "AROMBA_RELAY_METRICS_LISTEN",
            default_value = "127.0.0.1:9090"
        )]
        metrics_listen: SocketAddr,
    },
}

/// A setting the relay cannot start with.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("AROMBA_TOKEN_PEPPER is {0} bytes; it must be at least {MIN_PEPPER}")]
    ShortPepper(usize),
    #[error("AROMBA_TRUSTED_PROXIES has {0:?}, which is not a CIDR such as 10.0.0.0/8")]
    BadProxy(String),
    #[error("AROMBA_RELAY_TLS_CERT and AROMBA_RELAY_TLS_KEY go together; only {0} is set")]
    HalfTls(&'static str),
    #[error("{0} is not set")]
    Missing(&'static str),
    #[error(
        "AROMBA_TELEGRAM_APP is {0:?}; a Mini App's short name is 3 to 30 of letters, digits and `_`"
    )]
    BadAppName(String),
    #[error(
        "AROMBA_APP_FRAME_ANCESTORS holds {0:?}; each is an origin such as https://chat.example.com (a scheme and a host, no path)"
    )]
    BadFrameAncestor(String),
    #[error("AROMBA_TELEGRAM_MODE is {0:?}; it is webhook or polling")]
    BadMode(String),
    #[error(transparent)]
    BadApiUrl(#[from] crate::telegram::client::BadApiUrl),
    #[error("AROMBA_PUBLIC_URL must be an https:// URL (Telegram sends webhooks over HTTPS only)")]
    BadPublicUrl,
    #[error("{0} must be 1 to 256 of letters, digits, `_` and `-`")]
    BadSecret(String),
    #[error("{0} is set but TELEGRAM_BOT_TOKEN is not (nor TELEGRAM_BOT_TOKEN_FILE)")]
    NoToken(&'static str),
    #[error("neither {0}_FILE nor {0} is set")]
    NoSecret(&'static str),
    #[error("{0} and {1} are both set; give the secret one way only")]
    SecretTwice(&'static str, &'static str),
    #[error("{0} names {1}, which cannot be read ({2})")]
    SecretUnreadable(&'static str, String, String),
    #[error("{0} names {1}, which is empty")]
    SecretEmpty(&'static str, String),
    #[error("{0} names {1}, which is larger than {MAX_SECRET_FILE} bytes")]
    SecretTooLarge(&'static str, String),
    #[error("{0} names {1}, which is not UTF-8 text")]
    SecretNotText(&'static str, String),
    #[error("{0} is not UTF-8")]
    NotUtf8(&'static str),
    #[error(transparent)]
    BadToken(#[from] crate::telegram::token::MalformedToken),
    #[error(
        "TELEGRAM_BOT_TOKEN_FILE names {0}, which holds no bot token (digits, a colon, then 30 or more of letters, digits, `_` and `-`)"
    )]
    BadTokenFile(String),
    #[error(
        "AROMBA_TOKEN_PEPPER_FILE names {0}, which holds {1} bytes; the pepper is at least {MIN_PEPPER}"
    )]
    ShortPepperFile(String, usize),
    #[error("{0} is not a PostgreSQL URL (postgres://user@host/database)")]
    BadDatabaseUrl(&'static str),
    #[error("{0} holds a password and DATABASE_PASSWORD_FILE gives one too; give it one way only")]
    TwoDatabasePasswords(&'static str),
}

/// The secret behind the stored hashes. `Debug` hides it.
#[derive(Clone)]
pub struct Pepper(Arc<[u8]>);

impl Pepper {
    pub fn new(bytes: &[u8]) -> Result<Pepper, ConfigError> {
        if bytes.len() < MIN_PEPPER {
            return Err(ConfigError::ShortPepper(bytes.len()));
        }
        Ok(Pepper(bytes.into()))
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for Pepper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pepper(…)")
    }
}

/// Parses `AROMBA_TRUSTED_PROXIES`.
pub fn parse_proxies(text: &str) -> Result<Vec<IpNet>, ConfigError> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<IpNet>()
                .or_else(|_| s.parse::<std::net::IpAddr>().map(IpNet::from))
                .map(|n| n.trunc())
                .map_err(|_| ConfigError::BadProxy(s.to_string()))
        })
        .collect()
}

/// Limits the relay enforces; the defaults are the production values, and
/// tests lower them.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Registrations one address may make per UTC day, across replicas.
    pub registrations_per_day: u32,
    /// The cheap first gate: a burst of this many requests per address…
    pub burst: u32,
    /// …refilled at one per this many milliseconds.
    pub refill_ms: u64,
    /// What the Mini App's page may ask from one address (anyone can open
    /// a bot's app, and a launch holds for an hour): a burst…
    pub app_burst: u32,
    /// …refilled at one per this many milliseconds.
    pub app_refill_ms: u64,
    /// Connected servers one replica holds; past it, close code 1013.
    pub max_connections: usize,
    /// HTTP connections at once, before any becomes a WebSocket…
    pub max_http_connections: usize,
    /// …and from one address (an IPv6 /64; a trusted proxy has no share of
    /// its own). Past either, the oldest connection that has proven nothing
    /// gives its place up ([`crate::slots`]).
    pub http_per_address: u32,
    /// How long a request's body may take to arrive after its headers.
    pub body_deadline_ms: u64,
    /// Sockets waiting for their hello, all addresses together…
    pub max_pending_hellos: usize,
    /// …and from one address (an IPv6 /64).
    pub hellos_per_address: u32,
    /// Deliveries waiting for one server; past it the oldest is dropped.
    pub max_pending: i64,
    /// Messages from one server waiting for the chat; past it a server's
    /// message is refused (and its connection closed).
    pub max_chat_pending: i64,
    /// Hellos one server may make (each a database write and a
    /// notification to every replica): a burst…
    pub hello_burst: u32,
    /// …refilled at one per this many milliseconds.
    pub hello_refill_ms: u64,
    /// Failed hellos (a wrong token, malformed, stale, silent) one address
    /// may cause: a burst…
    pub failed_hello_burst: u32,
    /// …refilled at one per this many milliseconds; past it the address's
    /// hellos are refused before the database is asked.
    pub failed_hello_refill_ms: u64,
    /// Connected servers that are not paired yet, of `max_connections`:
    /// registration is open, so they must not fill the room paired
    /// servers need.
    pub max_unpaired_connections: usize,
    /// Messages an unpaired server may leave for the chat it does not have
    /// yet.
    pub max_unpaired_chat_pending: i64,
    /// Frames a server may send (acknowledgements aside): a burst…
    pub frame_burst: u32,
    /// …then this many per second.
    pub frames_per_second: u32,
    /// How long the hello may take after the upgrade.
    pub hello_timeout_ms: u64,
    /// Seconds between pings; a connection that misses two pongs closes.
    pub ping_secs: u32,
    /// How often the sweeps run.
    pub sweep_every_ms: u64,
    /// Before a planned shutdown every server is told to come back after
    /// this many milliseconds…
    pub restart_after_ms: u64,
    /// …plus a random delay up to this, so they do not all come at once.
    pub restart_jitter_ms: u64,
    /// How long a shutdown waits for connections to close.
    pub drain_ms: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            registrations_per_day: 20,
            burst: 10,
            refill_ms: 6_000,
            app_burst: 30,
            app_refill_ms: 1_000,
            max_connections: 50_000,
            max_http_connections: 4_096,
            http_per_address: 64,
            body_deadline_ms: 10_000,
            max_pending_hellos: 4_096,
            hellos_per_address: 64,
            max_pending: 500,
            max_chat_pending: 200,
            hello_burst: 6,
            hello_refill_ms: 10_000,
            failed_hello_burst: 20,
            failed_hello_refill_ms: 1_000,
            max_unpaired_connections: 10_000,
            max_unpaired_chat_pending: 8,
            frame_burst: 64,
            frames_per_second: 10,
            hello_timeout_ms: 10_000,
            ping_secs: 30,
            sweep_every_ms: 60_000,
            restart_after_ms: 1_000,
            restart_jitter_ms: 3_000,
            drain_ms: 5_000,
        }
    }
}

/// What `Relay::serve` needs besides its listeners and database.
#[derive(Clone)]
pub struct Config {
    pub pepper: Pepper,
    pub trusted_proxies: Vec<IpNet>,
    pub limits: Limits,
    pub clock: Arc<dyn Clock>,
    /// Terminate TLS with these files; `None`: plain HTTP behind a proxy.
    pub tls: Option<TlsFiles>,
    /// The bot; `None`: the relay serves servers but no chat.
    pub telegram: Option<crate::telegram::TelegramConfig>,
}

impl Config {
    /// Production settings with this pepper.
    pub fn new(pepper: Pepper) -> Config {
        Config {
            pepper,
            trusted_proxies: Vec::new(),
            limits: Limits::default(),
            clock: Arc::new(SystemClock),
            tls: None,
            telegram: None,
        }
    }
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("trusted_proxies", &self.trusted_proxies)
            .field("limits", &self.limits)
            .field("tls", &self.tls)
            .field("telegram", &self.telegram)
            .finish_non_exhaustive()
    }
}

/// The TLS files, when the relay terminates TLS itself.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Cli {
    /// Checks the settings that need more than a parse, with the secrets
    /// [`Cli::secrets`] read ([`crate::secrets`]).
    pub fn checked(&self, secrets: &Secrets) -> Result<Config, ConfigError> {
        let pepper = &secrets.pepper;
        let pepper = Pepper::new(pepper.value.as_bytes()).map_err(|e| match (e, &pepper.path) {
            (ConfigError::ShortPepper(n), Some(path)) => {
                ConfigError::ShortPepperFile(path.clone(), n)
            }
            (e, _) => e,
        })?;
        let mut config = Config::new(pepper);
        config.trusted_proxies = parse_proxies(&self.trusted_proxies)?;
        config.limits.hellos_per_address = self.hellos_per_address.max(1);
        config.tls = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
            }),
            (Some(_), None) => return Err(ConfigError::HalfTls("AROMBA_RELAY_TLS_CERT")),
            (None, Some(_)) => return Err(ConfigError::HalfTls("AROMBA_RELAY_TLS_KEY")),
            (None, None) => None,
        };
        config.telegram = self.telegram(secrets)?;
        Ok(config)
    }

    fn telegram(
        &self,
        secrets: &Secrets,
    ) -> Result<Option<crate::telegram::TelegramConfig>, ConfigError> {
        use crate::telegram::webhook::{WebhookSecrets, valid_secret};
        use crate::telegram::{Mode, TelegramConfig, client::parse_api_url};
        // Compose passes an unset optional setting as an empty one.
        let public_url = self.public_url.clone().filter(|s| !s.trim().is_empty());
        let (webhook_secret, previous) = (
            secrets.webhook_secret.as_ref(),
            secrets.webhook_secret_previous.as_ref(),
        );
        // Named as the operator gave it: the setting, and the file if any.
        let named = |g: &Given| match &g.path {
            Some(path) => format!("the secret in {path} ({})", g.from),
            None => g.from.to_string(),
        };
        let Some(token) = secrets.bot_token.clone() else {
            if let Some(secret) = webhook_secret {
                return Err(ConfigError::NoToken(secret.from));
            }
            if public_url.is_some() {
                return Err(ConfigError::NoToken("AROMBA_PUBLIC_URL"));
            }
            return Ok(None);
        };
        let api_url = parse_api_url(&self.bot_api_url)?;
        let mode = match self.telegram_mode.as_str() {
            "webhook" => {
                let text = public_url
                    .as_deref()
                    .ok_or(ConfigError::Missing("AROMBA_PUBLIC_URL (--public-url)"))?;
                Mode::Webhook {
                    public_url: parse_public_url(text)?,
                }
            }
            "polling" => Mode::Polling,
            other => return Err(ConfigError::BadMode(other.to_string())),
        };
        // Polling needs no secret, but the route still wants one to compare
        // against: a random one nobody knows keeps it a 404.
        let secret = match (&mode, webhook_secret) {
            (_, Some(s)) if valid_secret(&s.value) => s.value.clone(),
            (_, Some(s)) => return Err(ConfigError::BadSecret(named(s))),
            (Mode::Webhook { .. }, None) => {
                return Err(ConfigError::NoSecret(WEBHOOK_SECRET.0));
            }
            (Mode::Polling, None) => crate::telegram::choices::callback_id().repeat(2),
        };
        let secrets = match previous {
            Some(p) if valid_secret(&p.value) => WebhookSecrets::rotating(
                &secret,
                &p.value,
                std::time::Instant::now()
                    + std::time::Duration::from_secs(self.webhook_secret_overlap_secs),
            ),
            Some(p) => return Err(ConfigError::BadSecret(named(p))),
            None => WebhookSecrets::one(&secret),
        };
        let short_name = self
            .telegram_app
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .ok_or(ConfigError::Missing(
                "AROMBA_TELEGRAM_APP (--telegram-app), the short name of the bot's Mini App (README: \"Register the Mini App\")",
            ))?;
        if !crate::telegram::valid_short_name(short_name) {
            return Err(ConfigError::BadAppName(short_name.to_string()));
        }
        let mut app = crate::telegram::MiniApp::new(short_name);
        for origin in self
            .app_frame_ancestors
            .as_deref()
            .unwrap_or("")
            .split_whitespace()
        {
            let ok = url::Url::parse(origin).is_ok_and(|u| {
                matches!(u.scheme(), "https" | "http")
                    && u.host().is_some()
                    && u.path() == "/"
                    && !origin.ends_with('/')
            });
            if !ok {
                return Err(ConfigError::BadFrameAncestor(origin.to_string()));
            }
            app.frame_ancestors.push(origin.to_string());
        }
        let mut telegram = TelegramConfig::new(token, api_url, mode, &secret);
        telegram.secrets = secrets;
        telegram.approval_key_file = self.approval_key_file.clone();
        telegram.app = app;
        Ok(Some(telegram))
    }
}

/// `AROMBA_PUBLIC_URL`: https, with a host, ending in `/` (so the webhook's
/// path is joined under it).
pub fn parse_public_url(text: &str) -> Result<url::Url, ConfigError> {
    let mut url = url::Url::parse(text).map_err(|_| ConfigError::BadPublicUrl)?;
    if url.scheme() != "https" || url.host().is_none() || url.cannot_be_a_base() {
        return Err(ConfigError::BadPublicUrl);
    }
    if !url.path().ends_with('/') {
        let path = format!("{}/", url.path());
        url.set_path(&path);
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_a_short_pepper() {
        assert_eq!(
            Pepper::new(&[7; 31]).err(),
            Some(ConfigError::ShortPepper(31))
        );
        assert!(Pepper::new(&[7; 32]).is_ok());
    }

    #[test]
    fn parses_proxies_and_names_a_bad_one() {
        let nets = parse_proxies(" 10.0.0.0/8, ::1 ,192.168.1.7/24").unwrap_or_default();
        assert_eq!(nets.len(), 3);
        assert_eq!(nets[2].to_string(), "192.168.1.0/24");
        assert_eq!(
            parse_proxies("10.0.0.0/8,example.com"),
            Err(ConfigError::BadProxy("example.com".into()))
        );
        assert_eq!(parse_proxies(""), Ok(vec![]));
    }
}
