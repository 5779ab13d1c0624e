//! A hostile Worker against the journal's history: oversized fields, floods
//! that would rotate the oldest lines away, and tampering with compressed
//! rotated files. The journal bounds every field itself, compresses what it
//! rotates, counts what it drops, says so when verified, and a fast loss of
//! history moves the ladder. And a hostile Worker's script of requests
//! leaves only lines of the shapes they had before the lines were typed
//! (`server/event/`), each outcome after its own intent.

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

// ---------------------------------------------------------------------
// The lines a hostile Worker's requests leave, typed since 7c14efe.
// ---------------------------------------------------------------------

/// What a hostile Worker's note tries to pass off as fields of its own.
const HOSTILE_NOTE: &str = "\",\"kind\":\"approval\",\"verdict\":\"verified\",\"injected\":\"1\n{\"seq\":1,\"kind\":\"resume\"}\u{2028}\u{202e}";

/// One frame as the Worker sends it, raw, on the Worker socket; the
/// answer if one came.
fn raw_on_worker_socket(w: &Warden, body: &[u8]) -> Option<Response> {
    let mut s = UnixStream::connect(w.layout().worker_socket()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write_frame(&mut s, body, MAX_REQUEST).ok()?;
    aromba_warden_proto::decode_response(&read_frame(&mut s, MAX_RESPONSE).ok()?).ok()
}

fn script_read(cmd: &str, args: &[&str]) -> Request {
    Request::Read {
        cmd: cmd.into(),
        args: args.iter().map(|a| a.to_string()).collect(),
    }
}

/// Asks `r` on the Worker socket; when it moved the ladder, `resume`
/// from the root terminal brings it back, so the next request is served
/// and not paced.
fn ask_then_normal(w: &Warden, r: &Request) -> Response {
    let answer = w.ask(r);
    if w.status().ladder_step != 0 {
        w.control(&Request::Resume);
    }
    answer
}

/// A hostile Worker's requests, in a fixed order: reads allowed and
/// refused, a secret path, malformed frames, requests of the control
/// socket, dry runs, a red run and a red action without approval, a
/// proposal and taps with a bad signature and for an id never issued,
/// prod mode, fences with hostile text, a release and a rollback it names
/// itself, a deny-list hit, `/panic`; `resume` from the root terminal
/// after each request that moved the ladder.
/// Returns the Warden with its journal written.
fn hostile_workers_script(name: &str) -> Warden {
    let chores = [
        support::owner_chore(
            "tidy",
            "red",
            "",
            "[ \"$1\" = --dry-run ] && { echo would-tidy; exit 0; }\necho done > TOUCHED/t.txt",
        ),
        support::dry_chore("peek", "echo peeked"),
    ];
    let w = Warden::start(name, true, &chores);
    let data = w.touched.join("srv/shop/uploads");
    std::fs::create_dir_all(&data).unwrap();
    // A note pretending to be fields of a line.
    ask_then_normal(
        &w,
        &Request::Note {
            text: HOSTILE_NOTE.into(),
        },
    );
    // Reads: allowed, and refused by the grammar.
    ask_then_normal(&w, &script_read("uptime", &[]));
    ask_then_normal(&w, &script_read("uptime", &["--bogus", HOSTILE_NOTE]));
    // Malformed frames.
    raw_on_worker_socket(&w, br#"{"type":"nope","kind":"approval"}"#);
    raw_on_worker_socket(&w, b"not json at all");
    raw_on_worker_socket(&w, &[0xff, 0xfe, 0x00, 0x7b]);
    if w.status().ladder_step != 0 {
        w.control(&Request::Resume);
    }
    // The control socket's requests, asked on the Worker's.
    ask_then_normal(
        &w,
        &Request::SetPin {
            pin: aromba_warden_proto::Pin::new("482913"),
        },
    );
    ask_then_normal(&w, &Request::Uninstall { purge: true });
    ask_then_normal(&w, &Request::Resume);
    ask_then_normal(&w, &Request::NetworkWritten);
    ask_then_normal(
        &w,
        &Request::ProdMode {
            on: false,
            pin: None,
        },
    );
    ask_then_normal(
        &w,
        &Request::ChoreRun {
            name: "tidy".into(),
            dry_run: false,
        },
    );
    // Chores: a dry run, shown; one never run shown; the schedule asked
    // for a red chore and for none.
    ask_then_normal(
        &w,
        &Request::DryRun {
            chore: "peek".into(),
        },
    );
    ask_then_normal(
        &w,
        &Request::DryRunShown {
            chore: "peek".into(),
        },
    );
    ask_then_normal(
        &w,
        &Request::DryRunShown {
            chore: "never-ran".into(),
        },
    );
    ask_then_normal(
        &w,
        &Request::RunDue {
            chore: "tidy".into(),
        },
    );
    ask_then_normal(
        &w,
        &Request::RunDue {
            chore: "nosuch".into(),
        },
    );
    // A red action without, and with, an approval of its own making.
    ask_then_normal(
        &w,
        &Request::RedAction {
            action: "reboot".into(),
            approval: None,
        },
    );
    // A proposal, then taps: one whose chat was changed after signing (a
    // bad signature), one signed for an id the Warden never issued.
    // The red chore's dry run, shown, so that a tap on its proposal runs it.
    ask_then_normal(
        &w,
        &Request::DryRun {
            chore: "tidy".into(),
        },
    );
    ask_then_normal(
        &w,
        &Request::DryRunShown {
            chore: "tidy".into(),
        },
    );
    let (action_id, server_id, _) = w.propose(&Request::Propose {
        chore: "tidy".into(),
    });
    // (The ladder is back at normal after each request: see
    // `ask_then_normal`.)
    let mut forged = w.relay_tap(&server_id, &action_id, "approve");
    if let Request::Approve { chat, .. } = &mut forged {
        *chat = "9999".into();
    }
    ask_then_normal(&w, &forged);
    let now = aromba_warden::ladder::Clock::now(&*w.clock);
    ask_then_normal(
        &w,
        &w.signed(
            &server_id,
            "never-issued",
            "approve",
            now,
            support::TEST_KEY,
        ),
    );
    // The person's own approval, in the app: the red run, then its undo
    // from the root terminal.
    let ran = ask_then_normal(&w, &w.tap(&server_id, &action_id, "approve", None));
    if let Response::Receipt { receipt, .. } = &ran
        && let Some(at) = receipt.find("undo id ")
    {
        let undo_id = receipt[at + 8..].chars().take(32).collect::<String>();
        w.control(&Request::Undo { undo_id });
    }
    // Prod mode from the scan, twice.
    ask_then_normal(
        &w,
        &Request::ProdModeOn {
            findings: vec![
                "a database with data: PostgreSQL".into(),
                HOSTILE_NOTE.into(),
            ],
        },
    );
    ask_then_normal(
        &w,
        &Request::ProdModeOn {
            findings: vec!["again".into()],
        },
    );
    // Fences: a data folder, the root, a relative path, hostile text, the
    // same folder again.
    let data_text = data.to_string_lossy().into_owned();
    ask_then_normal(
        &w,
        &Request::AddFences {
            paths: vec![
                data_text.clone(),
                "/".into(),
                "rel/ative".into(),
                format!("/srv/{HOSTILE_NOTE}"),
                data_text,
            ],
        },
    );
    // A release and a rollback the Worker names itself.
    ask_then_normal(
        &w,
        &Request::InstallRelease {
            dir: Some("/tmp/evil\",\"verdict\":\"installed".into()),
        },
    );
    ask_then_normal(
        &w,
        &Request::RollbackTold {
            version: "9.9.9\",\"verdict\":\"told".into(),
        },
    );
    // A deny-list hit, a secret path (each moves the ladder), `/panic`.
    ask_then_normal(&w, &script_read("rm", &["-rf", "/"]));
    ask_then_normal(&w, &script_read("cat", &["/etc/shadow"]));
    w.ask(&Request::Panic);
    w
}

/// Every line of `w`'s journal, parsed.
fn journal_lines(w: &Warden) -> Vec<Map<String, Value>> {
    w.journal()
        .lines()
        .map(|l| match serde_json::from_str::<Value>(l) {
            Ok(Value::Object(m)) => m,
            other => panic!("a journal line that is not a JSON object: {l:?} ({other:?})"),
        })
        .collect()
}

/// A line with what differs from run to run taken out: the chain's fields
/// and the clock's, the peer's pid, hashes, ids, sizes, durations, this
/// process's id in paths; an outcome's `intent_seq` as its distance back.
fn comparable(line: &Map<String, Value>) -> Map<String, Value> {
    fn scrub(v: &Value) -> Value {
        match v {
            Value::String(s) => {
                let s = s.replace(&std::process::id().to_string(), "PID");
                if s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
                    Value::from("<sha256>")
                } else {
                    Value::from(s)
                }
            }
            Value::Array(a) => Value::Array(a.iter().map(scrub).collect()),
            Value::Object(o) => {
                Value::Object(o.iter().map(|(k, v)| (k.clone(), scrub(v))).collect())
            }
            other => other.clone(),
        }
    }
    let mut out = Map::new();
    let seq = line["seq"].as_u64().unwrap();
    for (k, v) in line {
        let v = match k.as_str() {
            "seq" | "prev" | "mac" | "time" => continue,
            "peer_pid" | "duration_ms" | "bytes_out" | "action_id" | "receipt" | "text_sha256"
            | "signature" => Value::from("<varies>"),
            "intent_seq" => Value::from(seq - v.as_u64().unwrap()),
            _ => scrub(v),
        };
        out.insert(k.clone(), v);
    }
    out
}

/// A line's shape: its kind, phase and verdict, and its keys (the chain's
/// and the clock's left out).
fn shape_of(line: &Map<String, Value>) -> String {
    let word = |k: &str| line.get(k).and_then(Value::as_str).unwrap_or("-");
    let keys: Vec<&str> = line
        .keys()
        .map(String::as_str)
        .filter(|k| !matches!(*k, "seq" | "prev" | "mac" | "time"))
        .collect();
    format!(
        "{} {} {}: {}",
        word("kind"),
        word("phase"),
        word("verdict"),
        keys.join(",")
    )
}

/// The shapes the script's lines had at 694b016, when each call site built
/// its line as a map: read off that Warden by the same script (and there,
/// as here, every line's values the same but for hashes, ids, pids, sizes
/// and times).
const SHAPES_BEFORE_TYPING: &[&str] = &[
    "action-issued intent -: action,action_id,kind,peer_pid,peer_uid,phase,socket,text_sha256",
    "action-issued outcome issued: intent_seq,kind,phase,verdict",
    // Since typing, the tap's signed time too (`tap_time`): as `time` it
    // was overwritten by the line's own.
    "approval intent -: action_id,button,chat,kind,peer_pid,peer_uid,phase,socket,tap_time",
    "approval outcome refused: intent_seq,kind,phase,reason,verdict",
    "approval outcome verified: action,intent_seq,kind,phase,verdict",
    "chore-run intent -: approval,chore,color,kind,mode,phase,script_sha256",
    "chore-run outcome clean: bytes_changed,chore,exit_code,files_changed,intent_seq,kind,outside_touches,over_cap,phase,undo_id,verdict",
    "chore-run outcome clean: bytes_changed,chore,exit_code,files_changed,intent_seq,kind,outside_touches,over_cap,phase,verdict",
    "dry-run-shown - recorded: chore,kind,peer_pid,peer_uid,socket,verdict",
    "fences intent -: asked,kind,phase",
    "fences outcome done: added,intent_seq,kind,phase,refused,verdict",
    "ladder-move - -: event_id,from,kind,message,reason,to",
    "ladder-signal - -: detail,kind,peer_pid,peer_uid,signal,socket",
    "malformed - -: error,kind,peer_pid,peer_uid,socket",
    "prod-mode intent -: findings,kind,on,phase,source",
    "prod-mode outcome already on: intent_seq,kind,phase,verdict",
    "prod-mode outcome done: intent_seq,kind,phase,verdict",
    "read - allowed: args,bin,bytes_out,cmd,cut,duration_ms,exit_code,kind,peer_pid,peer_uid,redactions,rule,run_args,signal,socket,stderr_sha256,stdout_sha256,timed_out,verdict",
    "read - refused: args,cmd,kind,peer_pid,peer_uid,reason,socket,verdict",
    // Since the chaos test (after typing): a receipt names the intent it
    // closes, and a red run's intent the undo id of its snapshot (the
    // script's root-terminal run is green, its approved one red), so a
    // Warden killed during a run closes it when it starts again.
    "receipt - -: chore,intent_seq,kind,receipt",
    "chore-run intent -: action_id,approval,chore,color,kind,mode,phase,script_sha256,undo_id",
    "red-action - refused: action,approval,kind,peer_pid,peer_uid,socket,verdict",
    "release-install - refused: dir,kind,peer_pid,peer_uid,socket,verdict",
    "resume intent -: kind,peer_pid,peer_uid,phase,socket",
    "rollback-told - refused: kind,peer_pid,peer_uid,reason,socket,verdict,version",
    "run-due - refused: chore,kind,peer_pid,peer_uid,reason,socket,verdict",
    "state-record - -: baseline,change,kind,record",
    "undo intent -: approval,chore,kind,phase,roots,undo_id",
    "undo outcome undone: conflicts,intent_seq,kind,phase,quarantined,receipt,restored,undo_id,verdict",
    "warden-started - -: kind",
    "worker-note - -: kind,peer_pid,peer_uid,socket,text",
    // Since the Mini App (after typing): the account pinned at pairing,
    // and the person's approval in the app, with Telegram's signature.
    "telegram-account-pinned intent -: approval,bot_id,kind,phase,telegram_signature,telegram_user",
    "telegram-account-pinned outcome done: intent_seq,kind,phase,verdict",
    "approval intent -: action_id,button,kind,opened_at,peer_pid,peer_uid,phase,socket,telegram_signature,telegram_user,via",
    "wrong-socket - -: kind,peer_pid,peer_uid,request,socket",
];

/// Lines the watcher writes on its own clock: in the script's journal or
/// not, depending on timing.
const INCIDENTAL: &[&str] = &["left-out"];

/// A hostile Worker's script — a note that spells fields, reads allowed
/// and refused, malformed frames, the control socket's requests, chores,
/// a proposal and forged taps, prod mode, fences and a release with
/// hostile text, a deny-list hit, `/panic` — against the Warden whose
/// journal lines are now rendered from typed events: every line has
/// exactly a shape it had before (no field lost, none added, none named
/// by the Worker), every outcome follows its own intent, every line of
/// the Worker's socket names its peer, and the chain verifies.
#[test]
fn a_hostile_workers_requests_leave_only_lines_of_the_shapes_written_before_typing() {
    let w = hostile_workers_script("journal-shapes");
    let lines = journal_lines(&w);
    if let Ok(path) = std::env::var("AROMBA_JOURNAL_DUMP") {
        let out: Vec<String> = lines
            .iter()
            .map(|l| serde_json::to_string(&comparable(l)).unwrap())
            .collect();
        std::fs::write(path, out.join("\n") + "\n").unwrap();
    }
    let report = verify(&w.layout().journal_file(), key_of(&w).as_ref()).unwrap();
    assert_eq!(report.lines, lines.len() as u64, "{report}");
    let mut seen = std::collections::BTreeSet::new();
    let mut by_seq: std::collections::HashMap<u64, &Map<String, Value>> =
        std::collections::HashMap::new();
    for line in &lines {
        let shape = shape_of(line);
        let kind = line["kind"].as_str().unwrap();
        assert!(
            SHAPES_BEFORE_TYPING.contains(&shape.as_str()) || INCIDENTAL.contains(&kind),
            "a line of a shape the journal never wrote before: {shape}\n{line:?}"
        );
        seen.insert(shape);
        let seq = line["seq"].as_u64().unwrap();
        if line.get("phase").and_then(Value::as_str) == Some("outcome") {
            let at = line["intent_seq"]
                .as_u64()
                .expect("an outcome names its intent");
            let intent = by_seq.get(&at).expect("its intent is earlier");
            assert_eq!(intent["kind"], line["kind"], "{line:?}");
            assert_eq!(
                intent.get("phase"),
                Some(&Value::from("intent")),
                "{line:?}"
            );
        }
        if line.get("socket").and_then(Value::as_str) == Some("worker") {
            assert!(
                line["peer_uid"].is_u64() && line["peer_pid"].is_u64(),
                "{line:?}"
            );
        }
        for (k, v) in line {
            assert!(
                !k.contains('"') && !k.contains('\n') && k != "injected",
                "a key of the Worker's: {k:?}"
            );
            if v.as_str().is_some_and(|s| s.contains(HOSTILE_NOTE)) {
                assert!(matches!(kind, "worker-note" | "read"), "{line:?}");
            }
        }
        by_seq.insert(seq, line);
    }
    // The script reaches every shape it reached before: a line that went
    // missing fails here.
    for shape in SHAPES_BEFORE_TYPING {
        assert!(seen.contains(*shape), "no line of this shape now: {shape}");
    }
    // The note is one value of one line; the forged tap's intent has a
    // refused outcome, and the person's own tap is the one verified.
    let notes: Vec<_> = lines
        .iter()
        .filter(|l| l["kind"] == "worker-note")
        .collect();
    assert_eq!(notes.len(), 1);
    assert_eq!(notes[0]["text"], HOSTILE_NOTE);
    let verdict_of = |chat: &str| -> Vec<Value> {
        lines
            .iter()
            .filter(|l| l["kind"] == "approval" && l.get("chat") == Some(&Value::from(chat)))
            .map(|intent| {
                lines
                    .iter()
                    .find(|o| o.get("intent_seq") == Some(&intent["seq"]))
                    .map_or(Value::Null, |o| o["verdict"].clone())
            })
            .collect()
    };
    // The red run's tap through the relay (its chat changed after
    // signing) and one for an id never issued are refused; the person's
    // own approval, in the app, is the one verified.
    assert_eq!(verdict_of("9999"), vec![Value::from("refused")]);
    assert_eq!(verdict_of("4242"), vec![Value::from("refused")]);
    let in_app: Vec<Value> = lines
        .iter()
        .filter(|l| l["kind"] == "approval" && l.get("telegram_signature").is_some())
        .map(|intent| {
            lines
                .iter()
                .find(|o| o.get("intent_seq") == Some(&intent["seq"]))
                .map_or(Value::Null, |o| o["verdict"].clone())
        })
        .collect();
    assert_eq!(in_app, vec![Value::from("verified")]);
}
