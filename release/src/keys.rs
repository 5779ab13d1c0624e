//! The release public keys: the current one and a standby, compiled in
//! from `keys/` (see `build.rs`). A manifest verifies when either key
//! signed it, so a release signed with the current key can ship binaries
//! that trust the standby next.

use crate::ReleaseError;
use minisign_verify::PublicKey;

mod compiled {
    include!(concat!(env!("OUT_DIR"), "/keys.rs"));
}

pub struct Keys(Vec<PublicKey>);

impl Keys {
    /// The keys this build carries; refused when it carries none.
    pub fn compiled() -> Result<Keys, ReleaseError> {
        Keys::from_base64(compiled::COMPILED)
    }

    /// Keys given as their base64 lines (a test's keys, the installer's).
    pub fn from_base64(keys: &[&str]) -> Result<Keys, ReleaseError> {
        if keys.is_empty() {
            return Err(ReleaseError::NoKeys);
        }
        keys.iter()
            .map(|k| {
                PublicKey::from_base64(k.trim()).map_err(|e| ReleaseError::BadKey(e.to_string()))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Keys)
    }

    /// Whether this build carries release keys.
    pub fn built_in() -> bool {
        !compiled::COMPILED.is_empty()
    }

    /// Whether one of these keys signed `bytes` with `signature` (a
    /// minisign signature file's text; its trusted comment is signed too).
    pub fn signed(&self, bytes: &[u8], signature: &str) -> Result<(), ReleaseError> {
        let sig = minisign_verify::Signature::decode(signature)
            .map_err(|e| ReleaseError::BadSignature(format!("not a minisign signature: {e}")))?;
        if self.0.iter().any(|k| k.verify(bytes, &sig, false).is_ok()) {
            Ok(())
        } else {
            Err(ReleaseError::BadSignature(
                "no trusted key signed it".into(),
            ))
        }
    }

    pub(crate) fn all(&self) -> &[PublicKey] {
        &self.0
    }
}
