//! PostgreSQL restarted under load: a private cluster of the test's own
//! (`aromba_testkit::postgres`), restarted
//! while deliveries are being queued; every delivery whose enqueue
//! committed still reaches its server, once.

use aromba_testkit::relay as support;

use aromba_relay_proto::client::{Outgoing, run};
use aromba_relay_proto::frame::Delivery;
use aromba_testkit::postgres::PrivatePostgres;
use sqlx::postgres::PgPoolOptions;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{Server, config, post_json, start};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restarted_under_load_loses_no_committed_delivery() {
    let pg = tokio::task::spawn_blocking(PrivatePostgres::start)
        .await
        .expect("started");
    let db = PgPoolOptions::new()
        .max_connections(8)
        .connect(&pg.url())
        .await
        .expect("the private PostgreSQL answers");
    let relay = start(db.clone(), config()).await;
    let seen = Arc::new(Mutex::new(HashMap::<i64, u32>::new()));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut servers = Vec::new();
    let mut keep = Vec::new();
    for _ in 0..5 {
        let server = Server::new();
        assert_eq!(post_json(&relay, &server.registration()).await.0, 201);
        let (tx, rx) = tokio::sync::mpsc::channel::<Outgoing>(1);
        keep.push(tx);
        let record = seen.clone();
        tokio::spawn(run(
            server.endpoint(&relay),
            move |id, _| {
                *record.lock().expect("lock").entry(id).or_default() += 1;
            },
            rx,
            stopped.clone(),
        ));
        servers.push(server);
    }
    // Load: enqueue as fast as the database lets us, through a restart.
    let committed = Arc::new(Mutex::new(Vec::<i64>::new()));
    let load = {
        let (db, committed) = (db.clone(), committed.clone());
        let ids: Vec<_> = servers.iter().map(|s| s.id).collect();
        tokio::spawn(async move {
            let until = tokio::time::Instant::now() + Duration::from_secs(4);
            let mut i = 0usize;
            while tokio::time::Instant::now() < until {
                let d = Delivery::Message {
                    text: format!("m{i}"),
                };
                if let Ok((id, _)) = aromba_relay::outbox::enqueue(
                    &db,
                    ids[i % ids.len()],
                    &d,
                    chrono::Utc::now(),
                    500,
                )
                .await
                {
                    committed.lock().expect("lock").push(id);
                }
                i += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let pg = tokio::task::spawn_blocking(move || {
        pg.restart();
        pg
    })
    .await
    .expect("restarted");
    load.await.expect("load");
    let committed = committed.lock().expect("lock").clone();
    assert!(committed.len() > 100, "only {} enqueued", committed.len());
    let mut all = false;
    for _ in 0..1_200 {
        let arrived = {
            let seen = seen.lock().expect("lock");
            committed.iter().all(|id| seen.contains_key(id))
        };
        if arrived {
            all = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let seen = seen.lock().expect("lock").clone();
    let missing = committed.iter().filter(|id| !seen.contains_key(id)).count();
    assert!(
        all,
        "{missing} of {} committed deliveries never arrived",
        committed.len()
    );
    assert!(
        seen.values().all(|&n| n == 1),
        "a delivery was handled twice"
    );
    let _ = stop.send(true);
    relay.stop().await;
    drop(pg);
}
