//! The honeypots against a Worker that owns the directories they are in:
//! a read the moment the Warden starts, a honeypot deleted or moved (read
//! as "opened" and then left unwatched), and a link planted on the way to
//! one (which made `install`, the documented recovery from Disarm, refuse
//! to run). Through a real Warden; root stands in for the Worker's reads
//! (inotify does not ask who).

mod support;

use aromba_warden::install::{InstallOptions, install};
use aromba_warden::layout::Layout;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use support::Warden;

fn aws(layout: &Layout) -> std::path::PathBuf {
    layout.worker_home.join(".aws/credentials")
}

/// Waits (up to 5 s) for `path` to be a honeypot as install plants it.
fn planted_again(path: &Path) {
    for _ in 0..250 {
        if let Ok(m) = std::fs::symlink_metadata(path)
            && m.is_file()
            && m.uid() == 0
            && m.mode() & 0o7777 == 0o640
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{} was not planted again", path.display());
}

#[test]
fn a_honeypot_read_the_moment_the_warden_starts_is_caught() {
    // Bound, not serving yet: the Worker changes its home's mode and reads
    // a honeypot at once.
    let w = Warden::start_then("pots-at-start", |layout| {
        std::fs::set_permissions(&layout.worker_home, std::fs::Permissions::from_mode(0o755))
            .unwrap();
        std::fs::read(aws(layout)).unwrap();
    });
    let st = w.reaches("cut");
    assert!(
        st.ladder_reason.contains("honeypot"),
        "{}",
        st.ladder_reason
    );
}

#[test]
fn a_deleted_honeypot_is_not_read_as_opened_and_is_planted_and_watched_again() {
    let w = Warden::start("pots-deleted", false, &[]);
    let pot = aws(&w.layout());
    std::fs::remove_file(&pot).unwrap();
    let st = w.reaches("cut");
    assert!(
        st.ladder_reason.contains("deleted") && !st.ladder_reason.contains("opened"),
        "{}",
        st.ladder_reason
    );
    planted_again(&pot);
    w.resume();
    // The one planted again is watched: a read of it is caught.
    std::fs::read(&pot).unwrap();
    let st = w.reaches("cut");
    assert!(st.ladder_reason.contains("opened"), "{}", st.ladder_reason);
}

#[test]
fn a_moved_honeypot_is_its_own_signal_and_stays_watched_where_it_went() {
    let w = Warden::start("pots-moved", false, &[]);
    let pot = aws(&w.layout());
    let aside = pot.with_file_name("kept");
    std::fs::rename(&pot, &aside).unwrap();
    let st = w.reaches("cut");
    assert!(
        st.ladder_reason.contains("moved away") && !st.ladder_reason.contains("opened"),
        "{}",
        st.ladder_reason
    );
    planted_again(&pot);
    w.resume();
    std::fs::read(&aside).unwrap();
    let st = w.reaches("cut");
    assert!(st.ladder_reason.contains("opened"), "{}", st.ladder_reason);
}

#[test]
fn a_honeypots_directory_moved_aside_is_found_on_the_integrity_tick() {
    let w = Warden::start_with("pots-dir-moved", false, &[], |o| {
        o.integrity_interval = Duration::from_millis(200);
    });
    let layout = w.layout();
    let dir = layout.worker_home.join(".aws");
    std::fs::rename(&dir, layout.worker_home.join(".aws-aside")).unwrap();
    let st = w.reaches("cut");
    assert!(
        st.ladder_reason.contains("honeypot"),
        "{}",
        st.ladder_reason
    );
    planted_again(&aws(&layout));
}

#[test]
fn install_plants_around_a_link_on_the_way_to_a_honeypot_and_the_warden_journals_it() {
    let root = std::env::temp_dir().join(format!("aromba-pots-link-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let layout = Layout::rooted(&root);
    // The Worker's home holds a link where `.aws` must be a directory,
    // pointing at a directory of root's.
    let victim = root.join("roots-own");
    std::fs::create_dir_all(&victim).unwrap();
    std::fs::create_dir_all(&layout.worker_home).unwrap();
    std::os::unix::fs::symlink(&victim, layout.worker_home.join(".aws")).unwrap();
    std::fs::create_dir_all(root.join("bin")).unwrap();
    std::fs::copy("/bin/true", root.join("bin/aromba")).unwrap();
    let done = install(&InstallOptions {
        layout: &layout,
        warden_bin: Path::new("/proc/self/exe"),
        worker_bin: &root.join("bin/aromba"),
        worker_gid: 0,
        clock: Arc::new(aromba_warden::ladder::SystemClock),
    })
    .expect("install runs with a link planted on the way to a honeypot");
    assert_eq!(done.honeypots_skipped.len(), 1, "{done:?}");
    assert!(done.honeypots_skipped[0].1.contains("symbolic link"));
    assert_eq!(done.honeypots.len(), 2);
    assert_eq!(
        std::fs::read_dir(&victim).unwrap().count(),
        0,
        "something was written through the link"
    );
    // The Warden serves, and says which honeypot it does not watch; root's
    // own file behind the link is never watched.
    std::fs::write(victim.join("credentials"), "root's own").unwrap();
    let mut o = aromba_warden::server::ServeOptions::new(layout.clone(), 0, 0);
    o.watch_network = false;
    o.host = None;
    let server = aromba_warden::server::Server::bind(o).expect("the Warden starts");
    let handle = server.shutdown_handle();
    let thread = std::thread::spawn(move || server.run());
    std::fs::read(victim.join("credentials")).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let journal = std::fs::read_to_string(layout.journal_file()).unwrap();
    assert!(journal.contains("honeypot-unwatched"), "{journal}");
    assert!(
        !journal.contains("honeypot-read"),
        "root's own file behind the link was watched: {journal}"
    );
    handle.shutdown();
    let _ = thread.join();
    let _ = std::fs::remove_dir_all(&root);
}
