//! What waits for a server, in PostgreSQL: the one source of truth.
//!
//! A delivery is a row until the server acknowledges it (then it is
//! deleted) or for 24 hours at most (the sweep). Enqueueing notifies every
//! replica with ids only (`server:row`); the replica that holds the
//! server's socket wakes that connection, which reads its rows. At least
//! once, by id: the server drops what it has seen.

use aromba_proto::frame::Delivery;
use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

/// The channel every replica listens on for deliveries (`server:row`).
pub const CHANNEL: &str = "aromba_outbox";
/// The channel for new connections (`server:generation`).
pub const CONNECTIONS: &str = "aromba_connection";

/// Takes the server's next connection generation and tells every replica.
pub async fn next_generation(db: &PgPool, server: Uuid) -> Result<i64, OutboxError> {
    let row = sqlx::query!(
        r#"WITH bumped AS (
               UPDATE servers SET connection_gen = connection_gen + 1
               WHERE id = $1 RETURNING connection_gen),
           notified AS (
               SELECT pg_notify($2, $1::text || ':' || connection_gen::text) FROM bumped)
           SELECT connection_gen AS "generation!", (SELECT count(*) FROM notified) AS "notified!"
           FROM bumped"#,
        server,
        CONNECTIONS,
    )
    .fetch_optional(db)
    .await?
    .ok_or(OutboxError::UnknownServer(server))?;
    Ok(row.generation)
}

/// The server's current connection generation.
pub async fn generation(db: &PgPool, server: Uuid) -> Result<i64, OutboxError> {
    sqlx::query_scalar!("SELECT connection_gen FROM servers WHERE id = $1", server)
        .fetch_optional(db)
        .await?
        .ok_or(OutboxError::UnknownServer(server))
}

#[derive(Debug, thiserror::Error)]
pub enum OutboxError {
    #[error("no server {0} is registered")]
    UnknownServer(Uuid),
    #[error("the database refused the outbox operation")]
    Db(#[from] sqlx::Error),
    #[error("a stored delivery is not a delivery")]
    Corrupt(#[from] serde_json::Error),
}

/// Queues `delivery` for `server`; past `max_pending` rows the oldest go.
/// Returns the row's id and how many were dropped.
pub async fn enqueue(
    db: &PgPool,
    server: Uuid,
    delivery: &Delivery,
    now: DateTime<Utc>,
    max_pending: i64,
) -> Result<(i64, u64), OutboxError> {
    let body = serde_json::to_value(delivery)?;
    // One statement, one round trip. The server's row is locked first, so
    // enqueues for one server take their ids and commit in the same order:
    // a connection that has sent up to id N never misses a row below N
    // that commits later. The DELETE sees the table as it was before the
    // INSERT, so it keeps `max_pending - 1` older rows.
    let row = sqlx::query!(
        r#"WITH locked AS (
               SELECT id FROM servers WHERE id = $1 FOR NO KEY UPDATE),
           inserted AS (
               INSERT INTO outbox (server_id, delivery, created_at)
               SELECT id, $2, $3 FROM locked
               RETURNING id),
           dropped AS (
               DELETE FROM outbox WHERE id IN (
                   SELECT id FROM outbox
                   WHERE server_id = $1 AND EXISTS (SELECT 1 FROM inserted)
                   ORDER BY id DESC OFFSET $4)
               RETURNING 1),
           notified AS (
               SELECT pg_notify($5, $1::text || ':' || inserted.id::text) FROM inserted)
           SELECT inserted.id AS "id!",
                  (SELECT count(*) FROM dropped) AS "dropped!",
                  (SELECT count(*) FROM notified) AS "notified!"
           FROM inserted"#,
        server,
        body,
        now,
        (max_pending - 1).max(0),
        CHANNEL,
    )
    .fetch_optional(db)
    .await?
    .ok_or(OutboxError::UnknownServer(server))?;
    Ok((row.id, u64::try_from(row.dropped).unwrap_or(0)))
}

/// A delivery read back for sending.
pub struct Pending {
    pub id: i64,
    pub delivery: Delivery,
}

/// The server's rows after `after`, oldest first, at most `limit`.
pub async fn pending_after(
    db: &PgPool,
    server: Uuid,
    after: i64,
    limit: i64,
) -> Result<Vec<Pending>, OutboxError> {
    let rows = sqlx::query!(
        r#"SELECT id, delivery FROM outbox
           WHERE server_id = $1 AND id > $2 ORDER BY id LIMIT $3"#,
        server,
        after,
        limit,
    )
    .fetch_all(db)
    .await?;
    rows.into_iter()
        .map(|r| {
            Ok(Pending {
                id: r.id,
                delivery: serde_json::from_value(r.delivery)?,
            })
        })
        .collect()
}

/// The server acknowledged row `id`: its body goes now. Returns when it was
/// enqueued, if it was still there (a duplicate ack finds nothing).
pub async fn acknowledge(
    db: &PgPool,
    server: Uuid,
    id: i64,
) -> Result<Option<DateTime<Utc>>, OutboxError> {
    Ok(sqlx::query_scalar!(
        "DELETE FROM outbox WHERE id = $1 AND server_id = $2 RETURNING created_at",
        id,
        server,
    )
    .fetch_optional(db)
    .await?)
}

/// Deliveries waiting, all servers.
pub async fn depth(db: &PgPool) -> Result<i64, OutboxError> {
    Ok(
        sqlx::query_scalar!(r#"SELECT count(*) AS "n!" FROM outbox"#)
            .fetch_one(db)
            .await?,
    )
}

/// Parses a notification's payload, `server:row`.
pub fn parse_notification(payload: &str) -> Option<(Uuid, i64)> {
    let (server, id) = payload.split_once(':')?;
    Some((server.parse().ok()?, id.parse().ok()?))
}
