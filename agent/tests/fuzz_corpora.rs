//! Replays the committed corpora of the Worker's fuzz targets
//! (`fuzz/corpus/NAME/`) through the same checks as the targets
//! (`tests/fuzz_check/`), so every input a fuzzer kept stays a regression
//! test without cargo-fuzz.

mod fuzz_check {
    pub mod catalogue;
    pub mod config;
    pub mod sse;
}

use aromba_testkit::fuzz::corpus;

#[test]
fn sse_stream_corpus_gives_the_same_reply_in_any_pieces() {
    for (path, data) in corpus("sse_stream") {
        if let Err(broken) = fuzz_check::sse::check(&data) {
            panic!("{}: {broken}", path.display());
        }
    }
}

#[test]
fn catalogue_index_corpus_renders_back_and_refuses_in_plain_words() {
    let mut parsed = 0;
    for (path, data) in corpus("catalogue_index") {
        if let Err(broken) = fuzz_check::catalogue::check(&data) {
            panic!("{}: {broken}", path.display());
        }
        parsed += usize::from(aromba::catalogue::parse(&data).is_ok());
    }
    assert!(parsed >= 3, "only {parsed} corpus indexes parse");
}

#[test]
fn worker_config_corpus_renders_back_to_the_same_configuration() {
    for (path, data) in corpus("worker_config") {
        if let Err(broken) = fuzz_check::config::check(&data) {
            panic!("{}: {broken}", path.display());
        }
    }
}
