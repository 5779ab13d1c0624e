//! `registration_counts`: registrations per address and day, the address
//! kept only as a keyed hash; the rows go when their day is over.
//!
//! Written by registration (`servers.rs`) and the sweep.

use chrono::NaiveDate;

/// Counts one registration from `address_hash` on `day`; the day's count
/// so far, this one included.
pub(crate) async fn count_one(
    db: impl sqlx::PgExecutor<'_>,
    address_hash: &[u8],
    day: NaiveDate,
) -> Result<i32, sqlx::Error> {
    sqlx::query_scalar!(
        r#"INSERT INTO registration_counts (address_hash, day, registrations)
           VALUES ($1, $2, 1)
           ON CONFLICT (address_hash, day)
           DO UPDATE SET registrations = registration_counts.registrations + 1
           RETURNING registrations"#,
        address_hash,
        day,
    )
    .fetch_one(db)
    .await
}

/// Erases the counts of the days before `today`; how many.
pub(crate) async fn delete_before(
    db: impl sqlx::PgExecutor<'_>,
    today: NaiveDate,
) -> Result<u64, sqlx::Error> {
    Ok(
        sqlx::query!("DELETE FROM registration_counts WHERE day < $1", today)
            .execute(db)
            .await?
            .rows_affected(),
    )
}
