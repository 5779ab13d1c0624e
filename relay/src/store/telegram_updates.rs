//! `telegram_updates`: the update ids of a bot already taken, so an update
//! Telegram sends twice (or that reaches two replicas) is handled once;
//! rows go after 24 hours.
//!
//! Written by each update (`telegram/inbound.rs`) and the sweep. The claim
//! also looks up, in `pairings`, the server the update's chat is paired
//! with: one round trip for both.

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// Whether the update was claimed now, and the server its chat is paired
/// with.
pub(crate) struct Claim {
    pub(crate) claimed: bool,
    pub(crate) server: Option<Uuid>,
}

/// Claims bot `bot`'s update `update` at `now`, and looks up the server
/// `chat` is paired with.
pub(crate) async fn claim(
    db: impl sqlx::PgExecutor<'_>,
    bot: i64,
    update: i64,
    now: DateTime<Utc>,
    chat: Option<i64>,
) -> Result<Claim, sqlx::Error> {
    let row = sqlx::query!(
        r#"WITH claimed AS (
               INSERT INTO telegram_updates (bot_id, update_id, seen_at) VALUES ($1, $2, $3)
               ON CONFLICT (bot_id, update_id) DO NOTHING RETURNING 1 AS one)
           SELECT EXISTS (SELECT 1 FROM claimed) AS "claimed!",
                  (SELECT server_id FROM pairings WHERE chat_id = $4) AS server"#,
        bot,
        update,
        now,
        chat,
    )
    .fetch_one(db)
    .await?;
    Ok(Claim {
        claimed: row.claimed,
        server: row.server,
    })
}

/// Releases a claim, so the update can be taken again.
pub(crate) async fn release(
    db: impl sqlx::PgExecutor<'_>,
    bot: i64,
    update: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "DELETE FROM telegram_updates WHERE bot_id = $1 AND update_id = $2",
        bot,
        update
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Erases the claims made by `cutoff`.
pub(crate) async fn delete_older(
    db: impl sqlx::PgExecutor<'_>,
    cutoff: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    sqlx::query!("DELETE FROM telegram_updates WHERE seen_at <= $1", cutoff)
        .execute(db)
        .await?;
    Ok(())
}
