//! What the fake Telegram remembers: chats that started the bot, what the
//! bot sent to each, callback queries and whether they were answered, the
//! updates waiting for `getUpdates`, and failures a test asked for.

use serde_json::{Value, json};
use std::collections::{HashMap, HashSet, VecDeque};

/// One message the bot sent, as Telegram keeps it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Sent {
    pub chat_id: i64,
    pub message_id: i64,
    pub text: String,
    pub parse_mode: Option<String>,
    /// The inline keyboard's rows, each button's text and callback data.
    pub buttons: Vec<Vec<(String, String)>>,
    /// `pre` entities: offset and length in UTF-16 code units.
    pub monospace: Vec<(usize, usize)>,
    /// Set once the message is edited.
    pub edited: bool,
    /// A message the user deleted (Telegram then reports `date == 0`).
    pub deleted: bool,
    /// Whether the message was sent (and last edited) with link previews
    /// off (`link_preview_options.is_disabled`).
    pub previews_off: bool,
    /// When it was sent (Unix seconds), as Telegram's `date`.
    pub at: u64,
}

/// The time now, in Unix seconds, as the fake stamps messages.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// One message the person wrote (through the chat page or a test).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Said {
    pub chat_id: i64,
    pub message_id: i64,
    pub text: String,
    /// When it was written (Unix seconds).
    pub at: u64,
}

/// A tap on a button: the callback query, and how the bot answered it
/// (`answerCallbackQuery`: a notice, or an alert to dismiss).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Tap {
    pub query: String,
    pub chat_id: i64,
    pub message_id: i64,
    pub data: String,
    pub answered: bool,
    /// The answer's text, shown as a notice (or an alert).
    pub answer: Option<String>,
    pub alert: bool,
}

/// A failure a test asked for, taken by the next Bot API call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Injected {
    /// 429 with `parameters.retry_after`.
    TooManyRequests { retry_after: u64 },
    /// A gateway error without the Bot API's JSON.
    Outage,
    /// The answer breaks off mid-body (the client fails mid-request).
    Hangup,
}

#[derive(Default)]
pub struct State {
    /// Chats that sent the bot something (Telegram refuses to write first).
    pub chats: HashSet<i64>,
    /// Per chat, the last message id used (the user's and the bot's share
    /// one sequence, as in a private chat).
    pub last_message_id: HashMap<i64, i64>,
    pub sent: Vec<Sent>,
    /// What the person wrote, oldest first.
    pub said: Vec<Said>,
    /// Callback query ids and whether each was answered.
    pub callbacks: HashMap<String, bool>,
    /// Every tap, oldest first, with its answer once given.
    pub taps: Vec<Tap>,
    pub next_callback: u64,
    pub next_update_id: i64,
    /// Updates waiting for `getUpdates`, oldest first.
    pub pending: VecDeque<Value>,
    pub webhook: Option<Webhook>,
    /// Updates the webhook took (answered 2xx).
    pub webhook_deliveries: u64,
    /// Failures asked for, each for any method (`None`) or one method.
    pub injected: VecDeque<(Option<String>, Injected)>,
    /// `setMyCommands`, by scope (`default`, `all_private_chats` or
    /// `chat:<id>`): each command and its description.
    pub commands: HashMap<String, Vec<(String, String)>>,
    /// Messages the bot deleted, by chat and message id.
    pub deleted_by_bot: Vec<(i64, i64)>,
}

#[derive(Clone, Debug)]
pub struct Webhook {
    pub url: String,
    pub secret: Option<String>,
}

impl State {
    pub fn next_message_id(&mut self, chat: i64) -> i64 {
        let id = self.last_message_id.entry(chat).or_insert(0);
        *id += 1;
        *id
    }

    pub fn update(&mut self, body: (&str, Value)) -> Value {
        self.next_update_id += 1;
        let mut update = json!({ "update_id": self.next_update_id });
        update[body.0] = body.1;
        update
    }

    pub fn message_mut(&mut self, chat: i64, message_id: i64) -> Option<&mut Sent> {
        self.sent
            .iter_mut()
            .find(|m| m.chat_id == chat && m.message_id == message_id)
    }
}
