//! The relay's own buttons: unpairing (asked before it is done) and a
//! duplicate case (a known server id registered from another boot), which
//! the paired chat decides. They live in their own table, apart from the
//! servers' buttons, so a server can never offer one; each works once, and
//! only in the chat and on the message it was sent with.

use super::Telegram;
use super::claim::HandleError;
use super::client::Key;
use super::inbound::say_then;
use super::words;
use crate::state::App;
use crate::store;
use rand::Rng;
use std::sync::Arc;
use uuid::Uuid;

/// An opaque callback id: 22 random characters of `[A-Za-z0-9_-]` (132
/// bits), all Telegram carries back for a button.
pub fn callback_id() -> String {
    const CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";
    let mut rng = rand::rng();
    (0..22)
        .map(|_| char::from(CHARS[rng.random_range(0..CHARS.len())]))
        .collect()
}

/// Sends a question with two relay buttons in the background, and records
/// them once it is sent (a tap in the moment between is answered
/// "expired"; the question can be asked again).
fn ask(
    app: &App,
    telegram: &Arc<Telegram>,
    chat: i64,
    server: Uuid,
    boot: Option<Uuid>,
    text: &'static str,
    options: [(&'static str, &'static str); 2],
) {
    let ids = [callback_id(), callback_id()];
    let keyboard = vec![
        options
            .iter()
            .zip(&ids)
            .map(|((label, _), id)| (label.to_string(), Key::Callback(id.clone())))
            .collect(),
    ];
    let (db, now) = (app.db.clone(), app.config.clock.now());
    say_then(
        app,
        telegram,
        chat,
        text,
        keyboard,
        move |telegram_id| async move {
            let Some(telegram_id) = telegram_id else {
                // Not sent: a duplicate case is asked again next round.
                if let Some(boot) = boot {
                    let _ = store::duplicate_cases::unshow(&db, server, boot).await;
                }
                return;
            };
            for ((_, choice), id) in options.iter().zip(&ids) {
                let recorded = store::relay_buttons::insert(
                    &db,
                    store::relay_buttons::Recorded {
                        callback_id: id,
                        chat_id: chat,
                        telegram_id,
                        server_id: server,
                        boot_id: boot,
                        choice,
                        created_at: now,
                    },
                )
                .await;
                if let Err(e) = recorded {
                    tracing::warn!(server = %server, error = %e, "a question's buttons were not recorded");
                }
            }
        },
    );
}

/// `/unpair` from the paired chat: asks first.
pub async fn ask_unpair(
    app: &App,
    telegram: &Arc<Telegram>,
    chat: i64,
    server: Uuid,
) -> Result<(), HandleError> {
    ask(
        app,
        telegram,
        chat,
        server,
        None,
        words::UNPAIR_ASK,
        [(words::UNPAIR_YES, "unpair"), (words::UNPAIR_NO, "keep")],
    );
    Ok(())
}

/// Shows the paired chat each duplicate case not shown yet.
pub async fn show_duplicate_cases(
    app: &App,
    telegram: &Arc<Telegram>,
) -> Result<usize, HandleError> {
    let cases = store::duplicate_cases::take_unshown(&app.db, app.config.clock.now()).await?;
    for case in &cases {
        ask(
            app,
            telegram,
            case.chat_id,
            case.server_id,
            Some(case.boot_id),
            words::DUPLICATE_ASK,
            [
                (words::DUPLICATE_REINSTALL, "reinstall"),
                (words::DUPLICATE_OTHER, "other_machine"),
            ],
        );
        app.metrics.telegram("duplicate_case_shown");
    }
    Ok(cases.len())
}

/// A tap on one of the relay's buttons: acted on and answered here
/// (`Some(notice)`), or `None` when `data` is no live relay button of this
/// chat's message (the caller then looks among the servers' buttons).
pub async fn on_relay_button(
    app: &App,
    telegram: &Arc<Telegram>,
    chat: i64,
    message_id: i64,
    data: &str,
) -> Result<Option<&'static str>, HandleError> {
    // Taken with its sibling: a question is answered once.
    let taken = store::relay_buttons::take(&app.db, data, chat, message_id).await?;
    let Some(taken) = taken else {
        return Ok(None);
    };
    let now = app.config.clock.now();
    let server = taken.server_id;
    let (reply, notice): (&'static str, &'static str) = match (taken.choice.as_str(), taken.boot_id)
    {
        ("unpair", _) => {
            let mut tx = app.db.begin().await?;
            let gone = store::pairings::delete(&mut *tx, server, chat).await?;
            if gone == 0 {
                (words::NOT_PAIRED_UNPAIR, words::NOT_PAIRED_UNPAIR)
            } else {
                // What was delivered to the chat is forgotten: its buttons
                // must not work again if the chat pairs anew.
                store::chat_messages::forget_server(&mut *tx, server).await?;
                // Unpaired servers go 24 hours after this, unless paired.
                store::servers::mark_unpaired(&mut *tx, server, now).await?;
                tx.commit().await?;
                app.metrics.telegram("unpaired");
                tracing::info!(server = %server, "unpaired");
                (words::UNPAIRED, words::UNPAIRED_TOAST)
            }
        }
        ("keep", _) => (words::KEPT, words::KEPT_TOAST),
        ("reinstall", Some(boot)) => {
            if reinstall(app, server, boot, chat).await? {
                app.metrics.telegram("duplicate_reinstall");
                tracing::info!(server = %server, "duplicate case: a reinstall");
                (words::REINSTALL_DONE, words::REINSTALL_TOAST)
            } else {
                (words::CHOICE_GONE, words::CHOICE_GONE)
            }
        }
        ("other_machine", Some(boot)) => {
            let closed = store::duplicate_cases::refuse(&app.db, server, boot, chat).await?;
            if closed == 1 {
                app.metrics.telegram("duplicate_refused");
                tracing::info!(server = %server, "duplicate case: another machine");
                (words::OTHER_DONE, words::OTHER_TOAST)
            } else {
                (words::CHOICE_GONE, words::CHOICE_GONE)
            }
        }
        _ => (words::CHOICE_GONE, words::CHOICE_GONE),
    };
    // The question becomes its answer, without buttons.
    super::inbound::edit_in_background(app, telegram, chat, message_id, reply);
    Ok(Some(notice))
}

/// The reinstall takes the server's identity: its token and boot become
/// the case's, every case of the server is closed, and the old
/// installation's connection is ended (a newer generation replaces it
/// wherever it is). `false` when the case or the pairing is gone.
async fn reinstall(app: &App, server: Uuid, boot: Uuid, chat: i64) -> Result<bool, HandleError> {
    let mut tx = app.db.begin().await?;
    let case = store::duplicate_cases::lock_for_reinstall(&mut *tx, server, boot, chat).await?;
    let Some(token_hash) = case else {
        return Ok(false);
    };
    store::servers::take_identity(&mut *tx, server, &token_hash, boot).await?;
    store::duplicate_cases::close_all(&mut *tx, server).await?;
    store::relay_buttons::forget_duplicate_questions(&mut *tx, server).await?;
    tx.commit().await?;
    app.writer.next_generation(server).await?;
    Ok(true)
}
