//! `daily_counts`: kept for good, installs and pairings per day and
//! install source, nothing else.
//!
//! Written by registration (`servers.rs`: an install); a pairing is counted
//! by the statement that marks the server paired
//! ([`super::servers::mark_paired`]), which lives with `servers`.

use chrono::NaiveDate;

/// Counts an install from `install_source` on `day`.
pub(crate) async fn count_install(
    db: impl sqlx::PgExecutor<'_>,
    day: NaiveDate,
    install_source: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        r#"INSERT INTO daily_counts (day, install_source, installs) VALUES ($1, $2, 1)
               ON CONFLICT (day, install_source)
               DO UPDATE SET installs = daily_counts.installs + 1"#,
        day,
        install_source,
    )
    .execute(db)
    .await?;
    Ok(())
}
