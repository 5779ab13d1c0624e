//! The skills feature attacked, through a real Warden: as a hostile
//! publisher (bundles that try to say one thing and do another, names and
//! hosts that try to slip past the manifest, the PIN and the dry run), as
//! a tamperer (the bundle on its way, the publishers' keys, the installed
//! records on disk), as a hostile Worker (the unprivileged socket), and as
//! a skill chore in the cage. Each test asserts the safe behaviour.

use aromba_testkit::skills::{Publisher, bundle_file, chore, manifest};
use aromba_testkit::warden::{Warden, owner_chore, refused, wipe_chore};
use aromba_warden_proto::{
    MAX_RESPONSE, Request, Response, decode_response, encode_request, read_frame, write_frame,
};
use serde_json::{Value, json};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

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
        pin: pin.map(Into::into),
    })
}

fn installed(w: &Warden, path: &str, pin: Option<&str>) {
    let r = install(w, path, pin);
    assert!(matches!(r, Response::Noted { .. }), "{r:?}");
}

/// (needs_pin, widening, text) of a bundle shown.
fn shown(r: Response) -> (bool, Vec<String>, String) {
    match r {
        Response::SkillShown {
            needs_pin,
            widening,
            text,
            ..
        } => (needs_pin, widening, text),
        other => panic!("not shown: {other:?}"),
    }
}

fn pair(a: &str, b: &str) -> (String, String) {
    (a.to_string(), b.to_string())
}

fn set_pin(w: &Warden) {
    assert!(matches!(
        w.control(&Request::SetPin { pin: PIN.into() }),
        Response::Noted { .. }
    ));
}

fn real_run(w: &Warden, name: &str) -> Response {
    w.control(&Request::ChoreRun {
        name: name.into(),
        dry_run: false,
    })
}

fn chore_names(w: &Warden) -> Vec<(String, String)> {
    match w.control(&Request::Chores) {
        Response::Chores { chores } => chores.into_iter().map(|c| (c.name, c.origin)).collect(),
        other => panic!("{other:?}"),
    }
}

fn skills(w: &Warden) -> (Vec<(String, String)>, Vec<String>) {
    match w.control(&Request::Skills) {
        Response::Skills { skills, refused } => (
            skills.into_iter().map(|s| (s.name, s.version)).collect(),
            refused,
        ),
        other => panic!("{other:?}"),
    }
}

/// A green chore `chore_name` writing into the test's touched directory;
/// its dry run prints `would` and changes nothing.
fn green(w: &Warden, chore_name: &str, extra: &str, body: &str) -> String {
    chore(
        chore_name,
        "green",
        &w.touched,
        extra,
        &format!("[ \"$1\" = --dry-run ] && echo would && exit 0\n{body}"),
    )
}

/// A bundle of skill `name` by `p` with one chore, its manifest edited by
/// `edit` before it is signed.
fn bundle_with(
    w: &Warden,
    p: &Publisher,
    name: &str,
    version: &str,
    chore_name: &str,
    script: &str,
    edit: impl FnOnce(&mut Value),
) -> Vec<u8> {
    let mut m = manifest(name, version, &p.name, &w.touched, &[chore_name]);
    edit(&mut m);
    let file = format!("chores/{chore_name}.sh");
    p.bundle(m, &[(file.as_str(), script)])
}

/// A skill whose one green chore writes `tag` into `TOUCHED/file`.
fn writer(
    w: &Warden,
    p: &Publisher,
    name: &str,
    version: &str,
    chore_name: &str,
    tag: &str,
) -> Vec<u8> {
    let script = green(
        w,
        chore_name,
        "",
        &format!("echo {tag} > {}/{chore_name}", w.touched.display()),
    );
    bundle_with(w, p, name, version, chore_name, &script, |_| {})
}

fn runs_of(w: &Warden, chore_name: &str) -> Vec<String> {
    let runs = w.layout().state_dir.join("runs");
    std::fs::read_dir(&runs)
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.starts_with(&format!("{chore_name}.")))
                .collect()
        })
        .unwrap_or_default()
}

/// On a socket by its path: what a second terminal would do while the
/// test's own waits.
fn control_at(socket: &Path, r: &Request) -> Response {
    let mut s = UnixStream::connect(socket).unwrap();
    write_frame(&mut s, &encode_request(r), 1 << 16).unwrap();
    decode_response(&read_frame(&mut s, MAX_RESPONSE).unwrap()).unwrap()
}

/// `f`'s answer, or `None` when it takes longer than `limit`.
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit).ok()
}

fn mkfifo(path: &Path) {
    assert_cmd::Command::new("mkfifo")
        .arg(path)
        .assert()
        .success();
}

/// Opens the FIFO for writing and closes it when dropped: a reader the
/// Warden left blocked in open(2) gets end-of-file and lets go, so the
/// Warden can be stopped.
struct Unblock(PathBuf);

impl Drop for Unblock {
    fn drop(&mut self) {
        for _ in 0..20 {
            // O_NONBLOCK: ENXIO at once when nobody reads.
            if std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(0o4000)
                .open(&self.0)
                .is_ok()
            {
                std::thread::sleep(Duration::from_millis(200));
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

// ---------------------------------------------------------------- the path

#[test]
fn a_bundle_path_that_is_a_fifo_does_not_hang_the_warden() {
    let w = Warden::start("adv-skill-fifo", true, &[]);
    let fifo = w.root.join("bundle.skill");
    mkfifo(&fifo);
    let link = w.root.join("link.skill");
    std::os::unix::fs::symlink(&fifo, &link).unwrap();
    let _unblock = Unblock(fifo.clone());
    for path in [fifo, link] {
        let socket = w.layout().control_socket();
        let p = path.to_string_lossy().into_owned();
        let answer = within(Duration::from_secs(10), move || {
            control_at(&socket, &Request::SkillCheck { path: p })
        });
        let Some(r) = answer else {
            panic!(
                "SkillCheck of {} (a FIFO nobody writes) got no answer in 10 s: the Warden is blocked opening it, holding one of its running slots",
                path.display()
            );
        };
        assert!(refused(r).contains("not a file"));
    }
}

#[test]
fn a_skill_install_from_a_fifo_does_not_block_every_other_change() {
    let quick = owner_chore(
        "quick",
        "green",
        "",
        "[ \"$1\" = --dry-run ] && exit 0\necho ran > TOUCHED/quick",
    );
    let w = Warden::start("adv-skill-fifo-lock", true, &[quick]);
    let fifo = w.root.join("bundle.skill");
    mkfifo(&fifo);
    let _unblock = Unblock(fifo.clone());
    let socket = w.layout().control_socket();
    let p = fifo.to_string_lossy().into_owned();
    // Root's terminal runs `aromba skill install` on the FIFO…
    std::thread::spawn(move || {
        let _ = control_at(
            &socket,
            &Request::SkillInstall {
                path: p,
                sha256: "00".repeat(32),
                pin: None,
            },
        );
    });
    std::thread::sleep(Duration::from_secs(1));
    // …and the owner's chore must still run for real.
    w.dry_run_shown("quick");
    let socket = w.layout().control_socket();
    let r = within(Duration::from_secs(30), move || {
        control_at(
            &socket,
            &Request::ChoreRun {
                name: "quick".into(),
                dry_run: false,
            },
        )
    })
    .expect("a real run answers");
    assert!(
        matches!(r, Response::Receipt { ok: true, .. }),
        "a hung skill install holds the one-change lock: {r:?}"
    );
}

#[test]
fn bundle_paths_that_are_devices_directories_relative_or_huge_are_refused_at_once() {
    let w = Warden::start("adv-skill-paths", true, &[]);
    let link = w.root.join("zero.skill");
    std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
    let sparse = w.root.join("sparse.skill");
    std::fs::File::create(&sparse)
        .unwrap()
        .set_len(8 << 30)
        .unwrap();
    let big = w.root.join("big.skill");
    std::fs::write(&big, vec![b' '; (1 << 20) + 1]).unwrap();
    for (path, why) in [
        ("/dev/zero".to_string(), "not a file"),
        (link.to_string_lossy().into_owned(), "not a file"),
        (w.root.to_string_lossy().into_owned(), "not a file"),
        ("relative.skill".into(), "not an absolute path"),
        (sparse.to_string_lossy().into_owned(), "over"),
        (big.to_string_lossy().into_owned(), "over"),
        ("/nonexistent/x.skill".into(), "cannot open"),
    ] {
        let reason = refused(check(&w, &path));
        assert!(reason.contains(why), "{path}: {reason}");
    }
}

#[test]
fn deeply_nested_json_is_refused_quickly_without_harming_the_warden() {
    let w = Warden::start("adv-skill-nest", true, &[]);
    let acme = Publisher::new("acme-tools");
    acme.trust(&w);
    // Nesting at the top, inside `files`, and inside the manifest text.
    let deep = format!("{}{}", "[".repeat(400_000), "]".repeat(400_000));
    let good: Value =
        serde_json::from_slice(&writer(&w, &acme, "nest", "1.0.0", "nest", "x")).unwrap();
    let mut in_files = good.clone();
    in_files["files"]["chores/nest.sh"] = Value::Null;
    let in_files = serde_json::to_string(&in_files)
        .unwrap()
        .replace("null", &"[".repeat(100_000));
    let in_manifest = serde_json::to_string(&json!({
        "format": "aromba-skill-bundle-1",
        "manifest": format!("{{\"publisher\":{}", "[".repeat(200_000)),
        "signature": good["signature"],
        "files": {},
    }))
    .unwrap();
    for (i, text) in [deep, in_files, in_manifest].into_iter().enumerate() {
        let path = bundle_file(&w, &format!("deep{i}"), text.as_bytes());
        let r = check(&w, &path);
        assert!(matches!(r, Response::Refused { .. }), "{i}: {r:?}");
    }
    // Still serving.
    assert!(matches!(w.control(&Request::Status), Response::Status(_)));
}

// ---------------------------------------------------------------- the JSON

/// `(manifest text, signature, files)` of a bundle.
fn parts(bundle: &[u8]) -> (String, String, serde_json::Map<String, Value>) {
    let v: Value = serde_json::from_slice(bundle).unwrap();
    (
        v["manifest"].as_str().unwrap().to_string(),
        v["signature"].as_str().unwrap().to_string(),
        v["files"].as_object().unwrap().clone(),
    )
}

fn js(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

#[test]
fn duplicate_keys_in_a_bundle_never_install_what_was_not_signed() {
    let w = Warden::start("adv-skill-dupes", true, &[]);
    let acme = Publisher::new("acme-tools");
    acme.trust(&w);
    let good = writer(&w, &acme, "dupes", "1.0.0", "dupes", "signed");
    let (text, sig, files) = parts(&good);
    let script = files["chores/dupes.sh"].as_str().unwrap().to_string();
    let wider = text.replace(
        &js(&w.touched.to_string_lossy()),
        &js("/var/tmp/adv-widened"),
    );
    assert_ne!(wider, text);
    let files_json = serde_json::to_string(&files).unwrap();
    let raw = |manifest_pairs: &str, files_pairs: &str| {
        format!(
            "{{\"format\":\"aromba-skill-bundle-1\",{manifest_pairs},\"signature\":{},{files_pairs}}}",
            js(&sig)
        )
    };
    // The tampered manifest last: it is the one read, and its signature fails.
    let last_tampered = raw(
        &format!("\"manifest\":{},\"manifest\":{}", js(&text), js(&wider)),
        &format!("\"files\":{files_json}"),
    );
    let p = bundle_file(&w, "last-tampered", last_tampered.as_bytes());
    assert!(refused(check(&w, &p)).contains("signature does not verify"));
    // The tampered manifest first: the signed one is read, and shown.
    let first_tampered = raw(
        &format!("\"manifest\":{},\"manifest\":{}", js(&wider), js(&text)),
        &format!("\"files\":{files_json}"),
    );
    let p = bundle_file(&w, "first-tampered", first_tampered.as_bytes());
    let (_, _, shown_text) = shown(check(&w, &p));
    assert!(!shown_text.contains("adv-widened"), "{shown_text}");
    // Two `files` objects and a file named twice: the hashed one is the
    // one kept, verified and run.
    let evil = script.replace("echo signed", "echo unsigned");
    let dup_files = raw(
        &format!("\"manifest\":{}", js(&text)),
        &format!(
            "\"files\":{{\"chores/dupes.sh\":{}}},\"files\":{{\"chores/dupes.sh\":{},\"chores/dupes.sh\":{}}}",
            js(&evil),
            js(&evil),
            js(&script)
        ),
    );
    let p = bundle_file(&w, "dup-files", dup_files.as_bytes());
    installed(&w, &p, None);
    w.dry_run_shown("dupes");
    assert!(matches!(
        real_run(&w, "dupes"),
        Response::Receipt { ok: true, .. }
    ));
    assert_eq!(
        std::fs::read_to_string(w.touched.join("dupes")).unwrap(),
        "signed\n"
    );
    // The record is re-read the same way: still the signed script.
    let (list, refused_list) = skills(&w);
    assert_eq!(list, vec![pair("dupes", "1.0.0")]);
    assert!(refused_list.is_empty());
    // A file key spelt with escapes is the same name; one with a NUL is another.
    let nul = raw(
        &format!("\"manifest\":{}", js(&text)),
        &format!(
            "\"files\":{{\"chores/dupes.sh\":{},\"chores/dupes.sh\\u0000\":\"x\"}}",
            js(&script)
        ),
    );
    let p = bundle_file(&w, "nul", nul.as_bytes());
    assert!(refused(check(&w, &p)).contains("does not name"));
}

#[test]
fn a_manifest_with_a_duplicated_key_shows_what_it_enforces() {
    let w = Warden::start("adv-skill-mdupe", true, &[]);
    let acme = Publisher::new("acme-tools");
    acme.trust(&w);
    let script = green(&w, "mdupe", "", "true");
    let m = manifest("mdupe", "1.0.0", "acme-tools", &w.touched, &["mdupe"]);
    // Fill in the hash by signing once, then put a decoy `writes` first.
    let (text, _, _) = parts(&acme.bundle(m, &[("chores/mdupe.sh", &script)]));
    let text = text.replacen('{', "{\n  \"writes\": [\"/var/tmp/adv-decoy\"],", 1);
    let sig = acme.sign(&text);
    let bundle = aromba_testkit::skills::bundle_of(&text, &sig, &[("chores/mdupe.sh", &script)]);
    let p = bundle_file(&w, "mdupe", &bundle);
    match check(&w, &p) {
        Response::Refused { .. } => {}
        r => {
            let (_, _, shown_text) = shown(r);
            assert!(!shown_text.contains("adv-decoy"), "{shown_text}");
            assert!(
                shown_text.contains(&*w.touched.to_string_lossy()),
                "{shown_text}"
            );
        }
    }
}

// ------------------------------------------------------ the manifest's bounds

#[test]
fn chore_headers_that_reach_past_their_manifest_are_refused() {
    let w = Warden::start("adv-skill-bounds", true, &[]);
    let acme = Publisher::new("acme-tools");
    acme.trust(&w);
    let t = w.touched.to_string_lossy().into_owned();
    let with_touch = |touch: &str, extra: &str| {
        chore(
            "bound",
            "red",
            Path::new(touch),
            extra,
            "[ \"$1\" = --dry-run ] && exit 0\ntrue",
        )
    };
    type Edit = Box<dyn FnOnce(&mut Value)>;
    let cases: Vec<(&str, String, Edit, &str)> = vec![
        (
            "a sibling sharing a prefix",
            with_touch(&format!("{t}2"), ""),
            Box::new(|_| {}),
            "asks to write",
        ),
        (
            "the parent",
            with_touch("/var/tmp", ""),
            Box::new(|_| {}),
            "asks to write",
        ),
        (
            "a read not granted",
            with_touch(&t, "# reads: /srv/adv-not-granted\n"),
            Box::new(|_| {}),
            "asks to read",
        ),
        (
            "an action not listed",
            with_touch(&t, "# action: systemctl restart nginx\n"),
            Box::new(|_| {}),
            "does not list",
        ),
        (
            "an action with a word more",
            with_touch(&t, "# action: systemctl reload nginx --now\n"),
            Box::new(|m: &mut Value| {
                m["root_commands"] =
                    json!([{"command": ["systemctl", "reload", "nginx"], "why": "reload"}]);
            }),
            "does not list",
        ),
        (
            "network with no host",
            with_touch(&t, "# network: yes\n"),
            Box::new(|_| {}),
            "declares no host",
        ),
        (
            "a manifest granting /",
            with_touch(&t, ""),
            Box::new(|m: &mut Value| m["writes"] = json!(["/"])),
            "writes",
        ),
        (
            "a manifest path with a trailing /",
            with_touch(&t, ""),
            Box::new(move |m: &mut Value| m["writes"] = json!([format!("{}/", "/var/tmp")])),
            "writes",
        ),
        (
            "a manifest path with ..",
            with_touch(&t, ""),
            Box::new(|m: &mut Value| m["writes"] = json!(["/var/tmp/../etc"])),
            "writes",
        ),
        (
            "a touch of /",
            with_touch("/", ""),
            Box::new(|m: &mut Value| m["writes"] = json!(["/var"])),
            "touches",
        ),
        (
            "a file outside chores/",
            with_touch(&t, ""),
            Box::new(|m: &mut Value| m["chores"][0]["file"] = json!("chores/../bound.sh")),
            "chores/NAME.sh",
        ),
    ];
    for (what, script, edit, why) in cases {
        let b = bundle_with(&w, &acme, "bounds", "1.0.0", "bound", &script, edit);
        let p = bundle_file(&w, "bounds", &b);
        let r = check(&w, &p);
        let Response::Refused { reason, .. } = r else {
            panic!("{what}: not refused: {r:?}");
        };
        assert!(reason.contains(why), "{what}: {reason}");
    }
    // A file the manifest does not name, and one it names but the bundle lacks.
    let script = with_touch(&t, "");
    let m = manifest("bounds", "1.0.0", "acme-tools", &w.touched, &["bound"]);
    let extra = acme.bundle(
        m.clone(),
        &[("chores/bound.sh", &script), ("chores/more.sh", &script)],
    );
    let p = bundle_file(&w, "extra", &extra);
    assert!(refused(check(&w, &p)).contains("does not name"));
    let mut two = m;
    two["chores"] = json!([{"file": "chores/bound.sh", "sha256": ""}, {"file": "chores/gone.sh", "sha256": "0".repeat(64)}]);
    let lacking = acme.bundle(two, &[("chores/bound.sh", &script)]);
    let p = bundle_file(&w, "lacking", &lacking);
    assert!(refused(check(&w, &p)).contains("lacks"));
    // Two files whose chores share a name.
    let mut twins = manifest(
        "bounds",
        "1.0.0",
        "acme-tools",
        &w.touched,
        &["bound", "bound2"],
    );
    twins["chores"][1]["file"] = json!("chores/bound2.sh");
    let b = acme.bundle(
        twins,
        &[("chores/bound.sh", &script), ("chores/bound2.sh", &script)],
    );
    let p = bundle_file(&w, "twins", &b);
    assert!(refused(check(&w, &p)).contains("two of its chores"));
    assert!(chore_names(&w).iter().all(|(n, _)| n != "bound"));
}

#[test]
fn a_touch_through_a_symlink_inside_a_granted_write_writes_nothing_outside() {
    let w = Warden::start("adv-skill-link", true, &[]);
    let acme = Publisher::new("acme-tools");
    acme.trust(&w);
    let outside = PathBuf::from(format!(
        "/var/tmp/aromba-adv-outside-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&outside);
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, w.touched.join("link")).unwrap();
    let touch = w.touched.join("link");
    let script = chore(
        "linky",
        "green",
        &touch,
        "",
        &format!(
            "[ \"$1\" = --dry-run ] && exit 0\necho x > {}/x",
            touch.display()
        ),
    );
    let b = bundle_with(&w, &acme, "linky", "1.0.0", "linky", &script, |_| {});
    let p = bundle_file(&w, "linky", &b);
    if let Response::SkillShown { sha256, .. } = check(&w, &p) {
        let _ = w.control(&Request::SkillInstall {
            path: p.clone(),
            sha256,
            pin: None,
        });
    }
    let dry = w.ask(&Request::DryRun {
        chore: "linky".into(),
    });
    let _ = w.ask(&Request::DryRunShown {
        chore: "linky".into(),
    });
    let real = real_run(&w, "linky");
    let wrote = outside.join("x").exists();
    let _ = std::fs::remove_dir_all(&outside);
    assert!(!wrote, "the chore wrote through the link: {dry:?} {real:?}");
    assert!(
        !matches!(real, Response::Receipt { ok: true, .. }),
        "{real:?}"
    );
}

// ---------------------------------------------------------------- names

#[test]
fn skill_chore_names_may_not_clash_with_system_owner_or_another_skills_chores() {
    let w = Warden::start("adv-skill-names", true, &[wipe_chore()]);
    let acme = Publisher::new("acme-tools");
    acme.trust(&w);
    for taken in ["apt-clean", "old-logs", "wipe"] {
        let p = bundle_file(&w, taken, &writer(&w, &acme, "clash", "1.0.0", taken, "x"));
        assert!(
            refused(check(&w, &p)).contains("has the name of"),
            "{taken}"
        );
    }
    let first = bundle_file(
        &w,
        "first",
        &writer(&w, &acme, "first", "1.0.0", "shared", "first"),
    );
    installed(&w, &first, None);
    // Another skill, named before it or after it.
    for other in ["aaa-second", "zzz-second"] {
        let p = bundle_file(
            &w,
            other,
            &writer(&w, &acme, other, "1.0.0", "shared", "second"),
        );
        assert!(
            refused(check(&w, &p)).contains("has the name of"),
            "{other}"
        );
    }
    assert_eq!(
        chore_names(&w)
            .iter()
            .filter(|(n, _)| n == "shared")
            .collect::<Vec<_>>(),
        vec![&("shared".to_string(), "skill first".to_string())]
    );
}

#[test]
fn removing_a_skill_leaves_an_owner_chore_of_the_same_name_alone() {
    let w = Warden::start("adv-skill-shadow", true, &[]);
    let acme = Publisher::new("acme-tools");
    acme.trust(&w);
    let p = bundle_file(
        &w,
        "s",
        &writer(&w, &acme, "shadowed", "1.0.0", "both", "skill"),
    );
    installed(&w, &p, None);
    // Root then writes an owner chore of that name: the owner's wins.
    let (_, script) = owner_chore(
        "both",
        "green",
        "",
        &format!(
            "[ \"$1\" = --dry-run ] && exit 0\necho owner > {}/both",
            w.touched.display()
        ),
    );
    let file = w.layout().config_dir.join("mine/both.sh");
    std::fs::write(
        &file,
        script.replace("TOUCHED", &w.touched.to_string_lossy()),
    )
    .unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert!(chore_names(&w).contains(&("both".into(), "mine".into())));
    w.dry_run_shown("both");
    let before = runs_of(&w, "both");
    assert!(
        before.iter().any(|n| n == "both.dry-run-seen"),
        "{before:?}"
    );
    assert!(matches!(
        w.control(&Request::SkillRemove {
            name: "shadowed".into()
        }),
        Response::Noted { .. }
    ));
    assert_eq!(
        runs_of(&w, "both"),
        before,
        "removing the skill erased the records of the owner's chore of the same name"
    );
}

// ---------------------------------------------------------------- publishers

#[test]
fn a_skill_update_from_another_publisher_is_not_a_silent_takeover() {
    let w = Warden::start("adv-skill-takeover", true, &[]);
    set_pin(&w);
    let acme = Publisher::new("acme-tools");
    let evil = Publisher::new("evil-corp");
    acme.trust(&w);
    evil.trust(&w);
    let hosts = |m: &mut Value| {
        m["hosts"] =
            json!([{"name": "acme.example.org", "port": 443, "why": "issues certificates"}]);
    };
    let script = green(&w, "certs-check", "", "true");
    let v1 = bundle_with(&w, &acme, "certs", "1.0.0", "certs-check", &script, hosts);
    installed(&w, &bundle_file(&w, "v1", &v1), Some(PIN));
    let evil_script = green(
        &w,
        "certs-check",
        "",
        &format!("echo evil > {}/evil", w.touched.display()),
    );
    let v2 = bundle_with(
        &w,
        &evil,
        "certs",
        "2.0.0",
        "certs-check",
        &evil_script,
        hosts,
    );
    let p2 = bundle_file(&w, "v2", &v2);
    match check(&w, &p2) {
        Response::Refused { .. } => {}
        r => {
            let (needs_pin, widening, _) = shown(r);
            assert!(
                needs_pin && widening.iter().any(|l| l.contains("evil-corp")),
                "another publisher's bundle is taken as a plain update of acme-tools' skill, its hosts granted without the PIN: needs_pin {needs_pin}, widening {widening:?}"
            );
        }
    }
}

#[test]
fn the_publisher_aromba_is_only_the_release_key() {
    let w = Warden::start("adv-skill-aromba", true, &[]);
    let fake = Publisher::new("aromba");
    // A key file named aromba.pub changes nothing.
    fake.trust(&w);
    let p = bundle_file(
        &w,
        "fake",
        &writer(&w, &fake, "official", "1.0.0", "official", "x"),
    );
    let reason = refused(check(&w, &p));
    assert!(
        reason.contains("signature does not verify") || reason.contains("no release key"),
        "{reason}"
    );
}

#[test]
fn a_publisher_key_that_is_a_link_or_writable_by_others_is_not_trusted() {
    let w = Warden::start("adv-skill-keys", true, &[]);
    let acme = Publisher::new("acme-tools");
    acme.trust(&w);
    let dir = w.layout().config_dir.join("publishers");
    let key = dir.join("acme-tools.pub");
    let elsewhere = w.root.join("acme-tools.pub");
    std::fs::write(&elsewhere, &acme.public).unwrap();
    std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o644)).unwrap();
    let p = bundle_file(&w, "k", &writer(&w, &acme, "keyed", "1.0.0", "keyed", "x"));
    let mode = |path: &Path, m: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(m)).unwrap()
    };
    let fresh = || {
        let _ = std::fs::remove_file(&key);
        let _ = std::fs::remove_dir_all(&dir);
        acme.trust(&w);
    };
    type Change<'c> = Box<dyn Fn() + 'c>;
    let variants: Vec<(&str, Change)> = vec![
        (
            "key a link",
            Box::new(|| {
                std::fs::remove_file(&key).unwrap();
                std::os::unix::fs::symlink(&elsewhere, &key).unwrap();
            }),
        ),
        ("key world-writable", Box::new(|| mode(&key, 0o666))),
        ("key group-writable", Box::new(|| mode(&key, 0o664))),
        (
            "key not root's",
            Box::new(|| std::os::unix::fs::chown(&key, Some(4_242_000), None).unwrap()),
        ),
        (
            "key a FIFO",
            Box::new(|| {
                std::fs::remove_file(&key).unwrap();
                mkfifo(&key);
            }),
        ),
        ("folder world-writable", Box::new(|| mode(&dir, 0o777))),
        ("folder group-writable", Box::new(|| mode(&dir, 0o775))),
        (
            "folder not root's",
            Box::new(|| std::os::unix::fs::chown(&dir, Some(4_242_000), None).unwrap()),
        ),
        (
            "folder a link",
            Box::new(|| {
                let real = w.root.join("real-publishers");
                std::fs::rename(&dir, &real).unwrap();
                std::os::unix::fs::symlink(&real, &dir).unwrap();
            }),
        ),
    ];
    for (what, spoil) in variants {
        fresh();
        spoil();
        let r = check(&w, &p);
        assert!(matches!(r, Response::Refused { .. }), "{what}: {r:?}");
        let _ = std::fs::remove_file(&dir);
        let _ = std::fs::remove_dir_all(w.root.join("real-publishers"));
    }
    fresh();
    assert!(matches!(check(&w, &p), Response::SkillShown { .. }));
}

// ---------------------------------------------------------------- hosts and the PIN

#[test]
fn an_update_that_renames_a_host_changes_a_port_or_swaps_hosts_needs_the_pin() {
    let w = Warden::start("adv-skill-hosts", true, &[]);
    set_pin(&w);
    let acme = Publisher::new("acme-tools");
    acme.trust(&w);
    let script = green(&w, "hosty", "", "true");
    let with_hosts = |hosts: Value| move |m: &mut Value| m["hosts"] = hosts;
    let a = json!({"name": "a.example.org", "port": 443, "why": "a"});
    let v1 = bundle_with(
        &w,
        &acme,
        "hosty",
        "1.0.0",
        "hosty",
        &script,
        with_hosts(json!([a])),
    );
    installed(&w, &bundle_file(&w, "v1", &v1), Some(PIN));
    for (i, hosts) in [
        json!([{"name": "b.example.org", "port": 443, "why": "a"}]),
        json!([{"name": "a.example.org", "port": 8443, "why": "a"}]),
        json!([{"name": "b.example.org", "port": 443, "why": "b"}, {"name": "a.example.org", "port": 444, "why": "a"}]),
        json!([a.clone(), {"name": "a.example.org.evil.net", "port": 443, "why": "a"}]),
        json!([{"name": "example.org", "port": 443, "why": "the parent domain"}]),
    ]
    .into_iter()
    .enumerate()
    {
        let b = bundle_with(&w, &acme, "hosty", "1.1.0", "hosty", &script, with_hosts(hosts.clone()));
        let p = bundle_file(&w, &format!("h{i}"), &b);
        let (needs_pin, widening, _) = shown(check(&w, &p));
        assert!(needs_pin && !widening.is_empty(), "{hosts}: {widening:?}");
        assert!(refused(install(&w, &p, None)).contains("PIN"), "{hosts}");
        assert!(!refused(install(&w, &p, Some("1111222"))).is_empty(), "{hosts}");
    }
    // Upper case or an IP literal is not a host at all.
    for name in ["A.example.org", "127.0.0.1", "[::1]", "localhost"] {
        let b = bundle_with(
            &w,
            &acme,
            "hosty",
            "1.1.0",
            "hosty",
            &script,
            with_hosts(json!([{"name": name, "port": 443, "why": "x"}])),
        );
        let p = bundle_file(&w, "bad-host", &b);
        assert!(refused(check(&w, &p)).contains("DNS name"), "{name}");
    }
    assert_eq!(skills(&w).0, vec![pair("hosty", "1.0.0")]);
}

#[test]
fn a_network_grant_written_on_disk_does_not_spare_the_pin() {
    let w = Warden::start("adv-skill-grant", true, &[]);
    set_pin(&w);
    let acme = Publisher::new("acme-tools");
    acme.trust(&w);
    let v1 = writer(&w, &acme, "granted", "1.0.0", "granted", "x");
    installed(&w, &bundle_file(&w, "v1", &v1), None);
    // Someone writes a grant the PIN was never typed for.
    std::fs::write(
        w.layout().state_dir.join("skill-granted.network"),
        "exfil.example.net:443\n",
    )
    .unwrap();
    let script = green(&w, "granted", "", "true");
    let v2 = bundle_with(&w, &acme, "granted", "1.1.0", "granted", &script, |m| {
        m["hosts"] = json!([{"name": "exfil.example.net", "port": 443, "why": "sync"}]);
    });
    let p = bundle_file(&w, "v2", &v2);
    match check(&w, &p) {
        Response::Refused { .. } => {}
        r => {
            let (needs_pin, _, _) = shown(r);
            assert!(
                needs_pin,
                "a grant record written outside the Warden (not in the integrity baseline) spares the PIN for exfil.example.net:443"
            );
        }
    }
}

// ---------------------------------------------------------------- records on disk

#[test]
fn a_tampered_installed_bundle_no_longer_loads() {
    let w = Warden::start("adv-skill-tamper", true, &[]);
    let acme = Publisher::new("acme-tools");
    acme.trust(&w);
    let p = bundle_file(
        &w,
        "t",
        &writer(&w, &acme, "tampered", "1.0.0", "tampered", "honest"),
    );
    installed(&w, &p, None);
    let record = w.layout().state_dir.join("skill-tampered.bundle");
    let bytes = std::fs::read_to_string(&record).unwrap();
    let changed = bytes.replace("echo honest", "echo forged");
    assert_ne!(bytes, changed);
    std::fs::write(&record, changed).unwrap();
    let (list, refused_list) = skills(&w);
    assert!(list.is_empty(), "{list:?}");
    assert!(
        refused_list.iter().any(|r| r.contains("tampered")),
        "{refused_list:?}"
    );
    assert!(chore_names(&w).iter().all(|(n, _)| n != "tampered"));
    assert!(!matches!(
        real_run(&w, "tampered"),
        Response::Receipt { .. }
    ));
    // The good bundle again: not over a record that no longer verifies.
    assert!(refused(check(&w, &p)).contains("remove it first"));
    assert!(!w.touched.join("tampered").exists());
}

#[test]
fn an_installed_bundle_rolled_back_to_an_older_signed_version_no_longer_loads() {
    let w = Warden::start("adv-skill-rollback", true, &[]);
    let acme = Publisher::new("acme-tools");
    acme.trust(&w);
    let v1 = writer(&w, &acme, "rolled", "1.0.0", "rolled", "old-vulnerable");
    installed(&w, &bundle_file(&w, "v1", &v1), None);
    let v2 = writer(&w, &acme, "rolled", "1.0.1", "rolled", "fixed");
    installed(&w, &bundle_file(&w, "v2", &v2), None);
    // The record replaced on disk with 1.0.0's bundle, signed and all.
    std::fs::write(w.layout().state_dir.join("skill-rolled.bundle"), &v1).unwrap();
    let (list, _) = skills(&w);
    assert!(
        !list.contains(&("rolled".into(), "1.0.0".into())),
        "a record rolled back on disk loads as installed: {list:?}"
    );
}

#[test]
fn an_updated_skill_chore_needs_a_new_dry_run_before_its_first_real_run() {
    let w = Warden::start("adv-skill-redry", true, &[]);
    let acme = Publisher::new("acme-tools");
    acme.trust(&w);
    let v1 = writer(&w, &acme, "redry", "1.0.0", "redry", "v1");
    installed(&w, &bundle_file(&w, "v1", &v1), None);
    w.dry_run_shown("redry");
    assert!(matches!(
        real_run(&w, "redry"),
        Response::Receipt { ok: true, .. }
    ));
    // 1.0.1 asks for nothing more, and its chore's script is another.
    let v2 = writer(&w, &acme, "redry", "1.0.1", "redry", "v2-never-dry-run");
    let p2 = bundle_file(&w, "v2", &v2);
    let (needs_pin, widening, _) = shown(check(&w, &p2));
    assert!(!needs_pin && widening.is_empty());
    installed(&w, &p2, None);
    let r = real_run(&w, "redry");
    let ran = std::fs::read_to_string(w.touched.join("redry")).unwrap_or_default();
    assert!(
        matches!(&r, Response::Refused { reason, .. } if reason.contains("dry run")),
        "the new script ran for real on the old script's dry run (it wrote {ran:?}): {r:?}"
    );
}

#[test]
fn removing_a_skill_that_no_longer_verifies_forgets_its_chores_runs() {
    let w = Warden::start("adv-skill-forget", true, &[]);
    let acme = Publisher::new("acme-tools");
    let evil = Publisher::new("evil-corp");
    acme.trust(&w);
    evil.trust(&w);
    let p = bundle_file(
        &w,
        "a",
        &writer(&w, &acme, "trusted", "1.0.0", "common", "acme"),
    );
    installed(&w, &p, None);
    w.dry_run_shown("common");
    assert!(matches!(
        real_run(&w, "common"),
        Response::Receipt { ok: true, .. }
    ));
    // Root stops trusting acme-tools, and removes what it left.
    std::fs::remove_file(w.layout().config_dir.join("publishers/acme-tools.pub")).unwrap();
    assert!(!skills(&w).1.is_empty());
    assert!(matches!(
        w.control(&Request::SkillRemove {
            name: "trusted".into()
        }),
        Response::Noted { .. }
    ));
    // Another publisher's chore of that name must earn its own dry run.
    let q = bundle_file(
        &w,
        "e",
        &writer(&w, &evil, "newcomer", "1.0.0", "common", "evil"),
    );
    installed(&w, &q, None);
    let r = real_run(&w, "common");
    assert!(
        matches!(&r, Response::Refused { reason, .. } if reason.contains("dry run")),
        "evil-corp's chore ran for real on acme-tools' chore's dry run: {r:?}; left behind: {:?}",
        runs_of(&w, "common")
    );
}

// ---------------------------------------------------------------- the Worker

#[test]
fn the_worker_socket_may_list_skills_but_never_change_them() {
    let w = Warden::start("adv-skill-worker", true, &[]);
    let acme = Publisher::new("acme-tools");
    acme.trust(&w);
    let p = bundle_file(
        &w,
        "w",
        &writer(&w, &acme, "listed", "1.0.0", "listed", "x"),
    );
    let Response::SkillShown { sha256, .. } = check(&w, &p) else {
        panic!()
    };
    for r in [
        Request::SkillCheck { path: p.clone() },
        Request::SkillInstall {
            path: p.clone(),
            sha256: sha256.clone(),
            pin: Some(PIN.into()),
        },
    ] {
        assert!(matches!(w.ask(&r), Response::Error { .. }));
    }
    assert!(skills(&w).0.is_empty());
    installed(&w, &p, None);
    assert!(matches!(
        w.ask(&Request::SkillRemove {
            name: "listed".into()
        }),
        Response::Error { .. }
    ));
    let Response::Skills { skills: listed, .. } = w.ask(&Request::Skills) else {
        panic!()
    };
    assert_eq!(listed.len(), 1);
    assert_eq!(skills(&w).0, vec![pair("listed", "1.0.0")]);
}

#[test]
fn installing_or_removing_while_a_real_run_is_under_way_is_refused() {
    let w = Warden::start("adv-skill-busy", true, &[]);
    let acme = Publisher::new("acme-tools");
    acme.trust(&w);
    let script = green(
        &w,
        "slow",
        "",
        &format!("sleep 4\necho done > {}/slow", w.touched.display()),
    );
    let v1 = bundle_with(&w, &acme, "busy", "1.0.0", "slow", &script, |_| {});
    installed(&w, &bundle_file(&w, "v1", &v1), None);
    w.dry_run_shown("slow");
    let socket = w.layout().control_socket();
    let run = std::thread::spawn(move || {
        control_at(
            &socket,
            &Request::ChoreRun {
                name: "slow".into(),
                dry_run: false,
            },
        )
    });
    std::thread::sleep(Duration::from_millis(1500));
    let v2 = writer(&w, &acme, "busy", "1.1.0", "slow", "swapped");
    let p2 = bundle_file(&w, "v2", &v2);
    let during_install = install(&w, &p2, None);
    let during_remove = w.control(&Request::SkillRemove {
        name: "busy".into(),
    });
    let r = run.join().unwrap();
    assert!(matches!(r, Response::Receipt { ok: true, .. }), "{r:?}");
    assert!(refused(during_install).contains("under way"));
    assert!(refused(during_remove).contains("under way"));
    assert_eq!(skills(&w).0, vec![pair("busy", "1.0.0")]);
}

#[test]
fn a_downgrade_a_reinstall_or_the_same_version_with_other_content_is_refused() {
    let w = Warden::start("adv-skill-versions", true, &[]);
    let acme = Publisher::new("acme-tools");
    acme.trust(&w);
    let v = writer(&w, &acme, "versioned", "1.2.0", "versioned", "one");
    let p = bundle_file(&w, "v", &v);
    installed(&w, &p, None);
    assert!(refused(check(&w, &p)).contains("installed already"));
    let same = writer(&w, &acme, "versioned", "1.2.0", "versioned", "other");
    assert!(refused(check(&w, &bundle_file(&w, "same", &same))).contains("not newer"));
    let older = writer(&w, &acme, "versioned", "1.1.99", "versioned", "older");
    assert!(refused(check(&w, &bundle_file(&w, "older", &older))).contains("not newer"));
    for bad in [
        "1.2",
        "1.2.0.1",
        "01.2.0",
        "1.2.0-rc1",
        "v1.3.0",
        "4294967296.0.0",
    ] {
        let b = writer(&w, &acme, "versioned", bad, "versioned", "bad");
        assert!(
            refused(check(&w, &bundle_file(&w, "bad", &b))).contains("version"),
            "{bad}"
        );
    }
}

// ---------------------------------------------------------------- in the cage

#[test]
fn a_skill_chore_asking_for_the_network_reaches_no_listener_of_the_host() {
    let w = Warden::start("adv-skill-net", true, &[]);
    set_pin(&w);
    let acme = Publisher::new("acme-tools");
    acme.trust(&w);
    let listener = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut targets = vec!["127.0.0.1".to_string()];
    if let Ok(u) = std::net::UdpSocket::bind("0.0.0.0:0")
        && u.connect("192.0.2.1:9").is_ok()
        && let Ok(a) = u.local_addr()
        && !a.ip().is_loopback()
    {
        targets.push(a.ip().to_string());
    }
    let t = w.touched.display().to_string();
    let mut body = String::new();
    for ip in &targets {
        body.push_str(&format!(
            "perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(PeerAddr => \"{ip}\", PeerPort => {port}, Timeout => 3); print $s ? \"connected\\n\" : \"failed: $!\\n\"' >> {t}/net 2>&1\n"
        ));
    }
    let script = green(&w, "reach", "# network: yes\n", &body);
    let b = bundle_with(&w, &acme, "reach", "1.0.0", "reach", &script, |m| {
        m["hosts"] = json!([{"name": "example.org", "port": 443, "why": "the tests' host"}]);
    });
    installed(&w, &bundle_file(&w, "reach", &b), Some(PIN));
    w.dry_run_shown("reach");
    let _ = real_run(&w, "reach");
    let seen = std::fs::read_to_string(w.touched.join("net")).unwrap_or_default();
    assert!(seen.contains("failed"), "the chore did not run: {seen:?}");
    assert!(!seen.contains("connected"), "{targets:?}: {seen}");
    assert!(
        matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the host's listener took a connection from the cage"
    );
}

#[test]
fn a_skill_chore_reading_the_wardens_folder_sees_no_key_no_record_and_no_socket() {
    let root = PathBuf::from(format!("/var/tmp/aromba-adv-rooted-{}", std::process::id()));
    let w = Warden::start_rooted(root.clone(), "adv-skill-peek", &[]);
    let acme = Publisher::new("acme-tools");
    acme.trust(&w);
    let l = w.layout();
    let t = w.touched.display().to_string();
    let r = root.display().to_string();
    let body = format!(
        "cat {pubkey} > {t}/pub 2>&1\n\
         cat {state}/skill-peek.bundle > {t}/bundle 2>&1\n\
         cat {journal} > {t}/journal 2>&1\n\
         ls -laR {r} > {t}/ls 2>&1\n\
         perl -MIO::Socket::UNIX -e '$s = IO::Socket::UNIX->new(Peer => \"{control}\"); print $s ? \"connected\\n\" : \"failed: $!\\n\"' > {t}/sock 2>&1\n\
         true",
        pubkey = l.config_dir.join("publishers/acme-tools.pub").display(),
        state = l.state_dir.display(),
        journal = l.journal_file().display(),
        control = l.control_socket().display(),
    );
    let script = green(&w, "peek", &format!("# reads: {r}\n"), &body);
    let b = bundle_with(&w, &acme, "peek", "1.0.0", "peek", &script, |m| {
        m["reads"] = json!([r]);
    });
    installed(&w, &bundle_file(&w, "peek", &b), None);
    w.dry_run_shown("peek");
    let _ = real_run(&w, "peek");
    let read = |f: &str| std::fs::read_to_string(w.touched.join(f)).unwrap_or_default();
    let key_line = acme.public.lines().nth(1).unwrap().to_string();
    assert!(!read("pub").contains(&key_line), "{}", read("pub"));
    assert!(
        !read("bundle").contains("aromba-skill-bundle-1"),
        "{}",
        read("bundle")
    );
    assert!(
        !read("journal").contains("skill-install"),
        "{}",
        read("journal")
    );
    assert!(!read("sock").contains("connected"), "{}", read("sock"));
    let ls = read("ls");
    assert!(
        ls.contains("peek.skill"),
        "the chore did not see the folder:\n{ls}"
    );
    for name in [
        "acme-tools.pub",
        "skill-peek.bundle",
        "control.sock",
        "worker.sock",
    ] {
        assert!(!ls.contains(name), "{name} listed:\n{ls}");
    }
}

#[test]
fn an_update_that_turns_a_red_chore_green_or_scheduled_is_shown_as_asking_for_more() {
    let w = Warden::start("adv-skill-recolor", true, &[]);
    let acme = Publisher::new("acme-tools");
    acme.trust(&w);
    let body = format!(
        "[ \"$1\" = --dry-run ] && exit 0\necho x > {}/recolor",
        w.touched.display()
    );
    let red = chore("recolor", "red", &w.touched, "", &body);
    let v1 = bundle_with(&w, &acme, "recolor", "1.0.0", "recolor", &red, |_| {});
    installed(&w, &bundle_file(&w, "v1", &v1), None);
    // Green runs with no approval, on a schedule of its own.
    let green_daily = chore("recolor", "green", &w.touched, "", &body)
        .replace("# schedule: manual", "# schedule: daily 03:00");
    let v2 = bundle_with(
        &w,
        &acme,
        "recolor",
        "1.0.1",
        "recolor",
        &green_daily,
        |_| {},
    );
    let (_, widening, _) = shown(check(&w, &bundle_file(&w, "v2", &v2)));
    assert!(
        !widening.is_empty(),
        "a red chore made green and daily is shown as asking for nothing more"
    );
}
