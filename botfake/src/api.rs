//! The Bot API methods the relay calls, as strict as Telegram: its JSON
//! shapes, its error bodies, its refusals.

use crate::state::{Injected, Sent, Webhook};
use crate::{Fake, MAX_BUTTONS, MAX_CALLBACK_DATA, MAX_TEXT};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use std::time::Duration;

/// Telegram's error body.
pub fn error(code: u16, description: &str) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_REQUEST);
    (
        status,
        Json(json!({"ok": false, "error_code": code, "description": description})),
    )
        .into_response()
}

fn ok(result: Value) -> Response {
    Json(json!({"ok": true, "result": result})).into_response()
}

fn bad(description: &str) -> Response {
    error(400, &format!("Bad Request: {description}"))
}

/// `POST /bot<token>/<method>`: the token checked, the method matched
/// case-insensitively (teloxide sends `SendMessage`), the parameters read
/// from a JSON object (or nothing).
pub async fn call(
    State(fake): State<Fake>,
    Path((bot, method)): Path<(String, String)>,
    request: axum::extract::Request,
) -> Response {
    if bot.strip_prefix("bot") != Some(fake.token.as_str()) {
        return error(401, "Unauthorized");
    }
    if let Some(injected) = fake.take_injected(&method.to_ascii_lowercase()) {
        return injected_failure(injected);
    }
    let params = match params(request).await {
        Ok(p) => p,
        Err(r) => return bad(&r.0),
    };
    match method.to_ascii_lowercase().as_str() {
        "getme" => ok(json!({
            "id": fake.bot_id, "is_bot": true, "first_name": "Aromba",
            "username": fake.username, "can_join_groups": false,
            "can_read_all_group_messages": false, "supports_inline_queries": false,
            "can_connect_to_business": false, "has_main_web_app": false,
        })),
        "sendmessage" => send_message(&fake, &params),
        "editmessagetext" => edit_message_text(&fake, &params),
        "answercallbackquery" => answer_callback_query(&fake, &params),
        "setwebhook" => set_webhook(&fake, &params),
        "deletewebhook" => {
            fake.state().webhook = None;
            ok(json!(true))
        }
        "getupdates" => get_updates(&fake, &params).await,
        "setmycommands" => set_my_commands(&fake, &params),
        "deletemessage" => delete_message(&fake, &params),
        _ => error(404, "Not Found: method not found"),
    }
}

/// A failure a test asked for, as Telegram (or the network) shows it.
fn injected_failure(injected: Injected) -> Response {
    match injected {
        Injected::TooManyRequests { retry_after } => (
            StatusCode::TOO_MANY_REQUESTS,
            Json(json!({
                "ok": false,
                "error_code": 429,
                "description": format!("Too Many Requests: retry after {retry_after}"),
                "parameters": {"retry_after": retry_after},
            })),
        )
            .into_response(),
        // A gateway in front of the Bot API failing: no JSON at all.
        Injected::Outage => (StatusCode::BAD_GATEWAY, "").into_response(),
        // The answer starts and the connection breaks mid-body: the client
        // fails in the middle of reading it.
        Injected::Hangup => {
            let parts: [Result<axum::body::Bytes, std::io::Error>; 2] = [
                Ok(axum::body::Bytes::from_static(b"{\"ok\":true,\"result\":")),
                Err(std::io::Error::other("the fake Bot API hung up")),
            ];
            (
                StatusCode::OK,
                [(axum::http::header::CONTENT_TYPE, "application/json")],
                axum::body::Body::from_stream(futures_util::stream::iter(parts)),
            )
                .into_response()
        }
    }
}

/// The call's parameters, as Telegram takes them: a JSON object, or
/// multipart/form-data (teloxide sends `setWebhook` so), or nothing.
async fn params(request: axum::extract::Request) -> Result<Map<String, Value>, Refusal> {
    use axum::extract::FromRequest;
    let kind = request
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    if kind.starts_with("multipart/form-data") {
        let mut form = axum::extract::Multipart::from_request(request, &())
            .await
            .map_err(|_| Refusal("can't parse multipart form".into()))?;
        let mut map = Map::new();
        while let Some(field) = form
            .next_field()
            .await
            .map_err(|_| Refusal("can't parse multipart form".into()))?
        {
            let name = field.name().unwrap_or("").to_string();
            let text = field
                .text()
                .await
                .map_err(|_| Refusal("can't parse multipart form".into()))?;
            // A field holding JSON (an array, an object) is that JSON.
            let value = match serde_json::from_str::<Value>(&text) {
                Ok(v @ (Value::Array(_) | Value::Object(_))) => v,
                _ => Value::String(text),
            };
            map.insert(name, value);
        }
        return Ok(map);
    }
    let body = axum::body::to_bytes(request.into_body(), 1024 * 1024)
        .await
        .map_err(|_| Refusal("request is too large".into()))?;
    if body.is_empty() {
        return Ok(Map::new());
    }
    if !kind.starts_with("application/json") {
        return Err(Refusal(
            "parameters must be sent as application/json or multipart/form-data here".into(),
        ));
    }
    match serde_json::from_slice(&body) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(Refusal("can't parse JSON object".into())),
    }
}

/// Why a parameter is refused: the description after "Bad Request: ".
struct Refusal(String);

fn int(params: &Map<String, Value>, name: &str) -> Result<i64, Refusal> {
    match params.get(name) {
        Some(Value::Number(n)) => n.as_i64().ok_or_else(|| Refusal(format!("invalid {name}"))),
        Some(Value::String(s)) => s.parse().map_err(|_| Refusal(format!("invalid {name}"))),
        Some(_) => Err(Refusal(format!("invalid {name}"))),
        None => Err(Refusal(format!("{name} is empty"))),
    }
}

fn text(params: &Map<String, Value>) -> Result<(String, Option<String>), Refusal> {
    let text = match params.get("text") {
        Some(Value::String(t)) => t.clone(),
        _ => return Err(Refusal("message text is empty".into())),
    };
    if text.trim().is_empty() {
        return Err(Refusal("message text is empty".into()));
    }
    // Telegram counts characters (Unicode scalars) here, not UTF-16 units:
    // 4,096 emoji are taken, 4,097 refused (measured against the real Bot
    // API); entity offsets are what count in UTF-16.
    if text.chars().count() > MAX_TEXT {
        return Err(Refusal("message is too long".into()));
    }
    let parse_mode = match params.get("parse_mode") {
        None | Some(Value::Null) => None,
        Some(Value::String(m)) if ["HTML", "MarkdownV2", "Markdown"].contains(&m.as_str()) => {
            Some(m.clone())
        }
        Some(_) => return Err(Refusal("unsupported parse_mode".into())),
    };
    Ok((text, parse_mode))
}

/// The inline keyboard's buttons, refused as Telegram refuses them.
fn buttons(params: &Map<String, Value>) -> Result<Vec<Vec<(String, String)>>, Refusal> {
    let Some(markup) = params.get("reply_markup") else {
        return Ok(Vec::new());
    };
    let Some(rows) = markup.get("inline_keyboard").and_then(Value::as_array) else {
        return Err(Refusal(
            "can't parse reply keyboard markup JSON object".into(),
        ));
    };
    let mut out = Vec::new();
    let mut count = 0;
    for row in rows {
        let Some(row) = row.as_array() else {
            return Err(Refusal("can't parse inline keyboard button".into()));
        };
        let mut got = Vec::new();
        for b in row {
            let label = b.get("text").and_then(Value::as_str).unwrap_or("");
            let data = match (
                b.get("callback_data").and_then(Value::as_str),
                b.get("url").and_then(Value::as_str),
            ) {
                (Some(data), None) => {
                    if data.is_empty() || data.len() > MAX_CALLBACK_DATA {
                        return Err(Refusal("BUTTON_DATA_INVALID".into()));
                    }
                    data
                }
                (None, Some(url)) => {
                    if !crate::is_link(url)
                        || url.len() > 2048
                        || url.chars().any(|c| c.is_whitespace() || c.is_control())
                    {
                        return Err(Refusal("BUTTON_URL_INVALID".into()));
                    }
                    url
                }
                _ => {
                    return Err(Refusal(
                        "can't parse inline keyboard button: exactly one of callback_data and url expected".into(),
                    ));
                }
            };
            if label.is_empty() {
                return Err(Refusal(
                    "text buttons are unallowed in the inline keyboard".into(),
                ));
            }
            count += 1;
            got.push((label.to_string(), data.to_string()));
        }
        out.push(got);
    }
    if count > MAX_BUTTONS {
        return Err(Refusal("reply markup is too long".into()));
    }
    Ok(out)
}

/// `entities` as Telegram checks them, for the kind the relay sends
/// (`pre`): each within the text, in UTF-16 code units.
fn entities(params: &Map<String, Value>, text: &str) -> Result<Vec<(usize, usize)>, Refusal> {
    let list = match params.get("entities") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(list)) => list,
        Some(_) => return Err(Refusal("can't parse entities: expected an array".into())),
    };
    let units = text.encode_utf16().count();
    let mut out = Vec::new();
    for e in list {
        let (Some(kind), Some(offset), Some(length)) = (
            e.get("type").and_then(Value::as_str),
            e.get("offset").and_then(Value::as_u64),
            e.get("length").and_then(Value::as_u64),
        ) else {
            return Err(Refusal("can't parse entities: bad MessageEntity".into()));
        };
        if kind != "pre" {
            return Err(Refusal(format!(
                "unsupported entity type {kind} in this fake"
            )));
        }
        let (offset, length) = (offset as usize, length as usize);
        if length == 0 || offset.saturating_add(length) > units {
            return Err(Refusal(
                "can't parse entities: entity beyond the end of the text".into(),
            ));
        }
        out.push((offset, length));
    }
    Ok(out)
}

/// Whether `link_preview_options` turns previews off; malformed options are
/// refused, as Telegram refuses them.
fn previews_off(params: &Map<String, Value>) -> Result<bool, String> {
    match params.get("link_preview_options") {
        None => Ok(false),
        Some(Value::Object(o)) => match o.get("is_disabled") {
            None => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err("can't parse link preview options: is_disabled is not a boolean".into()),
        },
        // Sent form-encoded, an object arrives as its JSON text.
        Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(o)) => Ok(o.get("is_disabled") == Some(&Value::Bool(true))),
            _ => Err("can't parse link preview options JSON object".into()),
        },
        Some(_) => Err("can't parse link preview options JSON object".into()),
    }
}

fn send_message(fake: &Fake, params: &Map<String, Value>) -> Response {
    let chat = match int(params, "chat_id") {
        Ok(c) => c,
        Err(r) => return bad(&r.0),
    };
    let (text, parse_mode) = match text(params) {
        Ok(t) => t,
        Err(r) => return bad(&r.0),
    };
    let buttons = match buttons(params) {
        Ok(b) => b,
        Err(r) => return bad(&r.0),
    };
    let monospace = match entities(params, &text) {
        Ok(e) => e,
        Err(r) => return bad(&r.0),
    };
    let previews_off = match previews_off(params) {
        Ok(p) => p,
        Err(r) => return bad(&r),
    };
    let mut state = fake.state();
    if !state.chats.contains(&chat) {
        return bad("chat not found");
    }
    let message_id = state.next_message_id(chat);
    let sent = Sent {
        chat_id: chat,
        message_id,
        text,
        parse_mode,
        buttons,
        monospace,
        edited: false,
        deleted: false,
        previews_off,
        at: crate::state::unix_now(),
    };
    state.sent.push(sent.clone());
    drop(state);
    fake.changed();
    ok(crate::api_message(fake, &sent))
}

fn edit_message_text(fake: &Fake, params: &Map<String, Value>) -> Response {
    let (chat, message_id) = match (int(params, "chat_id"), int(params, "message_id")) {
        (Ok(c), Ok(m)) => (c, m),
        (Err(r), _) | (_, Err(r)) => return bad(&r.0),
    };
    let (text, parse_mode) = match text(params) {
        Ok(t) => t,
        Err(r) => return bad(&r.0),
    };
    let buttons = match buttons(params) {
        Ok(b) => b,
        Err(r) => return bad(&r.0),
    };
    let previews_off = match previews_off(params) {
        Ok(p) => p,
        Err(r) => return bad(&r),
    };
    let mut state = fake.state();
    let Some(m) = state.message_mut(chat, message_id) else {
        return bad("message to edit not found");
    };
    if m.deleted {
        return bad("message to edit not found");
    }
    if m.text == text && m.buttons == buttons {
        return bad(
            "message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message",
        );
    }
    m.text = text;
    m.previews_off = previews_off;
    m.parse_mode = parse_mode;
    m.buttons = buttons;
    m.edited = true;
    let edited = m.clone();
    drop(state);
    fake.changed();
    ok(crate::api_message(fake, &edited))
}

fn answer_callback_query(fake: &Fake, params: &Map<String, Value>) -> Response {
    let Some(id) = params.get("callback_query_id").and_then(Value::as_str) else {
        return bad("callback_query_id is empty");
    };
    let answer = match params.get("text") {
        None | Some(Value::Null) => None,
        // Telegram shows at most 200 characters of a notice.
        Some(Value::String(t)) if t.chars().count() <= 200 => Some(t.clone()),
        Some(Value::String(_)) => return bad("MESSAGE_TOO_LONG"),
        Some(_) => return bad("invalid text"),
    };
    let alert = matches!(params.get("show_alert"), Some(Value::Bool(true)))
        || matches!(params.get("show_alert"), Some(Value::String(s)) if s == "true");
    let mut state = fake.state();
    match state.callbacks.get_mut(id) {
        Some(answered @ false) => {
            *answered = true;
            if let Some(tap) = state.taps.iter_mut().find(|t| t.query == id) {
                tap.answered = true;
                tap.answer = answer;
                tap.alert = alert;
            }
            drop(state);
            fake.changed();
            ok(json!(true))
        }
        _ => bad("query is too old and response timeout expired or query ID is invalid"),
    }
}

/// `deleteMessage`: a message of a chat the bot knows, up to its last id.
fn delete_message(fake: &Fake, params: &Map<String, Value>) -> Response {
    let (chat, message_id) = match (int(params, "chat_id"), int(params, "message_id")) {
        (Ok(c), Ok(m)) => (c, m),
        (Err(r), _) | (_, Err(r)) => return bad(&r.0),
    };
    let mut state = fake.state();
    let known = state.chats.contains(&chat)
        && state
            .last_message_id
            .get(&chat)
            .is_some_and(|last| (1..=*last).contains(&message_id));
    if !known || state.deleted_by_bot.contains(&(chat, message_id)) {
        return bad("message to delete not found");
    }
    state.deleted_by_bot.push((chat, message_id));
    if let Some(m) = state.message_mut(chat, message_id) {
        m.deleted = true;
    }
    drop(state);
    fake.changed();
    ok(json!(true))
}

/// `setMyCommands` as Telegram checks it: 1 to 100 commands, each 1 to 32
/// of `a-z`, `0-9` and `_`, with a description of 1 to 256 characters; a
/// scope of the default, all private chats, or one chat.
fn set_my_commands(fake: &Fake, params: &Map<String, Value>) -> Response {
    let Some(Value::Array(list)) = params.get("commands") else {
        return bad("commands must be an array");
    };
    if list.len() > 100 {
        return bad("too many commands specified");
    }
    let mut commands = Vec::new();
    for c in list {
        let (Some(command), Some(description)) = (
            c.get("command").and_then(Value::as_str),
            c.get("description").and_then(Value::as_str),
        ) else {
            return bad("can't parse BotCommand");
        };
        if command.is_empty()
            || command.len() > 32
            || !command
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        {
            return bad("command is invalid");
        }
        let n = description.chars().count();
        if n == 0 || n > 256 {
            return bad("command description is invalid");
        }
        commands.push((command.to_string(), description.to_string()));
    }
    let scope = match params.get("scope") {
        None | Some(Value::Null) => "default".to_string(),
        Some(scope) => match scope.get("type").and_then(Value::as_str) {
            Some("default") => "default".to_string(),
            Some("all_private_chats") => "all_private_chats".to_string(),
            Some("chat") => match scope.get("chat_id").and_then(Value::as_i64) {
                Some(id) => format!("chat:{id}"),
                None => return bad("chat not found"),
            },
            _ => return bad("unsupported bot command scope type"),
        },
    };
    fake.state().commands.insert(scope, commands);
    fake.changed();
    ok(json!(true))
}

fn set_webhook(fake: &Fake, params: &Map<String, Value>) -> Response {
    let Some(url) = params.get("url").and_then(Value::as_str) else {
        return bad("bad webhook: url is empty");
    };
    if url.is_empty() {
        fake.state().webhook = None;
        return ok(json!(true));
    }
    let secret = match params.get("secret_token") {
        None | Some(Value::Null) => None,
        Some(Value::String(s))
            if (1..=256).contains(&s.len())
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') =>
        {
            Some(s.clone())
        }
        Some(_) => return bad("bad webhook: secret token contains unallowed characters"),
    };
    fake.state().webhook = Some(Webhook {
        url: url.to_string(),
        secret,
    });
    ok(json!(true))
}

async fn get_updates(fake: &Fake, params: &Map<String, Value>) -> Response {
    if fake.state().webhook.is_some() {
        return error(
            409,
            "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first",
        );
    }
    let offset = params.get("offset").and_then(Value::as_i64).unwrap_or(0);
    let timeout = params
        .get("timeout")
        .and_then(Value::as_u64)
        .unwrap_or(0)
        .min(50);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout);
    loop {
        let waiting = fake.updates_waiting.notified();
        {
            let mut state = fake.state();
            // An offset confirms every update below it: they are gone.
            if offset > 0 {
                while state
                    .pending
                    .front()
                    .and_then(|u| u["update_id"].as_i64())
                    .is_some_and(|id| id < offset)
                {
                    state.pending.pop_front();
                }
            }
            if !state.pending.is_empty() || tokio::time::Instant::now() >= deadline {
                let updates: Vec<Value> = state.pending.iter().take(100).cloned().collect();
                return ok(Value::Array(updates));
            }
        }
        let _ = tokio::time::timeout_at(deadline, waiting).await;
    }
}
