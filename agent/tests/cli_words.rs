//! The root terminal's verbs as a newcomer meets them: output piped into a
//! reader that stops early ends quietly, and every verb's help says what
//! it does in its own words.

use aromba_testkit::worker as support;

use support::{TestWarden, account, text};

/// The built binary itself: these verbs run as root, and a copy made for
/// other accounts (`support::aromba_bin`) can meet "text file busy" when
/// another test's child, forked while the copy was written, still holds it.
fn aromba() -> std::path::PathBuf {
    assert_cmd::cargo::cargo_bin("aromba")
}

#[test]
fn aromba_status_piped_into_a_reader_that_stops_early_ends_quietly() {
    let _machine = support::one_daemon_on_this_machine_blocking();
    let warden = TestWarden::start("cli-pipe", account("aromba"), 4);
    for _ in 0..5 {
        // The reader is gone before the verb writes: its first line meets
        // a closed pipe.
        let out = assert_cmd::Command::new("bash")
            .arg("-c")
            .arg(format!(
                "set -o pipefail; '{}' status --root '{}' | (exit 0)",
                aromba().display(),
                warden.root.display()
            ))
            .output()
            .expect("bash runs");
        let stderr = text(&out.stderr);
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(out.status.success(), "exit {:?}: {stderr}", out.status);
    }
}

#[test]
fn every_verbs_help_says_what_it_does_in_its_own_words() {
    let out = assert_cmd::Command::new(aromba())
        .arg("--help")
        .output()
        .expect("aromba --help");
    let help = text(&out.stdout);
    let verbs: Vec<String> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|v| v != "help")
        .collect();
    assert!(verbs.len() > 5, "{help}");
    for verb in verbs {
        let out = assert_cmd::Command::new(aromba())
            .args([verb.as_str(), "--help"])
            .output()
            .expect("a verb's help");
        let page = text(&out.stdout);
        assert!(out.status.success(), "{verb}: {}", text(&out.stderr));
        assert!(!page.contains("As for `ask`"), "{verb}:\n{page}");
        let about = page.lines().next().unwrap_or_default();
        assert!(
            about.len() > 20 && !about.starts_with("Usage"),
            "{verb} says nothing of what it does:\n{page}"
        );
        for option in page.lines().filter(|l| l.trim_start().starts_with("--")) {
            assert!(
                option.split("  ").filter(|p| !p.trim().is_empty()).count() > 1,
                "{verb}: an option without words: {option:?}\n{page}"
            );
        }
    }
}
