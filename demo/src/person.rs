//! The person's side, through the chat page's own API: what the headless
//! check sends and waits for, and how the script sends the pairing code.

use serde_json::{Value, json};
use std::time::{Duration, Instant};

fn client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| format!("cannot make an HTTP client: {e}"))
}

fn base(page: &str) -> Result<String, String> {
    let page = page.trim_end_matches('/');
    let not_here = || format!("{page} is not the demo's chat page on this machine");
    // Parsed, not matched by its start: `http://127.0.0.1:1@evil.example`
    // starts as loopback and goes elsewhere.
    let url = reqwest::Url::parse(page).map_err(|_| not_here())?;
    let loopback = matches!(url.host_str(), Some("127.0.0.1" | "localhost"));
    if url.scheme() != "http"
        || !loopback
        || url.port().is_none()
        || !url.username().is_empty()
        || url.password().is_some()
        || url.query().is_some()
        || url.fragment().is_some()
    {
        return Err(not_here());
    }
    Ok(page.to_string())
}

/// The chat as the page shows it; retried while the page is starting.
async fn chat(http: &reqwest::Client, page: &str) -> Result<Value, String> {
    let mut last = String::new();
    for _ in 0..50 {
        match http.get(format!("{page}/chat.json")).send().await {
            Ok(r) if r.status().is_success() => {
                return r
                    .json()
                    .await
                    .map_err(|e| format!("the chat page answered something else than JSON: {e}"));
            }
            Ok(r) => last = format!("the chat page answered {}", r.status()),
            Err(e) => last = format!("the chat page does not answer: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(last)
}

async fn send(http: &reqwest::Client, page: &str, text: &str) -> Result<(), String> {
    let r = http
        .post(format!("{page}/send"))
        .json(&json!({ "text": text }))
        .send()
        .await
        .map_err(|e| format!("the chat page does not answer: {e}"))?;
    if !r.status().is_success() {
        let why = r.text().await.unwrap_or_default();
        return Err(format!("the chat page refused the message: {why}"));
    }
    Ok(())
}

pub async fn say(page: &str, text: &str) -> Result<(), String> {
    let page = base(page)?;
    let http = client()?;
    chat(&http, &page).await?;
    send(&http, &page, text).await
}

fn last_id(chat: &Value) -> i64 {
    chat["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["id"].as_i64())
        .unwrap_or(0)
}

/// `/status`, and the bot's answer to it.
pub async fn check(page: &str, timeout: u64) -> Result<(), String> {
    let page = base(page)?;
    let http = client()?;
    let before = last_id(&chat(&http, &page).await?);
    send(&http, &page, "/status").await?;
    let deadline = Instant::now() + Duration::from_secs(timeout);
    while Instant::now() < deadline {
        let now = chat(&http, &page).await?;
        let answer = now["messages"].as_array().and_then(|messages| {
            messages.iter().find(|m| {
                m["from"] == "bot"
                    && m["id"].as_i64().is_some_and(|id| id > before)
                    && m["text"]
                        .as_str()
                        .is_some_and(|t| t.starts_with("Server status"))
            })
        });
        if let Some(answer) = answer {
            println!("{}", answer["text"].as_str().unwrap_or(""));
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Err(format!(
        "no answer to /status within {timeout} seconds (the logs say why)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_address_that_only_starts_like_loopback_is_refused() {
        for bad in [
            "http://127.0.0.1:1@evil.example/key",
            "http://localhost:1@evil.example",
            "http://127.0.0.1:80.evil.example/",
            "https://127.0.0.1:1/",
            "http://127.0.0.2:1/",
        ] {
            assert!(base(bad).is_err(), "{bad}");
        }
        assert_eq!(
            base("http://127.0.0.1:8090/abcdefabcdefabcd/").as_deref(),
            Ok("http://127.0.0.1:8090/abcdefabcdefabcd")
        );
    }
}
