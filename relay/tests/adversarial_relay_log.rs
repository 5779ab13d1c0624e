//! Anyone who reads the relay's logs (an operator, a log shipper, whoever
//! gets the files) against what servers and chats send through it. What
//! the relay is made to log: a server's token, a message's text and its
//! button labels, a delivery and its acknowledgement, a refused frame's
//! text, a hello with a wrong token and one with a token smuggled in an
//! unknown field, a malformed and a conflicting registration's tokens.
//! What holds: none of it is in any line the relay logs, with its own
//! crates at trace. The relays run in this test's process, their logs
//! captured as the binary's JSON logs would carry them (one subscriber
//! for the whole test binary, which is why this test has a file of its
//! own).

use aromba_testkit::relay as support;

use aromba_relay::outbox::enqueue;
use aromba_relay_proto::frame::{Body, Button, Delivery};
use aromba_relay_proto::session::now_ms;
use aromba_relay_proto::token::ServerToken;
use futures_util::SinkExt;
use serde_json::json;
use sqlx::PgPool;
use support::{
    Server, closed_with, config, connected, gets_in, next_unacked_delivery, post_json, raw_ws,
    start,
};
use tokio_tungstenite::tungstenite::Message;
use uuid::Uuid;

#[sqlx::test(migrations = false)]
async fn no_token_text_or_label_reaches_the_relays_logs(db: PgPool) {
    let logs = aromba_testkit::logs::captured();
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
                    app: None,
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
    let (id, _) = next_unacked_delivery(&mut ws, &mut session).await;
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
                    app: None,
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
