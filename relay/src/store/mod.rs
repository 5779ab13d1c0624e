//! Every statement the relay sends to PostgreSQL, one module per table:
//! handlers, the hub, the writers and the sweep call these functions and
//! hold no SQL of their own (`relay/tests/sql_lives_only_in_the_store.rs`
//! holds them to it).
//!
//! A statement that spans tables lives with the table it writes, or with
//! the one it mainly reads when it writes none; each module's doc names the
//! ones it holds that reach into another table. Each function takes
//! whatever executor its caller holds (the pool, a connection, or
//! `&mut *tx` inside a transaction), so transactions stay where the caller
//! begins and commits them. Each statement's text is what `.sqlx/` keys its
//! offline data by: change one, and run `scripts/sqlx-prepare`.
//!
//! Here, at the root: the statements that touch none of the relay's tables
//! (a transaction's lock wait, an advisory lock, sqlx's own migrations
//! table).

pub(crate) mod chat_buttons;
pub(crate) mod chat_messages;
pub(crate) mod chat_outbox;
pub(crate) mod daily_counts;
pub(crate) mod duplicate_cases;
pub(crate) mod foreign_chats;
pub(crate) mod outbox;
pub(crate) mod pairing_codes;
pub(crate) mod pairing_guesses;
pub(crate) mod pairings;
pub(crate) mod registration_counts;
pub(crate) mod relay_buttons;
pub(crate) mod relay_keys;
pub(crate) mod servers;
pub(crate) mod stranger_replies;
pub(crate) mod telegram_callbacks;
pub(crate) mod telegram_updates;

/// Bounds how long the transaction `conn` is in waits for a lock, to
/// `wait` (PostgreSQL's interval syntax, e.g. `"2s"`).
pub(crate) async fn bound_lock_waits(
    conn: &mut sqlx::PgConnection,
    wait: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query("SELECT set_config('lock_timeout', $1, true)")
        .bind(wait)
        .execute(conn)
        .await?;
    Ok(())
}

/// Tries to take the session-level advisory lock `key` on `conn`; whether
/// it was taken.
pub(crate) async fn try_advisory_lock(
    conn: &mut sqlx::PgConnection,
    key: i64,
) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!(r#"SELECT pg_try_advisory_lock($1) AS "taken!""#, key)
        .fetch_one(conn)
        .await
}

/// The newest migration applied with success, if any. Not checked at
/// compile time: the migrations table is sqlx's own.
pub(crate) async fn newest_migration(
    db: impl sqlx::PgExecutor<'_>,
) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar("SELECT max(version) FROM _sqlx_migrations WHERE success")
        .fetch_one(db)
        .await
}

/// Sends `payloads` on the channel `channel`, in one transaction: every
/// listener gets them together, in order, once it commits (the Mini App's
/// answers, `mini_app/answers.rs`; nothing is kept).
pub(crate) async fn notify_all(
    db: &sqlx::PgPool,
    channel: &str,
    payloads: &[String],
) -> Result<(), sqlx::Error> {
    let mut tx = db.begin().await?;
    for payload in payloads {
        sqlx::query!("SELECT pg_notify($1, $2)", channel, payload)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await
}
