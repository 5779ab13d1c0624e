//! The streaming redactor: whatever the window boundaries and however the
//! input arrives, it writes what the whole-buffer redactor writes, and no
//! secret survives a cut through it.

use aromba_redact::{Limits, Redactor, Stream, redact, redact_cut};
use aromba_redact_corpus::{Truth, filler_line};
use rand::SeedableRng;
use std::path::PathBuf;

/// Small windows, so that a test can put a boundary at every offset.
const SMALL: Limits = Limits {
    window: 256,
    margin: 96,
    max_window: 4096,
};

fn stream(input: &[u8], limits: Limits, chunk: usize, cut: bool) -> (Vec<u8>, u64) {
    let redactor = Redactor::new();
    let mut s = Stream::with_limits(&redactor, limits);
    let mut out = Vec::new();
    for piece in input.chunks(chunk.max(1)) {
        s.push(piece, &mut out);
    }
    let counts = s.finish(cut, &mut out);
    (out, counts.total())
}

/// Secrets of every shape that reaches across bytes or lines.
fn planted() -> Vec<(&'static str, Vec<&'static str>)> {
    vec![
        ("DB_PASSWORD=hunter2hunter2xy\n", vec!["hunter2hunter2xy"]),
        (
            "cache: redis://:my secret pass 42@cache/0\n",
            vec!["my secret pass 42"],
        ),
        (
            "Authorization: token 0123456789abcdef0123456789abcdef01234567\n",
            vec!["0123456789abcdef0123456789abcdef01234567"],
        ),
        (
            "app:\n  secret: >-\n    folded secret value\n    on two lines\n  user: bob\n",
            vec!["folded secret value", "on two lines"],
        ),
        (
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAu7x8Qd2Vh5cZ3mFq9nYk0wPzL1sJt4RbXe6gHa2KdUoNcMvW\nYp0qSx3Tz7AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcdefghijklmnopqr\nAQAB\n-----END RSA PRIVATE KEY-----\n",
            vec!["MIIEpAIBAAKCAQEAu7x8", "Yp0qSx3Tz7AbCdEfGhIj"],
        ),
        (
            "app[1]: MIIEpAIBAAKCAQEAu7x8Qd2Vh5cZ3mFq9nYk0wPzL1sJt4RbXe6gHa2KdUoNcMvW\napp[1]: Yp0qSx3Tz7AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcdefghijklmnopqr\n",
            vec!["MIIEpAIBAAKCAQEAu7x8", "Yp0qSx3Tz7AbCdEfGhIj"],
        ),
    ]
}

#[test]
fn a_secret_at_every_offset_from_a_window_boundary_is_removed_as_whole() {
    for (secret, fragments) in planted() {
        for offset in 0..SMALL.window + SMALL.margin + 64 {
            let mut input = "x".repeat(offset);
            input.push('\n');
            input.push_str(secret);
            input.push_str("after the secret, more output\n");
            input.push_str(&"tail line of output\n".repeat(30));
            let whole = redact(input.as_bytes());
            for chunk in [1, 37, 4096] {
                let (out, total) = stream(input.as_bytes(), SMALL, chunk, false);
                let text = String::from_utf8_lossy(&out);
                for f in &fragments {
                    assert!(
                        !text.contains(f),
                        "offset {offset}, chunk {chunk}: {f:?} leaked in {text:?}"
                    );
                }
                assert_eq!(
                    text,
                    String::from_utf8_lossy(&whole.text),
                    "offset {offset}, chunk {chunk}"
                );
                assert_eq!(total, whole.counts.total(), "offset {offset}");
            }
        }
    }
}

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

#[test]
fn streams_the_labeled_corpus_as_the_whole_buffer_redactor_does() {
    let truth: Truth = serde_json::from_slice(
        &std::fs::read(corpus_dir().join("truth.json")).expect("truth.json"),
    )
    .expect("truth.json parses");
    for doc in truth.documents {
        let input = std::fs::read(corpus_dir().join(format!("{}.txt", doc.name))).expect("doc");
        let whole = redact(&input);
        let limits = Limits {
            window: 1024,
            margin: 256,
            max_window: 64 << 10,
        };
        let (out, total) = stream(&input, limits, 97, false);
        assert_eq!(
            String::from_utf8_lossy(&out),
            String::from_utf8_lossy(&whole.text),
            "document {}",
            doc.name
        );
        assert_eq!(total, whole.counts.total(), "document {}", doc.name);
        let cut_whole = redact_cut(&input[..input.len() * 2 / 3]);
        let (cut_out, _) = stream(&input[..input.len() * 2 / 3], limits, 97, true);
        assert_eq!(cut_out, cut_whole.text, "document {} cut", doc.name);
    }
}

#[test]
fn a_key_longer_than_the_largest_window_leaves_no_line() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let line = "Yp0qSx3Tz7AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcdefghijklmnopqr";
    let mut input = String::new();
    for _ in 0..20 {
        input.push_str(&filler_line(&mut rng));
        input.push('\n');
    }
    input.push_str("-----BEGIN OPENSSH PRIVATE KEY-----\n");
    for _ in 0..200 {
        input.push_str(line);
        input.push('\n');
    }
    input.push_str("-----END OPENSSH PRIVATE KEY-----\nafter.\n");
    assert!(input.len() > 3 * SMALL.max_window);
    for chunk in [1, 500, 9000] {
        let (out, _) = stream(input.as_bytes(), SMALL, chunk, false);
        let text = String::from_utf8_lossy(&out);
        assert!(!text.contains("Yp0qSx3Tz7"), "chunk {chunk}: {text}");
        assert!(text.ends_with("after.\n"), "chunk {chunk}: {text}");
    }
}

#[test]
fn a_line_longer_than_the_largest_window_keeps_its_secrets_out() {
    // A minified JSON line with no break at all, a secret every 1000 bytes.
    let mut input = String::from("{");
    let mut n = 0;
    while input.len() < 5 * SMALL.max_window {
        input.push_str(&format!(
            "\"item{n}\": \"plain value number {n} of the list\", \"api_token\": \"tok{n:06}secretvalue\", "
        ));
        n += 1;
    }
    input.push('}');
    for chunk in [1, 333, 8192] {
        let (out, total) = stream(input.as_bytes(), SMALL, chunk, false);
        let text = String::from_utf8_lossy(&out);
        if let Some(i) = text.find("secretvalue") {
            panic!(
                "chunk {chunk}: leaked at {i}: {}",
                &text[i.saturating_sub(200)..(i + 50).min(text.len())]
            );
        }
        assert_eq!(total, n as u64, "chunk {chunk}");
        assert!(text.contains("plain value number 7 of the list"));
    }
}
