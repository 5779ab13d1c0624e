//! `GET /v1/connect`: one server's WebSocket.
//!
//! The first message is the hello: the server's id and token (which the
//! relay hashes, compares in constant time and then drops) and a nonce.
//! The relay answers with its own nonce and a sealed welcome; from then on
//! every frame both ways is sealed ([`aromba_relay_proto::session`]). A refused
//! hello or frame is counted by reason and closes the connection.

use crate::address::client_address;
use crate::hashing::{same, token_hash};
use crate::outbox;
use crate::state::App;
use crate::store;
use crate::tls::PeerAddr;
use aromba_relay_proto::frame::{Accept, Body, Hello, MAX_MESSAGE, Nonce, PROTOCOL_VERSION};
use aromba_relay_proto::session::{
    Direction, Opener, Refusal, Sealer, derive, now_ms, within_skew,
};
use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade, close_code};
use axum::extract::{ConnectInfo, State};
use axum::http::HeaderMap;
use axum::response::Response;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use uuid::Uuid;

/// Close code for a newer connection of the same server.
pub const CLOSE_REPLACED: u16 = 4001;
/// Deliveries read from the outbox per round.
const BATCH: i64 = 64;

/// How long any one write to a peer may take: a peer that stops reading
/// (a zero receive window) must not freeze its session, which also answers
/// replacement, pings and shutdown.
const SEND_DEADLINE: Duration = Duration::from_secs(10);

pub async fn connect(
    State(app): State<App>,
    ConnectInfo(PeerAddr(peer)): ConnectInfo<PeerAddr>,
    headers: HeaderMap,
    upgrade: WebSocketUpgrade,
) -> Response {
    let address = client_address(peer.ip(), &headers, &app.config.trusted_proxies);
    upgrade
        // Buffers set by hand: the defaults hold 128 KiB per connection.
        .read_buffer_size(4 * 1024)
        .write_buffer_size(0)
        .max_write_buffer_size(4 * MAX_MESSAGE)
        .max_message_size(MAX_MESSAGE)
        .max_frame_size(MAX_MESSAGE)
        .on_upgrade(move |socket| async move {
            // Before its hello a socket holds a slot of the pending pool,
            // never one of the servers' connections; a silent one gives its
            // slot up to a newcomer when the pool or its address is full.
            let admitted = match app.hellos.admit(address, false) {
                Ok(a) => a,
                Err(refused) => {
                    app.metrics.refuse(app.hellos.refused_reason(refused));
                    close(
                        socket,
                        close_code::AGAIN,
                        "too many connections, try again later",
                    )
                    .await;
                    return;
                }
            };
            if let Some(evicted) = admitted.evicted {
                app.metrics.refuse(app.hellos.evicted_reason(evicted));
            }
            session(app.clone(), socket, admitted.slot, address).await;
        })
}

async fn send(socket: &mut WebSocket, message: Message) -> Result<(), ()> {
    match tokio::time::timeout(SEND_DEADLINE, socket.send(message)).await {
        Ok(Ok(())) => Ok(()),
        _ => Err(()),
    }
}

async fn close(mut socket: WebSocket, code: u16, reason: &'static str) {
    let _ = send(
        &mut socket,
        Message::Close(Some(CloseFrame {
            code,
            reason: Utf8Bytes::from_static(reason),
        })),
    )
    .await;
}

/// Holds one count of a gauge while it lives, whichever way the session
/// ends (a panic included).
struct Counted<'a>(&'a AtomicUsize);

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Why a hello was refused.
#[derive(Debug, Clone, Copy)]
enum HelloRefusal {
    Timeout,
    Malformed,
    Oversize,
    Version,
    Stale,
    BadToken,
    Unavailable,
    /// Silent while newcomers needed its slot.
    Evicted,
    /// The server said hello too often.
    TooOften,
    /// The address's hellos failed too often.
    AddressTooOften,
}

impl HelloRefusal {
    /// Whether the refusal is the address's doing, and counts against its
    /// failed hellos.
    fn is_a_failure(self) -> bool {
        matches!(
            self,
            HelloRefusal::Timeout
                | HelloRefusal::Malformed
                | HelloRefusal::Oversize
                | HelloRefusal::Version
                | HelloRefusal::Stale
                | HelloRefusal::BadToken
        )
    }

    fn reason(self) -> &'static str {
        match self {
            HelloRefusal::Timeout => "hello_timeout",
            HelloRefusal::Malformed => "hello_malformed",
            HelloRefusal::Oversize => "oversize",
            HelloRefusal::Version => "hello_version",
            HelloRefusal::Stale => "stale",
            HelloRefusal::BadToken => "bad_token",
            HelloRefusal::Unavailable => "hello_database_unavailable",
            HelloRefusal::Evicted => "hello_evicted",
            HelloRefusal::TooOften => "hello_rate",
            HelloRefusal::AddressTooOften => "hello_failures_rate",
        }
    }
}

/// A hello whose token matched, and whether its server is paired.
struct Greeted {
    hello: Hello,
    paired: bool,
}

async fn read_hello(
    app: &App,
    socket: &mut WebSocket,
    pending: &crate::slots::Slot,
    address: crate::address::AddressKey,
) -> Result<Greeted, HelloRefusal> {
    let wait = Duration::from_millis(app.config.limits.hello_timeout_ms);
    let first = tokio::select! {
        first = tokio::time::timeout(wait, socket.recv()) => {
            first.map_err(|_| HelloRefusal::Timeout)?
        }
        () = pending.holder().evicted() => return Err(HelloRefusal::Evicted),
    };
    // Something arrived: while it is judged (a database lookup at most) the
    // socket keeps its slot.
    pending.holder().set_proven(true);
    let text = match first {
        Some(Ok(Message::Text(text))) => text,
        Some(Err(e)) if is_oversize(&e) => return Err(HelloRefusal::Oversize),
        _ => return Err(HelloRefusal::Malformed),
    };
    let hello: Hello = serde_json::from_str(text.as_str()).map_err(|_| HelloRefusal::Malformed)?;
    if hello.v != PROTOCOL_VERSION {
        return Err(HelloRefusal::Version);
    }
    if !within_skew(hello.ts, now_ms()) {
        return Err(HelloRefusal::Stale);
    }
    // An address whose hellos keep failing is not looked up again for a
    // while.
    if !app.failed_hellos.has(address) {
        return Err(HelloRefusal::AddressTooOften);
    }
    let stored = store::servers::credentials(&app.db, hello.server_id)
        .await
        .map_err(|_| HelloRefusal::Unavailable)?;
    let offered = token_hash(&app.config.pepper, &hello.token);
    // An unknown id and a wrong token look the same from outside.
    let known = stored
        .as_ref()
        .is_some_and(|s| same(&s.token_hash, &offered));
    if !known {
        return Err(HelloRefusal::BadToken);
    }
    if !app.hello_pace.take(hello.server_id) {
        return Err(HelloRefusal::TooOften);
    }
    let paired = stored.is_some_and(|s| s.paired);
    Ok(Greeted { hello, paired })
}

/// Whether the socket refused a frame or a message past its size limits:
/// told by the error's type (tungstenite's `Capacity`), not its words.
fn is_oversize(e: &axum::Error) -> bool {
    use std::error::Error as _;
    matches!(
        e.source()
            .and_then(|inner| inner.downcast_ref::<tungstenite::Error>()),
        Some(tungstenite::Error::Capacity(_))
    )
}

async fn session(
    app: App,
    mut socket: WebSocket,
    pending: crate::slots::Slot,
    address: crate::address::AddressKey,
) {
    let Greeted { hello, paired } = match read_hello(&app, &mut socket, &pending, address).await {
        Ok(greeted) => greeted,
        Err(refusal) => {
            app.metrics.refuse(refusal.reason());
            tracing::info!(reason = refusal.reason(), "hello refused");
            if refusal.is_a_failure() {
                app.failed_hellos.take(address);
            }
            // Told to come back later, not that it was wrong: an honest
            // server backs off and tries again.
            let (code, reason) = match refusal {
                HelloRefusal::Evicted | HelloRefusal::TooOften | HelloRefusal::AddressTooOften => {
                    (close_code::AGAIN, "too many connections, try again later")
                }
                _ => (close_code::POLICY, "refused"),
            };
            close(socket, code, reason).await;
            return;
        }
    };
    drop(pending);
    let live = app.sockets.fetch_add(1, Ordering::SeqCst) + 1;
    let _counted = Counted(&app.sockets);
    if live > app.config.limits.max_connections {
        app.metrics.refuse("at_capacity");
        close(socket, close_code::AGAIN, "at capacity, try again later").await;
        return;
    }
    // Registration is open: servers nobody paired have a share of the
    // room, never all of it (found by the attack round: one address's
    // registrations kept a paired server out).
    let _unpaired = if paired {
        None
    } else {
        let unpaired = app.unpaired_sockets.fetch_add(1, Ordering::SeqCst) + 1;
        let counted = Counted(&app.unpaired_sockets);
        if unpaired > app.config.limits.max_unpaired_connections {
            app.metrics.refuse("unpaired_at_capacity");
            close(socket, close_code::AGAIN, "at capacity, try again later").await;
            return;
        }
        Some(counted)
    };
    let server = hello.server_id;
    let relay_nonce = Nonce::random();
    let up = derive(
        &hello.token,
        &hello.nonce,
        &relay_nonce,
        Direction::ServerToRelay,
    );
    let down = derive(
        &hello.token,
        &hello.nonce,
        &relay_nonce,
        Direction::RelayToServer,
    );
    // The token is needed no longer.
    drop(hello);
    let mut sealer = Sealer::new(down);
    let mut opener = Opener::new(up);
    let welcome = sealer.seal(
        &Body::Welcome {
            ping_secs: app.config.limits.ping_secs,
        },
        now_ms(),
    );
    let generation = match app.writer.next_generation(server).await {
        Ok(g) => g,
        Err(e) => {
            tracing::warn!(server = %server, error = %e, "connection generation failed");
            close(socket, close_code::ERROR, "relay error").await;
            return;
        }
    };
    let slot = app.hub.attach(server, generation);
    // A newer connection on another replica may have been announced before
    // this one was in the hub to hear it: check once now.
    slot.recheck.notify_one();
    app.metrics.connected.set(app.hub.len() as i64);
    let accept = Accept {
        v: PROTOCOL_VERSION,
        nonce: relay_nonce,
        welcome,
    };
    let Ok(accept) = serde_json::to_string(&accept) else {
        app.hub.detach(server, &slot);
        return;
    };
    if send(&mut socket, Message::Text(accept.into()))
        .await
        .is_err()
    {
        app.hub.detach(server, &slot);
        app.metrics.connected.set(app.hub.len() as i64);
        return;
    }
    tracing::info!(server = %server, "connected");
    // The journal head the relay holds, for the server to check its
    // journal still extends it.
    let anchor = store::servers::journal_head(&app.db, server).await;
    if let Ok(Some(row)) = anchor
        && let (Some(seq), Some(hash)) = (row.seq, row.hash)
        && let Ok(seq) = u64::try_from(seq)
    {
        // Signed, so that the Warden can tell the relay's anchor from a
        // line number its Worker made up.
        let signature = app.telegram.as_ref().and_then(|t| {
            match t.key.sign_anchor(server, seq, &hash) {
                Ok(s) => Some(s),
                Err(e) => {
                    tracing::warn!(server = %server, error = %e, "the anchor could not be signed");
                    None
                }
            }
        });
        let frame = sealer.seal(
            &Body::Anchor {
                seq,
                hash,
                signature,
            },
            now_ms(),
        );
        if send(&mut socket, Message::Text(frame.into()))
            .await
            .is_err()
        {
            app.hub.detach(server, &slot);
            app.metrics.connected.set(app.hub.len() as i64);
            return;
        }
    }
    let ended = run(&app, &mut socket, server, &slot, &mut sealer, &mut opener).await;
    app.hub.detach(server, &slot);
    app.metrics.connected.set(app.hub.len() as i64);
    match ended {
        End::Refused(refusal) => {
            app.metrics.refuse(refusal);
            tracing::info!(server = %server, reason = refusal, "frame refused");
            let error = sealer.seal(
                &Body::Error {
                    reason: refusal.to_string(),
                },
                now_ms(),
            );
            let _ = send(&mut socket, Message::Text(error.into())).await;
            close(socket, close_code::POLICY, "refused").await;
        }
        End::Replaced => close(socket, CLOSE_REPLACED, "replaced by a newer connection").await,
        End::Shutdown(after_ms, jitter_ms) => {
            let frame = sealer.seal(
                &Body::Restarting {
                    after_ms,
                    jitter_ms,
                },
                now_ms(),
            );
            let _ = send(&mut socket, Message::Text(frame.into())).await;
            close(socket, close_code::RESTART, "restarting").await;
        }
        End::Timeout => {
            app.metrics.refuse("missed_pongs");
            close(socket, close_code::AWAY, "missed pongs").await;
        }
        End::Gone => {}
        End::Failed => close(socket, close_code::ERROR, "relay error").await,
    }
    tracing::info!(server = %server, "disconnected");
}

enum End {
    Refused(&'static str),
    Replaced,
    Shutdown(u64, u64),
    Timeout,
    Gone,
    Failed,
}

async fn run(
    app: &App,
    socket: &mut WebSocket,
    server: Uuid,
    slot: &crate::hub::Slot,
    sealer: &mut Sealer,
    opener: &mut Opener,
) -> End {
    let mut shutdown = app.shutdown.clone();
    let mut ping = tokio::time::interval(Duration::from_secs(u64::from(
        app.config.limits.ping_secs.max(1),
    )));
    ping.tick().await;
    let mut unanswered = 0u32;
    // The newest row sent on this connection: a wake reads only after it.
    let mut sent_up_to = 0i64;
    // Deliveries sent on this connection and not yet acknowledged: an
    // acknowledgement must name one of them.
    let mut outstanding: std::collections::HashSet<i64> = std::collections::HashSet::new();
    let mut budget = FrameBudget::new(&app.config.limits);
    // Everything already waiting goes first.
    slot.wake.notify_one();
    loop {
        tokio::select! {
            message = socket.recv() => {
                let message = match message {
                    Some(Ok(m)) => m,
                    Some(Err(e)) if is_oversize(&e) => return End::Refused(Refusal::Oversize.reason()),
                    _ => return End::Gone,
                };
                let text = match message {
                    Message::Text(t) => t,
                    Message::Pong(_) => {
                        // A pong answers a ping; one nobody asked for is a
                        // frame like any other.
                        if unanswered > 0 {
                            unanswered = 0;
                        } else if !budget.take() {
                            return End::Refused("frame_rate");
                        }
                        continue;
                    }
                    Message::Ping(_) => {
                        if !budget.take() {
                            return End::Refused("frame_rate");
                        }
                        continue;
                    }
                    Message::Close(_) => return End::Gone,
                    Message::Binary(_) => return End::Refused(Refusal::Malformed.reason()),
                };
                let body = match opener.open(text.as_bytes(), now_ms()) {
                    Ok(body) => body,
                    Err(refusal) => {
                        if let Refusal::AppAnswerContent { request } = refusal {
                            crate::mini_app::answer_unreadable(app, server, request).await;
                        }
                        return End::Refused(refusal.reason());
                    }
                };
                app.metrics.frame("in");
                if let Body::AckDelivery { id } = body {
                    // Acknowledgements are as many as the deliveries, not
                    // the peer's to multiply.
                    if !outstanding.remove(&id) {
                        return End::Refused("unexpected_ack");
                    }
                } else if !budget.take() {
                    return End::Refused("frame_rate");
                }
                match handle(app, server, body).await {
                    Ok(Some(reply)) => {
                        let frame = sealer.seal(&reply, now_ms());
                        if send(socket, Message::Text(frame.into())).await.is_err() {
                            return End::Gone;
                        }
                        app.metrics.frame("out");
                    }
                    Ok(None) => {}
                    Err(Handled::Refused(reason)) => return End::Refused(reason),
                    Err(Handled::Failed) => return End::Failed,
                }
            }
            () = slot.wake.notified() => {
                loop {
                    let batch = match outbox::pending_after(&app.db, server, sent_up_to, BATCH).await {
                        Ok(batch) => batch,
                        Err(e) => {
                            tracing::warn!(server = %server, error = %e, "outbox read failed");
                            return End::Failed;
                        }
                    };
                    let full = batch.full;
                    for row in batch.rows {
                        let frame = sealer.seal(&Body::Deliver { id: row.id, delivery: row.delivery }, now_ms());
                        if send(socket, Message::Text(frame.into())).await.is_err() {
                            return End::Gone;
                        }
                        app.metrics.frame("out");
                        sent_up_to = row.id;
                        outstanding.insert(row.id);
                    }
                    if !full { break; }
                }
            }
            () = slot.replaced.notified() => return End::Replaced,
            () = slot.recheck.notified() => {
                // Notifications may have been lost: ask the database.
                match outbox::generation(&app.db, server).await {
                    Ok(g) if g > slot.db_generation => return End::Replaced,
                    Ok(_) => {}
                    Err(_) => return End::Failed,
                }
            }
            _ = ping.tick() => {
                if unanswered >= 2 {
                    return End::Timeout;
                }
                unanswered += 1;
                if send(socket, Message::Ping(Default::default())).await.is_err() {
                    return End::Gone;
                }
            }
            changed = shutdown.changed() => {
                if changed.is_err() {
                    return End::Shutdown(0, 0);
                }
                if let Some((after, jitter)) = *shutdown.borrow() {
                    return End::Shutdown(after, jitter);
                }
            }
        }
    }
}

/// A token bucket over the frames a server sends (acknowledgements
/// aside): a burst, then a steady rate.
struct FrameBudget {
    tokens: f64,
    burst: f64,
    per_second: f64,
    last: tokio::time::Instant,
}

impl FrameBudget {
    fn new(limits: &crate::config::Limits) -> FrameBudget {
        FrameBudget {
            tokens: f64::from(limits.frame_burst),
            burst: f64::from(limits.frame_burst),
            per_second: f64::from(limits.frames_per_second),
            last: tokio::time::Instant::now(),
        }
    }

    fn take(&mut self) -> bool {
        let now = tokio::time::Instant::now();
        let refill = now.duration_since(self.last).as_secs_f64() * self.per_second;
        self.tokens = (self.tokens + refill).min(self.burst);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

enum Handled {
    Refused(&'static str),
    Failed,
}

/// Acts on one frame from a server; returns the reply, if any.
async fn handle(app: &App, server: Uuid, body: Body) -> Result<Option<Body>, Handled> {
    let now = app.config.clock.now();
    match body {
        Body::AckDelivery { id } => {
            // Deleted with the next batch; the writer retries what the
            // database refuses.
            if app.writer.acknowledge(server, id).await.is_err() {
                return Err(Handled::Failed);
            }
            Ok(None)
        }
        Body::Send { id, .. } | Body::Edit { id, .. } => {
            let Ok(json) = serde_json::to_value(&body) else {
                return Err(Handled::Failed);
            };
            // Kept once by its id (a resend after a reconnect is not a new
            // message), and at most `max_chat_pending` per server — a few
            // only for a server nobody paired, whose messages wait for a
            // chat that may never come.
            let stored = store::chat_outbox::keep(
                &app.db,
                store::chat_outbox::Message {
                    server,
                    id,
                    body: json,
                    now,
                    max_paired: app.config.limits.max_chat_pending,
                    max_unpaired: app.config.limits.max_unpaired_chat_pending,
                },
            )
            .await;
            match stored {
                Ok(r) if r.known || r.stored => {
                    if let Some(telegram) = &app.telegram {
                        telegram.outgoing.notify_one();
                    }
                    Ok(Some(Body::AckMessage { id }))
                }
                Ok(_) => Err(Handled::Refused("chat_queue_full")),
                Err(e) => {
                    tracing::warn!(server = %server, error = %e, "chat outbox insert failed");
                    Err(Handled::Failed)
                }
            }
        }
        Body::JournalHead { seq, hash } => {
            let Ok(seq) = i64::try_from(seq) else {
                return Err(Handled::Refused("journal_head"));
            };
            let updated = store::servers::advance_journal(&app.db, server, seq, &hash).await;
            match updated {
                Ok(1) => Ok(None),
                // A journal never goes back, and a seq once reported keeps
                // its hash: an older head, or the same seq with another
                // hash (a rewritten journal), ends the connection.
                Ok(_) => Err(Handled::Refused("journal_rollback")),
                Err(e) => {
                    tracing::warn!(server = %server, error = %e, "journal head update failed");
                    Err(Handled::Failed)
                }
            }
        }
        Body::PairingRequest {} => pairing_code(app, server).await,
        Body::AppAnswer { request, answer } => {
            crate::mini_app::forward_answer(app, server, request, &answer).await;
            Ok(None)
        }
        // Frames only the relay sends are not a server's to send.
        _ => Err(Handled::Refused("unexpected_frame")),
    }
}

/// A pairing code for `server`, with the link that carries it to the bot.
/// A relay without a bot refuses the request; a bot whose name is not known
/// yet (Telegram has not answered `getMe`) fails it, and the server asks
/// again later.
async fn pairing_code(app: &App, server: Uuid) -> Result<Option<Body>, Handled> {
    let Some(telegram) = &app.telegram else {
        return Err(Handled::Refused("no_bot"));
    };
    let Some(username) = telegram.username_within(Duration::from_secs(5)).await else {
        tracing::warn!(server = %server, "pairing code asked before the bot's name is known");
        return Err(Handled::Failed);
    };
    match crate::telegram::pairing::make_code(app, telegram, server).await {
        Ok(crate::telegram::pairing::Made::AlreadyPaired) => {
            app.metrics.telegram("pairing_code_refused_paired");
            Ok(Some(Body::AlreadyPaired {}))
        }
        Ok(crate::telegram::pairing::Made::Code(code, expires)) => {
            app.metrics.telegram("pairing_code_made");
            Ok(Some(Body::PairingCode {
                link: crate::telegram::pairing::link(&username, &code),
                code,
                expires_at: expires.timestamp_millis(),
            }))
        }
        Err(e) => {
            tracing::warn!(server = %server, error = %e, "pairing code could not be made");
            Err(Handled::Failed)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_oversize_frame_is_told_by_its_type_not_its_words() {
        let capacity = tungstenite::error::CapacityError::MessageTooLong {
            size: 70_000,
            max_size: 65_536,
        };
        assert!(is_oversize(&axum::Error::new(
            tungstenite::Error::Capacity(capacity)
        )));
        let worded = std::io::Error::other("Message too long: Space limit capacity");
        assert!(!is_oversize(&axum::Error::new(tungstenite::Error::Io(
            worded
        ))));
    }
}
