//! The rendering of the compiled-in policy is, byte for byte, the block in
//! the specification and in SECURITY.md.

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

#[test]
fn render_equals_the_specification_block() {
    let rendered = render();
    let expected = specification_block();
    assert!(
        rendered == expected,
        "{}",
        first_difference(&rendered, &expected)
    );
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
