//! The PIN, sealed for this Warden by the Mini App's page.
//!
//! When an action that needs the PIN is approved in the app, the Warden
//! makes a key pair for that one proposal ([`SealKey`]) and puts its public
//! half in the app's `start_param`, which Telegram signs into the launch.
//! The page seals the PIN with what WebCrypto offers every current browser
//! engine: an X25519 key of its own, HKDF-SHA256 and AES-256-GCM, with the
//! `start_param` as associated data (so a seal made for one proposal opens
//! for no other). The relay, the Worker and the chat carry only the sealed
//! bytes; the secret half never leaves the action's record.
//!
//! The sealed form, in base64url without padding:
//! `page public key (32) ‖ nonce (12) ‖ AES-256-GCM(PIN) with its tag (16)`;
//! the key is `HKDF-SHA256(salt = page key ‖ Warden key, ikm = X25519,
//! info = "aromba pin seal v1")`.
//!
//! ```
//! use aromba_warden::seal::SealKey;
//! // A PIN the page's own `seal.js` sealed under Node's WebCrypto, its
//! // random key and nonce fixed (`scripts/seal-vector.js`); the Warden's
//! // key is RFC 7748's Bob.
//! let key = SealKey::from_secret_hex(
//!     "5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb",
//! ).unwrap();
//! assert_eq!(key.public_hex(), "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f");
//! let sealed = "hSDwCYkwp1R0i33ctD73Wg2_Og0mOBr066SpjqqbTmoAAQIDBAUGBwgJCgtPCI9tb5NCvjPcnC096s2UmxSKNC20";
//! let param = format!("00112233445566778899aabbccddeeff_{}_{}", "0".repeat(64), key.public_hex());
//! assert_eq!(key.open(sealed, param.as_bytes()).unwrap().expose(), "428193");
//! assert!(key.open(sealed, b"another start_param").is_err());
//! ```

#![forbid(unsafe_code)]

use aes_gcm::aead::AeadInPlace;
use aes_gcm::{Aes256Gcm, KeyInit, Nonce, Tag};
use aromba_warden_proto::{Pin, decode_hex, encode_hex};
use base64ct::{Base64UrlUnpadded, Encoding};
use ed25519_compact::x25519;
use std::io::Read;

/// What HKDF's `info` says: this construction, this version.
const INFO: &[u8] = b"aromba pin seal v1";
const KEY: usize = 32;
const NONCE: usize = 12;
const TAG: usize = 16;

/// The longest sealed PIN read: a PIN of at most `pin::MAX_LEN` characters
/// of up to four bytes each, sealed and encoded.
pub const MAX_SEALED: usize = (KEY + NONCE + crate::pin::MAX_LEN * 4 + TAG).div_ceil(3) * 4;

/// Why a sealed PIN did not open. Each is said to the person as "the PIN
/// did not arrive sealed for this server".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SealError {
    /// Not base64url, or too short or long to be a sealed PIN.
    Shape,
    /// The page's key is one no honest page makes (a low-order point).
    WeakKey,
    /// It does not open with this key and this `start_param`.
    DoesNotOpen,
    /// It opened, but what is inside is not text.
    NotText,
}

impl std::fmt::Display for SealError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SealError::Shape => "the sealed PIN is not of the page's form",
            SealError::WeakKey => "the sealed PIN names a key no page makes",
            SealError::DoesNotOpen => {
                "the sealed PIN does not open with this proposal's key and parameter"
            }
            SealError::NotText => "the sealed PIN holds no text",
        })
    }
}

impl std::error::Error for SealError {}

/// One proposal's key pair: the public half goes out in the `start_param`,
/// the secret half stays in the action's record.
pub struct SealKey {
    secret: x25519::SecretKey,
    public: x25519::PublicKey,
}

impl std::fmt::Debug for SealKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SealKey({})", self.public_hex())
    }
}

impl SealKey {
    /// A new key pair, its secret from `/dev/urandom`.
    pub fn generate() -> std::io::Result<SealKey> {
        let mut secret = [0u8; KEY];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut secret)?;
        SealKey::from_secret(secret).ok_or_else(|| std::io::Error::other("a weak X25519 secret"))
    }

    fn from_secret(secret: [u8; KEY]) -> Option<SealKey> {
        let secret = x25519::SecretKey::new(secret);
        let public = secret.recover_public_key().ok()?;
        Some(SealKey { secret, public })
    }

    /// The key pair whose secret half is `hex` (64 lower-case hex digits).
    pub fn from_secret_hex(hex: &str) -> Option<SealKey> {
        let bytes: [u8; KEY] = decode_hex(hex)?.try_into().ok()?;
        SealKey::from_secret(bytes)
    }

    pub fn secret_hex(&self) -> String {
        encode_hex(self.secret.as_ref())
    }

    /// The public half, as the `start_param` carries it.
    pub fn public_hex(&self) -> String {
        encode_hex(self.public.as_ref())
    }

    /// Opens `sealed` (the page's base64url), made for the `start_param`
    /// `param`: the PIN typed in the page.
    pub fn open(&self, sealed: &str, param: &[u8]) -> Result<Pin, SealError> {
        if sealed.len() > MAX_SEALED {
            return Err(SealError::Shape);
        }
        let mut bytes = Base64UrlUnpadded::decode_vec(sealed).map_err(|_| SealError::Shape)?;
        if bytes.len() < KEY + NONCE + 1 + TAG {
            return Err(SealError::Shape);
        }
        let (page, rest) = bytes.split_at_mut(KEY);
        let page = x25519::PublicKey::from_slice(page).map_err(|_| SealError::Shape)?;
        let shared = page.dh(&self.secret).map_err(|_| SealError::WeakKey)?;
        let key = hkdf_sha256(
            &[page.as_ref(), self.public.as_ref()].concat(),
            shared.as_ref(),
            INFO,
        );
        let (nonce, rest) = rest.split_at_mut(NONCE);
        let (text, tag) = rest.split_at_mut(rest.len() - TAG);
        let cipher = Aes256Gcm::new_from_slice(&key).map_err(|_| SealError::DoesNotOpen)?;
        cipher
            .decrypt_in_place_detached(Nonce::from_slice(nonce), param, text, Tag::from_slice(tag))
            .map_err(|_| SealError::DoesNotOpen)?;
        let pin = std::str::from_utf8(text).map_err(|_| SealError::NotText)?;
        Ok(Pin::new(pin))
    }
}

/// HKDF-SHA256 (RFC 5869) for one block of output: the 32-byte key.
fn hkdf_sha256(salt: &[u8], ikm: &[u8], info: &[u8]) -> [u8; 32] {
    let prk = crate::journal::hmac_sha256(salt, ikm);
    crate::journal::hmac_sha256(&prk, &[info, &[1u8]].concat())
}

#[cfg(test)]
mod tests;
