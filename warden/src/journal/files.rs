//! The journal's files on disk: the current file, written as plain text,
//! and the rotated ones, `journal.jsonl.1.gz` (newest) to `.N.gz`
//! (oldest), compressed whole with gzip when they are rotated out.

#![forbid(unsafe_code)]

use flate2::Compression;
use flate2::read::MultiGzDecoder;
use flate2::write::GzEncoder;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The most bytes one journal file may decompress to. The Warden rotates at
/// 8 MiB; this leaves room for a larger configuration and stops a
/// decompression bomb from taking the verifier's memory.
pub const MAX_FILE_BYTES: u64 = 256 << 20;

/// The `n`th rotated file of the journal whose current file is `path`
/// (`.1.gz` is the newest).
pub fn rotated(path: &Path, n: usize) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(format!(".{n}.gz"));
    PathBuf::from(s)
}

/// Where a file being rotated out is compressed before it takes its name.
pub(super) fn rotating(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".rotating.gz");
    PathBuf::from(s)
}

/// How many rotated files there are: `.1.gz` up to the first gap.
pub fn rotated_count(path: &Path) -> usize {
    let mut n = 0;
    while rotated(path, n + 1).exists() {
        n += 1;
    }
    n
}

/// The text of a journal file: a rotated file decompressed (every gzip
/// member, as `zcat` shows it), the current one as it is. A missing file
/// is empty.
pub fn read_journal_file(path: &Path) -> io::Result<Vec<u8>> {
    match File::open(path) {
        Ok(f) => read_opened(path, f),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// [`read_journal_file`] of a file opened before (at `path` then).
pub fn read_opened(path: &Path, file: File) -> io::Result<Vec<u8>> {
    let compressed = path.extension().is_some_and(|e| e == "gz");
    let mut text = Vec::new();
    let read = if compressed {
        MultiGzDecoder::new(file)
            .take(MAX_FILE_BYTES + 1)
            .read_to_end(&mut text)
    } else {
        file.take(MAX_FILE_BYTES + 1).read_to_end(&mut text)
    };
    read?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("holds more than {MAX_FILE_BYTES} bytes"),
        ));
    }
    Ok(text)
}

/// Compresses `from` into a new file `to` (mode 0640, group `gid` when
/// given) and syncs it.
pub(super) fn compress(from: &Path, to: &Path, gid: Option<u32>) -> io::Result<u64> {
    let mut input = File::open(from)?;
    let _ = std::fs::remove_file(to);
    let out = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o640)
        .open(to)?;
    if let Some(gid) = gid {
        std::os::unix::fs::fchown(&out, Some(0), Some(gid))?;
    }
    let mut gz = GzEncoder::new(out, Compression::default());
    io::copy(&mut input, &mut gz)?;
    let mut out = gz.finish()?;
    out.flush()?;
    out.sync_all()?;
    Ok(out.metadata()?.len())
}
