//! The read path: policy, exec, redaction, one journal line, answer. The
//! request was counted and paced before it was decoded (`pace.rs`).

#![forbid(unsafe_code)]

use super::{Shared, Socket, journal, peer_fields, raise, unjournaled};
use crate::exec::{self, Bounds};
use crate::journal::sha256_hex;
use crate::policy::{self, Table};
use crate::system::PeerCred;
use aromba_warden_proto::{ReadResult, Response};
use serde_json::{Map, Value};

pub(super) fn request_fields(peer: &PeerCred, cmd: &str, args: &[String]) -> Map<String, Value> {
    let mut m = peer_fields(peer, Socket::Worker);
    m.insert("cmd".into(), Value::from(cmd));
    m.insert("args".into(), Value::from(args.to_vec()));
    m
}

/// An allowed read that could not run: journaled, then answered as an error.
pub(super) fn failed(shared: &Shared, mut m: Map<String, Value>, e: &exec::ExecError) -> Response {
    m.insert("verdict".into(), Value::from("failed"));
    m.insert("error".into(), Value::from(e.to_string()));
    match journal(shared, "read", m) {
        Some(_) => Response::Error {
            message: e.to_string(),
        },
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
            let mut m = request_fields(peer, &cmd, &args);
            m.insert("verdict".into(), Value::from("refused"));
            m.insert("reason".into(), Value::from(refused.reason.as_str()));
            let seq = journal(shared, "read", m);
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
    let mut m = request_fields(peer, &cmd, &args);
    m.insert("rule".into(), Value::from(allowed.rule_name()));
    let bin = match exec::pick_binary(rule.cmd, rule.bins) {
        Ok(b) => b,
        Err(e) => return failed(shared, m, &e),
    };
    let bounds = Bounds::for_rule(rule);
    let env = exec::rule_env(rule);
    let slot = shared.running.take();
    let outcome = exec::run_program(&bin, &allowed.args, &env, &bounds);
    drop(slot);
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => return failed(shared, m, &e),
    };
    // Exec hands out output only redacted (as cut when it killed the run).
    let (stdout, stderr) = (&outcome.stdout, &outcome.stderr);
    let mut counts: Vec<(String, u64)> = Vec::new();
    for class in aromba_redact::Class::ALL {
        let n = u64::from(stdout.counts().get(class)) + u64::from(stderr.counts().get(class));
        if n > 0 {
            counts.push((class.name().to_string(), n));
        }
    }
    let duration_ms = u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX);
    m.insert("verdict".into(), Value::from("allowed"));
    m.insert("bin".into(), Value::from(bin.to_string_lossy().as_ref()));
    m.insert("run_args".into(), Value::from(allowed.args.clone()));
    m.insert(
        "exit_code".into(),
        outcome.exit_code.map_or(Value::Null, Value::from),
    );
    m.insert(
        "signal".into(),
        outcome.signal.map_or(Value::Null, Value::from),
    );
    m.insert(
        "bytes_out".into(),
        Value::from(stdout.text().len() + stderr.text().len()),
    );
    m.insert("cut".into(), Value::from(outcome.cut));
    m.insert("timed_out".into(), Value::from(outcome.timed_out));
    m.insert(
        "redactions".into(),
        Value::Object(
            counts
                .iter()
                .map(|(k, n)| (k.clone(), Value::from(*n)))
                .collect(),
        ),
    );
    // The journal binds to exactly the redacted bytes the Worker got.
    m.insert(
        "stdout_sha256".into(),
        Value::from(sha256_hex(stdout.text())),
    );
    m.insert(
        "stderr_sha256".into(),
        Value::from(sha256_hex(stderr.text())),
    );
    m.insert("duration_ms".into(), Value::from(duration_ms));
    let Some(journal_seq) = journal(shared, "read", m) else {
        return unjournaled();
    };
    Response::Result(ReadResult {
        exit_code: outcome.exit_code,
        signal: outcome.signal,
        stdout: outcome.stdout.into_text(),
        stderr: outcome.stderr.into_text(),
        cut: outcome.cut,
        timed_out: outcome.timed_out,
        redactions: counts,
        journal_seq,
        duration_ms,
    })
}
