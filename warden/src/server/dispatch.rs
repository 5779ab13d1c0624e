//! Which request each socket serves, and the answers that need no command:
//! the ladder's moves, status, the journal's verification.

#![forbid(unsafe_code)]

use super::chores::{RunSource, chore_run, chores_list, dry_run_shown};
use super::event::{Event, Peer};
use super::owner::{self, Proposal, approve, propose};
use super::{Shared, Socket, after_move, journal, raise, read, unjournaled};
use crate::ladder::{self, Ladder, LadderError, Step};
use crate::signal::Signal;
use crate::system::PeerCred;
use aromba_warden_proto::Pin;
use aromba_warden_proto::{LadderEvent, Request, Response, Status};

pub(super) fn serve(
    shared: &Shared,
    peer: &PeerCred,
    socket: Socket,
    request: Request,
) -> Response {
    match (socket, request) {
        (_, Request::Ping) => Response::Pong,
        (Socket::Worker, Request::Read { cmd, args }) => read(shared, peer, cmd, args),
        (Socket::Worker, Request::Health) => super::health::health(shared, peer),
        (
            Socket::Worker,
            Request::CheckAnchor {
                seq,
                hash,
                signature,
            },
        ) => check_anchor(shared, seq, &hash, signature.as_deref()),
        // Answered from the kernel's socket tables, as `ss` shows them to
        // anyone: nothing runs, nothing changes, nothing is journaled.
        (Socket::Worker, Request::SocketOwner { local, peer }) => socket_owner(&local, &peer),
        (Socket::Worker, Request::Note { text }) => {
            let note = Event::WorkerNote {
                peer: Peer::on(peer, socket),
                text: &text,
            };
            match journal(shared, note) {
                Some(journal_seq) => Response::Noted { journal_seq },
                None => unjournaled(),
            }
        }
        // The Worker shows the same state in the chat (`/trust`): nothing
        // in it is a secret (whether a PIN is set, never the PIN).
        (_, Request::Status) => status(shared),
        // The Trust page: the policy rendering (the same file anyone can
        // read), the fence list and the journal's last check.
        (_, Request::Trust) => super::trust::trust(shared),
        (Socket::Worker, Request::Panic) => move_ladder(shared, Ladder::panic_from_chat),
        (Socket::Control, Request::Panic) => move_ladder(shared, Ladder::disarm),
        // Moving up is never held back by a journal that cannot be written
        // (the move is journaled when it can be); coming down is an act
        // like any other: journaled first, refused otherwise.
        (Socket::Control, Request::Resume) => {
            let peer = Peer::on(peer, socket);
            match super::intent::intend(shared, Event::Resume { peer }) {
                Ok(_) => move_ladder(shared, Ladder::resume),
                Err(e) => e.into(),
            }
        }
        (Socket::Worker, Request::Events { after }) => {
            let ladder = shared.ladder.lock().unwrap_or_else(|p| p.into_inner());
            Response::Events {
                events: ladder
                    .events_after(after)
                    .into_iter()
                    .map(|e| LadderEvent {
                        id: e.id,
                        time: e.time,
                        from: e.from as u64,
                        to: e.to as u64,
                        reason: e.reason,
                        message: e.message,
                    })
                    .collect(),
            }
        }
        (Socket::Worker, Request::RedAction { action, approval }) => {
            let asked = Event::RedAction {
                peer: Peer::on(peer, socket),
                action: &action,
                approval: approval.is_some(),
            };
            let seq = journal(shared, asked);
            // A red action runs only through a proposal (the Warden issues
            // the action id) and a relay-signed tap on it; an action named
            // with an approval of the Worker's own making is refused, and
            // asking for one is a signal.
            let frozen = shared
                .ladder
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .step()
                >= Step::Freeze;
            raise(
                shared,
                Some(peer),
                Signal::RedActionWithoutApproval { action },
            );
            let reason = if frozen {
                "the ladder is at Freeze or above: no chore or action runs until it comes down"
            } else {
                "a red action runs only through a proposal and a relay-signed tap the Warden verifies (propose, then approve)"
            };
            Response::Refused {
                reason: reason.into(),
                journal_seq: seq,
            }
        }
        // The Worker keeps the schedule from the same list.
        (_, Request::Chores) => chores_list(shared),
        (Socket::Control, Request::ChoreRun { name, dry_run }) => {
            chore_run(shared, &name, dry_run, RunSource::RootTerminal)
        }
        (Socket::Worker, Request::DryRun { chore }) => {
            // A dry run builds a cage and runs the chore: it takes a running
            // slot like a read.
            let _slot = shared.running.take();
            chore_run(shared, &chore, true, RunSource::Worker)
        }
        (Socket::Worker, Request::DryRunShown { chore }) => dry_run_shown(shared, peer, &chore),
        (Socket::Worker, Request::Propose { chore }) => propose(shared, peer, Proposal::Run(chore)),
        (Socket::Worker, Request::RunDue { chore }) => {
            // A run takes a running slot like a read.
            let _slot = shared.running.take();
            super::chores::run_due(shared, peer, &chore)
        }
        (Socket::Worker, Request::ProposeConfirmCap { chore }) => {
            propose(shared, peer, Proposal::ConfirmCap(chore))
        }
        (Socket::Worker, Request::ProposeUndo { undo_id }) => {
            propose(shared, peer, Proposal::Undo(undo_id))
        }
        (Socket::Worker, Request::ProposeProdModeOff) => {
            propose(shared, peer, Proposal::ProdModeOff)
        }
        (Socket::Worker, Request::ProposeStepDown) => propose(shared, peer, Proposal::StepDown),
        (Socket::Control, Request::ConfirmCap { chore }) => {
            owner::confirm_cap_from_terminal(shared, &chore)
        }
        (Socket::Control, Request::SetPin { pin }) => owner::set_pin(shared, pin.expose()),
        (Socket::Control, Request::PinRelayKey { key }) => owner::pin_relay_key(shared, &key),
        (
            Socket::Control,
            Request::PinTelegramAccount {
                launch,
                bot_id,
                start_param,
            },
        ) => super::in_app::pin_telegram_account(shared, &launch, bot_id, &start_param),
        (Socket::Worker, Request::ApproveInApp { launch, sealed_pin }) => {
            // As a tap: it may run a chore or an undo.
            let _slot = shared.running.take();
            super::in_app::approve_in_app(shared, peer, &launch, sealed_pin.as_deref())
        }
        (Socket::Control, Request::ProdMode { on, pin }) => {
            owner::prod_mode_from_terminal(shared, on, pin.as_ref().map(Pin::expose))
        }
        (Socket::Worker, Request::ProdModeOn { findings }) => {
            super::scan::prod_mode_on(shared, &findings)
        }
        (Socket::Worker, Request::AddFences { paths }) => super::scan::add_fences(shared, &paths),
        (Socket::Control, Request::NetworkWritten) => super::scan::network_written(shared),
        (Socket::Worker, Request::InstallRelease { dir: None }) => {
            // Reading and unpacking a release takes a running slot like a
            // read (its memory is bounded by the slots).
            let _slot = shared.running.take();
            let dir = super::update::worker_downloads(shared);
            super::update::install_release(shared, &dir, super::update::Origin::Worker)
        }
        (Socket::Worker, Request::ProposeRelease) => {
            let _slot = shared.running.take();
            propose(shared, peer, Proposal::Release)
        }
        (_, Request::Releases) => super::update::releases(shared),
        (Socket::Worker, Request::RollbackTold { version }) => {
            super::update::rollback_told(shared, peer, &version)
        }
        (Socket::Worker, Request::InstallRelease { dir: Some(dir) }) => {
            // The Worker never names a folder: an odd request, kept.
            let refused = Event::ReleaseInstallRefused {
                peer: Peer::on(peer, socket),
                dir: &dir,
            };
            let journal_seq = journal(shared, refused);
            Response::Refused {
                reason: "the Worker installs a release only from its own download folder".into(),
                journal_seq,
            }
        }
        (Socket::Control, Request::InstallRelease { dir }) => {
            let dir = dir
                .map(std::path::PathBuf::from)
                .unwrap_or_else(|| super::update::worker_downloads(shared));
            super::update::install_release(shared, &dir, super::update::Origin::RootTerminal)
        }
        (Socket::Control, Request::Uninstall { purge }) => {
            super::uninstall::uninstall(shared, purge)
        }
        (Socket::Control, Request::Undo { undo_id }) => {
            owner::undo(shared, &undo_id, RunSource::RootTerminal)
        }
        (
            Socket::Worker,
            Request::Approve {
                action_id,
                button,
                chat,
                time,
                signature,
            },
        ) => {
            // An approval may run a chore or an undo: it takes a running
            // slot like a read.
            let _slot = shared.running.take();
            approve(
                shared,
                peer,
                crate::approvals::Approval {
                    action_id,
                    button,
                    chat,
                    time,
                    signature,
                },
            )
        }
        (Socket::Control, Request::SkillCheck { path }) => {
            // Reading and verifying a bundle takes a running slot like a read.
            let _slot = shared.running.take();
            super::skills::check(shared, &path)
        }
        (Socket::Control, Request::SkillInstall { path, sha256, pin }) => {
            let _slot = shared.running.take();
            super::skills::install(shared, &path, &sha256, pin.as_ref().map(Pin::expose))
        }
        (Socket::Control, Request::SkillRemove { name }) => super::skills::remove(shared, &name),
        (
            Socket::Control,
            Request::SkillSet {
                name,
                setting,
                value,
                pin,
            },
        ) => super::skills::set(
            shared,
            &name,
            &setting,
            value.expose(),
            pin.as_ref().map(Pin::expose),
        ),
        (Socket::Worker, Request::ProposeSkill { name }) => {
            // Reading and verifying a bundle takes a running slot like a read.
            let _slot = shared.running.take();
            propose(shared, peer, Proposal::Skill(name))
        }
        (Socket::Worker, Request::SkillUpdate { name }) => {
            let _slot = shared.running.take();
            super::skills::update(shared, &name)
        }
        (Socket::Worker, Request::SkillTool { skill, tool }) => {
            super::skills::tool(shared, peer, &skill, &tool)
        }
        (_, Request::Skills) => {
            let _slot = shared.running.take();
            super::skills::list(shared)
        }
        (Socket::Control, Request::JournalVerify) => {
            let (ok, report) = super::trust::verify_journal(shared);
            Response::Verified { ok, report }
        }
        (socket, other) => {
            let request = without_pin(other);
            let wrong = Event::WrongSocket {
                peer: Peer::on(peer, socket),
                request: &request,
            };
            journal(shared, wrong);
            Response::Error {
                message: format!("that request is not served on the {} socket", socket.name()),
            }
        }
    }
}

/// Moves the ladder by `how`, carries out the move, and answers with the step.
pub(super) fn move_ladder(
    shared: &Shared,
    how: fn(&mut Ladder) -> Result<Option<ladder::Event>, LadderError>,
) -> Response {
    let moved = how(&mut shared.ladder.lock().unwrap_or_else(|p| p.into_inner()));
    after_move(shared, moved);
    ladder_response(shared)
}

pub(super) fn ladder_response(shared: &Shared) -> Response {
    let (step, reason) = {
        let l = shared.ladder.lock().unwrap_or_else(|p| p.into_inner());
        (l.step(), l.reason().to_string())
    };
    Response::Ladder {
        step: step as u64,
        name: step.name().into(),
        message: crate::ladder::message_for(step, &reason).into(),
    }
}

pub(super) fn status(shared: &Shared) -> Response {
    let (step, reason) = {
        let l = shared.ladder.lock().unwrap_or_else(|p| p.into_inner());
        let reason = match l.unsaved() {
            None => l.reason().to_string(),
            Some(why) => format!(
                "{} (not saved to disk: {why}; in force all the same, saving is retried)",
                l.reason()
            ),
        };
        (l.step(), reason)
    };
    let now = shared.options.clock.now();
    let installed_at = shared.installed_at();
    let phase = match installed_at {
        None if shared.options.layout.install_evidence().is_some() => {
            "installed, but the integrity baseline is missing or unreadable".to_string()
        }
        None => "not installed".to_string(),
        Some(at) => {
            let day = now.saturating_sub(at) / 86_400 + 1;
            if day <= 7 {
                format!("day {day}: green chores only until day 8")
            } else {
                format!("day {day}: yellow and red chores with approval")
            }
        }
    };
    let (journal_seq, journal_head) = {
        let j = shared.journal.lock().unwrap_or_else(|p| p.into_inner());
        (j.head().seq, j.head().hash.clone())
    };
    Response::Status(Status {
        ladder_step: step as u64,
        ladder_name: step.name().into(),
        ladder_reason: reason,
        phase,
        isolation: shared.isolation.clone(),
        integrity: shared
            .integrity
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone(),
        journal_seq,
        journal_head,
        policy_sha256: shared.policy_sha256.clone(),
        prod_mode: match crate::state::read(&shared.options.layout, "prod-mode") {
            Ok(Some(b)) => String::from_utf8_lossy(&b).trim().to_string(),
            Ok(None) => "off".into(),
            Err(e) => format!("unknown ({e})"),
        },
        pin_set: matches!(
            crate::state::read(&shared.options.layout, crate::pin::RECORD),
            Ok(Some(_))
        ),
        server_id: crate::approvals::server_id(&shared.options.layout).unwrap_or_default(),
        paired: crate::approvals::relay_key_file(&shared.options.layout).exists(),
        install_day: installed_at.map_or(0, |at| now.saturating_sub(at) / 86_400 + 1),
        telegram_user: crate::telegram::account(&shared.options.layout)
            .ok()
            .flatten()
            .map(|a| a.user_id),
        telegram_key: crate::telegram::key_words(&shared.options.layout),
    })
}

/// The relay's anchor against the journal: the journal must hold the
/// anchored line with that hash. Ending below it, or holding another line
/// there, is a cut or a rewrite: an integrity signal. A line rotated away
/// cannot be checked and is said so.
/// Which uid serves `peer`, a socket on this machine, for the Worker's
/// connection from `local`: the other end of that connection in the
/// kernel's tables, else the one listener there. Only for addresses of
/// this machine (loopback or unspecified): the question means nothing
/// for another one.
fn socket_owner(local: &str, peer: &str) -> Response {
    use aromba_warden_proto::socket_owner::{Unclear, rows_on_port, serving_uid};
    let refuse = |reason: String| Response::Refused {
        reason,
        journal_seq: None,
    };
    let (Ok(local), Ok(peer)) = (
        local.parse::<std::net::SocketAddr>(),
        peer.parse::<std::net::SocketAddr>(),
    ) else {
        return refuse("socket_owner takes two socket addresses (IP:port)".into());
    };
    let here = |a: std::net::SocketAddr| {
        let ip = a.ip().to_canonical();
        ip.is_loopback() || ip.is_unspecified()
    };
    if !here(peer) || !here(local) {
        return refuse(format!("{peer} is not an address of this machine"));
    }
    let rows = match rows_on_port(peer.port()) {
        Ok(rows) => rows,
        Err(e) => return refuse(format!("the kernel's socket tables cannot be read: {e}")),
    };
    match serving_uid(&rows, local, peer) {
        Ok(uid) => Response::Served {
            uid: u64::from(uid),
        },
        Err(Unclear::Nobody) => refuse(format!("no socket on this machine serves {peer}")),
        Err(Unclear::Several(uids)) => refuse(format!(
            "{peer} is listened on by several uids: {}",
            uids.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

fn check_anchor(shared: &Shared, seq: u64, hash: &str, signature: Option<&str>) -> Response {
    // The shape the chain writes and the relay holds: lower-case hex. Any
    // other is no anchor at all, not a rewrite.
    if hash.len() != 64 || !hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return Response::Error {
            message: "an anchor's hash is 64 lower-case hex digits".into(),
        };
    }
    // Only the relay's word is evidence of a rewrite: a line number the
    // Worker made up would send the owner after one that never happened.
    if let Err(why) = crate::approvals::verify_anchor(&shared.options.layout, seq, hash, signature)
    {
        return Response::Error {
            message: format!("{why}, so it is no evidence and nothing was checked"),
        };
    }
    let head = shared
        .journal
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .head()
        .clone();
    let mismatch = |what: String| {
        raise(
            shared,
            None,
            Signal::IntegrityMismatch { what: what.clone() },
        );
        Response::Verified {
            ok: false,
            report: what,
        }
    };
    if seq > head.seq {
        return mismatch(format!(
            "the journal ends at line {} but the relay holds line {seq}: it was cut",
            head.seq
        ));
    }
    // Held still only while its files are opened: a Worker asking again
    // and again for a line deep in a long history never holds up the
    // journal (and root's requests waiting on it) while it is read.
    let _one_at_a_time = shared
        .anchor_check
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let opened = {
        let _j = shared.journal.lock().unwrap_or_else(|p| p.into_inner());
        crate::journal::open_files(&shared.options.layout.journal_dir)
    };
    let found = opened.and_then(|o| crate::journal::line_in(o, seq));
    use crate::journal::LineAt;
    match found {
        Ok(LineAt::Held(h)) if h == hash => Response::Verified {
            ok: true,
            report: format!("the journal extends the relay's anchor (line {seq})"),
        },
        Ok(LineAt::Held(_)) => mismatch(format!(
            "line {seq} of the journal is not the one the relay holds: the journal was rewritten"
        )),
        // Lines before it are still held: it was taken out, not rotated.
        Ok(LineAt::Missing) => mismatch(format!(
            "line {seq}, which the relay holds, is missing from the journal though earlier lines are there: the journal was cut"
        )),
        Ok(LineAt::RotatedAway) => Response::Verified {
            ok: true,
            report: format!(
                "line {seq}, which the relay holds, was rotated away; the journal goes on to line {}",
                head.seq
            ),
        },
        Err(e) => Response::Error {
            message: format!("the journal could not be read: {e}"),
        },
    }
}

/// A request as the journal and the pacing's log keep it: its `Debug`
/// form, in which a PIN is `[pin]` (`aromba_warden_proto::Pin` cannot be
/// printed otherwise).
pub(super) fn without_pin(request: Request) -> String {
    format!("{request:?}")
}
