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

/// The label of the pairing's confirmation button (the relay's words).
const CONFIRM: &str = "Confirm it is you (opens the app)";

/// The launch data in an app URL's fragment (`#tgWebAppData=…`).
fn launch_of(url: &str) -> Option<String> {
    let fragment = url.split_once('#')?.1;
    let raw = fragment
        .split('&')
        .find_map(|p| p.strip_prefix("tgWebAppData="))?;
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            out.push(u8::from_str_radix(raw.get(i + 1..i + 3)?, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The app's route for `url` (an app opened at `…/app/?…#…`).
fn ask_route(url: &str) -> Option<String> {
    let base = url.split(['?', '#']).next()?;
    Some(format!(
        "{}v1/ask",
        base.strip_suffix('/')
            .map_or(base.to_string(), |b| format!("{b}/"))
    ))
}

/// Opens the app from the pairing's button and confirms, as the person.
pub async fn confirm(page: &str) -> Result<(), String> {
    let page = base(page)?;
    let http = client()?;
    let deadline = Instant::now() + Duration::from_secs(60);
    let (message, url) = loop {
        let now = chat(&http, &page).await?;
        let found = now["messages"].as_array().and_then(|messages| {
            messages.iter().rev().find_map(|m| {
                let button = m["buttons"]
                    .as_array()?
                    .iter()
                    .flat_map(|row| row.as_array().cloned().unwrap_or_default())
                    .find(|b| b["text"] == CONFIRM)?;
                Some((m["id"].as_i64()?, button["data"].as_str()?.to_string()))
            })
        });
        if let Some(found) = found {
            break found;
        }
        if Instant::now() > deadline {
            return Err("the chat showed no \"Confirm it is you\" button within a minute".into());
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let opened: Value = http
        .post(format!("{page}/open"))
        .json(&json!({ "message_id": message, "url": url }))
        .send()
        .await
        .map_err(|e| format!("the chat page does not answer: {e}"))?
        .json()
        .await
        .map_err(|e| format!("the chat page did not open the app: {e}"))?;
    let app = opened["url"]
        .as_str()
        .ok_or("the chat page did not open the app")?;
    let launch = launch_of(app).ok_or("the app opened without launch data")?;
    let route = ask_route(app).ok_or("the app's address is not one")?;
    for ask in ["view", "approve"] {
        let answer: Value = http
            .post(&route)
            .json(&json!({ "launch": launch, "ask": ask }))
            .timeout(Duration::from_secs(30))
            .send()
            .await
            .map_err(|e| format!("the app does not answer: {e}"))?
            .json()
            .await
            .map_err(|e| format!("the app answered something else than JSON: {e}"))?;
        if ask == "approve" {
            let text = answer["text"].as_str().unwrap_or_default();
            if !text.starts_with("Done") {
                return Err(format!("the confirmation was not taken: {answer}"));
            }
            println!("{text}");
        }
    }
    Ok(())
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
