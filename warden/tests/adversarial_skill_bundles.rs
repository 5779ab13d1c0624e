//! Hostile skill bundles against a real Warden: unsigned, signed by a key
//! root does not trust, changed after signing (the manifest or a file), a
//! file added or left out, chores asking for more than their manifest, a
//! chore taking another's name, a publisher key others could write, and an
//! installed bundle changed on disk. Each is refused with its sentence and
//! leaves nothing installed.

use aromba_testkit::skills::{Publisher, bundle_file, bundle_of, chore, manifest};
use aromba_testkit::warden::{Warden, owner_chore, refused};
use aromba_warden_proto::{Request, Response};
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;

fn check(w: &Warden, path: &str) -> Response {
    w.control(&Request::SkillCheck { path: path.into() })
}

fn install(w: &Warden, path: &str) -> Response {
    let Response::SkillShown { sha256, .. } = check(w, path) else {
        panic!("not shown: {:?}", check(w, path));
    };
    w.control(&Request::SkillInstall {
        path: path.into(),
        sha256,
        pin: None,
    })
}

fn nothing_installed(w: &Warden) {
    let records: Vec<String> = std::fs::read_dir(&w.layout().state_dir)
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().into_string().ok())
        .filter(|n| n.starts_with("skill-"))
        .collect();
    assert!(records.is_empty(), "{records:?}");
}

/// The chore file and script of a green chore `name` touching the test's
/// directory with `extra` header lines.
fn script(w: &Warden, name: &str, extra: &str) -> String {
    chore(name, "green", &w.touched, extra, "exit 0")
}

/// Refused at check and at install, with `want` in the reason, and
/// nothing installed.
fn refused_with(w: &Warden, bytes: &[u8], want: &str) {
    let path = bundle_file(w, "hostile", bytes);
    let why = refused(check(w, &path));
    assert!(why.contains(want), "{want:?} not in {why:?}");
    let r = w.control(&Request::SkillInstall {
        path,
        sha256: aromba_testkit::skills::sha256_hex(bytes),
        pin: None,
    });
    let why = refused(r);
    assert!(why.contains(want), "{want:?} not in {why:?}");
    nothing_installed(w);
}

#[test]
fn unsigned_untrusted_and_tampered_bundles_are_refused() {
    let w = Warden::start("skill-tamper", true, &[]);
    let acme = Publisher::new("acme-tools");
    acme.trust(&w);
    let stranger = Publisher::new("acme-tools");
    let s = script(&w, "tidy", "");
    let m = manifest("tidy", "1.0.0", "acme-tools", &w.touched, &["tidy"]);
    let good = acme.bundle(m.clone(), &[("chores/tidy.sh", &s)]);
    let parts: Value = serde_json::from_slice(&good).unwrap();
    let text = parts["manifest"].as_str().unwrap();
    let sig = parts["signature"].as_str().unwrap();
    // Unsigned, or a signature that is not one.
    refused_with(
        &w,
        &bundle_of(text, "", &[("chores/tidy.sh", &s)]),
        "does not verify",
    );
    // Signed by a key of the same name root never trusted.
    refused_with(
        &w,
        &stranger.bundle(m.clone(), &[("chores/tidy.sh", &s)]),
        "does not verify with the key of acme-tools",
    );
    // A publisher root does not trust at all.
    let nobody = Publisher::new("nobody-here");
    let mut m2 = m.clone();
    m2["publisher"] = json!("nobody-here");
    refused_with(
        &w,
        &nobody.bundle(m2, &[("chores/tidy.sh", &s)]),
        "not one this server trusts",
    );
    // The manifest widened after signing.
    let wider = text.replace(
        &format!("\"{}\"", w.touched.display()),
        &format!("\"{}\", \"/etc\"", w.touched.display()),
    );
    assert_ne!(wider, text);
    refused_with(
        &w,
        &bundle_of(&wider, sig, &[("chores/tidy.sh", &s)]),
        "does not verify",
    );
    // The chore changed after signing.
    let evil = s.replace("exit 0", "rm -rf /srv");
    refused_with(
        &w,
        &bundle_of(text, sig, &[("chores/tidy.sh", &evil)]),
        "its SHA-256 differs",
    );
    // A file the manifest does not name, or one it names left out.
    refused_with(
        &w,
        &bundle_of(
            text,
            sig,
            &[("chores/tidy.sh", &s), ("chores/extra.sh", &s)],
        ),
        "which its manifest does not name",
    );
    refused_with(&w, &bundle_of(text, sig, &[]), "lacks chores/tidy.sh");
    // Not a bundle, or one too large to read.
    refused_with(&w, b"#!/bin/sh\nrm -rf /\n", "not a skill bundle");
    refused_with(&w, &vec![b' '; (1 << 20) + 1], "over 1048576 bytes");
}

fn with_test_release_keys(o: &mut aromba_warden::server::ServeOptions) {
    o.release_keys = Some(vec![aromba_testkit::release::key_line(
        aromba_testkit::release::RELEASE_PUB,
    )]);
}

#[test]
fn only_the_release_key_signs_as_the_publisher_aromba() {
    let w = Warden::start_with("skill-aromba", true, &[], with_test_release_keys);
    let s = script(&w, "tidy", "");
    let mut m = manifest("tidy", "1.0.0", "aromba", &w.touched, &["tidy"]);
    // A key file named after it is not the release key, trusted or not.
    let fake = Publisher::new("aromba");
    fake.trust(&w);
    refused_with(
        &w,
        &fake.bundle(m.clone(), &[("chores/tidy.sh", &s)]),
        "does not verify with the key of aromba",
    );
    let release = Publisher::release();
    let path = bundle_file(
        &w,
        "tidy",
        &release.bundle(m.clone(), &[("chores/tidy.sh", &s)]),
    );
    assert!(matches!(install(&w, &path), Response::Noted { .. }));
    // A Warden built without release keys trusts no skill of aromba's.
    let bare = Warden::start("skill-aromba-bare", true, &[]);
    m["writes"] = json!([bare.touched]);
    let s = script(&bare, "tidy", "");
    refused_with(
        &bare,
        &release.bundle(m, &[("chores/tidy.sh", &s)]),
        "this build carries no release key, so it trusts no skill of the publisher aromba",
    );
}

#[test]
fn a_chore_asking_for_more_than_its_manifest_grants_is_refused_with_what() {
    let w = Warden::start("skill-beyond", true, &[]);
    let acme = Publisher::new("acme-tools");
    acme.trust(&w);
    let m = manifest("tidy", "1.0.0", "acme-tools", &w.touched, &["tidy"]);
    let sibling = format!("{}2", w.touched.display());
    for (extra, touches, want) in [
        (
            "".to_string(),
            Some(sibling.clone()),
            format!("asks to write {sibling}, which its manifest does not grant"),
        ),
        (
            "# reads: /etc/nginx\n".to_string(),
            None,
            "asks to read /etc/nginx, which its manifest does not grant".to_string(),
        ),
        (
            "# action: systemctl reload nginx\n".to_string(),
            None,
            "asks the Warden to run systemctl reload nginx, which its manifest does not list"
                .to_string(),
        ),
        (
            "# network: yes\n".to_string(),
            None,
            "asks for the network, and its manifest declares no host".to_string(),
        ),
    ] {
        let mut s = script(&w, "tidy", &extra);
        if let Some(t) = &touches {
            s = s.replace(
                &format!("# touches: {}\n", w.touched.display()),
                &format!("# touches: {t}\n"),
            );
        }
        refused_with(
            &w,
            &acme.bundle(m.clone(), &[("chores/tidy.sh", &s)]),
            &want,
        );
    }
}

#[test]
fn a_skill_chore_may_not_take_a_system_or_owner_chores_name() {
    let w = Warden::start(
        "skill-names",
        true,
        &[owner_chore("mine-tidy", "green", "", "exit 0")],
    );
    let acme = Publisher::new("acme-tools");
    acme.trust(&w);
    for (name, want) in [
        (
            "apt-clean",
            "its chore apt-clean has the name of a system chore",
        ),
        (
            "mine-tidy",
            "its chore mine-tidy has the name of one of your own chores",
        ),
    ] {
        let m = manifest("names", "1.0.0", "acme-tools", &w.touched, &[name]);
        let file = format!("chores/{name}.sh");
        refused_with(
            &w,
            &acme.bundle(m, &[(file.as_str(), &script(&w, name, ""))]),
            want,
        );
    }
}

#[test]
fn a_publisher_key_others_could_write_is_not_trusted() {
    let w = Warden::start("skill-keyperm", true, &[]);
    let acme = Publisher::new("acme-tools");
    acme.trust(&w);
    let key = w.layout().config_dir.join("publishers/acme-tools.pub");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o666)).unwrap();
    let m = manifest("tidy", "1.0.0", "acme-tools", &w.touched, &["tidy"]);
    refused_with(
        &w,
        &acme.bundle(m, &[("chores/tidy.sh", &script(&w, "tidy", ""))]),
        "must be root's and writable by nobody else",
    );
}

#[test]
fn an_installed_bundle_changed_on_disk_no_longer_loads() {
    let w = Warden::start("skill-ondisk", true, &[]);
    let acme = Publisher::new("acme-tools");
    acme.trust(&w);
    let s = script(&w, "tidy", "");
    let m = manifest("tidy", "1.0.0", "acme-tools", &w.touched, &["tidy"]);
    let path = bundle_file(&w, "tidy", &acme.bundle(m, &[("chores/tidy.sh", &s)]));
    assert!(matches!(install(&w, &path), Response::Noted { .. }));
    let record = w.layout().state_dir.join("skill-tidy.bundle");
    let bytes = std::fs::read_to_string(&record).unwrap();
    std::fs::write(&record, bytes.replace("exit 0", "echo changed")).unwrap();
    let Response::Chores { chores } = w.control(&Request::Chores) else {
        panic!()
    };
    assert!(!chores.iter().any(|c| c.name == "tidy"));
    let r = w.control(&Request::ChoreRun {
        name: "tidy".into(),
        dry_run: true,
    });
    assert!(!matches!(r, Response::Receipt { .. }), "{r:?}");
    let Response::Skills {
        skills,
        refused: not_loaded,
    } = w.control(&Request::Skills)
    else {
        panic!()
    };
    assert!(skills.is_empty());
    assert!(
        not_loaded[0].contains("the installed skill tidy no longer verifies"),
        "{not_loaded:?}"
    );
    // A state record changed behind the Warden's back is an integrity
    // mismatch: the Warden changes nothing on top of it, removal included.
    let why = refused(w.control(&Request::SkillRemove {
        name: "tidy".into(),
    }));
    assert!(why.contains("do not match the baseline"), "{why}");
}
