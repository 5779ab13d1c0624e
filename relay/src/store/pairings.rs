//! `pairings`: the chat each paired server talks to (one server per
//! Telegram account), whether the chat's next message is a secret the
//! server asked for, and when the sender last delivered for the server.
//!
//! Written by pairing (`telegram/pairing.rs`), unpairing
//! (`telegram/choices.rs`), each server's connection (`ws.rs`: a secret
//! is expected), a chat's message (`telegram/inbound.rs`: the mark is
//! used) and the sender (`telegram/outbound.rs`). Other tables' statements
//! read it where a chat must still be the server's.

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// How many chats the server is paired with (0 or 1).
pub(crate) async fn count_of_server(
    db: impl sqlx::PgExecutor<'_>,
    server: Uuid,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM pairings WHERE server_id = $1"#,
        server
    )
    .fetch_one(db)
    .await
}

/// The server `chat` is paired with, if any.
pub(crate) async fn server_of_chat(
    db: impl sqlx::PgExecutor<'_>,
    chat: i64,
) -> Result<Option<Uuid>, sqlx::Error> {
    sqlx::query_scalar!("SELECT server_id FROM pairings WHERE chat_id = $1", chat)
        .fetch_optional(db)
        .await
}

/// Pairs the server with `chat`; a unique violation when either is paired
/// already.
pub(crate) async fn insert(
    db: impl sqlx::PgExecutor<'_>,
    server: Uuid,
    chat: i64,
    now: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        r#"INSERT INTO pairings (server_id, chat_id, paired_at) VALUES ($1, $2, $3)"#,
        server,
        chat,
        now,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Unpairs the server from `chat`; the rows deleted (0 when it was not
/// paired with that chat).
pub(crate) async fn delete(
    db: impl sqlx::PgExecutor<'_>,
    server: Uuid,
    chat: i64,
) -> Result<u64, sqlx::Error> {
    Ok(sqlx::query!(
        "DELETE FROM pairings WHERE server_id = $1 AND chat_id = $2",
        server,
        chat
    )
    .execute(db)
    .await?
    .rows_affected())
}

/// Notes that a server's message went out at `at`, for the order of the
/// sender's rounds.
pub(crate) async fn served(
    conn: &mut sqlx::PgConnection,
    server: Uuid,
    at: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE pairings SET last_sent_at = $2 WHERE server_id = $1",
        server,
        at
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}
