//! Group commit: enqueues and acknowledgements written a batch per
//! transaction keep every promise a single write made — order per server,
//! the bound, a server's rows its own, nothing queued lost at shutdown.

use aromba_testkit::relay as support;

use aromba_relay::outbox::{Enqueue, Enqueued, acknowledge_batch, enqueue_batch};
use aromba_relay_proto::frame::Delivery;
use sqlx::PgPool;
use std::time::Duration;
use support::{Server, config};
use uuid::Uuid;

fn message(text: &str) -> Delivery {
    Delivery::Message { text: text.into() }
}

async fn migrated(db: &PgPool) {
    aromba_relay::db::MIGRATOR.run(db).await.expect("migrate");
}

async fn registered(db: &PgPool) -> Uuid {
    let server = Server::new();
    sqlx::query(
        "INSERT INTO servers (id, token_hash, boot_id, install_source, registered_at)
         VALUES ($1, $2, $3, 'test', now())",
    )
    .bind(server.id)
    .bind(server.id.as_bytes().repeat(2))
    .bind(server.boot_id)
    .execute(db)
    .await
    .expect("insert");
    server.id
}

fn one(server: Uuid, text: &str) -> Enqueue {
    Enqueue {
        server,
        delivery: message(text),
        now: chrono::Utc::now(),
    }
}

/// The texts waiting for `server`, oldest (lowest id) first.
async fn waiting(db: &PgPool, server: Uuid) -> Vec<String> {
    let rows: Vec<serde_json::Value> =
        sqlx::query_scalar("SELECT delivery FROM outbox WHERE server_id = $1 ORDER BY id")
            .bind(server)
            .fetch_all(db)
            .await
            .expect("rows");
    rows.into_iter()
        .map(|d| d["text"].as_str().expect("a message").to_string())
        .collect()
}

#[sqlx::test(migrations = false)]
async fn a_batch_keeps_each_servers_order_and_refuses_only_the_unknown(db: PgPool) {
    migrated(&db).await;
    let (a, b, nobody) = (registered(&db).await, registered(&db).await, Uuid::new_v4());
    let batch = [
        one(a, "a1"),
        one(b, "b1"),
        one(nobody, "lost"),
        one(a, "a2"),
        one(b, "b2"),
        one(a, "a3"),
    ];
    let done = enqueue_batch(&db, &batch, 100).await.expect("enqueue");
    assert_eq!(done.dropped, 0);
    assert_eq!(done.each[2], Enqueued::UnknownServer);
    let ids: Vec<i64> = done
        .each
        .iter()
        .filter_map(|e| match e {
            Enqueued::Queued(id) => Some(*id),
            Enqueued::UnknownServer | Enqueued::Refused(_) => None,
        })
        .collect();
    assert_eq!(ids.len(), 5);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    assert_eq!(waiting(&db, a).await, ["a1", "a2", "a3"]);
    assert_eq!(waiting(&db, b).await, ["b1", "b2"]);
}

#[sqlx::test(migrations = false)]
async fn a_batch_of_only_unknown_servers_writes_nothing(db: PgPool) {
    migrated(&db).await;
    let done = enqueue_batch(&db, &[one(Uuid::new_v4(), "x")], 100)
        .await
        .expect("enqueue");
    assert_eq!(done.each, [Enqueued::UnknownServer]);
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM outbox")
        .fetch_one(&db)
        .await
        .expect("count");
    assert_eq!(n, 0);
}

#[sqlx::test(migrations = false)]
async fn a_batch_larger_than_the_bound_keeps_only_the_newest(db: PgPool) {
    migrated(&db).await;
    let (a, b) = (registered(&db).await, registered(&db).await);
    enqueue_batch(&db, &[one(a, "old")], 3)
        .await
        .expect("first");
    let batch: Vec<Enqueue> = (0..5)
        .map(|i| one(a, &format!("new{i}")))
        .chain([one(b, "b")])
        .collect();
    let done = enqueue_batch(&db, &batch, 3).await.expect("enqueue");
    assert_eq!(done.dropped, 3, "the old one and the two oldest new ones");
    assert_eq!(waiting(&db, a).await, ["new2", "new3", "new4"]);
    assert_eq!(
        waiting(&db, b).await,
        ["b"],
        "another server's rows untouched"
    );
}

#[sqlx::test(migrations = false)]
async fn an_acknowledgement_batch_never_deletes_another_servers_row(db: PgPool) {
    migrated(&db).await;
    let (a, b) = (registered(&db).await, registered(&db).await);
    let done = enqueue_batch(&db, &[one(a, "a"), one(b, "b")], 100)
        .await
        .expect("enqueue");
    let [Enqueued::Queued(row_a), Enqueued::Queued(row_b)] = done.each[..] else {
        panic!("both queued: {:?}", done.each);
    };
    // B names A's row (and its own twice): only B's row goes, once.
    let deleted = acknowledge_batch(&db, &[(b, row_a), (b, row_b), (b, row_b)])
        .await
        .expect("acknowledge");
    assert_eq!(deleted.len(), 1);
    assert_eq!(waiting(&db, a).await, ["a"]);
    assert!(waiting(&db, b).await.is_empty());
}

#[sqlx::test(migrations = false)]
async fn concurrent_writers_share_commits_and_lose_nothing(db: PgPool) {
    migrated(&db).await;
    let servers = [registered(&db).await, registered(&db).await];
    let (_tx, rx) = tokio::sync::watch::channel(None);
    let (app, writers) = aromba_relay::App::new(db.clone(), config(), rx, None);
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..16 {
        let app = app.clone();
        tasks.spawn(async move {
            let mut ids = Vec::new();
            for i in 0..25 {
                let server = servers[(w + i) % 2];
                let id = app
                    .enqueue(server, &message(&format!("w{w}-{i}")))
                    .await
                    .expect("enqueue");
                ids.push((server, id));
            }
            ids
        });
    }
    let mut all = Vec::new();
    while let Some(ids) = tasks.join_next().await {
        all.extend(ids.expect("writer"));
    }
    assert_eq!(all.len(), 400);
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM outbox")
        .fetch_one(&db)
        .await
        .expect("count");
    assert_eq!(stored, 400);
    // Each writer's own messages are in its order, per server.
    for server in servers {
        let texts = waiting(&db, server).await;
        for w in 0..16 {
            let mine: Vec<usize> = texts
                .iter()
                .filter_map(|t| t.strip_prefix(&format!("w{w}-")))
                .map(|i| i.parse().expect("a number"))
                .collect();
            assert!(mine.windows(2).all(|p| p[0] < p[1]), "{mine:?}");
        }
    }
    // Acknowledged, then the relay stops at once: every row is deleted.
    for (server, id) in &all {
        app.writer.acknowledge(*server, *id).await.expect("queued");
    }
    writers.drain(Duration::from_secs(10)).await;
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM outbox")
        .fetch_one(&db)
        .await
        .expect("count");
    assert_eq!(
        left, 0,
        "every acknowledgement queued before the stop was written"
    );
    let after = app.enqueue(servers[0], &message("late")).await;
    assert!(
        matches!(after, Err(aromba_relay::writer::WriterError::Closed)),
        "a write after the stop is refused: {after:?}"
    );
}

#[sqlx::test(migrations = false)]
async fn a_server_named_twice_in_one_batch_gets_two_generations_the_later_higher(db: PgPool) {
    migrated(&db).await;
    let (a, b) = (registered(&db).await, registered(&db).await);
    let before = aromba_relay::outbox::generation(&db, a).await.expect("a");
    let each = aromba_relay::outbox::next_generations(&db, &[a, b, Uuid::new_v4(), a])
        .await
        .expect("bump");
    assert_eq!(each[0], Some(before + 1));
    assert_eq!(each[3], Some(before + 2), "the later hello wins");
    assert_eq!(each[2], None, "an unknown server has none");
    assert!(each[1].is_some());
    assert_eq!(
        aromba_relay::outbox::generation(&db, a).await.expect("a"),
        before + 2
    );
}

/// A delivery the server would refuse (U+0000 cannot even be stored as
/// jsonb) would fail a whole batch, or, stored, block its server's queue:
/// it is refused alone, and the rest of the batch is queued.
#[sqlx::test(migrations = false)]
async fn a_delivery_holding_nul_is_refused_alone_and_the_batch_goes_on(db: PgPool) {
    migrated(&db).await;
    let a = registered(&db).await;
    let tap = Enqueue {
        server: a,
        delivery: Delivery::Tap {
            message: Uuid::new_v4(),
            button: "no spaces allowed".into(),
            proof: aromba_relay_proto::frame::TapProof {
                action: None,
                label: "OK".into(),
                chat: 42,
                time: 1,
                text_sha256: "0".repeat(64),
                signature: "sig".into(),
            },
        },
        now: chrono::Utc::now(),
    };
    let batch = [one(a, "before"), one(a, "nul\0here"), tap, one(a, "after")];
    let done = enqueue_batch(&db, &batch, 100).await.expect("enqueue");
    assert!(
        matches!(done.each[1], Enqueued::Refused(_)),
        "{:?}",
        done.each
    );
    assert!(
        matches!(done.each[2], Enqueued::Refused(_)),
        "{:?}",
        done.each
    );
    assert_eq!(waiting(&db, a).await, ["before", "after"]);
}
