//! Attacks on the Trust page at the relay (a real relay on a fresh
//! database, the fake Bot API signing launches as Telegram does, a fake
//! Worker on the server's side of the link):
//! - a stranger, a launch of another chat or another bot's token asking
//!   `trust`, `policy` or `undo`: no server hears of it;
//! - a hostile Worker answering the Trust page with what `AppAnswer::check`
//!   refuses (too many sections, a control character in a line or a
//!   heading, a heading too long, an undo id of another shape, more than
//!   20 KiB): the page never gets it;
//! - a hostile Worker answering with HTML and script in headings and lines:
//!   the relay carries them as JSON strings only (the page shows text).

use aromba_testkit::relay as support;
use aromba_testkit::telegram::{Person, launch};

use aromba_relay_proto::client::{Session, Socket};
use aromba_relay_proto::frame::{AppAnswer, AppAnswerKind, AppSection, Body, Delivery};
use sqlx::PgPool;
use std::time::Duration;
use support::bot::{BOT_TOKEN, next_delivery, paired, post_ask, start_bot};

fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("now")
        .as_secs()
}

fn trust_launch(chat: i64, token: &str) -> String {
    launch(
        &aromba_testkit::telegram::test_key(),
        token,
        &Person::new(chat, "P"),
        Some("trust"),
        now_s(),
    )
}

const UNDO_ID: &str = "0123456789abcdef0123456789abcdef";

fn section(heading: &str, lines: Vec<String>) -> AppSection {
    AppSection {
        heading: heading.into(),
        lines,
        verbatim: false,
        undo: None,
    }
}

fn page(sections: Vec<AppSection>) -> AppAnswer {
    AppAnswer {
        kind: AppAnswerKind::Page,
        text: "All good.".into(),
        sections,
    }
}

#[sqlx::test(migrations = false)]
async fn a_stranger_another_chat_or_another_bot_asks_the_trust_page_of_no_server(db: PgPool) {
    let bot = start_bot(db, false).await;
    let (_server, mut ws, mut session, _) = paired(&bot, 77).await;
    let asks = |launch: String| {
        [
            serde_json::json!({"launch": launch, "ask": "trust"}),
            serde_json::json!({"launch": launch, "ask": "policy"}),
            serde_json::json!({"launch": launch, "ask": "undo", "undo": UNDO_ID}),
        ]
    };
    for launch in [
        trust_launch(78, BOT_TOKEN),
        trust_launch(77, "999999:OTHER-token-not-a-secret-0123456789ab"),
        trust_launch(77, BOT_TOKEN).replace("start_param=trust", "start_param=trusT"),
        String::from("start_param=trust&user=%7B%22id%22%3A77%7D"),
    ] {
        for body in asks(launch) {
            let (status, _) = post_ask(bot.relay.addr, body.to_string()).await;
            assert!((400..500).contains(&status), "{status}: {body}");
        }
    }
    support::bot::no_delivery(&mut ws, &mut session, Duration::from_millis(500)).await;
    bot.relay.stop().await;
}

/// Asks `trust` with chat 77's launch; the fake Worker answers `answer`;
/// what the page got.
async fn answered_with(
    bot: &support::bot::Bot,
    ws: &mut Socket,
    session: &mut Session,
    answer: AppAnswer,
) -> (u16, serde_json::Value) {
    let page = {
        let addr = bot.relay.addr;
        tokio::spawn(async move {
            let body = serde_json::json!({"launch": trust_launch(77, BOT_TOKEN), "ask": "trust"});
            let (status, text) = post_ask(addr, body.to_string()).await;
            (status, serde_json::from_str(&text).unwrap_or_default())
        })
    };
    let request = loop {
        if let Delivery::App { request, .. } = next_delivery(ws, session).await {
            break request;
        }
    };
    let _ = session.send(ws, &Body::AppAnswer { request, answer }).await;
    page.await.expect("the page")
}

#[sqlx::test(migrations = false)]
async fn a_hostile_workers_page_out_of_shape_never_reaches_the_page(db: PgPool) {
    let bot = start_bot(db, false).await;
    let (server, ws, session, _) = paired(&bot, 77).await;
    let bad = [
        ("33 sections", page(vec![section("A", vec![]); 33])),
        (
            "an escape in a line",
            page(vec![section(
                "A",
                vec!["ok\u{1b}]8;;https://evil\u{7}".into()],
            )]),
        ),
        (
            "a newline in a heading",
            page(vec![section("Approve\nApprove", vec![])]),
        ),
        (
            "a heading of 81",
            page(vec![section(&"h".repeat(81), vec![])]),
        ),
        (
            "an undo id of another shape",
            page(vec![AppSection {
                undo: Some("../../etc/shadow".into()),
                ..section("Undo: wipe", vec![])
            }]),
        ),
        (
            "more than 20 KiB",
            page(vec![section("A", vec!["x".repeat(4096); 5])]),
        ),
        ("513 lines", page(vec![section("A", vec!["x".into(); 513])])),
    ];
    for (what, answer) in &bad {
        assert!(answer.check().is_err(), "{what}");
    }
    // Over the wire each one is refused, its link closed, and the page
    // told at once in the relay's words (nothing of the Worker's).
    let (mut ws_now, mut session_now) = (ws, session);
    for (what, answer) in bad {
        let (status, got) = answered_with(&bot, &mut ws_now, &mut session_now, answer).await;
        assert_eq!(status, 200, "{what}: {got}");
        assert_eq!(got["kind"], "closed", "{what}: {got}");
        assert_eq!(
            got["text"],
            aromba_relay::telegram::words::APP_ANSWER_UNREADABLE,
            "{what} reached the page: {got}"
        );
        assert!(got.get("sections").is_none(), "{what}: {got}");
        assert_eq!(support::closed_with(&mut ws_now).await, 1008, "{what}");
        let (w, s) = support::connect(&bot.relay, &server).await;
        (ws_now, session_now) = (w, s);
    }
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_hostile_workers_markup_is_carried_as_text_only(db: PgPool) {
    let bot = start_bot(db, false).await;
    let (_server, mut ws, mut session, _) = paired(&bot, 77).await;
    let script = "<img src=x onerror=alert(1)><script>alert(2)</script>";
    let answer = page(vec![
        AppSection {
            verbatim: true,
            ..section("<b>Policy</b>", vec![script.into()])
        },
        AppSection {
            undo: Some(UNDO_ID.into()),
            ..section(
                "Undo: <a href=javascript:alert(3)>x</a>",
                vec![script.into()],
            )
        },
    ]);
    answer.check().expect("markup is plain text to the check");
    let (status, got) = answered_with(&bot, &mut ws, &mut session, answer).await;
    assert_eq!(status, 200, "{got}");
    assert_eq!(
        got["sections"][0]["lines"][0], script,
        "carried as a string"
    );
    assert_eq!(got["sections"][1]["undo"], UNDO_ID);
    // The page shows every heading and line with textContent, never as
    // markup (relay/src/mini_app/page/app.js).
    let js = reqwest::get(format!("http://{}/app/app.js", bot.relay.addr))
        .await
        .expect("app.js")
        .text()
        .await
        .expect("its text");
    for sink in [
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
    ] {
        assert!(!js.contains(sink), "app.js uses {sink}");
    }
    bot.relay.stop().await;
}
