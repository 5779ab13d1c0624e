//! The Worker against a hostile relay, over the real protocol: a relay
//! played by the test (`hostile_relay`) that never acknowledges, delivers
//! without end, and floods commands that reach the Warden. A real Warden
//! on real sockets, `aromba pair` and `aromba run` as shipped.

mod hostile_relay;
mod support;

use aromba_proto::frame::{Body, Delivery};
use hostile_relay::{PlayedRelay, Script, daemon, honest_script, paired_with, warden};

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
        .wait_count(FLOOD * 9 / 10, 60, |b| {
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
        again <= aromba_proto::unacked::MAX_UNACKED,
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
        for command in ["/trust", "/chores", "/prodmode", "/run apt-clean"] {
            flood.push(command.to_string());
        }
    }
    let total = flood.len();
    let _daemon = connected(&relay, &warden).await;
    feed(&relay, flood).await;
    let acked = relay
        .wait_count(total * 9 / 10, 60, |b| {
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
        .wait_count(900, 60, |b| matches!(b, Body::AckDelivery { .. }))
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
