//! Writes the redactor's labeled corpus: `gen-corpus DIR`.
//!
//! The corpus is committed under `warden/redact/tests/corpus/`; the test
//! `corpus_files_match_their_generator` fails when the files and this
//! generator disagree, so regenerate after changing either.

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let (Some(dir), None) = (args.next(), args.next()) else {
        eprintln!("usage: gen-corpus DIR");
        return ExitCode::from(2);
    };
    let dir = PathBuf::from(dir);
    match aromba_redact_corpus::write_corpus(&dir) {
        Ok(n) => {
            println!("wrote {n} documents and truth.json to {}", dir.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!(
                "gen-corpus: could not write the corpus to {}: {e}",
                dir.display()
            );
            ExitCode::FAILURE
        }
    }
}
