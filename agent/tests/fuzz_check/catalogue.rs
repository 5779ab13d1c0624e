//! The checks of the `catalogue_index` fuzz target, shared with the corpus
//! replay in `agent/tests/fuzz_corpora.rs` (the target includes this file
//! by path).
//!
//! An input is an index's bytes (as if verified). What parses renders back
//! to JSON that parses to the same index, and every description and every
//! name in it is free of control, invisible and reordering characters; what
//! is refused is refused in words on one line, bounded, free of them too
//! (the refusal goes to the model and the log).

use aromba::catalogue::{FORMAT, Index, parse};

/// Characters no reader sees as what they are: controls, zero-width and
/// joiners, bidirectional embeddings, overrides and isolates, invisible
/// operators, the byte order mark, tags, line and paragraph separators
/// (an independent list, narrower than the assistant's voice's).
pub fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{2064}'
                | '\u{2066}'..='\u{2069}'
                | '\u{FEFF}'
                | '\u{E0000}'..='\u{E007F}'
        )
}

/// The index as JSON, every field in it (what the release writes).
pub fn render(index: &Index) -> Vec<u8> {
    let skills: Vec<serde_json::Value> = index
        .skills
        .iter()
        .map(|e| {
            serde_json::json!({
                "name": e.name,
                "version": e.version.to_string(),
                "file": e.file,
                "sha256": e.sha256,
                "size": e.size,
                "description": e.description,
            })
        })
        .collect();
    serde_json::to_vec(&serde_json::json!({
        "format": FORMAT,
        "expires": index.expires,
        "skills": skills,
    }))
    .unwrap_or_default()
}

/// Every check on one input; `Err` says which property broke.
pub fn check(data: &[u8]) -> Result<(), String> {
    match parse(data) {
        Ok(index) => {
            let rendered = render(&index);
            match parse(&rendered) {
                Ok(again) if again == index => {}
                other => {
                    return Err(format!(
                        "{index:?} renders as {} and parses back as {other:?}",
                        String::from_utf8_lossy(&rendered)
                    ));
                }
            }
            for e in &index.skills {
                if e.description.chars().chain(e.name.chars()).any(hidden) {
                    return Err(format!("{e:?} holds a hidden character"));
                }
            }
            for now in [0, index.expires, u64::MAX] {
                let _ = index.fresh(now);
            }
        }
        Err(e) => {
            let words = e.to_string();
            if words.chars().any(hidden) {
                return Err(format!("the refusal {words:?} holds a hidden character"));
            }
            // At most 200 characters of the index are quoted, each escaped
            // to at most 10 (`\u{10ffff}`): a refusal stays short (a
            // first bound of 1024 bytes was the fuzzer's first find, seed
            // `crash_long_escaped_refusal`; the code's bound holds).
            if words.len() > 4096 {
                return Err(format!("the refusal is {} bytes long", words.len()));
            }
        }
    }
    Ok(())
}
