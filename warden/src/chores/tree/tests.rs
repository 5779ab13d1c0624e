//! The walk's tests: every entry type counted, changes seen by ctime and
//! allocated size, names past `PATH_MAX`, failed lookups and bounds, and
//! the setuid strip.

#![forbid(unsafe_code)]

use super::*;
use std::fs::{self, File, FileTimes};
use std::os::unix::fs::symlink;

struct Scratch(PathBuf);

impl Scratch {
    /// Outside /tmp, like a touch.
    fn new(name: &str) -> Scratch {
        let p = PathBuf::from(format!(
            "/var/tmp/aromba-tree-{name}-{}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).unwrap();
        Scratch(p)
    }

    fn touches(&self) -> Vec<PathBuf> {
        vec![self.0.clone()]
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn counted(s: &Scratch, change: impl FnOnce(&Path)) -> (u64, u64) {
    let before = walk(&s.touches());
    change(&s.0);
    changes(&before, &walk(&s.touches()))
}

#[test]
fn every_entry_type_is_recorded_directories_included() {
    let s = Scratch::new("types");
    fs::create_dir(s.0.join("d")).unwrap();
    fs::write(s.0.join("d/f"), b"x").unwrap();
    symlink("/etc/passwd", s.0.join("l")).unwrap();
    std::os::unix::net::UnixListener::bind(s.0.join("sock")).unwrap();
    let t = walk(&s.touches());
    let kinds: Vec<u32> = ["", "d", "d/f", "l", "sock"]
        .iter()
        .map(|n| {
            let p = if n.is_empty() {
                s.0.clone()
            } else {
                s.0.join(n)
            };
            t.entries
                .get(&p)
                .unwrap_or_else(|| panic!("{n} not walked"))
                .mode
                & libc::S_IFMT
        })
        .collect();
    assert_eq!(
        kinds,
        [
            libc::S_IFDIR,
            libc::S_IFDIR,
            libc::S_IFREG,
            libc::S_IFLNK,
            libc::S_IFSOCK
        ]
    );
    assert_eq!(t.failed, 0);
    // The symlink was not followed: /etc/passwd is not in the tree.
    assert_eq!(t.entries.len(), 5);
}

#[test]
fn a_same_size_rewrite_with_the_mtime_put_back_is_a_change() {
    let s = Scratch::new("rewrite");
    fs::write(s.0.join("f"), b"aaaa").unwrap();
    let mtime = fs::metadata(s.0.join("f")).unwrap().modified().unwrap();
    let (files, bytes) = counted(&s, |d| {
        // The ctime moves on at least by the clock's granularity.
        std::thread::sleep(std::time::Duration::from_millis(20));
        fs::write(d.join("f"), b"bbbb").unwrap();
        File::options()
            .write(true)
            .open(d.join("f"))
            .unwrap()
            .set_times(FileTimes::new().set_modified(mtime))
            .unwrap();
        assert_eq!(
            fs::metadata(d.join("f")).unwrap().modified().unwrap(),
            mtime
        );
    });
    assert_eq!((files, bytes), (1, 1));
}

#[test]
fn a_chmod_alone_is_a_change() {
    let s = Scratch::new("chmod");
    fs::write(s.0.join("f"), b"aaaa").unwrap();
    let (files, _) = counted(&s, |d| {
        fs::set_permissions(d.join("f"), Permissions::from_mode(0o4777)).unwrap();
    });
    assert_eq!(files, 1);
}

#[test]
fn new_directories_count_and_so_does_the_directory_holding_them() {
    let s = Scratch::new("dirs");
    let (files, _) = counted(&s, |d| {
        for i in 0..30 {
            fs::create_dir(d.join(format!("d{i}"))).unwrap();
        }
    });
    assert_eq!(files, 31);
}

/// A chain of 250-byte names 20 deep: 5,000 bytes, past `PATH_MAX`.
fn long_chain(top: &Path) -> Vec<OsString> {
    let name = OsString::from("n".repeat(250));
    let mut dir = match Dir::open_path(top).unwrap() {
        Sub::Dir(d) => d,
        other => panic!("{other:?}"),
    };
    let mut names = Vec::new();
    for _ in 0..20 {
        dir.mkdir(&name, 0o755).unwrap();
        names.push(name.clone());
        dir = match dir.child_dir(&name).unwrap() {
            Sub::Dir(d) => d,
            other => panic!("{other:?}"),
        };
    }
    for i in 0..5 {
        dir.create_file(OsStr::new(&format!("f{i}")), 0o644)
            .unwrap();
    }
    names
}

#[test]
fn a_chain_of_names_past_path_max_is_walked_to_its_files() {
    let s = Scratch::new("deep");
    let (files, _) = counted(&s, |d| {
        long_chain(d);
    });
    // 20 directories, 5 files and the touch itself.
    assert_eq!(files, 26);
    let t = walk(&s.touches());
    assert!(t.entries.keys().any(|p| p.as_os_str().len() > 5000));
    assert_eq!(t.failed, 0);
    // Clean up what remove_dir_all cannot reach by path.
    remove_chain(&s.0);
}

fn remove_chain(top: &Path) {
    let name = OsString::from("n".repeat(250));
    let mut dirs = vec![match Dir::open_path(top).unwrap() {
        Sub::Dir(d) => d,
        other => panic!("{other:?}"),
    }];
    while let Ok(Sub::Dir(d)) = dirs.last().unwrap().child_dir(&name) {
        dirs.push(d);
    }
    let last = dirs.pop().unwrap();
    for i in 0..5 {
        let _ = last.unlink(OsStr::new(&format!("f{i}")));
    }
    drop(last);
    while let Some(d) = dirs.pop() {
        let _ = fs::remove_dir(at(&d, &name));
    }
}

#[test]
fn a_sparse_file_weighs_its_apparent_size_and_a_preallocated_one_its_blocks() {
    let s = Scratch::new("sparse");
    let (_, bytes) = counted(&s, |d| {
        File::create(d.join("sparse"))
            .unwrap()
            .set_len(50 << 30)
            .unwrap();
    });
    assert!(bytes >= 50 << 30, "{bytes}");
    let e = Entry {
        mode: libc::S_IFREG | 0o644,
        uid: 0,
        gid: 0,
        size: 0,
        allocated: 3 << 30,
        mtime: (0, 0),
        ctime: (0, 0),
        ino: 1,
        dev: 1,
        nlink: 1,
        caps: false,
    };
    let mut after = Tree::default();
    after.entries.insert(PathBuf::from("/t/pre"), e);
    assert_eq!(changes(&Tree::default(), &after), (1, 3 << 30));
    // Blocks allocated to a file of unchanged size weigh what they add.
    let mut before = Tree::default();
    before
        .entries
        .insert(PathBuf::from("/t/pre"), Entry { allocated: 0, ..e });
    assert_eq!(changes(&before, &after), (1, 3 << 30));
}

#[test]
fn a_failed_lookup_counts_as_a_change() {
    let empty = Tree::default();
    let failed = Tree {
        failed: 2,
        ..Tree::default()
    };
    assert_eq!(changes(&empty, &failed), (2, 0));
    assert_eq!(changes(&failed, &empty), (2, 0));
}

#[test]
fn a_directory_swapped_for_a_symlink_is_a_failed_lookup_not_followed() {
    let s = Scratch::new("swap");
    fs::create_dir(s.0.join("d")).unwrap();
    let mut w = Walker {
        tree: Tree::default(),
        path_bytes: 0,
        stack: Vec::new(),
    };
    let top = match Dir::open_path(&s.0).unwrap() {
        Sub::Dir(d) => Rc::new(d),
        other => panic!("{other:?}"),
    };
    w.children(&top, &s.0, 0);
    assert_eq!(w.stack.len(), 1, "d is queued");
    // Between the listing and the opening, d becomes a link to /etc.
    fs::remove_dir(s.0.join("d")).unwrap();
    symlink("/etc", s.0.join("d")).unwrap();
    w.drain();
    assert_eq!(w.tree.failed, 1);
    let d = s.0.join("d");
    assert!(!w.tree.entries.keys().any(|p| p.starts_with(&d) && p != &d));
    assert!(!w.tree.entries.keys().any(|p| p.ends_with("passwd")));
}

#[test]
fn a_tree_deeper_than_the_bound_is_over_it() {
    let s = Scratch::new("bound");
    let mut p = s.0.clone();
    for _ in 0..=MAX_DEPTH {
        p.push("d");
    }
    fs::create_dir_all(&p).unwrap();
    assert!(walk(&s.touches()).over_bounds);
}

#[test]
fn a_missing_touch_holds_nothing() {
    let t = walk(&[PathBuf::from("/var/tmp/aromba-tree-no-such-touch/x")]);
    assert!(t.entries.is_empty() && t.failed == 0 && !t.over_bounds);
}

#[test]
fn a_new_setuid_file_is_stripped_and_a_moved_one_left_alone() {
    let s = Scratch::new("strip");
    fs::write(s.0.join("old"), b"x").unwrap();
    fs::set_permissions(s.0.join("old"), Permissions::from_mode(0o4755)).unwrap();
    let before = walk(&s.touches());
    fs::write(s.0.join("rootsh"), b"x").unwrap();
    fs::set_permissions(s.0.join("rootsh"), Permissions::from_mode(0o6755)).unwrap();
    fs::create_dir(s.0.join("sgid")).unwrap();
    fs::set_permissions(s.0.join("sgid"), Permissions::from_mode(0o2775)).unwrap();
    fs::rename(s.0.join("old"), s.0.join("moved")).unwrap();
    let after = walk(&s.touches());
    let found = strip_gained(&s.touches(), &before, &after);
    let mode = |n: &str| fs::symlink_metadata(s.0.join(n)).unwrap().mode() & 0o7777;
    assert_eq!(mode("rootsh"), 0o755);
    assert_eq!(mode("sgid"), 0o775);
    assert_eq!(mode("moved"), 0o4755, "a privilege it had before is kept");
    assert_eq!(
        found,
        vec![
            Gained {
                path: s.0.join("rootsh"),
                what: "setuid+setgid".into(),
                fix: Fix::Stripped
            },
            Gained {
                path: s.0.join("sgid"),
                what: "setgid".into(),
                fix: Fix::Stripped
            },
        ]
    );
}

#[test]
fn a_new_link_to_a_setuid_file_outside_the_touches_is_removed_and_the_file_kept() {
    let s = Scratch::new("link");
    let touch = s.0.join("touch");
    fs::create_dir(&touch).unwrap();
    // The system's own setuid binary, outside the touch.
    let system = s.0.join("passwd");
    fs::write(&system, b"x").unwrap();
    fs::set_permissions(&system, Permissions::from_mode(0o4755)).unwrap();
    let touches = vec![touch.clone()];
    let before = walk(&touches);
    fs::hard_link(&system, touch.join("x")).unwrap();
    let after = walk(&touches);
    let found = strip_gained(&touches, &before, &after);
    assert_eq!(
        found,
        vec![Gained {
            path: touch.join("x"),
            what: "setuid".into(),
            fix: Fix::Unlinked
        }]
    );
    assert!(!touch.join("x").exists());
    assert_eq!(
        fs::metadata(&system).unwrap().mode() & 0o7777,
        0o4755,
        "the system's file keeps its bits"
    );
}

#[test]
fn a_new_link_to_a_setuid_file_the_touch_held_before_is_removed() {
    let s = Scratch::new("inlink");
    fs::write(s.0.join("a"), b"x").unwrap();
    fs::set_permissions(s.0.join("a"), Permissions::from_mode(0o4755)).unwrap();
    let before = walk(&s.touches());
    fs::hard_link(s.0.join("a"), s.0.join("b")).unwrap();
    let after = walk(&s.touches());
    let found = strip_gained(&s.touches(), &before, &after);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        (found[0].path.clone(), found[0].fix.clone()),
        (s.0.join("b"), Fix::Unlinked)
    );
    assert!(!s.0.join("b").exists());
    assert_eq!(fs::metadata(s.0.join("a")).unwrap().mode() & 0o7777, 0o4755);
}

#[test]
fn a_symlink_in_place_of_a_stripped_file_is_not_followed() {
    let s = Scratch::new("nofollow");
    let before = walk(&s.touches());
    let outside = Scratch::new("nofollow-target");
    fs::write(outside.0.join("t"), b"x").unwrap();
    fs::set_permissions(outside.0.join("t"), Permissions::from_mode(0o4755)).unwrap();
    fs::write(s.0.join("f"), b"x").unwrap();
    fs::set_permissions(s.0.join("f"), Permissions::from_mode(0o4755)).unwrap();
    let after = walk(&s.touches());
    // After the walk, before the strip, f becomes a link to another file.
    fs::remove_file(s.0.join("f")).unwrap();
    symlink(outside.0.join("t"), s.0.join("f")).unwrap();
    let found = strip_gained(&s.touches(), &before, &after);
    assert!(matches!(found[0].fix, Fix::Failed(_)), "{found:?}");
    assert_eq!(
        fs::metadata(outside.0.join("t")).unwrap().mode() & 0o7777,
        0o4755
    );
}

#[test]
fn paths_are_shown_escaped() {
    let p = PathBuf::from(OsStr::from_bytes(b"/t/a\nb\x1b\xff"));
    assert_eq!(shown(&p), "/t/a\\nb\\x1b\\xff");
    let long = PathBuf::from(format!("/t/{}/end", "n".repeat(5000)));
    let short = shown_short(&long);
    assert!(
        short.len() < SHOWN_BOUND + 10 && short.starts_with("/t/nn") && short.ends_with("n/end")
    );
}

#[test]
fn a_setgid_bit_a_new_directory_inherits_is_not_gained_and_a_moved_one_is_kept() {
    let s = Scratch::new("inherit");
    fs::create_dir(s.0.join("journal")).unwrap();
    fs::set_permissions(s.0.join("journal"), Permissions::from_mode(0o2755)).unwrap();
    fs::create_dir(s.0.join("old")).unwrap();
    fs::set_permissions(s.0.join("old"), Permissions::from_mode(0o2755)).unwrap();
    let before = walk(&s.touches());
    fs::create_dir(s.0.join("journal/new")).unwrap();
    assert_eq!(
        fs::metadata(s.0.join("journal/new")).unwrap().mode() & 0o2000,
        0o2000,
        "the kernel gave it the bit"
    );
    fs::rename(s.0.join("old"), s.0.join("moved")).unwrap();
    let after = walk(&s.touches());
    assert_eq!(strip_gained(&s.touches(), &before, &after), vec![]);
    assert_eq!(
        fs::metadata(s.0.join("moved")).unwrap().mode() & 0o7777,
        0o2755
    );
}
