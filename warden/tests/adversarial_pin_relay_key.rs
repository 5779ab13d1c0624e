//! `pin_relay_key` decides whose taps approve red actions, so only root
//! may call it, and only with one minisign public key: a compromised
//! Worker asking on its own socket, or anything odd from root's terminal
//! (a second line, a whole `.pub` file, a huge string), pins nothing.

use aromba_testkit::warden as support;

use aromba_warden_proto::{Request, Response};
use support::{TEST_PUB, Warden};

/// A well-formed minisign public key that is not the relay's.
const OTHER_KEY: &str = "RWQHBwcHBwcHBwABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhscHR4f";

fn pinned(w: &Warden) -> String {
    std::fs::read_to_string(w.layout().state_dir.join("relay-approvals.pub")).expect("a pinned key")
}

#[test]
fn pin_relay_key_from_the_worker_socket_is_refused() {
    let w = Warden::start("adv-pinkey-worker", true, &[]);
    let before = pinned(&w);
    let answer = w.ask(&Request::PinRelayKey {
        key: OTHER_KEY.into(),
    });
    assert!(
        matches!(answer, Response::Refused { .. } | Response::Error { .. }),
        "the Worker may not pin a key: {answer:?}"
    );
    assert_eq!(pinned(&w), before);
    assert!(
        !w.journal().contains("relay-key-pinned"),
        "nothing was even attempted"
    );
}

#[test]
fn an_odd_relay_key_from_root_is_refused_and_pins_nothing() {
    let w = Warden::start("adv-pinkey-odd", true, &[]);
    let before = pinned(&w);
    let odd = [
        String::new(),
        "RWQ=".to_string(),
        "A".repeat(10_000),
        format!("{OTHER_KEY}\n{}", TEST_PUB.trim()),
        format!("untrusted comment: minisign public key\n{OTHER_KEY}"),
        format!("{OTHER_KEY}\u{1b}[2J"),
        // The key id and the key, but another algorithm than Ed25519.
        "RWXHBwcHBwcHBwABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhscHR4f".to_string(),
    ];
    for key in odd {
        let answer = w.control(&Request::PinRelayKey { key: key.clone() });
        assert!(
            matches!(answer, Response::Refused { .. } | Response::Error { .. }),
            "{:?} was taken: {answer:?}",
            key.get(..80).unwrap_or(&key)
        );
        assert_eq!(pinned(&w), before, "{:?}", key.get(..80).unwrap_or(&key));
    }
    // The one shape it takes, with the spaces a terminal adds.
    let answer = w.control(&Request::PinRelayKey {
        key: format!(" {OTHER_KEY}\n"),
    });
    assert!(matches!(answer, Response::Noted { .. }), "{answer:?}");
    assert_eq!(pinned(&w), format!("{OTHER_KEY}\n"));
}
