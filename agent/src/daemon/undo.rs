//! Undo in the chat: a red run's receipt names its undo id (for 7 days);
//! the Worker sends the receipt with an "Undo" button and remembers which
//! message offered which id. A tap on it asks the Warden for a proposal to
//! undo that run, whose own text and buttons go to the chat; the run is
//! undone only on a tap on "Approve" that the Warden verifies.

use super::Daemon;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use uuid::Uuid;

/// An undo id is offered as long as the Warden keeps it.
const OFFERED_FOR_S: i64 = 7 * 86_400;
/// Offers remembered at most (the oldest go first).
const MAX_OFFERS: usize = 256;
/// The Undo button's id on a receipt.
pub const BUTTON: &str = "undo";

/// The undo id a receipt names: `undo id <32 hex>`, as the Warden writes
/// it.
pub fn undo_id(receipt: &str) -> Option<&str> {
    let at = receipt.find("undo id ")? + "undo id ".len();
    let id = receipt.get(at..at + 32)?;
    id.bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        .then_some(id)
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Offers(BTreeMap<Uuid, (String, i64)>);

const OFFERS: &str = "undo-offers.json";

fn now_s() -> i64 {
    jiff::Timestamp::now().as_second()
}

fn load(daemon: &Daemon) -> Offers {
    let mut offers: Offers = super::kept::load(daemon, OFFERS);
    let now = now_s();
    offers.0.retain(|_, (_, at)| now - *at < OFFERED_FOR_S);
    offers
}

fn save(daemon: &Daemon, offers: &Offers) {
    if let Err(e) = super::kept::save(daemon, OFFERS, offers) {
        tracing::warn!(error = %e, "an undo offer was not kept");
    }
}

/// A receipt in the chat's words ([`aromba_words::receipt`]): a verdict first
/// ("Done." or "It did not go well."), then what the chore did.
pub fn receipt_text(ok: bool, receipt: &str) -> String {
    // The receipt names the chore: the verdict comes first, alone.
    aromba_words::receipt::plain(aromba_words::chores::receipt_verdict(ok), receipt)
}

/// Sends a receipt; one that names an undo id goes with an Undo button.
pub async fn say_receipt(daemon: &Daemon, text: String, receipt: &str) {
    match undo_id(receipt) {
        None => {
            daemon.say(text, vec![]).await;
        }
        Some(id) => {
            let id = id.to_string();
            let message = daemon
                .say(
                    text,
                    vec![aromba_relay_proto::frame::Button::new(
                        BUTTON,
                        aromba_words::approvals::UNDO,
                    )],
                )
                .await;
            let mut offers = load(daemon);
            offers.0.insert(message, (id, now_s()));
            while offers.0.len() > MAX_OFFERS {
                let oldest = offers
                    .0
                    .iter()
                    .min_by_key(|(_, (_, at))| *at)
                    .map(|(m, _)| *m);
                match oldest {
                    Some(m) => offers.0.remove(&m),
                    None => break,
                };
            }
            save(daemon, &offers);
        }
    }
}

/// Forgets the offer on `message`: its run was undone.
pub fn withdraw(daemon: &Daemon, message: Uuid) {
    let mut offers = load(daemon);
    if offers.0.remove(&message).is_some() {
        save(daemon, &offers);
    }
}

/// The runs that can still be undone, newest first: the receipt's
/// message, the undo id, and until when (Unix seconds).
pub fn live(daemon: &Daemon) -> Vec<(Uuid, String, i64)> {
    let mut offers: Vec<_> = load(daemon)
        .0
        .into_iter()
        .map(|(m, (id, at))| (m, id, at + OFFERED_FOR_S))
        .collect();
    offers.sort_by_key(|(_, _, until)| std::cmp::Reverse(*until));
    offers
}

/// An Undo proposed this recently and not answered is not proposed again:
/// a second tap on Undo, or the Trust page's link followed twice, points
/// to the one in the chat. Past it, the person asking again gets a fresh
/// proposal (the first may have scrolled away).
const PROPOSED_AGAIN_AFTER_S: i64 = 600;

/// What became of asking to undo a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proposed {
    /// The Warden's proposal is in the chat now.
    Now,
    /// One is in the chat already, not answered: nothing new.
    Already,
    /// The Warden did not propose it (the chat was told why).
    Not,
}

/// Asks the Warden to propose undoing `undo_id`, offered on the receipt
/// `message`; its proposal goes to the chat, to be approved there.
pub async fn propose(daemon: &Daemon, message: Uuid, undo_id: String) -> Proposed {
    if super::shown::undo_open(daemon, message, PROPOSED_AGAIN_AFTER_S) {
        return Proposed::Already;
    }
    let proposal = super::schedule::propose(
        daemon,
        &aromba_warden_proto::Request::ProposeUndo { undo_id },
        aromba_words::chores::THE_UNDO,
    )
    .await;
    match proposal {
        Some(proposal) => {
            super::shown::update(daemon, proposal, |s| s.undo_of = Some(message));
            Proposed::Now
        }
        None => Proposed::Not,
    }
}

/// The undo id the Undo button on `message` offered, if still offered.
pub fn offered(daemon: &Daemon, message: Uuid) -> Option<String> {
    load(daemon).0.get(&message).map(|(id, _)| id.clone())
}

#[cfg(test)]
mod tests {
    use super::undo_id;

    #[test]
    fn reads_the_undo_id_the_warden_writes_on_a_receipt() {
        let r = "real run: exit 0, 1 file changed, 5 bytes; changed: 1 removed; undo id 0123456789abcdef0123456789abcdef (for 7 days)";
        assert_eq!(undo_id(r), Some("0123456789abcdef0123456789abcdef"));
        assert_eq!(undo_id("real run: exit 0"), None);
        assert_eq!(undo_id("undo id 0123"), None);
        assert_eq!(undo_id("undo id 0123456789ABCDEF0123456789abcdef"), None);
    }
}
