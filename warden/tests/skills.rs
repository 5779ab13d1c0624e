//! Skills through a real Warden: a signed bundle shown, then installed
//! from the control socket; its chores listed and run in the cage within
//! the manifest; updates that ask for more shown with the difference and
//! needing the PIN for new hosts; removal leaving nothing behind.

use aromba_testkit::skills::{Publisher, bundle_file, chore, manifest};
use aromba_testkit::warden::{Warden, refused};
use aromba_warden_proto::{Request, Response};
use serde_json::{Value, json};

const PIN: &str = "4729135";

fn check(w: &Warden, path: &str) -> Response {
    w.control(&Request::SkillCheck { path: path.into() })
}

/// Shows the bundle at `path` and installs it with `pin`; the answer.
fn install(w: &Warden, path: &str, pin: Option<&str>) -> Response {
    let Response::SkillShown { sha256, .. } = check(w, path) else {
        panic!("not shown: {:?}", check(w, path));
    };
    w.control(&Request::SkillInstall {
        path: path.into(),
        sha256,
        pin: pin.map(|p| p.to_string().into()),
    })
}

fn chores(w: &Warden) -> Vec<(String, String)> {
    match w.control(&Request::Chores) {
        Response::Chores { chores } => chores.into_iter().map(|c| (c.name, c.origin)).collect(),
        other => panic!("{other:?}"),
    }
}

fn skill_records(w: &Warden) -> Vec<String> {
    std::fs::read_dir(&w.layout().state_dir)
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().into_string().ok())
        .filter(|n| n.starts_with("skill-"))
        .collect()
}

/// A skill `certs` of `publisher` with one green chore `certs-check`
/// writing `done` into the test's touched directory.
fn certs(w: &Warden, publisher: &Publisher, version: &str) -> (Value, Vec<(String, String)>) {
    let m = manifest(
        "certs",
        version,
        &publisher.name,
        &w.touched,
        &["certs-check"],
    );
    let script = chore(
        "certs-check",
        "green",
        &w.touched,
        "",
        &format!(
            "[ \"$1\" = --dry-run ] && echo would && exit 0\necho {version} > {}/done",
            w.touched.display()
        ),
    );
    (m, vec![("chores/certs-check.sh".into(), script)])
}

fn files(f: &[(String, String)]) -> Vec<(&str, &str)> {
    f.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect()
}

#[test]
fn a_signed_skill_is_shown_then_installed_and_its_chore_runs_within_its_manifest() {
    let w = Warden::start("skill-install", true, &[]);
    let acme = Publisher::new("acme-tools");
    acme.trust(&w);
    let (m, f) = certs(&w, &acme, "1.0.0");
    let path = bundle_file(&w, "certs", &acme.bundle(m, &files(&f)));
    let Response::SkillShown {
        name,
        version,
        text,
        installed,
        widening,
        needs_pin,
        ..
    } = check(&w, &path)
    else {
        panic!("not shown");
    };
    assert_eq!((name.as_str(), version.as_str()), ("certs", "1.0.0"));
    assert!(installed.is_none() && widening.is_empty() && !needs_pin);
    assert!(
        text.starts_with("certs 1.0.0, from the publisher acme-tools\n"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "It will be able to write:\n  {}\n",
            w.touched.display()
        )),
        "{text}"
    );
    assert!(text.contains("It has no network."), "{text}");
    assert!(
        text.contains("certs-check (green, manual) — A skill chore of the tests"),
        "{text}"
    );
    // Shown, nothing installed yet.
    assert!(skill_records(&w).is_empty());
    assert!(!chores(&w).iter().any(|(n, _)| n == "certs-check"));
    assert!(matches!(install(&w, &path, None), Response::Noted { .. }));
    assert!(
        chores(&w).contains(&("certs-check".into(), "skill certs".into())),
        "{:?}",
        chores(&w)
    );
    w.dry_run_shown("certs-check");
    let r = w.control(&Request::ChoreRun {
        name: "certs-check".into(),
        dry_run: false,
    });
    let Response::Receipt { ok, receipt, .. } = r else {
        panic!("{r:?}")
    };
    assert!(ok, "{receipt}");
    assert_eq!(
        std::fs::read_to_string(w.touched.join("done")).unwrap(),
        "1.0.0\n"
    );
    let journal = w.journal();
    let line = journal
        .lines()
        .find(|l| l.contains("\"skill-install\""))
        .expect("the install journaled");
    assert!(
        line.contains("\"skill\":\"certs\"") && line.contains("\"publisher\":\"acme-tools\""),
        "{line}"
    );
    // The list, from either socket.
    for r in [w.control(&Request::Skills), w.ask(&Request::Skills)] {
        let Response::Skills { skills, refused } = r else {
            panic!("{r:?}")
        };
        assert!(refused.is_empty());
        assert_eq!(skills.len(), 1);
        assert_eq!(skills[0].network, "none: its manifest declares no host");
    }
}

#[test]
fn a_skill_chore_writing_outside_its_touches_is_stopped_by_the_cage() {
    let w = Warden::start("skill-cage", true, &[]);
    let acme = Publisher::new("acme-tools");
    acme.trust(&w);
    let mut m = manifest("escape", "1.0.0", "acme-tools", &w.touched, &["escape"]);
    m["writes"] = json!([w.touched]);
    let outside = w.root.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let script = chore(
        "escape",
        "green",
        &w.touched,
        "",
        &format!(
            "[ \"$1\" = --dry-run ] && exit 0\necho x > {}/x",
            outside.display()
        ),
    );
    let path = bundle_file(
        &w,
        "escape",
        &acme.bundle(m, &[("chores/escape.sh", &script)]),
    );
    assert!(matches!(install(&w, &path, None), Response::Noted { .. }));
    w.dry_run_shown("escape");
    let r = w.control(&Request::ChoreRun {
        name: "escape".into(),
        dry_run: false,
    });
    let Response::Receipt { ok, .. } = r else {
        panic!("{r:?}")
    };
    assert!(!ok);
    assert!(!outside.join("x").exists());
}

#[test]
fn a_skill_chore_with_network_sees_only_its_own_loopback_and_needs_the_pin_first() {
    let w = Warden::start("skill-nonet", true, &[]);
    let acme = Publisher::new("acme-tools");
    acme.trust(&w);
    let mut m = manifest("netty", "1.0.0", "acme-tools", &w.touched, &["netty"]);
    m["hosts"] = json!([{"name": "example.org", "port": 443, "why": "the tests' host"}]);
    // Only the namespace's own loopback is listed in a namespace of its own.
    let script = chore(
        "netty",
        "green",
        &w.touched,
        "# network: yes\n",
        &format!(
            "[ \"$1\" = --dry-run ] && exit 0\ngrep -c : /proc/net/dev > {}/interfaces",
            w.touched.display()
        ),
    );
    let path = bundle_file(
        &w,
        "netty",
        &acme.bundle(m, &[("chores/netty.sh", &script)]),
    );
    let Response::SkillShown {
        needs_pin, text, ..
    } = check(&w, &path)
    else {
        panic!()
    };
    assert!(needs_pin);
    assert!(
        text.contains(
            "It talks to (only these, each allowed by your PIN):\n  example.org:443 — the tests' host"
        ),
        "{text}"
    );
    // No PIN set: refused, nothing installed.
    assert!(refused(install(&w, &path, None)).contains("no PIN is set"));
    assert!(skill_records(&w).is_empty());
    assert!(matches!(
        w.control(&Request::SetPin { pin: PIN.into() }),
        Response::Noted { .. }
    ));
    assert!(refused(install(&w, &path, None)).contains("the PIN is needed"));
    assert!(!refused(install(&w, &path, Some("1111222"))).is_empty());
    assert!(skill_records(&w).is_empty());
    assert!(matches!(
        install(&w, &path, Some(PIN)),
        Response::Noted { .. }
    ));
    w.dry_run_shown("netty");
    let r = w.control(&Request::ChoreRun {
        name: "netty".into(),
        dry_run: false,
    });
    assert!(matches!(r, Response::Receipt { ok: true, .. }), "{r:?}");
    assert_eq!(
        std::fs::read_to_string(w.touched.join("interfaces")).unwrap(),
        "1\n",
        "the chore saw more than its own loopback"
    );
    let Response::Skills { skills, .. } = w.control(&Request::Skills) else {
        panic!()
    };
    assert_eq!(
        skills[0].network,
        "only example.org:443, through the Warden's proxy, each connection journaled"
    );
}

#[test]
fn an_update_asking_for_more_is_shown_with_the_difference_and_a_narrower_one_needs_nothing() {
    let w = Warden::start("skill-update", true, &[]);
    let acme = Publisher::new("acme-tools");
    acme.trust(&w);
    assert!(matches!(
        w.control(&Request::SetPin { pin: PIN.into() }),
        Response::Noted { .. }
    ));
    let (m1, f1) = certs(&w, &acme, "1.0.0");
    let p1 = bundle_file(&w, "v1", &acme.bundle(m1, &files(&f1)));
    assert!(matches!(install(&w, &p1, None), Response::Noted { .. }));
    // 1.1.0 writes more, runs a root command and talks to a host.
    let (mut m2, f2) = certs(&w, &acme, "1.1.0");
    m2["writes"] = json!([w.touched, "/var/tmp/aromba-skill-more"]);
    m2["root_commands"] =
        json!([{"command": ["systemctl", "reload", "nginx"], "why": "serve the certificate"}]);
    m2["hosts"] = json!([{"name": "acme.example.org", "port": 443, "why": "issues certificates"}]);
    let p2 = bundle_file(&w, "v2", &acme.bundle(m2.clone(), &files(&f2)));
    let Response::SkillShown {
        installed,
        widening,
        needs_pin,
        ..
    } = check(&w, &p2)
    else {
        panic!()
    };
    assert_eq!(installed.as_deref(), Some("1.0.0"));
    assert_eq!(
        widening,
        vec![
            "write /var/tmp/aromba-skill-more",
            "run systemctl reload nginx as root",
            "talk to acme.example.org:443"
        ]
    );
    assert!(needs_pin);
    assert!(refused(install(&w, &p2, None)).contains("the PIN is needed"));
    assert!(matches!(
        install(&w, &p2, Some(PIN)),
        Response::Noted { .. }
    ));
    // 1.2.0 drops the host and the extra path: nothing more, no PIN.
    let (m3, f3) = certs(&w, &acme, "1.2.0");
    let p3 = bundle_file(&w, "v3", &acme.bundle(m3, &files(&f3)));
    let Response::SkillShown {
        widening,
        needs_pin,
        ..
    } = check(&w, &p3)
    else {
        panic!()
    };
    assert!(widening.is_empty() && !needs_pin);
    assert!(matches!(install(&w, &p3, None), Response::Noted { .. }));
    // The host is no longer granted: 1.1.0's manifest again needs the PIN.
    m2["version"] = json!("1.3.0");
    let p4 = bundle_file(&w, "v4", &acme.bundle(m2, &files(&f2)));
    let Response::SkillShown { needs_pin, .. } = check(&w, &p4) else {
        panic!()
    };
    assert!(needs_pin);
    // Not newer: refused.
    let (m0, f0) = certs(&w, &acme, "1.1.9");
    let p0 = bundle_file(&w, "v0", &acme.bundle(m0, &files(&f0)));
    assert!(refused(check(&w, &p0)).contains("not newer"));
    assert!(refused(check(&w, &p3)).contains("installed already"));
}

#[test]
fn a_bundle_changed_after_it_was_shown_is_not_installed() {
    let w = Warden::start("skill-swap", true, &[]);
    let acme = Publisher::new("acme-tools");
    acme.trust(&w);
    let (m, f) = certs(&w, &acme, "1.0.0");
    let path = bundle_file(&w, "certs", &acme.bundle(m, &files(&f)));
    let Response::SkillShown { sha256, .. } = check(&w, &path) else {
        panic!()
    };
    let (m2, f2) = certs(&w, &acme, "2.0.0");
    std::fs::write(&path, acme.bundle(m2, &files(&f2))).unwrap();
    let r = w.control(&Request::SkillInstall {
        path: path.clone(),
        sha256,
        pin: None,
    });
    assert!(refused(r).contains("changed since it was shown"));
    assert!(skill_records(&w).is_empty());
}

#[test]
fn a_removed_skill_leaves_nothing_behind() {
    let w = Warden::start("skill-remove", true, &[]);
    let acme = Publisher::new("acme-tools");
    acme.trust(&w);
    assert!(matches!(
        w.control(&Request::SetPin { pin: PIN.into() }),
        Response::Noted { .. }
    ));
    let (mut m, f) = certs(&w, &acme, "1.0.0");
    m["hosts"] = json!([{"name": "acme.example.org", "port": 443, "why": "issues certificates"}]);
    let path = bundle_file(&w, "certs", &acme.bundle(m, &files(&f)));
    assert!(matches!(
        install(&w, &path, Some(PIN)),
        Response::Noted { .. }
    ));
    w.dry_run_shown("certs-check");
    let r = w.control(&Request::ChoreRun {
        name: "certs-check".into(),
        dry_run: false,
    });
    assert!(matches!(r, Response::Receipt { ok: true, .. }), "{r:?}");
    let runs = w.layout().state_dir.join("runs");
    let of_chore = || -> Vec<String> {
        std::fs::read_dir(&runs)
            .unwrap()
            .filter_map(|e| e.unwrap().file_name().into_string().ok())
            .filter(|n| n.starts_with("certs-check."))
            .collect()
    };
    assert!(!of_chore().is_empty());
    assert_eq!(skill_records(&w).len(), 2);
    let before = w.status().integrity;
    assert!(matches!(
        w.control(&Request::SkillRemove {
            name: "certs".into()
        }),
        Response::Noted { .. }
    ));
    assert!(skill_records(&w).is_empty());
    assert!(of_chore().is_empty(), "{:?}", of_chore());
    assert!(!chores(&w).iter().any(|(n, _)| n == "certs-check"));
    let Response::Skills { skills, refused } = w.control(&Request::Skills) else {
        panic!()
    };
    assert!(skills.is_empty() && refused.is_empty());
    assert!(w.journal().contains("\"skill-remove\""));
    // The Warden's own changes keep the integrity baseline whole.
    assert_eq!(w.status().integrity, before);
    assert!(
        refused_text(w.control(&Request::SkillRemove {
            name: "certs".into()
        }))
        .contains("no skill named certs")
    );
}

fn refused_text(r: Response) -> String {
    refused(r)
}

#[test]
fn the_skill_requests_that_change_anything_are_root_terminal_only() {
    let w = Warden::start("skill-socket", true, &[]);
    for r in [
        Request::SkillCheck {
            path: "/tmp/x.skill".into(),
        },
        Request::SkillInstall {
            path: "/tmp/x.skill".into(),
            sha256: "00".repeat(32),
            pin: None,
        },
        Request::SkillRemove { name: "x".into() },
    ] {
        match w.ask(&r) {
            Response::Error { message } => {
                assert!(
                    message.contains("not served on the worker socket"),
                    "{message}"
                )
            }
            other => panic!("{other:?}"),
        }
    }
}
