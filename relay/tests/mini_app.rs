//! The Mini App at the relay: its page served with a strict policy, and
//! its one route — a launch the bot token's HMAC refuses, an account that
//! is not paired, an ask that reaches the paired server as an `app`
//! delivery with the launch untouched and whose answer comes back, and an
//! answer from another server that never reaches the page. A real relay on
//! a fresh database, the fake Bot API signing launches as Telegram does.

use aromba_testkit::relay as support;
use aromba_testkit::telegram::{Person, launch};

use aromba_relay_proto::frame::{AppAnswer, AppAnswerKind, AppAsk, Body, Delivery};
use sqlx::PgPool;
use std::time::Duration;
use support::bot::{BOT_TOKEN, next_delivery, paired, post_ask, start_bot};

/// A sealed PIN's shape (the relay cannot open one, and checks only that).
const SEALED: &str =
    "hSDwCYkwp1R0i33ctD73Wg2_Og0mOBr066SpjqqbTmoAAQIDBAUGBwgJCgtPCI9tb5NCvjPcnC096s2UmxSKNC20";

fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("now")
        .as_secs()
}

fn launch_of(chat: i64, token: &str) -> String {
    launch(
        &aromba_testkit::telegram::test_key(),
        token,
        &Person::new(chat, "P"),
        Some("abc"),
        now_s(),
    )
}

#[sqlx::test(migrations = false)]
async fn the_page_loads_nothing_from_anyone_else_and_frames_only_for_telegram(db: PgPool) {
    let bot = start_bot(db, false).await;
    for path in ["/app/", "/app/app.js", "/app/seal.js", "/app/app.css"] {
        let r = reqwest::get(format!("http://{}{path}", bot.relay.addr))
            .await
            .expect("the page");
        assert_eq!(r.status(), 200, "{path}");
        let policy = r
            .headers()
            .get("content-security-policy")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        assert!(
            policy.starts_with("default-src 'none'; script-src 'self';"),
            "{policy}"
        );
        assert!(
            policy.contains("frame-ancestors https://web.telegram.org"),
            "{policy}"
        );
        assert!(!policy.contains("unsafe"), "{policy}");
        let body = r.text().await.expect("a body");
        assert!(
            !body.contains("telegram-web-app.js"),
            "no third-party script"
        );
    }
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_launch_without_the_bot_tokens_hmac_or_of_a_stranger_reaches_no_server(db: PgPool) {
    let bot = start_bot(db, false).await;
    let (_server, mut ws, mut session, _) = paired(&bot, 77).await;
    // Made with another bot's token: junk to this relay.
    let other = launch_of(77, "999999:OTHER-token-not-a-secret-0123456789ab");
    let r = bot.ask_app(&other, "view").await;
    assert_eq!(r.status, 401, "{r:?}");
    assert!(
        r.text()
            .starts_with("This page was not opened from Telegram"),
        "{r:?}"
    );
    // Anyone may open the bot's app: a stranger's launch finds no server.
    let stranger = bot.ask_app(&launch_of(78, BOT_TOKEN), "view").await;
    assert_eq!(stranger.status, 404, "{stranger:?}");
    assert!(stranger.text().contains("not paired"), "{stranger:?}");
    let bad_seals = [
        // A seal with a view, a seal of another alphabet, one too long.
        serde_json::json!({"launch": launch_of(77, BOT_TOKEN), "ask": "view", "sealed_pin": SEALED}),
        serde_json::json!({"launch": launch_of(77, BOT_TOKEN), "ask": "approve", "sealed_pin": "a+b/c="}),
        serde_json::json!({"launch": launch_of(77, BOT_TOKEN), "ask": "approve", "sealed_pin": "A".repeat(513)}),
    ];
    for bad in bad_seals {
        let (status, said) = post_ask(bot.relay.addr, bad.to_string()).await;
        assert_eq!(status, 400, "{bad}");
        assert!(said.contains("did not come sealed"), "{said}");
    }
    for junk in ["", "{}", r#"{"launch": "x", "ask": "run"}"#, "not json"] {
        let (status, _) = post_ask(bot.relay.addr, junk.to_string()).await;
        assert_eq!(status, 400, "{junk:?}");
    }
    support::bot::no_delivery(&mut ws, &mut session, Duration::from_millis(500)).await;
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn an_ask_reaches_the_paired_server_untouched_and_its_answer_comes_back(db: PgPool) {
    let bot = start_bot(db, false).await;
    let (_server, mut ws, mut session, _) = paired(&bot, 77).await;
    let given = launch_of(77, BOT_TOKEN);
    let page = {
        let bot_addr = bot.relay.addr;
        let given = given.clone();
        tokio::spawn(async move {
            let body = serde_json::json!({"launch": given, "ask": "approve", "sealed_pin": SEALED});
            let (_, text) = post_ask(bot_addr, body.to_string()).await;
            serde_json::from_str::<serde_json::Value>(&text).expect("JSON")
        })
    };
    let request = loop {
        if let Delivery::App {
            request,
            ask,
            launch,
            sealed_pin,
            undo,
        } = next_delivery(&mut ws, &mut session).await
        {
            assert_eq!(ask, AppAsk::Approve);
            assert_eq!(launch, given, "the launch passes untouched");
            assert_eq!(undo, None);
            assert_eq!(
                sealed_pin.as_deref(),
                Some(SEALED),
                "so does the sealed PIN"
            );
            break request;
        }
    };
    let answer = AppAnswer {
        kind: AppAnswerKind::Outcome,
        text: "Sent to your server.".into(),
        sections: Vec::new(),
    };
    session
        .send(&mut ws, &Body::AppAnswer { request, answer })
        .await
        .expect("sent");
    let got = page.await.expect("the page's request");
    assert_eq!(got["kind"], "outcome");
    assert_eq!(got["text"], "Sent to your server.");
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn another_servers_answer_never_reaches_the_page(db: PgPool) {
    let bot = start_bot(db, false).await;
    let (_server, mut ws, mut session, _) = paired(&bot, 77).await;
    let (_other, mut other_ws, mut other_session, _) = paired(&bot, 88).await;
    let given = launch_of(77, BOT_TOKEN);
    let page = {
        let bot_addr = bot.relay.addr;
        tokio::spawn(async move {
            let body = serde_json::json!({"launch": given, "ask": "view"});
            post_ask(bot_addr, body.to_string()).await.0
        })
    };
    let request = loop {
        if let Delivery::App { request, .. } = next_delivery(&mut ws, &mut session).await {
            break request;
        }
    };
    // The other server learns the request id (a guess, or a leak) and
    // answers first: its answer is not the page's.
    let forged = AppAnswer {
        kind: AppAnswerKind::Proposal,
        text: "Approve everything?".into(),
        sections: Vec::new(),
    };
    other_session
        .send(
            &mut other_ws,
            &Body::AppAnswer {
                request,
                answer: forged,
            },
        )
        .await
        .expect("sent");
    let status = page.await.expect("the page's request");
    assert_eq!(status, 504, "the page waited for its own server, in vain");
    bot.relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn the_trust_page_and_its_undo_link_reach_the_server_and_its_sections_come_back(db: PgPool) {
    use aromba_relay_proto::frame::AppSection;
    let bot = start_bot(db, false).await;
    let (_server, mut ws, mut session, _) = paired(&bot, 77).await;
    let given = launch_of(77, BOT_TOKEN);
    let undo_id = "0123456789abcdef0123456789abcdef";
    // An Undo link must name its run, and only an Undo names one.
    let bad_undos = [
        serde_json::json!({"launch": given, "ask": "undo"}),
        serde_json::json!({"launch": given, "ask": "undo", "undo": "0123"}),
        serde_json::json!({"launch": given, "ask": "undo", "undo": undo_id.to_uppercase()}),
        serde_json::json!({"launch": given, "ask": "trust", "undo": undo_id}),
        serde_json::json!({"launch": given, "ask": "approve", "undo": undo_id}),
    ];
    for bad in bad_undos {
        let (status, said) = post_ask(bot.relay.addr, bad.to_string()).await;
        assert_eq!(status, 400, "{bad}");
        assert!(said.contains("does not name a run"), "{said}");
    }
    support::bot::no_delivery(&mut ws, &mut session, Duration::from_millis(300)).await;

    let page = {
        let (bot_addr, given) = (bot.relay.addr, given.clone());
        tokio::spawn(async move {
            let body = serde_json::json!({"launch": given, "ask": "trust"});
            let (_, text) = post_ask(bot_addr, body.to_string()).await;
            serde_json::from_str::<serde_json::Value>(&text).expect("JSON")
        })
    };
    let request = loop {
        if let Delivery::App {
            request, ask, undo, ..
        } = next_delivery(&mut ws, &mut session).await
        {
            assert_eq!((ask, undo), (AppAsk::Trust, None));
            break request;
        }
    };
    // A page near the largest an answer may be: it comes back whole.
    let policy: Vec<String> = (0..300)
        .map(|i| format!("# line {i} of the policy"))
        .collect();
    let answer = AppAnswer {
        kind: AppAnswerKind::Page,
        text: "All good: I'm working normally.".into(),
        sections: vec![
            AppSection {
                heading: "Policy".into(),
                lines: policy.clone(),
                verbatim: true,
                undo: None,
            },
            AppSection {
                heading: "Undo: clean-tmp".into(),
                lines: vec!["This run can be undone until 2026-12-13 10:00.".into()],
                verbatim: false,
                undo: Some(undo_id.into()),
            },
        ],
    };
    answer.check().expect("a page within the bound");
    session
        .send(&mut ws, &Body::AppAnswer { request, answer })
        .await
        .expect("sent");
    let got = page.await.expect("the page's request");
    assert_eq!(got["kind"], "page");
    assert_eq!(
        got["sections"][0]["lines"].as_array().map(Vec::len),
        Some(300)
    );
    assert_eq!(got["sections"][0]["verbatim"], true);
    assert_eq!(got["sections"][1]["undo"], undo_id);

    let link = {
        let (bot_addr, given) = (bot.relay.addr, given.clone());
        tokio::spawn(async move {
            let body = serde_json::json!({"launch": given, "ask": "undo", "undo": undo_id});
            post_ask(bot_addr, body.to_string()).await.0
        })
    };
    let request = loop {
        if let Delivery::App {
            request, ask, undo, ..
        } = next_delivery(&mut ws, &mut session).await
        {
            assert_eq!((ask, undo.as_deref()), (AppAsk::Undo, Some(undo_id)));
            break request;
        }
    };
    let answer = AppAnswer::said(AppAnswerKind::Outcome, "Proposed in your chat.");
    session
        .send(&mut ws, &Body::AppAnswer { request, answer })
        .await
        .expect("sent");
    assert_eq!(link.await.expect("the link's request"), 200);
    bot.relay.stop().await;
}
