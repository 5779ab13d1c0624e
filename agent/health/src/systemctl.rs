//! `systemctl list-units --failed --plain --no-legend --no-pager`.
//!
//! That command prints one unit a line: `name load active sub description`.
//! The parser also reads the other shapes systemd prints for the same list,
//! so a different flag or version is no failure: the `●` bullet (`*` in a
//! non-UTF-8 locale, `×` in newer versions) that `--plain` removes, and the
//! header and legend that `--no-legend` removes (the `LOAD   = …` footer of
//! older versions and the `Legend: LOAD   → …` one of newer versions).

use std::collections::HashSet;

use crate::error::{ErrorKind, ParseError, Source};
use crate::text::{Replacement, checked_lines, words};

/// No real system has more failed units; a longer list is refused.
pub const MAX_UNITS: usize = 4096;

/// The unit types systemd has; a name must end with one of them.
const UNIT_TYPES: [&str; 11] = [
    "service",
    "socket",
    "target",
    "device",
    "mount",
    "automount",
    "swap",
    "timer",
    "path",
    "slice",
    "scope",
];

/// One failed unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedUnit {
    /// `nginx.service`.
    pub name: String,
    /// `loaded`, `not-found`, `masked`, …
    pub load: String,
    /// `failed`.
    pub active: String,
    /// `failed`, `dead`, …
    pub sub: String,
    /// The unit's description; may be empty.
    pub description: String,
}

/// The failed units, each once, in the order listed. Empty output is no
/// failed units.
pub fn parse_failed_units(text: &str) -> Result<Vec<FailedUnit>, ParseError> {
    const S: Source = Source::Systemctl;
    let lines = checked_lines(S, text, Replacement::Allowed)?;
    let mut units = Vec::new();
    let mut names = HashSet::new();
    let mut in_footer = false;
    let mut header_seen = false;
    for (n, line) in lines {
        let trimmed = line.trim_matches(' ');
        if in_footer {
            if trimmed.is_empty() || is_footer(trimmed) {
                continue;
            }
            return Err(ParseError::at(S, n, ErrorKind::UnexpectedLine));
        }
        if trimmed.is_empty() {
            // The blank line before the legend; nothing but legend follows.
            in_footer = true;
            continue;
        }
        if !header_seen && units.is_empty() && is_header(trimmed) {
            header_seen = true;
            continue;
        }
        if is_footer(trimmed) && (header_seen || !units.is_empty()) {
            in_footer = true;
            continue;
        }
        let unit = unit_line(n, trimmed)?;
        if names.insert(unit.name.clone()) {
            if units.len() == MAX_UNITS {
                return Err(ParseError::whole(
                    S,
                    ErrorKind::TooManyEntries { limit: MAX_UNITS },
                ));
            }
            units.push(unit);
        }
    }
    Ok(units)
}

fn is_header(line: &str) -> bool {
    let w: Vec<&str> = words(line).into_iter().map(|(_, _, t)| t).collect();
    w.first() == Some(&"UNIT") && w.contains(&"LOAD") && w.contains(&"ACTIVE") && w.contains(&"SUB")
}

/// The legend and counts systemd prints after the list.
fn is_footer(line: &str) -> bool {
    const PREFIXES: [&str; 7] = [
        "LOAD ",
        "ACTIVE ",
        "SUB ",
        "JOB ",
        "Legend:",
        "To show all installed unit files",
        "Pass --all to see",
    ];
    if PREFIXES.iter().any(|p| line.starts_with(p)) {
        return true;
    }
    // "1 loaded units listed." (optionally followed by more sentences).
    let digits = line.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0 && line[digits..].starts_with(" loaded units listed")
}

fn unit_line(n: usize, line: &str) -> Result<FailedUnit, ParseError> {
    const S: Source = Source::Systemctl;
    let line = ["●", "×", "*"]
        .iter()
        .find_map(|b| line.strip_prefix(b).and_then(|r| r.strip_prefix(' ')))
        .map_or(line, |r| r.trim_start_matches(' '));
    let w = words(line);
    let columns = ["UNIT", "LOAD", "ACTIVE", "SUB"];
    if let Some(missing) = columns.get(w.len()) {
        return Err(ParseError::at(S, n, ErrorKind::MissingColumn(missing)));
    }
    let name = w[0].2;
    if !is_unit_name(name) {
        return Err(ParseError::at(S, n, ErrorKind::Invalid("UNIT")));
    }
    for (i, column) in columns.iter().enumerate().skip(1) {
        if !is_state(w[i].2) {
            return Err(ParseError::at(S, n, ErrorKind::Invalid(column)));
        }
    }
    let description = w
        .get(4)
        .map_or("", |&(start, _, _)| line[start..].trim_end_matches(' '));
    Ok(FailedUnit {
        name: name.to_owned(),
        load: w[1].2.to_owned(),
        active: w[2].2.to_owned(),
        sub: w[3].2.to_owned(),
        description: description.to_owned(),
    })
}

/// A unit name as systemd prints it: ASCII letters, digits and `:-_.\@`
/// (anything else is `\x`-escaped by systemd), ending in a unit type.
fn is_unit_name(name: &str) -> bool {
    name.len() <= 256
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b":-_.\\@".contains(&b))
        && name
            .rsplit_once('.')
            .is_some_and(|(stem, ty)| !stem.is_empty() && UNIT_TYPES.contains(&ty))
}

/// `loaded`, `not-found`, `failed`, `auto-restart`: lowercase and dashes.
fn is_state(word: &str) -> bool {
    !word.is_empty()
        && word.len() <= 32
        && word.bytes().all(|b| b.is_ascii_lowercase() || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_output_and_bulleted_output_read_the_same() {
        let plain = parse_failed_units(
            "nginx.service loaded failed failed A high performance web server\n",
        );
        let bulleted = parse_failed_units(
            "● nginx.service loaded failed failed A high performance web server\n",
        );
        assert_eq!(plain, bulleted);
        assert_eq!(
            plain.map(|u| (u[0].name.clone(), u[0].description.clone())),
            Ok((
                "nginx.service".to_owned(),
                "A high performance web server".to_owned()
            ))
        );
    }

    #[test]
    fn empty_output_is_no_failed_units() {
        assert_eq!(parse_failed_units(""), Ok(vec![]));
        assert_eq!(parse_failed_units("\n"), Ok(vec![]));
    }

    #[test]
    fn a_unit_without_description_is_read() {
        let u = parse_failed_units("a.service loaded failed failed\n");
        assert_eq!(u.map(|u| u[0].description.clone()), Ok(String::new()));
    }

    #[test]
    fn a_truncated_line_names_the_missing_column() {
        assert_eq!(
            parse_failed_units("ok.service loaded failed failed x\nnginx.service loaded\n")
                .map_err(|e| (e.line, e.kind)),
            Err((2, ErrorKind::MissingColumn("ACTIVE")))
        );
    }

    #[test]
    fn a_garbled_unit_name_is_refused() {
        for bad in [
            "nginx loaded failed failed x",
            "ngi\u{FFFD}nx.service loaded failed failed x",
            "nginx.servic loaded failed failed x",
            ".service loaded failed failed x",
        ] {
            assert_eq!(
                parse_failed_units(bad).map_err(|e| e.kind),
                Err(ErrorKind::Invalid("UNIT")),
                "{bad}"
            );
        }
    }

    #[test]
    fn units_after_the_legend_are_refused() {
        let text = "a.service loaded failed failed x\n\nb.service loaded failed failed y\n";
        assert_eq!(
            parse_failed_units(text).map_err(|e| (e.line, e.kind)),
            Err((3, ErrorKind::UnexpectedLine))
        );
    }

    #[test]
    fn a_unit_listed_twice_is_kept_once() {
        let text = "a.service loaded failed failed x\na.service loaded failed failed x\n";
        assert_eq!(parse_failed_units(text).map(|u| u.len()), Ok(1));
    }
}
