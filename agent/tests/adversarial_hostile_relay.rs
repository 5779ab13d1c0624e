//! The Worker against a hostile relay, over the real protocol. The
//! attacker: the relay, played by the test (`hostile_relay`), which never
//! acknowledges, delivers without end (`/help`, commands that ask the
//! Warden, `/panic`, `secret` and `paired` deliveries), repeats a true
//! `anchor` frame, or hangs after its welcome. What it tries: to grow the
//! Worker's memory and its resend, to make it answer one for one, to flood
//! the Warden's pacing through it so that the ladder climbs for the
//! Worker, or to hold it on a dead connection, `/panic` included. What
//! holds: the Worker answers at a pace whatever the delivery, keeps a
//! bounded set for the relay to acknowledge, carries out a flood of
//! `/panic` once, leaves the ladder at Normal, and dials again after a few
//! of the relay's ping intervals of silence ("every wait has a deadline").
//! A real Warden on real sockets, `aromba pair` and `aromba run` as
//! shipped. Each test's doc says what the attack did when it was found.

use aromba_testkit::hostile_relay;
use aromba_testkit::worker as support;

use aromba_relay_proto::frame::{Body, Delivery};
use hostile_relay::{
    PING_SECS, PlayedRelay, Script, daemon, honest_script, paired_with, pinned, run_pair,
    sent_texts, status, up, warden,
};
use std::time::Duration;

/// How long a flood may take to be worked through: a bound on a wait, not
/// a measure (the suite runs another test binary beside this one).
const BOUND_S: u64 = 240;

fn message(text: &str) -> Delivery {
    Delivery::Message { text: text.into() }
}

/// Starts the daemon and waits for its connection (the pairing made one
/// before it).
async fn connected(relay: &PlayedRelay, warden: &support::TestWarden) -> support::Running {
    let before = relay.connections();
    let running = daemon(warden);
    for _ in 0..300 {
        if relay.connections() > before {
            return running;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the daemon never connected");
}

/// Delivers `texts` as fast as the Worker takes them: in batches, so that
/// its queue (which does not acknowledge what does not fit) takes each.
async fn feed(relay: &PlayedRelay, texts: impl IntoIterator<Item = String>) {
    let texts: Vec<String> = texts.into_iter().collect();
    for batch in texts.chunks(25) {
        for text in batch {
            relay.deliver(message(text));
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

fn is_help(b: &Body) -> bool {
    matches!(b, Body::Send { text, .. } if text.starts_with("What I can do"))
}

/// Found by the review: 60,000 deliveries of `/help` from a relay that
/// never acknowledges took the Worker from 17 to 72 MiB, and one reconnect
/// sent 19,985 messages again at once. The Worker now answers at a pace
/// whatever is asked, and keeps a bounded set for the relay to acknowledge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_that_never_acknowledges_a_flood_of_help_gets_paced_answers_and_a_bounded_resend() {
    let _one = hostile_relay::alone().await;
    let warden = warden("adv-hostile-help");
    let relay = PlayedRelay::start(honest_script()).await;
    paired_with(&warden, &relay).await;
    const FLOOD: usize = 3_000;
    relay.turn(Script {
        withhold_acks: true,
        ..honest_script()
    });
    let _daemon = connected(&relay, &warden).await;
    let first_line = relay.connections();
    feed(&relay, (0..FLOOD).map(|_| "/help".to_string())).await;
    // The Worker takes the flood: it acknowledges what it handled.
    let acked = relay
        .wait_count(FLOOD * 9 / 10, BOUND_S, |b| {
            matches!(b, Body::AckDelivery { .. })
        })
        .await;
    assert!(
        acked >= FLOOD * 9 / 10,
        "the Worker took {acked} deliveries"
    );
    let first: Vec<Body> = relay
        .seen_with_connection()
        .into_iter()
        .filter(|(c, _)| *c == first_line)
        .map(|(_, b)| b)
        .collect();
    let answered = first.iter().filter(|b| is_help(b)).count();
    // A burst, and one more every few seconds while the flood lasted.
    assert!(
        answered <= 40,
        "{answered} answers to {acked} deliveries of /help"
    );
    assert!(
        first
            .iter()
            .any(|b| matches!(b, Body::Send { text, .. } if text.starts_with("Too many messages at once"))),
        "the chat is told that messages were skipped"
    );
    // Dropped and dialed again: what is sent again is bounded.
    relay.cut();
    for _ in 0..300 {
        if relay.connections() > first_line {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(relay.connections() > first_line, "the Worker dialed again");
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let again = relay
        .seen_with_connection()
        .into_iter()
        .filter(|(c, b)| *c == first_line + 1 && matches!(b, Body::Send { .. }))
        .count();
    assert!(
        again <= aromba_relay_proto::unacked::MAX_UNACKED,
        "{again} messages sent again at once"
    );
    assert!(again > 0, "what was not acknowledged is sent again");
}

/// Found by the review: `/trust`, `/chores` and `/prodmode` asked the
/// Warden outside the read budget, so a relay delivering them without end
/// flooded the Warden's count and moved the ladder for the Worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_flooding_commands_that_ask_the_warden_does_not_move_the_ladder() {
    let _one = hostile_relay::alone().await;
    let warden = warden("adv-hostile-ladder");
    let relay = PlayedRelay::start(honest_script()).await;
    paired_with(&warden, &relay).await;
    let mut flood = Vec::new();
    for _ in 0..100 {
        for command in [
            "/trust",
            "/chores",
            "/skills",
            "/prodmode",
            "/run apt-clean",
        ] {
            flood.push(command.to_string());
        }
    }
    let total = flood.len();
    let _daemon = connected(&relay, &warden).await;
    feed(&relay, flood).await;
    let acked = relay
        .wait_count(total * 9 / 10, BOUND_S, |b| {
            matches!(b, Body::AckDelivery { .. })
        })
        .await;
    assert!(
        acked >= total * 9 / 10,
        "the Worker took {acked} deliveries"
    );
    // What the Worker was still asking the Warden has had time to land.
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    let status = support::text(&warden.aromba_as("root", &["status"]).stdout);
    assert!(
        status.contains("ladder: normal "),
        "the relay's flood moved the ladder:\n{status}"
    );
}

/// `/panic` sent without end is one panic: the Warden is asked a few
/// times, and the chat gets a few answers, not one per delivery.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_panic_is_carried_out_once_and_answered_at_a_pace() {
    let _one = hostile_relay::alone().await;
    let warden = warden("adv-hostile-panic");
    let relay = PlayedRelay::start(honest_script()).await;
    paired_with(&warden, &relay).await;
    let _daemon = connected(&relay, &warden).await;
    feed(&relay, (0..1_000).map(|_| "/panic".to_string())).await;
    relay
        .wait_for(
            "the answer to /panic",
            |b| matches!(b, Body::Send { text, .. } if text.starts_with("You stopped Aromba.")),
        )
        .await;
    relay
        .wait_count(900, BOUND_S, |b| matches!(b, Body::AckDelivery { .. }))
        .await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let answers = relay
        .seen()
        .iter()
        .filter(|b| matches!(b, Body::Send { text, .. } if text.starts_with("You stopped Aromba.")))
        .count();
    assert!(answers <= 25, "{answers} answers to one flood of /panic");
    let status = support::text(&warden.aromba_as("root", &["status"]).stdout);
    assert!(status.contains("ladder: cut"), "{status}");
}

fn acks(relay: &PlayedRelay) -> usize {
    relay
        .seen()
        .iter()
        .filter(|b| matches!(b, Body::AckDelivery { .. }))
        .count()
}

/// Delivers `n` copies of `delivery` in batches the Worker's queue takes,
/// and waits for most of them to be acknowledged.
async fn flood(relay: &PlayedRelay, delivery: Delivery, n: usize) -> usize {
    let before = acks(relay);
    for batch in 0..n.div_ceil(25) {
        for _ in 0..25.min(n - batch * 25) {
            relay.deliver(delivery.clone());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for _ in 0..600 {
        if acks(relay) - before >= n * 9 / 10 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    acks(relay) - before
}

/// A relay delivering `paired` without end: "This chat is paired with the
/// server …" for each, outside the chat's pace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_flooding_paired_deliveries_gets_paced_answers() {
    let _one = hostile_relay::alone().await;
    let (_w, relay, _d) = up("r29-paired-flood").await;
    let before = sent_texts(&relay).len();
    let took = flood(
        &relay,
        Delivery::Paired {
            approval_key: hostile_relay::HOSTILE_KEY.into(),
            bot_id: aromba_testkit::telegram::BOT_ID,
            confirm: "pair_HOSTILE".into(),
        },
        2_000,
    )
    .await;
    let answers = sent_texts(&relay).len() - before;
    assert!(
        answers <= 40,
        "{answers} messages sent for {took} paired deliveries"
    );
}

/// A relay sending `anchor` frames without end — each the journal head
/// the Worker itself sent it, so true — makes the Worker ask the Warden
/// for each (`check_anchor`), outside the read budget; the Warden counts
/// every request toward its flood threshold and moves the ladder for the
/// Worker. (A wrong anchor signed with the pinned relay key moves it to
/// Cut at once, by design: the relay may always pull the ladder up, as
/// `/panic` does; an unsigned one, as these are, is no evidence.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_repeating_a_true_anchor_does_not_move_the_ladder() {
    let _one = hostile_relay::alone().await;
    let (warden, relay, _d) = up("r29-anchor-flood").await;
    assert!(
        status(&warden).contains("ladder: normal "),
        "{}",
        status(&warden)
    );
    let mut head = None;
    for _ in 0..600 {
        head = relay.seen().into_iter().rev().find_map(|b| match b {
            Body::JournalHead { seq, hash } => Some((seq, hash)),
            _ => None,
        });
        if head.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (seq, hash) = head.expect("the Worker sent its journal head");
    let before = sent_texts(&relay).len();
    for _ in 0..80u64 {
        for _ in 0..25u64 {
            relay.send_frame(Body::Anchor {
                seq,
                hash: hash.clone(),
                signature: None,
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(8)).await;
    let answers = sent_texts(&relay).len() - before;
    let status = status(&warden);
    assert!(
        status.contains("ladder: normal "),
        "2,000 true anchors from the relay moved the ladder ({answers} messages sent):\n{status}"
    );
    assert!(answers <= 40, "{answers} messages sent for 2,000 anchors");
}

/// A relay that hangs after its welcome — never reads, never writes, the
/// socket open (a relay process stuck, or a link gone half-open: loopback
/// never times it out) — is dialed again after a few of its ping
/// intervals. The Worker reads `ping_secs` from the welcome and keeps it,
/// but its loop waits on the socket with no deadline: the chat, `/panic`
/// included, is gone until TCP gives up (never, here; hours on a real
/// network with keepalive off). ATTACKS.md: "every wait has a deadline".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_that_hangs_after_its_welcome_is_dialed_again() {
    let _one = hostile_relay::alone().await;
    let warden = warden("r29-hung");
    let relay = PlayedRelay::start(honest_script()).await;
    let (ok, printed) = run_pair(&warden, Some(&relay.url())).await;
    assert!(ok, "aromba pair: {}", String::from_utf8_lossy(&printed));
    relay.mute_next();
    let before = relay.connections();
    let _d = daemon(&warden);
    for _ in 0..300 {
        if relay.connections() > before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(relay.connections() > before, "the daemon never connected");
    let hung = relay.connections();
    // Four ping intervals and the Worker's backoff.
    for _ in 0..(4 * PING_SECS as usize + 30) * 10 {
        if relay.connections() > hung {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        relay.connections() > hung,
        "the Worker is still on a connection that has said nothing for {} s (ping every {PING_SECS} s)",
        4 * PING_SECS + 30
    );
}

/// A relay runs the pairing's flow, so it can withhold the person's
/// confirmation in the app. Found by review: `aromba pair` pinned the
/// relay's tap key before the confirmation, so a relay that withheld it
/// left a server bound to nobody whose every action its own taps approved.
/// Now `aromba pair` fails, saying so, and nothing is saved on the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_that_withholds_the_confirmation_leaves_no_tap_key_on_the_server() {
    let _one = hostile_relay::alone().await;
    let warden = warden("adv-hostile-no-confirm");
    let relay = PlayedRelay::start(Script {
        withhold_confirmation: true,
        ..honest_script()
    })
    .await;
    let (ok, printed) = run_pair(&warden, Some(&relay.url())).await;
    let printed = String::from_utf8_lossy(&printed);
    assert!(!ok, "{printed}");
    assert!(
        printed.contains("the confirmation in the app did not arrive")
            && printed.contains("nothing was saved on this server"),
        "{printed}"
    );
    assert_eq!(pinned(&warden), None, "no relay tap key is pinned");
    let relay_toml =
        std::fs::read_to_string(warden.root.join("worker/relay.toml")).unwrap_or_default();
    assert!(!relay_toml.contains("approval_key"), "{relay_toml}");
    assert!(
        status(&warden).contains("approvals in the app: not paired yet"),
        "{}",
        status(&warden)
    );
}
