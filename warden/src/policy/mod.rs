//! The Warden's policy: compiled in, rendered for people, and the one
//! matcher every request goes through.
//!
//! Allowlist-only on exact tokens: GNU tools accept abbreviated long options
//! (`du --files0-fr=F` is `--files0-from=F`), so any argument starting with
//! `-` that the rule does not list is refused, as are bundles with one
//! unlisted letter. The order of checks for a request:
//!
//! 1. no NUL or other control byte in the command or any argument;
//! 2. the `[deny]` patterns against the whole request (`cmd arg arg…`): a
//!    hit refuses it and is a ladder signal;
//! 3. the command must have a rule;
//! 4. the argument count, then the grammar (see [`types::Rule`]): the verb
//!    first, exactly, where the tool reads it, which picks the rule's one
//!    form; then every other argument by that form alone, so a word is a
//!    positional only after a verb that reads one of its kind;
//! 5. path arguments are resolved and checked against `[paths]`: a secret
//!    or fenced path refuses the request and is a ladder signal; so is
//!    (without a signal) a path on which the requester could swap a
//!    directory before the program opens it (`paths.rs`).

#![forbid(unsafe_code)]

mod data;
mod paths;
mod render;
pub mod template;
pub mod types;
mod values;

pub use data::{ALLOW, CAT_FILES, CHORE_ACTION_RULES, CHORE_ACTIONS, DENY, LIMITS, PATHS};
pub use paths::{PathRefusal, Requester, check_path, secret_rule};
pub use render::render;
pub use types::{Positional, Rule, Sub, ValueType};
pub use values::{
    OUTPUT_MODES, POSITIONAL_KINDS, VALUE_TYPES, describe, describe_positional, positional_matches,
    value_matches,
};

use crate::signal::Signal;
use regex::Regex;
use std::fmt;
use std::sync::OnceLock;

/// Which list a request is judged against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    /// `[[allow]]`: reads the Worker may ask for.
    Allow,
    /// `[[chore_action]]`: what a chore may have run after a clean real run.
    ChoreAction,
}

impl Table {
    pub fn name(self) -> &'static str {
        match self {
            Table::Allow => "allow",
            Table::ChoreAction => "chore_action",
        }
    }

    fn rules(self) -> &'static [Rule] {
        match self {
            Table::Allow => ALLOW,
            Table::ChoreAction => CHORE_ACTIONS,
        }
    }
}

/// A request the policy allows, with its path arguments resolved.
#[derive(Debug)]
pub struct Allowed {
    pub table: Table,
    pub rule: &'static Rule,
    pub args: Vec<String>,
}

impl Allowed {
    /// `[[allow]] "df"`.
    pub fn rule_name(&self) -> String {
        format!("[[{}]] {:?}", self.table.name(), self.rule.cmd)
    }
}

/// A refused request: why, and the ladder signal it raises, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    pub reason: String,
    pub signal: Option<Signal>,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

fn refuse(reason: impl Into<String>) -> Refused {
    Refused {
        reason: reason.into(),
        signal: None,
    }
}

pub const MAX_ARG: usize = 4096;

/// Whether a unit name matches `never_restart`: a service no chore action
/// may restart, under any of its names (the server checks every name the
/// unit has, aliases included, before a restart runs).
/// A pattern that does not compile matches every unit (no restart at all):
/// the rule fails closed (a test holds that it compiles).
pub fn never_restart_matches(unit: &str) -> bool {
    never_restart().is_none_or(|re| re.is_match(unit))
}

fn never_restart() -> Option<&'static Regex> {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    RE.get_or_init(|| Regex::new(CHORE_ACTION_RULES.never_restart).ok())
        .as_ref()
}

/// Whether `name` has a package name's shape; a pattern that does not
/// compile takes none (a test holds that it compiles).
fn package_name_matches(name: &str) -> bool {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    RE.get_or_init(|| Regex::new(CHORE_ACTION_RULES.package_name).ok())
        .as_ref()
        .is_some_and(|re| re.is_match(name))
}

/// The `[deny]` pattern that matches the whole request, if any (one copy
/// with the Worker's, in the contract crate).
pub use aromba_warden_proto::rules::deny_hit;

fn control_byte(s: &str) -> Option<u8> {
    s.bytes().find(|&b| b < 0x20 || b == 0x7f)
}

/// Judges `cmd args…` against `table`, asked by `requester`.
pub fn check(
    table: Table,
    cmd: &str,
    args: &[String],
    requester: &Requester,
) -> Result<Allowed, Refused> {
    if cmd.is_empty() || cmd.len() > 64 {
        return Err(refuse("the command name must be 1 to 64 bytes"));
    }
    for s in std::iter::once(cmd).chain(args.iter().map(String::as_str)) {
        if let Some(b) = control_byte(s) {
            let what = if b == 0 {
                "a NUL byte".to_string()
            } else {
                format!("control byte 0x{b:02x}")
            };
            return Err(refuse(format!("{what} in {s:?} is refused")));
        }
        if s.len() > MAX_ARG {
            return Err(refuse(format!(
                "an argument is longer than {MAX_ARG} bytes"
            )));
        }
    }
    if let Some(pattern) = deny_hit(cmd, args) {
        return Err(Refused {
            reason: format!("the request matches the deny pattern {pattern:?}"),
            signal: Some(Signal::DenyListHit { pattern }),
        });
    }
    let Some(rule) = table.rules().iter().find(|r| r.cmd == cmd) else {
        return Err(refuse(format!(
            "{cmd:?} is not in the policy's [[{}]] list",
            table.name()
        )));
    };
    let min = rule.min_args.unwrap_or(0);
    if args.len() > rule.max_args {
        return Err(refuse(format!(
            "{cmd} takes at most {} arguments",
            rule.max_args
        )));
    }
    if args.len() < min {
        return Err(refuse(format!("{cmd} takes at least {min} arguments")));
    }
    let args = Grammar { rule, requester }.check(args)?;
    Ok(Allowed { table, rule, args })
}

struct Grammar<'a> {
    rule: &'static Rule,
    requester: &'a Requester,
}

/// The form a request takes: the rule's form whose verb it starts with, and
/// how many arguments the verb (and `before` tokens) took.
struct Form {
    sub: &'static Sub,
    /// `cmd verb` for messages.
    name: String,
    start: usize,
}

/// The words of `verb` (`"system df"` is two arguments).
fn verb_words(verb: &str) -> impl Iterator<Item = &str> {
    verb.split(' ')
}

/// Whether `a` is one of the words of any of the rule's verbs.
fn is_verb_word(rule: &Rule, a: &str) -> bool {
    rule.subs
        .iter()
        .flat_map(|s| s.verbs.iter())
        .any(|v| verb_words(v).any(|w| w == a))
}

impl Grammar<'_> {
    /// The form `args` take: the verb is matched first, exactly and where
    /// the tool reads it, so no other word can stand in its place.
    fn form(&self, args: &[String]) -> Result<Form, Refused> {
        let rule = self.rule;
        let cmd = rule.cmd;
        if let Some(sub) = rule.verbless() {
            return Ok(Form {
                sub,
                name: cmd.to_string(),
                start: 0,
            });
        }
        // The longest verb that starts the request: `status verbose` is one
        // verb of two words, never `status` and a second verb.
        let mut found: Option<(&'static Sub, &str, usize, usize)> = None;
        for sub in rule.subs {
            let lead = args
                .iter()
                .take_while(|a| sub.before.contains(&a.as_str()))
                .count();
            let rest = &args[lead..];
            for verb in sub.verbs {
                let n = verb_words(verb).count();
                let matches = rest.len() >= n && verb_words(verb).zip(rest).all(|(w, a)| w == a);
                if matches && found.is_none_or(|(_, _, _, m)| n > m) {
                    found = Some((sub, verb, lead, n));
                }
            }
        }
        if let Some((sub, verb, lead, n)) = found {
            return Ok(Form {
                sub,
                name: format!("{cmd} {verb}"),
                start: lead + n,
            });
        }
        let verbs: Vec<&str> = rule
            .subs
            .iter()
            .flat_map(|s| s.verbs.iter().copied())
            .collect();
        Err(refuse(match args.first() {
            None => format!("{cmd} needs one of {verbs:?} first"),
            Some(first) => {
                format!("{cmd}: {first:?} does not start one of the allowed verbs {verbs:?}")
            }
        }))
    }

    fn check(&self, args: &[String]) -> Result<Vec<String>, Refused> {
        let rule = self.rule;
        let Form { sub, name, start } = self.form(args)?;
        let mut out: Vec<String> = args[..start].to_vec();
        let mut positionals = 0usize;
        let mut i = start;
        while i < args.len() {
            let a = args[i].as_str();
            if a == "--" {
                return Err(refuse(format!("{name}: \"--\" is refused")));
            }
            if let Some(v) = sub.valued.iter().find(|v| v.option == a) {
                let Some(value) = args.get(i + 1) else {
                    return Err(refuse(format!(
                        "{name}: {a} needs a <{}> value",
                        v.value.name()
                    )));
                };
                check_value(&name, a, v.value, value)?;
                out.push(a.to_string());
                out.push(value.clone());
                i += 2;
                continue;
            }
            if sub.tokens.contains(&a) {
                out.push(a.to_string());
                i += 1;
                continue;
            }
            if let Some(v) = sub.prefixed.iter().find(|v| a.starts_with(v.option)) {
                check_value(&name, v.option, v.value, &a[v.option.len()..])?;
                out.push(a.to_string());
                i += 1;
                continue;
            }
            if is_bundle(a, sub.flag_letters) {
                out.push(a.to_string());
                i += 1;
                continue;
            }
            if a.starts_with('-') {
                return Err(refuse(format!(
                    "{name}: the option {a:?} is not in the policy"
                )));
            }
            if is_verb_word(rule, a) {
                return Err(refuse(format!("{name}: a second verb {a:?} is refused")));
            }
            if sub.positional == Positional::None {
                return Err(refuse(format!(
                    "{name} takes no positional arguments, got {a:?}"
                )));
            }
            positionals += 1;
            if let Some(max) = sub.max_positional
                && positionals > max
            {
                return Err(refuse(format!(
                    "{name} takes at most {max} <{}>",
                    sub.positional.name()
                )));
            }
            out.push(positional(rule, sub.positional, a, self.requester)?);
            i += 1;
        }
        if positionals < sub.min_positional {
            return Err(refuse(format!(
                "{name} needs at least {} <{}>",
                sub.min_positional,
                sub.positional.name()
            )));
        }
        Ok(out)
    }
}

/// Whether dpkg lists `package` as installed (`/var/lib/dpkg/status`).
pub fn dpkg_installed(package: &str) -> bool {
    let Ok(status) = std::fs::read_to_string("/var/lib/dpkg/status") else {
        return false;
    };
    status.split("\n\n").any(|stanza| {
        let mut name = false;
        let mut installed = false;
        for line in stanza.lines() {
            if let Some(p) = line.strip_prefix("Package: ") {
                name = p == package;
            } else if let Some(s) = line.strip_prefix("Status: ") {
                installed = s == "install ok installed";
            }
        }
        name && installed
    })
}

/// `-xyz` made only of listed letters (one or more).
fn is_bundle(a: &str, letters: &str) -> bool {
    let Some(rest) = a.strip_prefix('-') else {
        return false;
    };
    !letters.is_empty()
        && !rest.is_empty()
        && !rest.starts_with('-')
        && rest.chars().all(|c| letters.contains(c))
}

fn check_value(name: &str, option: &str, t: ValueType, value: &str) -> Result<(), Refused> {
    if value.starts_with('-') {
        return Err(refuse(format!(
            "{name}: the value of {option} must not start with \"-\""
        )));
    }
    if t == ValueType::Template
        && let Err(template::TemplateRefusal(why)) = template::check(value)
    {
        return Err(refuse(format!("{name}: {option}: {why}")));
    }
    if !value_matches(t, value) {
        return Err(refuse(format!(
            "{name}: {value:?} is not a valid <{}> for {option}",
            t.name()
        )));
    }
    Ok(())
}

/// Judges one positional argument; returns what to run with (a resolved
/// path for `path`, the argument itself otherwise).
fn positional(
    rule: &Rule,
    kind: Positional,
    a: &str,
    requester: &Requester,
) -> Result<String, Refused> {
    let cmd = rule.cmd;
    match kind {
        Positional::None => Err(refuse(format!(
            "{cmd} takes no positional arguments, got {a:?}"
        ))),
        Positional::Path => check_path(a, requester).map_err(|e| match e {
            PathRefusal::Secret { path, rule } => Refused {
                reason: format!("{cmd}: {path} is a secret or fenced path ({rule})"),
                signal: Some(Signal::SecretPathRead { path, rule }),
            },
            other => refuse(format!("{cmd}: {a:?}: {other}")),
        }),
        Positional::File => {
            if !CAT_FILES.contains(&a) {
                let reason = format!("{cmd} reads only the files listed in [cat], not {a:?}");
                // An unlisted secret path is still a read of a secret path.
                let signal = match secret_rule(a) {
                    Err(PathRefusal::Secret { path, rule }) => {
                        Some(Signal::SecretPathRead { path, rule })
                    }
                    _ => None,
                };
                return Err(Refused { reason, signal });
            }
            // Listed files are root's; a listed file that resolves elsewhere
            // must resolve to another listed file or to the kernel's /proc.
            let resolved = std::fs::canonicalize(a)
                .map_err(|e| refuse(format!("{cmd}: {a:?} cannot be resolved: {e}")))?;
            let resolved = resolved.to_string_lossy();
            let fine = resolved == a
                || CAT_FILES.contains(&resolved.as_ref())
                || resolved.starts_with("/proc/");
            if !fine {
                return Err(Refused {
                    reason: format!("{cmd}: {a} resolves to {resolved}, which is not listed"),
                    signal: Some(Signal::SecretPathRead {
                        path: resolved.to_string(),
                        rule: "[cat] files".to_string(),
                    }),
                });
            }
            Ok(a.to_string())
        }
        Positional::Service => {
            if !positional_matches(kind, a) {
                return Err(refuse(format!("{cmd}: {a:?} is not a valid service name")));
            }
            let unit = if a.ends_with(".service") {
                a.to_string()
            } else {
                format!("{a}.service")
            };
            if !a.ends_with(".service") && a.contains('.') && !a.contains('@') {
                return Err(refuse(format!("{cmd}: {a:?} is not a service unit")));
            }
            if never_restart_matches(&unit) {
                return Err(refuse(format!("{cmd}: {unit} matches never_restart")));
            }
            Ok(a.to_string())
        }
        Positional::Package => {
            if !package_name_matches(a) {
                return Err(refuse(format!("{cmd}: {a:?} is not a valid package name")));
            }
            if !CHORE_ACTION_RULES.new_packages.contains(&a) && !dpkg_installed(a) {
                return Err(refuse(format!(
                    "{cmd}: {a} is neither installed here nor one of {:?}",
                    CHORE_ACTION_RULES.new_packages
                )));
            }
            Ok(a.to_string())
        }
        Positional::Container | Positional::Unit | Positional::Match | Positional::Jail => {
            if !positional_matches(kind, a) {
                return Err(refuse(format!(
                    "{cmd}: {a:?} is not a valid <{}>",
                    kind.name()
                )));
            }
            Ok(a.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chore_action_patterns_compile() {
        assert!(never_restart().is_some());
        assert!(package_name_matches("fail2ban") && !package_name_matches("-x"));
    }

    /// A request can take only one form: every verb is distinct and none
    /// is a word-prefix of another in a different form (the longest match
    /// wins within a form only), a form without verbs is its rule's only
    /// form, and `before` tokens are never verb words.
    #[test]
    fn every_rule_s_forms_are_unambiguous() {
        for rule in ALLOW.iter().chain(CHORE_ACTIONS) {
            assert!(!rule.subs.is_empty(), "{} has no form", rule.cmd);
            if rule.subs.iter().any(|s| s.verbs.is_empty()) {
                assert!(
                    rule.verbless().is_some(),
                    "{}: a verbless form among others",
                    rule.cmd
                );
            }
            let verbs: Vec<(usize, Vec<&str>)> = rule
                .subs
                .iter()
                .enumerate()
                .flat_map(|(i, s)| s.verbs.iter().map(move |v| (i, verb_words(v).collect())))
                .collect();
            for (i, a) in &verbs {
                for (j, b) in &verbs {
                    if std::ptr::eq(a, b) {
                        continue;
                    }
                    assert_ne!(a, b, "{}: a verb twice", rule.cmd);
                    if i != j {
                        assert!(
                            !b.starts_with(a),
                            "{}: {a:?} opens {b:?} of another form",
                            rule.cmd
                        );
                    }
                }
            }
            for s in rule.subs {
                for t in s.before {
                    assert!(
                        !is_verb_word(rule, t),
                        "{}: {t} is before and a verb",
                        rule.cmd
                    );
                }
                if s.positional == Positional::None {
                    assert_eq!(
                        (s.min_positional, s.max_positional),
                        (0, None),
                        "{}",
                        rule.cmd
                    );
                }
                assert!(
                    s.max_positional
                        .is_none_or(|m| m >= s.min_positional.max(1))
                );
            }
        }
    }

    #[test]
    fn the_longest_verb_wins() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let w = Requester::Warden;
        let ok = check(Table::Allow, "ufw", &args(&["status", "numbered"]), &w).expect("allowed");
        assert_eq!(ok.args, ["status", "numbered"]);
        assert!(check(Table::Allow, "docker", &args(&["system"]), &w).is_err());
    }
}
