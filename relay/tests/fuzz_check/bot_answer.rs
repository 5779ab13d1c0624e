//! The checks of the `bot_answer` fuzz target, shared with the corpus
//! replay in `relay/tests/fuzz_corpora.rs` (the target includes this file
//! by path).
//!
//! An input is a Bot API answer: a byte choosing the HTTP status, a byte
//! choosing the call, then the body. A Bot API on loopback answers the
//! relay's real client (`telegram::client::Client`, teloxide underneath)
//! with it. Whatever it is:
//! - the call ends in a value or a `CallError`, never a panic;
//! - the error's words (what the relay logs) never hold the bot token or
//!   its secret part, are one line without control characters, and are
//!   bounded;
//! - a wait is asked only by an answer that says so
//!   (`parameters.retry_after`), for as long as it says;
//! - what a call returns is what the JSON says: a sent message's id, the
//!   bot's username, the updates' ids.

use aromba_relay::telegram::client::{CallError, Client};
use aromba_relay::telegram::token::BotToken;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// The bot the relay calls as; its secret part must never be told.
pub const TOKEN: &str = "7000001:FUZZsecretAAAAbbbbCCCCddddEEEEffff0123";
const SECRET: &str = "FUZZsecretAAAAbbbbCCCCddddEEEEffff0123";
/// The most bytes an error's words may hold.
pub const MAX_WORDS: usize = 1024;

/// The statuses an answer comes with (no 5xx: teloxide waits a second
/// after one, which would only slow the fuzzer; a 5xx body is read the
/// same way).
const STATUSES: [u16; 8] = [200, 200, 400, 401, 403, 404, 409, 429];

struct Fake {
    answer: Arc<Mutex<(u16, Vec<u8>)>>,
    client: Client,
    runtime: tokio::runtime::Runtime,
}

/// A Bot API on loopback that answers every request with the current
/// answer, keeping connections open as Telegram does.
fn fake() -> &'static Fake {
    static FAKE: OnceLock<Fake> = OnceLock::new();
    FAKE.get_or_init(|| {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let addr = listener.local_addr().expect("its address");
        let answer: Arc<Mutex<(u16, Vec<u8>)>> = Arc::new(Mutex::new((200, Vec::new())));
        let served = answer.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let served = served.clone();
                std::thread::spawn(move || answer_requests(stream, &served));
            }
        });
        let url = url::Url::parse(&format!("http://{addr}")).expect("the fake's URL");
        let token = BotToken::new(TOKEN).expect("the test token");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        Fake {
            answer,
            client: Client::new(token, url),
            runtime,
        }
    })
}

fn answer_requests(stream: std::net::TcpStream, answer: &Mutex<(u16, Vec<u8>)>) {
    // One write an answer, sent at once: a head and a body written apart
    // wait for the client's delayed acknowledgement (40 ms an answer).
    let _ = stream.set_nodelay(true);
    let mut write = match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return,
    };
    let mut read = BufReader::new(stream);
    loop {
        let mut length = 0usize;
        let mut line = String::new();
        loop {
            line.clear();
            match read.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if line == "\r\n" {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0u8; length];
        if read.read_exact(&mut body).is_err() {
            return;
        }
        let (status, bytes) = answer.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut whole = format!(
            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            bytes.len()
        )
        .into_bytes();
        whole.extend_from_slice(&bytes);
        if write.write_all(&whole).is_err() {
            return;
        }
    }
}

/// What a call gave back, for the comparison with the JSON.
#[derive(Debug)]
enum Got {
    Sent(i64),
    Username(String),
    Updates(Vec<i64>),
    Done,
}

fn words_of(e: &CallError) -> Result<(), String> {
    for words in [e.to_string(), format!("{e:?}")] {
        if words.contains(SECRET) {
            return Err(format!(
                "the error's words hold the token's secret: {words:?}"
            ));
        }
        if words.len() > MAX_WORDS + 200 {
            return Err(format!("the error's words are {} bytes long", words.len()));
        }
    }
    let words = e.to_string();
    if words.chars().any(char::is_control) {
        return Err(format!(
            "the error's words hold a control character: {words:?}"
        ));
    }
    Ok(())
}

/// Checks one input.
pub fn check(data: &[u8]) -> Result<(), String> {
    let [status, call, body @ ..] = data else {
        return Ok(());
    };
    let status = STATUSES[usize::from(*status) % STATUSES.len()];
    let f = fake();
    *f.answer.lock().unwrap_or_else(|p| p.into_inner()) = (status, body.to_vec());
    let c = &f.client;
    let got = f.runtime.block_on(async {
        let call = async {
            match call % 4 {
                0 => c.send(42, "hello", &Vec::new(), &[]).await.map(Got::Sent),
                1 => c.username().await.map(Got::Username),
                2 => c
                    .get_updates(0, Duration::ZERO)
                    .await
                    .map(|u| Got::Updates(u.iter().map(|u| i64::from(u.id.0)).collect())),
                _ => c
                    .edit(42, 7, "hello", &Vec::new())
                    .await
                    .map(|()| Got::Done),
            }
        };
        tokio::time::timeout(Duration::from_secs(30), call).await
    });
    let got = got.map_err(|_| "the call did not end within 30 s".to_string())?;
    // The client reads the answer as text, bytes that are not UTF-8 made
    // U+FFFD (found by the fuzzer: a description holding one asked a wait
    // all the same), and so does the check.
    let json: Option<Value> = serde_json::from_str(&String::from_utf8_lossy(body)).ok();
    let retry_after = json
        .as_ref()
        .filter(|j| j["ok"] == Value::Bool(false))
        .and_then(|j| j["parameters"]["retry_after"].as_u64());
    match got {
        Err(e) => {
            words_of(&e)?;
            if let CallError::RetryAfter(wait) = e
                && retry_after != Some(wait.as_secs())
            {
                return Err(format!(
                    "a wait of {wait:?} from an answer whose retry_after is {retry_after:?}"
                ));
            }
        }
        Ok(got) => {
            let json = json.ok_or_else(|| format!("{got:?} from an answer that is not JSON"))?;
            if json["ok"] != Value::Bool(true) {
                return Err(format!("{got:?} from an answer that is not ok"));
            }
            let result = &json["result"];
            match got {
                Got::Sent(id) if result["message_id"].as_i64() != Some(id) => {
                    return Err(format!(
                        "sent as message {id}, the answer says {}",
                        result["message_id"]
                    ));
                }
                Got::Username(name) if result["username"].as_str() != Some(name.as_str()) => {
                    return Err(format!(
                        "the bot is {name:?}, the answer says {}",
                        result["username"]
                    ));
                }
                Got::Updates(ids) => {
                    let said: Option<Vec<i64>> = result
                        .as_array()
                        .map(|a| a.iter().map(|u| u["update_id"].as_i64()).collect())
                        .and_then(|v: Vec<Option<i64>>| v.into_iter().collect());
                    if said.as_ref() != Some(&ids) {
                        return Err(format!("updates {ids:?}, the answer says {said:?}"));
                    }
                }
                _ => {}
            }
        }
    }
    Ok(())
}
