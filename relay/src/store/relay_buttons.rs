//! `relay_buttons`: the relay's own buttons (a duplicate case's two
//! choices, unpairing's two), apart from the servers' so a server can never
//! offer one; each is taken once, with its sibling, and only in the chat
//! and on the message it was sent with.
//!
//! Written by the relay's questions (`telegram/choices.rs`) and the sweep.

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// One of the relay's buttons as it is recorded.
pub(crate) struct Recorded<'a> {
    pub(crate) callback_id: &'a str,
    pub(crate) chat_id: i64,
    pub(crate) telegram_id: i64,
    pub(crate) server_id: Uuid,
    /// The duplicate case's boot, for its two choices.
    pub(crate) boot_id: Option<Uuid>,
    pub(crate) choice: &'a str,
    pub(crate) created_at: DateTime<Utc>,
}

/// Records one of the relay's buttons.
pub(crate) async fn insert(
    db: impl sqlx::PgExecutor<'_>,
    b: Recorded<'_>,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        r#"INSERT INTO relay_buttons
                       (callback_id, chat_id, telegram_id, server_id, boot_id, choice, created_at)
                   VALUES ($1, $2, $3, $4, $5, $6, $7)"#,
        b.callback_id,
        b.chat_id,
        b.telegram_id,
        b.server_id,
        b.boot_id,
        b.choice,
        b.created_at,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// A button taken.
pub(crate) struct Taken {
    pub(crate) server_id: Uuid,
    pub(crate) boot_id: Option<Uuid>,
    pub(crate) choice: String,
}

/// Takes the button `callback` of Telegram's message `telegram_id` in
/// `chat`, and its sibling with it; `None` when there is no such button.
pub(crate) async fn take(
    db: impl sqlx::PgExecutor<'_>,
    callback: &str,
    chat: i64,
    telegram_id: i64,
) -> Result<Option<Taken>, sqlx::Error> {
    let row = sqlx::query!(
        r#"WITH hit AS (
               DELETE FROM relay_buttons
               WHERE callback_id = $1 AND chat_id = $2 AND telegram_id = $3
               RETURNING server_id, boot_id, choice),
           siblings AS (
               DELETE FROM relay_buttons
               WHERE chat_id = $2 AND telegram_id = $3 AND callback_id <> $1
                 AND EXISTS (SELECT 1 FROM hit))
           SELECT server_id AS "server_id!", boot_id, choice AS "choice!" FROM hit"#,
        callback,
        chat,
        telegram_id,
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(|r| Taken {
        server_id: r.server_id,
        boot_id: r.boot_id,
        choice: r.choice,
    }))
}

/// Forgets the server's duplicate-case questions (a case was decided).
pub(crate) async fn forget_duplicate_questions(
    db: impl sqlx::PgExecutor<'_>,
    server: Uuid,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "DELETE FROM relay_buttons WHERE server_id = $1 AND choice IN ('reinstall', 'other_machine')",
        server
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Erases the buttons made by `cutoff`.
pub(crate) async fn delete_older(
    db: impl sqlx::PgExecutor<'_>,
    cutoff: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    sqlx::query!("DELETE FROM relay_buttons WHERE created_at <= $1", cutoff)
        .execute(db)
        .await?;
    Ok(())
}
