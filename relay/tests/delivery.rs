//! Delivery: the outbox is the truth, NOTIFY carries ids, the replica that
//! holds the socket delivers, the body goes on acknowledgement, and nothing
//! acknowledged is lost or handed over twice across kills, restarts and
//! database outages.

use aromba_testkit::relay as support;

use aromba_relay::outbox::enqueue;
use aromba_relay_proto::client::{Outgoing, run};
use aromba_relay_proto::frame::{Body, Button, Delivery};
use sqlx::PgPool;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{Server, config, connect, connected, post_json, start};
use tokio_tungstenite::tungstenite::Message;
use uuid::Uuid;

fn message(text: &str) -> Delivery {
    Delivery::Message { text: text.into() }
}

async fn rows(db: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM outbox")
        .fetch_one(db)
        .await
        .expect("count")
}

async fn next_delivery(
    ws: &mut aromba_relay_proto::client::Socket,
    session: &mut aromba_relay_proto::client::Session,
) -> (i64, Delivery) {
    loop {
        let body = tokio::time::timeout(Duration::from_secs(10), session.recv(ws))
            .await
            .expect("a frame within 10 s")
            .expect("a frame");
        if let Body::Deliver { id, delivery } = body {
            return (id, delivery);
        }
    }
}

#[sqlx::test(migrations = false)]
async fn a_delivery_reaches_its_server_and_its_body_goes_on_ack(db: PgPool) {
    let relay = start(db.clone(), config()).await;
    let (server, mut ws, mut session) = connected(&relay).await;
    let (id, _) = enqueue(
        &db,
        server.id,
        &message("disk is 91% full"),
        chrono::Utc::now(),
        100,
    )
    .await
    .expect("enqueue");
    let (got, delivery) = next_delivery(&mut ws, &mut session).await;
    assert_eq!((got, delivery), (id, message("disk is 91% full")));
    assert_eq!(rows(&db).await, 1, "kept until acknowledged");
    session
        .send(&mut ws, &Body::AckDelivery { id })
        .await
        .expect("ack");
    for _ in 0..100 {
        if rows(&db).await == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(rows(&db).await, 0, "the body is deleted on ack");
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn what_waited_while_the_server_was_away_comes_on_connect(db: PgPool) {
    let relay = start(db.clone(), config()).await;
    let server = Server::new();
    assert_eq!(post_json(&relay, &server.registration()).await.0, 201);
    let mut ids = Vec::new();
    for i in 0..70 {
        let (id, _) = enqueue(
            &db,
            server.id,
            &message(&format!("m{i}")),
            chrono::Utc::now(),
            500,
        )
        .await
        .expect("enqueue");
        ids.push(id);
    }
    let (mut ws, mut session) = connect(&relay, &server).await;
    let mut got = Vec::new();
    while got.len() < ids.len() {
        got.push(next_delivery(&mut ws, &mut session).await.0);
    }
    assert_eq!(got, ids, "every one, once, in order");
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_message_for_a_server_on_another_replica_is_delivered_there(db: PgPool) {
    let a = start(db.clone(), config()).await;
    let b = start(db.clone(), config()).await;
    let (server, mut ws, mut session) = connected(&b).await;
    let other = Server::new();
    assert_eq!(post_json(&a, &other.registration()).await.0, 201);
    let (mut ws_a, mut session_a) = connect(&a, &other).await;
    // Enqueued as replica A would: the row and a NOTIFY with ids only.
    let (id, _) = enqueue(&db, server.id, &message("for b"), chrono::Utc::now(), 100)
        .await
        .expect("enqueue");
    let (id_a, _) = enqueue(&db, other.id, &message("for a"), chrono::Utc::now(), 100)
        .await
        .expect("enqueue");
    assert_eq!(next_delivery(&mut ws, &mut session).await.0, id);
    assert_eq!(next_delivery(&mut ws_a, &mut session_a).await.0, id_a);
    a.stop().await;
    b.stop().await;
}

#[sqlx::test(migrations = false)]
async fn the_pending_queue_is_bounded_and_drops_the_oldest(db: PgPool) {
    let relay = start(db.clone(), config()).await;
    let server = Server::new();
    assert_eq!(post_json(&relay, &server.registration()).await.0, 201);
    let mut dropped = 0;
    let mut ids = Vec::new();
    for i in 0..5 {
        let (id, d) = enqueue(
            &db,
            server.id,
            &message(&format!("m{i}")),
            chrono::Utc::now(),
            3,
        )
        .await
        .expect("enqueue");
        ids.push(id);
        dropped += d;
    }
    assert_eq!(dropped, 2);
    let kept: Vec<i64> = sqlx::query_scalar("SELECT id FROM outbox ORDER BY id")
        .fetch_all(&db)
        .await
        .expect("ids");
    assert_eq!(kept, ids[2..].to_vec());
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_message_from_a_server_is_kept_once_and_acknowledged(db: PgPool) {
    let relay = start(db.clone(), config()).await;
    let (_, mut ws, mut session) = connected(&relay).await;
    let id = Uuid::new_v4();
    let send = Body::Send {
        id,
        text: "Apply 3 security updates?".into(),
        buttons: vec![Button {
            id: "apply".into(),
            label: "Apply".into(),
            action: None,
            app: None,
        }],
        monospace: Vec::new(),
    };
    for _ in 0..2 {
        session.send(&mut ws, &send).await.expect("send");
        let ack = tokio::time::timeout(Duration::from_secs(10), session.recv(&mut ws))
            .await
            .expect("in time")
            .expect("a frame");
        assert_eq!(ack, Body::AckMessage { id });
    }
    let kept: i64 = sqlx::query_scalar("SELECT count(*) FROM chat_outbox")
        .fetch_one(&db)
        .await
        .expect("count");
    assert_eq!(kept, 1);
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_new_connection_replaces_the_old(db: PgPool) {
    let relay = start(db.clone(), config()).await;
    let (server, mut old, _) = connected(&relay).await;
    let (mut new, mut session) = connect(&relay, &server).await;
    let code = loop {
        match tokio::time::timeout(
            Duration::from_secs(10),
            futures_util::StreamExt::next(&mut old),
        )
        .await
        .expect("the old connection ends")
        {
            Some(Ok(Message::Close(Some(f)))) => break u16::from(f.code),
            Some(Ok(_)) => continue,
            _ => break 1006,
        }
    };
    assert_eq!(code, aromba_relay::ws::CLOSE_REPLACED);
    let (id, _) = enqueue(
        &db,
        server.id,
        &message("to the new one"),
        chrono::Utc::now(),
        100,
    )
    .await
    .expect("enqueue");
    assert_eq!(next_delivery(&mut new, &mut session).await.0, id);
    relay.stop().await;
}

/// How many times the handler saw each delivery id.
type Seen = Arc<Mutex<HashMap<i64, u32>>>;

/// A server running the real client: what its handler saw, by id.
fn running_client(
    server: &Server,
    url: String,
) -> (
    Seen,
    tokio::sync::watch::Sender<bool>,
    tokio::sync::mpsc::Sender<Outgoing>,
) {
    let seen = Arc::new(Mutex::new(HashMap::<i64, u32>::new()));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let (out, outgoing) = tokio::sync::mpsc::channel(16);
    let mut endpoint = server.endpoint_url(url);
    endpoint.roots = None;
    let record = seen.clone();
    tokio::spawn(run(
        endpoint,
        move |id, _| {
            *record.lock().expect("lock").entry(id).or_default() += 1;
        },
        outgoing,
        stopped,
    ));
    (seen, stop, out)
}

#[sqlx::test(migrations = false)]
async fn a_relay_killed_mid_delivery_loses_nothing_acknowledged_and_duplicates_nothing(db: PgPool) {
    // The relay as its own process, killed with SIGKILL mid-stream: some
    // deliveries handled and acknowledged, some handled and not yet
    // acknowledged, some not yet sent.
    let port = support::free_port();
    let first = support::RelayProcess::spawn(&db, port).await;
    let server = Server::new();
    let r = reqwest::Client::new()
        .post(format!("http://{}/v1/servers", first.addr))
        .json(&server.registration())
        .send()
        .await
        .expect("answer");
    assert_eq!(r.status(), 201);
    let (seen, stop, _out) = running_client(&server, first.ws_url());
    let mut ids = Vec::new();
    for i in 0..200 {
        let (id, _) = enqueue(
            &db,
            server.id,
            &message(&format!("m{i}")),
            chrono::Utc::now(),
            500,
        )
        .await
        .expect("enqueue");
        ids.push(id);
        if i == 100 {
            while seen.lock().expect("lock").len() < 50 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
    first.kill();
    // The replacement listens where the old one did, as a restart would.
    let listener = loop {
        match tokio::net::TcpListener::bind(("127.0.0.1", port)).await {
            Ok(l) => break l,
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    let second = support::start_on(db.clone(), config(), listener).await;
    let mut all = false;
    for _ in 0..600 {
        if seen.lock().expect("lock").len() == ids.len() && rows(&db).await == 0 {
            all = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let seen = seen.lock().expect("lock").clone();
    assert!(
        all,
        "{} of {} handled, {} rows left",
        seen.len(),
        ids.len(),
        rows(&db).await
    );
    assert!(
        seen.values().all(|&n| n == 1),
        "a delivery was handled twice"
    );
    let _ = stop.send(true);
    second.stop().await;
}

#[sqlx::test(migrations = false)]
async fn after_the_database_drops_every_connection_pending_rows_are_still_delivered(db: PgPool) {
    let relay = start(db.clone(), config()).await;
    let mut clients = Vec::new();
    for _ in 0..5 {
        let server = Server::new();
        assert_eq!(post_json(&relay, &server.registration()).await.0, 201);
        let (seen, stop, out) = running_client(&server, relay.ws_url());
        clients.push((server, seen, stop, out));
    }
    // Everyone connected, then PostgreSQL drops all of the relay's
    // sessions (as a restart does) while deliveries are being queued.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let admin = db.clone();
    let mut expected = 0;
    for round in 0..4 {
        for (server, ..) in &clients {
            for i in 0..5 {
                loop {
                    match enqueue(
                        &db,
                        server.id,
                        &message(&format!("r{round} m{i}")),
                        chrono::Utc::now(),
                        500,
                    )
                    .await
                    {
                        Ok(_) => break,
                        Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                    }
                }
                expected += 1;
            }
        }
        let _ = sqlx::query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
        )
        .execute(&admin)
        .await;
    }
    let per_client = expected / clients.len();
    let mut done = false;
    for _ in 0..600 {
        if clients
            .iter()
            .all(|(_, seen, ..)| seen.lock().expect("lock").len() == per_client)
        {
            done = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let counts: Vec<usize> = clients
        .iter()
        .map(|(_, seen, ..)| seen.lock().expect("lock").len())
        .collect();
    assert!(done, "handled {counts:?}, {per_client} each expected");
    for (_, _, stop, _) in &clients {
        let _ = stop.send(true);
    }
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_planned_shutdown_tells_every_server_when_to_come_back(db: PgPool) {
    let relay = start(db.clone(), config()).await;
    let (_, mut ws, mut session) = connected(&relay).await;
    let stopping = tokio::spawn(relay.stop());
    let body = tokio::time::timeout(Duration::from_secs(10), session.recv(&mut ws))
        .await
        .expect("in time")
        .expect("a frame");
    assert!(
        matches!(body, Body::Restarting { after_ms, jitter_ms } if after_ms >= 10 && jitter_ms == 20),
        "{body:?}"
    );
    stopping.await.expect("stopped");
}

#[sqlx::test(migrations = false)]
async fn past_its_connection_limit_the_relay_answers_1013(db: PgPool) {
    let mut c = config();
    c.limits.max_connections = 1;
    let relay = start(db.clone(), c).await;
    let (_first, _ws, _session) = connected(&relay).await;
    let second = Server::new();
    assert_eq!(post_json(&relay, &second.registration()).await.0, 201);
    // The limit counts servers past their hello: the second one's hello is
    // answered with 1013.
    let endpoint = second.endpoint(&relay);
    let mut ws = aromba_relay_proto::client::dial(&endpoint)
        .await
        .expect("dial");
    let hello = aromba_relay_proto::frame::Hello::new(second.id, second.token.clone());
    futures_util::SinkExt::send(
        &mut ws,
        Message::Text(serde_json::to_string(&hello).expect("json").into()),
    )
    .await
    .expect("send");
    let code = loop {
        match tokio::time::timeout(
            Duration::from_secs(10),
            futures_util::StreamExt::next(&mut ws),
        )
        .await
        .expect("closed in time")
        {
            Some(Ok(Message::Close(Some(f)))) => break u16::from(f.code),
            Some(Ok(_)) => continue,
            _ => break 1006,
        }
    };
    assert_eq!(code, 1013);
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn nothing_waits_longer_than_24_hours(db: PgPool) {
    use aromba_relay::clock::Clock;
    let clock = Arc::new(aromba_relay::clock::ManualClock::new(chrono::Utc::now()));
    let mut c = config();
    c.clock = clock.clone();
    let relay = start(db.clone(), c).await;
    let (server, mut ws, mut session) = connected(&relay).await;
    // Paired, so that the server itself stays.
    sqlx::query("UPDATE servers SET paired_at = now() WHERE id = $1")
        .bind(server.id)
        .execute(&db)
        .await
        .expect("pair");
    // A delivery the server never acknowledges, and a message it sent.
    enqueue(&db, server.id, &message("old news"), clock.now(), 100)
        .await
        .expect("enqueue");
    let id = Uuid::new_v4();
    let send = Body::Send {
        id,
        text: "kept a day at most".into(),
        buttons: vec![],
        monospace: Vec::new(),
    };
    session.send(&mut ws, &send).await.expect("send");
    loop {
        let body = tokio::time::timeout(Duration::from_secs(10), session.recv(&mut ws))
            .await
            .expect("in time")
            .expect("a frame");
        if body == (Body::AckMessage { id }) {
            break;
        }
    }
    let counts = || {
        let db = db.clone();
        async move {
            let outbox: i64 = sqlx::query_scalar("SELECT count(*) FROM outbox")
                .fetch_one(&db)
                .await
                .expect("count");
            let chat: i64 = sqlx::query_scalar("SELECT count(*) FROM chat_outbox")
                .fetch_one(&db)
                .await
                .expect("count");
            (outbox, chat)
        }
    };
    clock.advance(chrono::Duration::hours(24) - chrono::Duration::seconds(1));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(counts().await, (1, 1), "erased before 24 hours");
    clock.advance(chrono::Duration::seconds(1));
    let mut gone = false;
    for _ in 0..100 {
        if counts().await == (0, 0) {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(gone, "kept past 24 hours");
    let servers: i64 = sqlx::query_scalar("SELECT count(*) FROM servers")
        .fetch_one(&db)
        .await
        .expect("count");
    assert_eq!(servers, 1, "a paired server stays");
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn deliveries_dropped_at_the_bound_are_counted(db: PgPool) {
    aromba_relay::db::MIGRATOR.run(&db).await.expect("migrate");
    let mut c = config();
    c.limits.max_pending = 2;
    let (_tx, rx) = tokio::sync::watch::channel(None);
    let (app, _writers) = aromba_relay::App::new(db.clone(), c, rx, None);
    let server = Server::new();
    sqlx::query(
        "INSERT INTO servers (id, token_hash, boot_id, install_source, registered_at)
         VALUES ($1, $2, $3, 'test', now())",
    )
    .bind(server.id)
    .bind(vec![0u8; 32])
    .bind(server.boot_id)
    .execute(&db)
    .await
    .expect("insert");
    for i in 0..3 {
        app.enqueue(server.id, &message(&format!("m{i}")))
            .await
            .expect("enqueue");
    }
    assert!(
        app.metrics
            .encode()
            .contains("aromba_relay_outbox_dropped_total 1"),
        "{}",
        app.metrics.encode()
    );
    assert_eq!(rows(&db).await, 2);
}

#[sqlx::test(migrations = false)]
async fn two_relay_processes_on_one_database_deliver_across_them(db: PgPool) {
    let a = support::RelayProcess::spawn(&db, support::free_port()).await;
    let b = support::RelayProcess::spawn(&db, support::free_port()).await;
    let client = reqwest::Client::new();
    let mut seen_by = Vec::new();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut keep = Vec::new();
    let mut servers = Vec::new();
    // One server on each process, both registered through A.
    for process in [&a, &b] {
        let server = Server::new();
        let r = client
            .post(format!("http://{}/v1/servers", a.addr))
            .json(&server.registration())
            .send()
            .await
            .expect("answer");
        assert_eq!(r.status(), 201);
        let seen = Arc::new(Mutex::new(HashMap::<i64, u32>::new()));
        let record = seen.clone();
        let (tx, rx) = tokio::sync::mpsc::channel::<Outgoing>(1);
        keep.push(tx);
        tokio::spawn(run(
            server.endpoint_url(process.ws_url()),
            move |id, _| {
                *record.lock().expect("lock").entry(id).or_default() += 1;
            },
            rx,
            stopped.clone(),
        ));
        seen_by.push(seen);
        servers.push(server);
    }
    // Queued in the database the processes share (as either's chat side
    // would): each is delivered by the process holding its server.
    let mut ids = Vec::new();
    for server in &servers {
        let (id, _) = enqueue(&db, server.id, &message("across"), chrono::Utc::now(), 100)
            .await
            .expect("enqueue");
        ids.push(id);
    }
    let mut both = false;
    for _ in 0..400 {
        if seen_by
            .iter()
            .zip(&ids)
            .all(|(seen, id)| seen.lock().expect("lock").get(id) == Some(&1))
        {
            both = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(
        both,
        "a delivery did not reach the process holding its server"
    );
    let _ = stop.send(true);
}
