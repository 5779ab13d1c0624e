//! A chore may not declare a read inside the Worker's home, but it could
//! declare one that holds it (`reads: /var/lib` holds `/var/lib/aromba`):
//! the cage then showed the Worker's whole home, all but its `.ssh`-like
//! directories, to a chore the Worker has no say over. The Worker's home is
//! now hidden in every cage, as the Warden's own directories are. The test
//! runs a hostile `mine/` chore of the owner's through a real Warden (its
//! directories outside `/tmp`, so that a read may hold them) and real
//! bubblewrap. Needs root and bubblewrap.

use aromba_testkit::warden as support;

use aromba_warden_proto::{Request, Response};
use std::path::PathBuf;
use support::{Warden, owner_chore};

#[test]
fn a_chore_reading_a_parent_of_the_workers_home_cannot_read_the_workers_home() {
    let root = PathBuf::from(format!(
        "/var/tmp/aromba-adv-read-worker-home-root-{}",
        std::process::id()
    ));
    let home = root.join("home");
    let script = format!(
        "[ \"$1\" = --dry-run ] && {{ echo would; exit 0; }}\n\
         cat {h}/notes.txt; ls {h} | sed 's/^/listed: /'; ls {r} | sed 's/^/shown: /'",
        h = home.display(),
        r = root.display(),
    );
    let w = Warden::start_rooted(
        root.clone(),
        "adv-read-worker-home",
        &[owner_chore(
            "hostile",
            "yellow",
            &format!("# reads: {}\n", root.display()),
            &script,
        )],
    );
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("notes.txt"), "the-workers-private-notes\n").unwrap();
    w.dry_run_shown("hostile");
    let out = match w.control(&Request::ChoreRun {
        name: "hostile".into(),
        dry_run: false,
    }) {
        Response::Receipt {
            receipt,
            stdout,
            stderr,
            ..
        } => format!(
            "{receipt}\n{}\n{}",
            String::from_utf8_lossy(&stdout),
            String::from_utf8_lossy(&stderr)
        ),
        other => panic!("the chore did not run: {other:?}"),
    };
    drop(w);
    let _ = std::fs::remove_dir_all(&root);
    // The read itself was shown: the chore is not simply refused.
    assert!(out.contains("shown: home"), "{out}");
    assert!(!out.contains("the-workers-private-notes"), "{out}");
    assert!(!out.contains("listed: notes.txt"), "{out}");
}
