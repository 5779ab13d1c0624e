//! Adversarial tests of the catalogue skills and of `make_writes`, through
//! a real Warden as the tests start it: a local user shaping the paths a
//! skill's writes are made at, hostile sites for `certs-expiry`, escaping
//! repository values for `restic-backup`, and a hostile nginx error log.
//! Each asserts the safe behaviour.

use aromba_testkit::catalogue::{self, Made, install, set, with_hosts};
use aromba_testkit::skills::{Publisher, bundle_file, chore, manifest, tls_site};
use aromba_testkit::warden::Warden;
use aromba_warden::server::ServeOptions;
use aromba_warden_proto::{Request, Response};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const PASSWORD: &str = "adv-repository-password-93";

// ---------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------

/// A scratch folder of root's (0755) under /var/lib, whose every ancestor
/// is root's and not writable by others; removed at the end (without
/// following links).
struct Scratch(PathBuf);

impl Scratch {
    fn new(case: &str) -> Scratch {
        let p = PathBuf::from(format!("/var/lib/aromba-adv-{}-{case}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir(&p).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        Scratch(p)
    }
    fn dir(&self, name: &str, uid: u32, mode: u32) -> PathBuf {
        let d = self.0.join(name);
        std::fs::create_dir(&d).unwrap();
        std::os::unix::fs::chown(&d, Some(uid), Some(uid)).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(mode)).unwrap();
        d
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A folder the test made only if absent, removed at the end.
fn text_of(r: &Response) -> (bool, String) {
    match r {
        Response::Receipt {
            ok,
            receipt,
            stdout,
            stderr,
        } => (
            *ok,
            format!(
                "{receipt}\n{}{}",
                String::from_utf8_lossy(stdout),
                String::from_utf8_lossy(stderr)
            ),
        ),
        other => (false, format!("{other:?}")),
    }
}

fn run(w: &Warden, name: &str, dry_run: bool) -> (bool, String) {
    text_of(&w.control(&Request::ChoreRun {
        name: name.into(),
        dry_run,
    }))
}

/// Runs `name` on a thread and gives up (panics) after `secs`: a hang guard.
fn run_guarded(w: &Arc<Warden>, name: &str, dry_run: bool, secs: u64) -> (bool, String) {
    let (tx, rx) = std::sync::mpsc::channel();
    let w2 = w.clone();
    let name = name.to_string();
    std::thread::spawn(move || {
        let _ = tx.send(run(&w2, &name, dry_run));
    });
    rx.recv_timeout(std::time::Duration::from_secs(secs))
        .expect("the chore did not end: hang")
}

// ---------------------------------------------------------------------------
// make_writes
// ---------------------------------------------------------------------------

/// Installs skill `mw` (test publisher) writing `writes`, with chore
/// `mw-run` that, on a real run, writes a file into it.
fn writes_skill(w: &Warden, writes: &Path) {
    let acme = Publisher::new("acme-adv");
    acme.trust(w);
    let m = manifest("mw", "1.0.0", "acme-adv", writes, &["mw-run"]);
    let script = chore(
        "mw-run",
        "green",
        writes,
        "",
        &format!(
            "[ \"$1\" = --dry-run ] && exit 0\necho planted > {}/written",
            writes.display()
        ),
    );
    let path = bundle_file(w, "mw", &acme.bundle(m, &[("chores/mw-run.sh", &script)]));
    let r = w.control(&Request::SkillCheck { path: path.clone() });
    let Response::SkillShown { sha256, .. } = r else {
        panic!("not shown: {r:?}");
    };
    let r = w.control(&Request::SkillInstall {
        path,
        sha256,
        pin: None,
    });
    assert!(matches!(r, Response::Noted { .. }), "{r:?}");
}

/// Dry run, and if it went, the real run: what each said.
fn both_runs(w: &Warden) -> String {
    let (ok, dry) = run(w, "mw-run", true);
    if !ok {
        return dry;
    }
    let shown = w.ask(&Request::DryRunShown {
        chore: "mw-run".into(),
    });
    let (_, real) = run(w, "mw-run", false);
    format!("{dry}\n{shown:?}\n{real}")
}

#[test]
fn make_writes_creates_an_absent_folder_under_root_owned_parents_0700() {
    let s = Scratch::new("ok");
    let w = Warden::start("adv-mw-ok", true, &[]);
    let target = s.0.join("made");
    writes_skill(&w, &target);
    let out = both_runs(&w);
    let meta = std::fs::symlink_metadata(&target).expect(&out);
    assert!(
        meta.is_dir() && meta.uid() == 0 && meta.mode() & 0o777 == 0o700,
        "{out}"
    );
}

#[test]
fn make_writes_refuses_under_a_parent_a_local_user_owns() {
    let s = Scratch::new("userparent");
    let user = s.dir("user", 1000, 0o755);
    let target = user.join("w");
    let w = Warden::start("adv-mw-user", true, &[]);
    let ladder = w.ladder();
    writes_skill(&w, &target);
    let out = both_runs(&w);
    assert!(
        !target.exists(),
        "root made {} in a user's folder: {out}",
        target.display()
    );
    assert!(out.contains("cannot be made"), "{out}");
    assert_eq!(w.ladder(), ladder, "{out}");
}

#[test]
fn make_writes_refuses_under_a_group_writable_parent() {
    let s = Scratch::new("groupw");
    let gw = s.dir("gw", 0, 0o775);
    let target = gw.join("w");
    let w = Warden::start("adv-mw-gw", true, &[]);
    writes_skill(&w, &target);
    let out = both_runs(&w);
    assert!(!target.exists(), "{out}");
    assert!(out.contains("cannot be made"), "{out}");
}

#[test]
fn make_writes_refuses_a_parent_that_is_a_symlink_and_makes_nothing_where_it_points() {
    let s = Scratch::new("linkparent");
    let real = s.dir("real", 0, 0o755);
    std::os::unix::fs::symlink(&real, s.0.join("link")).unwrap();
    let target = s.0.join("link").join("w");
    let w = Warden::start("adv-mw-lp", true, &[]);
    writes_skill(&w, &target);
    let out = both_runs(&w);
    assert!(!real.join("w").exists(), "root followed the link: {out}");
    assert!(out.contains("cannot be made"), "{out}");
}

#[test]
fn make_writes_with_the_path_pre_made_as_a_symlink_to_a_root_folder_writes_nothing_there() {
    let s = Scratch::new("linkw");
    let user = s.dir("user", 1000, 0o755);
    let victim = s.dir("victim", 0, 0o755);
    let target = user.join("w");
    std::os::unix::fs::symlink(&victim, &target).unwrap();
    let w = Warden::start("adv-mw-lw", true, &[]);
    let ladder = w.ladder();
    writes_skill(&w, &target);
    let out = both_runs(&w);
    assert!(
        !victim.join("written").exists(),
        "the chore wrote through a user's link into a root folder: {out}"
    );
    assert!(
        std::fs::symlink_metadata(&target)
            .unwrap()
            .file_type()
            .is_symlink(),
        "{out}"
    );
    let _ = ladder;
}

#[test]
fn make_writes_with_the_path_pre_made_as_a_dangling_symlink_makes_nothing_where_it_points() {
    let s = Scratch::new("dangling");
    let user = s.dir("user", 1000, 0o755);
    let nowhere = s.0.join("nowhere");
    let target = user.join("w");
    std::os::unix::fs::symlink(&nowhere, &target).unwrap();
    let w = Warden::start("adv-mw-dl", true, &[]);
    writes_skill(&w, &target);
    let out = both_runs(&w);
    assert!(
        !nowhere.exists(),
        "root made the folder a user's link pointed at: {out}"
    );
}

#[test]
fn make_writes_with_the_path_pre_made_as_a_file_leaves_the_file_alone() {
    let s = Scratch::new("file");
    let user = s.dir("user", 1000, 0o755);
    let target = user.join("w");
    std::fs::write(&target, "the user's file\n").unwrap();
    std::os::unix::fs::chown(&target, Some(1000), Some(1000)).unwrap();
    let w = Warden::start("adv-mw-file", true, &[]);
    writes_skill(&w, &target);
    let out = both_runs(&w);
    let meta = std::fs::symlink_metadata(&target).unwrap();
    assert!(meta.is_file() && meta.uid() == 1000, "{out}");
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "the user's file\n",
        "{out}"
    );
}

#[test]
fn make_writes_race_a_user_flipping_the_path_between_absent_and_a_symlink_never_gets_root_to_write_there()
 {
    let s = Scratch::new("race");
    let user = s.dir("user", 1000, 0o755);
    let victim = s.dir("victim", 0, 0o755);
    let nowhere = s.0.join("nowhere");
    let target = user.join("w");
    let w = Warden::start("adv-mw-race", true, &[]);
    writes_skill(&w, &target);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flipper = {
        let (stop, target, victim, nowhere) = (
            stop.clone(),
            target.clone(),
            victim.clone(),
            nowhere.clone(),
        );
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let _ = std::fs::remove_file(&target);
                let to = if i.is_multiple_of(2) {
                    &victim
                } else {
                    &nowhere
                };
                let _ = std::os::unix::fs::symlink(to, &target);
                i += 1;
                std::thread::yield_now();
                let _ = std::fs::remove_file(&target);
            }
        })
    };
    let mut outs = Vec::new();
    for _ in 0..6 {
        outs.push(both_runs(&w));
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    flipper.join().unwrap();
    let outs = outs.join("\n----\n");
    assert!(!victim.join("written").exists(), "{outs}");
    assert!(!nowhere.exists(), "{outs}");
    if let Ok(m) = std::fs::symlink_metadata(&target) {
        assert!(
            !(m.is_dir() && m.uid() == 0),
            "root made a folder in a user's folder: {outs}"
        );
    }
}

// ---------------------------------------------------------------------------
// certs-expiry against hostile sites
// ---------------------------------------------------------------------------

fn certs_options(o: &mut ServeOptions) {
    with_hosts(
        o,
        &[
            ("notls.example.org", "127.0.0.8"),
            ("silent.example.org", "127.0.0.9"),
            ("far.example.org", "127.0.0.10"),
            ("today.example.org", "127.0.0.11"),
            ("s3.example.org", "127.0.0.12"),
        ],
    );
}

fn started(name: &str) -> Warden {
    catalogue::started(name, certs_options)
}

/// A "site" that speaks no TLS: answers plain HTTP and closes.
fn plain_site(addr: &str) {
    let l = std::net::TcpListener::bind(addr).unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            use std::io::Write;
            let _ = s.write_all(b"HTTP/1.0 200 OK\r\n\r\n-----BEGIN CERTIFICATE-----\nnot one\n-----END CERTIFICATE-----\nnotAfter=Jan  1 00:00:00 2999 GMT\n");
        }
    });
}

/// A "site" that accepts and never says anything, nor closes.
fn silent_site(addr: &str) {
    let l = std::net::TcpListener::bind(addr).unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in l.incoming().flatten() {
            held.push(s);
        }
    });
}

fn certs_check(w: &Arc<Warden>, site: &str) -> (bool, String) {
    set(w, "certs", "SITE", site);
    let (ok, dry) = run(w, "certs-expiry", true);
    assert!(ok, "{dry}");
    w.dry_run_shown("certs-expiry");
    let ladder = w.ladder();
    let (ok, out) = run_guarded(w, "certs-expiry", false, 240);
    assert!(!out.contains("outside its touches"), "{out}");
    assert_eq!(w.ladder(), ladder, "the ladder moved: {out}");
    (ok, out)
}

#[test]
fn certs_expiry_against_hostile_sites_no_tls_silent_far_future_and_shell_metachar_name() {
    let _made = Made::if_absent("/var/lib/aromba-certs");
    plain_site("127.0.0.8:443");
    silent_site("127.0.0.9:443");
    let pwn = format!("/tmp/aromba-adv-pwn-{}", std::process::id());
    tls_site(
        "127.0.0.10:443".parse().unwrap(),
        &format!("x$(touch {pwn})`touch {pwn}`;touch {pwn}"),
        2_900_000,
    );
    let w = Arc::new(started("adv-certs"));
    install(&w, "certs");

    // No TLS at all: said so, failed, nothing forged from the plain text.
    let (ok, out) = certs_check(&w, "notls.example.org");
    assert!(!ok, "{out}");
    assert!(
        out.contains("notls.example.org did not show a certificate on port 443"),
        "{out}"
    );
    assert!(!out.contains("2999"), "{out}");

    // Never answers: ends (its own 30 s timeout), said so.
    let (ok, out) = certs_check(&w, "silent.example.org");
    assert!(!ok, "{out}");
    assert!(
        out.contains("silent.example.org did not show a certificate on port 443"),
        "{out}"
    );

    // A notAfter ~8000 years ahead, and a name full of shell: read, right.
    let (ok, out) = certs_check(&w, "far.example.org");
    assert!(ok, "{out}");
    assert!(
        out.contains("far.example.org's certificate is good for 2899999 more days"),
        "{out}"
    );
    assert!(!out.contains("touch"), "{out}");
    assert!(!Path::new(&pwn).exists(), "the name was run");
    let expiry = std::fs::read_to_string("/var/lib/aromba-certs/expiry").unwrap_or_default();
    assert!(
        expiry.starts_with("far.example.org's certificate is good"),
        "{expiry}"
    );
}

#[test]
fn certs_expiry_of_a_certificate_that_expired_earlier_today_says_expired_not_expires_in_0_days() {
    let _made = Made::if_absent("/var/lib/aromba-certs");
    // notAfter is today 00:00:00 UTC: already past (unless run at midnight).
    tls_site("127.0.0.11:443".parse().unwrap(), "today.example.org", 0);
    let w = Arc::new(started("adv-certs-today"));
    install(&w, "certs");
    let (ok, out) = certs_check(&w, "today.example.org");
    assert!(!ok, "{out}");
    assert!(
        out.contains("today.example.org's certificate expired on"),
        "an expired certificate is reported as one that still expires: {out}"
    );
}

// ---------------------------------------------------------------------------
// restic-backup repository values
// ---------------------------------------------------------------------------

fn restic_warden(name: &str) -> Warden {
    let w = started(name);
    install(&w, "restic-backup");
    set(&w, "restic-backup", "S3_HOST", "s3.example.org");
    set(&w, "restic-backup", "RESTIC_PASSWORD", PASSWORD);
    set(
        &w,
        "restic-backup",
        "AWS_ACCESS_KEY_ID",
        "AKIA-ADV-NOT-USED",
    );
    set(
        &w,
        "restic-backup",
        "AWS_SECRET_ACCESS_KEY",
        "adv-secret-not-used-1",
    );
    w
}

#[test]
fn restic_repository_relative_or_at_another_host_is_refused_in_words_before_restic_runs() {
    let _made = Made::if_absent("/var/cache/aromba-restic");
    let w = restic_warden("adv-restic-words");
    for repo in [
        "var/cache/aromba-restic/x",
        "aromba-restic/x",
        "./x",
        "s3:https://s3.example.org.evil.org/bucket",
        "s3:https://evil.org/s3.example.org/bucket",
        "s3:http://s3.example.org/bucket",
        "rclone:s3.example.org/bucket",
        "/var/cache/aromba-restic",
    ] {
        set(&w, "restic-backup", "RESTIC_REPOSITORY", repo);
        for dry in [true, false] {
            let (ok, out) = run(&w, "restic-backup", dry);
            assert!(!ok, "{repo}: {out}");
            if dry {
                assert!(
                    out.contains("RESTIC_REPOSITORY must be s3:https://s3.example.org/BUCKET"),
                    "{repo}: {out}"
                );
            }
            assert!(!out.contains(PASSWORD), "{repo}: {out}");
        }
    }
    assert!(!w.journal().contains(PASSWORD));
}

#[test]
fn restic_repository_dotdot_escape_is_refused_in_words_and_never_trips_the_cage() {
    let _made = Made::if_absent("/var/cache/aromba-restic");
    let escape = format!("/var/cache/aromba-adv-escape-{}", std::process::id());
    let _gone = Made::if_absent(&escape);
    let w = restic_warden("adv-restic-dotdot");
    let ladder = w.ladder();
    let repo = format!(
        "/var/cache/aromba-restic/../aromba-adv-escape-{}",
        std::process::id()
    );
    set(&w, "restic-backup", "RESTIC_REPOSITORY", &repo);
    let (ok, dry) = run(&w, "restic-backup", true);
    let mut real = String::new();
    if ok {
        // The script let it through: the owner, told "would back up",
        // runs it for real.
        w.dry_run_shown("restic-backup");
        real = run(&w, "restic-backup", false).1;
    }
    let all = format!("{dry}\n=== real run:\n{real}");
    assert!(!all.contains(PASSWORD), "{all}");
    assert!(
        !w.journal().contains(PASSWORD),
        "the password is in the journal"
    );
    assert!(
        !Path::new(&escape).exists(),
        "restic wrote outside its folder: {all}"
    );
    assert_eq!(
        w.ladder(),
        ladder,
        "the owner's mistaken repository moved the security ladder: {all}"
    );
    assert!(!all.contains("outside its touches"), "{all}");
    assert!(
        !ok && dry.contains("RESTIC_REPOSITORY must be"),
        "a repository outside /var/cache/aromba-restic is not refused in words: {all}"
    );
}

// ---------------------------------------------------------------------------
// nginx error log, hostile
// ---------------------------------------------------------------------------

#[test]
fn nginx_errors_with_a_hostile_error_log_stays_bounded_and_readable() {
    let log_dir = Path::new("/var/log/nginx");
    let made = Made::if_absent("/var/log/nginx");
    if made.0.is_none() {
        eprintln!("/var/log/nginx exists here: not touched, attack skipped");
        return;
    }
    std::fs::create_dir(log_dir).unwrap();
    let mut log: Vec<u8> = Vec::new();
    // The first bytes, which the header prints raw: escapes.
    log.extend_from_slice(b"\x1b[2J\x1b[H\x1b]0;owned\x07 [error] 1#1: cleared your screen\n");
    for i in 0..100_000u32 {
        log.extend_from_slice(format!(
            "2026/12/06 10:00:01 [error] 812#812: *{i} open() \"/var/www/html/\x1b[32mAll backups verified OK\x1b[0m\r\x1b]8;;https://evil.example/\x07click\x1b]8;;\x07\" failed (2: No such file or directory), client: 203.0.113.5, server: _, request: \"GET /\x1b[31m HTTP/1.1\"\n"
        ).as_bytes());
    }
    // Invalid UTF-8 and a 2 MB last line with no newline.
    log.extend_from_slice(b"2026/12/06 10:00:02 [crit] 1#1: \xff\xfe\xc3 bad bytes\n");
    log.extend_from_slice(b"\x1b[1A\x1b[2K2026/12/06 10:00:03 [emerg] 1#1: ");
    log.extend(std::iter::repeat_n(b'A', 2 << 20));
    std::fs::write(log_dir.join("error.log"), &log).unwrap();

    let w = started("adv-nginx");
    install(&w, "nginx");
    let r = match w.ask(&Request::SkillTool {
        skill: "nginx".into(),
        tool: "nginx-errors".into(),
    }) {
        Response::Result(r) => r,
        other => panic!("{other:?}"),
    };
    let out = String::from_utf8_lossy(&r.stdout).into_owned();
    assert!(!r.timed_out && !r.cut, "{r:?}");
    assert!(
        r.stdout.len() < 16 * 1024,
        "{} bytes:\n{out}",
        r.stdout.len()
    );
    assert!(out.starts_with("The last "), "{out}");
    let controls: Vec<u8> = r
        .stdout
        .iter()
        .copied()
        .filter(|&b| (b < 0x20 && b != b'\n') || b == 0x7f)
        .collect();
    assert!(
        controls.is_empty(),
        "the summary passes terminal control bytes {controls:?} from the log through:\n{out:?}"
    );
}
