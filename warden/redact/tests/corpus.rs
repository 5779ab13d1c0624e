//! The labeled corpus: every planted secret is removed and counted under its
//! class, and every decoy survives byte for byte.

use aromba_redact::{Class, redact};
use aromba_redact_corpus::{Document, Truth, labeled};
use std::collections::BTreeMap;
use std::path::PathBuf;

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

fn committed() -> Vec<Document> {
    let truth_path = corpus_dir().join("truth.json");
    let truth: Truth = serde_json::from_slice(&std::fs::read(&truth_path).expect("truth.json"))
        .expect("truth.json parses");
    truth
        .documents
        .into_iter()
        .map(|mut doc| {
            let path = corpus_dir().join(format!("{}.txt", doc.name));
            doc.text = std::fs::read_to_string(&path).expect("corpus document");
            doc
        })
        .collect()
}

/// Windows of 12 bytes (or the whole fragment when shorter): a partial leak
/// of a secret is a leak.
fn windows(fragment: &str) -> Vec<&str> {
    let n = fragment.len().min(12);
    (0..=fragment.len() - n)
        .filter(|&i| fragment.is_char_boundary(i) && fragment.is_char_boundary(i + n))
        .map(|i| &fragment[i..i + n])
        .collect()
}

#[test]
fn corpus_files_match_their_generator() {
    let generated = labeled();
    let on_disk = committed();
    assert_eq!(
        generated, on_disk,
        "tests/corpus is stale: cargo run -p aromba-redact-corpus --bin gen-corpus -- warden/redact/tests/corpus"
    );
}

#[test]
fn recall_is_complete_for_every_class_and_no_decoy_is_touched() {
    let mut planted_per_class: BTreeMap<String, u32> = BTreeMap::new();
    let mut removed_per_class: BTreeMap<String, u32> = BTreeMap::new();
    let mut decoys_per_kind: BTreeMap<String, u32> = BTreeMap::new();
    let mut failures = Vec::new();
    for doc in committed() {
        let out = redact(doc.text.as_bytes());
        let text = String::from_utf8(out.text).expect("corpus output is UTF-8");
        let mut expected: BTreeMap<String, u32> = BTreeMap::new();
        for secret in &doc.secrets {
            *expected.entry(secret.class.clone()).or_default() += 1;
            for fragment in &secret.fragments {
                if let Some(w) = windows(fragment).into_iter().find(|w| text.contains(w)) {
                    let line = text.lines().find(|l| l.contains(w)).unwrap_or("");
                    failures.push(format!(
                        "{}: {} leaked {w:?} in {line:?}",
                        doc.name, secret.class
                    ));
                }
            }
        }
        for decoy in &doc.decoys {
            if text.matches(decoy.text.as_str()).count()
                != doc.text.matches(decoy.text.as_str()).count()
            {
                failures.push(format!(
                    "{}: decoy {} touched: {:?}",
                    doc.name, decoy.kind, decoy.text
                ));
            }
            *decoys_per_kind.entry(decoy.kind.clone()).or_default() += 1;
        }
        for class in Class::ALL {
            let want = expected.get(class.name()).copied().unwrap_or(0);
            if out.counts.get(class) != want {
                failures.push(format!(
                    "{}: {} removals of {class}, planted {want}",
                    doc.name,
                    out.counts.get(class)
                ));
            }
        }
        for (class, n) in expected {
            *planted_per_class.entry(class.clone()).or_default() += n;
            *removed_per_class.entry(class).or_default() += n;
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // Every class of the specification and every decoy kind is exercised
    // (a skill's secrets are values the caller names, not a shape: they
    // are `redact_known`'s, tested with it).
    for class in Class::ALL
        .into_iter()
        .filter(|c| !matches!(c, Class::CutLine | Class::SkillSecret))
    {
        let n = planted_per_class.get(class.name()).copied().unwrap_or(0);
        assert!(n >= 5, "class {class} planted only {n} times");
    }
    for kind in [
        "prose",
        "path",
        "uuid",
        "git-sha",
        "public-key",
        "short-value",
        "url-without-password",
        "public-key-cut",
        "public-key-cut-beside-key",
        "hex-lines",
        "challenge",
        "digest",
        "masked",
    ] {
        let n = decoys_per_kind.get(kind).copied().unwrap_or(0);
        assert!(n >= 5, "decoy kind {kind} planted only {n} times");
    }
    eprintln!("recall per class (planted = removed): {removed_per_class:?}");
    eprintln!("decoys kept per kind: {decoys_per_kind:?}");
}
