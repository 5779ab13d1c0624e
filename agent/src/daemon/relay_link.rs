//! The relay link: `aromba_relay_proto::client::run_with` through the network
//! gate, forever. Deliveries go to the chat task over a bounded channel;
//! one that does not fit is not acknowledged, so the relay delivers it
//! again after a reconnect rather than it being lost. The ladder's
//! commands (`/panic`) go to a channel of their own, which the chat's
//! work never fills.

use aromba_relay_proto::client::{Endpoint, Incoming, Kept, Outgoing, run_with};
use aromba_relay_proto::frame::Delivery;
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{mpsc, watch};

pub async fn hold(
    endpoint: Endpoint,
    outgoing: mpsc::Receiver<Outgoing>,
    deliveries: mpsc::Sender<Incoming>,
    ladder: mpsc::Sender<Incoming>,
    bell: std::sync::Arc<super::chat::PanicBell>,
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
            // Rung, never queued: any number of them is one `/panic`, and
            // none is ever dropped.
            Incoming::Delivery {
                delivery: Delivery::Message { ref text },
                ..
            } if super::chat::is_panic(text) => {
                bell.ring();
                Kept::Yes
            }
            Incoming::Delivery {
                delivery: Delivery::Message { ref text },
                ..
            } if super::chat::is_ladder_command(text) => match ladder.try_send(incoming) {
                Ok(()) => Kept::Yes,
                // A `/trust` already waiting answers this one too.
                Err(TrySendError::Full(_)) => Kept::Yes,
                Err(TrySendError::Closed(_)) => Kept::No,
            },
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
