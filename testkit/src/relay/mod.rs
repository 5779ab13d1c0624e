//! What the relay's tests share: the real relay on 127.0.0.1:0 against a
//! fresh database (`#[sqlx::test]` makes one per test from DATABASE_URL and
//! fails, never skips, when there is none), an HTTP client (also as a
//! trusted proxy's clients), a server that registers and connects with the
//! real protocol client, and WebSockets the test shapes by hand.

pub mod attack;
pub mod bot;
pub mod under_attack;

use aromba_relay::{Config, Limits, Listeners, Pepper, Relay, RelayError};
use aromba_relay_proto::client::{Endpoint, Session, Socket, dial, handshake};
use aromba_relay_proto::frame::{Body, Delivery};
use aromba_relay_proto::token::ServerToken;
use serde_json::{Value, json};
use sqlx::PgPool;
use std::net::SocketAddr;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_tungstenite::WebSocketStream;
use uuid::Uuid;

/// A test pepper, clearly not a secret.
pub const TEST_PEPPER: &[u8] = b"test-pepper-0123456789abcdef-0123456789";

pub fn config() -> Config {
    let mut config = Config::new(Pepper::new(TEST_PEPPER).expect("a long pepper"));
    config.limits = Limits {
        sweep_every_ms: 50,
        restart_after_ms: 10,
        restart_jitter_ms: 20,
        drain_ms: 2_000,
        // Tests register many servers from one address.
        burst: 1_000,
        registrations_per_day: 10_000,
        hellos_per_address: 100_000,
        // Tests connect from one address, and reconnect one server often.
        http_per_address: 100_000,
        hello_burst: 10_000,
        failed_hello_burst: 10_000,
        ..Limits::default()
    };
    config
}

/// The tests' config with some limits changed.
pub fn config_with(f: impl FnOnce(&mut Limits)) -> Config {
    let mut c = config();
    f(&mut c.limits);
    c
}

/// A relay that believes X-Forwarded-For from the test (127.0.0.1), so that
/// one test can play many internet addresses.
pub fn behind_proxy() -> Config {
    let mut c = config();
    c.trusted_proxies = aromba_relay::config::parse_proxies("127.0.0.1/32").expect("cidr");
    c
}

pub struct TestRelay {
    pub addr: SocketAddr,
    pub metrics: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), RelayError>>,
}

pub async fn start(db: PgPool, config: Config) -> TestRelay {
    let api = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    start_on(db, config, api).await
}

impl TestRelay {
    /// Ready once the migrations ran.
    async fn wait_ready(&self) {
        for _ in 0..200 {
            if let Ok(r) = reqwest::get(self.url("/readyz")).await
                && r.status() == 200
            {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        panic!("the relay did not become ready");
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn ws_url(&self) -> String {
        format!("ws://{}/v1/connect", self.addr)
    }

    /// Graceful shutdown, as SIGTERM does it.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let ended = tokio::time::timeout(std::time::Duration::from_secs(10), &mut self.task)
            .await
            .expect("the relay stops within 10 s");
        ended
            .expect("the relay task")
            .expect("the relay ends cleanly");
    }

    /// Gone at once, as a killed process: nothing said to anyone.
    pub fn kill(self) {
        self.task.abort();
    }

    pub async fn metrics_text(&self) -> String {
        reqwest::get(format!("http://{}/metrics", self.metrics))
            .await
            .expect("metrics answer")
            .text()
            .await
            .expect("metrics text")
    }
}

/// A server's identity.
#[derive(Clone, Debug)]
pub struct Server {
    pub id: Uuid,
    pub token: ServerToken,
    pub boot_id: Uuid,
}

impl Server {
    /// A fresh identity each time: there is no default server.
    #[allow(clippy::new_without_default)]
    pub fn new() -> Server {
        Server {
            id: Uuid::new_v4(),
            token: ServerToken::generate(),
            boot_id: Uuid::new_v4(),
        }
    }

    pub fn registration(&self) -> Value {
        json!({
            "id": self.id,
            "token": self.token.expose(),
            "boot_id": self.boot_id,
            "install_source": "test",
        })
    }

    pub fn endpoint(&self, relay: &TestRelay) -> Endpoint {
        Endpoint::new(relay.ws_url(), self.id, self.token.clone(), None)
    }
}

/// POSTs `body` to /v1/servers; the status and the JSON answer.
pub async fn post_json(relay: &TestRelay, body: &Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(relay.url("/v1/servers"))
        .json(body)
        .send()
        .await
        .expect("the relay answers");
    let status = r.status().as_u16();
    let body = r.json::<Value>().await.expect("a JSON body");
    (status, body)
}

/// POSTs `body` to /v1/servers as the proxy forwarding for `xff` (a relay
/// started [`behind_proxy`]); the status.
pub async fn post_from(relay: &TestRelay, xff: &str, body: &Value) -> u16 {
    reqwest::Client::new()
        .post(relay.url("/v1/servers"))
        .header("X-Forwarded-For", xff)
        .json(body)
        .send()
        .await
        .expect("the relay answers")
        .status()
        .as_u16()
}

/// A registered server, connected and past the hello.
pub async fn connected(relay: &TestRelay) -> (Server, Socket, Session) {
    let server = Server::new();
    let (status, _) = post_json(relay, &server.registration()).await;
    assert_eq!(status, 201);
    let (ws, session) = connect(relay, &server).await;
    (server, ws, session)
}

pub async fn connect(relay: &TestRelay, server: &Server) -> (Socket, Session) {
    let endpoint = server.endpoint(relay);
    let mut ws = dial(&endpoint).await.expect("dial");
    let session = handshake(&mut ws, &endpoint).await.expect("hello accepted");
    (ws, session)
}

/// Whether a registered server gets past the hello now (within the
/// client's own deadline).
pub async fn gets_in(relay: &TestRelay, server: &Server) -> bool {
    let endpoint = server.endpoint(relay);
    let Ok(mut ws) = dial(&endpoint).await else {
        return false;
    };
    handshake(&mut ws, &endpoint).await.is_ok()
}

/// A WebSocket to the relay from a socket the test shapes: bound to `from`
/// (another loopback address is another client), with a receive buffer of
/// `rcvbuf` bytes when given (a peer that reads slowly, or not at all).
pub async fn raw_ws(
    relay: &TestRelay,
    from: &str,
    rcvbuf: Option<u32>,
) -> WebSocketStream<tokio::net::TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket
        .bind(format!("{from}:0").parse().expect("addr"))
        .expect("bind");
    if let Some(size) = rcvbuf {
        socket.set_recv_buffer_size(size).expect("rcvbuf");
    }
    let tcp = socket.connect(relay.addr).await.expect("connect");
    let (ws, _) = tokio_tungstenite::client_async(relay.ws_url(), tcp)
        .await
        .expect("upgrade");
    ws
}

/// The next delivery on a connection, within 10 s, not acknowledged: its
/// outbox id and what it carries.
pub async fn next_unacked_delivery(ws: &mut Socket, session: &mut Session) -> (i64, Delivery) {
    loop {
        let body = tokio::time::timeout(std::time::Duration::from_secs(10), session.recv(ws))
            .await
            .expect("a delivery within 10 s")
            .expect("a frame");
        if let Body::Deliver { id, delivery } = body {
            return (id, delivery);
        }
    }
}

/// A journal head frame: line `seq` of the server's journal, whose hash is
/// `hash`.
pub fn journal_head(seq: u64, hash: &str) -> Body {
    Body::JournalHead {
        seq,
        hash: hash.into(),
    }
}

impl Server {
    pub fn endpoint_url(&self, url: String) -> Endpoint {
        Endpoint::new(url, self.id, self.token.clone(), None)
    }
}

/// The relay on a listener the test already bound (to come back on the
/// address a killed relay had), once `/readyz` answers.
pub async fn start_on(db: PgPool, config: Config, api: tokio::net::TcpListener) -> TestRelay {
    let relay = spawn(db, config, api).await;
    relay.wait_ready().await;
    relay
}

/// A relay terminating TLS itself, once its metrics (which listen after
/// the migrations ran) answer: `/readyz` is behind TLS.
pub async fn start_tls(db: PgPool, config: Config) -> TestRelay {
    let api = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let relay = spawn(db, config, api).await;
    for _ in 0..200 {
        if reqwest::get(format!("http://{}/metrics", relay.metrics))
            .await
            .is_ok()
        {
            return relay;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("the relay's metrics did not answer");
}

/// `Relay::serve` on `api` and a metrics listener of its own, not yet
/// waited for.
async fn spawn(db: PgPool, config: Config, api: tokio::net::TcpListener) -> TestRelay {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let metrics = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = api.local_addr().expect("addr");
    let metrics_addr = metrics.local_addr().expect("addr");
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(Relay::serve(
        Listeners {
            api,
            metrics: Some(metrics),
        },
        db,
        config,
        async move {
            let _ = stopped.await;
        },
    ));
    TestRelay {
        addr,
        metrics: metrics_addr,
        stop: Some(stop),
        task,
    }
}

/// How many refusals the relay counted under `reason`.
pub async fn refusals(relay: &TestRelay, reason: &str) -> u64 {
    let text = relay.metrics_text().await;
    let needle = format!("aromba_relay_refusals_total{{reason=\"{reason}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&needle))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// Reads until the relay closes; the close code (1006 when the TCP
/// connection just ended).
pub async fn closed_with<S>(ws: &mut tokio_tungstenite::WebSocketStream<S>) -> u16
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use futures_util::StreamExt;
    use tokio_tungstenite::tungstenite::Message;
    let wait = async {
        while let Some(m) = ws.next().await {
            match m {
                Ok(Message::Close(Some(frame))) => return u16::from(frame.code),
                Ok(Message::Close(None)) => return 1005,
                Ok(_) => continue,
                Err(_) => return 1006,
            }
        }
        1006
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), wait)
        .await
        .expect("the relay closes the connection")
}

/// The database URL of the test's own database, for a relay process.
pub fn database_url(db: &PgPool) -> String {
    let base = std::env::var("DATABASE_URL").expect("DATABASE_URL is set");
    let name = db
        .connect_options()
        .get_database()
        .expect("the test database has a name")
        .to_string();
    let (server, _) = base
        .rsplit_once('/')
        .expect("DATABASE_URL ends in a database name");
    format!("{server}/{name}")
}

/// A free port on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// The `aromba-relay` binary as its own process, on `port`.
pub struct RelayProcess {
    pub child: std::process::Child,
    pub addr: SocketAddr,
}

impl RelayProcess {
    pub async fn spawn(db: &PgPool, port: u16) -> RelayProcess {
        let process = RelayProcess::spawn_with(db, port, &[]);
        for _ in 0..400 {
            if let Ok(r) = reqwest::get(format!("http://{}/readyz", process.addr)).await
                && r.status() == 200
            {
                return process;
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        panic!("the relay process did not become ready");
    }

    /// Started with these settings added; not yet ready.
    pub fn spawn_with(db: &PgPool, port: u16, settings: &[(&str, String)]) -> RelayProcess {
        use assert_cmd::cargo::CommandCargoExt;
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
        let mut command = std::process::Command::cargo_bin("aromba-relay")
            .expect("the aromba-relay binary is built");
        command
            .env_clear()
            .env("DATABASE_URL", database_url(db))
            .env("AROMBA_RELAY_LISTEN", addr.to_string())
            .env(
                "AROMBA_RELAY_METRICS_LISTEN",
                format!("127.0.0.1:{}", free_port()),
            )
            .env(
                "AROMBA_TOKEN_PEPPER",
                std::str::from_utf8(TEST_PEPPER).expect("ascii"),
            )
            .env("RUST_LOG", "warn")
            // The Mini App's short name (a relay with a bot needs one).
            .env("AROMBA_TELEGRAM_APP", "aromba")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        for (name, value) in settings {
            command.env(name, value);
        }
        command
            .spawn()
            .map(|child| RelayProcess { child, addr })
            .expect("the relay starts")
    }

    pub fn ws_url(&self) -> String {
        format!("ws://{}/v1/connect", self.addr)
    }

    /// SIGKILL: nothing said to anyone.
    pub fn kill(self) {
        drop(self);
    }
}

impl Drop for RelayProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
