//! The relay link: `aromba_proto::client::run_with` through the network
//! gate, forever. Deliveries go to the chat task over a bounded channel;
//! one that does not fit is not acknowledged, so the relay delivers it
//! again after a reconnect rather than it being lost.

use aromba_proto::client::{Endpoint, Incoming, Kept, Outgoing, run_with};
use tokio::sync::{mpsc, watch};

pub async fn hold(
    endpoint: Endpoint,
    outgoing: mpsc::Receiver<Outgoing>,
    deliveries: mpsc::Sender<Incoming>,
    stop: watch::Receiver<bool>,
) {
    run_with(
        endpoint,
        move |incoming| match incoming {
            Incoming::Connected => {
                tracing::info!("connected to the relay");
                Kept::Yes
            }
            Incoming::Disconnected => {
                tracing::info!("disconnected from the relay");
                Kept::Yes
            }
            other => match deliveries.try_send(other) {
                Ok(()) => Kept::Yes,
                Err(_) => {
                    tracing::warn!("the chat is busy; the delivery waits for the next connection");
                    Kept::No
                }
            },
        },
        outgoing,
        stop,
    )
    .await;
}
