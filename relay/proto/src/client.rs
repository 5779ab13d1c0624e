//! The server's side of the connection: dial, hello, then sealed frames;
//! and [`run`], which does that forever, backing off with full jitter
//! (a random delay up to an exponentially growing bound, capped near a
//! minute, and a random delay before the very first attempt, so that ten
//! thousand servers restarted together do not dial together).
//!
//! Deliveries are acknowledged only after the handler has them, so a
//! delivery is handled at least once; the client remembers recent ids and
//! hands each to the handler once. What the server sends stays queued until
//! the relay acknowledges it, and is sent again after a reconnect; that
//! queue is bounded ([`crate::unacked`]), so a relay that never
//! acknowledges cannot grow the server.

use crate::frame::{Accept, Body, Delivery, Hello, MAX_MESSAGE, PROTOCOL_VERSION};
use crate::session::{Direction, Key, Opener, Refusal, Sealer, derive, now_ms};
use crate::token::ServerToken;
use crate::unacked::Unacked;
use futures_util::{SinkExt, StreamExt};
use rand::Rng;
use std::collections::{HashSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream};
use uuid::Uuid;

pub type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("the relay URL {0:?} is not wss:// (ws:// only to a loopback address)")]
    Scheme(String),
    #[error("cannot reach the relay: {0}")]
    Connect(#[source] Box<tokio_tungstenite::tungstenite::Error>),
    #[error("the relay closed the connection")]
    Closed,
    #[error("the relay refused the hello")]
    HelloRefused,
    #[error("the relay's frame was refused: {0}")]
    Frame(#[from] Refusal),
    #[error("the relay sent something that is not a frame")]
    Malformed,
    #[error("the relay's answer came too late")]
    Timeout,
}

impl From<tokio_tungstenite::tungstenite::Error> for ClientError {
    fn from(e: tokio_tungstenite::tungstenite::Error) -> ClientError {
        ClientError::Connect(Box::new(e))
    }
}

/// A TCP connection being made.
pub type Connecting<'a> = Pin<Box<dyn Future<Output = std::io::Result<TcpStream>> + Send + 'a>>;

/// How the client reaches the relay's host: given the URL's host name and
/// port, a TCP stream. The TLS on top is always verified against that
/// host name, whatever address the dialer picked; so a dialer may choose
/// addresses (the Worker's dials only those its `network.toml` lists, and
/// fallback ones when the name does not resolve) but never weaken the check.
pub trait Dialer: Send + Sync + std::fmt::Debug {
    fn connect<'a>(&'a self, host: &'a str, port: u16) -> Connecting<'a>;
}

/// Resolves the name and connects, with no list to check against (the
/// relay's tests and benchmarks; the Worker uses its own).
#[derive(Debug, Default, Clone, Copy)]
pub struct Direct;

impl Dialer for Direct {
    fn connect<'a>(&'a self, host: &'a str, port: u16) -> Connecting<'a> {
        Box::pin(TcpStream::connect((host, port)))
    }
}

/// Where and who.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// `wss://relay.example/v1/connect`; `ws://` only to 127.0.0.1 or ::1.
    pub url: String,
    pub server_id: Uuid,
    pub token: ServerToken,
    /// The roots the relay's certificate is checked against; `None`: the
    /// webpki roots. There is no way to switch the check off.
    pub roots: Option<Arc<rustls::RootCertStore>>,
    /// Makes the TCP connection.
    pub dialer: Arc<dyn Dialer>,
}

impl Endpoint {
    /// An endpoint that dials with [`Direct`].
    pub fn new(
        url: String,
        server_id: Uuid,
        token: ServerToken,
        roots: Option<Arc<rustls::RootCertStore>>,
    ) -> Endpoint {
        Endpoint {
            url,
            server_id,
            token,
            roots,
            dialer: Arc::new(Direct),
        }
    }
}

/// The TLS client configuration every connection to the relay uses: the
/// ring provider, safe protocol versions, `roots` or the webpki roots, and
/// no way to skip the check.
pub fn tls_config(
    roots: Option<Arc<rustls::RootCertStore>>,
) -> Result<Arc<rustls::ClientConfig>, rustls::Error> {
    let roots = roots.unwrap_or_else(|| {
        Arc::new(rustls::RootCertStore::from_iter(
            webpki_roots::TLS_SERVER_ROOTS.iter().cloned(),
        ))
    });
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// The sealed session of one connection.
#[derive(Debug)]
pub struct Session {
    sealer: Sealer,
    opener: Opener,
    /// Seconds between the relay's pings.
    pub ping_secs: u32,
    up: Key,
    /// When the relay was last heard from (a frame or a ping).
    heard: tokio::time::Instant,
}

/// How long a frame may take to go out: a relay that stops reading must
/// not hold the connection's loop (and `/panic` behind it) for good.
const SEND_WITHIN: Duration = Duration::from_secs(30);

impl Session {
    /// Seals and sends one frame.
    pub async fn send(&mut self, ws: &mut Socket, body: &Body) -> Result<(), ClientError> {
        let frame = self.sealer.seal(body, now_ms());
        tokio::time::timeout(SEND_WITHIN, ws.send(Message::Text(frame.into())))
            .await
            .map_err(|_| ClientError::Timeout)??;
        Ok(())
    }

    /// The next frame from the relay (answering pings on the way).
    pub async fn recv(&mut self, ws: &mut Socket) -> Result<Body, ClientError> {
        loop {
            let next = ws.next().await;
            if matches!(next, Some(Ok(_))) {
                self.heard = tokio::time::Instant::now();
            }
            match next {
                Some(Ok(Message::Text(text))) => {
                    return Ok(self.opener.open(text.as_bytes(), now_ms())?);
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => continue,
                Some(Ok(Message::Binary(_))) => return Err(ClientError::Malformed),
                Some(Ok(Message::Close(_))) | None => return Err(ClientError::Closed),
                Some(Err(e)) => return Err(e.into()),
            }
        }
    }

    /// The key this side seals with: for tests that play a hostile server.
    pub fn sealing_key(&self) -> &Key {
        &self.up
    }

    /// How long the relay may say nothing (not even a ping) before the
    /// connection is taken for dead: three of its ping intervals, within
    /// bounds whatever its welcome said.
    pub fn idle_limit(&self) -> Duration {
        Duration::from_secs(u64::from(self.ping_secs).saturating_mul(3).clamp(15, 300))
    }

    /// When the connection is taken for dead if nothing comes first.
    pub fn idle_deadline(&self) -> tokio::time::Instant {
        self.heard + self.idle_limit()
    }
}

fn loopback_url(url: &str) -> bool {
    let rest = url.strip_prefix("ws://").unwrap_or("");
    let host = rest.split(['/', '?']).next().unwrap_or("");
    host.starts_with("127.0.0.1:")
        || host.starts_with("[::1]:")
        || host == "127.0.0.1"
        || host == "[::1]"
}

fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .read_buffer_size(4 * 1024)
        .write_buffer_size(0)
        .max_write_buffer_size(4 * MAX_MESSAGE)
        .max_message_size(Some(MAX_MESSAGE))
        .max_frame_size(Some(MAX_MESSAGE))
}

/// Dials the relay through the endpoint's dialer and opens the WebSocket
/// (no hello yet).
pub async fn dial(endpoint: &Endpoint) -> Result<Socket, ClientError> {
    let connector = if endpoint.url.starts_with("wss://") {
        let config = tls_config(endpoint.roots.clone()).map_err(|e| {
            ClientError::Connect(Box::new(tokio_tungstenite::tungstenite::Error::Io(
                std::io::Error::other(e),
            )))
        })?;
        Connector::Rustls(config)
    } else if loopback_url(&endpoint.url) {
        Connector::Plain
    } else {
        return Err(ClientError::Scheme(endpoint.url.clone()));
    };
    let request = endpoint.url.as_str().into_client_request()?;
    let uri = request.uri();
    let host = uri
        .host()
        .map(|h| h.trim_start_matches('[').trim_end_matches(']').to_string())
        .ok_or_else(|| ClientError::Scheme(endpoint.url.clone()))?;
    let secure = matches!(connector, Connector::Rustls(_));
    let port = uri.port_u16().unwrap_or(if secure { 443 } else { 80 });
    let tcp = endpoint
        .dialer
        .connect(&host, port)
        .await
        .map_err(|e| ClientError::Connect(Box::new(e.into())))?;
    let _ = tcp.set_nodelay(true);
    let (ws, _response) = tokio_tungstenite::client_async_tls_with_config(
        request,
        tcp,
        Some(ws_config()),
        Some(connector),
    )
    .await?;
    Ok(ws)
}

/// Sends the hello and opens the welcome.
pub async fn handshake(ws: &mut Socket, endpoint: &Endpoint) -> Result<Session, ClientError> {
    let hello = Hello::new(endpoint.server_id, endpoint.token.clone());
    let nonce = hello.nonce;
    let text = serde_json::to_string(&hello).map_err(|_| ClientError::Malformed)?;
    ws.send(Message::Text(text.into())).await?;
    let answer = tokio::time::timeout(Duration::from_secs(15), ws.next())
        .await
        .map_err(|_| ClientError::Timeout)?;
    let accept: Accept = match answer {
        Some(Ok(Message::Text(text))) => {
            serde_json::from_str(text.as_str()).map_err(|_| ClientError::Malformed)?
        }
        Some(Ok(Message::Close(_))) | None => return Err(ClientError::HelloRefused),
        Some(Ok(_)) => return Err(ClientError::Malformed),
        Some(Err(e)) => return Err(e.into()),
    };
    if accept.v != PROTOCOL_VERSION {
        return Err(ClientError::Malformed);
    }
    let up = derive(
        &endpoint.token,
        &nonce,
        &accept.nonce,
        Direction::ServerToRelay,
    );
    let down = derive(
        &endpoint.token,
        &nonce,
        &accept.nonce,
        Direction::RelayToServer,
    );
    let mut opener = Opener::new(down);
    let ping_secs = match opener.open(accept.welcome.as_bytes(), now_ms())? {
        Body::Welcome { ping_secs } => ping_secs,
        _ => return Err(ClientError::Malformed),
    };
    Ok(Session {
        sealer: Sealer::new(up.clone()),
        opener,
        ping_secs,
        up,
        heard: tokio::time::Instant::now(),
    })
}

/// Full-jitter exponential backoff.
#[derive(Debug, Clone)]
pub struct Backoff {
    attempt: u32,
    base_ms: u64,
    cap_ms: u64,
    /// Failed attempts left to retry within `window_ms` (after a restart
    /// the relay announced) before the delays double again.
    patient: u32,
    window_ms: u64,
}

/// Failed attempts after an announced restart retried within its window.
const PATIENT_TRIES: u32 = 5;

impl Backoff {
    pub fn new(base_ms: u64, cap_ms: u64) -> Backoff {
        Backoff {
            attempt: 0,
            base_ms,
            cap_ms,
            patient: 0,
            window_ms: 0,
        }
    }

    /// The delay before the next attempt: uniform in `[0, min(cap, base·2ⁿ)]`,
    /// or within the announced window while [`Backoff::expect_back`] holds.
    pub fn next_delay(&mut self) -> Duration {
        if self.patient > 0 {
            self.patient -= 1;
            return Duration::from_millis(rand::rng().random_range(0..=self.window_ms));
        }
        let bound = self
            .base_ms
            .saturating_mul(1u64 << self.attempt.min(20))
            .min(self.cap_ms);
        self.attempt = self.attempt.saturating_add(1);
        Duration::from_millis(rand::rng().random_range(0..=bound))
    }

    /// The relay said it restarts and comes back within `window_ms`: an
    /// attempt that finds it not yet listening is early, not a sign of an
    /// outage, so the next few retry within that window (as spread as the
    /// relay asked) instead of doubling their delay.
    pub fn expect_back(&mut self, window_ms: u64) {
        self.attempt = 0;
        self.patient = PATIENT_TRIES;
        self.window_ms = window_ms.clamp(250, self.cap_ms);
    }

    /// The relay announced a restart: the delay before coming back (after
    /// `after_ms`, plus up to `jitter_ms`), never past the cap whatever
    /// the frame says (a sum that overflows, a delay of years), and the
    /// retries after it held to the window as [`Backoff::expect_back`].
    pub fn announced_restart(&mut self, after_ms: u64, jitter_ms: u64) -> Duration {
        let jitter = rand::rng().random_range(0..=jitter_ms.min(self.cap_ms));
        self.expect_back(jitter_ms);
        Duration::from_millis(
            after_ms
                .min(self.cap_ms)
                .saturating_add(jitter)
                .min(self.cap_ms),
        )
    }

    /// A connection held: start again from the base.
    pub fn reset(&mut self) {
        self.attempt = 0;
        self.patient = 0;
    }
}

impl Default for Backoff {
    /// Base one second, cap one minute.
    fn default() -> Backoff {
        Backoff::new(1_000, 60_000)
    }
}

/// What the server wants sent. A message or an edit is kept until the relay
/// acknowledges it (and sent again after a reconnect); anything else
/// (a pairing request, the journal's head) is sent once, on the connection
/// that is up.
#[derive(Clone, Debug)]
pub struct Outgoing(pub Body);

/// What the connection tells the handler.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Incoming {
    /// The hello went through: a connection is up.
    Connected,
    /// The connection ended; the client dials again.
    Disconnected,
    /// A delivery by its id, handed over once per id.
    Delivery { id: i64, delivery: Delivery },
    /// The answer to a pairing request.
    PairingCode {
        code: String,
        link: String,
        expires_at: i64,
    },
    /// The answer to a pairing request when the server is paired already.
    AlreadyPaired,
    /// The journal head the relay holds for this server.
    Anchor {
        seq: u64,
        hash: String,
        signature: Option<String>,
    },
}

/// Whether the handler kept a delivery: only a kept one is acknowledged
/// (one it could not take is delivered again after a reconnect).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kept {
    Yes,
    No,
}

/// Delivery ids remembered to hand each delivery to the handler once.
const REMEMBERED: usize = 4096;

/// Connects forever. `deliver` is called once per delivery id; `outgoing`
/// feeds messages and edits, each sent until acknowledged (again after every
/// reconnect); `stop` ends the loop.
pub async fn run(
    endpoint: Endpoint,
    mut deliver: impl FnMut(i64, Delivery) + Send,
    outgoing: tokio::sync::mpsc::Receiver<Outgoing>,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    run_with(
        endpoint,
        move |incoming| {
            if let Incoming::Delivery { id, delivery } = incoming {
                deliver(id, delivery);
            }
            Kept::Yes
        },
        outgoing,
        stop,
    )
    .await
}

/// As [`run`], telling the handler everything the connection sees; a
/// delivery the handler did not keep is not acknowledged.
pub async fn run_with(
    endpoint: Endpoint,
    mut handle: impl FnMut(Incoming) -> Kept + Send,
    mut outgoing: tokio::sync::mpsc::Receiver<Outgoing>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut backoff = Backoff::default();
    let mut seen: HashSet<i64> = HashSet::new();
    let mut seen_order: VecDeque<i64> = VecDeque::new();
    let mut unacked = Unacked::default();
    // The first attempt waits too: servers that start together spread out.
    let mut delay = Duration::from_millis(rand::rng().random_range(0..=backoff.base_ms));
    loop {
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            _ = stop.changed() => return,
        }
        let attempt = async {
            let mut ws = dial(&endpoint).await?;
            let session = handshake(&mut ws, &endpoint).await?;
            Ok::<_, ClientError>((ws, session))
        };
        let (mut ws, mut session) = match attempt.await {
            Ok(pair) => pair,
            Err(e) => {
                tracing::info!(error = %e, "relay connection failed");
                delay = backoff.next_delay();
                continue;
            }
        };
        backoff.reset();
        handle(Incoming::Connected);
        let mut restart: Option<Duration> = None;
        let mut resend_failed = false;
        for body in unacked.iter() {
            if session.send(&mut ws, body).await.is_err() {
                resend_failed = true;
                break;
            }
        }
        if !resend_failed {
            loop {
                let idle = session.idle_deadline();
                tokio::select! {
                    // A relay that hangs (or a link half-open) says nothing,
                    // not even a ping: taken for dead, and dialed again.
                    () = tokio::time::sleep_until(idle) => {
                        if tokio::time::Instant::now() >= session.idle_deadline() {
                            tracing::info!("the relay has said nothing for too long; dialing again");
                            break;
                        }
                    }
                    frame = session.recv(&mut ws) => match frame {
                        Ok(Body::Deliver { id, delivery }) => {
                            if !seen.contains(&id) {
                                if handle(Incoming::Delivery { id, delivery }) == Kept::No {
                                    continue;
                                }
                                seen.insert(id);
                                seen_order.push_back(id);
                                if seen_order.len() > REMEMBERED
                                    && let Some(old) = seen_order.pop_front()
                                {
                                    seen.remove(&old);
                                }
                            }
                            if session.send(&mut ws, &Body::AckDelivery { id }).await.is_err() {
                                break;
                            }
                        }
                        Ok(Body::AckMessage { id }) => {
                            unacked.ack(id);
                        }
                        Ok(Body::PairingCode { code, link, expires_at }) => {
                            handle(Incoming::PairingCode { code, link, expires_at });
                        }
                        Ok(Body::AlreadyPaired {}) => {
                            handle(Incoming::AlreadyPaired);
                        }
                        Ok(Body::Anchor {
                            seq,
                            hash,
                            signature,
                        }) => {
                            handle(Incoming::Anchor {
                                seq,
                                hash,
                                signature,
                            });
                        }
                        Ok(Body::Restarting { after_ms, jitter_ms }) => {
                            restart = Some(backoff.announced_restart(after_ms, jitter_ms));
                            break;
                        }
                        Ok(_) => {}
                        Err(_) => break,
                    },
                    next = outgoing.recv() => {
                        let Some(Outgoing(body)) = next else { return };
                        if let Some(id) = body_id(&body) {
                            let dropped = unacked.push(id, body.clone());
                            if dropped > 0 {
                                tracing::warn!(
                                    dropped,
                                    kept = unacked.len(),
                                    "the relay has not acknowledged the chat's messages; the oldest were dropped"
                                );
                            }
                        }
                        if session.send(&mut ws, &body).await.is_err() {
                            break;
                        }
                    }
                    _ = stop.changed() => {
                        let _ = ws.close(None).await;
                        handle(Incoming::Disconnected);
                        return;
                    }
                }
            }
        }
        handle(Incoming::Disconnected);
        delay = restart.unwrap_or_else(|| backoff.next_delay());
    }
}

fn body_id(body: &Body) -> Option<Uuid> {
    match body {
        Body::Send { id, .. } | Body::Edit { id, .. } => Some(*id),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_an_announced_restart_retries_stay_within_its_window_then_double() {
        let mut b = Backoff::new(1_000, 60_000);
        // Long failing: each delay is drawn from up to a minute.
        for _ in 0..10 {
            b.next_delay();
        }
        b.expect_back(3_000);
        for _ in 0..PATIENT_TRIES {
            assert!(b.next_delay() <= Duration::from_millis(3_000));
        }
        // Then the usual doubling from the base, not from where it was.
        assert!(b.next_delay() <= Duration::from_millis(1_000));
        assert!(b.next_delay() <= Duration::from_millis(2_000));
        // A window wider than the cap is held to the cap.
        b.expect_back(u64::MAX);
        assert!(b.next_delay() <= Duration::from_millis(60_000));
    }

    #[test]
    fn a_restart_announced_at_u64_max_waits_no_longer_than_the_cap() {
        let mut b = Backoff::new(1_000, 60_000);
        // The sum overflowed (a panic in a debug build, a wrap in release),
        // and a delay of years left the server unreachable for good.
        for _ in 0..20 {
            assert!(b.announced_restart(u64::MAX, u64::MAX) <= Duration::from_millis(60_000));
            assert!(b.announced_restart(u64::MAX, 0) <= Duration::from_millis(60_000));
        }
        let asked = b.announced_restart(1_000, 0);
        assert_eq!(asked, Duration::from_millis(1_000), "an honest one is kept");
        for _ in 0..PATIENT_TRIES {
            assert!(b.next_delay() <= Duration::from_millis(250));
        }
    }

    #[test]
    fn backoff_grows_to_its_cap_and_resets() {
        let mut b = Backoff::new(100, 1_000);
        for _ in 0..50 {
            assert!(b.next_delay() <= Duration::from_millis(1_000));
        }
        b.reset();
        for _ in 0..20 {
            let mut fresh = b.clone();
            assert!(fresh.next_delay() <= Duration::from_millis(100));
        }
    }

    /// A relay that opens the session and never acknowledges a message;
    /// the number of each connection and the messages it got.
    async fn relay_that_never_acknowledges(
        listener: tokio::net::TcpListener,
        got: tokio::sync::mpsc::UnboundedSender<(usize, Uuid)>,
    ) {
        use crate::frame::Nonce;
        let mut number = 0;
        while let Ok((tcp, _)) = listener.accept().await {
            number += 1;
            let Ok(mut ws) = tokio_tungstenite::accept_async(tcp).await else {
                continue;
            };
            let Some(Ok(Message::Text(text))) = ws.next().await else {
                continue;
            };
            let Ok(hello) = serde_json::from_str::<Hello>(text.as_str()) else {
                continue;
            };
            let nonce = Nonce::random();
            let up = derive(&hello.token, &hello.nonce, &nonce, Direction::ServerToRelay);
            let down = derive(&hello.token, &hello.nonce, &nonce, Direction::RelayToServer);
            let mut sealer = Sealer::new(down);
            let mut opener = Opener::new(up);
            let accept = Accept {
                v: PROTOCOL_VERSION,
                nonce,
                welcome: sealer.seal(&Body::Welcome { ping_secs: 30 }, now_ms()),
            };
            let Ok(accept) = serde_json::to_string(&accept) else {
                continue;
            };
            if ws.send(Message::Text(accept.into())).await.is_err() {
                continue;
            }
            // The first connection takes what comes for a while, then
            // drops; the second only counts.
            let until = tokio::time::Instant::now() + Duration::from_secs(2);
            while let Ok(Some(Ok(Message::Text(text)))) =
                tokio::time::timeout_at(until, ws.next()).await
            {
                if let Ok(Body::Send { id, .. }) = opener.open(text.as_bytes(), now_ms()) {
                    let _ = got.send((number, id));
                }
            }
            let _ = ws.close(None).await;
        }
    }

    /// Found by the review: a relay that never acknowledged grew the
    /// server without bound, and one reconnect sent 19,985 messages again
    /// at once. What is sent again is at most the cap, the newest.
    #[tokio::test]
    async fn a_relay_that_never_acknowledges_gets_at_most_the_cap_sent_again() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("ws://{}/v1/connect", listener.local_addr().expect("addr"));
        let (got_tx, mut got) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(relay_that_never_acknowledges(listener, got_tx));
        let endpoint = Endpoint::new(url, Uuid::new_v4(), ServerToken::generate(), None);
        let (out, outgoing) = tokio::sync::mpsc::channel(4_096);
        let (stop_tx, stop) = tokio::sync::watch::channel(false);
        let client = tokio::spawn(run(endpoint, |_, _| {}, outgoing, stop));
        const SENT: usize = 1_000;
        let mut ids = Vec::new();
        for _ in 0..SENT {
            let id = Uuid::new_v4();
            ids.push(id);
            let body = Body::Send {
                id,
                text: "What I can do".into(),
                buttons: vec![],
                monospace: vec![],
            };
            out.send(Outgoing(body)).await.expect("the client takes it");
        }
        let (mut first, mut again) = (0, Vec::new());
        while let Ok(Some((number, id))) =
            tokio::time::timeout(Duration::from_secs(6), got.recv()).await
        {
            match number {
                1 => first += 1,
                2 => again.push(id),
                _ => break,
            }
        }
        let _ = stop_tx.send(true);
        let _ = client.await;
        assert_eq!(first, SENT, "the first connection got every message");
        assert_eq!(again.len(), crate::unacked::MAX_UNACKED);
        assert_eq!(
            again,
            ids[SENT - crate::unacked::MAX_UNACKED..],
            "the newest, in order"
        );
    }

    #[test]
    fn plain_websocket_only_to_loopback() {
        assert!(loopback_url("ws://127.0.0.1:8080/v1/connect"));
        assert!(loopback_url("ws://[::1]:80/v1/connect"));
        assert!(!loopback_url("ws://127.0.0.1.example.com/v1/connect"));
        assert!(!loopback_url("ws://relay.example/v1/connect"));
        assert!(!loopback_url("wss://127.0.0.1:8080/"));
    }
}
