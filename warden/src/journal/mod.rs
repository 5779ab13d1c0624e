//! The Warden's journal: one JSON line per request, refusal and event.
//!
//! Lines are appended with `O_APPEND` and `fsync`ed one by one. Each carries
//! `seq` (one more than the line before) and `prev` (the SHA-256 of the line
//! before, as hex; zeros for the first line), so editing, reordering,
//! inserting or deleting a line breaks the chain. With an audit key each line
//! also ends in `"mac"`: HMAC-SHA256 under the key of the line up to that
//! field. The Warden alone rotates the file (`journal.jsonl` →
//! `journal.jsonl.1` → … → `.N`, the oldest dropped), and the chain runs on
//! across files. `verify` recomputes all of it.
//!
//! JSON escapes every control character in strings, so a request or a path
//! holding newlines or escape sequences cannot forge a line.

#![forbid(unsafe_code)]

mod hmac;
pub mod time;
mod verify;

pub use hmac::{constant_time_eq, hmac_sha256};
pub use verify::{VerifyError, VerifyReport, verify};

use aromba_warden_proto::encode_hex as hex;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

pub const FILE_NAME: &str = "journal.jsonl";
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";
const MAC_FIELD: &str = ",\"mac\":\"";

#[derive(Debug)]
pub enum JournalError {
    Io {
        path: PathBuf,
        source: io::Error,
    },
    /// The current file does not end in a line break: a write was cut.
    IncompleteLastLine(PathBuf),
    /// The last line cannot be read as a journal line.
    BadLastLine {
        path: PathBuf,
        why: String,
    },
    Key(KeyError),
}

impl fmt::Display for JournalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JournalError::Io { path, source } => write!(f, "journal {}: {source}", path.display()),
            JournalError::IncompleteLastLine(p) => write!(
                f,
                "journal {} ends in an incomplete line; check it with `aromba-warden journal verify` and move it aside to start a new chain",
                p.display()
            ),
            JournalError::BadLastLine { path, why } => {
                write!(
                    f,
                    "journal {}: the last line is not a journal line: {why}",
                    path.display()
                )
            }
            JournalError::Key(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for JournalError {}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> JournalError + '_ {
    move |source| JournalError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Why an audit key file was refused.
#[derive(Debug)]
pub enum KeyError {
    Io { path: PathBuf, source: io::Error },
    NotRegularFile(PathBuf),
    NotRootOwned(PathBuf),
    TooOpen { path: PathBuf, mode: u32 },
    InsideJournalDir(PathBuf),
    BadLength { path: PathBuf, len: usize },
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::Io { path, source } => write!(f, "audit key {}: {source}", path.display()),
            KeyError::NotRegularFile(p) => {
                write!(f, "audit key {} is not a regular file", p.display())
            }
            KeyError::NotRootOwned(p) => {
                write!(f, "audit key {} is not owned by root", p.display())
            }
            KeyError::TooOpen { path, mode } => write!(
                f,
                "audit key {} has mode {mode:o}; it must be 0600 or stricter",
                path.display()
            ),
            KeyError::InsideJournalDir(p) => write!(
                f,
                "audit key {} is inside the journal's directory; keep it elsewhere",
                p.display()
            ),
            KeyError::BadLength { path, len } => write!(
                f,
                "audit key {} holds {len} bytes; it must hold 32 to 1024",
                path.display()
            ),
        }
    }
}

impl std::error::Error for KeyError {}

/// An audit key: a root-owned file of mode 0600 outside the journal's
/// directory.
pub struct AuditKey(Vec<u8>);

impl fmt::Debug for AuditKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AuditKey(…)")
    }
}

impl AuditKey {
    pub fn load(path: &Path, journal_dir: Option<&Path>) -> Result<AuditKey, KeyError> {
        let err = |source| KeyError::Io {
            path: path.to_path_buf(),
            source,
        };
        let meta = std::fs::symlink_metadata(path).map_err(err)?;
        if !meta.file_type().is_file() {
            return Err(KeyError::NotRegularFile(path.to_path_buf()));
        }
        if meta.uid() != 0 {
            return Err(KeyError::NotRootOwned(path.to_path_buf()));
        }
        if meta.mode() & 0o077 != 0 {
            return Err(KeyError::TooOpen {
                path: path.to_path_buf(),
                mode: meta.mode() & 0o7777,
            });
        }
        if let Some(dir) = journal_dir {
            let key = std::fs::canonicalize(path).map_err(err)?;
            // A journal directory not made yet is compared as written.
            let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
            if key.starts_with(&dir) {
                return Err(KeyError::InsideJournalDir(path.to_path_buf()));
            }
        }
        let bytes = std::fs::read(path).map_err(err)?;
        if !(32..=1024).contains(&bytes.len()) {
            return Err(KeyError::BadLength {
                path: path.to_path_buf(),
                len: bytes.len(),
            });
        }
        Ok(AuditKey(bytes))
    }

    pub fn from_bytes(bytes: Vec<u8>) -> AuditKey {
        AuditKey(bytes)
    }

    fn mac(&self, body: &[u8]) -> String {
        hex(&hmac_sha256(&self.0, body))
    }
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Where and how the journal is written.
#[derive(Debug)]
pub struct JournalConfig {
    pub dir: PathBuf,
    /// Rotate when the current file would grow past this many bytes.
    pub max_bytes: u64,
    /// How many rotated files to keep (`.1` … `.keep`).
    pub keep: usize,
    /// `fsync` after every line. Only the round-trip benchmark turns it off,
    /// to measure what it costs.
    pub fsync: bool,
    pub key: Option<AuditKey>,
    /// The group that may read the journal (the Worker's); `None` keeps it
    /// root's alone.
    pub reader_gid: Option<u32>,
}

impl JournalConfig {
    pub fn new(dir: PathBuf) -> JournalConfig {
        JournalConfig {
            dir,
            max_bytes: 8 << 20,
            keep: 5,
            fsync: true,
            key: None,
            reader_gid: None,
        }
    }
}

/// The head of the chain: what an outside anchor needs to detect truncation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Head {
    pub seq: u64,
    pub hash: String,
}

pub struct Journal {
    config: JournalConfig,
    path: PathBuf,
    file: File,
    size: u64,
    head: Head,
}

impl fmt::Debug for Journal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Journal")
            .field("path", &self.path)
            .field("head", &self.head)
            .finish()
    }
}

fn open_append(path: &Path, reader_gid: Option<u32>) -> Result<File, JournalError> {
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o640)
        .open(path)
        .map_err(io_err(path))?;
    if let Some(gid) = reader_gid {
        std::os::unix::fs::fchown(&file, Some(0), Some(gid)).map_err(io_err(path))?;
    }
    Ok(file)
}

/// The last line of `text` (without its line break) and its `seq`.
fn last_line(path: &Path, text: &[u8]) -> Result<Option<(Vec<u8>, u64)>, JournalError> {
    if text.is_empty() {
        return Ok(None);
    }
    if !text.ends_with(b"\n") {
        return Err(JournalError::IncompleteLastLine(path.to_path_buf()));
    }
    let body = &text[..text.len() - 1];
    let start = memchr_last_newline(body).map_or(0, |i| i + 1);
    let line = &body[start..];
    let value: Value = serde_json::from_slice(line).map_err(|e| JournalError::BadLastLine {
        path: path.to_path_buf(),
        why: e.to_string(),
    })?;
    let seq =
        value
            .get("seq")
            .and_then(Value::as_u64)
            .ok_or_else(|| JournalError::BadLastLine {
                path: path.to_path_buf(),
                why: "no seq".to_string(),
            })?;
    Ok(Some((line.to_vec(), seq)))
}

fn memchr_last_newline(b: &[u8]) -> Option<usize> {
    b.iter().rposition(|&c| c == b'\n')
}

pub fn rotated(path: &Path, n: usize) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(format!(".{n}"));
    PathBuf::from(s)
}

fn read_all(path: &Path) -> Result<Vec<u8>, JournalError> {
    let mut text = Vec::new();
    match File::open(path) {
        Ok(mut f) => {
            f.read_to_end(&mut text).map_err(io_err(path))?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err(path)(e)),
    }
    Ok(text)
}

impl Journal {
    /// Opens (or starts) the journal in `config.dir` and finds the head of
    /// its chain: the last line of the current file, or of `.1` when the
    /// current file is empty (just rotated).
    pub fn open(config: JournalConfig) -> Result<Journal, JournalError> {
        std::fs::create_dir_all(&config.dir).map_err(io_err(&config.dir))?;
        let path = config.dir.join(FILE_NAME);
        let text = read_all(&path)?;
        let mut last = last_line(&path, &text)?;
        if last.is_none() {
            let older = rotated(&path, 1);
            last = last_line(&older, &read_all(&older)?)?;
        }
        let head = match last {
            Some((line, seq)) => Head {
                seq,
                hash: sha256_hex(&line),
            },
            None => Head {
                seq: 0,
                hash: GENESIS.to_string(),
            },
        };
        let file = open_append(&path, config.reader_gid)?;
        Ok(Journal {
            size: text.len() as u64,
            config,
            path,
            file,
            head,
        })
    }

    pub fn head(&self) -> &Head {
        &self.head
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one line made of `fields` plus `seq`, `time` and `prev` (and
    /// `mac` with a key), rotating first when the line would pass the cap.
    /// Returns the line's `seq`.
    pub fn append(&mut self, mut fields: Map<String, Value>) -> Result<u64, JournalError> {
        let seq = self.head.seq + 1;
        fields.insert("seq".into(), Value::from(seq));
        fields.insert(
            "time".into(),
            Value::from(time::rfc3339(std::time::SystemTime::now())),
        );
        fields.insert("prev".into(), Value::from(self.head.hash.clone()));
        fields.remove("mac");
        // Serialising a map of JSON values cannot fail.
        let body = serde_json::to_string(&fields).unwrap_or_default();
        let line = match &self.config.key {
            Some(key) => {
                let mac = key.mac(body.as_bytes());
                format!("{}{MAC_FIELD}{mac}\"}}", &body[..body.len() - 1])
            }
            None => body,
        };
        let bytes = line.len() as u64 + 1;
        if self.size > 0
            && self.size + bytes > self.config.max_bytes
            && let Some(through) = self.rotate()?
        {
            // Rotated and dropped the oldest file. The chain itself says what
            // was dropped, so `verify` can tell rotation from lines deleted
            // at the start. (Rotation without a drop just continues below,
            // into the new file.)
            let mut dropped = Map::new();
            dropped.insert("event".into(), Value::from(DROPPED_EVENT));
            dropped.insert("through_seq".into(), Value::from(through));
            self.append(dropped)?;
            return self.append(without_chain_fields(fields));
        }
        let mut out = line.clone().into_bytes();
        out.push(b'\n');
        // One write of the whole line: O_APPEND makes it land at the end in one piece.
        self.file.write_all(&out).map_err(io_err(&self.path))?;
        if self.config.fsync {
            self.file.sync_data().map_err(io_err(&self.path))?;
        }
        self.size += bytes;
        self.head = Head {
            seq,
            hash: sha256_hex(line.as_bytes()),
        };
        Ok(seq)
    }

    /// Shifts the files by one; returns the last seq of the file dropped, if
    /// one was.
    fn rotate(&mut self) -> Result<Option<u64>, JournalError> {
        let keep = self.config.keep.max(1);
        let oldest = rotated(&self.path, keep);
        let dropped = match last_line(&oldest, &read_all(&oldest)?) {
            Ok(last) => last.map(|(_, seq)| seq),
            // A damaged oldest file is dropped all the same; verify will
            // name what it can no longer see.
            Err(_) => None,
        };
        match std::fs::remove_file(&oldest) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(&oldest)(e)),
        }
        for n in (1..keep).rev() {
            let from = rotated(&self.path, n);
            if from.exists() {
                let to = rotated(&self.path, n + 1);
                std::fs::rename(&from, &to).map_err(io_err(&from))?;
            }
        }
        let first = rotated(&self.path, 1);
        std::fs::rename(&self.path, &first).map_err(io_err(&self.path))?;
        self.file = open_append(&self.path, self.config.reader_gid)?;
        if self.config.fsync {
            File::open(&self.config.dir)
                .and_then(|d| d.sync_all())
                .map_err(io_err(&self.config.dir))?;
        }
        self.size = 0;
        Ok(dropped)
    }
}

/// The event line rotation writes when it drops the oldest file.
pub const DROPPED_EVENT: &str = "journal-dropped";

fn without_chain_fields(mut fields: Map<String, Value>) -> Map<String, Value> {
    for f in ["seq", "time", "prev", "mac"] {
        fields.remove(f);
    }
    fields
}

/// Splits a line into the part the MAC covers and the MAC, if it has one.
pub(crate) fn split_mac(line: &str) -> (String, Option<&str>) {
    // `…,"mac":"<64 hex>"}`
    let tail = MAC_FIELD.len() + 64 + 2;
    if line.len() >= tail && line.ends_with("\"}") {
        let start = line.len() - tail;
        if line.is_char_boundary(start) && line[start..].starts_with(MAC_FIELD) {
            let mac = &line[start + MAC_FIELD.len()..line.len() - 2];
            if mac.bytes().all(|b| b.is_ascii_hexdigit()) {
                return (format!("{}}}", &line[..start]), Some(mac));
            }
        }
    }
    (line.to_string(), None)
}

pub(crate) fn mac_matches(key: &AuditKey, body: &str, mac: &str) -> bool {
    constant_time_eq(key.mac(body.as_bytes()).as_bytes(), mac.as_bytes())
}
