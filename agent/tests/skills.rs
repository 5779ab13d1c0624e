//! Skills from a root terminal and in the chat: `aromba skill install`
//! shows the Warden's words for what the bundle asks, asks first (or takes
//! `--yes`), takes the PIN for its hosts, and installs; `list`, `show` and
//! `remove`; `aromba skill set` (a secret typed, never on the command
//! line; a host with the PIN); `/skills` in a paired chat.

use aromba_testkit::paired::{CHAT, Setup, paired_with};
use aromba_testkit::skills::{Publisher, chore, manifest};
use aromba_testkit::worker::{TestWarden, account, text};
use serde_json::json;
use sqlx::PgPool;
use std::path::PathBuf;

const PIN: &str = "4729135";

/// A directory a skill's chore may write, removed at the end.
struct Touched(PathBuf);

impl Touched {
    fn new(name: &str) -> Touched {
        let p = PathBuf::from(format!("/var/tmp/aromba-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Touched(p)
    }
}

impl Drop for Touched {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The bundle of skill `certs` (a green chore `certs-check`, and `hosts`),
/// signed by `acme-tools`, written under the Warden's root; its path.
fn certs_bundle(w: &TestWarden, touched: &Touched, hosts: serde_json::Value) -> String {
    let acme = Publisher::new("acme-tools");
    acme.trust_at(&w.layout().config_dir);
    let mut m = manifest("certs", "1.0.0", "acme-tools", &touched.0, &["certs-check"]);
    m["hosts"] = hosts;
    let script = chore("certs-check", "green", &touched.0, "", "exit 0");
    let path = w.root.join("certs-1.0.0.skill");
    std::fs::write(&path, acme.bundle(m, &[("chores/certs-check.sh", &script)])).unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn aromba_skill_install_shows_what_it_asks_asks_first_then_installs_lists_and_removes() {
    let w = TestWarden::start_installed("skill-cli", account("aromba"), Some(8), |_| {});
    let touched = Touched::new("skill-cli");
    let path = certs_bundle(&w, &touched, json!([]));
    // Not at a terminal and no --yes: shown, asked, nothing installed.
    let out = w.aromba_as("root", &["skill", "install", &path]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(!out.status.success());
    assert!(
        stdout.starts_with(
            "Install the skill certs 1.0.0?\n\ncerts 1.0.0, from the publisher acme-tools\n"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "It will be able to write:\n  {}\n",
            touched.0.display()
        )),
        "{stdout}"
    );
    assert!(stderr.contains("add --yes"), "{stderr}");
    let list = text(&w.aromba_as("root", &["skill", "list"]).stdout);
    assert_eq!(list, "No skill is installed.\n");
    let out = w.aromba_as("root", &["skill", "install", &path, "--yes"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("certs 1.0.0 is installed (journal seq "),
        "{}",
        text(&out.stdout)
    );
    let list = text(&w.aromba_as("root", &["skill", "list"]).stdout);
    assert_eq!(
        list,
        "certs 1.0.0 (from acme-tools) — network: none: its manifest declares no host\n"
    );
    let show = w.aromba_as("root", &["skill", "show", "certs"]);
    assert!(
        text(&show.stdout).contains("Its chores:\n  certs-check (green, manual)"),
        "{}",
        text(&show.stdout)
    );
    let chores = text(&w.aromba_as("root", &["chores"]).stdout);
    assert!(chores.contains("certs-check"), "{chores}");
    // The Worker may not install or remove.
    let out = w.aromba_as("aromba", &["skill", "remove", "certs", "--yes"]);
    assert!(!out.status.success());
    let out = w.aromba_as("root", &["skill", "remove", "certs", "--yes"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&w.aromba_as("root", &["skill", "list"]).stdout),
        "No skill is installed.\n"
    );
    let out = w.aromba_as("root", &["skill", "show", "certs"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("no skill named certs is installed"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn aromba_skill_install_takes_the_pin_for_the_hosts_it_declares() {
    let w = TestWarden::start_installed("skill-cli-pin", account("aromba"), Some(8), |_| {});
    let touched = Touched::new("skill-cli-pin");
    let path = certs_bundle(
        &w,
        &touched,
        json!([{"name": "acme.example.org", "port": 443, "why": "issues certificates"}]),
    );
    let out = w.aromba_as_with_stdin("root", &["pin", "set"], &format!("{PIN}\n"));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = w.aromba_as_with_stdin("root", &["skill", "install", &path, "--yes"], "1111222\n");
    assert!(!out.status.success());
    assert!(
        text(&out.stdout).contains("It talks to hosts on the network: your PIN gives it that."),
        "{}",
        text(&out.stdout)
    );
    assert!(
        text(&out.stderr).contains("not installed"),
        "{}",
        text(&out.stderr)
    );
    let out = w.aromba_as_with_stdin(
        "root",
        &["skill", "install", &path, "--yes"],
        &format!("{PIN}\n"),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let list = text(&w.aromba_as("root", &["skill", "list"]).stdout);
    assert!(
        list.contains("network: only acme.example.org:443, through the Warden's proxy"),
        "{list}"
    );
    assert!(!w.journal().contains(PIN));
}

#[test]
fn aromba_skill_set_takes_a_secret_typed_never_on_the_command_line_and_a_host_with_the_pin() {
    let w = TestWarden::start_installed("skill-cli-set", account("aromba"), Some(8), |_| {});
    let touched = Touched::new("skill-cli-set");
    let acme = Publisher::new("acme-tools");
    acme.trust_at(&w.layout().config_dir);
    let mut m = manifest("store", "1.0.0", "acme-tools", &touched.0, &["store-push"]);
    m["settings"] = json!([
        {"name": "S3_HOST", "kind": "host", "why": "your storage"},
        {"name": "PASSWORD", "kind": "secret", "why": "the repository's password"},
    ]);
    m["hosts"] = json!([{"name": "@S3_HOST", "port": 443, "why": "the storage you name"}]);
    let script = chore("store-push", "green", &touched.0, "", "exit 0");
    let path = w.root.join("store.skill");
    std::fs::write(&path, acme.bundle(m, &[("chores/store-push.sh", &script)])).unwrap();
    let out = w.aromba_as(
        "root",
        &["skill", "install", &path.to_string_lossy(), "--yes"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = w.aromba_as_with_stdin("root", &["pin", "set"], &format!("{PIN}\n"));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let secret = "a-long-repository-password";
    // On the command line: refused, and said why.
    let out = w.aromba_as("root", &["skill", "set", "store", "PASSWORD", secret]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("PASSWORD is a secret: it is never given on the command line"),
        "{}",
        text(&out.stderr)
    );
    let out = w.aromba_as_with_stdin(
        "root",
        &["skill", "set", "store", "PASSWORD"],
        &format!("{secret}\n"),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("store's PASSWORD is set (journal seq "));
    // A host takes the PIN.
    let out = w.aromba_as_with_stdin(
        "root",
        &["skill", "set", "store", "S3_HOST", "s3.example.com"],
        "1111222\n",
    );
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("not set"),
        "{}",
        text(&out.stderr)
    );
    let out = w.aromba_as_with_stdin(
        "root",
        &["skill", "set", "store", "S3_HOST", "s3.example.com"],
        &format!("{PIN}\n"),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let show = text(&w.aromba_as("root", &["skill", "show", "store"]).stdout);
    assert!(
        show.contains("Network now: only s3.example.com:443, through the Warden's proxy")
            && show.contains("Setting S3_HOST (host): s3.example.com")
            && show.contains("Setting PASSWORD (secret): set (a secret)"),
        "{show}"
    );
    assert!(!show.contains(secret));
    let journal = w.journal();
    assert!(!journal.contains(secret) && !journal.contains(PIN));
}

#[sqlx::test(migrations = false)]
async fn the_chat_lists_the_skills_and_what_each_may_reach(db: PgPool) {
    let touched = Touched::new("skill-chat");
    let dir = touched.0.clone();
    let p = paired_with(db, "skill-chat", Setup::default(), move |w| {
        let acme = Publisher::new("acme-tools");
        acme.trust_at(&w.layout().config_dir);
        let mut m = manifest("certs", "1.0.0", "acme-tools", &dir, &["certs-check"]);
        m["settings"] = json!([{"name": "SITE", "kind": "text", "why": "your site"}]);
        let script = chore("certs-check", "green", &dir, "", "exit 0");
        let path = w.root.join("certs.skill");
        std::fs::write(&path, acme.bundle(m, &[("chores/certs-check.sh", &script)])).unwrap();
        let out = w.aromba_as(
            "root",
            &["skill", "install", &path.to_string_lossy(), "--yes"],
        );
        assert!(out.status.success(), "{}", text(&out.stderr));
    })
    .await;
    let answer = p
        .ask("/skills", |t| t.starts_with("1 skill installed:"))
        .await;
    assert_eq!(
        answer.text,
        "1 skill installed:\ncerts 1.0.0, from acme-tools. Network: none: its manifest declares no host. Its chores wait for SITE to be set, as root: aromba skill set certs SITE\nWhat each may write and run: the Trust page (/trust), or `aromba skill show NAME` on the server."
    );
    // The Trust page shows the manifest as the Warden renders it.
    let trust = p.ask("/trust", |t| t.contains("\nLadder:")).await;
    let launch = p.bot.open_app(CHAT, &trust, "Open the Trust page");
    let page = p.bot.ask_app(&launch, "trust").await;
    assert_eq!(page.status, 200, "{page:?}");
    let skills = page.body["sections"]
        .as_array()
        .expect("sections")
        .iter()
        .find(|s| s["heading"] == "Skills")
        .unwrap_or_else(|| panic!("no Skills section: {page:?}"));
    let lines: Vec<&str> = skills["lines"]
        .as_array()
        .expect("lines")
        .iter()
        .filter_map(|l| l.as_str())
        .collect();
    assert_eq!(lines[0], "certs 1.0.0, from the publisher acme-tools");
    assert!(lines.contains(&"It will be able to write:"), "{lines:?}");
    assert!(
        lines.contains(&"  certs-check (green, manual) — A skill chore of the tests"),
        "{lines:?}"
    );
    assert!(
        lines.ends_with(&[
            "Network now: none: its manifest declares no host",
            "Its setting SITE: not set (aromba skill set certs SITE)"
        ]),
        "{lines:?}"
    );
}

/// The assistant lists the skills' tools and runs one: the Warden runs it
/// caged, and what reaches the model is redacted (a password the tool
/// printed never does).
#[sqlx::test(migrations = false)]
async fn the_assistant_runs_a_skills_tool_through_the_warden_and_gets_it_redacted(db: PgPool) {
    use aromba_testkit::model_fake::{Canned, Script, call, say, with_model_setup};
    let touched = Touched::new("skill-ai");
    let dir = touched.0.clone();
    let script: Script = std::sync::Arc::new(|_, request, _| {
        let tools: Vec<String> = request["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["role"] == "tool")
            .filter_map(|m| m["content"].as_str().map(str::to_string))
            .collect();
        match tools.as_slice() {
            [] => Canned::ok(call("skill_tools", json!({}))),
            [listed] if listed.contains("tool \"certs-expiry\": When each certificate expires") => {
                Canned::ok(call(
                    "skill_tool",
                    json!({"skill": "certs", "tool": "certs-expiry"}),
                ))
            }
            [_, ran]
                if ran.contains("example.org: 12 days left") && !ran.contains("hunter2-secret") =>
            {
                Canned::ok(say("Your certificate has 12 days left."))
            }
            other => Canned::ok(say(&format!("UNEXPECTED {}", other.len()))),
        }
    });
    let (p, _model) = with_model_setup(db, "skill-ai", Setup::default(), script, move |w| {
        let acme = Publisher::new("acme-tools");
        acme.trust_at(&w.layout().config_dir);
        let mut m = manifest("certs", "1.0.0", "acme-tools", &dir, &[]);
        m["chores"] = json!([]);
        m["tools"] = json!([{
            "name": "certs-expiry",
            "description": "When each certificate expires",
            "file": "tools/certs-expiry.sh",
            "sha256": "",
        }]);
        let tool = "#!/bin/sh\necho 'example.org: 12 days left'\necho 'password=hunter2-secret'\n";
        let path = w.root.join("certs.skill");
        std::fs::write(&path, acme.bundle(m, &[("tools/certs-expiry.sh", tool)])).unwrap();
        let out = w.aromba_as(
            "root",
            &["skill", "install", &path.to_string_lossy(), "--yes"],
        );
        assert!(out.status.success(), "{}", text(&out.stderr));
    })
    .await;
    let answer = p
        .ask("when does my certificate expire?", |t| {
            t.contains("tokens in")
        })
        .await;
    assert!(
        answer.text.contains("Your certificate has 12 days left."),
        "{}",
        answer.text
    );
    let journal = p.warden.journal();
    assert!(
        journal
            .lines()
            .any(|l| l.contains("\"skill-tool\"") && l.contains("\"allowed\"")),
        "{journal}"
    );
    assert!(!journal.contains("hunter2-secret"));
}

#[test]
fn aromba_skill_install_takes_a_url_and_the_warden_verifies_what_came() {
    let w = TestWarden::start_installed("skill-url", account("aromba"), Some(8), |_| {});
    let touched = Touched::new("skill-url");
    let path = certs_bundle(&w, &touched, json!([]));
    let served = tempdir_with(&w, &path);
    let served = aromba_testkit::release::serve(served);
    let url = format!("{}/certs-1.0.0.skill", served.url);
    let out = w.aromba_as("root", &["skill", "install", &url, "--yes"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("certs 1.0.0 is installed"),
        "{}",
        text(&out.stdout)
    );
    // Nothing of the download is left behind.
    assert!(
        !std::fs::read_dir("/var/tmp")
            .unwrap()
            .filter_map(|e| e.ok())
            .any(|e| std::fs::read_dir(e.path())
                .ok()
                .into_iter()
                .flatten()
                .filter_map(|f| f.ok())
                .any(|f| f.file_name() == "bundle.skill"))
    );
    // A URL with no such file, or not ending in a plain name.
    for (url, want) in [
        (format!("{}/missing.skill", served.url), "answered 404"),
        (format!("{}/a b.skill", served.url), "plain file name"),
        (format!("{}/", served.url), "plain file name"),
    ] {
        let out = w.aromba_as("root", &["skill", "install", &url, "--yes"]);
        assert!(!out.status.success(), "{url}");
        assert!(
            text(&out.stderr).contains(want),
            "{url}: {}",
            text(&out.stderr)
        );
    }
    // A bundle changed on the way does not verify at the Warden.
    let bytes = std::fs::read(&path).unwrap();
    let tampered = String::from_utf8(bytes)
        .unwrap()
        .replace("exit 0", "exit 1");
    std::fs::write(w.root.join("served/evil.skill"), tampered).unwrap();
    let out = w.aromba_as(
        "root",
        &[
            "skill",
            "install",
            &format!("{}/evil.skill", served.url),
            "--yes",
        ],
    );
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("its SHA-256 differs"),
        "{}",
        text(&out.stderr)
    );
}

/// A folder under the Warden's root holding a copy of the bundle at `path`.
fn tempdir_with(w: &TestWarden, path: &str) -> PathBuf {
    let dir = w.root.join("served");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(path, dir.join("certs-1.0.0.skill")).unwrap();
    dir
}
