//! The committed corpus of a fuzz target (`fuzz/corpus/NAME/`), for the
//! replays that run each target's checks in the normal test run.

use std::path::PathBuf;

/// Every input of `fuzz/corpus/NAME/`, path and bytes, in path order.
/// Panics (the test fails) when the folder is missing or holds fewer than
/// 10 inputs: a replay over nothing would prove nothing.
pub fn corpus(name: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(name);
    let mut inputs: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            let path = e.expect("a directory entry").path();
            let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (path, data)
        })
        .collect();
    inputs.sort();
    assert!(inputs.len() >= 10, "{name}: only {} inputs", inputs.len());
    inputs
}
