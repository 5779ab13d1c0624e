//! Properties every verdict of the policy matcher must have, stated apart
//! from the matcher and shared by the property tests and the fuzz target.

#![allow(dead_code)]

use aromba_warden::policy::{
    ALLOW, CHORE_ACTIONS, Positional, Requester, Rule, Table, check, deny_hit,
};
use aromba_warden::users::WorkerAccount;

/// Who asks, as the server has it: a read comes from the Worker (a test
/// account owning nothing here), a chore action from the Warden.
pub fn requester(table: Table) -> Requester {
    match table {
        Table::Allow => Requester::Worker(WorkerAccount {
            uid: 4_242_000,
            gids: vec![4_242_000],
        }),
        Table::ChoreAction => Requester::Warden,
    }
}

/// Checks the matcher's verdict on `cmd args…` against the stated
/// properties; returns what broke.
pub fn check_properties(table: Table, cmd: &str, args: &[String]) -> Result<(), String> {
    let first = check(table, cmd, args, &requester(table));
    let second = check(table, cmd, args, &requester(table));
    if first.is_ok() != second.is_ok() {
        return Err("the same request got two verdicts".into());
    }
    let Ok(allowed) = first else { return Ok(()) };
    let rules: &[Rule] = match table {
        Table::Allow => ALLOW,
        Table::ChoreAction => CHORE_ACTIONS,
    };
    let rule = rules
        .iter()
        .find(|r| r.cmd == cmd)
        .ok_or("allowed a command without a rule")?;
    if allowed.rule.cmd != rule.cmd || allowed.table != table {
        return Err("allowed under another command's rule".into());
    }
    if args.len() > rule.max_args || args.len() < rule.min_args.unwrap_or(0) {
        return Err("allowed with an argument count out of bounds".into());
    }
    if allowed.args.len() != args.len() {
        return Err("the arguments to run differ in number from those asked".into());
    }
    if deny_hit(cmd, args).is_some() {
        return Err("allowed a request a deny pattern matches".into());
    }
    for (i, a) in args.iter().enumerate() {
        if a.bytes().any(|b| b < 0x20 || b == 0x7f) {
            return Err(format!("allowed a control byte in argument {i}"));
        }
        if a == "--" {
            return Err("allowed \"--\"".into());
        }
    }
    if !rule.first.is_empty() && !rule.first.contains(&args[0].as_str()) {
        return Err("allowed without one of `first` first".into());
    }
    // Every argument is accounted for by exactly the kinds the rule lists.
    let mut i = usize::from(!rule.first.is_empty());
    while i < args.len() {
        let a = args[i].as_str();
        if let Some(v) = rule.valued.iter().find(|v| v.option == a) {
            let value = args
                .get(i + 1)
                .ok_or("allowed a valued option without a value")?;
            if value.starts_with('-') {
                return Err(format!(
                    "allowed a value starting with '-' after {}",
                    v.option
                ));
            }
            i += 2;
            continue;
        }
        let listed = rule.tokens.contains(&a)
            || rule.prefixed.iter().any(|p| a.starts_with(p.option))
            || (a.len() > 1
                && a.starts_with('-')
                && !a.starts_with("--")
                && !rule.flag_letters.is_empty()
                && a[1..].chars().all(|c| rule.flag_letters.contains(c)));
        if !listed {
            if a.starts_with('-') {
                return Err(format!("allowed an unlisted option {a:?}"));
            }
            if rule.positional == Positional::None {
                return Err(format!(
                    "allowed a positional argument {a:?} where none is allowed"
                ));
            }
            if rule.first.contains(&a) {
                return Err(format!("allowed a second subcommand {a:?}"));
            }
        }
        i += 1;
    }
    Ok(())
}

/// The words a generator should draw from for `rule`: everything the rule
/// lists, values of its types, and near misses.
pub fn vocabulary(rule: &Rule) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    v.extend(rule.first.iter().map(|s| s.to_string()));
    v.extend(rule.tokens.iter().map(|s| s.to_string()));
    v.extend(rule.valued.iter().map(|s| s.option.to_string()));
    v.extend(rule.prefixed.iter().map(|p| format!("{}today", p.option)));
    v.extend(rule.prefixed.iter().map(|p| format!("{}5", p.option)));
    for c in rule.flag_letters.chars() {
        v.push(format!("-{c}"));
    }
    if rule.flag_letters.len() >= 2 {
        v.push(format!("-{}", &rule.flag_letters[..2]));
    }
    v.extend(
        [
            "/",
            "/var/log",
            "/etc/shadow",
            "/proc/self/environ",
            "nginx",
            "5",
            "today",
            "-5",
            "--",
            "--files0-fr=/etc/shadow",
            "-Z",
            "--no-pager",
            "x\ny",
            "a\0b",
            "json",
            "err",
            "ext4",
            "status=running",
            "{{.Names}}",
            "/etc/os-release",
            "/proc/meminfo",
            "_COMM=sshd",
            "+",
            "sshd",
            "fail2ban",
            "openssl",
            "aromba",
            "dbus",
            "true",
            "-y",
            "--only-upgrade",
            "prune",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    v
}
