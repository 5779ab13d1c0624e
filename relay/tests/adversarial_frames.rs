//! A hostile server (or anyone holding a connection, or any client before
//! its hello) against the relay's WebSocket: frames and hellos replayed,
//! reordered, forged, stale (down to a stamp of `i64::MIN`), oversize or
//! fragmented past the message limit, of the wrong kind, or sent before
//! the hello. Each attack is refused, counted under its reason, and the
//! connection closed with 1008, and the slot it held comes back.

use aromba_testkit::relay as support;

use aromba_relay_proto::client::{Socket, dial, handshake};
use aromba_relay_proto::frame::{
    Body, Button, Delivery, Hello, MAX_MESSAGE, Nonce, PROTOCOL_VERSION,
};
use aromba_relay_proto::session::{Direction, MAX_SKEW_MS, derive, now_ms, seal_raw};
use aromba_relay_proto::token::ServerToken;
use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use sqlx::PgPool;
use std::time::Duration;
use support::{
    Server, TestRelay, closed_with, config, connected, gets_in, journal_head, post_json, raw_ws,
    refusals, start,
};
use tokio::io::AsyncWriteExt;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::Frame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{CloseCode, Data, OpCode};
use uuid::Uuid;

fn head(seq: u64) -> Body {
    Body::JournalHead {
        seq,
        hash: "ab".repeat(32),
    }
}

async fn refused(relay: &TestRelay, ws: &mut Socket, reason: &str) {
    assert_eq!(closed_with(ws).await, u16::from(CloseCode::Policy));
    assert_eq!(refusals(relay, reason).await, 1, "refusals under {reason}");
}

#[sqlx::test(migrations = false)]
async fn replayed_frame_is_refused(db: PgPool) {
    let relay = start(db, config()).await;
    let (_, mut ws, session) = connected(&relay).await;
    let frame = seal_raw(session.sealing_key(), 1, now_ms(), &head(1));
    ws.send(Message::Text(frame.clone().into()))
        .await
        .expect("send");
    ws.send(Message::Text(frame.into())).await.expect("send");
    refused(&relay, &mut ws, "replay").await;
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn reordered_frame_is_refused(db: PgPool) {
    let relay = start(db, config()).await;
    let (_, mut ws, session) = connected(&relay).await;
    let second = seal_raw(session.sealing_key(), 2, now_ms(), &head(1));
    ws.send(Message::Text(second.into())).await.expect("send");
    refused(&relay, &mut ws, "reorder").await;
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn stale_frame_is_refused(db: PgPool) {
    let relay = start(db, config()).await;
    let (_, mut ws, session) = connected(&relay).await;
    let old = seal_raw(
        session.sealing_key(),
        1,
        now_ms() - MAX_SKEW_MS - 1_000,
        &head(1),
    );
    ws.send(Message::Text(old.into())).await.expect("send");
    refused(&relay, &mut ws, "stale").await;
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn forged_frame_is_refused(db: PgPool) {
    let relay = start(db, config()).await;
    let (_, mut ws, session) = connected(&relay).await;
    let frame = seal_raw(session.sealing_key(), 1, now_ms(), &head(1));
    let forged = frame.replace("\"seq\":1", "\"seq\":9");
    assert_ne!(frame, forged);
    ws.send(Message::Text(forged.into())).await.expect("send");
    refused(&relay, &mut ws, "forged").await;
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn frame_sealed_with_the_relays_own_key_is_refused(db: PgPool) {
    // Reflection: a frame the relay sealed, sent back to it.
    let relay = start(db, config()).await;
    let server = Server::new();
    assert_eq!(post_json(&relay, &server.registration()).await.0, 201);
    let endpoint = server.endpoint(&relay);
    let mut ws = dial(&endpoint).await.expect("dial");
    let hello = Hello::new(server.id, server.token.clone());
    ws.send(Message::Text(
        serde_json::to_string(&hello).expect("json").into(),
    ))
    .await
    .expect("send");
    let Some(Ok(Message::Text(accept))) = ws.next().await else {
        panic!("no accept")
    };
    let accept: aromba_relay_proto::frame::Accept =
        serde_json::from_str(accept.as_str()).expect("accept");
    ws.send(Message::Text(accept.welcome.into()))
        .await
        .expect("send");
    refused(&relay, &mut ws, "forged").await;
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn oversize_frame_is_refused(db: PgPool) {
    let relay = start(db, config()).await;
    let (_, mut ws, _) = connected(&relay).await;
    let big = "x".repeat(MAX_MESSAGE + 1);
    let _ = ws.send(Message::Text(big.into())).await;
    let code = closed_with(&mut ws).await;
    // tungstenite refuses the message as it reads it; the relay closes.
    assert!(
        code == u16::from(CloseCode::Policy) || code == u16::from(CloseCode::Size) || code == 1006,
        "closed with {code}"
    );
    assert_eq!(refusals(&relay, "oversize").await, 1);
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn hello_with_a_wrong_token_is_refused(db: PgPool) {
    let relay = start(db, config()).await;
    let mut server = Server::new();
    assert_eq!(post_json(&relay, &server.registration()).await.0, 201);
    server.token = ServerToken::generate();
    let endpoint = server.endpoint(&relay);
    let mut ws = dial(&endpoint).await.expect("dial");
    assert!(handshake(&mut ws, &endpoint).await.is_err());
    assert_eq!(refusals(&relay, "bad_token").await, 1);
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn hello_for_an_unknown_server_is_refused_like_a_wrong_token(db: PgPool) {
    let relay = start(db, config()).await;
    let server = Server::new();
    let endpoint = server.endpoint(&relay);
    let mut ws = dial(&endpoint).await.expect("dial");
    assert!(handshake(&mut ws, &endpoint).await.is_err());
    assert_eq!(refusals(&relay, "bad_token").await, 1);
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn stale_hello_is_refused(db: PgPool) {
    let relay = start(db, config()).await;
    let server = Server::new();
    assert_eq!(post_json(&relay, &server.registration()).await.0, 201);
    let mut ws = dial(&server.endpoint(&relay)).await.expect("dial");
    let mut hello = Hello::new(server.id, server.token.clone());
    hello.ts -= MAX_SKEW_MS + 1_000;
    ws.send(Message::Text(
        serde_json::to_string(&hello).expect("json").into(),
    ))
    .await
    .expect("send");
    refused(&relay, &mut ws, "stale").await;
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn hello_with_unknown_fields_or_version_is_refused(db: PgPool) {
    let relay = start(db, config()).await;
    let server = Server::new();
    assert_eq!(post_json(&relay, &server.registration()).await.0, 201);
    let mut hello =
        serde_json::to_value(Hello::new(server.id, server.token.clone())).expect("json");
    hello["admin"] = serde_json::json!(true);
    let mut ws = dial(&server.endpoint(&relay)).await.expect("dial");
    ws.send(Message::Text(hello.to_string().into()))
        .await
        .expect("send");
    refused(&relay, &mut ws, "hello_malformed").await;
    hello.as_object_mut().expect("object").remove("admin");
    hello["v"] = serde_json::json!(PROTOCOL_VERSION + 1);
    let mut ws = dial(&server.endpoint(&relay)).await.expect("dial");
    ws.send(Message::Text(hello.to_string().into()))
        .await
        .expect("send");
    refused(&relay, &mut ws, "hello_version").await;
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn silence_instead_of_a_hello_is_cut_off(db: PgPool) {
    let mut c = config();
    c.limits.hello_timeout_ms = 200;
    let relay = start(db, c).await;
    let server = Server::new();
    let mut ws = dial(&server.endpoint(&relay)).await.expect("dial");
    refused(&relay, &mut ws, "hello_timeout").await;
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn server_sending_a_relay_only_frame_is_refused(db: PgPool) {
    // A server may not pretend to be the relay (a delivery, a pairing code).
    let relay = start(db, config()).await;
    let (_, mut ws, mut session) = connected(&relay).await;
    session
        .send(
            &mut ws,
            &Body::Deliver {
                id: 1,
                delivery: Delivery::Message { text: "hi".into() },
            },
        )
        .await
        .expect("send");
    refused(&relay, &mut ws, "unexpected_frame").await;
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn message_longer_than_telegram_allows_is_refused(db: PgPool) {
    let relay = start(db, config()).await;
    let (_, mut ws, mut session) = connected(&relay).await;
    session
        .send(
            &mut ws,
            &Body::Send {
                id: Uuid::new_v4(),
                text: "a".repeat(4097),
                buttons: vec![Button {
                    id: "ok".into(),
                    label: "OK".into(),
                    action: None,
                    app: None,
                }],
                monospace: Vec::new(),
            },
        )
        .await
        .expect("send");
    refused(&relay, &mut ws, "content").await;
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn binary_message_is_refused(db: PgPool) {
    let relay = start(db, config()).await;
    let (_, mut ws, _) = connected(&relay).await;
    ws.send(Message::Binary(vec![1, 2, 3].into()))
        .await
        .expect("send");
    refused(&relay, &mut ws, "malformed").await;
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn journal_head_going_back_is_refused(db: PgPool) {
    let relay = start(db, config()).await;
    let (_, mut ws, mut session) = connected(&relay).await;
    session.send(&mut ws, &head(10)).await.expect("send");
    session.send(&mut ws, &head(9)).await.expect("send");
    refused(&relay, &mut ws, "journal_rollback").await;
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn the_derived_keys_differ_per_session(db: PgPool) {
    // A frame sealed in one session does not open in the next.
    let relay = start(db, config()).await;
    let (server, mut ws, mut session) = connected(&relay).await;
    session.send(&mut ws, &head(1)).await.expect("send");
    let old_key_frame = seal_raw(session.sealing_key(), 1, now_ms(), &head(2));
    drop(ws);
    let (mut ws2, _) = support::connect(&relay, &server).await;
    ws2.send(Message::Text(old_key_frame.into()))
        .await
        .expect("send");
    refused(&relay, &mut ws2, "forged").await;
    let _ = derive(
        &server.token,
        &Nonce::random(),
        &Nonce::random(),
        Direction::ServerToRelay,
    );
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_server_that_stops_answering_pings_is_closed(db: PgPool) {
    // A peer that holds its connection open but reads nothing (so answers
    // no ping) does not hold a slot for ever.
    let mut c = config();
    c.limits.ping_secs = 1;
    let relay = start(db, c).await;
    let (_, mut ws, _) = connected(&relay).await;
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    // Two pings came, unanswered; then the relay closed (the client's
    // late pongs meet a closed socket).
    let mut pings = 0;
    while let Some(Ok(m)) = ws.next().await {
        if matches!(m, Message::Ping(_)) {
            pings += 1;
        }
    }
    assert_eq!(pings, 2);
    assert_eq!(refusals(&relay, "missed_pongs").await, 1);
    relay.stop().await;
}

// ---------------------------------------------------------------------------
// Stamps at i64::MIN, frames before the hello, messages past the limit.

#[sqlx::test(migrations = false)]
async fn a_frame_stamped_at_i64_min_is_refused_as_stale(db: PgPool) {
    // With overflow checks (every debug and test build) the subtraction
    // panics inside the session task: no error frame, no count, and the
    // `sockets` decrement after `session()` never runs. Without them (the
    // release profile) the arithmetic wraps, and a frame stamped exactly
    // `now - 2^63` passes the skew check, since `i64::MIN.abs()` is
    // negative. The client's Opener is the same code, facing the relay.
    let mut c = config();
    c.limits.max_connections = 1;
    let relay = start(db.clone(), c).await;
    let (server, mut ws, session) = connected(&relay).await;
    let frame = seal_raw(
        session.sealing_key(),
        1,
        i64::MIN,
        &journal_head(1, &"d".repeat(64)),
    );
    ws.send(Message::Text(frame.into())).await.expect("send");
    assert_eq!(closed_with(&mut ws).await, u16::from(CloseCode::Policy));
    assert_eq!(refusals(&relay, "stale").await, 1);
    // The slot came back: the same server connects again.
    assert!(
        gets_in(&relay, &server).await,
        "the panicked session kept its slot"
    );
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_hello_stamped_at_i64_min_is_refused_without_leaking_a_slot(db: PgPool) {
    // The clock is checked before the token, so this needs no token at
    // all: every such hello panics the upgrade task before
    // `sockets.fetch_sub` runs, and `max_connections` of them shut the
    // relay to every server for good. (Release builds wrap instead, and
    // a hello stamped exactly `now - 2^63` passes the skew check.)
    let mut c = config();
    c.limits.max_connections = 2;
    let relay = start(db.clone(), c).await;
    let honest = Server::new();
    assert_eq!(post_json(&relay, &honest.registration()).await.0, 201);
    for _ in 0..2 {
        let stranger = Server::new();
        let mut ws = raw_ws(&relay, "127.0.0.2", None).await;
        let hello = json!({"v": PROTOCOL_VERSION, "server_id": stranger.id,
            "token": stranger.token.expose(), "nonce": Nonce::random(), "ts": i64::MIN});
        ws.send(Message::Text(hello.to_string().into()))
            .await
            .expect("send");
        assert_eq!(closed_with(&mut ws).await, u16::from(CloseCode::Policy));
    }
    assert_eq!(refusals(&relay, "stale").await, 2);
    assert!(
        gets_in(&relay, &honest).await,
        "two anonymous hellos took every slot for good"
    );
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_frame_sent_before_the_hello_is_refused(db: PgPool) {
    // A ping, a binary message or a sealed frame in place of the hello.
    let relay = start(db.clone(), config()).await;
    let server = Server::new();
    assert_eq!(post_json(&relay, &server.registration()).await.0, 201);
    let key = derive(
        &server.token,
        &Nonce::random(),
        &Nonce::random(),
        Direction::ServerToRelay,
    );
    let sealed = seal_raw(&key, 1, now_ms(), &journal_head(1, &"c".repeat(64)));
    for first in [
        Message::Ping(vec![1; 16].into()),
        Message::Binary(vec![0; 64].into()),
        Message::Text(sealed.into()),
    ] {
        let mut ws = raw_ws(&relay, "127.0.0.1", None).await;
        ws.send(first).await.expect("send");
        assert_eq!(closed_with(&mut ws).await, u16::from(CloseCode::Policy));
    }
    assert_eq!(refusals(&relay, "hello_malformed").await, 3);
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_huge_or_fragmented_message_is_refused_before_it_is_buffered(db: PgPool) {
    // A frame header that announces 1 GiB, before the hello.
    let relay = start(db.clone(), config()).await;
    let mut ws = raw_ws(&relay, "127.0.0.1", None).await;
    let mut header = vec![0x81u8, 0xff];
    header.extend_from_slice(&(1u64 << 30).to_be_bytes());
    header.extend_from_slice(&[1, 2, 3, 4]);
    ws.get_mut().write_all(&header).await.expect("write");
    ws.get_mut().write_all(&[b'x'; 1024]).await.expect("write");
    let _ = closed_with(&mut ws).await;
    assert_eq!(refusals(&relay, "oversize").await, 1);
    // After the hello: 30 KiB in fragments of 10 KiB, each under the frame
    // limit, together over the message limit.
    let (_, mut ws, _) = connected(&relay).await;
    let piece = vec![b' '; 10 * 1024];
    let _ = ws
        .send(Message::Frame(Frame::message(
            piece.clone(),
            OpCode::Data(Data::Text),
            false,
        )))
        .await;
    for last in [false, true] {
        let _ = ws
            .send(Message::Frame(Frame::message(
                piece.clone(),
                OpCode::Data(Data::Continue),
                last,
            )))
            .await;
    }
    let code = closed_with(&mut ws).await;
    assert!(
        code == u16::from(CloseCode::Policy) || code == u16::from(CloseCode::Size) || code == 1006,
        "closed with {code}"
    );
    assert_eq!(refusals(&relay, "oversize").await, 2);
    relay.stop().await;
}
