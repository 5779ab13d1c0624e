//! The background sweeps: what the specification says the relay may not
//! keep past a time goes at that time.
//!
//! - unpaired servers, 24 hours after they registered;
//! - deliveries and chat messages, 24 hours after they were queued, and a
//!   secret as soon as no server would take it (`SECRET_WITHIN_S`);
//! - duplicate cases the chat has not decided, 24 hours after they opened;
//! - registration counts, once their day is over.

use crate::state::App;
use chrono::Duration;
use std::time::Duration as StdDuration;

/// How long anything the sweep erases may live.
pub(crate) const RETENTION_HOURS: i64 = 24;

/// What one sweep erased.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Swept {
    pub servers: u64,
    pub deliveries: u64,
    pub chat_messages: u64,
    pub counts: u64,
}

/// Runs every sweep once, at the relay clock's now.
pub(crate) async fn sweep_once(app: &App) -> Result<Swept, sqlx::Error> {
    let now = app.config.clock.now();
    let cutoff = now - Duration::hours(RETENTION_HOURS);
    let servers = sqlx::query!(
        // Locked in id order, as the outbox writers lock servers, so the
        // sweep and a batch never deadlock.
        "DELETE FROM servers WHERE id IN (
             SELECT id FROM servers WHERE paired_at IS NULL AND registered_at <= $1
             ORDER BY id FOR UPDATE)",
        cutoff
    )
    .execute(&app.db)
    .await?
    .rows_affected();
    let deliveries = sqlx::query!(
        "DELETE FROM outbox WHERE id IN (
             SELECT id FROM outbox WHERE created_at <= $1 ORDER BY id FOR UPDATE)",
        cutoff
    )
    .execute(&app.db)
    .await?
    .rows_affected();
    // A secret (a PIN) is of use only while the server waits for it, as
    // long as the chat's message is taken for one: one no server took by
    // then goes (found by the attack round: it waited the 24 hours).
    let secrets_cutoff = now - Duration::seconds(crate::ws::SECRET_WITHIN_S);
    let secrets = sqlx::query!(
        "DELETE FROM outbox WHERE id IN (
             SELECT id FROM outbox
             WHERE delivery->>'kind' = 'secret' AND created_at <= $1
             ORDER BY id FOR UPDATE)",
        secrets_cutoff
    )
    .execute(&app.db)
    .await?
    .rows_affected();
    let deliveries = deliveries + secrets;
    let chat_messages = sqlx::query!("DELETE FROM chat_outbox WHERE created_at <= $1", cutoff)
        .execute(&app.db)
        .await?
        .rows_affected();
    sqlx::query!("DELETE FROM duplicate_cases WHERE opened_at <= $1", cutoff)
        .execute(&app.db)
        .await?;
    forget_telegram(app, now).await?;
    let counts = sqlx::query!(
        "DELETE FROM registration_counts WHERE day < $1",
        now.date_naive()
    )
    .execute(&app.db)
    .await?
    .rows_affected();
    if let Ok(depth) = crate::outbox::depth(&app.db).await {
        app.metrics.outbox_depth.set(depth);
    }
    Ok(Swept {
        servers,
        deliveries,
        chat_messages,
        counts,
    })
}

/// The Telegram side's bookkeeping: update ids after 24 hours, pairing
/// codes once expired, guess counts once their window and lock are over,
/// the relay's questions after 24 hours, and what was delivered to chats
/// (ids and hashes) once its buttons may no longer be tapped.
async fn forget_telegram(app: &App, now: chrono::DateTime<chrono::Utc>) -> Result<(), sqlx::Error> {
    let cutoff = now - Duration::hours(RETENTION_HOURS);
    sqlx::query!("DELETE FROM telegram_updates WHERE seen_at <= $1", cutoff)
        .execute(&app.db)
        .await?;
    sqlx::query!("DELETE FROM telegram_callbacks WHERE seen_at <= $1", cutoff)
        .execute(&app.db)
        .await?;
    sqlx::query!("DELETE FROM pairing_codes WHERE expires_at <= $1", now)
        .execute(&app.db)
        .await?;
    sqlx::query!(
        r#"DELETE FROM pairing_guesses
           WHERE window_start <= $1 AND (locked_until IS NULL OR locked_until <= $2)"#,
        cutoff,
        now
    )
    .execute(&app.db)
    .await?;
    let strangers = now - Duration::days(crate::telegram::FOREIGN_DAYS);
    sqlx::query!("DELETE FROM foreign_chats WHERE told_at <= $1", strangers)
        .execute(&app.db)
        .await?;
    let told_window = app
        .telegram
        .as_ref()
        .map(|t| t.config.limits.stranger_window)
        .unwrap_or(StdDuration::from_secs(60));
    sqlx::query!(
        "DELETE FROM stranger_replies WHERE told_at <= $1",
        now - Duration::from_std(told_window).unwrap_or(Duration::minutes(1))
    )
    .execute(&app.db)
    .await?;
    sqlx::query!("DELETE FROM relay_buttons WHERE created_at <= $1", cutoff)
        .execute(&app.db)
        .await?;
    let buttons_live = app
        .telegram
        .as_ref()
        .map(|t| t.config.limits.buttons_live)
        .unwrap_or(StdDuration::from_secs(7 * 24 * 3600));
    let delivered_cutoff = now - Duration::from_std(buttons_live).unwrap_or(Duration::days(7));
    sqlx::query!(
        "DELETE FROM chat_messages WHERE sent_at <= $1",
        delivered_cutoff
    )
    .execute(&app.db)
    .await?;
    Ok(())
}

/// Sweeps forever at the configured interval.
pub(crate) async fn run(app: App) {
    let mut every = tokio::time::interval(StdDuration::from_millis(
        app.config.limits.sweep_every_ms.max(10),
    ));
    loop {
        every.tick().await;
        match sweep_once(&app).await {
            Ok(swept) if swept != Swept::default() => tracing::info!(
                servers = swept.servers,
                deliveries = swept.deliveries,
                chat_messages = swept.chat_messages,
                counts = swept.counts,
                "swept"
            ),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "sweep failed"),
        }
    }
}
