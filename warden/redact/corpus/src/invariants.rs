//! The invariants the fuzz target checks on arbitrary input, shared with the
//! test that replays the committed fuzz corpus.

use aromba_redact::{Class, redact, redact_cut};

/// Checks, for `data`: redaction does not panic; redacting the output again
/// changes nothing and removes nothing (for both complete and cut input);
/// a cut input loses exactly its unfinished last line.
pub fn check(data: &[u8]) -> Result<(), String> {
    let once = redact(data);
    let twice = redact(&once.text);
    if twice.text != once.text || twice.counts.total() != 0 {
        return Err(format!(
            "not idempotent: {:?} -> {:?} -> {:?}",
            String::from_utf8_lossy(data),
            String::from_utf8_lossy(&once.text),
            String::from_utf8_lossy(&twice.text)
        ));
    }
    let cut = redact_cut(data);
    let again = redact(&cut.text);
    if again.text != cut.text {
        return Err(format!(
            "cut redaction not idempotent: {:?} -> {:?}",
            String::from_utf8_lossy(data),
            String::from_utf8_lossy(&cut.text)
        ));
    }
    let unfinished = !data.is_empty() && !data.ends_with(b"\n");
    if cut.counts.get(Class::CutLine) != u32::from(unfinished) {
        return Err(format!(
            "cut-line count wrong for {:?}",
            String::from_utf8_lossy(data)
        ));
    }
    Ok(())
}
