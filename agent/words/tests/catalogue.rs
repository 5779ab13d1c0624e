//! The catalogue's gate: every item in it is used by the Worker, and the
//! Worker's chat code writes no sentence of its own — a reviewer who reads
//! `aromba-words` has read everything the Worker says in the chat.
//!
//! How a source is read is `gate/mod.rs`, shared with the attacks on the
//! gate (`adversarial_catalogue_gate.rs`).

mod gate;

use gate::{agent, code, sources};
use std::path::{Path, PathBuf};

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
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
            let c = code(&read(&p));
            (p, c)
        })
        .collect();
    let worker: String = sources(&agent().join("src"))
        .iter()
        .map(|p| code(&read(p)))
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

#[test]
fn the_workers_chat_code_writes_no_sentence_outside_the_catalogue() {
    let src = agent().join("src");
    let mut files = sources(&src.join("daemon"));
    files.extend(sources(&src.join("health")));
    let mut written = Vec::new();
    for path in &files {
        let rel = path
            .strip_prefix(&src)
            .expect("under src")
            .to_string_lossy()
            .to_string();
        let text = std::fs::read_to_string(path).expect("a source");
        let found = gate::sentences_in(&rel, &text).unwrap_or_else(|e| panic!("{e}"));
        written.extend(found.into_iter().map(|l| format!("{rel}: {l}")));
    }
    assert!(files.len() > 10, "only {} files read", files.len());
    assert!(
        written.is_empty(),
        "sentences written outside aromba-words (put them in the catalogue, or say in \
         gate::NOT_SAID_IN_THE_CHAT why they are not said in the chat):\n{}",
        written.join("\n")
    );
}

/// A sentence as the gate compares it: without its quotes, its case and
/// its closing full stop, so "The Warden …." and "the Warden …" are one.
fn as_compared(literal: &str) -> String {
    literal
        .trim_matches('"')
        .trim_end_matches('.')
        .to_lowercase()
}

/// Each thing is said by one item: a sentence written twice in the
/// catalogue is two items that drift apart (found in review: the anchor's
/// "could not be asked" and the assistant tool's were one sentence, and a
/// read's odd answer was the chat's in lower case).
#[test]
fn no_sentence_is_written_twice_in_the_catalogue() {
    let mut first_seen: std::collections::BTreeMap<String, String> = Default::default();
    let mut twice = Vec::new();
    let files = sources(&agent().join("words/src"));
    for path in &files {
        let tokens: proc_macro2::TokenStream = read(path)
            .parse()
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut found = Vec::new();
        gate::literals(tokens, &mut found);
        for literal in found.into_iter().filter(|l| gate::is_sentence(l)) {
            let at = path.display().to_string();
            if let Some(before) = first_seen.insert(as_compared(&literal), at.clone()) {
                twice.push(format!("{literal}: in {before} and {at}"));
            }
        }
    }
    assert!(
        first_seen.len() > 100,
        "only {} sentences read",
        first_seen.len()
    );
    assert!(twice.is_empty(), "said twice:\n{}", twice.join("\n"));
}

/// A button's label is chat text however short: every `Button::new` in the
/// Worker's chat code takes its label from the catalogue, none written in
/// place (found by the attack round: "Undo" was).
#[test]
fn no_button_label_is_written_outside_the_catalogue() {
    let src = agent().join("src");
    let mut files = sources(&src.join("daemon"));
    files.extend(sources(&src.join("health")));
    let mut written = Vec::new();
    let mut calls = 0;
    for path in &files {
        let text = code(&read(path));
        for (at, _) in text.match_indices("Button::new(") {
            calls += 1;
            let call: String = text[at..].chars().take_while(|c| *c != ';').collect();
            if call.contains('"') {
                written.push(format!("{}: {call}", path.display()));
            }
        }
    }
    assert!(calls > 0, "no button made: is the code read?");
    assert!(
        written.is_empty(),
        "labels written in place:\n{}",
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
        #[cfg(test)]
        mod tests {
            const SAID_IN_A_TEST: &str = "a sentence only a test says";
        }
    "##;
    assert_eq!(
        gate::sentences_in("daemon/example.rs", source).expect("Rust"),
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
