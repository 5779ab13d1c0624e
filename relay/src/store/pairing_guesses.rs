//! `pairing_guesses`: wrong pairing codes per chat, per account and in
//! all, as keyed hashes: a count per window, and a lock-out.
//!
//! Written by pairing (`telegram/pairing.rs`) and the sweep.

use chrono::{DateTime, Utc};

/// Which of `keys` are locked out at `now`.
pub(crate) async fn locked(
    db: impl sqlx::PgExecutor<'_>,
    keys: &[&[u8]],
    now: DateTime<Utc>,
) -> Result<Vec<Vec<u8>>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT key_hash FROM pairing_guesses
           WHERE key_hash = ANY($1) AND locked_until > $2"#,
        keys as &[&[u8]],
        now,
    )
    .fetch_all(db)
    .await
}

/// A wrong code, counted against each key.
pub(crate) struct Failure<'a> {
    pub(crate) keys: &'a [&'a [u8]],
    pub(crate) now: DateTime<Utc>,
    /// A window that began by this is over: the count starts again.
    pub(crate) window_over: DateTime<Utc>,
    /// The failures a window allows.
    pub(crate) limit: i32,
    pub(crate) lock_until: DateTime<Utc>,
}

/// Counts the failure against each key (a key past its limit is locked
/// until `lock_until`); for each key, whether its lock began now.
pub(crate) async fn count_failure(
    db: impl sqlx::PgExecutor<'_>,
    f: Failure<'_>,
) -> Result<Vec<bool>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"INSERT INTO pairing_guesses (key_hash, window_start, failures, locked_until)
           SELECT k, $2, 1, CASE WHEN 1 >= $4::int THEN $5::timestamptz END FROM unnest($1::bytea[]) AS k
           ON CONFLICT (key_hash) DO UPDATE SET
               window_start = CASE WHEN pairing_guesses.window_start <= $3
                                   THEN $2 ELSE pairing_guesses.window_start END,
               failures = CASE WHEN pairing_guesses.window_start <= $3
                               THEN 1 ELSE pairing_guesses.failures + 1 END,
               locked_until = CASE
                   WHEN (CASE WHEN pairing_guesses.window_start <= $3
                              THEN 1 ELSE pairing_guesses.failures + 1 END) >= $4::int
                   THEN $5::timestamptz ELSE pairing_guesses.locked_until END
           RETURNING COALESCE(pairing_guesses.locked_until = $5::timestamptz, false) AS "began!""#,
        f.keys as &[&[u8]],
        f.now,
        f.window_over,
        f.limit,
        f.lock_until,
    )
    .fetch_all(db)
    .await
}

/// Erases the counts whose window began by `window_over` and whose lock,
/// if any, is over at `now`.
pub(crate) async fn delete_over(
    db: impl sqlx::PgExecutor<'_>,
    window_over: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        r#"DELETE FROM pairing_guesses
           WHERE window_start <= $1 AND (locked_until IS NULL OR locked_until <= $2)"#,
        window_over,
        now
    )
    .execute(db)
    .await?;
    Ok(())
}
