//! Attacks on `aromba pair` and `aromba run` as a hostile relay or a
//! hostile Worker would make them: a real Warden on real sockets, the
//! binaries as shipped, and a relay played by this test with the real
//! protocol (`aromba_relay_proto::session`), saying what an attacker would.

use aromba_testkit::hostile_relay;
use aromba_testkit::worker as support;

use aromba_relay_proto::frame::{Body, Delivery, TapProof};
use aromba_relay_proto::session::now_ms;
use hostile_relay::{
    HONEST_KEY, HOSTILE_KEY, PlayedRelay, Script, daemon, honest_script, paired_with, pinned,
    run_pair, sent_texts, warden,
};
use std::io::Write;
use std::time::Duration;
use support::{TestWarden, account};

/// Replaces the `relay = ...` line of the Worker's `relay.toml` as the
/// Worker can (the file is its own): written in place, so its owner and
/// mode stay.
fn worker_points_relay_toml_at(warden: &TestWarden, relay: &str) {
    let path = warden.root.join("worker/relay.toml");
    let text = std::fs::read_to_string(&path).expect("relay.toml");
    let rewritten: String = text
        .lines()
        .map(|l| {
            if l.starts_with("relay =") {
                format!("relay = \"{relay}\"\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    assert_ne!(text, rewritten, "relay.toml has a relay line");
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&path)
        .and_then(|mut f| f.write_all(rewritten.as_bytes()))
        .expect("the Worker writes its own relay.toml");
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(&path).expect("relay.toml");
    assert_eq!(meta.uid(), account("aromba").uid, "still the Worker's");
}

/// The Worker owns `relay.toml`, so it may write anything there; root's
/// `aromba pair`, run again on the paired server, must not take the relay
/// to talk to (and whose tap key to pin) from it: a relay of the Worker's
/// own on a loopback port would hand over a key whose taps the Worker
/// signs itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_pointing_relay_toml_at_its_own_relay_gets_no_key_pinned_by_pair() {
    let warden = warden("adv-repoint");
    let honest = PlayedRelay::start(honest_script()).await;
    paired_with(&warden, &honest).await;
    // Paired already when asked again, as the real relay says.
    honest.turn(Script {
        key: None,
        ..honest_script()
    });
    let hostile = PlayedRelay::start(Script {
        key: Some(HOSTILE_KEY.into()),
        ..honest_script()
    })
    .await;
    worker_points_relay_toml_at(&warden, &hostile.url());
    let (_, printed) = run_pair(&warden, None).await;
    assert_eq!(
        pinned(&warden).as_deref(),
        Some(HONEST_KEY),
        "the Warden still holds the honest relay's key; pair said: {}",
        String::from_utf8_lossy(&printed)
    );
    assert!(
        !hostile
            .seen()
            .iter()
            .any(|b| matches!(b, Body::PairingRequest {})),
        "root's pair never asked the Worker's relay for anything"
    );
    let network =
        std::fs::read_to_string(warden.root.join("worker/network.toml")).expect("network.toml");
    assert!(
        !network.contains(&hostile.addr.to_string()),
        "network.toml lists no relay of the Worker's choosing:\n{network}"
    );
}

/// A relay's pairing code and link go to root's terminal: one carrying
/// escape sequences (retitle the window, clear the screen, or worse) is
/// refused and nothing of it is printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pairing_code_with_terminal_escapes_never_reaches_roots_terminal() {
    let warden = warden("adv-escapes");
    let hostile = PlayedRelay::start(Script {
        code: "ABC\u{1b}[2J346".into(),
        link: "https://t.me/x?start=\u{1b}]0;owned\u{7}".into(),
        key: Some(HOSTILE_KEY.into()),
        deliveries: vec![],
        ..Script::default()
    })
    .await;
    let (ok, printed) = run_pair(&warden, Some(&hostile.url())).await;
    assert!(!ok, "pair refuses such a code");
    assert!(
        !printed.contains(&0x1b) && !printed.contains(&0x07),
        "no escape byte printed: {:?}",
        String::from_utf8_lossy(&printed)
    );
    assert_eq!(pinned(&warden), None, "no key pinned from that relay");
}

/// A relay (or whoever holds its connection) delivers `Paired` with a key
/// of its own to the running daemon: the key is pinned only by root's
/// `aromba pair`, so it never reaches the Warden.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paired_delivery_with_another_key_to_the_daemon_never_reaches_the_warden() {
    let _one = hostile_relay::alone().await;
    let warden = warden("adv-paired");
    let honest = PlayedRelay::start(honest_script()).await;
    paired_with(&warden, &honest).await;
    let pins_before = warden.journal().matches("relay-key-pinned").count();
    // The same relay, turned: the daemon's connection gets a new key.
    honest.turn(Script {
        deliveries: vec![
            Delivery::Paired {
                approval_key: HOSTILE_KEY.into(),
                bot_id: aromba_testkit::telegram::BOT_ID,
                confirm: "pair_HOSTILE".into(),
            },
            Delivery::Message {
                text: "/trust".into(),
            },
        ],
        ..honest_script()
    });
    let turned = honest;
    let _daemon = daemon(&warden);
    turned
        .wait_for(
            "the answer to /trust",
            |b| matches!(b, Body::Send { text, .. } if text.contains("\nLadder:")),
        )
        .await;
    assert!(
        sent_texts(&turned)
            .iter()
            .any(|t| t.starts_with("This chat is paired")),
        "the daemon took the Paired delivery as news only"
    );
    assert_eq!(pinned(&warden).as_deref(), Some(HONEST_KEY));
    assert_eq!(
        warden.journal().matches("relay-key-pinned").count(),
        pins_before,
        "no pinning of the other key was even tried"
    );
}

/// A tap the relay forged (a made-up action, a signature of nothing) is
/// passed to the Warden, which refuses it; the chat says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_tap_from_the_relay_is_refused_by_the_warden() {
    let _one = hostile_relay::alone().await;
    let warden = warden("adv-tap");
    let honest = PlayedRelay::start(honest_script()).await;
    paired_with(&warden, &honest).await;
    honest.turn(Script {
        deliveries: vec![Delivery::Tap {
            message: uuid::Uuid::new_v4(),
            button: "run".into(),
            proof: TapProof {
                action: Some("0123456789abcdef0123456789abcdef".into()),
                label: "Run it".into(),
                chat: 5_550_001,
                time: (now_ms() / 1000) as u64,
                text_sha256: "0".repeat(64),
                signature: "untrusted comment: x\nRWQ=\ntrusted comment: x\nAAAA\n".into(),
            },
        }],
        ..honest_script()
    });
    let forged = honest;
    let _daemon = daemon(&warden);
    let reply = forged
        .wait_for(
            "the answer to the tap",
            // The first scan's message may come first.
            |b| matches!(b, Body::Send { text, .. } if !text.starts_with("I had a first look")),
        )
        .await;
    let Body::Send { text, .. } = reply else {
        unreachable!()
    };
    assert!(text.starts_with("The Warden refused"), "{text}");
}

/// The Warden counts every read toward "too many commands in ten minutes"
/// and climbs the ladder past its threshold. The Worker's own health
/// numbers and a person asking for them a few times must stay under it:
/// otherwise an ordinary chat (or the idle daemon, given a few minutes)
/// slows the Warden down, and each further window climbs another step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_asking_for_the_status_repeatedly_does_not_move_the_ladder() {
    let _one = hostile_relay::alone().await;
    let warden = warden("adv-status-flood");
    let relay = PlayedRelay::start(honest_script()).await;
    paired_with(&warden, &relay).await;
    const ASKS: usize = 8;
    relay.turn(Script {
        deliveries: (0..ASKS)
            .map(|_| Delivery::Message {
                text: "/status".into(),
            })
            .collect(),
        ..honest_script()
    });
    let _daemon = daemon(&warden);
    for _ in 0..1200 {
        let answered = sent_texts(&relay)
            .iter()
            .filter(|t| t.starts_with("Server status:") || t.starts_with("I have asked"))
            .count();
        if answered >= ASKS {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let status = support::text(&warden.aromba_as("root", &["status"]).stdout);
    assert!(
        status.contains("ladder: normal "),
        "the chat's own questions moved the ladder:\n{status}\nthe chat saw: {:#?}",
        sent_texts(&relay)
    );
}
