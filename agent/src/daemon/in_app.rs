//! The Mini App, from the Worker's side: the buttons that open it, and
//! what it asks when the person opened it from one of them.
//!
//! A proposal the Warden approves only in the app (its answer carries the
//! app's `start_param`) is sent with an Approve button that opens the app
//! with that parameter; the page then asks, through the relay, for the
//! proposal's text (`view`) and passes on the person's approval
//! (`approve`) — the launch exactly as Telegram made it, which the Warden
//! checks itself. The Worker only finds the proposal the parameter names
//! (for its text and to answer its message in place): nothing is decided
//! on the launch here.

use super::Daemon;
use aromba_relay_proto::client::Outgoing;
use aromba_relay_proto::frame::{AppAnswer, AppAnswerKind, AppAsk, Body, Button};
use aromba_warden_proto::Request;
use aromba_words::approvals as words;
use uuid::Uuid;

/// The buttons of the Warden's proposal `action_id`: a relay-signed tap
/// each, but Approve opens the app when the Warden gave its parameter.
pub fn buttons(
    action_id: &str,
    buttons: Vec<aromba_warden_proto::Button>,
    app: Option<&str>,
) -> Vec<Button> {
    buttons
        .into_iter()
        .map(|b| match app {
            Some(param) if b.data == "approve" => {
                Button::app(&b.data, &words::in_app(&b.label), param)
            }
            _ => Button {
                action: Some(action_id.to_string()),
                ..Button::new(&b.data, &b.label)
            },
        })
        .collect()
}

/// Remembers which app parameter the proposal `message` was sent with.
pub fn remember(daemon: &Daemon, message: Uuid, app: Option<String>) {
    if app.is_some() {
        super::shown::update(daemon, message, |s| s.app = app);
    }
}

/// The `start_param` the launch names, as sent (unverified: it only finds
/// the proposal; the Warden checks Telegram's signature over it).
fn start_param(launch: &str) -> Option<&str> {
    launch
        .split('&')
        .find_map(|f| f.strip_prefix("start_param="))
        .filter(|p| aromba_relay_proto::frame::valid_start_param(p))
}

fn closed(text: &str) -> AppAnswer {
    AppAnswer {
        kind: AppAnswerKind::Closed,
        text: text.to_string(),
        sections: Vec::new(),
    }
}

/// What the app asked, as the relay delivered it.
pub struct Asked {
    /// The page's request, to answer under.
    pub request: Uuid,
    pub ask: AppAsk,
    /// The launch as Telegram made it (the Warden checks its signature).
    pub launch: String,
    /// Approving an action that needs the PIN: the PIN the page sealed for
    /// the Warden, passed on as it came (the Worker cannot open it).
    pub sealed_pin: Option<String>,
    /// An Undo link's undo id.
    pub undo: Option<String>,
}

/// The app asked: the answer goes back under the request. An approval is
/// answered as soon as it is on its way to the Warden (a chore may run for
/// long; the chat says how it went).
pub async fn asked(daemon: &Daemon, asked: Asked) {
    let Asked {
        request,
        ask,
        launch,
        sealed_pin,
        undo,
    } = asked;
    match ask {
        AppAsk::View => answer(daemon, request, view(daemon, &launch)).await,
        AppAsk::Trust | AppAsk::Policy | AppAsk::Undo if !from_trust(&launch) => {
            answer(daemon, request, closed(words::APP_NOT_A_PROPOSAL)).await
        }
        // The page is one command, its policy section included.
        AppAsk::Policy if super::trust_page::owed(daemon, &launch) => {
            let policy = super::trust_page::policy(daemon, &launch).await;
            answer(daemon, request, policy).await
        }
        AppAsk::Trust | AppAsk::Policy | AppAsk::Undo if !daemon.take_read() => {
            let busy = daemon.busy();
            answer(daemon, request, closed(&busy)).await;
        }
        AppAsk::Trust => {
            let page = super::trust_page::page(daemon, &launch).await;
            answer(daemon, request, page).await
        }
        AppAsk::Policy => {
            let policy = super::trust_page::policy(daemon, &launch).await;
            answer(daemon, request, policy).await
        }
        AppAsk::Undo => {
            let offer = undo.and_then(|id| {
                super::undo::live(daemon)
                    .into_iter()
                    .find(|(_, live, _)| *live == id)
            });
            match offer {
                None => answer(daemon, request, closed(words::APP_UNDO_GONE)).await,
                Some((message, undo_id, _)) => {
                    let said = match super::undo::propose(daemon, message, undo_id).await {
                        super::undo::Proposed::Now => words::APP_UNDO_PROPOSED,
                        super::undo::Proposed::Already => words::APP_UNDO_PROPOSED_ALREADY,
                        super::undo::Proposed::Not => words::APP_UNDO_NOT_PROPOSED,
                    };
                    answer(
                        daemon,
                        request,
                        AppAnswer::said(AppAnswerKind::Outcome, said),
                    )
                    .await;
                }
            }
        }
        AppAsk::Approve => match approvable(daemon, &launch) {
            Err(refused) => answer(daemon, request, refused).await,
            Ok(message) => {
                if !daemon.take_read() {
                    let busy = daemon.busy();
                    daemon.say(busy.clone(), vec![]).await;
                    answer(daemon, request, closed(&busy)).await;
                    return;
                }
                let sent = AppAnswer::said(AppAnswerKind::Outcome, words::APP_SENT);
                answer(daemon, request, sent).await;
                let approval = Request::ApproveInApp { launch, sealed_pin };
                super::chat::carry(daemon, message, true, &approval).await;
            }
        },
    }
}

/// The parameter `/trust`'s button opens the app with.
pub const TRUST: &str = "trust";

/// Whether the launch is the Trust page's (opened from `/trust`'s
/// button): what a page opened from a proposal cannot ask.
fn from_trust(launch: &str) -> bool {
    start_param(launch) == Some(TRUST)
}

/// The page asked past the chat's pace: told so at once, rather than left
/// to wait for an answer that will not come.
pub async fn too_many(daemon: &Daemon, request: Uuid) {
    answer(daemon, request, closed(words::APP_TOO_MANY)).await;
}

async fn answer(daemon: &Daemon, request: Uuid, answer: AppAnswer) {
    let body = Body::AppAnswer { request, answer };
    if daemon.to_relay.send(Outgoing(body)).await.is_err() {
        tracing::warn!("the relay link is gone; the app's answer is lost");
    }
}

fn view(daemon: &Daemon, launch: &str) -> AppAnswer {
    let Some(param) = start_param(launch) else {
        return closed(words::APP_NOT_A_PROPOSAL);
    };
    if param.starts_with("pair_") {
        return closed(words::APP_PAIRING_OVER);
    }
    match super::shown::with_app(daemon, param) {
        Some(s) if s.answered => closed(words::ALREADY_ANSWERED),
        Some(s) => AppAnswer {
            kind: AppAnswerKind::Proposal,
            text: s.text,
            sections: Vec::new(),
        },
        None => closed(words::APP_NOTHING_OPEN),
    }
}

/// The proposal an approval in the app is for, or the page's answer why
/// there is none. One answered already goes to the Warden all the same:
/// `carry` says "already answered" without asking it.
fn approvable(daemon: &Daemon, launch: &str) -> Result<Uuid, AppAnswer> {
    let Some(param) = start_param(launch) else {
        return Err(closed(words::APP_NOT_A_PROPOSAL));
    };
    if param.starts_with("pair_") {
        return Err(closed(words::APP_PAIRING_OVER));
    }
    super::shown::with_app(daemon, param)
        .map(|s| s.message)
        .ok_or_else(|| closed(words::APP_NOTHING_OPEN))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approve_opens_the_app_only_when_the_warden_gave_its_parameter() {
        let warden = || {
            vec![
                aromba_warden_proto::Button {
                    data: "approve".into(),
                    label: "Approve".into(),
                },
                aromba_warden_proto::Button {
                    data: "cancel".into(),
                    label: "Cancel".into(),
                },
            ]
        };
        let id = "0".repeat(32);
        let in_app = buttons(&id, warden(), Some("p_1"));
        assert_eq!(in_app[0].app.as_deref(), Some("p_1"));
        assert_eq!(in_app[0].action, None);
        assert_eq!(in_app[0].label, "Approve (opens the app)");
        assert_eq!(in_app[1].app, None);
        assert_eq!(in_app[1].action.as_deref(), Some(id.as_str()));
        let tapped = buttons(&id, warden(), None);
        assert!(tapped.iter().all(|b| b.app.is_none() && b.action.is_some()));
    }

    #[test]
    fn the_start_param_is_read_only_when_a_direct_link_could_carry_it() {
        assert_eq!(
            start_param("user=x&start_param=ab_12&auth_date=1"),
            Some("ab_12")
        );
        assert_eq!(start_param("user=x&start_param=a%20b"), None);
        assert_eq!(start_param("user=x"), None);
    }
}
