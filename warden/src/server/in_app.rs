//! Approvals in the Mini App, and the Telegram account they are checked
//! against.
//!
//! An action whose route is the app (`approvals::route`) is approved only
//! by launch data Telegram signed when the person opened the app from the
//! proposal's button: the Worker passes it on untouched and the Warden
//! checks Telegram's signature with the key in use, the bot and the user
//! pinned at pairing, the freshness, and that the `start_param` names the
//! action and the Warden's own text for it; then it spends the action and
//! carries it out as it would a relay-signed tap (`owner::carry_out`). The
//! relay, which can sign taps, cannot make this signature.
//!
//! The account is pinned by root's `aromba pair`, from the launch Telegram
//! signed when the person opened the app with the pairing's `start_param`.

#![forbid(unsafe_code)]

use super::chores::RunSource;
use super::event::{AppTap, Event, Outcome, Peer};
use super::intent::intend;
use super::owner::carry_out;
use super::{Shared, journal, raise};
use crate::approvals::{self, InApp, TapRefusal};
use crate::journal::sha256_hex;
use crate::ladder::Step;
use crate::signal::Signal;
use crate::system::PeerCred;
use crate::telegram::{self, LaunchRefusal};
use aromba_warden_proto::Response;

/// The `start_param` launch data claims, unverified: for pacing only (a
/// "Was that you?" answer is not held back a minute). Nothing is decided
/// on it.
pub(super) fn claimed_action_id(launch: &str) -> Option<&str> {
    let param = launch
        .split('&')
        .find_map(|f| f.strip_prefix("start_param="))?;
    telegram::parse_action_param(param).map(|p| p.action_id)
}

/// The person approved in the Mini App: `launch` as Telegram made it, and
/// for an action that needs the PIN, the PIN the page sealed for it.
pub(super) fn approve_in_app(
    shared: &Shared,
    peer: &PeerCred,
    launch: &str,
    sealed_pin: Option<&str>,
) -> Response {
    let layout = &shared.options.layout;
    let now = shared.options.clock.now();
    let launch_sha256 = sha256_hex(launch.as_bytes());
    let refused_early = |why: &str, signal: bool| {
        let seq = journal(
            shared,
            Event::AppApprovalRefused {
                peer: Peer::worker(peer),
                launch_sha256: &launch_sha256,
                reason: why,
            },
        );
        if signal {
            // Launch data the paired person could not have sent is an
            // action without an approval.
            raise(
                shared,
                Some(peer),
                Signal::RedActionWithoutApproval {
                    action: "an approval in the app".into(),
                },
            );
        }
        Response::Refused {
            reason: why.to_string(),
            journal_seq: seq,
        }
    };
    let verified = match telegram::verify_paired(layout, launch, now) {
        Ok(v) => v,
        // The person reopened an old app: said, and no anomaly.
        Err(LaunchRefusal::Stale(why)) => return refused_early(&why, false),
        Err(LaunchRefusal::Invalid(why)) => return refused_early(&why, true),
    };
    let Some(param) = verified
        .start_param
        .as_deref()
        .and_then(telegram::parse_action_param)
    else {
        return refused_early("the app was not opened from a proposal's button", true);
    };
    let action_id = param.action_id;
    let step = shared.step();
    let answers_freeze = step == Step::Freeze && approvals::is_step_down(layout, action_id);
    if step >= Step::Freeze && !answers_freeze {
        // Not spent: good again when the ladder comes down, while fresh.
        return refused_early(
            "the ladder is at Freeze or above: nothing runs until it comes down",
            false,
        );
    }
    let tap = AppTap {
        action_id,
        user_id: verified.user_id,
        opened_at: verified.auth_date,
        signature: &verified.signature,
    };
    let intent = match intend(
        shared,
        Event::AppApproval {
            peer: Peer::worker(peer),
            tap: &tap,
        },
    ) {
        Ok(i) => i,
        Err(e) => return e.into(),
    };
    match approvals::spend_in_app(layout, &param, &verified.signature, now) {
        Ok(InApp { verified: v, seal }) => {
            let pin = match (seal, v.action.needs_pin()) {
                (_, false) => None,
                (Some(key), true) => {
                    let start_param = verified.start_param.as_deref().unwrap_or_default();
                    match sealed_pin.map(|s| key.open(s, start_param.as_bytes())) {
                        Some(Ok(pin)) => Some(pin),
                        Some(Err(e)) => return pin_not_opened(shared, &intent, &e.to_string()),
                        None => return pin_not_opened(shared, &intent, "no PIN came with it"),
                    }
                }
                (None, true) => {
                    return pin_not_opened(shared, &intent, "the action has no PIN key");
                }
            };
            carry_out(
                shared,
                peer,
                &intent,
                v,
                "approve",
                pin,
                action_id.to_string(),
            )
        }
        Err(TapRefusal::AlreadyAnswered) => {
            let seq = intent.outcome(shared, Outcome::AlreadyAnswered);
            Response::AlreadyAnswered { journal_seq: seq }
        }
        // The person's own old proposal: refused, and no anomaly.
        Err(TapRefusal::Outdated) => {
            let reason = approvals::OUTDATED;
            let seq = intent.outcome(shared, Outcome::Refused { reason });
            Response::Refused {
                reason: reason.into(),
                journal_seq: seq,
            }
        }
        Err(TapRefusal::Invalid(why)) => {
            let seq = intent.outcome(shared, Outcome::Refused { reason: &why });
            raise(
                shared,
                Some(peer),
                Signal::RedActionWithoutApproval {
                    action: format!("action {action_id}"),
                },
            );
            Response::Refused {
                reason: why,
                journal_seq: seq,
            }
        }
    }
}

/// An approval in the app whose sealed PIN did not open: spent, not done.
/// The relay can garble what it carries (it can drop it too), so this is
/// said and journaled but is no ladder signal and no wrong PIN.
fn pin_not_opened(shared: &Shared, intent: &super::intent::Intent, why: &str) -> Response {
    let reason = format!("the PIN did not arrive sealed for this server: {why}");
    let seq = intent.outcome(shared, Outcome::Refused { reason: &reason });
    Response::Refused {
        reason,
        journal_seq: seq,
    }
}

/// `aromba pair` from a root terminal: pins the Telegram account that
/// opened the app with the pairing's `start_param`, as Telegram signed it
/// for the relay's bot `bot_id`. Answers with the account, for root to
/// read which one it is.
pub(super) fn pin_telegram_account(
    shared: &Shared,
    launch: &str,
    bot_id: u64,
    start_param: &str,
) -> Response {
    let now = shared.options.clock.now();
    let (account, verified) =
        match telegram::verify_pairing(&shared.options.layout, launch, bot_id, start_param, now) {
            Ok(a) => a,
            Err(why) => {
                return Response::Refused {
                    reason: why.words().to_string(),
                    journal_seq: None,
                };
            }
        };
    let act = Event::TelegramAccountPinned {
        bot_id: account.bot_id,
        user_id: account.user_id,
        signature: &verified.signature,
        source: &RunSource::RootTerminal,
    };
    let intent = match intend(shared, act) {
        Ok(i) => i,
        Err(e) => return e.into(),
    };
    match shared.change_state(telegram::ACCOUNT_RECORD, Some(account.record().as_bytes())) {
        Ok(()) => {
            // What was proposed before took its route from the relay's word.
            approvals::withdraw_all(&shared.options.layout);
            intent.outcome(shared, Outcome::Done);
            Response::TelegramAccount {
                user_id: account.user_id,
                name: verified.name,
            }
        }
        Err(e) => {
            let why = format!("the Telegram account could not be pinned: {e}");
            intent.outcome(shared, Outcome::Failed { reason: &why });
            Response::Error { message: why }
        }
    }
}
