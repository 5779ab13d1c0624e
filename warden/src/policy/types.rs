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
/// Every argument must be accounted for by exactly one field; anything else
/// is refused. In matching order:
/// - `first`: when non-empty, the first argument must be one of these (a
///   subcommand), and no later argument may be one of them unless it is also
///   a token;
/// - `valued`: an option followed by a separate value of the named type;
/// - `tokens`: exact tokens;
/// - `prefixed`: `--opt=` followed by a value of the type in the same token;
/// - `flag_letters`: a `-xyz` bundle made only of these letters;
/// - `positional`: the kind of every argument that does not start with `-`;
/// - `min_args`/`max_args`: bounds on the number of arguments (all of them,
///   `first` included).
#[derive(Debug)]
pub struct Rule {
    pub cmd: &'static str,
    pub bins: &'static [&'static str],
    pub doc: &'static str,
    pub first: &'static [&'static str],
    pub flag_letters: &'static str,
    pub tokens: &'static [&'static str],
    pub valued: &'static [Valued],
    pub prefixed: &'static [Valued],
    pub positional: Positional,
    pub min_args: Option<usize>,
    pub max_args: usize,
    pub warden_adds: &'static [&'static str],
    pub warden_env: &'static [&'static str],
    pub timeout_s: u64,
    pub low_priority: bool,
}

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
    Pattern,
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
            ValueType::Pattern => "pattern",
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
    /// A journal match: `FIELD=value` or `+`.
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
