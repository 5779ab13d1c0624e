//! The relay under every availability attack at once, with the legitimate
//! paths measured while the attacks run: the load test asserts on it, the
//! `under_attack` benchmark prints it next to the same paths without the
//! attacks.
//!
//! The attacks (each optional): request bodies trickled and held from
//! hundreds of addresses (twice the HTTP pool), WebSockets upgraded and
//! kept silent from hundreds of addresses (three times the pending pool),
//! a flood of strangers' `/start` during a pairing-guess lock, and a 429
//! with a day's `retry_after` for one chat. The legitimate paths: `/healthz`
//! from a fresh address, a new server's registration and hello, a paired
//! chat's message out (server → Telegram), and the person's message in
//! (Telegram's webhook → server).

use super::attack::{client_from, raise_descriptor_limit, silent_websocket, slow_body, source};
use super::bot::{Bot, next_delivery, paired, send};
use super::{Server, post_json};
use aromba_botfake::state::Injected;
use aromba_relay_proto::client::{dial, handshake};
use aromba_relay_proto::frame::Delivery;
use sqlx::PgPool;
use std::time::{Duration, Instant};

/// Which attacks run, and at what scale.
#[derive(Clone, Debug, Default)]
pub struct Attacks {
    /// Slow request bodies held, 8 per address.
    pub slow_bodies: usize,
    /// Silent WebSockets held, 5 per address.
    pub silent_sockets: usize,
    /// Strangers sending `/start` during a guess lock.
    pub strangers: usize,
    /// One chat told to wait a day.
    pub day_429: bool,
}

impl Attacks {
    pub fn none() -> Attacks {
        Attacks::default()
    }

    /// Every attack, at a scale this 2-core machine holds: a few thousand
    /// connections from several hundred addresses.
    pub fn all() -> Attacks {
        Attacks {
            slow_bodies: 2_048,
            silent_sockets: 1_536,
            strangers: 1_000,
            day_429: true,
        }
    }
}

/// The pools are smaller than production's so the attacks overflow them
/// (twice and three times) with descriptors to spare.
pub const HTTP_POOL: usize = 1_024;
pub const PENDING_POOL: usize = 512;

/// What the legitimate paths saw, one entry per probe.
#[derive(Debug, Default)]
pub struct Seen {
    pub healthz: Vec<Duration>,
    pub healthz_failed: usize,
    pub hello: Vec<Duration>,
    pub hello_refused: usize,
    pub chat_out: Vec<Duration>,
    pub webhook_in: Vec<Duration>,
}

const GIVE_UP: Duration = Duration::from_secs(10);
/// A bound on the webhook taking the strangers' flood (about 8 s here).
const FLOOD_TAKEN: Duration = Duration::from_secs(120);

async fn start(db: PgPool) -> Bot {
    super::bot::start_bot_tuned(
        db,
        |l| {
            l.max_http_connections = HTTP_POOL;
            l.http_per_address = 64;
            l.max_pending_hellos = PENDING_POOL;
            l.hellos_per_address = 16;
            // Held through the run: the pools, not the deadlines, are
            // under test.
            l.body_deadline_ms = 120_000;
            l.hello_timeout_ms = 120_000;
        },
        |t| {
            // Telegram's own figures.
            t.pace = aromba_relay::telegram::pace::PaceLimits::default();
            t.guesses_overall = 2;
        },
    )
    .await
}

/// Runs the relay with `attacks` and `probes` rounds of the legitimate
/// paths, the paired chat's messages a little over a second apart (a
/// chat's pace).
pub async fn run(db: PgPool, attacks: &Attacks, probes: usize) -> Seen {
    raise_descriptor_limit();
    let bot = start(db).await;
    let (_person_server, mut ws, mut session, _) = paired(&bot, 1).await;
    // The pairing's reply took chat 1's turn: the probes measure the
    // relay, not a wait for the chat's next turn.
    wait_for(|| !bot.fake.sent_to(1).is_empty()).await;
    let mut last_out = Instant::now();
    let mut held_429 = None;
    if attacks.day_429 {
        let (server, mut ws2, mut session2, _) = paired(&bot, 2).await;
        wait_for(|| !bot.fake.sent_to(2).is_empty() && !bot.fake.sent_to(1).is_empty()).await;
        bot.fake.inject_for(
            "sendMessage",
            Injected::TooManyRequests {
                retry_after: 86_400,
            },
        );
        send(&mut ws2, &mut session2, "for the paused chat", Vec::new()).await;
        bot.wait_metric("bot_api_pause_chat", 1).await;
        held_429 = Some((server, ws2, session2));
    }
    let mut held = Vec::new();
    for i in 0..attacks.slow_bodies {
        if let Some(s) = slow_body(source(i / 8), bot.relay.addr, "/v1/servers").await {
            held.push(s);
        }
    }
    let mut silent = Vec::new();
    for i in 0..attacks.silent_sockets {
        if let Some(s) = silent_websocket(source(10_000 + i / 5), bot.relay.addr).await {
            silent.push(s);
        }
    }
    if attacks.strangers > 0 {
        bot.fake.user_message(5_000, "/start AAAAAA");
        bot.fake.user_message(5_001, "/start BBBBBB");
        bot.wait_metric("pairing_wrong_code", 2).await;
        for chat in 0..attacks.strangers {
            bot.fake
                .user_message(100_000 + chat as i64, "/start CCCCCC");
        }
        // The fake posts its updates one at a time, oldest first (Telegram
        // uses up to 40 connections): a probe queued behind a thousand
        // strangers would time the fake's queue, several seconds, not the
        // relay. Their answers, paced, are still going out while the
        // probes run.
        assert!(
            wait_for_within(FLOOD_TAKEN, || bot.fake.state().pending.is_empty()).await,
            "the relay did not take the strangers' updates within {FLOOD_TAKEN:?}"
        );
    }
    let mut seen = Seen::default();
    for probe in 0..probes {
        // /healthz from an address the attacks never used.
        let asked = Instant::now();
        let health = client_from(source(50_000 + probe))
            .get(bot.relay.url("/healthz"))
            .timeout(GIVE_UP)
            .send()
            .await;
        match health {
            Ok(r) if r.status() == 200 => seen.healthz.push(asked.elapsed()),
            _ => seen.healthz_failed += 1,
        }
        // A new server registers and says hello.
        let server = Server::new();
        let (status, _) = post_json(&bot.relay, &server.registration()).await;
        assert_eq!(status, 201, "a registration is taken");
        let endpoint = server.endpoint(&bot.relay);
        let asked = Instant::now();
        let hello = async {
            let mut socket = dial(&endpoint).await.ok()?;
            handshake(&mut socket, &endpoint).await.ok()?;
            Some(socket)
        };
        match tokio::time::timeout(GIVE_UP, hello).await {
            Ok(Some(_socket)) => seen.hello.push(asked.elapsed()),
            _ => seen.hello_refused += 1,
        }
        // The paired chat's message out, once the chat's turn has come
        // (a message a second).
        let turn = last_out + Duration::from_millis(1_050);
        if Instant::now() < turn {
            tokio::time::sleep(turn - Instant::now()).await;
        }
        let text = format!("probe {probe}: disk at 91%");
        let asked = Instant::now();
        send(&mut ws, &mut session, &text, Vec::new()).await;
        if wait_for_within(GIVE_UP, || {
            bot.fake.sent_to(1).iter().any(|m| m.text == text)
        })
        .await
        {
            seen.chat_out.push(asked.elapsed());
        }
        last_out = Instant::now();
        // The person's message in, through the webhook.
        let said = format!("probe {probe}: how is the disk?");
        let asked = Instant::now();
        bot.fake.user_message(1, &said);
        let arrived = tokio::time::timeout(GIVE_UP, async {
            loop {
                if let Delivery::Message { text } = next_delivery(&mut ws, &mut session).await
                    && text == said
                {
                    return;
                }
            }
        })
        .await;
        if arrived.is_ok() {
            seen.webhook_in.push(asked.elapsed());
        }
    }
    drop(held);
    drop(silent);
    drop(held_429);
    bot.relay.stop().await;
    seen
}

async fn wait_for(mut check: impl FnMut() -> bool) {
    assert!(
        wait_for_within(GIVE_UP, &mut check).await,
        "gave up waiting"
    );
}

async fn wait_for_within(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

/// The `p`th percentile of `samples`, in milliseconds.
pub fn percentile_ms(samples: &[Duration], p: f64) -> f64 {
    let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    ms.sort_by(f64::total_cmp);
    if ms.is_empty() {
        return f64::NAN;
    }
    let i = ((ms.len() as f64 - 1.0) * p).round() as usize;
    ms[i.min(ms.len() - 1)]
}
