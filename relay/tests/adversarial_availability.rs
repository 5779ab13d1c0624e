//! The availability review's attacks, each against the real relay on
//! loopback (many 127.x.y.z source addresses standing for Internet
//! addresses): none may take the relay offline or slow a paired chat.
//! Each test failed on the relay before the fix it names.

mod support;

use aromba_botfake::state::Injected;
use aromba_proto::client::{dial, handshake};
use sqlx::PgPool;
use std::time::{Duration, Instant};
use support::attack::{
    client_from, raise_descriptor_limit, silent_websocket, slow_body, slow_headers, socket_open,
    source, still_open,
};
use support::bot::{eventually, paired, send, start_bot_tuned, start_bot_with};
use support::{Server, config, config_with, connect, post_json, refusals, start};

/// `/healthz` from an address of its own answers within a second.
async fn healthz_answers(relay: &support::TestRelay, from: std::net::IpAddr) -> bool {
    let asked = client_from(from)
        .get(relay.url("/healthz"))
        .timeout(Duration::from_secs(1))
        .send()
        .await;
    matches!(asked, Ok(r) if r.status() == 200)
}

// ---------------------------------------------------------------------
// Slow requests and the HTTP connection pool.
// ---------------------------------------------------------------------

#[sqlx::test(migrations = false)]
async fn slow_bodies_from_many_addresses_leave_room_for_health_registration_and_servers(
    db: PgPool,
) {
    raise_descriptor_limit();
    let relay = start(
        db,
        config_with(|l| {
            l.max_http_connections = 64;
            l.http_per_address = 4;
            // The deadline alone would free them later: this is about
            // the pool while they are held.
            l.body_deadline_ms = 120_000;
        }),
    )
    .await;
    // 40 addresses × 4 slow registrations: more than twice the pool.
    let mut held = Vec::new();
    for i in 0..160 {
        if let Some(s) = slow_body(source(i / 4), relay.addr, "/v1/servers").await {
            held.push(s);
        }
    }
    assert!(
        held.len() >= 150,
        "the attack opened {} connections",
        held.len()
    );
    assert!(
        healthz_answers(&relay, source(1_000)).await,
        "/healthz must answer while slow bodies hold the pool"
    );
    let server = Server::new();
    assert_eq!(post_json(&relay, &server.registration()).await.0, 201);
    let _ = connect(&relay, &server).await;
    assert!(refusals(&relay, "http_evicted_heaviest").await > 0);
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn slow_headers_from_many_addresses_leave_room_for_health(db: PgPool) {
    raise_descriptor_limit();
    let relay = start(
        db,
        config_with(|l| {
            l.max_http_connections = 64;
            l.http_per_address = 4;
        }),
    )
    .await;
    let mut held = Vec::new();
    for i in 0..160 {
        if let Some(s) = slow_headers(source(i / 4), relay.addr).await {
            held.push(s);
        }
    }
    assert!(healthz_answers(&relay, source(1_000)).await);
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn one_address_holds_at_most_its_share_of_connections(db: PgPool) {
    let relay = start(
        db,
        config_with(|l| {
            l.http_per_address = 4;
            l.body_deadline_ms = 120_000;
        }),
    )
    .await;
    let attacker = source(7);
    let mut held = Vec::new();
    for _ in 0..12 {
        held.push(
            slow_body(attacker, relay.addr, "/v1/servers")
                .await
                .expect("a connection"),
        );
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut open = 0;
    for s in &mut held {
        if still_open(s).await {
            open += 1;
        }
    }
    assert_eq!(open, 4, "one address keeps its share, its newest");
    assert!(still_open(held.last_mut().expect("one")).await);
    assert_eq!(refusals(&relay, "http_evicted_same_address").await, 8);
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_body_trickled_past_its_deadline_is_cut(db: PgPool) {
    let relay = start(db, config_with(|l| l.body_deadline_ms = 300)).await;
    let mut slow = slow_body(source(3), relay.addr, "/v1/servers")
        .await
        .expect("a connection");
    let mut cut = false;
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if !still_open(&mut slow).await {
            cut = true;
            break;
        }
    }
    assert!(
        cut,
        "a body that does not arrive within its deadline is cut"
    );
    assert_eq!(refusals(&relay, "body_deadline").await, 1);
    relay.stop().await;
}

// ---------------------------------------------------------------------
// Silent WebSockets and hellos.
// ---------------------------------------------------------------------

#[sqlx::test(migrations = false)]
async fn silent_websockets_from_many_addresses_do_not_keep_a_registered_server_out(db: PgPool) {
    raise_descriptor_limit();
    let relay = start(
        db,
        config_with(|l| {
            l.max_pending_hellos = 40;
            l.hellos_per_address = 4;
            l.hello_timeout_ms = 120_000;
        }),
    )
    .await;
    let mut silent = Vec::new();
    for i in 0..100 {
        if let Some(ws) = silent_websocket(source(i / 4), relay.addr).await {
            silent.push(ws);
        }
    }
    assert!(silent.len() >= 90, "{} silent sockets", silent.len());
    for _ in 0..5 {
        let server = Server::new();
        assert_eq!(post_json(&relay, &server.registration()).await.0, 201);
        let endpoint = server.endpoint(&relay);
        let mut ws = dial(&endpoint).await.expect("dial");
        handshake(&mut ws, &endpoint)
            .await
            .expect("a registered server's hello is never refused for silent sockets");
    }
    let mut open = 0;
    for ws in &mut silent {
        if socket_open(ws).await {
            open += 1;
        }
    }
    assert!(
        open <= 40,
        "{open} silent sockets held past the pending pool"
    );
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_server_saying_hello_in_a_loop_is_told_to_come_back_later(db: PgPool) {
    let relay = start(
        db,
        config_with(|l| {
            l.hello_burst = 3;
            l.hello_refill_ms = 600_000;
        }),
    )
    .await;
    let server = Server::new();
    assert_eq!(post_json(&relay, &server.registration()).await.0, 201);
    let mut kept = Vec::new();
    for _ in 0..3 {
        kept.push(connect(&relay, &server).await);
    }
    let endpoint = server.endpoint(&relay);
    let mut ws = dial(&endpoint).await.expect("dial");
    assert!(handshake(&mut ws, &endpoint).await.is_err());
    assert_eq!(refusals(&relay, "hello_rate").await, 1);
    // Another server's hellos are its own.
    let other = Server::new();
    assert_eq!(post_json(&relay, &other.registration()).await.0, 201);
    let _ = connect(&relay, &other).await;
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn unsolicited_pongs_count_against_the_frame_budget(db: PgPool) {
    use futures_util::SinkExt;
    use tokio_tungstenite::tungstenite::Message;
    let relay = start(
        db,
        config_with(|l| {
            l.frame_burst = 4;
            l.frames_per_second = 1;
        }),
    )
    .await;
    let (_, mut ws, _) = support::connected(&relay).await;
    for _ in 0..50 {
        if ws.send(Message::Pong(Default::default())).await.is_err() {
            break;
        }
    }
    // Closed (as a policy violation, or reset under the pongs still
    // coming), and counted.
    support::closed_with(&mut ws).await;
    assert_eq!(refusals(&relay, "frame_rate").await, 1);
    relay.stop().await;
}

// ---------------------------------------------------------------------
// Telegram: strangers, 429s, the sender's rounds.
// ---------------------------------------------------------------------

#[sqlx::test(migrations = false)]
async fn a_stranger_flood_during_a_guess_lock_does_not_delay_a_paired_chat(db: PgPool) {
    let bot = start_bot_tuned(
        db,
        |_| {},
        |t| {
            t.guesses_overall = 2;
            // Telegram's own figures.
            t.pace.overall = Duration::from_millis(40);
            t.pace.strangers = Duration::from_millis(200);
        },
    )
    .await;
    let (_server, mut ws, mut session, _) = paired(&bot, 1).await;
    // Two wrong codes lock pairing for everyone.
    bot.fake.user_message(5_000, "/start AAAAAA");
    bot.fake.user_message(5_001, "/start BBBBBB");
    bot.wait_metric("pairing_wrong_code", 2).await;
    // Four hundred strangers, and one of them five times.
    for chat in 10_000..10_400 {
        bot.fake.user_message(chat, "/start CCCCCC");
    }
    for _ in 0..5 {
        bot.fake.user_message(6_000, "/start DDDDDD");
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
    bot.wait_metric("pairing_busy", 405).await;
    assert!(
        bot.fake.sent_to(6_000).len() <= 1,
        "a stranger is told once a window"
    );
    assert!(bot.metric("stranger_reply_dropped").await >= 300);
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_days_retry_after_pauses_its_chat_not_the_bot(db: PgPool) {
    let bot = start_bot_tuned(db, |_| {}, |_| {}).await;
    let (_a, mut ws_a, mut session_a, _) = paired(&bot, 11).await;
    let (_b, mut ws_b, mut session_b, _) = paired(&bot, 12).await;
    // Both pairings' replies are out before the 429 is armed.
    eventually("both told they are paired", || {
        (!bot.fake.sent_to(11).is_empty() && !bot.fake.sent_to(12).is_empty()).then_some(())
    })
    .await;
    bot.fake.inject_for(
        "sendMessage",
        Injected::TooManyRequests {
            retry_after: 86_400,
        },
    );
    send(&mut ws_a, &mut session_a, "for chat 11", Vec::new()).await;
    bot.wait_metric("bot_api_pause_chat", 1).await;
    send(&mut ws_b, &mut session_b, "for chat 12", Vec::new()).await;
    eventually("chat 12's message despite chat 11's 429", || {
        bot.fake
            .sent_to(12)
            .iter()
            .any(|m| m.text == "for chat 12")
            .then_some(())
    })
    .await;
    assert!(bot.metric("bot_api_pause_capped").await >= 1);
    assert!(
        !bot.fake.sent_to(11).iter().any(|m| m.text == "for chat 11"),
        "chat 11 waits as Telegram asked (up to the cap)"
    );
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn deep_backlogs_of_other_chats_do_not_keep_a_servers_message_out(db: PgPool) {
    let bot = start_bot_tuned(
        db,
        |_| {},
        |t| {
            t.send_round = 2;
            t.pace.per_chat = Duration::from_secs(5);
        },
    )
    .await;
    let (_a, mut ws_a, mut session_a, _) = paired(&bot, 21).await;
    let (_b, mut ws_b, mut session_b, _) = paired(&bot, 22).await;
    let (_c, mut ws_c, mut session_c, _) = paired(&bot, 23).await;
    for i in 0..6 {
        send(&mut ws_a, &mut session_a, &format!("a{i}"), Vec::new()).await;
        send(&mut ws_b, &mut session_b, &format!("b{i}"), Vec::new()).await;
    }
    eventually("the first of each backlog", || {
        let a = bot.fake.sent_to(21).iter().any(|m| m.text == "a0");
        let b = bot.fake.sent_to(22).iter().any(|m| m.text == "b0");
        (a && b).then_some(())
    })
    .await;
    // Chat 23's own turn has come long since (its pairing reply was sent
    // before the backlogs): only the round stands in its way.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let start = Instant::now();
    send(&mut ws_c, &mut session_c, "c0", Vec::new()).await;
    eventually("chat 23's message", || {
        bot.fake
            .sent_to(23)
            .iter()
            .any(|m| m.text == "c0")
            .then_some(())
    })
    .await;
    let took = start.elapsed();
    assert!(
        took < Duration::from_secs(3),
        "chat 23 waited {took:?} behind two backlogs"
    );
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_paired_chat_that_starts_again_is_not_silenced_as_a_stranger(db: PgPool) {
    // The stranger window is for chats that are not paired: a paired
    // person's repeated command is answered every time.
    let bot = start_bot_with(db, false, config()).await;
    let (_s, _ws, _session, _) = paired(&bot, 31).await;
    for _ in 0..3 {
        bot.fake.user_message(31, "/start");
    }
    eventually("three answers and the pairing's", || {
        (bot.fake.sent_to(31).len() == 4).then_some(())
    })
    .await;
    bot.relay.stop().await;
}
