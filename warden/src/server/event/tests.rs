//! Each shape pinned to the line the server wrote before the journal was
//! typed (the expected JSON is read off the `insert` calls it replaced),
//! and the gate that keeps field names in this module.

#![forbid(unsafe_code)]

use super::*;
use crate::exec;
use crate::journal::sha256_hex;
use std::time::Duration;

const PEER: PeerCred = PeerCred {
    pid: 4242,
    uid: 999,
    gid: 998,
};

fn line(r: Rendered) -> String {
    serde_json::to_string(&Value::Object(r.into_fields())).unwrap()
}

fn approved() -> RunSource {
    RunSource::Approved {
        action_id: "a1b2".into(),
    }
}

fn report(exit_code: Option<i32>) -> Report {
    Report {
        outcome: exec::Outcome {
            exit_code,
            signal: None,
            stdout: exec::Output::quiet(),
            stderr: exec::Output::quiet(),
            cut: false,
            timed_out: false,
            stopped: false,
            memory_exceeded: false,
            duration: Duration::ZERO,
        },
        files_changed: 3,
        bytes_changed: 4096,
        over_cap: false,
        halted: false,
        outside_touches: false,
        refused_write: None,
        gained_privilege: Vec::new(),
    }
}

#[test]
fn a_line_with_no_fields_holds_its_kind_alone() {
    assert_eq!(
        line(Event::WardenStarted.render()),
        r#"{"kind":"warden-started"}"#
    );
    assert_eq!(
        line(Event::HoneypotEventsLost.render()),
        r#"{"kind":"honeypot-events-lost"}"#
    );
}

#[test]
fn a_read_is_journaled_with_its_peer_request_and_verdict() {
    let args = vec!["-P".to_string(), "-T".to_string()];
    let refused = Event::Read {
        peer: Peer::worker(&PEER),
        cmd: "df",
        args: &args,
        verdict: ReadVerdict::Refused { reason: "no" },
    };
    assert_eq!(
        line(refused.render()),
        r#"{"args":["-P","-T"],"cmd":"df","kind":"read","peer_pid":4242,"peer_uid":999,"reason":"no","socket":"worker","verdict":"refused"}"#
    );
    let failed = Event::Read {
        peer: Peer::worker(&PEER),
        cmd: "df",
        args: &args,
        verdict: ReadVerdict::Failed {
            rule: "[[allow]] \"df\"",
            error: "no binary",
        },
    };
    assert_eq!(
        line(failed.render()),
        r#"{"args":["-P","-T"],"cmd":"df","error":"no binary","kind":"read","peer_pid":4242,"peer_uid":999,"rule":"[[allow]] \"df\"","socket":"worker","verdict":"failed"}"#
    );
}

#[test]
fn an_allowed_read_binds_the_redacted_bytes_and_writes_null_for_no_exit_code() {
    let args = vec!["/proc/loadavg".to_string()];
    let counts = vec![("token".to_string(), 2)];
    let ran = ReadRun {
        rule: "[[allow]] \"cat\"",
        bin: Path::new("/usr/bin/cat"),
        run_args: &args,
        exit_code: None,
        signal: Some(9),
        bytes_out: 12,
        cut: true,
        timed_out: false,
        redactions: &counts,
        stdout_sha256: "aa",
        stderr_sha256: "bb",
        duration_ms: 7,
    };
    let read = Event::Read {
        peer: Peer::worker(&PEER),
        cmd: "cat",
        args: &args,
        verdict: ReadVerdict::Allowed(ran),
    };
    assert_eq!(
        line(read.render()),
        r#"{"args":["/proc/loadavg"],"bin":"/usr/bin/cat","bytes_out":12,"cmd":"cat","cut":true,"duration_ms":7,"exit_code":null,"kind":"read","peer_pid":4242,"peer_uid":999,"redactions":{"token":2},"rule":"[[allow]] \"cat\"","run_args":["/proc/loadavg"],"signal":9,"socket":"worker","stderr_sha256":"bb","stdout_sha256":"aa","timed_out":false,"verdict":"allowed"}"#
    );
}

#[test]
fn a_quiet_line_carries_the_count_left_out_before_it_and_its_peer_uid() {
    let paced = Event::Paced {
        peer: Peer::worker(&PEER),
        request: "Ping",
        reason: "slowed",
    };
    assert_eq!(paced.peer_uid(), Some(999));
    assert_eq!(
        line(paced.render().quiet(3)),
        r#"{"kind":"paced","left_out_before":3,"peer_pid":4242,"peer_uid":999,"reason":"slowed","request":"Ping","socket":"worker"}"#
    );
    let refused = Event::ConnectionRefused {
        peer: Peer::on(&PEER, Socket::Control),
        pool: 8,
    };
    assert_eq!(
        line(refused.render().quiet(0)),
        r#"{"kind":"connection-refused","left_out_before":0,"peer_pid":4242,"peer_uid":999,"pool":8,"socket":"control"}"#
    );
    let unknown = Event::PeerUnknown {
        socket: Socket::Worker,
        error: "EINVAL",
    };
    assert_eq!(unknown.peer_uid(), None);
    assert_eq!(
        line(unknown.render().quiet(1)),
        r#"{"error":"EINVAL","kind":"peer-unknown","left_out_before":1,"socket":"worker"}"#
    );
    let missed = Event::DeadlineMissed {
        peer: Peer::worker(&PEER),
        deadline: Deadline::Request,
        deadline_ms: 60000,
    };
    assert_eq!(
        line(missed.render().quiet(0)),
        r#"{"deadline":"request","deadline_ms":60000,"kind":"deadline-missed","left_out_before":0,"peer_pid":4242,"peer_uid":999,"socket":"worker"}"#
    );
}

#[test]
fn left_out_names_the_peer_uid_only_when_there_was_one() {
    let with = Event::LeftOut {
        of: "paced",
        peer_uid: Some(999),
        left_out: 41,
    };
    assert_eq!(
        line(with.render()),
        r#"{"kind":"left-out","left_out":41,"of":"paced","peer_uid":999}"#
    );
    let without = Event::LeftOut {
        of: "peer-unknown",
        peer_uid: None,
        left_out: 2,
    };
    assert_eq!(
        line(without.render()),
        r#"{"kind":"left-out","left_out":2,"of":"peer-unknown"}"#
    );
}

#[test]
fn a_state_record_says_the_baseline_was_re_taken_or_the_error() {
    let written = Event::StateRecord {
        record: "prod-mode",
        written: true,
        error: None,
    };
    assert_eq!(
        line(written.render()),
        r#"{"baseline":"re-taken","change":"written","kind":"state-record","record":"prod-mode"}"#
    );
    let removed = Event::StateRecord {
        record: "prod-mode",
        written: false,
        error: Some("differs"),
    };
    assert_eq!(
        line(removed.render()),
        r#"{"change":"removed","error":"differs","kind":"state-record","record":"prod-mode"}"#
    );
}

#[test]
fn a_chore_runs_intent_names_its_approval_and_a_refusal_its_reason() {
    let source = approved();
    let intent = Event::ChoreRun {
        chore: "old-logs",
        mode: Mode::Real,
        color: Color::Red,
        script_sha256: "cc",
        source: &source,
        undo_id: Some("0123456789abcdef0123456789abcdef"),
        touches_quarantine: true,
    };
    assert_eq!(
        line(intent.render().intent()),
        r#"{"action_id":"a1b2","approval":"relay-signed tap","chore":"old-logs","color":"red","kind":"chore-run","mode":"real","phase":"intent","script_sha256":"cc","touches_quarantine":true,"undo_id":"0123456789abcdef0123456789abcdef"}"#
    );
    let refused = Event::ChoreRunRefused {
        chore: "old-logs",
        mode: Mode::DryRun,
        source: &RunSource::RootTerminal,
        reason: "frozen",
    };
    assert_eq!(
        line(refused.render()),
        r#"{"approval":"root terminal","chore":"old-logs","kind":"chore-run","mode":"dry-run","reason":"frozen","verdict":"refused"}"#
    );
    let scheduled = Event::ChoreRunRefused {
        chore: "apt-clean",
        mode: Mode::Real,
        source: &RunSource::Schedule,
        reason: "r",
    };
    assert!(line(scheduled.render()).contains(r#""approval":"schedule (green chore)""#));
}

#[test]
fn a_chore_runs_outcome_holds_what_it_left_and_only_the_flags_that_are_set() {
    let mut r = report(Some(0));
    r.outcome.memory_exceeded = true;
    let gained = vec!["/x gained setuid".to_string()];
    let left = RunLeft {
        quarantine_lost: Some("1 paths the quarantine held before were removed or changed"),
        seal_failed: Some("the seal failed (x)"),
        undo_id: Some("u1"),
    };
    let ran = Outcome::ChoreRun {
        chore: "old-logs",
        end: RunEnd::Ran {
            left: &left,
            report: &r,
            gained: &gained,
            clean: false,
        },
    };
    assert_eq!(
        line(ran.render("chore-run", 17)),
        r#"{"bytes_changed":4096,"chore":"old-logs","exit_code":0,"files_changed":3,"gained_privilege":["/x gained setuid"],"intent_seq":17,"kind":"chore-run","memory_exceeded":true,"outside_touches":false,"over_cap":false,"phase":"outcome","quarantine":"1 paths the quarantine held before were removed or changed: undo cannot put them back","snapshot":"the seal failed (x)","undo_id":"u1","verdict":"failed"}"#
    );
    let mut r = report(None);
    r.halted = true;
    let clean = Outcome::ChoreRun {
        chore: "old-logs",
        end: RunEnd::Ran {
            left: &RunLeft::default(),
            report: &r,
            gained: &[],
            clean: true,
        },
    };
    assert_eq!(
        line(clean.render("chore-run", 2)),
        r#"{"bytes_changed":4096,"chore":"old-logs","exit_code":null,"files_changed":3,"halted":true,"intent_seq":2,"kind":"chore-run","outside_touches":false,"over_cap":false,"phase":"outcome","verdict":"clean"}"#
    );
}

#[test]
fn a_chore_run_that_stopped_is_refused_when_nothing_ran_and_failed_otherwise() {
    let left = RunLeft {
        undo_id: Some("u1"),
        ..RunLeft::default()
    };
    let failed = Outcome::ChoreRun {
        chore: "c",
        end: RunEnd::Stopped {
            left: &left,
            never_ran: false,
            reason: "wait failed",
        },
    };
    assert_eq!(
        line(failed.render("chore-run", 5)),
        r#"{"chore":"c","intent_seq":5,"kind":"chore-run","phase":"outcome","reason":"wait failed","undo_id":"u1","verdict":"failed"}"#
    );
    let never = Outcome::ChoreRun {
        chore: "c",
        end: RunEnd::Stopped {
            left: &RunLeft::default(),
            never_ran: true,
            reason: "no bwrap",
        },
    };
    assert_eq!(
        line(never.render("chore-run", 5)),
        r#"{"chore":"c","intent_seq":5,"kind":"chore-run","phase":"outcome","reason":"no bwrap","verdict":"refused"}"#
    );
    let before = Outcome::ChoreRun {
        chore: "c",
        end: RunEnd::Refused { reason: "no room" },
    };
    assert_eq!(
        line(before.render("chore-run", 5)),
        r#"{"chore":"c","intent_seq":5,"kind":"chore-run","phase":"outcome","reason":"no room","verdict":"refused"}"#
    );
}

#[test]
fn a_chore_action_is_refused_intended_and_ends_ran_or_failed() {
    let refused = Event::ChoreActionRefused {
        chore: "c",
        action: "systemctl restart ssh.service",
        reason: "never_restart",
    };
    assert_eq!(
        line(refused.render()),
        r#"{"action":"systemctl restart ssh.service","chore":"c","kind":"chore-action","reason":"never_restart","verdict":"refused"}"#
    );
    let run_args = vec!["restart".to_string(), "chrony.service".to_string()];
    let intent = Event::ChoreAction {
        chore: "c",
        action: "systemctl restart chrony.service",
        run_args: &run_args,
    };
    assert_eq!(
        line(intent.render().intent()),
        r#"{"action":"systemctl restart chrony.service","chore":"c","kind":"chore-action","phase":"intent","run_args":["restart","chrony.service"]}"#
    );
    let killed = Outcome::ChoreAction {
        action: "a",
        ran: Ok(None),
    };
    assert_eq!(
        line(killed.render("chore-action", 9)),
        r#"{"action":"a","exit_code":null,"intent_seq":9,"kind":"chore-action","phase":"outcome","verdict":"ran"}"#
    );
    let failed = Outcome::ChoreAction {
        action: "a",
        ran: Err("gone"),
    };
    assert_eq!(
        line(failed.render("chore-action", 9)),
        r#"{"action":"a","error":"gone","intent_seq":9,"kind":"chore-action","phase":"outcome","verdict":"failed"}"#
    );
}

/// The tap's signed time is `tap_time`: as `time` it was overwritten by
/// the line's own time on append, and never recorded (found by the attack
/// round's differential run against the Warden before typing).
#[test]
fn a_tap_is_journaled_with_its_fields_and_each_verdict() {
    let tap = Approval {
        action_id: "a1b2".into(),
        button: "approve".into(),
        chat: "77".into(),
        time: 1700000000,
        signature: "never journaled".into(),
    };
    let intent = Event::Approval {
        peer: Peer::worker(&PEER),
        tap: &tap,
    };
    assert_eq!(
        line(intent.render().intent()),
        r#"{"action_id":"a1b2","button":"approve","chat":"77","kind":"approval","peer_pid":4242,"peer_uid":999,"phase":"intent","socket":"worker","tap_time":1700000000}"#
    );
    let frozen = Event::ApprovalRefused {
        peer: Peer::worker(&PEER),
        tap: &tap,
        reason: "frozen",
    };
    assert_eq!(
        line(frozen.render()),
        r#"{"action_id":"a1b2","button":"approve","chat":"77","kind":"approval","peer_pid":4242,"peer_uid":999,"reason":"frozen","socket":"worker","tap_time":1700000000,"verdict":"refused"}"#
    );
    assert_eq!(
        line(Outcome::AlreadyAnswered.render("approval", 3)),
        r#"{"intent_seq":3,"kind":"approval","phase":"outcome","verdict":"already-answered"}"#
    );
    let action = Action::Undo {
        undo_id: "u1".into(),
    };
    assert_eq!(
        line(Outcome::Declined { action: &action }.render("approval", 3)),
        r#"{"action":{"kind":"undo","undo_id":"u1"},"intent_seq":3,"kind":"approval","phase":"outcome","verdict":"declined"}"#
    );
    assert_eq!(
        line(Outcome::Verified { action: &action }.render("approval", 3)),
        r#"{"action":{"kind":"undo","undo_id":"u1"},"intent_seq":3,"kind":"approval","phase":"outcome","verdict":"verified"}"#
    );
    assert_eq!(
        line(Outcome::Refused { reason: "stale" }.render("approval", 3)),
        r#"{"intent_seq":3,"kind":"approval","phase":"outcome","reason":"stale","verdict":"refused"}"#
    );
}

#[test]
fn an_issued_action_id_holds_the_action_as_its_record_words_it() {
    let action = Action::ConfirmCap {
        chore: "c".into(),
        max_files: 5000,
        max_gb: 2,
        script_sha256: "dd".into(),
    };
    let intent = Event::ActionIssued {
        peer: Peer::worker(&PEER),
        action: &action,
        action_id: "a1b2",
        text_sha256: "ee",
    };
    assert_eq!(
        line(intent.render().intent()),
        r#"{"action":{"chore":"c","kind":"confirm-cap","max_files":5000,"max_gb":2,"script_sha256":"dd"},"action_id":"a1b2","kind":"action-issued","peer_pid":4242,"peer_uid":999,"phase":"intent","socket":"worker","text_sha256":"ee"}"#
    );
    assert_eq!(
        line(Outcome::Issued.render("action-issued", 4)),
        r#"{"intent_seq":4,"kind":"action-issued","phase":"outcome","verdict":"issued"}"#
    );
    assert_eq!(
        line(Outcome::NotIssued { error: "disk" }.render("action-issued", 4)),
        r#"{"error":"disk","intent_seq":4,"kind":"action-issued","phase":"outcome","verdict":"failed"}"#
    );
}

#[test]
fn prod_mode_says_who_turned_it_and_the_scan_what_it_found() {
    let source = approved();
    let off = Event::ProdMode {
        on: false,
        by: ProdModeBy::Owner(&source),
    };
    assert_eq!(
        line(off.render().intent()),
        r#"{"action_id":"a1b2","approval":"relay-signed tap","kind":"prod-mode","on":false,"phase":"intent"}"#
    );
    let findings = vec!["postgres listening".to_string()];
    let scan = Event::ProdMode {
        on: true,
        by: ProdModeBy::Scan {
            findings: &findings,
        },
    };
    assert_eq!(
        line(scan.render().intent()),
        r#"{"findings":["postgres listening"],"kind":"prod-mode","on":true,"phase":"intent","source":"scan"}"#
    );
    assert_eq!(
        line(Outcome::AlreadyOn.render("prod-mode", 8)),
        r#"{"intent_seq":8,"kind":"prod-mode","phase":"outcome","verdict":"already on"}"#
    );
    assert_eq!(
        line(Outcome::Done.render("prod-mode", 8)),
        r#"{"intent_seq":8,"kind":"prod-mode","phase":"outcome","verdict":"done"}"#
    );
    let pin = Event::PinSet {
        source: &RunSource::RootTerminal,
    };
    assert_eq!(
        line(pin.render().intent()),
        r#"{"approval":"root terminal","kind":"pin-set","phase":"intent"}"#
    );
}

#[test]
fn fences_end_with_what_was_added_and_how_many_refused() {
    let added = vec!["/srv/data".to_string()];
    let done = Outcome::Fences {
        added: &added,
        refused: 1,
        written: Ok(()),
    };
    assert_eq!(
        line(done.render("fences", 6)),
        r#"{"added":["/srv/data"],"intent_seq":6,"kind":"fences","phase":"outcome","refused":1,"verdict":"done"}"#
    );
    let failed = Outcome::Fences {
        added: &added,
        refused: 0,
        written: Err("cannot write the fence list: full"),
    };
    assert_eq!(
        line(failed.render("fences", 6)),
        r#"{"added":["/srv/data"],"intent_seq":6,"kind":"fences","phase":"outcome","reason":"cannot write the fence list: full","refused":0,"verdict":"failed"}"#
    );
    assert_eq!(
        line(Outcome::Failed { reason: "x" }.render("network-written", 6)),
        r#"{"intent_seq":6,"kind":"network-written","phase":"outcome","reason":"x","verdict":"failed"}"#
    );
}

#[test]
fn an_undo_ends_undone_with_its_counts_or_stopped_with_its_reason() {
    let restored = Restored {
        restored: 3,
        quarantined: 2,
        quarantined_added: 1,
        quarantined_replaced: 1,
        conflicts: 0,
        left_in_staging: vec![PathBuf::from("/var/.stage/fifo")],
        ..Restored::default()
    };
    let undone = Outcome::Undone {
        undo_id: "u1",
        restored: &restored,
        receipt: "undo u1 of c: 3 paths put back",
    };
    assert_eq!(
        line(undone.render("undo", 11)),
        r#"{"conflicts":0,"intent_seq":11,"kind":"undo","left_in_staging":["/var/.stage/fifo"],"phase":"outcome","quarantined":2,"receipt":"undo u1 of c: 3 paths put back","restored":3,"undo_id":"u1","verdict":"undone"}"#
    );
    let stopped = Outcome::UndoStopped {
        undo_id: "u1",
        partial: true,
        reason: "disk",
    };
    assert_eq!(
        line(stopped.render("undo", 11)),
        r#"{"intent_seq":11,"kind":"undo","phase":"outcome","reason":"disk","undo_id":"u1","verdict":"failed"}"#
    );
    let roots = vec![PathBuf::from("/var/log")];
    let intent = Event::Undo {
        undo_id: "u1",
        chore: "old-logs",
        roots: &roots,
        source: &RunSource::RootTerminal,
    };
    assert_eq!(
        line(intent.render().intent()),
        r#"{"approval":"root terminal","chore":"old-logs","kind":"undo","phase":"intent","roots":["/var/log"],"undo_id":"u1"}"#
    );
}

#[test]
fn an_install_repeats_its_origin_and_names_each_binarys_hash_by_file_name() {
    let origin = Origin::Approved {
        action_id: "a1b2".into(),
        manifest_sha256: "ff".into(),
    };
    assert_eq!(
        line(Event::ReleaseInstall { origin: &origin }.render().intent()),
        r#"{"action_id":"a1b2","kind":"release-install","origin":"approved tap","phase":"intent"}"#
    );
    let refused = Outcome::ReleaseInstall {
        origin: &Origin::Worker,
        release: None,
        end: InstallEnd::Refused { reason: "frozen" },
    };
    assert_eq!(
        line(refused.render("release-install", 12)),
        r#"{"intent_seq":12,"kind":"release-install","origin":"worker","phase":"outcome","reason":"frozen","verdict":"refused"}"#
    );
    let read = ReleaseRead {
        version: Version::parse("0.2.1").unwrap(),
        commit: None,
        manifest_sha256: "ff",
    };
    let installed = Outcome::ReleaseInstall {
        origin: &Origin::RootTerminal,
        release: Some(&read),
        end: InstallEnd::Installed {
            prune_error: Some("busy"),
            previous: None,
            worker_sha256: "11",
            warden_sha256: "22",
            restart: "asked next",
        },
    };
    assert_eq!(
        line(installed.render("release-install", 12)),
        r#"{"aromba-warden_sha256":"22","aromba_sha256":"11","commit":null,"intent_seq":12,"kind":"release-install","manifest_sha256":"ff","origin":"root terminal","phase":"outcome","previous":null,"prune_error":"busy","restart":"asked next","verdict":"installed","version":"0.2.1"}"#
    );
    let started = Event::ReleaseStarted {
        version: Version::parse("0.2.1").unwrap(),
        taken: TakenOver::Baseline { written: false },
    };
    assert_eq!(
        line(started.render()),
        r#"{"baseline":"not written","kind":"release-started","version":"0.2.1"}"#
    );
    let worker_dir = Event::ReleaseInstallRefused {
        peer: Peer::worker(&PEER),
        dir: "/tmp/x",
    };
    assert_eq!(
        line(worker_dir.render()),
        r#"{"dir":"/tmp/x","kind":"release-install","peer_pid":4242,"peer_uid":999,"socket":"worker","verdict":"refused"}"#
    );
}

#[test]
fn the_ladders_lines_carry_the_signal_the_move_and_what_a_wipe_found() {
    let signal = Signal::TooManyCommands {
        count: 61,
        window_s: 600,
        what: "commands",
    };
    let raised = Event::LadderSignal {
        peer: Some(Peer::worker(&PEER)),
        signal: &signal,
    };
    assert_eq!(
        line(raised.render()),
        r#"{"detail":"61 commands in 10 minutes","kind":"ladder-signal","peer_pid":4242,"peer_uid":999,"signal":"too-many-commands","socket":"worker"}"#
    );
    let event = crate::ladder::Event {
        id: 4,
        time: 1700000000,
        from: Step::Normal,
        to: Step::Slow,
        reason: "r".into(),
        message: "m".into(),
    };
    let moved = Event::LadderMove {
        event: &event,
        unsaved: Some("disk full"),
    };
    assert_eq!(
        line(moved.render()),
        r#"{"event_id":4,"from":"normal","kind":"ladder-move","message":"m","reason":"r","to":"slow","unsaved":"disk full"}"#
    );
    let wiped = Event::AiKeyWiped {
        path: Path::new("/home/aromba/.config/aromba/ai-key"),
        result: &Ok(Wiped::LinkRemoved),
    };
    assert_eq!(
        line(wiped.render()),
        r#"{"found":"a symbolic link: removed, not followed","kind":"ai-key-wiped","path":"/home/aromba/.config/aromba/ai-key"}"#
    );
    let overwritten = Event::AiKeyWiped {
        path: Path::new("/k"),
        result: &Ok(Wiped::Overwritten),
    };
    assert_eq!(
        line(overwritten.render()),
        r#"{"kind":"ai-key-wiped","path":"/k"}"#
    );
    let stopped = Event::RunsStopped {
        runs: 2,
        step: Step::Freeze,
    };
    assert_eq!(
        line(stopped.render()),
        r#"{"kind":"runs-stopped","runs":2,"step":"freeze"}"#
    );
}

#[test]
fn uninstall_and_rollback_told_keep_their_words() {
    assert_eq!(
        line(Event::Uninstall { purge: true }.render().intent()),
        r#"{"kind":"uninstall","origin":"root terminal","phase":"intent","purge":true}"#
    );
    let errors = vec!["userdel failed".to_string()];
    let removed = vec!["/opt/aromba".to_string()];
    let with_errors = Outcome::Uninstalled {
        removed: &removed,
        errors: &errors,
    };
    assert_eq!(
        line(with_errors.render("uninstall", 1)),
        r#"{"errors":["userdel failed"],"intent_seq":1,"kind":"uninstall","phase":"outcome","removed":["/opt/aromba"],"verdict":"uninstalled, with errors"}"#
    );
    let told = Event::RollbackTold {
        peer: Peer::worker(&PEER),
        version: "0.2.1",
        refused: Some("no rollback"),
    };
    assert_eq!(
        line(told.render()),
        r#"{"kind":"rollback-told","peer_pid":4242,"peer_uid":999,"reason":"no rollback","socket":"worker","verdict":"refused","version":"0.2.1"}"#
    );
    // Written by the binary (`aromba-warden rollback`), the Warden stopped.
    assert_eq!(
        line(
            Event::ReleaseRolledBack {
                failed: "1.1.0",
                restored: "1.0.0"
            }
            .render()
        ),
        r#"{"failed":"1.1.0","kind":"release-rolled-back","restored":"1.0.0"}"#
    );
    assert_eq!(
        super::super::rolled_back_line("1.1.0", "1.0.0"),
        Event::ReleaseRolledBack {
            failed: "1.1.0",
            restored: "1.0.0"
        }
        .render()
        .into_fields()
    );
    assert_eq!(
        line(
            Event::ReleaseRestartFailed {
                version: "1.1.0",
                error: "systemctl failed (Some(1)): no bus"
            }
            .render()
        ),
        r#"{"error":"systemctl failed (Some(1)): no bus","kind":"release-restart-failed","version":"1.1.0"}"#
    );
    let shown = Event::DryRunShown {
        peer: Peer::worker(&PEER),
        chore: "c",
        recorded: true,
    };
    assert_eq!(
        line(shown.render()),
        r#"{"chore":"c","kind":"dry-run-shown","peer_pid":4242,"peer_uid":999,"socket":"worker","verdict":"recorded"}"#
    );
    let key = Event::RelayKeyPinned {
        key_sha256: &sha256_hex(b"k"),
        source: &RunSource::RootTerminal,
    };
    assert!(
        line(key.render().intent()).starts_with(r#"{"approval":"root terminal","key_sha256":""#)
    );
}

#[test]
fn each_outcome_of_one_kind_names_the_kind_its_intent_renders_to() {
    let source = RunSource::RootTerminal;
    let action = Action::ProdModeOff;
    let tap = Approval {
        action_id: String::new(),
        button: String::new(),
        chat: String::new(),
        time: 0,
        signature: String::new(),
    };
    let peer = Peer::worker(&PEER);
    let r = report(Some(0));
    let restored = Restored::default();
    let left = RunLeft::default();
    let pairs = [
        (
            Event::ChoreRun {
                chore: "c",
                mode: Mode::Real,
                color: Color::Green,
                script_sha256: "",
                source: &source,
                undo_id: None,
                touches_quarantine: false,
            },
            Outcome::ChoreRun {
                chore: "c",
                end: RunEnd::Ran {
                    left: &left,
                    report: &r,
                    gained: &[],
                    clean: true,
                },
            },
        ),
        (
            Event::ChoreAction {
                chore: "c",
                action: "a",
                run_args: &[],
            },
            Outcome::ChoreAction {
                action: "a",
                ran: Ok(Some(0)),
            },
        ),
        (
            Event::Undo {
                undo_id: "u",
                chore: "c",
                roots: &[],
                source: &source,
            },
            Outcome::Undone {
                undo_id: "u",
                restored: &restored,
                receipt: "",
            },
        ),
        (
            Event::ActionIssued {
                peer,
                action: &action,
                action_id: "",
                text_sha256: "",
            },
            Outcome::Issued,
        ),
        (
            Event::Approval { peer, tap: &tap },
            Outcome::AlreadyAnswered,
        ),
        (
            Event::ProdMode {
                on: true,
                by: ProdModeBy::Scan { findings: &[] },
            },
            Outcome::AlreadyOn,
        ),
        (
            Event::Fences { asked: &[] },
            Outcome::Fences {
                added: &[],
                refused: 0,
                written: Ok(()),
            },
        ),
        (
            Event::Uninstall { purge: false },
            Outcome::Uninstalled {
                removed: &[],
                errors: &[],
            },
        ),
        (
            Event::ReleaseInstall {
                origin: &Origin::Worker,
            },
            Outcome::ReleaseInstall {
                origin: &Origin::Worker,
                release: None,
                end: InstallEnd::Refused { reason: "" },
            },
        ),
    ];
    for (intent, outcome) in pairs {
        assert_eq!(outcome.of_kind(), Some(intent.render().kind));
    }
    assert_eq!(Outcome::Done.of_kind(), None);
}

/// Lines of `warden/src/server/*.rs` that may put a quoted key into a
/// map, and why: none of them is a journal line.
const NOT_JOURNAL_LINES: &[(&str, &str, &str)] = &[
    (
        "owner.rs",
        r#"entry.insert("max_files".into(), Value::from(*max_files));"#,
        "the confirmed-caps state record, read back by cap_confirmed",
    ),
    (
        "owner.rs",
        r#"entry.insert("max_gb".into(), Value::from(*max_gb));"#,
        "the confirmed-caps state record",
    ),
    (
        "owner.rs",
        r#"entry.insert("script_sha256".into(), Value::from(script_sha256.as_str()));"#,
        "the confirmed-caps state record",
    ),
    (
        "owner.rs",
        r#"entry.insert("by".into(), Value::from(by));"#,
        "the confirmed-caps state record: who confirmed it",
    ),
];

/// The server's source outside this module, and the binary's (tests too:
/// they have no reason to build a journal line by hand either).
fn server_sources() -> Vec<(String, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    let mut dirs = vec![src.join("server")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                // This module is where the names are written.
                if path.file_name().is_some_and(|n| n != "event") {
                    dirs.push(path);
                }
                continue;
            }
            if path.extension().is_some_and(|e| e == "rs") {
                let name = path.strip_prefix(src.join("server")).unwrap();
                out.push((
                    name.to_string_lossy().into_owned(),
                    std::fs::read_to_string(&path).unwrap(),
                ));
            }
        }
    }
    assert!(out.len() > 10, "the server's files were not found");
    // The binary journals `aromba-warden rollback` itself, the Warden
    // stopped: its line is rendered here too.
    out.push((
        "../main.rs".into(),
        std::fs::read_to_string(src.join("main.rs")).unwrap(),
    ));
    out
}

#[test]
fn no_journal_field_is_named_outside_this_file() {
    let mut found = Vec::new();
    for (name, code) in server_sources() {
        let lines: Vec<&str> = code.lines().map(str::trim).collect();
        for (n, text) in lines.iter().enumerate() {
            // `m.insert("key"…`, `m.insert(` with `"key"…` on the next
            // line as rustfmt breaks it, or a `json!` literal.
            let next = lines.get(n + 1).copied().unwrap_or_default();
            let hit = text.contains(".insert(\"")
                || (text.ends_with(".insert(") && next.starts_with('"'))
                || text.contains("json!(");
            let excused = NOT_JOURNAL_LINES
                .iter()
                .any(|(file, allowed, _)| *file == name && allowed == text);
            if hit && !excused {
                found.push(format!("{name}:{}: {text}", n + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "a journal line's fields are written in event/ (an Event or an Outcome), not with a map at the call site:\n{}",
        found.join("\n")
    );
}

#[test]
fn every_excused_line_is_still_there() {
    let sources = server_sources();
    for (file, allowed, why) in NOT_JOURNAL_LINES {
        assert!(
            sources
                .iter()
                .any(|(name, code)| name == file && code.lines().any(|l| l.trim() == *allowed)),
            "{file} no longer holds {allowed:?} ({why}): take it off the list"
        );
    }
}

#[test]
fn an_approval_in_the_app_keeps_telegrams_signature_as_evidence() {
    let tap = AppTap {
        action_id: "a1b2",
        user_id: 4242,
        opened_at: 1700000000,
        signature: "c2ln",
    };
    let intent = Event::AppApproval {
        peer: Peer::worker(&PEER),
        tap: &tap,
    };
    assert_eq!(
        line(intent.render().intent()),
        r#"{"action_id":"a1b2","button":"approve","kind":"approval","opened_at":1700000000,"peer_pid":4242,"peer_uid":999,"phase":"intent","socket":"worker","telegram_signature":"c2ln","telegram_user":4242,"via":"app"}"#
    );
    let refused = Event::AppApprovalRefused {
        peer: Peer::worker(&PEER),
        launch_sha256: "ab",
        reason: "not signed",
    };
    assert_eq!(
        line(refused.render()),
        r#"{"kind":"approval","launch_sha256":"ab","peer_pid":4242,"peer_uid":999,"reason":"not signed","socket":"worker","verdict":"refused","via":"app"}"#
    );
    let pinned = Event::TelegramAccountPinned {
        bot_id: 7,
        user_id: 4242,
        signature: "c2ln",
        source: &RunSource::RootTerminal,
    };
    assert_eq!(
        line(pinned.render().intent()),
        r#"{"approval":"root terminal","bot_id":7,"kind":"telegram-account-pinned","phase":"intent","telegram_signature":"c2ln","telegram_user":4242}"#
    );
}
