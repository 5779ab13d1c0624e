//! Telegram in: the webhook route, long polling, pairing and chats that are
//! not paired, through the real relay and the strict fake Bot API.

use aromba_testkit::relay as support;

use aromba_relay::clock::ManualClock;
use aromba_relay_proto::frame::Delivery;
use serde_json::json;
use sqlx::PgPool;
use std::sync::Arc;
use std::time::Duration;
use support::bot::{
    BOT_NAME, WEBHOOK_SECRET, ask_code, eventually, message_update, next_delivery, no_delivery,
    paired, start_bot, start_bot_with,
};
use support::{Server, config, connect, post_json};

async fn post_update(
    url: &str,
    secret: Option<&str>,
    body: &serde_json::Value,
) -> reqwest::Response {
    let mut request = reqwest::Client::new().post(url).json(body);
    if let Some(secret) = secret {
        request = request.header("X-Telegram-Bot-Api-Secret-Token", secret);
    }
    request.send().await.expect("an answer")
}

/// Status, content type and body, to compare two answers whole.
async fn answer_of(r: reqwest::Response) -> (u16, Option<String>, String) {
    let status = r.status().as_u16();
    let kind = r
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap_or("").to_string());
    (status, kind, r.text().await.unwrap_or_default())
}

#[sqlx::test(migrations = false)]
async fn the_webhook_without_its_secret_is_the_404_of_an_unknown_path(db: PgPool) {
    let bot = start_bot(db, false).await;
    let webhook = bot.relay.url("/v1/telegram/webhook");
    let update = message_update(1, 42, "hello");
    let unknown =
        answer_of(post_update(&bot.relay.url("/v1/nothing-here"), None, &update).await).await;
    assert_eq!(unknown.0, 404);
    let none = answer_of(post_update(&webhook, None, &update).await).await;
    let wrong = answer_of(post_update(&webhook, Some("wrong-secret"), &update).await).await;
    let prefix = answer_of(post_update(&webhook, Some(&WEBHOOK_SECRET[..10]), &update).await).await;
    assert_eq!(none, unknown);
    assert_eq!(wrong, unknown);
    assert_eq!(prefix, unknown);
    // Another method with the right secret does not reveal the route.
    let get = reqwest::Client::new()
        .get(&webhook)
        .header("X-Telegram-Bot-Api-Secret-Token", WEBHOOK_SECRET)
        .send()
        .await
        .expect("an answer");
    let get_unknown = reqwest::get(bot.relay.url("/v1/nothing-here"))
        .await
        .expect("an answer");
    assert_eq!(answer_of(get).await, answer_of(get_unknown).await);
    let valid = post_update(&webhook, Some(WEBHOOK_SECRET), &update).await;
    assert_eq!(valid.status(), 200);
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_malformed_or_oversized_update_is_answered_200_and_counted(db: PgPool) {
    let bot = start_bot(db, false).await;
    let webhook = bot.relay.url("/v1/telegram/webhook");
    let r = reqwest::Client::new()
        .post(&webhook)
        .header("X-Telegram-Bot-Api-Secret-Token", WEBHOOK_SECRET)
        .body("{\"update_id\": \"not a number\"")
        .send()
        .await
        .expect("answer");
    assert_eq!(r.status(), 200);
    let huge = message_update(2, 42, &"x".repeat(300 * 1024));
    let r = post_update(&webhook, Some(WEBHOOK_SECRET), &huge).await;
    assert_eq!(r.status(), 200);
    let metrics = bot.relay.metrics_text().await;
    assert!(
        metrics.contains("aromba_relay_telegram_events_total{event=\"update_malformed\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("aromba_relay_telegram_events_total{event=\"update_oversize\"} 1"),
        "{metrics}"
    );
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn pairing_end_to_end_through_the_webhook(db: PgPool) {
    let bot = start_bot(db.clone(), false).await;
    let server = Server::new();
    assert_eq!(post_json(&bot.relay, &server.registration()).await.0, 201);
    let (mut ws, mut session) = connect(&bot.relay, &server).await;
    let (code, link) = ask_code(&mut ws, &mut session).await;
    assert_eq!(code.len(), 6);
    assert_eq!(link, format!("https://t.me/{BOT_NAME}?start={code}"));
    // The person opens the link: Telegram sends /start CODE.
    bot.fake.user_message(7001, &format!("/start {code}"));
    let paired = next_delivery(&mut ws, &mut session).await;
    assert!(
        matches!(paired, Delivery::Paired { ref approval_key, .. } if approval_key.starts_with("RW"))
    );
    let said = eventually("the pairing reply", || {
        bot.fake.sent_to(7001).into_iter().next()
    })
    .await;
    assert!(said.text.starts_with("Paired."), "{}", said.text);
    // The chat now talks to the server.
    bot.fake.user_message(7001, "/disk");
    assert_eq!(
        next_delivery(&mut ws, &mut session).await,
        Delivery::Message {
            text: "/disk".into()
        }
    );
    let stored: Option<chrono::DateTime<chrono::Utc>> =
        sqlx::query_scalar("SELECT paired_at FROM servers WHERE id = $1")
            .bind(server.id)
            .fetch_one(&db)
            .await
            .expect("server");
    assert!(stored.is_some());
    let pairings: i32 = sqlx::query_scalar("SELECT sum(pairings)::int FROM daily_counts")
        .fetch_one(&db)
        .await
        .expect("counts");
    assert_eq!(pairings, 1);
    // The code is kept only as a keyed hash, and is gone once used.
    let codes: i64 = sqlx::query_scalar("SELECT count(*) FROM pairing_codes")
        .fetch_one(&db)
        .await
        .expect("codes");
    assert_eq!(codes, 0);
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_code_is_kept_only_as_a_keyed_hash(db: PgPool) {
    let bot = start_bot(db.clone(), false).await;
    let server = Server::new();
    assert_eq!(post_json(&bot.relay, &server.registration()).await.0, 201);
    let (mut ws, mut session) = connect(&bot.relay, &server).await;
    let (code, _) = ask_code(&mut ws, &mut session).await;
    let dump: Vec<String> = sqlx::query_scalar(
        "SELECT encode(code_hash, 'escape') || server_id::text FROM pairing_codes",
    )
    .fetch_all(&db)
    .await
    .expect("codes");
    assert_eq!(dump.len(), 1);
    assert!(!dump[0].contains(&code));
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn long_polling_end_to_end(db: PgPool) {
    let bot = start_bot(db, true).await;
    let (_server, mut ws, mut session, _) = paired(&bot, 7002).await;
    bot.fake.user_message(7002, "how full is the disk?");
    assert_eq!(
        next_delivery(&mut ws, &mut session).await,
        Delivery::Message {
            text: "how full is the disk?".into()
        }
    );
    // No webhook was set: the fake served getUpdates.
    assert!(bot.fake.state().webhook.is_none());
    assert_eq!(bot.fake.state().webhook_deliveries, 0);
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_duplicate_update_is_handled_once(db: PgPool) {
    let bot = start_bot(db, false).await;
    let (_server, mut ws, mut session, _) = paired(&bot, 7003).await;
    let webhook = bot.relay.url("/v1/telegram/webhook");
    let update = message_update(900_001, 7003, "only once please");
    for _ in 0..3 {
        let r = post_update(&webhook, Some(WEBHOOK_SECRET), &update).await;
        assert_eq!(r.status(), 200);
    }
    assert_eq!(
        next_delivery(&mut ws, &mut session).await,
        Delivery::Message {
            text: "only once please".into()
        }
    );
    no_delivery(&mut ws, &mut session, Duration::from_millis(700)).await;
    let metrics = bot.relay.metrics_text().await;
    assert!(
        metrics.contains("aromba_relay_telegram_events_total{event=\"update_duplicate\"} 2"),
        "{metrics}"
    );
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn an_expired_code_and_a_used_code_are_refused(db: PgPool) {
    let clock = Arc::new(ManualClock::new(chrono::Utc::now()));
    let mut c = config();
    c.clock = clock.clone();
    let bot = start_bot_with(db, false, c).await;
    let server = Server::new();
    assert_eq!(post_json(&bot.relay, &server.registration()).await.0, 201);
    let (mut ws, mut session) = connect(&bot.relay, &server).await;
    let (expired, _) = ask_code(&mut ws, &mut session).await;
    clock.advance(chrono::Duration::minutes(16));
    bot.fake.user_message(7004, &format!("/start {expired}"));
    let said = eventually("the refusal", || bot.fake.sent_to(7004).into_iter().next()).await;
    assert!(
        said.text.contains("not valid, or it has expired"),
        "{}",
        said.text
    );
    // A fresh code works once; the second chat using it is refused.
    let (code, _) = ask_code(&mut ws, &mut session).await;
    bot.fake.user_message(7005, &format!("/start {code}"));
    assert!(matches!(
        next_delivery(&mut ws, &mut session).await,
        Delivery::Paired { .. }
    ));
    bot.fake.user_message(7006, &format!("/start {code}"));
    let said = eventually("the second refusal", || {
        bot.fake.sent_to(7006).into_iter().next()
    })
    .await;
    assert!(
        said.text.contains("not valid, or it has expired"),
        "{}",
        said.text
    );
    no_delivery(&mut ws, &mut session, Duration::from_millis(500)).await;
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_second_server_for_one_account_is_refused_with_what_to_do(db: PgPool) {
    let bot = start_bot(db.clone(), false).await;
    let (_first, _ws, _session, _) = paired(&bot, 7007).await;
    let second = Server::new();
    assert_eq!(post_json(&bot.relay, &second.registration()).await.0, 201);
    let (mut ws, mut session) = connect(&bot.relay, &second).await;
    let (code, _) = ask_code(&mut ws, &mut session).await;
    bot.fake.user_message(7007, &format!("/start {code}"));
    let said = eventually("the refusal", || bot.fake.sent_to(7007).into_iter().nth(1)).await;
    assert!(
        said.text.contains("one account looks after one server"),
        "{}",
        said.text
    );
    assert!(said.text.contains("/unpair"), "{}", said.text);
    no_delivery(&mut ws, &mut session, Duration::from_millis(500)).await;
    // The code was not spent: the person can use it from another account.
    let codes: i64 = sqlx::query_scalar("SELECT count(*) FROM pairing_codes")
        .fetch_one(&db)
        .await
        .expect("codes");
    assert_eq!(codes, 1);
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_foreign_chat_gets_exactly_one_reply(db: PgPool) {
    let bot = start_bot(db.clone(), false).await;
    for text in ["hello?", "/start", "/disk", "anyone there"] {
        bot.fake.user_message(7008, text);
    }
    eventually("every update handled", || {
        (bot.fake.state().pending.is_empty()).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let said = bot.fake.sent_to(7008);
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0]
            .text
            .starts_with("This bot talks only to the server it is paired with")
    );
    // Remembered without the chat id in clear.
    let dump: Vec<String> =
        sqlx::query_scalar("SELECT encode(chat_hash, 'hex') FROM foreign_chats")
            .fetch_all(&db)
            .await
            .expect("rows");
    assert_eq!(dump.len(), 1);
    assert!(!dump[0].contains("7008"));
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_burst_of_wrong_codes_locks_the_chat_out(db: PgPool) {
    let bot = start_bot(db.clone(), false).await;
    let server = Server::new();
    assert_eq!(post_json(&bot.relay, &server.registration()).await.0, 201);
    let (mut ws, mut session) = connect(&bot.relay, &server).await;
    let (code, _) = ask_code(&mut ws, &mut session).await;
    for guess in ["AAAAAA", "BBBBBB", "CCCCCC", "DDDDDD", "EEEEEE"] {
        bot.fake.user_message(7009, &format!("/start {guess}"));
    }
    // A chat that is not paired hears each verdict once per window: the
    // wrong code once (not five times), then the lockout.
    let said = eventually("two answers", || {
        let said = bot.fake.sent_to(7009);
        (said.len() == 2).then_some(said)
    })
    .await;
    assert!(
        said[0].text.starts_with("That pairing code is not valid"),
        "{}",
        said[0].text
    );
    assert!(
        said[1].text.starts_with("Too many wrong pairing codes"),
        "{}",
        said[1].text
    );
    // Locked out: even the right code does nothing now, and is not spent.
    bot.fake.user_message(7009, &format!("/start {code}"));
    no_delivery(&mut ws, &mut session, Duration::from_millis(700)).await;
    assert_eq!(bot.fake.sent_to(7009).len(), 2);
    let codes: i64 = sqlx::query_scalar("SELECT count(*) FROM pairing_codes")
        .fetch_one(&db)
        .await
        .expect("codes");
    assert_eq!(codes, 1);
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_group_chat_cannot_pair(db: PgPool) {
    let bot = start_bot(db.clone(), false).await;
    let server = Server::new();
    assert_eq!(post_json(&bot.relay, &server.registration()).await.0, 201);
    let (mut ws, mut session) = connect(&bot.relay, &server).await;
    let (code, _) = ask_code(&mut ws, &mut session).await;
    let webhook = bot.relay.url("/v1/telegram/webhook");
    let mut update = message_update(800_001, -100_777, &format!("/start {code}"));
    update["message"]["chat"] = json!({"id": -100_777, "type": "group", "title": "Ops"});
    update["message"]["from"] = json!({"id": 7010, "is_bot": false, "first_name": "P"});
    bot.fake.state().chats.insert(-100_777);
    assert_eq!(
        post_update(&webhook, Some(WEBHOOK_SECRET), &update)
            .await
            .status(),
        200
    );
    let said = eventually("the refusal", || {
        bot.fake.sent_to(-100_777).into_iter().next()
    })
    .await;
    assert!(said.text.contains("private chat"), "{}", said.text);
    no_delivery(&mut ws, &mut session, Duration::from_millis(500)).await;
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_full_queue_makes_telegram_wait_and_loses_nothing_it_answered_200(db: PgPool) {
    let (fake, fake_addr) = support::bot::fake().await;
    let api = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let mut telegram =
        support::bot::telegram_config(fake_addr, api.local_addr().expect("addr"), false);
    telegram.limits.shards = 1;
    telegram.limits.queue_per_shard = 1;
    let mut c = config();
    c.telegram = Some(telegram);
    let relay = support::start_on(db.clone(), c, api).await;
    let webhook = relay.url("/v1/telegram/webhook");
    let posts = (0..40).map(|i| {
        let webhook = webhook.clone();
        async move {
            let update = message_update(500_000 + i, 10_000 + i, "flood");
            post_update(&webhook, Some(WEBHOOK_SECRET), &update)
                .await
                .status()
                .as_u16()
        }
    });
    let statuses = futures_util::future::join_all(posts).await;
    // Each waits for room (Telegram holds few connections open); one that
    // finds none in time is answered 503 and sent again by Telegram.
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 503),
        "{statuses:?}"
    );
    let taken = statuses.iter().filter(|s| **s == 200).count() as i64;
    assert!(taken > 0);
    // Every update answered 200 is handled: none was dropped after it.
    let mut claimed = 0;
    for _ in 0..500 {
        claimed = sqlx::query_scalar::<_, i64>("SELECT count(*) FROM telegram_updates")
            .fetch_one(&db)
            .await
            .expect("count");
        if claimed == taken {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(claimed, taken);
    drop(fake);
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_rotated_secret_is_accepted_only_within_the_overlap(db: PgPool) {
    use aromba_relay::telegram::webhook::WebhookSecrets;
    for (overlap_over, old_status) in [(false, 200), (true, 404)] {
        let (_fake, fake_addr) = support::bot::fake().await;
        let api = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let mut telegram =
            support::bot::telegram_config(fake_addr, api.local_addr().expect("addr"), true);
        let now = std::time::Instant::now();
        let until = if overlap_over {
            now.checked_sub(Duration::from_secs(1)).unwrap_or(now)
        } else {
            now + Duration::from_secs(600)
        };
        telegram.secrets = WebhookSecrets::rotating("the-new-secret", "the-old-secret", until);
        let mut c = config();
        c.telegram = Some(telegram);
        let relay = support::start_on(db.clone(), c, api).await;
        let webhook = relay.url("/v1/telegram/webhook");
        let update = message_update(1, 42, "hi");
        let new = post_update(&webhook, Some("the-new-secret"), &update).await;
        let old = post_update(&webhook, Some("the-old-secret"), &update).await;
        assert_eq!(new.status(), 200);
        assert_eq!(old.status(), old_status);
        relay.stop().await;
    }
}

#[sqlx::test(migrations = false)]
async fn another_bots_update_ids_are_not_taken_for_repeats(db: PgPool) {
    use aromba_relay::telegram::token::BotToken;
    let mut answered = Vec::new();
    for (token, chat) in [
        (support::bot::BOT_TOKEN, 61_001),
        ("987654321:ANOTHER-test-bot-token-not-a-secret-0123", 61_002),
    ] {
        let (fake, fake_addr) = support::bot::fake_of(token).await;
        fake.state().chats.insert(chat);
        let api = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let mut telegram =
            support::bot::telegram_config(fake_addr, api.local_addr().expect("addr"), false);
        telegram.token = BotToken::new(token).expect("a token");
        let mut c = config();
        c.telegram = Some(telegram);
        let relay = support::start_on(db.clone(), c, api).await;
        // The same update id, from each bot.
        let update = message_update(777, chat, "hello");
        let r = post_update(
            &relay.url("/v1/telegram/webhook"),
            Some(WEBHOOK_SECRET),
            &update,
        )
        .await;
        assert_eq!(r.status(), 200);
        let said = eventually("the stranger's reply", || {
            fake.sent_to(chat).into_iter().next()
        })
        .await;
        answered.push(said.text);
        relay.stop().await;
    }
    assert_eq!(answered.len(), 2);
}

/// An update is answered 200 only once it is settled: one whose claim
/// could not be written (here: held up past the lock bound by another
/// transaction holding the same update id, as a replica killed mid-claim
/// or a slow copy would) is answered 503, so Telegram sends it again; sent
/// again, it reaches the server once (found by the chaos test,
/// `testkit/tests/relay_replicas_killed.rs`: answered at queueing, an
/// update in a killed replica's queue was lost).
#[sqlx::test(migrations = false)]
async fn an_update_not_settled_is_answered_503_and_delivered_once_when_sent_again(db: PgPool) {
    let bot = start_bot(db.clone(), false).await;
    let (_server, mut ws, mut session, _) = paired(&bot, 7005).await;
    let webhook = bot.relay.url("/v1/telegram/webhook");
    let update = message_update(900_101, 7005, "is the backup done?");
    let bot_id: i64 = aromba_botfake::launch::bot_id(support::bot::BOT_TOKEN)
        .and_then(|id| i64::try_from(id).ok())
        .expect("the bot's id");
    let mut holder = db.begin().await.expect("a transaction");
    sqlx::query("INSERT INTO telegram_updates (bot_id, update_id, seen_at) VALUES ($1, $2, now())")
        .bind(bot_id)
        .bind(900_101_i64)
        .execute(&mut *holder)
        .await
        .expect("the same claim, held open");
    let r = post_update(&webhook, Some(WEBHOOK_SECRET), &update).await;
    assert_eq!(r.status(), 503, "answered before the update was settled");
    no_delivery(&mut ws, &mut session, Duration::from_millis(300)).await;
    holder.rollback().await.expect("rolled back");
    let r = post_update(&webhook, Some(WEBHOOK_SECRET), &update).await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        next_delivery(&mut ws, &mut session).await,
        Delivery::Message {
            text: "is the backup done?".into()
        }
    );
    let r = post_update(&webhook, Some(WEBHOOK_SECRET), &update).await;
    assert_eq!(r.status(), 200, "a copy of a settled update is settled");
    no_delivery(&mut ws, &mut session, Duration::from_millis(500)).await;
    bot.relay.stop().await;
}
