//! The sealed session that follows the hello.
//!
//! Both sides derive two keys (one per direction, so a frame cannot be
//! reflected back at its sender) with HKDF-SHA256 from the server token and
//! both sides' fresh nonces; the relay needs the token only for the hello.
//! Every frame then travels as
//!
//! ```text
//! {"m":"<HMAC-SHA256 of f, hex>","f":{"n":<counter>,"t":<ms>,"b":{<Body>}}}
//! ```
//!
//! The HMAC covers the exact bytes of `f`, so nothing is re-serialised
//! before it is checked. The counter starts at 1 and goes up by exactly one
//! per frame; the timestamp must lie within [`MAX_SKEW_MS`] of the
//! receiver's clock. The size is checked before anything is parsed.

use crate::frame::{Body, MAX_MESSAGE, Nonce};
use crate::token::ServerToken;
use hkdf::Hkdf;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// How far a frame's timestamp may be from the receiver's clock.
pub const MAX_SKEW_MS: i64 = 120_000;

/// The direction a key seals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    ServerToRelay,
    RelayToServer,
}

impl Direction {
    fn info(self) -> &'static [u8] {
        match self {
            Direction::ServerToRelay => b"aromba/1 session server-to-relay",
            Direction::RelayToServer => b"aromba/1 session relay-to-server",
        }
    }
}

/// A direction's key. `Debug` hides it.
#[derive(Clone)]
pub struct Key([u8; 32]);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(…)")
    }
}

/// Derives the key of one direction.
pub fn derive(
    token: &ServerToken,
    server_nonce: &Nonce,
    relay_nonce: &Nonce,
    direction: Direction,
) -> Key {
    let mut salt = [0u8; 64];
    salt[..32].copy_from_slice(&server_nonce.0);
    salt[32..].copy_from_slice(&relay_nonce.0);
    let hk = Hkdf::<Sha256>::new(Some(&salt), token.expose().as_bytes());
    let mut key = [0u8; 32];
    // 32 bytes is far below HKDF-SHA256's limit of 255 * 32.
    if hk.expand(direction.info(), &mut key).is_err() {
        unreachable!("HKDF-SHA256 expands 32 bytes");
    }
    Key(key)
}

/// Why a frame was refused. Each is counted under [`Refusal::reason`].
#[derive(Debug, thiserror::Error, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    #[error("the frame is larger than {MAX_MESSAGE} bytes")]
    Oversize,
    #[error("the frame is not a well-formed sealed frame")]
    Malformed,
    #[error("the frame's MAC does not match")]
    Forged,
    #[error("the frame's counter was already used")]
    Replay,
    #[error("the frame's counter skips ahead")]
    Reorder,
    #[error("the frame's timestamp is outside the allowed clock skew")]
    Stale,
    #[error("the frame's content is out of bounds")]
    Content,
    /// An `app_answer` whose content is out of bounds: the request it
    /// answered, so that the page waiting for it is told at once rather
    /// than when its wait runs out.
    #[error("the frame's content is out of bounds")]
    AppAnswerContent { request: uuid::Uuid },
}

impl Refusal {
    /// A short label for counts and logs.
    pub fn reason(self) -> &'static str {
        match self {
            Refusal::Oversize => "oversize",
            Refusal::Malformed => "malformed",
            Refusal::Forged => "forged",
            Refusal::Replay => "replay",
            Refusal::Reorder => "reorder",
            Refusal::Stale => "stale",
            Refusal::Content | Refusal::AppAnswerContent { .. } => "content",
        }
    }
}

#[derive(Serialize)]
struct Inner<'a> {
    n: u64,
    t: i64,
    b: &'a Body,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InnerIn {
    n: u64,
    t: i64,
    b: Body,
}

#[derive(Serialize)]
struct WireOut<'a> {
    m: String,
    f: &'a RawValue,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireIn<'a> {
    m: &'a str,
    #[serde(borrow)]
    f: &'a RawValue,
}

fn mac(key: &Key) -> HmacSha256 {
    // HMAC accepts a key of any length.
    match HmacSha256::new_from_slice(&key.0) {
        Ok(mac) => mac,
        Err(_) => unreachable!("HMAC-SHA256 takes any key length"),
    }
}

/// Seals the frames of one direction.
#[derive(Debug)]
pub struct Sealer {
    key: Key,
    next: u64,
}

impl Sealer {
    pub fn new(key: Key) -> Sealer {
        Sealer { key, next: 1 }
    }

    /// The sealed frame, ready to send as a text message.
    pub fn seal(&mut self, body: &Body, now_ms: i64) -> String {
        let inner = Inner {
            n: self.next,
            t: now_ms,
            b: body,
        };
        self.next += 1;
        seal_with(&self.key, &inner)
    }
}

fn seal_with(key: &Key, inner: &Inner<'_>) -> String {
    // Serialising these types cannot fail: no maps with non-string keys.
    seal_text(key, serde_json::to_string(inner).unwrap_or_default())
}

/// MACs the inner frame `f` and wraps it; `f` that is not JSON makes an
/// empty frame (only a test's hand-made body can be such).
fn seal_text(key: &Key, f: String) -> String {
    let mut m = mac(key);
    m.update(f.as_bytes());
    let tag = hex(&m.finalize().into_bytes());
    match RawValue::from_string(f) {
        Ok(raw) => serde_json::to_string(&WireOut { m: tag, f: &raw }).unwrap_or_default(),
        Err(_) => String::new(),
    }
}

/// Seals a frame with a counter and timestamp of the caller's choice: for
/// tests that play a hostile peer.
pub fn seal_raw(key: &Key, counter: u64, ts_ms: i64, body: &Body) -> String {
    seal_with(
        key,
        &Inner {
            n: counter,
            t: ts_ms,
            b: body,
        },
    )
}

/// Seals `body`, JSON as it is, with a counter and timestamp of the
/// caller's choice: for tests that play a hostile peer sending a body no
/// `Body` can hold (a frame of a kind that is gone, say).
pub fn seal_raw_json(key: &Key, counter: u64, ts_ms: i64, body: &str) -> String {
    // A body that is not JSON makes a frame that is not either: the peer
    // under test refuses it as it would any.
    seal_text(key, format!(r#"{{"n":{counter},"t":{ts_ms},"b":{body}}}"#))
}

/// Opens the frames of one direction.
#[derive(Debug)]
pub struct Opener {
    key: Key,
    last: u64,
}

impl Opener {
    pub fn new(key: Key) -> Opener {
        Opener { key, last: 0 }
    }

    /// Checks size, MAC, counter, clock and content, in that order.
    pub fn open(&mut self, message: &[u8], now_ms: i64) -> Result<Body, Refusal> {
        if message.len() > MAX_MESSAGE {
            return Err(Refusal::Oversize);
        }
        let wire: WireIn<'_> = serde_json::from_slice(message).map_err(|_| Refusal::Malformed)?;
        let tag = unhex(wire.m).ok_or(Refusal::Malformed)?;
        let mut m = mac(&self.key);
        m.update(wire.f.get().as_bytes());
        m.verify_slice(&tag).map_err(|_| Refusal::Forged)?;
        let inner: InnerIn = serde_json::from_str(wire.f.get()).map_err(|_| Refusal::Malformed)?;
        if inner.n <= self.last {
            return Err(Refusal::Replay);
        }
        if inner.n != self.last + 1 {
            return Err(Refusal::Reorder);
        }
        if !within_skew(inner.t, now_ms) {
            return Err(Refusal::Stale);
        }
        if inner.b.check().is_err() {
            return Err(match inner.b {
                Body::AppAnswer { request, .. } => Refusal::AppAnswerContent { request },
                _ => Refusal::Content,
            });
        }
        self.last = inner.n;
        Ok(inner.b)
    }
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
    out
}

fn unhex(text: &str) -> Option<[u8; 32]> {
    let bytes = text.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let digit = |b: u8| match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; 32];
    for (i, pair) in bytes.chunks(2).enumerate() {
        out[i] = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(out)
}

/// Whether a timestamp lies within [`MAX_SKEW_MS`] of `now_ms`, for any
/// pair of values (no overflow: a peer chooses `ts`).
pub fn within_skew(ts: i64, now_ms: i64) -> bool {
    ts.abs_diff(now_ms) <= MAX_SKEW_MS.unsigned_abs()
}

/// The current time in milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (Sealer, Opener, Key) {
        let token = ServerToken::generate();
        let (a, b) = (Nonce::random(), Nonce::random());
        let key = derive(&token, &a, &b, Direction::ServerToRelay);
        (Sealer::new(key.clone()), Opener::new(key.clone()), key)
    }

    #[test]
    fn a_sealed_frame_opens_once_in_order() {
        let (mut s, mut o, _) = pair();
        let now = now_ms();
        let first = s.seal(&Body::PairingRequest {}, now);
        let second = s.seal(&Body::PairingRequest {}, now);
        assert_eq!(o.open(first.as_bytes(), now), Ok(Body::PairingRequest {}));
        assert_eq!(o.open(first.as_bytes(), now), Err(Refusal::Replay));
        assert_eq!(o.open(second.as_bytes(), now), Ok(Body::PairingRequest {}));
    }

    #[test]
    fn refuses_a_frame_that_skips_ahead() {
        let (mut s, mut o, _) = pair();
        let now = now_ms();
        let _held_back = s.seal(&Body::PairingRequest {}, now);
        let second = s.seal(&Body::PairingRequest {}, now);
        assert_eq!(o.open(second.as_bytes(), now), Err(Refusal::Reorder));
    }

    #[test]
    fn refuses_a_frame_outside_the_skew() {
        let (_, mut o, key) = pair();
        let now = now_ms();
        let old = seal_raw(&key, 1, now - MAX_SKEW_MS - 1, &Body::PairingRequest {});
        assert_eq!(o.open(old.as_bytes(), now), Err(Refusal::Stale));
    }

    #[test]
    fn refuses_a_changed_byte_and_the_other_directions_key() {
        let token = ServerToken::generate();
        let (a, b) = (Nonce::random(), Nonce::random());
        let up = derive(&token, &a, &b, Direction::ServerToRelay);
        let down = derive(&token, &a, &b, Direction::RelayToServer);
        let now = now_ms();
        let frame = seal_raw(
            &up,
            1,
            now,
            &Body::JournalHead {
                seq: 7,
                hash: "a".repeat(64),
            },
        );
        let changed = frame.replace("\"seq\":7", "\"seq\":8");
        assert_eq!(
            Opener::new(up.clone()).open(changed.as_bytes(), now),
            Err(Refusal::Forged)
        );
        assert_eq!(
            Opener::new(down).open(frame.as_bytes(), now),
            Err(Refusal::Forged)
        );
        assert!(Opener::new(up).open(frame.as_bytes(), now).is_ok());
    }

    #[test]
    fn an_app_answer_out_of_bounds_is_refused_with_the_request_it_answered() {
        let (mut s, mut o, _) = pair();
        let request = uuid::Uuid::new_v4();
        let answer = |text: &str| Body::AppAnswer {
            request,
            answer: crate::frame::AppAnswer::said(crate::frame::AppAnswerKind::Outcome, text),
        };
        let now = now_ms();
        let bad = s.seal(&answer("Done.\u{1b}[2J"), now);
        assert_eq!(
            o.open(bad.as_bytes(), now),
            Err(Refusal::AppAnswerContent { request })
        );
        assert_eq!(Refusal::AppAnswerContent { request }.reason(), "content");
        // Any other frame out of bounds names no request.
        let (mut s, mut o, _) = pair();
        let message = Body::Send {
            id: request,
            text: "\u{0}".into(),
            buttons: Vec::new(),
            monospace: Vec::new(),
        };
        let sealed = s.seal(&message, now);
        assert_eq!(o.open(sealed.as_bytes(), now), Err(Refusal::Content));
    }

    #[test]
    fn refuses_oversize_before_parsing() {
        let (_, mut o, _) = pair();
        let big = vec![b'{'; MAX_MESSAGE + 1];
        assert_eq!(o.open(&big, now_ms()), Err(Refusal::Oversize));
    }
}
