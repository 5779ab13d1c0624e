//! The Telegram side's benchmark (not a test; figures in BENCHMARKS.md):
//! updates per second from webhook POSTs to delivery on connected servers,
//! with p50/p99 latency, the fake Bot API and PostgreSQL in the loop, next
//! to the same load put straight into the delivery path (the outbox writer,
//! as the core benchmark does), in the same run.
//!
//! Both are closed loops over `AROMBA_BENCH_CHATS` chats (default 256),
//! each paired with its own connected server: a chat sends its next
//! message when the last one has reached its server. So the figures are what
//! the relay sustains with that many people waiting, with nothing dropped.
//!
//!     DATABASE_URL=postgres://… cargo bench -p aromba-relay --bench telegram
//!
//! `AROMBA_BENCH_MESSAGES` (default 20000) sets the messages per run.

#![forbid(unsafe_code)]

use aromba_relay_proto::client::{Endpoint, Outgoing, run};
use aromba_relay_proto::frame::Delivery;
use aromba_relay_proto::token::ServerToken;
use sqlx::postgres::PgPoolOptions;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use uuid::Uuid;

use aromba_testkit::bench as common;

use common::{Process, R, env_usize, free_port, on_scratch_database, percentile, unix_nanos};

const PEPPER: &str = "bench-pepper-0123456789abcdef-0123456789";
const BOT_TOKEN: &str = "123456789:BENCH-token-not-a-secret-0123456789abcdef";
const SECRET: &str = "bench-webhook-secret";
/// Telegram's webhook requests at once (its `max_connections` default).
const TELEGRAM_CONNECTIONS: usize = 40;
const FIRST_CHAT: i64 = 5_000_000;

fn main() -> R<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(bench())
}

async fn bench() -> R<()> {
    let chats = env_usize("AROMBA_BENCH_CHATS", 256);
    let messages = env_usize("AROMBA_BENCH_MESSAGES", 20_000);
    on_scratch_database("aromba_bench_tg", |url| async move {
        bench_on(&url, chats, messages).await
    })
    .await
}

/// A chat's waiting: its deliveries arrive here.
type Arrivals = Vec<tokio::sync::mpsc::UnboundedSender<u128>>;

async fn bench_on(url: &str, chats: usize, messages: usize) -> R<()> {
    println!("building the relay (release)…");
    let relay_bin = escargot::CargoBuild::new()
        .package("aromba-relay")
        .bin("aromba-relay")
        .release()
        .env("SQLX_OFFLINE", "true")
        .run()?;
    let fake = aromba_botfake::Fake::new(BOT_TOKEN, "aromba_bench_bot");
    let fake_addr = fake
        .clone()
        .serve(tokio::net::TcpListener::bind("127.0.0.1:0").await?)?;
    let (port, metrics) = (free_port()?, free_port()?);
    let mut cmd = relay_bin.command();
    cmd.env_clear()
        .env("DATABASE_URL", url)
        .env("AROMBA_RELAY_LISTEN", format!("127.0.0.1:{port}"))
        .env(
            "AROMBA_RELAY_METRICS_LISTEN",
            format!("127.0.0.1:{metrics}"),
        )
        .env("AROMBA_TOKEN_PEPPER", PEPPER)
        .env("AROMBA_RELAY_HELLOS_PER_ADDRESS", "100000")
        .env("TELEGRAM_BOT_TOKEN", BOT_TOKEN)
        // A relay with a bot names its Mini App.
        .env("AROMBA_TELEGRAM_APP", "aromba")
        .env("AROMBA_BOT_API_URL", format!("http://{fake_addr}"))
        // Telegram is not asked to call this; the benchmark posts itself.
        .env("AROMBA_PUBLIC_URL", "https://relay.invalid/")
        .env("TELEGRAM_WEBHOOK_SECRET", SECRET)
        .env("RUST_LOG", "error")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let _relay = Process {
        child: cmd.spawn()?,
    };
    let mut ready = false;
    for _ in 0..400 {
        if let Ok(r) = reqwest::get(format!("http://127.0.0.1:{port}/readyz")).await
            && r.status() == 200
        {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    if !ready {
        return Err("the relay did not become ready".into());
    }
    let db = PgPoolOptions::new().max_connections(8).connect(url).await?;

    // The servers, registered and paired directly: chat FIRST_CHAT + i is
    // server i's.
    let pepper = aromba_relay::Pepper::new(PEPPER.as_bytes())?;
    let ws_url = format!("ws://127.0.0.1:{port}/v1/connect");
    let mut endpoints = Vec::with_capacity(chats);
    let mut ids = Vec::with_capacity(chats);
    let mut hashes = Vec::with_capacity(chats);
    let mut chat_ids = Vec::with_capacity(chats);
    for i in 0..chats {
        let (id, token) = (Uuid::new_v4(), ServerToken::generate());
        hashes.push(aromba_relay::hashing::token_hash(&pepper, &token).to_vec());
        ids.push(id);
        chat_ids.push(FIRST_CHAT + i64::try_from(i)?);
        endpoints.push(Endpoint::new(ws_url.clone(), id, token, None));
    }
    sqlx::query(
        "INSERT INTO servers (id, token_hash, boot_id, install_source, registered_at, paired_at)
         SELECT id, hash, gen_random_uuid(), 'test', now(), now()
         FROM unnest($1::uuid[], $2::bytea[]) AS t(id, hash)",
    )
    .bind(&ids)
    .bind(&hashes)
    .execute(&db)
    .await?;
    sqlx::query(
        "INSERT INTO pairings (server_id, chat_id, paired_at)
         SELECT id, chat, now() FROM unnest($1::uuid[], $2::bigint[]) AS t(id, chat)",
    )
    .bind(&ids)
    .bind(&chat_ids)
    .execute(&db)
    .await?;

    // Every server connected, each handing its deliveries to its chat.
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut arrivals: Arrivals = Vec::with_capacity(chats);
    let mut waits = Vec::with_capacity(chats);
    let mut keep = Vec::new();
    for e in &endpoints {
        let (arrived, wait) = tokio::sync::mpsc::unbounded_channel();
        arrivals.push(arrived.clone());
        waits.push(wait);
        let (tx, rx) = tokio::sync::mpsc::channel::<Outgoing>(1);
        keep.push(tx);
        tokio::spawn(run(
            e.clone(),
            move |_, delivery| {
                if let Delivery::Message { text } = delivery
                    && let Some(sent) = text.rsplit(' ').next().and_then(|t| t.parse().ok())
                {
                    let _ = arrived.send(sent);
                }
            },
            rx,
            stopped.clone(),
        ));
    }
    let connected = async {
        loop {
            let text = reqwest::get(format!("http://127.0.0.1:{metrics}/metrics"))
                .await?
                .text()
                .await?;
            let n = text
                .lines()
                .find_map(|l| l.strip_prefix("aromba_relay_connected_servers "))
                .and_then(|n| n.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if n >= chats {
                return Ok::<_, reqwest::Error>(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(120), connected).await??;

    let per_chat = messages.div_ceil(chats);
    let total = per_chat * chats;

    // 1. The delivery path alone: each chat's message enqueued through the
    // outbox writer, as the chat side does after the webhook.
    let (outbox, outbox_tasks) = aromba_relay::writer::Writer::start(
        db.clone(),
        aromba_relay::metrics::Metrics::new().writer(),
        Arc::new(aromba_relay::clock::SystemClock),
        500,
    );
    let latencies = Arc::new(Mutex::new(Vec::with_capacity(total)));
    let start = Instant::now();
    let mut loops = Vec::new();
    for (i, mut wait) in waits.into_iter().enumerate() {
        let (outbox, server, lat) = (outbox.clone(), ids[i], latencies.clone());
        loops.push(tokio::spawn(async move {
            for n in 0..per_chat {
                let sent = unix_nanos();
                let text = format!("direct {n} {sent}");
                outbox
                    .enqueue(server, Delivery::Message { text }, chrono::Utc::now())
                    .await?;
                wait.recv().await.ok_or("a server stopped")?;
                let ms = (unix_nanos().saturating_sub(sent)) as f64 / 1e6;
                lat.lock().map_err(|_| "poisoned")?.push(ms);
            }
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(wait)
        }));
    }
    let mut waits = Vec::with_capacity(chats);
    for l in loops {
        waits.push(l.await??);
    }
    let direct_rate = total as f64 / start.elapsed().as_secs_f64();
    let direct = sorted(&latencies)?;
    outbox_tasks.drain(Duration::from_secs(10)).await;

    // 2. The same through Telegram's side: a POST of a message update to
    // the webhook, each chat waiting for its server to have the last one.
    // As Telegram posts: at most `max_connections` requests at once (40 by
    // default), each answered once its update is settled; more at once
    // from one address than its share of the relay's connections would
    // be refused.
    let latencies = Arc::new(Mutex::new(Vec::with_capacity(total)));
    let telegram_connections = Arc::new(tokio::sync::Semaphore::new(TELEGRAM_CONNECTIONS));
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(TELEGRAM_CONNECTIONS)
        .build()?;
    let webhook = format!("http://127.0.0.1:{port}/v1/telegram/webhook");
    let next_update = Arc::new(AtomicUsize::new(1));
    let start = Instant::now();
    let mut loops = Vec::new();
    for (i, mut wait) in waits.into_iter().enumerate() {
        let (http, webhook, chat) = (http.clone(), webhook.clone(), chat_ids[i]);
        let (next_update, lat) = (next_update.clone(), latencies.clone());
        let telegram_connections = telegram_connections.clone();
        loops.push(tokio::spawn(async move {
            for n in 0..per_chat {
                let sent = unix_nanos();
                let update = serde_json::json!({
                    "update_id": next_update.fetch_add(1, Ordering::Relaxed),
                    "message": {
                        "message_id": n + 1,
                        "from": {"id": chat, "is_bot": false, "first_name": "P"},
                        "chat": {"id": chat, "type": "private", "first_name": "P"},
                        "date": 1_700_000_000,
                        "text": format!("webhook {n} {sent}"),
                    }
                });
                let connection = telegram_connections.acquire().await?;
                let r = http
                    .post(&webhook)
                    .header("X-Telegram-Bot-Api-Secret-Token", SECRET)
                    .json(&update)
                    .send()
                    .await?;
                drop(connection);
                if r.status() != 200 {
                    return Err(format!("the webhook answered {}", r.status()).into());
                }
                wait.recv().await.ok_or("a server stopped")?;
                let ms = (unix_nanos().saturating_sub(sent)) as f64 / 1e6;
                lat.lock().map_err(|_| "poisoned")?.push(ms);
            }
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
        }));
    }
    for l in loops {
        l.await??;
    }
    let webhook_rate = total as f64 / start.elapsed().as_secs_f64();
    let through = sorted(&latencies)?;
    let text = reqwest::get(format!("http://127.0.0.1:{metrics}/metrics"))
        .await?
        .text()
        .await?;
    let dropped = text
        .lines()
        .find_map(|l| {
            l.strip_prefix(
                "aromba_relay_telegram_events_total{event=\"update_deferred_queue_full\"} ",
            )
        })
        .unwrap_or("0")
        .trim()
        .to_string();
    let _ = stop.send(true);
    drop(keep);
    drop(arrivals);
    println!(
        "{chats} chats, {total} messages each way; delivery path alone: {direct_rate:.0} messages/s (p50 {:.1} ms, p99 {:.1} ms)",
        percentile(&direct, 0.5),
        percentile(&direct, 0.99)
    );
    println!(
        "webhook POST to delivery: {webhook_rate:.0} updates/s (p50 {:.1} ms, p99 {:.1} ms), {dropped} dropped; ratio to the delivery path {:.2}",
        percentile(&through, 0.5),
        percentile(&through, 0.99),
        webhook_rate / direct_rate
    );
    Ok(())
}

fn sorted(latencies: &Mutex<Vec<f64>>) -> R<Vec<f64>> {
    let mut l = latencies.lock().map_err(|_| "poisoned")?.clone();
    l.sort_by(|a, b| a.total_cmp(b));
    Ok(l)
}
