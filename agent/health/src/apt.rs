//! `apt list --upgradable`.
//!
//! One package a line: `name/suite[,suite…] version arch [upgradable from:
//! version]`. The `Listing...` line, apt's warning that its command line
//! interface is unstable (on stderr, but kept if the caller merged it) and
//! `N:` notices are skipped; any other line must be a package line.
//!
//! An update counts as a security update when one of its suites contains
//! `-security`: Debian 11 and later (`bookworm-security`,
//! `oldstable-security`) and Ubuntu (`jammy-security`, and the Ubuntu Pro
//! `jammy-infra-security`, `jammy-apps-security`). Debian 10 and older
//! served security updates as `stable` (`buster/updates`), which apt lists
//! under the plain suite name; those are not recognised.

use crate::error::{ErrorKind, ParseError, Source};
use crate::text::{Replacement, checked_lines, is_package_name, words};

/// More than any real system has pending; a longer list is refused.
pub const MAX_UPGRADES: usize = 20_000;

/// One pending update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upgrade {
    pub package: String,
    /// The suites that offer the new version, each once (`jammy-updates`,
    /// `jammy-security`).
    pub suites: Vec<String>,
    /// The version that would be installed.
    pub new_version: String,
    pub arch: String,
    /// The version installed now.
    pub current_version: String,
}

impl Upgrade {
    /// Whether a security suite offers this update.
    pub fn is_security(&self) -> bool {
        self.suites.iter().any(|s| s.contains("-security"))
    }
}

/// The pending updates, in the order listed.
pub fn parse_apt_upgradable(text: &str) -> Result<Vec<Upgrade>, ParseError> {
    const S: Source = Source::Apt;
    let lines = checked_lines(S, text, Replacement::Refused)?;
    let mut out = Vec::new();
    for (n, line) in lines {
        let trimmed = line.trim_matches(' ');
        if trimmed.is_empty()
            || trimmed.starts_with("Listing...")
            || trimmed.starts_with("WARNING: apt does not have a stable CLI interface")
            || trimmed.starts_with("N: ")
        {
            continue;
        }
        if out.len() == MAX_UPGRADES {
            return Err(ParseError::whole(
                S,
                ErrorKind::TooManyEntries {
                    limit: MAX_UPGRADES,
                },
            ));
        }
        out.push(upgrade_line(n, trimmed)?);
    }
    Ok(out)
}

fn upgrade_line(n: usize, line: &str) -> Result<Upgrade, ParseError> {
    const S: Source = Source::Apt;
    let err = |kind| ParseError::at(S, n, kind);
    let w: Vec<&str> = words(line).into_iter().map(|(_, _, t)| t).collect();
    let [name_suites, new_version, arch, upgradable, from, current] = w.as_slice() else {
        return Err(err(if w.len() > 6 {
            ErrorKind::ExtraColumn
        } else {
            ErrorKind::MissingColumn(
                [
                    "package",
                    "version",
                    "arch",
                    "[upgradable",
                    "from:",
                    "version]",
                ][w.len()],
            )
        }));
    };
    let (package, suites) = name_suites
        .split_once('/')
        .ok_or(err(ErrorKind::Invalid("package/suite")))?;
    if !is_package_name(package) {
        return Err(err(ErrorKind::Invalid("package")));
    }
    let mut suite_list: Vec<String> = Vec::new();
    for suite in suites.split(',') {
        if !is_suite(suite) {
            return Err(err(ErrorKind::Invalid("suite")));
        }
        if !suite_list.iter().any(|s| s == suite) {
            suite_list.push(suite.to_owned());
        }
    }
    if !is_version(new_version) {
        return Err(err(ErrorKind::Invalid("version")));
    }
    if arch.is_empty()
        || !arch
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Err(err(ErrorKind::Invalid("arch")));
    }
    if *upgradable != "[upgradable" || *from != "from:" {
        return Err(err(ErrorKind::Invalid("[upgradable from:")));
    }
    // A line cut short (by a terminal's width, or a truncated read) loses
    // its closing bracket.
    let current = current
        .strip_suffix(']')
        .filter(|v| is_version(v))
        .ok_or(err(ErrorKind::Invalid("upgradable from")))?;
    Ok(Upgrade {
        package: package.to_owned(),
        suites: suite_list,
        new_version: (*new_version).to_owned(),
        arch: (*arch).to_owned(),
        current_version: current.to_owned(),
    })
}

/// A suite or codename: `stable`, `jammy-security`, `bookworm-backports`.
fn is_suite(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._+~".contains(&b))
}

/// A Debian version: `[epoch:]upstream[-revision]`, the characters dpkg
/// allows, starting with a letter or digit (policy asks for a digit, but
/// dpkg accepts a letter, and third-party repositories use one).
fn is_version(v: &str) -> bool {
    v.len() <= 256
        && v.as_bytes().first().is_some_and(u8::is_ascii_alphanumeric)
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".+~:-".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_line_and_its_security_suite() {
        let u = parse_apt_upgradable(
            "Listing... Done\nlibssl3/jammy-updates,jammy-security 3.0.2-0ubuntu1.18 amd64 [upgradable from: 3.0.2-0ubuntu1.15]\n",
        );
        assert_eq!(
            u,
            Ok(vec![Upgrade {
                package: "libssl3".to_owned(),
                suites: vec!["jammy-updates".to_owned(), "jammy-security".to_owned()],
                new_version: "3.0.2-0ubuntu1.18".to_owned(),
                arch: "amd64".to_owned(),
                current_version: "3.0.2-0ubuntu1.15".to_owned(),
            }])
        );
        assert_eq!(
            parse_apt_upgradable("a1/jammy-updates 1 all [upgradable from: 0]")
                .map(|u| u[0].is_security()),
            Ok(false)
        );
    }

    #[test]
    fn a_cut_line_is_refused_with_its_number() {
        let text = "Listing...\nvim/stable 2:9.0 amd64 [upgradable from: 2:8.2\n";
        assert_eq!(
            parse_apt_upgradable(text).map_err(|e| (e.line, e.kind)),
            Err((2, ErrorKind::Invalid("upgradable from")))
        );
        let text = "vim/stable 2:9.0 amd64 [upgr";
        assert_eq!(
            parse_apt_upgradable(text).map_err(|e| e.kind),
            Err(ErrorKind::MissingColumn("from:"))
        );
    }

    #[test]
    fn repeated_suites_are_kept_once() {
        let u = parse_apt_upgradable(
            "p1/noble-updates,noble-updates,noble-security,noble-security 1.0 all [upgradable from: 0.9]",
        );
        assert_eq!(u.map(|u| u[0].suites.len()), Ok(2));
    }

    #[test]
    fn garbled_names_are_refused() {
        for (bad, kind) in [
            (
                "Vim/stable 1 amd64 [upgradable from: 0]",
                ErrorKind::Invalid("package"),
            ),
            (
                "vim\u{FFFD}/stable 1 amd64 [upgradable from: 0]",
                ErrorKind::ReplacementCharacter,
            ),
            (
                "vim stable 1 amd64 [upgradable from: 0]",
                ErrorKind::ExtraColumn,
            ),
            (
                "vim/ 1 amd64 [upgradable from: 0]",
                ErrorKind::Invalid("suite"),
            ),
            (
                "vim/stable =1 amd64 [upgradable from: 0]",
                ErrorKind::Invalid("version"),
            ),
        ] {
            assert_eq!(
                parse_apt_upgradable(bad).map_err(|e| e.kind),
                Err(kind),
                "{bad}"
            );
        }
    }

    #[test]
    fn no_updates_is_an_empty_list() {
        assert_eq!(parse_apt_upgradable(""), Ok(vec![]));
        assert_eq!(parse_apt_upgradable("Listing... Done\n"), Ok(vec![]));
    }
}
