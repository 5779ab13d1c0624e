//! The relay's own questions in the chat: a duplicate case (a known server
//! id registered from another boot) decided by the person, and unpairing,
//! asked before it is done.

use aromba_testkit::relay as support;

use aromba_relay_proto::frame::Delivery;
use aromba_relay_proto::token::ServerToken;
use sqlx::PgPool;
use std::time::Duration;
use support::bot::{eventually, next_delivery, paired, start_bot};
use support::{Server, connect, post_json};
use uuid::Uuid;

/// The same server id registered again from another boot, with a new token.
fn reinstall_of(server: &Server) -> Server {
    Server {
        id: server.id,
        token: ServerToken::generate(),
        boot_id: Uuid::new_v4(),
    }
}

async fn closed(ws: &mut aromba_relay_proto::client::Socket) -> bool {
    loop {
        match tokio::time::timeout(Duration::from_secs(20), futures_util::StreamExt::next(ws)).await
        {
            Ok(Some(Ok(tokio_tungstenite::tungstenite::Message::Close(_)))) | Ok(None) => {
                return true;
            }
            Ok(Some(Ok(_))) => continue,
            Ok(Some(Err(_))) => return true,
            Err(_) => return false,
        }
    }
}

#[sqlx::test(migrations = false)]
async fn a_duplicate_case_decided_as_a_reinstall_hands_the_server_to_the_new_install(db: PgPool) {
    let bot = start_bot(db.clone(), false).await;
    let (server, mut old_ws, _old_session, _) = paired(&bot, 9001).await;
    let new = reinstall_of(&server);
    let (status, body) = post_json(&bot.relay, &new.registration()).await;
    assert_eq!(status, 202, "{body}");
    let question = bot.shown(9001, 1).await;
    assert!(
        question.text.starts_with("Another machine just registered"),
        "{}",
        question.text
    );
    let labels: Vec<&str> = question.buttons[0]
        .iter()
        .map(|(l, _)| l.as_str())
        .collect();
    assert_eq!(
        labels,
        [
            "This is a reinstall of my server",
            "This is another machine"
        ]
    );
    let reinstall = question.buttons[0][0].1.clone();
    let query = bot
        .fake
        .tap(9001, question.message_id, &reinstall)
        .expect("tap");
    eventually("answered", || bot.fake.answered(&query).filter(|a| *a)).await;
    // The old installation's connection ends, and its token no longer works.
    assert!(closed(&mut old_ws).await, "the old connection ends");
    let endpoint = server.endpoint(&bot.relay);
    let mut ws = aromba_relay_proto::client::dial(&endpoint)
        .await
        .expect("dial");
    assert!(
        aromba_relay_proto::client::handshake(&mut ws, &endpoint)
            .await
            .is_err()
    );
    // The new one is the server now, still paired with the chat.
    let (mut ws, mut session) = connect(&bot.relay, &new).await;
    bot.fake.user_message(9001, "/status");
    assert_eq!(
        next_delivery(&mut ws, &mut session).await,
        Delivery::Message {
            text: "/status".into()
        }
    );
    let closed_question = eventually("the question closed", || {
        bot.fake
            .sent_to(9001)
            .into_iter()
            .nth(1)
            .filter(|m| m.edited)
    })
    .await;
    assert!(closed_question.buttons.iter().all(Vec::is_empty));
    let cases: i64 = sqlx::query_scalar("SELECT count(*) FROM duplicate_cases")
        .fetch_one(&db)
        .await
        .expect("count");
    assert_eq!(cases, 0);
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_duplicate_case_decided_as_another_machine_keeps_it_out(db: PgPool) {
    let bot = start_bot(db.clone(), false).await;
    let (server, _ws, _session, _) = paired(&bot, 9002).await;
    let other = reinstall_of(&server);
    assert_eq!(post_json(&bot.relay, &other.registration()).await.0, 202);
    let question = bot.shown(9002, 1).await;
    let refuse = question.buttons[0][1].clone().1;
    let reinstall = question.buttons[0][0].clone().1;
    let query = bot
        .fake
        .tap(9002, question.message_id, &refuse)
        .expect("tap");
    eventually("answered", || bot.fake.answered(&query).filter(|a| *a)).await;
    // Answered once: the other button of the question is spent with it.
    let again = bot
        .fake
        .tap(9002, question.message_id, &reinstall)
        .expect("tap");
    eventually("answered", || bot.fake.answered(&again).filter(|a| *a)).await;
    let endpoint = other.endpoint(&bot.relay);
    let mut ws = aromba_relay_proto::client::dial(&endpoint)
        .await
        .expect("dial");
    assert!(
        aromba_relay_proto::client::handshake(&mut ws, &endpoint)
            .await
            .is_err()
    );
    let token_kept: i64 = sqlx::query_scalar("SELECT count(*) FROM duplicate_cases")
        .fetch_one(&db)
        .await
        .expect("count");
    assert_eq!(token_kept, 0);
    // The original still connects.
    let (_ws, _session) = connect(&bot.relay, &server).await;
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_duplicate_question_tapped_from_another_chat_is_expired(db: PgPool) {
    let bot = start_bot(db.clone(), false).await;
    let (server, _ws, _session, _) = paired(&bot, 9003).await;
    let (_other, _ws2, _session2, _) = paired(&bot, 9004).await;
    assert_eq!(
        post_json(&bot.relay, &reinstall_of(&server).registration())
            .await
            .0,
        202
    );
    let question = bot.shown(9003, 1).await;
    let reinstall = question.buttons[0][0].1.clone();
    // The other chat sends the same callback data on its own message.
    let theirs = bot.fake.sent_to(9004)[0].message_id;
    let query = bot.fake.tap(9004, theirs, &reinstall).expect("tap");
    eventually("answered", || bot.fake.answered(&query).filter(|a| *a)).await;
    bot.wait_metric("tap_expired", 1).await;
    let cases: i64 = sqlx::query_scalar("SELECT count(*) FROM duplicate_cases")
        .fetch_one(&db)
        .await
        .expect("count");
    assert_eq!(cases, 1);
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn unpair_asks_first_and_then_the_chat_is_a_stranger(db: PgPool) {
    let bot = start_bot(db.clone(), false).await;
    let (server, mut ws, mut session, _) = paired(&bot, 9005).await;
    bot.fake.user_message(9005, "/unpair");
    let question = bot.shown(9005, 1).await;
    assert!(
        question.text.starts_with("Unpair this chat"),
        "{}",
        question.text
    );
    let keep = question.buttons[0][1].1.clone();
    let query = bot.fake.tap(9005, question.message_id, &keep).expect("tap");
    eventually("answered", || bot.fake.answered(&query).filter(|a| *a)).await;
    // The toast says what happened, not that anything went to the server.
    assert_eq!(
        bot.fake.answer_of(&query),
        Some(Some("Nothing changed.".to_string()))
    );
    bot.fake.user_message(9005, "still here?");
    assert_eq!(
        next_delivery(&mut ws, &mut session).await,
        Delivery::Message {
            text: "still here?".into()
        }
    );
    bot.fake.user_message(9005, "/unpair");
    let question = bot.shown(9005, 2).await;
    let unpair = question.buttons[0][0].1.clone();
    let query = bot
        .fake
        .tap(9005, question.message_id, &unpair)
        .expect("tap");
    eventually("answered", || bot.fake.answered(&query).filter(|a| *a)).await;
    assert_eq!(
        bot.fake.answer_of(&query),
        Some(Some("Unpaired.".to_string()))
    );
    bot.wait_metric("unpaired", 1).await;
    let paired_at: Option<chrono::DateTime<chrono::Utc>> =
        sqlx::query_scalar("SELECT paired_at FROM servers WHERE id = $1")
            .bind(server.id)
            .fetch_one(&db)
            .await
            .expect("server");
    assert!(paired_at.is_none());
    // The chat is now a stranger: one reply, and nothing reaches the server.
    bot.fake.user_message(9005, "hello?");
    let said = eventually("the stranger's reply", || {
        bot.fake.sent_to(9005).into_iter().nth(3)
    })
    .await;
    assert!(
        said.text.starts_with("This bot talks only to"),
        "{}",
        said.text
    );
    support::bot::no_delivery(&mut ws, &mut session, Duration::from_millis(500)).await;
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_server_moves_to_another_chat_only_after_unpair(db: PgPool) {
    let bot = start_bot(db.clone(), false).await;
    let (server, mut ws, mut session, _) = paired(&bot, 9006).await;
    session
        .send(&mut ws, &aromba_relay_proto::frame::Body::PairingRequest {})
        .await
        .expect("request");
    loop {
        match support::bot::next_frame(&mut ws, &mut session).await {
            aromba_relay_proto::frame::Body::AlreadyPaired {} => break,
            aromba_relay_proto::frame::Body::PairingCode { .. } => {
                panic!("a code for a paired server")
            }
            _ => continue,
        }
    }
    bot.fake.user_message(9006, "/unpair");
    let question = bot.shown(9006, 1).await;
    let unpair = question.buttons[0][0].1.clone();
    bot.fake
        .tap(9006, question.message_id, &unpair)
        .expect("tap");
    bot.wait_metric("unpaired", 1).await;
    let (code, _) = support::bot::ask_code(&mut ws, &mut session).await;
    bot.fake.user_message(9007, &format!("/start {code}"));
    assert!(matches!(
        next_delivery(&mut ws, &mut session).await,
        Delivery::Paired { .. }
    ));
    let chat: i64 = sqlx::query_scalar("SELECT chat_id FROM pairings WHERE server_id = $1")
        .bind(server.id)
        .fetch_one(&db)
        .await
        .expect("paired");
    assert_eq!(chat, 9007);
    bot.relay.stop().await;
}
