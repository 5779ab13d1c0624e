//! A relay taken over, in the end-to-end tests: what its database tells it
//! of a message it delivered, deliveries it queues as its outbox would, and
//! taps it signs with its own approval key (from its database, as the
//! relay signs them) — with nobody in the chat.

use crate::paired::{CHAT, Paired};
use aromba_botfake::state::Sent;
use aromba_relay::telegram::signing::{ApprovalKey, Covered};
use aromba_relay_proto::frame::{Delivery, TapProof};

/// What the relay knows of a message it delivered: the server, the
/// Worker's id for it, the action its tapped buttons carry, and the
/// SHA-256 of its text.
pub struct Known {
    pub server: String,
    pub message: String,
    pub action: Option<String>,
    pub text_sha256: String,
}

pub async fn known(p: &Paired, shown: &Sent) -> Known {
    let (server, message, text_sha256): (String, String, Vec<u8>) = sqlx::query_as(
        "SELECT server_id::text, message::text, text_sha256 FROM chat_messages
         WHERE chat_id = $1 AND telegram_id = $2",
    )
    .bind(CHAT)
    .bind(shown.message_id)
    .fetch_one(&p.bot.db)
    .await
    .expect("the message as the relay recorded it");
    let action: Option<String> = sqlx::query_scalar(
        "SELECT action FROM chat_buttons WHERE server_id = $1::text::uuid AND message = $2::text::uuid
         AND action IS NOT NULL LIMIT 1",
    )
    .bind(&server)
    .bind(&message)
    .fetch_optional(&p.bot.db)
    .await
    .expect("the buttons");
    Known {
        server,
        message,
        action,
        text_sha256: text_sha256.iter().map(|b| format!("{b:02x}")).collect(),
    }
}

/// The relay queues `delivery` for `server` as its outbox would: a row and
/// its notification.
pub async fn delivers(p: &Paired, server: &str, delivery: &Delivery) {
    let body = serde_json::to_string(delivery).expect("a delivery");
    sqlx::query(
        "WITH inserted AS (
             INSERT INTO outbox (server_id, delivery, created_at)
             VALUES ($1::text::uuid, $2::text::jsonb, now()) RETURNING id)
         SELECT pg_notify($3, $1 || ':' || id::text) FROM inserted",
    )
    .bind(server)
    .bind(&body)
    .bind(aromba_relay::outbox::CHANNEL)
    .execute(&p.bot.db)
    .await
    .expect("the delivery queued");
}

fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("now")
        .as_secs()
}

/// A tap on `button` (labelled `label`) of the message `k`, signed now with
/// the relay's own key over exactly what the relay signs for a person's
/// tap: a valid relay signature, and nobody tapped.
pub async fn signed_tap(p: &Paired, k: &Known, button: &str, label: &str) -> Delivery {
    let key = ApprovalKey::from_database(&p.bot.db)
        .await
        .expect("the relay's approval key");
    let action = k.action.clone().expect("an action on the message");
    let time = now_s();
    let covered = Covered {
        server: k.server.parse().expect("a uuid"),
        action: &action,
        text_sha256: &k.text_sha256,
        button,
        label,
        chat: CHAT,
        time,
    };
    Delivery::Tap {
        message: k.message.parse().expect("a uuid"),
        button: button.into(),
        proof: TapProof {
            action: Some(action.clone()),
            label: label.into(),
            chat: CHAT,
            time,
            text_sha256: k.text_sha256.clone(),
            signature: key.sign(&covered).expect("signed"),
        },
    }
}

/// The server the person's chat is paired with, as the relay's database
/// says.
pub async fn server(p: &Paired) -> String {
    sqlx::query_scalar("SELECT server_id::text FROM pairings WHERE chat_id = $1")
        .bind(CHAT)
        .fetch_one(&p.bot.db)
        .await
        .expect("the chat is paired")
}

/// The relay signs Approve on the message `shown` (once it is recorded)
/// with its own key and delivers the tap to `server`, as if the person had
/// tapped it.
pub async fn approves(p: &Paired, server: &str, shown: &Sent) {
    p.bot.wait_recorded(shown).await;
    let k = known(p, shown).await;
    let tap = signed_tap(p, &k, "approve", "Approve").await;
    delivers(p, server, &tap).await;
}
