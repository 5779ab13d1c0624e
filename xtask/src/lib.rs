//! The repository's gates, as functions the tests in `tests/gates.rs` call.
//!
//! `cargo metadata` (through the `cargo_metadata` crate) gives the resolved
//! dependency graph; from it we take what `cargo tree -e normal` shows for a
//! package on this host, and compare it with the allowlists the project
//! keeps in Markdown.

#![forbid(unsafe_code)]

use cargo_metadata::{DependencyKind, Metadata, MetadataCommand, PackageId};
use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};

#[derive(Debug)]
pub enum GateError {
    Metadata(cargo_metadata::Error),
    NoSuchPackage(String),
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl fmt::Display for GateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GateError::Metadata(e) => write!(f, "cargo metadata failed: {e}"),
            GateError::NoSuchPackage(p) => write!(f, "package {p} is not in the workspace"),
            GateError::Read { path, source } => {
                write!(f, "cannot read {}: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for GateError {}

/// The workspace root (where the top `Cargo.toml` is).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// Metadata resolved for the host platform only, like `cargo tree`.
pub fn metadata() -> Result<Metadata, GateError> {
    let host = host_triple();
    let mut cmd = MetadataCommand::new();
    cmd.manifest_path(workspace_root().join("Cargo.toml"));
    if let Some(host) = host {
        cmd.other_options(vec!["--filter-platform".to_string(), host]);
    }
    cmd.exec().map_err(GateError::Metadata)
}

/// The target triple this test binary was built for.
fn host_triple() -> Option<String> {
    let arch = std::env::consts::ARCH;
    match std::env::consts::OS {
        "linux" => Some(format!("{arch}-unknown-linux-gnu")),
        _ => None,
    }
}

/// Every package in `package`'s normal dependency tree (itself excluded),
/// by name: what `cargo tree -p PACKAGE -e normal` lists.
pub fn normal_dependency_names(
    meta: &Metadata,
    package: &str,
) -> Result<BTreeSet<String>, GateError> {
    let root = meta
        .workspace_packages()
        .into_iter()
        .find(|p| p.name.as_str() == package)
        .ok_or_else(|| GateError::NoSuchPackage(package.to_string()))?;
    let resolve = meta
        .resolve
        .as_ref()
        .ok_or_else(|| GateError::NoSuchPackage(package.to_string()))?;
    let nodes: HashMap<&PackageId, _> = resolve.nodes.iter().map(|n| (&n.id, n)).collect();
    let names: HashMap<&PackageId, &str> = meta
        .packages
        .iter()
        .map(|p| (&p.id, p.name.as_str()))
        .collect();
    let mut seen: BTreeSet<&PackageId> = BTreeSet::new();
    let mut stack = vec![&root.id];
    while let Some(id) = stack.pop() {
        let Some(node) = nodes.get(id) else { continue };
        for dep in &node.deps {
            let normal = dep
                .dep_kinds
                .iter()
                .any(|k| k.kind == DependencyKind::Normal);
            if normal && seen.insert(&dep.pkg) {
                stack.push(&dep.pkg);
            }
        }
    }
    Ok(seen
        .into_iter()
        .filter_map(|id| names.get(id).map(|n| n.to_string()))
        .collect())
}

/// The crate names listed in an allowlist file: every line of the form
/// ``- `name` — why`` under its `## Allowlist` heading.
pub fn allowlist(path: &Path) -> Result<BTreeSet<String>, GateError> {
    let text = std::fs::read_to_string(path).map_err(|source| GateError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(parse_allowlist(&text))
}

pub fn parse_allowlist(text: &str) -> BTreeSet<String> {
    let mut in_list = false;
    let mut names = BTreeSet::new();
    for line in text.lines() {
        if line.starts_with("## ") {
            in_list = line.trim() == "## Allowlist";
            continue;
        }
        if !in_list {
            continue;
        }
        if let Some(rest) = line.strip_prefix("- `")
            && let Some(end) = rest.find('`')
        {
            names.insert(rest[..end].to_string());
        }
    }
    names
}

/// The heading of SECURITY.md's threat table.
pub const THREAT_TABLE: &str = "## Threats and the tests that show they fail";

/// The test files named in the threat table of a SECURITY.md text: every
/// backticked path ending in `.rs` between [`THREAT_TABLE`] and the next
/// `## ` heading.
pub fn threat_table_files(text: &str) -> BTreeSet<String> {
    let mut in_table = false;
    let mut files = BTreeSet::new();
    for line in text.lines() {
        if line.starts_with("## ") {
            in_table = line.trim() == THREAT_TABLE;
            continue;
        }
        if !in_table {
            continue;
        }
        for (i, part) in line.split('`').enumerate() {
            if i % 2 == 1 && part.ends_with(".rs") && !part.contains([' ', '*']) {
                files.insert(part.to_string());
            }
        }
    }
    files
}

/// Whether a source file's name says it holds adversarial tests:
/// `adversarial_*.rs` under a `tests/` folder, or `adversarial_*_tests.rs`
/// (unit tests that need a crate's private items) under `src/`.
pub fn is_adversarial_test_file(relative: &str) -> bool {
    let name = relative.rsplit('/').next().unwrap_or(relative);
    name.starts_with("adversarial_") && name.ends_with(".rs")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_only_the_allowlist_section() {
        let text = "# T\n- `not-this`\n## Allowlist\n- `libc` — syscalls\n- `regex` — x\n## Other\n- `nor-this`\n";
        let names: Vec<String> = parse_allowlist(text).into_iter().collect();
        assert_eq!(names, ["libc", "regex"]);
    }

    #[test]
    fn reads_only_the_threat_tables_backticked_test_files() {
        let text = format!(
            "# S\n`a/tests/before.rs`\n{THREAT_TABLE}\n| relay | x | `relay/tests/adversarial_a.rs`, `b.rs` and `not a file.rs` |\n## Next\n`after.rs`\n"
        );
        let files: Vec<String> = threat_table_files(&text).into_iter().collect();
        assert_eq!(files, ["b.rs", "relay/tests/adversarial_a.rs"]);
    }
}
