//! `relay_keys`: the key the relay signs forwarded taps and anchors with
//! (minisign), made at the first start unless the operator names a key
//! file, so every replica signs with the same one.
//!
//! Written and read by `telegram/signing.rs` at start.

/// Keeps the key pair under `name` unless one is kept there already.
pub(crate) async fn insert_if_absent(
    db: impl sqlx::PgExecutor<'_>,
    name: &str,
    secret_key: &str,
    public_key: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        r#"INSERT INTO relay_keys (name, secret_key, public_key, created_at)
               VALUES ($1, $2, $3, now()) ON CONFLICT (name) DO NOTHING"#,
        name,
        secret_key,
        public_key,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// The secret key kept under `name`.
pub(crate) async fn secret_key(
    db: impl sqlx::PgExecutor<'_>,
    name: &str,
) -> Result<String, sqlx::Error> {
    sqlx::query_scalar!("SELECT secret_key FROM relay_keys WHERE name = $1", name)
        .fetch_one(db)
        .await
}
