//! The sender: servers' messages and edits, from `chat_outbox` to their
//! chats, within Telegram's limits.
//!
//! One replica sends at a time (it holds a PostgreSQL advisory lock), so
//! the limits of one bot hold however many replicas run. Each round takes
//! the oldest waiting message of each server whose chat may be written to
//! now, the servers served longest ago first (a chat still waiting for its
//! turn takes no place in the round, and old, deep backlogs cannot fill
//! every round: each server gets one message a round, in turn), sends them
//! side by side, records what was delivered (the chat,
//! Telegram's message id, the SHA-256 of the text, the buttons under fresh
//! opaque ids) and deletes the body in the same transaction. A message
//! Telegram refuses (a chat that blocked the bot) is dropped and counted; a
//! 429 pauses what it was about ([`super::pace`]); a failure leaves the
//! message for the next round.

use super::Telegram;
use super::choices::callback_id;
use super::client::{CallError, Key, Keyboard};
use super::signing::text_sha256;
use super::split::{MAX_UNITS, split};
use crate::state::App;
use crate::store;
use aromba_relay_proto::frame::{Body, Button};
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

/// The advisory lock the sending replica holds.
pub const SENDER_LOCK: i64 = 0x4152_4f4d_4241_0002;
/// Messages sent side by side.
const AT_ONCE: usize = 16;

/// Runs the sender whenever this replica holds the lock.
pub async fn run(app: App) {
    let Some(telegram) = app.telegram.clone() else {
        return;
    };
    loop {
        let Some(mut lock) = super::poller::take_lock(&app.db, SENDER_LOCK).await else {
            tokio::time::sleep(telegram.config.limits.lock_retry).await;
            continue;
        };
        tracing::info!("this replica sends to Telegram");
        loop {
            if !super::poller::still_held(&mut lock).await {
                tracing::warn!("the sender's lock was lost");
                break;
            }
            if let Err(e) = super::choices::show_duplicate_cases(&app, &telegram).await {
                tracing::warn!(error = %e, "duplicate cases could not be shown");
            }
            let sent = match round(&app, &telegram).await {
                Ok(n) => n,
                Err(e) => {
                    tracing::warn!(error = %e, "a send round failed");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    0
                }
            };
            if sent == 0 {
                let _ = tokio::time::timeout(
                    telegram.config.limits.send_every,
                    telegram.outgoing.notified(),
                )
                .await;
            }
        }
    }
}

/// What became of one message.
enum Outcome {
    Delivered,
    /// Dropped for good, with the reason counted.
    Dropped(&'static str),
    /// Left for a later round.
    Later,
}

/// One round; returns how many messages left the outbox.
pub async fn round(app: &App, telegram: &Arc<Telegram>) -> Result<usize, sqlx::Error> {
    // The servers served longest ago first, round after round (found by
    // the attack round: ordered by the age of their messages, servers with
    // old, deep backlogs filled every round). Only chats whose turn has
    // come: a chat still waiting (paced, or
    // told to wait by a 429) would take a place in the round and send
    // nothing, and enough of them with deep queues would keep every other
    // chat out of every round.
    let waiting = telegram.pace.waiting_chats();
    let heads =
        store::chat_outbox::heads(&app.db, telegram.config.limits.send_round.max(1), &waiting)
            .await?;
    let mut work = tokio::task::JoinSet::new();
    let gate = Arc::new(tokio::sync::Semaphore::new(AT_ONCE));
    for head in heads {
        if !telegram.pace.ready(head.chat_id) {
            continue;
        }
        let (app, telegram, gate) = (app.clone(), telegram.clone(), gate.clone());
        work.spawn(async move {
            let _permit = gate.acquire_owned().await;
            let outcome = deliver(
                &app,
                &telegram,
                head.server_id,
                head.id,
                head.body,
                head.chat_id,
            )
            .await;
            (head.server_id, head.id, outcome)
        });
    }
    let mut done = 0;
    while let Some(joined) = work.join_next().await {
        let Ok((server, id, outcome)) = joined else {
            continue;
        };
        match outcome {
            Ok(Outcome::Delivered) => {
                done += 1;
                app.metrics.telegram("message_delivered");
            }
            Ok(Outcome::Dropped(reason)) => {
                done += 1;
                app.metrics.telegram(reason);
                tracing::info!(server = %server, reason, "a message for the chat was dropped");
                let mut conn = app.db.acquire().await?;
                store::chat_outbox::forget(&mut conn, server, id).await?;
            }
            Ok(Outcome::Later) => {}
            Err(e) => {
                tracing::warn!(server = %server, error = %e, "a delivery could not be recorded")
            }
        }
    }
    Ok(done)
}

/// The buttons' rows (two to a row): a tapped button under a fresh
/// callback id, a Mini App button as its direct link (`None` while the
/// bot's name is not known). The tapped buttons, with their ids, to record.
fn keyboard(
    telegram: &Telegram,
    buttons: &[Button],
) -> Option<(Keyboard, Vec<Button>, Vec<String>)> {
    let username = telegram.username.borrow().clone();
    let mut keys = Vec::with_capacity(buttons.len());
    let (mut tapped, mut ids) = (Vec::new(), Vec::new());
    for b in buttons {
        let key = match &b.app {
            Some(param) => Key::Url(telegram.config.app.link(username.as_deref()?, param)),
            None => {
                let id = callback_id();
                tapped.push(b.clone());
                ids.push(id.clone());
                Key::Callback(id)
            }
        };
        keys.push((b.label.clone(), key));
    }
    let rows = keys.chunks(2).map(<[_]>::to_vec).collect();
    Some((rows, tapped, ids))
}

/// The outcome of a Bot API call for a message to `chat`.
fn judged(e: CallError, app: &App, telegram: &Telegram, chat: i64) -> Outcome {
    match e {
        CallError::RetryAfter(wait) => {
            telegram.told_to_wait(&app.metrics, super::pace::About::Chat(chat), wait);
            Outcome::Later
        }
        CallError::Refused(_) => Outcome::Dropped("message_refused_by_telegram"),
        CallError::Failed(e) => {
            tracing::warn!(error = %e, "a message could not be sent; it waits");
            Outcome::Later
        }
    }
}

async fn deliver(
    app: &App,
    telegram: &Telegram,
    server: Uuid,
    id: Uuid,
    body: serde_json::Value,
    chat: i64,
) -> Result<Outcome, sqlx::Error> {
    let Ok(body) = serde_json::from_value::<Body>(body) else {
        return Ok(Outcome::Dropped("message_unreadable"));
    };
    match body {
        Body::Send {
            text,
            buttons,
            monospace,
            ..
        } => {
            let message = Outgoing {
                text: &text,
                buttons: &buttons,
                monospace: &monospace,
            };
            send(app, telegram, server, id, chat, message).await
        }
        Body::Edit {
            message,
            text,
            buttons,
            ..
        } => edit(app, telegram, server, id, chat, message, &text, &buttons).await,
        _ => Ok(Outcome::Dropped("message_unreadable")),
    }
}

/// A server's message as it goes to Telegram.
struct Outgoing<'a> {
    text: &'a str,
    buttons: &'a [Button],
    monospace: &'a [aromba_relay_proto::frame::Span],
}

async fn send(
    app: &App,
    telegram: &Telegram,
    server: Uuid,
    id: Uuid,
    chat: i64,
    message: Outgoing<'_>,
) -> Result<Outcome, sqlx::Error> {
    let Outgoing {
        text,
        buttons,
        monospace,
    } = message;
    let parts = split(text, MAX_UNITS);
    // Monospace stretches hold on a message sent whole; one Telegram needs
    // cut in parts goes plain rather than with stretches cut wrong.
    let monospace = if parts.len() == 1 { monospace } else { &[] };
    // Every part's turn taken at once, or none: the relay's replies cannot
    // come in between, and a chat far behind does not hold the round.
    let Some(turns) = telegram
        .pace
        .reserve_within(chat, parts.len(), super::AHEAD)
    else {
        return Ok(Outcome::Later);
    };
    let Some((keyboard, tapped, ids)) = keyboard(telegram, buttons) else {
        return Ok(Outcome::Later);
    };
    // Counted before Telegram is asked: a replica killed between Telegram's
    // answer and the record below leaves the message queued, and the next
    // send of it may show it twice (the Bot API cannot send once only).
    let Some(attempts) = store::chat_outbox::attempt(&app.db, server, id).await? else {
        // Delivered by another replica since this round read it, or gone.
        return Ok(Outcome::Later);
    };
    if attempts > 1 {
        app.metrics.telegram("message_sent_again");
    }
    let mut last = None;
    for (i, (part, turn)) in parts.iter().zip(turns).enumerate() {
        let is_last = i + 1 == parts.len();
        tokio::time::sleep_until(turn).await;
        telegram.pace.overall().await;
        let markup = if is_last {
            keyboard.clone()
        } else {
            Vec::new()
        };
        match telegram.client.send(chat, part, &markup, monospace).await {
            Ok(message_id) => last = Some(message_id),
            Err(e) => return Ok(judged(e, app, telegram, chat)),
        }
    }
    let (Some(telegram_id), Some(shown)) = (last, parts.last()) else {
        return Ok(Outcome::Dropped("message_unreadable"));
    };
    let now = app.config.clock.now();
    let mut tx = app.db.begin().await?;
    // Recorded only while the server is still paired with that chat: a
    // message that left as the chat unpaired gets no buttons that work.
    let recorded = store::chat_messages::record(
        &mut *tx,
        store::chat_messages::Delivered {
            server,
            message: id,
            chat,
            telegram_id,
            text_sha256: &text_sha256(shown)[..],
            sent_at: now,
            attempts,
        },
    )
    .await?;
    if recorded == 1 {
        store::chat_buttons::replace(&mut tx, server, id, &tapped, &ids).await?;
    }
    store::pairings::served(&mut tx, server, now).await?;
    store::chat_outbox::forget(&mut tx, server, id).await?;
    tx.commit().await?;
    Ok(Outcome::Delivered)
}

#[allow(clippy::too_many_arguments)]
async fn edit(
    app: &App,
    telegram: &Telegram,
    server: Uuid,
    id: Uuid,
    chat: i64,
    message: Uuid,
    text: &str,
    buttons: &[Button],
) -> Result<Outcome, sqlx::Error> {
    // Only a message this server sent, to the chat it talks to now.
    let target = store::chat_messages::target(&app.db, server, message).await?;
    let Some(target) = target else {
        return Ok(Outcome::Dropped("edit_of_unknown_message"));
    };
    if target.chat_id != chat {
        return Ok(Outcome::Dropped("edit_of_another_chats_message"));
    }
    if split(text, MAX_UNITS).len() > 1 {
        return Ok(Outcome::Dropped("edit_too_long"));
    }
    let Some((keyboard, tapped, ids)) = keyboard(telegram, buttons) else {
        return Ok(Outcome::Later);
    };
    telegram.pace.wait(chat).await;
    match telegram
        .client
        .edit(chat, target.telegram_id, text, &keyboard)
        .await
    {
        Ok(()) => {}
        // The same text and buttons again: nothing to change, but the
        // buttons' ids are new and must be recorded.
        Err(CallError::Refused(d)) if d.contains("not modified") => {}
        Err(e) => return Ok(judged(e, app, telegram, chat)),
    }
    let mut tx = app.db.begin().await?;
    store::chat_messages::edited(
        &mut *tx,
        server,
        message,
        &text_sha256(text)[..],
        app.config.clock.now(),
    )
    .await?;
    store::chat_buttons::replace(&mut tx, server, message, &tapped, &ids).await?;
    store::pairings::served(&mut tx, server, app.config.clock.now()).await?;
    store::chat_outbox::forget(&mut tx, server, id).await?;
    tx.commit().await?;
    Ok(Outcome::Delivered)
}
