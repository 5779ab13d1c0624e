//! Gates that keep the architecture's invariants true: each fails CI when the
//! invariant is broken.

use std::collections::BTreeSet;
use xtask::{
    THREAT_TABLE, allowlist, is_adversarial_test_file, metadata, normal_dependency_names,
    threat_table_files, workspace_root,
};

#[test]
fn warden_dependency_tree_equals_the_allowlist() {
    let meta = metadata().expect("cargo metadata");
    let tree = normal_dependency_names(&meta, "aromba-warden").expect("warden tree");
    let allowed = allowlist(&workspace_root().join("warden/DEPENDENCIES.md")).expect("allowlist");
    let unlisted: BTreeSet<_> = tree.difference(&allowed).collect();
    let stale: BTreeSet<_> = allowed.difference(&tree).collect();
    assert!(
        unlisted.is_empty() && stale.is_empty(),
        "the Warden's normal dependency tree and warden/DEPENDENCIES.md differ:\n  \
         in the tree but not allowed: {unlisted:?}\n  allowed but not in the tree: {stale:?}\n\
         A new crate needs a line of justification in warden/DEPENDENCIES.md in the same commit."
    );
}

#[test]
fn the_worker_links_no_warden_code() {
    let meta = metadata().expect("cargo metadata");
    let tree = normal_dependency_names(&meta, "aromba").expect("worker tree");
    for forbidden in ["aromba-warden", "aromba-relay"] {
        assert!(!tree.contains(forbidden), "the Worker links {forbidden}");
    }
}

/// Every connection the Worker makes goes through `agent/src/net.rs`'s
/// gate, which holds it to `network.toml`: no other source file of the
/// Worker names a socket type or a resolver, or links a client that
/// would make connections of its own.
#[test]
fn the_worker_connects_only_through_its_gate() {
    let root = workspace_root();
    let mut sources = Vec::new();
    collect_rs(&root.join("agent/src"), &mut sources);
    assert!(sources.len() > 5, "the Worker's sources were found");
    const MAKES_CONNECTIONS: &[&str] = &[
        "TcpStream::connect",
        "UdpSocket",
        "lookup_host",
        "connect_async",
        "to_socket_addrs",
        "reqwest",
        "UnixStream::connect",
    ];
    for path in sources {
        let name = path
            .strip_prefix(&root)
            .unwrap_or(&path)
            .to_string_lossy()
            .into_owned();
        let text = std::fs::read_to_string(&path).expect("source");
        for needle in MAKES_CONNECTIONS {
            let allowed = match *needle {
                // The gate itself.
                _ if name == "agent/src/net.rs" => true,
                // `aromba pair` (root) resolves the relay once to write
                // the addresses `network.toml` lists.
                "lookup_host" => name == "agent/src/pair.rs",
                // The Warden's sockets, on this machine.
                "UnixStream::connect" => name == "agent/src/warden_client.rs",
                _ => false,
            };
            assert!(
                allowed || !text.contains(needle),
                "{name} uses {needle}: the Worker connects only through agent/src/net.rs"
            );
        }
    }
    let meta = metadata().expect("cargo metadata");
    let tree = normal_dependency_names(&meta, "aromba").expect("worker tree");
    for client in ["reqwest", "ureq", "isahc", "surf", "attohttpc"] {
        assert!(!tree.contains(client), "the Worker links {client}");
    }
}

fn collect_rs(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a source directory") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            collect_rs(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The fake Bot API stands in for Telegram in tests and the demo, the
/// demo's helpers make a certificate authority and play the person, and
/// the test kit holds the tests' stand-ins; no program we ship may link
/// any of them.
#[test]
fn no_shipped_program_links_the_fake_bot_api_or_the_demo() {
    let meta = metadata().expect("cargo metadata");
    for program in [
        "aromba-relay",
        "aromba",
        "aromba-warden",
        "aromba-relay-proto",
    ] {
        let tree = normal_dependency_names(&meta, program).expect("tree");
        for fake in ["aromba-botfake", "aromba-demo", "aromba-testkit"] {
            assert!(!tree.contains(fake), "{program} links {fake}");
        }
    }
}

#[test]
fn every_crate_forbids_unsafe_code() {
    let root = workspace_root();
    let top = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    assert!(
        top.contains("[workspace.lints.rust]\nunsafe_code = \"forbid\""),
        "the workspace must forbid unsafe_code"
    );
    let meta = metadata().expect("cargo metadata");
    for package in meta.workspace_packages() {
        let manifest = std::fs::read_to_string(&package.manifest_path).expect("manifest");
        if package.name.as_str() == "aromba-warden" {
            warden_confines_unsafe_to_its_system_module(&manifest);
            continue;
        }
        assert!(
            manifest.contains("[lints]\nworkspace = true"),
            "{} does not inherit the workspace lints",
            package.name
        );
        for target in &package.targets {
            let is_root = target.is_lib() || target.is_bin();
            if !is_root {
                continue;
            }
            let source = std::fs::read_to_string(&target.src_path).expect("target source");
            assert!(
                source.contains("#![forbid(unsafe_code)]"),
                "{} does not say #![forbid(unsafe_code)]",
                target.src_path
            );
        }
    }
}

#[test]
fn clippy_disallows_spawning_processes() {
    let clippy =
        std::fs::read_to_string(workspace_root().join("clippy.toml")).expect("clippy.toml");
    for path in ["std::process::Command::new", "tokio::process::Command::new"] {
        assert!(
            clippy.contains(&format!("path = \"{path}\"")),
            "clippy.toml must disallow {path}"
        );
    }
}

/// The one exception to the spawning lint is the Warden's exec module:
/// no other source of the workspace (tests and tools included) allows it.
#[test]
fn only_the_wardens_exec_module_may_spawn() {
    let root = workspace_root();
    let mut files = Vec::new();
    for dir in [
        "agent", "botfake", "demo", "relay", "testkit", "warden", "xtask", "fuzz",
    ] {
        collect_rs(&root.join(dir), &mut files);
    }
    let allowing: Vec<String> = files
        .iter()
        .filter(|f| !f.components().any(|c| c.as_os_str() == "target"))
        .filter(|f| {
            std::fs::read_to_string(f)
                .expect("a source")
                .contains(concat!("allow(clippy::", "disallowed_methods)"))
        })
        .map(|f| f.strip_prefix(&root).unwrap_or(f).display().to_string())
        .collect();
    assert_eq!(allowing, ["warden/src/exec.rs"]);
}

/// The Warden denies `unsafe` crate-wide, allows it in `src/system.rs`
/// alone, and every other source file forbids it; each `unsafe` block in
/// `system.rs` carries a `// SAFETY:` comment.
fn warden_confines_unsafe_to_its_system_module(manifest: &str) {
    assert!(
        manifest.contains("[lints.rust]\nunsafe_code = \"deny\""),
        "aromba-warden must deny unsafe_code"
    );
    assert!(manifest.contains("disallowed_methods = \"deny\""));
    let src = workspace_root().join("warden/src");
    let mut files = Vec::new();
    let mut dirs = vec![src.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("warden/src") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    for file in files {
        let text = std::fs::read_to_string(&file).expect("source");
        let forbids = text.lines().any(|l| l.trim() == "#![forbid(unsafe_code)]");
        if file == src.join("system.rs") {
            assert!(text.lines().any(|l| l.trim() == "#![allow(unsafe_code)]"));
            let blocks = text.matches("unsafe {").count();
            let safety = text.matches("// SAFETY:").count();
            assert!(
                blocks > 0 && safety >= blocks,
                "every unsafe block in system.rs needs a // SAFETY: line"
            );
        } else if file == src.join("lib.rs") {
            assert!(
                text.lines().any(|l| l.trim() == "#![deny(unsafe_code)]"),
                "lib.rs must deny unsafe_code"
            );
        } else {
            assert!(
                forbids,
                "{} does not say #![forbid(unsafe_code)]",
                file.display()
            );
        }
    }
}

/// SECURITY.md's threat table names, for each attacker and what they try,
/// the test files that show it fails: every adversarial test file of the
/// workspace is in it, and every file it names exists.
#[test]
fn every_adversarial_test_file_is_in_the_threat_table_and_every_file_it_names_exists() {
    let root = workspace_root();
    let security = std::fs::read_to_string(root.join("SECURITY.md")).expect("SECURITY.md");
    let named = threat_table_files(&security);
    assert!(
        named.len() > 50,
        "only {} files in SECURITY.md's \"{THREAT_TABLE}\"",
        named.len()
    );
    let mut sources = Vec::new();
    for dir in std::fs::read_dir(&root).expect("the workspace") {
        let dir = dir.expect("an entry").path();
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if dir.is_dir() && !name.starts_with('.') && name != "target" && name != "fuzz" {
            collect_rs(&dir, &mut sources);
        }
    }
    let adversarial: BTreeSet<String> = sources
        .iter()
        .filter_map(|p| p.strip_prefix(&root).ok())
        .map(|p| p.to_string_lossy().into_owned())
        .filter(|p| !p.contains("/target/") && is_adversarial_test_file(p))
        .collect();
    assert!(
        adversarial.len() > 50,
        "only {} adversarial files found",
        adversarial.len()
    );
    let missing: Vec<&String> = adversarial.difference(&named).collect();
    let gone: Vec<&String> = named.iter().filter(|f| !root.join(f).is_file()).collect();
    assert!(
        missing.is_empty() && gone.is_empty(),
        "SECURITY.md's threat table and the tests differ:\n  not in the table: {missing:?}\n  \
         named but not there: {gone:?}"
    );
}

/// Every file of the workspace, as paths relative to its root (folders end
/// with `/`), without build output.
fn workspace_paths(root: &std::path::Path) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("a folder") {
            let path = entry.expect("an entry").path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let rel = path
                .strip_prefix(root)
                .expect("under the root")
                .to_string_lossy()
                .into_owned();
            if path.is_dir() {
                if name == "target" || name == ".git" {
                    continue;
                }
                found.insert(format!("{rel}/"));
                dirs.push(path);
            } else {
                found.insert(rel);
            }
        }
    }
    found
}

/// ARCHITECTURE.md is a map that stays true: every source file it names
/// (a backticked `….rs`, or a path under one of the workspace's top
/// folders) is there, and every test or function it names by a long
/// snake_case name is defined.
#[test]
fn every_path_and_test_architecture_md_names_exists() {
    let root = workspace_root();
    let map = std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let paths = workspace_paths(&root);
    let tops: BTreeSet<String> = paths
        .iter()
        .filter(|p| p.ends_with('/') && p.matches('/').count() == 1)
        .cloned()
        .collect();
    let mut sources = Vec::new();
    collect_rs(&root.join("agent"), &mut sources);
    for dir in [
        "relay", "warden", "botfake", "demo", "release", "testkit", "xtask", "fuzz",
    ] {
        collect_rs(&root.join(dir), &mut sources);
    }
    let functions: BTreeSet<String> = sources
        .iter()
        .filter(|p| !p.to_string_lossy().contains("/target/"))
        .flat_map(|p| {
            let text = std::fs::read_to_string(p).unwrap_or_default();
            text.split("fn ")
                .skip(1)
                .map(|rest| {
                    rest.chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect::<String>()
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let mut missing = Vec::new();
    for (i, token) in map.split('`').enumerate() {
        if i % 2 == 0 {
            continue;
        }
        let pathlike = !token.is_empty()
            && token
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_./-".contains(c));
        let under_a_top = tops.iter().any(|t| token.starts_with(t.as_str()));
        if pathlike && !token.starts_with('/') && (token.ends_with(".rs") || under_a_top) {
            let t = token.trim_end_matches('/');
            let there = paths.iter().any(|p| {
                let p = p.trim_end_matches('/');
                p == t || p.ends_with(&format!("/{t}"))
            });
            // The production signing keys: present on the release machine
            // only (the map says so), never in the repository.
            let release_key = matches!(t, "keys/release.pub" | "keys/release-standby.pub");
            if !there && !release_key {
                missing.push(format!("the path {token}"));
            }
        }
        let snake = token.matches('_').count() >= 3
            && token
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if snake && !functions.contains(token) {
            missing.push(format!("the function {token}"));
        }
    }
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names what is not there:\n{}",
        missing.join("\n")
    );
}

/// The directory of the crate whose sources hold `file`: the nearest one
/// with a `Cargo.toml`.
fn crate_dir_of(file: &std::path::Path) -> std::path::PathBuf {
    file.ancestors()
        .skip(1)
        .find(|d| d.join("Cargo.toml").is_file())
        .expect("a file inside a crate")
        .to_path_buf()
}

/// What the tests share lives in `testkit/`, a crate they depend on: no
/// source includes another crate's file by `#[path]` (the tests once did,
/// copying the relay's support into ten of the Worker's test binaries).
/// The one exception is the fuzz targets: `fuzz/` is built by cargo-fuzz
/// outside the workspace, and each target shares its checks with the
/// replay of its corpus in the crate that owns the parser (a file under
/// that crate's `tests/fuzz_check/`, or the policy's oracle for
/// `policy_matcher`) without linking the test kit (and the relay with it).
#[test]
fn no_source_includes_another_crates_file_by_path() {
    let root = workspace_root();
    let mut files = Vec::new();
    for dir in [
        "agent", "botfake", "demo", "relay", "release", "testkit", "warden", "xtask", "fuzz",
    ] {
        collect_rs(&root.join(dir), &mut files);
    }
    let allowed = [(
        root.join("fuzz/fuzz_targets/policy_matcher.rs"),
        "../../warden/tests/oracle/mod.rs",
    )];
    let mut seen = 0;
    let mut across = Vec::new();
    for file in files
        .iter()
        .filter(|f| !f.components().any(|c| c.as_os_str() == "target"))
    {
        let text = std::fs::read_to_string(file).expect("a source");
        for line in text.lines() {
            let Some(rest) = line.trim_start().strip_prefix("#[path = \"") else {
                continue;
            };
            seen += 1;
            let target = rest.split('"').next().unwrap_or(rest);
            let included = file.parent().expect("a folder").join(target);
            let included = std::fs::canonicalize(&included)
                .unwrap_or_else(|e| panic!("{}: {target}: {e}", file.display()));
            let own = std::fs::canonicalize(crate_dir_of(file)).expect("the crate's folder");
            let shared_check = file.starts_with(root.join("fuzz/fuzz_targets"))
                && included.components().any(|c| c.as_os_str() == "fuzz_check")
                && included
                    .strip_prefix(std::fs::canonicalize(crate_dir_of(&included)).expect("a crate"))
                    .is_ok_and(|p| p.starts_with("tests/fuzz_check"));
            let exempt = shared_check || allowed.iter().any(|(f, t)| f == file && *t == target);
            if crate_dir_of(&included) != own && !exempt {
                across.push(format!("{}: {target}", file.display()));
            }
        }
    }
    assert!(seen > 0, "no #[path] read: is the workspace read?");
    assert!(
        across.is_empty(),
        "files included from another crate (put what is shared in testkit/):\n{}",
        across.join("\n")
    );
}

/// The versions a `Cargo.lock` resolves, by crate name.
fn locked_versions(lock: &std::path::Path) -> std::collections::BTreeMap<String, BTreeSet<String>> {
    let text = std::fs::read_to_string(lock).unwrap_or_else(|e| panic!("{}: {e}", lock.display()));
    let mut versions = std::collections::BTreeMap::<String, BTreeSet<String>>::new();
    for package in text.split("[[package]]").skip(1) {
        let field = |key: &str| {
            package
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{key} = \"")))
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or_else(|| panic!("{}: a package without {key}", lock.display()))
                .to_owned()
        };
        versions
            .entry(field("name"))
            .or_default()
            .insert(field("version"));
    }
    versions
}

/// The fuzz targets (their own workspace, with its own lock) parse with the
/// crates that ship: a newer `url`, `http` or `serde_json` in the fuzz
/// build alone would fuzz a parser no release has. Every crate both locks
/// hold is at a version the workspace's lock has.
#[test]
fn the_fuzz_build_locks_the_versions_the_workspace_ships() {
    let root = workspace_root();
    let shipped = locked_versions(&root.join("Cargo.lock"));
    let fuzzed = locked_versions(&root.join("fuzz/Cargo.lock"));
    let drift: Vec<String> = fuzzed
        .iter()
        .filter_map(|(name, versions)| {
            let ship = shipped.get(name)?;
            (!versions.is_subset(ship))
                .then(|| format!("{name}: fuzz {versions:?}, shipped {ship:?}"))
        })
        .collect();
    assert!(
        fuzzed.contains_key("serde_json"),
        "is fuzz/Cargo.lock read?"
    );
    assert!(
        drift.is_empty(),
        "fuzz/Cargo.lock differs from Cargo.lock (copy Cargo.lock to fuzz/ and run `cargo metadata` there):\n{}",
        drift.join("\n")
    );
}
