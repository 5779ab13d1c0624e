//! The wipe of the Worker's AI key at Cut, against a Worker that owns the
//! directory the key is in: a sparse file of any apparent size costs it
//! nothing, and root overwriting it byte for byte filled the disk. On a
//! small filesystem of its own (a tmpfs mounted over the Worker's
//! configuration directory), through a real Warden sent `panic`.

mod support;

use aromba_warden_proto::{Request, Response};
use std::path::Path;
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
