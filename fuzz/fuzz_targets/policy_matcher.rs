//! The policy matcher on arbitrary argument vectors: no panic, and every
//! verdict keeps the properties stated in warden/tests/oracle/mod.rs.
//! Input: a table byte, then the command and its arguments separated by
//! 0xff (the command index picks a real rule half the time, so the fuzzer
//! reaches allowed verdicts).

#![no_main]

#[path = "../../warden/tests/oracle/mod.rs"]
mod oracle;

use aromba_warden::policy::{ALLOW, CHORE_ACTIONS, Table};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else { return };
    let table = if selector & 1 == 0 { Table::Allow } else { Table::ChoreAction };
    let rules = if table == Table::Allow { ALLOW } else { CHORE_ACTIONS };
    let mut parts = rest.split(|&b| b == 0xff).map(|p| String::from_utf8_lossy(p).into_owned());
    let named = parts.next().unwrap_or_default();
    let cmd = if selector & 2 == 0 {
        rules[usize::from(selector >> 2) % rules.len()].cmd.to_string()
    } else {
        named
    };
    let args: Vec<String> = parts.take(64).collect();
    if let Err(broken) = oracle::check_properties(table, &cmd, &args) {
        panic!("{cmd} {args:?}: {broken}");
    }
});
