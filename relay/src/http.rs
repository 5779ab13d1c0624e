//! The routes. Auth lives in the hello (the WebSocket) and the address
//! limits (registration); every refusal is an [`ApiError`] with a JSON body.

use crate::address::{AddressKey, client_address};
use crate::error::ApiError;
use crate::state::App;
use axum::extract::{ConnectInfo, DefaultBodyLimit, State};
use axum::http::{Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use ipnet::IpNet;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tower_governor::GovernorLayer;
use tower_governor::governor::GovernorConfigBuilder;
use tower_governor::key_extractor::KeyExtractor;

/// Every HTTP route but the WebSocket's, as `(method, path)`: the router is
/// built from this list, and a test keeps the OpenAPI document equal to it.
pub const HTTP_ROUTES: &[(&str, &str)] = &[
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/openapi.json"),
    ("POST", "/v1/servers"),
];

/// The largest request body any route reads.
pub const MAX_BODY: usize = 2 * 1024;

/// The governor's key: the address a request counts against.
#[derive(Clone)]
pub struct AddressExtractor {
    proxies: Arc<[IpNet]>,
}

impl KeyExtractor for AddressExtractor {
    type Key = AddressKey;

    fn extract<T>(&self, req: &Request<T>) -> Result<AddressKey, tower_governor::GovernorError> {
        let peer = req
            .extensions()
            .get::<ConnectInfo<crate::tls::PeerAddr>>()
            .map(|c| c.0.0.ip())
            .ok_or(tower_governor::GovernorError::UnableToExtractKey)?;
        Ok(client_address(peer, req.headers(), &self.proxies))
    }
}

/// The API's routes. Tasks they need (the rate limiter forgetting
/// addresses not seen for a while) go in `tasks`, which end with the relay.
pub fn router(app: App, tasks: &mut tokio::task::JoinSet<()>) -> Router {
    let limits = &app.config.limits;
    let mut router = Router::new();
    for &(method, path) in HTTP_ROUTES {
        let handler = match (method, path) {
            ("GET", "/healthz") => get(healthz),
            ("GET", "/readyz") => get(readyz),
            ("GET", "/openapi.json") => get(openapi),
            ("POST", "/v1/servers") => per_address(
                &app,
                post(crate::servers::register),
                (limits.burst, limits.refill_ms),
                tasks,
                |app| app.metrics.refuse("registration_burst"),
            ),
            _ => unreachable!("every route in HTTP_ROUTES has a handler"),
        };
        router = router.route(path, handler);
    }
    router
        .route(crate::mini_app::PAGE, get(crate::mini_app::page))
        .route(crate::mini_app::SCRIPT, get(crate::mini_app::script))
        .route(
            crate::mini_app::SEAL_SCRIPT,
            get(crate::mini_app::seal_script),
        )
        .route(crate::mini_app::STYLE, get(crate::mini_app::style))
        // Anyone may open a bot's app, and each ask costs a lookup.
        .route(
            crate::mini_app::ASK,
            per_address(
                &app,
                post(crate::mini_app::ask)
                    .layer(DefaultBodyLimit::max(crate::mini_app::MAX_ASK_BODY)),
                (limits.app_burst, limits.app_refill_ms),
                tasks,
                |app| app.metrics.telegram("app_ask_rate_limited"),
            ),
        )
        .route("/v1/connect", get(crate::ws::connect))
        .route(
            crate::telegram::webhook::PATH,
            axum::routing::any(crate::telegram::webhook::receive),
        )
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(app)
}

/// `route` bounded per address: a burst of `burst`, refilled at one per
/// `refill_ms`; the limiter forgets quiet addresses each minute (a task in
/// `tasks`), and a refusal is counted by `count`.
fn per_address(
    app: &App,
    route: axum::routing::MethodRouter<App>,
    (burst, refill_ms): (u32, u64),
    tasks: &mut tokio::task::JoinSet<()>,
    count: fn(&App),
) -> axum::routing::MethodRouter<App> {
    let mut builder = GovernorConfigBuilder::default().key_extractor(AddressExtractor {
        proxies: app.config.trusted_proxies.clone().into(),
    });
    builder
        .per_millisecond(refill_ms.max(1))
        .burst_size(burst.max(1));
    let Some(config) = builder.finish().map(Arc::new) else {
        return route;
    };
    let limiter = config.limiter().clone();
    tasks.spawn(async move {
        let mut every = tokio::time::interval(Duration::from_secs(60));
        loop {
            every.tick().await;
            limiter.retain_recent();
        }
    });
    let counted = app.clone();
    route.layer(GovernorLayer::new(config).error_handler(move |_| {
        count(&counted);
        ApiError::TooManyRequests.into_response()
    }))
}

async fn healthz() -> Json<serde_json::Value> {
    Json(json!({"status": "ok"}))
}

async fn readyz(State(app): State<App>) -> Response {
    match app.readiness.check(&app.db).await {
        Ok(()) => Json(json!({"status": "ready"})).into_response(),
        Err(message) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"error": "not_ready", "message": message})),
        )
            .into_response(),
    }
}

/// How long one readiness check answers every `/readyz`.
pub const READINESS_FOR: Duration = Duration::from_secs(1);

/// `/readyz`'s answer, asked of the database at most once a
/// [`READINESS_FOR`] however often it is called (the route is public); while
/// one call asks, the others get the last answer at once instead of
/// waiting on the database beside it.
#[derive(Default)]
pub struct Readiness {
    last: std::sync::Mutex<Option<(tokio::time::Instant, Result<(), String>)>>,
    asking: tokio::sync::Mutex<()>,
}

impl Readiness {
    fn cached(&self, fresh: bool) -> Option<Result<(), String>> {
        let last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        match &*last {
            Some((at, answer)) if !fresh || at.elapsed() < READINESS_FOR => Some(answer.clone()),
            _ => None,
        }
    }

    pub async fn check(&self, db: &sqlx::PgPool) -> Result<(), String> {
        if let Some(answer) = self.cached(true) {
            return answer;
        }
        let Ok(_asking) = self.asking.try_lock() else {
            return self
                .cached(false)
                .unwrap_or_else(|| Err("the first readiness check is under way".into()));
        };
        let answer = crate::db::ready(db).await.map_err(|e| e.to_string());
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((tokio::time::Instant::now(), answer.clone()));
        answer
    }
}

async fn openapi() -> Json<serde_json::Value> {
    Json(crate::openapi::document())
}

async fn not_found() -> ApiError {
    ApiError::NotFound
}

async fn method_not_allowed() -> Response {
    (
        StatusCode::METHOD_NOT_ALLOWED,
        Json(json!({"error": "method_not_allowed", "message": "this route does not take that method"})),
    )
        .into_response()
}

/// The metrics address's only route.
pub fn metrics_router(app: App) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        // For the container's healthcheck: this address is always plain.
        .route("/readyz", get(readyz))
        .fallback(not_found)
        .with_state(app)
}

async fn metrics(State(app): State<App>) -> Response {
    let idle = app.db.num_idle() as i64;
    let size = i64::from(app.db.size());
    app.metrics
        .pool
        .get_or_create(&crate::metrics::PoolState { state: "idle" })
        .set(idle);
    app.metrics
        .pool
        .get_or_create(&crate::metrics::PoolState { state: "used" })
        .set(size - idle);
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        app.metrics.encode(),
    )
        .into_response()
}
