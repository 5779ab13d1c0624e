//! `scripts/release` and `scripts/reproducible` as their users run them:
//! a release's signed trusted comment names the commit it was built from
//! (and a weekly re-signing keeps it), read back by `aromba-release` as
//! the Warden reads it; a signed release is not built, nor reproducibility
//! checked, from a checkout with uncommitted changes; a release packs each
//! skill of the catalogue, signed so the Warden takes it as `aromba`'s,
//! with an index of them signed as the manifest is; and the tarballs the
//! check compares come out byte for byte the same from two clones in
//! different folders.
//!
//! The scripts run from a scratch git repository holding this checkout's
//! copy of them (what is being changed, committed there), so the test
//! holds whatever state the developer's own checkout is in. Needs git,
//! tar, gzip and minisign (the test command installs minisign).

use aromba_testkit::release as releases;

use std::path::{Path, PathBuf};
use std::process::Output;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("aromba-scripts-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

fn git(repo: &Path, args: &[&str]) -> Output {
    let out = assert_cmd::Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["-c", "user.name=test", "-c", "user.email=test@example.com"])
        .args(args)
        // The same commit wherever it is made.
        .env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
        .env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", text(&out.stderr));
    out
}

/// A git repository at `dir` holding this checkout's scripts, the
/// workspace's version line, the installer and units a release writes,
/// and the test keys, committed; its commit.
fn repo(dir: &Path) -> String {
    let ws = workspace();
    for file in [
        "scripts/release",
        "scripts/reproducible",
        "deploy/install.sh",
        "keys/test/release.key",
        "keys/test/release.pub",
        "keys/test/release-standby.pub",
    ] {
        std::fs::create_dir_all(dir.join(file).parent().unwrap()).unwrap();
        std::fs::copy(ws.join(file), dir.join(file)).unwrap();
    }
    for skill in std::fs::read_dir(ws.join("skills")).unwrap() {
        let skill = skill.unwrap().path();
        for sub in ["", "chores", "tools"] {
            let from = skill.join(sub);
            let Ok(entries) = std::fs::read_dir(&from) else {
                continue;
            };
            let to = dir
                .join("skills")
                .join(skill.file_name().unwrap())
                .join(sub);
            std::fs::create_dir_all(&to).unwrap();
            for f in entries {
                let f = f.unwrap().path();
                if f.is_file() {
                    std::fs::copy(&f, to.join(f.file_name().unwrap())).unwrap();
                }
            }
        }
    }
    std::fs::create_dir_all(dir.join("deploy/systemd")).unwrap();
    for unit in std::fs::read_dir(ws.join("deploy/systemd")).unwrap() {
        let unit = unit.unwrap().path();
        std::fs::copy(
            &unit,
            dir.join("deploy/systemd").join(unit.file_name().unwrap()),
        )
        .unwrap();
    }
    std::fs::write(
        dir.join("Cargo.toml"),
        "[workspace.package]\nversion = \"0.1.0\"\n",
    )
    .unwrap();
    std::fs::write(dir.join(".gitignore"), "/target\n/bins\n").unwrap();
    let stand_ins = dir.join("bins");
    std::fs::create_dir_all(&stand_ins).unwrap();
    for b in ["aromba", "aromba-warden"] {
        std::fs::write(stand_ins.join(b), format!("#!/bin/sh\necho {b}\n")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(stand_ins.join(b), std::fs::Permissions::from_mode(0o755))
            .unwrap();
    }
    git(dir, &["init", "--quiet", "--initial-branch=main"]);
    git(dir, &["add", "."]);
    git(dir, &["commit", "--quiet", "-m", "release scripts"]);
    text(&git(dir, &["rev-parse", "HEAD"]).stdout)
        .trim()
        .to_string()
}

fn script(repo: &Path, name: &str, args: &[&str]) -> Output {
    assert_cmd::Command::new(repo.join("scripts").join(name))
        .current_dir(repo)
        .args(args)
        .output()
        .unwrap()
}

const SIGNED: [&str; 6] = [
    "--version",
    "1.0.0",
    "--key",
    "keys/test/release.key",
    "--public-keys",
    "keys/test/release.pub,keys/test/release-standby.pub",
];

/// The commit the release in `dir` names, as the Warden reads it: only
/// from a signature that verifies with the release key.
fn signed_commit(dir: &Path) -> Option<String> {
    let keys =
        aromba_release::Keys::from_base64(&[&releases::key_line(releases::RELEASE_PUB)]).unwrap();
    let manifest = std::fs::read(dir.join("manifest.json")).unwrap();
    let signature = std::fs::read_to_string(dir.join("manifest.json.minisig")).unwrap();
    aromba_release::Manifest::verified(&manifest, &signature, &keys)
        .expect("the release verifies")
        .commit
}

#[test]
fn a_release_names_its_commit_in_the_signed_comment_and_a_resign_keeps_it() {
    let s = scratch("commit");
    let repo_dir = s.0.join("repo");
    let commit = repo(&repo_dir);
    let out_dir = s.0.join("out");
    let mut args = SIGNED.to_vec();
    args.extend(["--binaries", "bins", "--out", out_dir.to_str().unwrap()]);
    let made = script(&repo_dir, "release", &args);
    assert!(made.status.success(), "{}", text(&made.stderr));
    assert!(
        text(&made.stdout).contains(&format!("commit {commit}")),
        "{}",
        text(&made.stdout)
    );
    let minisig = std::fs::read_to_string(out_dir.join("manifest.json.minisig")).unwrap();
    assert!(
        minisig.contains(&format!(
            "trusted comment: aromba 1.0.0 stable {} commit {commit}\n",
            std::env::consts::ARCH
        )),
        "{minisig}"
    );
    assert_eq!(signed_commit(&out_dir), Some(commit.clone()));
    // The manifest has no field an older Warden would refuse.
    let manifest = std::fs::read_to_string(out_dir.join("manifest.json")).unwrap();
    assert!(!manifest.contains("commit"), "{manifest}");

    let resigned = script(
        &repo_dir,
        "release",
        &[
            "--resign",
            out_dir.to_str().unwrap(),
            "--key",
            "keys/test/release.key",
            "--expires-days",
            "3",
        ],
    );
    assert!(resigned.status.success(), "{}", text(&resigned.stderr));
    let minisig = std::fs::read_to_string(out_dir.join("manifest.json.minisig")).unwrap();
    assert!(minisig.contains("re-signed to expire"), "{minisig}");
    assert_eq!(signed_commit(&out_dir), Some(commit));
    // The catalogue's index is renewed with it, and still verifies.
    let skills = out_dir.join("skills");
    let index = std::fs::read(skills.join("index.json")).unwrap();
    let signature = std::fs::read_to_string(skills.join("index.json.minisig")).unwrap();
    let keys =
        aromba_release::Keys::from_base64(&[&releases::key_line(releases::RELEASE_PUB)]).unwrap();
    keys.signed(&index, &signature)
        .expect("the renewed index verifies");
    assert_eq!(
        expiry_of(&skills.join("index.json")),
        expiry_of(&out_dir.join("manifest.json"))
    );
}

#[test]
fn a_release_packs_each_skill_and_a_signed_index_of_them_and_the_warden_takes_each_as_aromba_s() {
    let s = scratch("skills");
    let repo_dir = s.0.join("repo");
    repo(&repo_dir);
    let out_dir = s.0.join("out");
    let mut args = SIGNED.to_vec();
    args.extend(["--binaries", "bins", "--out", out_dir.to_str().unwrap()]);
    let made = script(&repo_dir, "release", &args);
    assert!(made.status.success(), "{}", text(&made.stderr));
    let mut packed: Vec<String> = std::fs::read_dir(out_dir.join("skills"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|f| f.ends_with(".skill"))
        .collect();
    packed.sort();
    assert_eq!(
        packed,
        [
            "certs-1.0.0.skill",
            "nginx-1.0.0.skill",
            "restic-backup-1.0.0.skill"
        ]
    );
    check_catalogue_index(&out_dir.join("skills"), &packed);
    let w = aromba_testkit::warden::Warden::start_with("release-skills", true, &[], |o| {
        o.release_keys = Some(vec![releases::key_line(releases::RELEASE_PUB)]);
    });
    for file in &packed {
        let path = out_dir.join("skills").join(file);
        let r = w.control(&aromba_warden_proto::Request::SkillCheck {
            path: path.to_string_lossy().into_owned(),
        });
        assert!(
            matches!(&r, aromba_warden_proto::Response::SkillShown { text, .. }
                if text.contains("from the publisher aromba")),
            "{file}: {r:?}"
        );
    }
}

/// The `expires` of the JSON file at `path`.
fn expiry_of(path: &Path) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    v["expires"].clone()
}

/// The catalogue's index in `skills` verifies with the release key as
/// the manifest does, has exactly the fields docs/skills.md names, and
/// names each bundle of `packed` (sorted by name) with its true size and
/// SHA-256 and its manifest's description.
fn check_catalogue_index(skills: &Path, packed: &[String]) {
    let keys =
        aromba_release::Keys::from_base64(&[&releases::key_line(releases::RELEASE_PUB)]).unwrap();
    let index = std::fs::read(skills.join("index.json")).unwrap();
    let signature = std::fs::read_to_string(skills.join("index.json.minisig")).unwrap();
    keys.signed(&index, &signature)
        .expect("the index verifies with the release key");
    // Signed as the manifest is: another key's signature does not verify.
    let other = aromba_release::Keys::from_base64(&[&releases::key_line(include_str!(
        "../../keys/test/relay-approvals.pub"
    ))])
    .unwrap();
    assert!(other.signed(&index, &signature).is_err());
    let index: serde_json::Value = serde_json::from_slice(&index).unwrap();
    let mut top: Vec<&String> = index.as_object().unwrap().keys().collect();
    top.sort();
    assert_eq!(top, ["expires", "format", "skills"]);
    assert_eq!(index["format"], "aromba-skill-index-1");
    assert_eq!(
        index["expires"],
        expiry_of(&skills.join("../manifest.json")),
        "the index expires with the manifest"
    );
    let entries = index["skills"].as_array().unwrap();
    assert_eq!(entries.len(), packed.len());
    for (entry, file) in entries.iter().zip(packed) {
        let mut fields: Vec<&String> = entry.as_object().unwrap().keys().collect();
        fields.sort();
        assert_eq!(
            fields,
            ["description", "file", "name", "sha256", "size", "version"]
        );
        let bytes = std::fs::read(skills.join(file)).unwrap();
        assert_eq!(entry["file"], file.as_str());
        assert_eq!(entry["size"], bytes.len() as u64, "{file}");
        assert_eq!(
            entry["sha256"],
            aromba_release::sha256_hex(&bytes).as_str(),
            "{file}"
        );
        let bundle: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        let manifest: serde_json::Value =
            serde_json::from_str(bundle["manifest"].as_str().unwrap()).unwrap();
        assert_eq!(entry["name"], manifest["name"], "{file}");
        assert_eq!(entry["version"], manifest["version"], "{file}");
        assert_eq!(entry["description"], manifest["description"], "{file}");
        assert_eq!(
            *file,
            format!(
                "{}-{}.skill",
                manifest["name"].as_str().unwrap(),
                manifest["version"].as_str().unwrap()
            )
        );
    }
}

#[test]
fn a_signed_release_is_not_built_from_a_checkout_with_uncommitted_changes() {
    let s = scratch("release-dirty");
    let repo_dir = s.0.join("repo");
    repo(&repo_dir);
    std::fs::write(
        repo_dir.join("Cargo.toml"),
        "[workspace.package]\nversion = \"0.1.1\"\n",
    )
    .unwrap();
    let made = script(&repo_dir, "release", &SIGNED);
    assert!(!made.status.success());
    let said = text(&made.stderr);
    assert!(
        said.starts_with("scripts/release: the checkout has uncommitted changes"),
        "{said}"
    );
    assert!(!repo_dir.join("target").exists(), "it built: {said}");
}

#[test]
fn the_reproducibility_check_refuses_a_checkout_with_uncommitted_changes() {
    let s = scratch("repro-dirty");
    let repo_dir = s.0.join("repo");
    let commit = repo(&repo_dir);
    // An untracked file is a change too: the clones would not have it.
    std::fs::write(repo_dir.join("new.rs"), "fn main() {}\n").unwrap();
    let work = s.0.join("work");
    let out = script(&repo_dir, "reproducible", &[work.to_str().unwrap()]);
    assert!(!out.status.success());
    let said = text(&out.stderr);
    assert!(said.contains("?? new.rs"), "{said}");
    assert!(
        said.contains(&format!(
            "scripts/reproducible: the checkout has uncommitted changes; commit or stash them first (the two builds are of commit {commit}"
        )),
        "{said}"
    );
    assert!(!work.exists(), "it started building: {said}");
}

#[test]
fn the_tarballs_the_check_compares_are_the_same_bytes_from_two_clones() {
    // What `scripts/reproducible` runs in each clone, packing these
    // stand-in binaries instead of a dist build (which the test command
    // checks through the script itself).
    let s = scratch("repro-pack");
    let origin = s.0.join("origin");
    let commit = repo(&origin);
    let mut tarballs = Vec::new();
    for side in ["first", "second/somewhere/else"] {
        let dir = s.0.join(side).join("aromba");
        std::fs::create_dir_all(dir.parent().unwrap()).unwrap();
        let cloned = assert_cmd::Command::new("git")
            .args(["clone", "--quiet", "--no-hardlinks"])
            .arg(&origin)
            .arg(&dir)
            .output()
            .unwrap();
        assert!(cloned.status.success(), "{}", text(&cloned.stderr));
        let bins = origin.join("bins");
        let packed = script(
            &dir,
            "release",
            &["--build-only", "--binaries", bins.to_str().unwrap()],
        );
        let said = text(&packed.stdout);
        assert!(packed.status.success(), "{}", text(&packed.stderr));
        assert!(said.starts_with(&format!("commit {commit}\n")), "{said}");
        let arch = std::env::consts::ARCH;
        for b in ["aromba", "aromba-warden"] {
            assert!(
                said.contains(&format!("  tarballs/{b}-0.1.0-{arch}.tar.gz\n")),
                "{said}"
            );
        }
        let dist = dir.join("target/dist/tarballs");
        let mut these: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dist)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.file_name().to_string_lossy().into_owned(),
                    std::fs::read(e.path()).unwrap(),
                )
            })
            .collect();
        these.sort();
        assert_eq!(these.len(), 2, "{these:?}");
        tarballs.push(these);
    }
    assert!(tarballs[0] == tarballs[1], "the tarballs differ");
}
