//! The one error type of every parser: which read, which line, what was wrong.

use std::fmt;

/// The read an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    /// `cat /proc/loadavg`
    LoadAvg,
    /// `nproc`
    Nproc,
    /// `cat /proc/meminfo`
    MemInfo,
    /// `df -P -B1 -T`, `df -P -k -T` or `df -P -i -T`
    Df,
    /// `systemctl list-units --failed --plain --no-legend --no-pager`
    Systemctl,
    /// `apt list --upgradable`
    Apt,
    /// `cat /run/reboot-required`
    RebootRequired,
    /// `cat /run/reboot-required.pkgs`
    RebootRequiredPkgs,
    /// `timedatectl show`
    Timedatectl,
}

impl Source {
    /// The command whose output was parsed, as a person would type it.
    pub fn command(self) -> &'static str {
        match self {
            Source::LoadAvg => "cat /proc/loadavg",
            Source::Nproc => "nproc",
            Source::MemInfo => "cat /proc/meminfo",
            Source::Df => "df",
            Source::Systemctl => "systemctl list-units --failed",
            Source::Apt => "apt list --upgradable",
            Source::RebootRequired => "cat /run/reboot-required",
            Source::RebootRequiredPkgs => "cat /run/reboot-required.pkgs",
            Source::Timedatectl => "timedatectl show",
        }
    }
}

/// What was wrong. Column and field names are the ones the command prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    /// The output is empty where the command always prints something.
    Empty,
    /// More lines than any real output has.
    TooManyLines { limit: usize },
    /// More entries (filesystems, units, packages) than are tracked.
    TooManyEntries { limit: usize },
    /// A line longer than any real output has.
    LineTooLong { limit: usize },
    /// A control character (other than the line break).
    ControlCharacter,
    /// U+FFFD where only ASCII belongs: the output was not UTF-8.
    ReplacementCharacter,
    /// The header line is not one this parser knows.
    UnknownHeader,
    /// The line ends before this column.
    MissingColumn(&'static str),
    /// The line has more columns than the command prints.
    ExtraColumn,
    /// This column is not a plain decimal number.
    NotANumber(&'static str),
    /// This number does not fit in 64 bits (after unit conversion).
    Overflow(&'static str),
    /// This field's text is not of the form the command prints.
    Invalid(&'static str),
    /// This field appears twice.
    Duplicate(&'static str),
    /// This field never appears.
    MissingField(&'static str),
    /// This field is zero where zero is impossible.
    Zero(&'static str),
    /// The command does not know this operation (e.g. systemd before 239
    /// has no `timedatectl show`).
    Unsupported,
    /// A line of no shape the command prints.
    UnexpectedLine,
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::Empty => write!(f, "the output is empty"),
            ErrorKind::TooManyLines { limit } => write!(f, "more than {limit} lines"),
            ErrorKind::TooManyEntries { limit } => write!(f, "more than {limit} entries"),
            ErrorKind::LineTooLong { limit } => write!(f, "longer than {limit} bytes"),
            ErrorKind::ControlCharacter => write!(f, "a control character"),
            ErrorKind::ReplacementCharacter => write!(f, "bytes that are not UTF-8"),
            ErrorKind::UnknownHeader => write!(f, "a header this parser does not know"),
            ErrorKind::MissingColumn(c) => write!(f, "the column {c:?} is missing"),
            ErrorKind::ExtraColumn => write!(f, "more columns than expected"),
            ErrorKind::NotANumber(c) => write!(f, "{c:?} is not a number"),
            ErrorKind::Overflow(c) => write!(f, "{c:?} is too large"),
            ErrorKind::Invalid(c) => write!(f, "{c:?} is not of the expected form"),
            ErrorKind::Duplicate(c) => write!(f, "{c:?} appears twice"),
            ErrorKind::MissingField(c) => write!(f, "{c:?} is missing"),
            ErrorKind::Zero(c) => write!(f, "{c:?} is zero"),
            ErrorKind::Unsupported => write!(f, "the command does not support this operation"),
            ErrorKind::UnexpectedLine => write!(f, "a line of unexpected shape"),
        }
    }
}

/// A parse failure: the read, the 1-based line (0 for the output as a
/// whole), and what was wrong. It never quotes the output, which may be
/// long or hostile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub source: Source,
    pub line: usize,
    pub kind: ErrorKind,
}

impl ParseError {
    pub(crate) fn at(source: Source, line: usize, kind: ErrorKind) -> Self {
        ParseError { source, line, kind }
    }

    pub(crate) fn whole(source: Source, kind: ErrorKind) -> Self {
        ParseError {
            source,
            line: 0,
            kind,
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.source.command(), self.kind)
        } else {
            write!(
                f,
                "{}: line {}: {}",
                self.source.command(),
                self.line,
                self.kind
            )
        }
    }
}

impl std::error::Error for ParseError {}
