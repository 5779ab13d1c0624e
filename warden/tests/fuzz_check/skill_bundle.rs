//! The checks of the `skill_bundle` fuzz target, shared with the corpus
//! replay in `warden/tests/fuzz_corpora.rs` (the target includes this file
//! by path).
//!
//! An input is a skill bundle (`aromba-skill-bundle-1` JSON). The fuzzer
//! cannot sign, so a bundle's `manifest` is signed again with the (test)
//! release key, as the publisher `aromba`'s would be, before the Warden's
//! `Skill::verify` reads it. Then:
//! - it verifies or is refused with nothing written: the Warden's folders
//!   are as they were, whatever the bundle held;
//! - what verifies is exactly the signed manifest, every file it names
//!   present with its SHA-256, every chore within it, the bundle's own
//!   SHA-256; and the same bytes verify the same way again;
//! - the manifest changed by one byte after signing is refused.

use aromba_testkit::release::{RELEASE_KEY, RELEASE_PUB, key_line, sign};
use aromba_warden::layout::Layout;
use aromba_warden::skills::manifest::Manifest;
use aromba_warden::skills::{Skill, Trust};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The Warden's folders the check verifies in: made once, empty, and
/// compared before and after every input.
fn root() -> &'static Path {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| {
        let root =
            std::env::temp_dir().join(format!("aromba-fuzz-skill-bundle-{}", std::process::id()));
        let layout = Layout::rooted(&root);
        for dir in [
            &layout.state_dir,
            &layout.journal_dir,
            &layout.config_dir,
            &layout.worker_home,
        ] {
            std::fs::create_dir_all(dir).expect("the Warden's folders");
        }
        root
    })
}

/// Every path under `dir` with its size and modification time.
fn tree(dir: &Path, out: &mut Vec<(PathBuf, u64, Option<std::time::SystemTime>)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        out.push((path.clone(), meta.len(), meta.modified().ok()));
        if meta.is_dir() {
            tree(&path, out);
        }
    }
}

fn snapshot() -> Vec<(PathBuf, u64, Option<std::time::SystemTime>)> {
    let mut out = Vec::new();
    tree(root(), &mut out);
    out.sort();
    out
}

/// `bundle` with its manifest signed by the test release key.
fn signed_again(bundle: &mut serde_json::Map<String, Value>, manifest: &str) {
    bundle.insert(
        "signature".into(),
        Value::String(sign(manifest.as_bytes(), RELEASE_KEY)),
    );
}

/// Checks one input; whether it verified once signed again.
pub fn check(data: &[u8]) -> Result<bool, String> {
    let release_keys = [key_line(RELEASE_PUB)];
    let layout = Layout::rooted(root());
    let trust = Trust {
        layout: &layout,
        release_keys: Some(&release_keys),
        written: None,
    };
    let before = snapshot();
    // As it came, then signed again when it has a manifest to sign.
    let _ = Skill::verify(data, &trust);
    let mut bundle = match serde_json::from_slice::<Value>(data) {
        Ok(Value::Object(b)) => b,
        _ => return unchanged(&before).map(|()| false),
    };
    let Some(Value::String(manifest)) = bundle.get("manifest").cloned() else {
        return unchanged(&before).map(|()| false);
    };
    signed_again(&mut bundle, &manifest);
    let bytes = serde_json::to_vec(&bundle).map_err(|e| e.to_string())?;
    let verdict = Skill::verify(&bytes, &trust);
    unchanged(&before)?;
    let again = Skill::verify(&bytes, &trust);
    if verdict.as_ref().map(|s| &s.sha256) != again.as_ref().map(|s| &s.sha256) {
        return Err(format!(
            "the same bytes verified two ways: {:?} then {:?}",
            verdict.as_ref().err(),
            again.as_ref().err()
        ));
    }
    let Ok(skill) = verdict else {
        return Ok(false);
    };
    let parsed = Manifest::parse(manifest.as_bytes())
        .map_err(|e| format!("a skill verified whose manifest does not parse: {e}"))?;
    if skill.manifest != parsed || skill.manifest_text != manifest {
        return Err("the skill verified is not its signed manifest".into());
    }
    if skill.sha256 != aromba_release::sha256_hex(&bytes) {
        return Err("the skill's SHA-256 is not its bundle's".into());
    }
    let files = bundle.get("files").and_then(Value::as_object);
    for f in skill.manifest.files() {
        let text = files
            .and_then(|fs| fs.get(&f.path))
            .and_then(Value::as_str)
            .ok_or_else(|| format!("a skill verified without its file {}", f.path))?;
        if aromba_release::sha256_hex(text.as_bytes()) != f.sha256 {
            return Err(format!("a skill verified with {} changed", f.path));
        }
    }
    for (header, _) in &skill.chores {
        skill
            .bounded(header)
            .map_err(|e| format!("a skill verified with a chore beyond it: {e}"))?;
    }
    // One byte more in the manifest, the signature left as it was.
    bundle.insert("manifest".into(), Value::String(format!("{manifest} ")));
    let changed = serde_json::to_vec(&bundle).map_err(|e| e.to_string())?;
    if Skill::verify(&changed, &trust).is_ok() {
        return Err("a manifest changed after signing verified".into());
    }
    unchanged(&before).map(|()| true)
}

fn unchanged(before: &[(PathBuf, u64, Option<std::time::SystemTime>)]) -> Result<(), String> {
    let after = snapshot();
    if after != before {
        return Err(format!(
            "verifying a bundle wrote to the Warden's folders: {before:?} became {after:?}"
        ));
    }
    Ok(())
}
