//! `aromba-warden redact`: the redactor as a filter, for operators and tests.

#![forbid(unsafe_code)]

use aromba_redact::Redacted;
use std::io::{self, Read, Write};

/// Reads all of `input`, writes the redacted bytes to `out` and the counts to
/// `report`: one `CLASS N` line per class with removals, then `total N`.
pub fn run(
    mut input: impl Read,
    mut out: impl Write,
    mut report: impl Write,
    cut: bool,
) -> io::Result<Redacted> {
    let mut buf = Vec::new();
    input.read_to_end(&mut buf)?;
    let redacted = if cut {
        aromba_redact::redact_cut(&buf)
    } else {
        aromba_redact::redact(&buf)
    };
    out.write_all(&redacted.text)?;
    out.flush()?;
    for (class, n) in redacted.counts.nonzero() {
        writeln!(report, "{class} {n}")?;
    }
    writeln!(report, "total {}", redacted.counts.total())?;
    Ok(redacted)
}
