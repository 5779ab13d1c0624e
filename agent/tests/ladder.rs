//! The ladder with the real Worker uid: honeypots, outbound connections,
//! and the root verbs `aromba panic`, `aromba resume` and `aromba status`.

use aromba_testkit::worker as support;

use support::{TestWarden, account, text};

/// One test at a time: every Warden here watches all of the aromba user's
/// connections, so one test's connection (to an unlisted port, on purpose)
/// would be another's unlisted host.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// One test at a time here, and no Worker daemon of another test process
/// meanwhile: these Wardens watch every connection of the aromba user.
fn one_at_a_time() -> (std::sync::MutexGuard<'static, ()>, support::MachineLock) {
    let one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    (one, support::one_daemon_on_this_machine_blocking())
}

#[test]
fn status_shows_the_ladder_phase_isolation_integrity_and_journal() {
    let _one = one_at_a_time();
    let warden = TestWarden::start_with("status", account("aromba"), true, |_| {});
    let out = warden.aromba_as("root", &["status"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    for line in [
        "ladder: normal (step 0)",
        "phase: day 1",
        "isolation: ",
        "integrity: ok",
        "journal: seq",
    ] {
        assert!(s.contains(line), "missing {line:?} in:\n{s}");
    }
}

#[test]
fn opening_a_honeypot_as_aromba_moves_the_ladder_to_cut() {
    let _one = one_at_a_time();
    let warden = TestWarden::start_with("honeypot", account("aromba"), true, |_| {});
    warden.wait_for_ladder("normal");
    let pot = warden.root.join("home/.aws/credentials");
    let out = assert_cmd::Command::new("runuser")
        .args(["-u", "aromba", "--", "cat"])
        .arg(&pot)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the honeypot must look readable: {}",
        text(&out.stderr)
    );
    let status = warden.wait_for_ladder("cut");
    assert!(status.contains("honeypot"), "{status}");
    assert!(warden.journal().contains("honeypot-read"));
}

#[test]
fn an_outbound_connection_to_an_unlisted_port_moves_the_ladder_to_cut() {
    let _one = one_at_a_time();
    let listed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let unlisted = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let listed_port = listed.local_addr().unwrap().port();
    let unlisted_port = unlisted.local_addr().unwrap().port();
    let warden = TestWarden::start_with("network", account("aromba"), false, |_| {});
    let worker_dir = warden.layout().worker_config_dir;
    std::fs::create_dir_all(&worker_dir).unwrap();
    std::fs::write(
        worker_dir.join("network.toml"),
        format!("[relay]\nhost = \"relay.example\"\naddresses = [\"127.0.0.1:{listed_port}\"]\n"),
    )
    .unwrap();
    let connect_as_aromba = |port: u16| {
        std::thread::spawn(move || {
            assert_cmd::Command::new("runuser")
                .args(["-u", "aromba", "--", "bash", "-c"])
                .arg(format!("exec 3<>/dev/tcp/127.0.0.1/{port}; sleep 1.5"))
                .output()
                .unwrap()
        })
    };
    // A listed address is fine.
    connect_as_aromba(listed_port).join().unwrap();
    assert!(text(&warden.aromba_as("root", &["status"]).stdout).contains("ladder: normal"));
    // An unlisted one is Cut.
    let t = connect_as_aromba(unlisted_port);
    let status = warden.wait_for_ladder("cut");
    assert!(
        status.contains(&format!("127.0.0.1:{unlisted_port}")),
        "{status}"
    );
    t.join().unwrap();
}

#[test]
fn a_network_toml_the_worker_may_write_moves_the_ladder_to_cut() {
    let _one = one_at_a_time();
    let worker = account("aromba");
    let warden = TestWarden::start_with("network-owner", worker, false, |_| {});
    let worker_dir = warden.layout().worker_config_dir;
    std::fs::create_dir_all(&worker_dir).unwrap();
    let file = worker_dir.join("network.toml");
    std::fs::write(&file, "addresses = [\"127.0.0.1:1\"]\n").unwrap();
    // The Worker's own: it could list where it likes.
    std::os::unix::fs::chown(&file, Some(worker.uid), Some(worker.gid)).unwrap();
    let status = warden.wait_for_ladder("cut");
    assert!(
        status.contains("network.toml is not root's alone to write"),
        "{status}"
    );
}

#[test]
fn resume_works_from_root_and_is_refused_to_aromba() {
    let _one = one_at_a_time();
    let warden = TestWarden::start("resume", account("aromba"), 4);
    warden.ask(&["rm", "-rf", "/"]);
    warden.wait_for_ladder("slow");
    let out = warden.aromba_as("aromba", &["resume"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("needs a root terminal"),
        "{}",
        text(&out.stderr)
    );
    let out = warden.aromba_as("root", &["resume"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("ladder: normal"));
}

#[test]
fn aromba_panic_disarms_and_leaves_the_worker_with_no_rights() {
    let _one = one_at_a_time();
    let warden = TestWarden::start("panic", account("aromba"), 4);
    let out = warden.aromba_as("aromba", &["panic"]);
    assert_eq!(out.status.code(), Some(1), "only root may disarm");
    let out = warden.aromba_as("root", &["panic"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("ladder: disarm"));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let out = warden.ask(&["df", "-h"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("not running"),
        "{}",
        text(&out.stderr)
    );
    let out = warden.aromba_as("root", &["status"]);
    assert!(
        text(&out.stderr).contains("not running"),
        "{}",
        text(&out.stderr)
    );
}
