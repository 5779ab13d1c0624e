//! A skill's settings through a real Warden: values the owner sets from a
//! root terminal (`aromba skill set`), given to the skill's chores as
//! environment variables; a secret never shown, journaled or left in a
//! chore's output, and never given to its tools; a chore refused while a
//! setting is not set; a value of the wrong shape refused.

use aromba_testkit::skills::{Publisher, bundle_file, chore, manifest};
use aromba_testkit::warden::{Warden, refused};
use aromba_warden_proto::{Request, Response, SettingValue};
use serde_json::json;

const SECRET: &str = "correct-horse-battery-staple-41";

fn set(w: &Warden, setting: &str, value: &str) -> Response {
    w.control(&Request::SkillSet {
        name: "vault".into(),
        setting: setting.into(),
        value: SettingValue::new(value),
        pin: None,
    })
}

/// Installs `vault`: settings REPO (text) and PASSWORD (secret); a chore
/// printing both and writing the secret where the test can see it was
/// given, and a tool printing its environment.
fn vault(w: &Warden) {
    let acme = Publisher::new("acme-tools");
    acme.trust(w);
    let mut m = manifest("vault", "1.0.0", "acme-tools", &w.touched, &["vault-push"]);
    m["settings"] = json!([
        {"name": "REPO", "kind": "text", "why": "where the copies go"},
        {"name": "PASSWORD", "kind": "secret", "why": "the repository's password"},
    ]);
    m["tools"] = json!([{"name": "vault-env", "description": "What the tool is given",
        "file": "tools/vault-env.sh", "sha256": ""}]);
    let script = chore(
        "vault-push",
        "green",
        &w.touched,
        "",
        &format!(
            "echo \"repo=$REPO\"\necho \"password=$PASSWORD\" >&2\n[ \"$1\" = --dry-run ] && exit 0\nprintf %s \"$PASSWORD\" > {}/given",
            w.touched.display()
        ),
    );
    let tool = "#!/bin/sh\necho \"repo=${REPO:-none} password=${PASSWORD:-none}\"\n";
    let path = bundle_file(
        w,
        "vault",
        &acme.bundle(
            m,
            &[
                ("chores/vault-push.sh", &script),
                ("tools/vault-env.sh", tool),
            ],
        ),
    );
    let r = w.control(&Request::SkillCheck { path: path.clone() });
    let Response::SkillShown { sha256, text, .. } = r else {
        panic!("not shown: {r:?}");
    };
    assert!(
        text.contains("It needs you to set, from a root terminal (aromba skill set vault NAME):\n  REPO — where the copies go\n  PASSWORD (a secret: never shown, given to its chores only) — the repository's password"),
        "{text}"
    );
    assert!(matches!(
        w.control(&Request::SkillInstall {
            path,
            sha256,
            pin: None
        }),
        Response::Noted { .. }
    ));
}

fn run(w: &Warden, dry_run: bool) -> Response {
    w.control(&Request::ChoreRun {
        name: "vault-push".into(),
        dry_run,
    })
}

#[test]
fn a_skill_chore_waits_for_its_settings_and_gets_them_in_its_environment() {
    let w = Warden::start("skill-settings", true, &[]);
    vault(&w);
    let why = refused(run(&w, true));
    assert!(
        why.contains("vault-push needs vault's settings first: REPO, PASSWORD")
            && why.contains("aromba skill set vault NAME"),
        "{why}"
    );
    assert!(matches!(
        set(&w, "REPO", "s3:https://s3.example.com/backups"),
        Response::Noted { .. }
    ));
    let why = refused(run(&w, true));
    assert!(why.contains("first: PASSWORD"), "{why}");
    assert!(matches!(
        set(&w, "PASSWORD", SECRET),
        Response::Noted { .. }
    ));
    assert!(matches!(run(&w, true), Response::Receipt { ok: true, .. }));
    w.dry_run_shown("vault-push");
    let Response::Receipt {
        ok,
        receipt,
        stdout,
        stderr,
    } = run(&w, false)
    else {
        panic!("no receipt");
    };
    assert!(ok, "{receipt}");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&stdout),
        String::from_utf8_lossy(&stderr),
    );
    // Given: the chore wrote it where only a run that had it could.
    assert_eq!(
        std::fs::read_to_string(w.touched.join("given")).unwrap(),
        SECRET
    );
    // Never shown: not in the receipt, the journal, the list.
    assert_eq!(stdout, "repo=s3:https://s3.example.com/backups\n");
    assert_eq!(stderr, "password=[redacted:skill-secret]\n");
    assert!(!receipt.contains(SECRET), "{receipt}");
    let journal = w.journal();
    assert!(!journal.contains(SECRET));
    let set_lines: Vec<&str> = journal
        .lines()
        .filter(|l| l.contains("\"skill-set\""))
        .collect();
    assert!(
        set_lines
            .iter()
            .any(|l| l.contains("\"setting\":\"PASSWORD\"") && l.contains("(a secret)")),
        "{set_lines:?}"
    );
    let Response::Skills { skills, .. } = w.control(&Request::Skills) else {
        panic!("no list");
    };
    let shown: Vec<(String, String)> = skills[0]
        .settings
        .iter()
        .map(|s| (s.name.clone(), s.shown.clone()))
        .collect();
    assert_eq!(
        shown,
        vec![
            ("REPO".into(), "s3:https://s3.example.com/backups".into()),
            ("PASSWORD".into(), "set (a secret)".into()),
        ]
    );
    // The tool gets the text setting and not the secret.
    let Response::Result(r) = w.ask(&Request::SkillTool {
        skill: "vault".into(),
        tool: "vault-env".into(),
    }) else {
        panic!("the tool did not run");
    };
    assert_eq!(
        String::from_utf8_lossy(&r.stdout),
        "repo=s3:https://s3.example.com/backups password=none\n"
    );
}

#[test]
fn a_chore_printing_its_secret_has_it_taken_out_of_its_output() {
    let w = Warden::start("skill-scrub", true, &[]);
    vault(&w);
    assert!(matches!(set(&w, "REPO", "local"), Response::Noted { .. }));
    assert!(matches!(
        set(&w, "PASSWORD", SECRET),
        Response::Noted { .. }
    ));
    let Response::Receipt { stderr, .. } = run(&w, true) else {
        panic!("no receipt");
    };
    assert_eq!(
        String::from_utf8_lossy(&stderr),
        "password=[redacted:skill-secret]\n"
    );
}

#[test]
fn a_setting_of_the_wrong_shape_or_unknown_is_refused_and_nothing_kept() {
    let w = Warden::start("skill-settings-bad", true, &[]);
    vault(&w);
    for (setting, value, want) in [
        ("PASSWORD", "short", "8 to 256 bytes"),
        (
            "PASSWORD",
            "line\nbreak-in-the-middle",
            "no control characters",
        ),
        ("REPO", "has a space", "no spaces"),
        ("REPO", "", "1 to 256"),
        ("NOPE", "x", "vault has no setting named \"NOPE\""),
    ] {
        let why = refused(set(&w, setting, value));
        assert!(why.contains(want), "{setting}={value:?}: {why}");
    }
    let why = refused(w.control(&Request::SkillSet {
        name: "other".into(),
        setting: "REPO".into(),
        value: SettingValue::new("x"),
        pin: None,
    }));
    assert!(why.contains("no skill named other is installed"), "{why}");
    assert!(
        !w.layout().state_dir.join("skill-vault.settings").exists(),
        "nothing kept"
    );
}

#[test]
fn removing_a_skill_forgets_its_settings() {
    let w = Warden::start("skill-settings-remove", true, &[]);
    vault(&w);
    assert!(matches!(
        set(&w, "PASSWORD", SECRET),
        Response::Noted { .. }
    ));
    let record = w.layout().state_dir.join("skill-vault.settings");
    assert!(record.exists());
    assert!(matches!(
        w.control(&Request::SkillRemove {
            name: "vault".into()
        }),
        Response::Noted { .. }
    ));
    assert!(!record.exists());
}
