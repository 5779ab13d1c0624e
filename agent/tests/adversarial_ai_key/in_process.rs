//! The AI key leaking, at the unit level. The attacker: an endpoint that
//! hangs up, or a key the HTTP library refuses as a header value (a line
//! feed in it). What it tries: to have the key written into the error the
//! request fails with, which the chat and the log show. What holds: the
//! error never holds the key. End to end: `agent/tests/adversarial_ai_key.rs`.

use aromba::assistant::model::{Message, Model};

/// The key is not in the error a failed request gives (a header value the
/// HTTP library refuses, an endpoint that hangs up).
#[tokio::test]
async fn the_key_is_not_in_a_failed_requests_error() {
    use aromba::config::BaseUrl;
    use std::sync::Arc;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        // Takes each connection and hangs up.
        while let Ok((s, _)) = listener.accept().await {
            drop(s);
        }
    });
    for key in ["sk-round-key-0123456789", "sk-round\r\nX-Evil: 1"] {
        let m = aromba::assistant::model::OpenAi {
            dialer: Arc::new(aromba_relay_proto::client::Direct),
            endpoint: BaseUrl::parse(&format!("http://127.0.0.1:{port}/v1")).unwrap(),
            model: "m".into(),
            key: Some(key.into()),
            roots: None,
        };
        let e = m
            .complete(&[Message::User("q".into())], None)
            .await
            .unwrap_err()
            .to_string();
        assert!(!e.contains("sk-round"), "{e}");
    }
}
