//! A hostile server (or any client before its hello) against the relay's
//! oversize detection, which since 47b2955 tells an oversize frame or
//! message by tungstenite's `Error::Capacity` type (`relay/src/ws.rs`,
//! `is_oversize`) instead of by its words. What it tries: every way to
//! make tungstenite refuse a size — one frame over the limit, a message
//! over it in fragments (before and after the hello, with pings between
//! the fragments), a binary frame, a control frame over its own 125-byte
//! limit — and a frame of exactly the limit. What must hold: each size
//! refusal is counted under `oversize` (and nothing else is), the socket's
//! slot — the pending pool's before the hello, the connection's after —
//! comes back, and a frame at the limit is not an oversize one.
//!
//! An attack that breaks something stays here, `#[ignore]`d with the word
//! BREAK and one line saying what; an attack that fails is a plain test.

use aromba_testkit::relay as support;

use aromba_relay_proto::frame::MAX_MESSAGE;
use futures_util::SinkExt;
use sqlx::PgPool;
use support::{
    Server, TestRelay, closed_with, config_with, connected, gets_in, post_json, raw_ws, refusals,
    start,
};
use tokio::io::AsyncWriteExt;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::Frame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{CloseCode, Data, OpCode};

/// A relay with room for one socket waiting for its hello and one
/// connected server: a slot not given back shows as the next server not
/// getting in.
async fn one_slot(db: PgPool) -> TestRelay {
    start(
        db,
        config_with(|l| {
            l.max_pending_hellos = 1;
            l.max_connections = 1;
            l.max_unpaired_connections = 1;
        }),
    )
    .await
}

/// The close codes a size refusal may end with: the relay's 1008 after
/// its sealed error, tungstenite's 1009, or the TCP connection just
/// ending (tungstenite may refuse to write after its read error).
fn a_refusal(code: u16) -> bool {
    code == u16::from(CloseCode::Policy) || code == u16::from(CloseCode::Size) || code == 1006
}

/// Every reason the relay counts: an oversize attack must show under
/// `oversize` and under no other.
const OTHER_REASONS: &[&str] = &[
    "hello_malformed",
    "hello_timeout",
    "malformed",
    "forged",
    "frame_rate",
    "at_capacity",
];

async fn only_oversize(relay: &TestRelay, want: u64) {
    assert_eq!(refusals(relay, "oversize").await, want, "oversize");
    for reason in OTHER_REASONS {
        assert_eq!(refusals(relay, reason).await, 0, "{reason}");
    }
}

async fn a_new_server_gets_in(relay: &TestRelay) {
    let server = Server::new();
    assert_eq!(post_json(relay, &server.registration()).await.0, 201);
    assert!(
        gets_in(relay, &server).await,
        "the attacker's slot was not given back"
    );
}

/// A message over the limit in fragments, each under it, before the
/// hello: refused by tungstenite as a `Capacity` error, counted under
/// `oversize` (not `hello_malformed`), and the pending slot comes back.
#[sqlx::test(migrations = false)]
async fn a_fragmented_hello_past_the_limit_is_oversize_and_gives_its_slot_back(db: PgPool) {
    let relay = one_slot(db).await;
    let mut ws = raw_ws(&relay, "127.0.0.1", None).await;
    let piece = vec![b' '; MAX_MESSAGE / 2];
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
    assert!(a_refusal(code), "closed with {code}");
    only_oversize(&relay, 1).await;
    a_new_server_gets_in(&relay).await;
    relay.stop().await;
}

/// Fragments past the limit with pings between them (which a peer may
/// send mid-message): still a `Capacity` error, still `oversize`.
#[sqlx::test(migrations = false)]
async fn fragments_past_the_limit_with_pings_between_are_oversize(db: PgPool) {
    let relay = one_slot(db).await;
    let (_, mut ws, _) = connected(&relay).await;
    let piece = vec![b' '; MAX_MESSAGE / 3];
    let _ = ws
        .send(Message::Frame(Frame::message(
            piece.clone(),
            OpCode::Data(Data::Text),
            false,
        )))
        .await;
    for last in [false, false, true] {
        let _ = ws.send(Message::Ping(vec![1, 2, 3].into())).await;
        let _ = ws
            .send(Message::Frame(Frame::message(
                piece.clone(),
                OpCode::Data(Data::Continue),
                last,
            )))
            .await;
    }
    let code = closed_with(&mut ws).await;
    assert!(a_refusal(code), "closed with {code}");
    only_oversize(&relay, 1).await;
    drop(ws);
    a_new_server_gets_in(&relay).await;
    relay.stop().await;
}

/// A binary frame over the limit after the hello is refused by its size,
/// before its kind: `oversize`, not `malformed` (a small binary frame is
/// `malformed`), and the connection's slot comes back.
#[sqlx::test(migrations = false)]
async fn an_oversize_binary_frame_is_oversize_not_malformed(db: PgPool) {
    let relay = one_slot(db).await;
    let (_, mut ws, _) = connected(&relay).await;
    let _ = ws
        .send(Message::Binary(vec![0u8; MAX_MESSAGE + 1].into()))
        .await;
    let code = closed_with(&mut ws).await;
    assert!(a_refusal(code), "closed with {code}");
    only_oversize(&relay, 1).await;
    drop(ws);
    a_new_server_gets_in(&relay).await;
    relay.stop().await;
}

/// A control frame over its own limit of 125 bytes (but far under the
/// relay's) is a protocol error, not a size refusal: not counted as
/// `oversize` — before the hello it is a malformed hello, after it the
/// connection just ends — and either way its slot comes back. A control
/// frame over the relay's limit is `oversize` like any frame.
#[sqlx::test(migrations = false)]
async fn a_control_frame_over_125_bytes_is_not_oversize_and_frees_its_slot(db: PgPool) {
    let relay = one_slot(db).await;
    // Before the hello, by hand: a masked ping of 126 bytes.
    let mut ws = raw_ws(&relay, "127.0.0.1", None).await;
    let mut ping = vec![0x89u8, 0x80 | 126, 0, 126, 1, 2, 3, 4];
    ping.extend_from_slice(&[0u8; 126]);
    ws.get_mut().write_all(&ping).await.expect("write");
    let _ = closed_with(&mut ws).await;
    assert_eq!(refusals(&relay, "oversize").await, 0);
    assert_eq!(refusals(&relay, "hello_malformed").await, 1);
    // A ping announcing more than the relay's limit: oversize.
    let mut ws = raw_ws(&relay, "127.0.0.1", None).await;
    let mut huge = vec![0x89u8, 0x80 | 127];
    huge.extend_from_slice(&((MAX_MESSAGE as u64) + 1).to_be_bytes());
    huge.extend_from_slice(&[1, 2, 3, 4]);
    ws.get_mut().write_all(&huge).await.expect("write");
    let _ = closed_with(&mut ws).await;
    assert_eq!(refusals(&relay, "oversize").await, 1);
    // After the hello: the 126-byte ping ends the connection uncounted.
    let (_, mut ws, _) = connected(&relay).await;
    let _ = ws.send(Message::Frame(Frame::ping(vec![0u8; 126]))).await;
    let _ = closed_with(&mut ws).await;
    assert_eq!(refusals(&relay, "oversize").await, 1);
    drop(ws);
    a_new_server_gets_in(&relay).await;
    relay.stop().await;
}

/// A text frame of exactly the limit is not an oversize one: it reaches
/// the relay's own check (not a sealed frame: refused under that reason),
/// and `oversize` stays at zero.
#[sqlx::test(migrations = false)]
async fn a_frame_of_exactly_the_limit_is_not_oversize(db: PgPool) {
    let relay = one_slot(db).await;
    let (_, mut ws, _) = connected(&relay).await;
    let _ = ws.send(Message::Text("x".repeat(MAX_MESSAGE).into())).await;
    let code = closed_with(&mut ws).await;
    assert_eq!(code, u16::from(CloseCode::Policy));
    assert_eq!(refusals(&relay, "oversize").await, 0);
    let text = relay.metrics_text().await;
    assert!(
        text.lines()
            .any(|l| l.starts_with("aromba_relay_refusals_total{") && !l.ends_with(" 0")),
        "refused under some reason:\n{text}"
    );
    relay.stop().await;
}
