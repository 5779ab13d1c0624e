//! A hostile Worker against the journal's history: oversized fields, floods
//! that would rotate the oldest lines away, and tampering with compressed
//! rotated files. The journal bounds every field itself, compresses what it
//! rotates, counts what it drops, says so when verified, and a fast loss of
//! history moves the ladder.

use aromba_testkit::warden as support;

use aromba_warden::journal::{
    AuditKey, FILE_NAME, Journal, JournalConfig, Rotation, STRING_BOUND, read_journal_file,
    rotated, verify,
};
use aromba_warden_proto::{MAX_REQUEST, MAX_RESPONSE, Request, Response, read_frame, write_frame};
use assert_cmd::Command;
use serde_json::{Map, Value};
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;
use support::Warden;

struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let p = std::env::temp_dir().join(format!("aromba-advj-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Dir(p)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn lines_of(path: &Path) -> Vec<Value> {
    String::from_utf8(read_journal_file(path).unwrap())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Every line the Warden's journal still holds, oldest first.
fn all_lines(w: &Warden) -> Vec<Value> {
    let path = w.layout().journal_file();
    let mut n = 1;
    while rotated(&path, n).exists() {
        n += 1;
    }
    let mut out = Vec::new();
    for k in (1..n).rev() {
        out.extend(lines_of(&rotated(&path, k)));
    }
    out.extend(lines_of(&path));
    out
}

fn key_of(w: &Warden) -> Option<AuditKey> {
    let k = w.layout().audit_key();
    k.exists()
        .then(|| AuditKey::load(&k, Some(&w.layout().journal_dir)).unwrap())
}

/// One frame a decoder cannot read and whose error echoes it: an unknown
/// request type of 65,000 bytes.
fn junk_frame() -> Vec<u8> {
    let body = format!("{{\"type\":\"{}\"}}", "x".repeat(65_000));
    assert!(body.len() <= MAX_REQUEST);
    body.into_bytes()
}

fn send_raw(w: &Warden, body: &[u8]) -> Option<Response> {
    let mut s = UnixStream::connect(w.layout().worker_socket()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write_frame(&mut s, body, MAX_REQUEST).ok()?;
    aromba_warden_proto::decode_response(&read_frame(&mut s, MAX_RESPONSE).ok()?).ok()
}

#[test]
fn nine_hundred_malformed_frames_of_64_kib_keep_the_first_line_and_move_the_ladder() {
    let w = Warden::start("malformed-flood", false, &[]);
    let first = lines_of(&w.layout().journal_file())[0].clone();
    assert_eq!(first["seq"], Value::from(1));
    let junk = junk_frame();
    for _ in 0..900 {
        send_raw(&w, &junk);
    }
    // The oldest line is still there, and the chain verifies from it.
    let report = verify(&w.layout().journal_file(), key_of(&w).as_ref()).unwrap();
    assert_eq!(report.first_seq, 1, "history was rotated away: {report}");
    assert_eq!(report.lines_gone, 0);
    assert_eq!(all_lines(&w)[0], first);
    // The flood moved the ladder.
    let st = w.status();
    assert!(st.ladder_step >= 1, "the flood did not move the ladder");
    assert!(
        all_lines(&w)
            .iter()
            .any(|l| l["kind"] == "ladder-signal" && l["signal"] == "too-many-commands")
    );
}

#[test]
fn a_malformed_frame_is_journaled_with_its_error_cut_to_the_bound_and_its_length() {
    let w = Warden::start("malformed-bound", false, &[]);
    let Some(Response::Error { message }) = send_raw(&w, &junk_frame()) else {
        panic!("the junk was not refused")
    };
    let line = all_lines(&w)
        .into_iter()
        .find(|l| l["kind"] == "malformed")
        .expect("the malformed frame was journaled");
    let error = line["error"].as_str().unwrap();
    assert!(
        error.len() <= STRING_BOUND,
        "{} bytes journaled",
        error.len()
    );
    assert!(
        message.contains(error),
        "the journal keeps the error's start"
    );
    assert_eq!(
        line["error_len"],
        Value::from(message.len() - "malformed request: ".len())
    );
}

#[test]
fn a_field_longer_than_the_bound_is_cut_on_a_character_boundary_with_its_length() {
    let d = Dir::new("bound");
    let mut j = Journal::open(JournalConfig::new(d.0.clone())).unwrap();
    let mut m = Map::new();
    // Two-byte characters put the bound inside one.
    let long = format!("a{}", "é".repeat(40_000));
    m.insert("text".into(), Value::from(long.as_str()));
    m.insert("args".into(), Value::from(vec!["-v".to_string(); 20_000]));
    j.append(m).unwrap();
    let path = d.0.join(FILE_NAME);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.len() < 4096, "a line of {} bytes", text.len());
    let line = &lines_of(&path)[0];
    let kept = line["text"].as_str().unwrap();
    assert!(kept.len() <= STRING_BOUND && long.starts_with(kept));
    assert_eq!(line["text_len"], Value::from(long.len()));
    assert_eq!(line["args_count"], Value::from(20_000));
    assert_eq!(line["args_len"], Value::from(40_000));
    assert!(verify(&path, None).is_ok());
}

fn small_journal(dir: &Path, lines: usize, keep: usize) -> PathBuf {
    let mut config = JournalConfig::new(dir.to_path_buf());
    config.rotation.max_bytes = 2048;
    config.rotation.keep = keep;
    let mut j = Journal::open(config).unwrap();
    for i in 0..lines {
        let mut m = Map::new();
        m.insert("kind".into(), Value::from("read"));
        m.insert("args".into(), Value::from(vec![format!("-h{i}")]));
        j.append(m).unwrap();
    }
    dir.join(FILE_NAME)
}

#[test]
fn rotated_files_are_compressed_and_verify_says_how_many_lines_are_gone() {
    let d = Dir::new("compressed");
    let path = small_journal(&d.0, 300, 3);
    for n in 1..=3 {
        let bytes = std::fs::read(rotated(&path, n)).unwrap();
        assert_eq!(&bytes[..2], &[0x1f, 0x8b], ".{n}.gz is not gzip");
    }
    assert!(!rotated(&path, 4).exists());
    let report = verify(&path, None).unwrap();
    assert_eq!(report.files, 4);
    assert!(report.first_seq > 1);
    assert_eq!(report.lines_gone, report.first_seq - 1);
    let out = Command::cargo_bin("aromba-warden")
        .unwrap()
        .args(["journal", "verify"])
        .arg(&path)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(
        said.contains(&format!(
            "the {} earlier lines were rotated away",
            report.lines_gone
        )),
        "{said}"
    );
    // A journal that lost nothing says so.
    let whole = Dir::new("compressed-whole");
    let path = small_journal(&whole.0, 10, 3);
    assert!(verify(&path, None).unwrap().to_string().contains("whole"));
}

#[test]
fn a_line_appended_to_a_compressed_file_as_a_second_gzip_member_is_seen() {
    let d = Dir::new("gz-member");
    let path = small_journal(&d.0, 300, 3);
    let older = rotated(&path, 2);
    let last = String::from_utf8(read_journal_file(&older).unwrap())
        .unwrap()
        .lines()
        .last()
        .unwrap()
        .to_string();
    // A forged line `zcat` shows, hidden from a reader of the first member.
    let forged = last.replace("\"read\"", "\"forged\"") + "\n";
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(forged.as_bytes()).unwrap();
    let member = gz.finish().unwrap();
    std::fs::OpenOptions::new()
        .append(true)
        .open(&older)
        .unwrap()
        .write_all(&member)
        .unwrap();
    let e = verify(&path, None).unwrap_err();
    assert_eq!(e.file, older, "{e}");
}

#[test]
fn history_rotated_away_fast_moves_the_ladder_and_verify_says_what_is_gone() {
    let w = Warden::start_with("fast-rotation", false, &[], |o| {
        o.journal_rotation = Rotation {
            max_bytes: 4096,
            keep: 2,
            keep_bytes: 1 << 30,
            drop_alarm: 2,
            drop_window: Duration::from_secs(3600),
            // The rate alone.
            min_history: Duration::ZERO,
        };
    });
    for _ in 0..60 {
        w.ask(&Request::Note {
            text: "n".repeat(400),
        });
    }
    let st = w.status();
    assert!(st.ladder_step >= 1, "dropping history fast moved nothing");
    assert!(
        st.ladder_reason.contains("journal files rotated away"),
        "{}",
        st.ladder_reason
    );
    let Response::Verified { ok, report } = w.control(&Request::JournalVerify) else {
        panic!("no report")
    };
    assert!(ok, "{report}");
    assert!(
        report.contains("earlier lines were rotated away"),
        "{report}"
    );
}

/// How many files rotation says it dropped, in the files still there.
fn drops_recorded(w: &Warden) -> u64 {
    let current = w.layout().journal_file();
    (1..=4)
        .map(|n| rotated(&current, n))
        .chain([current.clone()])
        .flat_map(|f| lines_of(&f))
        .filter(|l| l["event"] == "journal-dropped")
        .map(|l| l["files"].as_u64().unwrap())
        .sum()
}

#[test]
fn history_rotated_away_just_under_the_drop_rate_still_moves_the_ladder() {
    // Two files dropped a window, one fewer than the rate that raises an
    // alarm: slow enough for the count, yet everything older than the two
    // files kept is gone, minutes after it was written.
    let w = Warden::start_with("slow-rotation", false, &[], |o| {
        o.journal_rotation = Rotation {
            max_bytes: 4096,
            keep: 2,
            keep_bytes: 1 << 30,
            drop_alarm: 2,
            drop_window: Duration::from_secs(3600),
            ..Rotation::default()
        };
    });
    let mut notes = 0;
    while drops_recorded(&w) < 2 {
        // A minute apart, so Slow (once reached) paces none of them.
        w.clock.advance(61);
        w.ask(&Request::Note {
            text: "n".repeat(400),
        });
        notes += 1;
        assert!(notes < 200, "rotation never dropped a file");
    }
    let Response::Verified { ok, report } = w.control(&Request::JournalVerify) else {
        panic!("no report")
    };
    assert!(
        ok && report.contains("earlier lines were rotated away"),
        "{report}"
    );
    let st = w.status();
    assert!(
        st.ladder_step >= 1,
        "the journal kept minutes of history and nothing moved"
    );
    assert!(
        st.ladder_reason.contains("journal files rotated away"),
        "{}",
        st.ladder_reason
    );
}
