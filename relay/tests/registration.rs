//! Registration: the stored hash, idempotence, the duplicate case, the
//! per-address limits, the 24-hour erasure.

use aromba_testkit::relay as support;

use aromba_relay::clock::ManualClock;
use serde_json::json;
use sqlx::PgPool;
use std::sync::Arc;
use support::{Server, TEST_PEPPER, config, post_json, start};

#[sqlx::test(migrations = false)]
async fn registers_and_stores_only_the_tokens_keyed_hash(db: PgPool) {
    let relay = start(db.clone(), config()).await;
    let server = Server::new();
    let (status, body) = post_json(&relay, &server.registration()).await;
    assert_eq!(status, 201);
    assert_eq!(body, json!({"outcome": "registered"}));

    let stored: Vec<u8> = sqlx::query_scalar("SELECT token_hash FROM servers WHERE id = $1")
        .bind(server.id)
        .fetch_one(&db)
        .await
        .expect("the row");
    let pepper = aromba_relay::Pepper::new(TEST_PEPPER).expect("pepper");
    assert_eq!(
        stored,
        aromba_relay::hashing::token_hash(&pepper, &server.token)
    );
    // The token itself is nowhere in the database.
    let dump: String =
        sqlx::query_scalar("SELECT coalesce(string_agg(s::text, ''), '') FROM servers s")
            .fetch_one(&db)
            .await
            .expect("dump");
    assert!(!dump.contains(&server.token.expose()[4..]));
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn the_same_registration_again_is_an_idempotent_200(db: PgPool) {
    let relay = start(db.clone(), config()).await;
    let server = Server::new();
    assert_eq!(post_json(&relay, &server.registration()).await.0, 201);
    let (status, body) = post_json(&relay, &server.registration()).await;
    assert_eq!(status, 200);
    assert_eq!(body, json!({"outcome": "unchanged"}));
    let installs: i32 = sqlx::query_scalar("SELECT sum(installs)::int FROM daily_counts")
        .fetch_one(&db)
        .await
        .expect("counts");
    assert_eq!(installs, 1);
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn another_boot_id_opens_a_duplicate_case_and_never_overwrites(db: PgPool) {
    let relay = start(db.clone(), config()).await;
    let server = Server::new();
    assert_eq!(post_json(&relay, &server.registration()).await.0, 201);
    let mut clone = Server::new();
    clone.id = server.id;
    let (status, body) = post_json(&relay, &clone.registration()).await;
    assert_eq!(status, 202);
    assert_eq!(body, json!({"outcome": "duplicate"}));
    let (boot, cases): (uuid::Uuid, i64) = sqlx::query_as(
        "SELECT s.boot_id, (SELECT count(*) FROM duplicate_cases d WHERE d.server_id = s.id) FROM servers s WHERE s.id = $1",
    )
    .bind(server.id)
    .fetch_one(&db)
    .await
    .expect("row");
    assert_eq!(boot, server.boot_id, "the record was overwritten");
    assert_eq!(cases, 1);
    // The original token still connects; the newcomer's does not.
    let _ = support::connect(&relay, &server).await;
    let mut ws = aromba_relay_proto::client::dial(&clone.endpoint(&relay))
        .await
        .expect("dial");
    assert!(
        aromba_relay_proto::client::handshake(&mut ws, &clone.endpoint(&relay))
            .await
            .is_err()
    );
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn the_same_id_and_boot_with_another_token_is_a_conflict(db: PgPool) {
    let relay = start(db.clone(), config()).await;
    let server = Server::new();
    assert_eq!(post_json(&relay, &server.registration()).await.0, 201);
    let mut thief = server.clone();
    thief.token = aromba_relay_proto::token::ServerToken::generate();
    let (status, body) = post_json(&relay, &thief.registration()).await;
    assert_eq!(status, 409);
    assert_eq!(body["error"], "conflict");
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn refuses_every_token_not_of_the_fixed_format(db: PgPool) {
    let relay = start(db.clone(), config()).await;
    let good = Server::new();
    let body = &good.token.expose()[4..];
    for bad in [
        String::new(),
        "hunter2".to_string(),
        body.to_string(),
        format!("arb_{}", &body[..42]),
        format!("arb_{body}A"),
        format!("arb_{}+", &body[..42]),
        format!("ARB_{body}"),
    ] {
        let mut reg = good.registration();
        reg["token"] = json!(bad);
        let (status, answer) = post_json(&relay, &reg).await;
        assert_eq!(status, 422, "{bad}: {answer}");
        assert_eq!(answer["error"], "invalid");
    }
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM servers")
        .fetch_one(&db)
        .await
        .expect("count");
    assert_eq!(rows, 0);
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn the_daily_limit_holds_across_a_restart_and_a_second_replica(db: PgPool) {
    let mut c = config();
    c.limits.registrations_per_day = 3;
    c.limits.burst = 100;
    let first = start(db.clone(), c.clone()).await;
    for _ in 0..2 {
        assert_eq!(
            post_json(&first, &Server::new().registration()).await.0,
            201
        );
    }
    first.stop().await;
    let second = start(db.clone(), c.clone()).await;
    let third = start(db.clone(), c).await;
    assert_eq!(
        post_json(&second, &Server::new().registration()).await.0,
        201
    );
    let (status, body) = post_json(&third, &Server::new().registration()).await;
    assert_eq!(status, 429);
    assert_eq!(body["error"], "rate_limited");
    second.stop().await;
    third.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_spoofed_forwarded_for_from_an_untrusted_peer_earns_no_fresh_bucket(db: PgPool) {
    let mut c = config();
    c.limits.burst = 2;
    c.limits.refill_ms = 600_000;
    c.limits.registrations_per_day = 1_000;
    let relay = start(db.clone(), c).await;
    let client = reqwest::Client::new();
    let mut statuses = Vec::new();
    for i in 0..5 {
        let r = client
            .post(relay.url("/v1/servers"))
            .header("X-Forwarded-For", format!("198.51.100.{i}"))
            .json(&Server::new().registration())
            .send()
            .await
            .expect("answer");
        statuses.push(r.status().as_u16());
    }
    assert_eq!(statuses, vec![201, 201, 429, 429, 429]);
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn behind_a_trusted_proxy_each_client_has_its_own_bucket(db: PgPool) {
    let mut c = config();
    c.limits.burst = 1;
    c.limits.refill_ms = 600_000;
    c.trusted_proxies = aromba_relay::config::parse_proxies("127.0.0.1/32").expect("cidr");
    let relay = start(db.clone(), c).await;
    let client = reqwest::Client::new();
    let post = |xff: &'static str| {
        client
            .post(relay.url("/v1/servers"))
            .header("X-Forwarded-For", xff)
            .json(&Server::new().registration())
            .send()
    };
    assert_eq!(post("203.0.113.1").await.expect("answer").status(), 201);
    assert_eq!(post("203.0.113.1").await.expect("answer").status(), 429);
    // A client-written entry left of the real one changes nothing.
    assert_eq!(
        post("10.9.9.9, 203.0.113.1")
            .await
            .expect("answer")
            .status(),
        429
    );
    assert_eq!(post("203.0.113.2").await.expect("answer").status(), 201);
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn unpaired_servers_are_erased_after_24_hours(db: PgPool) {
    let clock = Arc::new(ManualClock::new(chrono::Utc::now()));
    let mut c = config();
    c.clock = clock.clone();
    let relay = start(db.clone(), c).await;
    let early = Server::new();
    assert_eq!(post_json(&relay, &early.registration()).await.0, 201);
    clock.advance(chrono::Duration::hours(12));
    let late = Server::new();
    assert_eq!(post_json(&relay, &late.registration()).await.0, 201);
    let exists = |id: uuid::Uuid| {
        let db = db.clone();
        async move {
            sqlx::query_scalar::<_, i64>("SELECT count(*) FROM servers WHERE id = $1")
                .bind(id)
                .fetch_one(&db)
                .await
                .expect("count")
                == 1
        }
    };
    clock.advance(chrono::Duration::hours(12) - chrono::Duration::seconds(1));
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(exists(early.id).await, "erased before 24 hours");
    clock.advance(chrono::Duration::seconds(1));
    let mut gone = false;
    for _ in 0..100 {
        if !exists(early.id).await {
            gone = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(gone, "not erased at 24 hours");
    assert!(exists(late.id).await);
    // The install is still counted: counts are kept for good.
    let installs: i32 = sqlx::query_scalar("SELECT sum(installs)::int FROM daily_counts")
        .fetch_one(&db)
        .await
        .expect("counts");
    assert_eq!(installs, 2);
    relay.stop().await;
}
