//! Journal anchors as the relay signs them (`docs/approvals.md`, "The
//! anchor"), with the test key pair in `keys/test/`.

use aromba_warden::approvals::{anchor_message, relay_key_file, server_id};
use aromba_warden::layout::Layout;
use aromba_warden_proto::Request;

pub const ANCHOR_TEST_PUB: &str = include_str!("../../../keys/test/relay-approvals.pub");
pub const ANCHOR_TEST_KEY: &str = include_str!("../../../keys/test/relay-approvals.key");

/// Pins the test relay key, as pairing would.
pub fn pin_test_relay_key(layout: &Layout) {
    std::fs::create_dir_all(&layout.state_dir).unwrap();
    std::fs::write(relay_key_file(layout), ANCHOR_TEST_PUB).unwrap();
}

/// The signature `key` makes over the anchor `(seq, hash)` of `server`.
pub fn anchor_signature(server: &str, seq: u64, hash: &str, key: &str) -> String {
    let sk = minisign::SecretKeyBox::from_string(key)
        .unwrap()
        .into_unencrypted_secret_key()
        .unwrap();
    minisign::sign(
        None,
        &sk,
        std::io::Cursor::new(anchor_message(server, seq, hash)),
        None,
        None,
    )
    .unwrap()
    .into_string()
}

/// `check_anchor` for `(seq, hash)` with the test relay's signature over
/// it for the Warden of `layout`.
pub fn relay_anchor(layout: &Layout, seq: u64, hash: &str) -> Request {
    let server = server_id(layout).unwrap();
    Request::CheckAnchor {
        seq,
        hash: hash.into(),
        signature: Some(anchor_signature(&server, seq, hash, ANCHOR_TEST_KEY)),
    }
}
