//! `duplicate_cases`: a known server id registered from another boot, with
//! the token it came with, until the paired chat decides (a reinstall, or
//! another machine) or the sweep erases it after 24 hours.
//!
//! Written by registration (`servers.rs`), the relay's own buttons
//! (`telegram/choices.rs`) and the sweep. The statements that show a case
//! or act on the chat's choice read `pairings` too: a case is the paired
//! chat's to decide.

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// How many cases the server has open.
pub(crate) async fn count_open(
    db: impl sqlx::PgExecutor<'_>,
    server: Uuid,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM duplicate_cases WHERE server_id = $1"#,
        server
    )
    .fetch_one(db)
    .await
}

/// How many cases the server has open for `boot` (0 or 1).
pub(crate) async fn count_of_boot(
    db: impl sqlx::PgExecutor<'_>,
    server: Uuid,
    boot: Uuid,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM duplicate_cases WHERE server_id = $1 AND boot_id = $2"#,
        server,
        boot
    )
    .fetch_one(db)
    .await
}

/// Opens a case for the server's `boot` with `token_hash`, unless one is
/// open already.
pub(crate) async fn open(
    db: impl sqlx::PgExecutor<'_>,
    server: Uuid,
    boot: Uuid,
    token_hash: &[u8],
    now: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        r#"INSERT INTO duplicate_cases (server_id, boot_id, token_hash, opened_at)
                   VALUES ($1, $2, $3, $4)
                   ON CONFLICT (server_id, boot_id) DO NOTHING"#,
        server,
        boot,
        token_hash,
        now,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// A case to show, and the chat to show it in.
pub(crate) struct Unshown {
    pub(crate) server_id: Uuid,
    pub(crate) boot_id: Uuid,
    pub(crate) chat_id: i64,
}

/// Marks up to 16 cases of paired servers, not shown yet, shown at `now`
/// (the oldest first) and returns them.
pub(crate) async fn take_unshown(
    db: impl sqlx::PgExecutor<'_>,
    now: DateTime<Utc>,
) -> Result<Vec<Unshown>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"UPDATE duplicate_cases d SET shown_at = $1
           FROM pairings p
           WHERE p.server_id = d.server_id AND d.shown_at IS NULL
             AND (d.server_id, d.boot_id) IN (
                 SELECT c.server_id, c.boot_id FROM duplicate_cases c
                 JOIN pairings q ON q.server_id = c.server_id
                 WHERE c.shown_at IS NULL ORDER BY c.opened_at LIMIT 16)
           RETURNING d.server_id, d.boot_id, p.chat_id"#,
        now,
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| Unshown {
            server_id: r.server_id,
            boot_id: r.boot_id,
            chat_id: r.chat_id,
        })
        .collect())
}

/// The case is to be shown again (its question was not sent).
pub(crate) async fn unshow(
    db: impl sqlx::PgExecutor<'_>,
    server: Uuid,
    boot: Uuid,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE duplicate_cases SET shown_at = NULL WHERE server_id = $1 AND boot_id = $2",
        server,
        boot
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Closes the case as another machine's, if the server is still paired
/// with `chat`; the rows deleted.
pub(crate) async fn refuse(
    db: impl sqlx::PgExecutor<'_>,
    server: Uuid,
    boot: Uuid,
    chat: i64,
) -> Result<u64, sqlx::Error> {
    Ok(sqlx::query!(
        r#"DELETE FROM duplicate_cases d USING pairings p
                   WHERE d.server_id = $1 AND d.boot_id = $2
                     AND p.server_id = d.server_id AND p.chat_id = $3"#,
        server,
        boot,
        chat
    )
    .execute(db)
    .await?
    .rows_affected())
}

/// The case's token hash, its row locked and the pairing with `chat` held
/// for the transaction; `None` when the case or the pairing is gone.
pub(crate) async fn lock_for_reinstall(
    db: impl sqlx::PgExecutor<'_>,
    server: Uuid,
    boot: Uuid,
    chat: i64,
) -> Result<Option<Vec<u8>>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT d.token_hash FROM duplicate_cases d
           JOIN pairings p ON p.server_id = d.server_id AND p.chat_id = $3
           WHERE d.server_id = $1 AND d.boot_id = $2
           FOR UPDATE OF d FOR SHARE OF p"#,
        server,
        boot,
        chat
    )
    .fetch_optional(db)
    .await
}

/// Closes every case of the server.
pub(crate) async fn close_all(
    db: impl sqlx::PgExecutor<'_>,
    server: Uuid,
) -> Result<(), sqlx::Error> {
    sqlx::query!("DELETE FROM duplicate_cases WHERE server_id = $1", server)
        .execute(db)
        .await?;
    Ok(())
}

/// Erases the cases opened by `cutoff`.
pub(crate) async fn delete_older(
    db: impl sqlx::PgExecutor<'_>,
    cutoff: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    sqlx::query!("DELETE FROM duplicate_cases WHERE opened_at <= $1", cutoff)
        .execute(db)
        .await?;
    Ok(())
}
