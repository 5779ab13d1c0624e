//! Attacks on the relay's availability, each against the real relay on
//! loopback (many 127.x.y.z source addresses standing for Internet
//! addresses): slow requests and silent WebSockets from many addresses,
//! and, on the Telegram side, strangers (a flood of `/start` during a
//! guess lock, of updates in a paired chat's shard, of `/unpair`, taps and
//! groups, their replies told 429) and other servers' backlogs in front
//! of a paired chat. None may take the relay offline, lose a paired
//! chat's message, or slow it. Each test failed on the relay before the
//! fix it names.

use aromba_testkit::relay as support;

use aromba_botfake::state::Injected;
use aromba_relay_proto::client::{dial, handshake};
use aromba_relay_proto::frame::{Body, Delivery};
use serde_json::json;
use sqlx::PgPool;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use support::attack::{
    client_from, raise_descriptor_limit, silent_websocket, slow_body, slow_headers, socket_open,
    source, still_open,
};
use support::bot::{
    WEBHOOK_SECRET, eventually, next_frame, paired, send, start_bot_tuned, start_bot_with,
};
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
