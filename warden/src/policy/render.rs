//! Renders the compiled-in policy as the TOML text of
//! `/etc/aromba/warden/policy.toml`, byte for byte the block SECURITY.md
//! carries. Nothing parses this text: it is for people. It differs from the
//! specification's block where the grammar was tightened: a tool with verbs
//! has one `[[allow.sub]]` table per form (see `types::Sub`), and the value
//! types are listed in `[values]`.

#![forbid(unsafe_code)]

use super::data::{ALLOW, CAT_FILES, CHORE_ACTION_RULES, CHORE_ACTIONS, DENY, LIMITS, PATHS};
use super::types::{Rule, Sub, Valued};
use super::values::{POSITIONAL_KINDS, VALUE_TYPES, describe, describe_positional};
use std::fmt::Write;

const HEADER: &str = "\
# Aromba Warden policy — what the Worker may ask for without a button.
# Rendered by aromba-warden from its compiled-in policy. Editing this file
# changes nothing and trips the integrity check. Everything not listed is refused.
";

const CHORE_ACTION_HEADER: &str = "\
# What a chore may have the Warden run for it after a clean real run,
# outside the cage: a red chore any of these, a green one only time sync's
# two (timedatectl set-ntp true; restart of a time-sync unit). Nothing else.
";

/// A TOML basic string.
fn string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn array<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    let items: Vec<String> = items.into_iter().map(string).collect();
    format!("[{}]", items.join(", "))
}

fn valued(v: &[Valued], separator: &str) -> String {
    let items: Vec<String> = v
        .iter()
        .map(|v| format!("{}{separator}<{}>", v.option, v.value.name()))
        .collect();
    array(items.iter().map(String::as_str))
}

/// A form's grammar, each line behind `indent`.
fn sub(out: &mut String, s: &Sub, indent: &str) {
    if !s.before.is_empty() {
        let _ = writeln!(out, "{indent}before = {}", array(s.before.iter().copied()));
    }
    if !s.verbs.is_empty() {
        let _ = writeln!(out, "{indent}verbs = {}", array(s.verbs.iter().copied()));
    }
    if !s.flag_letters.is_empty() {
        let _ = writeln!(out, "{indent}flag_letters = {}", string(s.flag_letters));
    }
    if !s.tokens.is_empty() {
        let _ = writeln!(out, "{indent}tokens = {}", array(s.tokens.iter().copied()));
    }
    if !s.valued.is_empty() {
        let _ = writeln!(out, "{indent}valued = {}", valued(s.valued, " "));
    }
    if !s.prefixed.is_empty() {
        let _ = writeln!(out, "{indent}prefixed = {}", valued(s.prefixed, ""));
    }
    let _ = writeln!(out, "{indent}positional = {}", string(s.positional.name()));
    if s.min_positional > 0 {
        let _ = writeln!(out, "{indent}min_positional = {}", s.min_positional);
    }
    if let Some(max) = s.max_positional {
        let _ = writeln!(out, "{indent}max_positional = {max}");
    }
}

/// A rule. A tool without verbs has its one form inline, as the
/// specification's block has every rule; a tool with verbs has a
/// `[[TABLE.sub]]` table per form after the rule's own keys (TOML puts
/// each in the `sub` array of the rule above it).
fn rule(out: &mut String, table: &str, r: &Rule, comment_low_priority: bool) {
    let _ = writeln!(out, "[[{table}]]");
    let _ = writeln!(out, "cmd = {}", string(r.cmd));
    let _ = writeln!(out, "bins = {}", array(r.bins.iter().copied()));
    let _ = writeln!(out, "doc = {}", string(r.doc));
    if let Some(only) = r.verbless() {
        sub(out, only, "");
    }
    if let Some(min) = r.min_args {
        let _ = writeln!(out, "min_args = {min}");
    }
    let _ = writeln!(out, "max_args = {}", r.max_args);
    if !r.warden_adds.is_empty() {
        let _ = writeln!(
            out,
            "warden_adds = {}",
            array(r.warden_adds.iter().copied())
        );
    }
    if !r.warden_env.is_empty() {
        let _ = writeln!(out, "warden_env = {}", array(r.warden_env.iter().copied()));
    }
    let _ = writeln!(out, "timeout_s = {}", r.timeout_s);
    if r.low_priority {
        if comment_low_priority {
            out.push_str("low_priority = true # nice -n 19, ionice -c 3\n");
        } else {
            out.push_str("low_priority = true\n");
        }
    }
    if r.verbless().is_none() {
        for s in r.subs {
            let _ = writeln!(out, "  [[{table}.sub]]");
            sub(out, s, "  ");
        }
    }
}

/// The rendering, ending in a newline.
pub fn render() -> String {
    let mut out = String::with_capacity(16 << 10);
    out.push_str(HEADER);
    out.push('\n');
    let _ = writeln!(out, "[limits]");
    let _ = writeln!(out, "timeout_s = {}", LIMITS.timeout_s);
    let _ = writeln!(out, "max_output_bytes = {}", LIMITS.max_output_bytes);
    for r in ALLOW {
        out.push('\n');
        // A read explains its low_priority flag; chore actions do not repeat it.
        rule(&mut out, "allow", r, true);
    }
    out.push('\n');
    let _ = writeln!(out, "[cat]");
    let _ = writeln!(out, "files = {}", array(CAT_FILES.iter().copied()));
    out.push('\n');
    out.push_str(CHORE_ACTION_HEADER);
    for (i, r) in CHORE_ACTIONS.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        rule(&mut out, "chore_action", r, false);
    }
    out.push('\n');
    let rules = &CHORE_ACTION_RULES;
    out.push_str("[chore_action_rules]\n");
    out.push_str("# Core chores only. A restart never names a service matching this, whatever the chore's color:\n");
    let _ = writeln!(out, "never_restart = {}", string(rules.never_restart));
    let _ = writeln!(
        out,
        "new_packages = {}",
        array(rules.new_packages.iter().copied())
    );
    out.push_str("# A package is one dpkg lists as installed here, or one of new_packages; its name ends in a letter, a digit or +.\n");
    let _ = writeln!(out, "package_name = {}", string(rules.package_name));
    out.push('\n');
    out.push_str("[paths]\n");
    out.push_str("# Absolute, no \"..\", resolved through symlinks, then checked against these.\n");
    let _ = writeln!(
        out,
        "secret_prefixes = {}",
        array(PATHS.secret_prefixes.iter().copied())
    );
    let _ = writeln!(
        out,
        "secret_dirs = {}",
        array(PATHS.secret_dirs.iter().copied())
    );
    let _ = writeln!(
        out,
        "secret_names = {}",
        array(PATHS.secret_names.iter().copied())
    );
    let _ = writeln!(out, "fences = {}", array(PATHS.fences.iter().copied()));
    out.push('\n');
    out.push_str("[deny]\n");
    out.push_str("# Matched against the whole request; a hit counts toward the ladder.\n");
    for (name, pattern) in DENY {
        let _ = writeln!(out, "{name} = {}", string(pattern));
    }
    out.push('\n');
    out.push_str("[values]\n");
    out.push_str("# What the value of each <type> in valued and prefixed may be. No value starts with \"-\";\n");
    out.push_str("# no argument holds a control byte.\n");
    for t in VALUE_TYPES {
        let _ = writeln!(out, "{} = {}", t.name(), string(&describe(t)));
    }
    out.push('\n');
    out.push_str("[positional_kinds]\n");
    out.push_str("# The positional kinds checked by a pattern (path is judged by [paths], file by [cat], package by package_name).\n");
    for k in POSITIONAL_KINDS {
        if let Some(d) = describe_positional(k) {
            let _ = writeln!(out, "{} = {}", k.name(), string(&d));
        }
    }
    out
}
