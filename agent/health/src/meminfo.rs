//! `cat /proc/meminfo`.

use crate::error::{ErrorKind, ParseError, Source};
use crate::text::{Replacement, checked_lines, number, words};
use crate::units::Ratio;

/// Memory and swap, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemInfo {
    /// `MemTotal`.
    pub total: u64,
    /// `MemAvailable`, or its estimate when the kernel lacks it.
    pub available: u64,
    /// True when `MemAvailable` is missing (kernels before 3.14, some
    /// containers) and `available` is `MemFree + Buffers + Cached`: an
    /// estimate on the high side, since not all cache can be reclaimed.
    pub available_estimated: bool,
    /// `SwapTotal`; zero when the machine has no swap.
    pub swap_total: u64,
    /// `SwapFree`.
    pub swap_free: u64,
}

impl MemInfo {
    /// The share of memory available to start new work.
    pub fn available_ratio(&self) -> Ratio {
        // `total` is never zero: the parser refuses it.
        Ratio::new(self.available, self.total).unwrap_or(Ratio::percent(0))
    }

    /// Swap in use, in bytes.
    pub fn swap_used(&self) -> u64 {
        self.swap_total.saturating_sub(self.swap_free)
    }

    /// The share of swap in use; `None` when there is no swap.
    pub fn swap_used_ratio(&self) -> Option<Ratio> {
        Ratio::new(self.swap_used(), self.swap_total)
    }
}

/// The fields this parser reads; each may appear once.
const FIELDS: [&str; 7] = [
    "MemTotal",
    "MemFree",
    "MemAvailable",
    "Buffers",
    "Cached",
    "SwapTotal",
    "SwapFree",
];

/// Lines of `Key:   value kB` (or `Key:   count` for page counts). Unknown
/// keys are read for their form and then ignored.
pub fn parse_meminfo(text: &str) -> Result<MemInfo, ParseError> {
    const S: Source = Source::MemInfo;
    let lines = checked_lines(S, text, Replacement::Refused)?;
    if lines.iter().all(|(_, l)| l.trim().is_empty()) {
        return Err(ParseError::whole(S, ErrorKind::Empty));
    }
    let mut values: [Option<u64>; FIELDS.len()] = [None; FIELDS.len()];
    for (n, line) in lines {
        let (key, rest) =
            line.split_once(':')
                .ok_or(ParseError::at(S, n, ErrorKind::UnexpectedLine))?;
        if key.is_empty()
            || !key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_()".contains(&b))
        {
            return Err(ParseError::at(S, n, ErrorKind::Invalid("key")));
        }
        let w = words(rest);
        let (value, unit) = match w.as_slice() {
            [] => return Err(ParseError::at(S, n, ErrorKind::MissingColumn("value"))),
            [(_, _, v)] => (*v, None),
            [(_, _, v), (_, _, u)] => (*v, Some(*u)),
            _ => return Err(ParseError::at(S, n, ErrorKind::ExtraColumn)),
        };
        let Some(slot) = FIELDS.iter().position(|f| *f == key) else {
            number(S, n, "value", value)?;
            if unit.is_some_and(|u| u != "kB") {
                return Err(ParseError::at(S, n, ErrorKind::Invalid("unit")));
            }
            continue;
        };
        let field = FIELDS[slot];
        if values[slot].is_some() {
            return Err(ParseError::at(S, n, ErrorKind::Duplicate(field)));
        }
        if unit != Some("kB") {
            return Err(ParseError::at(S, n, ErrorKind::Invalid("unit")));
        }
        let bytes = number(S, n, field, value)?
            .checked_mul(1024)
            .ok_or(ParseError::at(S, n, ErrorKind::Overflow(field)))?;
        values[slot] = Some(bytes);
    }
    let get = |field: &'static str| -> Result<u64, ParseError> {
        FIELDS
            .iter()
            .position(|f| *f == field)
            .and_then(|i| values[i])
            .ok_or(ParseError::whole(S, ErrorKind::MissingField(field)))
    };
    let total = get("MemTotal")?;
    if total == 0 {
        return Err(ParseError::whole(S, ErrorKind::Zero("MemTotal")));
    }
    let (available, available_estimated) = match get("MemAvailable") {
        Ok(a) => (a, false),
        Err(_) => {
            let (free, buffers, cached) = (get("MemFree")?, get("Buffers")?, get("Cached")?);
            let estimate = free
                .checked_add(buffers)
                .and_then(|s| s.checked_add(cached))
                .ok_or(ParseError::whole(S, ErrorKind::Overflow("MemAvailable")))?;
            (estimate, true)
        }
    };
    Ok(MemInfo {
        total,
        available,
        available_estimated,
        swap_total: get("SwapTotal")?,
        swap_free: get("SwapFree")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = "MemTotal: 1000 kB\nMemFree: 100 kB\nMemAvailable: 500 kB\n\
                         Buffers: 10 kB\nCached: 20 kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\n";

    #[test]
    fn reads_bytes() {
        let m = parse_meminfo(SMALL);
        assert_eq!(
            m,
            Ok(MemInfo {
                total: 1_024_000,
                available: 512_000,
                available_estimated: false,
                swap_total: 0,
                swap_free: 0,
            })
        );
    }

    #[test]
    fn estimates_available_without_memavailable() {
        let text = SMALL.replace("MemAvailable: 500 kB\n", "");
        let m = parse_meminfo(&text).map(|m| (m.available, m.available_estimated));
        assert_eq!(m, Ok((130 * 1024, true)));
    }

    #[test]
    fn an_estimate_needs_cached() {
        let text = SMALL
            .replace("MemAvailable: 500 kB\n", "")
            .replace("Cached: 20 kB\n", "");
        assert_eq!(
            parse_meminfo(&text).map_err(|e| e.kind),
            Err(ErrorKind::MissingField("Cached"))
        );
    }

    #[test]
    fn a_value_overflowing_u64_once_in_bytes_is_refused() {
        // Fits in u64 as kB, not once multiplied by 1024.
        let text = SMALL.replace("MemTotal: 1000 kB", "MemTotal: 18014398509481984 kB");
        assert_eq!(
            parse_meminfo(&text).map_err(|e| (e.line, e.kind)),
            Err((1, ErrorKind::Overflow("MemTotal")))
        );
        let text = SMALL.replace("MemTotal: 1000 kB", "MemTotal: 99999999999999999999999 kB");
        assert_eq!(
            parse_meminfo(&text).map_err(|e| e.kind),
            Err(ErrorKind::Overflow("MemTotal"))
        );
    }

    #[test]
    fn a_repeated_field_is_refused() {
        let text = format!("{SMALL}MemTotal: 1 kB\n");
        assert_eq!(
            parse_meminfo(&text).map_err(|e| (e.line, e.kind)),
            Err((8, ErrorKind::Duplicate("MemTotal")))
        );
    }

    #[test]
    fn zero_total_is_refused() {
        let text = SMALL.replace("MemTotal: 1000 kB", "MemTotal: 0 kB");
        assert_eq!(
            parse_meminfo(&text).map_err(|e| e.kind),
            Err(ErrorKind::Zero("MemTotal"))
        );
    }

    #[test]
    fn available_past_total_is_clamped_in_the_ratio() {
        let text = SMALL.replace("MemAvailable: 500 kB", "MemAvailable: 5000 kB");
        let m = parse_meminfo(&text);
        assert_eq!(m.map(|m| m.available_ratio().percent_floor()), Ok(100));
    }
}
