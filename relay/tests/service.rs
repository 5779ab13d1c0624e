//! The service around the protocol: health, readiness, metrics on their own
//! address, the OpenAPI document equal to the routes, and malformed input
//! always a 4xx with a JSON body.

use aromba_testkit::relay as support;

use serde_json::{Value, json};
use sqlx::PgPool;
use support::{Server, config, post_json, start};

#[sqlx::test(migrations = false)]
async fn healthz_and_readyz_answer(db: PgPool) {
    let relay = start(db.clone(), config()).await;
    let health = reqwest::get(relay.url("/healthz")).await.expect("answer");
    assert_eq!(health.status(), 200);
    let ready = reqwest::get(relay.url("/readyz")).await.expect("answer");
    assert_eq!(ready.status(), 200);
    // A schema behind the build is not ready, once the last answer (kept
    // for a second: the route is public) is past.
    sqlx::query("DELETE FROM _sqlx_migrations")
        .execute(&db)
        .await
        .expect("delete");
    tokio::time::sleep(aromba_relay::http::READINESS_FOR + std::time::Duration::from_millis(100))
        .await;
    let ready = reqwest::get(relay.url("/readyz")).await.expect("answer");
    assert_eq!(ready.status(), 503);
    let body: Value = ready.json().await.expect("json");
    assert_eq!(body["error"], "not_ready");
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn metrics_are_served_on_the_metrics_address_only(db: PgPool) {
    let relay = start(db.clone(), config()).await;
    let (_, _ws, _session) = support::connected(&relay).await;
    let text = relay.metrics_text().await;
    for family in [
        "aromba_relay_connected_servers",
        "aromba_relay_outbox_depth",
        "aromba_relay_delivery_latency_seconds",
        "aromba_relay_db_pool_connections",
    ] {
        assert!(text.contains(family), "{family} missing from\n{text}");
    }
    assert!(text.contains("aromba_relay_connected_servers 1"), "{text}");
    let on_api = reqwest::get(relay.url("/metrics")).await.expect("answer");
    assert_eq!(on_api.status(), 404);
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn the_openapi_document_lists_exactly_the_http_routes(db: PgPool) {
    let relay = start(db.clone(), config()).await;
    let doc: Value = reqwest::get(relay.url("/openapi.json"))
        .await
        .expect("answer")
        .json()
        .await
        .expect("json");
    assert_eq!(doc["openapi"], "3.1.0");
    let mut documented: Vec<(String, String)> = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("methods").keys() {
            documented.push((method.to_uppercase(), path.clone()));
        }
    }
    documented.sort();
    let mut routed: Vec<(String, String)> = aromba_relay::http::HTTP_ROUTES
        .iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    routed.sort();
    assert_eq!(documented, routed);
    // And every documented route answers, with no other method allowed.
    let client = reqwest::Client::new();
    for (method, path) in &documented {
        let r = client
            .request(method.parse().expect("method"), relay.url(path))
            .json(&json!({}))
            .send()
            .await
            .expect("answer");
        assert!(
            ![404, 405].contains(&r.status().as_u16()),
            "{method} {path}"
        );
        let other = if method == "GET" { "POST" } else { "GET" };
        let r = client
            .request(other.parse().expect("method"), relay.url(path))
            .send()
            .await
            .expect("answer");
        assert_eq!(r.status(), 405, "{other} {path}");
        let body: Value = r.json().await.expect("a JSON 405");
        assert_eq!(body["error"], "method_not_allowed");
    }
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn malformed_registrations_are_a_4xx_with_a_json_body(db: PgPool) {
    let relay = start(db.clone(), config()).await;
    let client = reqwest::Client::new();
    let good = Server::new().registration();
    let post = |body: Vec<u8>, content_type: Option<&'static str>| {
        let mut r = client.post(relay.url("/v1/servers")).body(body);
        if let Some(ct) = content_type {
            r = r.header("content-type", ct);
        }
        r.send()
    };
    let json_ct = Some("application/json");
    let mut unknown = good.clone();
    unknown["admin"] = json!(true);
    let mut wrong_type = good.clone();
    wrong_type["id"] = json!(42);
    let mut missing = good.clone();
    missing.as_object_mut().expect("object").remove("boot_id");
    let mut bad_source = good.clone();
    bad_source["install_source"] = json!("Curl | sh");
    let cases: Vec<(Vec<u8>, Option<&'static str>, u16)> = vec![
        (b"{not json".to_vec(), json_ct, 400),
        (b"".to_vec(), json_ct, 400),
        (b"[]".to_vec(), json_ct, 422),
        (unknown.to_string().into_bytes(), json_ct, 422),
        (wrong_type.to_string().into_bytes(), json_ct, 422),
        (missing.to_string().into_bytes(), json_ct, 422),
        (bad_source.to_string().into_bytes(), json_ct, 422),
        (good.to_string().into_bytes(), None, 415),
        (good.to_string().into_bytes(), Some("text/plain"), 415),
        (vec![b' '; 64 * 1024], json_ct, 413),
        (vec![0xff, 0xfe, 0x00], json_ct, 400),
    ];
    for (body, ct, want) in cases {
        let shown = String::from_utf8_lossy(&body[..body.len().min(40)]).into_owned();
        let r = post(body, ct).await.expect("answer");
        assert_eq!(r.status().as_u16(), want, "{shown:?} as {ct:?}");
        let answer: Value = r.json().await.expect("a JSON error body");
        assert!(
            answer["error"].is_string() && answer["message"].is_string(),
            "{answer}"
        );
    }
    let r = client
        .get(relay.url("/no/such/route"))
        .send()
        .await
        .expect("answer");
    assert_eq!(r.status(), 404);
    let body: Value = r.json().await.expect("json");
    assert_eq!(body["error"], "not_found");
    // Nothing was registered by any of it.
    assert_eq!(post_json(&relay, &good).await.0, 201);
    relay.stop().await;
}
