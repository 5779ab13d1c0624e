//! `outbox`: what waits for a server (a chat message, a tap, an app's ask) as
//! a JSON delivery, by a row id that only grows, until the server
//! acknowledges it or the sweep erases it.
//!
//! Written by the outbox writers (`outbox.rs`, through the group commit in
//! `writer.rs`) and the sweep; read by each server's connection (`ws.rs`).

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// Takes `n` row ids, in no given order.
pub(crate) async fn take_ids(
    conn: &mut sqlx::PgConnection,
    n: i32,
) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT nextval(pg_get_serial_sequence('outbox', 'id')) AS "id!"
           FROM generate_series(1, $1::int)"#,
        n,
    )
    .fetch_all(conn)
    .await
}

/// The rows to insert, column by column, and the notifications to send
/// on `channel` (`server:row`, the newest row of each server).
pub(crate) struct Rows<'a> {
    pub(crate) ids: &'a [i64],
    pub(crate) servers: &'a [Uuid],
    pub(crate) deliveries: &'a [serde_json::Value],
    pub(crate) created: &'a [DateTime<Utc>],
    pub(crate) channel: &'a str,
    pub(crate) notify_servers: &'a [Uuid],
    pub(crate) notify_ids: &'a [i64],
}

/// Inserts the rows and queues their notifications (ids only) in one
/// statement; the notifications go out when the transaction commits.
pub(crate) async fn insert_and_notify(
    conn: &mut sqlx::PgConnection,
    rows: Rows<'_>,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        r#"WITH inserted AS (
               INSERT INTO outbox (id, server_id, delivery, created_at) OVERRIDING SYSTEM VALUE
               SELECT * FROM unnest($1::bigint[], $2::uuid[], $3::jsonb[], $4::timestamptz[])
               RETURNING 1),
           notified AS (
               SELECT pg_notify($5, s::text || ':' || m::text)
               FROM unnest($6::uuid[], $7::bigint[]) AS t(s, m))
           SELECT (SELECT count(*) FROM inserted) AS "inserted!",
                  (SELECT count(*) FROM notified) AS "notified!""#,
        rows.ids,
        rows.servers,
        rows.deliveries,
        rows.created,
        rows.channel,
        rows.notify_servers,
        rows.notify_ids,
    )
    .fetch_one(conn)
    .await?;
    Ok(())
}

/// Deletes each of `servers`' oldest rows past its newest `keep`, locked
/// in id order; how many.
pub(crate) async fn drop_past_bound(
    conn: &mut sqlx::PgConnection,
    servers: &[Uuid],
    keep: i64,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        r#"WITH dropped AS (
               DELETE FROM outbox WHERE id IN (
                   SELECT id FROM outbox WHERE id IN (
                       SELECT id FROM (
                           SELECT id, row_number() OVER (PARTITION BY server_id ORDER BY id DESC) AS n
                           FROM outbox WHERE server_id = ANY($1)) ranked
                       WHERE n > $2)
                   ORDER BY id FOR UPDATE)
               RETURNING 1)
           SELECT count(*) AS "dropped!" FROM dropped"#,
        servers,
        keep,
    )
    .fetch_one(conn)
    .await
}

/// A row as it was queued.
pub(crate) struct Row {
    pub(crate) id: i64,
    pub(crate) delivery: serde_json::Value,
}

/// The server's rows after `after`, oldest first, at most `limit`.
pub(crate) async fn after(
    db: impl sqlx::PgExecutor<'_>,
    server: Uuid,
    after: i64,
    limit: i64,
) -> Result<Vec<Row>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT id, delivery FROM outbox
           WHERE server_id = $1 AND id > $2 ORDER BY id LIMIT $3"#,
        server,
        after,
        limit,
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| Row {
            id: r.id,
            delivery: r.delivery,
        })
        .collect())
}

/// Deletes each row `ids[i]` of server `servers[i]` still there, locked in
/// id order; when each deleted row was queued.
pub(crate) async fn delete_acknowledged(
    conn: &mut sqlx::PgConnection,
    servers: &[Uuid],
    ids: &[i64],
) -> Result<Vec<DateTime<Utc>>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"WITH doomed AS (
               SELECT o.id FROM outbox o
               JOIN unnest($1::uuid[], $2::bigint[]) AS a(s, id) ON o.id = a.id AND o.server_id = a.s
               ORDER BY o.id FOR UPDATE OF o)
           DELETE FROM outbox WHERE id IN (SELECT id FROM doomed)
           RETURNING created_at"#,
        servers,
        ids,
    )
    .fetch_all(conn)
    .await
}

/// Rows waiting, all servers.
pub(crate) async fn count(db: impl sqlx::PgExecutor<'_>) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(r#"SELECT count(*) AS "n!" FROM outbox"#)
        .fetch_one(db)
        .await
}

/// Erases the rows queued by `cutoff`, locked in id order; how many.
pub(crate) async fn delete_older(
    db: impl sqlx::PgExecutor<'_>,
    cutoff: DateTime<Utc>,
) -> Result<u64, sqlx::Error> {
    Ok(sqlx::query!(
        "DELETE FROM outbox WHERE id IN (
             SELECT id FROM outbox WHERE created_at <= $1 ORDER BY id FOR UPDATE)",
        cutoff
    )
    .execute(db)
    .await?
    .rows_affected())
}
