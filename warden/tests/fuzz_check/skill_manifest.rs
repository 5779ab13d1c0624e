//! The checks of the `skill_manifest` fuzz target, shared with the corpus
//! replay in `warden/tests/fuzz_corpora.rs` (the target includes this file
//! by path).
//!
//! An input is a skill's `skill.json`. What parses renders back to JSON
//! that parses to the same manifest; it asks for nothing more than itself
//! (`widening` against itself is empty), and grants what it lists; what is
//! refused is refused without a panic.

use aromba_warden::skills::manifest::{FORMAT, Manifest};
use serde_json::{Value, json};

/// The manifest as JSON, every field in it.
pub fn render(m: &Manifest) -> Vec<u8> {
    let file =
        |f: &aromba_warden::skills::manifest::File| json!({"file": f.path, "sha256": f.sha256});
    let paths = |ps: &[std::path::PathBuf]| -> Vec<Value> {
        ps.iter()
            .map(|p| Value::from(p.to_string_lossy().into_owned()))
            .collect()
    };
    serde_json::to_vec(&json!({
        "format": FORMAT,
        "name": m.name,
        "version": m.version.to_string(),
        "publisher": m.publisher,
        "description": m.description,
        "writes": paths(&m.writes),
        "reads": paths(&m.reads),
        "root_commands": m.root_commands.iter().map(|r| json!({"command": r.command, "why": r.why})).collect::<Vec<_>>(),
        "hosts": m.hosts.iter().map(|h| json!({"name": h.name, "port": h.port, "why": h.why})).collect::<Vec<_>>(),
        "settings": m.settings.iter().map(|s| json!({"name": s.name, "kind": s.kind.word(), "why": s.why})).collect::<Vec<_>>(),
        "chores": m.chores.iter().map(file).collect::<Vec<_>>(),
        "tools": m.tools.iter().map(|t| json!({"name": t.name, "description": t.description, "file": t.file.path, "sha256": t.file.sha256})).collect::<Vec<_>>(),
    }))
    .unwrap_or_default()
}

/// Every check on one input; `Err` says which property broke.
pub fn check(data: &[u8]) -> Result<(), String> {
    let Ok(m) = Manifest::parse(data) else {
        return Ok(());
    };
    let rendered = render(&m);
    match Manifest::parse(&rendered) {
        Ok(again) if again == m => {}
        other => {
            return Err(format!(
                "{m:?} renders as {} and parses back as {other:?}",
                String::from_utf8_lossy(&rendered)
            ));
        }
    }
    let more = m.widening(&m);
    if !more.is_empty() {
        return Err(format!("{m:?} widens itself: {more:?}"));
    }
    if m.writes
        .iter()
        .any(|w| !m.grants_write(w) || !m.grants_read(w))
        || m.reads.iter().any(|r| !m.grants_read(r))
    {
        return Err(format!("{m:?} does not grant a path it lists"));
    }
    if m.files().count() != m.chores.len() + m.tools.len() || m.files().count() == 0 {
        return Err(format!("{m:?} names its files wrongly"));
    }
    Ok(())
}
