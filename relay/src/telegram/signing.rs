//! The relay's tap signatures: Ed25519 in the minisign format, over the
//! eight lines `docs/approvals.md` fixes, so that the Warden verifies them
//! with `minisign-verify` against the public key it pinned at pairing.
//!
//! The key is made at the first start and kept in the database (every
//! replica signs with the same one), or read from a minisign secret-key
//! file (unencrypted) the operator names with `AROMBA_APPROVAL_KEY_FILE`.

use sqlx::PgPool;
use std::path::Path;
use std::sync::Arc;

/// The row the database keeps the key in.
const KEY_NAME: &str = "approvals";

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("the approval key file {0} cannot be read: {1}")]
    File(String, std::io::Error),
    #[error("the approval key {0} is not an unencrypted minisign secret key")]
    Malformed(String),
    #[error("the approval key could not be kept in the database: {0}")]
    Database(#[from] sqlx::Error),
    #[error("a signature could not be made: {0}")]
    Sign(String),
    #[error("a tap's {0} holds a control character or a line separator, so it is not signed")]
    Unsignable(&'static str),
}

/// What a tap signature covers (`docs/approvals.md`, section 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Covered<'a> {
    /// The server id as the Warden writes it: 32 lowercase hex digits.
    pub server: uuid::Uuid,
    /// The action id the server put on the button ("" for a button with
    /// none: the Warden then refuses the tap, as it should).
    pub action: &'a str,
    pub text_sha256: &'a str,
    pub button: &'a str,
    pub label: &'a str,
    pub chat: i64,
    pub time: u64,
}

impl Covered<'_> {
    /// The exact bytes signed. The frames' checks keep line breaks out of
    /// every field already; refusing them here again means no path into the
    /// table can ever make a signature over lines a field added.
    pub fn message(&self) -> Result<Vec<u8>, KeyError> {
        for (name, field) in [
            ("action", self.action),
            ("text_sha256", self.text_sha256),
            ("button", self.button),
            ("label", self.label),
        ] {
            if field
                .chars()
                .any(aromba_relay_proto::frame::breaks_a_signed_line)
            {
                return Err(KeyError::Unsignable(name));
            }
        }
        Ok(format!(
            "aromba-approval-v2\nserver={}\naction={}\ntext_sha256={}\nbutton={}\nlabel={}\nchat={}\ntime={}\n",
            self.server.simple(),
            self.action,
            self.text_sha256,
            self.button,
            self.label,
            self.chat,
            self.time
        )
        .into_bytes())
    }
}

/// The signing key. `Debug` hides it.
#[derive(Clone)]
pub struct ApprovalKey(Arc<Inner>);

struct Inner {
    secret: minisign::SecretKey,
    public: minisign::PublicKey,
    public_base64: String,
}

impl std::fmt::Debug for ApprovalKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ApprovalKey(public {})", self.0.public_base64)
    }
}

impl ApprovalKey {
    /// A key from a minisign secret key's text (unencrypted).
    pub fn from_text(text: &str, name: &str) -> Result<ApprovalKey, KeyError> {
        let malformed = || KeyError::Malformed(name.to_string());
        let boxed = minisign::SecretKeyBox::from_string(text).map_err(|_| malformed())?;
        let secret = boxed
            .into_unencrypted_secret_key()
            .map_err(|_| malformed())?;
        let public = minisign::PublicKey::from_secret_key(&secret).map_err(|_| malformed())?;
        let public_base64 = public.to_base64();
        Ok(ApprovalKey(Arc::new(Inner {
            secret,
            public,
            public_base64,
        })))
    }

    /// The key in the file the operator named.
    pub fn from_file(path: &Path) -> Result<ApprovalKey, KeyError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| KeyError::File(name.clone(), e))?;
        ApprovalKey::from_text(&text, &name)
    }

    /// The database's key, made now if there is none yet. Two replicas
    /// starting at once agree: the first insert wins and both read it.
    pub async fn from_database(db: &PgPool) -> Result<ApprovalKey, KeyError> {
        let fresh = minisign::KeyPair::generate_unencrypted_keypair()
            .map_err(|e| KeyError::Sign(e.to_string()))?;
        let secret_text = fresh
            .sk
            .to_box(Some("aromba relay approvals"))
            .map_err(|e| KeyError::Sign(e.to_string()))?
            .to_string();
        let public_text = fresh.pk.to_base64();
        crate::store::relay_keys::insert_if_absent(db, KEY_NAME, &secret_text, &public_text)
            .await?;
        let kept = crate::store::relay_keys::secret_key(db, KEY_NAME).await?;
        ApprovalKey::from_text(&kept, "in the database")
    }

    /// The public key as the Warden pins it (minisign's base64 line).
    pub fn public_base64(&self) -> &str {
        &self.0.public_base64
    }

    /// The minisign signature's text over the anchor `(seq, hash)` the
    /// relay holds of `server`.
    pub fn sign_anchor(
        &self,
        server: uuid::Uuid,
        seq: u64,
        hash: &str,
    ) -> Result<String, KeyError> {
        let signature = minisign::sign(
            Some(&self.0.public),
            &self.0.secret,
            std::io::Cursor::new(anchor_message(server, seq, hash)?),
            Some(&format!("aromba anchor at line {seq}")),
            Some("signed by the aromba relay"),
        )
        .map_err(|e| KeyError::Sign(e.to_string()))?;
        Ok(signature.to_string())
    }

    /// The minisign signature's text over `covered`.
    pub fn sign(&self, covered: &Covered<'_>) -> Result<String, KeyError> {
        let signature = minisign::sign(
            Some(&self.0.public),
            &self.0.secret,
            std::io::Cursor::new(covered.message()?),
            Some(&format!("aromba tap at {}", covered.time)),
            Some("signed by the aromba relay"),
        )
        .map_err(|e| KeyError::Sign(e.to_string()))?;
        Ok(signature.to_string())
    }
}

/// The bytes signed for a journal anchor (`docs/approvals.md`, "The
/// anchor"): the Warden takes only a signed anchor as evidence that its
/// journal was cut or rewritten.
pub fn anchor_message(server: uuid::Uuid, seq: u64, hash: &str) -> Result<Vec<u8>, KeyError> {
    if hash
        .chars()
        .any(aromba_relay_proto::frame::breaks_a_signed_line)
    {
        return Err(KeyError::Unsignable("hash"));
    }
    Ok(format!(
        "aromba-anchor-v1\nserver={}\nseq={seq}\nhash={hash}\n",
        server.simple()
    )
    .into_bytes())
}

/// The SHA-256 of a message text, as it is signed: lowercase hex.
pub fn text_sha256(text: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes()).into()
}

/// 32 bytes as 64 lowercase hex digits.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn covered(label: &str) -> Covered<'_> {
        Covered {
            server: uuid::Uuid::nil(),
            action: "0123456789abcdef0123456789abcdef",
            text_sha256: "ab",
            button: "approve",
            label,
            chat: 42,
            time: 1_700_000_000,
        }
    }

    fn key() -> ApprovalKey {
        let pair = minisign::KeyPair::generate_unencrypted_keypair().expect("a key pair");
        let text = pair.sk.to_box(None).expect("a key box").to_string();
        ApprovalKey::from_text(&text, "test").expect("the key reads back")
    }

    #[test]
    fn a_label_with_a_control_character_is_never_signed() {
        let key = key();
        assert!(key.sign(&covered("Approve")).is_ok());
        for label in [
            "Approve\nchat=1",
            "Approve\rtime=2",
            "Approve\t",
            "Approve\u{0}",
            "Approve\u{85}",
            "Approve\u{2028}chat=1",
            "Approve\u{2029}",
        ] {
            let refused = key.sign(&covered(label));
            assert!(
                matches!(refused, Err(KeyError::Unsignable("label"))),
                "{label:?}: {refused:?}"
            );
        }
        let text = KeyError::Unsignable("label").to_string();
        assert!(text.contains("label"), "{text}");
    }

    #[test]
    fn a_button_or_action_with_a_line_break_is_never_signed() {
        let key = key();
        let mut tap = covered("Approve");
        tap.button = "approve\nlabel=Approve";
        assert!(matches!(
            key.sign(&tap),
            Err(KeyError::Unsignable("button"))
        ));
        let mut tap = covered("Approve");
        tap.action = "0123\r";
        assert!(matches!(
            key.sign(&tap),
            Err(KeyError::Unsignable("action"))
        ));
    }
}
