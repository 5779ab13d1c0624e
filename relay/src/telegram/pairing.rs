//! Pairing: a server asks for a code over its WebSocket; the person opens
//! `https://t.me/<bot>?start=<code>`, which sends `/start <code>` from
//! their private chat; the relay consumes the code and pairs that chat with
//! the server.
//!
//! A code is six characters from an alphabet without look-alikes, random,
//! single use, good for fifteen minutes, bound to one server (a new request
//! replaces the old code), and kept only as a keyed hash the relay can
//! look up. It is consumed atomically: of two chats sending it at once, one
//! pairs. One Telegram account looks after one server. Wrong codes are
//! counted per chat, per account and in all: past a handful a chat or
//! account is locked out for an hour, and past the overall budget every
//! guess waits for the next window.

use super::Telegram;
use super::claim::HandleError;
use super::inbound::{say, say_to_stranger};
use super::words;
use crate::hashing;
use crate::state::App;
use crate::store;
use aromba_relay_proto::frame::Delivery;
use rand::Rng;
use std::sync::Arc;
use uuid::Uuid;

/// The characters a code is made of: no 0/O, 1/I/L, 5/S or 2/Z to confuse.
pub const ALPHABET: &[u8] = b"ABCDEFGHJKMNPQRTUVWXY346789";
pub const CODE_LEN: usize = 6;

/// A fresh random code.
pub fn new_code() -> String {
    let mut rng = rand::rng();
    (0..CODE_LEN)
        .map(|_| char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]))
        .collect()
}

/// Whether `text` could be a code (checked before any lookup).
pub fn looks_like_code(text: &str) -> bool {
    text.len() == CODE_LEN && text.bytes().all(|b| ALPHABET.contains(&b))
}

/// What a server's request for a code gets.
pub enum Made {
    Code(String, chrono::DateTime<chrono::Utc>),
    /// The server is paired: a code would let it move itself to another
    /// chat without its person's consent. `/unpair` in its chat first.
    AlreadyPaired,
}

/// Makes `server`'s pairing code (replacing any earlier one) and returns it
/// with its expiry; a paired server gets none.
pub async fn make_code(app: &App, telegram: &Telegram, server: Uuid) -> Result<Made, sqlx::Error> {
    let paired = store::pairings::count_of_server(&app.db, server).await?;
    if paired > 0 {
        return Ok(Made::AlreadyPaired);
    }
    let ttl = chrono::Duration::from_std(telegram.config.limits.code_ttl)
        .unwrap_or(chrono::Duration::minutes(15));
    let expires = app.config.clock.now() + ttl;
    // A clash with another server's live code is possible (one in ~387
    // million per pair): try another code.
    let mut last = None;
    for _ in 0..4 {
        let code = new_code();
        let hash = hashing::pairing_code_hash(&app.config.pepper, &code);
        let made = store::pairing_codes::replace(&app.db, &hash[..], server, expires).await;
        match made {
            Ok(_) => return Ok(Made::Code(code, expires)),
            Err(e) if is_unique_violation(&e) => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or(sqlx::Error::RowNotFound))
}

fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.is_unique_violation())
}

/// The deep link that carries `code` to the bot.
pub fn link(username: &str, code: &str) -> String {
    format!("https://t.me/{username}?start={code}")
}

/// The guess budgets a wrong code counts against.
fn guess_keys(app: &App, chat: i64, account: u64) -> [[u8; 32]; 2] {
    [
        hashing::guess_key(&app.config.pepper, "chat", &chat.to_string()),
        hashing::guess_key(&app.config.pepper, "account", &account.to_string()),
    ]
}

fn overall_key(app: &App) -> [u8; 32] {
    hashing::guess_key(&app.config.pepper, "overall", "")
}

/// `/start <code>` from `chat` (a private chat, so also the account);
/// `chat_paired` as the update's claim found it.
pub async fn consume(
    app: &App,
    telegram: &Arc<Telegram>,
    chat: i64,
    account: u64,
    code: &str,
    chat_paired: bool,
) -> Result<(), HandleError> {
    let limits = &telegram.config.limits;
    let now = app.config.clock.now();
    let keys = guess_keys(app, chat, account);
    let overall = overall_key(app);
    let locked =
        store::pairing_guesses::locked(&app.db, &[&keys[0][..], &keys[1][..], &overall[..]], now)
            .await?;
    if locked.iter().any(|k| k.as_slice() == overall) {
        app.metrics.telegram("pairing_busy");
        return reply(app, telegram, chat, chat_paired, words::BUSY).await;
    }
    if !locked.is_empty() {
        // Told once, when the lock began; silence after.
        app.metrics.telegram("pairing_locked_out");
        return Ok(());
    }
    if chat_paired {
        app.metrics.telegram("pairing_second_server");
        say(app, telegram, chat, words::ALREADY_PAIRED);
        return Ok(());
    }
    let code = code.to_ascii_uppercase();
    let confirm = format!("pair_{code}");
    let server = if looks_like_code(&code) {
        let paired = Delivery::Paired {
            approval_key: telegram.key.public_base64().to_string(),
            bot_id: u64::try_from(telegram.config.token.bot_id_number()).unwrap_or(0),
            confirm: confirm.clone(),
        };
        take_code(app, chat, &code, &paired).await?
    } else {
        None
    };
    let Some(server) = server else {
        app.metrics.telegram("pairing_wrong_code");
        let window = chrono::Duration::from_std(limits.guess_window).unwrap_or_default();
        let lockout = chrono::Duration::from_std(limits.lockout).unwrap_or_default();
        let locked_now =
            count_failure(app, &keys, limits.guesses_per_window, window, now + lockout).await?;
        count_failure(
            app,
            &[overall],
            limits.guesses_overall,
            window,
            now + window,
        )
        .await?;
        let text = if locked_now {
            words::LOCKED_OUT
        } else {
            words::WRONG_CODE
        };
        return reply(app, telegram, chat, chat_paired, text).await;
    };
    app.metrics.telegram("paired");
    tracing::info!(server = %server, "paired");
    // With one more step: the person opens the app from the button, and
    // `aromba pair` pins their account from Telegram's signature over that
    // launch. (The bot's name is known: the code's link was made with it.)
    let username = telegram.username.borrow().clone().unwrap_or_default();
    let keyboard = vec![vec![(
        words::CONFIRM_BUTTON.to_string(),
        super::client::Key::Url(telegram.config.app.link(&username, &confirm)),
    )]];
    super::inbound::say_then(app, telegram, chat, words::PAIRED, keyboard, |_| async {});
    // The menu of the server's commands, in this chat.
    let (app, menu) = (app.clone(), telegram.clone());
    tokio::spawn(async move {
        let mut list: Vec<(&str, &str)> = aromba_relay_proto::commands::COMMANDS
            .iter()
            .map(|row| (row.name, row.menu))
            .collect();
        list.push(("unpair", words::UNPAIR_COMMAND));
        if let Err(e) = menu.client.set_commands(chat, &list).await {
            app.metrics.telegram("set_commands_failed");
            tracing::warn!(error = %e, "the command menu was not set");
        }
    });
    Ok(())
}

/// A pairing reply: in the paired chats' lane to a paired chat, else as a
/// reply to a stranger (once per window, in the strangers' lane).
async fn reply(
    app: &App,
    telegram: &Arc<Telegram>,
    chat: i64,
    chat_paired: bool,
    text: &'static str,
) -> Result<(), HandleError> {
    if chat_paired {
        say(app, telegram, chat, text);
        Ok(())
    } else {
        say_to_stranger(app, telegram, chat, text).await
    }
}

/// Consumes a live code and pairs its server with `chat`, in one
/// transaction; `None` when no live code has this hash (or the chat was
/// paired by a racing code meanwhile).
/// Takes the code and pairs its server with `chat`, and queues `notice`
/// (the server's `Paired`) in the same transaction: a pairing never commits
/// without its notice (found by the attack round: queued after the
/// pairing's commit, a database hiccup lost the notice, and the update,
/// sent again, found the chat paired already).
async fn take_code(
    app: &App,
    chat: i64,
    code: &str,
    notice: &Delivery,
) -> Result<Option<Uuid>, HandleError> {
    let now = app.config.clock.now();
    let hash = hashing::pairing_code_hash(&app.config.pepper, code);
    let mut tx = app.db.begin().await?;
    let server = store::pairing_codes::take(&mut *tx, &hash[..], now).await?;
    let Some(server) = server else {
        return Ok(None);
    };
    // One chat, one server, and a paired server stays with its chat: a
    // racing pairing of this chat, or a server paired meanwhile, wins, and
    // this code stays unused (the transaction rolls back). A server moves
    // to another chat only after `/unpair` in the chat it has.
    let paired = store::pairings::insert(&mut *tx, server, chat, now).await;
    match paired {
        Ok(_) => {}
        Err(e) if is_unique_violation(&e) => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    store::servers::mark_paired(&mut *tx, server, now, now.date_naive()).await?;
    // Nothing delivered before this pairing can be tapped in it.
    store::chat_messages::forget_server(&mut *tx, server).await?;
    // A chat that is paired is no longer a stranger.
    let chat_hash = hashing::chat_hash(&app.config.pepper, chat);
    store::foreign_chats::forget(&mut *tx, &chat_hash[..]).await?;
    crate::outbox::enqueue_in(&mut tx, server, notice, now, app.config.limits.max_pending).await?;
    tx.commit().await?;
    Ok(Some(server))
}

/// Counts a wrong code against each key; a key past `limit` in its window
/// is locked until `lock_until`. Returns whether a lock began now.
async fn count_failure(
    app: &App,
    keys: &[[u8; 32]],
    limit: i32,
    window: chrono::Duration,
    lock_until: chrono::DateTime<chrono::Utc>,
) -> Result<bool, sqlx::Error> {
    let now = app.config.clock.now();
    let keys: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
    let began = store::pairing_guesses::count_failure(
        &app.db,
        store::pairing_guesses::Failure {
            keys: &keys,
            now,
            window_over: now - window,
            limit,
            lock_until,
        },
    )
    .await?;
    Ok(began.into_iter().any(|b| b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_is_six_unambiguous_characters() {
        for _ in 0..1_000 {
            let code = new_code();
            assert!(looks_like_code(&code), "{code}");
            assert!(!code.contains(['0', 'O', '1', 'I', 'L', '5', 'S', '2', 'Z']));
        }
        assert!(!looks_like_code("ABC23"));
        assert!(!looks_like_code("ABCDE0"));
        assert_eq!(
            link("aromba_bot", "ABCDEF"),
            "https://t.me/aromba_bot?start=ABCDEF"
        );
    }
}
