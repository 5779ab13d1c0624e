//! Every replica listens for outbox notifications (ids only) and wakes the
//! connections it holds, for new connections, which replace an older
//! connection of the same server wherever it is, and for servers' answers
//! to Mini App pages, which it hands to the page waiting here, if any. Notifications sent while the listener's connection
//! was down are lost, so after every reconnect it wakes all of them: each
//! rereads its rows.

use crate::outbox::{CHANNEL, CONNECTIONS, parse_notification};
use crate::state::App;
use sqlx::postgres::PgListener;
use std::time::Duration;

pub(crate) async fn run(app: App) {
    loop {
        let mut listener = match PgListener::connect_with(&app.db).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "outbox listener cannot connect");
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
        };
        if let Err(e) = listener
            .listen_all([CHANNEL, CONNECTIONS, crate::mini_app::answers::CHANNEL])
            .await
        {
            tracing::warn!(error = %e, "outbox listener cannot listen");
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        }
        // Whatever was notified before this point may have been missed.
        app.hub.wake_all();
        loop {
            match listener.try_recv().await {
                Ok(Some(n)) if n.channel() == crate::mini_app::answers::CHANNEL => {
                    app.app_answers.piece(n.payload());
                }
                Ok(Some(n)) => match (n.channel(), parse_notification(n.payload())) {
                    (CHANNEL, Some((server, _row))) => {
                        app.hub.wake(server);
                    }
                    (CONNECTIONS, Some((server, generation))) => {
                        app.hub.superseded(server, generation);
                    }
                    _ => {}
                },
                // The connection dropped: listen anew, then resync.
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "outbox listener lost its connection");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    break;
                }
            }
        }
    }
}
