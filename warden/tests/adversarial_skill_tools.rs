//! A skill's assistant tool run on the model's word, through a real
//! Warden: caged with nothing writable at all — not its skill's paths, not
//! `/tmp` — no network, secrets hidden, its output redacted and capped as a
//! read's, and journaled; a tool or skill that does not exist is refused.

use aromba_testkit::skills::{Publisher, bundle_file, manifest};
use aromba_testkit::warden::{Warden, refused};
use aromba_warden_proto::{Request, Response};
use serde_json::json;

/// Installs skill `probe` whose tool `probe` runs `body`; the Warden.
fn with_tool(name: &str, body: &str) -> Warden {
    let w = Warden::start(name, true, &[]);
    let acme = Publisher::new("acme-tools");
    acme.trust(&w);
    let mut m = manifest("probe", "1.0.0", "acme-tools", &w.touched, &[]);
    m["chores"] = json!([]);
    m["tools"] = json!([{
        "name": "probe",
        "description": "What the tests' tool finds",
        "file": "tools/probe.sh",
        "sha256": "",
    }]);
    let script = format!("#!/bin/sh\n{body}\n");
    let path = bundle_file(&w, "probe", &acme.bundle(m, &[("tools/probe.sh", &script)]));
    let Response::SkillShown { sha256, text, .. } =
        w.control(&Request::SkillCheck { path: path.clone() })
    else {
        panic!()
    };
    assert!(
        text.contains("Its tools for the assistant (they run with nothing writable):\n  probe — What the tests' tool finds"),
        "{text}"
    );
    let r = w.control(&Request::SkillInstall {
        path,
        sha256,
        pin: None,
    });
    assert!(matches!(r, Response::Noted { .. }), "{r:?}");
    w
}

fn run(w: &Warden) -> (String, String, Option<i32>, bool) {
    match w.ask(&Request::SkillTool {
        skill: "probe".into(),
        tool: "probe".into(),
    }) {
        Response::Result(r) => (
            String::from_utf8_lossy(&r.stdout).into_owned(),
            String::from_utf8_lossy(&r.stderr).into_owned(),
            r.exit_code,
            r.cut,
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_skill_tool_can_write_nowhere_not_even_its_skills_own_paths() {
    // The directory the test Warden lets chores write, and the manifest's
    // `writes`.
    let dir = format!("/var/tmp/aromba-tool-nowrite-{}", std::process::id());
    let body = format!(
        "for p in {dir}/x /tmp/x /dev/shm/x /var/tmp/aromba-tool-x; do if echo hi > \"$p\" 2>/dev/null; then echo \"wrote $p\"; else echo \"refused $p\"; fi; done"
    );
    let w = with_tool("tool-nowrite", &body);
    assert_eq!(w.touched.display().to_string(), dir);
    let (out, _, code, _) = run(&w);
    assert_eq!(code, Some(0), "{out}");
    assert!(!out.contains("wrote"), "{out}");
    assert_eq!(out.matches("refused ").count(), 4, "{out}");
    assert!(!w.touched.join("x").exists());
}

#[test]
fn a_skill_tool_has_no_network_and_its_output_is_redacted_capped_and_journaled() {
    let w = with_tool(
        "tool-redact",
        "echo \"ifaces $(grep -c : /proc/net/dev)\"\necho 'password=hunter2-very-secret'\necho 'AKIAIOSFODNN7EXAMPLE'",
    );
    let (out, _, code, cut) = run(&w);
    assert_eq!(code, Some(0));
    assert!(!cut);
    assert!(out.contains("ifaces 1\n"), "{out}");
    assert!(!out.contains("hunter2-very-secret"), "{out}");
    assert!(!out.contains("AKIAIOSFODNN7EXAMPLE"), "{out}");
    let journal = w.journal();
    let line = journal
        .lines()
        .find(|l| l.contains("\"skill-tool\"") && l.contains("\"allowed\""))
        .expect("the tool's run journaled");
    assert!(line.contains("\"skill\":\"probe\""), "{line}");
    assert!(!line.contains("hunter2"), "{line}");
}

#[test]
fn a_skill_tools_output_past_the_cap_is_cut() {
    // `yes` writes lines of two bytes: the cut at the policy's cap (1 MiB)
    // ends a line, and redaction has nothing to take.
    let w = with_tool("tool-cap", "yes");
    let (out, err, _, cut) = run(&w);
    assert!(cut);
    assert_eq!(out.len() + err.len(), 1 << 20);
}

#[test]
fn an_unknown_skill_or_tool_is_refused_and_only_the_worker_asks() {
    let w = with_tool("tool-unknown", "echo hi");
    for (skill, tool, want) in [
        ("nope", "probe", "no skill named \"nope\" is installed"),
        (
            "probe",
            "other",
            "the skill probe brings no tool named \"other\"",
        ),
        ("../probe", "probe", "no skill named"),
    ] {
        let why = refused(w.ask(&Request::SkillTool {
            skill: skill.into(),
            tool: tool.into(),
        }));
        assert!(why.contains(want), "{why}");
    }
    match w.control(&Request::SkillTool {
        skill: "probe".into(),
        tool: "probe".into(),
    }) {
        Response::Error { message } => assert!(message.contains("not served"), "{message}"),
        other => panic!("{other:?}"),
    }
    assert!(w.journal().contains("\"skill-tool\""));
}
