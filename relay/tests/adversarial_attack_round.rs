//! An adversarial round against the running relay: a hostile server holding
//! a valid token, an anonymous internet client, and anyone reading what the
//! relay leaks. Attacks that went through are `#[ignore = "finding: …"]`
//! and assert the secure behaviour (they fail on the code they were found
//! on); attacks the relay withstood run as regression tests.

mod support;

use aromba_proto::client::Socket;
use aromba_proto::frame::{Accept, Body, Button, Delivery, Hello, Nonce, PROTOCOL_VERSION};
use aromba_proto::session::{Direction, derive, now_ms, seal_raw};
use aromba_proto::token::ServerToken;
use aromba_relay::outbox::enqueue;
use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use sqlx::PgPool;
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use support::{
    Server, TestRelay, closed_with, config, connect, connected, post_json, refusals, start,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::Frame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{CloseCode, Data, OpCode};
use uuid::Uuid;

// ---------------------------------------------------------------------------
// Helpers

fn head(seq: u64, hash: &str) -> Body {
    Body::JournalHead {
        seq,
        hash: hash.into(),
    }
}

fn send_body(id: Uuid, text: &str) -> Body {
    Body::Send {
        id,
        text: text.into(),
        buttons: vec![Button {
            id: "ok".into(),
            label: "OK".into(),
            action: None,
        }],
        monospace: Vec::new(),
    }
}

/// The next delivery on a connection, within 10 s.
async fn next_delivery(
    ws: &mut Socket,
    session: &mut aromba_proto::client::Session,
) -> (i64, Delivery) {
    loop {
        let body = tokio::time::timeout(Duration::from_secs(10), session.recv(ws))
            .await
            .expect("a delivery within 10 s")
            .expect("a frame");
        if let Body::Deliver { id, delivery } = body {
            return (id, delivery);
        }
    }
}

/// A WebSocket to the relay from a socket the test shapes: bound to `from`
/// (another loopback address is another client), with a receive buffer of
/// `rcvbuf` bytes when given (a peer that reads slowly, or not at all).
async fn raw_ws(
    relay: &TestRelay,
    from: &str,
    rcvbuf: Option<u32>,
) -> WebSocketStream<tokio::net::TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket
        .bind(format!("{from}:0").parse().expect("addr"))
        .expect("bind");
    if let Some(size) = rcvbuf {
        socket.set_recv_buffer_size(size).expect("rcvbuf");
    }
    let tcp = socket.connect(relay.addr).await.expect("connect");
    let (ws, _) = tokio_tungstenite::client_async(relay.ws_url(), tcp)
        .await
        .expect("upgrade");
    ws
}

/// Sends a correct hello by hand and reads the accept: the key the server
/// seals with in this session.
async fn hand_hello(
    ws: &mut WebSocketStream<tokio::net::TcpStream>,
    server: &Server,
) -> aromba_proto::session::Key {
    let hello = Hello::new(server.id, server.token.clone());
    let nonce = hello.nonce;
    ws.send(Message::Text(
        serde_json::to_string(&hello).expect("json").into(),
    ))
    .await
    .expect("send hello");
    let accept = loop {
        match tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("an accept in time")
        {
            Some(Ok(Message::Text(t))) => break t,
            Some(Ok(_)) => continue,
            other => panic!("no accept: {other:?}"),
        }
    };
    let accept: Accept = serde_json::from_str(accept.as_str()).expect("accept");
    derive(
        &server.token,
        &nonce,
        &accept.nonce,
        Direction::ServerToRelay,
    )
}

/// Whether a registered server gets past the hello now.
async fn gets_in(relay: &TestRelay, server: &Server) -> bool {
    let endpoint = server.endpoint(relay);
    let Ok(mut ws) = aromba_proto::client::dial(&endpoint).await else {
        return false;
    };
    aromba_proto::client::handshake(&mut ws, &endpoint)
        .await
        .is_ok()
}

/// A relay that believes X-Forwarded-For from the test (127.0.0.1), so that
/// one test can play many internet addresses.
fn behind_proxy() -> aromba_relay::Config {
    let mut c = config();
    c.trusted_proxies = aromba_relay::config::parse_proxies("127.0.0.1/32").expect("cidr");
    c
}

async fn post_from(relay: &TestRelay, xff: &str, body: &serde_json::Value) -> u16 {
    reqwest::Client::new()
        .post(relay.url("/v1/servers"))
        .header("X-Forwarded-For", xff)
        .json(body)
        .send()
        .await
        .expect("the relay answers")
        .status()
        .as_u16()
}

// ---------------------------------------------------------------------------
// (a) A hostile server holding a valid token: findings

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

#[sqlx::test(migrations = false)]
async fn a_journal_head_rewritten_at_the_same_seq_is_refused(db: PgPool) {
    // The relay keeps the head so that a journal that goes back is noticed.
    // `journal_seq <= $2` lets the same seq through with any hash: a fork.
    let relay = start(db.clone(), config()).await;
    let (server, mut ws, mut session) = connected(&relay).await;
    let first = "a".repeat(64);
    let forked = "b".repeat(64);
    session
        .send(&mut ws, &head(10, &first))
        .await
        .expect("send");
    session
        .send(&mut ws, &head(10, &forked))
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
async fn a_server_that_stops_reading_keeps_its_slot_after_it_is_replaced(db: PgPool) {
    // The session loop awaits `socket.send` inside a select arm with no
    // deadline. A peer with a zero receive window blocks it for good: the
    // `replaced` notification, the ping timer and the shutdown signal wait
    // behind it, and the socket still counts against `max_connections`.
    // Reconnecting with the same token then takes slot after slot.
    let mut c = config();
    c.limits.max_connections = 2;
    c.limits.ping_secs = 1;
    let relay = start(db.clone(), c).await;
    let hostile = Server::new();
    assert_eq!(post_json(&relay, &hostile.registration()).await.0, 201);
    // A tiny receive window, never read.
    let mut stuck = raw_ws(&relay, "127.0.0.1", Some(2048)).await;
    let _key = hand_hello(&mut stuck, &hostile).await;
    // Far more than the relay's send buffer can hold (its owner is also the
    // chat on the other side, so it can make these deliveries itself).
    let text = "\u{1D11E}".repeat(4000);
    for _ in 0..480 {
        enqueue(
            &db,
            hostile.id,
            &Delivery::Message { text: text.clone() },
            chrono::Utc::now(),
            500,
        )
        .await
        .expect("enqueue");
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    // The same server again: this should replace (and free) the stuck one.
    let (mut again, mut session) = connect(&relay, &hostile).await;
    tokio::spawn(async move { while session.recv(&mut again).await.is_ok() {} });
    let honest = Server::new();
    assert_eq!(post_json(&relay, &honest.registration()).await.0, 201);
    let mut admitted = false;
    for _ in 0..60 {
        if gets_in(&relay, &honest).await {
            admitted = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    drop(stuck);
    assert!(
        admitted,
        "a replaced connection that stopped reading still holds a slot"
    );
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
    assert_eq!(next_delivery(&mut second, &mut session).await.0, id);
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

#[sqlx::test(migrations = false)]
async fn a_delivery_committed_after_a_later_one_still_reaches_the_live_connection(db: PgPool) {
    // Row ids come from an identity sequence when the row is inserted, not
    // when it commits. The session reads only `id > sent_up_to`, so a row
    // whose transaction commits after a higher id was sent is never sent on
    // this connection (it waits for a reconnect, or the 24-hour sweep).
    let relay = start(db.clone(), config()).await;
    let (server, mut ws, mut session) = connected(&relay).await;
    let msg = |t: &str| Delivery::Message { text: t.into() };
    let (x, _) = enqueue(&db, server.id, &msg("x"), chrono::Utc::now(), 500)
        .await
        .expect("enqueue");
    assert_eq!(next_delivery(&mut ws, &mut session).await.0, x);
    // Hold row x so that the next enqueue (bound 1: it drops x) stops after
    // its INSERT, before its COMMIT: a slow transaction, as under load.
    let mut hold = db.begin().await.expect("begin");
    sqlx::query("SELECT id FROM outbox WHERE id = $1 FOR UPDATE")
        .bind(x)
        .fetch_one(&mut *hold)
        .await
        .expect("lock");
    let slow_db = db.clone();
    let slow = tokio::spawn(async move {
        enqueue(&slow_db, server.id, &msg("slow"), chrono::Utc::now(), 1)
            .await
            .expect("enqueue")
    });
    let mut waiting = 0i64;
    for _ in 0..200 {
        waiting = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()",
        )
        .fetch_one(&db)
        .await
        .expect("activity");
        if waiting > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(waiting > 0, "the slow enqueue is waiting on the held row");
    // A second enqueue for the same server now waits for the first (the
    // server's row is locked until it commits), so ids commit in order.
    let fast_db = db.clone();
    let fast = tokio::spawn(async move {
        enqueue(&fast_db, server.id, &msg("fast"), chrono::Utc::now(), 500)
            .await
            .expect("enqueue")
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !fast.is_finished(),
        "the second enqueue did not wait for the first"
    );
    hold.rollback().await.expect("release");
    let (slow_id, _) = slow.await.expect("slow enqueue");
    let (fast_id, _) = fast.await.expect("fast enqueue");
    assert!(slow_id < fast_id, "ids follow commit order");
    let mut got = Vec::new();
    while got.len() < 2 {
        let (id, _) = next_delivery(&mut ws, &mut session).await;
        got.push(id);
    }
    assert_eq!(
        got,
        vec![slow_id, fast_id],
        "both reached the live connection, in order"
    );
    relay.stop().await;
}

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
        &head(1, &"d".repeat(64)),
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

// ---------------------------------------------------------------------------
// (b) An anonymous internet client: findings

#[sqlx::test(migrations = false)]
async fn anonymous_sockets_that_never_say_hello_hold_every_connection_slot(db: PgPool) {
    // The limit counts every upgraded socket, hello or not, and an upgrade
    // needs nothing: an anonymous client re-opening its sockets every
    // hello_timeout keeps the relay full and every real server out.
    let mut c = config();
    c.limits.max_connections = 3;
    let relay = start(db.clone(), c).await;
    let honest = Server::new();
    assert_eq!(post_json(&relay, &honest.registration()).await.0, 201);
    // Another client: its own loopback address.
    let mut anonymous = Vec::new();
    for _ in 0..3 {
        anonymous.push(raw_ws(&relay, "127.0.0.2", None).await);
    }
    // Let the relay finish the upgrades it already answered.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let admitted = gets_in(&relay, &honest).await;
    drop(anonymous);
    assert!(
        admitted,
        "anonymous sockets without a hello kept a registered server out"
    );
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_client_trickling_its_request_headers_is_cut_off(db: PgPool) {
    // Slowloris: one header line per second, never the blank line. hyper's
    // 30 s header_read_timeout needs a timer, which axum::serve does not
    // give it, so nothing ends the connection; nor is there any cap on
    // connections before the WebSocket upgrade.
    let relay = start(db.clone(), config()).await;
    let mut tcp = tokio::net::TcpStream::connect(relay.addr)
        .await
        .expect("connect");
    let (mut rd, mut wr) = tcp.split();
    wr.write_all(b"GET /v1/connect HTTP/1.1\r\nHost: relay\r\n")
        .await
        .expect("write");
    let mut buf = [0u8; 512];
    let mut every = tokio::time::interval(Duration::from_secs(1));
    let deadline = tokio::time::sleep(Duration::from_secs(45));
    tokio::pin!(deadline);
    let mut i = 0u32;
    let cut = loop {
        tokio::select! {
            // An answer (a 408, a 431) or the end of the connection: cut.
            _ = rd.read(&mut buf) => break true,
            _ = every.tick() => {
                i += 1;
                if wr.write_all(format!("X-Slow-{i}: a\r\n").as_bytes()).await.is_err() {
                    break true;
                }
            }
            () = &mut deadline => break false,
        }
    };
    assert!(
        cut,
        "after 45 s of trickled headers the relay still holds the connection"
    );
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn concurrent_registrations_of_one_new_server_never_answer_5xx(db: PgPool) {
    // Two requests from different addresses do not share a count row, so
    // nothing serialises them: both find no server, both insert, and the
    // primary key turns the second into an internal error.
    let relay = start(db.clone(), behind_proxy()).await;
    let relay = Arc::new(relay);
    let mut statuses = Vec::new();
    for round in 0..20u32 {
        let server = Server::new();
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..8u32 {
            let relay = relay.clone();
            let body = server.registration();
            tasks.spawn(async move {
                post_from(&relay, &format!("198.51.{round}.{}", i + 1), &body).await
            });
        }
        while let Some(status) = tasks.join_next().await {
            statuses.push(status.expect("task"));
        }
    }
    let failed = statuses.iter().filter(|s| **s >= 500).count();
    assert_eq!(
        failed,
        0,
        "{failed} of {} registrations answered 5xx",
        statuses.len()
    );
    if let Ok(relay) = Arc::try_unwrap(relay) {
        relay.stop().await;
    }
}

#[sqlx::test(migrations = false)]
async fn duplicate_cases_for_one_server_are_bounded(db: PgPool) {
    // Each registration of a known id with a fresh boot id opens a case the
    // chat must decide. The only bound is per address and per day, so a
    // handful of addresses (an IPv6 /48 holds 65,536 /64s) flood one
    // server's owner with cases and the database with rows.
    let relay = start(db.clone(), behind_proxy()).await;
    let victim = Server::new();
    assert_eq!(post_json(&relay, &victim.registration()).await.0, 201);
    for i in 0..40u32 {
        let mut claimant = Server::new();
        claimant.id = victim.id;
        let _ = post_from(
            &relay,
            &format!("2001:db8:{i:x}::1"),
            &claimant.registration(),
        )
        .await;
    }
    let cases: i64 =
        sqlx::query_scalar("SELECT count(*) FROM duplicate_cases WHERE server_id = $1")
            .bind(victim.id)
            .fetch_one(&db)
            .await
            .expect("count");
    assert!(cases <= 8, "{cases} open duplicate cases for one server");
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn malformed_registrations_count_against_the_daily_limit(db: PgPool) {
    // The daily count is taken inside the handler after the JSON extractor
    // and the shape checks, so 4xx requests cost an address nothing there.
    let mut c = config();
    c.limits.registrations_per_day = 3;
    let relay = start(db.clone(), c).await;
    let mut invalid = Server::new().registration();
    invalid["install_source"] = json!("Not Valid");
    for _ in 0..3 {
        assert_eq!(post_json(&relay, &invalid).await.0, 422);
    }
    let (status, _) = post_json(&relay, &Server::new().registration()).await;
    assert_eq!(status, 429, "three refused requests did not use up the day");
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
async fn install_sources_kept_for_good_are_not_chosen_by_the_client(db: PgPool) {
    // What the relay keeps forever is a count per day and install source.
    // Any `[a-z0-9-]{1,32}` is a source, so each registration can mint a
    // new permanent row (and write 32 characters of its choice into the
    // statistics); the servers themselves are erased after 24 hours.
    let relay = start(db.clone(), config()).await;
    for i in 0..40u32 {
        let mut reg = Server::new().registration();
        reg["install_source"] = json!(format!("made-up-{i}"));
        let _ = post_json(&relay, &reg).await;
    }
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM daily_counts")
        .fetch_one(&db)
        .await
        .expect("count");
    assert!(
        rows <= 8,
        "{rows} permanent count rows from 40 anonymous registrations"
    );
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn clients_behind_a_proxy_that_writes_ports_keep_their_own_buckets(db: PgPool) {
    // The rightmost entry is the trusted proxy's own writing; when it
    // carries a port the parse fails and the request counts against the
    // proxy. Then one client's few requests use up everyone's burst and
    // daily count.
    let mut c = behind_proxy();
    c.limits.burst = 1;
    c.limits.refill_ms = 600_000;
    let relay = start(db.clone(), c).await;
    assert_eq!(
        post_from(&relay, "203.0.113.1:50000", &Server::new().registration()).await,
        201
    );
    assert_eq!(
        post_from(&relay, "203.0.113.2:50001", &Server::new().registration()).await,
        201,
        "another client behind the proxy was refused with the first one's bucket"
    );
    assert_eq!(
        post_from(&relay, "[2001:db8:9::1]:443", &Server::new().registration()).await,
        201
    );
    relay.stop().await;
}

// ---------------------------------------------------------------------------
// Attacks the relay withstood (regression tests)

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
async fn a_hello_trickled_in_fragments_is_cut_at_the_hello_deadline(db: PgPool) {
    // The deadline covers the whole hello, not each frame of it.
    let mut c = config();
    c.limits.hello_timeout_ms = 500;
    let relay = start(db.clone(), c).await;
    let server = Server::new();
    assert_eq!(post_json(&relay, &server.registration()).await.0, 201);
    let mut ws = raw_ws(&relay, "127.0.0.1", None).await;
    ws.send(Message::Frame(Frame::message(
        &b"{\"v\":1,"[..],
        OpCode::Data(Data::Text),
        false,
    )))
    .await
    .expect("first fragment");
    let trickle = async {
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if ws
                .send(Message::Frame(Frame::message(
                    &b" "[..],
                    OpCode::Data(Data::Continue),
                    false,
                )))
                .await
                .is_err()
            {
                break;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(15), trickle)
        .await
        .expect("the trickle ends");
    assert_eq!(closed_with(&mut ws).await, u16::from(CloseCode::Policy));
    assert_eq!(refusals(&relay, "hello_timeout").await, 1);
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn an_ipv4_mapped_forwarded_for_shares_the_ipv4_bucket(db: PgPool) {
    let mut c = behind_proxy();
    c.limits.burst = 1;
    c.limits.refill_ms = 600_000;
    let relay = start(db.clone(), c).await;
    assert_eq!(
        post_from(&relay, "203.0.113.9", &Server::new().registration()).await,
        201
    );
    for spelled in ["::ffff:203.0.113.9", "::FFFF:cb00:7109", "203.0.113.9"] {
        assert_eq!(
            post_from(&relay, spelled, &Server::new().registration()).await,
            429,
            "{spelled} earned a fresh bucket"
        );
    }
    // Another host in the same IPv6 /64 is the same client.
    assert_eq!(
        post_from(&relay, "2001:db8:7:7::1", &Server::new().registration()).await,
        201
    );
    assert_eq!(
        post_from(
            &relay,
            "2001:db8:7:7:ffff::2",
            &Server::new().registration()
        )
        .await,
        429
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
    let sealed = seal_raw(&key, 1, now_ms(), &head(1, &"c".repeat(64)));
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

// ---------------------------------------------------------------------------
// (c) What the relay leaks

/// Everything every relay in this test binary logs, as the binary's JSON
/// logs would carry it (info, and everything of the relay's own crates).
fn captured_logs() -> Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Arc::new(Mutex::new(Vec::new()));
        let sink = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .json()
            .with_env_filter(tracing_subscriber::EnvFilter::new(
                "info,aromba_relay=trace,aromba_proto=trace",
            ))
            .with_writer(move || LogWriter(sink.clone()))
            .finish();
        let _ = tracing::subscriber::set_global_default(subscriber);
        logs
    })
    .clone()
}

struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[sqlx::test(migrations = false)]
async fn no_token_text_or_label_reaches_the_relays_logs(db: PgPool) {
    let logs = captured_logs();
    let relay = start(db.clone(), config()).await;
    let (server, mut ws, mut session) = connected(&relay).await;
    let mut secrets: Vec<String> = vec![server.token.expose()[4..].to_string()];
    // A message with a button, a delivery, its ack.
    let text = format!("sent-text-{}", Uuid::new_v4().simple());
    let label = format!("lbl{}", &Uuid::new_v4().simple().to_string()[..20]);
    session
        .send(
            &mut ws,
            &Body::Send {
                id: Uuid::new_v4(),
                text: text.clone(),
                buttons: vec![Button {
                    id: "b1".into(),
                    label: label.clone(),
                    action: None,
                }],
                monospace: Vec::new(),
            },
        )
        .await
        .expect("send");
    let _ = session.recv(&mut ws).await.expect("ack");
    let delivered = format!("chat-text-{}", Uuid::new_v4().simple());
    enqueue(
        &db,
        server.id,
        &Delivery::Message {
            text: delivered.clone(),
        },
        chrono::Utc::now(),
        100,
    )
    .await
    .expect("enqueue");
    let (id, _) = next_delivery(&mut ws, &mut session).await;
    session
        .send(&mut ws, &Body::AckDelivery { id })
        .await
        .expect("ack");
    // An out-of-bounds frame: refused and logged by reason.
    let refused = format!("refused-text-{}", Uuid::new_v4().simple());
    session
        .send(
            &mut ws,
            &Body::Send {
                id: Uuid::new_v4(),
                text: refused.clone(),
                buttons: vec![Button {
                    id: "bad id".into(),
                    label: "x".into(),
                    action: None,
                }],
                monospace: Vec::new(),
            },
        )
        .await
        .expect("send");
    let _ = closed_with(&mut ws).await;
    // A hello with a wrong token, and one with the token in an unknown field.
    let wrong = ServerToken::generate();
    secrets.push(wrong.expose()[4..].to_string());
    let mut thief = server.clone();
    thief.token = wrong;
    assert!(!gets_in(&relay, &thief).await);
    let smuggled = ServerToken::generate();
    secrets.push(smuggled.expose()[4..].to_string());
    let mut ws = raw_ws(&relay, "127.0.0.1", None).await;
    let hello = json!({"v": 1, "server_id": server.id, "token": smuggled.expose(),
        "nonce": "x", "ts": now_ms(), "extra": smuggled.expose()});
    ws.send(Message::Text(hello.to_string().into()))
        .await
        .expect("send");
    let _ = closed_with(&mut ws).await;
    // A registration with a token of the wrong shape (which 422 echoes back
    // to its sender only), and a conflicting one.
    let near = format!("arb_{}", &ServerToken::generate().expose()[4..46]);
    secrets.push(near[4..].to_string());
    let mut bad = Server::new().registration();
    bad["token"] = json!(near);
    assert_eq!(post_json(&relay, &bad).await.0, 422);
    let mut conflict = server.clone();
    conflict.token = ServerToken::generate();
    secrets.push(conflict.token.expose()[4..].to_string());
    assert_eq!(post_json(&relay, &conflict.registration()).await.0, 409);
    relay.stop().await;

    let logged =
        String::from_utf8_lossy(&logs.lock().unwrap_or_else(|p| p.into_inner())).into_owned();
    assert!(
        logged.contains(&server.id.to_string()),
        "the capture saw the relay's logs"
    );
    for secret in secrets.iter().chain([&text, &label, &delivered, &refused]) {
        assert!(!logged.contains(secret.as_str()), "the log holds {secret}");
    }
}
