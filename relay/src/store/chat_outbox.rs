//! `chat_outbox`: what a server sent for its chat (a message or an edit,
//! as its frame's JSON), by the id the server gave it, in the order it
//! came, until the sender delivers or drops it, or the sweep erases it.
//!
//! Written by each server's connection (`ws.rs`), the sender
//! (`telegram/outbound.rs`) and the sweep. Its statements read `pairings`
//! too: the room a server has depends on whether it is paired, and a round
//! takes only paired servers' messages, to their chats.

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// A message from a server for its chat.
pub(crate) struct Message {
    pub(crate) server: Uuid,
    pub(crate) id: Uuid,
    pub(crate) body: serde_json::Value,
    pub(crate) now: DateTime<Utc>,
    /// The room a paired server has.
    pub(crate) max_paired: i64,
    /// The room a server nobody paired has.
    pub(crate) max_unpaired: i64,
}

/// What became of a message: kept already under its id, or kept now
/// (neither: no room).
pub(crate) struct Kept {
    pub(crate) known: bool,
    pub(crate) stored: bool,
}

/// Keeps the message once by its id, while its server has room. A message
/// the sender delivered already is known too (found by the chaos test: a
/// server whose acknowledgement was lost with a killed replica sent the
/// message again after it had left the outbox, and the chat got it twice).
pub(crate) async fn keep(db: impl sqlx::PgExecutor<'_>, m: Message) -> Result<Kept, sqlx::Error> {
    let row = sqlx::query!(
        r#"WITH existing AS (
                       SELECT 1 AS one FROM chat_outbox WHERE server_id = $1 AND id = $2
                       UNION ALL
                       SELECT 1 AS one FROM chat_messages WHERE server_id = $1 AND message = $2),
                   room AS (
                       SELECT count(*) < CASE
                                  WHEN EXISTS (SELECT 1 FROM pairings WHERE server_id = $1)
                                  THEN $5::bigint ELSE $6::bigint END AS ok
                       FROM chat_outbox WHERE server_id = $1),
                   inserted AS (
                       INSERT INTO chat_outbox (server_id, id, body, created_at)
                       SELECT $1, $2, $3, $4
                       WHERE NOT EXISTS (SELECT 1 FROM existing) AND (SELECT ok FROM room)
                       ON CONFLICT (server_id, id) DO NOTHING
                       RETURNING 1 AS one)
                   SELECT EXISTS (SELECT 1 FROM existing) AS "known!",
                          EXISTS (SELECT 1 FROM inserted) AS "stored!""#,
        m.server,
        m.id,
        m.body,
        m.now,
        m.max_paired,
        m.max_unpaired,
    )
    .fetch_one(db)
    .await?;
    Ok(Kept {
        known: row.known,
        stored: row.stored,
    })
}

/// The oldest waiting message of a paired server, with its chat.
pub(crate) struct Head {
    pub(crate) server_id: Uuid,
    pub(crate) id: Uuid,
    pub(crate) body: serde_json::Value,
    pub(crate) chat_id: i64,
}

/// The oldest message of each paired server whose chat is not in
/// `waiting`, the servers served longest ago first, at most `limit`.
pub(crate) async fn heads(
    db: impl sqlx::PgExecutor<'_>,
    limit: i64,
    waiting: &[i64],
) -> Result<Vec<Head>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT server_id AS "server_id!", id AS "id!", body AS "body!", chat_id AS "chat_id!"
           FROM (SELECT DISTINCT ON (o.server_id) o.server_id, o.id, o.body, o.seq, p.chat_id,
                        p.last_sent_at
                 FROM chat_outbox o JOIN pairings p ON p.server_id = o.server_id
                 WHERE NOT (p.chat_id = ANY($2))
                 ORDER BY o.server_id, o.seq) heads
           ORDER BY last_sent_at ASC NULLS FIRST, seq LIMIT $1"#,
        limit,
        waiting,
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| Head {
            server_id: r.server_id,
            id: r.id,
            body: r.body,
            chat_id: r.chat_id,
        })
        .collect())
}

/// Counts a send of the message begun; how many have been, this one
/// included (more than 1: an earlier one may have reached the chat).
/// `None` when the message is no longer queued: delivered by another
/// replica meanwhile (two can send for a moment after PostgreSQL restarts
/// and the sender's lock with it), expired or unpaired — it is not sent.
pub(crate) async fn attempt(
    db: impl sqlx::PgExecutor<'_>,
    server: Uuid,
    id: Uuid,
) -> Result<Option<i32>, sqlx::Error> {
    let attempts = sqlx::query_scalar!(
        "UPDATE chat_outbox SET attempts = attempts + 1 WHERE server_id = $1 AND id = $2
         RETURNING attempts",
        server,
        id
    )
    .fetch_optional(db)
    .await?;
    Ok(attempts)
}

/// Deletes a message's body: it was delivered, or it never will be.
pub(crate) async fn forget(
    conn: &mut sqlx::PgConnection,
    server: Uuid,
    id: Uuid,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "DELETE FROM chat_outbox WHERE server_id = $1 AND id = $2",
        server,
        id
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Erases the messages queued by `cutoff`; how many.
pub(crate) async fn delete_older(
    db: impl sqlx::PgExecutor<'_>,
    cutoff: DateTime<Utc>,
) -> Result<u64, sqlx::Error> {
    Ok(
        sqlx::query!("DELETE FROM chat_outbox WHERE created_at <= $1", cutoff)
            .execute(db)
            .await?
            .rows_affected(),
    )
}
