//! `chat_messages`: each message the relay delivered for a server, by the
//! server's id for it: the chat, Telegram's id of the part that carries
//! the buttons, and the SHA-256 of that part's text (never the text).
//!
//! Written by the sender (`telegram/outbound.rs`), pairing and unpairing
//! (`telegram/pairing.rs`, `telegram/choices.rs`: what was delivered before
//! is forgotten) and the sweep. Also here: the record of a delivery, which
//! asks `pairings` whether the chat is still the server's, and the "already
//! answered" lookup of a tap (`telegram/inbound.rs`), which reads
//! `pairings` and `chat_buttons` around this table.

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// A delivered message as it is recorded.
pub(crate) struct Delivered<'a> {
    pub(crate) server: Uuid,
    pub(crate) message: Uuid,
    pub(crate) chat: i64,
    pub(crate) telegram_id: i64,
    pub(crate) text_sha256: &'a [u8],
    pub(crate) sent_at: DateTime<Utc>,
    /// How many sends of it were begun (more than 1: it may have reached
    /// the chat more than once).
    pub(crate) attempts: i32,
}

/// Records a delivered message, only while its server is still paired with
/// that chat; the rows written (0 when it is not).
pub(crate) async fn record(
    db: impl sqlx::PgExecutor<'_>,
    d: Delivered<'_>,
) -> Result<u64, sqlx::Error> {
    Ok(sqlx::query!(
        r#"INSERT INTO chat_messages (server_id, message, chat_id, telegram_id, text_sha256, sent_at, attempts)
           SELECT $1, $2, $3, $4, $5, $6, $7
           WHERE EXISTS (SELECT 1 FROM pairings WHERE server_id = $1 AND chat_id = $3)
           ON CONFLICT (server_id, message) DO UPDATE
           SET chat_id = $3, telegram_id = $4, text_sha256 = $5, sent_at = $6,
               attempts = GREATEST(chat_messages.attempts, $7)"#,
        d.server,
        d.message,
        d.chat,
        d.telegram_id,
        d.text_sha256,
        d.sent_at,
        d.attempts,
    )
    .execute(db)
    .await?
    .rows_affected())
}

/// Where a delivered message is in Telegram.
pub(crate) struct Target {
    pub(crate) chat_id: i64,
    pub(crate) telegram_id: i64,
}

/// Where the server's message `message` went, if the relay delivered it.
pub(crate) async fn target(
    db: impl sqlx::PgExecutor<'_>,
    server: Uuid,
    message: Uuid,
) -> Result<Option<Target>, sqlx::Error> {
    let row = sqlx::query!(
        "SELECT chat_id, telegram_id FROM chat_messages WHERE server_id = $1 AND message = $2",
        server,
        message
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(|r| Target {
        chat_id: r.chat_id,
        telegram_id: r.telegram_id,
    }))
}

/// A delivered message was edited: its text's hash and time are the
/// edit's.
pub(crate) async fn edited(
    db: impl sqlx::PgExecutor<'_>,
    server: Uuid,
    message: Uuid,
    text_sha256: &[u8],
    at: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        r#"UPDATE chat_messages SET text_sha256 = $3, sent_at = $4
           WHERE server_id = $1 AND message = $2"#,
        server,
        message,
        text_sha256,
        at,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Forgets everything delivered for the server (and so its buttons).
pub(crate) async fn forget_server(
    db: impl sqlx::PgExecutor<'_>,
    server: Uuid,
) -> Result<(), sqlx::Error> {
    sqlx::query!("DELETE FROM chat_messages WHERE server_id = $1", server)
        .execute(db)
        .await?;
    Ok(())
}

/// Whether Telegram's message `telegram_id` in `chat` is one the relay
/// delivered for the chat's server and whose buttons the server took off
/// (it answered the message).
pub(crate) async fn answered(
    db: impl sqlx::PgExecutor<'_>,
    chat: i64,
    telegram_id: i64,
) -> Result<bool, sqlx::Error> {
    let found = sqlx::query_scalar!(
        r#"SELECT 1 AS "one!" FROM pairings p
               JOIN chat_messages m ON m.server_id = p.server_id AND m.chat_id = p.chat_id
               WHERE p.chat_id = $1 AND m.telegram_id = $2
                 AND NOT EXISTS (SELECT 1 FROM chat_buttons b
                                 WHERE b.server_id = m.server_id AND b.message = m.message)"#,
        chat,
        telegram_id,
    )
    .fetch_optional(db)
    .await?;
    Ok(found.is_some())
}

/// Erases what was delivered by `cutoff`.
pub(crate) async fn delete_older(
    db: impl sqlx::PgExecutor<'_>,
    cutoff: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    sqlx::query!("DELETE FROM chat_messages WHERE sent_at <= $1", cutoff)
        .execute(db)
        .await?;
    Ok(())
}
