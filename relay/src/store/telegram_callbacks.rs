//! `telegram_callbacks`: the callback query ids of a bot already answered,
//! so a tap that comes again in another update is not forwarded twice;
//! rows go after 24 hours.
//!
//! Written by each tap (`telegram/inbound.rs`) and the sweep.

use chrono::{DateTime, Utc};

/// Claims bot `bot`'s query `query` at `now`; whether it is new.
pub(crate) async fn claim(
    db: impl sqlx::PgExecutor<'_>,
    bot: i64,
    query: &str,
    now: DateTime<Utc>,
) -> Result<bool, sqlx::Error> {
    let first = sqlx::query_scalar!(
        r#"INSERT INTO telegram_callbacks (bot_id, query_id, seen_at) VALUES ($1, $2, $3)
           ON CONFLICT (bot_id, query_id) DO NOTHING RETURNING query_id"#,
        bot,
        query,
        now,
    )
    .fetch_optional(db)
    .await?;
    Ok(first.is_some())
}

/// Releases a claim, so the tap can be handled again.
pub(crate) async fn release(
    db: impl sqlx::PgExecutor<'_>,
    bot: i64,
    query: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "DELETE FROM telegram_callbacks WHERE bot_id = $1 AND query_id = $2",
        bot,
        query
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
    sqlx::query!("DELETE FROM telegram_callbacks WHERE seen_at <= $1", cutoff)
        .execute(db)
        .await?;
    Ok(())
}
