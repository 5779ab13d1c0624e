//! The server token: 256 random bits a server generates at install, written
//! `arb_` + 43 characters of unpadded base64url. The relay refuses any other
//! shape before it hashes anything.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore;
use std::fmt;

/// The fixed prefix of every server token.
pub const TOKEN_PREFIX: &str = "arb_";
const TOKEN_BYTES: usize = 32;
/// `arb_` and the base64url of 32 bytes.
pub const TOKEN_LEN: usize = TOKEN_PREFIX.len() + 43;

/// A well-formed server token. `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct ServerToken(String);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TokenError {
    #[error("a server token is {TOKEN_LEN} characters: `arb_` and 43 of base64url")]
    Shape,
}

impl ServerToken {
    /// A fresh token from the operating system's random source.
    pub fn generate() -> ServerToken {
        let mut bytes = [0u8; TOKEN_BYTES];
        rand::rng().fill_bytes(&mut bytes);
        ServerToken(format!("{TOKEN_PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes)))
    }

    /// Checks the shape: the prefix, the length, and canonical base64url of
    /// exactly 32 bytes (no padding, no trailing bits set).
    pub fn parse(text: &str) -> Result<ServerToken, TokenError> {
        let body = text.strip_prefix(TOKEN_PREFIX).ok_or(TokenError::Shape)?;
        if text.len() != TOKEN_LEN {
            return Err(TokenError::Shape);
        }
        let bytes = URL_SAFE_NO_PAD
            .decode(body)
            .map_err(|_| TokenError::Shape)?;
        if bytes.len() != TOKEN_BYTES || URL_SAFE_NO_PAD.encode(&bytes) != body {
            return Err(TokenError::Shape);
        }
        Ok(ServerToken(text.to_string()))
    }

    /// The token's text, for the hello and for hashing. Never log it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ServerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ServerToken(arb_…)")
    }
}

impl serde::Serialize for ServerToken {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for ServerToken {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ServerToken, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        ServerToken::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_tokens_parse_and_differ() {
        let a = ServerToken::generate();
        let b = ServerToken::generate();
        assert_ne!(a, b);
        assert_eq!(ServerToken::parse(a.expose()), Ok(a));
    }

    #[test]
    fn refuses_every_other_shape() {
        let good = ServerToken::generate();
        let body = &good.expose()[4..];
        for bad in [
            String::new(),
            body.to_string(),
            format!("ARB_{body}"),
            format!("arb_{}", &body[1..]),
            format!("{}A", good.expose()),
            format!("arb_{}=", &body[..42]),
            format!("arb_{}+", &body[..42]),
            // The last character carries bits past the 256th: only some are
            // canonical.
            format!("arb_{}B", &body[..42]),
        ] {
            if bad == good.expose() {
                continue;
            }
            assert_eq!(ServerToken::parse(&bad), Err(TokenError::Shape), "{bad}");
        }
    }

    #[test]
    fn debug_never_shows_the_token() {
        let t = ServerToken::generate();
        assert!(!format!("{t:?}").contains(&t.expose()[4..]));
    }
}
