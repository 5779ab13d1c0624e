//! The chat page over HTTP: what it shows, what it sends to the bot as
//! Telegram would, and its live stream. (The browser itself is driven in
//! `agent/tests/browser.rs`.)

use aromba_botfake::Fake;
use aromba_botfake::page::Person;
use serde_json::{Value, json};
use std::time::Duration;

const TOKEN: &str = "123456:TEST-token-not-a-secret-0123456789";
const CHAT: i64 = 4242;
/// The page's secret path segment.
const KEY: &str = "page-key-for-tests-0123456789";

struct Page {
    fake: Fake,
    api: String,
    page: String,
    http: reqwest::Client,
}

impl Page {
    async fn start() -> Page {
        let fake = Fake::new(TOKEN, "aromba_test_bot");
        let api = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let api = fake.clone().serve(api).expect("the API");
        let page = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let person = Person {
            chat: CHAT,
            name: "Sam".into(),
            key: KEY.into(),
        };
        let page = fake.clone().serve_page(page, person).expect("the page");
        Page {
            fake,
            api: format!("http://{api}/bot{TOKEN}"),
            page: format!("http://{page}/{KEY}"),
            http: reqwest::Client::new(),
        }
    }

    /// The relay's side: a Bot API call.
    async fn bot(&self, method: &str, params: Value) -> Value {
        let r = self
            .http
            .post(format!("{}/{method}", self.api))
            .json(&params)
            .send()
            .await
            .expect("the Bot API answers");
        r.json().await.expect("JSON")
    }

    async fn chat(&self) -> Value {
        self.http
            .get(format!("{}/chat.json", self.page))
            .send()
            .await
            .expect("the page answers")
            .json()
            .await
            .expect("JSON")
    }

    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let r = self
            .http
            .post(format!("{}/{path}", self.page))
            .json(&body)
            .send()
            .await
            .expect("the page answers");
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// The updates waiting for the bot (as `getUpdates` gives them).
    async fn updates(&self) -> Vec<Value> {
        let got = self.bot("getUpdates", json!({})).await;
        got["result"].as_array().cloned().unwrap_or_default()
    }
}

#[tokio::test]
async fn the_page_and_its_assets_are_served_with_a_content_security_policy() {
    let p = Page::start().await;
    for (path, kind) in [
        ("/", "text/html"),
        ("/chat.css", "text/css"),
        ("/chat.js", "text/javascript"),
    ] {
        let r = p
            .http
            .get(format!("{}{path}", p.page))
            .send()
            .await
            .expect("an answer");
        assert_eq!(r.status(), 200, "{path}");
        let h = r.headers();
        assert!(
            h["content-type"].to_str().unwrap().starts_with(kind),
            "{path}"
        );
        let csp = h["content-security-policy"].to_str().unwrap();
        assert!(csp.contains("default-src 'none'") && csp.contains("script-src 'self'"));
        assert_eq!(h["x-content-type-options"], "nosniff");
    }
    let html = p
        .http
        .get(format!("{}/", p.page))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    // Nothing is fetched from elsewhere: the page works offline.
    assert!(!html.contains("http://") && !html.contains("https://"));
    assert!(
        html.contains("<label for=\"text\""),
        "the field is labelled"
    );
}

#[tokio::test]
async fn a_message_from_the_page_reaches_the_bot_as_telegram_sends_it() {
    let p = Page::start().await;
    let (status, _) = p.post("send", json!({"text": "  /status  "})).await;
    assert_eq!(status, 200);
    let updates = p.updates().await;
    assert_eq!(updates.len(), 1);
    let message = &updates[0]["message"];
    assert_eq!(message["text"], "/status");
    assert_eq!(message["chat"]["id"], CHAT);
    assert_eq!(message["chat"]["type"], "private");
    let chat = p.chat().await;
    assert_eq!(chat["messages"][0]["from"], "person");
    assert_eq!(chat["messages"][0]["text"], "/status");
    // Empty and over-long messages are refused, as Telegram's client does.
    assert_eq!(p.post("send", json!({"text": "   "})).await.0, 400);
    let long = "x".repeat(4097);
    assert_eq!(p.post("send", json!({"text": long})).await.0, 400);
    assert_eq!(p.updates().await.len(), 1);
}

#[tokio::test]
async fn the_conversation_is_shown_in_order_edited_in_place_and_without_deleted_messages() {
    let p = Page::start().await;
    p.post("send", json!({"text": "/start"})).await;
    let first = p
        .bot("sendMessage", json!({"chat_id": CHAT, "text": "Hello"}))
        .await;
    let second = p
        .bot(
            "sendMessage",
            json!({"chat_id": CHAT, "text": "Disk:\n/ 40%", "entities": [{"type": "pre", "offset": 6, "length": 5}]}),
        )
        .await;
    let first_id = first["result"]["message_id"].as_i64().unwrap();
    let second_id = second["result"]["message_id"].as_i64().unwrap();
    p.bot(
        "editMessageText",
        json!({"chat_id": CHAT, "message_id": second_id, "text": "Disk:\n/ 41%"}),
    )
    .await;
    p.bot(
        "deleteMessage",
        json!({"chat_id": CHAT, "message_id": first_id}),
    )
    .await;
    let chat = p.chat().await;
    let messages = chat["messages"].as_array().unwrap();
    let texts: Vec<&str> = messages
        .iter()
        .map(|m| m["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["/start", "Disk:\n/ 41%"]);
    assert_eq!(messages[1]["edited"], true);
    assert_eq!(messages[1]["monospace"], json!([[6, 5]]));
}

#[tokio::test]
async fn a_tap_on_an_offered_button_is_a_callback_query_and_its_answer_is_shown() {
    let p = Page::start().await;
    p.post("send", json!({"text": "/run tidy"})).await;
    p.updates().await;
    let sent = p
        .bot(
            "sendMessage",
            json!({"chat_id": CHAT, "text": "Run it?", "reply_markup": {"inline_keyboard": [[
                {"text": "Approve", "callback_data": "yes-123"},
                {"text": "Cancel", "callback_data": "no-123"}
            ]]}}),
        )
        .await;
    let id = sent["result"]["message_id"].as_i64().unwrap();
    let chat = p.chat().await;
    assert_eq!(chat["messages"][1]["buttons"][0][0]["text"], "Approve");

    let (status, tapped) = p
        .post("tap", json!({"message_id": id, "data": "yes-123"}))
        .await;
    assert_eq!(status, 200);
    let query = tapped["query"].as_str().unwrap().to_string();
    let updates = p.updates().await;
    let offset = updates.last().unwrap()["update_id"].as_i64().unwrap() + 1;
    let callback = &updates.last().unwrap()["callback_query"];
    assert_eq!(callback["data"], "yes-123");
    assert_eq!(callback["message"]["message_id"], id);
    assert_eq!(p.chat().await["taps"][0]["answered"], false);
    p.bot(
        "answerCallbackQuery",
        json!({"callback_query_id": query, "text": "expired"}),
    )
    .await;
    let taps = p.chat().await["taps"].clone();
    assert_eq!(taps[0]["answered"], true);
    assert_eq!(taps[0]["answer"], "expired");
    assert_eq!(taps[0]["alert"], false);

    // A button the message does not have is not tapped.
    let (status, _) = p
        .post("tap", json!({"message_id": id, "data": "yes-999"}))
        .await;
    assert_eq!(status, 404);
    let later = p.bot("getUpdates", json!({"offset": offset})).await;
    assert_eq!(later["result"], json!([]));
}

#[tokio::test]
async fn the_menu_is_the_narrowest_scope_the_bot_set() {
    let p = Page::start().await;
    p.bot(
        "setMyCommands",
        json!({"commands": [{"command": "help", "description": "Help"}]}),
    )
    .await;
    assert_eq!(p.chat().await["commands"][0]["command"], "help");
    p.bot(
        "setMyCommands",
        json!({"commands": [{"command": "status", "description": "How it is"}],
               "scope": {"type": "chat", "chat_id": CHAT}}),
    )
    .await;
    let commands = p.chat().await["commands"].clone();
    assert_eq!(
        commands,
        json!([{"command": "status", "description": "How it is"}])
    );
}

/// Reads the stream until one whole `chat` event arrives; returns its data.
async fn next_event(response: &mut reqwest::Response, buffer: &mut String) -> Value {
    loop {
        if let Some(end) = buffer.find("\n\n") {
            let event: String = buffer.drain(..end + 2).collect();
            if let Some(data) = event
                .lines()
                .find_map(|l| l.strip_prefix("data:"))
                .filter(|_| event.contains("event: chat") || event.contains("event:chat"))
            {
                return serde_json::from_str(data.trim()).expect("the event's JSON");
            }
            continue;
        }
        let chunk = tokio::time::timeout(Duration::from_secs(10), response.chunk())
            .await
            .expect("an event within 10 s")
            .expect("the stream")
            .expect("the stream goes on");
        buffer.push_str(std::str::from_utf8(&chunk).expect("UTF-8"));
    }
}

#[tokio::test]
async fn the_event_stream_sends_the_chat_and_then_every_change() {
    let p = Page::start().await;
    let mut stream = p
        .http
        .get(format!("{}/events", p.page))
        .send()
        .await
        .expect("the stream");
    assert_eq!(stream.headers()["content-type"], "text/event-stream");
    let mut buffer = String::new();
    let first = next_event(&mut stream, &mut buffer).await;
    assert_eq!(first["messages"], json!([]));
    p.post("send", json!({"text": "/help"})).await;
    let second = next_event(&mut stream, &mut buffer).await;
    assert_eq!(second["messages"][0]["text"], "/help");
    p.bot(
        "sendMessage",
        json!({"chat_id": CHAT, "text": "What I can do:"}),
    )
    .await;
    let third = next_event(&mut stream, &mut buffer).await;
    assert_eq!(third["messages"][1]["text"], "What I can do:");
    // The person's chat only: another chat's messages are not shown.
    p.fake.user_message(CHAT + 1, "someone else");
    assert_eq!(p.chat().await["messages"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn requests_not_addressed_to_this_machine_or_from_another_page_are_refused() {
    let p = Page::start().await;
    let host = p
        .page
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap_or_default()
        .to_string();
    let rebound = p
        .http
        .get(format!("{}/chat.json", p.page))
        .header("Host", "attacker.example")
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 403);
    let other_page = p
        .http
        .post(format!("{}/send", p.page))
        .header("Origin", "http://127.0.0.1:1")
        .json(&json!({"text": "/panic"}))
        .send()
        .await
        .unwrap();
    assert_eq!(other_page.status(), 403);
    let form = p
        .http
        .post(format!("{}/send", p.page))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body("text=/panic")
        .send()
        .await
        .unwrap();
    assert_eq!(form.status(), 415);
    let same_page = p
        .http
        .post(format!("{}/send", p.page))
        .header("Origin", format!("http://{host}"))
        .json(&json!({"text": "/status"}))
        .send()
        .await
        .unwrap();
    assert_eq!(same_page.status(), 200);
    let texts: Vec<String> = p
        .updates()
        .await
        .iter()
        .map(|u| u["message"]["text"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(texts, ["/status"]);
}
