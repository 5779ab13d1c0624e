//! The outbox writer attacked: a hostile server holding a valid token, and
//! hostile timing around the database (a row held, a transaction that
//! commits after a later one), against one transaction per batch. A batch
//! is shared by every server on the replica, so nothing one server (or one
//! stuck transaction elsewhere) does may fail or stall the others' writes,
//! and a delivery committed late still reaches the live connection, in
//! order.

use aromba_testkit::relay as support;

use aromba_relay::outbox::enqueue;
use aromba_relay_proto::client::{Session, Socket, dial, handshake};
use aromba_relay_proto::frame::{Body, Button, Delivery};
use sqlx::{Connection, PgConnection, PgPool};
use std::time::Duration;
use support::{
    Server, TestRelay, closed_with, config, connect, connected, gets_in, next_unacked_delivery,
    refusals, start,
};
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
    let (app, writers) = aromba_relay::App::new(db.clone(), config(), rx, None);
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

/// A replica frozen mid-batch holds many servers' rows; those servers
/// reconnect here and share a generation batch with a victim's hello. The
/// refused batch must not then wait for each held row in turn (a lock bound
/// per server, one after another, past the client's hello deadline).
#[sqlx::test(migrations = false)]
async fn many_servers_held_by_a_frozen_replica_do_not_outlast_another_servers_hello(db: PgPool) {
    let relay = start(db.clone(), config()).await;
    let mut held = Vec::new();
    for _ in 0..13 {
        let server = Server::new();
        let (status, _) = support::post_json(&relay, &server.registration()).await;
        assert_eq!(status, 201);
        held.push(server);
    }
    let victim = Server::new();
    let (status, _) = support::post_json(&relay, &victim.registration()).await;
    assert_eq!(status, 201);
    let mut frozen = other_connection(&db).await;
    sqlx::query("BEGIN")
        .execute(&mut frozen)
        .await
        .expect("begin");
    let ids: Vec<Uuid> = held.iter().map(|s| s.id).collect();
    sqlx::query("SELECT id FROM servers WHERE id = ANY($1) ORDER BY id FOR UPDATE")
        .bind(&ids)
        .execute(&mut frozen)
        .await
        .expect("lock");
    let hello = |server: &Server| {
        let endpoint = server.endpoint(&relay);
        tokio::spawn(async move {
            let Ok(mut ws) = dial(&endpoint).await else {
                return;
            };
            let _ = handshake(&mut ws, &endpoint).await;
        })
    };
    // The first holds the writer; the others gather behind it, into one
    // batch with the victim's.
    let first = hello(&held[0]);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rest: Vec<_> = held[1..].iter().map(hello).collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        gets_in(&relay, &victim).await,
        "the victim's hello waited for every held row in turn"
    );
    sqlx::query("ROLLBACK")
        .execute(&mut frozen)
        .await
        .expect("end");
    let _ = first.await;
    for task in rest {
        let _ = task.await;
    }
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
    let (app, writers) = aromba_relay::App::new(db.clone(), config(), rx, None);
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

/// A delivery row held by another transaction (an operator's session, a
/// frozen replica) made the whole acknowledgement batch fail and retry,
/// so no other server's acknowledged body was deleted until it was let go.
#[sqlx::test(migrations = false)]
async fn an_acknowledgement_of_a_row_held_elsewhere_holds_back_no_other_servers(db: PgPool) {
    migrated(&db).await;
    let (stuck, other) = (Uuid::new_v4(), Uuid::new_v4());
    insert_server(&db, stuck).await;
    insert_server(&db, other).await;
    let (_tx, rx) = tokio::sync::watch::channel(None);
    let (app, writers) = aromba_relay::App::new(db.clone(), config(), rx, None);
    let held = app.enqueue(stuck, &message("held")).await.expect("enqueue");
    let freed = app
        .enqueue(other, &message("freed"))
        .await
        .expect("enqueue");
    let mut hold = other_connection(&db).await;
    sqlx::query("BEGIN")
        .execute(&mut hold)
        .await
        .expect("begin");
    sqlx::query("SELECT id FROM outbox WHERE id = $1 FOR UPDATE")
        .bind(held)
        .execute(&mut hold)
        .await
        .expect("lock");
    // Both in one batch.
    app.writer.acknowledge(stuck, held).await.expect("queued");
    app.writer.acknowledge(other, freed).await.expect("queued");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while waiting(&db, other).await > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "another server's acknowledged body waited for a row held elsewhere"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(waiting(&db, stuck).await, 1, "held, so not yet deleted");
    sqlx::query("ROLLBACK")
        .execute(&mut hold)
        .await
        .expect("end");
    // Once let go, the kept acknowledgement is written too.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while waiting(&db, stuck).await > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the kept acknowledgement was never written"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    writers.drain(Duration::from_secs(10)).await;
}

#[sqlx::test(migrations = false)]
async fn a_delivery_committed_after_a_later_one_still_reaches_the_live_connection(db: PgPool) {
    // Row ids come from an identity sequence when the row is inserted, not
    // when it commits. The session reads only `id > sent_up_to`, so a row
    // whose transaction commits after a higher id was sent is never sent on
    // this connection (it waits for a reconnect, or the 24-hour sweep).
    let relay = start(db.clone(), config()).await;
    let (server, mut ws, mut session) = connected(&relay).await;
    let msg = |t: &str| Delivery::Message { text: t.into() };
    let (x, _) = enqueue(&db, server.id, &msg("x"), chrono::Utc::now(), 500)
        .await
        .expect("enqueue");
    assert_eq!(next_unacked_delivery(&mut ws, &mut session).await.0, x);
    // Hold row x so that the next enqueue (bound 1: it drops x) stops after
    // its INSERT, before its COMMIT: a slow transaction, as under load.
    let mut hold = db.begin().await.expect("begin");
    sqlx::query("SELECT id FROM outbox WHERE id = $1 FOR UPDATE")
        .bind(x)
        .fetch_one(&mut *hold)
        .await
        .expect("lock");
    let slow_db = db.clone();
    let slow = tokio::spawn(async move {
        enqueue(&slow_db, server.id, &msg("slow"), chrono::Utc::now(), 1)
            .await
            .expect("enqueue")
    });
    let mut waiting = 0i64;
    for _ in 0..200 {
        waiting = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()",
        )
        .fetch_one(&db)
        .await
        .expect("activity");
        if waiting > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(waiting > 0, "the slow enqueue is waiting on the held row");
    // A second enqueue for the same server now waits for the first (the
    // server's row is locked until it commits), so ids commit in order.
    let fast_db = db.clone();
    let fast = tokio::spawn(async move {
        enqueue(&fast_db, server.id, &msg("fast"), chrono::Utc::now(), 500)
            .await
            .expect("enqueue")
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !fast.is_finished(),
        "the second enqueue did not wait for the first"
    );
    hold.rollback().await.expect("release");
    let (slow_id, _) = slow.await.expect("slow enqueue");
    let (fast_id, _) = fast.await.expect("fast enqueue");
    assert!(slow_id < fast_id, "ids follow commit order");
    let mut got = Vec::new();
    while got.len() < 2 {
        let (id, _) = next_unacked_delivery(&mut ws, &mut session).await;
        got.push(id);
    }
    assert_eq!(
        got,
        vec![slow_id, fast_id],
        "both reached the live connection, in order"
    );
    relay.stop().await;
}

// ---------------------------------------------------------------------------
// Attacks the relay withstood (regression tests)

/// Whether the connection still answers: a message for the chat, and its
/// acknowledgement back. A replaced or closed connection answers with its
/// close, or not at all.
async fn alive(ws: &mut Socket, session: &mut Session) -> bool {
    let id = Uuid::new_v4();
    let body = Body::Send {
        id,
        text: "probe".into(),
        buttons: vec![Button {
            id: "ok".into(),
            label: "OK".into(),
            action: None,
            app: None,
        }],
        monospace: Vec::new(),
    };
    if session.send(ws, &body).await.is_err() {
        return false;
    }
    let answer = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match session.recv(ws).await {
                Ok(Body::AckMessage { id: acked }) if acked == id => return true,
                Ok(_) => continue,
                Err(_) => return false,
            }
        }
    })
    .await;
    answer.expect("a live connection answers, a closed one ends, within 10 s")
}

/// Of `connections`, those still answering, until at most `most` do (or
/// 10 s pass): a replaced connection may take a notification's time to go.
async fn settle_to(connections: &mut Vec<(Socket, Session)>, most: usize) -> usize {
    for _ in 0..20 {
        let mut open = Vec::new();
        for (mut ws, mut session) in connections.drain(..) {
            if alive(&mut ws, &mut session).await {
                open.push((ws, session));
            }
        }
        *connections = open;
        if connections.len() <= most {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    connections.len()
}

async fn storm(relays: &[&TestRelay], server: &Server, hellos: usize) -> Vec<(Socket, Session)> {
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..hellos {
        let endpoint = server.endpoint(relays[i % relays.len()]);
        tasks.spawn(async move {
            let mut ws = dial(&endpoint).await.ok()?;
            let session = handshake(&mut ws, &endpoint).await.ok()?;
            Some((ws, session))
        });
    }
    let mut connections = Vec::new();
    while let Some(done) = tasks.join_next().await {
        if let Some(pair) = done.expect("task") {
            connections.push(pair);
        }
    }
    connections
}

/// One server's hellos at once land in one generation batch, the server
/// named many times: each takes its own generation, and however their
/// sessions race into the hub, at most one connection stays; the next
/// hello holds.
#[sqlx::test(migrations = false)]
async fn a_hello_storm_of_one_server_leaves_at_most_one_connection(db: PgPool) {
    let relay = start(db.clone(), config()).await;
    let (server, _first, _) = connected(&relay).await;
    let mut connections = storm(&[&relay], &server, 24).await;
    assert!(!connections.is_empty(), "no hello of the storm got in");
    assert!(
        settle_to(&mut connections, 1).await <= 1,
        "two connections of one server stayed open"
    );
    let (mut ws, mut session) = connect(&relay, &server).await;
    assert!(alive(&mut ws, &mut session).await, "the next hello holds");
    assert_eq!(settle_to(&mut connections, 0).await, 0);
    relay.stop().await;
}

/// The same storm split across two replicas on one database: generation
/// batches of both lock the server's row in turn, and notifications and
/// the recheck after attaching leave at most one connection anywhere.
#[sqlx::test(migrations = false)]
async fn a_hello_storm_across_two_replicas_leaves_at_most_one_connection(db: PgPool) {
    let a = start(db.clone(), config()).await;
    let b = start(db.clone(), config()).await;
    let (server, _first, _) = connected(&a).await;
    let mut connections = storm(&[&a, &b], &server, 24).await;
    assert!(!connections.is_empty(), "no hello of the storm got in");
    assert!(
        settle_to(&mut connections, 1).await <= 1,
        "two connections of one server stayed open across replicas"
    );
    let (mut ws, mut session) = connect(&b, &server).await;
    assert!(alive(&mut ws, &mut session).await, "the next hello holds");
    assert_eq!(settle_to(&mut connections, 0).await, 0);
    a.stop().await;
    b.stop().await;
}

/// A server that reconnects without pause fills generation batches with
/// itself; another server's hello still gets its turn.
#[sqlx::test(migrations = false)]
async fn a_reconnect_loop_does_not_starve_another_servers_hello(db: PgPool) {
    let relay = start(db.clone(), config()).await;
    let (hostile, _ws, _) = connected(&relay).await;
    let victim = Server::new();
    let (status, _) = support::post_json(&relay, &victim.registration()).await;
    assert_eq!(status, 201);
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut loops = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let endpoint = hostile.endpoint(&relay);
        let stopped = stopped.clone();
        loops.spawn(async move {
            while !*stopped.borrow() {
                if let Ok(mut ws) = dial(&endpoint).await {
                    let _ = handshake(&mut ws, &endpoint).await;
                }
            }
        });
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    for _ in 0..3 {
        assert!(gets_in(&relay, &victim).await, "the victim's hello starved");
    }
    let _ = stop.send(true);
    while loops.join_next().await.is_some() {}
    relay.stop().await;
}

/// The same delivery acknowledged twice: the second names nothing
/// outstanding and ends the connection; the first is still written.
#[sqlx::test(migrations = false)]
async fn a_duplicate_acknowledgement_is_refused_and_the_first_still_written(db: PgPool) {
    let relay = start(db.clone(), config()).await;
    let (server, mut ws, mut session) = connected(&relay).await;
    let (id, _) =
        aromba_relay::outbox::enqueue(&db, server.id, &message("one"), chrono::Utc::now(), 100)
            .await
            .expect("enqueue");
    let (kept, _) =
        aromba_relay::outbox::enqueue(&db, server.id, &message("two"), chrono::Utc::now(), 100)
            .await
            .expect("enqueue");
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let body = tokio::time::timeout(Duration::from_secs(10), session.recv(&mut ws))
            .await
            .expect("deliveries within 10 s")
            .expect("a frame");
        if let Body::Deliver { id, .. } = body {
            seen.push(id);
        }
    }
    for _ in 0..2 {
        let _ = session.send(&mut ws, &Body::AckDelivery { id }).await;
    }
    assert_eq!(closed_with(&mut ws).await, 1008);
    assert_eq!(refusals(&relay, "unexpected_ack").await, 1);
    relay.stop().await;
    let left: Vec<i64> = sqlx::query_scalar("SELECT id FROM outbox WHERE server_id = $1")
        .bind(server.id)
        .fetch_all(&db)
        .await
        .expect("rows");
    assert_eq!(left, [kept], "the acknowledged row went, the other stayed");
}

/// Acknowledgements of ids never sent: the extremes, zero, and the next
/// id the sequence will hand out.
#[sqlx::test(migrations = false)]
async fn an_acknowledgement_of_an_id_never_sent_is_refused(db: PgPool) {
    let relay = start(db.clone(), config()).await;
    for id in [i64::MIN, -1, 0, i64::MAX, 1] {
        let (_, mut ws, mut session) = connected(&relay).await;
        let _ = session.send(&mut ws, &Body::AckDelivery { id }).await;
        assert_eq!(closed_with(&mut ws).await, 1008, "ack of {id}");
    }
    assert_eq!(refusals(&relay, "unexpected_ack").await, 5);
    relay.stop().await;
}

/// An acknowledgement the connection handed over just before a planned
/// shutdown is deleted before the relay is gone.
#[sqlx::test(migrations = false)]
async fn an_acknowledgement_handed_over_before_a_shutdown_is_written(db: PgPool) {
    let relay = start(db.clone(), config()).await;
    let (server, mut ws, mut session) = connected(&relay).await;
    let (id, _) =
        aromba_relay::outbox::enqueue(&db, server.id, &message("one"), chrono::Utc::now(), 100)
            .await
            .expect("enqueue");
    loop {
        let body = tokio::time::timeout(Duration::from_secs(10), session.recv(&mut ws))
            .await
            .expect("a delivery within 10 s")
            .expect("a frame");
        if matches!(body, Body::Deliver { id: got, .. } if got == id) {
            break;
        }
    }
    session
        .send(&mut ws, &Body::AckDelivery { id })
        .await
        .expect("ack");
    // Frames are handled in order: once the probe is answered, the ack was
    // handed to the writer.
    assert!(alive(&mut ws, &mut session).await);
    relay.stop().await;
    assert_eq!(waiting(&db, server.id).await, 0);
}

/// Enqueues racing the writers' drain are each answered (written, or
/// refused as closed), never left waiting.
#[sqlx::test(migrations = false)]
async fn enqueues_racing_the_shutdown_are_answered_not_hung(db: PgPool) {
    migrated(&db).await;
    let server = Uuid::new_v4();
    insert_server(&db, server).await;
    let (_tx, rx) = tokio::sync::watch::channel(None);
    let (app, writers) = aromba_relay::App::new(db.clone(), config(), rx, None);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..400 {
        let app = app.clone();
        tasks.spawn(async move { app.enqueue(server, &message(&format!("m{i}"))).await });
    }
    writers.drain(Duration::from_secs(10)).await;
    let mut written = 0i64;
    let all = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(done) = tasks.join_next().await {
            match done.expect("task") {
                Ok(_) => written += 1,
                Err(aromba_relay::writer::WriterError::Closed) => {}
                Err(e) => panic!("an enqueue failed otherwise: {e}"),
            }
        }
    })
    .await;
    assert!(all.is_ok(), "an enqueue was left waiting after the drain");
    assert_eq!(
        waiting(&db, server).await,
        written.min(config().limits.max_pending)
    );
}

/// Chat text at every edge the check lets through — the longest text in
/// four-byte characters, quotes and backslashes that double when escaped,
/// bidi overrides, byte-order marks, noncharacters, separators JSON does
/// not escape, private use, the last code point — beside what it refuses
/// (NUL, C1 controls, one character too many), all at once with another
/// server's message: each gets its own answer, and every accepted text
/// reaches its server byte for byte.
#[sqlx::test(migrations = false)]
async fn hostile_unicode_at_the_bounds_is_queued_alone_and_delivered_intact(db: PgPool) {
    let relay = start(db.clone(), config()).await;
    let (server, mut ws, mut session) = connected(&relay).await;
    let (other, _other_ws, _) = connected(&relay).await;
    let (_tx, rx) = tokio::sync::watch::channel(None);
    let (app, writers) = aromba_relay::App::new(db.clone(), config(), rx, None);
    let accepted: Vec<String> = vec![
        "𝕏".repeat(4096),
        "\"".repeat(4096),
        "\\".repeat(4096),
        "\r\n\t".repeat(1365),
        "\u{202E}\u{FEFF}\u{FFFE}\u{FFFF}\u{2028}\u{2029}\u{E000}\u{10FFFF}e\u{301}".into(),
        "\u{1F469}\u{200D}\u{1F4BB}\u{FE0F}".repeat(500),
    ];
    let refused: Vec<String> = vec![
        "nul\0".into(),
        "next line\u{85}".into(),
        "delete\u{7F}".into(),
        "x".repeat(4097),
        String::new(),
    ];
    let mut tasks = tokio::task::JoinSet::new();
    for (i, text) in accepted.iter().chain(&refused).enumerate() {
        let (app, text) = (app.clone(), text.clone());
        tasks.spawn(async move { (i, app.enqueue(server.id, &message(&text)).await) });
    }
    let beside = {
        let app = app.clone();
        tokio::spawn(async move { app.enqueue(other.id, &message("beside")).await })
    };
    let mut answers = vec![None; accepted.len() + refused.len()];
    while let Some(done) = tasks.join_next().await {
        let (i, answer) = done.expect("task");
        answers[i] = Some(answer.map_err(|e| e.to_string()));
    }
    for (i, answer) in answers.iter().enumerate() {
        let answer = answer.as_ref().expect("answered");
        if i < accepted.len() {
            assert!(answer.is_ok(), "text {i} refused: {answer:?}");
        } else {
            let refusal = answer.as_ref().expect_err("refused");
            assert!(refusal.contains("would refuse"), "text {i}: {refusal}");
        }
    }
    assert!(beside.await.expect("task").is_ok());
    let mut got = Vec::new();
    while got.len() < accepted.len() {
        let body = tokio::time::timeout(Duration::from_secs(10), session.recv(&mut ws))
            .await
            .expect("deliveries within 10 s")
            .expect("a frame the client accepts");
        if let Body::Deliver {
            id,
            delivery: Delivery::Message { text },
        } = body
        {
            session
                .send(&mut ws, &Body::AckDelivery { id })
                .await
                .expect("ack");
            got.push(text);
        }
    }
    let mut want = accepted.clone();
    want.sort();
    got.sort();
    assert!(got == want, "a text changed on its way");
    writers.drain(Duration::from_secs(10)).await;
    relay.stop().await;
}

/// A TCP relay to PostgreSQL that can go silent: the network path drops
/// every packet, and nothing is closed (no reset, no FIN), as a partition
/// or a frozen database host looks to the relay.
struct SilentLink {
    port: u16,
    silent: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl SilentLink {
    async fn to_postgres() -> SilentLink {
        use std::sync::atomic::Ordering;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let silent = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = silent.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = tokio::net::TcpStream::connect("127.0.0.1:5432").await else {
                    continue;
                };
                let (cr, cw) = client.into_split();
                let (sr, sw) = server.into_split();
                let pipe =
                    |mut from: tokio::net::tcp::OwnedReadHalf,
                     mut to: tokio::net::tcp::OwnedWriteHalf,
                     silent: std::sync::Arc<std::sync::atomic::AtomicBool>| async move {
                        let mut buf = vec![0u8; 16 * 1024];
                        while let Ok(n) = from.read(&mut buf).await {
                            if n == 0 {
                                break;
                            }
                            if silent.load(Ordering::SeqCst) {
                                // Dropped on the floor; the sockets stay open.
                                std::future::pending::<()>().await;
                            }
                            if to.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                        }
                    };
                tokio::spawn(pipe(cr, sw, flag.clone()));
                tokio::spawn(pipe(sr, cw, flag.clone()));
            }
        });
        SilentLink { port, silent }
    }

    fn silence(&self) {
        self.silent.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// The database host stops answering mid-flight (a partition: no reset,
/// no error). The writer's transaction waited for an answer without end,
/// and with it every caller: the chat side's enqueue, a server's hello,
/// for hours of TCP keepalive. Each batch, and each caller's wait, now
/// has a deadline.
#[sqlx::test(migrations = false)]
async fn a_database_that_goes_silent_mid_batch_leaves_no_caller_waiting(db: PgPool) {
    migrated(&db).await;
    let server = Uuid::new_v4();
    insert_server(&db, server).await;
    let link = SilentLink::to_postgres().await;
    let mut options: sqlx::postgres::PgConnectOptions =
        support::database_url(&db).parse().expect("url");
    options = options.host("127.0.0.1").port(link.port);
    let through = sqlx::postgres::PgPoolOptions::new()
        .max_connections(4)
        .acquire_timeout(Duration::from_secs(5))
        .connect_with(options)
        .await
        .expect("pool through the link");
    let (_tx, rx) = tokio::sync::watch::channel(None);
    let (app, writers) = aromba_relay::App::new(through, config(), rx, None);
    app.enqueue(server, &message("before"))
        .await
        .expect("written while the link answers");
    // Hold the next batch inside its transaction (past the pool's own
    // checks), and go silent there.
    let mut hold = other_connection(&db).await;
    sqlx::query("BEGIN")
        .execute(&mut hold)
        .await
        .expect("begin");
    sqlx::query("SELECT id FROM servers WHERE id = $1 FOR UPDATE")
        .bind(server)
        .execute(&mut hold)
        .await
        .expect("lock");
    let enqueue = {
        let app = app.clone();
        tokio::spawn(async move { app.enqueue(server, &message("lost")).await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    link.silence();
    sqlx::query("ROLLBACK")
        .execute(&mut hold)
        .await
        .expect("end");
    let enqueue = tokio::time::timeout(Duration::from_secs(60), enqueue)
        .await
        .expect("the enqueue waited past a minute for a silent database")
        .expect("task");
    assert!(enqueue.is_err(), "{enqueue:?}");
    let generation =
        tokio::time::timeout(Duration::from_secs(60), app.writer.next_generation(server))
            .await
            .expect("the hello's generation waited past a minute for a silent database");
    assert!(generation.is_err(), "{generation:?}");
    writers.drain(Duration::from_secs(1)).await;
}
