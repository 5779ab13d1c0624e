//! The availability review's attacks as tools: clients from many loopback
//! source addresses (each a different address to the relay, as many
//! Internet addresses would be), request bodies trickled and never
//! finished, WebSockets upgraded and never spoken on. Every connection goes
//! to the relay under test on 127.0.0.1 and nowhere else.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio_tungstenite::WebSocketStream;

/// The `i`th attacker's address: 127.20.0.1, 127.20.0.2, … (all of
/// 127.0.0.0/8 reaches the loopback interface).
pub fn source(i: usize) -> IpAddr {
    let i = u32::try_from(i).expect("a small index");
    IpAddr::V4(Ipv4Addr::new(
        127,
        20 + (i / 60_000) as u8,
        ((i / 250) % 240) as u8,
        (i % 250 + 1) as u8,
    ))
}

/// A TCP connection to `to` from `from`.
pub async fn tcp_from(from: IpAddr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(from, 0))?;
    socket.connect(to).await
}

/// A request whose headers arrive whole and whose body (1,000 bytes
/// announced) gets one byte, then nothing: the slowloris of bodies.
pub async fn slow_body(from: IpAddr, to: SocketAddr, path: &str) -> Option<TcpStream> {
    let mut stream = tcp_from(from, to).await.ok()?;
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: relay\r\nContent-Type: application/json\r\n\
         Content-Length: 1000\r\n\r\n{{"
    );
    stream.write_all(head.as_bytes()).await.ok()?;
    Some(stream)
}

/// Headers begun and never finished.
pub async fn slow_headers(from: IpAddr, to: SocketAddr) -> Option<TcpStream> {
    let mut stream = tcp_from(from, to).await.ok()?;
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: re")
        .await
        .ok()?;
    Some(stream)
}

/// A WebSocket upgraded on `/v1/connect` and never spoken on.
pub async fn silent_websocket(from: IpAddr, to: SocketAddr) -> Option<WebSocketStream<TcpStream>> {
    let stream = tcp_from(from, to).await.ok()?;
    let url = format!("ws://{to}/v1/connect");
    let (ws, _) = tokio_tungstenite::client_async(url, stream).await.ok()?;
    Some(ws)
}

/// Whether the relay still holds `stream` open: nothing to read within a
/// moment, and no end.
pub async fn still_open(stream: &mut TcpStream) -> bool {
    let mut byte = [0u8; 256];
    loop {
        match tokio::time::timeout(Duration::from_millis(50), stream.read(&mut byte)).await {
            Err(_) => return true,
            Ok(Ok(0)) | Ok(Err(_)) => return false,
            // An answer (a 408, a 503): read on to see whether it closes.
            Ok(Ok(_)) => continue,
        }
    }
}

/// Whether the relay still holds a silent WebSocket open.
pub async fn socket_open(ws: &mut WebSocketStream<TcpStream>) -> bool {
    use futures_util::StreamExt;
    use tokio_tungstenite::tungstenite::Message;
    loop {
        match tokio::time::timeout(Duration::from_millis(50), ws.next()).await {
            Err(_) => return true,
            Ok(Some(Ok(Message::Ping(_) | Message::Pong(_)))) => continue,
            Ok(_) => return false,
        }
    }
}

/// Every connection and the relay's end of it hold a descriptor in this
/// one process.
pub fn raise_descriptor_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("getrlimit");
    setrlimit(Resource::RLIMIT_NOFILE, hard, hard).expect("setrlimit");
}

/// A client whose requests come from `from`.
pub fn client_from(from: IpAddr) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(from)
        .timeout(Duration::from_secs(10))
        .build()
        .expect("a client")
}
