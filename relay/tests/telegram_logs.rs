//! The relay's log after a whole scripted conversation holds no message
//! text, no bot token, no pairing code and no chat id: the binary runs as
//! it does in production (long polling against the fake Bot API, which
//! fails mid-request and drops out on purpose), and everything it logged
//! is read back.

use aromba_testkit::relay as support;

use aromba_botfake::state::Injected;
use aromba_relay_proto::client::{dial, handshake};
use aromba_relay_proto::frame::{Body, Button, Delivery};
use sqlx::PgPool;
use std::io::Read;
use std::time::Duration;
use support::bot::{BOT_TOKEN, ask_code, eventually, fake, next_delivery, next_frame};
use support::{RelayProcess, Server, free_port};
use uuid::Uuid;

/// Chat ids that cannot appear in a log by chance.
const CHAT: i64 = 7_314_159_265;
const STRANGER: i64 = 6_271_828_182;

#[sqlx::test(migrations = false)]
async fn a_whole_conversation_leaves_no_text_token_code_or_chat_id_in_the_log(db: PgPool) {
    let (fake, fake_addr) = fake().await;
    let port = free_port();
    let mut process = RelayProcess::spawn_with(
        &db,
        port,
        &[
            ("RUST_LOG", "debug".to_string()),
            ("TELEGRAM_BOT_TOKEN", BOT_TOKEN.to_string()),
            ("AROMBA_TELEGRAM_MODE", "polling".to_string()),
            ("AROMBA_BOT_API_URL", format!("http://{fake_addr}")),
        ],
    );
    // Read as it comes: a debug log fills a pipe's buffer long before the
    // conversation ends, and a relay blocked on its log would stall.
    let mut stderr = process.child.stderr.take().expect("stderr");
    let reader = std::thread::spawn(move || {
        let mut log = String::new();
        let _ = stderr.read_to_string(&mut log);
        log
    });
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
    let server = Server::new();
    let r = reqwest::Client::new()
        .post(format!("{base}/v1/servers"))
        .json(&server.registration())
        .send()
        .await
        .expect("answer");
    assert_eq!(r.status(), 201);
    let endpoint = server.endpoint_url(process.ws_url());
    let mut ws = dial(&endpoint).await.expect("dial");
    let mut session = handshake(&mut ws, &endpoint).await.expect("hello");

    let conversation = async {
        // The Bot API fails mid-request and drops out while the conversation
        // goes on: every failure is logged, and retried.
        fake.inject(Injected::Hangup);
        fake.inject(Injected::Outage);
        let (stale_code, _) = ask_code(&mut ws, &mut session).await;
        let (code, _) = ask_code(&mut ws, &mut session).await;
        fake.user_message(STRANGER, "PLANTED-STRANGER-TEXT who are you");
        fake.user_message(CHAT, &format!("/start {stale_code}"));
        fake.user_message(CHAT, &format!("/start {code}"));
        assert!(matches!(
            next_delivery(&mut ws, &mut session).await,
            Delivery::Paired { .. }
        ));
        let person_text = "PLANTED-PERSON-TEXT my database password is swordfish";
        fake.user_message(CHAT, person_text);
        assert_eq!(
            next_delivery(&mut ws, &mut session).await,
            Delivery::Message {
                text: person_text.into()
            }
        );
        fake.inject(Injected::Hangup);
        let server_text = "PLANTED-SERVER-TEXT disk at 97% on /srv/PLANTED-PATH";
        let id = Uuid::new_v4();
        session
            .send(
                &mut ws,
                &Body::Send {
                    id,
                    text: server_text.into(),
                    buttons: vec![Button {
                        id: "plantedbutton".into(),
                        label: "PLANTED-LABEL".into(),
                        action: Some("0123456789abcdef0123456789abcdef".into()),
                        app: None,
                    }],
                    monospace: Vec::new(),
                },
            )
            .await
            .expect("send");
        assert_eq!(
            next_frame(&mut ws, &mut session).await,
            Body::AckMessage { id }
        );
        // The copy whose button the relay recorded: a send cut off by the
        // hang-up may have shown a first copy, whose buttons never work,
        // and a tap before the record would be answered "expired".
        let mut recorded = None;
        for _ in 0..3_000 {
            for m in fake
                .sent_to(CHAT)
                .into_iter()
                .filter(|m| m.text == server_text)
            {
                let data = m.buttons[0][0].1.clone();
                let known: i64 =
                    sqlx::query_scalar("SELECT count(*) FROM chat_buttons WHERE callback_id = $1")
                        .bind(&data)
                        .fetch_one(&db)
                        .await
                        .expect("the relay's database");
                if known == 1 {
                    recorded = Some(m);
                }
            }
            if recorded.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let shown = recorded.expect("the server's message, its button recorded");
        let data = shown.buttons[0][0].1.clone();
        fake.tap(CHAT, shown.message_id, &data).expect("tap");
        let proof = match next_delivery(&mut ws, &mut session).await {
            Delivery::Tap { proof, .. } => proof,
            other => panic!("expected the tap, got {other:?}"),
        };
        fake.user_message(CHAT, "/start WRONGX");
        eventually("every update taken", || {
            fake.state().pending.is_empty().then_some(())
        })
        .await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        (code, stale_code, data, proof)
    };
    // A hang guard, generous: a loaded machine took longer than 45 s once.
    let outcome = tokio::time::timeout(Duration::from_secs(120), conversation).await;
    let _ = process.child.kill();
    let _ = process.child.wait();
    let log = reader.join().expect("the log");
    let Ok((code, stale_code, data, proof)) = outcome else {
        panic!("the conversation stalled; the relay logged:\n{log}");
    };
    assert!(log.contains("\"paired\""), "the log is the relay's: {log}");
    assert!(
        log.contains("Bot API") || log.contains("getUpdates failed"),
        "the failures were logged: {log}"
    );
    let secret_part = BOT_TOKEN
        .split_once(':')
        .map(|(_, s)| s)
        .unwrap_or(BOT_TOKEN);
    let forbidden = [
        BOT_TOKEN.to_string(),
        secret_part.to_string(),
        code.clone(),
        stale_code.clone(),
        "WRONGX".to_string(),
        CHAT.to_string(),
        STRANGER.to_string(),
        "PLANTED".to_string(),
        "swordfish".to_string(),
        data.clone(),
        proof.signature.lines().nth(1).unwrap_or("-").to_string(),
    ];
    for needle in &forbidden {
        assert!(
            !log.contains(needle.as_str()),
            "the log holds {needle:?}:\n{log}"
        );
    }
}
