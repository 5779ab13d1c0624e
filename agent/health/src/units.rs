//! Exact ratios, load averages in hundredths, and human byte counts.
//!
//! No floating point anywhere: thresholds are compared by cross
//! multiplication in 128 bits, so a value exactly at a line is on the line.

use std::fmt;

/// A fraction `part / whole` with `whole > 0` and `part <= whole` (a part
/// larger than the whole, which only garbled input gives, is clamped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ratio {
    part: u64,
    whole: u64,
}

impl Ratio {
    /// `None` when `whole` is zero: there is nothing to be a fraction of
    /// (a filesystem that reports no inodes, a machine with no swap).
    pub fn new(part: u64, whole: u64) -> Option<Ratio> {
        (whole > 0).then(|| Ratio {
            part: part.min(whole),
            whole,
        })
    }

    /// The ratio of a whole percentage, for thresholds.
    pub fn percent(p: u8) -> Ratio {
        Ratio {
            part: u64::from(p.min(100)),
            whole: 100,
        }
    }

    pub fn part(self) -> u64 {
        self.part
    }

    pub fn whole(self) -> u64 {
        self.whole
    }

    /// Compares two ratios by value (1/2 equals 2/4).
    pub fn compare(self, other: Ratio) -> std::cmp::Ordering {
        let a = u128::from(self.part) * u128::from(other.whole);
        let b = u128::from(other.part) * u128::from(self.whole);
        a.cmp(&b)
    }

    /// `self >= p %`, exactly.
    pub fn at_least(self, p: u8) -> bool {
        self.compare(Ratio::percent(p)).is_ge()
    }

    /// `self > p %`, exactly.
    pub fn above(self, p: u8) -> bool {
        self.compare(Ratio::percent(p)).is_gt()
    }

    /// `self < p %`, exactly.
    pub fn below(self, p: u8) -> bool {
        self.compare(Ratio::percent(p)).is_lt()
    }

    /// The percentage rounded up, as GNU `df` prints "Capacity"/"Use%": a
    /// filesystem is never shown emptier than it is.
    pub fn percent_ceil(self) -> u64 {
        let scaled = u128::from(self.part) * 100;
        let whole = u128::from(self.whole);
        // part <= whole, so the quotient is at most 100 and fits.
        scaled.div_ceil(whole) as u64
    }

    /// The percentage rounded down: used for what is left (free memory),
    /// so it is never shown larger than it is.
    pub fn percent_floor(self) -> u64 {
        (u128::from(self.part) * 100 / u128::from(self.whole)) as u64
    }

    /// `1 - self`.
    pub fn complement(self) -> Ratio {
        Ratio {
            part: self.whole - self.part,
            whole: self.whole,
        }
    }
}

/// A load average in hundredths, as the kernel prints it (`2.06` is 206).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Load(u32);

impl Load {
    pub fn from_hundredths(hundredths: u32) -> Load {
        Load(hundredths)
    }

    pub fn hundredths(self) -> u32 {
        self.0
    }

    /// This load shared over `cpus`, rounded up: a load just above a
    /// per-CPU line never prints as the line itself.
    pub fn per_cpu(self, cpus: std::num::NonZeroU32) -> Load {
        Load(self.0.div_ceil(cpus.get()))
    }
}

impl fmt::Display for Load {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:02}", self.0 / 100, self.0 % 100)
    }
}

/// Bytes in decimal units, the numbers `df -h --si` prints, spelled for a
/// person: `980 kB`, `2.5 MB`, `76 GB`. It rounds up as `df` does, with
/// one decimal below ten and none from ten on, so what the phone shows is
/// what `df -h --si` shows on the server. Below 1000 it prints the bytes:
/// `512 B`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["kB", "MB", "GB", "TB", "PB", "EB"];
    if bytes < 1000 {
        return format!("{bytes} B");
    }
    let n = u128::from(bytes);
    let mut base: u128 = 1;
    for unit in UNITS {
        base *= 1000;
        let tenths = (n * 10).div_ceil(base);
        if tenths < 100 {
            return format!("{}.{} {unit}", tenths / 10, tenths % 10);
        }
        let whole = n.div_ceil(base);
        if whole < 1000 {
            return format!("{whole} {unit}");
        }
    }
    // u64::MAX is about 18.4 EB, so the last unit always answers.
    format!("{} EB", n.div_ceil(base))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_compare_exactly_at_the_line() {
        let ninety = Ratio::new(90, 100).unwrap_or(Ratio::percent(0));
        assert!(ninety.at_least(90));
        assert!(!ninety.above(90));
        assert!(!ninety.below(90));
        let just_under = Ratio::new(899_999, 1_000_000).unwrap_or(Ratio::percent(0));
        assert!(!just_under.at_least(90));
        assert!(just_under.below(90));
    }

    #[test]
    fn huge_values_do_not_overflow_the_comparison() {
        let r = Ratio::new(u64::MAX - 1, u64::MAX).unwrap_or(Ratio::percent(0));
        assert!(r.at_least(99));
        assert_eq!(r.percent_ceil(), 100);
        assert_eq!(r.percent_floor(), 99);
    }

    #[test]
    fn a_zero_whole_is_no_ratio() {
        assert_eq!(Ratio::new(0, 0), None);
        assert_eq!(Ratio::new(5, 0), None);
    }

    #[test]
    fn a_part_past_the_whole_is_clamped() {
        let r = Ratio::new(150, 100).unwrap_or(Ratio::percent(0));
        assert_eq!(r.percent_ceil(), 100);
    }

    #[test]
    fn human_bytes_round_up_like_df_si() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(999), "999 B");
        assert_eq!(human_bytes(1000), "1.0 kB");
        assert_eq!(human_bytes(4096), "4.1 kB");
        assert_eq!(human_bytes(16_384), "17 kB");
        assert_eq!(human_bytes(999_500), "1.0 MB");
        assert_eq!(human_bytes(9_950_000), "10 MB");
        assert_eq!(human_bytes(2_498_560), "2.5 MB");
        assert_eq!(human_bytes(75_069_440_000), "76 GB");
        assert_eq!(human_bytes(u64::MAX), "19 EB");
    }

    #[test]
    fn load_prints_two_decimals() {
        assert_eq!(Load::from_hundredths(206).to_string(), "2.06");
        assert_eq!(Load::from_hundredths(5).to_string(), "0.05");
    }
}
