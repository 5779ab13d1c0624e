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

/// Opens the app from the newest message whose button is labelled
/// `label` (waiting up to a minute for it), as the person taps it: the
/// launch Telegram's part signed, and the app's ask route.
async fn open_app(
    http: &reqwest::Client,
    page: &str,
    label: &str,
) -> Result<(String, String), String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let (message, url) = loop {
        let now = chat(http, page).await?;
        let found = now["messages"].as_array().and_then(|messages| {
            messages.iter().rev().find_map(|m| {
                let button = m["buttons"]
                    .as_array()?
                    .iter()
                    .flat_map(|row| row.as_array().cloned().unwrap_or_default())
                    .find(|b| b["text"] == label)?;
                Some((m["id"].as_i64()?, button["data"].as_str()?.to_string()))
            })
        });
        if let Some(found) = found {
            break found;
        }
        if Instant::now() > deadline {
            return Err(format!(
                "the chat showed no \"{label}\" button within a minute"
            ));
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
    Ok((launch, route))
}

/// What the app's page asks `route`, and the answer.
async fn ask_app(
    http: &reqwest::Client,
    route: &str,
    launch: &str,
    ask: &str,
) -> Result<Value, String> {
    http.post(route)
        .json(&json!({ "launch": launch, "ask": ask }))
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .map_err(|e| format!("the app does not answer: {e}"))?
        .json()
        .await
        .map_err(|e| format!("the app answered something else than JSON: {e}"))
}

/// Opens the app from the pairing's button and confirms, as the person.
pub async fn confirm(page: &str) -> Result<(), String> {
    let page = base(page)?;
    let http = client()?;
    let (launch, route) = open_app(&http, &page, CONFIRM).await?;
    ask_app(&http, &route, &launch, "view").await?;
    let answer = ask_app(&http, &route, &launch, "approve").await?;
    let text = answer["text"].as_str().unwrap_or_default();
    if !text.starts_with("Done") {
        return Err(format!("the confirmation was not taken: {answer}"));
    }
    println!("{text}");
    Ok(())
}

/// `/trust`, then the Trust page opened from its button: the verdict and
/// each section's heading, every section there and the policy verbatim.
async fn trust_page(http: &reqwest::Client, page: &str) -> Result<(), String> {
    send(http, page, "/trust").await?;
    let (launch, route) = open_app(http, page, TRUST_PAGE).await?;
    let answer = ask_app(http, &route, &launch, "trust").await?;
    if answer["kind"] != "page" {
        return Err(format!("the Trust page did not open: {answer}"));
    }
    let headings: Vec<&str> = answer["sections"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["heading"].as_str())
        .collect();
    for want in [
        "Isolation",
        "Ladder",
        "Integrity",
        "Journal",
        "Chores",
        "Approvals",
    ] {
        if !headings.contains(&want) {
            return Err(format!("the Trust page has no {want} section: {answer}"));
        }
    }
    let policy = ask_app(http, &route, &launch, "policy").await?;
    let rendering = policy["sections"][0]["lines"][1]
        .as_str()
        .unwrap_or_default();
    if !rendering.starts_with("# Rendered by aromba-warden") {
        return Err(format!(
            "the Trust page's policy is not the Warden's rendering: {policy}"
        ));
    }
    println!(
        "Trust page: {} ({}, Policy)",
        answer["text"].as_str().unwrap_or_default(),
        headings.join(", ")
    );
    Ok(())
}

/// The label of `/trust`'s button (the Worker's words).
const TRUST_PAGE: &str = "Open the Trust page";

/// `/status`, and the bot's answer to it; then the Trust page.
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
            return trust_page(&http, &page).await;
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
