//! What the Worker's first scan (and its weekly one) asks of the Warden:
//! prod mode on, and data folders fenced — both only ever make the Warden
//! stricter, so the Worker may ask for them with no tap — and, from the
//! root terminal, taking `network.toml` into the baseline once `aromba pair`
//! wrote it.

#![forbid(unsafe_code)]

use super::Shared;
use super::event::{Event, Outcome, ProdModeBy};
use super::intent::{Intent, intend, outcome_not_journaled};
use crate::fences::{self, MAX_FENCES, MAX_PER_FOLDER};
use crate::integrity::{Mismatch, Watched};
use aromba_warden_proto::Response;
use std::path::{Path, PathBuf};

fn refuse(reason: impl Into<String>) -> Response {
    Response::Refused {
        reason: reason.into(),
        journal_seq: None,
    }
}

/// Journals the act's `outcome`, which says `why` it did not go ahead,
/// and refuses with it.
fn refused_after(shared: &Shared, intent: &Intent, outcome: Outcome<'_>, why: &str) -> Response {
    Response::Refused {
        journal_seq: intent.outcome(shared, outcome),
        reason: why.into(),
    }
}

/// Turns prod mode on, the findings journaled with it; already on, it
/// stays as it was (its `since` too).
pub(super) fn prod_mode_on(shared: &Shared, findings: &[String]) -> Response {
    if findings.is_empty() {
        return refuse("prod mode turns on by itself only with what the scan found");
    }
    let act = Event::ProdMode {
        on: true,
        by: ProdModeBy::Scan { findings },
    };
    let intent = match intend(shared, act) {
        Ok(i) => i,
        Err(e) => return e.into(),
    };
    let now = shared.options.clock.now();
    let mut already = false;
    let changed = shared.change_state_with("prod-mode", |current| {
        already = current.is_some();
        Ok(Some(current.unwrap_or_else(|| {
            format!("on since {now}\n").into_bytes()
        })))
    });
    match changed {
        Err(e) => refused_after(shared, &intent, Outcome::Refused { reason: &e }, &e),
        Ok(()) => {
            let done = if already {
                Outcome::AlreadyOn
            } else {
                Outcome::Done
            };
            match intent.outcome(shared, done) {
                Some(journal_seq) => Response::Noted { journal_seq },
                None => outcome_not_journaled(&intent, "prod mode is on"),
            }
        }
    }
}

/// Adds the folders asked for to the fence list, each checked and resolved
/// ([`fences::check`]); the list is written whole and the baseline's hash
/// of it re-taken under the baseline's lock, after checking the list on
/// disk still matches it (a list changed by anything else is not laundered
/// into the baseline).
pub(super) fn add_fences(shared: &Shared, asked: &[String]) -> Response {
    let layout = &shared.options.layout;
    let intent = match intend(shared, Event::Fences { asked }) {
        Ok(i) => i,
        Err(e) => return e.into(),
    };
    let mut baseline = shared.baseline.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(b) = baseline.as_ref() {
        let tampered: Vec<Mismatch> = b
            .check(layout)
            .into_iter()
            .filter(|m| m.what == Watched::FenceList)
            .collect();
        if !tampered.is_empty() {
            drop(baseline);
            let why = format!(
                "the fence list does not match the baseline ({}); nothing was changed",
                crate::integrity::said(&tampered)
            );
            return refused_after(shared, &intent, Outcome::Refused { reason: &why }, &why);
        }
    }
    let current = layout.fenced_paths();
    let mut added = Vec::new();
    let mut refused = Vec::new();
    for path in asked {
        match fences::check(layout, path) {
            // Already fenced, or inside a fence (which covers it): a
            // folder asked for again and again under one fence would
            // otherwise fill the list, and the next data folder found
            // would find it full.
            Ok(p) if current.iter().chain(&added).any(|f| p.starts_with(f)) => {}
            Ok(_) if current.len() + added.len() >= MAX_FENCES => {
                refused.push(format!("{path}: the fence list is full ({MAX_FENCES})"));
            }
            Ok(p) => match crowded(&current, &added, &p) {
                None => added.push(p),
                Some(owner) => match fences::check(layout, &owner.to_string_lossy()) {
                    Ok(whole) => added.push(whole),
                    Err(why) => refused.push(format!(
                        "{path}: {} holds {MAX_PER_FOLDER} fences, and cannot be fenced whole: {why}",
                        owner.display()
                    )),
                },
            },
            Err(why) => refused.push(format!("{path}: {why}")),
        }
    }
    let written = if added.is_empty() {
        Ok(())
    } else {
        let text = fences::with_added(&current, &added);
        crate::atomic_file::replace(&layout.fences_file(), text.as_bytes(), 0o644).and_then(|()| {
            match baseline.as_mut() {
                Some(b) => {
                    let mut next = b.clone();
                    next.retake_fences(layout)?;
                    // On disk first, as `state::change` does.
                    next.write(layout)?;
                    *b = next;
                    Ok(())
                }
                None => Ok(()),
            }
        })
    };
    drop(baseline);
    let added: Vec<String> = added
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let written = written.map_err(|e| format!("cannot write the fence list: {e}"));
    let fenced = Outcome::Fences {
        added: &added,
        refused: refused.len(),
        written: written.as_ref().map(|_| ()).map_err(String::as_str),
    };
    let journal_seq = intent.outcome(shared, fenced);
    if let Err(why) = written {
        return Response::Refused {
            reason: why,
            journal_seq,
        };
    }
    Response::Fenced {
        added,
        refused,
        journal_seq,
    }
}

/// The folder `p` is in, when it holds [`MAX_PER_FOLDER`] fences already
/// (see [`fences::owner_folder`]).
fn crowded(current: &[PathBuf], added: &[PathBuf], p: &Path) -> Option<PathBuf> {
    let owner = fences::owner_folder(p)?;
    let held = current
        .iter()
        .chain(added)
        .filter(|f| f.starts_with(&owner))
        .count();
    (held >= MAX_PER_FOLDER).then_some(owner)
}

/// `aromba pair` wrote the Worker's `network.toml`: its hash in the
/// baseline is re-taken (the root terminal vouches for the file as it is).
pub(super) fn network_written(shared: &Shared) -> Response {
    let layout = &shared.options.layout;
    let file = layout.network_file();
    let intent = match intend(shared, Event::NetworkWritten { file: &file }) {
        Ok(i) => i,
        Err(e) => return e.into(),
    };
    let mut baseline = shared.baseline.lock().unwrap_or_else(|p| p.into_inner());
    let result = match baseline.as_mut() {
        None => Ok(()),
        Some(b) => {
            let mut next = b.clone();
            next.retake_network(layout)
                .and_then(|()| next.write(layout))
                .map(|()| *b = next)
        }
    };
    drop(baseline);
    match result {
        Ok(()) => match intent.outcome(shared, Outcome::Done) {
            Some(journal_seq) => Response::Noted { journal_seq },
            None => outcome_not_journaled(&intent, "network.toml is in the baseline"),
        },
        Err(e) => {
            let why = format!("cannot re-take the baseline: {e}");
            refused_after(shared, &intent, Outcome::Failed { reason: &why }, &why)
        }
    }
}
