//! The Bot API client: teloxide's, behind a newtype whose `Debug` hides the
//! token, with every error turned into a [`CallError`] whose text has been
//! scrubbed of it.
//!
//! Messages go out with no parse mode: a server's text is shown exactly as
//! it was written, so no markup in it can take effect, and the hash the
//! relay signs is the hash of what the person read.

use super::token::{BotToken, scrub};
use std::time::Duration;
use teloxide::payloads::{
    AnswerCallbackQuerySetters, EditMessageTextSetters, GetUpdatesSetters, SendMessageSetters,
    SetWebhookSetters,
};
use teloxide::requests::Requester;
use teloxide::types::{
    AllowedUpdate, CallbackQueryId, ChatId, InlineKeyboardButton, InlineKeyboardMarkup, MessageId,
    Update,
};

/// What went wrong with a Bot API call. Every text is scrubbed of the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// Telegram asked us to wait (HTTP 429).
    #[error("the Bot API asked to wait {0:?}")]
    RetryAfter(Duration),
    /// Telegram refused the call itself (a chat that blocked the bot, a
    /// message that is gone): trying again will not help.
    #[error("the Bot API refused the call: {0}")]
    Refused(String),
    /// The call did not get an answer (network, outage, a reply that is
    /// not the Bot API's): it may work later.
    #[error("the Bot API could not be reached: {0}")]
    Failed(String),
}

/// The most bytes of a Bot API error's words the relay keeps.
pub const MAX_TOLD: usize = 1024;

/// Rows of inline buttons: each button's label and what it does.
pub type Keyboard = Vec<Vec<(String, Key)>>;

/// What an inline button does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Key {
    /// A tap comes back to the bot with this callback data.
    Callback(String),
    /// Opens this link (a Mini App's direct link): no tap comes back.
    Url(String),
}

/// The Bot API client. `Debug` shows neither the token nor the URL.
#[derive(Clone)]
pub struct Client {
    bot: teloxide::Bot,
    token: BotToken,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Client(…)")
    }
}

/// Why a Bot API base URL is refused at start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("AROMBA_BOT_API_URL must be an http:// or https:// URL such as https://api.telegram.org")]
pub struct BadApiUrl;

/// Checks a Bot API base URL (teloxide appends `bot<token>/<method>` to its
/// path, which needs a URL with a host).
pub fn parse_api_url(text: &str) -> Result<url::Url, BadApiUrl> {
    let url = url::Url::parse(text).map_err(|_| BadApiUrl)?;
    let scheme_ok = matches!(url.scheme(), "http" | "https");
    if !scheme_ok || url.cannot_be_a_base() || url.host().is_none() {
        return Err(BadApiUrl);
    }
    Ok(url)
}

impl Client {
    pub fn new(token: BotToken, api_url: url::Url) -> Client {
        // teloxide's client settings (5 s to connect, 17 s a request) are
        // kept; long polls ask Telegram for less than that.
        let bot = teloxide::Bot::new(token.expose()).set_api_url(api_url);
        Client { bot, token }
    }

    fn error(&self, e: teloxide::RequestError) -> CallError {
        use teloxide::RequestError as E;
        match e {
            E::RetryAfter(s) => CallError::RetryAfter(s.duration()),
            E::Api(api) => CallError::Refused(self.told(&api.to_string())),
            E::MigrateToChatId(_) => CallError::Refused("the chat moved to a supergroup".into()),
            E::Network(n) => CallError::Failed(self.told(&n.to_string())),
            // The raw body could hold anything; only its length is told.
            E::InvalidJson { raw, .. } => CallError::Failed(format!(
                "the answer ({} bytes) is not the Bot API's JSON",
                raw.len()
            )),
            E::Io(io) => CallError::Failed(self.told(&io.to_string())),
        }
    }

    /// An error's words as the relay logs them: without the token, on one
    /// line, at most [`MAX_TOLD`] bytes (an answer's description is
    /// Telegram's to write, of any length: found by the `bot_answer` fuzz
    /// target, a 100 KB description went whole into the log).
    fn told(&self, words: &str) -> String {
        let scrubbed = scrub(words, &self.token);
        let mut out = String::new();
        for c in scrubbed.chars() {
            let piece: String = if c.is_control() {
                c.escape_default().collect()
            } else {
                c.to_string()
            };
            if out.len() + piece.len() > MAX_TOLD {
                out.push('…');
                break;
            }
            out.push_str(&piece);
        }
        out
    }

    /// The bot's username (for `https://t.me/<username>` links).
    pub async fn username(&self) -> Result<String, CallError> {
        let me = self.bot.get_me().await.map_err(|e| self.error(e))?;
        me.user
            .username
            .clone()
            .ok_or_else(|| CallError::Refused("the bot has no username".into()))
    }

    /// Points Telegram at our webhook, with the secret and the three kinds
    /// of update the relay reads.
    pub async fn set_webhook(&self, url: url::Url, secret: &str) -> Result<(), CallError> {
        self.bot
            .set_webhook(url)
            .secret_token(secret)
            .allowed_updates(allowed_updates())
            .await
            .map(drop)
            .map_err(|e| self.error(e))
    }

    /// Removes the webhook (long polling is refused while one is set).
    pub async fn delete_webhook(&self) -> Result<(), CallError> {
        self.bot
            .delete_webhook()
            .await
            .map(drop)
            .map_err(|e| self.error(e))
    }

    /// Updates after `offset`, waiting up to `wait` for one.
    pub async fn get_updates(&self, offset: i32, wait: Duration) -> Result<Vec<Update>, CallError> {
        self.bot
            .get_updates()
            .offset(offset)
            .timeout(u32::try_from(wait.as_secs()).unwrap_or(10))
            .allowed_updates(allowed_updates())
            .await
            .map_err(|e| self.error(e))
    }

    /// Sends `text` as it is (no parse mode, no link preview) with
    /// `keyboard`; returns the message's id.
    pub async fn send(
        &self,
        chat: i64,
        text: &str,
        keyboard: &Keyboard,
        monospace: &[aromba_relay_proto::frame::Span],
    ) -> Result<i64, CallError> {
        use teloxide::types::MessageEntity;
        // No link preview, ever: a preview fetches the link (from
        // Telegram's servers) and shows what it finds beside our text.
        let request = self
            .bot
            .send_message(ChatId(chat), text)
            .link_preview_options(no_preview());
        let request = if monospace.is_empty() {
            request
        } else {
            request.entities(
                monospace
                    .iter()
                    .map(|s| MessageEntity::pre(None, s.start as usize, s.len as usize))
                    .collect::<Vec<_>>(),
            )
        };
        let request = match markup(keyboard) {
            Some(m) => request.reply_markup(m),
            None => request,
        };
        let sent = request.await.map_err(|e| self.error(e))?;
        Ok(i64::from(sent.id.0))
    }

    /// Replaces a sent message's text and buttons.
    pub async fn edit(
        &self,
        chat: i64,
        message_id: i64,
        text: &str,
        keyboard: &Keyboard,
    ) -> Result<(), CallError> {
        let id = i32::try_from(message_id)
            .map_err(|_| CallError::Refused("a message id out of range".into()))?;
        let request = self
            .bot
            .edit_message_text(ChatId(chat), MessageId(id), text)
            .link_preview_options(no_preview())
            .reply_markup(markup(keyboard).unwrap_or_default());
        request.await.map(drop).map_err(|e| self.error(e))
    }

    /// Deletes a message from `chat`.
    pub async fn delete(&self, chat: i64, message_id: i64) -> Result<(), CallError> {
        let id = i32::try_from(message_id)
            .map_err(|_| CallError::Refused("a message id out of range".into()))?;
        self.bot
            .delete_message(ChatId(chat), MessageId(id))
            .await
            .map(drop)
            .map_err(|e| self.error(e))
    }

    /// The command menu Telegram shows in `chat`.
    pub async fn set_commands(
        &self,
        chat: i64,
        commands: &[(&str, &str)],
    ) -> Result<(), CallError> {
        use teloxide::payloads::SetMyCommandsSetters;
        use teloxide::types::{BotCommand, BotCommandScope, Recipient};
        let list: Vec<BotCommand> = commands
            .iter()
            .map(|(c, d)| BotCommand::new(*c, *d))
            .collect();
        self.bot
            .set_my_commands(list)
            .scope(BotCommandScope::Chat {
                chat_id: Recipient::Id(ChatId(chat)),
            })
            .await
            .map(drop)
            .map_err(|e| self.error(e))
    }

    /// Answers a callback query, with a short notice when `text` is given.
    pub async fn answer(&self, query: &str, text: Option<&str>) -> Result<(), CallError> {
        let request = self
            .bot
            .answer_callback_query(CallbackQueryId(query.to_string()));
        let request = match text {
            Some(t) => request.text(t),
            None => request,
        };
        request.await.map(drop).map_err(|e| self.error(e))
    }
}

fn allowed_updates() -> [AllowedUpdate; 3] {
    [
        AllowedUpdate::Message,
        AllowedUpdate::CallbackQuery,
        AllowedUpdate::MyChatMember,
    ]
}

fn markup(keyboard: &Keyboard) -> Option<InlineKeyboardMarkup> {
    if keyboard.iter().all(Vec::is_empty) {
        return None;
    }
    Some(InlineKeyboardMarkup::new(keyboard.iter().map(|row| {
        row.iter()
            .filter_map(|(label, key)| match key {
                Key::Callback(data) => {
                    Some(InlineKeyboardButton::callback(label.clone(), data.clone()))
                }
                // Made by the relay from a checked start parameter; one
                // that would not parse is left off rather than sent wrong.
                Key::Url(link) => url::Url::parse(link)
                    .ok()
                    .map(|u| InlineKeyboardButton::url(label.clone(), u)),
            })
            .collect::<Vec<_>>()
    })))
}

/// Link previews off.
fn no_preview() -> teloxide::types::LinkPreviewOptions {
    teloxide::types::LinkPreviewOptions {
        is_disabled: true,
        url: None,
        prefer_small_media: false,
        prefer_large_media: false,
        show_above_text: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_an_api_url_without_a_host_or_of_another_scheme() {
        assert!(parse_api_url("https://api.telegram.org").is_ok());
        assert!(parse_api_url("http://127.0.0.1:8081/").is_ok());
        for bad in [
            "mailto:bot@example.com",
            "ftp://example.com",
            "api.telegram.org",
            "",
        ] {
            assert_eq!(parse_api_url(bad), Err(BadApiUrl), "{bad}");
        }
    }
}
