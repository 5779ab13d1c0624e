//! The catalogue's gate: every item in it is used by the Worker, and the
//! Worker's chat code writes no sentence of its own — a reviewer who reads
//! `aromba-words` has read everything the Worker says in the chat.
//!
//! Sources are read as Rust tokens (`proc-macro2`), so comments are not
//! strings, a doc comment is an attribute, and a string is found whole
//! however it is quoted. Test code is left out: a file's `#[cfg(test)]`
//! module (always its last item here) and the test-only files.

use proc_macro2::{Delimiter, TokenStream, TokenTree};
use std::path::{Path, PathBuf};
use std::str::FromStr;

fn agent() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The `.rs` files under `dir`, recursively, without test-only files.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("a directory entry").path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if path.is_dir() {
                dirs.push(path);
            } else if name.ends_with(".rs")
                && !name.ends_with("_tests.rs")
                && name != "injection_suite.rs"
                && name != "tests.rs"
            {
                found.push(path);
            }
        }
    }
    found.sort();
    assert!(!found.is_empty(), "no sources under {}", dir.display());
    found
}

/// A file's code without its tests: everything before `#[cfg(test)]`.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    match text.find("#[cfg(test)]") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// How often `name` appears as a whole identifier in `text`.
fn mentions(text: &str, name: &str) -> usize {
    text.match_indices(name)
        .filter(|(at, _)| {
            let before = text[..*at].chars().next_back();
            let after = text[at + name.len()..].chars().next();
            !before.is_some_and(is_ident_char) && !after.is_some_and(is_ident_char)
        })
        .count()
}

/// The public items of a catalogue file: `pub const X`, `pub fn x`,
/// `pub struct X`.
fn items(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    for line in text.lines() {
        let line = line.trim_start();
        for head in ["pub const ", "pub fn ", "pub struct "] {
            if let Some(rest) = line.strip_prefix(head) {
                let name: String = rest.chars().take_while(|c| is_ident_char(*c)).collect();
                names.push(name);
            }
        }
    }
    names
}

#[test]
fn every_item_of_the_catalogue_is_used_by_the_worker() {
    let catalogue: Vec<(PathBuf, String)> = sources(&agent().join("words/src"))
        .into_iter()
        .map(|p| {
            let c = code(&p);
            (p, c)
        })
        .collect();
    let worker: String = sources(&agent().join("src"))
        .iter()
        .map(|p| code(p))
        .collect::<Vec<_>>()
        .join("\n");
    let words: String = catalogue
        .iter()
        .map(|(_, c)| c.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let mut unused = Vec::new();
    let mut seen = 0;
    for (path, text) in &catalogue {
        for name in items(text) {
            seen += 1;
            // Its definition is one mention in the catalogue; a use is
            // another there (a sentence made of another) or one in the
            // Worker's code.
            if mentions(&worker, &name) == 0 && mentions(&words, &name) < 2 {
                unused.push(format!("{}: {name}", path.display()));
            }
        }
    }
    assert!(
        seen > 100,
        "only {seen} items found: is the catalogue read?"
    );
    assert!(unused.is_empty(), "said nowhere:\n{}", unused.join("\n"));
}

/// Strings in the Worker's chat code that are sentences, yet are not said
/// in the chat: each with why.
const NOT_SAID_IN_THE_CHAT: &[(&str, &str, &str)] = &[
    (
        "daemon/start.rs",
        "",
        "the Worker's start: errors for the terminal or its journal, before there is a chat",
    ),
    (
        "daemon/chat.rs",
        "could not be found",
        "systemctl's words for a missing unit, matched, not said",
    ),
    (
        "health/mod.rs",
        "is not installed here",
        "the Warden's words for a missing program, matched, not said",
    ),
    (
        "health/mod.rs",
        "not been booted with systemd",
        "systemctl's words on a server without systemd, matched, not said",
    ),
];

/// Whether a string literal reads as a sentence: three words or more.
fn is_sentence(literal: &str) -> bool {
    literal
        .split_whitespace()
        .filter(|w| w.chars().filter(|c| c.is_alphabetic()).count() >= 2)
        .count()
        >= 3
}

/// The string literals of `tokens` outside attributes (doc comments,
/// `#[error(…)]`) and log macros (`tracing::info!(…)`, `warn!(…)`, …).
fn literals(tokens: TokenStream, out: &mut Vec<String>) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            TokenTree::Punct(p) if p.as_char() == '#' => {
                // `#[…]` or `#![…]`: skip the attribute.
                i += 1;
                if matches!(tokens.get(i), Some(TokenTree::Punct(p)) if p.as_char() == '!') {
                    i += 1;
                }
                if matches!(tokens.get(i), Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Bracket)
                {
                    i += 1;
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
                if text.starts_with('"') || text.starts_with('r') {
                    out.push(text);
                }
            }
            _ => {}
        }
        i += 1;
    }
}

#[test]
fn the_workers_chat_code_writes_no_sentence_outside_the_catalogue() {
    let src = agent().join("src");
    let mut files = sources(&src.join("daemon"));
    files.extend(sources(&src.join("health")));
    let mut written = Vec::new();
    let mut read = 0;
    for path in &files {
        let rel = path
            .strip_prefix(&src)
            .expect("under src")
            .to_string_lossy()
            .to_string();
        let tokens = TokenStream::from_str(&code(path))
            .unwrap_or_else(|e| panic!("{rel} does not read as Rust: {e}"));
        let mut found = Vec::new();
        literals(tokens, &mut found);
        read += found.len();
        for literal in found {
            let excused = NOT_SAID_IN_THE_CHAT
                .iter()
                .any(|(file, part, _)| *file == rel && literal.contains(part));
            if is_sentence(&literal) && !excused {
                written.push(format!("{rel}: {literal}"));
            }
        }
    }
    assert!(
        read > 150,
        "only {read} strings read: are the sources read?"
    );
    assert!(
        written.is_empty(),
        "sentences written outside aromba-words (put them in the catalogue, or say in \
         NOT_SAID_IN_THE_CHAT why they are not said in the chat):\n{}",
        written.join("\n")
    );
}

#[test]
fn the_gate_sees_a_sentence_in_a_format_and_not_in_a_log_line_or_a_comment() {
    let source = r##"
        /// A doc comment says many words here.
        fn f(daemon: &Daemon) {
            // A comment says many words too.
            tracing::warn!(error = %e, "a log line with many words");
            daemon.say(format!("There is no chore called {name}."), vec![]);
            daemon.say(r#"A raw string with words"#.into(), vec![]);
            let key = "ladder_step";
        }
    "##;
    let mut found = Vec::new();
    literals(TokenStream::from_str(source).expect("Rust"), &mut found);
    let sentences: Vec<&String> = found.iter().filter(|l| is_sentence(l)).collect();
    assert_eq!(
        sentences,
        [
            "\"There is no chore called {name}.\"",
            "r#\"A raw string with words\"#"
        ]
    );
}

#[test]
fn a_use_is_a_whole_identifier_and_an_item_is_a_public_one() {
    assert_eq!(mentions("BUSY; busy_for(); BUSYNESS; X::BUSY", "BUSY"), 2);
    assert_eq!(
        items("pub const A: &str = \"\";\nconst B: u8 = 1;\n    pub fn c() {}\npub struct D;"),
        ["A", "c", "D"]
    );
}
