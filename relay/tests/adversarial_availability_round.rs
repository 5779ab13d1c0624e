//! A second availability round against the relay as just fixed: a
//! stranger on the Internet (many 127.x.y.z source addresses standing for
//! many Internet addresses), a hostile registered server, and a flood of
//! Telegram chats, each trying to take the relay offline, hold what it
//! has, or delay a paired chat. Each test asserts what should hold; a
//! failing one is a break. All traffic stays on 127.0.0.0/8, and every
//! loop is bounded in count and time.

mod support;

use aromba_botfake::state::Injected;
use aromba_proto::frame::{Body, Delivery};
use aromba_relay::Limits;
use serde_json::json;
use sqlx::PgPool;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use support::attack::{client_from, raise_descriptor_limit, source, still_open, tcp_from};
use support::bot::{WEBHOOK_SECRET, eventually, next_frame, paired, send, start_bot_tuned};
use support::{Server, config, config_with, connect, refusals, start};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

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

// ---------------------------------------------------------------------
// The HTTP connection pool: churn.
// ---------------------------------------------------------------------

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
        let Ok(mut ws) = aromba_proto::client::dial(&endpoint).await else {
            continue;
        };
        // The server's round trip between the 101 and its hello.
        tokio::time::sleep(Duration::from_millis(150)).await;
        if aromba_proto::client::handshake(&mut ws, &endpoint)
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

// ---------------------------------------------------------------------
// Requests that look proven, or half-sent, or pipelined.
// ---------------------------------------------------------------------

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

// ---------------------------------------------------------------------
// Registered servers.
// ---------------------------------------------------------------------

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
        let mut ws = aromba_proto::client::dial(&endpoint).await.expect("dial");
        match aromba_proto::client::handshake(&mut ws, &endpoint).await {
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
    let mut ws = aromba_proto::client::dial(&endpoint).await.expect("dial");
    assert!(
        aromba_proto::client::handshake(&mut ws, &endpoint)
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
        if let Ok(mut ws) = aromba_proto::client::dial(&endpoint).await {
            let _ = aromba_proto::client::handshake(&mut ws, &endpoint).await;
        }
    }
    assert!(refusals(&relay, "hello_rate").await >= 50);
    let _ = connect(&relay, &victim).await;
    relay.stop().await;
}

// ---------------------------------------------------------------------
// Telegram.
// ---------------------------------------------------------------------

/// Three strangers' replies told 429 (by Telegram, for whatever reason it
/// has about those chats) within ten seconds pause the whole bot, paired
/// lane included: what strangers make the relay send shares the paired
/// chats' budget after all. A stranger's 429 should pause the strangers'
/// lane (and that chat), not a paired chat.
#[sqlx::test(migrations = false)]
async fn strangers_429s_do_not_pause_a_paired_chat(db: PgPool) {
    let bot = start_bot_tuned(db, |_| {}, |_| {}).await;
    let (_server, mut ws, mut session, _) = paired(&bot, 1).await;
    eventually("the paired chat told it is paired", || {
        (!bot.fake.sent_to(1).is_empty()).then_some(())
    })
    .await;
    for _ in 0..3 {
        bot.fake
            .inject_for("sendMessage", Injected::TooManyRequests { retry_after: 30 });
    }
    for chat in [9_001, 9_002, 9_003] {
        bot.fake.user_message(chat, "hello?");
    }
    bot.wait_metric("stranger_reply_failed", 3).await;
    let paused = bot.metric("bot_api_pause_bot").await;
    let start = Instant::now();
    send(&mut ws, &mut session, "disk at 91%", Vec::new()).await;
    let arrived = async {
        loop {
            if bot.fake.sent_to(1).iter().any(|m| m.text == "disk at 91%") {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let on_time = tokio::time::timeout(Duration::from_secs(5), arrived)
        .await
        .is_ok();
    assert!(
        on_time,
        "the paired chat's message waited more than 5 s (and counting) after three strangers' \
         replies were told 429 ({paused} bot-wide pauses); took {:?} so far",
        start.elapsed()
    );
    bot.relay.stop().await;
}

/// The sender's round takes each server's oldest message, oldest heads
/// first, `send_round` of them: servers whose backlogs were queued earlier
/// fill every round until those backlogs drain, and a server whose one
/// message came later waits behind all of it (at the defaults: 256
/// paired hostile servers with 200 messages each, over half an hour). A
/// round should serve servers in turn, not by the age of their backlog.
#[sqlx::test(migrations = false)]
async fn earlier_backlogs_of_other_servers_do_not_starve_a_later_servers_message(db: PgPool) {
    let bot = start_bot_tuned(
        db,
        |_| {},
        |t| {
            t.send_round = 2;
            // Each chat is ready again before a round is over (as at the
            // defaults: 1 s a chat, 256 × 40 ms a round).
            t.pace.per_chat = Duration::from_millis(1);
            t.pace.overall = Duration::from_millis(15);
        },
    )
    .await;
    let (_a, mut ws_a, mut session_a, _) = paired(&bot, 41).await;
    let (_b, mut ws_b, mut session_b, _) = paired(&bot, 42).await;
    let (_c, mut ws_c, mut session_c, _) = paired(&bot, 43).await;
    eventually("all three told they are paired", || {
        [41, 42, 43]
            .iter()
            .all(|c| !bot.fake.sent_to(*c).is_empty())
            .then_some(())
    })
    .await;
    for i in 0..50 {
        send(&mut ws_a, &mut session_a, &format!("a{i}"), Vec::new()).await;
        send(&mut ws_b, &mut session_b, &format!("b{i}"), Vec::new()).await;
    }
    let start = Instant::now();
    send(&mut ws_c, &mut session_c, "c0", Vec::new()).await;
    eventually("chat 43's message", || {
        bot.fake
            .sent_to(43)
            .iter()
            .any(|m| m.text == "c0")
            .then_some(())
    })
    .await;
    let took = start.elapsed();
    let ahead = bot.fake.sent_to(41).len() + bot.fake.sent_to(42).len() - 2;
    let waiting: i64 = sqlx::query_scalar("SELECT count(*) FROM chat_outbox")
        .fetch_one(&bot.db)
        .await
        .expect("count");
    assert!(
        waiting > 20,
        "chat 43's one message waited {took:?}, until the two earlier backlogs had all but \
         drained ({ahead} of their messages went first, {waiting} left)"
    );
    bot.relay.stop().await;
}

/// An update as Telegram sends it: a private message.
fn message_update(update_id: i64, chat: i64, text: &str) -> serde_json::Value {
    json!({
        "update_id": update_id,
        "message": {
            "message_id": update_id,
            "from": {"id": chat, "is_bot": false, "first_name": "P"},
            "chat": {"id": chat, "type": "private", "first_name": "P"},
            "date": 1_700_000_000,
            "text": text,
        }
    })
}

/// Strangers' updates (here all in the paired chat's shard: a group, or
/// 1/64 of a large crowd) delivered as Telegram delivers a webhook, forty
/// at a time: when the shard's queue is full the webhook answers 200 and
/// drops the update, whoever it is from. A paired person's message in
/// that moment is lost for good (Telegram never sends a 200'd update
/// again). A full queue should make Telegram retry (a non-2xx answer), or
/// paired chats' updates should not queue behind strangers'.
#[sqlx::test(migrations = false)]
async fn a_stranger_flood_in_a_paired_chats_shard_does_not_lose_its_message(db: PgPool) {
    let bot = start_bot_tuned(db, |_| {}, |_| {}).await;
    let chat: i64 = 64 * 1_000 + 7;
    let (_server, mut ws, mut session, _) = paired(&bot, chat).await;
    let url = bot.relay.url("/v1/telegram/webhook");
    let next_id = Arc::new(std::sync::atomic::AtomicI64::new(900_000_000));
    let stop = Arc::new(AtomicBool::new(false));
    let mut flood = Vec::new();
    for task in 0..40i64 {
        let (url, next_id, stop) = (url.clone(), next_id.clone(), stop.clone());
        flood.push(tokio::spawn(async move {
            let http = reqwest::Client::new();
            let started = Instant::now();
            // Bounded: 400 updates or 6 s per task.
            for n in 0..400i64 {
                if stop.load(Ordering::Relaxed) || started.elapsed() > Duration::from_secs(6) {
                    break;
                }
                let id = next_id.fetch_add(1, Ordering::Relaxed);
                // Strangers whose chats land in the paired chat's shard.
                let stranger = 64 * (2_000 + task * 400 + n) + 7;
                let _ = http
                    .post(&url)
                    .header("x-telegram-bot-api-secret-token", WEBHOOK_SECRET)
                    .json(&message_update(id, stranger, "/start ABCDEF"))
                    .send()
                    .await;
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    let id = next_id.fetch_add(1, Ordering::Relaxed);
    let status = reqwest::Client::new()
        .post(&url)
        .header("x-telegram-bot-api-secret-token", WEBHOOK_SECRET)
        .json(&message_update(id, chat, "approve the backup"))
        .send()
        .await
        .expect("an answer")
        .status()
        .as_u16();
    let dropped_before = bot.metric("update_dropped_queue_full").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::Relaxed);
    for f in flood {
        let _ = f.await;
    }
    // Either the relay took it (it reaches the server) or refused it so
    // Telegram would send it again.
    let mut delivered = false;
    if status == 200 {
        let wait = async {
            loop {
                if let Body::Deliver {
                    delivery: Delivery::Message { text },
                    ..
                } = next_frame(&mut ws, &mut session).await
                    && text == "approve the backup"
                {
                    return;
                }
            }
        };
        delivered = tokio::time::timeout(Duration::from_secs(10), wait)
            .await
            .is_ok();
    }
    assert!(
        delivered || status != 200,
        "the paired chat's message was answered {status} and never reached its server \
         ({dropped_before} updates dropped on full queues by then)"
    );
    bot.relay.stop().await;
}

// ---------------------------------------------------------------------
// What a stranger or an unpaired server makes the relay do or keep.
// ---------------------------------------------------------------------

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
        let hello = aromba_proto::frame::Hello::new(
            uuid::Uuid::new_v4(),
            aromba_proto::token::ServerToken::generate(),
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

/// Strangers in every shape that reaches no pairing: `/unpair` from chats
/// that are not paired, messages that are not text, taps on messages the
/// relay never sent them, `/start` in a group. None of it may take the
/// paired chats' lane: a paired chat's message still goes within a
/// moment, at Telegram's own pace, and the relay says nothing to a
/// paired-lane chat on a stranger's account.
#[sqlx::test(migrations = false)]
async fn strangers_unpair_non_text_taps_and_groups_do_not_delay_a_paired_chat(db: PgPool) {
    let bot = start_bot_tuned(
        db,
        |_| {},
        |t| {
            t.pace.overall = Duration::from_millis(40);
            t.pace.strangers = Duration::from_millis(200);
        },
    )
    .await;
    let (_server, mut ws, mut session, _) = paired(&bot, 1).await;
    eventually("the paired chat told it is paired", || {
        (!bot.fake.sent_to(1).is_empty()).then_some(())
    })
    .await;
    let paired_lane_before = bot.metric("relay_message_sent").await;
    let url = bot.relay.url("/v1/telegram/webhook");
    let http = reqwest::Client::new();
    let mut id = 800_000_000i64;
    for stranger in 20_000..20_150i64 {
        let from = json!({"id": stranger, "is_bot": false, "first_name": "S"});
        let private = json!({"id": stranger, "type": "private", "first_name": "S"});
        let group = json!({"id": -stranger, "type": "group", "title": "G"});
        let updates = [
            json!({"update_id": id, "message": {"message_id": 1, "from": from, "chat": private,
                   "date": 1_700_000_000, "text": "/unpair"}}),
            json!({"update_id": id + 1, "message": {"message_id": 2, "from": from, "chat": private,
                   "date": 1_700_000_000, "location": {"latitude": 1.0, "longitude": 2.0}}}),
            json!({"update_id": id + 2, "callback_query": {"id": format!("q{stranger}"), "from": from,
                   "message": {"message_id": 3, "chat": private, "date": 1_700_000_000,
                               "from": {"id": 123_456_789, "is_bot": true, "first_name": "A"},
                               "text": "x"},
                   "chat_instance": "c", "data": "0123456789abcdef"}}),
            json!({"update_id": id + 3, "message": {"message_id": 4, "from": from, "chat": group,
                   "date": 1_700_000_000, "text": "/start@aromba_test_bot ABCDEF"}}),
        ];
        id += 4;
        for u in &updates {
            let _ = http
                .post(&url)
                .header("x-telegram-bot-api-secret-token", WEBHOOK_SECRET)
                .json(u)
                .send()
                .await;
        }
    }
    let start = Instant::now();
    send(&mut ws, &mut session, "disk at 91%", Vec::new()).await;
    eventually("the paired chat's message", || {
        bot.fake
            .sent_to(1)
            .iter()
            .any(|m| m.text == "disk at 91%")
            .then_some(())
    })
    .await;
    let took = start.elapsed();
    assert!(
        took < Duration::from_secs(3),
        "the paired chat waited {took:?} behind strangers"
    );
    // The strangers were all heard (none refused as malformed).
    bot.wait_metric("tap_expired", 150).await;
    assert_eq!(bot.metric("update_malformed").await, 0);
    assert!(bot.metric("foreign_chat_told").await >= 150);
    assert_eq!(
        bot.metric("relay_message_sent").await,
        paired_lane_before,
        "strangers made the relay send in the paired chats' lane"
    );
    bot.relay.stop().await;
}
