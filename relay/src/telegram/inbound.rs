//! One update from Telegram, whichever way it came (webhook or poll),
//! taken from its shard's queue (`queue.rs`).
//!
//! Each update is first claimed by its `update_id` in PostgreSQL
//! (`claim.rs`: a second delivery, to this replica or another, is
//! dropped), then:
//!
//! - a message from the paired chat goes to its server; `/start <code>`
//!   pairs; `/unpair` asks before it unpairs; any other chat gets one reply
//!   and then silence;
//! - a tap is forwarded, signed, only when it names a button of a message
//!   the relay delivered to that very chat, and the message is still there
//!   (`date != 0`); anything else is answered "expired". Every tap is
//!   answered exactly once.

use super::Telegram;
use super::claim::{Claim, ClaimState, HandleError, database_may_pass};
use super::client::CallError;
use super::queue::Settled;
use super::words;
use crate::hashing;
use crate::state::App;
use crate::store;
use aromba_relay_proto::frame::{Delivery, TapProof};
use std::sync::Arc;
use teloxide::types::{CallbackQuery, MaybeInaccessibleMessage, Message, Update, UpdateKind};

/// An update from its JSON, or `None` when it is not one (counted by the
/// caller; its content goes nowhere).
pub fn parse(bytes: &[u8]) -> Option<Update> {
    if !super::one_reading::has_one_reading(bytes) {
        return None;
    }
    let update: Update = serde_json::from_slice(bytes).ok()?;
    if matches!(update.kind, UpdateKind::Error(_)) {
        return None;
    }
    Some(update)
}

/// Handles one update, once across replicas.
///
/// The update is claimed by its id in a transaction. What it queues for a
/// server — a paired chat's message, a tap on a server's button — is
/// written in that same transaction, so that the claim commits with it or
/// not at all: a replica killed on the way leaves the update unclaimed,
/// Telegram (not told it settled) sends it again, and it is handled then
/// (found by the chaos test: claimed first, such an update was lost).
/// Anything else commits the claim first and is handled at most once.
pub async fn handle(app: &App, update: Update) -> Settled {
    let Some(telegram) = app.telegram.clone() else {
        return Settled::Done;
    };
    let id = i64::from(update.id.0);
    let bot = telegram.config.token.bot_id_number();
    // Claimed, and the chat's server looked up, in one round trip.
    let chat = update.chat().map(|c| c.id.0);
    let permit = telegram.claims.acquire().await;
    let (mut claim, server) = match Claim::take(app, permit, bot, id, chat).await {
        Ok(Some(taken)) => taken,
        Ok(None) => {
            app.metrics.telegram("update_duplicate");
            return Settled::Done;
        }
        Err(e) if !database_may_pass(&e) => {
            tracing::warn!(error = %e, "update's claim refused; dropped");
            app.metrics.telegram("update_refused");
            return Settled::Done;
        }
        Err(e) => {
            tracing::warn!(error = %e, "update could not be claimed; Telegram sends it again");
            app.metrics.telegram("update_failed");
            return Settled::Again;
        }
    };
    let outcome = match update.kind {
        UpdateKind::Message(message) => match forwardable(&message, server) {
            Some((server, delivery)) => forward(app, &mut claim, server, &delivery).await,
            None => match claim.commit().await {
                Ok(()) => on_message(app, &telegram, &message, server).await,
                Err(e) => Err(e.into()),
            },
        },
        UpdateKind::CallbackQuery(query) => on_tap(app, &telegram, &query, &mut claim).await,
        UpdateKind::EditedMessage(message) => {
            on_edit(app, &telegram, &message, server);
            Ok(())
        }
        UpdateKind::MyChatMember(_) => {
            app.metrics.telegram("member_change");
            Ok(())
        }
        _ => {
            app.metrics.telegram("update_ignored");
            Ok(())
        }
    };
    let outcome = match outcome {
        Ok(()) => claim.commit().await.map_err(HandleError::from),
        Err(e) => Err(e),
    };
    match outcome {
        Ok(()) => Settled::Done,
        // Refused for what it holds (a NUL in a text, which PostgreSQL's
        // JSON cannot keep): sent again it would fail again, and hold up
        // every update behind it, so it is dropped and counted.
        Err(e) if !e.may_pass() => {
            tracing::warn!(error = %e, "update refused; dropped");
            app.metrics.telegram("update_refused");
            Settled::Done
        }
        Err(e) => {
            tracing::warn!(error = %e, "update failed; Telegram sends it again");
            app.metrics.telegram("update_failed");
            // A claim that committed before the failure is released, so
            // that the update, sent again, is handled again.
            if claim.state == ClaimState::Committed {
                let _ = store::telegram_updates::release(&app.db, bot, id).await;
            }
            Settled::Again
        }
    }
}

/// A paired chat's message that goes to its server as it is: text, not a
/// command the relay answers, not in the PIN's shape, within the bounds of
/// a delivery. Everything else is [`on_message`]'s.
fn forwardable(message: &Message, server: Option<uuid::Uuid>) -> Option<(uuid::Uuid, Delivery)> {
    let server = server?;
    let text = message.text()?;
    if command_of(text).is_some()
        || message
            .caption()
            .into_iter()
            .chain([text])
            .any(aromba_relay_proto::frame::holds_a_pin)
    {
        return None;
    }
    let delivery = Delivery::Message {
        text: text.to_string(),
    };
    delivery.check().ok()?;
    Some((server, delivery))
}

/// Queues `delivery` for `server` with the update's claim, and commits both.
async fn forward(
    app: &App,
    claim: &mut Claim<'_>,
    server: uuid::Uuid,
    delivery: &Delivery,
) -> Result<(), HandleError> {
    let now = app.config.clock.now();
    crate::outbox::enqueue_in(
        claim.conn()?,
        server,
        delivery,
        now,
        app.config.limits.max_pending,
    )
    .await?;
    claim.commit().await?;
    app.metrics.telegram("message_forwarded");
    Ok(())
}

/// A message; `server` is the one its chat is paired with.
async fn on_message(
    app: &App,
    telegram: &Arc<Telegram>,
    message: &Message,
    server: Option<uuid::Uuid>,
) -> Result<(), HandleError> {
    let chat = message.chat.id.0;
    let text = message.text();
    let command = text.and_then(command_of);
    match (command, server) {
        (Some(("/start", Some(code))), _) => {
            if !message.chat.is_private() {
                return foreign(app, telegram, chat, Some(words::PRIVATE_ONLY)).await;
            }
            let account = message.from.as_ref().map(|u| u.id.0).unwrap_or(0);
            super::pairing::consume(app, telegram, chat, account, code, server.is_some()).await
        }
        (Some(("/start", None)), Some(_)) => {
            say(app, telegram, chat, words::START_WHEN_PAIRED);
            Ok(())
        }
        (Some(("/unpair", _)), Some(server)) => {
            super::choices::ask_unpair(app, telegram, chat, server).await
        }
        (_, None) => foreign(app, telegram, chat, None).await,
        // What `forwardable` did not take: the PIN's shape, not text, or
        // past a delivery's bounds.
        (_, Some(_)) => {
            if pin_taken(app, telegram, message) {
                return Ok(());
            }
            if text.is_none() {
                app.metrics.telegram("message_not_text");
                say(app, telegram, chat, words::TEXT_ONLY);
                return Ok(());
            }
            app.metrics.telegram("message_refused");
            Ok(())
        }
    }
}

/// A paired chat's message that may hold the PIN — its text, or a photo's
/// caption — is taken from the chat as soon as it is read, the chat told
/// so, and passed on to nobody: a PIN is typed only in the Mini App, sealed
/// for the Warden, so one typed here (out of habit, or because a model
/// asked for it) is never of use, and must neither stay in the chat nor
/// reach the server. Whether it was.
fn pin_taken(app: &App, telegram: &Arc<Telegram>, message: &Message) -> bool {
    let holds = message
        .text()
        .or(message.caption())
        .is_some_and(aromba_relay_proto::frame::holds_a_pin);
    if holds {
        let chat = message.chat.id.0;
        forget_secret(app, telegram, chat, i64::from(message.id.0));
        app.metrics.telegram("pin_shaped_deleted");
        say(app, telegram, chat, words::PIN_SHAPED);
    }
    holds
}

/// A message edited after it was sent: nothing goes to the server (it had
/// the message as first sent), but one edited into the PIN's shape is
/// taken from the chat like a new one (found by the attack round: it
/// stayed there).
fn on_edit(app: &App, telegram: &Arc<Telegram>, message: &Message, server: Option<uuid::Uuid>) {
    if server.is_none() || !pin_taken(app, telegram, message) {
        app.metrics.telegram("update_ignored");
    }
}

/// Tries to delete a secret's message at most this many times.
const SECRET_DELETE_TRIES: u32 = 5;

/// Deletes a secret's message from the chat, in the background (and says
/// nothing of it but a count). A 429 is waited out and a failure on the way
/// tried again (found by the attack round: one of either left the PIN in
/// the chat for good); a refusal (the message is gone) is left.
fn forget_secret(app: &App, telegram: &Arc<Telegram>, chat: i64, message_id: i64) {
    let (app, telegram) = (app.clone(), telegram.clone());
    tokio::spawn(async move {
        for attempt in 1..=SECRET_DELETE_TRIES {
            match telegram.client.delete(chat, message_id).await {
                Ok(()) => {
                    app.metrics.telegram("secret_deleted");
                    return;
                }
                Err(CallError::RetryAfter(wait)) => {
                    telegram.told_to_wait(&app.metrics, super::pace::About::Chat(chat), wait);
                    tokio::time::sleep(wait.min(super::pace::MAX_CHAT_PAUSE)).await;
                }
                Err(CallError::Refused(e)) => {
                    tracing::warn!(error = %e, "a secret's message could not be deleted");
                    break;
                }
                Err(CallError::Failed(e)) => {
                    tracing::warn!(error = %e, "a secret's message could not be deleted yet");
                    tokio::time::sleep(std::time::Duration::from_millis(200) * attempt).await;
                }
            }
        }
        app.metrics.telegram("secret_delete_failed");
    });
}

/// `/start CODE` → `("/start", Some("CODE"))`; a command addressed to a
/// bot (`/start@name`) counts as the command.
fn command_of(text: &str) -> Option<(&str, Option<&str>)> {
    let text = text.trim();
    if !text.starts_with('/') {
        return None;
    }
    let (head, rest) = match text.split_once(char::is_whitespace) {
        Some((h, r)) => (h, Some(r.trim()).filter(|r| !r.is_empty())),
        None => (text, None),
    };
    let name = head.split('@').next().unwrap_or(head);
    match name {
        "/start" => Some(("/start", rest)),
        "/unpair" => Some(("/unpair", rest)),
        _ => None,
    }
}

/// A chat that is not paired: one reply, then silence for
/// [`super::FOREIGN_DAYS`] (remembered by a keyed hash of the chat id, never
/// the id), within the strangers' window and lane.
async fn foreign(
    app: &App,
    telegram: &Arc<Telegram>,
    chat: i64,
    reply: Option<&'static str>,
) -> Result<(), HandleError> {
    let hash = hashing::chat_hash(&app.config.pepper, chat);
    let first = store::foreign_chats::tell_once(&app.db, &hash[..], app.config.clock.now()).await?;
    if first {
        app.metrics.telegram("foreign_chat_told");
        say_to_stranger(app, telegram, chat, reply.unwrap_or(words::FOREIGN)).await?;
    } else {
        app.metrics.telegram("foreign_chat_silent");
    }
    Ok(())
}

/// A reply to a chat that is not paired, on any path (a wrong code, pairing
/// busy, a lockout, a stranger): each path answers a chat at most once per
/// `stranger_window`, whichever replica answers (remembered in the
/// database by a keyed hash of the chat id and the reply, never the id),
/// so a person still learns that a wrong code became a lockout while a
/// flood from one chat is told once. Replies go in the strangers' own lane
/// and budget ([`super::pace`]); what does not fit is dropped and counted:
/// a stranger waits in no queue, and no paired chat waits for one.
pub async fn say_to_stranger(
    app: &App,
    telegram: &Arc<Telegram>,
    chat: i64,
    text: &'static str,
) -> Result<(), HandleError> {
    let hash = hashing::stranger_reply_key(&app.config.pepper, chat, text);
    let now = app.config.clock.now();
    let window = chrono::Duration::from_std(telegram.config.limits.stranger_window)
        .unwrap_or(chrono::Duration::seconds(10));
    let fresh = store::stranger_replies::tell(&app.db, &hash[..], now, now - window).await?;
    if !fresh {
        app.metrics.telegram("stranger_reply_silent");
        return Ok(());
    }
    let permit = telegram.strangers.clone().try_acquire_owned().ok();
    let turn = permit
        .as_ref()
        .and_then(|_| telegram.pace.reserve_stranger(super::AHEAD));
    let (Some(permit), Some(turn)) = (permit, turn) else {
        app.metrics.telegram("stranger_reply_dropped");
        return Ok(());
    };
    let (app, telegram) = (app.clone(), telegram.clone());
    tokio::spawn(async move {
        let _permit = permit;
        tokio::time::sleep_until(turn).await;
        match telegram.client.send(chat, text, &Vec::new(), &[]).await {
            Ok(_) => app.metrics.telegram("stranger_reply_sent"),
            Err(CallError::RetryAfter(wait)) => {
                telegram.told_to_wait(&app.metrics, super::pace::About::Stranger(chat), wait);
                app.metrics.telegram("stranger_reply_failed");
            }
            Err(e) => {
                tracing::warn!(error = %e, "a reply to a chat that is not paired could not be sent");
                app.metrics.telegram("stranger_reply_failed");
            }
        }
    });
    Ok(())
}

/// Sends one of the relay's own texts in the background: the shard goes
/// on at once, and the chat's turn is taken now, so replies to one chat
/// keep their order. A reply is dropped (and counted) when its chat's turn
/// is more than [`super::AHEAD`] away or [`super::MAX_REPLIES`] are in
/// flight. A failure is logged (scrubbed) and counted, retried only past
/// one 429.
pub fn say(app: &App, telegram: &Arc<Telegram>, chat: i64, text: &'static str) {
    say_then(app, telegram, chat, text, Vec::new(), |_| async {});
}

/// [`say`] with buttons; `then` is given the message's id once it is sent,
/// or `None` when it was dropped or failed.
pub fn say_then<F, Fut>(
    app: &App,
    telegram: &Arc<Telegram>,
    chat: i64,
    text: &'static str,
    keyboard: super::client::Keyboard,
    then: F,
) where
    F: FnOnce(Option<i64>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let permit = telegram.replies.clone().try_acquire_owned().ok();
    let turn = permit
        .as_ref()
        .and_then(|_| telegram.pace.reserve_within(chat, 1, super::AHEAD))
        .and_then(|turns| turns.first().copied());
    let (Some(permit), Some(turn)) = (permit, turn) else {
        app.metrics.telegram("relay_message_dropped");
        tokio::spawn(then(None));
        return;
    };
    let (app, telegram) = (app.clone(), telegram.clone());
    tokio::spawn(async move {
        let _permit = permit;
        tokio::time::sleep_until(turn).await;
        telegram.pace.overall().await;
        let mut sent = None;
        for attempt in 0..2 {
            if attempt > 0 {
                telegram.pace.wait(chat).await;
            }
            match telegram.client.send(chat, text, &keyboard, &[]).await {
                Ok(id) => {
                    sent = Some(id);
                    break;
                }
                Err(CallError::RetryAfter(wait)) => {
                    telegram.told_to_wait(&app.metrics, super::pace::About::Chat(chat), wait);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "a reply could not be sent");
                    break;
                }
            }
        }
        app.metrics.telegram(if sent.is_some() {
            "relay_message_sent"
        } else {
            "relay_message_failed"
        });
        then(sent).await;
    });
}

/// Edits one of the relay's own messages in the background (a question
/// becoming its answer), paced like a reply.
pub fn edit_in_background(
    app: &App,
    telegram: &Arc<Telegram>,
    chat: i64,
    message_id: i64,
    text: &'static str,
) {
    let Ok(permit) = telegram.replies.clone().try_acquire_owned() else {
        app.metrics.telegram("relay_message_dropped");
        return;
    };
    let (app, telegram) = (app.clone(), telegram.clone());
    tokio::spawn(async move {
        let _permit = permit;
        telegram.pace.wait(chat).await;
        match telegram
            .client
            .edit(chat, message_id, text, &Vec::new())
            .await
        {
            Ok(()) => {}
            Err(CallError::RetryAfter(wait)) => {
                telegram.told_to_wait(&app.metrics, super::pace::About::Chat(chat), wait);
                app.metrics.telegram("relay_message_failed");
            }
            Err(e) => {
                tracing::warn!(error = %e, "a question could not be closed");
                app.metrics.telegram("relay_message_failed");
            }
        }
    });
}

/// The chat and message a tap came from, when the message is still there.
fn tapped_message(query: &CallbackQuery) -> Option<(i64, i64)> {
    match query.message.as_ref()? {
        MaybeInaccessibleMessage::Regular(m) => Some((m.chat.id.0, i64::from(m.id.0))),
        MaybeInaccessibleMessage::Inaccessible(_) => None,
    }
}

/// A tap, in its update's claim. A tap on a live button of a server's
/// message is forwarded in the claim's transaction with the query's own
/// claim, so that both commit with the delivery or not at all (found by the
/// chaos test: a replica killed between the claims and the delivery lost
/// the tap and left it unanswered); it is answered once that committed.
/// Anything else (the relay's own buttons, a button gone) commits the
/// claims first and is answered at most once.
async fn on_tap(
    app: &App,
    telegram: &Arc<Telegram>,
    query: &CallbackQuery,
    claim: &mut Claim<'_>,
) -> Result<(), HandleError> {
    let bot = telegram.config.token.bot_id_number();
    let now = app.config.clock.now();
    // A query id is answered once, whatever update carries it again.
    if !store::telegram_callbacks::claim(claim.conn()?, bot, &query.id.0, now).await? {
        claim.commit().await?;
        app.metrics.telegram("tap_repeated");
        return Ok(());
    }
    if let Some((server, delivery)) = signed_tap(app, telegram, query, claim).await? {
        crate::outbox::enqueue_in(
            claim.conn()?,
            server,
            &delivery,
            now,
            app.config.limits.max_pending,
        )
        .await?;
        claim.commit().await?;
        app.metrics.telegram("tap_forwarded");
        answer_in_background(app, telegram, query.id.0.clone(), Some(words::TAP_SENT));
        return Ok(());
    }
    claim.commit().await?;
    let outcome = not_forwarded(app, telegram, query).await;
    // Answered even when it failed: the person's spinner must stop.
    let notice = match &outcome {
        Ok(notice) => *notice,
        Err(_) => Some(words::EXPIRED),
    };
    answer_in_background(app, telegram, query.id.0.clone(), notice);
    if outcome.is_err() {
        // Released with the update, so that the update, sent again, is
        // handled again.
        let _ = store::telegram_callbacks::release(&app.db, bot, &query.id.0).await;
    }
    outcome.map(drop)
}

/// The tap as its server gets it, signed, when it names a live button of a
/// message the relay delivered to that very chat (read in the claim's
/// transaction).
async fn signed_tap(
    app: &App,
    telegram: &Arc<Telegram>,
    query: &CallbackQuery,
    claim: &mut Claim<'_>,
) -> Result<Option<(uuid::Uuid, Delivery)>, HandleError> {
    let (Some((chat, message_id)), Some(data)) = (tapped_message(query), query.data.as_deref())
    else {
        return Ok(None);
    };
    let button = store::chat_buttons::live(
        claim.conn()?,
        data,
        chat,
        message_id,
        app.config.clock.now()
            - chrono::Duration::from_std(telegram.config.limits.buttons_live)
                .unwrap_or(chrono::Duration::days(7)),
    )
    .await?;
    let Some(button) = button else {
        return Ok(None);
    };
    let time = u64::try_from(app.config.clock.now().timestamp()).unwrap_or(0);
    let text_sha256 = super::signing::hex(&button.text_sha256);
    let covered = super::signing::Covered {
        server: button.server_id,
        action: button.action.as_deref().unwrap_or(""),
        text_sha256: &text_sha256,
        button: &button.button,
        label: &button.label,
        chat,
        time,
    };
    let signature = telegram.key.sign(&covered)?;
    let delivery = Delivery::Tap {
        message: button.message,
        button: button.button.clone(),
        proof: TapProof {
            action: button.action.clone(),
            label: button.label.clone(),
            chat,
            time,
            text_sha256,
            signature,
        },
    };
    Ok(Some((button.server_id, delivery)))
}

/// A tap that names no live button of a server's message: one of the
/// relay's own buttons, or a button gone; the answer's notice.
async fn not_forwarded(
    app: &App,
    telegram: &Arc<Telegram>,
    query: &CallbackQuery,
) -> Result<Option<&'static str>, HandleError> {
    let (Some((chat, message_id)), Some(data)) = (tapped_message(query), query.data.as_deref())
    else {
        app.metrics.telegram("tap_expired");
        return Ok(Some(words::EXPIRED));
    };
    if let Some(answer) =
        super::choices::on_relay_button(app, telegram, chat, message_id, data).await?
    {
        return Ok(Some(answer));
    }
    // A button the server took off its message (it edits a proposal as
    // soon as it is answered): a second tap, which is no fault.
    let answered = store::chat_messages::answered(&app.db, chat, message_id).await?;
    if answered {
        app.metrics.telegram("tap_answered_already");
        return Ok(Some(words::TAP_ANSWERED));
    }
    app.metrics.telegram("tap_expired");
    Ok(Some(words::EXPIRED))
}

/// The longest a tap's answer waits for a 429.
const ANSWER_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// `answerCallbackQuery`, once, in the background (the shard goes on): a
/// failure that may pass is tried once more, a refusal (the query is too
/// old) is left.
fn answer_in_background(
    app: &App,
    telegram: &Arc<Telegram>,
    query: String,
    text: Option<&'static str>,
) {
    let Ok(permit) = telegram.answers.clone().try_acquire_owned() else {
        app.metrics.telegram("tap_answer_dropped");
        return;
    };
    let (app, telegram) = (app.clone(), telegram.clone());
    tokio::spawn(async move {
        let _permit = permit;
        for _ in 0..2 {
            match telegram.client.answer(&query, text).await {
                Ok(()) => {
                    app.metrics.telegram("tap_answered");
                    return;
                }
                // An answer is of use for seconds only: a long wait is not
                // waited out with a permit held.
                Err(CallError::RetryAfter(wait)) if wait <= ANSWER_WAIT => {
                    tokio::time::sleep(wait).await
                }
                Err(CallError::RetryAfter(_)) => {
                    app.metrics.telegram("bot_api_429");
                    break;
                }
                Err(CallError::Refused(_)) => break,
                Err(CallError::Failed(e)) => {
                    tracing::warn!(error = %e, "a tap's answer failed");
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                }
            }
        }
        app.metrics.telegram("tap_answer_failed");
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_start_and_unpair_commands_with_and_without_a_payload() {
        assert_eq!(
            command_of("/start ABC234"),
            Some(("/start", Some("ABC234")))
        );
        assert_eq!(
            command_of("/start@aromba_bot  ABC234 "),
            Some(("/start", Some("ABC234")))
        );
        assert_eq!(command_of("/start"), Some(("/start", None)));
        assert_eq!(command_of("/unpair"), Some(("/unpair", None)));
        assert_eq!(command_of("/disk"), None);
        assert_eq!(command_of("start ABC"), None);
    }

    #[test]
    fn what_is_not_an_update_is_refused() {
        assert!(parse(b"{}").is_none());
        assert!(parse(b"not json").is_none());
        assert!(parse(br#"{"update_id": 5, "message": {"nonsense": true}}"#).is_none());
        let ok = parse(
            br#"{"update_id": 5, "message": {"message_id": 1, "date": 1700000000,
            "chat": {"id": 42, "type": "private", "first_name": "P"}, "text": "hi"}}"#,
        );
        assert!(ok.is_some());
    }
}
