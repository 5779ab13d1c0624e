//! The checks of the `relay_frame` fuzz target, shared with the corpus
//! replay in `relay/proto/tests/fuzz_corpus.rs` (the target includes this
//! file by path), so a committed input is judged the same way by both.
//!
//! One input is tried three ways:
//! - as a hello (and an accept): what parses serialises to JSON that parses
//!   back and serialises to the very same bytes;
//! - as a sealed frame as it came off the socket, under a fixed key: what
//!   opens seals again, under the same counter and clock, to a frame that
//!   opens to the same body, and sealing that again gives the same bytes;
//! - as the body inside a frame sealed with the right key (so the fuzzer
//!   gets past the MAC): the frame opens exactly when the body parses as a
//!   `Body` whose content passes its checks, and an opened body re-encodes
//!   to the same sealed bytes as its canonical JSON sealed by hand.

use aromba_relay_proto::frame::{Accept, Body, Hello, MAX_MESSAGE, Nonce};
use aromba_relay_proto::session::{
    Direction, Key, Opener, Refusal, derive, seal_raw, seal_raw_json,
};
use aromba_relay_proto::token::ServerToken;

/// The clock every check runs at (milliseconds since the epoch).
pub const NOW: i64 = 1_700_000_000_000;

/// The fixed key the corpus's sealed frames are sealed under: the token of
/// 32 zero bytes, server nonce of ones, relay nonce of twos, server to
/// relay.
pub fn key() -> Key {
    let token = ServerToken::parse(&format!("arb_{}", "A".repeat(43))).expect("a token");
    derive(
        &token,
        &Nonce([1; 32]),
        &Nonce([2; 32]),
        Direction::ServerToRelay,
    )
}

/// The checks of the structure-aware target (`relay_body`) on a body built
/// field by field: its JSON parses back to the same body, and sealed, that
/// JSON opens exactly when the body's content passes its checks, and
/// re-encodes to the same sealed bytes (the checks of [`check`]'s third
/// way, reached on every input rather than on the few the fuzzer's bytes
/// make a `Body` of).
pub fn shaped(body: &Body) -> Result<(), String> {
    let text = serde_json::to_string(body).map_err(|e| format!("{body:?} does not encode: {e}"))?;
    let again: Body = serde_json::from_str(&text)
        .map_err(|e| format!("{body:?} encodes to {text}, which does not parse: {e}"))?;
    if &again != body {
        return Err(format!(
            "{body:?} encodes to {text}, which parses as {again:?}"
        ));
    }
    self::body(&key(), &text)
}

/// Every check on one input; `Err` says which property broke.
pub fn check(data: &[u8]) -> Result<(), String> {
    hello(data)?;
    let key = key();
    wire(&key, data)?;
    if let Ok(text) = std::str::from_utf8(data) {
        body(&key, text)?;
    }
    Ok(())
}

fn hello(data: &[u8]) -> Result<(), String> {
    if let Ok(hello) = serde_json::from_slice::<Hello>(data) {
        let once = serde_json::to_string(&hello).map_err(|e| e.to_string())?;
        let again: Hello = serde_json::from_str(&once)
            .map_err(|e| format!("a hello re-encodes to {once}: {e}"))?;
        let twice = serde_json::to_string(&again).map_err(|e| e.to_string())?;
        if once != twice {
            return Err(format!(
                "a hello re-encodes differently: {once} then {twice}"
            ));
        }
        if ServerToken::parse(hello.token.expose()).is_err() {
            return Err("a hello holds a token of the wrong shape".into());
        }
    }
    if let Ok(accept) = serde_json::from_slice::<Accept>(data) {
        let once = serde_json::to_string(&accept).map_err(|e| e.to_string())?;
        let again: Accept = serde_json::from_str(&once)
            .map_err(|e| format!("an accept re-encodes to {once}: {e}"))?;
        let twice = serde_json::to_string(&again).map_err(|e| e.to_string())?;
        if once != twice {
            return Err(format!(
                "an accept re-encodes differently: {once} then {twice}"
            ));
        }
    }
    Ok(())
}

/// The counter and clock of a sealed frame's inner part, when it has them.
fn counter_and_clock(data: &[u8]) -> Option<(u64, i64)> {
    let wire: serde_json::Value = serde_json::from_slice(data).ok()?;
    let inner: serde_json::Value =
        serde_json::from_str(wire.get("f")?.to_string().as_str()).ok()?;
    Some((inner.get("n")?.as_u64()?, inner.get("t")?.as_i64()?))
}

fn wire(key: &Key, data: &[u8]) -> Result<(), String> {
    let Ok(body) = Opener::new(key.clone()).open(data, NOW) else {
        return Ok(());
    };
    let (n, t) = counter_and_clock(data).ok_or("an opened frame has no counter and clock")?;
    if n != 1 {
        return Err(format!("a fresh opener took counter {n}"));
    }
    let sealed = seal_raw(key, n, t, &body);
    let reopened = Opener::new(key.clone())
        .open(sealed.as_bytes(), NOW)
        .map_err(|r| format!("an opened frame sealed again is refused: {r}"))?;
    if reopened != body {
        return Err(format!("sealed again, {body:?} opens as {reopened:?}"));
    }
    if seal_raw(key, n, t, &reopened) != sealed {
        return Err("sealing an opened frame again changes its bytes".into());
    }
    Ok(())
}

fn body(key: &Key, text: &str) -> Result<(), String> {
    let sealed = seal_raw_json(key, 1, NOW, text);
    let opened = Opener::new(key.clone()).open(sealed.as_bytes(), NOW);
    // The frame is well formed when the body is one JSON value; then it
    // opens exactly when the body is a `Body` whose content passes.
    let one_value = serde_json::from_str::<&serde_json::value::RawValue>(text).is_ok();
    if one_value && sealed.len() <= MAX_MESSAGE {
        let parsed = serde_json::from_str::<Body>(text);
        let expected = match &parsed {
            Err(_) => Err(Refusal::Malformed),
            Ok(b) if b.check().is_err() => Err(match b {
                Body::AppAnswer { request, .. } => Refusal::AppAnswerContent { request: *request },
                _ => Refusal::Content,
            }),
            Ok(b) => Ok(b.clone()),
        };
        if opened != expected {
            return Err(format!(
                "{text:?} sealed opens as {opened:?}, not {expected:?}"
            ));
        }
    }
    if let Ok(body) = opened {
        let canonical = serde_json::to_string(&body).map_err(|e| e.to_string())?;
        let again: Body = serde_json::from_str(&canonical)
            .map_err(|e| format!("an opened body re-encodes to {canonical}: {e}"))?;
        if again != body {
            return Err(format!(
                "{canonical} parses back as {again:?}, not {body:?}"
            ));
        }
        if seal_raw(key, 1, NOW, &body) != seal_raw_json(key, 1, NOW, &canonical) {
            return Err(format!(
                "{body:?} seals to other bytes than its JSON {canonical}"
            ));
        }
    }
    Ok(())
}
