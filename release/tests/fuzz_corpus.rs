//! Replays the committed corpora of the `release_manifest` and
//! `release_tarball` fuzz targets (`fuzz/corpus/NAME/`) through the same
//! checks (`tests/fuzz_check/mod.rs`), so every input a fuzzer kept stays a
//! regression test without cargo-fuzz.

mod fuzz_check;

use std::path::PathBuf;

fn corpus(name: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(name);
    let mut inputs: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            let path = e.expect("entry").path();
            let data = std::fs::read(&path).expect("input");
            (path, data)
        })
        .collect();
    inputs.sort();
    assert!(inputs.len() >= 10, "{name}: only {} inputs", inputs.len());
    inputs
}

#[test]
fn release_manifest_corpus_renders_and_parses_back() {
    let mut parsed = 0;
    for (path, data) in corpus("release_manifest") {
        if let Err(broken) = fuzz_check::manifest(&data) {
            panic!("{}: {broken}", path.display());
        }
        parsed += usize::from(aromba_release::Manifest::parse(&data).is_ok());
    }
    assert!(parsed >= 3, "only {parsed} corpus manifests parse");
}

#[test]
fn release_tarball_corpus_takes_only_the_one_binary() {
    let mut took = 0;
    for (path, data) in corpus("release_tarball") {
        match fuzz_check::tarball(&data) {
            Ok(n) => took += n,
            Err(broken) => panic!("{}: {broken}", path.display()),
        }
    }
    // Real tarballs among the seeds, so the check on what is taken runs.
    assert!(took >= 3, "only {took} ways a corpus binary was taken");
}
