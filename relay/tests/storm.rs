//! A reconnect storm: a few thousand servers, each running the real client,
//! all come back after the relay restarts.

use aromba_testkit::relay as support;

use aromba_relay_proto::client::{Endpoint, Outgoing, run};
use aromba_relay_proto::token::ServerToken;
use sqlx::PgPool;
use std::time::Duration;
use support::{TEST_PEPPER, config, free_port, start_on};
use uuid::Uuid;

const SERVERS: usize = 2_000;

/// Every server and the relay's side of it hold a descriptor in this one
/// process.
fn raise_descriptor_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("getrlimit");
    setrlimit(Resource::RLIMIT_NOFILE, hard, hard).expect("setrlimit");
}

async fn connected(metrics: std::net::SocketAddr) -> usize {
    let Ok(r) = reqwest::get(format!("http://{metrics}/metrics")).await else {
        return 0;
    };
    let text = r.text().await.unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("aromba_relay_connected_servers "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

async fn wait_for_all(metrics: std::net::SocketAddr) -> usize {
    let mut seen = 0;
    for _ in 0..1_200 {
        seen = connected(metrics).await;
        if seen == SERVERS {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    seen
}

#[sqlx::test(migrations = false)]
async fn a_reconnect_storm_of_two_thousand_servers_all_come_back(db: PgPool) {
    raise_descriptor_limit();
    let port = free_port();
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .expect("bind");
    let relay = start_on(db.clone(), config(), listener).await;

    // Registered directly: the storm is about the hello, not registration.
    let pepper = aromba_relay::Pepper::new(TEST_PEPPER).expect("pepper");
    let mut endpoints = Vec::with_capacity(SERVERS);
    for _ in 0..SERVERS {
        let (id, token) = (Uuid::new_v4(), ServerToken::generate());
        sqlx::query(
            "INSERT INTO servers (id, token_hash, boot_id, install_source, registered_at)
             VALUES ($1, $2, $3, 'test', now())",
        )
        .bind(id)
        .bind(&aromba_relay::hashing::token_hash(&pepper, &token)[..])
        .bind(Uuid::new_v4())
        .execute(&db)
        .await
        .expect("insert");
        endpoints.push(Endpoint::new(
            format!("ws://127.0.0.1:{port}/v1/connect"),
            id,
            token,
            None,
        ));
    }
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut senders = Vec::with_capacity(SERVERS);
    for endpoint in endpoints {
        let (tx, rx) = tokio::sync::mpsc::channel::<Outgoing>(1);
        senders.push(tx);
        tokio::spawn(run(endpoint, |_, _| {}, rx, stopped.clone()));
    }
    let metrics = relay.metrics;
    assert_eq!(
        wait_for_all(metrics).await,
        SERVERS,
        "not all connected at first"
    );

    relay.stop().await;
    let listener = loop {
        match tokio::net::TcpListener::bind(("127.0.0.1", port)).await {
            Ok(l) => break l,
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    };
    let again = start_on(db.clone(), config(), listener).await;
    let back = wait_for_all(again.metrics).await;
    assert_eq!(back, SERVERS, "{back} of {SERVERS} came back");
    let _ = stop.send(true);
    again.stop().await;
}
