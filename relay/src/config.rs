//! The relay's settings: flags with environment fallbacks, checked at start.
//! A missing or malformed setting stops the start with one sentence naming
//! it.

use crate::clock::{Clock, SystemClock};
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
    /// PostgreSQL connection URL (postgres://user:password@host/db).
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
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
    /// The bot token itself comes only from TELEGRAM_BOT_TOKEN.
    #[arg(long, env = "AROMBA_TELEGRAM_MODE", default_value = "webhook")]
    pub telegram_mode: String,
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
    /// The secret before a rotation, still accepted for
    /// --webhook-secret-overlap-secs after the start.
    #[arg(long, env = "TELEGRAM_WEBHOOK_SECRET_PREVIOUS", hide_env_values = true)]
    pub webhook_secret_previous: Option<String>,
    #[arg(
        long,
        env = "AROMBA_WEBHOOK_SECRET_OVERLAP_SECS",
        default_value_t = 3600
    )]
    pub webhook_secret_overlap_secs: u64,
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
    #[error("AROMBA_TELEGRAM_MODE is {0:?}; it is webhook or polling")]
    BadMode(String),
    #[error(transparent)]
    BadApiUrl(#[from] crate::telegram::client::BadApiUrl),
    #[error("AROMBA_PUBLIC_URL must be an https:// URL (Telegram sends webhooks over HTTPS only)")]
    BadPublicUrl,
    #[error("{0} must be 1 to 256 of letters, digits, `_` and `-`")]
    BadSecret(&'static str),
    #[error("{0} is set but TELEGRAM_BOT_TOKEN is not")]
    NoToken(&'static str),
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
    /// Connected servers one replica holds; past it, close code 1013.
    pub max_connections: usize,
    /// HTTP connections at once, before any becomes a WebSocket.
    pub max_http_connections: usize,
    /// Sockets waiting for their hello, all addresses together…
    pub max_pending_hellos: usize,
    /// …and from one address (an IPv6 /64).
    pub hellos_per_address: u32,
    /// Deliveries waiting for one server; past it the oldest is dropped.
    pub max_pending: i64,
    /// Messages from one server waiting for the chat; past it a server's
    /// message is refused (and its connection closed).
    pub max_chat_pending: i64,
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
            max_connections: 50_000,
            max_http_connections: 4_096,
            max_pending_hellos: 4_096,
            hellos_per_address: 64,
            max_pending: 500,
            max_chat_pending: 200,
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
    /// Checks the settings that need more than a parse. `token` is the bot
    /// token `main` took from the environment.
    pub fn checked(
        &self,
        token: Option<crate::telegram::token::BotToken>,
    ) -> Result<Config, ConfigError> {
        if self.database_url.is_none() {
            return Err(ConfigError::Missing("DATABASE_URL (--database-url)"));
        }
        let pepper = self
            .token_pepper
            .as_deref()
            .ok_or(ConfigError::Missing("AROMBA_TOKEN_PEPPER (--token-pepper)"))?;
        let pepper = Pepper::new(pepper.as_bytes())?;
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
        config.telegram = self.telegram(token)?;
        Ok(config)
    }

    fn telegram(
        &self,
        token: Option<crate::telegram::token::BotToken>,
    ) -> Result<Option<crate::telegram::TelegramConfig>, ConfigError> {
        use crate::telegram::webhook::{WebhookSecrets, valid_secret};
        use crate::telegram::{Mode, TelegramConfig, client::parse_api_url};
        // Compose passes an unset optional setting as an empty one.
        let set = |v: &Option<String>| v.clone().filter(|s| !s.trim().is_empty());
        let (public_url, webhook_secret, previous) = (
            set(&self.public_url),
            set(&self.webhook_secret),
            set(&self.webhook_secret_previous),
        );
        let Some(token) = token else {
            if webhook_secret.is_some() {
                return Err(ConfigError::NoToken("TELEGRAM_WEBHOOK_SECRET"));
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
        let secret = match (&mode, webhook_secret.as_deref()) {
            (_, Some(s)) if valid_secret(s) => s.to_string(),
            (_, Some(_)) => return Err(ConfigError::BadSecret("TELEGRAM_WEBHOOK_SECRET")),
            (Mode::Webhook { .. }, None) => {
                return Err(ConfigError::Missing(
                    "TELEGRAM_WEBHOOK_SECRET (--webhook-secret)",
                ));
            }
            (Mode::Polling, None) => crate::telegram::choices::callback_id().repeat(2),
        };
        let secrets = match previous.as_deref() {
            Some(p) if valid_secret(p) => WebhookSecrets::rotating(
                &secret,
                p,
                std::time::Instant::now()
                    + std::time::Duration::from_secs(self.webhook_secret_overlap_secs),
            ),
            Some(_) => {
                return Err(ConfigError::BadSecret("TELEGRAM_WEBHOOK_SECRET_PREVIOUS"));
            }
            None => WebhookSecrets::one(&secret),
        };
        let mut telegram = TelegramConfig::new(token, api_url, mode, &secret);
        telegram.secrets = secrets;
        telegram.approval_key_file = self.approval_key_file.clone();
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
