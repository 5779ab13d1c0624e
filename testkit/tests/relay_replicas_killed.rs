//! Kill the relay, lose nothing: two replicas of the relay as processes
//! (`aromba-test-replica`) on one private PostgreSQL, the fake Bot API as
//! Telegram (polled by whichever replica holds the poller's lock), and
//! servers connected through the real protocol client, which dials either
//! replica. Under load both ways — the servers' messages to their chats
//! (some with a button, which the person taps, sometimes twice) and the
//! person's messages to the servers — the test kills a replica with SIGKILL
//! at seeded random moments and starts it again on its port, and crashes
//! PostgreSQL once. Then, from both ends:
//!
//! - every message a server sent reached its chat, once — or, when the
//!   replica sending it was killed between Telegram's answer and its
//!   record of the delivery, once per send begun: the Bot API cannot send
//!   a message once only, and the relay counts the sends it began
//!   (`chat_messages.attempts`), which is what bounds the copies;
//! - every message the person wrote reached the server, once;
//! - every tap the relay answered "Sent to your server." reached the
//!   server once, and no tap reached it twice.
//!
//! The seed is printed; `AROMBA_CHAOS_SEED=N` runs that schedule again.

use aromba_botfake::Fake;
use aromba_relay_proto::client::{
    Connecting, Dialer, Endpoint, Incoming, Kept, Outgoing, run_with,
};
use aromba_relay_proto::frame::{Body, Button, Delivery};
use aromba_testkit::postgres::PrivatePostgres;
use aromba_testkit::relay::bot::fake;
use aromba_testkit::relay::{Server, free_port};
use assert_cmd::cargo::CommandCargoExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use uuid::Uuid;

const SERVERS: usize = 6;
const KILLS: usize = 16;
/// How long the servers and the person keep writing.
const LOAD: Duration = Duration::from_secs(20);
/// How long everything may take to arrive once the load stops.
const DRAIN: Duration = Duration::from_secs(90);
const FIRST_CHAT: i64 = 5_550_000_001;

/// Dials one replica, the other when it does not answer: the way a
/// server behind a load balancer reaches whichever replica is up.
#[derive(Debug)]
struct EitherReplica {
    ports: [u16; 2],
    next: AtomicUsize,
}

impl Dialer for EitherReplica {
    fn connect<'a>(&'a self, host: &'a str, _port: u16) -> Connecting<'a> {
        Box::pin(async move {
            let first = self.next.fetch_add(1, Ordering::Relaxed);
            let mut last = None;
            for i in 0..2 {
                match tokio::net::TcpStream::connect((host, self.ports[(first + i) % 2])).await {
                    Ok(stream) => return Ok(stream),
                    Err(e) => last = Some(e),
                }
            }
            Err(last.unwrap_or_else(|| std::io::Error::other("no replica")))
        })
    }
}

/// One replica's process, started again on its port after each kill.
struct Replica {
    child: Option<std::process::Child>,
    port: u16,
    database: String,
    bot_api: SocketAddr,
    log: PathBuf,
}

impl Replica {
    fn new(database: String, bot_api: SocketAddr, log: PathBuf) -> Replica {
        Replica {
            child: None,
            port: free_port(),
            database,
            bot_api,
            log,
        }
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("the replica's log file");
        let child = std::process::Command::cargo_bin("aromba-test-replica")
            .expect("the test replica is built")
            .args([
                self.database.clone(),
                format!("127.0.0.1:{}", self.port),
                self.bot_api.to_string(),
            ])
            .env_clear()
            .env("RUST_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .spawn()
            .expect("the replica starts");
        self.child = Some(child);
    }

    /// Started, and answering `/readyz`; started again while it exits
    /// (it does when PostgreSQL is down as it starts).
    async fn start(&mut self) {
        let until = Instant::now() + Duration::from_secs(60);
        self.spawn();
        while Instant::now() < until {
            if let Ok(r) = reqwest::get(format!("http://127.0.0.1:{}/readyz", self.port)).await
                && r.status() == 200
            {
                return;
            }
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(_)) = child.try_wait()
            {
                tokio::time::sleep(Duration::from_millis(200)).await;
                self.spawn();
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("a replica did not become ready; see {}", self.log.display());
    }

    /// SIGKILL: nothing said to anyone.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.kill();
    }
}

/// What reached the servers, by server.
#[derive(Default)]
struct Arrived {
    /// The person's texts, and how often each arrived.
    texts: HashMap<String, u32>,
    /// Taps, by the server's message and how often.
    taps: HashMap<Uuid, u32>,
    paired: HashSet<usize>,
}

/// A server's message: its chat and text.
struct SentByServer {
    chat: i64,
    text: String,
    button: bool,
}

fn chat_of(i: usize) -> i64 {
    FIRST_CHAT + i as i64
}

/// Registers, connects and pairs server `i`; returns what feeds its
/// client.
async fn paired_server(
    i: usize,
    fake: &Fake,
    ports: [u16; 2],
    arrived: &Arc<Mutex<Arrived>>,
    stop: &tokio::sync::watch::Receiver<bool>,
) -> tokio::sync::mpsc::Sender<Outgoing> {
    let server = Server::new();
    let r = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{}/v1/servers", ports[i % 2]))
        .json(&server.registration())
        .send()
        .await
        .expect("the replica answers");
    assert_eq!(r.status(), 201, "registration");
    let mut endpoint = Endpoint::new(
        format!("ws://127.0.0.1:{}/v1/connect", ports[0]),
        server.id,
        server.token.clone(),
        None,
    );
    endpoint.dialer = Arc::new(EitherReplica {
        ports,
        next: AtomicUsize::new(i),
    });
    let (codes_tx, mut codes) = tokio::sync::mpsc::unbounded_channel();
    let record = arrived.clone();
    let handle = move |incoming: Incoming| {
        let mut arrived = record
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match incoming {
            Incoming::PairingCode { code, .. } => {
                let _ = codes_tx.send(code);
            }
            Incoming::Delivery {
                delivery: Delivery::Message { text },
                ..
            } => *arrived.texts.entry(text).or_default() += 1,
            Incoming::Delivery {
                delivery: Delivery::Tap { message, .. },
                ..
            } => *arrived.taps.entry(message).or_default() += 1,
            Incoming::Delivery {
                delivery: Delivery::Paired { .. },
                ..
            } => {
                arrived.paired.insert(i);
            }
            _ => {}
        }
        Kept::Yes
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Outgoing>(1);
    tokio::spawn(run_with(endpoint, handle, rx, stop.clone()));
    tx.send(Outgoing(Body::PairingRequest {}))
        .await
        .expect("the client runs");
    let code = tokio::time::timeout(Duration::from_secs(30), codes.recv())
        .await
        .expect("a pairing code in time")
        .expect("a pairing code");
    fake.user_message(chat_of(i), &format!("/start {code}"));
    let until = Instant::now() + Duration::from_secs(30);
    while !arrived.lock().expect("lock").paired.contains(&i) {
        assert!(Instant::now() < until, "server {i} was never paired");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tx
}

/// The servers' messages, one every 100 ms each, a button on every fifth.
async fn servers_write(
    feeds: Vec<tokio::sync::mpsc::Sender<Outgoing>>,
    sent: Arc<Mutex<HashMap<Uuid, SentByServer>>>,
) {
    let until = Instant::now() + LOAD;
    let mut n = 0;
    let mut writers = tokio::task::JoinSet::new();
    for (i, feed) in feeds.into_iter().enumerate() {
        let sent = sent.clone();
        writers.spawn(async move {
            while Instant::now() < until {
                n += 1;
                let id = Uuid::new_v4();
                let text = format!("server {i} says {n}");
                let button = n % 5 == 0;
                let buttons = if button {
                    vec![Button::new("ok", "OK")]
                } else {
                    Vec::new()
                };
                sent.lock().expect("lock").insert(
                    id,
                    SentByServer {
                        chat: chat_of(i),
                        text: text.clone(),
                        button,
                    },
                );
                let body = Body::Send {
                    id,
                    text,
                    buttons,
                    monospace: Vec::new(),
                };
                if feed.send(Outgoing(body)).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
    }
    while writers.join_next().await.is_some() {}
}

/// The person writes in every chat, every 150 ms.
async fn person_writes(fake: Fake, written: Arc<Mutex<Vec<String>>>) {
    let until = Instant::now() + LOAD;
    let mut n = 0;
    while Instant::now() < until {
        n += 1;
        for i in 0..SERVERS {
            let text = format!("person in chat {i} writes note {n}");
            fake.user_message(chat_of(i), &text);
            written.lock().expect("lock").push(text);
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
}

/// A tap: the query's id and the message tapped, by the server's text.
struct Tapped {
    query: String,
    text: String,
}

/// The person taps each message with a button a moment after it appears,
/// a quarter of them twice (a double tap).
async fn person_taps(
    fake: Fake,
    taps: Arc<Mutex<Vec<Tapped>>>,
    seed: u64,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x7a9);
    let mut first_seen: HashMap<(i64, i64), Instant> = HashMap::new();
    let mut tapped: HashSet<(i64, i64)> = HashSet::new();
    while !*stop.borrow() {
        for i in 0..SERVERS {
            let chat = chat_of(i);
            for m in fake.sent_to(chat) {
                let key = (chat, m.message_id);
                let Some((_, data)) = m.buttons.iter().flatten().next() else {
                    continue;
                };
                if tapped.contains(&key) || !m.text.starts_with("server ") {
                    continue;
                }
                let seen = *first_seen.entry(key).or_insert_with(Instant::now);
                if seen.elapsed() < Duration::from_millis(300) {
                    continue;
                }
                tapped.insert(key);
                let times = if rng.random_range(0..4) == 0 { 2 } else { 1 };
                for _ in 0..times {
                    if let Some(query) = fake.tap(chat, m.message_id, data) {
                        taps.lock().expect("lock").push(Tapped {
                            query,
                            text: m.text.clone(),
                        });
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Kills a replica at random moments, starts it again, and crashes
/// PostgreSQL once halfway.
async fn kill_replicas(
    replicas: &mut [Replica; 2],
    pg: Arc<PrivatePostgres>,
    rng: &mut StdRng,
) -> usize {
    let mut kills = 0;
    for k in 0..KILLS {
        tokio::time::sleep(Duration::from_millis(rng.random_range(200..1_200))).await;
        if k == KILLS / 2 {
            let pg = pg.clone();
            tokio::task::spawn_blocking(move || pg.crash_and_start())
                .await
                .expect("PostgreSQL crashed and started");
        }
        let which = rng.random_range(0..2);
        replicas[which].kill();
        kills += 1;
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..400))).await;
        replicas[which].start().await;
    }
    kills
}

fn log_tail(path: &Path) -> String {
    let log = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_killed_and_postgres_crashed_under_load_lose_and_repeat_nothing() {
    let seed = std::env::var("AROMBA_CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(7, |d| d.as_secs())
        });
    eprintln!("chaos seed {seed} (AROMBA_CHAOS_SEED={seed} runs this schedule again)");
    let mut rng = StdRng::seed_from_u64(seed);
    let pg = Arc::new(
        tokio::task::spawn_blocking(PrivatePostgres::start)
            .await
            .expect("PostgreSQL started"),
    );
    let (fake, fake_addr) = fake().await;
    let logs = tempfile::tempdir().expect("a folder for the replicas' logs");
    let mut replicas = [0, 1].map(|i| {
        Replica::new(
            pg.url(),
            fake_addr,
            logs.path().join(format!("replica-{i}.log")),
        )
    });
    for replica in &mut replicas {
        replica.start().await;
    }
    let ports = [replicas[0].port, replicas[1].port];

    let arrived = Arc::new(Mutex::new(Arrived::default()));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut feeds = Vec::new();
    for i in 0..SERVERS {
        feeds.push(paired_server(i, &fake, ports, &arrived, &stopped).await);
    }

    let sent = Arc::new(Mutex::new(HashMap::new()));
    let written = Arc::new(Mutex::new(Vec::new()));
    let taps = Arc::new(Mutex::new(Vec::new()));
    let (taps_stop, taps_stopped) = tokio::sync::watch::channel(false);
    let servers = tokio::spawn(servers_write(feeds.clone(), sent.clone()));
    let person = tokio::spawn(person_writes(fake.clone(), written.clone()));
    let tapper = tokio::spawn(person_taps(fake.clone(), taps.clone(), seed, taps_stopped));
    let kills = kill_replicas(&mut replicas, pg.clone(), &mut rng).await;
    servers.await.expect("the servers wrote");
    person.await.expect("the person wrote");

    // Everything arrives, or the drain runs out.
    let until = Instant::now() + DRAIN;
    let settled = |arrived: &Arrived| {
        let sent = sent.lock().expect("lock");
        let shown: Vec<String> = (0..SERVERS)
            .flat_map(|i| fake.sent_to(chat_of(i)))
            .map(|m| m.text)
            .collect();
        let shown: HashSet<&String> = shown.iter().collect();
        sent.values().all(|m| shown.contains(&m.text))
            && written
                .lock()
                .expect("lock")
                .iter()
                .all(|t| arrived.texts.contains_key(t))
    };
    while Instant::now() < until && !settled(&arrived.lock().expect("lock")) {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The last taps' answers.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let _ = taps_stop.send(true);
    let _ = tapper.await;

    // The sends the relay began, by message, as its record of each
    // delivery counts them.
    let db = sqlx::PgPool::connect(&pg.url())
        .await
        .expect("the private PostgreSQL answers");
    let attempts: HashMap<Uuid, i32> =
        sqlx::query_as::<_, (Uuid, i32)>("SELECT message, attempts FROM chat_messages")
            .fetch_all(&db)
            .await
            .expect("the deliveries' records")
            .into_iter()
            .collect();
    let arrived = arrived.lock().expect("lock");
    let sent = sent.lock().expect("lock");
    let mut shown: HashMap<(i64, String), u32> = HashMap::new();
    for i in 0..SERVERS {
        for m in fake.sent_to(chat_of(i)) {
            *shown.entry((m.chat_id, m.text)).or_default() += 1;
        }
    }
    let count = |m: &SentByServer| shown.get(&(m.chat, m.text.clone())).copied().unwrap_or(0);
    let lost_to_chat = sent.values().filter(|m| count(m) == 0).count();
    let sent_again = attempts.values().filter(|&&n| n > 1).count();
    let repeated_to_chat = sent.iter().filter(|(_, m)| count(m) > 1).count();
    let repeated_unexplained = sent
        .iter()
        .filter(|(id, m)| count(m) > attempts.get(*id).copied().unwrap_or(1).max(1) as u32)
        .count();
    let written = written.lock().expect("lock");
    let lost_to_server = written
        .iter()
        .filter(|t| !arrived.texts.contains_key(*t))
        .count();
    let repeated_to_server = arrived.texts.values().filter(|&&n| n > 1).count();

    let by_text: HashMap<&String, Uuid> = sent.iter().map(|(id, m)| (&m.text, *id)).collect();
    let taps = taps.lock().expect("lock");
    let mut answered_sent: HashMap<Uuid, u32> = HashMap::new();
    let mut queries: HashMap<Uuid, u32> = HashMap::new();
    let (mut unanswered, mut expired) = (0, 0);
    for tap in taps.iter() {
        let Some(&id) = by_text.get(&tap.text) else {
            continue;
        };
        *queries.entry(id).or_default() += 1;
        match fake.answer_of(&tap.query) {
            Some(Some(answer)) if answer == "Sent to your server." => {
                *answered_sent.entry(id).or_default() += 1
            }
            None => unanswered += 1,
            _ => expired += 1,
        }
    }
    let taps_lost = answered_sent
        .iter()
        .filter(|(id, n)| arrived.taps.get(id).copied().unwrap_or(0) < **n)
        .count();
    let taps_repeated = arrived
        .taps
        .iter()
        .filter(|(id, n)| queries.get(id).copied().unwrap_or(0) < **n)
        .count();
    let summary = format!(
        "seed {seed}: {kills} kills, PostgreSQL crashed once; servers sent {} ({} with a button): \
         {lost_to_chat} lost, {repeated_to_chat} shown twice ({sent_again} sent again after an \
         interrupted send, {repeated_unexplained} more often than sends begun); the person wrote {}: \
         {lost_to_server} lost, {repeated_to_server} arrived twice; {} taps ({} sent on, \
         {expired} expired, {unanswered} unanswered): {taps_lost} lost, {taps_repeated} repeated",
        sent.len(),
        sent.values().filter(|m| m.button).count(),
        written.len(),
        taps.len(),
        answered_sent.values().sum::<u32>(),
    );
    eprintln!("{summary}");
    let _ = stop.send(true);
    let clean = lost_to_chat == 0
        && repeated_unexplained == 0
        && lost_to_server == 0
        && repeated_to_server == 0
        && taps_lost == 0
        && taps_repeated == 0;
    assert!(
        clean,
        "{summary}\nreplica 0's log ends:\n{}\nreplica 1's log ends:\n{}",
        log_tail(&replicas[0].log),
        log_tail(&replicas[1].log)
    );
}
