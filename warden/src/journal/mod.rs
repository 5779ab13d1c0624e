//! The Warden's journal: one JSON line per request, refusal and event.
//!
//! Lines are appended with `O_APPEND` and `fsync`ed one by one. Each carries
//! `seq` (one more than the line before) and `prev` (the SHA-256 of the line
//! before, as hex; zeros for the first line), so editing, reordering,
//! inserting or deleting a line breaks the chain. With an audit key each line
//! also ends in `"mac"`: HMAC-SHA256 under the key of the line up to that
//! field. The Warden alone rotates the file: `journal.jsonl` is compressed
//! into `journal.jsonl.1.gz`, the older ones shift to `.2.gz` … `.N.gz`, and
//! the oldest are dropped past a count or a total size; the chain runs on
//! across files, and a drop is itself a line of the chain. Files dropped
//! faster than a configured rate are reported (`take_drop_alarm`) for the
//! server to raise a ladder signal. `verify` recomputes all of it.
//!
//! Every field is bounded in `append` (`bound.rs`), so no caller can write an
//! unbounded line. JSON escapes every control character in strings, so a
//! request or a path holding newlines or escape sequences cannot forge a
//! line.

#![forbid(unsafe_code)]

mod bound;
mod files;
mod hmac;
pub mod time;
mod verify;

pub use bound::{LIST_BOUND, STRING_BOUND};
pub use files::{MAX_FILE_BYTES, read_journal_file, rotated, rotated_count};
pub use hmac::hmac_sha256;
pub use verify::{VerifyError, VerifyReport, verify};

use aromba_warden_proto::encode_hex as hex;
use files::{compress, rotating};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::collections::VecDeque;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub const FILE_NAME: &str = "journal.jsonl";
/// The fields `append` writes itself: a line's own fields never take
/// these names (a `time` of its own would be overwritten by the line's).
pub const CHAIN_FIELDS: [&str; 4] = ["seq", "time", "prev", "mac"];
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

/// When the journal rotates, what it keeps, and how fast a loss of history
/// is too fast.
#[derive(Clone, Debug)]
pub struct Rotation {
    /// Rotate when the current file would grow past this many bytes.
    pub max_bytes: u64,
    /// At most this many rotated files (`.1.gz` … `.keep.gz`).
    pub keep: usize,
    /// At most this many bytes of rotated (compressed) files together; the
    /// newest rotated file is kept whatever its size.
    pub keep_bytes: u64,
    /// More files than this dropped within `drop_window` is reported.
    pub drop_alarm: usize,
    pub drop_window: Duration,
    /// Dropping a file rotated out less than this long ago is reported
    /// whatever the rate: what the journal keeps then covers less time
    /// than this, so lines dripped in just under `drop_alarm` cannot
    /// rotate recent history away unnoticed. (At most one report per
    /// `drop_window`, as for the rate.)
    pub min_history: Duration,
}

impl Default for Rotation {
    fn default() -> Rotation {
        Rotation {
            max_bytes: 8 << 20,
            keep: 64,
            // What six plain files of 8 MiB took before rotated files were
            // compressed: the same disk now holds several times the lines.
            keep_bytes: 48 << 20,
            // At the Worker's normal pace (a few thousand lines a day) a
            // file is dropped every few days once the journal is full. Three
            // in a day is a flood: a fast one, or one kept just under the
            // request threshold for hours (a window of an hour would miss
            // that one).
            drop_alarm: 2,
            drop_window: Duration::from_secs(86_400),
            // A week: at the Worker's normal pace the journal holds months.
            // A Worker keeping under the rate above (two files a day)
            // with lines that compress badly fills the kept bytes in about
            // four days.
            min_history: Duration::from_secs(7 * 86_400),
        }
    }
}

/// Where and how the journal is written.
#[derive(Debug)]
pub struct JournalConfig {
    pub dir: PathBuf,
    pub rotation: Rotation,
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
            rotation: Rotation::default(),
            fsync: true,
            key: None,
            reader_gid: None,
        }
    }
}

/// Rotation dropped history faster than the configured rate, or dropped
/// a file younger than the history it must keep.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DropAlarm {
    /// Files dropped within the window (`young`: files dropped that were
    /// rotated out within `min_history`).
    pub dropped: usize,
    /// `drop_window`, or `min_history` when `young`.
    pub window: Duration,
    /// The journal kept less than `min_history`.
    pub young: bool,
}

/// Where line `seq` of the chain stands in the journal's files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LineAt {
    /// A file holds it: its hash as the chain takes it (the SHA-256 of the
    /// line).
    Held(String),
    /// Every line the files still hold comes after it, and the journal
    /// has rotated: rotated away.
    RotatedAway,
    /// The files hold lines before it and none at it, or none at all and
    /// the journal never rotated: taken out (rotation drops the oldest
    /// files whole, and always keeps one).
    Missing,
}

/// The journal's files as they stand, opened: the current one first, then
/// the rotated ones, newest first. Taken while the journal is held still,
/// and read after it is let go (a rotation meanwhile renames and unlinks,
/// which changes nothing of what is open), so reading a long history never
/// holds up the journal — nor root's requests waiting on it.
pub struct Opened {
    files: Vec<(PathBuf, Option<File>)>,
}

/// Opens the journal's files in `dir` (see [`Opened`]).
pub fn open_files(dir: &Path) -> std::io::Result<Opened> {
    let path = dir.join(FILE_NAME);
    let mut names = vec![path.clone()];
    names.extend((1..=files::rotated_count(&path)).map(|k| rotated(&path, k)));
    let mut files = Vec::with_capacity(names.len());
    for name in names {
        let file = match File::open(&name) {
            Ok(f) => Some(f),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        files.push((name, file));
    }
    Ok(Opened { files })
}

/// Line `seq`, from the current file or a rotated one. Line 0 is the
/// chain's start before any line ([`GENESIS`]).
pub fn line_at(dir: &Path, seq: u64) -> std::io::Result<LineAt> {
    line_in(open_files(dir)?, seq)
}

/// [`line_at`] in files opened before.
pub fn line_in(opened: Opened, seq: u64) -> std::io::Result<LineAt> {
    if seq == 0 {
        return Ok(LineAt::Held(GENESIS.to_string()));
    }
    let rotations = opened.files.len().saturating_sub(1);
    let mut below = false;
    for (name, file) in opened.files {
        let text = match file {
            Some(f) => files::read_opened(&name, f)?,
            None => Vec::new(),
        };
        for line in text.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let Ok(line_text) = std::str::from_utf8(line) else {
                continue;
            };
            let (body, _) = split_mac(line_text);
            let Ok(value) = serde_json::from_str::<Value>(&body) else {
                continue;
            };
            match value.get("seq").and_then(Value::as_u64) {
                Some(s) if s == seq => return Ok(LineAt::Held(sha256_hex(line))),
                // Files hold increasing lines: one past it is not here.
                Some(s) if s > seq => break,
                Some(_) => below = true,
                None => {}
            }
        }
    }
    // Rotation always keeps a rotated file: with none, nothing was rotated.
    Ok(if below || rotations == 0 {
        LineAt::Missing
    } else {
        LineAt::RotatedAway
    })
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
    /// When files were dropped, newest last (at most `drop_alarm + 1`).
    drops: VecDeque<Instant>,
    last_alarm: Option<Instant>,
    alarm: Option<DropAlarm>,
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

/// Splits off what follows the last line break of `text`, when the file
/// does not end in one: the line a write left cut.
fn cut_torn_tail(path: &Path, text: &mut Vec<u8>) -> Result<Option<Vec<u8>>, JournalError> {
    if text.is_empty() || text.ends_with(b"\n") {
        return Ok(None);
    }
    let keep = memchr_last_newline(text).map_or(0, |i| i + 1);
    let torn = text.split_off(keep);
    // A cut line holds no line break; anything else is not a cut write.
    if torn.len() > MAX_TORN_BYTES {
        return Err(JournalError::IncompleteLastLine(path.to_path_buf()));
    }
    Ok(Some(torn))
}

/// Where the bytes of a cut line after `seq` are kept.
pub fn torn_file(path: &Path, seq: u64) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(format!(".torn-{seq}"));
    PathBuf::from(s)
}

/// The longest line the Warden writes (its fields are bounded) with room
/// to spare: a longer unterminated tail is not one of its writes.
const MAX_TORN_BYTES: usize = 4 << 20;

fn memchr_last_newline(b: &[u8]) -> Option<usize> {
    b.iter().rposition(|&c| c == b'\n')
}

fn read_all(path: &Path) -> Result<Vec<u8>, JournalError> {
    read_journal_file(path).map_err(io_err(path))
}

impl Journal {
    /// Opens (or starts) the journal in `config.dir` and finds the head of
    /// its chain: the last line of the current file, or of `.1.gz` when the
    /// current file is empty (just rotated).
    ///
    /// A current file whose last line was cut short (the Warden killed in
    /// the middle of a write that spans pages, a power cut) is repaired:
    /// the cut bytes are moved to `journal.jsonl.torn-SEQ` beside it and
    /// the file truncated after the last whole line, and the chain's next
    /// line says so (`journal-torn-tail`: how many bytes, their SHA-256,
    /// where they are). No act was done on such a line: the Warden acts
    /// only once its intent is written whole.
    pub fn open(config: JournalConfig) -> Result<Journal, JournalError> {
        std::fs::create_dir_all(&config.dir).map_err(io_err(&config.dir))?;
        let path = config.dir.join(FILE_NAME);
        let mut text = read_all(&path)?;
        let torn = cut_torn_tail(&path, &mut text)?;
        let mut last = last_line(&path, &text)?;
        if last.is_none() {
            let older = rotated(&path, 1);
            last = last_line(&older, &read_all(&older)?)?;
        }
        let head = match &last {
            Some((line, seq)) => Head {
                seq: *seq,
                hash: sha256_hex(line),
            },
            None => Head {
                seq: 0,
                hash: GENESIS.to_string(),
            },
        };
        let file = open_append(&path, config.reader_gid)?;
        let mut journal = Journal {
            size: text.len() as u64,
            config,
            path,
            file,
            head,
            drops: VecDeque::new(),
            last_alarm: None,
            alarm: None,
        };
        match torn {
            Some(torn) => journal.record_torn_tail(torn)?,
            None => journal.journal_unrecorded_tail(last.as_ref().map(|(l, _)| l.as_slice()))?,
        }
        Ok(journal)
    }

    /// Moves the cut bytes aside and journals that it did.
    fn record_torn_tail(&mut self, torn: Vec<u8>) -> Result<(), JournalError> {
        let kept = self.keep_torn(&torn)?;
        let file = OpenOptions::new()
            .write(true)
            .open(&self.path)
            .map_err(io_err(&self.path))?;
        file.set_len(self.size).map_err(io_err(&self.path))?;
        file.sync_all().map_err(io_err(&self.path))?;
        self.journal_torn(&torn, &kept)
    }

    /// Writes `torn` beside the journal: `journal.jsonl.torn-SEQ` (SEQ the
    /// head's), or, when that holds other bytes (an earlier cut at the same
    /// head, whose repair line was itself cut), a name with their SHA-256,
    /// so no cut bytes kept before are overwritten (found by the attack
    /// round). The same bytes again (a repair killed before its truncation)
    /// are kept once.
    fn keep_torn(&self, torn: &[u8]) -> Result<PathBuf, JournalError> {
        let first = torn_file(&self.path, self.head.seq);
        let mut named = first.clone().into_os_string();
        named.push(format!("-{}", &sha256_hex(torn)[..16]));
        for kept in [first, PathBuf::from(named)] {
            match std::fs::read(&kept) {
                Ok(held) if held == torn => return Ok(kept),
                Ok(_) => continue,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_err(&kept)(e)),
            }
            let mut out = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&kept)
                .map_err(io_err(&kept))?;
            out.write_all(torn).map_err(io_err(&kept))?;
            out.sync_all().map_err(io_err(&kept))?;
            return Ok(kept);
        }
        Err(JournalError::IncompleteLastLine(self.path.clone()))
    }

    /// The chain's line saying `torn` was cut off and kept at `kept`.
    fn journal_torn(&mut self, torn: &[u8], kept: &Path) -> Result<(), JournalError> {
        let mut line = Map::new();
        line.insert("event".into(), Value::from(TORN_TAIL_EVENT));
        line.insert("bytes".into(), Value::from(torn.len()));
        line.insert("sha256".into(), Value::from(sha256_hex(torn)));
        line.insert("kept".into(), Value::from(kept.display().to_string()));
        self.append(line).map(|_| ())
    }

    /// A repair killed after its truncation and before its line: the cut
    /// bytes are kept at the head's name, and no line says so yet (found
    /// by the attack round). Journaled now.
    fn journal_unrecorded_tail(&mut self, last_line: Option<&[u8]>) -> Result<(), JournalError> {
        let kept = torn_file(&self.path, self.head.seq);
        let Ok(torn) = std::fs::read(&kept) else {
            return Ok(());
        };
        let recorded = last_line
            .and_then(|l| serde_json::from_slice::<Value>(l).ok())
            .is_some_and(|v| v.get("event").and_then(Value::as_str) == Some(TORN_TAIL_EVENT));
        if recorded {
            return Ok(());
        }
        self.journal_torn(&torn, &kept)
    }

    /// Whether rotation dropped files faster than the configured rate since
    /// this was last asked; at most once per window.
    pub fn take_drop_alarm(&mut self) -> Option<DropAlarm> {
        self.alarm.take()
    }

    pub fn head(&self) -> &Head {
        &self.head
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one line made of `fields`, bounded (`bound.rs`), plus `seq`,
    /// `time` and `prev` (and `mac` with a key), rotating first when the
    /// line would pass the cap. Returns the line's `seq`.
    pub fn append(&mut self, mut fields: Map<String, Value>) -> Result<u64, JournalError> {
        bound::bound_fields(&mut fields);
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
            && self.size + bytes > self.config.rotation.max_bytes
            && let Some((through, files)) = self.rotate()?
        {
            // Rotated and dropped the oldest files. The chain itself says
            // what was dropped, so `verify` can tell rotation from lines
            // deleted at the start. (Rotation without a drop just continues
            // below, into the new file.)
            let mut dropped = Map::new();
            dropped.insert("event".into(), Value::from(DROPPED_EVENT));
            dropped.insert("through_seq".into(), Value::from(through));
            dropped.insert("files".into(), Value::from(files));
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

    /// Compresses the current file into `.1.gz`, shifting the older ones
    /// by one, starts a new current file, and drops the oldest files past
    /// the count or the size the rotation keeps. Returns the last seq of
    /// the newest file dropped and how many were, if any were.
    ///
    /// A crash between the compressed copy taking its name and the current
    /// file's removal leaves both, and `verify` then names a repeated seq:
    /// a visible break, never a silent loss.
    fn rotate(&mut self) -> Result<Option<(u64, usize)>, JournalError> {
        let gid = self.config.reader_gid;
        let tmp = rotating(&self.path);
        compress(&self.path, &tmp, gid).map_err(io_err(&tmp))?;
        let mut count = rotated_count(&self.path);
        for n in (1..=count).rev() {
            let from = rotated(&self.path, n);
            let to = rotated(&self.path, n + 1);
            std::fs::rename(&from, &to).map_err(io_err(&from))?;
        }
        let first = rotated(&self.path, 1);
        std::fs::rename(&tmp, &first).map_err(io_err(&tmp))?;
        count += 1;
        std::fs::remove_file(&self.path).map_err(io_err(&self.path))?;
        self.file = open_append(&self.path, gid)?;
        self.size = 0;
        let limits = self.config.rotation.clone();
        let mut total: u64 = (1..=count)
            .map(|n| {
                std::fs::metadata(rotated(&self.path, n))
                    .map(|m| m.len())
                    .unwrap_or(0)
            })
            .sum();
        let mut through: Option<u64> = None;
        let mut dropped = 0;
        let mut young = 0;
        while count > 1 && (count > limits.keep.max(1) || total > limits.keep_bytes) {
            let oldest = rotated(&self.path, count);
            let meta = std::fs::metadata(&oldest).ok();
            let size = meta.as_ref().map_or(0, |m| m.len());
            // A rotated file's time is when it was rotated out, which is
            // when its newest line was written (renames keep it; only root
            // writes here). One that cannot be read counts as young.
            let age = meta
                .and_then(|m| m.modified().ok())
                .and_then(|t| std::time::SystemTime::now().duration_since(t).ok())
                .unwrap_or_default();
            if age < limits.min_history {
                young += 1;
            }
            // Files go oldest first, so the last one read ends where the
            // chain kept starts. A damaged file is dropped all the same;
            // verify names what it can no longer see.
            let last = read_all(&oldest)
                .ok()
                .and_then(|text| last_line(&oldest, &text).ok().flatten())
                .map(|(_, seq)| seq);
            through = through.max(last);
            std::fs::remove_file(&oldest).map_err(io_err(&oldest))?;
            total = total.saturating_sub(size);
            count -= 1;
            dropped += 1;
        }
        if self.config.fsync {
            File::open(&self.config.dir)
                .and_then(|d| d.sync_all())
                .map_err(io_err(&self.config.dir))?;
        }
        if dropped == 0 {
            return Ok(None);
        }
        self.count_drops(dropped, young);
        Ok(Some((through.unwrap_or(0), dropped)))
    }

    fn count_drops(&mut self, dropped: usize, young: usize) {
        let now = Instant::now();
        let limits = &self.config.rotation;
        for _ in 0..dropped {
            self.drops.push_back(now);
        }
        while self.drops.len() > limits.drop_alarm + 1
            || self
                .drops
                .front()
                .is_some_and(|t| now.duration_since(*t) > limits.drop_window)
        {
            self.drops.pop_front();
        }
        let quiet = self
            .last_alarm
            .is_none_or(|t| now.duration_since(t) >= limits.drop_window);
        if !quiet {
            return;
        }
        let alarm = if self.drops.len() > limits.drop_alarm {
            Some(DropAlarm {
                dropped: self.drops.len(),
                window: limits.drop_window,
                young: false,
            })
        } else if young > 0 {
            Some(DropAlarm {
                dropped: young,
                window: limits.min_history,
                young: true,
            })
        } else {
            None
        };
        if let Some(alarm) = alarm {
            self.alarm = Some(alarm);
            self.last_alarm = Some(now);
            self.drops.clear();
        }
    }
}

/// The event line the journal writes when it opened a file whose last line
/// was cut.
pub const TORN_TAIL_EVENT: &str = "journal-torn-tail";

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
    use subtle::ConstantTimeEq;
    key.mac(body.as_bytes())
        .as_bytes()
        .ct_eq(mac.as_bytes())
        .into()
}
