//! A hostile server and a hostile chat against the relay's handling of a
//! PIN typed into the chat (deleted as soon as it is read, passed on to
//! nobody: a PIN is typed only in the Mini App) and its journal anchors
//! (`journal_head` kept per server, `anchor` sent back after the welcome),
//! on the running relay with the fake Bot API: whether the PIN leaves the
//! chat, the database and the log, whether a server can still ask for the
//! chat's next message as a secret, and whether an anchor can be lowered,
//! malformed or crossed between servers.

use aromba_testkit::relay as support;

use aromba_botfake::state::Injected;
use aromba_relay::telegram::words;
use aromba_relay_proto::client::{dial, handshake};
use aromba_relay_proto::frame::{Body, Delivery};
use aromba_relay_proto::session::{now_ms, seal_raw, seal_raw_json};
use futures_util::SinkExt;
use sqlx::PgPool;
use std::io::Read;
use std::time::Duration;
use support::bot::{
    BOT_TOKEN, Bot, ask_code, eventually, fake, next_delivery, next_is_message, paired,
    rows_holding, start_bot,
};
use support::{
    RelayProcess, Server, TestRelay, closed_with, config, connect, connected, free_port, start,
};
use tokio_tungstenite::tungstenite::Message;

const CHAT_A: i64 = 8_100_000_001;

// ---------------------------------------------------------------------------
// A PIN typed into the chat

/// Waits until `message_id` is deleted from `chat` and the relay has said
/// so there, `times` times in all.
async fn deleted_and_said(bot: &Bot, chat: i64, message_id: i64, times: usize) {
    eventually("the PIN's message deleted, and the chat told", || {
        let said = bot
            .fake
            .state()
            .sent
            .iter()
            .filter(|m| m.chat_id == chat && m.text == words::PIN_SHAPED)
            .count();
        (bot.deleted(chat, message_id) && said >= times).then_some(())
    })
    .await;
}

/// Found by the review: a PIN typed where none was asked for (after a
/// model asked for it) stayed in the chat and went on as a question. Now
/// a PIN is typed only in the Mini App: a message with the PIN's one shape
/// is taken from the chat, the chat is told in those words, and it reaches
/// no server; words and commands are not taken.
#[sqlx::test(migrations = false)]
async fn a_message_with_the_pins_shape_is_deleted_and_reaches_no_server(db: PgPool) {
    let bot = start_bot(db, false).await;
    let (_a, mut ws, mut session, _) = paired(&bot, CHAT_A).await;
    bot.settled(CHAT_A).await;
    let pins = ["Tr0ub4dor&3", "472913", "  4729135\n"];
    for (n, pin) in pins.iter().enumerate() {
        let id = bot.write(CHAT_A, pin);
        deleted_and_said(&bot, CHAT_A, id, n + 1).await;
    }
    let words_id = bot.write(CHAT_A, "is disk 2 full?");
    next_is_message(&mut ws, &mut session, "is disk 2 full?").await;
    let command = bot.write(CHAT_A, "/run tidy2024");
    next_is_message(&mut ws, &mut session, "/run tidy2024").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!bot.deleted(CHAT_A, words_id) && !bot.deleted(CHAT_A, command));
    assert_eq!(bot.metric("pin_shaped_deleted").await, 3);
}

/// Found by the review, when a PIN still went to the Worker: the secret
/// stayed in the outbox. Now it never enters it, nor any other table.
#[sqlx::test(migrations = false)]
async fn a_pin_typed_into_the_chat_is_in_no_table(db: PgPool) {
    let bot = start_bot(db, false).await;
    let (_a, ws, session, _) = paired(&bot, CHAT_A).await;
    bot.settled(CHAT_A).await;
    let secret = "SECRETPIN-8375-qz";
    let id = bot.write(CHAT_A, secret);
    deleted_and_said(&bot, CHAT_A, id, 1).await;
    // A message after it, left unacknowledged: once it is in the outbox,
    // the PIN (read first) would be there before it — and the search finds
    // what is there.
    bot.write(CHAT_A, "visible in the outbox");
    let mut queued = false;
    for _ in 0..250 {
        if !rows_holding(&bot.db, "visible in the outbox")
            .await
            .is_empty()
        {
            queued = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(queued, "the message after the PIN was never queued");
    let left = rows_holding(&bot.db, secret).await;
    assert!(left.is_empty(), "the PIN is in a table: {left:#?}");
    drop((ws, session));
}

#[sqlx::test(migrations = false)]
async fn a_pin_whose_deletion_meets_a_429_is_deleted_after_the_wait(db: PgPool) {
    let bot = start_bot(db, false).await;
    let (_a, _ws, _session, _) = paired(&bot, CHAT_A).await;
    bot.settled(CHAT_A).await;
    // Telegram asks the bot to wait just as the PIN is to be deleted.
    bot.fake
        .inject(Injected::TooManyRequests { retry_after: 1 });
    let pin = bot.write(CHAT_A, "4729135");
    for _ in 0..500 {
        if bot.deleted(CHAT_A, pin) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("after one 429 the PIN's message stays in the chat for good");
}

#[sqlx::test(migrations = false)]
async fn a_pin_whose_deletion_fails_on_the_way_is_deleted_on_a_second_try(db: PgPool) {
    let bot = start_bot(db, false).await;
    let (_a, _ws, _session, _) = paired(&bot, CHAT_A).await;
    bot.settled(CHAT_A).await;
    bot.fake.inject(Injected::Hangup);
    let pin = bot.write(CHAT_A, "4729135");
    for _ in 0..500 {
        if bot.deleted(CHAT_A, pin) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("after one failed call the PIN's message stays in the chat for good");
}

#[sqlx::test(migrations = false)]
async fn a_pin_is_in_no_line_of_the_relays_log(db: PgPool) {
    secret_not_in_log(db, "debug").await;
}

/// The finest level there is: a dependency's trace (tungstenite writes
/// every frame it sends and receives) logged every PIN and every server's
/// token.
#[sqlx::test(migrations = false)]
async fn a_pin_and_a_token_are_in_no_line_of_the_relays_trace_log(db: PgPool) {
    secret_not_in_log(
        db,
        "trace,tungstenite::protocol=trace,tokio_tungstenite=trace",
    )
    .await;
}

async fn secret_not_in_log(db: PgPool, level: &str) {
    let (fake, fake_addr) = fake().await;
    let port = free_port();
    let mut process = RelayProcess::spawn_with(
        &db,
        port,
        &[
            ("RUST_LOG", level.to_string()),
            ("TELEGRAM_BOT_TOKEN", BOT_TOKEN.to_string()),
            ("AROMBA_TELEGRAM_MODE", "polling".to_string()),
            ("AROMBA_BOT_API_URL", format!("http://{fake_addr}")),
        ],
    );
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
    let secrets = ["PLANTEDPIN-one-4729", "PLANTEDPIN-two-8361"];
    let conversation = async {
        let (code, _) = ask_code(&mut ws, &mut session).await;
        fake.user_message(CHAT_A, &format!("/start {code}"));
        assert!(matches!(
            next_delivery(&mut ws, &mut session).await,
            Delivery::Paired { .. }
        ));
        for (i, secret) in secrets.iter().enumerate() {
            // The second one's deletion fails: its error is logged too.
            if i == 1 {
                fake.inject(Injected::Outage);
                fake.inject(Injected::Hangup);
            }
            fake.user_message(CHAT_A, secret);
            let next = format!("and then {i}");
            fake.user_message(CHAT_A, &next);
            assert_eq!(
                next_delivery(&mut ws, &mut session).await,
                Delivery::Message { text: next }
            );
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    let outcome = tokio::time::timeout(Duration::from_secs(45), conversation).await;
    let _ = process.child.kill();
    let _ = process.child.wait();
    let log = reader.join().expect("the log");
    assert!(
        outcome.is_ok(),
        "the conversation stalled; the relay logged:\n{log}"
    );
    assert!(log.contains("\"paired\""), "the log is the relay's: {log}");
    let token = server.token.expose().to_string();
    for needle in secrets
        .iter()
        .copied()
        .chain(["PLANTEDPIN", token.as_str()])
    {
        assert!(!log.contains(needle), "the log holds {needle:?}:\n{log}");
    }
}

// ---------------------------------------------------------------------------
// Anchors

fn head(seq: u64, hash: &str) -> Body {
    Body::JournalHead {
        seq,
        hash: hash.into(),
    }
}

/// Waits until the relay holds `seq` as `server`'s journal head.
async fn held(db: &PgPool, server: &Server, seq: i64) {
    for _ in 0..500 {
        let held: Option<i64> = sqlx::query_scalar("SELECT journal_seq FROM servers WHERE id = $1")
            .bind(server.id)
            .fetch_one(db)
            .await
            .expect("servers");
        if held == Some(seq) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the relay never held line {seq}");
}

/// The anchor the relay sends right after the welcome, if any (within
/// `wait`).
async fn anchor_after_welcome(relay: &TestRelay, server: &Server) -> Option<(u64, String)> {
    let (mut ws, mut session) = connect(relay, server).await;
    match tokio::time::timeout(Duration::from_secs(2), session.recv(&mut ws)).await {
        Ok(Ok(Body::Anchor { seq, hash, .. })) => Some((seq, hash)),
        Ok(other) => panic!("not an anchor: {other:?}"),
        Err(_) => None,
    }
}

/// Sends `body` as the first frame of a new connection, sealed by hand
/// (the client would refuse to seal a body out of its bounds).
async fn first_frame_raw(relay: &TestRelay, server: &Server, body: &Body) -> u16 {
    let (mut ws, session) = connect(relay, server).await;
    let frame = seal_raw(session.sealing_key(), 1, now_ms(), body);
    ws.send(Message::Text(frame.into())).await.expect("send");
    closed_with(&mut ws).await
}

#[sqlx::test(migrations = false)]
async fn each_server_gets_back_its_own_anchor_and_no_other(db: PgPool) {
    let relay = start(db.clone(), config()).await;
    let (a, mut ws_a, mut s_a) = connected(&relay).await;
    let (b, mut ws_b, mut s_b) = connected(&relay).await;
    let (c, _ws_c, _s_c) = connected(&relay).await;
    s_a.send(&mut ws_a, &head(5, &"a".repeat(64)))
        .await
        .expect("send");
    s_b.send(&mut ws_b, &head(9000, &"b".repeat(64)))
        .await
        .expect("send");
    held(&db, &a, 5).await;
    held(&db, &b, 9000).await;
    drop((ws_a, ws_b));
    assert_eq!(
        anchor_after_welcome(&relay, &a).await,
        Some((5, "a".repeat(64)))
    );
    assert_eq!(
        anchor_after_welcome(&relay, &b).await,
        Some((9000, "b".repeat(64)))
    );
    assert_eq!(anchor_after_welcome(&relay, &c).await, None);
    relay.stop().await;
}

/// A Worker could make up a line number and have its Warden go to Cut for
/// a rewrite that never happened; the Warden takes only an anchor signed
/// with the relay's approval key (which it pinned at pairing) as evidence.
#[sqlx::test(migrations = false)]
async fn the_anchor_is_signed_with_the_approval_key_over_this_server_and_line(db: PgPool) {
    let bot = start_bot(db.clone(), false).await;
    let (server, mut ws, mut session, key) = paired(&bot, CHAT_A).await;
    let hash = "a".repeat(64);
    session.send(&mut ws, &head(7, &hash)).await.expect("send");
    held(&db, &server, 7).await;
    drop(ws);
    let (mut ws, mut session) = connect(&bot.relay, &server).await;
    let signature = loop {
        match tokio::time::timeout(Duration::from_secs(5), session.recv(&mut ws)).await {
            Ok(Ok(Body::Anchor {
                seq: 7,
                hash: h,
                signature,
            })) if h == hash => break signature.expect("the anchor is signed"),
            Ok(Ok(Body::Deliver { .. })) => continue,
            other => panic!("no anchor: {other:?}"),
        }
    };
    let key = minisign_verify::PublicKey::from_base64(&key).expect("the relay's key");
    let signature = minisign_verify::Signature::decode(&signature).expect("a minisign signature");
    let signed = |server: &str, seq: u64| {
        format!("aromba-anchor-v1\nserver={server}\nseq={seq}\nhash={hash}\n").into_bytes()
    };
    let mine = server.id.simple().to_string();
    key.verify(&signed(&mine, 7), &signature, false)
        .expect("the signature covers this server's anchor");
    assert!(
        key.verify(&signed(&mine, 8), &signature, false).is_err(),
        "the signature holds for another line"
    );
    assert!(
        key.verify(&signed(&"0".repeat(32), 7), &signature, false)
            .is_err(),
        "the signature holds for another server"
    );
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn an_anchor_is_never_lowered_nor_replaced_by_a_malformed_head(db: PgPool) {
    let relay = start(db.clone(), config()).await;
    let (a, mut ws, mut session) = connected(&relay).await;
    let kept = "c".repeat(64);
    session
        .send(&mut ws, &head(100, &kept))
        .await
        .expect("send");
    held(&db, &a, 100).await;
    drop(ws);
    // Lower, the same seq with another hash, past what the database keeps,
    // and hashes of other shapes: each closes the connection and changes
    // nothing.
    for bad in [
        head(99, &"d".repeat(64)),
        head(0, &"0".repeat(64)),
        head(100, &"e".repeat(64)),
        head(u64::MAX, &"f".repeat(64)),
        head(1 << 63, &"f".repeat(64)),
        head(101, &"C".repeat(64)),
        head(101, &"c".repeat(63)),
        head(101, &format!("{}g", "c".repeat(63))),
        head(101, ""),
    ] {
        assert_eq!(
            first_frame_raw(&relay, &a, &bad).await,
            1008,
            "{bad:?} was taken"
        );
        assert_eq!(
            anchor_after_welcome(&relay, &a).await,
            Some((100, kept.clone())),
            "after {bad:?}"
        );
    }
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_server_cannot_send_an_anchor_to_the_relay(db: PgPool) {
    // Frames only the relay sends are refused from a server.
    let relay = start(db, config()).await;
    let (a, _ws, _s) = connected(&relay).await;
    let anchor = Body::Anchor {
        seq: 1,
        hash: "a".repeat(64),
        signature: None,
    };
    assert_eq!(first_frame_raw(&relay, &a, &anchor).await, 1008);
    assert_eq!(anchor_after_welcome(&relay, &a).await, None);
    relay.stop().await;
}

/// Sends `body` (JSON no `Body` can hold) as the first frame of a new
/// connection; the close code.
async fn first_frame_json(relay: &TestRelay, server: &Server, body: &str) -> u16 {
    let (mut ws, session) = connect(relay, server).await;
    let frame = seal_raw_json(session.sealing_key(), 1, now_ms(), body);
    ws.send(Message::Text(frame.into())).await.expect("send");
    closed_with(&mut ws).await
}

/// A server of before the Mini App asked the relay to take the chat's next
/// message as its PIN (`expect_secret`), and the relay delivered it as a
/// `secret`. Neither is a frame now: a server (or one playing the relay's
/// part back at it) sending either is cut off, and the chat's next message
/// goes on as a message, or is deleted if it has the PIN's shape.
#[sqlx::test(migrations = false)]
async fn a_server_cannot_ask_for_the_chats_next_message_as_a_secret(db: PgPool) {
    let bot = start_bot(db, false).await;
    let (a, ws, session, _) = paired(&bot, CHAT_A).await;
    bot.settled(CHAT_A).await;
    drop((ws, session));
    assert_eq!(
        first_frame_json(&bot.relay, &a, r#"{"type":"expect_secret"}"#).await,
        1008
    );
    let secret = r#"{"type":"deliver","id":1,"delivery":{"kind":"secret","text":"1234567"}}"#;
    assert_eq!(first_frame_json(&bot.relay, &a, secret).await, 1008);
    let (mut ws2, mut session2) = connect(&bot.relay, &a).await;
    let kept = bot.write(CHAT_A, "four seven 2");
    next_is_message(&mut ws2, &mut session2, "four seven 2").await;
    let pin = bot.write(CHAT_A, "4729135");
    deleted_and_said(&bot, CHAT_A, pin, 1).await;
    assert!(!bot.deleted(CHAT_A, kept));
}

/// A relay upgraded with a `secret` still queued for a server (typed in the
/// chat and never taken): the upgrade erases it, so it is kept nowhere,
/// and the deliveries behind it flow.
#[sqlx::test(migrations = false)]
async fn the_upgrade_erases_a_queued_secret_and_the_deliveries_behind_it_flow(db: PgPool) {
    let relay = start(db.clone(), config()).await;
    let (a, ws, _s) = connected(&relay).await;
    drop(ws);
    relay.stop().await;
    // The database as a relay of before the Mini App left it.
    let secret = "SECRETPIN-queued-6612";
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DELETE FROM _sqlx_migrations WHERE description = 'no secret in the chat';
         ALTER TABLE pairings ADD COLUMN secret_until timestamptz;
         INSERT INTO outbox (server_id, delivery, created_at) VALUES
           ('{id}', '{{\"kind\":\"secret\",\"text\":\"{secret}\"}}', now()),
           ('{id}', '{{\"kind\":\"message\",\"text\":\"behind it\"}}', now());",
        id = a.id
    )))
    .execute(&db)
    .await
    .expect("the old state");
    assert_eq!(rows_holding(&db, secret).await.len(), 1);
    let relay = start(db.clone(), config()).await;
    // Erased at the upgrade, before its server is back (it might never be).
    assert!(rows_holding(&db, secret).await.is_empty());
    let (mut ws, mut session) = connect(&relay, &a).await;
    next_is_message(&mut ws, &mut session, "behind it").await;
    let column: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM information_schema.columns WHERE column_name = 'secret_until'",
    )
    .fetch_one(&db)
    .await
    .expect("the columns");
    assert_eq!(column, 0);
    relay.stop().await;
}

/// Found while removing the `secret` delivery: a row of the outbox the
/// relay could not read (a kind an older relay queued) ended every
/// connection of its server at that row, so nothing behind it was ever
/// delivered. Such a row is erased and skipped.
#[sqlx::test(migrations = false)]
async fn a_queued_delivery_of_a_kind_the_relay_does_not_know_holds_nothing_up(db: PgPool) {
    let relay = start(db.clone(), config()).await;
    let (a, ws, _s) = connected(&relay).await;
    drop(ws);
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "INSERT INTO outbox (server_id, delivery, created_at) VALUES
           ('{id}', '{{\"kind\":\"from_the_future\",\"x\":\"KIND-UNKNOWN-1\"}}', now()),
           ('{id}', '{{\"kind\":\"message\",\"text\":\"first behind it\"}}', now()),
           ('{id}', '{{\"kind\":\"message\"}}', now()),
           ('{id}', '{{\"kind\":\"message\",\"text\":\"second behind it\"}}', now());",
        id = a.id
    )))
    .execute(&db)
    .await
    .expect("the rows");
    let (mut ws, mut session) = connect(&relay, &a).await;
    next_is_message(&mut ws, &mut session, "first behind it").await;
    next_is_message(&mut ws, &mut session, "second behind it").await;
    assert!(rows_holding(&db, "KIND-UNKNOWN-1").await.is_empty());
    // The acknowledgements are taken on the relay's own time: wait for them.
    let mut left: i64 = -1;
    for _ in 0..500 {
        left = sqlx::query_scalar("SELECT count(*) FROM outbox WHERE server_id = $1")
            .bind(a.id)
            .fetch_one(&db)
            .await
            .expect("the outbox");
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    assert_eq!(left, 0, "every row delivered and acknowledged, or erased");
    relay.stop().await;
}
