//! The background sweeps: what the specification says the relay may not
//! keep past a time goes at that time.
//!
//! - unpaired servers, 24 hours after they registered;
//! - deliveries and chat messages, 24 hours after they were queued;
//! - duplicate cases the chat has not decided, 24 hours after they opened;
//! - registration counts, once their day is over.

use crate::state::App;
use crate::store;
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
    let servers = store::servers::delete_unpaired(&app.db, cutoff).await?;
    let deliveries = store::outbox::delete_older(&app.db, cutoff).await?;
    let chat_messages = store::chat_outbox::delete_older(&app.db, cutoff).await?;
    store::duplicate_cases::delete_older(&app.db, cutoff).await?;
    forget_telegram(app, now).await?;
    let counts = store::registration_counts::delete_before(&app.db, now.date_naive()).await?;
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
    store::telegram_updates::delete_older(&app.db, cutoff).await?;
    store::telegram_callbacks::delete_older(&app.db, cutoff).await?;
    store::pairing_codes::delete_expired(&app.db, now).await?;
    store::pairing_guesses::delete_over(&app.db, cutoff, now).await?;
    let strangers = now - Duration::days(crate::telegram::FOREIGN_DAYS);
    store::foreign_chats::delete_older(&app.db, strangers).await?;
    let told_window = app
        .telegram
        .as_ref()
        .map(|t| t.config.limits.stranger_window)
        .unwrap_or(StdDuration::from_secs(60));
    store::stranger_replies::delete_older(
        &app.db,
        now - Duration::from_std(told_window).unwrap_or(Duration::minutes(1)),
    )
    .await?;
    store::relay_buttons::delete_older(&app.db, cutoff).await?;
    let buttons_live = app
        .telegram
        .as_ref()
        .map(|t| t.config.limits.buttons_live)
        .unwrap_or(StdDuration::from_secs(7 * 24 * 3600));
    let delivered_cutoff = now - Duration::from_std(buttons_live).unwrap_or(Duration::days(7));
    store::chat_messages::delete_older(&app.db, delivered_cutoff).await?;
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
