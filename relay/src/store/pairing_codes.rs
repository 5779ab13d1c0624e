//! `pairing_codes`: each server's live pairing code, as a keyed hash of
//! the code: one per server (a new request replaces it), single use,
//! until it expires.
//!
//! Written by a server's request (`telegram/pairing.rs`, through `ws.rs`),
//! its use (`telegram/pairing.rs`) and the sweep.

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// Makes `code_hash` the server's code until `expires`, replacing any
/// earlier one; a unique violation when another server's live code has
/// this hash.
pub(crate) async fn replace(
    db: impl sqlx::PgExecutor<'_>,
    code_hash: &[u8],
    server: Uuid,
    expires: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        r#"INSERT INTO pairing_codes (code_hash, server_id, expires_at) VALUES ($1, $2, $3)
               ON CONFLICT (server_id) DO UPDATE SET code_hash = $1, expires_at = $3"#,
        code_hash,
        server,
        expires,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Consumes the code with `code_hash` if it is live at `now`; its server.
pub(crate) async fn take(
    db: impl sqlx::PgExecutor<'_>,
    code_hash: &[u8],
    now: DateTime<Utc>,
) -> Result<Option<Uuid>, sqlx::Error> {
    sqlx::query_scalar!(
        "DELETE FROM pairing_codes WHERE code_hash = $1 AND expires_at > $2 RETURNING server_id",
        code_hash,
        now,
    )
    .fetch_optional(db)
    .await
}

/// Erases the codes expired by `now`.
pub(crate) async fn delete_expired(
    db: impl sqlx::PgExecutor<'_>,
    now: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    sqlx::query!("DELETE FROM pairing_codes WHERE expires_at <= $1", now)
        .execute(db)
        .await?;
    Ok(())
}
