//! Anyone on the Internet against `POST /v1/servers`, which needs no
//! account. What they try: the same new server registered from eight
//! addresses at once, a known server's id claimed from forty addresses
//! (each claim a duplicate case the server's owner must decide),
//! malformed registrations that cost nothing, and made-up install sources
//! (what the relay keeps for good is a count per day and source). What
//! holds: no registration answers 5xx, a server's open cases are bounded,
//! a refused request costs its address the day's count like an accepted
//! one, and a client cannot mint permanent rows.

use aromba_testkit::relay as support;

use serde_json::json;
use sqlx::PgPool;
use std::sync::Arc;
use support::{Server, behind_proxy, config, post_from, post_json, start};

#[sqlx::test(migrations = false)]
async fn concurrent_registrations_of_one_new_server_never_answer_5xx(db: PgPool) {
    // Two requests from different addresses do not share a count row, so
    // nothing serialises them: both find no server, both insert, and the
    // primary key turns the second into an internal error.
    let relay = start(db.clone(), behind_proxy()).await;
    let relay = Arc::new(relay);
    let mut statuses = Vec::new();
    for round in 0..20u32 {
        let server = Server::new();
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..8u32 {
            let relay = relay.clone();
            let body = server.registration();
            tasks.spawn(async move {
                post_from(&relay, &format!("198.51.{round}.{}", i + 1), &body).await
            });
        }
        while let Some(status) = tasks.join_next().await {
            statuses.push(status.expect("task"));
        }
    }
    let failed = statuses.iter().filter(|s| **s >= 500).count();
    assert_eq!(
        failed,
        0,
        "{failed} of {} registrations answered 5xx",
        statuses.len()
    );
    if let Ok(relay) = Arc::try_unwrap(relay) {
        relay.stop().await;
    }
}

#[sqlx::test(migrations = false)]
async fn duplicate_cases_for_one_server_are_bounded(db: PgPool) {
    // Each registration of a known id with a fresh boot id opens a case the
    // chat must decide. The only bound is per address and per day, so a
    // handful of addresses (an IPv6 /48 holds 65,536 /64s) flood one
    // server's owner with cases and the database with rows.
    let relay = start(db.clone(), behind_proxy()).await;
    let victim = Server::new();
    assert_eq!(post_json(&relay, &victim.registration()).await.0, 201);
    for i in 0..40u32 {
        let mut claimant = Server::new();
        claimant.id = victim.id;
        let _ = post_from(
            &relay,
            &format!("2001:db8:{i:x}::1"),
            &claimant.registration(),
        )
        .await;
    }
    let cases: i64 =
        sqlx::query_scalar("SELECT count(*) FROM duplicate_cases WHERE server_id = $1")
            .bind(victim.id)
            .fetch_one(&db)
            .await
            .expect("count");
    assert!(cases <= 8, "{cases} open duplicate cases for one server");
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn malformed_registrations_count_against_the_daily_limit(db: PgPool) {
    // The daily count is taken inside the handler after the JSON extractor
    // and the shape checks, so 4xx requests cost an address nothing there.
    let mut c = config();
    c.limits.registrations_per_day = 3;
    let relay = start(db.clone(), c).await;
    let mut invalid = Server::new().registration();
    invalid["install_source"] = json!("Not Valid");
    for _ in 0..3 {
        assert_eq!(post_json(&relay, &invalid).await.0, 422);
    }
    let (status, _) = post_json(&relay, &Server::new().registration()).await;
    assert_eq!(status, 429, "three refused requests did not use up the day");
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn install_sources_kept_for_good_are_not_chosen_by_the_client(db: PgPool) {
    // What the relay keeps forever is a count per day and install source.
    // Any `[a-z0-9-]{1,32}` is a source, so each registration can mint a
    // new permanent row (and write 32 characters of its choice into the
    // statistics); the servers themselves are erased after 24 hours.
    let relay = start(db.clone(), config()).await;
    for i in 0..40u32 {
        let mut reg = Server::new().registration();
        reg["install_source"] = json!(format!("made-up-{i}"));
        let _ = post_json(&relay, &reg).await;
    }
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM daily_counts")
        .fetch_one(&db)
        .await
        .expect("count");
    assert!(
        rows <= 8,
        "{rows} permanent count rows from 40 anonymous registrations"
    );
    relay.stop().await;
}
