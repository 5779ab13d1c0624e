//! `servers`: each registered server, by the id it generated: the keyed
//! hash of its token, its boot, how it was installed, when it registered
//! and paired, the head of its Warden journal as it last reported it, and
//! its connection generation.
//!
//! Written by registration (`servers.rs`), the WebSocket (`ws.rs`: the
//! journal head), the outbox writers (`outbox.rs`: the generations),
//! pairing and the relay's own buttons (`telegram/pairing.rs`,
//! `telegram/choices.rs`) and the sweep. Also here: the hello's lookup,
//! which asks `pairings` whether the server is paired, and the pairing's
//! mark, which counts the pairing in `daily_counts` in the same statement.

use chrono::{DateTime, NaiveDate, Utc};
use uuid::Uuid;

/// Erases the servers never paired that registered by `cutoff`; how many.
pub(crate) async fn delete_unpaired(
    db: impl sqlx::PgExecutor<'_>,
    cutoff: DateTime<Utc>,
) -> Result<u64, sqlx::Error> {
    Ok(sqlx::query!(
        // Locked in id order, as the outbox writers lock servers, so the
        // sweep and a batch never deadlock.
        "DELETE FROM servers WHERE id IN (
             SELECT id FROM servers WHERE paired_at IS NULL AND registered_at <= $1
             ORDER BY id FOR UPDATE)",
        cutoff
    )
    .execute(db)
    .await?
    .rows_affected())
}

/// Locks the rows of `ids` (sorted, no repeats) in id order; the ids
/// registered.
pub(crate) async fn lock_in_id_order(
    conn: &mut sqlx::PgConnection,
    ids: &[Uuid],
) -> Result<Vec<Uuid>, sqlx::Error> {
    sqlx::query_scalar!(
        "SELECT id FROM servers WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE",
        ids,
    )
    .fetch_all(conn)
    .await
}

/// A server's newest connection generation.
pub(crate) struct Generation {
    pub(crate) id: Uuid,
    pub(crate) generation: i64,
}

/// Moves each server's generation on by the times it appears in `servers`
/// and tells every replica on `channel` (`server:generation`) when the
/// transaction commits.
pub(crate) async fn bump_generations(
    conn: &mut sqlx::PgConnection,
    servers: &[Uuid],
    channel: &str,
) -> Result<Vec<Generation>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"WITH wanted AS (
               SELECT id, count(*) AS n FROM unnest($1::uuid[]) AS t(id) GROUP BY id),
           bumped AS (
               UPDATE servers s SET connection_gen = s.connection_gen + w.n
               FROM wanted w WHERE s.id = w.id
               RETURNING s.id, s.connection_gen),
           notified AS (
               SELECT pg_notify($2, id::text || ':' || connection_gen::text) FROM bumped)
           SELECT id AS "id!", connection_gen AS "generation!",
                  (SELECT count(*) FROM notified) AS "notified!"
           FROM bumped"#,
        servers,
        channel,
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| Generation {
            id: r.id,
            generation: r.generation,
        })
        .collect())
}

/// The server's current connection generation; `None` when it is unknown.
pub(crate) async fn generation(
    db: impl sqlx::PgExecutor<'_>,
    server: Uuid,
) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar!("SELECT connection_gen FROM servers WHERE id = $1", server)
        .fetch_optional(db)
        .await
}

/// A registration as it is recorded.
pub(crate) struct NewServer<'a> {
    pub(crate) id: Uuid,
    pub(crate) token_hash: &'a [u8],
    pub(crate) boot_id: Uuid,
    pub(crate) install_source: &'a str,
    pub(crate) registered_at: DateTime<Utc>,
}

/// Records a new server; `None` when its id is taken already.
pub(crate) async fn insert_new(
    db: impl sqlx::PgExecutor<'_>,
    new: NewServer<'_>,
) -> Result<Option<Uuid>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"INSERT INTO servers (id, token_hash, boot_id, install_source, registered_at)
           VALUES ($1, $2, $3, $4, $5)
           ON CONFLICT (id) DO NOTHING
           RETURNING id"#,
        new.id,
        new.token_hash,
        new.boot_id,
        new.install_source,
        new.registered_at,
    )
    .fetch_optional(db)
    .await
}

/// Who a known server is: its token's hash and its boot.
pub(crate) struct Identity {
    pub(crate) token_hash: Vec<u8>,
    pub(crate) boot_id: Uuid,
}

/// A known server's identity, its row locked for the transaction.
pub(crate) async fn lock_identity(
    db: impl sqlx::PgExecutor<'_>,
    id: Uuid,
) -> Result<Identity, sqlx::Error> {
    let row = sqlx::query!(
        "SELECT token_hash, boot_id FROM servers WHERE id = $1 FOR UPDATE",
        id
    )
    .fetch_one(db)
    .await?;
    Ok(Identity {
        token_hash: row.token_hash,
        boot_id: row.boot_id,
    })
}

/// What a hello is checked against.
pub(crate) struct Credentials {
    pub(crate) token_hash: Vec<u8>,
    /// A chat is paired with the server.
    pub(crate) paired: bool,
}

/// The server's token hash, and whether it is paired; `None` when unknown.
pub(crate) async fn credentials(
    db: impl sqlx::PgExecutor<'_>,
    id: Uuid,
) -> Result<Option<Credentials>, sqlx::Error> {
    let row = sqlx::query!(
        r#"SELECT s.token_hash,
                  EXISTS (SELECT 1 FROM pairings p WHERE p.server_id = s.id) AS "paired!"
           FROM servers s WHERE s.id = $1"#,
        id
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(|r| Credentials {
        token_hash: r.token_hash,
        paired: r.paired,
    }))
}

/// The head of a server's Warden journal as it last reported it.
pub(crate) struct JournalHead {
    pub(crate) seq: Option<i64>,
    pub(crate) hash: Option<String>,
}

/// The journal head kept for `server`; `None` when the server is unknown.
pub(crate) async fn journal_head(
    db: impl sqlx::PgExecutor<'_>,
    server: Uuid,
) -> Result<Option<JournalHead>, sqlx::Error> {
    let row = sqlx::query!(
        "SELECT journal_seq, journal_hash FROM servers WHERE id = $1",
        server
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(|r| JournalHead {
        seq: r.journal_seq,
        hash: r.journal_hash,
    }))
}

/// Moves the journal head to `(seq, hash)` only forward (the same head
/// again is no move back); the rows changed, 1 when it moved or stayed.
pub(crate) async fn advance_journal(
    db: impl sqlx::PgExecutor<'_>,
    server: Uuid,
    seq: i64,
    hash: &str,
) -> Result<u64, sqlx::Error> {
    Ok(sqlx::query!(
        r#"UPDATE servers SET journal_seq = $2, journal_hash = $3
                   WHERE id = $1
                     AND (journal_seq IS NULL OR journal_seq < $2
                          OR (journal_seq = $2 AND journal_hash = $3))"#,
        server,
        seq,
        hash,
    )
    .execute(db)
    .await?
    .rows_affected())
}

/// The server is no longer paired: it counts as registered at `now`, so it
/// goes 24 hours from now unless paired again.
pub(crate) async fn mark_unpaired(
    db: impl sqlx::PgExecutor<'_>,
    server: Uuid,
    now: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE servers SET paired_at = NULL, registered_at = $2 WHERE id = $1",
        server,
        now
    )
    .execute(db)
    .await?;
    Ok(())
}

/// The server takes a new token and boot (a reinstall).
pub(crate) async fn take_identity(
    db: impl sqlx::PgExecutor<'_>,
    server: Uuid,
    token_hash: &[u8],
    boot: Uuid,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE servers SET token_hash = $2, boot_id = $3 WHERE id = $1",
        server,
        token_hash,
        boot
    )
    .execute(db)
    .await?;
    Ok(())
}

/// The server is paired at `now`, and the pairing is counted in
/// `daily_counts` under the server's install source and `day`.
pub(crate) async fn mark_paired(
    db: impl sqlx::PgExecutor<'_>,
    server: Uuid,
    now: DateTime<Utc>,
    day: NaiveDate,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        r#"WITH s AS (UPDATE servers SET paired_at = $2 WHERE id = $1 RETURNING install_source)
           INSERT INTO daily_counts (day, install_source, pairings)
           SELECT $3, install_source, 1 FROM s
           ON CONFLICT (day, install_source)
           DO UPDATE SET pairings = daily_counts.pairings + 1"#,
        server,
        now,
        day,
    )
    .execute(db)
    .await?;
    Ok(())
}
