//! What both relay benchmarks need: the error type, settings from the
//! environment, a free port, a child process killed on drop, percentiles,
//! and a scratch database made for one run and dropped after it.

use sqlx::postgres::PgPoolOptions;
use std::error::Error;
use std::future::Future;
use std::time::{SystemTime, UNIX_EPOCH};

pub type R<T> = Result<T, Box<dyn Error + Send + Sync>>;

/// A setting from the environment, or its default.
pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

pub fn free_port() -> R<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

pub fn unix_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// The `p` quantile of `sorted`; NaN when it is empty.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// A child process, killed and reaped when dropped.
pub struct Process {
    pub child: std::process::Child,
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `bench` on a database of its own, `NAME_<pid>` beside the one
/// `DATABASE_URL` names, dropped afterwards whatever the result.
pub async fn on_scratch_database<F, Fut>(name: &str, bench: F) -> R<()>
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = R<()>>,
{
    let admin_url = std::env::var("DATABASE_URL").map_err(|_| "set DATABASE_URL")?;
    let (base, _) = admin_url
        .rsplit_once('/')
        .ok_or("DATABASE_URL ends in a database")?;
    let db_name = format!("{name}_{}", std::process::id());
    let admin = PgPoolOptions::new()
        .max_connections(1)
        .connect(&admin_url)
        .await?;
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {db_name}")))
        .execute(&admin)
        .await?;
    let result = bench(format!("{base}/{db_name}")).await;
    let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE {db_name} WITH (FORCE)"
    )))
    .execute(&admin)
    .await;
    result
}
