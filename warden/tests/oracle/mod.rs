//! Properties every verdict of the policy matcher must have, stated apart
//! from the matcher and shared by the property tests and the fuzz target.

#![allow(dead_code)]

use aromba_warden::policy::{
    ALLOW, CHORE_ACTIONS, Positional, Requester, Rule, Sub, Table, check, deny_hit,
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
    let rules: &'static [Rule] = match table {
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
    let (sub, mut i) = form(rule, args).ok_or("allowed without one of the rule's verbs first")?;
    // Every argument after the verb is accounted for by exactly the kinds
    // its form lists.
    let mut positionals = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if let Some(v) = sub.valued.iter().find(|v| v.option == a) {
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
        let listed = sub.tokens.contains(&a)
            || sub.prefixed.iter().any(|p| a.starts_with(p.option))
            || (a.len() > 1
                && a.starts_with('-')
                && !a.starts_with("--")
                && !sub.flag_letters.is_empty()
                && a[1..].chars().all(|c| sub.flag_letters.contains(c)));
        if !listed {
            if a.starts_with('-') {
                return Err(format!("allowed an unlisted option {a:?}"));
            }
            if sub.positional == Positional::None {
                return Err(format!(
                    "allowed a positional argument {a:?} where none is allowed"
                ));
            }
            if verb_words(rule).contains(&a) {
                return Err(format!("allowed a second verb {a:?}"));
            }
            positionals += 1;
        }
        i += 1;
    }
    if positionals < sub.min_positional || sub.max_positional.is_some_and(|m| positionals > m) {
        return Err(format!("allowed {positionals} positional arguments"));
    }
    Ok(())
}

/// Every word of every verb of `rule`.
pub fn verb_words(rule: &Rule) -> Vec<&'static str> {
    rule.subs
        .iter()
        .flat_map(|s| s.verbs.iter())
        .flat_map(|v| v.split(' '))
        .collect()
}

/// The form `args` take and where its verb ends, stated apart from the
/// matcher: the `before` tokens, then one verb's words exactly.
pub fn form(rule: &'static Rule, args: &[String]) -> Option<(&'static Sub, usize)> {
    if let [only] = rule.subs
        && only.verbs.is_empty()
    {
        return Some((only, 0));
    }
    // The longest verb that starts the request.
    rule.subs
        .iter()
        .flat_map(|sub| {
            let lead = args
                .iter()
                .position(|a| !sub.before.contains(&a.as_str()))
                .unwrap_or(args.len());
            sub.verbs.iter().filter_map(move |verb| {
                let words: Vec<&str> = verb.split(' ').collect();
                let rest = &args[lead..];
                (rest.len() >= words.len() && words.iter().zip(rest).all(|(w, a)| w == a))
                    .then_some((sub, lead, words.len()))
            })
        })
        .max_by_key(|(_, _, n)| *n)
        .map(|(sub, lead, n)| (sub, lead + n))
}

/// The words a generator should draw from for `rule`: everything the rule
/// lists, values of its types, and near misses.
pub fn vocabulary(rule: &Rule) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    v.extend(verb_words(rule).iter().map(|s| s.to_string()));
    for sub in rule.subs {
        v.extend(sub.before.iter().map(|s| s.to_string()));
        v.extend(sub.tokens.iter().map(|s| s.to_string()));
        v.extend(sub.valued.iter().map(|s| s.option.to_string()));
        v.extend(sub.prefixed.iter().map(|p| format!("{}today", p.option)));
        v.extend(sub.prefixed.iter().map(|p| format!("{}5", p.option)));
        for c in sub.flag_letters.chars() {
            v.push(format!("-{c}"));
        }
        if sub.flag_letters.len() >= 2 {
            v.push(format!("-{}", &sub.flag_letters[..2]));
        }
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
