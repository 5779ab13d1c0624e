//! The relay's Telegram side attacked: by anyone on the internet hitting
//! the webhook path, by Telegram users in chats of every kind, by a hostile
//! server speaking the real protocol with a valid token, and by someone
//! reading the relay's log. Each test is named after the attack and holds
//! what must hold against it.

use aromba_testkit::relay as support;

use aromba_botfake::state::Injected;
use aromba_relay::telegram::pace::PaceLimits;
use aromba_relay_proto::frame::{Body, Button, Delivery};
use serde_json::json;
use sqlx::PgPool;
use std::time::Duration;
use support::bot::{
    BOT_NAME, Bot, WEBHOOK_SECRET, approval_buttons, ask_code, eventually, fake, message_update,
    next_delivery, no_delivery, paired, post_update, send, sent, start_bot, telegram_config,
};
use support::{Server, config, connect, post_json};
use uuid::Uuid;

const SECRET_HEADER: &str = "X-Telegram-Bot-Api-Secret-Token";

/// A callback query as Telegram sends it, on bot message `message_id` of
/// private chat `chat`.
fn tap_update(
    update_id: i64,
    query: &str,
    chat: i64,
    message_id: i64,
    data: &str,
) -> serde_json::Value {
    json!({
        "update_id": update_id,
        "callback_query": {
            "id": query,
            "from": {"id": chat, "is_bot": false, "first_name": "P"},
            "message": {
                "message_id": message_id,
                "from": {"id": 123_456_789, "is_bot": true, "first_name": "Aromba", "username": BOT_NAME},
                "chat": {"id": chat, "type": "private", "first_name": "P"},
                "date": 1_700_000_000,
                "text": "x",
            },
            "chat_instance": format!("ci{chat}"),
            "data": data,
        }
    })
}

/// Status, every header but the date, and the body: an answer whole.
async fn whole(r: reqwest::Response) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let status = r.status().as_u16();
    let mut headers: Vec<(String, String)> = r
        .headers()
        .iter()
        .filter(|(k, _)| k.as_str() != "date")
        .map(|(k, v)| (k.to_string(), String::from_utf8_lossy(v.as_bytes()).into()))
        .collect();
    headers.sort();
    let body = r.bytes().await.map(|b| b.to_vec()).unwrap_or_default();
    (status, headers, body)
}

/// The callback data of the button labelled `label` on `message`.
fn data_of(message: &aromba_botfake::state::Sent, label: &str) -> String {
    message
        .buttons
        .iter()
        .flatten()
        .find(|(l, _)| l == label)
        .map(|(_, d)| d.clone())
        .expect("the button")
}

async fn chat_of(db: &PgPool, server: Uuid) -> Option<i64> {
    sqlx::query_scalar("SELECT chat_id FROM pairings WHERE server_id = $1")
        .bind(server)
        .fetch_optional(db)
        .await
        .expect("pairings")
}

/// `/unpair` from `chat`, then its "Unpair" button: the chat is unpaired.
async fn unpair(bot: &Bot, chat: i64) {
    let before = bot.fake.sent_to(chat).len();
    bot.fake.user_message(chat, "/unpair");
    let question = sent(bot, chat, before).await;
    let yes = data_of(&question, "Unpair");
    let query = bot.fake.tap(chat, question.message_id, &yes).expect("tap");
    eventually("the unpair answered", || {
        bot.fake.answered(&query).filter(|a| *a)
    })
    .await;
}

/// What a request carries: a name for it, a body, a content type.
type RequestBody = (&'static str, Option<Vec<u8>>, Option<&'static str>);

// ---------------------------------------------------------------------
// (a) Anyone on the internet, at the webhook path.
// ---------------------------------------------------------------------

#[sqlx::test(migrations = false)]
async fn the_webhook_without_its_secret_answers_every_method_and_body_as_an_unknown_path(
    db: PgPool,
) {
    let bot = start_bot(db, false).await;
    let client = reqwest::Client::new();
    let webhook = bot.relay.url("/v1/telegram/webhook");
    let unknown = bot.relay.url("/v1/telegram/webhoo");
    let big = vec![b'{'; 3 * 1024 * 1024];
    let bodies: Vec<RequestBody> = vec![
        ("none", None, None),
        (
            "json",
            Some(br#"{"update_id":1}"#.to_vec()),
            Some("application/json"),
        ),
        (
            "no content type",
            Some(br#"{"update_id":1}"#.to_vec()),
            None,
        ),
        (
            "form",
            Some(b"a=b".to_vec()),
            Some("application/x-www-form-urlencoded"),
        ),
        ("three megabytes", Some(big), Some("application/json")),
    ];
    let secrets: [Option<&str>; 5] = [
        None,
        Some("wrong"),
        Some(&WEBHOOK_SECRET[..WEBHOOK_SECRET.len() - 1]),
        Some("TEST-WEBHOOK-SECRET-NOT-A-SECRET"),
        Some(""),
    ];
    for method in ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"] {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        for (what, body, kind) in &bodies {
            for secret in secrets {
                let build = |url: &str| {
                    let mut r = client.request(method.clone(), url);
                    if let Some(s) = secret {
                        r = r.header(SECRET_HEADER, s);
                    }
                    if let Some(k) = kind {
                        r = r.header("content-type", *k);
                    }
                    if let Some(b) = body {
                        r = r.body(b.clone());
                    }
                    r
                };
                let a = whole(build(&webhook).send().await.expect("answer")).await;
                let b = whole(build(&unknown).send().await.expect("answer")).await;
                assert_eq!(a, b, "{method} with {what} and secret {secret:?}");
                assert_eq!(a.0, 404);
            }
        }
    }
    // A chunked body that never ends, with the wrong secret: answered
    // (never read) as an unknown path is.
    let mut heads = Vec::new();
    for path in ["/v1/telegram/webhook", "/v1/telegram/webhoo"] {
        heads.push(endless_chunked_post(bot.relay.addr, path).await);
    }
    assert_eq!(heads[0], heads[1]);
    assert!(heads[0].starts_with("HTTP/1.1 404"), "{}", heads[0]);
    // Look-alike paths with the right secret are unknown paths too.
    for path in [
        "/v1/telegram/webhook/",
        "/v1/telegram//webhook",
        "/v1/telegram/%77ebhook",
        "/v1/Telegram/webhook",
        "/v1/telegram/webhook%2F",
    ] {
        let a = whole(
            client
                .post(bot.relay.url(path))
                .header(SECRET_HEADER, WEBHOOK_SECRET)
                .json(&message_update(77, 42, "x"))
                .send()
                .await
                .expect("answer"),
        )
        .await;
        let b = whole(
            client
                .post(&unknown)
                .header(SECRET_HEADER, WEBHOOK_SECRET)
                .json(&message_update(77, 42, "x"))
                .send()
                .await
                .expect("answer"),
        )
        .await;
        assert_eq!(a, b, "{path}");
    }
    assert_eq!(bot.metric("update_received").await, 0);
    bot.relay.stop().await;
}

/// POSTs a chunked body that never ends with a wrong secret; returns the
/// answer's status line and headers but the date.
async fn endless_chunked_post(addr: std::net::SocketAddr, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: relay\r\n{SECRET_HEADER}: wrong\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{{\"a\":\r\n"
    );
    stream.write_all(head.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf))
            .await
            .expect("answered without the body's end")
            .expect("read");
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&buf[..n]);
        if answer.windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
    }
    String::from_utf8_lossy(&answer)
        .lines()
        .filter(|l| !l.to_ascii_lowercase().starts_with("date:"))
        .take_while(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

// ---------------------------------------------------------------------
// (a') Whoever holds the webhook secret: odd updates.
// ---------------------------------------------------------------------

#[sqlx::test(migrations = false)]
async fn odd_updates_with_the_secret_neither_crash_nor_wedge_the_relay(db: PgPool) {
    let bot = start_bot(db, false).await;
    let (_server, mut ws, mut session, _) = paired(&bot, 9501).await;
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let deep_update = format!(
        "{{\"update_id\": 5, \"message\": {{\"message_id\": 1, \"date\": 1, \"chat\": {{\"id\": 1, \"type\": \"private\"}}, \"text\": \"x\", \"x\": {deep}}}}}"
    );
    let raw: Vec<String> = vec![
        deep_update,
        deep.clone(),
        "[]".into(),
        "null".into(),
        "\"update\"".into(),
        "{\"update_id\": 1e400}".into(),
    ];
    for body in &raw {
        let r = reqwest::Client::new()
            .post(bot.relay.url("/v1/telegram/webhook"))
            .header(SECRET_HEADER, WEBHOOK_SECRET)
            .body(body.clone())
            .send()
            .await
            .expect("an answer");
        assert_eq!(r.status(), 200);
    }
    let mut updates = vec![
        message_update(4_294_967_296, 9502, "past u32"),
        message_update(-1, 9502, "negative"),
        message_update(0, 9502, "zero"),
        message_update(4_294_967_295, 9502, "u32 max"),
        message_update(700_001, i64::MIN, "i64 min"),
        message_update(700_002, i64::MAX, "i64 max"),
        message_update(700_003, 0, "chat zero"),
        message_update(700_004, 9501, "nul \u{0} inside"),
        message_update(700_005, 9502, &format!("/start {}", "\u{0}".repeat(6))),
        tap_update(700_006, "q-nul", 9501, 1, "\u{0}"),
        tap_update(700_007, "q-huge", 9501, 1, &"A".repeat(200_000)),
        tap_update(700_008, "q-empty", 9501, 1, ""),
    ];
    // A tap with no message (an inline message's), one on an inaccessible
    // message, a channel post and a group message without a sender.
    updates.push(json!({
        "update_id": 700_009,
        "callback_query": {"id": "q-inline", "from": {"id": 9501, "is_bot": false, "first_name": "P"},
                           "inline_message_id": "AAAA", "chat_instance": "c", "data": "AAAAAAAAAAAAAAAAAAAAAA"}
    }));
    updates.push(json!({
        "update_id": 700_010,
        "callback_query": {"id": "q-gone", "from": {"id": 9501, "is_bot": false, "first_name": "P"},
                           "message": {"message_id": 1, "chat": {"id": 9501, "type": "private", "first_name": "P"}, "date": 0},
                           "chat_instance": "c", "data": "AAAAAAAAAAAAAAAAAAAAAA"}
    }));
    updates.push(json!({
        "update_id": 700_011,
        "message": {"message_id": 1, "date": 1, "chat": {"id": -1_001_234, "type": "channel", "title": "C"}, "text": "/start ABCDEF"}
    }));
    updates.push(json!({
        "update_id": 700_012,
        "message": {"message_id": 1, "date": 1, "chat": {"id": -1_234, "type": "group", "title": "G"},
                    "sender_chat": {"id": -1_234, "type": "group", "title": "G"}, "text": "/unpair"}
    }));
    updates.push(json!({"update_id": 700_013, "edited_message": message_update(1, 9501, "edited")["message"]}));
    updates.push(json!({"update_id": 700_014, "my_chat_member": {}}));
    for u in &updates {
        assert_eq!(post_update(&bot, u).await, 200);
    }
    // Many updates from one chat at once: all answered 200.
    for i in 0..300 {
        assert_eq!(
            post_update(&bot, &message_update(710_000 + i, 9503, "flood")).await,
            200
        );
    }
    // The relay still works for the paired chat: nothing above reached
    // its server, and its person's next word does.
    bot.fake.user_message(9501, "still there?");
    assert_eq!(
        next_delivery(&mut ws, &mut session).await,
        Delivery::Message {
            text: "still there?".into()
        }
    );
    assert_eq!(bot.metric("tap_forwarded").await, 0);
    bot.relay.stop().await;
}

// ---------------------------------------------------------------------
// (b) Telegram users: taps that must not be forwarded.
// ---------------------------------------------------------------------

#[sqlx::test(migrations = false)]
async fn a_tap_after_the_chat_unpaired_is_expired(db: PgPool) {
    let bot = start_bot(db.clone(), false).await;
    let (server, mut ws, mut session, _) = paired(&bot, 9101).await;
    send(&mut ws, &mut session, "Approve?", approval_buttons()).await;
    let shown = sent(&bot, 9101, 1).await;
    let approve = data_of(&shown, "Approve");
    unpair(&bot, 9101).await;
    assert_eq!(chat_of(&db, server.id).await, None);
    let query = bot.fake.tap(9101, shown.message_id, &approve).expect("tap");
    eventually("answered", || bot.fake.answered(&query).filter(|a| *a)).await;
    no_delivery(&mut ws, &mut session, Duration::from_millis(700)).await;
    assert_eq!(bot.metric("tap_forwarded").await, 0);
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_tap_from_the_old_chat_after_the_server_paired_with_another_is_expired(db: PgPool) {
    let bot = start_bot(db.clone(), false).await;
    let (server, mut ws, mut session, _) = paired(&bot, 9111).await;
    send(&mut ws, &mut session, "Approve?", approval_buttons()).await;
    let shown = sent(&bot, 9111, 1).await;
    let approve = data_of(&shown, "Approve");
    unpair(&bot, 9111).await;
    let (code, _) = ask_code(&mut ws, &mut session).await;
    bot.fake.user_message(9112, &format!("/start {code}"));
    assert!(matches!(
        next_delivery(&mut ws, &mut session).await,
        Delivery::Paired { .. }
    ));
    assert_eq!(chat_of(&db, server.id).await, Some(9112));
    let query = bot.fake.tap(9111, shown.message_id, &approve).expect("tap");
    eventually("answered", || bot.fake.answered(&query).filter(|a| *a)).await;
    no_delivery(&mut ws, &mut session, Duration::from_millis(700)).await;
    assert_eq!(bot.metric("tap_forwarded").await, 0);
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_tap_on_a_message_of_a_server_the_chat_no_longer_looks_after_is_expired(db: PgPool) {
    let bot = start_bot(db.clone(), false).await;
    let (_a, mut ws_a, mut session_a, _) = paired(&bot, 9121).await;
    send(&mut ws_a, &mut session_a, "A asks", approval_buttons()).await;
    let shown = sent(&bot, 9121, 1).await;
    let approve = data_of(&shown, "Approve");
    unpair(&bot, 9121).await;
    // The same chat now looks after server B.
    let b = Server::new();
    assert_eq!(post_json(&bot.relay, &b.registration()).await.0, 201);
    let (mut ws_b, mut session_b) = connect(&bot.relay, &b).await;
    let (code, _) = ask_code(&mut ws_b, &mut session_b).await;
    bot.fake.user_message(9121, &format!("/start {code}"));
    assert!(matches!(
        next_delivery(&mut ws_b, &mut session_b).await,
        Delivery::Paired { .. }
    ));
    let query = bot.fake.tap(9121, shown.message_id, &approve).expect("tap");
    eventually("answered", || bot.fake.answered(&query).filter(|a| *a)).await;
    no_delivery(&mut ws_a, &mut session_a, Duration::from_millis(500)).await;
    no_delivery(&mut ws_b, &mut session_b, Duration::from_millis(200)).await;
    assert_eq!(bot.metric("tap_forwarded").await, 0);
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn another_chats_unpair_button_tapped_in_ones_own_chat_unpairs_nothing(db: PgPool) {
    let bot = start_bot(db.clone(), false).await;
    let (victim, _ws_v, _session_v, _) = paired(&bot, 9131).await;
    let (attacker, mut ws_a, mut session_a, _) = paired(&bot, 9132).await;
    // The victim asks to unpair (and has not answered yet).
    bot.fake.user_message(9131, "/unpair");
    let question = sent(&bot, 9131, 1).await;
    let yes = data_of(&question, "Unpair");
    // The attacker's own message, tapped with the victim's button's data.
    send(
        &mut ws_a,
        &mut session_a,
        "mine",
        vec![Button::new("ok", "OK")],
    )
    .await;
    let own = sent(&bot, 9132, 1).await;
    let query = bot.fake.tap(9132, own.message_id, &yes).expect("tap");
    eventually("answered", || bot.fake.answered(&query).filter(|a| *a)).await;
    // The same data on a message id that exists in both chats.
    let query = bot
        .fake
        .tap(9132, question.message_id.min(own.message_id), &yes)
        .expect("tap");
    eventually("answered", || bot.fake.answered(&query).filter(|a| *a)).await;
    assert_eq!(chat_of(&db, victim.id).await, Some(9131));
    assert_eq!(chat_of(&db, attacker.id).await, Some(9132));
    no_delivery(&mut ws_a, &mut session_a, Duration::from_millis(500)).await;
    // The victim's own button still works, once.
    let query = bot.fake.tap(9131, question.message_id, &yes).expect("tap");
    eventually("answered", || bot.fake.answered(&query).filter(|a| *a)).await;
    assert_eq!(chat_of(&db, victim.id).await, None);
    bot.relay.stop().await;
}

/// Whoever holds the webhook secret replays a callback query (same query
/// id) under a new `update_id`: the dedupe is by update only, so the tap
/// would be signed and forwarded again (and answered twice).
#[sqlx::test(migrations = false)]
async fn a_replayed_callback_query_with_a_fresh_update_id_is_not_forwarded_twice(db: PgPool) {
    let bot = start_bot(db, false).await;
    let (_server, mut ws, mut session, _) = paired(&bot, 9141).await;
    send(&mut ws, &mut session, "Approve?", approval_buttons()).await;
    let shown = sent(&bot, 9141, 1).await;
    let approve = data_of(&shown, "Approve");
    let first = tap_update(800_001, "replayed-query", 9141, shown.message_id, &approve);
    let mut again = first.clone();
    again["update_id"] = json!(800_002);
    assert_eq!(post_update(&bot, &first).await, 200);
    assert!(matches!(
        next_delivery(&mut ws, &mut session).await,
        Delivery::Tap { .. }
    ));
    assert_eq!(post_update(&bot, &again).await, 200);
    no_delivery(&mut ws, &mut session, Duration::from_millis(1_000)).await;
    assert_eq!(bot.metric("tap_forwarded").await, 1);
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_tap_on_a_relay_question_with_a_servers_button_data_does_nothing(db: PgPool) {
    let bot = start_bot(db.clone(), false).await;
    let (server, mut ws, mut session, _) = paired(&bot, 9151).await;
    send(&mut ws, &mut session, "Approve?", approval_buttons()).await;
    let shown = sent(&bot, 9151, 1).await;
    let approve = data_of(&shown, "Approve");
    bot.fake.user_message(9151, "/unpair");
    let question = sent(&bot, 9151, 2).await;
    // The server's button data, on the relay's question: neither a tap
    // for the server (not that message's button) nor an unpairing.
    let query = bot
        .fake
        .tap(9151, question.message_id, &approve)
        .expect("tap");
    eventually("answered", || bot.fake.answered(&query).filter(|a| *a)).await;
    // The relay's button data on the server's message.
    let yes = data_of(&question, "Unpair");
    let query = bot.fake.tap(9151, shown.message_id, &yes).expect("tap");
    eventually("answered", || bot.fake.answered(&query).filter(|a| *a)).await;
    no_delivery(&mut ws, &mut session, Duration::from_millis(500)).await;
    assert_eq!(chat_of(&db, server.id).await, Some(9151));
    assert_eq!(bot.metric("tap_forwarded").await, 0);
    bot.relay.stop().await;
}

// ---------------------------------------------------------------------
// (c) A hostile server with a valid token.
// ---------------------------------------------------------------------

/// A compromised server asks for a fresh pairing code while it is paired
/// and uses it from the attacker's own Telegram account: were the pairing
/// moved, the attacker's taps would be signed by the relay (with the
/// attacker's chat, which the Warden does not pin) and approve actions
/// the person never saw.
#[sqlx::test(migrations = false)]
async fn a_paired_server_cannot_move_its_pairing_to_another_chat_with_a_fresh_code(db: PgPool) {
    let bot = start_bot(db.clone(), false).await;
    let (server, mut ws, mut session, _) = paired(&bot, 9201).await;
    session
        .send(&mut ws, &Body::PairingRequest {})
        .await
        .expect("request");
    // The relay makes no code for a paired server: it says so.
    let answer = loop {
        match tokio::time::timeout(Duration::from_secs(10), session.recv(&mut ws)).await {
            Ok(Ok(body @ (Body::PairingCode { .. } | Body::AlreadyPaired {}))) => break body,
            Ok(Ok(_)) => continue,
            other => panic!("no answer to the pairing request: {other:?}"),
        }
    };
    if let Body::PairingCode { code, .. } = &answer {
        bot.fake.user_message(9202, &format!("/start {code}"));
        eventually("the attacker's chat answered", || {
            bot.fake.sent_to(9202).into_iter().next()
        })
        .await;
    }
    assert_eq!(answer, Body::AlreadyPaired {});
    assert_eq!(
        chat_of(&db, server.id).await,
        Some(9201),
        "the pairing moved to the attacker's chat without the paired chat's consent"
    );
    // And what the server says next reaches the person, not the attacker.
    send(&mut ws, &mut session, "Approve?", approval_buttons()).await;
    let shown = sent(&bot, 9201, 1).await;
    assert_eq!(shown.text, "Approve?");
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_servers_edit_cannot_reach_the_relays_own_question_or_another_chat(db: PgPool) {
    let bot = start_bot(db.clone(), false).await;
    let (_server, mut ws, mut session, _) = paired(&bot, 9211).await;
    let mine = send(&mut ws, &mut session, "first", vec![]).await;
    bot.fake.user_message(9211, "/unpair");
    let question = eventually("the question", || {
        bot.fake
            .sent_to(9211)
            .into_iter()
            .find(|m| m.text.starts_with("Unpair this chat"))
    })
    .await;
    bot.wait_recorded(&question).await;
    let first = eventually("the first message", || {
        bot.fake
            .sent_to(9211)
            .into_iter()
            .find(|m| m.text == "first")
    })
    .await;
    // An edit naming ids the server never sent (the relay's question has
    // no server message id; guess at random ones) changes nothing.
    for target in [Uuid::nil(), Uuid::new_v4(), Uuid::max()] {
        session
            .send(
                &mut ws,
                &Body::Edit {
                    id: Uuid::new_v4(),
                    message: target,
                    text: "Unpair? (tap Keep to unpair)".into(),
                    buttons: vec![],
                },
            )
            .await
            .expect("edit");
    }
    bot.wait_metric("edit_of_unknown_message", 3).await;
    let now: Vec<_> = bot.fake.sent_to(9211);
    assert!(now.contains(&question), "the relay's question is unchanged");
    // The person keeps the pairing; the server's own edit still works.
    let keep = data_of(&question, "Keep");
    let query = bot.fake.tap(9211, question.message_id, &keep).expect("tap");
    eventually("answered", || bot.fake.answered(&query).filter(|a| *a)).await;
    session
        .send(
            &mut ws,
            &Body::Edit {
                id: Uuid::new_v4(),
                message: mine,
                text: "edited".into(),
                buttons: vec![],
            },
        )
        .await
        .expect("edit");
    eventually("the edit", || {
        bot.fake
            .sent_to(9211)
            .into_iter()
            .find(|m| m.message_id == first.message_id && m.text == "edited")
    })
    .await;
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn an_edit_that_keeps_a_button_id_signs_the_new_text_and_expires_the_old_data(db: PgPool) {
    let bot = start_bot(db, false).await;
    let (_server, mut ws, mut session, _) = paired(&bot, 9221).await;
    let message = send(
        &mut ws,
        &mut session,
        "Approve apt-upgrade?",
        approval_buttons(),
    )
    .await;
    let before = sent(&bot, 9221, 1).await;
    let old = data_of(&before, "Approve");
    session
        .send(
            &mut ws,
            &Body::Edit {
                id: Uuid::new_v4(),
                message,
                text: "Approve wipe-disk?".into(),
                buttons: approval_buttons(),
            },
        )
        .await
        .expect("edit");
    let after = eventually("the edit", || {
        bot.fake
            .sent_to(9221)
            .into_iter()
            .nth(1)
            .filter(|m| m.edited)
    })
    .await;
    let new = data_of(&after, "Approve");
    assert_ne!(old, new);
    // Telegram shows the edit before the relay records it; a tap on the
    // old rendering until then is signed over the old text, which is what
    // that person saw. Once recorded, the old data is expired.
    bot.wait_metric("message_delivered", 2).await;
    let query = bot.fake.tap(9221, after.message_id, &old).expect("tap");
    eventually("answered", || bot.fake.answered(&query).filter(|a| *a)).await;
    bot.fake.tap(9221, after.message_id, &new).expect("tap");
    match next_delivery(&mut ws, &mut session).await {
        Delivery::Tap { proof, .. } => {
            use sha2::Digest;
            let want: String = sha2::Sha256::digest(b"Approve wipe-disk?")
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert_eq!(proof.text_sha256, want);
        }
        other => panic!("expected a tap, got {other:?}"),
    }
    bot.wait_metric("tap_forwarded", 1).await;
    no_delivery(&mut ws, &mut session, Duration::from_millis(300)).await;
    bot.relay.stop().await;
}

// ---------------------------------------------------------------------
// Pairing: races and guessing.
// ---------------------------------------------------------------------

#[sqlx::test(migrations = false)]
async fn two_chats_racing_one_code_pair_exactly_one(db: PgPool) {
    let bot = start_bot(db.clone(), false).await;
    let server = Server::new();
    assert_eq!(post_json(&bot.relay, &server.registration()).await.0, 201);
    let (mut ws, mut session) = connect(&bot.relay, &server).await;
    let (code, _) = ask_code(&mut ws, &mut session).await;
    // Chats in different shards, posted at once.
    let chats: Vec<i64> = (0..8).map(|i| 9301 + i).collect();
    {
        let mut state = bot.fake.state();
        for c in &chats {
            state.chats.insert(*c);
        }
    }
    let posts = chats.iter().enumerate().map(|(i, c)| {
        let update = message_update(810_000 + i as i64, *c, &format!("/start {code}"));
        let bot = &bot;
        async move { post_update(bot, &update).await }
    });
    for status in futures_util::future::join_all(posts).await {
        assert_eq!(status, 200);
    }
    assert!(matches!(
        next_delivery(&mut ws, &mut session).await,
        Delivery::Paired { .. }
    ));
    no_delivery(&mut ws, &mut session, Duration::from_millis(700)).await;
    let pairings: i64 = sqlx::query_scalar("SELECT count(*) FROM pairings")
        .fetch_one(&db)
        .await
        .expect("count");
    assert_eq!(pairings, 1);
    assert_eq!(bot.metric("paired").await, 1);
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_paired_account_sending_codes_learns_nothing_and_spends_no_code(db: PgPool) {
    let bot = start_bot(db.clone(), false).await;
    let (_first, _ws, _session, _) = paired(&bot, 9311).await;
    let other = Server::new();
    assert_eq!(post_json(&bot.relay, &other.registration()).await.0, 201);
    let (mut ws, mut session) = connect(&bot.relay, &other).await;
    let (code, _) = ask_code(&mut ws, &mut session).await;
    bot.fake.user_message(9311, &format!("/start {code}"));
    bot.fake.user_message(9311, "/start AAAAAA");
    let said = eventually("two answers", || {
        let s = bot.fake.sent_to(9311);
        (s.len() == 3).then_some(s)
    })
    .await;
    // The same answer for the live code and a wrong one: no oracle.
    assert_eq!(said[1].text, said[2].text);
    no_delivery(&mut ws, &mut session, Duration::from_millis(500)).await;
    let codes: i64 = sqlx::query_scalar("SELECT count(*) FROM pairing_codes")
        .fetch_one(&db)
        .await
        .expect("codes");
    assert_eq!(codes, 1);
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_locked_out_chat_cannot_guess_on_with_lower_case_or_padded_codes(db: PgPool) {
    let bot = start_bot(db.clone(), false).await;
    let server = Server::new();
    assert_eq!(post_json(&bot.relay, &server.registration()).await.0, 201);
    let (mut ws, mut session) = connect(&bot.relay, &server).await;
    let (code, _) = ask_code(&mut ws, &mut session).await;
    for guess in ["aaaaaa", " BBBBBB ", "CCCCCC\u{200b}", "/start", "DDDDDDD"] {
        bot.fake.user_message(9321, &format!("/start {guess}"));
    }
    eventually("locked out", || {
        let s = bot.fake.sent_to(9321);
        s.iter()
            .any(|m| m.text.starts_with("Too many wrong pairing codes"))
            .then_some(())
    })
    .await;
    let told = bot.fake.sent_to(9321).len();
    for variant in [
        code.to_lowercase(),
        format!("  {code}  "),
        format!("{code}\n"),
    ] {
        bot.fake.user_message(9321, &format!("/start {variant}"));
        bot.fake
            .user_message(9321, &format!("/start@{BOT_NAME} {variant}"));
    }
    no_delivery(&mut ws, &mut session, Duration::from_millis(800)).await;
    assert_eq!(bot.fake.sent_to(9321).len(), told);
    assert_eq!(chat_of(&db, server.id).await, None);
    bot.relay.stop().await;
}

// ---------------------------------------------------------------------
// (b) One chat against every other: the shared queues and pacing.
// ---------------------------------------------------------------------

/// A relay whose per-chat pacing is an hour: a chat that gets a second
/// reply from the relay waits an hour for it. (Telegram's real figure is
/// a second; stretched so that "held back" cannot be mistaken for "slow".)
async fn slow_paced_bot(db: PgPool) -> Bot {
    let (fake, fake_addr) = fake().await;
    let api = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = api.local_addr().expect("addr");
    let mut c = config();
    let mut telegram = telegram_config(fake_addr, addr, false);
    telegram.limits.pace = PaceLimits {
        per_chat: Duration::from_secs(3_600),
        overall: Duration::from_millis(1),
        strangers: Duration::from_millis(1),
    };
    // One queue: every chat shares it, the strongest form of the attack.
    telegram.limits.shards = 1;
    c.telegram = Some(telegram);
    let relay = support::start_on(db.clone(), c, api).await;
    Bot {
        relay,
        fake,
        fake_addr,
        db,
    }
}

/// Chats 9401 and 9409 share a shard (here there is one). The first
/// person asks the relay something twice (here `/start` while paired):
/// the second reply waits for that chat's turn, and while it waits the
/// shard's task is asleep, so the other person's message to their own
/// server waits too — and once the shard's queue is full, updates of every
/// chat on it are dropped after Telegram was told 200.
#[sqlx::test(migrations = false)]
async fn one_chats_paced_reply_does_not_hold_back_another_chats_messages(db: PgPool) {
    let bot = slow_paced_bot(db).await;
    let (_h, _ws_h, _session_h, _) = paired(&bot, 9401).await;
    let (_v, mut ws_v, mut session_v, _) = paired(&bot, 9409).await;
    // The hostile chat's "Paired." took its turn; this reply waits.
    bot.fake.user_message(9401, "/start");
    eventually("the hostile update taken", || {
        bot.fake.state().pending.is_empty().then_some(())
    })
    .await;
    bot.fake.user_message(9409, "how full is the disk?");
    assert_eq!(
        next_delivery(&mut ws_v, &mut session_v).await,
        Delivery::Message {
            text: "how full is the disk?".into()
        }
    );
    bot.relay.stop().await;
}

/// A chat's next turn lies in the future; taking it moves the bot-wide
/// "next send" to that moment, so every other chat's message waits behind
/// it: one chat's replies throttle the whole bot to its pace.
#[sqlx::test(migrations = false)]
async fn one_chats_paced_reply_does_not_hold_back_replies_to_every_other_chat(db: PgPool) {
    let bot = slow_paced_bot(db).await;
    let (_h, _ws_h, _session_h, _) = paired(&bot, 9411).await;
    bot.fake.user_message(9411, "/start");
    eventually("the hostile update taken", || {
        bot.fake.state().pending.is_empty().then_some(())
    })
    .await;
    // A stranger in another shard writes for the first time: its one
    // reply is owed now.
    bot.fake.user_message(9412, "hello?");
    let said = eventually("the stranger's one reply", || {
        bot.fake.sent_to(9412).into_iter().next()
    })
    .await;
    assert!(said.text.starts_with("This bot talks only"));
    bot.relay.stop().await;
}

// ---------------------------------------------------------------------
// The Bot API failing under the poller.
// ---------------------------------------------------------------------

/// The Bot API breaking off an answer mid-body (or failing with a
/// gateway error) while the relay long-polls: the poller must come back.
#[sqlx::test(migrations = false)]
async fn the_poller_recovers_after_the_bot_api_hangs_up_mid_answer(db: PgPool) {
    let bot = start_bot(db, true).await;
    let (_server, mut ws, mut session, _) = paired(&bot, 9601).await;
    bot.fake.inject(Injected::Hangup);
    bot.fake.user_message(9601, "after the hangup");
    assert_eq!(
        next_delivery(&mut ws, &mut session).await,
        Delivery::Message {
            text: "after the hangup".into()
        }
    );
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn the_poller_recovers_after_a_hangup_then_a_bot_api_outage(db: PgPool) {
    let bot = start_bot(db, true).await;
    let (_server, mut ws, mut session, _) = paired(&bot, 9611).await;
    bot.fake.inject(Injected::Hangup);
    bot.fake.inject(Injected::Outage);
    bot.fake.user_message(9611, "after the outage");
    assert_eq!(
        next_delivery(&mut ws, &mut session).await,
        Delivery::Message {
            text: "after the outage".into()
        }
    );
    bot.relay.stop().await;
}

/// Long polling with the relay's default wait (ten seconds at Telegram):
/// a person's second update must still come through.
#[sqlx::test(migrations = false)]
async fn long_polling_with_the_default_wait_takes_every_update(db: PgPool) {
    let (fake, fake_addr) = fake().await;
    let api = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = api.local_addr().expect("addr");
    let mut c = config();
    let mut telegram = telegram_config(fake_addr, addr, true);
    telegram.limits.poll_wait = aromba_relay::telegram::TelegramLimits::default().poll_wait;
    c.telegram = Some(telegram);
    let relay = support::start_on(db.clone(), c, api).await;
    let bot = Bot {
        relay,
        db,
        fake,
        fake_addr,
    };
    let (_server, mut ws, mut session, _) = paired(&bot, 9701).await;
    bot.fake.user_message(9701, "second update");
    assert_eq!(
        next_delivery(&mut ws, &mut session).await,
        Delivery::Message {
            text: "second update".into()
        }
    );
    bot.relay.stop().await;
}

/// A chat asks for replies faster than its turns come (here each turn is
/// an hour apart): the replies it has not reached are dropped and counted,
/// not queued holding a place, so the relay's budget of replies in flight
/// stays free for everyone else, and taps elsewhere are still answered.
#[sqlx::test(migrations = false)]
async fn a_chat_asking_for_replies_faster_than_its_turns_gets_them_dropped_not_queued(db: PgPool) {
    let bot = slow_paced_bot(db).await;
    let (_h, _ws_h, _session_h, _) = paired(&bot, 9801).await;
    let (_v, mut ws_v, mut session_v, _) = paired(&bot, 9802).await;
    for _ in 0..30 {
        bot.fake.user_message(9801, "/start");
    }
    bot.wait_metric("relay_message_dropped", 30).await;
    // The other person's server still hears them, and their tap on a
    // server's button is forwarded and answered.
    bot.fake.user_message(9802, "still there?");
    assert_eq!(
        next_delivery(&mut ws_v, &mut session_v).await,
        Delivery::Message {
            text: "still there?".into()
        }
    );
    bot.relay.stop().await;
}

/// Duplicate cases of servers nobody paired (anyone can open them by
/// registering a known id from new boots) must not keep a paired
/// server's case from being shown.
#[sqlx::test(migrations = false)]
async fn unshown_cases_of_unpaired_servers_do_not_hold_back_a_paired_servers_case(db: PgPool) {
    let bot = start_bot(db, false).await;
    for _ in 0..2 {
        let junk = Server::new();
        assert_eq!(post_json(&bot.relay, &junk.registration()).await.0, 201);
        for _ in 0..8 {
            let again = Server {
                id: junk.id,
                token: aromba_relay_proto::token::ServerToken::generate(),
                boot_id: Uuid::new_v4(),
            };
            assert_eq!(post_json(&bot.relay, &again.registration()).await.0, 202);
        }
    }
    let (server, _ws, _session, _) = paired(&bot, 9803).await;
    let reinstall = Server {
        id: server.id,
        token: aromba_relay_proto::token::ServerToken::generate(),
        boot_id: Uuid::new_v4(),
    };
    assert_eq!(
        post_json(&bot.relay, &reinstall.registration()).await.0,
        202
    );
    let question = bot.shown(9803, 1).await;
    assert!(question.text.starts_with("Another machine just registered"));
    bot.relay.stop().await;
}

// ---------------------------------------------------------------------
// (d) Two replicas on one database: the claims are the database's.
// ---------------------------------------------------------------------

/// A second replica of the bot's relay: the same database and bot, its
/// own address (webhook mode).
async fn second_replica(bot: &Bot) -> support::TestRelay {
    let api = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = api.local_addr().expect("addr");
    let mut c = config();
    c.telegram = Some(telegram_config(bot.fake_addr, addr, false));
    support::start_on(bot.db.clone(), c, api).await
}

async fn post_update_to(relay: &support::TestRelay, body: &serde_json::Value) -> u16 {
    reqwest::Client::new()
        .post(relay.url("/v1/telegram/webhook"))
        .header(SECRET_HEADER, WEBHOOK_SECRET)
        .json(body)
        .send()
        .await
        .expect("an answer")
        .status()
        .as_u16()
}

/// `event`'s count on `relay`.
async fn metric_of(relay: &support::TestRelay, event: &str) -> u64 {
    let prefix = format!("aromba_relay_telegram_events_total{{event=\"{event}\"}} ");
    relay
        .metrics_text()
        .await
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// `event`'s count on the bot's relay and the other replica together.
async fn sum_metric(bot: &Bot, other: &support::TestRelay, event: &str) -> u64 {
    bot.metric(event).await + metric_of(other, event).await
}

/// Posts `updates` to the two replicas at once, alternating.
async fn post_to_both(bot: &Bot, other: &support::TestRelay, updates: &[serde_json::Value]) {
    let posts = updates.iter().enumerate().map(|(i, u)| {
        let relay = if i % 2 == 0 { &bot.relay } else { other };
        async move { post_update_to(relay, u).await }
    });
    for status in futures_util::future::join_all(posts).await {
        assert_eq!(status, 200);
    }
}

/// Whoever holds the webhook secret posts one update to two replicas at
/// once, again and again: the claim (one statement on the pool, in
/// `store/telegram_updates.rs` since the relay's SQL moved) lets exactly
/// one replica take it, so the server hears the message once.
#[sqlx::test(migrations = false)]
async fn one_update_posted_to_two_replicas_at_once_reaches_the_server_once(db: PgPool) {
    let bot = start_bot(db.clone(), false).await;
    let (_server, mut ws, mut session, _) = paired(&bot, 9161).await;
    let other = second_replica(&bot).await;
    let update = message_update(820_001, 9161, "only once, from either replica");
    post_to_both(&bot, &other, &vec![update; 12]).await;
    assert_eq!(
        next_delivery(&mut ws, &mut session).await,
        Delivery::Message {
            text: "only once, from either replica".into()
        }
    );
    no_delivery(&mut ws, &mut session, Duration::from_millis(1_000)).await;
    let duplicates =
        bot.metric("update_duplicate").await + metric_of(&other, "update_duplicate").await;
    assert_eq!(duplicates, 11);
    other.stop().await;
    bot.relay.stop().await;
}

/// One tap (one callback query id) carried by fresh update ids to two
/// replicas at once: each update is new, so only the query's own claim
/// (`store/telegram_callbacks.rs`, now a `bool`) stands between it and a
/// second signed tap. The server gets one tap; the rest are repeats.
#[sqlx::test(migrations = false)]
async fn one_tap_in_fresh_updates_at_two_replicas_at_once_is_forwarded_once(db: PgPool) {
    let bot = start_bot(db.clone(), false).await;
    let (_server, mut ws, mut session, _) = paired(&bot, 9171).await;
    let other = second_replica(&bot).await;
    send(&mut ws, &mut session, "Approve?", approval_buttons()).await;
    let shown = sent(&bot, 9171, 1).await;
    let approve = data_of(&shown, "Approve");
    let taps: Vec<serde_json::Value> = (0..12)
        .map(|i| tap_update(830_000 + i, "one-query", 9171, shown.message_id, &approve))
        .collect();
    post_to_both(&bot, &other, &taps).await;
    assert!(matches!(
        next_delivery(&mut ws, &mut session).await,
        Delivery::Tap { .. }
    ));
    no_delivery(&mut ws, &mut session, Duration::from_millis(1_000)).await;
    let forwarded = bot.metric("tap_forwarded").await + metric_of(&other, "tap_forwarded").await;
    assert_eq!(forwarded, 1);
    let repeated = bot.metric("tap_repeated").await + metric_of(&other, "tap_repeated").await;
    assert_eq!(repeated, 11);
    other.stop().await;
    bot.relay.stop().await;
}

/// A stranger's burst of wrong pairing codes split between two replicas
/// and posted at once: the lock-out is counted in the database
/// (`store/pairing_guesses.rs`), each replica checking it before it tries
/// a code and counting after. No more codes are tried than the window
/// allows, give or take one a replica (each replica takes its updates in
/// order, so one check can race the other replica's count); the chat is
/// locked out after, and the right code then does nothing and is not
/// spent.
#[sqlx::test(migrations = false)]
async fn wrong_codes_split_between_two_replicas_at_once_lock_the_chat_out(db: PgPool) {
    let bot = start_bot(db.clone(), false).await;
    let server = Server::new();
    assert_eq!(post_json(&bot.relay, &server.registration()).await.0, 201);
    let (mut ws, mut session) = connect(&bot.relay, &server).await;
    let (code, _) = ask_code(&mut ws, &mut session).await;
    let other = second_replica(&bot).await;
    let guesses: Vec<serde_json::Value> = (0..16)
        .map(|i| {
            let letter = b"ABCDEFGHJKLMNPQR"[i as usize] as char;
            message_update(
                840_000 + i,
                9181,
                &format!("/start {}", letter.to_string().repeat(6)),
            )
        })
        .collect();
    post_to_both(&bot, &other, &guesses).await;
    let tried = || sum_metric(&bot, &other, "pairing_wrong_code");
    let locked = || sum_metric(&bot, &other, "pairing_locked_out");
    for _ in 0..500 {
        if tried().await + locked().await == 16 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(tried().await + locked().await, 16);
    let wrong = tried().await;
    assert!(
        (5..=6).contains(&wrong),
        "{wrong} wrong codes were tried in one window"
    );
    post_update(
        &bot,
        &message_update(840_100, 9181, &format!("/start {code}")),
    )
    .await;
    no_delivery(&mut ws, &mut session, Duration::from_millis(700)).await;
    assert_eq!(chat_of(&db, server.id).await, None);
    let codes: i64 = sqlx::query_scalar("SELECT count(*) FROM pairing_codes")
        .fetch_one(&db)
        .await
        .expect("codes");
    assert_eq!(codes, 1);
    other.stop().await;
    bot.relay.stop().await;
}
