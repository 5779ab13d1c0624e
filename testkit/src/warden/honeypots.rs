//! Looking at the honeypots from outside a running Warden: whether one is
//! planted as install plants it, waiting for a new planting, and which
//! inodes this process's inotify descriptors watch.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

/// `path`'s metadata when it is a honeypot as install plants it: root's
/// regular file, mode 0640, no link followed.
pub fn is_planted(path: &Path) -> Option<std::fs::Metadata> {
    std::fs::symlink_metadata(path)
        .ok()
        .filter(|m| m.is_file() && m.uid() == 0 && m.mode() & 0o7777 == 0o640)
}

/// Waits (up to 5 s) for `path` to be a honeypot as install plants it,
/// other than the inode `not`: its metadata, or `None`.
pub fn planted_within(path: &Path, not: Option<u64>) -> Option<std::fs::Metadata> {
    planted_in(path, not, 500)
}

fn planted_in(path: &Path, not: Option<u64>, tries: u32) -> Option<std::fs::Metadata> {
    for _ in 0..tries {
        if let Some(m) = is_planted(path)
            && Some(m.ino()) != not
        {
            return Some(m);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

/// Waits for `path` to be a honeypot as install plants it, other than the
/// inode `not`, failing the test when nothing was planted in 30 s (each
/// planting syncs the disk, as each journal line does: on a loaded disk a
/// planting behind a backlog of journal lines takes seconds).
pub fn replanted(path: &Path, not: Option<u64>) -> std::fs::Metadata {
    planted_in(path, not, 3_000)
        .unwrap_or_else(|| panic!("{} was not planted again", path.display()))
}

/// Inodes watched by any inotify descriptor of this process.
pub fn inotify_watched_inodes() -> Vec<u64> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc/self/fdinfo") else {
        return out;
    };
    for e in rd.flatten() {
        let Ok(text) = std::fs::read_to_string(e.path()) else {
            continue;
        };
        for l in text.lines().filter(|l| l.starts_with("inotify wd:")) {
            if let Some(ino) = l
                .split_whitespace()
                .find_map(|f| f.strip_prefix("ino:"))
                .and_then(|h| u64::from_str_radix(h, 16).ok())
            {
                out.push(ino);
            }
        }
    }
    out
}
