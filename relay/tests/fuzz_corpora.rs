//! Replays the committed corpora of the relay's fuzz targets
//! (`fuzz/corpus/NAME/`) through the same checks as the targets
//! (`tests/fuzz_check/`), so every input a fuzzer kept stays a regression
//! test without cargo-fuzz.

mod fuzz_check {
    pub mod bot_answer;
    pub mod launch;
    pub mod update;
    pub mod update_shape;
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

#[test]
fn telegram_update_shaped_corpus_is_read_as_the_json_says() {
    use arbitrary::{Arbitrary, Unstructured};
    use fuzz_check::update_shape::ShapedUpdate;
    let (mut built, mut taken) = (0, 0);
    for (path, data) in corpus("telegram_update_shaped") {
        // As libfuzzer-sys builds the target's argument from the bytes.
        let Ok(update) = ShapedUpdate::arbitrary_take_rest(Unstructured::new(&data)) else {
            continue;
        };
        let body = update.render();
        if let Err(broken) = fuzz_check::update::check(&body) {
            panic!("{}: {broken}", path.display());
        }
        built += 1;
        taken += usize::from(aromba_relay::telegram::inbound::parse(&body).is_some());
    }
    assert!(built >= 10, "the shaped corpus builds only {built} updates");
    assert!(taken >= 5, "only {taken} shaped corpus updates parse");
}

#[test]
fn mini_app_launch_corpus_is_taken_only_as_telegram_hashed_it() {
    let mut taken = 0;
    for (path, data) in corpus("mini_app_launch") {
        match fuzz_check::launch::check(&data) {
            Ok(Some(_)) => taken += 1,
            Ok(None) => {}
            Err(broken) => panic!("{}: {broken}", path.display()),
        }
    }
    // The seeds hold launches as Telegram makes them: if none passes, the
    // fuzzer no longer reaches past the hash from them.
    assert!(taken >= 3, "only {taken} launches were taken");
}

#[test]
fn bot_answer_corpus_is_read_as_the_json_says_and_never_tells_the_token() {
    for (path, data) in corpus("bot_answer") {
        if let Err(broken) = fuzz_check::bot_answer::check(&data) {
            panic!("{}: {broken}", path.display());
        }
    }
}
