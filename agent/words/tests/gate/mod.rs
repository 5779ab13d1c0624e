//! How the catalogue's gate reads the Worker's sources, shared by the gate
//! (`tests/catalogue.rs`) and the attacks on it
//! (`tests/adversarial_catalogue_gate.rs`), so both judge by one copy.
//!
//! Sources are read as Rust tokens (`proc-macro2`): comments are not
//! strings, a doc comment is an attribute, a string is found whole however
//! it is quoted. Left out: items marked `#[cfg(test)]` (wherever they are
//! in a file), other attributes (but `#[error("…")]`, whose words an
//! error's `Display` says), and log macros (`trace!` … `error!`).

#![allow(dead_code)]

use proc_macro2::{Delimiter, TokenStream, TokenTree};
use std::path::{Path, PathBuf};
use std::str::FromStr;

pub fn agent() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The `.rs` files under `dir`, recursively, without test-only files.
pub fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("a directory entry").path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if path.is_dir() {
                dirs.push(path);
            } else if name.ends_with(".rs") && !name.ends_with("_tests.rs") && name != "tests.rs" {
                found.push(path);
            }
        }
    }
    found.sort();
    assert!(!found.is_empty(), "no sources under {}", dir.display());
    found
}

/// A file's text before its first `#[cfg(test)]`: what the "used" check
/// searches (a use only in tests is no use).
pub fn code(text: &str) -> String {
    match text.find("#[cfg(test)]") {
        Some(at) => text[..at].to_string(),
        None => text.to_string(),
    }
}

/// Strings in the Worker's chat code that read as sentences yet are not
/// said in the chat, each exactly as written in its file, with why.
pub const NOT_SAID_IN_THE_CHAT: &[(&str, &str, &str)] = &[
    (
        "daemon/chat.rs",
        "\"could not be found\"",
        "systemctl's words for a missing unit, matched, not said",
    ),
    (
        "health/mod.rs",
        "\"is not installed here\"",
        "the Warden's words for a missing program, matched, not said",
    ),
    (
        "health/mod.rs",
        "\"not been booted with systemd\"",
        "systemctl's words on a server without systemd, matched, not said",
    ),
    (
        "daemon/scan.rs",
        "\"the read budget is spent\"",
        "why a scan waits: logged, never said",
    ),
    (
        "daemon/scan.rs",
        "\"cannot ask the Warden: {0}\"",
        "why a scan waits: logged, never said",
    ),
    (
        "daemon/scan.rs",
        "\"cannot ask the Warden to fence: {0}\"",
        "why a scan waits: logged, never said",
    ),
];

/// Files whose strings are never said in the chat, with why.
pub const NOT_CHAT_FILES: &[(&str, &str)] = &[(
    "daemon/start.rs",
    "the Worker's start: errors for the terminal or its journal, before there is a chat",
)];

/// Whether a string literal (as written, quotes and escapes included)
/// reads as a sentence: three words or more, the `\n`, `\t` and `\u{20}`
/// escapes counting as spaces.
pub fn is_sentence(literal: &str) -> bool {
    literal
        .replace("\\n", " ")
        .replace("\\t", " ")
        .replace("\\u{20}", " ")
        .split_whitespace()
        .filter(|w| w.chars().filter(|c| c.is_alphabetic()).count() >= 2)
        .count()
        >= 3
}

fn is_cfg_test(attribute: &proc_macro2::Group) -> bool {
    attribute
        .stream()
        .to_string()
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect::<String>()
        == "cfg(test)"
}

fn is_error_attribute(attribute: &proc_macro2::Group) -> bool {
    matches!(attribute.stream().into_iter().next(), Some(TokenTree::Ident(id)) if id == "error")
}

/// The string literals of `tokens` the gate judges.
pub fn literals(tokens: TokenStream, out: &mut Vec<String>) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            TokenTree::Punct(p) if p.as_char() == '#' => {
                i += 1;
                if matches!(tokens.get(i), Some(TokenTree::Punct(p)) if p.as_char() == '!') {
                    i += 1;
                }
                let Some(TokenTree::Group(attribute)) = tokens.get(i) else {
                    continue;
                };
                if attribute.delimiter() != Delimiter::Bracket {
                    continue;
                }
                i += 1;
                if is_error_attribute(attribute) {
                    literals(attribute.stream(), out);
                } else if is_cfg_test(attribute) {
                    // The item it marks: up to its body or its `;`.
                    while let Some(t) = tokens.get(i) {
                        i += 1;
                        match t {
                            TokenTree::Group(g) if g.delimiter() == Delimiter::Brace => break,
                            TokenTree::Punct(p) if p.as_char() == ';' => break,
                            _ => {}
                        }
                    }
                }
                continue;
            }
            TokenTree::Ident(id)
                if ["trace", "debug", "info", "warn", "error"]
                    .contains(&id.to_string().as_str())
                    && matches!(tokens.get(i + 1), Some(TokenTree::Punct(p)) if p.as_char() == '!') =>
            {
                i += 3;
                continue;
            }
            TokenTree::Group(g) => literals(g.stream(), out),
            TokenTree::Literal(l) => {
                let text = l.to_string();
                if text.starts_with(['"', 'r', 'b']) && text.contains('"') {
                    out.push(text);
                }
            }
            _ => {}
        }
        i += 1;
    }
}

/// The sentences in `source` (file `rel`, relative to `agent/src`) the gate
/// finds, after its excuses; an error when the source does not read as
/// Rust.
pub fn sentences_in(rel: &str, source: &str) -> Result<Vec<String>, String> {
    if NOT_CHAT_FILES.iter().any(|(file, _)| *file == rel) {
        return Ok(Vec::new());
    }
    let tokens = TokenStream::from_str(source).map_err(|e| format!("{rel}: {e}"))?;
    let mut found = Vec::new();
    literals(tokens, &mut found);
    Ok(found
        .into_iter()
        .filter(|l| {
            let excused = NOT_SAID_IN_THE_CHAT
                .iter()
                .any(|(file, exact, _)| *file == rel && l == exact);
            is_sentence(l) && !excused
        })
        .collect())
}
