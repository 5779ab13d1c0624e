//! The damage cap saw only part of what a chore changed: it compared size,
//! mtime and inode of regular files, reached by path, and skipped whatever
//! it could not look up. Same-size rewrites with the mtime put back, a
//! `chmod`, new directories, names past `PATH_MAX` and the blocks of a
//! preallocated file all counted as nothing. The cap now walks the touches
//! by open directory descriptors and counts every entry type by its whole
//! metadata, ctime included, with the larger of apparent and allocated
//! size; a failed lookup is a change. And what slips past the cage's
//! filter into a touch with setuid, setgid or file capabilities it did not
//! have is taken away after the run, journaled, on the receipt and a ladder
//! signal. Each chore here is hostile and runs through a real Warden and
//! real bubblewrap, unless it says otherwise. Needs root and bubblewrap.

use aromba_testkit::warden as support;

use aromba_warden::chores::header::Header;
use aromba_warden::chores::run::{Chore, Context, Mode, Origin, run};
use aromba_warden::layout::Layout;
use aromba_warden_proto::{Request, Response};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;
use support::{Warden, owner_chore};

/// A dry run writes nothing: the hostile body runs only for real.
fn hostile(body: &str) -> String {
    format!("if [ -n \"$AROMBA_DRY_RUN\" ]; then exit 0; fi\ncd TOUCHED || exit 1\n{body}")
}

/// Runs the owner's chore `name` for real (after the dry run the owner
/// saw); its receipt and whether it was clean.
fn real_run(w: &Warden, name: &str) -> (String, bool) {
    w.dry_run_shown(name);
    match w.control(&Request::ChoreRun {
        name: name.into(),
        dry_run: false,
    }) {
        Response::Receipt { receipt, ok, .. } => (receipt, ok),
        other => panic!("{name} did not run: {other:?}"),
    }
}

/// `count` empty files in the touched directory, there before the run.
fn planted(w: &Warden, count: usize) {
    for i in 0..count {
        std::fs::write(w.touched.join(format!("f{i}")), b"aaaa").unwrap();
    }
}

const SMALL_CAP: &str = "# max_changes: 10 files, 1 GB\n";

/// 250-byte names 20 deep (5,000 bytes, past `PATH_MAX`), entered one at
/// a time; the shell's commands after it run at the bottom.
const LONG_CHAIN: &str =
    "n=$(printf 'n%.0s' $(seq 250))\nfor i in $(seq 20); do mkdir $n && cd -P $n || exit 1; done\n";

#[test]
fn same_size_rewrites_with_the_mtime_put_back_are_counted() {
    let w = Warden::start(
        "adv-cap-touch-r",
        false,
        &[owner_chore(
            "rewrite",
            "green",
            SMALL_CAP,
            &hostile(
                "for f in f*; do touch -r $f /tmp/ref && printf bbbb > $f && touch -r /tmp/ref $f || exit 1; done",
            ),
        )],
    );
    planted(&w, 12);
    let (receipt, ok) = real_run(&w, "rewrite");
    assert_eq!(std::fs::read(w.touched.join("f0")).unwrap(), b"bbbb");
    assert!(
        receipt.contains(" 12 files changed (12 bytes)"),
        "{receipt}"
    );
    assert!(
        receipt.contains("killed at the damage cap") && !ok,
        "{receipt}"
    );
    assert!(w.journal().contains("\"files_changed\":12"));
}

#[test]
fn chmod_only_changes_are_counted_even_to_the_same_mode() {
    let w = Warden::start(
        "adv-cap-chmod",
        false,
        &[owner_chore(
            "chmods",
            "green",
            SMALL_CAP,
            // Six files get a new mode; six the mode they had, which moves
            // nothing but their ctime.
            &hostile("chmod 600 f0 f1 f2 f3 f4 f5 && chmod 644 f6 f7 f8 f9 f10 f11"),
        )],
    );
    planted(&w, 12);
    for i in 6..12 {
        let f = w.touched.join(format!("f{i}"));
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let (receipt, ok) = real_run(&w, "chmods");
    assert!(receipt.contains(" 12 files changed"), "{receipt}");
    assert!(
        receipt.contains("killed at the damage cap") && !ok,
        "{receipt}"
    );
}

#[test]
fn a_thousand_and_one_new_directories_are_over_the_default_cap() {
    let w = Warden::start(
        "adv-cap-dirs",
        false,
        &[owner_chore(
            "dirs",
            "green",
            "",
            &hostile("mkdir $(seq -f 'd%g' 1 1001)"),
        )],
    );
    let (receipt, ok) = real_run(&w, "dirs");
    // 1,001 directories and the touch that holds them.
    assert!(receipt.contains(" 1002 files changed"), "{receipt}");
    assert!(
        receipt.contains("killed at the damage cap") && !ok,
        "{receipt}"
    );
}

#[test]
fn a_chain_of_names_past_path_max_whose_lookups_fail_by_path_is_counted() {
    let w = Warden::start(
        "adv-cap-deep",
        false,
        &[owner_chore(
            "deep",
            "green",
            "# max_changes: 30 files, 1 GB\n",
            &hostile(&format!(
                "{LONG_CHAIN}for i in $(seq 5); do head -c 1000 /dev/zero > f$i || exit 1; done"
            )),
        )],
    );
    let (receipt, ok) = real_run(&w, "deep");
    // 20 directories, 5 files and the touch: under this cap, so clean.
    assert!(receipt.contains(" 26 files changed ("), "{receipt}");
    assert!(ok, "{receipt}");
}

#[test]
fn a_sparse_50_gb_file_past_path_max_is_over_the_default_cap() {
    let w = Warden::start(
        "adv-cap-sparse",
        false,
        &[owner_chore(
            "sparse",
            "green",
            "",
            &hostile(&format!("{LONG_CHAIN}truncate -s 50G big")),
        )],
    );
    let (receipt, ok) = real_run(&w, "sparse");
    assert!(receipt.contains(" 22 files changed ("), "{receipt}");
    assert!(
        receipt.contains("killed at the damage cap") && !ok,
        "{receipt}"
    );
}

#[test]
fn blocks_preallocated_past_a_files_size_are_weighed() {
    let w = Warden::start(
        "adv-cap-falloc",
        false,
        &[owner_chore(
            "falloc",
            "green",
            SMALL_CAP,
            // Apparent size 0; 1.2 GB on disk, over the 1 GB cap.
            &hostile(": > hog && fallocate -n -l 1200M hog"),
        )],
    );
    let (receipt, ok) = real_run(&w, "falloc");
    let _ = std::fs::remove_file(w.touched.join("hog"));
    assert!(
        receipt.contains("killed at the damage cap") && !ok,
        "{receipt}"
    );
}

#[test]
fn a_hard_link_to_a_setuid_file_is_removed_journaled_and_signalled() {
    let w = Warden::start(
        "adv-cap-suid-link",
        false,
        &[owner_chore(
            "linker",
            "green",
            "",
            &hostile("ln suid rootsh"),
        )],
    );
    // A setuid program the touch held before the run: the link is a new
    // name for it that no chmod made, so no filter on chmod sees it.
    let suid = w.touched.join("suid");
    std::fs::copy("/bin/true", &suid).unwrap();
    std::fs::set_permissions(&suid, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let step = w.ladder();
    let (receipt, ok) = real_run(&w, "linker");
    assert!(
        !w.touched.join("rootsh").exists(),
        "the new link is still there"
    );
    assert_eq!(
        std::fs::metadata(&suid).unwrap().permissions().mode() & 0o7777,
        0o4755,
        "the file it had before keeps its bits"
    );
    let said = format!(
        "{} gained setuid (link removed)",
        w.touched.join("rootsh").display()
    );
    assert!(receipt.contains(&said) && !ok, "{receipt}");
    let journal = w.journal();
    assert!(
        journal
            .lines()
            .any(|l| l.contains("\"gained_privilege\"") && l.contains(&said)),
        "{journal}"
    );
    assert!(
        journal
            .lines()
            .any(|l| l.contains("\"ladder-signal\"") && l.contains("files-outside-touches")),
        "{journal}"
    );
    assert!(w.ladder() > step, "the ladder did not move");
}

/// Without namespaces only green system chores run, and no filter stands
/// between them and `chmod`: the same walk takes back what they gave.
#[test]
fn setuid_and_capabilities_given_by_a_chore_run_without_the_cage_are_taken_back() {
    let root = PathBuf::from(format!("/var/tmp/aromba-cap-nocage-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let touched = root.join("touched");
    std::fs::create_dir_all(&touched).unwrap();
    // The system's own setuid program, outside the touch.
    let system = root.join("passwd");
    std::fs::copy("/bin/true", &system).unwrap();
    std::fs::set_permissions(&system, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let script = format!(
        "#!/bin/sh\n# aromba-chore: 1\n# name: no-cage\n# description: A chore of the tests\n# color: green\n# touches: {t}\n# network: no\n# schedule: manual\n# end\ncd {t} || exit 1\ncp /bin/true rootsh && chmod 4755 rootsh && cp /bin/true capsh && setcap cap_net_raw+ep capsh && mkdir shared && chmod 2775 shared && ln {s} passwd\n",
        t = touched.display(),
        s = system.display()
    );
    let chore = Chore {
        header: Header::parse(&script).expect("the test header parses"),
        script,
        origin: Origin::System,
    };
    let layout = Layout::rooted(&root.join("aromba"));
    let ctx = Context {
        layout: &layout,
        isolation: false,
        days_installed: 30,
        cap_confirmed: false,
        cap_interval: Duration::from_secs(5),
        timeout: Duration::from_secs(60),
        halt: None,
        egress: None,
        settings: Vec::new(),
        secrets: Vec::new(),
    };
    let r = run(&chore, Mode::Real, &ctx).expect("runs");
    assert_eq!(r.outcome.exit_code, Some(0), "{r:?}");
    let mode = |n: &str| {
        std::fs::symlink_metadata(touched.join(n))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    };
    assert_eq!(mode("rootsh"), 0o755);
    assert_eq!(mode("shared"), 0o775);
    assert_eq!(
        aromba_warden::system::lgetxattr(&touched.join("capsh"), c"security.capability").unwrap(),
        None
    );
    assert!(!touched.join("passwd").exists());
    assert_eq!(
        std::fs::metadata(&system).unwrap().permissions().mode() & 0o7777,
        0o4755
    );
    let said: Vec<String> = r.gained_privilege.iter().map(|g| g.describe()).collect();
    let t = touched.display();
    assert_eq!(
        said,
        [
            format!("{t}/capsh gained file capabilities (stripped)"),
            format!("{t}/passwd gained setuid (link removed)"),
            format!("{t}/rootsh gained setuid (stripped)"),
            format!("{t}/shared gained setgid (stripped)"),
        ]
    );
    let _ = std::fs::remove_dir_all(&root);
}
