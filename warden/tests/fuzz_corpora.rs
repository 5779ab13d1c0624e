//! Replays the committed corpora of the `request_decoder` and
//! `policy_matcher` fuzz targets through the same checks, so every input the
//! fuzzers kept stays a regression test without cargo-fuzz.

mod oracle;
mod fuzz_check {
    pub mod launch;
    pub mod skill_bundle;
    pub mod skill_manifest;
}

use aromba_testkit::fuzz::corpus;
use aromba_warden::chores::header::Header;
use aromba_warden::policy::{ALLOW, CHORE_ACTIONS, Table};
use aromba_warden_proto::{MAX_REQUEST, decode_request, encode_request, read_frame};

#[test]
fn request_decoder_corpus_round_trips_without_panic() {
    for (path, data) in corpus("request_decoder") {
        if let Ok(request) = decode_request(&data) {
            assert_eq!(
                decode_request(&encode_request(&request)).as_ref(),
                Ok(&request),
                "{}",
                path.display()
            );
        }
        let mut stream = data.as_slice();
        while let Ok(frame) = read_frame(&mut stream, MAX_REQUEST) {
            let _ = decode_request(&frame);
        }
    }
}

#[test]
fn policy_matcher_corpus_keeps_the_stated_properties() {
    for (path, data) in corpus("policy_matcher") {
        let Some((&selector, rest)) = data.split_first() else {
            continue;
        };
        let table = if selector & 1 == 0 {
            Table::Allow
        } else {
            Table::ChoreAction
        };
        let rules = if table == Table::Allow {
            ALLOW
        } else {
            CHORE_ACTIONS
        };
        let mut parts = rest
            .split(|&b| b == 0xff)
            .map(|p| String::from_utf8_lossy(p).into_owned());
        let named = parts.next().unwrap_or_default();
        let cmd = if selector & 2 == 0 {
            rules[usize::from(selector >> 2) % rules.len()]
                .cmd
                .to_string()
        } else {
            named
        };
        let args: Vec<String> = parts.take(64).collect();
        if let Err(broken) = oracle::check_properties(table, &cmd, &args) {
            panic!("{}: {cmd} {args:?}: {broken}", path.display());
        }
    }
}

#[test]
fn chore_header_corpus_renders_back_to_the_same_meaning() {
    for (path, data) in corpus("chore_header") {
        let Ok(text) = std::str::from_utf8(&data) else {
            continue;
        };
        if let Ok(header) = Header::parse(text) {
            assert_eq!(
                Header::parse(&header.render()).as_ref(),
                Ok(&header),
                "{}",
                path.display()
            );
        }
    }
}

#[test]
fn skill_manifest_corpus_renders_back_to_the_same_manifest() {
    let mut parsed = 0;
    for (path, data) in corpus("skill_manifest") {
        if let Err(broken) = fuzz_check::skill_manifest::check(&data) {
            panic!("{}: {broken}", path.display());
        }
        parsed += usize::from(aromba_warden::skills::manifest::Manifest::parse(&data).is_ok());
    }
    assert!(parsed >= 3, "only {parsed} corpus manifests parse");
}

#[test]
fn mini_app_launch_corpus_is_taken_only_as_telegram_signed_it() {
    let mut taken = 0;
    for (path, data) in corpus("mini_app_launch") {
        match fuzz_check::launch::check(&data) {
            Ok(Some(_)) => taken += 1,
            Ok(None) => {}
            Err(broken) => panic!("{}: {broken}", path.display()),
        }
    }
    // The seeds hold launches as Telegram makes them: if none passes, the
    // fuzzer no longer reaches past the signature from them.
    assert!(taken >= 3, "only {taken} launches were verified");
}

#[test]
fn skill_bundle_corpus_verifies_or_is_refused_with_nothing_written() {
    let mut verified = 0;
    for (path, data) in corpus("skill_bundle") {
        match fuzz_check::skill_bundle::check(&data) {
            Ok(true) => verified += 1,
            Ok(false) => {}
            Err(broken) => panic!("{}: {broken}", path.display()),
        }
    }
    // The catalogue's own bundles verify once signed: if they stop, the
    // fuzzer no longer reaches past the signature from them.
    assert!(verified >= 3, "only {verified} bundles verified");
}
