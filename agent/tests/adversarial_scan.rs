//! A hostile local user against the first scan of a real `aromba run`
//! (paired through a real relay and the fake Bot API, a real Warden): the
//! folders the scan reads are theirs to name and fill. A folder name with
//! a newline in Caddy's certificate folder made the scan task panic (and
//! restart, and panic, every second, spending the read budget each time);
//! thousands of folders in one home took the fence list's room (tens of
//! thousands: minutes of a core, and a request flood at the Warden); a link
//! du never lists, named by a line a newline made up, could fence the
//! system's own folders. The scan must end, say what it saw, fence the
//! real data and nothing of the system's, and leave the ladder where it was.

use aromba_testkit::paired;
use aromba_testkit::worker as support;

use paired::{Setup, paired_with};
use sqlx::PgPool;
use support::TestWarden;

#[sqlx::test(migrations = false)]
async fn a_hostile_users_folders_neither_stop_the_first_scan_nor_steer_its_fences(db: PgPool) {
    let plant = |w: &TestWarden| {
        let system = w.root.join("system");
        // The real data.
        let base = system.join("var/lib/postgresql/15/main/base");
        for oid in ["1", "4", "5", "16384"] {
            std::fs::create_dir_all(base.join(oid)).expect("a database folder");
            std::fs::write(base.join(oid).join("1259"), vec![0u8; 8192]).expect("a table");
        }
        std::fs::create_dir_all(system.join("srv/shop/public/uploads")).expect("uploads");
        // The caddy account's folder: GNU du writes this name raw, and its
        // second line reads as a path of its own, shorter than the folder.
        let caddy = system.join("var/lib/caddy/.local/share/caddy/certificates");
        std::fs::create_dir_all(caddy.join("x\n0\t/a")).expect("a newline folder");
        std::fs::create_dir_all(caddy.join("acme/shop.example.com")).expect("a certificate");
        // Eve: a link where du cannot see one, named by a made-up line.
        let eve = system.join("home/eve");
        std::fs::create_dir_all(eve.join("uploads\n0\t")).expect("a newline folder");
        std::os::unix::fs::symlink("/usr/share", eve.join("uploads")).expect("a link");
        std::fs::create_dir_all(eve.join("backups\u{202E}exe.txt")).expect("an override");
        // Bob: thousands of folders named like repositories.
        for i in 0..3_000 {
            std::fs::create_dir_all(system.join(format!("home/bob/r{i}.git")))
                .expect("a repository");
        }
    };
    let p = paired_with(db, "adv-scan", Setup::default(), plant).await;
    let system = p.warden.root.join("system");
    let seen = p
        .next(0, |t| t.starts_with("I had a first look at this server."))
        .await;
    assert!(
        seen.text
            .contains("a database with data: PostgreSQL, 1 database of its own"),
        "{}",
        seen.text
    );
    assert!(seen.text.contains("So prod mode is on"), "{}", seen.text);
    for c in ['\u{202E}', '\u{2028}'] {
        assert!(!seen.text.contains(c), "{:?}", seen.text);
    }
    let fences = std::fs::read_to_string(p.warden.layout().fences_file()).expect("the fence list");
    for folder in ["var/lib/postgresql", "srv/shop/public/uploads", "home/bob"] {
        assert!(
            fences
                .lines()
                .any(|l| l == system.join(folder).to_str().unwrap()),
            "{folder} in {fences}"
        );
    }
    assert!(
        fences
            .lines()
            .all(|l| l.starts_with(system.to_str().unwrap())),
        "a fence outside what the scan looks at: {fences}"
    );
    assert!(fences.lines().count() <= 20, "{fences}");
    let status = support::text(&p.warden.aromba_as("root", &["status"]).stdout);
    assert!(status.contains("ladder: normal"), "{status}");
    assert!(status.contains("prod mode: on"), "{status}");
}

#[sqlx::test(migrations = false)]
async fn an_enormous_tree_in_one_home_does_not_hide_another_users_mail(db: PgPool) {
    const VICTIMS: [&str; 5] = ["ann", "bea", "cid", "dan", "eve"];
    let plant = |w: &TestWarden| {
        let home = w.root.join("system/home");
        for v in VICTIMS {
            std::fs::create_dir_all(home.join(v).join("Maildir/new")).expect("mail");
        }
        // More folders within du's three levels than the read's byte cap
        // lets through: du is killed, and every home it would have listed
        // after this one is cut off.
        for i in 0..200 {
            for j in 0..100 {
                std::fs::create_dir_all(home.join(format!("aaa/d{i}/e{j}"))).expect("a folder");
            }
        }
    };
    let p = paired_with(db, "adv-scan-big", Setup::default(), plant).await;
    let home = p.warden.root.join("system/home");
    // du lists the homes in the order the directory gives them: some
    // victim must come after the enormous one, or this proves nothing.
    let order: Vec<String> = std::fs::read_dir(&home)
        .expect("home")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let big = order.iter().position(|n| n == "aaa").expect("aaa");
    assert!(
        order[big + 1..]
            .iter()
            .any(|n| VICTIMS.contains(&n.as_str())),
        "no home after the enormous one: {order:?}"
    );
    let seen = p
        .next(0, |t| t.starts_with("I had a first look at this server."))
        .await;
    let fences = std::fs::read_to_string(p.warden.layout().fences_file()).expect("the fence list");
    for v in VICTIMS {
        let mail = home.join(v).join("Maildir");
        assert!(
            fences
                .lines()
                .any(|l| mail.starts_with(std::path::Path::new(l))),
            "{v}'s mail is unfenced (the homes in du's order: {order:?}): {fences}\n{}",
            seen.text
        );
    }
    let status = support::text(&p.warden.aromba_as("root", &["status"]).stdout);
    assert!(status.contains("ladder: normal"), "{status}");
}
