//! A release's version: `MAJOR.MINOR.PATCH`, digits only, compared as
//! numbers. Releases only ever go up.

use crate::ReleaseError;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

/// How far a release is from the one installed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Only the patch number went up: installs itself in the quiet window.
    Patch,
    /// The minor or major number went up: asked in the chat first.
    Minor,
    Major,
}

impl Version {
    pub fn parse(text: &str) -> Result<Version, ReleaseError> {
        let bad = || ReleaseError::Manifest(format!("{text:?} is not a version MAJOR.MINOR.PATCH"));
        let mut parts = text.split('.');
        let mut number = || -> Result<u32, ReleaseError> {
            let p = parts.next().ok_or_else(bad)?;
            // Digits only, no sign, no leading zero but a lone 0.
            if p.is_empty()
                || p.len() > 9
                || !p.bytes().all(|b| b.is_ascii_digit())
                || (p.len() > 1 && p.starts_with('0'))
            {
                return Err(bad());
            }
            p.parse().map_err(|_| bad())
        };
        let v = Version {
            major: number()?,
            minor: number()?,
            patch: number()?,
        };
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(v)
    }

    /// What kind of step `self` is from `installed` (`None` when it is not
    /// above it).
    pub fn step_from(&self, installed: &Version) -> Option<Step> {
        if self <= installed {
            None
        } else if self.major != installed.major {
            Some(Step::Major)
        } else if self.minor != installed.minor {
            Some(Step::Minor)
        } else {
            Some(Step::Patch)
        }
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_three_plain_numbers_compared_as_numbers() {
        let v = |t| Version::parse(t).expect(t);
        assert!(v("0.10.0") > v("0.9.9"));
        assert_eq!(v("1.2.3").to_string(), "1.2.3");
        for bad in [
            "1.2",
            "1.2.3.4",
            "01.2.3",
            "1.2.-3",
            "1.2.3-rc1",
            "+1.2.3",
            "1..3",
            "",
            "v1.2.3",
            "1.2.3 ",
            "9999999999.0.0",
        ] {
            assert!(Version::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_step_is_patch_minor_or_major_and_never_down_or_level() {
        let v = |t| Version::parse(t).expect(t);
        assert_eq!(v("1.2.4").step_from(&v("1.2.3")), Some(Step::Patch));
        assert_eq!(v("1.3.0").step_from(&v("1.2.3")), Some(Step::Minor));
        assert_eq!(v("2.0.0").step_from(&v("1.9.9")), Some(Step::Major));
        assert_eq!(v("1.2.3").step_from(&v("1.2.3")), None);
        assert_eq!(v("1.2.2").step_from(&v("1.2.3")), None);
    }
}
