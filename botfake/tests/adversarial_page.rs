//! Attacks on the chat page: other pages in the browser, other processes on
//! this machine, and a hostile bot.

use aromba_botfake::Fake;
use aromba_botfake::page::Person;
use serde_json::{Value, json};

const TOKEN: &str = "123456:TEST-token-not-a-secret-0123456789";
const CHAT: i64 = 7_000_001;
const KEY: &str = "page-key-only-the-person-knows_0123";

struct Page {
    fake: Fake,
    addr: std::net::SocketAddr,
    http: reqwest::Client,
}

impl Page {
    async fn start() -> Page {
        let fake = Fake::new(TOKEN, "aromba_test_bot");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let person = Person {
            chat: CHAT,
            name: "Sam".into(),
            key: KEY.into(),
        };
        let addr = fake.clone().serve_page(listener, person).expect("serve");
        Page {
            fake,
            addr,
            http: reqwest::Client::new(),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}/{KEY}/{path}", self.addr)
    }

    async fn post(&self, path: &str, body: Value) -> u16 {
        self.post_to(&self.url(path), body).await
    }

    async fn post_to(&self, url: &str, body: Value) -> u16 {
        self.http
            .post(url)
            .json(&body)
            .send()
            .await
            .expect("an answer")
            .status()
            .as_u16()
    }
}

#[tokio::test]
async fn a_local_process_without_the_pages_address_cannot_send_or_tap() {
    let page = Page::start().await;
    // Another account on this machine (the Worker's, say) knows the port
    // and speaks from loopback with a loopback Host and no Origin.
    let base = format!("http://{}", page.addr);
    for url in [
        format!("{base}/send"),
        format!("{base}/{}/send", &KEY[..KEY.len() - 1]),
        format!("{base}/{KEY}x/send"),
        format!("{base}//send"),
    ] {
        let status = page.post_to(&url, json!({ "text": "/panic" })).await;
        assert_eq!(status, 404, "{url}");
    }
    for path in ["chat.json", "events", ""] {
        let r = page
            .http
            .get(format!("{base}/{path}"))
            .send()
            .await
            .expect("an answer");
        assert_eq!(r.status().as_u16(), 404, "{path}");
    }
    assert!(page.fake.state().said.is_empty());
    // The person, with the address as printed, is heard.
    assert_eq!(page.post("send", json!({ "text": "/status" })).await, 200);
    assert_eq!(page.fake.state().said.len(), 1);
}

#[tokio::test]
async fn a_page_without_a_guessable_key_is_not_served() {
    let fake = Fake::new(TOKEN, "aromba_test_bot");
    for key in [
        "",
        "short",
        "has a space in it 0123",
        "../../../../etc/passwd0",
    ] {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let person = Person {
            chat: CHAT,
            name: "Sam".into(),
            key: key.into(),
        };
        assert!(fake.clone().serve_page(listener, person).is_err(), "{key}");
    }
}

/// A request written by hand: the Host and Origin a browser would send for
/// another page (or none), and the body's type.
async fn raw(page: &Page, host: Option<&str>, origin: Option<&str>, kind: &str, body: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(page.addr)
        .await
        .expect("connect");
    let mut req = format!("POST /{KEY}/send HTTP/1.1\r\n");
    if let Some(h) = host {
        req.push_str(&format!("Host: {h}\r\n"));
    }
    if let Some(o) = origin {
        req.push_str(&format!("Origin: {o}\r\n"));
    }
    req.push_str(&format!(
        "Content-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    s.write_all(req.as_bytes()).await.expect("write");
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer).await;
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn a_cross_origin_post_cannot_send_a_message() {
    let page = Page::start().await;
    let own = page.addr.to_string();
    let json = "application/json";
    let body = r#"{"text":"/panic"}"#;
    let cases: [(Option<&str>, Option<&str>, &str, &str); 9] = [
        // Another page's fetch, form post or no-cors "simple" request.
        (Some(&own), Some("http://127.0.0.1:1"), json, body),
        (Some(&own), Some("http://evil.example"), "text/plain", body),
        (Some(&own), None, "text/plain", body),
        (
            Some(&own),
            None,
            "application/x-www-form-urlencoded",
            "text=%2Fpanic",
        ),
        (Some(&own), Some("null"), json, body),
        // A rebound name, and no name at all.
        (Some("evil.example"), None, json, body),
        (Some("127.0.0.1.nip.io"), None, json, body),
        (None, None, json, body),
        // Its own origin over another loopback name is another page.
        (Some(&own), Some("http://localhost"), json, body),
    ];
    for (host, origin, kind, body) in cases {
        let status = raw(&page, host, origin, kind, body).await;
        assert!(
            (400..500).contains(&status),
            "{host:?} {origin:?} {kind}: {status}"
        );
    }
    assert!(page.fake.state().said.is_empty());
    let origin = format!("http://{own}");
    assert_eq!(raw(&page, Some(&own), Some(&origin), json, body).await, 200);
}

/// The person says something; the bot answers with `params`.
async fn bot_says(page: &Page, api: &str, params: Value) -> Value {
    page.fake.user_message(CHAT, "/start");
    let r = page
        .http
        .post(format!("{api}/bot{TOKEN}/sendMessage"))
        .json(&params)
        .send()
        .await
        .expect("an answer");
    r.json().await.expect("JSON")
}

async fn api(page: &Page) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    format!(
        "http://{}",
        page.fake.clone().serve(listener).expect("serve")
    )
}

#[tokio::test]
async fn a_tap_on_a_button_never_offered_or_on_a_deleted_message_is_refused() {
    let page = Page::start().await;
    let api = api(&page).await;
    let sent = bot_says(
        &page,
        &api,
        json!({
            "chat_id": CHAT,
            "text": "Approve?",
            "reply_markup": {"inline_keyboard": [[{"text": "Deny", "callback_data": "deny:1"}]]},
        }),
    )
    .await;
    let id = sent["result"]["message_id"].as_i64().expect("an id");
    for body in [
        json!({ "message_id": id, "data": "approve:1" }),
        json!({ "message_id": id + 1, "data": "deny:1" }),
        json!({ "message_id": 1, "data": "deny:1" }),
        json!({ "message_id": id, "data": "deny:1", "extra": true }),
        json!({ "message_id": id.to_string(), "data": "deny:1" }),
    ] {
        assert!(page.post("tap", body.clone()).await >= 400, "{body}");
    }
    assert!(page.fake.state().taps.is_empty());
    page.fake.delete(CHAT, id);
    assert_eq!(
        page.post("tap", json!({ "message_id": id, "data": "deny:1" }))
            .await,
        404
    );
    assert!(page.fake.state().taps.is_empty());
}

#[tokio::test]
async fn odd_or_oversize_messages_are_refused() {
    let page = Page::start().await;
    for body in [
        json!({ "text": "a".repeat(4097) }),
        json!({ "text": "hi\u{1b}[2J" }),
        json!({ "text": "h\ri" }),
        json!({ "text": "h\u{85}i" }),
        json!({ "text": "\u{7f}" }),
        json!({ "text": "   " }),
        json!({ "text": 5 }),
        json!({ "text": "hi", "from": 1 }),
    ] {
        assert_eq!(page.post("send", body.clone()).await, 400, "{body}");
    }
    let huge = format!("{{\"text\":\"{}\"}}", "a".repeat(200_000));
    let status = page
        .http
        .post(page.url("send"))
        .header("content-type", "application/json")
        .body(huge)
        .send()
        .await
        .expect("an answer")
        .status()
        .as_u16();
    assert!((400..500).contains(&status), "{status}");
    assert!(page.fake.state().said.is_empty());
}

#[tokio::test]
async fn hostile_bot_text_reaches_the_page_as_data_only() {
    let page = Page::start().await;
    let api = api(&page).await;
    let hostile = "<img src=x onerror=alert(1)><script>alert(2)</script>";
    bot_says(
        &page,
        &api,
        json!({
            "chat_id": CHAT,
            "text": hostile,
            "reply_markup": {"inline_keyboard": [[{"text": hostile, "callback_data": "\"><b>x"}]]},
        }),
    )
    .await;
    let r = page
        .http
        .get(page.url("chat.json"))
        .send()
        .await
        .expect("an answer");
    assert_eq!(
        r.headers()["content-type"].to_str().ok(),
        Some("application/json")
    );
    assert_eq!(
        r.headers()["x-content-type-options"].to_str().ok(),
        Some("nosniff")
    );
    let chat: Value = r.json().await.expect("JSON");
    let bot = chat["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["from"] == "bot"))
        .expect("the bot's message");
    assert_eq!(bot["text"], hostile);
    let html = page.http.get(page.url("")).send().await.expect("an answer");
    let csp = html.headers()["content-security-policy"]
        .to_str()
        .expect("a CSP")
        .to_string();
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe"),
        "{csp}"
    );
    // The page sets bot text as text only: no markup sink in its script.
    let js = page
        .http
        .get(page.url("chat.js"))
        .send()
        .await
        .expect("an answer");
    let js = js.text().await.expect("the script");
    for sink in [
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
        "new Function",
    ] {
        assert!(!js.contains(sink), "{sink}");
    }
}
