//! Skills installed from the chat, through a real Warden: the Worker
//! downloads a bundle from the catalogue into its own folder and proposes
//! it; the Warden shows the whole manifest in its own words and installs
//! exactly that bundle on the person's approval in the Mini App, with the
//! PIN sealed there when it asks for hosts not allowed yet. An update that
//! asks for nothing more applies by itself; one that asks for more is
//! proposed as a new install with the difference marked.

use aromba_testkit::skills::{Publisher, chore, manifest};
use aromba_testkit::telegram::PERSON;
use aromba_testkit::warden::{Warden, refused};
use aromba_warden_proto::{Request, Response};
use serde_json::{Value, json};

const PIN: &str = "4729135";

/// Paired with the relay and the test person's Telegram account, with the
/// PIN set and the publisher `acme-tools` trusted.
fn bound(name: &str) -> (Warden, Publisher) {
    let w = Warden::start(&format!("skill-chat-{name}"), true, &[]);
    assert!(matches!(
        w.pin_telegram_account(PERSON),
        Response::TelegramAccount { .. }
    ));
    assert!(matches!(
        w.control(&Request::SetPin { pin: PIN.into() }),
        Response::Noted { .. }
    ));
    let acme = Publisher::new("acme-tools");
    acme.trust(&w);
    (w, acme)
}

/// Skill `certs` at `version`, one green chore writing into the test's
/// touched directory; `more` edits its manifest.
fn certs(w: &Warden, acme: &Publisher, version: &str, more: impl FnOnce(&mut Value)) -> Vec<u8> {
    let mut m = manifest("certs", version, "acme-tools", &w.touched, &["certs-check"]);
    more(&mut m);
    let script = chore(
        "certs-check",
        "green",
        &w.touched,
        "",
        &format!(
            "[ \"$1\" = --dry-run ] && exit 0\necho {version} > {}/done",
            w.touched.display()
        ),
    );
    acme.bundle(m, &[("chores/certs-check.sh", &script)])
}

/// Leaves `bytes` where the Worker leaves a download: `NAME.skill` in its
/// `skill-downloads` folder.
fn downloaded(w: &Warden, name: &str, bytes: &[u8]) {
    let dir = w.layout().worker_home.join("skill-downloads");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{name}.skill")), bytes).unwrap();
}

fn installed(w: &Warden) -> Vec<(String, String)> {
    let Response::Skills { skills, .. } = w.control(&Request::Skills) else {
        panic!("no list")
    };
    skills.into_iter().map(|s| (s.name, s.version)).collect()
}

fn propose(w: &Warden, name: &str) -> (String, String) {
    w.propose_in_app(&Request::ProposeSkill { name: name.into() })
}

#[test]
fn a_downloaded_skill_is_proposed_with_its_whole_manifest_and_installed_on_the_persons_approval_in_the_app()
 {
    let (w, acme) = bound("install");
    downloaded(&w, "certs", &certs(&w, &acme, "1.0.0", |_| {}));
    let (action, param) = propose(&w, "certs");
    let text = w.text_of(&action);
    assert!(
        text.starts_with("Install the skill \"certs\" 1.0.0?\nWhat it is and what it may do:\ncerts 1.0.0, from the publisher acme-tools\n"),
        "the verdict first, then the manifest as a root terminal shows it: {text}"
    );
    assert!(text.contains("It will be able to write:"), "{text}");
    assert!(text.contains("certs-check (green"), "{text}");
    assert!(
        text.contains("The Warden checked the publisher's signature"),
        "{text}"
    );
    assert!(!text.contains("PIN"), "no host, no PIN: {text}");
    assert!(installed(&w).is_empty(), "a proposal installs nothing");
    let r = w.ask(&w.in_app(PERSON, &param));
    assert!(matches!(r, Response::Noted { .. }), "{r:?}");
    assert_eq!(installed(&w), vec![("certs".into(), "1.0.0".into())]);
    assert_eq!(w.ladder(), 0, "the person's approval is no anomaly");
    let journal = w.journal();
    let line = journal
        .lines()
        .find(|l| l.contains("\"kind\":\"skill-install\""))
        .expect("the install is journaled");
    assert!(
        line.contains("\"origin\":\"approved in the app\"")
            && line.contains(&format!("\"action_id\":\"{action}\"")),
        "{line}"
    );
    // The app opened again a second later: answered already, nothing more.
    w.clock.advance(1);
    assert!(matches!(
        w.ask(&w.in_app(PERSON, &param)),
        Response::AlreadyAnswered { .. }
    ));
}

#[test]
fn a_skill_asking_for_hosts_not_allowed_yet_needs_the_pin_sealed_in_the_app() {
    let (w, acme) = bound("pin");
    downloaded(
        &w,
        "certs",
        &certs(&w, &acme, "1.0.0", |m| {
            m["hosts"] =
                json!([{"name": "acme.example.org", "port": 443, "why": "issues certificates"}]);
        }),
    );
    let (action, param) = propose(&w, "certs");
    let text = w.text_of(&action);
    assert!(
        text.contains("acme.example.org:443 — issues certificates"),
        "{text}"
    );
    assert!(
        text.ends_with(
            "Your PIN is needed too: it talks to hosts this server has not allowed yet."
        ),
        "{text}"
    );
    assert_eq!(
        param.split('_').count(),
        3,
        "the start parameter names the PIN's key: {param}"
    );
    let without = refused(w.ask(&w.in_app(PERSON, &param)));
    assert!(without.contains("no PIN came with it"), "{without}");
    assert!(installed(&w).is_empty());
    let (_, again) = propose(&w, "certs");
    let r = w.ask(&w.in_app_with_pin(PERSON, &again, PIN));
    assert!(matches!(r, Response::Noted { .. }), "{r:?}");
    assert_eq!(installed(&w), vec![("certs".into(), "1.0.0".into())]);
    assert!(!w.journal().contains(PIN), "the PIN is in no journal line");
}

#[test]
fn a_download_replaced_after_its_proposal_is_not_installed() {
    let (w, acme) = bound("swap");
    downloaded(&w, "certs", &certs(&w, &acme, "1.0.0", |_| {}));
    let (_, param) = propose(&w, "certs");
    // Signed by the same publisher, but not what the person was shown.
    downloaded(
        &w,
        "certs",
        &certs(&w, &acme, "1.0.1", |m| {
            m["description"] = json!("Something else");
        }),
    );
    let why = refused(w.ask(&w.in_app(PERSON, &param)));
    assert!(why.contains("propose it again"), "{why}");
    assert!(installed(&w).is_empty());
    assert_eq!(w.ladder(), 0, "a download that moved on is no anomaly");
}

#[test]
fn an_update_asking_for_nothing_more_applies_by_itself_and_one_asking_for_more_is_proposed_with_the_difference()
 {
    let (w, acme) = bound("update");
    downloaded(&w, "certs", &certs(&w, &acme, "1.0.0", |_| {}));
    let (_, param) = propose(&w, "certs");
    assert!(matches!(
        w.ask(&w.in_app(PERSON, &param)),
        Response::Noted { .. }
    ));
    // 1.1.0 asks for exactly as much: applied by itself.
    downloaded(&w, "certs", &certs(&w, &acme, "1.1.0", |_| {}));
    let r = w.ask(&Request::SkillUpdate {
        name: "certs".into(),
    });
    assert!(matches!(r, Response::Noted { .. }), "{r:?}");
    assert_eq!(installed(&w), vec![("certs".into(), "1.1.0".into())]);
    assert!(
        w.journal()
            .contains("\"origin\":\"update asking nothing more\""),
        "the journal says where the install came from"
    );
    // 1.2.0 writes more and talks to a host: not applied, but proposed.
    let wider = certs(&w, &acme, "1.2.0", |m| {
        m["writes"] = json!([w.touched, "/var/tmp/aromba-skill-more"]);
        m["hosts"] =
            json!([{"name": "acme.example.org", "port": 443, "why": "issues certificates"}]);
    });
    downloaded(&w, "certs", &wider);
    let why = refused(w.ask(&Request::SkillUpdate {
        name: "certs".into(),
    }));
    assert!(
        why.starts_with(aromba_warden_proto::SKILL_WIDENS)
            && why.contains("write /var/tmp/aromba-skill-more")
            && why.contains("talk to acme.example.org:443"),
        "{why}"
    );
    assert_eq!(installed(&w), vec![("certs".into(), "1.1.0".into())]);
    let (action, param) = propose(&w, "certs");
    let text = w.text_of(&action);
    assert!(
        text.starts_with("Update the skill \"certs\" from 1.1.0 to 1.2.0?\nIt asks for more than 1.1.0 has, so it waits for you like a new install. New:\n  NEW: write /var/tmp/aromba-skill-more\n  NEW: talk to acme.example.org:443\n"),
        "{text}"
    );
    let r = w.ask(&w.in_app_with_pin(PERSON, &param, PIN));
    assert!(matches!(r, Response::Noted { .. }), "{r:?}");
    assert_eq!(installed(&w), vec![("certs".into(), "1.2.0".into())]);
    assert_eq!(w.ladder(), 0);
}

#[test]
fn a_skill_not_installed_is_never_installed_as_an_update() {
    let (w, acme) = bound("not-installed");
    downloaded(&w, "certs", &certs(&w, &acme, "1.0.0", |_| {}));
    let why = refused(w.ask(&Request::SkillUpdate {
        name: "certs".into(),
    }));
    assert!(why.contains("not installed here: propose it"), "{why}");
    assert!(installed(&w).is_empty());
}

#[test]
fn a_download_holding_another_skill_than_its_name_is_refused() {
    let (w, acme) = bound("misnamed");
    downloaded(&w, "nginx", &certs(&w, &acme, "1.0.0", |_| {}));
    let why = refused(w.ask(&Request::ProposeSkill {
        name: "nginx".into(),
    }));
    assert!(
        why.contains("the download for the skill nginx holds the skill certs"),
        "{why}"
    );
}
