//! The relay's benchmarks (not tests; figures in BENCHMARKS.md):
//!
//! 1. memory per idle connected server at N connections (the relay
//!    process's RSS delta over N), next to a bare tokio-tungstenite echo
//!    server with default settings, in the same run;
//! 2. messages per second through the delivery path (enqueue → NOTIFY →
//!    WebSocket → ack → delete) to 1,000 connected servers, with p50/p99
//!    latency, next to `pgbench` running one insert and one delete per
//!    transaction on the same database;
//! 3. the time for N servers to reconnect after a relay restart, and the
//!    CPU time the token checks take.
//!
//!     DATABASE_URL=postgres://… cargo bench -p aromba-relay --bench relay
//!
//! `AROMBA_BENCH_SERVERS` (default 10000) and `AROMBA_BENCH_MESSAGES`
//! (default 20000) scale it. The benchmark raises its own descriptor limit.

#![forbid(unsafe_code)]

use aromba_relay_proto::client::{Endpoint, Outgoing, dial, handshake, run};
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

/// Resident memory of a process, in KiB.
fn rss_kib(pid: u32) -> R<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .ok_or("no VmRSS")?;
    Ok(line
        .split_whitespace()
        .nth(1)
        .ok_or("no VmRSS value")?
        .parse()?)
}

/// User and system CPU seconds of a process so far.
fn cpu_seconds(pid: u32) -> R<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let after = stat.rsplit_once(')').ok_or("bad stat")?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>()? + fields[12].parse::<f64>()?;
    Ok(ticks / 100.0)
}

/// Raises this process's descriptor limit (which the relay and the echo
/// server inherit) to `wanted`: past the hard limit too where that is
/// allowed (root), else to the hard limit, which must then suffice.
fn raise_descriptor_limit(wanted: u64) -> R<()> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    if wanted > hard && setrlimit(Resource::RLIMIT_NOFILE, wanted, wanted).is_ok() {
        return Ok(());
    }
    setrlimit(Resource::RLIMIT_NOFILE, hard, hard)?;
    if hard < wanted {
        return Err(format!(
            "{wanted} descriptors are needed and the hard limit is {hard} (raise it, or run as root)"
        )
        .into());
    }
    Ok(())
}

fn built(bin: Option<&str>, example: Option<&str>) -> R<escargot::CargoRun> {
    let mut build = escargot::CargoBuild::new()
        .package("aromba-relay")
        .release();
    if let Some(b) = bin {
        build = build.bin(b);
    }
    if let Some(e) = example {
        build = build.example(e);
    }
    Ok(build.env("SQLX_OFFLINE", "true").run()?)
}

async fn start_relay(relay: &escargot::CargoRun, url: &str, port: u16, metrics: u16) -> R<Process> {
    let mut cmd = relay.command();
    cmd.env_clear()
        .env("DATABASE_URL", url)
        .env("AROMBA_RELAY_LISTEN", format!("127.0.0.1:{port}"))
        .env(
            "AROMBA_RELAY_METRICS_LISTEN",
            format!("127.0.0.1:{metrics}"),
        )
        .env("AROMBA_TOKEN_PEPPER", PEPPER)
        // Every client of the benchmark dials from 127.0.0.1.
        .env("AROMBA_RELAY_HELLOS_PER_ADDRESS", "100000")
        .env("RUST_LOG", "error")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let process = Process {
        child: cmd.spawn()?,
    };
    for _ in 0..400 {
        if let Ok(r) = reqwest::get(format!("http://127.0.0.1:{port}/readyz")).await
            && r.status() == 200
        {
            return Ok(process);
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    Err("the relay did not become ready".into())
}

async fn connected(metrics: u16) -> usize {
    let Ok(r) = reqwest::get(format!("http://127.0.0.1:{metrics}/metrics")).await else {
        return 0;
    };
    r.text()
        .await
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("aromba_relay_connected_servers "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

async fn wait_connected(metrics: u16, n: usize, limit: Duration) -> R<Duration> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if connected(metrics).await >= n {
            return Ok(start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Err(format!("only {} of {n} connected", connected(metrics).await).into())
}

fn main() -> R<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // One descriptor per connection in the process that holds it, and room
    // for the rest.
    let servers = env_usize("AROMBA_BENCH_SERVERS", 10_000);
    raise_descriptor_limit(u64::try_from(servers)? + 512)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(bench())
}

async fn bench() -> R<()> {
    let servers = env_usize("AROMBA_BENCH_SERVERS", 10_000);
    let messages = env_usize("AROMBA_BENCH_MESSAGES", 20_000);
    on_scratch_database("aromba_bench", |url| async move {
        bench_on(&url, servers, messages).await
    })
    .await
}

async fn bench_on(url: &str, servers: usize, messages: usize) -> R<()> {
    println!("building the relay and the echo server (release)…");
    let relay_bin = built(Some("aromba-relay"), None)?;
    let echo_bin = built(None, Some("echo_server"))?;
    let (port, metrics) = (free_port()?, free_port()?);
    let relay = start_relay(&relay_bin, url, port, metrics).await?;
    let db = PgPoolOptions::new()
        .max_connections(16)
        .connect(url)
        .await?;

    // The servers, registered directly (the benchmarks are about the
    // connection, not registration).
    let pepper = aromba_relay::Pepper::new(PEPPER.as_bytes())?;
    let mut endpoints = Vec::with_capacity(servers);
    let ws_url = format!("ws://127.0.0.1:{port}/v1/connect");
    for chunk in 0..servers.div_ceil(1000) {
        let n = 1000.min(servers - chunk * 1000);
        let mut ids = Vec::with_capacity(n);
        let mut hashes = Vec::with_capacity(n);
        for _ in 0..n {
            let (id, token) = (Uuid::new_v4(), ServerToken::generate());
            hashes.push(aromba_relay::hashing::token_hash(&pepper, &token).to_vec());
            ids.push(id);
            endpoints.push(Endpoint::new(ws_url.clone(), id, token, None));
        }
        sqlx::query(
            "INSERT INTO servers (id, token_hash, boot_id, install_source, registered_at, paired_at)
             SELECT id, hash, gen_random_uuid(), 'bench', now(), now()
             FROM unnest($1::uuid[], $2::bytea[]) AS t(id, hash)",
        )
        .bind(&ids)
        .bind(&hashes)
        .execute(&db)
        .await?;
    }

    // 1. Memory per idle connection.
    let relay_pid = relay.child.id();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = rss_kib(relay_pid)?;
    let mut held = Vec::with_capacity(servers);
    for batch in endpoints.chunks(200) {
        let mut joins = Vec::new();
        for e in batch {
            let e = e.clone();
            joins.push(tokio::spawn(async move {
                let mut ws = dial(&e).await?;
                let session = handshake(&mut ws, &e).await?;
                Ok::<_, aromba_relay_proto::client::ClientError>((ws, session))
            }));
        }
        for j in joins {
            held.push(j.await??);
        }
    }
    wait_connected(metrics, servers, Duration::from_secs(60)).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = rss_kib(relay_pid)?;
    let relay_per = (after.saturating_sub(before)) as f64 / servers as f64;
    drop(held);

    let echo_port = free_port()?;
    let mut echo_cmd = echo_bin.command();
    echo_cmd
        .arg(format!("127.0.0.1:{echo_port}"))
        .stdout(std::process::Stdio::null());
    let echo = Process {
        child: echo_cmd.spawn()?,
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let echo_before = rss_kib(echo.child.id())?;
    let mut echo_held = Vec::with_capacity(servers);
    for batch in 0..servers.div_ceil(200) {
        let n = 200.min(servers - batch * 200);
        let mut joins = Vec::new();
        for _ in 0..n {
            let u = format!("ws://127.0.0.1:{echo_port}/");
            joins.push(tokio::spawn(async move {
                tokio_tungstenite::connect_async(u).await.map(|(ws, _)| ws)
            }));
        }
        for j in joins {
            echo_held.push(j.await??);
        }
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let echo_after = rss_kib(echo.child.id())?;
    let echo_per = (echo_after.saturating_sub(echo_before)) as f64 / servers as f64;
    drop(echo_held);
    drop(echo);
    println!(
        "memory per idle connection at {servers}: relay {relay_per:.1} KiB, bare tokio-tungstenite echo {echo_per:.1} KiB (ratio {:.2})",
        relay_per / echo_per
    );
    wait_disconnected(metrics).await;

    // 2. Delivery throughput to 1,000 servers, next to pgbench.
    let fleet = 1_000.min(servers);
    let latencies = Arc::new(Mutex::new(Vec::<f64>::with_capacity(messages)));
    let handled = Arc::new(AtomicUsize::new(0));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut keep = Vec::new();
    for e in endpoints.iter().take(fleet) {
        let (tx, rx) = tokio::sync::mpsc::channel::<Outgoing>(1);
        keep.push(tx);
        let (lat, count) = (latencies.clone(), handled.clone());
        tokio::spawn(run(
            e.clone(),
            move |_, delivery| {
                if let Delivery::Message { text } = delivery
                    && let Ok(sent) = text.parse::<u128>()
                {
                    let ms = (unix_nanos().saturating_sub(sent)) as f64 / 1e6;
                    if let Ok(mut l) = lat.lock() {
                        l.push(ms);
                    }
                }
                count.fetch_add(1, Ordering::Relaxed);
            },
            rx,
            stopped.clone(),
        ));
    }
    wait_connected(metrics, fleet, Duration::from_secs(60)).await?;
    let ids: Vec<Uuid> = endpoints.iter().take(fleet).map(|e| e.server_id).collect();
    let start = Instant::now();
    let next = Arc::new(AtomicUsize::new(0));
    // The writers enqueue as a replica's chat side does: through its
    // outbox writer (a commit per batch).
    let (outbox, outbox_tasks) = aromba_relay::writer::Writer::start(
        db.clone(),
        aromba_relay::metrics::Metrics::new().writer(),
        Arc::new(aromba_relay::clock::SystemClock),
        500,
    );
    let mut writers = Vec::new();
    for _ in 0..32 {
        let (outbox, ids, next) = (outbox.clone(), ids.clone(), next.clone());
        writers.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= messages {
                    return Ok::<_, aromba_relay::writer::WriterError>(());
                }
                let d = Delivery::Message {
                    text: unix_nanos().to_string(),
                };
                outbox
                    .enqueue(ids[i % ids.len()], d, chrono::Utc::now())
                    .await?;
            }
        }));
    }
    for w in writers {
        w.await??;
    }
    outbox_tasks.drain(Duration::from_secs(10)).await;
    while handled.load(Ordering::Relaxed) < messages || outbox_rows(&db).await? > 0 {
        if start.elapsed() > Duration::from_secs(600) {
            return Err("deliveries did not finish within 10 minutes".into());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let rate = messages as f64 / elapsed;
    let mut lat = latencies.lock().map_err(|_| "poisoned")?.clone();
    lat.sort_by(|a, b| a.total_cmp(b));
    let _ = stop.send(true);
    drop(keep);
    let pg_tps = pgbench(url).await?;
    println!(
        "delivery to {fleet} servers: {rate:.0} messages/s (p50 {:.1} ms, p99 {:.1} ms); pgbench insert+delete: {pg_tps:.0} tps (ratio {:.2})",
        percentile(&lat, 0.5),
        percentile(&lat, 0.99),
        rate / pg_tps
    );
    wait_disconnected(metrics).await;

    // 3. Reconnect after a restart.
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut keep = Vec::new();
    for e in &endpoints {
        let (tx, rx) = tokio::sync::mpsc::channel::<Outgoing>(1);
        keep.push(tx);
        tokio::spawn(run(e.clone(), |_, _| {}, rx, stopped.clone()));
    }
    wait_connected(metrics, servers, Duration::from_secs(120)).await?;
    let pid = nix::unistd::Pid::from_raw(i32::try_from(relay_pid)?);
    let restart = Instant::now();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM)?;
    let mut relay = relay;
    let _ = relay.child.wait();
    drop(relay);
    let relay = start_relay(&relay_bin, url, port, metrics).await?;
    let started = restart.elapsed();
    let back = wait_connected(metrics, servers, Duration::from_secs(120)).await?;
    let total = restart.elapsed();
    let cpu = cpu_seconds(relay.child.id())?;
    let checks = Instant::now();
    for e in &endpoints {
        std::hint::black_box(aromba_relay::hashing::token_hash(&pepper, &e.token));
    }
    let check_cpu = checks.elapsed().as_secs_f64();
    println!(
        "reconnect of {servers} after a restart: all back {:.2} s after SIGTERM (relay up again after {:.2} s, then {:.2} s); the new relay's CPU meanwhile {cpu:.2} s; {servers} token checks (keyed hash) {check_cpu:.4} s",
        total.as_secs_f64(),
        started.as_secs_f64(),
        back.as_secs_f64()
    );
    let _ = stop.send(true);
    drop(keep);
    drop(relay);
    Ok(())
}

async fn wait_disconnected(metrics: u16) {
    for _ in 0..500 {
        if connected(metrics).await == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn outbox_rows(db: &sqlx::PgPool) -> R<i64> {
    Ok(sqlx::query_scalar("SELECT count(*) FROM outbox")
        .fetch_one(db)
        .await?)
}

/// pgbench, 32 clients for 10 s, one insert and one delete per
/// transaction, on the same database.
async fn pgbench(url: &str) -> R<f64> {
    let db = PgPoolOptions::new().max_connections(1).connect(url).await?;
    sqlx::query("CREATE TABLE IF NOT EXISTS pgbench_outbox (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, body jsonb NOT NULL, created_at timestamptz NOT NULL)")
        .execute(&db)
        .await?;
    let dir = tempfile::tempdir()?;
    let script = dir.path().join("insert_delete.sql");
    std::fs::write(
        &script,
        "INSERT INTO pgbench_outbox (body, created_at) VALUES ('{\"kind\":\"message\",\"text\":\"x\"}', now()) RETURNING id \\gset\nDELETE FROM pgbench_outbox WHERE id = :id;\n",
    )?;
    let out = assert_cmd::Command::new("pgbench")
        .args(["-n", "-c", "32", "-j", "2", "-T", "10", "-f"])
        .arg(&script)
        .arg(url)
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("tps = "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("pgbench: {}", String::from_utf8_lossy(&out.stderr)).into())
}
