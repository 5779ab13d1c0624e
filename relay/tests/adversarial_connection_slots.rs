//! One client against the relay's room for connections: the HTTP pool,
//! the sockets waiting for their hello, the connection slots and the hello
//! budget. Who attacks: anonymous clients from many loopback addresses
//! (127.x.y.z standing for Internet addresses) and servers holding a
//! valid token. What they try: headers and hellos trickled past their
//! deadlines, connections and WebSockets churned faster than a real
//! client's round trip, requests left half sent or pipelined, sockets
//! upgraded and never spoken on, a replaced connection that stops reading,
//! servers nobody paired filling the room, reconnect loops and wrong-token
//! hellos from one address. What holds: each is cut at its deadline,
//! evicted, or paced and counted against its own address or server, and
//! `/healthz`, a registered server's hello and a paired server still get
//! in. All traffic stays on 127.0.0.0/8, and every loop is bounded in
//! count and time.

use aromba_testkit::relay as support;

use aromba_relay::Limits;
use aromba_relay::outbox::enqueue;
use aromba_relay_proto::frame::{Accept, Delivery, Hello};
use aromba_relay_proto::session::{Direction, derive};
use futures_util::{SinkExt, StreamExt};
use sqlx::PgPool;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use support::attack::{client_from, raise_descriptor_limit, source, still_open, tcp_from};
use support::{
    Server, closed_with, config, config_with, connect, gets_in, post_json, raw_ws, refusals, start,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::Frame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{CloseCode, Data, OpCode};

/// Sends a correct hello by hand and reads the accept: the key the server
/// seals with in this session.
async fn hand_hello(
    ws: &mut WebSocketStream<tokio::net::TcpStream>,
    server: &Server,
) -> aromba_relay_proto::session::Key {
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

/// One raw HTTP/1.1 exchange from `from`: connect, wait `think` (the
/// client's round trips: a TLS handshake, a slow link), send `request`,
/// read the answer's first line. `None` when the relay cut the connection
/// first.
async fn slow_client_exchange(
    from: IpAddr,
    to: SocketAddr,
    think: Duration,
    request: &[u8],
) -> Option<String> {
    let mut stream = tcp_from(from, to).await.ok()?;
    tokio::time::sleep(think).await;
    stream.write_all(request).await.ok()?;
    let mut buf = vec![0u8; 512];
    let mut got = 0;
    let read = async {
        loop {
            match stream.read(&mut buf[got..]).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    got += n;
                    if buf[..got].windows(2).any(|w| w == b"\r\n") || got == buf.len() {
                        break;
                    }
                }
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(3), read).await;
    if got == 0 {
        return None;
    }
    let text = String::from_utf8_lossy(&buf[..got]).to_string();
    text.lines().next().map(str::to_string)
}

// ---------------------------------------------------------------------------
// Slow and half-sent requests: the HTTP connection pool.

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

/// GET /healthz announcing a body it never sends, a POST with
/// `Expect: 100-continue` whose body never comes, chunked bodies with
/// endless chunk extensions, and pipelined requests ending in a half
/// request: from 40 addresses, more than the pool. None may keep
/// /healthz from a new address from answering.
#[sqlx::test(migrations = false)]
async fn half_sent_expect_chunked_and_pipelined_requests_do_not_hold_the_pool(db: PgPool) {
    raise_descriptor_limit();
    let relay = start(
        db,
        config_with(|l| {
            l.max_http_connections = 64;
            l.http_per_address = 4;
            l.body_deadline_ms = 120_000;
        }),
    )
    .await;
    let shapes: [&[u8]; 4] = [
        b"GET /healthz HTTP/1.1\r\nHost: relay\r\nContent-Length: 1000\r\n\r\n{",
        b"POST /v1/servers HTTP/1.1\r\nHost: relay\r\nContent-Type: application/json\r\n\
          Expect: 100-continue\r\nContent-Length: 500\r\n\r\n",
        b"POST /v1/servers HTTP/1.1\r\nHost: relay\r\nTransfer-Encoding: chunked\r\n\r\n\
          1;aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        b"GET /healthz HTTP/1.1\r\nHost: relay\r\n\r\nGET /readyz HTTP/1.1\r\nHost: relay\r\n\r\n\
          GET /nope HTTP/1.1\r\nHost: relay\r\n\r\nPOST /v1/servers HTTP/1.1\r\nHost: relay\r\n\
          Content-Length: 900\r\n\r\n{",
    ];
    let mut held = Vec::new();
    for i in 0..160 {
        if let Ok(mut s) = tcp_from(source(i / 4), relay.addr).await {
            let _ = s.write_all(shapes[i % shapes.len()]).await;
            held.push(s);
        }
    }
    assert!(held.len() >= 150, "{} connections", held.len());
    let answered = client_from(source(1_000))
        .get(relay.url("/healthz"))
        .timeout(Duration::from_secs(2))
        .send()
        .await
        .is_ok_and(|r| r.status() == 200);
    assert!(
        answered,
        "/healthz must answer while half requests fill the pool"
    );
    let mut open = 0;
    for s in &mut held {
        if still_open(s).await {
            open += 1;
        }
    }
    assert!(open <= 64, "{open} connections held past the pool");
    relay.stop().await;
}

/// Connection churn from many addresses: every new connection evicts the
/// oldest unproven one, so an attacker who opens the pool's size in
/// connections within one of a real client's round trips pushes every
/// real client out before its request has arrived. On loopback the
/// client's round trips are simulated by a pause between connect and
/// request (a TLS handshake over a 150 ms link takes longer).
#[sqlx::test(migrations = false)]
async fn connection_churn_from_many_addresses_evicts_a_client_with_a_real_round_trip(db: PgPool) {
    raise_descriptor_limit();
    let relay = start(
        db,
        config_with(|l| {
            l.max_http_connections = 128;
            l.http_per_address = 4;
        }),
    )
    .await;
    let to = relay.addr;
    let stop = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(AtomicUsize::new(0));
    let mut churners = Vec::new();
    // 64 addresses (a /58 of IPv6 /64s would do), 16 tasks of 4 each.
    for task in 0..16usize {
        let (stop, opened) = (stop.clone(), opened.clone());
        churners.push(tokio::spawn(async move {
            let started = Instant::now();
            let mut kept = std::collections::VecDeque::new();
            let mut n = 0usize;
            // Bounded: 20,000 connections or 8 s per task.
            while !stop.load(Ordering::Relaxed)
                && n < 20_000
                && started.elapsed() < Duration::from_secs(8)
            {
                let from = source(100 + task * 4 + n % 4);
                if let Ok(s) = tcp_from(from, to).await {
                    kept.push_back(s);
                    opened.fetch_add(1, Ordering::Relaxed);
                }
                // Our own side of old ones is let go (the relay has long
                // evicted them).
                while kept.len() > 32 {
                    kept.pop_front();
                }
                n += 1;
            }
        }));
    }
    // Let the churn reach its pace.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = opened.load(Ordering::Relaxed);
    let mut answered = 0;
    let tries = 5;
    for i in 0..tries {
        let line = slow_client_exchange(
            source(5_000 + i),
            to,
            Duration::from_millis(150),
            b"GET /healthz HTTP/1.1\r\nHost: relay\r\nConnection: close\r\n\r\n",
        )
        .await;
        if line.as_deref().is_some_and(|l| l.contains(" 200 ")) {
            answered += 1;
        }
    }
    let rate = (opened.load(Ordering::Relaxed) - before) as f64 / (tries as f64 * 0.15);
    stop.store(true, Ordering::Relaxed);
    for c in churners {
        let _ = c.await;
    }
    let evicted = refusals(&relay, "http_evicted_oldest").await;
    assert_eq!(
        answered, tries,
        "a client 150 ms from the relay got {answered} of {tries} answers while 64 addresses \
         churned about {rate:.0} connections a second ({evicted} evictions of the oldest)"
    );
    relay.stop().await;
}

// ---------------------------------------------------------------------------
// Sockets before their hello.

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

/// The same churn against the sockets waiting for their hello: a
/// registered server's hello comes a round trip after the relay's 101, and
/// in that round trip enough new silent WebSockets from many addresses
/// push its socket out as the oldest unproven one.
#[sqlx::test(migrations = false)]
async fn websocket_churn_from_many_addresses_evicts_a_servers_socket_before_its_hello(db: PgPool) {
    raise_descriptor_limit();
    let relay = start(
        db,
        config_with(|l| {
            l.max_pending_hellos = 128;
            l.hellos_per_address = 4;
        }),
    )
    .await;
    let server = Server::new();
    assert_eq!(
        support::post_json(&relay, &server.registration()).await.0,
        201
    );
    let to = relay.addr;
    let stop = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(AtomicUsize::new(0));
    let mut churners = Vec::new();
    for task in 0..16usize {
        let (stop, opened) = (stop.clone(), opened.clone());
        churners.push(tokio::spawn(async move {
            let started = Instant::now();
            let mut kept = std::collections::VecDeque::new();
            let mut n = 0usize;
            // Bounded: 10,000 sockets or 8 s per task.
            while !stop.load(Ordering::Relaxed)
                && n < 10_000
                && started.elapsed() < Duration::from_secs(8)
            {
                let from = source(100 + task * 4 + n % 4);
                if let Some(ws) = support::attack::silent_websocket(from, to).await {
                    kept.push_back(ws);
                    opened.fetch_add(1, Ordering::Relaxed);
                }
                while kept.len() > 32 {
                    kept.pop_front();
                }
                n += 1;
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = opened.load(Ordering::Relaxed);
    let endpoint = server.endpoint(&relay);
    let tries = 5;
    let mut accepted = 0;
    let asked = Instant::now();
    for _ in 0..tries {
        let Ok(mut ws) = aromba_relay_proto::client::dial(&endpoint).await else {
            continue;
        };
        // The server's round trip between the 101 and its hello.
        tokio::time::sleep(Duration::from_millis(150)).await;
        if aromba_relay_proto::client::handshake(&mut ws, &endpoint)
            .await
            .is_ok()
        {
            accepted += 1;
        }
    }
    let rate = (opened.load(Ordering::Relaxed) - before) as f64 / asked.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for c in churners {
        let _ = c.await;
    }
    let evicted = refusals(&relay, "hello_evicted").await;
    assert_eq!(
        accepted, tries,
        "a registered server 150 ms from the relay said hello {accepted} of {tries} times \
         while 64 addresses churned about {rate:.0} WebSockets a second ({evicted} evicted)"
    );
    relay.stop().await;
}

/// A hello with a wrong token costs the relay a WebSocket upgrade and a
/// database lookup, and nothing paces it: the hello budget is keyed by the
/// server id only once the token was right, and the pending pool caps what
/// is open, not how often. One address may make the relay look up
/// hundreds of unknown servers a second. Malformed and refused requests
/// should count toward a pace per address too.
#[sqlx::test(migrations = false)]
async fn wrong_token_hellos_from_one_address_are_paced(db: PgPool) {
    use futures_util::SinkExt;
    use tokio_tungstenite::tungstenite::Message;
    // The production pace of failures (the tests' own config lifts it).
    let defaults = Limits::default();
    let relay = start(
        db,
        config_with(|l| {
            l.failed_hello_burst = defaults.failed_hello_burst;
            l.failed_hello_refill_ms = defaults.failed_hello_refill_ms;
        }),
    )
    .await;
    let to = relay.addr;
    let from = source(9);
    let started = Instant::now();
    let mut tried = 0;
    // Bounded: 300 hellos or 5 s.
    while tried < 300 && started.elapsed() < Duration::from_secs(5) {
        tried += 1;
        let Some(mut ws) = support::attack::silent_websocket(from, to).await else {
            continue;
        };
        let hello = aromba_relay_proto::frame::Hello::new(
            uuid::Uuid::new_v4(),
            aromba_relay_proto::token::ServerToken::generate(),
        );
        let text = serde_json::to_string(&hello).expect("json");
        let _ = ws.send(Message::Text(text.into())).await;
        let _ = support::closed_with(&mut ws).await;
    }
    let took = started.elapsed();
    let looked_up = refusals(&relay, "bad_token").await;
    assert!(
        looked_up < 100,
        "one address had the relay look up {looked_up} unknown servers in {took:?} \
         ({tried} hellos), none of them paced"
    );
    relay.stop().await;
}

// ---------------------------------------------------------------------------
// Registered servers.

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

/// Registration is open to anyone, and a registered server's socket was
/// counted only against `max_connections`, with no preference for paired
/// servers: one address registered its day's servers and connected them
/// all, and past `max_connections` every other server, paired or not, was
/// told "at capacity". Servers nobody paired now have a share of the room
/// (`max_unpaired_connections`), never all of it; a paired server always
/// finds the rest. (An unpaired server of another address may still be
/// told to come back later while the share is full: SECURITY.md.)
#[sqlx::test(migrations = false)]
async fn servers_nobody_paired_never_fill_the_room_of_a_paired_server(db: PgPool) {
    let relay = start(
        db.clone(),
        config_with(|l| {
            l.registrations_per_day = 20;
            l.max_connections = 20;
            l.max_unpaired_connections = 15;
        }),
    )
    .await;
    let attacker = client_from(source(1));
    let mut held = Vec::new();
    let mut refused = 0;
    for _ in 0..20 {
        let server = Server::new();
        let status = attacker
            .post(relay.url("/v1/servers"))
            .json(&server.registration())
            .send()
            .await
            .expect("an answer")
            .status()
            .as_u16();
        assert_eq!(status, 201);
        let endpoint = server.endpoint(&relay);
        let mut ws = aromba_relay_proto::client::dial(&endpoint)
            .await
            .expect("dial");
        match aromba_relay_proto::client::handshake(&mut ws, &endpoint).await {
            Ok(session) => held.push((ws, session)),
            Err(_) => refused += 1,
        }
    }
    assert_eq!(held.len(), 15, "the unpaired share");
    assert_eq!(refused, 5);
    assert_eq!(refusals(&relay, "unpaired_at_capacity").await, 5);
    // A paired server of another address.
    let victim = Server::new();
    let status = client_from(source(2))
        .post(relay.url("/v1/servers"))
        .json(&victim.registration())
        .send()
        .await
        .expect("an answer")
        .status()
        .as_u16();
    assert_eq!(status, 201);
    sqlx::query("INSERT INTO pairings (server_id, chat_id, paired_at) VALUES ($1, 77, now())")
        .bind(victim.id)
        .execute(&db)
        .await
        .expect("paired");
    let endpoint = victim.endpoint(&relay);
    let mut ws = aromba_relay_proto::client::dial(&endpoint)
        .await
        .expect("dial");
    assert!(
        aromba_relay_proto::client::handshake(&mut ws, &endpoint)
            .await
            .is_ok(),
        "a paired server finds room while servers nobody paired fill their share"
    );
    relay.stop().await;
}

/// A registered server reconnecting in a loop spends its own hellos only:
/// another server connecting meanwhile is never told to come back later,
/// and the flood's sockets do not outlive their refusals.
#[sqlx::test(migrations = false)]
async fn a_server_reconnecting_in_a_loop_spends_only_its_own_hellos(db: PgPool) {
    let relay = start(
        db,
        config_with(|l| {
            l.hello_burst = 3;
            l.hello_refill_ms = 600_000;
        }),
    )
    .await;
    let hostile = Server::new();
    assert_eq!(
        support::post_json(&relay, &hostile.registration()).await.0,
        201
    );
    let victim = Server::new();
    assert_eq!(
        support::post_json(&relay, &victim.registration()).await.0,
        201
    );
    let endpoint = hostile.endpoint(&relay);
    let started = Instant::now();
    for _ in 0..60 {
        if started.elapsed() > Duration::from_secs(5) {
            break;
        }
        if let Ok(mut ws) = aromba_relay_proto::client::dial(&endpoint).await {
            let _ = aromba_relay_proto::client::handshake(&mut ws, &endpoint).await;
        }
    }
    assert!(refusals(&relay, "hello_rate").await >= 50);
    let _ = connect(&relay, &victim).await;
    relay.stop().await;
}
