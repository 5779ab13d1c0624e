//! The journal's chain: it verifies; every kind of tampering is found and
//! named; HMAC lines need the key; rotation keeps the chain.

use aromba_warden::journal::{
    AuditKey, FILE_NAME, Journal, JournalConfig, TORN_TAIL_EVENT, read_journal_file, rotated,
    sha256_hex, torn_file, verify,
};
use assert_cmd::Command;
use serde_json::{Map, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let p = std::env::temp_dir().join(format!("aromba-journal-{name}-{}", std::process::id()));
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

fn entry(i: usize) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("kind".into(), Value::from("request"));
    m.insert("cmd".into(), Value::from("df"));
    m.insert("args".into(), Value::from(vec![format!("-h{i}")]));
    m
}

fn write(dir: &Path, n: usize, key: Option<AuditKey>, max_bytes: u64) -> PathBuf {
    let mut config = JournalConfig::new(dir.to_path_buf());
    config.key = key;
    config.rotation.max_bytes = max_bytes;
    config.rotation.keep = 3;
    let mut j = Journal::open(config).unwrap();
    for i in 0..n {
        j.append(entry(i)).unwrap();
    }
    dir.join(FILE_NAME)
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

fn put(path: &Path, lines: &[String]) {
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

/// The lines of a rotated (compressed) file.
fn gz_lines(path: &Path) -> Vec<String> {
    String::from_utf8(read_journal_file(path).unwrap())
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

/// Rewrites a rotated file, compressed as the Warden writes it.
fn put_gz(path: &Path, lines: &[String]) {
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all((lines.join("\n") + "\n").as_bytes()).unwrap();
    std::fs::write(path, gz.finish().unwrap()).unwrap();
}

fn warden() -> Command {
    Command::cargo_bin("aromba-warden").unwrap()
}

#[test]
fn a_fresh_chain_verifies() {
    let d = Dir::new("fresh");
    let path = write(&d.0, 20, None, 1 << 20);
    let report = verify(&path, None).unwrap();
    assert_eq!(
        (report.first_seq, report.last_seq, report.lines),
        (1, 20, 20)
    );
    let out = warden()
        .args(["journal", "verify"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn reopening_continues_the_chain() {
    let d = Dir::new("reopen");
    write(&d.0, 5, None, 1 << 20);
    let path = write(&d.0, 5, None, 1 << 20);
    assert_eq!(verify(&path, None).unwrap().last_seq, 10);
}

#[test]
fn an_edited_line_breaks_the_chain() {
    let d = Dir::new("edit");
    let path = write(&d.0, 10, None, 1 << 20);
    let mut l = lines(&path);
    l[4] = l[4].replace("\"df\"", "\"du\"");
    put(&path, &l);
    let e = verify(&path, None).unwrap_err();
    assert_eq!(e.line, 6, "{e}");
    let out = warden()
        .args(["journal", "verify"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("line 6"));
}

#[test]
fn reordered_lines_break_the_chain() {
    let d = Dir::new("reorder");
    let path = write(&d.0, 10, None, 1 << 20);
    let mut l = lines(&path);
    l.swap(3, 4);
    put(&path, &l);
    assert_eq!(verify(&path, None).unwrap_err().line, 4);
}

#[test]
fn an_inserted_line_breaks_the_chain() {
    let d = Dir::new("insert");
    let path = write(&d.0, 10, None, 1 << 20);
    let mut l = lines(&path);
    let forged = l[2].replace("\"seq\":3", "\"seq\":4");
    l.insert(3, forged);
    put(&path, &l);
    assert!(verify(&path, None).is_err());
}

#[test]
fn a_deleted_line_in_the_middle_breaks_the_chain() {
    let d = Dir::new("delete");
    let path = write(&d.0, 10, None, 1 << 20);
    let mut l = lines(&path);
    l.remove(5);
    put(&path, &l);
    let e = verify(&path, None).unwrap_err();
    assert!(e.what.contains("seq 7 follows seq 5"), "{e}");
}

#[test]
fn a_deleted_first_line_breaks_the_chain() {
    let d = Dir::new("delete-first");
    let path = write(&d.0, 10, None, 1 << 20);
    let mut l = lines(&path);
    l.remove(0);
    put(&path, &l);
    let e = verify(&path, None).unwrap_err();
    assert!(e.what.contains("deleted from its start"), "{e}");
}

#[test]
fn a_cut_last_line_is_reported_then_moved_aside_on_open_and_the_chain_goes_on() {
    let d = Dir::new("cut");
    let path = write(&d.0, 3, None, 1 << 20);
    let text = std::fs::read(&path).unwrap();
    let cut = &text[..text.len() - 5];
    std::fs::write(&path, cut).unwrap();
    assert!(verify(&path, None).unwrap_err().what.contains("incomplete"));
    let torn_start = cut.iter().rposition(|&b| b == b'\n').unwrap() + 1;
    let torn = &cut[torn_start..];

    let mut j = Journal::open(JournalConfig::new(d.0.clone())).unwrap();
    j.append(entry(9)).unwrap();
    drop(j);
    let report = verify(&path, None).unwrap();
    assert_eq!(report.lines, 4, "two whole lines, the repair, the next");
    let all = lines(&path);
    let repair: Value = serde_json::from_str(&all[2]).unwrap();
    assert_eq!(repair["event"], TORN_TAIL_EVENT);
    assert_eq!(repair["bytes"], torn.len());
    assert_eq!(repair["sha256"], sha256_hex(torn));
    let kept = torn_file(&path, 2);
    assert_eq!(repair["kept"], kept.display().to_string());
    assert_eq!(std::fs::read(&kept).unwrap(), torn);
    assert!(all[3].contains("-h9"));
}

#[test]
fn a_tail_longer_than_any_line_the_warden_writes_is_refused_on_open() {
    let d = Dir::new("long-tail");
    let path = write(&d.0, 1, None, 64 << 20);
    let mut text = std::fs::read(&path).unwrap();
    text.extend(std::iter::repeat_n(b'x', 5 << 20));
    std::fs::write(&path, &text).unwrap();
    assert!(Journal::open(JournalConfig::new(d.0.clone())).is_err());
    assert_eq!(std::fs::read(&path).unwrap(), text, "left as it was");
}

#[test]
fn rotation_keeps_the_chain_across_files() {
    let d = Dir::new("rotate");
    // Small files: several rotations, three kept, the oldest dropped.
    let path = write(&d.0, 200, None, 2048);
    assert!(rotated(&path, 3).exists());
    assert!(!rotated(&path, 4).exists());
    let report = verify(&path, None).unwrap();
    assert_eq!(report.files, 4);
    assert!(report.first_seq > 1, "older lines were rotated away");
    // Tampering in a rotated file is found there.
    let older = rotated(&path, 2);
    let mut l = gz_lines(&older);
    l[1] = l[1].replace("-h", "-H");
    put_gz(&older, &l);
    let e = verify(&path, None).unwrap_err();
    assert_eq!(e.file, older);
}

#[test]
fn a_rotation_that_drops_several_files_at_once_keeps_the_chain_verifiable() {
    let d = Dir::new("rotate-many");
    let path = write(&d.0, 200, None, 2048);
    let before = verify(&path, None).unwrap();
    // Fewer files kept from now on: the next rotation drops two at once.
    let mut config = JournalConfig::new(d.0.clone());
    config.rotation.max_bytes = 2048;
    config.rotation.keep = 1;
    let mut j = Journal::open(config).unwrap();
    assert!(rotated(&path, 3).exists());
    let mut i = 0;
    while rotated(&path, 2).exists() {
        j.append(entry(i)).unwrap();
        i += 1;
        assert!(i < 100, "never rotated");
    }
    assert!(rotated(&path, 1).exists());
    let after = verify(&path, None).unwrap();
    assert!(after.first_seq > before.first_seq);
    assert_eq!(after.lines_gone, after.first_seq - 1);
}

#[test]
fn deleting_a_whole_rotated_file_breaks_the_chain() {
    let d = Dir::new("rotate-delete");
    let path = write(&d.0, 200, None, 2048);
    std::fs::remove_file(rotated(&path, 2)).unwrap();
    std::fs::rename(rotated(&path, 3), rotated(&path, 2)).unwrap();
    assert!(verify(&path, None).is_err());
}

fn key_file(dir: &Path, mode: u32) -> PathBuf {
    let key = dir.join("audit.key");
    std::fs::write(&key, [7u8; 32]).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(mode)).unwrap();
    key
}

#[test]
fn hmac_lines_verify_with_the_key_and_are_refused_without_it() {
    let d = Dir::new("hmac");
    let journal = d.0.join("journal");
    let key = key_file(&d.0, 0o600);
    let path = write(
        &journal,
        10,
        Some(AuditKey::load(&key, Some(&journal)).unwrap()),
        1 << 20,
    );
    let k = AuditKey::load(&key, Some(&journal)).unwrap();
    assert!(verify(&path, Some(&k)).unwrap().macs);
    let e = verify(&path, None).unwrap_err();
    assert!(e.what.contains("needs the audit key"), "{e}");
    let out = warden()
        .args(["journal", "verify"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let out = warden()
        .args(["journal", "verify"])
        .arg(&path)
        .arg("--key")
        .arg(&key)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // A wrong key fails on the first line.
    let wrong = AuditKey::from_bytes(vec![8u8; 32]);
    assert_eq!(verify(&path, Some(&wrong)).unwrap_err().line, 1);
}

#[test]
fn an_edited_hmac_line_with_a_recomputed_chain_is_still_found() {
    let d = Dir::new("hmac-forge");
    let journal = d.0.join("journal");
    let key = key_file(&d.0, 0o600);
    let path = write(
        &journal,
        3,
        Some(AuditKey::load(&key, Some(&journal)).unwrap()),
        1 << 20,
    );
    // Change the last line: its prev stays right, only the MAC can tell.
    let mut l = lines(&path);
    l[2] = l[2].replace("\"df\"", "\"du\"");
    put(&path, &l);
    let k = AuditKey::load(&key, Some(&journal)).unwrap();
    assert!(verify(&path, Some(&k)).unwrap_err().what.contains("HMAC"));
}

#[test]
fn an_audit_key_that_is_open_inside_the_journal_or_a_symlink_is_refused() {
    let d = Dir::new("key-rules");
    let journal = d.0.join("journal");
    std::fs::create_dir_all(&journal).unwrap();
    let open = key_file(&d.0, 0o644);
    assert!(AuditKey::load(&open, Some(&journal)).is_err());
    let inside = key_file(&journal, 0o600);
    assert!(AuditKey::load(&inside, Some(&journal)).is_err());
    let link = d.0.join("link.key");
    std::os::unix::fs::symlink(&inside, &link).unwrap();
    assert!(AuditKey::load(&link, None).is_err());
    let short = d.0.join("short.key");
    std::fs::write(&short, b"short").unwrap();
    std::fs::set_permissions(&short, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert!(AuditKey::load(&short, None).is_err());
}

#[test]
fn control_characters_in_fields_are_escaped() {
    let d = Dir::new("escape");
    let mut j = Journal::open(JournalConfig::new(d.0.clone())).unwrap();
    let mut m = Map::new();
    m.insert(
        "path".into(),
        Value::from("/tmp/a\nb\u{1b}[2J\r{\"seq\":1}"),
    );
    j.append(m).unwrap();
    let text = std::fs::read_to_string(d.0.join(FILE_NAME)).unwrap();
    assert_eq!(text.lines().count(), 1);
    assert!(text.contains("\\n") && text.contains("\\u001b") && text.contains("\\r"));
    assert!(verify(&d.0.join(FILE_NAME), None).is_ok());
}
