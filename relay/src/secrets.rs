//! The relay's secrets — the database URL or password, the token pepper,
//! the bot token, the webhook secrets — each read from the file its
//! `NAME_FILE` setting names (Docker secrets' convention), or still by
//! value with a warning: a value in the environment stays readable in
//! `/proc/<pid>/environ` for as long as the relay runs, whatever the
//! process does to its own copy. A refusal names the setting and the
//! file, never the secret.

use crate::config::{Cli, ConfigError};
use crate::telegram::token::BotToken;
use sqlx::postgres::PgConnectOptions;
use std::path::Path;

/// The largest secret file the relay reads: a secret is one line, and a
/// larger file is a wrong path.
pub(crate) const MAX_SECRET_FILE: u64 = 64 * 1024;

/// A secret and where it came from, for the sentence that refuses it
/// (which names the setting and the file, never the secret).
pub(crate) struct Given {
    pub(crate) value: String,
    /// The setting it came from: `NAME`, or `NAME_FILE` for a file.
    pub(crate) from: &'static str,
    /// The file, when it came from one.
    pub(crate) path: Option<String>,
}

/// A secret given by value rather than in a file: the relay still starts,
/// and warns once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ByValue {
    /// The setting, e.g. `AROMBA_TOKEN_PEPPER`.
    pub name: &'static str,
    /// Its flag, when the value came from the command line rather than
    /// the environment.
    pub flag: Option<&'static str>,
}

impl ByValue {
    /// Where the value came from: the environment when the variable holds
    /// one (clap prefers the flag, but the environment holds it all the
    /// same), else the flag.
    fn seen(name: &'static str, flag: Option<&'static str>) -> ByValue {
        let in_env = std::env::var_os(name).is_some_and(|v| !v.is_empty());
        ByValue {
            name,
            flag: if in_env { None } else { flag },
        }
    }

    /// The warning: the setting's name, never its value.
    pub fn warning(&self) -> String {
        let name = self.name;
        match self.flag {
            None => format!(
                "{name} is given by value in the environment, where it stays readable in \
                 /proc/<pid>/environ as long as the relay runs; put it in a file and set \
                 {name}_FILE instead"
            ),
            Some(flag) => format!(
                "{flag} gives {name} on the command line, which every user of this host can \
                 read in /proc/<pid>/cmdline; put it in a file and set {name}_FILE instead"
            ),
        }
    }
}

/// The relay's secrets, read from their files (`NAME_FILE`, Docker
/// secrets' convention) or, still, by value. No `Debug`: nothing here is
/// ever printed.
pub struct Secrets {
    /// Where the database is, its password included.
    pub database: PgConnectOptions,
    /// The bot; `None`: the relay serves servers but no chat.
    pub bot_token: Option<BotToken>,
    /// The secrets that came by value, for a warning each at start.
    pub by_value: Vec<ByValue>,
    pub(crate) pepper: Given,
    pub(crate) webhook_secret: Option<Given>,
    pub(crate) webhook_secret_previous: Option<Given>,
}

/// The contents of a secret file, trailing whitespace (the newline an
/// editor or `echo` adds) left out. Errors name the setting and the path,
/// never what the file holds.
fn read_secret_file(setting: &'static str, path: &Path) -> Result<String, ConfigError> {
    use std::io::Read;
    let shown = || path.display().to_string();
    let unreadable =
        |e: std::io::Error| ConfigError::SecretUnreadable(setting, shown(), e.to_string());
    let file = std::fs::File::open(path).map_err(unreadable)?;
    let mut bytes = Vec::new();
    // Bounded before reading: a wrong path may be a device or a huge file.
    file.take(MAX_SECRET_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(unreadable)?;
    if bytes.len() as u64 > MAX_SECRET_FILE {
        return Err(ConfigError::SecretTooLarge(setting, shown()));
    }
    let text =
        String::from_utf8(bytes).map_err(|_| ConfigError::SecretNotText(setting, shown()))?;
    let secret = text.trim_end();
    if secret.is_empty() {
        return Err(ConfigError::SecretEmpty(setting, shown()));
    }
    Ok(secret.to_string())
}

/// One secret: `name` by value (from `flag` or the environment) or the
/// file `file_name` names, not both. An empty value or path counts as
/// unset: compose passes an unset optional setting as an empty one.
fn one_secret(
    (name, file_name, flag): (&'static str, &'static str, Option<&'static str>),
    value: Option<&str>,
    file: Option<&Path>,
    by_value: &mut Vec<ByValue>,
) -> Result<Option<Given>, ConfigError> {
    let value = value.filter(|v| !v.trim().is_empty());
    let file = file.filter(|p| !p.as_os_str().is_empty());
    match (value, file) {
        (Some(_), Some(_)) => Err(ConfigError::SecretTwice(name, file_name)),
        (Some(value), None) => {
            by_value.push(ByValue::seen(name, flag));
            Ok(Some(Given {
                value: value.to_string(),
                from: name,
                path: None,
            }))
        }
        (None, Some(path)) => Ok(Some(Given {
            value: read_secret_file(file_name, path)?,
            from: file_name,
            path: Some(path.display().to_string()),
        })),
        (None, None) => Ok(None),
    }
}

const DATABASE_URL: (&str, &str, Option<&str>) =
    ("DATABASE_URL", "DATABASE_URL_FILE", Some("--database-url"));
const TOKEN_PEPPER: (&str, &str, Option<&str>) = (
    "AROMBA_TOKEN_PEPPER",
    "AROMBA_TOKEN_PEPPER_FILE",
    Some("--token-pepper"),
);
const BOT_TOKEN: (&str, &str, Option<&str>) =
    (crate::telegram::token::ENV, "TELEGRAM_BOT_TOKEN_FILE", None);
pub(crate) const WEBHOOK_SECRET: (&str, &str, Option<&str>) = (
    "TELEGRAM_WEBHOOK_SECRET",
    "TELEGRAM_WEBHOOK_SECRET_FILE",
    Some("--webhook-secret"),
);
const WEBHOOK_SECRET_PREVIOUS: (&str, &str, Option<&str>) = (
    "TELEGRAM_WEBHOOK_SECRET_PREVIOUS",
    "TELEGRAM_WEBHOOK_SECRET_PREVIOUS_FILE",
    Some("--webhook-secret-previous"),
);

impl Cli {
    /// Reads the secrets: each from its file (`NAME_FILE`) or by value.
    /// `bot_token` is `TELEGRAM_BOT_TOKEN` as `main` found it in the
    /// environment (it is never a flag).
    pub fn secrets(&self, bot_token: Option<std::ffi::OsString>) -> Result<Secrets, ConfigError> {
        let mut by_value = Vec::new();
        let database = self.database(&mut by_value)?;
        let pepper = one_secret(
            TOKEN_PEPPER,
            self.token_pepper.as_deref(),
            self.token_pepper_file.as_deref(),
            &mut by_value,
        )?
        .ok_or(ConfigError::NoSecret(TOKEN_PEPPER.0))?;
        let bot_token = bot_token
            .map(|t| {
                t.into_string()
                    .map_err(|_| ConfigError::NotUtf8(BOT_TOKEN.0))
            })
            .transpose()?;
        let bot_token = match one_secret(
            BOT_TOKEN,
            bot_token.as_deref(),
            self.bot_token_file.as_deref(),
            &mut by_value,
        )? {
            None => None,
            Some(Given {
                value,
                path: Some(path),
                ..
            }) => Some(BotToken::new(&value).map_err(|_| ConfigError::BadTokenFile(path))?),
            Some(Given { value, .. }) => Some(BotToken::new(&value)?),
        };
        let webhook_secret = one_secret(
            WEBHOOK_SECRET,
            self.webhook_secret.as_deref(),
            self.webhook_secret_file.as_deref(),
            &mut by_value,
        )?;
        let webhook_secret_previous = one_secret(
            WEBHOOK_SECRET_PREVIOUS,
            self.webhook_secret_previous.as_deref(),
            self.webhook_secret_previous_file.as_deref(),
            &mut by_value,
        )?;
        Ok(Secrets {
            database,
            bot_token,
            by_value,
            pepper,
            webhook_secret,
            webhook_secret_previous,
        })
    }

    /// The database's address: `DATABASE_URL` or `DATABASE_URL_FILE`, and
    /// the password in it or in `DATABASE_PASSWORD_FILE`. A URL by value
    /// is warned about only when it holds a password.
    fn database(&self, by_value: &mut Vec<ByValue>) -> Result<PgConnectOptions, ConfigError> {
        let mut seen = Vec::new();
        let url = one_secret(
            DATABASE_URL,
            self.database_url.as_deref(),
            self.database_url_file.as_deref(),
            &mut seen,
        )?
        .ok_or(ConfigError::NoSecret(DATABASE_URL.0))?;
        let bad_url = || ConfigError::BadDatabaseUrl(url.from);
        let has_password = url::Url::parse(&url.value)
            .map_err(|_| bad_url())?
            .password()
            .is_some_and(|p| !p.is_empty());
        let mut options: PgConnectOptions = url.value.parse().map_err(|_| bad_url())?;
        if has_password {
            by_value.extend(seen);
        }
        if let Some(path) = self
            .database_password_file
            .as_deref()
            .filter(|p| !p.as_os_str().is_empty())
        {
            if has_password {
                return Err(ConfigError::TwoDatabasePasswords(url.from));
            }
            options = options.password(&read_secret_file("DATABASE_PASSWORD_FILE", path)?);
        }
        Ok(options)
    }
}
