//! The baseline of the relay's memory benchmark: a bare tokio-tungstenite
//! echo server with default settings. Listens on the address given as the
//! first argument and prints `ready` once it does.

#![forbid(unsafe_code)]

use futures_util::{SinkExt, StreamExt};

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:9000".to_string());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("ready");
    loop {
        let (stream, _) = listener.accept().await?;
        tokio::spawn(async move {
            let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
                return;
            };
            while let Some(Ok(message)) = ws.next().await {
                if (message.is_text() || message.is_binary()) && ws.send(message).await.is_err() {
                    return;
                }
            }
        });
    }
}
