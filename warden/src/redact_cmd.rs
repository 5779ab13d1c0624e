//! `aromba-warden redact`: the redactor as a filter, for operators and tests.
//!
//! It streams: standard input is read a mebibyte at a time and written out
//! as soon as the redactor's cut allows (see `aromba_redact::Stream`), so
//! memory stays bounded whatever the size of the input.

#![forbid(unsafe_code)]

use aromba_redact::{Counts, Redactor, Stream};
use std::io::{self, Read, Write};

const CHUNK: usize = 1 << 20;

/// Reads `input` to its end, writes the redacted bytes to `out` as they are
/// ready and the counts to `report`: one `CLASS N` line per class with
/// removals, then `total N`. `cut`: the input was cut at a byte cap (its
/// unfinished last line is replaced by one marker).
pub fn run(
    mut input: impl Read,
    mut out: impl Write,
    mut report: impl Write,
    cut: bool,
) -> io::Result<Counts> {
    let redactor = Redactor::new();
    let mut stream = Stream::new(&redactor);
    let mut chunk = vec![0u8; CHUNK];
    let mut ready = Vec::with_capacity(2 * CHUNK);
    loop {
        let n = match input.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        stream.push(&chunk[..n], &mut ready);
        if !ready.is_empty() {
            out.write_all(&ready)?;
            ready.clear();
        }
    }
    let counts = stream.finish(cut, &mut ready);
    out.write_all(&ready)?;
    out.flush()?;
    for (class, n) in counts.nonzero() {
        writeln!(report, "{class} {n}")?;
    }
    writeln!(report, "total {}", counts.total())?;
    Ok(counts)
}
