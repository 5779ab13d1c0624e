//! In prod mode every chore is red, and a red run snapshots its touches
//! first; the snapshot refused the quarantine as a root, so `apt-clean` and
//! `old-logs`, which touch it, could never run in prod mode. The snapshot
//! now leaves the quarantine out (it records nothing in it anyway, and prod
//! mode never purges it): both run, and undo puts back what they moved from
//! the snapshot's own copy. The system scripts run as the owner's chores
//! here, their paths redirected into the test's directories (a system
//! chore's touches are fixed). Needs root and bubblewrap.

use aromba_testkit::warden as support;

use aromba_warden::layout::Layout;
use aromba_warden_proto::{Request, Response};
use std::path::Path;
use support::Warden;

const PIN: &str = "472913";

/// A system chore's script as one of the owner's: renamed, its apt cache
/// and `/var/log` under the touched directory, its quarantine the test
/// layout's.
fn redirected(script: &str, name: &str, quarantine: &Path) -> (String, String) {
    let renamed = format!("{name}-here");
    let script = script
        .replace(
            &format!("# name: {name}\n"),
            &format!("# name: {renamed}\n"),
        )
        .replace(
            "/var/lib/aromba-warden/quarantine",
            &quarantine.to_string_lossy(),
        )
        .replace("/var/cache/apt/archives", "TOUCHED/archives")
        .replace("/var/log", "TOUCHED/log");
    (renamed, script)
}

fn real_run(w: &Warden, name: &str) -> String {
    let r = w.control(&Request::ChoreRun {
        name: name.into(),
        dry_run: false,
    });
    match r {
        Response::Receipt { receipt, ok, .. } => {
            assert!(ok, "{receipt}");
            receipt
        }
        other => panic!("{name} did not run in prod mode: {other:?}"),
    }
}

fn undo_id(receipt: &str) -> String {
    let at = receipt
        .find("undo id ")
        .unwrap_or_else(|| panic!("no undo id: {receipt}"))
        + 8;
    receipt[at..at + 32].to_string()
}

fn undo(w: &Warden, id: String) {
    let r = w.control(&Request::Undo { undo_id: id });
    assert!(
        matches!(
            r,
            Response::Receipt { ok: true, .. } | Response::Noted { .. }
        ),
        "{r:?}"
    );
}

/// Files under `dir` (relative), recursively.
fn files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(rel) = p.strip_prefix(dir) {
                out.push(rel.display().to_string());
            }
        }
    }
    out.sort();
    out
}

fn aged(path: &Path) {
    let out = assert_cmd::Command::new("touch")
        .args(["-d", "40 days ago"])
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success());
}

#[test]
fn apt_clean_and_old_logs_run_in_prod_mode_and_are_undone() {
    let name = "adv-prod-chores";
    // Where support's Warden puts its layout.
    let root = std::env::temp_dir().join(format!("aromba-{name}-{}", std::process::id()));
    let quarantine = Layout::rooted(&root).quarantine_dir;
    let chores = [
        redirected(
            include_str!("../chores/apt-clean.sh"),
            "apt-clean",
            &quarantine,
        ),
        redirected(
            include_str!("../chores/old-logs.sh"),
            "old-logs",
            &quarantine,
        ),
    ];
    let w = Warden::start(name, false, &chores);
    assert_eq!(w.layout().quarantine_dir, quarantine);
    let archives = w.touched.join("archives");
    let log = w.touched.join("log");
    std::fs::create_dir_all(&archives).unwrap();
    std::fs::create_dir_all(log.join("nginx")).unwrap();
    std::fs::write(archives.join("a_1.0_amd64.deb"), "deb a").unwrap();
    std::fs::write(archives.join("b_2.0_amd64.deb"), "deb b").unwrap();
    std::fs::write(log.join("syslog"), "current").unwrap();
    std::fs::write(log.join("syslog.1"), "rotated").unwrap();
    std::fs::write(log.join("nginx/access.log.2.gz"), "gz").unwrap();
    aged(&log.join("syslog.1"));
    aged(&log.join("nginx/access.log.2.gz"));
    let archives_before = files(&archives);
    let log_before = files(&log);
    w.set_pin_and_prod_mode_on(PIN);
    for chore in ["apt-clean-here", "old-logs-here"] {
        w.dry_run_shown(chore);
    }

    let apt = real_run(&w, "apt-clean-here");
    assert!(files(&archives).is_empty(), "{apt}");
    let old = real_run(&w, "old-logs-here");
    assert_eq!(files(&log), vec!["syslog".to_string()], "{old}");
    let quarantined = files(&quarantine);
    assert_eq!(quarantined.len(), 4, "{quarantined:?}");

    // Undo puts back what each run moved; the quarantined copies stay.
    undo(&w, undo_id(&old));
    undo(&w, undo_id(&apt));
    assert_eq!(files(&archives), archives_before);
    assert_eq!(files(&log), log_before);
    assert_eq!(
        std::fs::read(archives.join("a_1.0_amd64.deb")).unwrap(),
        b"deb a"
    );
    assert_eq!(files(&quarantine), quarantined);
}

#[test]
fn a_red_run_emptying_the_quarantine_says_undo_cannot_put_it_back() {
    let name = "adv-prod-quarantine";
    let root = std::env::temp_dir().join(format!("aromba-{name}-{}", std::process::id()));
    let quarantine = Layout::rooted(&root).quarantine_dir;
    let chore = support::owner_chore(
        "empty-quarantine",
        "red",
        &format!("# touches: {}\n", quarantine.display()),
        &format!(
            "[ \"$1\" = --dry-run ] && exit 0\nrm -r {}/apt-clean-1\necho x > TOUCHED/x",
            quarantine.display()
        ),
    );
    let w = Warden::start(name, false, &[chore]);
    std::fs::create_dir_all(quarantine.join("apt-clean-1")).unwrap();
    std::fs::write(quarantine.join("apt-clean-1/kept.deb"), "deb").unwrap();
    w.set_pin_and_prod_mode_on(PIN);
    w.dry_run_shown("empty-quarantine");
    let receipt = real_run(&w, "empty-quarantine");
    assert!(!quarantine.join("apt-clean-1").exists(), "{receipt}");
    assert!(
        receipt.contains(
            "2 paths the quarantine held before were removed or changed: undo cannot put them back"
        ),
        "{receipt}"
    );
    assert!(w.journal().contains("undo cannot put them back"));
}
