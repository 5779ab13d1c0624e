//! Long polling (`AROMBA_TELEGRAM_MODE=polling`), for a self-hoster without
//! public HTTPS: one replica at a time (the one holding a PostgreSQL
//! advisory lock) asks `getUpdates` and feeds what comes into the same
//! queues as the webhook. The offset moves past an update once it is
//! settled (handled and committed); an update that reaches two replicas
//! (the lock changed hands) is still handled once, by its `update_id`.

use crate::state::App;
use sqlx::{Connection, PgConnection, PgPool};
use std::sync::Arc;
use std::time::Duration;

/// The advisory lock the polling replica holds.
pub const POLLER_LOCK: i64 = 0x4152_4f4d_4241_0001;

/// A session-level advisory lock on a connection of its own (taken out of
/// the pool: closing it is what releases the lock if this replica dies).
pub async fn take_lock(db: &PgPool, key: i64) -> Option<PgConnection> {
    let mut conn = db.acquire().await.ok()?.detach();
    let taken: bool = crate::store::try_advisory_lock(&mut conn, key).await.ok()?;
    if taken {
        Some(conn)
    } else {
        let _ = conn.close().await;
        None
    }
}

/// Whether the lock's connection is still there (and so the lock).
pub async fn still_held(conn: &mut PgConnection) -> bool {
    tokio::time::timeout(Duration::from_secs(5), conn.ping())
        .await
        .is_ok_and(|r| r.is_ok())
}

pub async fn run(app: App) {
    let Some(telegram) = app.telegram.clone() else {
        return;
    };
    loop {
        let Some(mut lock) = take_lock(&app.db, POLLER_LOCK).await else {
            tokio::time::sleep(telegram.config.limits.lock_retry).await;
            continue;
        };
        tracing::info!("this replica polls Telegram");
        // getUpdates is refused while a webhook is set.
        super::until_done("deleteWebhook", || telegram.client.delete_webhook()).await;
        poll(&app, &telegram, &mut lock).await;
        tracing::warn!("the poller's lock was lost");
    }
}

/// How long the poller waits for a fed update to settle before it asks
/// Telegram for it again.
const SETTLE_WAIT: Duration = Duration::from_secs(15);

/// Polls while the lock holds.
async fn poll(app: &App, telegram: &Arc<super::Telegram>, lock: &mut PgConnection) {
    let mut offset: i32 = 0;
    let mut wait = Duration::from_millis(250);
    // Since when each update not yet settled has been asked for.
    let mut unsettled: std::collections::HashMap<i64, tokio::time::Instant> =
        std::collections::HashMap::new();
    while still_held(lock).await {
        match telegram
            .client
            .get_updates(offset, telegram.config.limits.poll_wait)
            .await
        {
            Ok(updates) => {
                wait = Duration::from_millis(250);
                // The offset moves past an update only once it is settled
                // (handled and committed, or a copy of one that was): a
                // replica killed with updates in its queues leaves them to
                // the next poll (found by the chaos test: moved at
                // queueing, they were lost). Updates after one that is not
                // settled come again, and are dropped as copies.
                let mut settling = Vec::with_capacity(updates.len());
                for update in updates {
                    app.metrics.telegram("update_received");
                    let id = i64::from(update.id.0);
                    let next = i32::try_from(update.id.0)
                        .unwrap_or(i32::MAX)
                        .saturating_add(1);
                    if matches!(update.kind, teloxide::types::UpdateKind::Error(_)) {
                        app.metrics.telegram("update_malformed");
                        settling.push((id, next, None));
                        continue;
                    }
                    let Some(settled) = telegram.inbound.feed(update).await else {
                        return;
                    };
                    settling.push((id, next, Some(settled)));
                }
                let deadline = tokio::time::Instant::now() + SETTLE_WAIT;
                let mut outcomes = Vec::with_capacity(settling.len());
                for (id, next, settled) in settling {
                    let done = match settled {
                        None => true,
                        Some(settled) => matches!(
                            tokio::time::timeout_at(deadline, settled).await,
                            Ok(Ok(super::queue::Settled::Done))
                        ),
                    };
                    outcomes.push((id, next, done));
                }
                let give_up = telegram.config.limits.give_up_after;
                for (i, &(id, next, done)) in outcomes.iter().enumerate() {
                    if !done {
                        // One update that does not settle while later ones
                        // do (so the database works) is not waited for
                        // past `give_up_after`: the poller asks from the
                        // offset, and it would hold up every chat (found
                        // by the attack round: a frozen replica's claim
                        // stalled polling for good).
                        let since = *unsettled
                            .entry(id)
                            .or_insert_with(tokio::time::Instant::now);
                        let later_settled = outcomes[i + 1..].iter().any(|o| o.2);
                        if since.elapsed() < give_up || !later_settled {
                            app.metrics.telegram("update_deferred_unsettled");
                            tokio::time::sleep(wait).await;
                            break;
                        }
                        tracing::warn!("an update did not settle in time; the poller goes past it");
                        app.metrics.telegram("update_given_up");
                    }
                    offset = offset.max(next);
                }
                unsettled.retain(|&id, _| id >= i64::from(offset));
            }
            Err(super::client::CallError::RetryAfter(d)) => {
                tokio::time::sleep(d.min(super::pace::MAX_BOT_PAUSE)).await
            }
            Err(e) => {
                tracing::warn!(error = %e, "getUpdates failed");
                app.metrics.telegram("poll_failed");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(30));
            }
        }
    }
}
