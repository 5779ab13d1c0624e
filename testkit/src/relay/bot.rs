//! The relay with its Telegram side, against the strict fake Bot API: the
//! person is played through the fake, the server through the real
//! protocol client.

use super::{Server, TestRelay, config, connect, start_on};
use aromba_botfake::Fake;
use aromba_relay::Config;
use aromba_relay::telegram::pace::PaceLimits;
use aromba_relay::telegram::token::BotToken;
use aromba_relay::telegram::{Mode, TelegramConfig, TelegramLimits};
use aromba_relay_proto::client::{Session, Socket};
use aromba_relay_proto::frame::{Body, Button, Delivery};
use sqlx::PgPool;
use std::time::Duration;

/// A test bot token (the fake's): clearly not a secret.
pub const BOT_TOKEN: &str = "123456789:TEST-token-not-a-secret-0123456789abcdef";
pub const BOT_NAME: &str = "aromba_test_bot";
pub const WEBHOOK_SECRET: &str = "test-webhook-secret-not-a-secret";

/// A relay with a bot, and the fake Telegram it talks to.
pub struct Bot {
    pub relay: TestRelay,
    pub fake: Fake,
    pub fake_addr: std::net::SocketAddr,
    pub db: PgPool,
}

/// Telegram limits small enough for tests.
pub fn test_limits() -> TelegramLimits {
    TelegramLimits {
        pace: PaceLimits {
            per_chat: Duration::from_millis(20),
            overall: Duration::from_millis(1),
            strangers: Duration::from_millis(1),
        },
        poll_wait: Duration::from_secs(1),
        send_every: Duration::from_millis(50),
        lock_retry: Duration::from_millis(100),
        give_up_after: Duration::from_secs(20),
        ..TelegramLimits::default()
    }
}

pub async fn fake() -> (Fake, std::net::SocketAddr) {
    fake_of(BOT_TOKEN).await
}

/// The fake Bot API of the bot with this token.
pub async fn fake_of(token: &str) -> (Fake, std::net::SocketAddr) {
    let fake = Fake::new(token, BOT_NAME);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = fake.clone().serve(listener).expect("the fake serves");
    (fake, addr)
}

/// The Telegram settings for a relay on `api` talking to the fake.
pub fn telegram_config(
    fake_addr: std::net::SocketAddr,
    api: std::net::SocketAddr,
    polling: bool,
) -> TelegramConfig {
    let mode = if polling {
        Mode::Polling
    } else {
        Mode::Webhook {
            public_url: url::Url::parse(&format!("http://{api}/")).expect("url"),
        }
    };
    let mut telegram = TelegramConfig::new(
        BotToken::new(BOT_TOKEN).expect("a token"),
        url::Url::parse(&format!("http://{fake_addr}")).expect("url"),
        mode,
        WEBHOOK_SECRET,
    );
    telegram.limits = test_limits();
    // The chat page on any loopback port may show the Mini App in its
    // panel, as Telegram's web client does.
    telegram
        .app
        .frame_ancestors
        .push("http://127.0.0.1:*".into());
    telegram
}

/// Starts the fake and a relay with a bot (webhook mode, or polling).
pub async fn start_bot(db: PgPool, polling: bool) -> Bot {
    start_bot_with(db, polling, config()).await
}

pub async fn start_bot_with(db: PgPool, polling: bool, mut config: Config) -> Bot {
    let (fake, fake_addr) = fake().await;
    let api = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = api.local_addr().expect("addr");
    if config.telegram.is_none() {
        config.telegram = Some(telegram_config(fake_addr, addr, polling));
    }
    let relay = start_on(db.clone(), config, api).await;
    with_app(&fake, addr);
    Bot {
        relay,
        fake,
        fake_addr,
        db,
    }
}

/// BotFather's `/newapp` for the relay on `api` (its page at `/app/`), and
/// Telegram's launch key: the test key a test Warden pins.
pub fn with_app(fake: &Fake, api: std::net::SocketAddr) {
    fake.register_app("aromba", &format!("http://{api}/app/"));
    fake.set_launch_key(crate::telegram::test_key());
}

/// A relay with a bot (webhook mode) whose relay limits and Telegram
/// limits the test adjusts.
pub async fn start_bot_tuned(
    db: PgPool,
    limits: impl FnOnce(&mut aromba_relay::Limits),
    telegram_limits: impl FnOnce(&mut TelegramLimits),
) -> Bot {
    let (fake, fake_addr) = fake().await;
    let api = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = api.local_addr().expect("addr");
    let mut c = config();
    limits(&mut c.limits);
    let mut telegram = telegram_config(fake_addr, addr, false);
    telegram_limits(&mut telegram.limits);
    c.telegram = Some(telegram);
    let relay = start_on(db.clone(), c, api).await;
    with_app(&fake, addr);
    Bot {
        relay,
        fake,
        fake_addr,
        db,
    }
}

/// Waits (up to 20 s) until `check` gives something.
pub async fn eventually<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    for _ in 0..1_000 {
        if let Some(v) = check() {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("gave up waiting for {what}");
}

/// The next frame, within 20 s.
pub async fn next_frame(ws: &mut Socket, session: &mut Session) -> Body {
    tokio::time::timeout(Duration::from_secs(60), session.recv(ws))
        .await
        .expect("a frame within 60 s")
        .expect("a frame")
}

/// The next delivery, acknowledged.
pub async fn next_delivery(ws: &mut Socket, session: &mut Session) -> Delivery {
    loop {
        if let Body::Deliver { id, delivery } = next_frame(ws, session).await {
            session
                .send(ws, &Body::AckDelivery { id })
                .await
                .expect("ack");
            return delivery;
        }
    }
}

/// Nothing is delivered within `wait`.
pub async fn no_delivery(ws: &mut Socket, session: &mut Session, wait: Duration) {
    if let Ok(Ok(body)) = tokio::time::timeout(wait, session.recv(ws)).await {
        assert!(
            !matches!(body, Body::Deliver { .. }),
            "nothing may be delivered, got {body:?}"
        );
    }
}

/// A pairing code for a connected server: `(code, link)`.
pub async fn ask_code(ws: &mut Socket, session: &mut Session) -> (String, String) {
    session
        .send(ws, &Body::PairingRequest {})
        .await
        .expect("request");
    loop {
        if let Body::PairingCode { code, link, .. } = next_frame(ws, session).await {
            return (code, link);
        }
    }
}

/// A server registered, connected and paired with private chat `chat`;
/// returns it with its connection and the relay's approval key.
pub async fn paired(bot: &Bot, chat: i64) -> (Server, Socket, Session, String) {
    let server = Server::new();
    let (status, _) = super::post_json(&bot.relay, &server.registration()).await;
    assert_eq!(status, 201);
    let (mut ws, mut session) = connect(&bot.relay, &server).await;
    let (code, _) = ask_code(&mut ws, &mut session).await;
    bot.fake.user_message(chat, &format!("/start {code}"));
    let key = match next_delivery(&mut ws, &mut session).await {
        Delivery::Paired { approval_key, .. } => approval_key,
        other => panic!("expected the pairing, got {other:?}"),
    };
    (server, ws, session, key)
}

impl Bot {
    /// Waits (up to 20 s) until the relay has recorded every button of a
    /// message the fake shows: the relay records them once Telegram has
    /// answered, so a tap sent the instant the message appears could come
    /// first (and be expired, rightly).
    pub async fn wait_recorded(&self, message: &aromba_botfake::state::Sent) {
        let ids: Vec<String> = message
            .buttons
            .iter()
            .flatten()
            .filter(|(_, data)| !aromba_botfake::is_link(data))
            .map(|(_, data)| data.clone())
            .collect();
        for _ in 0..1_000 {
            let recorded: i64 = sqlx::query_scalar(
                "SELECT (SELECT count(*) FROM chat_buttons WHERE callback_id = ANY($1))
                      + (SELECT count(*) FROM relay_buttons WHERE callback_id = ANY($1))",
            )
            .bind(&ids)
            .fetch_one(&self.db)
            .await
            .expect("the relay's database");
            if recorded == ids.len() as i64 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("the relay never recorded the buttons of a message it sent");
    }

    /// The `n`th message the bot sent to `chat`, once it is there and its
    /// buttons are recorded.
    pub async fn shown(&self, chat: i64, n: usize) -> aromba_botfake::state::Sent {
        let message = eventually("the message in the chat", || {
            self.fake.sent_to(chat).into_iter().nth(n)
        })
        .await;
        self.wait_recorded(&message).await;
        message
    }

    /// A Telegram event's count, from the relay's metrics.
    pub async fn metric(&self, event: &str) -> u64 {
        let text = self.relay.metrics_text().await;
        let prefix = format!("aromba_relay_telegram_events_total{{event=\"{event}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Waits (up to 20 s) until the event's count is `n`.
    pub async fn wait_metric(&self, event: &str, n: u64) {
        for _ in 0..1_000 {
            if self.metric(event).await == n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!(
            "{event} never reached {n} (it is {})",
            self.metric(event).await
        );
    }
}

/// The action id the tests' approval buttons carry.
pub const ACTION: &str = "0123456789abcdef0123456789abcdef";

/// The server sends `text` with `buttons`; returns its id once the relay
/// acknowledged it.
pub async fn send(
    ws: &mut Socket,
    session: &mut Session,
    text: &str,
    buttons: Vec<Button>,
) -> uuid::Uuid {
    let id = uuid::Uuid::new_v4();
    session
        .send(
            ws,
            &Body::Send {
                id,
                text: text.into(),
                buttons,
                monospace: Vec::new(),
            },
        )
        .await
        .expect("send");
    loop {
        if let Body::AckMessage { id: acked } = next_frame(ws, session).await {
            assert_eq!(acked, id);
            return id;
        }
    }
}

/// Approve and Cancel for [`ACTION`].
pub fn approval_buttons() -> Vec<Button> {
    vec![
        Button {
            id: "approve".into(),
            label: "Approve".into(),
            action: Some(ACTION.into()),
            app: None,
        },
        Button {
            id: "cancel".into(),
            label: "Cancel".into(),
            action: Some(ACTION.into()),
            app: None,
        },
    ]
}

/// The `n`th message the bot sent to `chat`, once it is there.
pub async fn sent(bot: &Bot, chat: i64, n: usize) -> aromba_botfake::state::Sent {
    bot.shown(chat, n).await
}

/// What the Mini App's page got when it asked: the HTTP status and the
/// JSON body (an answer, or a refusal's `message`).
#[derive(Debug)]
pub struct AppReply {
    pub status: u16,
    pub body: serde_json::Value,
}

impl AppReply {
    /// The answer's or the refusal's words.
    pub fn text(&self) -> String {
        self.body
            .get("text")
            .or_else(|| self.body.get("message"))
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_string()
    }
}

impl Bot {
    /// The person in `chat` taps the link button labelled `label` on
    /// `message`: the launch Telegram gives the page it opens.
    pub fn open_app(
        &self,
        chat: i64,
        message: &aromba_botfake::state::Sent,
        label: &str,
    ) -> String {
        let link = message
            .buttons
            .iter()
            .flatten()
            .find(|(l, d)| l == label && aromba_botfake::is_link(d))
            .map(|(_, d)| d.clone())
            .unwrap_or_else(|| panic!("no {label} link on {message:?}"));
        self.fake
            .open_app(chat, &link)
            .unwrap_or_else(|e| panic!("the app did not open: {e}"))
            .launch
    }

    /// The page asks the relay `ask` (`view` or `approve`) with `launch`.
    pub async fn ask_app(&self, launch: &str, ask: &str) -> AppReply {
        self.ask_app_sealed(launch, ask, None).await
    }

    /// The page approves with `launch` and `pin` typed, sealed as the page
    /// seals it for the key the launch's `start_param` names.
    pub async fn approve_app_with_pin(&self, launch: &str, pin: &str) -> AppReply {
        let param = launch
            .split('&')
            .find_map(|f| f.strip_prefix("start_param="))
            .expect("a launch from a proposal's button");
        let sealed = crate::telegram::seal_pin(param, pin);
        self.ask_app_sealed(launch, "approve", Some(&sealed)).await
    }

    /// The Trust page's Undo link for `undo_id`, followed with `launch`.
    pub async fn undo_from_app(&self, launch: &str, undo_id: &str) -> AppReply {
        let body = serde_json::json!({"launch": launch, "ask": "undo", "undo": undo_id});
        self.ask_app_body(body).await
    }

    async fn ask_app_sealed(&self, launch: &str, ask: &str, sealed: Option<&str>) -> AppReply {
        let mut body = serde_json::json!({"launch": launch, "ask": ask});
        if let Some(sealed) = sealed {
            body["sealed_pin"] = sealed.into();
        }
        self.ask_app_body(body).await
    }

    async fn ask_app_body(&self, body: serde_json::Value) -> AppReply {
        let (status, text) = post_ask(self.relay.addr, body.to_string()).await;
        let body = serde_json::from_str(&text).unwrap_or(serde_json::Value::Null);
        AppReply { status, body }
    }
}

/// What the relay at `relay` answers `body`, sent as JSON to the Mini
/// App's ask route as a page (or anyone) would: the status and the text.
pub async fn post_ask(relay: std::net::SocketAddr, body: String) -> (u16, String) {
    let response = reqwest::Client::new()
        .post(format!("http://{relay}/app/v1/ask"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("the relay answers the page");
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

impl Bot {
    /// The person writes `text` in `chat`; the message's id in the chat.
    pub fn write(&self, chat: i64, text: &str) -> i64 {
        self.fake.user_message(chat, text);
        *self
            .fake
            .state()
            .last_message_id
            .get(&chat)
            .expect("the chat's message")
    }

    /// Waits until the relay has said all it says at pairing (its reply
    /// and the chat's command menu), so the next Bot API call is the
    /// test's.
    pub async fn settled(&self, chat: i64) {
        eventually("the pairing's reply and menu", || {
            let state = self.fake.state();
            (state.sent.iter().any(|m| m.chat_id == chat)
                && state.commands.contains_key(&format!("chat:{chat}")))
            .then_some(())
        })
        .await;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    /// Whether the bot deleted `message_id` from `chat`.
    pub fn deleted(&self, chat: i64, message_id: i64) -> bool {
        self.fake
            .state()
            .deleted_by_bot
            .contains(&(chat, message_id))
    }
}

/// The next delivery is `text` as an ordinary message: nothing the chat
/// wrote before it was queued for the server (deliveries come in order).
pub async fn next_is_message(ws: &mut Socket, session: &mut Session, text: &str) {
    assert_eq!(
        next_delivery(ws, session).await,
        Delivery::Message { text: text.into() }
    );
}

/// Every row of every table of the relay's, as text, that holds `needle`.
pub async fn rows_holding(db: &PgPool, needle: &str) -> Vec<String> {
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables
         WHERE table_schema = 'public' AND table_type = 'BASE TABLE'",
    )
    .fetch_all(db)
    .await
    .expect("the tables");
    assert!(tables.iter().any(|t| t == "outbox"), "{tables:?}");
    let mut found = Vec::new();
    for table in tables {
        // The table names are the database's own.
        let rows: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT t::text FROM \"{table}\" t WHERE t::text LIKE '%' || $1 || '%'"
        )))
        .bind(needle)
        .fetch_all(db)
        .await
        .expect("a table");
        found.extend(rows.into_iter().map(|r| format!("{table}: {r}")));
    }
    found
}

/// A private chat's text message as Telegram posts it to the webhook.
pub fn message_update(update_id: i64, chat: i64, text: &str) -> serde_json::Value {
    serde_json::json!({
        "update_id": update_id,
        "message": {
            "message_id": 1,
            "from": {"id": chat, "is_bot": false, "first_name": "P"},
            "chat": {"id": chat, "type": "private", "first_name": "P"},
            "date": 1_700_000_000,
            "text": text,
        }
    })
}

/// POSTs `body` to the bot's webhook with its secret; the status.
pub async fn post_update(bot: &Bot, body: &serde_json::Value) -> u16 {
    reqwest::Client::new()
        .post(bot.relay.url(aromba_relay::telegram::webhook::PATH))
        .header(
            aromba_relay::telegram::webhook::SECRET_HEADER,
            WEBHOOK_SECRET,
        )
        .json(body)
        .send()
        .await
        .expect("an answer")
        .status()
        .as_u16()
}
