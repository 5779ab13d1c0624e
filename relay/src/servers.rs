//! `POST /v1/servers`: a server registers the id and token it generated.
//!
//! The relay keeps `HMAC-SHA256(pepper, token)`, never the token. The same
//! id, token and boot id again is an idempotent 200. A known id with another
//! boot id never overwrites the record: it opens a duplicate case that the
//! chat decides. A known id with the same boot id and another token is a
//! conflict. Every request first counts against its address's daily limit,
//! which PostgreSQL keeps across replicas and restarts.

use crate::address::client_address;
use crate::error::{ApiBytes, ApiError, parse_json};
use crate::hashing::{address_hash, same, token_hash};
use crate::state::App;
use crate::store;
use aromba_relay_proto::token::ServerToken;
use axum::Json;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Registration {
    pub id: Uuid,
    pub token: ServerToken,
    pub boot_id: Uuid,
    pub install_source: String,
}

#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Outcome {
    /// Newly registered.
    Registered,
    /// Already registered exactly so.
    Unchanged,
    /// The id is known from another boot: the chat decides.
    Duplicate,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Registered {
    pub outcome: Outcome,
}

/// How a server can have been installed. A closed list: the counts per
/// install source are kept for good, so a client may not add rows of its
/// own choosing to them.
pub(crate) const INSTALL_SOURCES: &[&str] = &[
    "deb", "tarball", "script", "docker", "source", "demo", "test",
];

/// Open duplicate cases one server may have; past that, registrations for
/// its id are refused until the chat decides (or the cases expire).
pub(crate) const MAX_DUPLICATE_CASES: i64 = 8;

pub(crate) fn valid_install_source(s: &str) -> bool {
    INSTALL_SOURCES.contains(&s)
}

pub(crate) async fn register(
    State(app): State<App>,
    ConnectInfo(crate::tls::PeerAddr(peer)): ConnectInfo<crate::tls::PeerAddr>,
    headers: HeaderMap,
    ApiBytes(body): ApiBytes,
) -> Result<(StatusCode, Json<Registered>), ApiError> {
    let now = app.config.clock.now();
    let address = client_address(peer.ip(), &headers, &app.config.trusted_proxies);
    let address = address_hash(&app.config.pepper, address);
    // Every request counts against its address's day, before it is judged:
    // malformed ones use up the day too.
    let count = store::registration_counts::count_one(&app.db, &address[..], now.date_naive())
        .await
        .map_err(ApiError::internal)?;
    if i64::from(count) > i64::from(app.config.limits.registrations_per_day) {
        app.metrics.refuse("registration_daily_limit");
        return Err(ApiError::TooManyRequests);
    }
    let reg: Registration = parse_json(&headers, &body)?;
    if !valid_install_source(&reg.install_source) {
        return Err(ApiError::Unprocessable(format!(
            "install_source is one of {}",
            INSTALL_SOURCES.join(", ")
        )));
    }
    if reg.id.is_nil() || reg.boot_id.is_nil() {
        return Err(ApiError::Unprocessable(
            "id and boot_id must not be nil".into(),
        ));
    }
    let hash = token_hash(&app.config.pepper, &reg.token);
    let mut tx = app.db.begin().await.map_err(ApiError::internal)?;
    // Insert first: two concurrent registrations of one new id cannot both
    // see "no row" (a lock on a row that does not exist locks nothing).
    let inserted = store::servers::insert_new(
        &mut *tx,
        store::servers::NewServer {
            id: reg.id,
            token_hash: &hash[..],
            boot_id: reg.boot_id,
            install_source: &reg.install_source,
            registered_at: now,
        },
    )
    .await
    .map_err(ApiError::internal)?;
    let outcome = if inserted.is_some() {
        store::daily_counts::count_install(&mut *tx, now.date_naive(), &reg.install_source)
            .await
            .map_err(ApiError::internal)?;
        Outcome::Registered
    } else {
        let known = store::servers::lock_identity(&mut *tx, reg.id)
            .await
            .map_err(ApiError::internal)?;
        if known.boot_id == reg.boot_id {
            if !same(&known.token_hash, &hash) {
                tx.commit().await.map_err(ApiError::internal)?;
                app.metrics.refuse("registration_conflict");
                return Err(ApiError::Conflict);
            }
            Outcome::Unchanged
        } else {
            let open = store::duplicate_cases::count_open(&mut *tx, reg.id)
                .await
                .map_err(ApiError::internal)?;
            let known_case = store::duplicate_cases::count_of_boot(&mut *tx, reg.id, reg.boot_id)
                .await
                .map_err(ApiError::internal)?;
            if known_case == 0 && open >= MAX_DUPLICATE_CASES {
                tx.commit().await.map_err(ApiError::internal)?;
                app.metrics.refuse("duplicate_cases_full");
                return Err(ApiError::TooManyRequests);
            }
            store::duplicate_cases::open(&mut *tx, reg.id, reg.boot_id, &hash[..], now)
                .await
                .map_err(ApiError::internal)?;
            Outcome::Duplicate
        }
    };
    tx.commit().await.map_err(ApiError::internal)?;
    let (status, label) = match outcome {
        Outcome::Registered => (StatusCode::CREATED, "registered"),
        Outcome::Unchanged => (StatusCode::OK, "unchanged"),
        Outcome::Duplicate => (StatusCode::ACCEPTED, "duplicate"),
    };
    app.metrics
        .registrations
        .get_or_create(&crate::metrics::Reason { reason: label })
        .inc();
    tracing::info!(server = %reg.id, outcome = label, "registration");
    Ok((status, Json(Registered { outcome })))
}
