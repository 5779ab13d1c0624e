//! Redaction throughput on one core, against two baselines measured in the
//! same run: reading the same bytes like `cat` does, and the naive redactor
//! (one `regex::RegexSet` over the class patterns, then `replace_all` with
//! each pattern that matched).
//!
//! Input: ~100 MiB of realistic command output (process lists, journal and
//! access-log lines, JSON logs, `df`, `docker ps`, …) with a planted secret
//! every 400 lines, processed in 1 MiB pieces — the Warden's output cap —
//! and as one stream, as `aromba-warden redact` does (1 MiB reads from a
//! file into `Stream`, written out). Then hostile output: a 1 MiB line of
//! one candidate repeated (token prefixes, names, headers, armor lines),
//! and the stream fed one 8 MiB line with no break, against the realistic
//! rates.
//!
//! Run: `cargo bench -p aromba-redact --bench throughput`
//! (`AROMBA_BENCH_MIB=20` for a quicker run).

use aromba_redact::{Redactor, Stream};
use regex::bytes::{Regex, RegexSet};
use std::hint::black_box;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

const PIECE: usize = 1 << 20;
const ROUNDS: usize = 3;

/// Splits at line ends so that no piece cuts a line (the Warden's buffers
/// end where the command's output ended).
fn pieces(input: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < input.len() {
        let mut end = (start + PIECE).min(input.len());
        if end < input.len()
            && let Some(nl) = memchr::memrchr(b'\n', &input[start..end])
        {
            end = start + nl + 1;
        }
        out.push(&input[start..end]);
        start = end;
    }
    out
}

/// The best of `ROUNDS` runs, as MiB/s.
fn measure(bytes: usize, mut run: impl FnMut() -> u64) -> (f64, u64) {
    let mut best = Duration::MAX;
    let mut result = 0;
    for _ in 0..ROUNDS {
        let start = Instant::now();
        result = black_box(run());
        best = best.min(start.elapsed());
    }
    (bytes as f64 / (1 << 20) as f64 / best.as_secs_f64(), result)
}

struct Naive {
    set: RegexSet,
    each: Vec<(Regex, &'static [u8])>,
}

impl Naive {
    fn new() -> Naive {
        let patterns: &[(&str, &[u8])] = &[
            (
                r"(?s)-----BEGIN [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----.*?(?:-----END [A-Z0-9 ]*-----|\z)",
                b"[redacted:private-key]",
            ),
            (r"\bsk-ant-[A-Za-z0-9_-]{20,}", b"[redacted:anthropic-key]"),
            (r"\bsk-or-[A-Za-z0-9_-]{20,}", b"[redacted:openrouter-key]"),
            (r"\bsk-[A-Za-z0-9_-]{20,}", b"[redacted:openai-key]"),
            (
                r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}|\bwhsec_[A-Za-z0-9]{24,}",
                b"[redacted:stripe-key]",
            ),
            (
                r"\bgh[pousr]_[A-Za-z0-9]{30,}|\bgithub_pat_[A-Za-z0-9_]{40,}",
                b"[redacted:github-token]",
            ),
            (r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b", b"[redacted:aws-key]"),
            (
                r"\bxox[abprse][-.][A-Za-z0-9.-]{10,}|\bxapp-[A-Za-z0-9-]{10,}|hooks\.slack\.com/services/[A-Za-z0-9/_-]{20,}",
                b"[redacted:slack-token]",
            ),
            (
                r"\bAIza[A-Za-z0-9_-]{30,}|\bGOCSPX-[A-Za-z0-9_-]{20,}|\bya29\.[A-Za-z0-9._-]{20,}|\b1//0[A-Za-z0-9_-]{30,}",
                b"[redacted:google-key]",
            ),
            (
                r"\b[0-9]{6,12}:[A-Za-z0-9_-]{35}\b",
                b"[redacted:telegram-bot-token]",
            ),
            (
                r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*",
                b"[redacted:jwt]",
            ),
            (
                r"([A-Za-z][A-Za-z0-9+.-]*://[^:/?#\s@]*:)[^@/?#\s]+@",
                b"${1}[redacted:url-password]@",
            ),
            (
                r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/-]{8,}=*",
                b"${1}${2}[redacted:auth-header]",
            ),
            (
                r#"(?i)([A-Za-z0-9_.-]*(?:key|token|secret|passw|pwd|credential|bearer|auth)[A-Za-z0-9_.-]*["']?\s*[:=]\s*["']?)[^\s"',;&]{12,}"#,
                b"${1}[redacted:secret-assignment]",
            ),
        ];
        // ASCII word boundaries (`(?-u)`): a Unicode `\b` makes the lazy
        // DFA give up and would make this baseline needlessly slow.
        let ascii = |p: &str| format!("(?-u){p}");
        let set = RegexSet::new(patterns.iter().map(|(p, _)| ascii(p))).expect("patterns compile");
        let each = patterns
            .iter()
            .map(|(p, r)| (Regex::new(&ascii(p)).expect("pattern compiles"), *r))
            .collect();
        Naive { set, each }
    }

    fn redact(&self, piece: &[u8]) -> Vec<u8> {
        let matched = self.set.matches(piece);
        let mut text = piece.to_vec();
        for i in matched.iter() {
            let (re, replacement) = &self.each[i];
            text = re.replace_all(&text, *replacement).into_owned();
        }
        text
    }
}

fn main() {
    // `cargo bench` passes `--bench`; this harness takes no options.
    let mib: usize = std::env::var("AROMBA_BENCH_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let (corpus, planted) = aromba_redact_corpus::realistic_output(7, mib << 20, 400);
    let parts = pieces(&corpus);
    let lines = memchr::memchr_iter(b'\n', &corpus).count();
    println!(
        "input: {:.1} MiB, {lines} lines, {planted} planted secrets, {} pieces of at most 1 MiB",
        corpus.len() as f64 / (1 << 20) as f64,
        parts.len()
    );

    // cat: read the bytes from a file and copy them out, 128 KiB at a time.
    let path = std::env::temp_dir().join(format!("aromba-bench-{}.txt", std::process::id()));
    std::fs::File::create(&path)
        .and_then(|mut f| f.write_all(&corpus))
        .expect("write the bench input to a temporary file");
    let (cat, _) = measure(corpus.len(), || {
        let mut file = std::fs::File::open(&path).expect("open the bench input");
        let mut buf = vec![0u8; 128 << 10];
        let mut out = Vec::with_capacity(corpus.len());
        loop {
            let n = file.read(&mut buf).expect("read the bench input");
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        out.len() as u64
    });
    let _ = std::fs::remove_file(&path);

    let redactor = Redactor::new();
    let (ours, removed) = measure(corpus.len(), || {
        parts
            .iter()
            .map(|p| redactor.redact(p).counts.total())
            .sum::<u64>()
    });

    // The command-line filter: 1 MiB reads from the file into the stream,
    // its output written to a sink.
    let path = std::env::temp_dir().join(format!("aromba-bench-{}.txt", std::process::id()));
    std::fs::File::create(&path)
        .and_then(|mut f| f.write_all(&corpus))
        .expect("write the bench input to a temporary file");
    let (streamed, stream_removed) = measure(corpus.len(), || {
        let mut file = std::fs::File::open(&path).expect("open the bench input");
        let mut stream = Stream::new(&redactor);
        let mut chunk = vec![0u8; 1 << 20];
        let mut ready = Vec::with_capacity(2 << 20);
        let mut sink = std::io::sink();
        loop {
            let n = file.read(&mut chunk).expect("read the bench input");
            if n == 0 {
                break;
            }
            stream.push(&chunk[..n], &mut ready);
            sink.write_all(&ready).expect("write to a sink");
            ready.clear();
        }
        let counts = stream.finish(false, &mut ready);
        sink.write_all(&ready).expect("write to a sink");
        counts.total()
    });
    let _ = std::fs::remove_file(&path);

    let naive = Naive::new();
    let (baseline, _) = measure(corpus.len(), || {
        parts.iter().map(|p| naive.redact(p).len() as u64).sum()
    });

    println!("cat-like read                 {cat:>9.1} MiB/s");
    println!("aromba-redact, 1 MiB pieces   {ours:>9.1} MiB/s   ({removed} removals)");
    println!("aromba-redact, stream (CLI)   {streamed:>9.1} MiB/s   ({stream_removed} removals)");
    println!("naive RegexSet, 1 MiB pieces  {baseline:>9.1} MiB/s");
    println!("ratio pieces / naive RegexSet = {:.2}", ours / baseline);
    println!("ratio stream / naive RegexSet = {:.2}", streamed / baseline);
    println!("ratio pieces / cat-like read  = {:.2}", ours / cat);
    println!("ratio stream / cat-like read  = {:.2}", streamed / cat);

    // Hostile output: one line of a candidate repeated over the whole cap.
    // Each rule reads a run, a line or a header about once; before, each
    // candidate read to the run's or the line's end (a mebibyte of `sk-`
    // took minutes, of `key: ` 79 s, of `Authorization:` 16 s).
    let mut slowest = f64::MAX;
    let mut hostile: Vec<(String, String)> = [
        "sk-",
        "-eyJ",
        "ya29.",
        "xoxb-",
        "-AIza",
        "-GOCSPX-",
        "key ",
        "key: ",
        "password: ",
        "secret: |",
        "key: | #",
        "key: '",
        "\"-tokena:",
        "Authorization:",
        "Proxy-Authorization: ",
        "a://b:c@",
        "AKIAIOSFODNN7EXAMPLE",
        "-----BEGIN PRIVATE KEY-----",
    ]
    .into_iter()
    .map(|unit| (unit.to_string(), unit.repeat(PIECE / unit.len())))
    .collect();
    // JWT headers in one run before a long payload: each candidate reads
    // two runs of one alphabet.
    let jwts = format!(
        "{}.{}-sk-proj-Xq9Lm2Vb7Nc4Rt8Wy1Za3Kd6Hf0Jg5Ps2Eu7Io4TbQw3Er5Ty ",
        "-eyJ".repeat(2048),
        "A".repeat(64 << 10)
    );
    hostile.push(("-eyJ….A…".to_string(), jwts.repeat(PIECE / jwts.len())));
    for (unit, input) in &hostile {
        let (rate, removed) = measure(input.len(), || {
            redactor.redact(input.as_bytes()).counts.total()
        });
        let unit = format!("{unit:?}");
        println!("hostile {unit:<28} 1 MiB line {rate:>9.1} MiB/s   ({removed} removals)");
        slowest = slowest.min(rate);
    }
    println!(
        "ratio slowest hostile line / 1 MiB pieces = {:.2}",
        slowest / ours
    );

    // The stream, one 8 MiB line without a break, pushed 64 KiB at a time:
    // a window whose cut cannot move waits for another window of input
    // (before, every push redacted the whole buffer again).
    let line = "a".repeat(8 << 20);
    let (rate, _) = measure(line.len(), || {
        let mut stream = Stream::new(&redactor);
        let mut out = Vec::new();
        for piece in line.as_bytes().chunks(64 << 10) {
            stream.push(piece, &mut out);
            out.clear();
        }
        stream.finish(false, &mut out).total()
    });
    println!("stream, 8 MiB line, no break  {rate:>9.1} MiB/s");
    println!(
        "ratio long line stream / stream (CLI) = {:.2}",
        rate / streamed
    );
}
