//! The shapes of the compiled-in policy.

#![forbid(unsafe_code)]

/// `[limits]`: defaults every rule may lower or raise.
#[derive(Debug)]
pub struct Limits {
    pub timeout_s: u64,
    pub max_output_bytes: u64,
}

/// One `[[allow]]` or `[[chore_action]]` entry: a command and its grammar.
///
/// The grammar is a list of forms (`subs`), each the arguments the real
/// tool reads for one verb or group of verbs. A tool that has verbs reads
/// different options, and different kinds of positional arguments, after
/// each of them (`systemctl status UNIT…` but `systemctl list-units` with
/// none); a word accepted as a positional must never be one the tool takes
/// as its verb (`systemctl --failed reboot` runs `reboot`). So the verb is
/// always matched first, in the place the tool reads it, and it picks the
/// only form whose fields judge the rest. A tool without verbs has one form
/// with no `verbs`; it renders inline, without a `sub` table.
///
/// `min_args`/`max_args` bound the number of arguments, all of them counted
/// (the verb's words too).
#[derive(Debug)]
pub struct Rule {
    pub cmd: &'static str,
    pub bins: &'static [&'static str],
    pub doc: &'static str,
    pub subs: &'static [Sub],
    pub min_args: Option<usize>,
    pub max_args: usize,
    pub warden_adds: &'static [&'static str],
    pub warden_env: &'static [&'static str],
    pub timeout_s: u64,
    pub low_priority: bool,
}

impl Rule {
    /// The rule's only form when the tool takes no verb.
    pub fn verbless(&self) -> Option<&'static Sub> {
        match self.subs {
            [only] if only.verbs.is_empty() && only.before.is_empty() => Some(only),
            _ => None,
        }
    }
}

/// One form of a command (`[[allow.sub]]` in the rendering). Every argument
/// after the verb must be accounted for by exactly one field; anything else
/// is refused. In matching order:
/// - `before`: exact tokens accepted only before the verb, for a tool that
///   reads options there and nowhere else (nft);
/// - `verbs`: the words that open the form, as the tool reads them — its
///   verb (`status`), a verb and its sub-verb as one string with a space
///   (`system df`: two arguments), or the option that is itself the request
///   (`--failed`, nginx's `-t`). Exactly one of them must come first (after
///   `before`). Empty: the tool takes no verb;
/// - `valued`: an option followed by a separate value of the named type;
/// - `tokens`: exact tokens;
/// - `prefixed`: `--opt=` followed by a value of the type in the same token;
/// - `flag_letters`: a `-xyz` bundle made only of these letters;
/// - `positional`: the kind of every other argument not starting with `-`,
///   never one of the rule's verb words; `min_positional` and
///   `max_positional` bound how many (no upper bound when `None`).
#[derive(Debug)]
pub struct Sub {
    pub verbs: &'static [&'static str],
    pub before: &'static [&'static str],
    pub flag_letters: &'static str,
    pub tokens: &'static [&'static str],
    pub valued: &'static [Valued],
    pub prefixed: &'static [Valued],
    pub positional: Positional,
    pub min_positional: usize,
    pub max_positional: Option<usize>,
}

/// A form with nothing in it, for `Sub { verbs: …, ..SUB }` in `data.rs`.
pub const SUB: Sub = Sub {
    verbs: &[],
    before: &[],
    flag_letters: "",
    tokens: &[],
    valued: &[],
    prefixed: &[],
    positional: Positional::None,
    min_positional: 0,
    max_positional: None,
};

/// An option that takes a value: `-n <number>` (valued) or `--lines=<number>`
/// (prefixed; `option` then ends in `=`).
#[derive(Debug)]
pub struct Valued {
    pub option: &'static str,
    pub value: ValueType,
}

/// The types of option values; each is a strict pattern with a length cap
/// (see `values.rs` and SECURITY.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueType {
    Number,
    Since,
    Unit,
    Output,
    Priority,
    FsType,
    Filter,
    Template,
}

impl ValueType {
    pub const fn name(self) -> &'static str {
        match self {
            ValueType::Number => "number",
            ValueType::Since => "since",
            ValueType::Unit => "unit",
            ValueType::Output => "output",
            ValueType::Priority => "priority",
            ValueType::FsType => "fstype",
            ValueType::Filter => "filter",
            ValueType::Template => "template",
        }
    }
}

/// What the arguments that are not options may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Positional {
    /// An absolute path, resolved through symlinks and checked against `[paths]`.
    Path,
    /// One of `[cat] files`.
    File,
    Container,
    Unit,
    /// A journal match on where an entry came from (`_SYSTEMD_UNIT=…`,
    /// `SYSLOG_IDENTIFIER=…`, …; never `MESSAGE`), or `+`.
    Match,
    Jail,
    /// A service name, never one matching `never_restart`.
    Service,
    /// A package name matching `package_name`.
    Package,
    /// No positional arguments at all.
    None,
}

impl Positional {
    pub const fn name(self) -> &'static str {
        match self {
            Positional::Path => "path",
            Positional::File => "file",
            Positional::Container => "container",
            Positional::Unit => "unit",
            Positional::Match => "match",
            Positional::Jail => "jail",
            Positional::Service => "service",
            Positional::Package => "package",
            Positional::None => "none",
        }
    }
}

/// `[chore_action_rules]`.
#[derive(Debug)]
pub struct ChoreActionRules {
    pub never_restart: &'static str,
    pub new_packages: &'static [&'static str],
    pub package_name: &'static str,
}

/// `[paths]`.
#[derive(Debug)]
pub struct PathRules {
    pub secret_prefixes: &'static [&'static str],
    pub secret_dirs: &'static [&'static str],
    pub secret_names: &'static [&'static str],
    pub fences: &'static [&'static str],
}
