//! A strict local stand-in for Telegram's Bot API: the methods Aromba's
//! relay calls, with Telegram's JSON shapes, error bodies and refusals, for
//! the tests and the demo. Telegram is never reached.
//!
//! ```no_run
//! # async fn run() -> std::io::Result<()> {
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let fake = aromba_botfake::Fake::new("123456:TEST-token-not-a-secret", "aromba_test_bot");
//! let addr = fake.clone().serve(listener);
//! // The relay calls http://{addr}/bot<token>/sendMessage; a test plays the person:
//! fake.user_message(42, "/start ABC234");
//! # Ok(()) }
//! ```
//!
//! Map: [`api`] (the Bot API methods), [`state`] (what it remembers),
//! [`page`] (the chat page a person uses in a browser, for the demo).

#![forbid(unsafe_code)]

pub mod api;
pub mod launch;
pub mod mini_app;
pub mod page;
pub mod state;

use serde_json::json;
use state::{Injected, Said, Sent, State, Tap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;

/// Whether a button's second half is a link (an inline button with `url`)
/// rather than callback data: the relay's callback data never holds `:`.
pub fn is_link(data: &str) -> bool {
    data.starts_with("https://") || data.starts_with("http://")
}

/// Telegram's limits, as it enforces them.
pub const MAX_TEXT: usize = 4096;
pub const MAX_CALLBACK_DATA: usize = 64;
pub const MAX_BUTTONS: usize = 100;

/// The fake, shared by its server and the test driving it.
#[derive(Clone)]
pub struct Fake(Arc<Inner>);

pub struct Inner {
    pub token: String,
    pub username: String,
    pub bot_id: i64,
    state: Mutex<State>,
    /// Woken when an update is queued (a long poll waits on it).
    pub updates_waiting: Notify,
    /// Counts the changes a person could see (a message sent, edited or
    /// deleted, a tap answered, the menu set): the chat page follows it.
    changes: tokio::sync::watch::Sender<u64>,
    /// The Mini Apps registered with BotFather (`/newapp`): short name and
    /// URL; and the key launches are signed with (Telegram's, here).
    apps: Mutex<mini_app::Apps>,
}

impl std::ops::Deref for Fake {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

impl Fake {
    /// A bot with this token (its id is the digits before the colon).
    pub fn new(token: &str, username: &str) -> Fake {
        let bot_id = token
            .split_once(':')
            .and_then(|(id, _)| id.parse().ok())
            .unwrap_or(1);
        // Telegram's update ids go up from wherever a bot's began, not
        // from 1: a fresh fake starts somewhere else each time.
        let first = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::from(d.subsec_nanos()))
            .unwrap_or(0);
        let state = State {
            next_update_id: first,
            ..State::default()
        };
        Fake(Arc::new(Inner {
            token: token.to_string(),
            username: username.to_string(),
            bot_id,
            state: Mutex::new(state),
            updates_waiting: Notify::new(),
            changes: tokio::sync::watch::Sender::new(0),
            apps: Mutex::new(mini_app::Apps::default()),
        }))
    }

    pub fn state(&self) -> MutexGuard<'_, State> {
        self.0.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Serves the Bot API on `listener` until the runtime ends; returns
    /// its address.
    pub fn serve(self, listener: tokio::net::TcpListener) -> std::io::Result<SocketAddr> {
        let addr = listener.local_addr()?;
        let pusher = self.clone();
        let router = axum::Router::new()
            .route(
                "/{bot}/{method}",
                axum::routing::post(api::call).get(api::call),
            )
            .with_state(self);
        tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, router).await {
                tracing::error!(error = %e, "the fake Bot API stopped");
            }
        });
        tokio::spawn(pusher.push_to_webhook());
        Ok(addr)
    }

    /// While a webhook is set, posts each waiting update to it, oldest
    /// first, with the secret header when one was set, until it answers
    /// 2xx; as Telegram does, a refused or failed delivery is tried again
    /// (here after a second), and nothing later goes before it. Plain
    /// HTTP is allowed, unlike Telegram, since tests listen on loopback.
    async fn push_to_webhook(self) {
        let http = reqwest::Client::new();
        loop {
            let waiting = self.updates_waiting.notified();
            let next = {
                let state = self.state();
                match (&state.webhook, state.pending.front()) {
                    (Some(hook), Some(update)) => Some((hook.clone(), update.clone())),
                    _ => None,
                }
            };
            let Some((hook, update)) = next else {
                let _ = tokio::time::timeout(std::time::Duration::from_secs(1), waiting).await;
                continue;
            };
            let mut request = http.post(&hook.url).json(&update);
            if let Some(secret) = &hook.secret {
                request = request.header("X-Telegram-Bot-Api-Secret-Token", secret);
            }
            let delivered = request
                .timeout(std::time::Duration::from_secs(10))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if delivered {
                let mut state = self.state();
                if state.pending.front() == Some(&update) {
                    state.pending.pop_front();
                }
                state.webhook_deliveries += 1;
            } else {
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
        }
    }

    /// Something a person could see changed.
    pub(crate) fn changed(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Follows the changes a person could see.
    pub fn watch_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// The first failure asked for that `method` (lower case) takes: one
    /// for any method, or one for this method.
    pub(crate) fn take_injected(&self, method: &str) -> Option<Injected> {
        let mut state = self.state();
        let at = state
            .injected
            .iter()
            .position(|(only, _)| only.as_deref().is_none_or(|m| m == method))?;
        state.injected.remove(at).map(|(_, failure)| failure)
    }

    /// The next Bot API call fails this way.
    pub fn inject(&self, failure: Injected) {
        self.state().injected.push_back((None, failure));
    }

    /// The next call of `method` (matched case-insensitively, as the Bot
    /// API matches it) fails this way; other methods go on.
    pub fn inject_for(&self, method: &str, failure: Injected) {
        self.state()
            .injected
            .push_back((Some(method.to_ascii_lowercase()), failure));
    }

    fn queue(&self, body: (&str, serde_json::Value)) -> i64 {
        let mut state = self.state();
        let update = state.update(body);
        let id = state.next_update_id;
        state.pending.push_back(update);
        drop(state);
        self.updates_waiting.notify_waiters();
        id
    }

    /// The person in private chat `chat` writes `text` (the chat is known
    /// to the bot from then on). Returns the update's id.
    pub fn user_message(&self, chat: i64, text: &str) -> i64 {
        let message_id = {
            let mut state = self.state();
            state.chats.insert(chat);
            let message_id = state.next_message_id(chat);
            state.said.push(Said {
                chat_id: chat,
                message_id,
                text: text.to_string(),
                at: state::unix_now(),
            });
            message_id
        };
        self.changed();
        self.queue((
            "message",
            json!({
                "message_id": message_id,
                "from": {"id": chat, "is_bot": false, "first_name": "Person"},
                "chat": {"id": chat, "type": "private", "first_name": "Person"},
                "date": 1_700_000_000,
                "text": text,
            }),
        ))
    }

    /// The person taps the button with `data` on message `message_id` of
    /// `chat`: a callback query as Telegram sends it (with the message as
    /// it is now, `date == 0` once deleted). Returns the query's id, or
    /// `None` when no such message was sent to that chat.
    pub fn tap(&self, chat: i64, message_id: i64, data: &str) -> Option<String> {
        // A link button opens its link; no callback comes of it.
        if is_link(data) {
            return None;
        }
        let (query, message) = {
            let mut state = self.state();
            let message: Sent = state
                .sent
                .iter()
                .find(|m| m.chat_id == chat && m.message_id == message_id)?
                .clone();
            state.next_callback += 1;
            let query = format!("{}{:06}", chat.unsigned_abs(), state.next_callback);
            state.callbacks.insert(query.clone(), false);
            state.taps.push(Tap {
                query: query.clone(),
                chat_id: chat,
                message_id,
                data: data.to_string(),
                answered: false,
                answer: None,
                alert: false,
            });
            (query, message)
        };
        self.changed();
        let message_json = api_message(self, &message);
        self.queue((
            "callback_query",
            json!({
                "id": query,
                "from": {"id": chat, "is_bot": false, "first_name": "Person"},
                "message": message_json,
                "chat_instance": format!("ci{chat}"),
                "data": data,
            }),
        ));
        Some(query)
    }

    /// The person deletes a message the bot sent.
    pub fn delete(&self, chat: i64, message_id: i64) -> bool {
        let found = match self.state().message_mut(chat, message_id) {
            Some(m) => {
                m.deleted = true;
                true
            }
            None => false,
        };
        self.changed();
        found
    }

    /// What the bot sent to `chat`, oldest first.
    pub fn sent_to(&self, chat: i64) -> Vec<Sent> {
        self.state()
            .sent
            .iter()
            .filter(|m| m.chat_id == chat)
            .cloned()
            .collect()
    }

    /// The notice a callback query was answered with: `None` while it is
    /// unanswered, `Some(None)` for an answer without text.
    pub fn answer_of(&self, query: &str) -> Option<Option<String>> {
        let state = self.state();
        let tap = state.taps.iter().find(|t| t.query == query)?;
        tap.answered.then(|| tap.answer.clone())
    }

    /// Whether the callback query was answered.
    pub fn answered(&self, query: &str) -> Option<bool> {
        self.state().callbacks.get(query).copied()
    }
}

/// A message as the Bot API shows it.
pub(crate) fn api_message(fake: &Fake, m: &Sent) -> serde_json::Value {
    let mut v = json!({
        "message_id": m.message_id,
        "from": {"id": fake.bot_id, "is_bot": true, "first_name": "Aromba", "username": fake.username},
        "chat": {"id": m.chat_id, "type": "private", "first_name": "Person"},
        "date": if m.deleted { 0 } else { 1_700_000_000 },
        "text": m.text,
    });
    if m.edited {
        v["edit_date"] = json!(1_700_000_001);
    }
    if !m.buttons.is_empty() {
        let rows: Vec<serde_json::Value> = m
            .buttons
            .iter()
            .map(|row| {
                serde_json::Value::Array(
                    row.iter()
                        .map(|(t, d)| {
                            if is_link(d) {
                                json!({"text": t, "url": d})
                            } else {
                                json!({"text": t, "callback_data": d})
                            }
                        })
                        .collect(),
                )
            })
            .collect();
        v["reply_markup"] = json!({"inline_keyboard": rows});
    }
    v
}
