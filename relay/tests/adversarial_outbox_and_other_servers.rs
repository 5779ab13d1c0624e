//! A server holding a valid token (a hostile Worker, or a thief of the
//! token) against what the relay keeps for servers. What it tries: to
//! acknowledge away another server's delivery, to overwrite another
//! server's chat message by reusing its id, to take a server's deliveries
//! on another replica while the server stays connected, to fork its own
//! journal head at the same line, to fill the chat outbox without bound
//! (paired, or with no chat at all), and to send a text PostgreSQL cannot
//! hold. What holds: each server's rows are its own (another's ack or id
//! changes nothing, a second connection on any replica replaces the first
//! with 4001), a kept head is never rewritten, the outbox keeps a bounded
//! number of rows per server, and a text the database refuses is refused
//! as content and closed with 1008.

use aromba_testkit::relay as support;

use aromba_relay::outbox::enqueue;
use aromba_relay_proto::frame::{Body, Button, Delivery};
use futures_util::StreamExt;
use sqlx::PgPool;
use std::time::Duration;
use support::{
    closed_with, config, connect, connected, journal_head, next_unacked_delivery, refusals, start,
};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use uuid::Uuid;

fn send_body(id: Uuid, text: &str) -> Body {
    Body::Send {
        id,
        text: text.into(),
        buttons: vec![Button {
            id: "ok".into(),
            label: "OK".into(),
            action: None,
            app: None,
        }],
        monospace: Vec::new(),
    }
}

// ---------------------------------------------------------------------------
// Another server's rows.

#[sqlx::test(migrations = false)]
async fn a_server_cannot_acknowledge_another_servers_delivery(db: PgPool) {
    let relay = start(db.clone(), config()).await;
    let (victim, _victim_ws, _victim_session) = connected(&relay).await;
    let (_, mut ws, mut session) = connected(&relay).await;
    let (id, _) = enqueue(
        &db,
        victim.id,
        &Delivery::Message {
            text: "for the victim".into(),
        },
        chrono::Utc::now(),
        100,
    )
    .await
    .expect("enqueue");
    session
        .send(&mut ws, &Body::AckDelivery { id })
        .await
        .expect("send");
    // An acknowledgement must name a delivery this connection was sent:
    // refused, and the connection closed.
    assert_eq!(closed_with(&mut ws).await, 1008);
    assert_eq!(refusals(&relay, "unexpected_ack").await, 1);
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM outbox WHERE id = $1")
        .bind(id)
        .fetch_one(&db)
        .await
        .expect("count");
    assert_eq!(
        left, 1,
        "another server's ack deleted the victim's delivery"
    );
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_server_cannot_overwrite_another_servers_chat_message_by_reusing_its_id(db: PgPool) {
    let relay = start(db.clone(), config()).await;
    let (victim, mut vws, mut vsession) = connected(&relay).await;
    let (_, mut ws, mut session) = connected(&relay).await;
    let id = Uuid::new_v4();
    vsession
        .send(&mut vws, &send_body(id, "the real question"))
        .await
        .expect("send");
    assert_eq!(
        vsession.recv(&mut vws).await.expect("ack"),
        Body::AckMessage { id }
    );
    session
        .send(&mut ws, &send_body(id, "a forged question"))
        .await
        .expect("send");
    assert_eq!(
        session.recv(&mut ws).await.expect("ack"),
        Body::AckMessage { id }
    );
    let body: serde_json::Value =
        sqlx::query_scalar("SELECT body FROM chat_outbox WHERE server_id = $1 AND id = $2")
            .bind(victim.id)
            .bind(id)
            .fetch_one(&db)
            .await
            .expect("the victim's row");
    assert_eq!(body["text"], "the real question");
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_connection_on_another_replica_replaces_the_first(db: PgPool) {
    // SECURITY.md: one connection per server, a new one replaces the old
    // (4001). The hub is in one replica's memory: a stolen token used on
    // replica B receives (and acknowledges away) deliveries while the real
    // server stays connected on replica A and notices nothing.
    let a = start(db.clone(), config()).await;
    let b = start(db.clone(), config()).await;
    let (server, mut first, _) = connected(&a).await;
    let (mut second, mut session) = connect(&b, &server).await;
    let (id, _) = enqueue(
        &db,
        server.id,
        &Delivery::Message {
            text: "approve?".into(),
        },
        chrono::Utc::now(),
        100,
    )
    .await
    .expect("enqueue");
    assert_eq!(next_unacked_delivery(&mut second, &mut session).await.0, id);
    let code = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match first.next().await {
                Some(Ok(Message::Close(Some(f)))) => break u16::from(f.code),
                Some(Ok(_)) => continue,
                _ => break 1006,
            }
        }
    })
    .await;
    assert_eq!(
        code.ok(),
        Some(aromba_relay::ws::CLOSE_REPLACED),
        "the first connection was not replaced"
    );
    a.stop().await;
    b.stop().await;
}

// ---------------------------------------------------------------------------
// Its own rows: the journal head and the outbox.

#[sqlx::test(migrations = false)]
async fn a_journal_head_rewritten_at_the_same_seq_is_refused(db: PgPool) {
    // The relay keeps the head so that a journal that goes back is noticed.
    // `journal_seq <= $2` lets the same seq through with any hash: a fork.
    let relay = start(db.clone(), config()).await;
    let (server, mut ws, mut session) = connected(&relay).await;
    let first = "a".repeat(64);
    let forked = "b".repeat(64);
    session
        .send(&mut ws, &journal_head(10, &first))
        .await
        .expect("send");
    session
        .send(&mut ws, &journal_head(10, &forked))
        .await
        .expect("send");
    // A probe that answers only if both heads were taken.
    let probe = Uuid::new_v4();
    let _ = session.send(&mut ws, &send_body(probe, "probe")).await;
    let answer = tokio::time::timeout(Duration::from_secs(10), session.recv(&mut ws)).await;
    let kept: String = sqlx::query_scalar("SELECT journal_hash FROM servers WHERE id = $1")
        .bind(server.id)
        .fetch_one(&db)
        .await
        .expect("row");
    assert_eq!(kept, first, "the kept head was rewritten");
    assert!(
        !matches!(answer, Ok(Ok(Body::AckMessage { id })) if id == probe),
        "the forked head was accepted and the connection went on"
    );
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_hostile_server_fills_the_chat_outbox_without_bound(db: PgPool) {
    // The delivery outbox keeps at most `max_pending` rows per server; the
    // chat outbox, fed by the server itself, keeps every distinct id for 24
    // hours. A hostile server sends as fast as the relay inserts.
    let relay = start(db.clone(), config()).await;
    let bound = aromba_relay::Limits::default().max_pending;
    let (server, mut ws, mut session) = connected(&relay).await;
    for i in 0..(bound + 100) {
        if session
            .send(&mut ws, &send_body(Uuid::new_v4(), &format!("filler {i}")))
            .await
            .is_err()
        {
            break;
        }
        match tokio::time::timeout(Duration::from_secs(10), session.recv(&mut ws)).await {
            Ok(Ok(Body::AckMessage { .. })) => continue,
            // Refused or closed: the relay put a bound on it.
            _ => break,
        }
    }
    let kept: i64 = sqlx::query_scalar("SELECT count(*) FROM chat_outbox WHERE server_id = $1")
        .bind(server.id)
        .fetch_one(&db)
        .await
        .expect("count");
    assert!(
        kept <= bound,
        "{kept} chat messages kept for one server; the bound is {bound}"
    );
    relay.stop().await;
}

/// A server nobody paired can still send chat messages, and the relay
/// keeps up to `max_chat_pending` of them (24 KiB frames) for a chat that
/// does not exist, for a day. Registration is open (20 a day per /64), so
/// every /64 of an attacker's is ~47 MB a day of rows that go nowhere.
/// An unpaired server's messages should be refused (or a handful kept).
#[sqlx::test(migrations = false)]
async fn an_unpaired_server_cannot_make_the_relay_keep_messages_for_nobody(db: PgPool) {
    let relay = start(db.clone(), config()).await;
    let (server, mut ws, mut session) = support::connected(&relay).await;
    let text: String = "€".repeat(4_000);
    let mut acked = 0;
    for _ in 0..60 {
        let id = uuid::Uuid::new_v4();
        if session
            .send(
                &mut ws,
                &Body::Send {
                    id,
                    text: text.clone(),
                    buttons: Vec::new(),
                    monospace: Vec::new(),
                },
            )
            .await
            .is_err()
        {
            break;
        }
        match tokio::time::timeout(Duration::from_secs(5), session.recv(&mut ws)).await {
            Ok(Ok(Body::AckMessage { id: a })) if a == id => acked += 1,
            _ => break,
        }
    }
    let (rows, bytes): (i64, Option<i64>) = sqlx::query_as(
        "SELECT count(*), sum(octet_length(body::text))::bigint FROM chat_outbox WHERE server_id = $1",
    )
    .bind(server.id)
    .fetch_one(&db)
    .await
    .expect("count");
    assert!(
        rows <= 8,
        "an unpaired server had the relay keep {rows} messages ({} KiB) for no chat \
         ({acked} acknowledged)",
        bytes.unwrap_or(0) / 1024
    );
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_send_whose_text_holds_nul_is_refused_as_content(db: PgPool) {
    // SECURITY.md: anything out of bounds is counted under its reason,
    // answered with an error frame and closed with 1008. A NUL in the text
    // passes `Body::check` and reaches the INSERT, which PostgreSQL refuses
    // (jsonb cannot hold \u0000): the relay takes the failure path instead.
    let relay = start(db.clone(), config()).await;
    let (_, mut ws, mut session) = connected(&relay).await;
    session
        .send(&mut ws, &send_body(Uuid::new_v4(), "before\u{0}after"))
        .await
        .expect("send");
    assert_eq!(closed_with(&mut ws).await, u16::from(CloseCode::Policy));
    assert_eq!(refusals(&relay, "content").await, 1);
    relay.stop().await;
}
