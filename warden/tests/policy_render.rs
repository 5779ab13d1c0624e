//! The rendering of the compiled-in policy is, byte for byte, the block in
//! SECURITY.md; it is the specification's block but where the grammar was
//! deliberately tightened (issue 9: a tool with verbs has one form per verb
//! group, `[[allow.sub]]`, and the value types are written out).

use aromba_warden::policy::render;
use std::path::PathBuf;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The specification's policy block: from its first comment line to the end.
/// The specification lives in `shared/seeds/` beside the repository (the
/// nearest such folder up from it).
fn specification_block() -> String {
    const SPEC: &str = "shared/seeds/000_00dac11962c139a6.txt";
    let root = repo().canonicalize().expect("the repository");
    let path = root
        .ancestors()
        .skip(1)
        .map(|dir| dir.join(SPEC))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "the specification {SPEC} is not beside the repository {}",
                root.display()
            )
        });
    let spec = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read the specification at {}: {e}", path.display()));
    let start = spec
        .find("# Aromba Warden policy")
        .expect("the specification carries the policy block");
    let mut block = spec[start..].to_string();
    if !block.ends_with('\n') {
        block.push('\n');
    }
    block
}

/// SECURITY.md's block: the ```toml fence under "## The policy, verbatim".
fn security_md_block() -> String {
    let text = std::fs::read_to_string(repo().join("SECURITY.md")).expect("SECURITY.md");
    let section = text
        .find("## The policy, verbatim")
        .expect("SECURITY.md has a section \"## The policy, verbatim\"");
    let rest = &text[section..];
    let open = rest
        .find("```toml\n")
        .expect("the section holds a ```toml block")
        + "```toml\n".len();
    let close = rest[open..]
        .find("\n```")
        .expect("the ```toml block is closed")
        + open
        + 1;
    rest[open..close].to_string()
}

fn first_difference(a: &str, b: &str) -> String {
    for (n, (la, lb)) in a.lines().zip(b.lines()).enumerate() {
        if la != lb {
            return format!("line {}:\n  rendered: {la}\n  expected: {lb}", n + 1);
        }
    }
    format!(
        "lengths differ: {} vs {} lines",
        a.lines().count(),
        b.lines().count()
    )
}

/// A TOML text cut into its tables: each a header line at column 0 and the
/// lines up to the next one, without the blank lines that end it.
fn tables(text: &str) -> Vec<Vec<&str>> {
    let mut out: Vec<Vec<&str>> = Vec::new();
    for line in text.lines() {
        if line.starts_with('[') || out.is_empty() {
            out.push(Vec::new());
        }
        if let Some(t) = out.last_mut() {
            t.push(line);
        }
    }
    for t in &mut out {
        while t.last() == Some(&"") {
            t.pop();
        }
    }
    out
}

fn key<'a>(table: &[&'a str], name: &str) -> Option<&'a str> {
    table
        .iter()
        .find(|l| l.starts_with(&format!("{name} = ")))
        .copied()
}

/// The rendering departs from the specification's block only where the
/// grammar was tightened: a rule with verbs keeps its command, binaries,
/// description, bounds and limits, and says its grammar form by form in
/// `[[…sub]]` tables instead of the one flat list the specification has
/// (`first`, `tokens`, …) under which `systemctl --failed reboot` passed;
/// it takes no more arguments than before. Every other table is the
/// specification's, byte for byte, and the rendering adds `[values]` and
/// `[positional_kinds]` at the end.
#[test]
fn render_is_the_specification_block_but_for_the_tightened_grammar() {
    let rendered = render();
    let expected = specification_block();
    let mine = tables(&rendered);
    let spec = tables(&expected);
    assert_eq!(mine.len(), spec.len() + 2, "the tables differ in number");
    assert_eq!(mine[mine.len() - 2][0], "[values]");
    assert_eq!(mine[mine.len() - 1][0], "[positional_kinds]");
    let mut tightened = 0;
    for (m, s) in mine.iter().zip(&spec) {
        if !m
            .iter()
            .any(|l| l.trim_start().starts_with("[[") && l.contains(".sub]]"))
        {
            if m[0] == "[paths]" {
                assert_paths_only_add_the_wardens_own_tree(m, s);
            } else if key(s, "cmd") == Some("cmd = \"journalctl\"") {
                assert_journalctl_only_drops_grep(m, s);
            } else {
                assert_eq!(m, s, "a table the grammar change must not touch differs");
            }
            continue;
        }
        tightened += 1;
        for name in [
            "cmd",
            "bins",
            "doc",
            "min_args",
            "warden_adds",
            "warden_env",
            "timeout_s",
            "low_priority",
        ] {
            assert_eq!(key(m, name), key(s, name), "{name} of {:?}", key(s, "cmd"));
        }
        let max = |t: &[&str]| -> usize {
            key(t, "max_args")
                .and_then(|l| l["max_args = ".len()..].parse().ok())
                .unwrap_or_else(|| panic!("no max_args in {t:?}"))
        };
        assert!(max(m) <= max(s), "{:?} takes more arguments", key(s, "cmd"));
        assert!(key(s, "first").is_some() || key(s, "flag_letters").is_some());
    }
    // docker, systemctl, apt, fail2ban-client, timedatectl, ufw, nginx, nft
    // and the four chore actions.
    assert_eq!(tightened, 12);
}

/// journalctl's rule is the specification's without `--grep`: whether a
/// pattern matched the text the redactor hides told that text apart.
fn assert_journalctl_only_drops_grep(mine: &[&str], spec: &[&str]) {
    let without_grep: Vec<String> = spec
        .iter()
        .map(|l| {
            l.replace("\"--grep <pattern>\", ", "")
                .replace("\"-g <pattern>\", ", "")
                .replace("\"--grep=<pattern>\", ", "")
        })
        .collect();
    assert_ne!(
        without_grep, spec,
        "the specification's journalctl has --grep"
    );
    assert_eq!(mine, without_grep, "journalctl differs by more than --grep");
}

/// `[paths]` is the specification's but for what it adds, each as secret
/// as what the specification lists: the Warden's state and journal, which
/// moved out of the Worker's home into the Warden's own tree (its
/// quarantine is not: chores move files into it, and its names are those
/// the files had where the Worker could list them); the copies of
/// `/etc/shadow` and `/etc/gshadow` Debian's daily backup keeps; and files
/// that hold passwords by their well-known names (found by the attack
/// round on the rules: `.pgpass`, `.my.cnf`, shell histories, …).
fn assert_paths_only_add_the_wardens_own_tree(mine: &[&str], spec: &[&str]) {
    assert_eq!(mine.len(), spec.len(), "[paths] differs in lines");
    for (m, s) in mine.iter().zip(spec) {
        if s.starts_with("secret_prefixes = ") {
            let added = s
                .replace(
                    "\"/etc/aromba/warden\", ",
                    "\"/etc/aromba/warden\", \"/var/lib/aromba-warden/state\", \"/var/lib/aromba-warden/journal\", ",
                )
                .replace(
                    "\"/etc/gshadow\", ",
                    "\"/etc/gshadow\", \"/var/backups/shadow\", \"/var/backups/gshadow\", ",
                );
            assert_eq!(*m, added, "secret_prefixes adds only what is said above");
        } else if s.starts_with("secret_names = ") {
            let added = s.replace(
                "]",
                ", \".pgpass\", \".my.cnf\", \".npmrc\", \".pypirc\", \".git-credentials\", \"rclone.conf\", \"*_history\"]",
            );
            assert_eq!(*m, added, "secret_names adds only what is said above");
        } else {
            assert_eq!(m, s, "[paths] differs from the specification");
        }
    }
}

#[test]
fn security_md_carries_the_policy_verbatim() {
    let rendered = render();
    let block = security_md_block();
    assert!(rendered == block, "{}", first_difference(&rendered, &block));
}

#[test]
fn install_writes_the_rendering_the_warden_never_reads_back() {
    let root = std::env::temp_dir().join(format!("aromba-install-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let out = assert_cmd::Command::cargo_bin("aromba-warden")
        .unwrap()
        .args([
            "install",
            "--worker-bin",
            "/bin/true",
            "--worker-user",
            "root",
            "--root",
        ])
        .arg(&root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written = std::fs::read_to_string(root.join("etc/policy.toml")).unwrap();
    assert_eq!(written, render());
    // Editing it changes nothing the Warden does: policy check still judges
    // by the compiled-in policy.
    std::fs::write(root.join("etc/policy.toml"), "[[allow]]\ncmd = \"bash\"\n").unwrap();
    let out = assert_cmd::Command::cargo_bin("aromba-warden")
        .unwrap()
        .args(["policy", "check", "--", "bash", "-c", "id"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    std::fs::remove_dir_all(&root).unwrap();
}
