//! The value types of options and the kinds of positional arguments, each a
//! strict pattern with a length cap, a fixed list (`<output>`) or a strict
//! parser (`<template>`, in `template.rs`). Every value and argument is also
//! refused when it starts with `-` or holds a control character (checked
//! before these run).

#![forbid(unsafe_code)]

use super::template;
use super::types::{Positional, ValueType};
use regex::Regex;
use std::sync::OnceLock;

/// A pattern and its cap in bytes.
struct Pattern {
    cap: usize,
    regex: &'static str,
}

const fn p(cap: usize, regex: &'static str) -> Pattern {
    Pattern { cap, regex }
}

const UNIT: Pattern = p(128, r"^[A-Za-z0-9][A-Za-z0-9_.:@-]*$");

/// journalctl's output modes whose text the redactor reads as written. Each
/// prints a field that holds control bytes either with its ANSI colour and
/// hyperlink sequences removed or as `[N blob data]` (seen with the real
/// journalctl in `tests/adversarial_output_modes.rs`). Refused: `json*` (such a field
/// becomes an array of byte numbers), `export` and `cat` (they write its raw
/// bytes, so a key split by a colour code, `sk_\e[1mlive_…`, passes the
/// redactor and is whole again on any terminal).
pub const OUTPUT_MODES: &[&str] = &[
    "short",
    "short-full",
    "short-iso",
    "short-iso-precise",
    "short-precise",
    "short-monotonic",
    "short-delta",
    "short-unix",
    "with-unit",
    "verbose",
];

/// The pattern of a type checked by one; `Output` is a list and `Template`
/// a parser.
fn value_pattern(t: ValueType) -> Option<Pattern> {
    Some(match t {
        ValueType::Number => p(7, r"^[0-9]+$"),
        ValueType::Since => p(
            32,
            r"^(?:today|yesterday|now|tomorrow|@[0-9]{1,12}|[0-9]{1,12}|[0-9]{1,6} ?(?:s|sec|secs|second|seconds|m|min|mins|minute|minutes|h|hour|hours|d|day|days|w|week|weeks)(?: ago)?|[0-9]{4}-[0-9]{2}-[0-9]{2}(?:[ T][0-9]{2}:[0-9]{2}(?::[0-9]{2})?Z?)?)$",
        ),
        ValueType::Unit => UNIT,
        ValueType::Output | ValueType::Template => return None,
        ValueType::Priority => p(
            32,
            r"^(?:[0-7]|emerg|alert|crit|err|warning|notice|info|debug)(?:\.\.(?:[0-7]|emerg|alert|crit|err|warning|notice|info|debug))?$",
        ),
        ValueType::FsType => p(32, r"^[a-z0-9][a-z0-9._]*$"),
        ValueType::Filter => p(160, r"^[a-z][a-z_.-]{0,31}=[A-Za-z0-9_.:/@+=-]*$"),
    })
}

/// Positional kinds checked by pattern; `Path`, `File`, `Service`,
/// `Package` and `None` have rules of their own in the matcher.
fn positional_pattern(k: Positional) -> Option<Pattern> {
    match k {
        Positional::Container => Some(p(128, r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")),
        Positional::Unit => Some(UNIT),
        Positional::Match => Some(p(
            192,
            // Fields that say where an entry came from, never what it says:
            // an exact match on MESSAGE (or any field a program writes)
            // would answer yes or no about text the redactor hides.
            r"^(?:\+|(?:_SYSTEMD_UNIT|_SYSTEMD_USER_UNIT|_SYSTEMD_SLICE|UNIT|USER_UNIT|SYSLOG_IDENTIFIER|SYSLOG_FACILITY|PRIORITY|_PID|_UID|_GID|_COMM|_EXE|_TRANSPORT|_BOOT_ID|_HOSTNAME|CONTAINER_NAME|CONTAINER_ID|IMAGE_NAME)=[A-Za-z0-9_.:@/+-]{1,128})$",
        )),
        Positional::Jail => Some(p(64, r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")),
        Positional::Service => Some(p(128, r"^[A-Za-z0-9][A-Za-z0-9_.:@-]*$")),
        Positional::Path | Positional::File | Positional::Package | Positional::None => None,
    }
}

pub const VALUE_TYPES: [ValueType; 8] = [
    ValueType::Number,
    ValueType::Since,
    ValueType::Unit,
    ValueType::Output,
    ValueType::Priority,
    ValueType::FsType,
    ValueType::Filter,
    ValueType::Template,
];

pub const POSITIONAL_KINDS: [Positional; 5] = [
    Positional::Container,
    Positional::Unit,
    Positional::Match,
    Positional::Jail,
    Positional::Service,
];

struct Compiled {
    values: Vec<(ValueType, usize, Regex)>,
    positionals: Vec<(Positional, usize, Regex)>,
}

fn compiled() -> &'static Compiled {
    static COMPILED: OnceLock<Compiled> = OnceLock::new();
    COMPILED.get_or_init(|| {
        // Fixed patterns, compiled once. One that does not compile is
        // left out, so its type takes no value (fails closed); a test
        // holds that each compiles.
        let build = |pat: &Pattern| Regex::new(pat.regex).ok();
        Compiled {
            values: VALUE_TYPES
                .iter()
                .filter_map(|&t| value_pattern(t).and_then(|pat| Some((t, pat.cap, build(&pat)?))))
                .collect(),
            positionals: POSITIONAL_KINDS
                .iter()
                .filter_map(|&k| {
                    positional_pattern(k).and_then(|pat| Some((k, pat.cap, build(&pat)?)))
                })
                .collect(),
        }
    })
}

/// Whether `value` is a valid value of type `t`.
pub fn value_matches(t: ValueType, value: &str) -> bool {
    match t {
        ValueType::Output => return OUTPUT_MODES.contains(&value),
        ValueType::Template => return template::check(value).is_ok(),
        _ => {}
    }
    compiled()
        .values
        .iter()
        .find(|(vt, _, _)| *vt == t)
        .is_some_and(|(_, cap, re)| value.len() <= *cap && re.is_match(value))
}

/// Whether `arg` is a valid positional argument of pattern-checked kind `k`.
pub fn positional_matches(k: Positional, arg: &str) -> bool {
    compiled()
        .positionals
        .iter()
        .find(|(pk, _, _)| *pk == k)
        .is_some_and(|(_, cap, re)| arg.len() <= *cap && re.is_match(arg))
}

/// What a value type accepts, as the rendering's `[values]` says it.
pub fn describe(t: ValueType) -> String {
    match t {
        ValueType::Output => format!("one of {}", OUTPUT_MODES.join(", ")),
        ValueType::Template => format!(
            "json, table, or [\"table \"] text and field references {{{{.Field}}}} {{{{.Field.Sub}}}} to docker's placeholders {}; no function, method, pipe, variable or trim (at most {} bytes)",
            template::FIELDS.join(" "),
            template::MAX_TEMPLATE
        ),
        _ => match value_pattern(t) {
            Some(pat) => format!("{} (at most {} bytes)", pat.regex, pat.cap),
            None => String::new(),
        },
    }
}

/// What a pattern-checked positional kind accepts, for `[values]`.
pub fn describe_positional(k: Positional) -> Option<String> {
    positional_pattern(k).map(|pat| format!("{} (at most {} bytes)", pat.regex, pat.cap))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_compiles() {
        // Output is a list and Template a parser; every other type a pattern.
        assert_eq!(compiled().values.len(), VALUE_TYPES.len() - 2);
        assert_eq!(compiled().positionals.len(), POSITIONAL_KINDS.len());
    }

    #[test]
    fn since_takes_journal_and_docker_forms() {
        for ok in [
            "today",
            "1 hour ago",
            "2h",
            "10m",
            "2026-12-01",
            "2026-12-01 10:00",
            "2026-12-01T10:00:00Z",
            "@1700000000",
        ] {
            assert!(value_matches(ValueType::Since, ok), "{ok}");
        }
        for bad in ["-1h", "1h; rm", "2026-12-01\n", "yesterday at noon"] {
            assert!(!value_matches(ValueType::Since, bad), "{bad}");
        }
    }

    #[test]
    fn number_is_capped() {
        assert!(value_matches(ValueType::Number, "5000000"));
        assert!(!value_matches(ValueType::Number, "50000000"));
        assert!(!value_matches(ValueType::Number, "5e3"));
    }
}
