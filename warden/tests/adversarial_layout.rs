//! The Warden's state once lived inside the Worker's home: the Worker
//! renamed the root-owned `warden/` aside (renaming needs write access to
//! the parent only) and put its own in its place — its own relay key, prod
//! mode off, a "verified" approval — and after a restart with no baseline
//! the Warden said "not installed" and ran unchecked. And `install` wrote,
//! chmodded and chowned in the Worker's home by path, following links: a
//! `quarantine` link made it chmod its target.
//!
//! Here the Worker is a test account that owns its home and configuration
//! directory; the test plants what it would plant there, as root (the
//! files get the Worker's ownership where the Worker would have made
//! them), and runs the real `install` and a real Warden (`Server::bind`).
//! A Warden directory made writable by others while the Warden runs is
//! found on the next integrity tick, and said once.

use aromba_testkit::warden as support;

use aromba_warden::install::{InstallOptions, Installed, install};
use aromba_warden::layout::Layout;
use aromba_warden::server::{ServeOptions, Server};
use aromba_warden_proto::{
    MAX_RESPONSE, Request, Response, decode_response, encode_request, read_frame, write_frame,
};
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use support::{Warden, lines_with};

const WORKER_UID: u32 = 4_242_301;
const WORKER_GID: u32 = 4_242_302;

/// A test root (root's, 0755) with the Worker's home and configuration
/// directory owned by the Worker, as `useradd -m` and a careless installer
/// would leave them.
struct Fixture {
    root: PathBuf,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn chown(p: &Path, uid: u32, gid: u32) {
    std::os::unix::fs::lchown(p, Some(uid), Some(gid)).unwrap();
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
}

fn set_mode(p: &Path, m: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
}

/// A file of root's that is not the Warden's to touch.
fn victim_file(p: &Path) {
    std::fs::write(p, "precious").unwrap();
    chown(p, 0, 0);
    set_mode(p, 0o644);
}

fn assert_victim_file_untouched(p: &Path) {
    let m = std::fs::symlink_metadata(p).unwrap();
    assert_eq!(
        std::fs::read_to_string(p).unwrap(),
        "precious",
        "{}",
        p.display()
    );
    assert_eq!(
        (m.uid(), m.gid(), m.mode() & 0o7777),
        (0, 0, 0o644),
        "{}",
        p.display()
    );
}

impl Fixture {
    fn new(name: &str) -> Fixture {
        let root =
            std::env::temp_dir().join(format!("aromba-advlayout-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("bin")).unwrap();
        set_mode(&root, 0o755);
        std::fs::copy("/bin/true", root.join("bin/aromba")).unwrap();
        let f = Fixture { root };
        let l = f.layout();
        for d in [&l.worker_home, &l.worker_config_dir] {
            std::fs::create_dir_all(d).unwrap();
            chown(d, WORKER_UID, WORKER_GID);
            set_mode(d, 0o755);
        }
        f
    }

    fn layout(&self) -> Layout {
        Layout::rooted(&self.root)
    }

    fn install(&self) -> std::io::Result<Installed> {
        install(&InstallOptions {
            layout: &self.layout(),
            warden_bin: Path::new("/proc/self/exe"),
            worker_bin: &self.root.join("bin/aromba"),
            worker_gid: WORKER_GID,
            clock: Arc::new(aromba_warden::ladder::SystemClock),
            telegram_key: None,
        })
    }

    fn options(&self) -> ServeOptions {
        let mut o = ServeOptions::new(self.layout(), WORKER_UID, WORKER_GID);
        o.watch_network = false;
        o
    }

    /// Why the Warden refused to start; panics if it started.
    fn refused_start(&self) -> String {
        match Server::bind(self.options()) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("the Warden started"),
        }
    }

    /// A directory of root's beside the test root, for links to point at.
    fn victim_dir(&self, name: &str) -> PathBuf {
        let d = self.root.join(name);
        std::fs::create_dir_all(&d).unwrap();
        set_mode(&d, 0o750);
        d
    }
}

fn ask(socket: &Path, r: &Request) -> Response {
    let mut s = UnixStream::connect(socket).unwrap();
    write_frame(&mut s, &encode_request(r), 1 << 16).unwrap();
    decode_response(&read_frame(&mut s, MAX_RESPONSE).unwrap()).unwrap()
}

#[test]
fn a_quarantine_link_planted_in_the_workers_home_is_never_chmodded_by_install() {
    let f = Fixture::new("quarantine-link");
    let target = f.victim_dir("target");
    set_mode(&target, 0o755);
    let planted = f.layout().worker_home.join("quarantine");
    symlink(&target, &planted).unwrap();
    chown(&planted, WORKER_UID, WORKER_GID);
    f.install().expect("install");
    assert_eq!(mode(&target), 0o755, "install changed the link's target");
    assert!(
        std::fs::symlink_metadata(&planted)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    // The quarantine is the Warden's, in its own tree.
    let q = f.root.join("quarantine");
    let m = std::fs::symlink_metadata(&q).unwrap();
    assert!(m.is_dir() && m.uid() == 0 && mode(&q) == 0o700);
}

#[test]
fn a_quarantine_link_in_the_wardens_tree_makes_install_refuse() {
    let f = Fixture::new("quarantine-warden-link");
    let target = f.victim_dir("target");
    symlink(&target, f.root.join("quarantine")).unwrap();
    let e = f.install().expect_err("install went on");
    assert!(e.to_string().contains("symbolic link"), "{e}");
    assert_eq!(mode(&target), 0o750);
}

#[test]
fn honeypot_links_planted_by_the_worker_are_replaced_never_written_through() {
    let f = Fixture::new("pot-links");
    let l = f.layout();
    // A clean install first, as the Worker would find it.
    f.install().expect("install");
    // The Worker renames .aws aside and puts its own in its place with a
    // link where the honeypot goes; links at the other two as well.
    let aws = l.worker_home.join(".aws");
    std::fs::rename(&aws, l.worker_home.join(".aws-aside")).unwrap();
    std::fs::create_dir(&aws).unwrap();
    chown(&aws, WORKER_UID, WORKER_GID);
    let pots = l.honeypots();
    let mut victims = Vec::new();
    for (i, pot) in pots.iter().enumerate() {
        let victim = f.root.join(format!("victim-{i}"));
        victim_file(&victim);
        let _ = std::fs::remove_file(pot);
        symlink(&victim, pot).unwrap();
        chown(pot, WORKER_UID, WORKER_GID);
        victims.push(victim);
    }
    f.install().expect("install again");
    for (pot, victim) in pots.iter().zip(&victims) {
        assert_victim_file_untouched(victim);
        let m = std::fs::symlink_metadata(pot).unwrap();
        assert!(m.is_file(), "{} is not a file of its own", pot.display());
        assert_eq!(
            (m.uid(), m.gid(), m.mode() & 0o7777),
            (0, WORKER_GID, 0o640)
        );
    }
    // The Worker's own directory keeps its owner: root made nothing of it.
    assert_eq!(std::fs::symlink_metadata(&aws).unwrap().uid(), WORKER_UID);
}

/// Install is the documented recovery from Disarm: a link the Worker
/// planted on the way to a honeypot must not stop it (it did), and nothing
/// is written through the link.
#[test]
fn a_honeypot_directory_replaced_by_a_link_is_skipped_and_nothing_is_written_through_it() {
    for which in [".aws", ".ssh", "worker config"] {
        let f = Fixture::new(&format!("pot-dir-{}", which.replace(' ', "-")));
        let l = f.layout();
        let target = f.victim_dir("target");
        let at = match which {
            "worker config" => l.worker_config_dir.clone(),
            dot => l.worker_home.join(dot),
        };
        let _ = std::fs::remove_dir(&at);
        symlink(&target, &at).unwrap();
        chown(&at, WORKER_UID, WORKER_GID);
        let done = f.install().expect("install refused");
        let [(skipped, why)] = done.honeypots_skipped.as_slice() else {
            panic!("{which}: {done:?}");
        };
        assert!(skipped.starts_with(&at), "{which}: {}", skipped.display());
        assert!(
            why.contains(&at.display().to_string()) && why.contains("symbolic link"),
            "{which}: {why}"
        );
        assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0, "{which}");
        assert_eq!(mode(&target), 0o750, "{which}");
        assert!(l.config_dir.join("policy.toml").exists(), "{which}");
    }
}

#[test]
fn a_warden_tree_inside_a_worker_owned_directory_is_refused_by_install_and_start() {
    let f = Fixture::new("worker-owned-root");
    chown(&f.root, WORKER_UID, WORKER_GID);
    let e = f.install().expect_err("install went on").to_string();
    let named = format!("{} is owned by uid {WORKER_UID}", f.root.display());
    assert!(e.contains(&named), "{e}");
    let e = f.refused_start();
    assert!(e.contains(&named), "{e}");
}

#[test]
fn a_state_directory_renamed_aside_and_replaced_by_the_worker_is_refused_at_start() {
    let f = Fixture::new("state-swap");
    let l = f.layout();
    f.install().expect("install");
    // The old layout: the Warden's tree inside a directory the Worker owns.
    chown(&f.root, WORKER_UID, WORKER_GID);
    std::fs::rename(&l.state_dir, f.root.join("state-aside")).unwrap();
    std::fs::create_dir(&l.state_dir).unwrap();
    for name in ["baseline.json", "ladder.json", "server-id"] {
        let _ = std::fs::copy(
            f.root.join("state-aside").join(name),
            l.state_dir.join(name),
        );
    }
    std::fs::write(l.state_dir.join("relay.pub"), "the Worker's own key").unwrap();
    chown(&l.state_dir, WORKER_UID, WORKER_GID);
    let e = f.refused_start();
    assert!(
        e.contains(&format!(
            "{} is owned by uid {WORKER_UID}",
            f.root.display()
        )),
        "{e}"
    );
    // Even with the parent root's again, the Worker's state is not the Warden's.
    chown(&f.root, 0, 0);
    let e = f.refused_start();
    assert!(
        e.contains(&format!(
            "{} is owned by uid {WORKER_UID}",
            l.state_dir.display()
        )),
        "{e}"
    );
}

#[test]
fn a_link_at_any_warden_directory_is_refused_at_start() {
    for which in ["state", "etc", "journal", "run"] {
        let f = Fixture::new(&format!("link-{which}"));
        f.install().expect("install");
        let at = f.root.join(which);
        let _ = std::fs::create_dir_all(&at);
        let aside = f.root.join(format!("{which}-aside"));
        std::fs::rename(&at, &aside).unwrap();
        symlink(&aside, &at).unwrap();
        let e = f.refused_start();
        assert!(
            e.contains(&format!("{} is a symbolic link", at.display())),
            "{which}: {e}"
        );
    }
}

#[test]
fn a_run_directory_the_worker_owns_is_refused_at_start() {
    let f = Fixture::new("run-owned");
    f.install().expect("install");
    let run = f.layout().run_dir;
    std::fs::create_dir_all(&run).unwrap();
    chown(&run, WORKER_UID, WORKER_GID);
    let e = f.refused_start();
    assert!(
        e.contains(&format!("{} is owned by uid {WORKER_UID}", run.display())),
        "{e}"
    );
}

#[test]
fn a_journal_directory_writable_by_the_workers_group_is_refused_at_start() {
    let f = Fixture::new("journal-group");
    f.install().expect("install");
    let journal = f.layout().journal_dir;
    chown(&journal, 0, WORKER_GID);
    set_mode(&journal, 0o775);
    let e = f.refused_start();
    assert!(
        e.contains(&format!(
            "{} is writable by accounts other than root",
            journal.display()
        )),
        "{e}"
    );
}

#[test]
fn a_missing_baseline_after_install_is_an_integrity_failure_not_a_fresh_warden() {
    let f = Fixture::new("lost-baseline");
    let l = f.layout();
    f.install().expect("install");
    std::fs::remove_file(l.baseline_file()).unwrap();
    let server = Server::bind(f.options()).expect("starts, at Cut");
    let handle = server.shutdown_handle();
    let thread = std::thread::spawn(move || server.run());
    let status = match ask(&l.control_socket(), &Request::Status) {
        Response::Status(st) => st,
        other => panic!("{other:?}"),
    };
    handle.shutdown();
    let _ = thread.join();
    assert_eq!(status.ladder_step, 3, "{status:?}");
    assert!(
        status.integrity.starts_with("MISMATCH") && status.integrity.contains("missing"),
        "{status:?}"
    );
    assert!(status.phase.contains("baseline is missing"), "{status:?}");
}

#[test]
fn a_linked_ai_key_is_removed_not_written_through_at_cut() {
    let f = Fixture::new("ai-key-link");
    let l = f.layout();
    f.install().expect("install");
    let victim = f.root.join("victim");
    victim_file(&victim);
    symlink(&victim, l.ai_key_file()).unwrap();
    chown(&l.ai_key_file(), WORKER_UID, WORKER_GID);
    // The test's own uid (root) on the Worker socket, for /panic.
    let mut o = ServeOptions::new(l.clone(), 0, 0);
    o.watch_network = false;
    let server = Server::bind(o).expect("starts");
    let handle = server.shutdown_handle();
    let thread = std::thread::spawn(move || server.run());
    let r = ask(&l.worker_socket(), &Request::Panic);
    handle.shutdown();
    let _ = thread.join();
    assert!(matches!(r, Response::Ladder { step: 3, .. }), "{r:?}");
    assert_victim_file_untouched(&victim);
    assert!(
        std::fs::symlink_metadata(l.ai_key_file()).is_err(),
        "the link is gone"
    );
}

/// The chain of directories was checked only at bind and install: one
/// made writable by another account while the Warden runs is found on the
/// next integrity tick.
#[test]
fn a_warden_directory_made_writable_while_the_warden_runs_is_found_on_the_next_tick() {
    let f = Fixture::new("layout-tick");
    f.install().expect("install");
    let mut o = f.options();
    o.integrity_interval = std::time::Duration::from_millis(100);
    o.watch_interval = std::time::Duration::from_millis(20);
    let server = Server::bind(o).expect("the Warden starts");
    let handle = server.shutdown_handle();
    let thread = std::thread::spawn(move || server.run());
    let journal = f.layout().journal_dir;
    chown(&journal, 0, WORKER_GID);
    set_mode(&journal, 0o775);
    let control = f.layout().control_socket();
    let mut reason = String::new();
    for _ in 0..250 {
        if let Response::Status(st) = ask(&control, &Request::Status) {
            reason = st.ladder_reason;
            if st.ladder_name == "cut" {
                break;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    set_mode(&journal, 0o755);
    chown(&journal, 0, 0);
    handle.shutdown();
    let _ = thread.join();
    assert!(
        reason.contains("writable by accounts other than root"),
        "the ladder: {reason}"
    );
}

#[test]
fn a_warden_directory_made_writable_by_others_is_found_on_the_integrity_tick() {
    let w = Warden::start_with("r30-layout-tick", false, &[], |o| {
        o.integrity_interval = Duration::from_millis(200);
    });
    let dir = w.layout().state_dir.clone();
    let mode = std::fs::metadata(&dir).unwrap().mode();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let st = w.reaches("cut");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode & 0o7777)).unwrap();
    assert!(
        st.ladder_reason.contains("integrity"),
        "{}",
        st.ladder_reason
    );
    // Said once, not every tick.
    std::thread::sleep(Duration::from_millis(100));
    let n = lines_with(&w.journal(), "ladder-signal");
    assert!(n <= 3, "{n} signals for one unfit directory");
}
