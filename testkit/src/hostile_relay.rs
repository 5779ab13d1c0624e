//! A relay played by a test over the real protocol (`aromba_relay_proto::session`),
//! saying what a hostile one would: for the tests that attack `aromba pair`
//! and `aromba run` from the relay's side. It answers `POST /v1/servers`
//! with 201, seals and opens frames as the relay does, keeps every frame it
//! opened (with the connection it came on), and can be told to deliver
//! more, to send any frame it seals (an `anchor`), to withhold its
//! acknowledgements, to drop its connections, or to hang after a welcome.
//! It pings every [`PING_SECS`], as the relay does.

use crate::worker::{Running, TestWarden, account, aromba};
use aromba_relay_proto::frame::{Accept, Body, Delivery, Hello, Nonce, PROTOCOL_VERSION};
use aromba_relay_proto::session::{Direction, Opener, Sealer, derive, now_ms};
use futures_util::{SinkExt, StreamExt};
use std::io::Write;
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{broadcast, mpsc};
use tokio_tungstenite::tungstenite::Message;

/// A well-formed minisign public key (`Ed`, a key id, 32 bytes): the
/// honest relay's.
pub const HONEST_KEY: &str = "RWQBAQEBAQEBAQABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhscHR4f";
/// Another one: the attacker's.
pub const HOSTILE_KEY: &str = "RWQHBwcHBwcHBwABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhscHR4f";

/// Seconds between the played relay's pings (its welcome says so).
pub const PING_SECS: u32 = 5;

/// What the played relay answers.
#[derive(Clone, Default)]
pub struct Script {
    /// Answer a pairing request with this code and link, then deliver
    /// `Paired` with `key` and the person's confirmation in the app;
    /// without a key, answer `AlreadyPaired`.
    pub code: String,
    pub link: String,
    pub key: Option<String>,
    /// Delivered to every connection right after the welcome.
    pub deliveries: Vec<Delivery>,
    /// Never acknowledge a message or an edit (a hostile relay, or an
    /// honest one whose chat outbox is full).
    pub withhold_acks: bool,
    /// After `Paired`, never deliver the person's confirmation in the app:
    /// the connection is dropped instead.
    pub withhold_confirmation: bool,
}

/// A relay played by the test on 127.0.0.1: `POST /v1/servers` answered
/// 201, the WebSocket speaking the real protocol. Every frame it opened is
/// kept in `seen`, with the number of the connection it came on (from 1).
pub struct PlayedRelay {
    pub addr: SocketAddr,
    script: Arc<Mutex<Script>>,
    seen: Arc<Mutex<Vec<(usize, Body)>>>,
    /// More deliveries, to the connection that is up.
    more: broadcast::Sender<Delivery>,
    /// Any frame, sealed, to the connection that is up.
    raw: broadcast::Sender<Body>,
    /// Drops every connection that is up.
    cut: broadcast::Sender<()>,
    connections: Arc<std::sync::atomic::AtomicUsize>,
    /// The next connection is welcomed, then never read from nor written
    /// to again (a relay hung, or a link gone half-open).
    mute: Arc<std::sync::atomic::AtomicBool>,
}

impl PlayedRelay {
    pub async fn start(script: Script) -> PlayedRelay {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(Mutex::new(script));
        let (more, _) = broadcast::channel(65_536);
        let (raw, _) = broadcast::channel(65_536);
        let (cut, _) = broadcast::channel(4);
        let connections = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mute = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let relay = PlayedRelay {
            addr,
            script: script.clone(),
            seen: seen.clone(),
            more: more.clone(),
            raw: raw.clone(),
            cut: cut.clone(),
            connections: connections.clone(),
            mute: mute.clone(),
        };
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let script = script.lock().unwrap_or_else(|p| p.into_inner()).clone();
                let line = Line {
                    seen: seen.clone(),
                    more: more.subscribe(),
                    raw: raw.subscribe(),
                    cut: cut.subscribe(),
                    connections: connections.clone(),
                    mute: mute.clone(),
                };
                tokio::spawn(serve(stream, script, line));
            }
        });
        relay
    }

    /// From the next connection on, the relay answers by `script`.
    pub fn turn(&self, script: Script) {
        *self.script.lock().unwrap_or_else(|p| p.into_inner()) = script;
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every frame the relay opened, in order.
    pub fn seen(&self) -> Vec<Body> {
        self.seen_with_connection()
            .into_iter()
            .map(|(_, b)| b)
            .collect()
    }

    /// Every frame the relay opened, with its connection's number.
    pub fn seen_with_connection(&self) -> Vec<(usize, Body)> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Connections that said hello so far.
    pub fn connections(&self) -> usize {
        self.connections.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Delivers `delivery` on the connection that is up.
    pub fn deliver(&self, delivery: Delivery) {
        let _ = self.more.send(delivery);
    }

    /// Drops the connections that are up (the Worker dials again).
    pub fn cut(&self) {
        let _ = self.cut.send(());
    }

    /// Seals and sends `body` on the connection that is up.
    pub fn send_frame(&self, body: Body) {
        let _ = self.raw.send(body);
    }

    /// The next connection hangs after its welcome.
    pub fn mute_next(&self) {
        self.mute.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Waits (up to a minute) until a frame `want` takes arrived.
    pub async fn wait_for(&self, what: &str, want: impl Fn(&Body) -> bool) -> Body {
        for _ in 0..600 {
            if let Some(b) = self.seen().into_iter().find(|b| want(b)) {
                return b;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the relay never saw {what}; it saw {:#?}", self.seen());
    }

    /// Waits (up to `secs`) until `count` frames `want` takes arrived;
    /// how many did.
    pub async fn wait_count(&self, count: usize, secs: u64, want: impl Fn(&Body) -> bool) -> usize {
        let mut n = 0;
        for _ in 0..secs * 10 {
            n = self.seen().iter().filter(|b| want(b)).count();
            if n >= count {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        n
    }
}

/// What one connection shares with the relay.
struct Line {
    seen: Arc<Mutex<Vec<(usize, Body)>>>,
    more: broadcast::Receiver<Delivery>,
    raw: broadcast::Receiver<Body>,
    cut: broadcast::Receiver<()>,
    connections: Arc<std::sync::atomic::AtomicUsize>,
    mute: Arc<std::sync::atomic::AtomicBool>,
}

async fn serve(mut stream: tokio::net::TcpStream, script: Script, mut line: Line) {
    let mut head = [0u8; 4];
    if stream.peek(&mut head).await.is_err() {
        return;
    }
    if &head == b"POST" {
        // The registration: read the request whole, answer "new".
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            let Ok(n) = stream.read(&mut chunk).await else {
                return;
            };
            if n == 0 {
                return;
            }
            buf.extend_from_slice(&chunk[..n]);
            let text = String::from_utf8_lossy(&buf).to_string();
            if let Some(end) = text.find("\r\n\r\n") {
                let length = text[..end]
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse::<usize>().ok())
                            .flatten()
                    })
                    .unwrap_or(0);
                if buf.len() >= end + 4 + length {
                    break;
                }
            }
        }
        let body = r#"{"outcome":"registered"}"#;
        let answer = format!(
            "HTTP/1.1 201 Created\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = stream.write_all(answer.as_bytes()).await;
        let _ = stream.shutdown().await;
        return;
    }
    let Ok(ws) = tokio_tungstenite::accept_async(stream).await else {
        return;
    };
    let (mut tx, mut rx) = ws.split();
    let Some(Ok(Message::Text(text))) = rx.next().await else {
        return;
    };
    let Ok(hello) = serde_json::from_str::<Hello>(text.as_str()) else {
        return;
    };
    let number = line
        .connections
        .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
        + 1;
    let nonce = Nonce::random();
    let up = derive(&hello.token, &hello.nonce, &nonce, Direction::ServerToRelay);
    let down = derive(&hello.token, &hello.nonce, &nonce, Direction::RelayToServer);
    let mut sealer = Sealer::new(down);
    let mut opener = Opener::new(up);
    let accept = Accept {
        v: PROTOCOL_VERSION,
        nonce,
        welcome: sealer.seal(
            &Body::Welcome {
                ping_secs: PING_SECS,
            },
            now_ms(),
        ),
    };
    let Ok(accept) = serde_json::to_string(&accept) else {
        return;
    };
    if tx.send(Message::Text(accept.into())).await.is_err() {
        return;
    }
    if line.mute.swap(false, std::sync::atomic::Ordering::SeqCst) {
        // Hung: the socket stays open, nothing more is read or sent.
        tokio::time::sleep(Duration::from_secs(600)).await;
        drop((tx, rx));
        return;
    }
    // Frames to send go through one task, so deliveries pushed later and
    // answers interleave without blocking the reading side; it pings too.
    let (out, mut outgoing) = mpsc::unbounded_channel::<Body>();
    let writer = tokio::spawn(async move {
        let mut ping = tokio::time::interval(Duration::from_secs(u64::from(PING_SECS)));
        loop {
            let message = tokio::select! {
                body = outgoing.recv() => match body {
                    Some(body) => Message::Text(sealer.seal(&body, now_ms()).into()),
                    None => return,
                },
                _ = ping.tick() => Message::Ping(Vec::new().into()),
            };
            if tx.send(message).await.is_err() {
                return;
            }
        }
    });
    let mut next_id = 1;
    for delivery in &script.deliveries {
        let _ = out.send(Body::Deliver {
            id: next_id,
            delivery: delivery.clone(),
        });
        next_id += 1;
    }
    loop {
        tokio::select! {
            _ = line.cut.recv() => break,
            raw = line.raw.recv() => {
                let Ok(body) = raw else { continue };
                let _ = out.send(body);
            }
            more = line.more.recv() => {
                let Ok(delivery) = more else { continue };
                let _ = out.send(Body::Deliver { id: next_id, delivery });
                next_id += 1;
            }
            message = rx.next() => {
                let Some(Ok(message)) = message else { break };
                let Message::Text(text) = message else {
                    continue;
                };
                let Ok(body) = opener.open(text.as_bytes(), now_ms()) else {
                    break;
                };
                line.seen
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((number, body.clone()));
                match body {
                    Body::PairingRequest {} => match &script.key {
                        Some(key) => {
                            let _ = out.send(Body::PairingCode {
                                code: script.code.clone(),
                                link: script.link.clone(),
                                expires_at: now_ms() + 15 * 60 * 1000,
                            });
                            let _ = out.send(Body::Deliver {
                                id: next_id,
                                delivery: Delivery::Paired {
                                    approval_key: key.clone(),
                                    bot_id: crate::telegram::BOT_ID,
                                    confirm: format!("pair_{}", script.code),
                                },
                            });
                            next_id += 1;
                            if script.withhold_confirmation {
                                // `Paired` written out, then the line dropped.
                                tokio::time::sleep(Duration::from_secs(1)).await;
                                break;
                            }
                            // The person confirms in the app (the launch
                            // Telegram signs, with the test key).
                            let _ = out.send(Body::Deliver {
                                id: next_id,
                                delivery: Delivery::App {
                                    request: uuid::Uuid::new_v4(),
                                    ask: aromba_relay_proto::frame::AppAsk::Approve,
                                    launch: crate::telegram::launch_of(
                                        crate::telegram::PERSON,
                                        Some(&format!("pair_{}", script.code)),
                                        u64::try_from(now_ms() / 1000).unwrap_or(0),
                                    ),
                                    sealed_pin: None,
                                    undo: None,
                                },
                            });
                            next_id += 1;
                        }
                        None => {
                            let _ = out.send(Body::AlreadyPaired {});
                        }
                    },
                    Body::Send { id, .. } | Body::Edit { id, .. } if !script.withhold_acks => {
                        let _ = out.send(Body::AckMessage { id });
                    }
                    _ => {}
                }
            }
        }
    }
    writer.abort();
}

/// A Warden (installed, with the Worker's home) for `name`.
pub fn warden(name: &str) -> TestWarden {
    let worker = account("aromba");
    let warden = TestWarden::start_with(name, worker, true, |_| {});
    std::fs::create_dir_all(warden.root.join("home")).expect("home");
    std::os::unix::fs::chown(warden.root.join("home"), Some(worker.uid), Some(worker.gid))
        .expect("chown home");
    warden
}

/// Runs `aromba pair` as root (with `--relay` when given) to its end, the
/// PIN on standard input; its exit status and what it printed.
pub async fn run_pair(warden: &TestWarden, relay: Option<&str>) -> (bool, Vec<u8>) {
    let root = warden.root.to_str().expect("a UTF-8 root");
    let mut args = vec![
        "pair",
        "--root",
        root,
        "--worker-user",
        "aromba",
        "--install-source",
        "test",
    ];
    if let Some(relay) = relay {
        args.extend(["--relay", relay]);
    }
    let mut child = Running(
        aromba(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("aromba pair starts"),
    );
    let _ = child
        .0
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"472913\n472913\n");
    let mut stdout = child.0.stdout.take().expect("stdout");
    let mut stderr = child.0.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || {
        let mut all = Vec::new();
        let _ = std::io::Read::read_to_end(&mut stdout, &mut all);
        let mut err = Vec::new();
        let _ = std::io::Read::read_to_end(&mut stderr, &mut err);
        all.extend_from_slice(&err);
        all
    });
    for _ in 0..900 {
        if let Some(status) = child.0.try_wait().expect("wait") {
            let printed = out.join().expect("the output");
            return (status.success(), printed);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("aromba pair did not end within 90 seconds");
}

pub fn pinned(warden: &TestWarden) -> Option<String> {
    std::fs::read_to_string(warden.layout().state_dir.join("relay-approvals.pub"))
        .ok()
        .map(|k| k.trim().to_string())
}

pub fn honest_script() -> Script {
    Script {
        code: "ABC346".into(),
        link: "https://t.me/aromba_test_bot?start=ABC346".into(),
        key: Some(HONEST_KEY.into()),
        deliveries: vec![],
        withhold_acks: false,
        withhold_confirmation: false,
    }
}

/// The server paired with `relay` by `aromba pair`.
pub async fn paired_with(warden: &TestWarden, relay: &PlayedRelay) {
    let (ok, printed) = run_pair(warden, Some(&relay.url())).await;
    assert!(
        ok,
        "aromba pair ends well: {}",
        String::from_utf8_lossy(&printed)
    );
    assert_eq!(pinned(warden).as_deref(), Some(HONEST_KEY));
}

/// One daemon at a time: the Warden watches every connection of the
/// aromba user, and another test's daemon dialing its own relay is, to
/// this test's Warden, a host its `network.toml` does not list.
static ONE_DAEMON: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Held while a test's daemon runs: the only one in this process and on
/// this machine.
pub struct Alone {
    _in_this_process: tokio::sync::MutexGuard<'static, ()>,
    _on_this_machine: crate::worker::MachineLock,
}

pub async fn alone() -> Alone {
    let one = ONE_DAEMON.lock().await;
    Alone {
        _in_this_process: one,
        _on_this_machine: crate::worker::one_daemon_on_this_machine().await,
    }
}

/// Starts `aromba run` as the aromba user against `warden`.
pub fn daemon(warden: &TestWarden) -> Running {
    let root = warden.root.to_str().expect("a UTF-8 root");
    Running(
        aromba(&["run", "--root", root, "--user", "aromba"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("aromba run starts"),
    )
}

/// The texts the daemon sent the played relay.
pub fn sent_texts(relay: &PlayedRelay) -> Vec<String> {
    relay
        .seen()
        .into_iter()
        .filter_map(|b| match b {
            Body::Send { text, .. } => Some(text),
            _ => None,
        })
        .collect()
}

/// A Warden for `name`, paired by `aromba pair` with a played relay (the
/// honest script), and the daemon connected to it: its greeting and first
/// look have landed.
pub async fn up(name: &str) -> (TestWarden, PlayedRelay, Running) {
    up_with(name, |_| {}).await
}

/// As [`up`], with `before` done to the Warden before the pairing.
pub async fn up_with(
    name: &str,
    before: impl FnOnce(&TestWarden),
) -> (TestWarden, PlayedRelay, Running) {
    let warden = warden(name);
    before(&warden);
    let relay = PlayedRelay::start(honest_script()).await;
    let (ok, printed) = run_pair(&warden, Some(&relay.url())).await;
    assert!(ok, "aromba pair: {}", String::from_utf8_lossy(&printed));
    let before = relay.connections();
    let running = daemon(&warden);
    for _ in 0..300 {
        if relay.connections() > before {
            // The greeting and first look land before the flood.
            tokio::time::sleep(Duration::from_secs(3)).await;
            return (warden, relay, running);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the daemon never connected");
}

/// What `aromba status` says as root (its `ladder:` line among it).
pub fn status(warden: &TestWarden) -> String {
    crate::worker::text(&warden.aromba_as("root", &["status"]).stdout)
}
