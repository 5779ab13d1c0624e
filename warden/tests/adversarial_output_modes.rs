//! The requester must never choose an output encoding the redactor cannot
//! read. Secrets are planted in a real journal file (written by
//! `systemd-journal-remote` from journal export data) — plain, wrapped in
//! colour codes, split by a colour code or a terminal hyperlink, next to
//! other control bytes — and the real journalctl reads them back in every
//! output mode the policy allows. After redaction, what a reader sees (the
//! text once a terminal has eaten its escape sequences) holds none of them.
//! The refused modes are read the same way and shown to leak, so the check
//! is not blind. docker has no engine here: its `--format` grammar is tested
//! exhaustively instead (`docker_template_*` below and in
//! `adversarial_policy.rs`).

use aromba_warden::policy::{OUTPUT_MODES, ValueType, template, value_matches};
use std::path::{Path, PathBuf};

/// Secrets the redactor knows whole, one per class.
const SECRETS: &[&str] = &[
    "sk_live_51HabcdEFGHijklMNOPqrstUVwx",
    "ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef0123",
    "AKIAIOSFODNN7EXAMPLQ",
    "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0",
    "sk-proj-abcDEF123456ghiJKL789012mnoPQR345678stuVWX",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
];

/// Secrets that are secret by their context: the part to look for, and
/// the line that carries it.
const IN_CONTEXT: &[(&str, &str)] = &[
    (
        "S3cretDbPassw0rd",
        "db postgres://app:S3cretDbPassw0rd@db.internal:5432/app",
    ),
    (
        "Hunter2CorrectHorse99",
        "login password=Hunter2CorrectHorse99 ok",
    ),
];

const RED: &str = "\x1b[31m";
const BOLD: &str = "\x1b[1m";
const RESET: &str = "\x1b[0m";
const LINK: &str = "\x1b]8;;http://example.invalid/\x07";

/// `s` with `cut` put after its `at`-th byte.
fn split(s: &str, at: usize, cut: &str) -> String {
    format!("{}{cut}{}", &s[..at], &s[at..])
}

/// Every MESSAGE (and one custom field) the journal gets.
fn messages() -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    let mut m: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::new();
    let mut plain = |s: String| m.push((s.into_bytes(), None));
    for s in SECRETS {
        plain(format!("plain {s} end"));
        plain(format!("wrapped {RED}{s}{RESET} end"));
        plain(format!("split {} end", split(s, 3, BOLD)));
        plain(format!("split-late {} end", split(s, s.len() / 2, RED)));
        plain(format!("hyperlink {} end", split(s, 4, LINK)));
        plain(format!("bell\x07 {} end", split(s, 3, BOLD)));
    }
    for (_, line) in IN_CONTEXT {
        plain(line.to_string());
        plain(format!("{RED}{line}{RESET}"));
    }
    let (part, line) = IN_CONTEXT[0];
    let at = line.find(part).unwrap_or(0) + 3;
    plain(split(line, at, BOLD));
    // Invalid UTF-8 around a split key.
    let mut bad = b"bytes \xff\xfe ".to_vec();
    bad.extend_from_slice(split(SECRETS[0], 3, BOLD).as_bytes());
    m.push((bad, None));
    // A custom field, plain and split (verbose prints every field).
    m.push((
        b"custom field".to_vec(),
        Some(format!("API_TOKEN={}", SECRETS[1]).into_bytes()),
    ));
    m.push((
        b"custom split field".to_vec(),
        Some(format!("API_TOKEN={}", split(SECRETS[1], 4, BOLD)).into_bytes()),
    ));
    m
}

/// One field of journal export data: `NAME=value` when the value is plain
/// text, the binary form (name, LE64 length, bytes) otherwise.
fn field(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    let text = value.iter().all(|&b| (0x20..0x7f).contains(&b));
    out.extend_from_slice(name.as_bytes());
    if text {
        out.push(b'=');
        out.extend_from_slice(value);
    } else {
        out.push(b'\n');
        out.extend_from_slice(&(value.len() as u64).to_le_bytes());
        out.extend_from_slice(value);
    }
    out.push(b'\n');
}

fn journal_remote() -> PathBuf {
    [
        "/lib/systemd/systemd-journal-remote",
        "/usr/lib/systemd/systemd-journal-remote",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.is_file())
    .unwrap_or_else(|| {
        panic!(
            "systemd-journal-remote is not installed: the test writes its journal with it \
                 (Debian package systemd-journal-remote; scripts/test installs it)"
        )
    })
}

/// A journal file holding every message, in `dir`.
fn planted_journal(dir: &Path) -> PathBuf {
    let mut export = Vec::new();
    for (i, (message, custom)) in messages().iter().enumerate() {
        field(
            &mut export,
            "__REALTIME_TIMESTAMP",
            format!("{}", 1_700_000_000_000_000u64 + i as u64 * 1_000_000).as_bytes(),
        );
        field(
            &mut export,
            "__MONOTONIC_TIMESTAMP",
            format!("{}", 1_000_000 + i).as_bytes(),
        );
        field(&mut export, "_BOOT_ID", b"0123456789abcdef0123456789abcdef");
        field(&mut export, "_SYSTEMD_UNIT", b"app.service");
        field(&mut export, "SYSLOG_IDENTIFIER", b"app");
        field(&mut export, "PRIORITY", b"6");
        field(&mut export, "MESSAGE", message);
        if let Some(c) = custom {
            let (name, value) = c.split_at(c.iter().position(|&b| b == b'=').unwrap_or(0));
            field(&mut export, &String::from_utf8_lossy(name), &value[1..]);
        }
        export.push(b'\n');
    }
    let input = dir.join("planted.export");
    std::fs::write(&input, &export).unwrap();
    let journal = dir.join("planted.journal");
    let out = assert_cmd::Command::new(journal_remote())
        .arg(format!("--output={}", journal.display()))
        .arg(&input)
        .output()
        .unwrap();
    assert!(
        out.status.success() && journal.is_file(),
        "systemd-journal-remote failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    journal
}

/// journalctl's output of the planted journal in `mode`.
fn journalctl(journal: &Path, mode: &str) -> Vec<u8> {
    let out = assert_cmd::Command::new("journalctl")
        .arg(format!("--file={}", journal.display()))
        .args(["--no-pager", "-o", mode])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "journalctl -o {mode} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// What a reader sees of `text`: ANSI CSI and OSC sequences and other
/// escapes removed (a terminal acts on them and shows nothing), and the
/// remaining control bytes but newline and tab dropped.
fn as_seen(text: &[u8]) -> String {
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        let b = text[i];
        if b == 0x1b {
            match text.get(i + 1) {
                Some(b'[') => {
                    i += 2;
                    while i < text.len() && !(0x40..=0x7e).contains(&text[i]) {
                        i += 1;
                    }
                    i += 1;
                }
                Some(b']') => {
                    i += 2;
                    while i < text.len()
                        && text[i] != 0x07
                        && !(text[i] == 0x1b && text.get(i + 1) == Some(&b'\\'))
                    {
                        i += 1;
                    }
                    i += if text.get(i) == Some(&0x07) { 1 } else { 2 };
                }
                _ => i += 2,
            }
            continue;
        }
        if b >= 0x20 && b != 0x7f || b == b'\n' || b == b'\t' {
            out.push(b);
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// JSON output read as its encoding says: each field that journalctl wrote
/// as an array of byte numbers turned back into its bytes (one object a
/// line, pretty-printed, `data: ` lines or record-separated: all one stream
/// of JSON values once those prefixes are gone).
fn decode_json(text: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(text);
    let cleaned: String = text
        .lines()
        .map(|l| l.trim_start_matches('\x1e'))
        .map(|l| l.strip_prefix("data: ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = Vec::new();
    for value in serde_json::Deserializer::from_str(&cleaned).into_iter::<serde_json::Value>() {
        let Ok(serde_json::Value::Object(map)) = value else {
            break;
        };
        for (k, v) in map {
            out.extend_from_slice(k.as_bytes());
            out.push(b'=');
            match v {
                serde_json::Value::String(s) => out.extend_from_slice(s.as_bytes()),
                serde_json::Value::Array(a) => out.extend(
                    a.iter()
                        .filter_map(|n| n.as_u64().and_then(|n| u8::try_from(n).ok())),
                ),
                other => out.extend_from_slice(other.to_string().as_bytes()),
            }
            out.push(b'\n');
        }
    }
    out
}

/// The planted secrets a reader finds in `mode`'s redacted output.
fn leaked(journal: &Path, mode: &str) -> Vec<String> {
    let raw = journalctl(journal, mode);
    let redacted = aromba_redact::redact(&raw).text;
    let read = if mode.starts_with("json") {
        decode_json(&redacted)
    } else {
        redacted
    };
    let seen = as_seen(&read);
    let mut found = Vec::new();
    for s in SECRETS {
        // The whole secret, or its distinctive tail.
        let tail = &s[s.len() - 12..];
        if seen.contains(s) || seen.contains(tail) {
            found.push(s.to_string());
        }
    }
    for (part, _) in IN_CONTEXT {
        if seen.contains(part) {
            found.push(part.to_string());
        }
    }
    found.sort();
    found.dedup();
    found
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("aromba-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn no_planted_secret_survives_any_allowed_journalctl_output_mode() {
    let dir = scratch("journal-modes");
    let journal = planted_journal(&dir);
    let entries = messages().len();
    for mode in OUTPUT_MODES {
        let raw = journalctl(&journal, mode);
        // Every entry was read (the short modes print one line or more per
        // entry; verbose one block per entry).
        let shown = as_seen(&raw).matches("app").count();
        assert!(
            shown >= entries,
            "-o {mode} showed {shown} of {entries} entries"
        );
        let found = leaked(&journal, mode);
        assert!(found.is_empty(), "-o {mode} leaks {found:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The modes the policy refuses do leak what the allowed ones keep: JSON
/// writes a field with control bytes as byte numbers the redactor cannot
/// read, cat and export write the raw bytes of a key a colour code splits.
/// (So the check above is not blind.)
#[test]
fn the_refused_journalctl_modes_leak_planted_secrets() {
    let dir = scratch("journal-refused-modes");
    let journal = planted_journal(&dir);
    for mode in [
        "json",
        "json-pretty",
        "json-sse",
        "json-seq",
        "export",
        "cat",
    ] {
        assert!(
            !value_matches(ValueType::Output, mode),
            "{mode} is accepted"
        );
        let found = leaked(&journal, mode);
        assert!(
            !found.is_empty(),
            "-o {mode} leaked nothing: the refusal would be unfounded"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every value `<output>` accepts is one of journalctl's own modes and a
/// text mode: its output of the planted journal is UTF-8 with no control
/// byte but newline and tab (colour codes removed, blobs shown as
/// `[N blob data]`). And of journalctl's modes (from its `--help`) it accepts
/// exactly the listed ones.
#[test]
fn every_output_mode_the_policy_accepts_is_a_text_mode() {
    let help = assert_cmd::Command::new("journalctl")
        .arg("--help")
        .output()
        .unwrap()
        .stdout;
    let help = String::from_utf8_lossy(&help);
    let start = help
        .find("Change journal output mode (")
        .expect("the -o line of --help")
        + "Change journal output mode (".len();
    let end = start + help[start..].find(')').expect("the end of the mode list");
    let mut modes: Vec<String> = help[start..end]
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|m| !m.is_empty())
        .map(String::from)
        .collect();
    // Accepted by journalctl 252 though --help leaves it out.
    modes.push("short-delta".into());
    for m in OUTPUT_MODES {
        assert!(modes.iter().any(|x| x == m), "{m} is not a journalctl mode");
    }
    for m in &modes {
        assert_eq!(
            value_matches(ValueType::Output, m),
            OUTPUT_MODES.contains(&m.as_str()),
            "{m}"
        );
    }
    for near in [
        "SHORT",
        "short ",
        " short",
        "short-",
        "shor",
        "verbose,json",
        "short\n",
    ] {
        assert!(!value_matches(ValueType::Output, near), "{near:?}");
    }
    let dir = scratch("journal-text-modes");
    let journal = planted_journal(&dir);
    for mode in OUTPUT_MODES {
        let raw = journalctl(&journal, mode);
        let text =
            std::str::from_utf8(&raw).unwrap_or_else(|e| panic!("-o {mode} is not UTF-8: {e}"));
        if let Some(c) = text
            .chars()
            .find(|&c| c.is_control() && c != '\n' && c != '\t')
        {
            panic!("-o {mode} writes the control character {c:?}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

// ------------------------------------------------------------------ docker

/// The pieces a docker template is made of, hostile ones included.
const PIECES: &[&str] = &[
    "{{", "}}", ".", "Names", "Command", "ID", " ", "|", "$", "-", "(", ")", "\"", "json",
    "table ", "urlquery", "printf", "%x", "{", "}", ":=", "/*", "*/", "x",
];

/// A template the grammar accepts, stated apart from the parser: `json`,
/// `table`, or an optional `table ` and then literal text (no brace) and
/// `{{ .Ident(.Ident)* }}` actions, each naming one of docker's placeholders
/// the policy lists (a method such as `MarshalJSON` re-encodes).
fn is_field_references_only(t: &str) -> bool {
    static RE: std::sync::OnceLock<(regex::Regex, regex::Regex)> = std::sync::OnceLock::new();
    let (re, action) = RE.get_or_init(|| {
        (
            regex::Regex::new(
                r#"^(?:table )?(?:[A-Za-z0-9 _.,:;|()\[\]"'/\\+=#%@!?<>*&~^-]|\{\{ *(?:\.[A-Za-z_][A-Za-z0-9_]*)+ *\}\})*$"#,
            )
            .unwrap(),
            regex::Regex::new(r"\{\{ *\.([A-Za-z0-9_.]+) *\}\}").unwrap(),
        )
    });
    let placeholders = || {
        action
            .captures_iter(t)
            .all(|c| template::FIELDS.contains(&&c[1]))
    };
    !t.is_empty() && (t == "json" || t == "table" || (re.is_match(t) && placeholders()))
}

/// Every template of up to four pieces: the parser accepts exactly those
/// made of field references and literal text, so no function, pipe,
/// variable, trim or comment is ever accepted.
#[test]
fn docker_template_accepts_only_field_references_exhaustively() {
    let mut current: Vec<String> = vec![String::new()];
    let mut accepted = 0usize;
    let mut tried = 0usize;
    for _ in 0..4 {
        let mut next = Vec::with_capacity(current.len() * PIECES.len());
        for t in &current {
            for p in PIECES {
                let s = format!("{t}{p}");
                tried += 1;
                let ok = template::check(&s).is_ok();
                assert_eq!(
                    ok,
                    is_field_references_only(&s),
                    "{s:?}: the parser says {ok}"
                );
                if ok {
                    accepted += 1;
                    // Whatever follows `{{` is a field reference.
                    for (i, _) in s.match_indices("{{") {
                        let after = s[i + 2..].trim_start_matches(' ');
                        assert!(after.starts_with('.'), "{s:?}");
                    }
                    assert!(!s.contains('$'), "{s:?}");
                }
                next.push(s);
            }
        }
        current = next;
    }
    assert!(
        accepted > 1000,
        "only {accepted} of {tried} accepted: the check is blind"
    );
}
