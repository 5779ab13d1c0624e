//! The Mini App: the page Telegram opens when the person taps a proposal's
//! Approve (a direct link `t.me/<bot>/<app>?startapp=<param>`), and its one
//! route, which passes what the page asks on to the paired server and
//! brings back the answer.
//!
//! ```text
//!  page ──POST /app/v1/ask {launch, ask}──▶ relay: the bot token's HMAC
//!    (junk early), the chat's server ──▶ outbox `app` delivery ──▶ Worker
//!  page ◀── answer ◀── NOTIFY (any replica) ◀── `app_answer` frame ◀──┘
//! ```
//!
//! The relay is a messenger here: it passes the launch on untouched, and
//! only the Warden's check of Telegram's own signature over it approves
//! anything. The page is static, ships with the relay, loads nothing from
//! anyone else (a strict Content-Security-Policy), and talks to Telegram's
//! client through the launch parameters alone.
//!
//! For an action that needs the PIN, the page seals it for the Warden
//! (`page/seal.js`: X25519 to the key the launch's `start_param` names,
//! HKDF-SHA256, AES-256-GCM) and the relay carries only the sealed bytes,
//! which it checks for shape and never keeps past their delivery.
//!
//! Map: [`launch`] (the HMAC check), [`answers`] (answers across replicas).

pub mod answers;
pub mod launch;

use crate::state::App;
use crate::telegram::words;
use aromba_relay_proto::frame::{
    AppAnswer, AppAnswerKind, AppAsk, Delivery, MAX_LAUNCH, MAX_SEALED_PIN,
};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use std::time::Duration;
use uuid::Uuid;

/// The page's paths.
pub const PAGE: &str = "/app/";
pub const SCRIPT: &str = "/app/app.js";
pub const SEAL_SCRIPT: &str = "/app/seal.js";
pub const STYLE: &str = "/app/app.css";
/// The route the page asks on.
pub const ASK: &str = "/app/v1/ask";

/// The largest body the ask route reads (a launch, a word and a sealed
/// PIN).
pub const MAX_ASK_BODY: usize = MAX_LAUNCH + MAX_SEALED_PIN + 512;

/// How long a page waits for its server.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(20);

const HTML: &str = include_str!("page/index.html");
const JS: &str = include_str!("page/app.js");
const SEAL_JS: &str = include_str!("page/seal.js");
const CSS: &str = include_str!("page/app.css");

/// Who may show the page in a frame: Telegram's web client, and whoever
/// the operator adds (the demo's chat page).
pub fn policy(frame_ancestors: &[String]) -> String {
    let ancestors = if frame_ancestors.is_empty() {
        "'none'".to_string()
    } else {
        frame_ancestors.join(" ")
    };
    format!(
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors {ancestors}"
    )
}

fn asset(app: &App, body: &'static str, kind: &'static str) -> Response {
    let ancestors = app
        .telegram
        .as_ref()
        .map(|t| t.config.app.frame_ancestors.clone())
        .unwrap_or_default();
    let mut r = body.into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    if let Ok(v) = HeaderValue::from_str(&policy(&ancestors)) {
        h.insert(header::CONTENT_SECURITY_POLICY, v);
    }
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

pub async fn page(State(app): State<App>) -> Response {
    asset(&app, HTML, "text/html; charset=utf-8")
}

pub async fn script(State(app): State<App>) -> Response {
    asset(&app, JS, "text/javascript; charset=utf-8")
}

/// The page's sealing of the PIN for the Warden (WebCrypto only).
pub async fn seal_script(State(app): State<App>) -> Response {
    asset(&app, SEAL_JS, "text/javascript; charset=utf-8")
}

pub async fn style(State(app): State<App>) -> Response {
    asset(&app, CSS, "text/css; charset=utf-8")
}

fn refusal(status: StatusCode, code: &str, message: &str) -> Response {
    let mut r = (
        status,
        axum::Json(json!({"error": code, "message": message})),
    )
        .into_response();
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Ask {
    launch: String,
    ask: AppAsk,
    /// The PIN sealed for the Warden, with an approval that needs it.
    #[serde(default)]
    sealed_pin: Option<String>,
    /// With `undo` (the Trust page's Undo link): the run's undo id.
    #[serde(default)]
    undo: Option<String>,
}

/// `POST /app/v1/ask`: what the page asks, passed to the paired server;
/// its answer, or why there is none.
pub async fn ask(State(app): State<App>, body: Bytes) -> Response {
    let Some(telegram) = app.telegram.clone() else {
        return refusal(StatusCode::NOT_FOUND, "not_found", "no such route");
    };
    let Ok(Ask {
        launch,
        ask,
        sealed_pin,
        undo,
    }) = serde_json::from_slice::<Ask>(&body)
    else {
        app.metrics.telegram("app_ask_malformed");
        return refusal(
            StatusCode::BAD_REQUEST,
            "bad_request",
            words::APP_NOT_FROM_TELEGRAM,
        );
    };
    let sealed_in_place = sealed_pin
        .as_deref()
        .is_none_or(|s| ask == AppAsk::Approve && aromba_relay_proto::frame::valid_sealed_pin(s));
    if !sealed_in_place {
        app.metrics.telegram("app_ask_malformed");
        return refusal(
            StatusCode::BAD_REQUEST,
            "bad_request",
            words::APP_PIN_UNREADABLE,
        );
    }
    if aromba_relay_proto::frame::check_undo(ask, undo.as_deref()).is_err() {
        app.metrics.telegram("app_ask_malformed");
        return refusal(
            StatusCode::BAD_REQUEST,
            "bad_request",
            words::APP_UNDO_UNREADABLE,
        );
    }
    let now = app.config.clock.now().timestamp();
    let checked = match launch::check(&launch, telegram.config.token.expose(), now) {
        Ok(c) => c,
        Err(why) => {
            app.metrics.telegram(why.kind());
            return refusal(
                StatusCode::UNAUTHORIZED,
                "launch_refused",
                words::APP_NOT_FROM_TELEGRAM,
            );
        }
    };
    let server = match crate::store::pairings::server_of_chat(&app.db, checked.user).await {
        Ok(Some(s)) => s,
        Ok(None) => {
            app.metrics.telegram("app_ask_unpaired");
            return refusal(StatusCode::NOT_FOUND, "not_paired", words::APP_NOT_PAIRED);
        }
        Err(e) => {
            tracing::warn!(error = %e, "the app's server could not be looked up");
            return refusal(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                words::APP_BUSY,
            );
        }
    };
    let request = Uuid::new_v4();
    let answer = match app.app_answers.wait(request, server) {
        Ok(a) => a,
        Err(answers::Full::Server) => {
            app.metrics.telegram("app_ask_too_many_for_server");
            return refusal(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                words::APP_WAITING,
            );
        }
        Err(answers::Full::Replica) => {
            app.metrics.telegram("app_ask_too_many");
            return refusal(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                words::APP_BUSY,
            );
        }
    };
    let delivery = Delivery::App {
        request,
        ask,
        launch,
        sealed_pin,
        undo,
    };
    if delivery.check().is_err() || app.enqueue(server, &delivery).await.is_err() {
        app.app_answers.forget(request);
        return refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            words::APP_BUSY,
        );
    }
    app.metrics.telegram("app_ask_forwarded");
    match tokio::time::timeout(ANSWER_WITHIN, answer).await {
        Ok(Ok(answer)) => answered(answer),
        _ => {
            app.app_answers.forget(request);
            app.metrics.telegram("app_ask_unanswered");
            refusal(
                StatusCode::GATEWAY_TIMEOUT,
                "server_silent",
                words::APP_SERVER_SILENT,
            )
        }
    }
}

fn answered(answer: AppAnswer) -> Response {
    let mut r = axum::Json(answer).into_response();
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// `server` answered `request` with an answer out of bounds (refused, and
/// its connection ended): the page waiting for it is told so now, in the
/// relay's words, rather than after [`ANSWER_WITHIN`]. Only a page waiting
/// for this server's own request takes it.
pub async fn answer_unreadable(app: &App, server: Uuid, request: Uuid) {
    app.metrics.telegram("app_answer_unreadable");
    let answer = AppAnswer::said(AppAnswerKind::Closed, words::APP_ANSWER_UNREADABLE);
    forward_answer(app, server, request, &answer).await;
}

/// An `app_answer` frame from `server`'s connection: to the page, wherever
/// it waits.
pub async fn forward_answer(app: &App, server: Uuid, request: Uuid, answer: &AppAnswer) {
    let payloads = answers::payloads(request, server, answer);
    if let Err(e) = crate::store::notify_all(&app.db, answers::CHANNEL, &payloads).await {
        tracing::warn!(server = %server, error = %e, "an app answer could not be passed on");
    }
}
