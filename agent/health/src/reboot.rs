//! `cat /run/reboot-required` and `cat /run/reboot-required.pkgs`.
//!
//! Debian and Ubuntu packages that need a reboot (a kernel, libc, openssl)
//! create `/run/reboot-required` (one line, `*** System restart required
//! ***`, translated to the system's language) and append their name to
//! `/run/reboot-required.pkgs`, once per trigger, so names repeat. Whether
//! the files exist is the caller's to find out (the read fails when they do
//! not); this reads their contents.

use crate::error::{ErrorKind, ParseError, Source};
use crate::text::{Replacement, checked_lines, is_package_name};

/// More packages than any upgrade names; a longer list is refused.
pub const MAX_PACKAGES: usize = 4096;

/// Whether a reboot is required, and why.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RebootStatus {
    pub required: bool,
    /// The flag file's message, when it has one.
    pub message: Option<String>,
    /// The packages that asked for the reboot, each once, in order.
    pub packages: Vec<String>,
}

/// `flag` is the content of `/run/reboot-required` (`None`: the file does
/// not exist, no reboot is required); `pkgs` that of
/// `/run/reboot-required.pkgs` (`None`: absent).
pub fn parse_reboot_required(
    flag: Option<&str>,
    pkgs: Option<&str>,
) -> Result<RebootStatus, ParseError> {
    let message = match flag {
        None => None,
        Some(text) => {
            let lines = checked_lines(Source::RebootRequired, text, Replacement::Allowed)?;
            if lines.len() > 16 {
                return Err(ParseError::whole(
                    Source::RebootRequired,
                    ErrorKind::TooManyLines { limit: 16 },
                ));
            }
            lines
                .iter()
                .map(|(_, l)| l.trim_matches(' '))
                .find(|l| !l.is_empty())
                .map(str::to_owned)
        }
    };
    let packages = match pkgs {
        None => Vec::new(),
        Some(text) => parse_packages(text)?,
    };
    Ok(RebootStatus {
        required: flag.is_some(),
        message,
        packages,
    })
}

fn parse_packages(text: &str) -> Result<Vec<String>, ParseError> {
    const S: Source = Source::RebootRequiredPkgs;
    let mut out: Vec<String> = Vec::new();
    for (n, line) in checked_lines(S, text, Replacement::Refused)? {
        let name = line.trim_matches(' ');
        if name.is_empty() {
            continue;
        }
        if !is_package_name(name) {
            return Err(ParseError::at(S, n, ErrorKind::Invalid("package")));
        }
        if !out.iter().any(|p| p == name) {
            if out.len() == MAX_PACKAGES {
                return Err(ParseError::whole(
                    S,
                    ErrorKind::TooManyEntries {
                        limit: MAX_PACKAGES,
                    },
                ));
            }
            out.push(name.to_owned());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_flag_file_is_no_reboot() {
        assert_eq!(
            parse_reboot_required(None, None),
            Ok(RebootStatus::default())
        );
    }

    #[test]
    fn an_empty_flag_file_still_means_a_reboot() {
        let r = parse_reboot_required(Some(""), None);
        assert_eq!(r.map(|r| (r.required, r.message)), Ok((true, None)));
    }

    #[test]
    fn a_garbled_package_name_is_refused_with_its_line() {
        let r = parse_reboot_required(Some("x\n"), Some("linux-base\nlibc6 extra\n"));
        assert_eq!(
            r.map_err(|e| (e.source, e.line, e.kind)),
            Err((Source::RebootRequiredPkgs, 2, ErrorKind::Invalid("package")))
        );
    }
}
