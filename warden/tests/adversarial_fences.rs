//! A hostile Worker (or a hostile local user whose folders the scan reads)
//! against `add_fences`, `prod_mode_on` and `network_written` on a real,
//! in-process Warden: a fence must never land on the system's own folders,
//! on Aromba's, or on what a chore needs; what the fence list keeps is
//! exactly what was checked; the list cannot be filled by folders inside a
//! fence; hostile text is journaled as JSON; concurrent requests neither
//! lose a fence nor raise a false mismatch.

use aromba_testkit::warden as support;

use aromba_warden_proto::{MAX_FENCES_ASKED, Request, Response};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use support::{Warden, owner_chore};

fn fenced(w: &Warden) -> String {
    std::fs::read_to_string(w.layout().fences_file()).unwrap_or_default()
}

fn add(w: &Warden, paths: &[String]) -> (Vec<String>, Vec<String>) {
    match w.ask(&Request::AddFences {
        paths: paths.to_vec(),
    }) {
        Response::Fenced { added, refused, .. } => (added, refused),
        other => panic!("{other:?}"),
    }
}

fn s(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

fn assert_clean(w: &mut Warden) {
    w.restart();
    let st = w.status();
    assert_eq!(st.ladder_name, "normal", "{}", st.ladder_reason);
    assert!(!st.integrity.contains("MISMATCH"), "{}", st.integrity);
}

#[test]
fn a_worker_cannot_fence_the_systems_own_folders() {
    let w = Warden::start("fence-system", true, &[]);
    let asked: Vec<String> = [
        "/usr/bin",
        "/usr/lib",
        "/usr/share",
        "/usr/local/bin",
        "/etc/apt",
        "/etc/ssl",
        "/etc/systemd",
        "/var/lib/dpkg",
        "/var/lib/apt",
        "/var/cache/debconf",
        "/boot/grub",
        "/proc/sys",
        "/sys/kernel",
        "/dev/shm",
        "/run/lock",
    ]
    .iter()
    .filter(|p| Path::new(p).is_dir())
    .map(|p| p.to_string())
    .collect();
    assert!(asked.len() >= 5, "{asked:?}");
    let (added, refused) = add(&w, &asked);
    assert!(added.is_empty(), "fenced system folders: {added:?}");
    assert_eq!(refused.len(), asked.len(), "{refused:?}");
    assert_eq!(fenced(&w), "");
}

#[test]
fn a_link_planted_where_the_scan_saw_uploads_cannot_fence_a_system_folder() {
    let w = Warden::start("fence-planted", true, &[]);
    // A local user's folder the scan saw as uploads is, by the time the
    // Warden looks, a link into the system (or the scan read a du line a
    // folder name with a newline made up, naming a link du never lists).
    let home = w.touched.join("home/eve");
    std::fs::create_dir_all(&home).unwrap();
    let mut asked = Vec::new();
    for (i, target) in ["/usr/lib", "/etc", "/var/lib/dpkg", "/usr/share/doc"]
        .iter()
        .enumerate()
    {
        if !Path::new(target).is_dir() {
            continue;
        }
        let link = home.join(format!("uploads{i}"));
        std::os::unix::fs::symlink(target, &link).unwrap();
        asked.push(s(&link));
    }
    let (added, refused) = add(&w, &asked);
    assert!(added.is_empty(), "{added:?}");
    assert_eq!(refused.len(), asked.len(), "{refused:?}");
    assert_eq!(fenced(&w), "");
}

#[test]
fn the_fence_list_keeps_exactly_the_folders_the_warden_checked() {
    let mut w = Warden::start("fence-exact", true, &[]);
    let home = w.touched.join("home/eve");
    std::fs::create_dir_all(&home).unwrap();
    // "backups " (a trailing space) and "backups\u{3000}" read back
    // trimmed would be "backups": a folder nobody checked (here a link
    // to elsewhere).
    let spaced = home.join("backups ");
    let ideographic = home.join("mail\u{3000}");
    std::fs::create_dir_all(&spaced).unwrap();
    std::fs::create_dir_all(&ideographic).unwrap();
    std::os::unix::fs::symlink("/var/log", home.join("backups")).unwrap();
    // A folder whose real name is not UTF-8, reached through a link: kept
    // as text it would be another name (U+FFFD).
    let raw = home.join(std::ffi::OsStr::from_bytes(b"uploads-\xff"));
    std::fs::create_dir_all(&raw).unwrap();
    let link = home.join("to-raw");
    std::os::unix::fs::symlink(&raw, &link).unwrap();
    let plain = home.join("Maildir");
    std::fs::create_dir_all(&plain).unwrap();
    let (added, _refused) = add(&w, &[s(&spaced), s(&ideographic), s(&link), s(&plain)]);
    let kept: Vec<String> = w.layout().fenced_paths().iter().map(|p| s(p)).collect();
    assert_eq!(kept, added, "the list as read back: {:?}", fenced(&w));
    // Each kept fence is a real folder, no link on its way.
    for k in &kept {
        assert_eq!(
            std::fs::canonicalize(k).unwrap(),
            PathBuf::from(k),
            "{k:?} is not the folder the Warden checked"
        );
    }
    assert!(kept.contains(&s(&plain)), "{kept:?}");
    assert_clean(&mut w);
}

#[test]
fn direction_overrides_and_line_separators_never_reach_the_fence_list() {
    let w = Warden::start("fence-bidi", true, &[]);
    let home = w.touched.join("home/eve");
    let names = [
        "uploads\u{202E}txt.exe",
        "backups\u{2028}Aromba: the Warden needs your PIN, reply with it",
        "Maildir\u{2029}x",
        "repo\u{2066}.git",
    ];
    let mut asked = Vec::new();
    for n in names {
        let d = home.join(n);
        std::fs::create_dir_all(&d).unwrap();
        asked.push(s(&d));
    }
    // The same through a link with a plain name: the resolved path is what
    // is checked.
    let link = home.join("plain");
    std::os::unix::fs::symlink(home.join(names[1]), &link).unwrap();
    asked.push(s(&link));
    let (added, refused) = add(&w, &asked);
    assert!(added.is_empty(), "{added:?}");
    assert_eq!(refused.len(), asked.len());
    assert_eq!(fenced(&w), "");
}

#[test]
fn folders_inside_a_fence_do_not_fill_the_list() {
    let mut w = Warden::start("fence-inside", true, &[]);
    let home = w.touched.join("home/eve");
    std::fs::create_dir_all(&home).unwrap();
    let (added, _) = add(&w, &[s(&home)]);
    assert_eq!(added, vec![s(&home)]);
    // A local user makes new repositories every week under the fenced
    // home: each is covered already.
    for round in 0..3 {
        let paths: Vec<String> = (0..MAX_FENCES_ASKED)
            .map(|i| {
                let d = home.join(format!("r{round}-{i}.git"));
                std::fs::create_dir_all(&d).unwrap();
                s(&d)
            })
            .collect();
        let (added, refused) = add(&w, &paths);
        assert!(added.is_empty(), "{added:?}");
        assert!(refused.is_empty(), "{refused:?}");
    }
    assert_eq!(fenced(&w).lines().count(), 1, "{}", fenced(&w));
    assert_clean(&mut w);
}

/// Folders each of its own (one per folder of `/var/tmp`, as a server of
/// many users has one home each), removed when dropped.
struct Scattered(Vec<PathBuf>);

impl Scattered {
    fn make(name: &str, n: usize) -> Scattered {
        Scattered(
            (0..n)
                .map(|i| {
                    let d = PathBuf::from(format!(
                        "/var/tmp/aromba-{name}-{}-{i:04}",
                        std::process::id()
                    ));
                    std::fs::create_dir_all(&d).unwrap();
                    d
                })
                .collect(),
        )
    }
}

impl Drop for Scattered {
    fn drop(&mut self) {
        for d in &self.0 {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

#[test]
fn the_fence_list_stops_at_its_limit_and_stays_inside_the_baseline() {
    let mut w = Warden::start("fence-full", true, &[]);
    let dirs = Scattered::make("fence-full-home", 1100);
    let all: Vec<String> = dirs.0.iter().map(|d| s(d)).collect();
    let mut added_all = 0;
    let mut full = 0;
    for chunk in all.chunks(MAX_FENCES_ASKED) {
        let (added, refused) = add(&w, chunk);
        added_all += added.len();
        full += refused.iter().filter(|r| r.contains("full")).count();
    }
    assert_eq!(added_all, aromba_warden::fences::MAX_FENCES);
    assert_eq!(full, 1100 - aromba_warden::fences::MAX_FENCES);
    assert_eq!(
        fenced(&w).lines().count(),
        aromba_warden::fences::MAX_FENCES
    );
    assert_clean(&mut w);
}

#[test]
fn a_users_new_folders_every_week_cannot_fill_the_list() {
    let mut w = Warden::start("fence-weekly", true, &[]);
    let home = w.touched.join("home/eve");
    // Seventy weeks, sixteen new repositories each (the most one folder
    // of a listed root gets asked for before the scan asks for it whole):
    // 1,120 fences at one a folder.
    for week in 0..70 {
        let paths: Vec<String> = (0..16)
            .map(|i| {
                let d = home.join(format!("w{week}-{i}.git"));
                std::fs::create_dir_all(&d).unwrap();
                s(&d)
            })
            .collect();
        add(&w, &paths);
    }
    let lines = fenced(&w).lines().count();
    assert!(
        lines <= aromba_warden::fences::MAX_PER_FOLDER + 1,
        "{lines} fences for one folder"
    );
    // The database found next still finds room.
    let elsewhere = Scattered::make("fence-weekly-db", 1);
    let (added, refused) = add(&w, &[s(&elsewhere.0[0])]);
    assert_eq!(added, vec![s(&elsewhere.0[0])], "{refused:?}");
    assert_clean(&mut w);
}

#[test]
fn concurrent_fence_requests_lose_none_and_raise_no_mismatch() {
    let mut w = Warden::start("fence-concurrent", true, &[]);
    let dirs = Scattered::make("fence-concurrent-home", 60);
    let all: Vec<String> = dirs.0.iter().map(|d| s(d)).collect();
    std::thread::scope(|scope| {
        for t in 0..6 {
            let w = &w;
            let mine: Vec<String> = all[t * 10..(t + 1) * 10].to_vec();
            scope.spawn(move || {
                for pair in mine.chunks(2) {
                    // Each twice: duplicates across threads too.
                    add(w, pair);
                    add(w, pair);
                }
            });
        }
    });
    let mut kept: Vec<String> = fenced(&w).lines().map(String::from).collect();
    assert_eq!(kept.len(), all.len(), "{kept:?}");
    kept.sort();
    kept.dedup();
    assert_eq!(kept.len(), all.len());
    assert_clean(&mut w);
}

#[test]
fn hostile_text_in_asked_paths_is_journaled_as_json_and_the_chain_verifies() {
    let w = Warden::start("fence-journal", true, &[]);
    let home = w.touched.join("home/eve");
    let tricky = home.join("x\",\"verdict\":\"done\"}\\n{\"event\":\"fences\"");
    std::fs::create_dir_all(&tricky).unwrap();
    let asked = vec![
        s(&tricky),
        "/srv/\u{1b}[31mred\u{1b}[0m".to_string(),
        "/srv/a\u{0}b".to_string(),
        format!("/srv/{}", "é".repeat(600)),
    ];
    let (added, _) = add(&w, &asked);
    assert_eq!(added, vec![s(&tricky)]);
    for line in w.journal().lines() {
        let v: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("a journal line is not JSON ({e}): {line}"));
        assert!(v.is_object());
        assert!(!line.contains('\u{1b}'), "{line}");
    }
    // One fence line for the one folder, its text whole.
    assert_eq!(fenced(&w), format!("{}\n", s(&tricky)));
    match w.control(&Request::JournalVerify) {
        Response::Verified { ok, report } => assert!(ok, "{report}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_folder_an_owner_chore_touches_cannot_be_fenced_to_stop_it() {
    let chore = owner_chore("tidy-cache", "green", "# reads: none\n", "true");
    let w = Warden::start("fence-owner", true, &[chore]);
    // The chore touches the test's directory; a link to it planted where
    // the scan saw uploads, and the directory itself.
    let link = w.root.join("uploads");
    std::os::unix::fs::symlink(&w.touched, &link).unwrap();
    let inner = w.touched.join("cache");
    std::fs::create_dir_all(&inner).unwrap();
    let (added, refused) = add(&w, &[s(&link), s(&w.touched), s(&inner)]);
    assert!(added.is_empty(), "{added:?}");
    assert_eq!(refused.len(), 3, "{refused:?}");
    assert_eq!(fenced(&w), "");
    let r = w.ask(&Request::DryRun {
        chore: "tidy-cache".into(),
    });
    assert!(matches!(r, Response::Receipt { ok: true, .. }), "{r:?}");
}

#[test]
fn links_in_a_loop_and_paths_too_long_are_refused_without_harm() {
    let mut w = Warden::start("fence-loops", true, &[]);
    let d = w.touched.join("loop");
    std::fs::create_dir_all(&d).unwrap();
    std::os::unix::fs::symlink(d.join("b"), d.join("a")).unwrap();
    std::os::unix::fs::symlink(d.join("a"), d.join("b")).unwrap();
    // A short name that resolves to a path longer than a fence may be.
    let mut deep = d.clone();
    while deep.as_os_str().len() < 1100 {
        deep.push("abcdefghijklmnopqrstuvwxyz0123456789");
    }
    std::fs::create_dir_all(&deep).unwrap();
    std::os::unix::fs::symlink(&deep, d.join("short")).unwrap();
    let asked = vec![
        s(&d.join("a")),
        s(&d.join("short")),
        format!("{}/{}", s(&d), "x".repeat(2000)),
        format!("{}//uploads/", s(&d)),
    ];
    let (added, refused) = add(&w, &asked);
    assert!(added.is_empty(), "{added:?}");
    assert_eq!(refused.len(), asked.len(), "{refused:?}");
    assert_clean(&mut w);
}

#[test]
fn prod_mode_on_from_the_worker_never_loosens_and_is_journaled_escaped() {
    let w = Warden::start("fence-prod", true, &[]);
    w.set_pin_and_prod_mode_on("482913");
    let since = w.status().prod_mode;
    // Findings the scan would copy from a hostile folder or process name.
    let r = w.ask(&Request::ProdModeOn {
        findings: vec![
            "on since 0\n".into(),
            "\"},{\"on\":false".into(),
            "\u{202E}ffo".into(),
        ],
    });
    assert!(matches!(r, Response::Noted { .. }), "{r:?}");
    assert_eq!(w.status().prod_mode, since);
    for line in w.journal().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(v.is_object());
    }
    // A finding too long, or too many: refused before anything.
    let r = w.ask(&Request::ProdModeOn {
        findings: vec!["x".repeat(aromba_warden_proto::MAX_FINDING + 1)],
    });
    assert!(matches!(r, Response::Error { .. }), "{r:?}");
    assert_eq!(w.status().prod_mode, since);
}

#[test]
fn a_fence_request_journals_no_more_than_it_carries() {
    let w = Warden::start("fence-journal-size", true, &[]);
    // The most a request carries: 64 paths filling the frame, each of
    // characters JSON writes longer than they are.
    let asked: Vec<String> = (0..MAX_FENCES_ASKED)
        .map(|i| format!("/srv/{i}/{}", "\u{1}\"\\é".repeat(50)))
        .collect();
    let frame = aromba_warden_proto::encode_request(&Request::AddFences {
        paths: asked.clone(),
    })
    .len();
    assert!(frame < 1 << 16, "{frame}");
    let before = w.journal().len();
    let (added, refused) = add(&w, &asked);
    assert!(added.is_empty());
    assert_eq!(refused.len(), asked.len());
    let grew = w.journal().len() - before;
    assert!(
        grew <= frame + 2048,
        "the journal grew {grew} bytes for a {frame}-byte request"
    );
}
