//! The policy matcher on generated argument vectors drawn from each rule's
//! own words and near misses: every verdict has the properties stated in
//! `oracle/mod.rs`.

mod oracle;

use aromba_warden::policy::{ALLOW, CHORE_ACTIONS, Table};
use proptest::prelude::*;

fn requests(table: Table) -> impl Strategy<Value = (String, Vec<String>)> {
    let rules = match table {
        Table::Allow => ALLOW,
        Table::ChoreAction => CHORE_ACTIONS,
    };
    (0..rules.len()).prop_flat_map(move |i| {
        let rule = &rules[i];
        let words = oracle::vocabulary(rule);
        (
            Just(rule.cmd.to_string()),
            prop::collection::vec(prop::sample::select(words), 0..rule.max_args + 2),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn every_read_verdict_keeps_the_stated_properties((cmd, args) in requests(Table::Allow)) {
        if let Err(broken) = oracle::check_properties(Table::Allow, &cmd, &args) {
            prop_assert!(false, "{cmd} {args:?}: {broken}");
        }
    }

    #[test]
    fn every_chore_action_verdict_keeps_the_stated_properties((cmd, args) in requests(Table::ChoreAction)) {
        if let Err(broken) = oracle::check_properties(Table::ChoreAction, &cmd, &args) {
            prop_assert!(false, "{cmd} {args:?}: {broken}");
        }
    }

    #[test]
    fn the_matcher_never_panics_on_arbitrary_strings(cmd in ".{0,12}", args in prop::collection::vec(".{0,24}", 0..20)) {
        let _ = aromba_warden::policy::check(Table::Allow, &cmd, &args, &oracle::requester(Table::Allow));
        let _ = aromba_warden::policy::check(Table::ChoreAction, &cmd, &args, &oracle::requester(Table::ChoreAction));
    }
}

#[test]
fn the_generator_reaches_allowed_verdicts() {
    // A property test whose requests were all refused would prove nothing.
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = requests(Table::Allow);
    let allowed = (0..2000)
        .filter(|_| {
            let (cmd, args) = strategy.new_tree(&mut runner).unwrap().current();
            aromba_warden::policy::check(
                Table::Allow,
                &cmd,
                &args,
                &oracle::requester(Table::Allow),
            )
            .is_ok()
        })
        .count();
    assert!(
        allowed > 100,
        "only {allowed} of 2000 generated requests were allowed"
    );
}
