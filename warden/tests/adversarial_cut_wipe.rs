//! The wipe of the Worker's AI key at Cut, against a Worker that owns the
//! directory the key is in. What it puts at the key's name: a sparse file
//! of any apparent size (which costs it nothing, and root overwriting it
//! byte for byte filled the disk), a file that grows while the wipe runs,
//! a hard link or a symlink to a file of root's, a fifo, a directory, and
//! a configuration directory swapped for a link to a directory of root's.
//! What holds: the key's name is gone after Cut, root writes no more than
//! the bound and nothing through a link, the Cut neither hangs nor stops,
//! and what it could not wipe is said in the journal. The sparse and full
//! cases on a small filesystem of their own (a tmpfs mounted over the
//! Worker's configuration directory); each through a real Warden sent
//! `panic`.

use aromba_testkit::warden as support;

use aromba_warden_proto::{Request, Response};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;
use support::Warden;

/// A tmpfs of `size` over `dir`, unmounted when dropped.
struct Mounted(std::path::PathBuf);

impl Mounted {
    fn tmpfs(dir: &Path, size: &str) -> Mounted {
        std::fs::create_dir_all(dir).unwrap();
        let out = assert_cmd::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size},mode=0755")])
            .arg("aromba-test")
            .arg(dir)
            .output()
            .expect("mount runs");
        assert!(
            out.status.success(),
            "mount a tmpfs (root): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Mounted(dir.to_path_buf())
    }

    /// Bytes in use on the filesystem.
    fn used(&self) -> u64 {
        let out = assert_cmd::Command::new("df")
            .args(["--output=used", "-B1"])
            .arg(&self.0)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .nth(1)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = assert_cmd::Command::new("umount").arg(&self.0).output();
    }
}

fn cut(w: &Warden) {
    let Response::Ladder { name, .. } = w.ask(&Request::Panic) else {
        panic!("no ladder answer")
    };
    assert_eq!(name, "cut");
}

/// `Request::Panic` on the Worker socket from another thread, answered
/// within `secs` or `None`.
fn cut_within(w: &Warden, secs: u64) -> Option<Response> {
    let socket = w.layout().worker_socket();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use aromba_warden_proto::{
            MAX_RESPONSE, decode_response, encode_request, read_frame, write_frame,
        };
        let mut s = std::os::unix::net::UnixStream::connect(socket).unwrap();
        write_frame(&mut s, &encode_request(&Request::Panic), 1 << 16).unwrap();
        let r = decode_response(&read_frame(&mut s, MAX_RESPONSE).unwrap()).unwrap();
        let _ = tx.send(r);
    });
    rx.recv_timeout(Duration::from_secs(secs)).ok()
}

#[test]
fn a_sparse_ten_gigabyte_key_file_is_removed_at_cut_without_a_byte_written() {
    let w = Warden::start("cut-wipe-sparse", false, &[]);
    let dir = w.layout().worker_config_dir;
    let fs = Mounted::tmpfs(&dir, "4m");
    let key = w.layout().ai_key_file();
    let f = std::fs::File::create(&key).unwrap();
    f.set_len(10 * 1024 * 1024 * 1024).unwrap();
    drop(f);
    let before = fs.used();
    cut(&w);
    assert!(!key.exists(), "the sparse key file survived Cut");
    assert!(
        fs.used() <= before,
        "the wipe wrote into the Worker's filesystem: {} bytes used, {before} before",
        fs.used()
    );
    let journal = w.journal();
    assert!(journal.contains("ai-key-wiped"), "{journal}");
    assert!(journal.contains("removed without writing"), "{journal}");
}

#[test]
fn a_key_file_on_a_full_disk_is_removed_though_its_overwrite_fails() {
    let w = Warden::start("cut-wipe-full", false, &[]);
    let dir = w.layout().worker_config_dir;
    let _fs = Mounted::tmpfs(&dir, "1m");
    let key = w.layout().ai_key_file();
    // A sparse key of 60 KiB (under the bound), then the disk filled.
    let f = std::fs::File::create(&key).unwrap();
    f.set_len(60 * 1024).unwrap();
    drop(f);
    let filler = dir.join("filler");
    let chunk = vec![7u8; 64 * 1024];
    let mut out = std::fs::File::create(&filler).unwrap();
    while std::io::Write::write_all(&mut out, &chunk).is_ok() {}
    drop(out);
    cut(&w);
    assert!(!key.exists(), "the key file survived a failed overwrite");
    assert!(w.journal().contains("ai-key-wiped"));
}

#[test]
fn a_small_key_file_is_still_overwritten_and_removed() {
    let w = Warden::start("cut-wipe-small", false, &[]);
    let dir = w.layout().worker_config_dir;
    let _fs = Mounted::tmpfs(&dir, "1m");
    let key = w.layout().ai_key_file();
    std::fs::write(&key, "[assistant]\napi_key = \"sk-proj-abc\"\n").unwrap();
    cut(&w);
    assert!(!key.exists());
    let journal = w.journal();
    assert!(journal.contains("ai-key-wiped"));
    assert!(!journal.contains("removed without writing"), "{journal}");
}

// ---------------------------------------------------------------------------
// What else the Worker puts at the key's name.

/// A key file that is a hard link to a file of root's (a host with
/// `fs.protected_hardlinks=0`, or a root file the Worker may read and
/// write): the wipe must not zero root's file through the link.
#[test]
fn a_key_file_hard_linked_to_a_root_file_is_not_zeroed_through_the_link() {
    let w = Warden::start("r30-wipe-hardlink", false, &[]);
    let key = w.layout().ai_key_file();
    std::fs::create_dir_all(key.parent().unwrap()).unwrap();
    let victim = w.root.join("roots-own-secret");
    std::fs::write(&victim, "root's own bytes\n").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
    let _ = std::fs::remove_file(&key);
    std::fs::hard_link(&victim, &key).unwrap();
    cut(&w);
    assert!(!key.exists(), "the key's name survived Cut");
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "root's own bytes\n",
        "root's file was overwritten through a hard link at the key's name"
    );
}

#[test]
fn a_fifo_at_the_key_name_neither_hangs_the_cut_nor_survives_it() {
    let w = Warden::start("r30-wipe-fifo", false, &[]);
    let key = w.layout().ai_key_file();
    std::fs::create_dir_all(key.parent().unwrap()).unwrap();
    let out = assert_cmd::Command::new("mkfifo")
        .arg(&key)
        .output()
        .unwrap();
    assert!(out.status.success());
    let r = cut_within(&w, 15).expect("the Cut hung on a fifo at the key's name");
    assert!(matches!(r, Response::Ladder { .. }), "{r:?}");
    assert!(
        std::fs::symlink_metadata(&key).is_err(),
        "the fifo survived"
    );
    assert!(w.journal().contains("not a regular file"));
}

#[test]
fn a_directory_at_the_key_name_does_not_stop_the_cut_and_is_said() {
    let w = Warden::start("r30-wipe-dir", false, &[]);
    let key = w.layout().ai_key_file();
    std::fs::create_dir_all(key.join("inner")).unwrap();
    std::fs::write(key.join("inner/secret"), "k").unwrap();
    cut(&w);
    assert_eq!(w.ladder(), 3);
    let journal = w.journal();
    assert!(journal.contains("ai-key-wiped"), "{journal}");
    assert!(journal.contains("is a directory"), "{journal}");
    // Nothing inside it was touched.
    assert_eq!(
        std::fs::read_to_string(key.join("inner/secret")).unwrap(),
        "k"
    );
}

#[test]
fn a_key_that_is_a_link_to_a_root_file_is_unlinked_and_the_target_kept() {
    let w = Warden::start("r30-wipe-symlink", false, &[]);
    let key = w.layout().ai_key_file();
    std::fs::create_dir_all(key.parent().unwrap()).unwrap();
    let victim = w.root.join("roots-linked");
    std::fs::write(&victim, "root's\n").unwrap();
    let _ = std::fs::remove_file(&key);
    std::os::unix::fs::symlink(&victim, &key).unwrap();
    cut(&w);
    assert!(std::fs::symlink_metadata(&key).is_err());
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root's\n");
}

/// The Worker's configuration directory itself swapped for a link to a
/// directory of root's holding a `secrets.toml`.
#[test]
fn a_config_dir_that_is_a_link_to_roots_dir_keeps_roots_file() {
    let w = Warden::start("r30-wipe-dirlink", false, &[]);
    let layout = w.layout();
    let dir = layout.worker_config_dir.clone();
    let roots = w.root.join("roots-config");
    std::fs::create_dir_all(&roots).unwrap();
    std::fs::write(roots.join("secrets.toml"), "root's own\n").unwrap();
    let aside = dir.with_file_name("aside-config");
    std::fs::rename(&dir, &aside).unwrap();
    std::os::unix::fs::symlink(&roots, &dir).unwrap();
    cut(&w);
    assert_eq!(
        std::fs::read_to_string(roots.join("secrets.toml")).unwrap(),
        "root's own\n"
    );
    let _ = std::fs::remove_file(&dir);
    let _ = std::fs::rename(&aside, &dir);
}

/// A key file made to grow while the wipe runs: never more than the bound
/// written, name removed.
#[test]
fn a_key_file_growing_during_the_wipe_costs_root_no_more_than_the_bound() {
    let w = Warden::start("r30-wipe-grow", false, &[]);
    let key = w.layout().ai_key_file();
    std::fs::create_dir_all(key.parent().unwrap()).unwrap();
    std::fs::write(&key, vec![b'k'; 60 * 1024]).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let grower = {
        let key = key.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            // Holds the inode open and keeps extending it (sparsely, far).
            let f = std::fs::OpenOptions::new().write(true).open(&key).unwrap();
            let mut len = 60 * 1024u64;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                len += 1 << 30;
                let _ = f.set_len(len);
                std::thread::sleep(Duration::from_millis(1));
            }
            f
        })
    };
    std::thread::sleep(Duration::from_millis(20));
    cut(&w);
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let f = grower.join().unwrap();
    assert!(
        std::fs::symlink_metadata(&key).is_err(),
        "the key's name survived"
    );
    // Blocks actually allocated to the inode: at most the bound plus a few
    // pages for the file's own first 60 KiB.
    let blocks = f.metadata().unwrap().blocks() * 512;
    assert!(
        blocks <= 2 * aromba_warden::worker_dirs::WIPE_BOUND + 8192,
        "{blocks} bytes allocated by the wipe"
    );
}
