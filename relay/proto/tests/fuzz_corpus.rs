//! Replays the committed corpora of the `relay_frame` and `relay_body` fuzz
//! targets (`fuzz/corpus/NAME/`) through the same checks
//! (`tests/fuzz_check/mod.rs`), so every input the fuzzer kept stays a
//! regression test without cargo-fuzz.

mod fuzz_check;

use std::path::PathBuf;

#[test]
fn relay_frame_corpus_round_trips() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/relay_frame");
    let (mut checked, mut opened) = (0, 0);
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        let data = std::fs::read(&path).expect("a corpus input");
        if let Err(broken) = fuzz_check::check(&data) {
            panic!("{}: {broken}", path.display());
        }
        checked += 1;
        let key = fuzz_check::key();
        if aromba_relay_proto::session::Opener::new(key)
            .open(&data, fuzz_check::NOW)
            .is_ok()
        {
            opened += 1;
        }
    }
    // The sealed seeds are sealed under the checks' key: if they stop
    // opening, the fuzzer no longer reaches past the MAC from them.
    assert!(
        opened >= 3,
        "only {opened} corpus frames open under the key"
    );
    assert!(
        checked >= 10,
        "the relay_frame corpus has only {checked} inputs"
    );
}

#[test]
fn relay_body_corpus_round_trips_as_built_bodies() {
    use arbitrary::{Arbitrary, Unstructured};
    use aromba_relay_proto::frame::Body;
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/relay_body");
    let (mut checked, mut passing) = (0, 0);
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        let data = std::fs::read(&path).expect("a corpus input");
        // As libfuzzer-sys builds the target's argument from the bytes.
        let Ok(body) = Body::arbitrary_take_rest(Unstructured::new(&data)) else {
            continue;
        };
        if let Err(broken) = fuzz_check::shaped(&body) {
            panic!("{}: {broken}", path.display());
        }
        checked += 1;
        passing += usize::from(body.check().is_ok());
    }
    // Bodies that pass their checks are the ones sealed, opened and sealed
    // again: the corpus must hold some.
    assert!(
        passing >= 5,
        "only {passing} corpus bodies pass their checks"
    );
    assert!(
        checked >= 10,
        "the relay_body corpus builds only {checked} bodies"
    );
}
