//! The database: migrations at start, readiness.

use sqlx::PgPool;
use sqlx::migrate::Migrator;

/// The relay's schema, compiled in from `migrations/`.
pub static MIGRATOR: Migrator = sqlx::migrate!("../migrations");

#[derive(Debug, thiserror::Error)]
pub enum NotReady {
    #[error("the database does not answer")]
    Unreachable(#[source] sqlx::Error),
    #[error("the database's schema is at migration {have:?}, this relay needs {want}")]
    Behind { have: Option<i64>, want: i64 },
}

/// The database answers and every migration this build knows is applied.
pub async fn ready(db: &PgPool) -> Result<(), NotReady> {
    let want = MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0);
    let have = crate::store::newest_migration(db)
        .await
        .map_err(NotReady::Unreachable)?;
    if have.unwrap_or(0) < want {
        return Err(NotReady::Behind { have, want });
    }
    Ok(())
}
