//! Updates end to end: a release signed with the test key, served over
//! HTTP on loopback; the server paired with `aromba pair --releases URL`
//! (which lists the release host in `network.toml`), `aromba run` as the
//! aromba user, a real Warden that checks with the test key. The Worker's
//! daily check downloads through its network gate and asks the Warden;
//! a major release is proposed in the chat and installed on a tap, a patch
//! release installs itself in the quiet window. From a root terminal,
//! `aromba update` and `aromba uninstall`.

use aromba_testkit::paired;
use aromba_testkit::release as releases;
use aromba_testkit::updates;
use aromba_testkit::worker as support;

use aromba_warden::update::Releases;
use paired::{Setup, paired_with};
use releases::{RELEASE_PUB, Release, key_line};
use sqlx::PgPool;
use std::path::{Path, PathBuf};
use std::time::Duration;
use support::{TestWarden, account, aromba};
use updates::{
    current, installed_as_this_version, publish, scratch, serve, setup, with_test_releases,
};

#[sqlx::test(migrations = false)]
async fn a_major_release_is_proposed_in_the_chat_and_installed_on_a_tap(db: PgPool) {
    let files = scratch("major");
    publish(&files.0, "1.0.0");
    let (url, asked) = serve(files.0.clone());
    let p = paired_with(db, "update-major", setup(&url), installed_as_this_version).await;
    // The release host is listed where the Warden watches the Worker.
    let network =
        std::fs::read_to_string(p.warden.root.join("worker/network.toml")).expect("network.toml");
    assert!(
        network.contains(&format!("releases = \"{url}/stable\"")),
        "{network}"
    );
    let port = url.rsplit(':').next().expect("a port");
    assert!(
        network.contains(&format!("\"127.0.0.1:{port}\"")),
        "{network}"
    );

    let proposal = p
        .next(0, |t| t.starts_with("Update Aromba to 1.0.0?"))
        .await;
    assert!(
        proposal.text.contains(&format!(
            "It is a major release; this server runs {}",
            env!("CARGO_PKG_VERSION")
        )),
        "{}",
        proposal.text
    );
    // Downloaded into the Worker's own folder, nothing installed yet.
    let downloads = p.warden.root.join("home/updates");
    assert!(downloads.join("manifest.json").exists());
    assert_eq!(
        current(&p.warden),
        Some(PathBuf::from(format!(
            "releases/{}",
            env!("CARGO_PKG_VERSION")
        )))
    );
    let seen = asked.lock().expect("the log").clone();
    assert!(
        seen.contains(&"/stable/manifest.json".to_string()),
        "{seen:?}"
    );
    assert!(
        seen.contains(&"/stable/manifest.json.minisig".to_string()),
        "{seen:?}"
    );

    // An install is approved in the Mini App, where Telegram signs the
    // person's tap.
    assert!(
        proposal
            .buttons
            .iter()
            .flatten()
            .any(|(l, d)| l == "Approve (opens the app)" && aromba_botfake::is_link(d)),
        "{proposal:?}"
    );
    let before = p.bot.fake.sent_to(paired::CHAT).len();
    p.tap(&proposal, "Approve").await;
    p.next(before, |t| t.starts_with("Installing Aromba 1.0.0"))
        .await;
    assert_eq!(current(&p.warden), Some(PathBuf::from("releases/1.0.0")));
    assert_eq!(
        std::fs::read_to_string(p.warden.root.join("opt/aromba/current/aromba-warden"))
            .expect("the new Warden"),
        "aromba-warden 1.0.0"
    );
    // Under a test root nothing is restarted; the Warden's journal says so.
    let journal = std::fs::read_to_string(p.warden.layout().journal_file()).expect("journal");
    assert!(journal.contains("\"approved tap\""), "{journal}");
    assert!(journal.contains("not under --root"), "{journal}");
    // The ladder did not move: every connection was to a listed host.
    let status = p.warden.aromba_as("root", &["status"]);
    assert!(
        support::text(&status.stdout).contains("ladder: normal"),
        "{}",
        support::text(&status.stdout)
    );
}

/// `TZ` for a clock whose local hour is 4, in the quiet window.
fn tz_in_the_quiet_window() -> String {
    let hour = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("time")
        .as_secs()
        / 3600
        % 24) as i64;
    let mut offset = (4 - hour).rem_euclid(24);
    if offset > 12 {
        offset -= 24;
    }
    // POSIX: the offset is west of UTC, so it is negated; the zone's name
    // must be three letters at least, or the whole value is ignored.
    format!("QWT{}", -offset)
}

#[sqlx::test(migrations = false)]
async fn a_patch_release_installs_itself_in_the_quiet_window(db: PgPool) {
    let files = scratch("patch");
    let this = aromba_release::Version::parse(env!("CARGO_PKG_VERSION")).expect("a version");
    let patch = format!("{}.{}.{}", this.major, this.minor, this.patch + 1);
    publish(&files.0, &patch);
    let (url, _) = serve(files.0.clone());
    let mut setup = setup(&url);
    setup.daemon_env.push(("TZ", tz_in_the_quiet_window()));
    let p = paired_with(db, "update-patch", setup, installed_as_this_version).await;
    let want = PathBuf::from(format!("releases/{patch}"));
    for _ in 0..600 {
        if current(&p.warden).as_ref() == Some(&want) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        current(&p.warden),
        Some(want),
        "the patch was not installed"
    );
    // Nothing was asked in the chat.
    assert!(
        p.bot
            .fake
            .sent_to(paired::CHAT)
            .iter()
            .all(|m| !m.text.starts_with("Update Aromba")),
    );
    let journal = std::fs::read_to_string(p.warden.layout().journal_file()).expect("journal");
    assert!(journal.contains("\"origin\":\"worker\""), "{journal}");
}

#[test]
fn aromba_update_from_a_root_terminal_downloads_and_the_warden_installs() {
    let _alone = paired::alone();
    let files = scratch("cli");
    // Signed naming the commit it was built from, as scripts/release signs.
    Release {
        commit: Some("0123456789abcdef0123456789abcdef01234567"),
        ..Release::of("2.0.0", b"aromba 2.0.0", b"aromba-warden 2.0.0")
    }
    .write(&files.0.join("stable"));
    let (url, _) = serve(files.0.clone());
    let w =
        TestWarden::start_installed("update-cli", account("aromba"), Some(0), with_test_releases);
    installed_as_this_version(&w);
    let root = w.root.to_str().expect("UTF-8");
    let out = aromba(&[
        "update",
        "--root",
        root,
        "--releases",
        &format!("{url}/stable"),
    ])
    .env("AROMBA_RELEASE_KEYS", key_line(RELEASE_PUB))
    .output()
    .expect("aromba update runs");
    let said = support::text(&out.stdout);
    assert!(out.status.success(), "{said}{}", support::text(&out.stderr));
    assert!(said.contains("Aromba 2.0.0 is installed"), "{said}");
    assert!(
        said.contains("downloading 2.0.0, built from commit 0123456789ab\n"),
        "{said}"
    );
    assert_eq!(current(&w), Some(PathBuf::from("releases/2.0.0")));
    // The download folder it made is gone.
    let left: Vec<_> = std::fs::read_dir("/var/tmp")
        .expect("/var/tmp")
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("aromba-update-")
        })
        .collect();
    assert!(left.is_empty(), "{left:?}");

    // Again: nothing newer.
    let out = aromba(&[
        "update",
        "--root",
        root,
        "--releases",
        &format!("{url}/stable"),
    ])
    .env("AROMBA_RELEASE_KEYS", key_line(RELEASE_PUB))
    .output()
    .expect("aromba update runs");
    assert!(out.status.success());
    assert!(support::text(&out.stdout).contains("nothing to do"));

    // The Worker may not: root verbs need a root terminal.
    let out = w.aromba_as(
        "aromba",
        &["update", "--releases", &format!("{url}/stable")],
    );
    assert!(!out.status.success());
    assert!(support::text(&out.stderr).contains("needs a root terminal"));
    let out = w.aromba_as("aromba", &["uninstall", "--yes"]);
    assert!(!out.status.success());
    assert!(support::text(&out.stderr).contains("needs a root terminal"));
}

#[test]
fn aromba_uninstall_asks_first_and_under_a_test_root_removes_only_that_tree() {
    let _alone = paired::alone();
    let w = TestWarden::start_installed("uninstall-cli", account("aromba"), Some(0), |o| {
        with_test_releases(o)
    });
    installed_as_this_version(&w);
    // Installed from the Debian package (dpkg's list names the units):
    // `apt purge` is said before anything is asked, and nothing goes.
    let info = w.root.join("var/lib/dpkg/info");
    std::fs::create_dir_all(&info).expect("dpkg's folder");
    std::fs::write(
        info.join("aromba.list"),
        "/.\n/lib/systemd/system/aromba-warden.service\n/usr/bin/aromba\n",
    )
    .expect("dpkg's list");
    let out = w.aromba_as("root", &["uninstall", "--yes"]);
    assert!(!out.status.success());
    let said = support::text(&out.stderr);
    assert!(
        said.starts_with(
            "aromba: nothing was removed. Aromba was installed from its Debian package"
        ),
        "{said}"
    );
    assert!(said.contains("run `apt purge aromba` instead"), "{said}");
    assert!(w.root.join("opt/aromba").exists());
    assert!(w.layout().state_dir.exists());
    std::fs::remove_dir_all(w.root.join("var")).expect("dpkg's list removed");

    // Without --yes and without a terminal: nothing happens.
    let out = w.aromba_as("root", &["uninstall"]);
    assert!(!out.status.success());
    assert!(support::text(&out.stderr).contains("--yes"));
    assert!(w.root.join("opt/aromba").exists());

    let out = w.aromba_as("root", &["uninstall", "--yes"]);
    let said = support::text(&out.stdout);
    assert!(out.status.success(), "{said}{}", support::text(&out.stderr));
    assert!(said.contains("Aromba is uninstalled."), "{said}");
    assert!(
        said.contains("kept the services and the aromba user"),
        "{said}"
    );
    assert!(!w.root.join("opt/aromba").exists());
    assert!(!w.layout().state_dir.exists());
    assert!(w.layout().journal_file().exists());
}

#[sqlx::test(migrations = false)]
async fn the_chat_is_told_of_a_rollback_once(db: PgPool) {
    let files = scratch("rollback");
    publish(&files.0, "1.0.0");
    let first = files.0.join("first");
    std::fs::rename(files.0.join("stable"), &first).expect("first");
    publish(&files.0, "1.0.1");
    let second = files.0.join("stable");
    // Two releases installed from a root terminal.
    let before = move |w: &TestWarden| {
        for dir in [&first, &second] {
            let out = aromba(&["update", "--from"])
                .arg(dir)
                .args(["--root", w.root.to_str().expect("UTF-8")])
                .output()
                .expect("aromba update runs");
            assert!(out.status.success(), "{}", support::text(&out.stderr));
        }
    };
    let setup = Setup {
        adjust: with_test_releases,
        ..Setup::default()
    };
    let mut p = paired_with(db, "update-rollback", setup, before).await;
    // The second failed to start three times: with both services down, the
    // rollback unit runs the previous release's Warden, which puts its
    // release back (here the Warden is this test's binary).
    let _ = p.daemon.0.kill();
    let _ = p.daemon.0.wait();
    p.warden.stop();
    aromba_warden::update::roll_back_installed(
        &p.warden.layout(),
        &Releases::rooted(&p.warden.root),
        // Its Warden never took over: the release's binaries are not
        // this test's.
        Path::new("/proc/self/exe"),
    )
    .expect("rolled back");
    p.warden.serve_again(account("aromba"), with_test_releases);
    let before = p.bot.fake.sent_to(paired::CHAT).len();
    p.daemon = paired::start_daemon(&p.warden, None);
    let told = p
        .next(before, |t| {
            t.starts_with("Aromba 1.0.1 failed to start three times")
        })
        .await;
    assert!(told.text.contains("so 1.0.0 was put back"), "{}", told.text);
    let record_told = || {
        let bytes = std::fs::read(p.warden.layout().state_dir.join("releases.json"))
            .expect("the release record");
        aromba_warden::update::Record::parse(&bytes)
            .expect("a record")
            .rolled_back
            .is_none()
    };
    for _ in 0..100 {
        if record_told() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        record_told(),
        "the Warden still waits for the chat to be told"
    );
    // A restarted Worker does not tell it again.
    let _ = p.daemon.0.kill();
    let _ = p.daemon.0.wait();
    p.daemon = paired::start_daemon(&p.warden, None);
    p.ask("/status", |t| t.starts_with("Server status")).await;
    let sent = p.bot.fake.sent_to(paired::CHAT);
    assert_eq!(
        sent.iter()
            .filter(|m| m.text.contains("failed to start three times"))
            .count(),
        1,
        "{:?}",
        &sent[before..]
    );
    // Nothing made the ladder move.
    let status = p.warden.aromba_as("root", &["status"]);
    assert!(
        support::text(&status.stdout).contains("ladder: normal"),
        "{}",
        support::text(&status.stdout)
    );
}

/// A release folder that serves a release list which expired long ago (a
/// stale mirror, or one holding updates back) looked exactly like "nothing
/// new", and the daily check was silent. Four days without a current list:
/// the chat is told, and `/trust` says so.
#[sqlx::test(migrations = false)]
async fn the_chat_is_told_when_no_current_release_list_was_seen_for_days(db: PgPool) {
    let files = scratch("stale");
    releases::Release {
        expires: 1,
        ..releases::Release::of("9.0.0", b"aromba 9.0.0", b"aromba-warden 9.0.0")
    }
    .write(&files.0.join("stable"));
    let (url, _) = serve(files.0.clone());
    let seed = |w: &TestWarden| {
        installed_as_this_version(w);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("time")
            .as_secs() as i64;
        let home = w.root.join("home");
        std::fs::create_dir_all(&home).expect("home");
        // The last current list was seen four days ago.
        std::fs::write(
            home.join("update-check.json"),
            format!(
                "{{\"at\":{},\"running\":\"{}\",\"fresh_at\":{},\"since\":{}}}",
                now - 4 * 86_400,
                env!("CARGO_PKG_VERSION"),
                now - 4 * 86_400,
                now - 30 * 86_400
            ),
        )
        .expect("the Worker's record");
    };
    let p = paired_with(db, "update-stale", setup(&url), seed).await;
    let told = p
        .next(0, |t| t.starts_with("Updates may be held back"))
        .await;
    assert!(told.text.contains("for 4 days"), "{}", told.text);
    let trust = p.ask("/trust", |t| t.contains("Updates:")).await;
    assert!(
        trust
            .text
            .contains("Updates: NO current release list seen for 4 days"),
        "{}",
        trust.text
    );
    // Said once, not at every look.
    let sent = p.bot.fake.sent_to(paired::CHAT);
    assert_eq!(
        sent.iter()
            .filter(|m| m.text.starts_with("Updates may be held back"))
            .count(),
        1
    );
}
