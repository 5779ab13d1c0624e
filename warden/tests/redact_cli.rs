//! `aromba-warden redact` as a filter: the labeled corpus through the real
//! binary, and its error paths.

use aromba_redact_corpus::Truth;
use assert_cmd::Command;
use std::collections::BTreeMap;
use std::path::PathBuf;

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("redact/tests/corpus")
}

fn warden() -> Command {
    Command::cargo_bin("aromba-warden").expect("the aromba-warden binary is built")
}

/// Parses the `CLASS N` lines and the closing `total N` of stderr.
fn parse_counts(stderr: &str) -> (BTreeMap<String, u32>, u32) {
    let mut counts = BTreeMap::new();
    let mut total = None;
    for line in stderr.lines() {
        let (name, n) = line.rsplit_once(' ').expect("CLASS N");
        let n: u32 = n.parse().expect("a count");
        if name == "total" {
            total = Some(n);
        } else {
            counts.insert(name.to_string(), n);
        }
    }
    (counts, total.expect("a total line"))
}

#[test]
fn redact_command_passes_the_labeled_corpus() {
    let truth: Truth =
        serde_json::from_slice(&std::fs::read(corpus_dir().join("truth.json")).unwrap()).unwrap();
    for doc in truth.documents {
        let input = std::fs::read(corpus_dir().join(format!("{}.txt", doc.name))).unwrap();
        let out = warden()
            .arg("redact")
            .write_stdin(input.clone())
            .output()
            .unwrap();
        assert!(out.status.success(), "document {}", doc.name);
        let text = String::from_utf8(out.stdout).unwrap();
        let input = String::from_utf8(input).unwrap();
        let mut expected: BTreeMap<String, u32> = BTreeMap::new();
        for secret in &doc.secrets {
            *expected.entry(secret.class.clone()).or_default() += 1;
            for fragment in &secret.fragments {
                assert!(
                    !text.contains(fragment.as_str()),
                    "document {}: {} leaked",
                    doc.name,
                    secret.class
                );
            }
        }
        for decoy in &doc.decoys {
            assert_eq!(
                text.matches(decoy.text.as_str()).count(),
                input.matches(decoy.text.as_str()).count(),
                "document {}: decoy {} touched",
                doc.name,
                decoy.kind
            );
        }
        let (counts, total) = parse_counts(&String::from_utf8(out.stderr).unwrap());
        assert_eq!(counts, expected, "document {}: counts on stderr", doc.name);
        assert_eq!(total, expected.values().sum::<u32>());
    }
}

#[test]
fn redact_command_passes_bytes_that_are_not_utf8() {
    let mut input = b"\xff\xfe binary \x00 then ".to_vec();
    input.extend_from_slice(b"password=hunter2hunter2hunter2\n\xc3\x28");
    let out = warden().arg("redact").write_stdin(input).output().unwrap();
    assert!(out.status.success());
    assert_eq!(
        out.stdout,
        b"\xff\xfe binary \x00 then password=[redacted:secret-assignment]\n\xc3\x28"
    );
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        "secret-assignment 1\ntotal 1\n"
    );
}

#[test]
fn redact_cut_removes_the_unfinished_last_line() {
    let out = warden()
        .args(["redact", "--cut"])
        .write_stdin("ok line\nGITHUB_TOKEN=ghp_16C7e42F29")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(out.stdout, b"ok line\n[redacted:cut-line]");
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        "cut-line 1\ntotal 1\n"
    );
}

#[test]
fn refuses_an_unknown_command_with_one_sentence_and_exit_2() {
    let out = warden().arg("redcat").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("unknown command \"redcat\""), "{err}");
}

#[test]
fn refuses_an_argument_that_is_not_utf8() {
    use std::os::unix::ffi::OsStrExt;
    let out = warden()
        .arg(std::ffi::OsStr::from_bytes(b"red\xffact"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not valid UTF-8"));
}

#[test]
fn help_lists_the_redact_command() {
    let out = warden().arg("--help").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8(out.stdout).unwrap().contains("redact"));
}

#[test]
fn redact_streams_a_large_input_in_bounded_memory() {
    // 64 MiB through a process whose whole address space may not exceed
    // 40 MiB: reading all of standard input first cannot fit.
    let (input, planted) = aromba_redact_corpus::realistic_output(11, 64 << 20, 400);
    let whole = aromba_redact::redact(&input);
    let out = Command::new("prlimit")
        .arg(format!("--as={}", 40 << 20))
        .arg("--")
        .arg(assert_cmd::cargo::cargo_bin("aromba-warden"))
        .arg("redact")
        .write_stdin(input)
        .output()
        .expect("prlimit (util-linux) runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (_, total) = parse_counts(&String::from_utf8(out.stderr).unwrap());
    assert!(
        total as usize >= planted,
        "{total} removals, {planted} planted"
    );
    assert_eq!(u64::from(total), whole.counts.total());
    assert!(
        out.stdout == whole.text,
        "streamed output differs from the whole-buffer redaction"
    );
}
