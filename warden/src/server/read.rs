//! The read path: policy, exec, redaction, one journal line, answer. The
//! request was counted and paced before it was decoded (`pace.rs`).

#![forbid(unsafe_code)]

use super::event::{Event, Peer, ReadRun, ReadVerdict};
use super::{Shared, journal, raise, unjournaled};
use crate::exec::{self, Bounds};
use crate::journal::sha256_hex;
use crate::policy::{self, Table};
use crate::system::PeerCred;
use aromba_warden_proto::Response;

/// The read's journal line.
fn read_line<'a>(
    peer: &'a PeerCred,
    cmd: &'a str,
    args: &'a [String],
    verdict: ReadVerdict<'a>,
) -> Event<'a> {
    Event::Read {
        peer: Peer::worker(peer),
        cmd,
        args,
        verdict,
    }
}

/// An allowed read that could not run: journaled, then answered as an error.
fn failed(
    shared: &Shared,
    peer: &PeerCred,
    (cmd, args): (&str, &[String]),
    rule: &str,
    e: &exec::ExecError,
) -> Response {
    let error = e.to_string();
    let verdict = ReadVerdict::Failed {
        rule,
        error: &error,
    };
    match journal(shared, read_line(peer, cmd, args, verdict)) {
        Some(_) => Response::Error { message: error },
        None => unjournaled(),
    }
}

pub(super) fn read(shared: &Shared, peer: &PeerCred, cmd: String, args: Vec<String>) -> Response {
    let verdict = shared
        .options
        .requester()
        .map_err(|e| policy::Refused {
            reason: format!("the Worker's groups cannot be read ({e}), so no path can be judged"),
            signal: None,
        })
        .and_then(|requester| policy::check(Table::Allow, &cmd, &args, &requester));
    let allowed = match verdict {
        Ok(a) => a,
        Err(refused) => {
            let verdict = ReadVerdict::Refused {
                reason: &refused.reason,
            };
            let seq = journal(shared, read_line(peer, &cmd, &args, verdict));
            if let Some(signal) = refused.signal.clone() {
                raise(shared, Some(peer), signal);
            }
            return match seq {
                Some(seq) => Response::Refused {
                    reason: refused.reason,
                    journal_seq: Some(seq),
                },
                None => unjournaled(),
            };
        }
    };
    let rule = allowed.rule;
    let rule_name = allowed.rule_name();
    let asked = (cmd.as_str(), args.as_slice());
    let bin = match exec::pick_binary(rule.cmd, rule.bins) {
        Ok(b) => b,
        Err(e) => return failed(shared, peer, asked, &rule_name, &e),
    };
    let bounds = Bounds::for_rule(rule);
    let env = exec::rule_env(rule);
    let slot = shared.running.take();
    let outcome = exec::run_program(&bin, &allowed.args, &env, &bounds);
    drop(slot);
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => return failed(shared, peer, asked, &rule_name, &e),
    };
    // Exec hands out output only redacted (as cut when it killed the run).
    let (stdout, stderr) = (&outcome.stdout, &outcome.stderr);
    let counts = outcome.redactions();
    let duration_ms = u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX);
    // The journal binds to exactly the redacted bytes the Worker got.
    let (stdout_sha256, stderr_sha256) = (sha256_hex(stdout.text()), sha256_hex(stderr.text()));
    let ran = ReadRun {
        rule: &rule_name,
        bin: &bin,
        run_args: &allowed.args,
        exit_code: outcome.exit_code,
        signal: outcome.signal,
        bytes_out: stdout.text().len() + stderr.text().len(),
        cut: outcome.cut,
        timed_out: outcome.timed_out,
        redactions: &counts,
        stdout_sha256: &stdout_sha256,
        stderr_sha256: &stderr_sha256,
        duration_ms,
    };
    let line = read_line(peer, &cmd, &args, ReadVerdict::Allowed(ran));
    let Some(journal_seq) = journal(shared, line) else {
        return unjournaled();
    };
    Response::Result(outcome.into_result(journal_seq))
}
