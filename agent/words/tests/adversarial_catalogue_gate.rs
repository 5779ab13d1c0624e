//! Attacks on the catalogue's gate (`tests/catalogue.rs`,
//! `the_workers_chat_code_writes_no_sentence_outside_the_catalogue`): ways
//! a sentence the Worker says in the chat can be written outside
//! `aromba-words` without the gate seeing it, each judged by the gate's
//! own reading of a source (`gate/mod.rs`, one copy with the gate).
//!
//! An attack the gate holds (or was fixed to hold) is a plain test; one
//! that still gets past is `#[ignore]`d, marked LIMIT or KNOWN with why it
//! is left.

mod gate;

use gate::{agent, code, is_sentence, literals};
use proc_macro2::{Delimiter, TokenStream, TokenTree};
use std::str::FromStr;

/// The sentences the gate finds in `source`, as file `rel` (relative to
/// `agent/src`); a source that does not read as Rust fails the gate
/// loudly, so a sentence there is as good as seen.
fn gate_sees(rel: &str, source: &str) -> Vec<String> {
    gate::sentences_in(rel, source)
        .unwrap_or_else(|_| vec!["(the gate fails: the code does not read as Rust)".into()])
}

fn gate_sees_it(source: &str) -> bool {
    !gate_sees("daemon/example.rs", source).is_empty()
}

// ---------------------------------------------------------------------
// What the gate holds
// ---------------------------------------------------------------------

/// A sentence across a `\` line continuation is one literal, read whole;
/// raw strings of any number of hashes, a sentence nested in `vec!`,
/// `format!`, `Some(…)`, a closure, a `const` array, a `match` arm: all
/// seen.
#[test]
fn continuations_raw_strings_and_nesting_are_seen() {
    let mut missed: Vec<&str> = Vec::new();
    for source in [
        "fn f(d: &D) { d.say(\"The disk is \\\n        nearly full.\".into()); }",
        "fn f(d: &D) { d.say(r###\"The disk is \"#nearly\"## full\"###.into()); }",
        "fn f(d: &D) { d.say(vec![Some(format!(\"{x} is nearly full now\"))]); }",
        "fn f(d: &D) { let g = || \"The disk is full\"; d.say(g()); }",
        "const LINES: [&str; 1] = [\"The disk is full\"];",
        "fn f(x: u8) -> &'static str { match x { 0 => \"The disk is full\", _ => \"\" } }",
        "fn f(d: &D) { d.say(concat!(\"The disk is \", \"nearly full\").into()); }",
    ] {
        missed.extend((!gate_sees_it(source)).then_some(source));
    }
    assert!(missed.is_empty(), "not seen: {missed:#?}");
}

/// A `#[cfg(test)]` inside an item (a test-only field) cuts the file in
/// the middle of its braces: the gate cannot read it and fails, loudly.
#[test]
fn a_cfg_test_inside_an_item_makes_the_gate_fail_loudly() {
    let source = "struct S {\n    #[cfg(test)]\n    seen: u8,\n}\nfn f(d: &D) { d.say(\"The disk is full, and nothing was cleaned.\"); }";
    assert!(TokenStream::from_str(&code(source)).is_err());
    assert!(gate_sees_it(source));
}

/// A log line is left out only when it is the macro's own argument list:
/// a sentence after the log macro, in the same function, is seen.
#[test]
fn a_sentence_after_a_log_line_is_seen() {
    let source =
        "fn f(d: &D) { tracing::warn!(\"a log line with words\"); d.say(\"The disk is full\"); }";
    assert_eq!(
        gate_sees("daemon/example.rs", source),
        ["\"The disk is full\""]
    );
}

// ---------------------------------------------------------------------
// What gets past it
// ---------------------------------------------------------------------

/// The gate cuts a file at the first `#[cfg(test)]` in its text — meant
/// for the tests module at the end, but a top-level `#[cfg(test)]`
/// helper, import or `mod` anywhere else (common in Rust), or the words
/// `#[cfg(test)]` in a comment, hides every sentence below it, silently.
/// Realistic: the day one file gets a test-only helper above its chat
/// code. (Inside an item — a `#[cfg(test)]` field — the cut leaves
/// unbalanced braces and the gate fails loudly: held below.)
#[test]
fn a_cfg_test_mid_file_does_not_hide_the_rest() {
    let mut missed: Vec<&str> = Vec::new();
    for source in [
        "#[cfg(test)]\nuse std::fmt::Write;\n\nfn f(d: &D) { d.say(\"The disk is full, and nothing was cleaned.\"); }",
        "#[cfg(test)]\nfn only_in_tests() {}\n\nfn f(d: &D) { d.say(\"The disk is full, and nothing was cleaned.\"); }",
        "#[cfg(test)]\nmod doubles;\n\nfn f(d: &D) { d.say(\"The disk is full, and nothing was cleaned.\"); }",
        "// Helpers marked #[cfg(test)] live in tests.rs.\nfn f(d: &D) { d.say(\"The disk is full, and nothing was cleaned.\"); }",
    ] {
        missed.extend((!gate_sees_it(source)).then_some(source));
    }
    assert!(missed.is_empty(), "not seen: {missed:#?}");
}

/// Attributes are skipped whole, so a sentence in `#[error("…")]` is
/// never read — and a `thiserror` enum's `Display` is exactly what a
/// `daemon.say(e.to_string())` sends (the daemon has two such enums,
/// `DaemonError` and `scan::NotNow`; neither is said today).
/// Realistic.
#[test]
fn a_sentence_in_an_error_attribute_is_seen() {
    let source = r#"
        #[derive(Debug, thiserror::Error)]
        enum Why {
            #[error("The Warden did not answer in time, so nothing was run.")]
            Late,
        }
        fn f(d: &D) { d.say(Why::Late.to_string()); }
    "#;
    assert!(gate_sees_it(source));
}

/// A sentence is three words of two letters or more: a two-word sentence
/// is not one, and neither is a one-word button label. The Worker has one
/// now: the receipt's "Undo" button (`daemon/undo.rs`), said in the chat
/// and not in the catalogue. Realistic (present).
#[test]
#[ignore = "LIMIT (known): chat text under three words is not a sentence to the gate; button labels are held by catalogue.rs::no_button_label_is_written_outside_the_catalogue"]
fn short_chat_text_and_button_labels_are_in_the_catalogue() {
    let mut missed: Vec<&str> = Vec::new();
    for source in [
        "fn f(d: &D) { d.say(\"Cancelled.\".into()); }",
        "fn f(d: &D) { d.say(\"Not paired.\".into()); }",
        "fn f(d: &D) { d.say(\"Done, I stopped.\".into()); }",
    ] {
        missed.extend((!gate_sees_it(source)).then_some(source));
    }
    assert!(missed.is_empty(), "not seen: {missed:#?}");
}

/// A sentence made of pieces of two words or fewer: `concat!` of short
/// pieces, a `format!` of short arguments, a `join`. Realism: low to
/// moderate (a sentence assembled from a verb and an object is how a
/// reply gets built when it varies).
#[test]
#[ignore = "LIMIT (low-moderate, left to review): a sentence built from pieces of two words or fewer (concat!, format! args, join) is not seen"]
fn a_sentence_built_from_short_pieces_is_seen() {
    let mut missed: Vec<&str> = Vec::new();
    for source in [
        "fn f(d: &D) { d.say(concat!(\"The disk\", \" is full\", \" again.\").into()); }",
        "fn f(d: &D) { d.say(format!(\"{} {} {}\", \"Disk full.\", \"Send /disk\", \"now.\")); }",
        "fn f(d: &D) { d.say([\"Nothing\", \"was run;\", \"try again\"].join(\" \")); }",
    ] {
        missed.extend((!gate_sees_it(source)).then_some(source));
    }
    assert!(missed.is_empty(), "not seen: {missed:#?}");
}

/// Words joined by an escape instead of a space are one word to
/// `split_whitespace` on the literal's source text. Realism: low (no one
/// writes `\u{20}`), but `\n` between short lines is how a list reply
/// is written.
#[test]
fn words_joined_by_escapes_are_seen() {
    let mut missed: Vec<&str> = Vec::new();
    for source in [
        r#"fn f(d: &D) { d.say("Stopped.\nSend\n/resume".into()); }"#,
        r#"fn f(d: &D) { d.say("The\tdisk\tis\tfull".into()); }"#,
        r#"fn f(d: &D) { d.say("The\u{20}disk\u{20}is\u{20}full".into()); }"#,
    ] {
        missed.extend((!gate_sees_it(source)).then_some(source));
    }
    assert!(missed.is_empty(), "not seen: {missed:#?}");
}

/// Byte strings (and raw byte strings) are not read: only literals that
/// start with `"` or `r` are. Realism: low (chat text is `String`).
#[test]
fn byte_strings_are_read() {
    let mut missed: Vec<&str> = Vec::new();
    for source in [
        r#"fn f(d: &D) { d.say(String::from_utf8_lossy(b"The disk is full now.").into()); }"#,
        r##"fn f(d: &D) { d.say(String::from_utf8_lossy(br#"The disk is full now."#).into()); }"##,
    ] {
        missed.extend((!gate_sees_it(source)).then_some(source));
    }
    assert!(missed.is_empty(), "not seen: {missed:#?}");
}

/// An excuse is a substring of a literal in one file: any sentence in
/// `daemon/chat.rs` that holds "could not be found" is excused, said in
/// the chat or not. Realism: moderate (the natural reply to a missing unit
/// says just that, in that file).
#[test]
fn an_excuse_does_not_excuse_a_chat_sentence() {
    let source = r#"fn f(d: &D) { d.say("That service could not be found: send /services to see them all.".into()); }"#;
    assert!(!gate_sees("daemon/chat.rs", source).is_empty());
}

/// Any macro named `trace`, `debug`, `info`, `warn` or `error` is taken
/// for a log line, whoever defined it; and the words `include_str!` reads
/// from a file are no literal at all. Realism: low.
#[test]
#[ignore = "LIMIT (low, left to review): a local macro named info!/error! and include_str! files are not read"]
fn other_macros_and_included_files_are_read() {
    let mut missed: Vec<&str> = Vec::new();
    for source in [
        "macro_rules! info { ($d:expr, $t:expr) => { $d.say($t.into()) } }\nfn f(d: &D) { info!(d, \"The disk is full now.\"); }",
        "fn f(d: &D) { d.say(include_str!(\"disk_full.txt\").into()); }",
    ] {
        missed.extend((!gate_sees_it(source)).then_some(source));
    }
    assert!(missed.is_empty(), "not seen: {missed:#?}");
}

/// The gate reads `agent/src/daemon` and `agent/src/health` only. Two
/// other files write sentences the chat shows: the scan's findings in the
/// `aromba-health` crate (`agent/health/src/scan/mod.rs`,
/// `Finding::describe`, `DataKind::describe`, said by `daemon/scan.rs`
/// in the first look, the hour of traffic and the fences), and the Warden
/// client's errors (`agent/src/warden_client.rs`, `ClientError`'s
/// `Display`, said by `chat::said` through `could_not_ask_the_warden`).
/// Realistic (present).
#[test]
#[ignore = "KNOWN (said in aromba-words' docs): the scan's finding names (agent/health/src/scan, also the reasons the Warden journals) and the Warden client's connection errors (agent/src/warden_client.rs, detail after the catalogue's verdict) are written outside it"]
fn every_file_that_writes_chat_sentences_is_read_by_the_gate() {
    let mut written = Vec::new();
    for (file, header) in [
        ("health/src/scan/mod.rs", "impl Finding"),
        ("health/src/scan/mod.rs", "impl DataKind"),
        (
            "src/warden_client.rs",
            "impl fmt :: Display for ClientError",
        ),
    ] {
        let text = std::fs::read_to_string(agent().join(file)).expect("source");
        for l in item_literals(&code(&text), header) {
            if is_sentence(&l) {
                written.push(format!("{file} ({header}): {l}"));
            }
        }
    }
    // And they do reach the chat.
    let scan = std::fs::read_to_string(agent().join("src/daemon/scan.rs")).expect("scan.rs");
    assert!(scan.contains("Finding::describe") || scan.contains(".describe()"));
    let chat = std::fs::read_to_string(agent().join("src/daemon/chat.rs")).expect("chat.rs");
    assert!(chat.contains("WardenError::Unreachable(e) => words::could_not_ask_the_warden(e)"));
    assert!(
        written.is_empty(),
        "chat sentences outside the catalogue, in files the gate does not read:\n{}",
        written.join("\n")
    );
}

/// The literals (as the gate reads them) of the top-level items of
/// `source` whose header — the tokens before their `{…}` body, as
/// `proc_macro2` prints them — starts with `header`.
fn item_literals(source: &str, header: &str) -> Vec<String> {
    let tokens = TokenStream::from_str(source).expect("Rust");
    let mut head = TokenStream::new();
    let mut found = Vec::new();
    for t in tokens {
        match &t {
            TokenTree::Group(g) if g.delimiter() == Delimiter::Brace => {
                if head.to_string().trim_start().starts_with(header) {
                    literals(g.stream(), &mut found);
                }
                head = TokenStream::new();
            }
            TokenTree::Punct(p) if p.as_char() == ';' => head = TokenStream::new(),
            TokenTree::Punct(p) if p.as_char() == '#' => head = TokenStream::new(),
            TokenTree::Group(g) if g.delimiter() == Delimiter::Bracket && head.is_empty() => {}
            _ => head.extend([t.clone()]),
        }
    }
    found
}
