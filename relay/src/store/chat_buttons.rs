//! `chat_buttons`: the buttons of each message the relay delivered for a
//! server, by the opaque random id Telegram carries back for a tap; they go
//! with their message (a foreign key), and an edit replaces them.
//!
//! Written by the sender (`telegram/outbound.rs`); read by a tap
//! (`telegram/inbound.rs`), whose lookup joins the button's message in
//! `chat_messages` and the chat's pairing in `pairings`.

use aromba_relay_proto::frame::Button;
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// Replaces the buttons of the server's message `message` with `buttons`,
/// under the callback ids `ids` (one each): the old ones stop working.
pub(crate) async fn replace(
    conn: &mut sqlx::PgConnection,
    server: Uuid,
    message: Uuid,
    buttons: &[Button],
    ids: &[String],
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "DELETE FROM chat_buttons WHERE server_id = $1 AND message = $2",
        server,
        message
    )
    .execute(&mut *conn)
    .await?;
    for (b, callback) in buttons.iter().zip(ids) {
        sqlx::query!(
            r#"INSERT INTO chat_buttons (callback_id, server_id, message, button, label, action)
               VALUES ($1, $2, $3, $4, $5, $6)"#,
            callback,
            server,
            message,
            b.id,
            b.label,
            b.action,
        )
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

/// A live button, with what its tap's signature covers.
pub(crate) struct Live {
    pub(crate) server_id: Uuid,
    pub(crate) message: Uuid,
    pub(crate) button: String,
    pub(crate) label: String,
    pub(crate) action: Option<String>,
    pub(crate) text_sha256: Vec<u8>,
}

/// The button `callback` of a message delivered to `chat` as Telegram's
/// message `telegram_id` after `sent_after`, while the chat is paired with
/// the message's server.
pub(crate) async fn live(
    db: impl sqlx::PgExecutor<'_>,
    callback: &str,
    chat: i64,
    telegram_id: i64,
    sent_after: DateTime<Utc>,
) -> Result<Option<Live>, sqlx::Error> {
    let row = sqlx::query!(
        r#"SELECT b.server_id, b.message, b.button, b.label, b.action, m.text_sha256
           FROM chat_buttons b
           JOIN chat_messages m ON m.server_id = b.server_id AND m.message = b.message
           JOIN pairings p ON p.server_id = b.server_id AND p.chat_id = m.chat_id
           WHERE b.callback_id = $1 AND m.chat_id = $2 AND m.telegram_id = $3
             AND m.sent_at > $4"#,
        callback,
        chat,
        telegram_id,
        sent_after,
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(|r| Live {
        server_id: r.server_id,
        message: r.message,
        button: r.button,
        label: r.label,
        action: r.action,
        text_sha256: r.text_sha256,
    }))
}
