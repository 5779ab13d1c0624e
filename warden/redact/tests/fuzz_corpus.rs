//! Replays the committed fuzz corpus (`fuzz/corpus/redact/`) through the
//! fuzz target's checks, so every input the fuzzer kept stays a regression
//! test without cargo-fuzz.

use std::path::PathBuf;

#[test]
fn fuzz_corpus_inputs_keep_the_invariants() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/redact");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).expect("fuzz/corpus/redact exists") {
        let path = entry.expect("a directory entry").path();
        let data = std::fs::read(&path).expect("a corpus input");
        if let Err(broken) = aromba_redact_corpus::invariants::check(&data) {
            panic!("{}: {broken}", path.display());
        }
        checked += 1;
    }
    assert!(checked >= 20, "the fuzz corpus has only {checked} inputs");
}
