//! `cat /proc/loadavg` and `nproc`.

use std::num::NonZeroU32;

use crate::error::{ErrorKind, ParseError, Source};
use crate::text::{Replacement, checked_lines, number, words};
use crate::units::Load;

/// The three load averages of `/proc/loadavg`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadAvg {
    pub one: Load,
    pub five: Load,
    pub fifteen: Load,
}

/// The one line the kernel prints: `2.06 1.78 1.52 4/102 8508` (three
/// loads with two decimals, running/total tasks, the last pid).
pub fn parse_loadavg(text: &str) -> Result<LoadAvg, ParseError> {
    const S: Source = Source::LoadAvg;
    let lines = checked_lines(S, text, Replacement::Refused)?;
    let (n, line) = match lines.as_slice() {
        [] => return Err(ParseError::whole(S, ErrorKind::Empty)),
        [only] => *only,
        [_, (second, _), ..] => return Err(ParseError::at(S, *second, ErrorKind::UnexpectedLine)),
    };
    let w = words(line);
    let column = |i: usize, name: &'static str| {
        w.get(i)
            .map(|&(_, _, t)| t)
            .ok_or(ParseError::at(S, n, ErrorKind::MissingColumn(name)))
    };
    let one = load(n, "1 min", column(0, "1 min")?)?;
    let five = load(n, "5 min", column(1, "5 min")?)?;
    let fifteen = load(n, "15 min", column(2, "15 min")?)?;
    let tasks = column(3, "tasks")?;
    let (running, total) =
        tasks
            .split_once('/')
            .ok_or(ParseError::at(S, n, ErrorKind::Invalid("tasks")))?;
    number(S, n, "tasks", running)?;
    number(S, n, "tasks", total)?;
    number(S, n, "last pid", column(4, "last pid")?)?;
    if w.len() > 5 {
        return Err(ParseError::at(S, n, ErrorKind::ExtraColumn));
    }
    Ok(LoadAvg { one, five, fifteen })
}

/// `12.34`: digits, a point, exactly two digits.
fn load(line: usize, column: &'static str, text: &str) -> Result<Load, ParseError> {
    const S: Source = Source::LoadAvg;
    let (whole, fraction) =
        text.split_once('.')
            .ok_or(ParseError::at(S, line, ErrorKind::Invalid(column)))?;
    if fraction.len() != 2 {
        return Err(ParseError::at(S, line, ErrorKind::Invalid(column)));
    }
    let whole = number(S, line, column, whole)?;
    let fraction = number(S, line, column, fraction)?;
    whole
        .checked_mul(100)
        .and_then(|w| w.checked_add(fraction))
        .and_then(|h| u32::try_from(h).ok())
        .map(Load::from_hundredths)
        .ok_or(ParseError::at(S, line, ErrorKind::Overflow(column)))
}

/// `nproc`: one positive number.
pub fn parse_nproc(text: &str) -> Result<NonZeroU32, ParseError> {
    const S: Source = Source::Nproc;
    let lines = checked_lines(S, text, Replacement::Refused)?;
    let (n, line) = match lines.as_slice() {
        [] => return Err(ParseError::whole(S, ErrorKind::Empty)),
        [only] => *only,
        [_, (second, _), ..] => return Err(ParseError::at(S, *second, ErrorKind::UnexpectedLine)),
    };
    let count = number(S, n, "cpus", line.trim_end_matches(' '))?;
    let count =
        u32::try_from(count).map_err(|_| ParseError::at(S, n, ErrorKind::Overflow("cpus")))?;
    NonZeroU32::new(count).ok_or(ParseError::at(S, n, ErrorKind::Zero("cpus")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_three_loads() {
        let l = parse_loadavg("2.06 1.78 1.52 4/102 8508\n");
        assert_eq!(
            l,
            Ok(LoadAvg {
                one: Load::from_hundredths(206),
                five: Load::from_hundredths(178),
                fifteen: Load::from_hundredths(152),
            })
        );
    }

    #[test]
    fn refuses_a_truncated_line() {
        assert_eq!(
            parse_loadavg("2.06 1.78\n").map_err(|e| e.kind),
            Err(ErrorKind::MissingColumn("15 min"))
        );
        assert_eq!(
            parse_loadavg("2.06 1.78 1.5").map_err(|e| e.kind),
            Err(ErrorKind::Invalid("15 min"))
        );
    }

    #[test]
    fn refuses_a_load_past_u32() {
        assert_eq!(
            parse_loadavg("99999999999999999999.00 1.00 1.00 1/1 1").map_err(|e| e.kind),
            Err(ErrorKind::Overflow("1 min"))
        );
        assert_eq!(
            parse_loadavg("42949673.00 1.00 1.00 1/1 1").map_err(|e| e.kind),
            Err(ErrorKind::Overflow("1 min"))
        );
    }

    #[test]
    fn refuses_signs_and_exponents() {
        for bad in [
            "-1.00 1.00 1.00 1/1 1",
            "1e3 1.00 1.00 1/1 1",
            "+1.00 1.00 1.00 1/1 1",
        ] {
            assert!(parse_loadavg(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn nproc_is_a_positive_number() {
        assert_eq!(parse_nproc("2\n").map(NonZeroU32::get), Ok(2));
        assert_eq!(
            parse_nproc("0\n").map_err(|e| e.kind),
            Err(ErrorKind::Zero("cpus"))
        );
        assert_eq!(parse_nproc("").map_err(|e| e.kind), Err(ErrorKind::Empty));
        assert_eq!(
            parse_nproc("4294967296\n").map_err(|e| e.kind),
            Err(ErrorKind::Overflow("cpus"))
        );
        assert_eq!(parse_nproc("2\n2\n").map_err(|e| e.line), Err(2));
    }
}
