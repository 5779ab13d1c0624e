//! Replays the committed corpora of the relay's fuzz targets
//! (`fuzz/corpus/NAME/`) through the same checks as the targets
//! (`tests/fuzz_check/`), so every input a fuzzer kept stays a regression
//! test without cargo-fuzz.

mod fuzz_check {
    pub mod update;
}

use aromba_testkit::fuzz::corpus;

#[test]
fn telegram_update_corpus_round_trips() {
    let mut taken = 0;
    for (path, data) in corpus("telegram_update") {
        if let Err(broken) = fuzz_check::update::check(&data) {
            panic!("{}: {broken}", path.display());
        }
        taken += usize::from(aromba_relay::telegram::inbound::parse(&data).is_some());
    }
    // Real updates among the seeds, so the round trip is exercised.
    assert!(taken >= 5, "only {taken} corpus inputs parse as updates");
}
