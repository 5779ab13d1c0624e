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

/// The channel every replica listens on.
pub const CHANNEL: &str = "aromba_outbox";

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
    let mut tx = db.begin().await?;
    let id = sqlx::query_scalar!(
        r#"INSERT INTO outbox (server_id, delivery, created_at)
           SELECT id, $2, $3 FROM servers WHERE id = $1
           RETURNING id"#,
        server,
        body,
        now,
    )
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(OutboxError::UnknownServer(server))?;
    let dropped = sqlx::query!(
        r#"DELETE FROM outbox WHERE id IN (
               SELECT id FROM outbox WHERE server_id = $1
               ORDER BY id DESC OFFSET $2)"#,
        server,
        max_pending,
    )
    .execute(&mut *tx)
    .await?
    .rows_affected();
    sqlx::query!(
        "SELECT pg_notify($1, $2)",
        CHANNEL,
        format!("{server}:{id}")
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok((id, dropped))
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
