//! Attacks on the Mini App's route at a real relay: a paired person (any
//! tenant: anyone may register a server and pair it) with a server that
//! never answers, junk and oversized bodies, sealed PINs of every shape
//! but the page's, answers from a hostile server (huge, malformed, control
//! characters), on a fresh database, the fake Bot API signing launches as
//! Telegram does.
//!
//! Each test is named for its attack. One tenant holding every place a
//! page may wait in was a break the attack round found (now a bound per
//! server).

use aromba_testkit::relay as support;
use aromba_testkit::telegram::{Person, launch};

use aromba_relay_proto::frame::{AppAnswer, AppAnswerKind, AppSection, Body, Delivery};
use sqlx::PgPool;
use std::time::Duration;
use support::bot::{BOT_TOKEN, next_delivery, paired, post_ask, start_bot, start_bot_with};

fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("now")
        .as_secs()
}

fn launch_of(chat: i64) -> String {
    launch(
        &aromba_testkit::telegram::test_key(),
        BOT_TOKEN,
        &Person::new(chat, "P"),
        Some("abc"),
        now_s(),
    )
}

async fn ask_from(
    client: &reqwest::Client,
    addr: std::net::SocketAddr,
    from: &str,
    launch: &str,
) -> (u16, serde_json::Value) {
    let r = client
        .post(format!("http://{addr}/app/v1/ask"))
        .header("x-forwarded-for", from)
        .json(&serde_json::json!({"launch": launch, "ask": "view"}))
        .send()
        .await
        .expect("an answer");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(serde_json::Value::Null))
}

#[sqlx::test(migrations = false)]
async fn one_tenant_with_a_silent_server_cannot_lock_every_other_tenant_out_of_the_app(db: PgPool) {
    // The attacker pairs a server of its own, lets it say nothing, and
    // opens its own app from ~50 addresses, each within the per-address
    // bound (30 at once): every ask waits 20 s for an answer that never
    // comes, in the one table of waiting pages every tenant shares.
    let bot = start_bot_with(db, false, support::behind_proxy()).await;
    let (_attacker, attacker_ws, _attacker_session, _) = paired(&bot, 77).await;
    drop(attacker_ws);
    let (_victim, mut victim_ws, mut victim_session, _) = paired(&bot, 88).await;
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let attacker_launch = launch_of(77);
    let addr = bot.relay.addr;
    let mut waiting = tokio::task::JoinSet::new();
    let total = aromba_relay::mini_app::answers::MAX_WAITING + 16;
    for i in 0..total {
        let (client, l) = (client.clone(), attacker_launch.clone());
        let from = format!("198.51.{}.{}", 100 + i / 20 / 250, (i / 20) % 250 + 1);
        waiting.spawn(async move { ask_from(&client, addr, &from, &l).await.0 });
    }
    // Wait until the attacker's asks are all in (forwarded or refused).
    for _ in 0..400 {
        let n = bot.metric("app_ask_forwarded").await + bot.metric("app_ask_too_many").await;
        if n as usize >= total {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let forwarded = bot.metric("app_ask_forwarded").await;
    eprintln!("the attacker has {forwarded} pages waiting");
    // The victim, a paired person, opens the app now from its own address.
    let answering = tokio::spawn(async move {
        loop {
            if let Delivery::App { request, .. } =
                next_delivery(&mut victim_ws, &mut victim_session).await
            {
                victim_session
                    .send(
                        &mut victim_ws,
                        &Body::AppAnswer {
                            request,
                            answer: AppAnswer {
                                kind: AppAnswerKind::Proposal,
                                text: "Run wipe?".into(),
                                sections: Vec::new(),
                            },
                        },
                    )
                    .await
                    .expect("sent");
                return;
            }
        }
    });
    let (status, body) = ask_from(&client, addr, "203.0.113.9", &launch_of(88)).await;
    answering.abort();
    waiting.abort_all();
    assert_eq!(
        status, 200,
        "another tenant's ask crowded this paired person out: {status} {body}"
    );
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn an_oversized_or_junk_ask_body_is_refused_and_reaches_no_server(db: PgPool) {
    let bot = start_bot(db, false).await;
    let (_server, mut ws, mut session, _) = paired(&bot, 77).await;
    let good = launch_of(77);
    let huge = format!("{}&x={}", good, "a".repeat(10_000));
    let with_control = format!("{good}\u{7}");
    for body in [
        serde_json::json!({"launch": huge, "ask": "view"}).to_string(),
        serde_json::json!({"launch": good, "ask": "view", "extra": 1}).to_string(),
        serde_json::json!({"launch": good, "ask": "approve_all"}).to_string(),
        serde_json::json!({"launch": with_control, "ask": "view"}).to_string(),
        format!(
            "{{\"launch\": \"{good}\", \"ask\": \"view\"}}{}",
            " ".repeat(20_000)
        ),
    ] {
        let (status, _) = post_ask(bot.relay.addr, body.clone()).await;
        assert!(
            (400..500).contains(&status),
            "{status}: {}",
            &body[..body.len().min(80)]
        );
    }
    support::bot::no_delivery(&mut ws, &mut session, Duration::from_millis(500)).await;
    bot.relay.stop().await;
}

/// A hostile server answers its own page: it may say anything in plain
/// words, but not bytes that pretend to be something else, nor more than
/// an answer holds. Such an answer is refused (the server's connection
/// ends) and the page is told at once, in the relay's words, that the
/// answer could not be shown — found by a review: it waited the 20 s of a
/// server that never answered, then said the server was silent. (A frame
/// past the frame bound is refused before its request can be read: that
/// page still waits its 20 s.)
#[sqlx::test(migrations = false)]
async fn a_server_answering_with_control_characters_or_too_much_is_refused_and_the_page_told(
    db: PgPool,
) {
    let bot = start_bot(db, false).await;
    let (server, ws, session, _) = paired(&bot, 77).await;
    drop((ws, session));
    let said = |text: &str| AppAnswer::said(AppAnswerKind::Proposal, text);
    let answers = [
        said("Approve\u{1b}[2J everything"),
        // Past an answer's text, within a frame.
        said(&"x".repeat(5_000)),
        said("line\u{0}nul"),
        // A page of more lines than a section holds.
        AppAnswer {
            kind: AppAnswerKind::Page,
            text: "All is well.".into(),
            sections: vec![AppSection {
                heading: "Ladder".into(),
                lines: vec!["a".into(); 600],
                verbatim: false,
                undo: None,
            }],
        },
    ];
    let n = answers.len() as u64;
    for answer in answers {
        let (mut ws, mut session) = support::connect(&bot.relay, &server).await;
        let page = {
            let addr = bot.relay.addr;
            let l = launch_of(77);
            tokio::spawn(async move {
                let client = reqwest::Client::new();
                ask_from(&client, addr, "127.0.0.1", &l).await
            })
        };
        let request = loop {
            if let Delivery::App { request, .. } = next_delivery(&mut ws, &mut session).await {
                break request;
            }
        };
        session
            .send(&mut ws, &Body::AppAnswer { request, answer })
            .await
            .expect("sent");
        let (status, body) = page.await.expect("the page");
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["kind"], "closed", "{body}");
        assert_eq!(
            body["text"],
            aromba_relay::telegram::words::APP_ANSWER_UNREADABLE,
            "{body}"
        );
        assert_eq!(support::closed_with(&mut ws).await, 1008);
    }
    assert_eq!(bot.metric("app_answer_unreadable").await, n);
    assert_eq!(bot.metric("app_ask_unanswered").await, 0);
    bot.relay.stop().await;
}

// ---- Attack round: the sealed PIN at the relay. ----

/// A sealed PIN of the page's shape (base64url, no padding).
const SEALED: &str =
    "hSDwCYkwp1R0i33ctD73Wg2_Og0mOBr066SpjqqbTmoAAQIDBAUGBwgJCgtPCI9tb5NCvjPcnC096s2UmxSKNC20";

#[sqlx::test(migrations = false)]
async fn a_sealed_pin_of_another_json_shape_reaches_no_server_and_is_never_echoed(db: PgPool) {
    let bot = start_bot(db, false).await;
    let (_server, mut ws, mut session, _) = paired(&bot, 77).await;
    let good = launch_of(77);
    let marker = "MARKERsealedPIN";
    let bodies = [
        serde_json::json!({"launch": good, "ask": "approve", "sealed_pin": 123456}).to_string(),
        serde_json::json!({"launch": good, "ask": "approve", "sealed_pin": [marker]}).to_string(),
        serde_json::json!({"launch": good, "ask": "approve", "sealed_pin": {"pin": marker}})
            .to_string(),
        serde_json::json!({"launch": good, "ask": "approve", "sealed_pin": ""}).to_string(),
        serde_json::json!({"launch": good, "ask": "approve", "sealed_pin": format!("{marker}=")})
            .to_string(),
        serde_json::json!({"launch": good, "ask": "approve", "sealed_pin": format!("{marker}\u{0}")})
            .to_string(),
        serde_json::json!({"launch": good, "ask": "approve", "sealed_pin": format!("{marker}\n")})
            .to_string(),
        serde_json::json!({"launch": good, "ask": "approve", "sealed_pin": format!("{marker}é")})
            .to_string(),
        serde_json::json!({"launch": good, "ask": "approve", "sealed_pin": format!("{marker} ")})
            .to_string(),
        serde_json::json!({"launch": good, "ask": "view", "sealed_pin": marker}).to_string(),
        serde_json::json!({"launch": good, "ask": "approve", "sealed_pin": format!("{marker}{}", "A".repeat(512))})
            .to_string(),
        // The field twice: the second would be what a lenient reader takes.
        format!(
            "{{\"launch\": \"{good}\", \"ask\": \"approve\", \"sealed_pin\": \"{SEALED}\", \"sealed_pin\": \"{marker}!\"}}"
        ),
        // A JSON escape that decodes to a character outside the shape.
        format!(
            "{{\"launch\": \"{good}\", \"ask\": \"approve\", \"sealed_pin\": \"{marker}\\u002f\"}}"
        ),
    ];
    for body in bodies {
        let (status, text) = post_ask(bot.relay.addr, body.clone()).await;
        assert_eq!(
            status,
            400,
            "{}: {text}",
            &body[body.len().saturating_sub(80)..]
        );
        assert!(
            !text.contains(marker),
            "the refusal echoes the seal: {text}"
        );
    }
    support::bot::no_delivery(&mut ws, &mut session, Duration::from_millis(500)).await;
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_sealed_pin_of_the_longest_shape_passes_untouched_and_is_not_kept_once_delivered(
    db: PgPool,
) {
    let bot = start_bot(db, false).await;
    let (_server, mut ws, mut session, _) = paired(&bot, 77).await;
    let longest = format!(
        "{}{}",
        SEALED,
        "_-".repeat((aromba_relay_proto::frame::MAX_SEALED_PIN - SEALED.len()) / 2)
    );
    assert_eq!(longest.len(), aromba_relay_proto::frame::MAX_SEALED_PIN);
    let page = {
        let addr = bot.relay.addr;
        let (l, s) = (launch_of(77), longest.clone());
        tokio::spawn(async move {
            let body = serde_json::json!({"launch": l, "ask": "approve", "sealed_pin": s});
            post_ask(addr, body.to_string()).await.0
        })
    };
    let request = loop {
        if let Delivery::App {
            request,
            sealed_pin,
            ..
        } = next_delivery(&mut ws, &mut session).await
        {
            assert_eq!(sealed_pin.as_deref(), Some(longest.as_str()));
            break request;
        }
    };
    session
        .send(
            &mut ws,
            &Body::AppAnswer {
                request,
                answer: AppAnswer {
                    kind: AppAnswerKind::Outcome,
                    text: "Sent to your server.".into(),
                    sections: Vec::new(),
                },
            },
        )
        .await
        .expect("sent");
    assert_eq!(page.await.expect("the page"), 200);
    // Acknowledged: the relay keeps no copy of the sealed bytes.
    let mut kept = -1i64;
    for _ in 0..80 {
        kept = sqlx::query_scalar(
            "SELECT (SELECT count(*) FROM outbox WHERE delivery::text LIKE '%' || $1 || '%')
                  + (SELECT count(*) FROM chat_outbox WHERE body::text LIKE '%' || $1 || '%')",
        )
        .bind(&SEALED[..40])
        .fetch_one(&bot.db)
        .await
        .expect("a count");
        if kept == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(kept, 0, "the sealed PIN is still in the relay's tables");
    bot.relay.stop().await;
}
