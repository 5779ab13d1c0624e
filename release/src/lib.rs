//! Aromba's signed releases. A release is two tarballs, each holding one
//! binary (`aromba`, `aromba-warden`) and nothing else, and one manifest
//! naming each tarball's SHA-256 and size, with the release's version,
//! expiry, architecture and channel, signed with the release key
//! (minisign). The installer, the Worker's daily check and the Warden all
//! read a release through this crate; the Warden, which alone writes a
//! binary, reads it again itself.
//!
//! ```no_run
//! use aromba_release::{Keys, Manifest, Target, tarball};
//! # fn run(manifest: &[u8], signature: &str, gz: &[u8]) -> Result<(), aromba_release::ReleaseError> {
//! let keys = Keys::compiled()?;
//! let manifest = Manifest::verified(manifest, signature, &keys)?;
//! manifest.admissible(&Target::this_machine("stable"), 1_800_000_000, None, &[])?;
//! let entry = &manifest.binaries[0];
//! let binary = tarball::extract(entry, gz)?;
//! # Ok(()) }
//! ```
//!
//! Map: [`version`] (the only-upward version), [`manifest`] (its fields,
//! strictly parsed, and the rules a release must meet here), [`tarball`]
//! (a tarball read whole in memory: its hash and size, then exactly one
//! regular file), [`keys`] (the compiled-in public keys).

#![forbid(unsafe_code)]

pub mod keys;
pub mod manifest;
pub mod tarball;
pub mod version;

pub use keys::Keys;
pub use manifest::{Binary, Entry, Manifest, Target};
pub use version::Version;

/// Why a release is refused, in one sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReleaseError {
    /// This build carries no release key.
    NoKeys,
    /// A key (compiled in, or given) is not a minisign public key.
    BadKey(String),
    /// The signature does not verify with any trusted key.
    BadSignature(String),
    /// The manifest is not what a release's manifest is.
    Manifest(String),
    /// The release is not for this machine now.
    NotAdmissible(String),
    /// A tarball is not what its manifest entry says, or holds anything
    /// but its one binary.
    Tarball(String),
}

impl std::fmt::Display for ReleaseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReleaseError::NoKeys => f.write_str(
                "this build carries no release key (keys/release.pub was missing when it was built), so it cannot update",
            ),
            ReleaseError::BadKey(why) => write!(f, "a release key is unusable: {why}"),
            ReleaseError::BadSignature(why) => write!(f, "the manifest's signature does not verify: {why}"),
            ReleaseError::Manifest(why) => write!(f, "the manifest is malformed: {why}"),
            ReleaseError::NotAdmissible(why) => write!(f, "the release is refused: {why}"),
            ReleaseError::Tarball(why) => write!(f, "a tarball is refused: {why}"),
        }
    }
}

impl std::error::Error for ReleaseError {}

/// The SHA-256 of `bytes`, as lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}
