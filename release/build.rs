//! Compiles the release public keys in from `keys/release.pub` (current)
//! and `keys/release-standby.pub` (the one a release signed with the
//! current key may rotate to), when they exist. A build without them
//! carries no key and refuses to update.

use std::path::Path;

fn main() {
    let keys = Path::new(env!("CARGO_MANIFEST_DIR")).join("../keys");
    // The folder, scanned whole by cargo: a key added, changed or removed
    // reruns this. (A path that does not exist would rerun it on every
    // build, and rebuild every crate above this one each time.)
    println!("cargo:rerun-if-changed={}", keys.display());
    let mut found = Vec::new();
    for name in ["release.pub", "release-standby.pub"] {
        let path = keys.join(name);
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        // A minisign public key file: a comment line, then the key.
        let key = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with("untrusted comment:"))
            .unwrap_or_default();
        if key.is_empty()
            || !key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b))
        {
            panic!("{} is not a minisign public key file", path.display());
        }
        found.push(format!("{key:?}"));
    }
    let out = Path::new(&std::env::var("OUT_DIR").expect("OUT_DIR")).join("keys.rs");
    let code = format!("pub const COMPILED: &[&str] = &[{}];\n", found.join(", "));
    std::fs::write(out, code).expect("keys.rs");
}
