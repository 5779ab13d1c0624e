//! The relay's Telegram side: updates in (our own webhook route, or long
//! polling by one replica at a time), the chat's words and taps to the
//! paired server, the server's messages out within Telegram's limits, and
//! pairing.
//!
//! ```text
//!  Telegram ──POST /v1/telegram/webhook──▶ webhook ─┐
//!  Telegram ◀──getUpdates── poller ─────────────────┤ shards (bounded, by chat)
//!                                                   ▼
//!                inbound: dedupe update_id, pairing, foreign chats,
//!                         messages and signed taps → outbox (to servers)
//!  servers ──send/edit──▶ chat_outbox ──▶ outbound (one replica) ──▶ Telegram
//! ```
//!
//! Map: [`token`] (the bot token and scrubbing), [`client`] (the Bot API
//! client), [`webhook`], [`poller`], [`inbound`] (one update), [`pairing`],
//! [`choices`] (the relay's own buttons), [`outbound`] (the sender),
//! [`pace`] (Telegram's limits), [`split`], [`signing`] (tap signatures),
//! [`words`] (what the relay itself says).
//!
//! Nothing here logs a text, a code, a token or a chat id: logs carry
//! server ids, kinds and counts.

pub mod choices;
mod claim;
pub mod client;
pub mod inbound;
pub mod one_reading;
pub mod outbound;
pub mod pace;
pub mod pairing;
pub mod poller;
pub mod queue;
pub mod signing;
pub mod split;
pub mod token;
pub mod webhook;
pub mod words;

use client::Client;
use pace::{Pace, PaceLimits};
use signing::ApprovalKey;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use token::BotToken;
use webhook::WebhookSecrets;

/// Update claims at the database at once (a quarter of the relay's pool).
pub const CLAIMS_AT_ONCE: usize = 8;

/// The relay's own replies and tap answers in flight at once; past it a
/// reply is dropped (and counted) rather than queued without bound.
pub const MAX_REPLIES: usize = 1_024;

/// How far ahead a chat's turn may be for the relay to queue another reply
/// (or the sender a message) for it: past that the reply is dropped (the
/// message waits), so no chat can hold places in line it has not reached.
pub const AHEAD: Duration = Duration::from_secs(5);

/// Replies to chats that are not paired in flight at once, apart from the
/// paired chats' replies; past it a stranger's reply is dropped.
pub const MAX_STRANGER_REPLIES: usize = 64;

/// How long a stranger's chat is remembered (as a keyed hash) after its one
/// reply: silence for that long, and then it may be told once more.
pub const FOREIGN_DAYS: i64 = 30;

/// Telegram's own Bot API.
pub const TELEGRAM_API: &str = "https://api.telegram.org";

/// How updates reach the relay.
#[derive(Clone, Debug)]
pub enum Mode {
    /// Telegram POSTs them to `<public url>/v1/telegram/webhook`.
    Webhook { public_url: url::Url },
    /// One replica at a time asks with `getUpdates`.
    Polling,
}

/// Settings of the Telegram side, with limits tests lower.
#[derive(Clone, Debug)]
pub struct TelegramConfig {
    pub token: BotToken,
    pub api_url: url::Url,
    pub mode: Mode,
    pub secrets: WebhookSecrets,
    /// A minisign secret key file for tap signatures; `None`: the key the
    /// database keeps (made at the first start).
    pub approval_key_file: Option<PathBuf>,
    pub limits: TelegramLimits,
    /// The bot's Mini App, where approvals the relay cannot make are given.
    pub app: MiniApp,
}

/// The bot's Mini App, as registered with @BotFather (`/newapp`, its URL
/// `<public url>/app/`).
#[derive(Clone, Debug)]
pub struct MiniApp {
    /// Its short name: the `<app>` of `t.me/<bot>/<app>`.
    pub short_name: String,
    /// Origins that may show the page in a frame (Telegram's web client).
    pub frame_ancestors: Vec<String>,
}

/// Telegram's web client, which shows a Mini App in a frame.
pub const TELEGRAM_WEB: &str = "https://web.telegram.org";

impl MiniApp {
    /// The app `short_name`, framed by Telegram's web client only.
    pub fn new(short_name: &str) -> MiniApp {
        MiniApp {
            short_name: short_name.to_string(),
            frame_ancestors: vec![TELEGRAM_WEB.to_string()],
        }
    }

    /// The direct link that opens the app with `start_param`.
    pub fn link(&self, bot_username: &str, start_param: &str) -> String {
        format!(
            "https://t.me/{bot_username}/{}?startapp={start_param}",
            self.short_name
        )
    }
}

/// A short name @BotFather takes: 3 to 30 of letters, digits and `_`.
pub fn valid_short_name(name: &str) -> bool {
    (3..=30).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[derive(Clone, Debug)]
pub struct TelegramLimits {
    /// The largest update body read.
    pub max_update_bytes: usize,
    /// Queues updates are spread over (by chat, so one chat stays in
    /// order)…
    pub shards: usize,
    /// …and the updates each holds; a full queue drops (and counts).
    pub queue_per_shard: usize,
    pub pace: PaceLimits,
    /// How long a pairing code holds.
    pub code_ttl: Duration,
    /// Wrong codes one chat or account may try in a window…
    pub guesses_per_window: i32,
    /// …the window…
    pub guess_window: Duration,
    /// …and how long a chat or account that went past it is locked out.
    pub lockout: Duration,
    /// Wrong codes from everyone together per window, past which guesses
    /// wait for the next window.
    pub guesses_overall: i32,
    /// How long a long poll waits at Telegram.
    pub poll_wait: Duration,
    /// Servers whose oldest message one send round takes.
    pub send_round: i64,
    /// How often the sender looks for work when nothing woke it.
    pub send_every: Duration,
    /// How long a replica waits before trying again for the poller's or
    /// the sender's lock.
    pub lock_retry: Duration,
    /// How long taps on a delivered message's buttons stay good.
    pub buttons_live: Duration,
    /// A chat that is not paired is given each reply (a wrong code, pairing
    /// busy, a lockout) at most once per this long, however often it asks.
    pub stranger_window: Duration,
    /// How long the poller asks again for one update that does not settle
    /// while later ones do, before it goes past it (counted,
    /// `update_given_up`); a chat's later updates wait behind such an
    /// update for half as long, to keep its order.
    pub give_up_after: Duration,
}

impl Default for TelegramLimits {
    fn default() -> TelegramLimits {
        TelegramLimits {
            max_update_bytes: 256 * 1024,
            shards: 64,
            queue_per_shard: 256,
            pace: PaceLimits::default(),
            code_ttl: Duration::from_secs(15 * 60),
            guesses_per_window: 5,
            guess_window: Duration::from_secs(10 * 60),
            lockout: Duration::from_secs(60 * 60),
            guesses_overall: 600,
            poll_wait: Duration::from_secs(10),
            send_round: 256,
            send_every: Duration::from_millis(500),
            lock_retry: Duration::from_secs(5),
            buttons_live: Duration::from_secs(7 * 24 * 3600),
            stranger_window: Duration::from_secs(10),
            give_up_after: Duration::from_secs(60),
        }
    }
}

impl TelegramConfig {
    /// Webhook mode against `api_url` with one secret and default limits.
    pub fn new(token: BotToken, api_url: url::Url, mode: Mode, secret: &str) -> TelegramConfig {
        TelegramConfig {
            token,
            api_url,
            mode,
            secrets: WebhookSecrets::one(secret),
            approval_key_file: None,
            limits: TelegramLimits::default(),
            app: MiniApp::new("aromba"),
        }
    }
}

/// The Telegram side's running state, shared by its tasks and the routes.
pub struct Telegram {
    pub config: TelegramConfig,
    pub client: Client,
    pub key: ApprovalKey,
    pub pace: Pace,
    pub inbound: queue::Queue,
    /// The bot's username once `getMe` answered.
    pub username: tokio::sync::watch::Receiver<Option<String>>,
    username_tx: tokio::sync::watch::Sender<Option<String>>,
    /// Wakes the sender (a server's message arrived on this replica).
    pub outgoing: tokio::sync::Notify,
    /// Claims the shards may have at the database at once: the pool is
    /// shared with the servers' sessions and the outbox writer, which a
    /// burst of updates must not starve.
    pub claims: tokio::sync::Semaphore,
    /// The relay's own replies in flight (each waits for its chat's turn
    /// in a task of its own, not in a shard)…
    pub replies: Arc<tokio::sync::Semaphore>,
    /// …and tap answers, apart (they are not paced, and a flood of replies
    /// must not stop every person's spinner)…
    pub answers: Arc<tokio::sync::Semaphore>,
    /// …and replies to chats that are not paired, apart again, so that
    /// strangers can never use up what paired chats need.
    pub strangers: Arc<tokio::sync::Semaphore>,
}

impl Telegram {
    /// Loads the signing key and makes the queues; the tasks start with
    /// [`start`].
    pub async fn prepare(
        config: TelegramConfig,
        db: &sqlx::PgPool,
    ) -> Result<(Arc<Telegram>, queue::Receivers), signing::KeyError> {
        let key = match &config.approval_key_file {
            Some(path) => ApprovalKey::from_file(path)?,
            None => ApprovalKey::from_database(db).await?,
        };
        let client = Client::new(config.token.clone(), config.api_url.clone());
        let (queue, receivers) =
            queue::Queue::new(config.limits.shards, config.limits.queue_per_shard);
        let (username_tx, username) = tokio::sync::watch::channel(None);
        let pace = Pace::new(config.limits.pace.clone());
        Ok((
            Arc::new(Telegram {
                config,
                client,
                key,
                pace,
                inbound: queue,
                username,
                username_tx,
                outgoing: tokio::sync::Notify::new(),
                claims: tokio::sync::Semaphore::new(CLAIMS_AT_ONCE),
                replies: Arc::new(tokio::sync::Semaphore::new(MAX_REPLIES)),
                answers: Arc::new(tokio::sync::Semaphore::new(MAX_REPLIES)),
                strangers: Arc::new(tokio::sync::Semaphore::new(MAX_STRANGER_REPLIES)),
            }),
            receivers,
        ))
    }

    /// Telegram said 429 for a call about `about`: the pace pauses what
    /// the call was about, capped, and a pause of every chat, or one
    /// Telegram asked to be longer, is said in the log.
    pub fn told_to_wait(
        &self,
        metrics: &crate::metrics::Metrics,
        about: pace::About,
        wait: Duration,
    ) {
        metrics.telegram("bot_api_429");
        let paused = self.pace.too_many_requests(about, wait);
        if paused.chat.is_some() {
            metrics.telegram("bot_api_pause_chat");
        }
        if let Some(bot) = paused.bot {
            metrics.telegram("bot_api_pause_bot");
            tracing::warn!(
                retry_after_s = wait.as_secs(),
                paused_s = bot.as_secs(),
                "the Bot API asked every chat to wait; sending pauses, then tries again"
            );
        }
        if paused.capped {
            metrics.telegram("bot_api_pause_capped");
            tracing::warn!(
                retry_after_s = wait.as_secs(),
                "the Bot API asked to wait longer than the relay pauses; it tries again sooner"
            );
        }
    }

    /// The bot's username, waiting up to `wait` for `getMe`.
    pub async fn username_within(&self, wait: Duration) -> Option<String> {
        let mut rx = self.username.clone();
        let found = tokio::time::timeout(wait, rx.wait_for(Option::is_some)).await;
        match found {
            Ok(Ok(name)) => name.clone(),
            _ => None,
        }
    }
}

/// Starts the Telegram side's tasks in `tasks`: `getMe` (until it answers),
/// the webhook's registration or the poller, the inbound shards and the
/// sender.
pub fn start(
    app: crate::App,
    telegram: Arc<Telegram>,
    receivers: queue::Receivers,
    tasks: &mut tokio::task::JoinSet<()>,
) {
    tasks.spawn(learn_username(telegram.clone()));
    match telegram.config.mode.clone() {
        Mode::Webhook { public_url } => {
            tasks.spawn(register_webhook(telegram.clone(), public_url));
        }
        Mode::Polling => {
            tasks.spawn(poller::run(app.clone()));
        }
    }
    queue::spawn_shards(app.clone(), receivers, tasks);
    tasks.spawn(outbound::run(app));
}

/// Retries a Bot API call until it works: every failure is logged
/// (scrubbed) and waited out, longer each time up to a minute.
async fn until_done<T, F, Fut>(what: &'static str, mut call: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, client::CallError>>,
{
    let mut wait = Duration::from_millis(250);
    loop {
        match call().await {
            Ok(v) => return v,
            Err(client::CallError::RetryAfter(d)) => {
                tokio::time::sleep(d.min(pace::MAX_BOT_PAUSE)).await
            }
            Err(e) => {
                tracing::warn!(call = what, error = %e, "Bot API call failed; trying again");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(60));
            }
        }
    }
}

async fn learn_username(telegram: Arc<Telegram>) {
    let name = until_done("getMe", || telegram.client.username()).await;
    let _ = telegram.username_tx.send(Some(name));
}

async fn register_webhook(telegram: Arc<Telegram>, public_url: url::Url) {
    let Ok(url) = public_url.join(webhook::PATH.trim_start_matches('/')) else {
        tracing::error!("AROMBA_PUBLIC_URL cannot take the webhook's path");
        return;
    };
    let secret = telegram.config.secrets.current().to_string();
    until_done("setWebhook", || {
        telegram.client.set_webhook(url.clone(), &secret)
    })
    .await;
    tracing::info!("webhook set");
}
