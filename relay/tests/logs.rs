//! The relay's log carries ids and counts, never a message body, a token or
//! a code: the binary's own JSON log is read back after a session that
//! sent every kind of content through it.

use aromba_testkit::relay as support;

use aromba_relay_proto::client::{dial, handshake};
use aromba_relay_proto::frame::{Body, Button, Delivery};
use aromba_relay_proto::token::ServerToken;
use sqlx::PgPool;
use std::io::Read;
use std::time::Duration;
use support::{RelayProcess, Server, free_port};
use uuid::Uuid;

#[sqlx::test(migrations = false)]
async fn the_log_holds_no_message_text_and_no_token(db: PgPool) {
    let port = free_port();
    let mut process = RelayProcess::spawn_with(&db, port, &[("RUST_LOG", "debug".to_string())]);
    let base = format!("http://127.0.0.1:{port}");
    let mut up = false;
    for _ in 0..400 {
        if let Ok(r) = reqwest::get(format!("{base}/readyz")).await
            && r.status() == 200
        {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(up, "the relay did not come up");
    let client = reqwest::Client::new();
    let server = Server::new();
    let r = client
        .post(format!("{base}/v1/servers"))
        .json(&server.registration())
        .send()
        .await
        .expect("answer");
    assert_eq!(r.status(), 201);
    // A malformed registration carrying a token-shaped value too.
    let stray = ServerToken::generate();
    let mut bad = server.registration();
    bad["token"] = serde_json::json!(format!("{}!", stray.expose()));
    let _ = client
        .post(format!("{base}/v1/servers"))
        .json(&bad)
        .send()
        .await
        .expect("answer");

    let endpoint = server.endpoint_url(process.ws_url());
    let mut ws = dial(&endpoint).await.expect("dial");
    let mut session = handshake(&mut ws, &endpoint).await.expect("hello");
    let sent_text = "PLANTED-SEND-TEXT disk at 97% on /var";
    let id = Uuid::new_v4();
    session
        .send(
            &mut ws,
            &Body::Send {
                id,
                text: sent_text.into(),
                buttons: vec![Button {
                    id: "PLANTEDBUTTON".into(),
                    label: "PLANTED-LABEL".into(),
                    action: None,
                    app: None,
                }],
                monospace: Vec::new(),
            },
        )
        .await
        .expect("send");
    let delivered_text = "PLANTED-DELIVERY-TEXT my password is hunter2";
    aromba_relay::outbox::enqueue(
        &db,
        server.id,
        &Delivery::Message {
            text: delivered_text.into(),
        },
        chrono::Utc::now(),
        100,
    )
    .await
    .expect("enqueue");
    let mut delivered = None;
    for _ in 0..10 {
        match tokio::time::timeout(Duration::from_secs(5), session.recv(&mut ws)).await {
            Ok(Ok(Body::Deliver { id, .. })) => {
                delivered = Some(id);
                break;
            }
            Ok(Ok(_)) => continue,
            _ => break,
        }
    }
    let delivered = delivered.expect("the delivery came");
    session
        .send(&mut ws, &Body::AckDelivery { id: delivered })
        .await
        .expect("ack");
    // A wrong token, and a refused frame.
    let mut thief = server.clone();
    thief.token = ServerToken::generate();
    let thief_endpoint = thief.endpoint_url(process.ws_url());
    let mut ws2 = dial(&thief_endpoint).await.expect("dial");
    assert!(handshake(&mut ws2, &thief_endpoint).await.is_err());
    session
        .send(
            &mut ws,
            &Body::JournalHead {
                seq: 1,
                hash: "0".repeat(64),
            },
        )
        .await
        .expect("send");
    tokio::time::sleep(Duration::from_millis(300)).await;

    let pid = nix::unistd::Pid::from_raw(i32::try_from(process.child.id()).expect("pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("signal");
    let _ = process.child.wait();
    let mut log = String::new();
    process
        .child
        .stderr
        .take()
        .expect("stderr is piped")
        .read_to_string(&mut log)
        .expect("the log");

    assert!(
        log.contains(&server.id.to_string()),
        "ids are logged:\n{log}"
    );
    for needle in [
        &server.token.expose()[4..],
        &thief.token.expose()[4..],
        &stray.expose()[4..],
        sent_text,
        "PLANTED",
        delivered_text,
        "hunter2",
    ] {
        assert!(!log.contains(needle), "{needle:?} is in the log:\n{log}");
    }
    for line in log.lines().filter(|l| !l.trim().is_empty()) {
        assert!(
            serde_json::from_str::<serde_json::Value>(line).is_ok(),
            "not a JSON log line: {line}"
        );
    }
}
