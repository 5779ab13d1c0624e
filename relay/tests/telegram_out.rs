//! Telegram out and back: a server's messages reach its chat within
//! Telegram's limits and as plain text, and a tap comes back to the server
//! only on a button the relay delivered to that chat, signed so that the
//! Warden can check it.

use aromba_testkit::relay as support;

use aromba_botfake::state::Injected;
use aromba_relay_proto::frame::{Body, Button, Delivery, TapProof};
use sqlx::PgPool;
use std::time::{Duration, Instant};
use support::bot::{
    ACTION, Bot, approval_buttons, eventually, next_delivery, no_delivery, paired, send, sent,
    start_bot,
};
use uuid::Uuid;

/// The bytes the relay signs, as `docs/approvals.md` writes them (built
/// here again, apart from the relay's code).
fn approval_message(server: Uuid, proof: &TapProof, button: &str) -> Vec<u8> {
    format!(
        "aromba-approval-v2\nserver={}\naction={}\ntext_sha256={}\nbutton={button}\nlabel={}\nchat={}\ntime={}\n",
        server.simple(),
        proof.action.as_deref().unwrap_or(""),
        proof.text_sha256,
        proof.label,
        proof.chat,
        proof.time
    )
    .into_bytes()
}

fn verifies(key: &str, message: &[u8], signature: &str) -> bool {
    let key = minisign_verify::PublicKey::from_base64(key).expect("the relay's public key");
    let signature = minisign_verify::Signature::decode(signature).expect("a minisign signature");
    key.verify(message, &signature, false).is_ok()
}

fn sha256_hex(text: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[sqlx::test(migrations = false)]
async fn a_servers_text_is_shown_as_text_and_its_body_leaves_the_relay(db: PgPool) {
    let bot = start_bot(db.clone(), false).await;
    let (_server, mut ws, mut session, _) = paired(&bot, 8001).await;
    let text = "<b>not bold</b> *not bold* [a link](https://example.com) `code` _x_";
    send(&mut ws, &mut session, text, vec![]).await;
    let shown = sent(&bot, 8001, 1).await;
    assert_eq!(shown.text, text);
    assert_eq!(shown.parse_mode, None);
    // A link in a server's text is never previewed (fetched, shown).
    assert!(shown.previews_off, "sent with link previews on");
    // Delivered, the body is deleted with the delivery's record.
    bot.wait_metric("message_delivered", 1).await;
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM chat_outbox")
        .fetch_one(&db)
        .await
        .expect("count");
    assert_eq!(left, 0);
    let kept: Vec<Vec<u8>> = sqlx::query_scalar("SELECT text_sha256 FROM chat_messages")
        .fetch_all(&db)
        .await
        .expect("rows");
    assert_eq!(kept.len(), 1);
    bot.relay.stop().await;
}

/// A server whose acknowledgement was lost (its relay replica killed)
/// sends the message again after it has left the outbox: it is
/// acknowledged as known, and the chat does not get it twice (found by the
/// chaos test, `testkit/tests/relay_replicas_killed.rs`).
#[sqlx::test(migrations = false)]
async fn a_message_sent_again_after_its_delivery_is_acknowledged_and_not_shown_twice(db: PgPool) {
    let bot = start_bot(db.clone(), false).await;
    let (_server, mut ws, mut session, _) = paired(&bot, 8002).await;
    let id = send(&mut ws, &mut session, "the disk is 91% full", vec![]).await;
    bot.wait_metric("message_delivered", 1).await;
    let again = Body::Send {
        id,
        text: "the disk is 91% full".into(),
        buttons: vec![],
        monospace: Vec::new(),
    };
    session.send(&mut ws, &again).await.expect("send");
    loop {
        if let Body::AckMessage { id: acked } =
            support::bot::next_frame(&mut ws, &mut session).await
        {
            assert_eq!(acked, id);
            break;
        }
    }
    // A later message arrives, and nothing came in between.
    send(&mut ws, &mut session, "all is well", vec![]).await;
    let second = sent(&bot, 8002, 2).await;
    assert_eq!(second.text, "all is well");
    let shown: Vec<String> = bot
        .fake
        .sent_to(8002)
        .into_iter()
        .map(|m| m.text)
        .filter(|t| t.contains("91%"))
        .collect();
    assert_eq!(
        shown.len(),
        1,
        "the message was shown {} times",
        shown.len()
    );
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_text_too_long_for_telegram_is_split_on_lines_with_the_buttons_on_the_last_part(
    db: PgPool,
) {
    let bot = start_bot(db, false).await;
    let (_server, mut ws, mut session, _) = paired(&bot, 8002).await;
    // 4,000 characters, but 7,960 UTF-16 units: more than the relay puts in
    // one message, whichever way Telegram counts.
    let line = format!("{}\n", "😀".repeat(199));
    let text = line.repeat(20);
    send(&mut ws, &mut session, &text, vec![Button::new("ok", "OK")]).await;
    let first = sent(&bot, 8002, 1).await;
    let second = sent(&bot, 8002, 2).await;
    assert!(first.buttons.is_empty());
    assert_eq!(second.buttons.len(), 1);
    assert!(first.text.ends_with('\n'));
    assert_eq!(format!("{}{}", first.text, second.text), text);
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_forwarded_tap_is_signed_over_every_covered_field(db: PgPool) {
    let bot = start_bot(db, false).await;
    let (server, mut ws, mut session, key) = paired(&bot, 8003).await;
    let text = "Run the chore apt-upgrade (yellow)?";
    let message = send(&mut ws, &mut session, text, approval_buttons()).await;
    let shown = sent(&bot, 8003, 1).await;
    let data = &shown.buttons[0][0].1;
    assert_ne!(data, "approve", "callback data is an opaque id");
    assert!(data.len() <= 64);
    let query = bot.fake.tap(8003, shown.message_id, data).expect("tap");
    let (button, proof) = match next_delivery(&mut ws, &mut session).await {
        Delivery::Tap {
            message: m,
            button,
            proof,
        } => {
            assert_eq!(m, message);
            (button, proof)
        }
        other => panic!("expected a tap, got {other:?}"),
    };
    assert_eq!(button, "approve");
    assert_eq!(proof.action.as_deref(), Some(ACTION));
    assert_eq!(proof.label, "Approve");
    assert_eq!(proof.chat, 8003);
    assert_eq!(proof.text_sha256, sha256_hex(text));
    let signed = approval_message(server.id, &proof, &button);
    assert!(verifies(&key, &signed, &proof.signature));
    // Any covered field changed, and the signature no longer holds.
    let other = |f: &dyn Fn(&mut TapProof)| {
        let mut p = proof.clone();
        f(&mut p);
        approval_message(server.id, &p, &button)
    };
    let changed = [
        approval_message(Uuid::new_v4(), &proof, &button),
        approval_message(server.id, &proof, "cancel"),
        other(&|p| p.action = Some("f".repeat(32))),
        other(&|p| p.label = "Cancel".into()),
        other(&|p| p.chat = 8004),
        other(&|p| p.time += 1),
        other(&|p| p.text_sha256 = sha256_hex("Run the chore wipe-disk (red)?")),
    ];
    for message in changed {
        assert!(!verifies(&key, &message, &proof.signature));
    }
    eventually("the tap answered", || {
        bot.fake.answered(&query).filter(|a| *a)
    })
    .await;
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_tap_the_relay_did_not_deliver_is_answered_expired_and_not_forwarded(db: PgPool) {
    let bot = start_bot(db, false).await;
    let (_a, mut ws_a, mut session_a, _) = paired(&bot, 8005).await;
    let (_b, mut ws_b, mut session_b, _) = paired(&bot, 8006).await;
    send(
        &mut ws_a,
        &mut session_a,
        "Message for A",
        approval_buttons(),
    )
    .await;
    send(
        &mut ws_b,
        &mut session_b,
        "Message for B",
        vec![Button::new("ok", "OK")],
    )
    .await;
    let for_a = sent(&bot, 8005, 1).await;
    let for_b = sent(&bot, 8006, 1).await;
    let a_data = for_a.buttons[0][0].1.clone();
    let mut queries = Vec::new();
    // A button that was never sent.
    queries.push(
        bot.fake
            .tap(8005, for_a.message_id, "approve")
            .expect("tap"),
    );
    queries.push(
        bot.fake
            .tap(8005, for_a.message_id, "AAAAAAAAAAAAAAAAAAAAAA")
            .expect("tap"),
    );
    // A's button, tapped on B's message in B's chat.
    queries.push(bot.fake.tap(8006, for_b.message_id, &a_data).expect("tap"));
    // A's button on A's message once the person deleted it (date == 0).
    assert!(bot.fake.delete(8005, for_a.message_id));
    queries.push(bot.fake.tap(8005, for_a.message_id, &a_data).expect("tap"));
    for query in &queries {
        eventually("the tap answered", || {
            bot.fake.answered(query).filter(|a| *a)
        })
        .await;
    }
    no_delivery(&mut ws_a, &mut session_a, Duration::from_millis(500)).await;
    no_delivery(&mut ws_b, &mut session_b, Duration::from_millis(200)).await;
    let metrics = bot.relay.metrics_text().await;
    assert!(
        metrics.contains("aromba_relay_telegram_events_total{event=\"tap_expired\"} 4"),
        "{metrics}"
    );
    assert!(!metrics.contains("event=\"tap_forwarded\""), "{metrics}");
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn an_edit_changes_the_message_in_place_and_its_old_buttons_expire(db: PgPool) {
    let bot = start_bot(db, false).await;
    let (_server, mut ws, mut session, _) = paired(&bot, 8007).await;
    let message = send(&mut ws, &mut session, "Approve?", approval_buttons()).await;
    let before = sent(&bot, 8007, 1).await;
    let old_data = before.buttons[0][0].1.clone();
    let edit = Uuid::new_v4();
    session
        .send(
            &mut ws,
            &Body::Edit {
                id: edit,
                message,
                text: "Approved, running.".into(),
                buttons: vec![Button::new("stop", "Stop")],
            },
        )
        .await
        .expect("edit");
    let after = eventually("the edit", || {
        bot.fake
            .sent_to(8007)
            .into_iter()
            .nth(1)
            .filter(|m| m.edited)
    })
    .await;
    bot.wait_recorded(&after).await;
    assert_eq!(after.message_id, before.message_id);
    assert_eq!(after.text, "Approved, running.");
    assert!(after.previews_off, "edited with link previews on");
    assert_eq!(bot.fake.sent_to(8007).len(), 2, "edited in place");
    let query = bot
        .fake
        .tap(8007, after.message_id, &old_data)
        .expect("tap");
    eventually("answered", || bot.fake.answered(&query).filter(|a| *a)).await;
    let new_data = after.buttons[0][0].1.clone();
    bot.fake
        .tap(8007, after.message_id, &new_data)
        .expect("tap");
    match next_delivery(&mut ws, &mut session).await {
        Delivery::Tap { button, .. } => assert_eq!(button, "stop"),
        other => panic!("expected the new button's tap, got {other:?}"),
    }
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn an_edit_of_a_message_another_server_sent_changes_nothing(db: PgPool) {
    let bot = start_bot(db, false).await;
    let (_a, mut ws_a, mut session_a, _) = paired(&bot, 8008).await;
    let (_b, mut ws_b, mut session_b, _) = paired(&bot, 8009).await;
    let a_message = send(&mut ws_a, &mut session_a, "A's message", vec![]).await;
    let original = sent(&bot, 8008, 1).await;
    session_b
        .send(
            &mut ws_b,
            &Body::Edit {
                id: Uuid::new_v4(),
                message: a_message,
                text: "B was here".into(),
                buttons: vec![],
            },
        )
        .await
        .expect("edit");
    bot.wait_metric("edit_of_unknown_message", 1).await;
    let now = sent(&bot, 8008, 1).await;
    assert_eq!(now, original);
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_429_is_waited_out_for_its_retry_after(db: PgPool) {
    let bot = start_bot(db, false).await;
    let (_server, mut ws, mut session, _) = paired(&bot, 8010).await;
    // For sendMessage itself: a 429 another call took first (a poll, an
    // answer) would leave nothing to wait out.
    bot.fake
        .inject_for("sendMessage", Injected::TooManyRequests { retry_after: 2 });
    let asked = Instant::now();
    send(&mut ws, &mut session, "after the wait", vec![]).await;
    let shown = sent(&bot, 8010, 1).await;
    assert_eq!(shown.text, "after the wait");
    // Not a timing measurement: Telegram said two seconds, and the relay
    // may not send before they are over.
    assert!(asked.elapsed() >= Duration::from_secs(2));
    bot.wait_metric("message_delivered", 1).await;
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn the_approval_key_file_the_operator_names_signs_the_taps(db: PgPool) {
    let keys = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../keys/test");
    let (_fake, fake_addr) = support::bot::fake().await;
    let api = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let mut telegram =
        support::bot::telegram_config(fake_addr, api.local_addr().expect("addr"), false);
    telegram.approval_key_file = Some(keys.join("relay-approvals.key"));
    let mut c = support::config();
    c.telegram = Some(telegram);
    let relay = support::start_on(db.clone(), c, api).await;
    let bot = Bot {
        relay,
        db,
        fake: _fake,
        fake_addr,
    };
    let (_server, _ws, _session, key) = paired(&bot, 8011).await;
    let public = std::fs::read_to_string(keys.join("relay-approvals.pub")).expect("the key");
    assert_eq!(key, public.trim().lines().last().unwrap_or_default());
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn the_key_made_at_the_first_start_is_kept_across_restarts(db: PgPool) {
    let first = start_bot(db.clone(), false).await;
    let (_s1, _ws1, _session1, key1) = paired(&first, 8012).await;
    first.relay.stop().await;
    let second = start_bot(db.clone(), false).await;
    let (_s2, _ws2, _session2, key2) = paired(&second, 8013).await;
    assert_eq!(key1, key2);
    let kept: i64 = sqlx::query_scalar("SELECT count(*) FROM relay_keys")
        .fetch_one(&db)
        .await
        .expect("count");
    assert_eq!(kept, 1);
    second.relay.stop().await;
}
