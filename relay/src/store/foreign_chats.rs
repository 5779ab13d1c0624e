//! `foreign_chats`: chats that are not paired and were told so once, as a
//! keyed hash of the chat id (never the id), for
//! [`crate::telegram::FOREIGN_DAYS`].
//!
//! Written by a stranger's message (`telegram/inbound.rs`), pairing
//! (`telegram/pairing.rs`: a paired chat is no stranger) and the sweep.

use chrono::{DateTime, Utc};

/// Remembers the chat as told at `now`; whether it is told for the first
/// time (`false`: it was told before).
pub(crate) async fn tell_once(
    db: impl sqlx::PgExecutor<'_>,
    chat_hash: &[u8],
    now: DateTime<Utc>,
) -> Result<bool, sqlx::Error> {
    let first = sqlx::query_scalar!(
        r#"INSERT INTO foreign_chats (chat_hash, told_at) VALUES ($1, $2)
           ON CONFLICT (chat_hash) DO NOTHING RETURNING told_at"#,
        chat_hash,
        now,
    )
    .fetch_optional(db)
    .await?;
    Ok(first.is_some())
}

/// Forgets the chat: it is paired now.
pub(crate) async fn forget(
    db: impl sqlx::PgExecutor<'_>,
    chat_hash: &[u8],
) -> Result<(), sqlx::Error> {
    sqlx::query!("DELETE FROM foreign_chats WHERE chat_hash = $1", chat_hash)
        .execute(db)
        .await?;
    Ok(())
}

/// Erases the chats told by `cutoff`.
pub(crate) async fn delete_older(
    db: impl sqlx::PgExecutor<'_>,
    cutoff: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    sqlx::query!("DELETE FROM foreign_chats WHERE told_at <= $1", cutoff)
        .execute(db)
        .await?;
    Ok(())
}
