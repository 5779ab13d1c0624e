//! `aromba-warden journal verify`: recomputes the chain across the rotated
//! files (decompressing them) and stops at the first break, naming it.

#![forbid(unsafe_code)]

use super::files::{read_journal_file, rotated_count};
use super::{AuditKey, DROPPED_EVENT, GENESIS, mac_matches, rotated, sha256_hex, split_mac};
use serde_json::Value;
use std::fmt;
use std::path::{Path, PathBuf};

/// A verified journal: how many lines, and the chain's first and last seq.
#[derive(Debug, PartialEq, Eq)]
pub struct VerifyReport {
    pub files: usize,
    pub lines: u64,
    pub first_seq: u64,
    pub last_seq: u64,
    pub head_hash: String,
    pub macs: bool,
    /// Lines before `first_seq` that rotation dropped, as the chain records:
    /// history no longer on this host.
    pub lines_gone: u64,
}

impl fmt::Display for VerifyReport {
    /// What a person needs first: whether anything is gone, and how much.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.lines_gone == 0 {
            write!(f, "journal whole from its first line: ")?;
        } else {
            write!(
                f,
                "journal intact from seq {}, but the {} earlier lines were rotated away (the chain records dropping them): ",
                self.first_seq, self.lines_gone
            )?;
        }
        write!(
            f,
            "{} lines in {} files, seq {}..{}, head {}{}",
            self.lines,
            self.files,
            self.first_seq,
            self.last_seq,
            self.head_hash,
            if self.macs { ", HMACs verified" } else { "" }
        )
    }
}

/// The first break: where, and what.
#[derive(Debug, PartialEq, Eq)]
pub struct VerifyError {
    pub file: PathBuf,
    pub line: usize,
    pub what: String,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} line {}: {}",
            self.file.display(),
            self.line,
            self.what
        )
    }
}

impl std::error::Error for VerifyError {}

/// Verifies the journal whose current file is `path`, oldest rotated file
/// first. Without a key, a line carrying a MAC is a break: it cannot be
/// checked, and a chain that cannot be checked is not accepted.
pub fn verify(path: &Path, key: Option<&AuditKey>) -> Result<VerifyReport, VerifyError> {
    let mut files: Vec<PathBuf> = (1..=rotated_count(path))
        .rev()
        .map(|k| rotated(path, k))
        .collect();
    if path.exists() || files.is_empty() {
        files.push(path.to_path_buf());
    }
    let mut report = VerifyReport {
        files: 0,
        lines: 0,
        first_seq: 0,
        last_seq: 0,
        head_hash: GENESIS.to_string(),
        macs: key.is_some(),
        lines_gone: 0,
    };
    let mut prev_hash: Option<String> = None;
    let mut prev_seq: Option<u64> = None;
    let mut dropped_through = 0u64;
    let mut oldest_line: Option<PathBuf> = None;
    for file in &files {
        let err = |line: usize, what: String| VerifyError {
            file: file.clone(),
            line,
            what,
        };
        let text = read_journal_file(file).map_err(|e| err(0, format!("cannot read: {e}")))?;
        report.files += 1;
        if text.is_empty() {
            continue;
        }
        if !text.ends_with(b"\n") {
            let n = text.iter().filter(|&&b| b == b'\n').count() + 1;
            return Err(err(n, "the line is incomplete (no line break)".into()));
        }
        let text = std::str::from_utf8(&text).map_err(|e| err(0, format!("not UTF-8: {e}")))?;
        for (i, line) in text[..text.len() - 1].split('\n').enumerate() {
            let n = i + 1;
            let (body, mac) = split_mac(line);
            match (key, mac) {
                (Some(key), Some(mac)) => {
                    if !mac_matches(key, &body, mac) {
                        return Err(err(
                            n,
                            "the HMAC does not match: the line was changed or the key is wrong"
                                .into(),
                        ));
                    }
                }
                (Some(_), None) => {
                    return Err(err(
                        n,
                        "the line has no HMAC, but an audit key is configured".into(),
                    ));
                }
                (None, Some(_)) => {
                    return Err(err(
                        n,
                        "the line carries an HMAC; verifying it needs the audit key (--key FILE)"
                            .into(),
                    ));
                }
                (None, None) => {}
            }
            let value: Value =
                serde_json::from_str(line).map_err(|e| err(n, format!("not a JSON line: {e}")))?;
            let seq = value
                .get("seq")
                .and_then(Value::as_u64)
                .ok_or_else(|| err(n, "no seq".into()))?;
            let prev = value
                .get("prev")
                .and_then(Value::as_str)
                .ok_or_else(|| err(n, "no prev".into()))?;
            match (prev_seq, &prev_hash) {
                (Some(ps), Some(ph)) => {
                    if seq != ps + 1 {
                        return Err(err(
                            n,
                            format!(
                                "seq {seq} follows seq {ps}: a line was inserted, deleted or moved"
                            ),
                        ));
                    }
                    if prev != ph {
                        return Err(err(
                            n,
                            format!(
                                "seq {seq}: prev does not match the line before: it was changed"
                            ),
                        ));
                    }
                }
                _ => {
                    // The oldest line kept. Its predecessor is known only
                    // when it is the very first line of the chain.
                    if seq == 1 && prev != GENESIS {
                        return Err(err(n, "seq 1 must have the genesis prev".into()));
                    }
                    report.first_seq = seq;
                    oldest_line = Some(file.clone());
                }
            }
            if value.get("event").and_then(Value::as_str) == Some(DROPPED_EVENT) {
                let through = value
                    .get("through_seq")
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                dropped_through = dropped_through.max(through);
            }
            prev_seq = Some(seq);
            prev_hash = Some(sha256_hex(line.as_bytes()));
            report.lines += 1;
            report.last_seq = seq;
        }
    }
    // Rotation records what it drops; a chain that starts later than that
    // lost lines at its start.
    if let Some(file) = oldest_line
        && report.first_seq != dropped_through + 1
    {
        return Err(VerifyError {
            file,
            line: 1,
            what: format!(
                "the chain starts at seq {}, but the journal records dropping lines only through seq {dropped_through}: lines were deleted from its start",
                report.first_seq
            ),
        });
    }
    report.lines_gone = report.first_seq.saturating_sub(1);
    if let Some(h) = prev_hash {
        report.head_hash = h;
    }
    Ok(report)
}
