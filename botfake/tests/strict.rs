//! The fake refuses what Telegram refuses, answers in Telegram's shapes,
//! and plays the person's side.

use aromba_botfake::Fake;
use aromba_botfake::state::Injected;
use serde_json::{Value, json};
use std::time::Duration;

const TOKEN: &str = "123456:TEST-token-not-a-secret-0123456789";

struct Bot {
    fake: Fake,
    base: String,
    http: reqwest::Client,
}

impl Bot {
    async fn start() -> Bot {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let fake = Fake::new(TOKEN, "aromba_test_bot");
        let addr = fake.clone().serve(listener).expect("serve");
        Bot {
            fake,
            base: format!("http://{addr}"),
            http: reqwest::Client::new(),
        }
    }

    async fn call_as(&self, token: &str, method: &str, params: Value) -> (u16, Value) {
        let r = self
            .http
            .post(format!("{}/bot{token}/{method}", self.base))
            .json(&params)
            .send()
            .await
            .expect("an answer");
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    async fn call(&self, method: &str, params: Value) -> (u16, Value) {
        self.call_as(TOKEN, method, params).await
    }
}

fn described(answer: &(u16, Value)) -> &str {
    answer.1["description"].as_str().unwrap_or("")
}

#[tokio::test]
async fn a_wrong_token_is_unauthorized() {
    let bot = Bot::start().await;
    let answer = bot.call_as("123456:wrong", "getMe", json!({})).await;
    assert_eq!(answer.0, 401);
    assert_eq!(answer.1["ok"], false);
    assert_eq!(described(&answer), "Unauthorized");
}

#[tokio::test]
async fn method_names_match_case_insensitively() {
    let bot = Bot::start().await;
    bot.fake.user_message(42, "hello");
    let answer = bot
        .call("SendMessage", json!({"chat_id": 42, "text": "hi"}))
        .await;
    assert_eq!(answer.0, 200, "{answer:?}");
    assert_eq!(answer.1["result"]["chat"]["id"], 42);
    assert_eq!(bot.fake.sent_to(42)[0].text, "hi");
    let unknown = bot.call("sendTelepathy", json!({})).await;
    assert_eq!(unknown.0, 404);
}

#[tokio::test]
async fn a_chat_that_never_wrote_to_the_bot_is_not_found() {
    let bot = Bot::start().await;
    let answer = bot
        .call("sendMessage", json!({"chat_id": 7, "text": "hi"}))
        .await;
    assert_eq!(answer.0, 400);
    assert_eq!(described(&answer), "Bad Request: chat not found");
}

#[tokio::test]
async fn text_and_buttons_past_telegrams_limits_are_refused() {
    let bot = Bot::start().await;
    bot.fake.user_message(42, "hello");
    let long = bot
        .call(
            "sendMessage",
            json!({"chat_id": 42, "text": "x".repeat(4097)}),
        )
        .await;
    assert_eq!(described(&long), "Bad Request: message is too long");
    let four_byte_chars = "😀".repeat(4096);
    let fits = bot
        .call(
            "sendMessage",
            json!({"chat_id": 42, "text": four_byte_chars}),
        )
        .await;
    assert_eq!(fits.0, 200, "4096 characters fit, whatever their bytes");
    let data = bot
        .call(
            "sendMessage",
            json!({"chat_id": 42, "text": "t", "reply_markup": {"inline_keyboard": [[
                {"text": "yes", "callback_data": "d".repeat(65)}
            ]]}}),
        )
        .await;
    assert_eq!(described(&data), "Bad Request: BUTTON_DATA_INVALID");
    let row: Vec<Value> = (0..101)
        .map(|i| json!({"text": "b", "callback_data": format!("{i}")}))
        .collect();
    let many = bot
        .call(
            "sendMessage",
            json!({"chat_id": 42, "text": "t", "reply_markup": {"inline_keyboard": [row]}}),
        )
        .await;
    assert_eq!(described(&many), "Bad Request: reply markup is too long");
    let empty = bot
        .call("sendMessage", json!({"chat_id": 42, "text": " "}))
        .await;
    assert_eq!(described(&empty), "Bad Request: message text is empty");
}

#[tokio::test]
async fn a_callback_query_is_answered_once() {
    let bot = Bot::start().await;
    bot.fake.user_message(42, "hello");
    let sent = bot
        .call(
            "sendMessage",
            json!({"chat_id": 42, "text": "restart nginx?", "reply_markup": {"inline_keyboard": [[
                {"text": "Yes", "callback_data": "opaque1"}
            ]]}}),
        )
        .await;
    let message_id = sent.1["result"]["message_id"].as_i64().expect("id");
    let query = bot
        .fake
        .tap(42, message_id, "opaque1")
        .expect("a sent message");
    let first = bot
        .call("answerCallbackQuery", json!({"callback_query_id": query}))
        .await;
    assert_eq!(first.0, 200);
    let second = bot
        .call("answerCallbackQuery", json!({"callback_query_id": query}))
        .await;
    assert_eq!(second.0, 400);
    assert_eq!(bot.fake.answered(&query), Some(true));
    assert!(
        bot.fake.tap(42, 999, "opaque1").is_none(),
        "no such message"
    );
}

#[tokio::test]
async fn long_polling_waits_for_an_update_and_an_offset_confirms_it() {
    let bot = Bot::start().await;
    let poll = {
        let (http, url) = (
            bot.http.clone(),
            format!("{}/bot{TOKEN}/getUpdates", bot.base),
        );
        tokio::spawn(async move {
            http.post(url)
                .json(&json!({"timeout": 10}))
                .send()
                .await
                .expect("answer")
                .json::<Value>()
                .await
                .expect("json")
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let id = bot.fake.user_message(42, "/start ABC234");
    let got = tokio::time::timeout(Duration::from_secs(5), poll)
        .await
        .expect("the poll returns once an update is there")
        .expect("task");
    assert_eq!(got["result"][0]["update_id"], id);
    assert_eq!(got["result"][0]["message"]["text"], "/start ABC234");
    let again = bot.call("getUpdates", json!({"offset": id + 1})).await;
    assert_eq!(again.1["result"], json!([]), "confirmed updates are gone");
}

#[tokio::test]
async fn get_updates_is_refused_while_a_webhook_is_set() {
    let bot = Bot::start().await;
    let set = bot
        .call(
            "setWebhook",
            json!({"url": "https://relay.example/v1/telegram/webhook", "secret_token": "s3cret_-"}),
        )
        .await;
    assert_eq!(set.0, 200);
    let poll = bot.call("getUpdates", json!({})).await;
    assert_eq!(poll.0, 409);
    let bad_secret = bot
        .call(
            "setWebhook",
            json!({"url": "https://relay.example/hook", "secret_token": "has space"}),
        )
        .await;
    assert_eq!(bad_secret.0, 400);
    assert_eq!(bot.call("deleteWebhook", json!({})).await.0, 200);
    assert_eq!(bot.call("getUpdates", json!({})).await.0, 200);
}

#[tokio::test]
async fn a_deleted_message_is_shown_with_date_zero_in_a_tap() {
    let bot = Bot::start().await;
    bot.fake.user_message(42, "hello");
    let sent = bot
        .call(
            "sendMessage",
            json!({"chat_id": 42, "text": "t", "reply_markup": {"inline_keyboard": [[
                {"text": "Yes", "callback_data": "x"}
            ]]}}),
        )
        .await;
    let message_id = sent.1["result"]["message_id"].as_i64().expect("id");
    assert!(bot.fake.delete(42, message_id));
    bot.fake.tap(42, message_id, "x").expect("tap");
    let updates = bot.call("getUpdates", json!({})).await;
    let taps: Vec<&Value> = updates.1["result"]
        .as_array()
        .expect("array")
        .iter()
        .filter(|u| u.get("callback_query").is_some())
        .collect();
    assert_eq!(taps[0]["callback_query"]["message"]["date"], 0);
}

#[tokio::test]
async fn injected_failures_come_in_telegrams_shapes() {
    let bot = Bot::start().await;
    bot.fake
        .inject(Injected::TooManyRequests { retry_after: 3 });
    let limited = bot.call("getMe", json!({})).await;
    assert_eq!(limited.0, 429);
    assert_eq!(limited.1["parameters"]["retry_after"], 3);
    bot.fake.inject(Injected::Outage);
    let down = bot.call("getMe", json!({})).await;
    assert_eq!(down.0, 502);
    assert_eq!(down.1, Value::Null, "no JSON in an outage");
    assert_eq!(bot.call("getMe", json!({})).await.0, 200, "then well again");
}

#[tokio::test]
async fn updates_are_posted_to_the_webhook_with_its_secret_and_retried_until_taken() {
    use std::sync::{Arc, Mutex};
    let bot = Bot::start().await;
    // A webhook that refuses the first delivery, then takes them.
    // Each delivery: the secret header it carried, and the update.
    type Seen = Arc<Mutex<Vec<(Option<String>, Value)>>>;
    let seen: Seen = Arc::default();
    let record = seen.clone();
    let refused_once = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let hook = axum::Router::new().route(
        "/hook",
        axum::routing::post(
            move |headers: axum::http::HeaderMap, body: axum::Json<Value>| {
                let (record, refused_once) = (record.clone(), refused_once.clone());
                async move {
                    if !refused_once.swap(true, std::sync::atomic::Ordering::SeqCst) {
                        return axum::http::StatusCode::SERVICE_UNAVAILABLE;
                    }
                    let secret = headers
                        .get("X-Telegram-Bot-Api-Secret-Token")
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_string);
                    record.lock().expect("lock").push((secret, body.0));
                    axum::http::StatusCode::OK
                }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, hook).await });
    let set = bot
        .call(
            "setWebhook",
            json!({"url": format!("http://{addr}/hook"), "secret_token": "the_secret"}),
        )
        .await;
    assert_eq!(set.0, 200);
    let first = bot.fake.user_message(42, "one");
    let second = bot.fake.user_message(42, "two");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while seen.lock().expect("lock").len() < 2 {
        assert!(tokio::time::Instant::now() < deadline, "not delivered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let seen = seen.lock().expect("lock").clone();
    assert_eq!(seen[0].0.as_deref(), Some("the_secret"));
    assert_eq!(
        seen[0].1["update_id"], first,
        "the refused one first, again"
    );
    assert_eq!(seen[1].1["update_id"], second);
}
