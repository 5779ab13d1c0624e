//! The keyed hashes the relay stores instead of secrets and addresses:
//! HMAC-SHA256 under the pepper, each with its own label.

use crate::config::Pepper;
use hmac::{Hmac, Mac};
use sha2::Sha256;

fn keyed(pepper: &Pepper, label: &[u8], data: &[u8]) -> [u8; 32] {
    // HMAC takes a key of any length.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(pepper.bytes()) else {
        unreachable!("HMAC-SHA256 takes any key length")
    };
    mac.update(label);
    mac.update(&[0]);
    mac.update(data);
    mac.finalize().into_bytes().into()
}

/// What the relay keeps of a server token.
pub fn token_hash(pepper: &Pepper, token: &aromba_relay_proto::token::ServerToken) -> [u8; 32] {
    keyed(pepper, b"aromba server token", token.expose().as_bytes())
}

/// What the relay keeps of an address, for a day.
pub fn address_hash(pepper: &Pepper, key: crate::address::AddressKey) -> [u8; 32] {
    keyed(pepper, b"aromba address", &key.to_bytes())
}

/// Constant-time equality of two stored hashes.
pub fn same(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

/// What the relay keeps of a pairing code while it is live.
pub fn pairing_code_hash(pepper: &Pepper, code: &str) -> [u8; 32] {
    keyed(pepper, b"aromba pairing code", code.as_bytes())
}

/// What the relay keeps of a chat it told it is not paired.
pub fn chat_hash(pepper: &Pepper, chat: i64) -> [u8; 32] {
    keyed(pepper, b"aromba foreign chat", &chat.to_be_bytes())
}

/// The key a wrong pairing code counts against: a chat, an account, or
/// everyone (`kind` keeps them apart).
pub fn guess_key(pepper: &Pepper, kind: &str, id: &str) -> [u8; 32] {
    keyed(
        pepper,
        b"aromba pairing guesses",
        format!("{kind}:{id}").as_bytes(),
    )
}

/// The key of one kind of reply (its text) to a chat that is not paired,
/// remembered for the strangers' window.
pub fn stranger_reply_key(pepper: &Pepper, chat: i64, text: &str) -> [u8; 32] {
    let mut data = chat.to_be_bytes().to_vec();
    data.extend_from_slice(text.as_bytes());
    keyed(pepper, b"aromba stranger reply", &data)
}
