//! Replacing a file whole: a reader sees the old bytes or the new ones,
//! never half of either, and a crash leaves at most a `NAME.new` beside it
//! (which the state and integrity code skip).

#![forbid(unsafe_code)]

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Writes `bytes` to `PATH.new` (created afresh with `mode`, never through
/// a link), syncs it, renames it over `path` and syncs the directory.
pub fn replace(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    let Some(name) = path.file_name() else {
        return Err(std::io::Error::other(format!(
            "{} names no file",
            path.display()
        )));
    };
    let mut tmp_name = name.to_os_string();
    tmp_name.push(".new");
    let tmp = path.with_file_name(tmp_name);
    match std::fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}
