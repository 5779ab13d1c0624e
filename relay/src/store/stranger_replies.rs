//! `stranger_replies`: each reply to a chat that is not paired, as a keyed
//! hash of the chat id and the reply (never the id), so each is sent at
//! most once per window whichever replica answers; swept once the window
//! is past.
//!
//! Written by a reply to a stranger (`telegram/inbound.rs`) and the sweep.

use chrono::{DateTime, Utc};

/// Notes the reply as told at `now` unless it was told after `since`;
/// whether it may be told now.
pub(crate) async fn tell(
    db: impl sqlx::PgExecutor<'_>,
    reply_hash: &[u8],
    now: DateTime<Utc>,
    since: DateTime<Utc>,
) -> Result<bool, sqlx::Error> {
    let fresh = sqlx::query_scalar!(
        r#"INSERT INTO stranger_replies (chat_hash, told_at) VALUES ($1, $2)
           ON CONFLICT (chat_hash) DO UPDATE SET told_at = $2
           WHERE stranger_replies.told_at <= $3
           RETURNING 1 AS "one!""#,
        reply_hash,
        now,
        since,
    )
    .fetch_optional(db)
    .await?;
    Ok(fresh.is_some())
}

/// Erases the replies told by `cutoff`.
pub(crate) async fn delete_older(
    db: impl sqlx::PgExecutor<'_>,
    cutoff: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    sqlx::query!("DELETE FROM stranger_replies WHERE told_at <= $1", cutoff)
        .execute(db)
        .await?;
    Ok(())
}
