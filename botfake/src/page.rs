//! The chat page: the person's side of the fake Telegram, in a browser.
//! It shows the bot's messages with their buttons (edited and deleted in
//! place), the command menu the bot set, the answers to taps as Telegram
//! shows them, and sends what the person types or taps as the updates
//! Telegram would send. Plain HTML, CSS and JavaScript compiled into the
//! binary (no build step, nothing fetched from elsewhere); live over
//! server-sent events.
//!
//! ```no_run
//! # async fn run() -> std::io::Result<()> {
//! let fake = aromba_botfake::Fake::new("123456:TEST-token-not-a-secret", "aromba_demo_bot");
//! let api = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! fake.clone().serve(api)?;
//! let page = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let key = "k3y-only-the-person-knows-0123456789".to_string();
//! let person = aromba_botfake::page::Person { chat: 42, name: "Sam".into(), key: key.clone() };
//! let addr = fake.serve_page(page, person)?;
//! println!("open http://{addr}/{key}/");
//! # Ok(()) }
//! ```
//!
//! The page is for one person on this machine: it answers only under its
//! secret path `/<key>/` (any other account's process on this machine —
//! the Worker's, say — can reach the port, but not guess the key, so it
//! cannot type or tap as the person, nor read the chat), only requests
//! addressed to a loopback name (a page elsewhere cannot reach it through
//! a name it controls) and takes a tap or a message only from its own
//! origin, as JSON (which a page elsewhere cannot send without asking
//! first, and is never told yes).

use crate::Fake;
use crate::state::State as FakeState;
use axum::Json;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::net::SocketAddr;

const HTML: &str = include_str!("page/chat.html");
const CSS: &str = include_str!("page/chat.css");
const JS: &str = include_str!("page/chat.js");

/// Messages the page shows at most (the latest).
const SHOWN: usize = 300;
/// Taps whose answers the page is told of at most (the latest).
const TAPS_SHOWN: usize = 50;
/// What a person's message may hold, as Telegram's own limit.
const MAX_TEXT: usize = 4096;

/// The person using the page: their private chat with the bot.
#[derive(Clone, Debug)]
pub struct Person {
    pub chat: i64,
    pub name: String,
    /// The page's secret path segment: it answers only under `/<key>/`.
    /// At least 16 of `A-Z a-z 0-9 _ -`; the address with it is the
    /// person's alone (keep it out of other accounts' sight: argv, logs).
    pub key: String,
}

/// Whether `key` can be a page's key: long enough not to be guessed, and
/// one path segment as it is.
pub fn valid_key(key: &str) -> bool {
    key.len() >= 16
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[derive(Clone)]
struct Page {
    fake: Fake,
    person: Person,
}

impl Fake {
    /// Serves the chat page for `person` on `listener` until the runtime
    /// ends; returns its address.
    pub fn serve_page(
        self,
        listener: tokio::net::TcpListener,
        person: Person,
    ) -> std::io::Result<SocketAddr> {
        if !valid_key(&person.key) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the page's key must be 16 or more of A-Z a-z 0-9 _ -",
            ));
        }
        let addr = listener.local_addr()?;
        let router = router(self, person);
        tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, router).await {
                tracing::error!(error = %e, "the chat page stopped");
            }
        });
        Ok(addr)
    }
}

/// The page's routes, for a caller that serves them itself.
pub fn router(fake: Fake, person: Person) -> axum::Router {
    use axum::routing::{get, post};
    // Every route under the key (checked again, in constant time, by
    // `local_only`); a key is letters, digits, `_` and `-` only.
    let at = |path: &str| format!("/{}/{path}", person.key);
    axum::Router::new()
        .route(&at(""), get(html))
        .route(
            &at("chat.css"),
            get(|| async { asset("text/css; charset=utf-8", CSS) }),
        )
        .route(
            &at("chat.js"),
            get(|| async { asset("text/javascript; charset=utf-8", JS) }),
        )
        .route(&at("chat.json"), get(chat_json))
        .route(&at("events"), get(events))
        .route(&at("send"), post(send))
        .route(&at("tap"), post(tap))
        .route(&at("open"), post(open))
        .fallback(|| async {
            refuse(
                StatusCode::NOT_FOUND,
                "open the page's address as the demo printed it",
            )
        })
        .layer(axum::extract::DefaultBodyLimit::max(64 * 1024))
        .layer(axum::middleware::from_fn_with_state(
            std::sync::Arc::<str>::from(person.key.as_str()),
            local_only,
        ))
        .with_state(Page { fake, person })
}

fn asset(kind: &'static str, body: &'static str) -> Response {
    with_policy(kind, body, "'none'")
}

/// `body` with the page's policy; `frames` are the origins it may show in
/// a frame (the registered Mini Apps, for the app panel).
fn with_policy(kind: &'static str, body: &'static str, frames: &str) -> Response {
    let policy = format!(
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
         img-src 'self' data:; frame-src {frames}; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    );
    let mut r = (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response();
    if let Ok(v) = axum::http::HeaderValue::from_str(&policy) {
        r.headers_mut().insert(header::CONTENT_SECURITY_POLICY, v);
    }
    r
}

/// The page, which may frame the registered Mini Apps (and nothing else).
async fn html(State(page): State<Page>) -> Response {
    let origins = page.fake.app_origins();
    let frames = if origins.is_empty() {
        "'none'".to_string()
    } else {
        origins.join(" ")
    };
    with_policy("text/html; charset=utf-8", HTML, &frames)
}

/// Whether `host` (a Host header's value) names this machine's loopback.
fn loopback_host(host: &str) -> bool {
    let name = if let Some(v6) = host.strip_prefix('[') {
        match v6.split_once(']') {
            Some((addr, rest)) if rest.is_empty() || rest.starts_with(':') => {
                return addr == "::1" && port_ok(rest);
            }
            _ => return false,
        }
    } else {
        match host.split_once(':') {
            Some((name, port)) => {
                if !port_ok(&format!(":{port}")) {
                    return false;
                }
                name
            }
            None => host,
        }
    };
    name.eq_ignore_ascii_case("localhost") || name == "127.0.0.1"
}

fn port_ok(rest: &str) -> bool {
    match rest.strip_prefix(':') {
        None => rest.is_empty(),
        Some(port) => port.parse::<u16>().is_ok_and(|p| p != 0),
    }
}

/// Equal, in a time that does not tell how much of `a` matched.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether `path` lies under the page's key (`/<key>/…`).
fn under_key(path: &str, key: &str) -> bool {
    path.strip_prefix('/')
        .and_then(|p| p.split_once('/'))
        .is_some_and(|(first, _)| same(first.as_bytes(), key.as_bytes()))
}

/// Refuses a request not under the page's key (another account's process
/// on this machine), not addressed to a loopback name (a rebound name
/// would carry its own), and a request from another page: its `Origin`,
/// when sent, must be this page's; a change must come as JSON.
async fn local_only(
    State(key): State<std::sync::Arc<str>>,
    request: Request,
    next: Next,
) -> Response {
    if !under_key(request.uri().path(), &key) {
        return refuse(
            StatusCode::NOT_FOUND,
            "open the page's address as the demo printed it",
        );
    }
    let headers = request.headers();
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
        return refuse(StatusCode::BAD_REQUEST, "the request names no host");
    };
    if !loopback_host(host) {
        return refuse(
            StatusCode::FORBIDDEN,
            "this page answers on a loopback address only",
        );
    }
    if let Some(origin) = headers.get(header::ORIGIN)
        && origin.to_str().ok() != Some(format!("http://{host}").as_str())
    {
        return refuse(StatusCode::FORBIDDEN, "the request comes from another page");
    }
    if request.method() == axum::http::Method::POST && !json_body(headers) {
        return refuse(StatusCode::UNSUPPORTED_MEDIA_TYPE, "send JSON");
    }
    let mut response = next.run(request).await;
    let h = response.headers_mut();
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

fn json_body(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"))
}

fn refuse(status: StatusCode, why: &str) -> Response {
    (status, Json(json!({ "error": why }))).into_response()
}

/// What the page shows, as one JSON object.
fn snapshot(page: &Page) -> Value {
    let state = page.fake.state();
    let chat = page.person.chat;
    let gone = |id: i64| state.deleted_by_bot.contains(&(chat, id));
    let mut messages: Vec<(i64, Value)> = Vec::new();
    for m in state
        .sent
        .iter()
        .filter(|m| m.chat_id == chat && !m.deleted)
    {
        let buttons: Vec<Value> = m
            .buttons
            .iter()
            .map(|row| {
                Value::Array(
                    row.iter()
                        .map(|(text, data)| json!({ "text": text, "data": data }))
                        .collect(),
                )
            })
            .collect();
        messages.push((
            m.message_id,
            json!({
                "id": m.message_id,
                "from": "bot",
                "text": m.text,
                "monospace": m.monospace,
                "buttons": buttons,
                "edited": m.edited,
                "at": m.at,
            }),
        ));
    }
    for m in state
        .said
        .iter()
        .filter(|m| m.chat_id == chat && !gone(m.message_id))
    {
        messages.push((
            m.message_id,
            json!({ "id": m.message_id, "from": "person", "text": m.text, "at": m.at }),
        ));
    }
    messages.sort_by_key(|(id, _)| *id);
    let skip = messages.len().saturating_sub(SHOWN);
    let messages: Vec<Value> = messages.into_iter().skip(skip).map(|(_, m)| m).collect();
    let taps: Vec<Value> = {
        let mine: Vec<_> = state.taps.iter().filter(|t| t.chat_id == chat).collect();
        let skip = mine.len().saturating_sub(TAPS_SHOWN);
        mine.into_iter()
            .skip(skip)
            .map(|t| {
                json!({
                    "query": t.query,
                    "message_id": t.message_id,
                    "data": t.data,
                    "answered": t.answered,
                    "answer": t.answer,
                    "alert": t.alert,
                })
            })
            .collect()
    };
    let commands: Vec<Value> = menu(&state, chat)
        .iter()
        .map(|(c, d)| json!({ "command": c, "description": d }))
        .collect();
    json!({
        "bot": { "name": "Aromba", "username": page.fake.username },
        "person": { "id": chat, "name": page.person.name },
        "messages": messages,
        "commands": commands,
        "taps": taps,
    })
}

/// The menu Telegram shows in `chat`: the narrowest scope the bot set.
fn menu(state: &FakeState, chat: i64) -> Vec<(String, String)> {
    for scope in [
        format!("chat:{chat}"),
        "all_private_chats".into(),
        "default".into(),
    ] {
        if let Some(commands) = state.commands.get(&scope) {
            return commands.clone();
        }
    }
    Vec::new()
}

async fn chat_json(State(page): State<Page>) -> Response {
    ([(header::CACHE_CONTROL, "no-store")], Json(snapshot(&page))).into_response()
}

/// The chat as it is now, then again at every change, as server-sent
/// events named `chat`.
async fn events(
    State(page): State<Page>,
) -> Sse<impl futures_util::Stream<Item = Result<Event, std::convert::Infallible>>> {
    let changes = page.fake.watch_changes();
    let stream = futures_util::stream::unfold(
        (page, changes, true),
        |(page, mut changes, first)| async move {
            if !first && changes.changed().await.is_err() {
                return None;
            }
            changes.borrow_and_update();
            let event = Event::default()
                .event("chat")
                .data(snapshot(&page).to_string());
            Some((Ok(event), (page, changes, false)))
        },
    );
    Sse::new(stream).keep_alive(KeepAlive::default())
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Send {
    text: String,
}

/// The person sends a message (a command is a message that starts with
/// `/`), as Telegram would pass it to the bot.
async fn send(
    State(page): State<Page>,
    body: Result<Json<Send>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let Ok(Json(Send { text })) = body else {
        return refuse(StatusCode::BAD_REQUEST, "send {\"text\": \"…\"}");
    };
    let text = text.trim();
    if text.is_empty() {
        return refuse(StatusCode::BAD_REQUEST, "the message is empty");
    }
    if text.chars().count() > MAX_TEXT {
        return refuse(
            StatusCode::BAD_REQUEST,
            "the message is longer than 4096 characters",
        );
    }
    if text
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return refuse(
            StatusCode::BAD_REQUEST,
            "the message holds control characters",
        );
    }
    page.fake.user_message(page.person.chat, text);
    Json(json!({ "ok": true })).into_response()
}

/// Whether message `message_id` in the person's chat shows a button with
/// `data` (its callback data, or its link) now: only those can be tapped.
fn offers(page: &Page, message_id: i64, data: &str) -> bool {
    let chat = page.person.chat;
    page.fake
        .state()
        .sent
        .iter()
        .find(|m| m.chat_id == chat && m.message_id == message_id && !m.deleted)
        .is_some_and(|m| m.buttons.iter().flatten().any(|(_, d)| d == data))
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct OpenBody {
    message_id: i64,
    url: String,
}

/// The person taps a button that opens a Mini App: only a link a message
/// in the chat has now. The app's address with its launch parameters, for
/// the page's app panel.
async fn open(
    State(page): State<Page>,
    body: Result<Json<OpenBody>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let Ok(Json(OpenBody { message_id, url })) = body else {
        return refuse(
            StatusCode::BAD_REQUEST,
            "send {\"message_id\": N, \"url\": \"…\"}",
        );
    };
    let chat = page.person.chat;
    if !offers(&page, message_id, &url) {
        return refuse(StatusCode::NOT_FOUND, "that message has no such button");
    }
    match page.fake.open_app(chat, &url) {
        Ok(opened) => Json(json!({ "url": opened.url })).into_response(),
        Err(why) => refuse(StatusCode::NOT_FOUND, &why),
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TapBody {
    message_id: i64,
    data: String,
}

/// The person taps a button: only one a message in the chat has now, as a
/// Telegram client can only send those.
async fn tap(
    State(page): State<Page>,
    body: Result<Json<TapBody>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let Ok(Json(TapBody { message_id, data })) = body else {
        return refuse(
            StatusCode::BAD_REQUEST,
            "send {\"message_id\": N, \"data\": \"…\"}",
        );
    };
    let chat = page.person.chat;
    if !offers(&page, message_id, &data) {
        return refuse(StatusCode::NOT_FOUND, "that message has no such button");
    }
    match page.fake.tap(chat, message_id, &data) {
        Some(query) => Json(json!({ "query": query })).into_response(),
        None => refuse(StatusCode::NOT_FOUND, "that message has no such button"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_names_are_this_pages_host() {
        for good in [
            "127.0.0.1:8090",
            "localhost:8090",
            "LOCALHOST",
            "[::1]:8090",
            "127.0.0.1",
        ] {
            assert!(loopback_host(good), "{good}");
        }
        for bad in [
            "evil.example:8090",
            "127.0.0.1.evil.example",
            "127.0.0.2:8090",
            "[::2]:80",
            "localhost:0",
            "localhost:http",
            "[::1]x",
            "",
        ] {
            assert!(!loopback_host(bad), "{bad}");
        }
    }
}
