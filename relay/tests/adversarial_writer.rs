//! The outbox writer attacked: a hostile server holding a valid token, and
//! hostile timing around the database, against one transaction per batch.
//! A batch is shared by every server on the replica, so nothing one server
//! (or one stuck transaction elsewhere) does may fail or stall the others'
//! writes.

mod support;

use aromba_proto::client::{dial, handshake};
use aromba_proto::frame::{Body, Delivery};
use sqlx::{Connection, PgConnection, PgPool};
use std::time::Duration;
use support::{Server, TestRelay, closed_with, config, connect, connected, refusals, start};
use uuid::Uuid;

fn message(text: &str) -> Delivery {
    Delivery::Message { text: text.into() }
}

async fn migrated(db: &PgPool) {
    aromba_relay::db::MIGRATOR.run(db).await.expect("migrate");
}

async fn insert_server(db: &PgPool, id: Uuid) {
    sqlx::query(
        "INSERT INTO servers (id, token_hash, boot_id, install_source, registered_at)
         VALUES ($1, $2, $3, 'test', now())",
    )
    .bind(id)
    .bind(id.as_bytes().repeat(2))
    .bind(Uuid::new_v4())
    .execute(db)
    .await
    .expect("insert");
}

/// A connection of its own to the test's database, for a transaction the
/// relay does not own (another replica's, the sweep's, an operator's).
async fn other_connection(db: &PgPool) -> PgConnection {
    PgConnection::connect(&support::database_url(db))
        .await
        .expect("a second connection")
}

async fn waiting(db: &PgPool, server: Uuid) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM outbox WHERE server_id = $1")
        .bind(server)
        .fetch_one(db)
        .await
        .expect("count")
}

/// Whether `server` gets through its hello within the client's own
/// deadline.
async fn gets_in(relay: &TestRelay, server: &Server) -> bool {
    let endpoint = server.endpoint(relay);
    let Ok(mut ws) = dial(&endpoint).await else {
        return false;
    };
    handshake(&mut ws, &endpoint).await.is_ok()
}

/// The sweep deletes expired servers in one statement, in the order it
/// finds them; a batch locks its servers in id order. The two deadlock,
/// and PostgreSQL aborts the batch: every other server's enqueue in it
/// failed with them. A refused batch is now written again a delivery at a
/// time, so each caller gets its own answer.
#[sqlx::test(migrations = false)]
async fn a_deadlock_with_servers_deleted_mid_batch_fails_no_other_servers_enqueue(db: PgPool) {
    migrated(&db).await;
    let mut ids: Vec<Uuid> = (0..4).map(|_| Uuid::new_v4()).collect();
    ids.sort_unstable();
    let [blocker, low, high, victim] = ids[..] else {
        unreachable!("four ids")
    };
    for id in [blocker, low, high, victim] {
        insert_server(&db, id).await;
    }
    let (_tx, rx) = tokio::sync::watch::channel(None);
    let (app, writers) = aromba_relay::App::new(db.clone(), config(), rx);
    // Hold the writer on a first batch, so the next one gathers all three.
    let mut hold = other_connection(&db).await;
    sqlx::query("BEGIN")
        .execute(&mut hold)
        .await
        .expect("begin");
    sqlx::query("SELECT id FROM servers WHERE id = $1 FOR UPDATE")
        .bind(blocker)
        .execute(&mut hold)
        .await
        .expect("lock");
    let first = {
        let app = app.clone();
        tokio::spawn(async move { app.enqueue(blocker, &message("first")).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let spawn = |server: Uuid| {
        let app = app.clone();
        tokio::spawn(async move { app.enqueue(server, &message("hi")).await })
    };
    let (to_low, to_high, to_victim) = (spawn(low), spawn(high), spawn(victim));
    tokio::time::sleep(Duration::from_millis(200)).await;
    // The sweep's statement, in the order that crosses the batch's.
    let mut sweep = other_connection(&db).await;
    sqlx::query("BEGIN")
        .execute(&mut sweep)
        .await
        .expect("begin");
    sqlx::query("DELETE FROM servers WHERE id = $1")
        .bind(high)
        .execute(&mut sweep)
        .await
        .expect("delete high");
    sqlx::query("COMMIT")
        .execute(&mut hold)
        .await
        .expect("commit");
    // The batch now holds `low` and waits for `high`.
    tokio::time::sleep(Duration::from_millis(300)).await;
    sqlx::query("DELETE FROM servers WHERE id = $1")
        .bind(low)
        .execute(&mut sweep)
        .await
        .expect("delete low: the batch was the one aborted");
    sqlx::query("COMMIT")
        .execute(&mut sweep)
        .await
        .expect("commit");
    let _ = first.await;
    let _ = (to_low.await, to_high.await);
    let answer = to_victim.await.expect("the victim's task");
    assert!(
        answer.is_ok(),
        "the victim's enqueue failed with the deleted servers' batch: {answer:?}"
    );
    assert_eq!(waiting(&db, victim).await, 1);
    writers.drain(Duration::from_secs(10)).await;
}

/// A transaction elsewhere that holds one server's row (another replica
/// frozen mid-batch, an operator's session) made the replica's writer wait
/// for it without end, and every hello behind it: no server could connect.
/// Each batch now gives up on a lock after a bound, and the one server's
/// hello fails alone.
#[sqlx::test(migrations = false)]
async fn a_server_row_locked_elsewhere_stalls_no_other_servers_hello(db: PgPool) {
    let relay = start(db.clone(), config()).await;
    let (stuck, _ws, _session) = connected(&relay).await;
    let victim = Server::new();
    let (status, _) = support::post_json(&relay, &victim.registration()).await;
    assert_eq!(status, 201);
    let mut hold = other_connection(&db).await;
    sqlx::query("BEGIN")
        .execute(&mut hold)
        .await
        .expect("begin");
    sqlx::query("SELECT id FROM servers WHERE id = $1 FOR UPDATE")
        .bind(stuck.id)
        .execute(&mut hold)
        .await
        .expect("lock");
    // The stuck server reconnects; its generation waits for the lock.
    let again = {
        let endpoint = stuck.endpoint(&relay);
        tokio::spawn(async move {
            let mut ws = dial(&endpoint).await.expect("dial");
            handshake(&mut ws, &endpoint).await.map(|_| ws)
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        gets_in(&relay, &victim).await,
        "another server's hello waited for the locked row"
    );
    let _ = again.await;
    sqlx::query("ROLLBACK")
        .execute(&mut hold)
        .await
        .expect("end");
    relay.stop().await;
}

/// The same for the chat side: an enqueue for a server whose row is held
/// elsewhere delayed every other server's enqueue without end.
#[sqlx::test(migrations = false)]
async fn an_enqueue_for_a_locked_server_stalls_no_other_servers_enqueue(db: PgPool) {
    migrated(&db).await;
    let (stuck, victim) = (Uuid::new_v4(), Uuid::new_v4());
    insert_server(&db, stuck).await;
    insert_server(&db, victim).await;
    let (_tx, rx) = tokio::sync::watch::channel(None);
    let (app, writers) = aromba_relay::App::new(db.clone(), config(), rx);
    let mut hold = other_connection(&db).await;
    sqlx::query("BEGIN")
        .execute(&mut hold)
        .await
        .expect("begin");
    sqlx::query("SELECT id FROM servers WHERE id = $1 FOR UPDATE")
        .bind(stuck)
        .execute(&mut hold)
        .await
        .expect("lock");
    let blocked = {
        let app = app.clone();
        tokio::spawn(async move { app.enqueue(stuck, &message("stuck")).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let answer = tokio::time::timeout(
        Duration::from_secs(30),
        app.enqueue(victim, &message("through")),
    )
    .await
    .expect("the victim's enqueue waited for another server's lock");
    assert!(answer.is_ok(), "{answer:?}");
    let stuck_answer = blocked.await.expect("task");
    assert!(
        stuck_answer.is_err(),
        "the enqueue of the locked server is refused, not queued behind the lock"
    );
    sqlx::query("ROLLBACK")
        .execute(&mut hold)
        .await
        .expect("end");
    writers.drain(Duration::from_secs(10)).await;
}
