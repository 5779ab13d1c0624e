//! The redactor's labeled corpus and its benchmark input, generated from a
//! fixed seed.
//!
//! A [`Document`] is realistic command output (process lists, journal lines,
//! access logs, environment dumps, configuration files) with secrets of every
//! class planted in the formats they really take, and decoys — text that
//! looks like a secret and is not — planted beside them. The ground truth
//! says, for each document, which secrets must be gone (and how many removals
//! of each class that makes) and which decoys must be left byte for byte.

#![forbid(unsafe_code)]

mod cut_keys;
mod fill;
pub mod invariants;
mod secrets;
mod shapes;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::path::Path;

pub use fill::filler_line;

/// A secret that must not survive: every fragment must be absent from the
/// output, and the removal counts once under `class`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Planted {
    pub class: String,
    pub fragments: Vec<String>,
}

/// Text that must survive byte for byte.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Decoy {
    pub kind: String,
    pub text: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Document {
    pub name: String,
    #[serde(skip)]
    pub text: String,
    pub secrets: Vec<Planted>,
    pub decoys: Vec<Decoy>,
}

/// One planted line (or block) and its labels.
pub struct Item {
    pub text: String,
    pub secrets: Vec<Planted>,
    pub decoys: Vec<Decoy>,
}

impl Item {
    fn secret(text: String, class: &str, fragments: Vec<String>) -> Item {
        Item {
            text,
            secrets: vec![Planted {
                class: class.to_string(),
                fragments,
            }],
            decoys: Vec::new(),
        }
    }

    fn decoy(text: String, kind: &str, decoy: String) -> Item {
        Item {
            text,
            secrets: Vec::new(),
            decoys: vec![Decoy {
                kind: kind.to_string(),
                text: decoy,
            }],
        }
    }
}

pub const SEED: u64 = 0xA40_0BA;

/// How many documents the labeled corpus has.
pub const DOCUMENTS: usize = 48;

/// The labeled corpus. Every class and every decoy kind appears many times;
/// the last document ends in a private key cut off mid-way.
pub fn labeled() -> Vec<Document> {
    let mut rng = ChaCha8Rng::seed_from_u64(SEED);
    (0..DOCUMENTS)
        .map(|n| document(&mut rng, n, n % 8 == 7))
        .collect()
}

/// One document drawn from `seed`, for property tests.
pub fn random_document(seed: u64) -> Document {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let n = rng.random_range(0..secrets::SECRET_MAKERS.len() * secrets::DECOY_MAKERS.len());
    let truncated = rng.random_bool(0.2);
    document(&mut rng, n, truncated)
}

fn document(rng: &mut ChaCha8Rng, n: usize, ends_in_truncated_key: bool) -> Document {
    let mut items = Vec::new();
    // Round-robin over every secret and decoy maker, so each appears in
    // several documents and next to different neighbours.
    for k in 0..6 {
        let i = (n * 6 + k) % secrets::SECRET_MAKERS.len();
        items.push((secrets::SECRET_MAKERS[i])(rng));
        let j = (n * 6 + k) % secrets::DECOY_MAKERS.len();
        items.push((secrets::DECOY_MAKERS[j])(rng));
    }
    let mut text = String::new();
    let mut doc = Document {
        name: format!("{n:02}"),
        text: String::new(),
        secrets: Vec::new(),
        decoys: Vec::new(),
    };
    for item in items {
        for _ in 0..rng.random_range(1..5) {
            text.push_str(&filler_line(rng));
            text.push('\n');
        }
        text.push_str(&item.text);
        text.push('\n');
        doc.secrets.extend(item.secrets);
        doc.decoys.extend(item.decoys);
    }
    if ends_in_truncated_key {
        // A key cut off mid-way must never survive: it ends the document,
        // because everything after a BEGIN without END is removed.
        let item = secrets::truncated_private_key(rng);
        text.push_str(&item.text);
        doc.secrets.extend(item.secrets);
    }
    doc.text = text;
    doc
}

#[derive(Serialize, Deserialize)]
pub struct Truth {
    pub seed: u64,
    pub documents: Vec<Document>,
}

/// Writes `NN.txt` for each document and `truth.json` into `dir`.
pub fn write_corpus(dir: &Path) -> std::io::Result<usize> {
    std::fs::create_dir_all(dir)?;
    let docs = labeled();
    for doc in &docs {
        std::fs::write(dir.join(format!("{}.txt", doc.name)), &doc.text)?;
    }
    let truth = Truth {
        seed: SEED,
        documents: docs.clone(),
    };
    let json = serde_json::to_string_pretty(&truth).map_err(std::io::Error::other)?;
    std::fs::write(dir.join("truth.json"), json + "\n")?;
    Ok(docs.len())
}

/// Realistic command output of about `target` bytes with one planted secret
/// every `secret_every` lines, for the throughput benchmark. Returns the text
/// and the number of secrets planted.
pub fn realistic_output(seed: u64, target: usize, secret_every: usize) -> (Vec<u8>, usize) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    // Make a pool of distinct lines once and repeat from it: generating each
    // of ~1.5M lines afresh would dominate the benchmark's setup time.
    let fillers: Vec<String> = (0..4096).map(|_| filler_line(&mut rng)).collect();
    let planted: Vec<String> = (0..256)
        .map(|i| (secrets::SECRET_MAKERS[i % secrets::SECRET_MAKERS.len()])(&mut rng).text)
        .collect();
    let mut out = Vec::with_capacity(target + 4096);
    let mut lines = 0usize;
    let mut count = 0usize;
    while out.len() < target {
        lines += 1;
        if secret_every > 0 && lines.is_multiple_of(secret_every) {
            out.extend_from_slice(planted[rng.random_range(0..planted.len())].as_bytes());
            count += 1;
        } else {
            out.extend_from_slice(fillers[rng.random_range(0..fillers.len())].as_bytes());
        }
        out.push(b'\n');
    }
    (out, count)
}
