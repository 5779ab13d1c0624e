//! A hostile server and a hostile chat against the relay's secrets
//! (`expect_secret`, `Delivery::Secret`, `pairings.secret_until`) and its
//! journal anchors (`journal_head` kept per server, `anchor` sent back
//! after the welcome), on the running relay with the fake Bot API: which
//! chat's message a mark can take, for how long, whether the secret leaves
//! the chat, the database and the log, and whether an anchor can be
//! lowered, malformed or crossed between servers.

use aromba_testkit::relay as support;

use aromba_botfake::state::Injected;
use aromba_relay_proto::client::{Session, Socket, dial, handshake};
use aromba_relay_proto::frame::{Body, Delivery};
use aromba_relay_proto::session::{now_ms, seal_raw};
use futures_util::SinkExt;
use sqlx::PgPool;
use std::io::Read;
use std::time::Duration;
use support::bot::{
    BOT_TOKEN, Bot, ask_code, eventually, fake, next_delivery, next_frame, paired, start_bot,
};
use support::{
    RelayProcess, Server, TestRelay, closed_with, config, connect, connected, free_port, refusals,
    start,
};
use tokio_tungstenite::tungstenite::Message;

const CHAT_A: i64 = 8_100_000_001;
const CHAT_B: i64 = 8_100_000_002;

/// Waits until the relay has handled every frame sent before on this
/// connection: it handles them in order, and answers a paired server's
/// pairing request.
async fn sync(ws: &mut Socket, session: &mut Session) {
    session
        .send(ws, &Body::PairingRequest {})
        .await
        .expect("pairing request");
    loop {
        if let Body::AlreadyPaired {} = next_frame(ws, session).await {
            return;
        }
    }
}

/// Sends `expect_secret`, once the relay has handled it.
async fn expect_secret(ws: &mut Socket, session: &mut Session) {
    session
        .send(ws, &Body::ExpectSecret {})
        .await
        .expect("expect_secret");
    sync(ws, session).await;
}

/// The person writes `text` in `chat`; the message's id in the chat.
fn write(bot: &Bot, chat: i64, text: &str) -> i64 {
    bot.fake.user_message(chat, text);
    *bot.fake
        .state()
        .last_message_id
        .get(&chat)
        .expect("the chat's message")
}

/// Waits until the relay has said all it says at pairing (its reply and
/// the chat's command menu), so the next Bot API call is the test's.
async fn settled(bot: &Bot, chat: i64) {
    eventually("the pairing's reply and menu", || {
        let state = bot.fake.state();
        (state.sent.iter().any(|m| m.chat_id == chat)
            && state.commands.contains_key(&format!("chat:{chat}")))
        .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
}

fn deleted(bot: &Bot, chat: i64, message_id: i64) -> bool {
    bot.fake
        .state()
        .deleted_by_bot
        .contains(&(chat, message_id))
}

/// Every row of every table of the relay's, as text, that holds `needle`.
async fn rows_holding(db: &PgPool, needle: &str) -> Vec<String> {
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables
         WHERE table_schema = 'public' AND table_type = 'BASE TABLE'",
    )
    .fetch_all(db)
    .await
    .expect("the tables");
    assert!(tables.iter().any(|t| t == "outbox"), "{tables:?}");
    let mut found = Vec::new();
    for table in tables {
        // The table names are the database's own.
        let rows: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT t::text FROM \"{table}\" t WHERE t::text LIKE '%' || $1 || '%'"
        )))
        .bind(needle)
        .fetch_all(db)
        .await
        .expect("a table");
        found.extend(rows.into_iter().map(|r| format!("{table}: {r}")));
    }
    found
}

// ---------------------------------------------------------------------------
// Secrets

#[sqlx::test(migrations = false)]
async fn a_secret_mark_takes_only_the_next_text_of_the_servers_own_chat(db: PgPool) {
    let bot = start_bot(db, false).await;
    let (_a, mut ws_a, mut s_a, _) = paired(&bot, CHAT_A).await;
    let (_b, mut ws_b, mut s_b, _) = paired(&bot, CHAT_B).await;
    settled(&bot, CHAT_A).await;
    settled(&bot, CHAT_B).await;
    expect_secret(&mut ws_a, &mut s_a).await;

    // Another chat's message is not A's secret: B gets it as a message,
    // and it stays in B's chat.
    let other = write(&bot, CHAT_B, "PIN-OF-ANOTHER-CHAT 1111");
    assert_eq!(
        next_delivery(&mut ws_b, &mut s_b).await,
        Delivery::Message {
            text: "PIN-OF-ANOTHER-CHAT 1111".into()
        }
    );
    // A command in A's chat is never the secret, and leaves the mark.
    let command = write(&bot, CHAT_A, "/status");
    assert_eq!(
        next_delivery(&mut ws_a, &mut s_a).await,
        Delivery::Message {
            text: "/status".into()
        }
    );
    // The next text is, once.
    let pin = write(&bot, CHAT_A, "4729135");
    assert_eq!(
        next_delivery(&mut ws_a, &mut s_a).await,
        Delivery::Secret {
            text: "4729135".into()
        }
    );
    let after = write(&bot, CHAT_A, "just text");
    assert_eq!(
        next_delivery(&mut ws_a, &mut s_a).await,
        Delivery::Message {
            text: "just text".into()
        }
    );
    eventually("the secret deleted from the chat", || {
        deleted(&bot, CHAT_A, pin).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    for (chat, id) in [(CHAT_B, other), (CHAT_A, command), (CHAT_A, after)] {
        assert!(!deleted(&bot, chat, id), "message {id} of {chat} deleted");
    }
}

#[sqlx::test(migrations = false)]
async fn expect_secret_from_a_server_no_chat_is_paired_with_is_refused(db: PgPool) {
    let bot = start_bot(db, false).await;
    let (_a, _ws_a, _s_a, _) = paired(&bot, CHAT_A).await;
    let (server, mut ws, mut session) = connected(&bot.relay).await;
    session
        .send(&mut ws, &Body::ExpectSecret {})
        .await
        .expect("send");
    assert_eq!(closed_with(&mut ws).await, 1008);
    assert_eq!(refusals(&bot.relay, "secret_unpaired").await, 1);
    // It marked no chat, its own or another's.
    let marked: i64 =
        sqlx::query_scalar("SELECT count(*) FROM pairings WHERE secret_until IS NOT NULL")
            .fetch_one(&bot.db)
            .await
            .expect("pairings");
    assert_eq!(marked, 0, "{server:?}");
}

#[sqlx::test(migrations = false)]
async fn a_secret_mark_lasts_five_minutes_and_then_takes_nothing(db: PgPool) {
    let bot = start_bot(db, false).await;
    let (a, mut ws, mut session, _) = paired(&bot, CHAT_A).await;
    settled(&bot, CHAT_A).await;
    let before = chrono::Utc::now();
    expect_secret(&mut ws, &mut session).await;
    let until: chrono::DateTime<chrono::Utc> =
        sqlx::query_scalar("SELECT secret_until FROM pairings WHERE server_id = $1")
            .bind(a.id)
            .fetch_one(&bot.db)
            .await
            .expect("the mark");
    assert!(
        until <= chrono::Utc::now() + chrono::Duration::seconds(300)
            && until >= before + chrono::Duration::seconds(299),
        "the mark lasts until {until}"
    );
    // Asked again and again, it never reaches further than five minutes
    // from the last time.
    for _ in 0..5 {
        expect_secret(&mut ws, &mut session).await;
    }
    let until: chrono::DateTime<chrono::Utc> =
        sqlx::query_scalar("SELECT secret_until FROM pairings WHERE server_id = $1")
            .bind(a.id)
            .fetch_one(&bot.db)
            .await
            .expect("the mark");
    assert!(until <= chrono::Utc::now() + chrono::Duration::seconds(300));
    // Once it has passed, the chat's text is a message and stays.
    sqlx::query("UPDATE pairings SET secret_until = now() - interval '1 second'")
        .execute(&bot.db)
        .await
        .expect("the mark moved into the past");
    // (Words, not the PIN's one-word shape, which is taken as a secret
    // whatever the mark says.)
    let id = write(&bot, CHAT_A, "four seven 2");
    assert_eq!(
        next_delivery(&mut ws, &mut session).await,
        Delivery::Message {
            text: "four seven 2".into()
        }
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!deleted(&bot, CHAT_A, id));
}

/// Found by the review: a PIN typed where none was asked for (after a
/// model asked for it) stayed in the chat and went on as a question. A
/// message with the PIN's one shape is taken from the chat, asked for or
/// not; words and commands are not.
#[sqlx::test(migrations = false)]
async fn a_message_with_the_pins_shape_is_taken_from_the_chat_unasked(db: PgPool) {
    let bot = start_bot(db, false).await;
    let (_a, mut ws, mut session, _) = paired(&bot, CHAT_A).await;
    settled(&bot, CHAT_A).await;
    let id = write(&bot, CHAT_A, "Tr0ub4dor&3");
    assert_eq!(
        next_delivery(&mut ws, &mut session).await,
        Delivery::Secret {
            text: "Tr0ub4dor&3".into()
        }
    );
    for _ in 0..50 {
        if deleted(&bot, CHAT_A, id) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(deleted(&bot, CHAT_A, id), "the PIN's message is deleted");
    let words = write(&bot, CHAT_A, "is disk 2 full?");
    assert_eq!(
        next_delivery(&mut ws, &mut session).await,
        Delivery::Message {
            text: "is disk 2 full?".into()
        }
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!deleted(&bot, CHAT_A, words));
}

#[sqlx::test(migrations = false)]
async fn a_secret_is_in_no_table_once_acknowledged(db: PgPool) {
    let bot = start_bot(db, false).await;
    let (a, mut ws, mut session, _) = paired(&bot, CHAT_A).await;
    settled(&bot, CHAT_A).await;
    expect_secret(&mut ws, &mut session).await;
    let secret = "SECRETPIN-8375-qz";
    write(&bot, CHAT_A, secret);
    assert_eq!(
        next_delivery(&mut ws, &mut session).await,
        Delivery::Secret {
            text: secret.into()
        }
    );
    // Acknowledged (by next_delivery): the body goes with the writer's
    // next batch.
    for _ in 0..500 {
        if rows_holding(&bot.db, secret).await.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let left = rows_holding(&bot.db, secret).await;
    assert!(left.is_empty(), "the secret stays in: {left:#?}");
    let mark: Option<chrono::DateTime<chrono::Utc>> =
        sqlx::query_scalar("SELECT secret_until FROM pairings WHERE server_id = $1")
            .bind(a.id)
            .fetch_one(&bot.db)
            .await
            .expect("the mark");
    assert_eq!(mark, None, "the mark is cleared as it is used");
}

#[sqlx::test(migrations = false)]
async fn a_secret_whose_deletion_meets_a_429_is_deleted_after_the_wait(db: PgPool) {
    let bot = start_bot(db, false).await;
    let (_a, mut ws, mut session, _) = paired(&bot, CHAT_A).await;
    settled(&bot, CHAT_A).await;
    expect_secret(&mut ws, &mut session).await;
    // Telegram asks the bot to wait just as the secret is to be deleted.
    bot.fake
        .inject(Injected::TooManyRequests { retry_after: 1 });
    let pin = write(&bot, CHAT_A, "4729135");
    assert!(matches!(
        next_delivery(&mut ws, &mut session).await,
        Delivery::Secret { .. }
    ));
    for _ in 0..500 {
        if deleted(&bot, CHAT_A, pin) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("after one 429 the PIN's message stays in the chat for good");
}

#[sqlx::test(migrations = false)]
async fn a_secret_whose_deletion_fails_on_the_way_is_deleted_on_a_second_try(db: PgPool) {
    let bot = start_bot(db, false).await;
    let (_a, mut ws, mut session, _) = paired(&bot, CHAT_A).await;
    settled(&bot, CHAT_A).await;
    expect_secret(&mut ws, &mut session).await;
    bot.fake.inject(Injected::Hangup);
    let pin = write(&bot, CHAT_A, "4729135");
    assert!(matches!(
        next_delivery(&mut ws, &mut session).await,
        Delivery::Secret { .. }
    ));
    for _ in 0..500 {
        if deleted(&bot, CHAT_A, pin) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("after one failed call the PIN's message stays in the chat for good");
}

#[sqlx::test(migrations = false)]
async fn a_secret_mark_outlives_a_relay_restart_and_still_takes_the_pin(db: PgPool) {
    let bot = start_bot(db, false).await;
    let (a, mut ws, mut session, _) = paired(&bot, CHAT_A).await;
    settled(&bot, CHAT_A).await;
    expect_secret(&mut ws, &mut session).await;
    let Bot {
        relay,
        fake,
        fake_addr,
        db,
    } = bot;
    let addr = relay.addr;
    relay.stop().await;
    drop(ws);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .expect("the relay's address again");
    let mut config = config();
    config.telegram = Some(support::bot::telegram_config(fake_addr, addr, false));
    let relay = support::start_on(db.clone(), config, listener).await;
    let bot = Bot {
        relay,
        fake,
        fake_addr,
        db,
    };
    let (mut ws, mut session) = connect(&bot.relay, &a).await;
    let pin = write(&bot, CHAT_A, "4729135");
    assert_eq!(
        next_delivery(&mut ws, &mut session).await,
        Delivery::Secret {
            text: "4729135".into()
        }
    );
    eventually("the secret deleted from the chat", || {
        deleted(&bot, CHAT_A, pin).then_some(())
    })
    .await;
}

#[sqlx::test(migrations = false)]
async fn a_secret_is_in_no_line_of_the_relays_log(db: PgPool) {
    secret_not_in_log(db, "debug").await;
}

/// The finest level there is: a dependency's trace (tungstenite writes
/// every frame it sends and receives) logged every PIN and every server's
/// token.
#[sqlx::test(migrations = false)]
async fn a_secret_and_a_token_are_in_no_line_of_the_relays_trace_log(db: PgPool) {
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
            expect_secret(&mut ws, &mut session).await;
            // The second one's deletion fails: its error is logged too.
            if i == 1 {
                fake.inject(Injected::Outage);
                fake.inject(Injected::Hangup);
            }
            fake.user_message(CHAT_A, secret);
            assert_eq!(
                next_delivery(&mut ws, &mut session).await,
                Delivery::Secret {
                    text: (*secret).into()
                }
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
async fn a_server_cannot_send_an_anchor_or_a_secret_to_the_relay(db: PgPool) {
    // Frames only the relay sends are refused from a server.
    let relay = start(db, config()).await;
    let (a, _ws, _s) = connected(&relay).await;
    let anchor = Body::Anchor {
        seq: 1,
        hash: "a".repeat(64),
        signature: None,
    };
    assert_eq!(first_frame_raw(&relay, &a, &anchor).await, 1008);
    let secret = Body::Deliver {
        id: 1,
        delivery: Delivery::Secret {
            text: "1234".into(),
        },
    };
    assert_eq!(first_frame_raw(&relay, &a, &secret).await, 1008);
    assert_eq!(anchor_after_welcome(&relay, &a).await, None);
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_secret_mark_follows_neither_the_server_to_a_new_chat_nor_the_chat_to_a_new_server(
    db: PgPool,
) {
    let bot = start_bot(db, false).await;
    let (_a, mut ws_a, mut s_a, _) = paired(&bot, CHAT_A).await;
    settled(&bot, CHAT_A).await;
    expect_secret(&mut ws_a, &mut s_a).await;
    // The chat unpairs while the mark stands.
    bot.fake.user_message(CHAT_A, "/unpair");
    let question = bot.shown(CHAT_A, 1).await;
    assert!(question.text.starts_with("Unpair"), "{}", question.text);
    let unpair = question.buttons[0][0].1.clone();
    bot.fake
        .tap(CHAT_A, question.message_id, &unpair)
        .expect("tap");
    bot.wait_metric("unpaired", 1).await;
    // The server pairs with another chat: that chat's first text is a
    // message, not a secret.
    let (code, _) = ask_code(&mut ws_a, &mut s_a).await;
    bot.fake.user_message(CHAT_B, &format!("/start {code}"));
    assert!(matches!(
        next_delivery(&mut ws_a, &mut s_a).await,
        Delivery::Paired { .. }
    ));
    settled(&bot, CHAT_B).await;
    let kept = write(&bot, CHAT_B, "four seven 2");
    assert_eq!(
        next_delivery(&mut ws_a, &mut s_a).await,
        Delivery::Message {
            text: "four seven 2".into()
        }
    );
    // The old chat pairs with another server: neither.
    let (_c, mut ws_c, mut s_c, _) = paired(&bot, CHAT_A).await;
    let also = write(&bot, CHAT_A, "8361");
    assert_eq!(
        next_delivery(&mut ws_c, &mut s_c).await,
        Delivery::Message {
            text: "8361".into()
        }
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!deleted(&bot, CHAT_B, kept) && !deleted(&bot, CHAT_A, also));
}

/// The Worker is away when the PIN comes: the secret waits in the outbox.
/// It is of no use after the five minutes the Worker waits for it (a
/// Worker back later drops it), so it must not wait there for the 24
/// hours every other delivery may.
#[sqlx::test(migrations = false)]
async fn a_secret_no_worker_took_is_erased_once_no_worker_would_use_it(db: PgPool) {
    let clock = std::sync::Arc::new(aromba_relay::clock::ManualClock::new(chrono::Utc::now()));
    let mut config = config();
    config.clock = clock.clone();
    let bot = support::bot::start_bot_with(db, false, config).await;
    let (_a, mut ws, mut session, _) = paired(&bot, CHAT_A).await;
    settled(&bot, CHAT_A).await;
    expect_secret(&mut ws, &mut session).await;
    drop(ws);
    let secret = "SECRETPIN-away-5521";
    write(&bot, CHAT_A, secret);
    for _ in 0..500 {
        if !rows_holding(&bot.db, secret).await.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!rows_holding(&bot.db, secret).await.is_empty());
    // A minute on, the Worker may still come back for it.
    clock.advance(chrono::Duration::seconds(60));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !rows_holding(&bot.db, secret).await.is_empty(),
        "erased while a Worker could still take it"
    );
    // Past five minutes, no Worker would.
    clock.advance(chrono::Duration::seconds(300));
    for _ in 0..250 {
        if rows_holding(&bot.db, secret).await.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!(
        "the secret waits in the database: {:#?}",
        rows_holding(&bot.db, secret).await
    );
}
