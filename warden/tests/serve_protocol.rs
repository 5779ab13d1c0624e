//! The Worker socket's protocol under a raw client: malformed and oversize
//! requests, the wrong socket, notes, and commands running side by side.
//! The Warden here serves the test's own uid (root) as its Worker.

use aromba_testkit::warden::anchor;

use aromba_warden::layout::Layout;
use aromba_warden::server::{ServeOptions, Server, ShutdownHandle};
use aromba_warden_proto::{
    FrameError, MAX_RESPONSE, Request, Response, decode_response, encode_request, read_frame,
    write_frame,
};
use assert_cmd::Command;
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

struct Warden {
    root: PathBuf,
    handle: ShutdownHandle,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Warden {
    fn start(name: &str, max_running: usize) -> Warden {
        Warden::start_with(name, |o| o.max_running = max_running)
    }

    fn start_with(name: &str, adjust: impl FnOnce(&mut ServeOptions)) -> Warden {
        let root =
            std::env::temp_dir().join(format!("aromba-relay-proto-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let mut options = ServeOptions::new(Layout::rooted(&root), 0, 0);
        // Root stands in for the Worker: its connections are the machine's.
        options.watch_network = false;
        adjust(&mut options);
        let server = Server::bind(options).expect("binds");
        let handle = server.shutdown_handle();
        let thread = Some(std::thread::spawn(move || server.run()));
        Warden {
            root,
            handle,
            thread,
        }
    }

    fn connect(&self) -> UnixStream {
        UnixStream::connect(Layout::rooted(&self.root).worker_socket()).expect("connects")
    }

    fn journal(&self) -> String {
        std::fs::read_to_string(Layout::rooted(&self.root).journal_file()).unwrap_or_default()
    }
}

impl Drop for Warden {
    fn drop(&mut self) {
        self.handle.shutdown();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn send(s: &mut UnixStream, r: &Request) {
    write_frame(s, &encode_request(r), 1 << 20).unwrap();
}

fn recv(s: &mut UnixStream) -> Response {
    decode_response(&read_frame(s, MAX_RESPONSE).unwrap()).unwrap()
}

fn read(cmd: &str, args: &[&str]) -> Request {
    Request::Read {
        cmd: cmd.into(),
        args: args.iter().map(|s| s.to_string()).collect(),
    }
}

fn assert_closed(s: &mut UnixStream) {
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert!(
        matches!(read_frame(s, MAX_RESPONSE), Err(FrameError::Closed)),
        "the connection stayed open"
    );
}

#[test]
fn malformed_json_is_refused_journaled_and_the_connection_closed() {
    let w = Warden::start("malformed", 2);
    let mut s = w.connect();
    write_frame(&mut s, b"{\"type\":\"read\",", 1 << 20).unwrap();
    let Response::Error { message } = recv(&mut s) else {
        panic!("not an error")
    };
    assert!(message.contains("malformed"), "{message}");
    assert_closed(&mut s);
    assert!(w.journal().contains("\"kind\":\"malformed\""));
}

#[test]
fn an_oversize_request_is_refused_before_it_is_read() {
    let w = Warden::start("oversize", 2);
    let mut s = w.connect();
    s.write_all(&(10u32 << 20).to_be_bytes()).unwrap();
    let Response::Error { message } = recv(&mut s) else {
        panic!("not an error")
    };
    assert!(message.contains("over the limit"), "{message}");
    assert_closed(&mut s);
    assert!(w.journal().contains("over the limit"));
}

#[test]
fn a_request_carrying_an_environment_is_refused() {
    let w = Warden::start("env", 2);
    let mut s = w.connect();
    let body = br#"{"type":"read","cmd":"systemctl","args":["status"],"env":{"PAGER":"/bin/sh","LD_PRELOAD":"/tmp/x.so","PATH":"/tmp"}}"#;
    write_frame(&mut s, body, 1 << 20).unwrap();
    let Response::Error { message } = recv(&mut s) else {
        panic!("not an error")
    };
    assert!(message.contains("unknown field \"env\""), "{message}");
}

#[test]
fn a_nul_byte_in_an_argument_is_refused_and_journaled() {
    let w = Warden::start("nul", 2);
    let mut s = w.connect();
    send(&mut s, &read("ls", &["/tmp\0/etc/shadow"]));
    let Response::Refused {
        reason,
        journal_seq,
    } = recv(&mut s)
    else {
        panic!("not refused")
    };
    assert!(reason.contains("NUL"), "{reason}");
    assert!(journal_seq.is_some());
}

#[test]
fn a_control_request_on_the_worker_socket_is_refused() {
    let w = Warden::start("wrong-socket", 2);
    let mut s = w.connect();
    send(&mut s, &Request::Resume);
    assert!(matches!(recv(&mut s), Response::Error { .. }));
    assert!(w.journal().contains("wrong-socket"));
    let mut s = w.connect();
    send(
        &mut s,
        &Request::PinRelayKey {
            key: "RWQf6LRCGA9i53mlYecO4IzT51TGPpvWucNSCh1CBM0QTaLn73Y7GFO3".into(),
        },
    );
    assert!(matches!(recv(&mut s), Response::Error { .. }));
}

#[test]
fn the_health_set_answers_each_read_and_counts_as_one_command() {
    // Three commands in the window are allowed; the health set runs eight
    // reads or more each time.
    let w = Warden::start_with("health", |o| o.command_threshold = 3);
    for _ in 0..3 {
        let mut s = w.connect();
        send(&mut s, &Request::Health);
        let reads = match recv(&mut s) {
            Response::Health { reads } => reads,
            other => panic!("no health answer: {other:?}\n{}", w.journal()),
        };
        let names: Vec<&str> = reads.iter().map(|(n, _)| n.as_str()).collect();
        for name in [
            "loadavg",
            "nproc",
            "meminfo",
            "df_space",
            "df_inodes",
            "clock",
        ] {
            assert!(names.contains(&name), "{name} in {names:?}");
        }
        let Some((_, Response::Result(load))) = reads.iter().find(|(n, _)| n == "loadavg") else {
            panic!("loadavg was not read")
        };
        assert_eq!(load.exit_code, Some(0));
        assert_eq!(
            String::from_utf8_lossy(&load.stdout)
                .split_whitespace()
                .count(),
            5
        );
    }
    let mut s = w.connect();
    send(&mut s, &Request::Status);
    let Response::Status(st) = recv(&mut s) else {
        panic!("no status")
    };
    assert_eq!(
        st.ladder_name, "normal",
        "three health sets are three commands"
    );
    // Each read of the set is journaled as a read is.
    assert!(w.journal().matches("/proc/loadavg").count() >= 3);
}

#[test]
fn the_worker_reads_the_status_it_shows_in_the_chat() {
    let w = Warden::start("worker-status", 2);
    let mut s = w.connect();
    send(&mut s, &Request::Status);
    let Response::Status(st) = recv(&mut s) else {
        panic!("no status")
    };
    assert_eq!(st.server_id.len(), 32, "{st:?}");
    assert!(!st.paired);
}

#[test]
fn the_worker_adds_journal_lines_through_the_warden() {
    let w = Warden::start("note", 2);
    let mut s = w.connect();
    send(
        &mut s,
        &Request::Note {
            text: "digest sent\nforged line".into(),
        },
    );
    let Response::Noted { journal_seq } = recv(&mut s) else {
        panic!("not noted")
    };
    assert!(journal_seq >= 2);
    let journal = w.journal();
    assert!(journal.contains("\"kind\":\"worker-note\""));
    assert!(
        journal.contains("digest sent\\nforged line"),
        "the line break was escaped"
    );
    // One connection, several requests.
    send(&mut s, &Request::Ping);
    assert_eq!(recv(&mut s), Response::Pong);
}

/// A listed `cat` file that does not exist here, made a FIFO so that `cat`
/// blocks until the test writes to it: a command as slow as the test wants.
struct Fifo(PathBuf);

impl Fifo {
    fn make() -> Fifo {
        let candidates = [
            "/run/reboot-required.pkgs",
            "/etc/lsb-release",
            "/run/reboot-required",
        ];
        let path = candidates
            .iter()
            .map(Path::new)
            .find(|p| !p.exists())
            .expect("one of the listed cat files is absent here to stand in as a FIFO");
        let out = Command::new("mkfifo")
            .arg(path)
            .output()
            .expect("mkfifo runs");
        assert!(
            out.status.success(),
            "mkfifo: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Fifo(path.to_path_buf())
    }

    /// Lets the blocked `cat`s finish: they read what is written, and end
    /// when the writer closes.
    fn release(&self, line: &str) {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(&self.0)
            .unwrap();
        f.write_all(line.as_bytes()).unwrap();
    }
}

impl Drop for Fifo {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Waits until `n` processes are running `cat PATH`.
fn wait_for_readers(path: &str, n: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let running = std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
            .filter(|cmdline| {
                let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
                args.len() >= 2 && args[0].ends_with(b"/cat") && args[1] == path.as_bytes()
            })
            .count();
        if running >= n {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{running} of {n} cat commands started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_slow_command_blocks_no_other_connection_and_running_commands_are_bounded() {
    let fifo = Fifo::make();
    let path = fifo.0.to_str().unwrap().to_string();
    let w = Warden::start("concurrency", 2);
    // Two slow commands take both slots.
    let mut a = w.connect();
    send(&mut a, &read("cat", &[&path]));
    let mut b = w.connect();
    send(&mut b, &read("cat", &[&path]));
    wait_for_readers(&path, 2);
    // Another connection is still answered…
    let mut c = w.connect();
    send(&mut c, &Request::Ping);
    assert_eq!(recv(&mut c), Response::Pong);
    // …but a third command waits for a slot.
    send(&mut c, &read("uptime", &[]));
    c.set_read_timeout(Some(Duration::from_millis(700)))
        .unwrap();
    assert!(
        read_frame(&mut c, MAX_RESPONSE).is_err(),
        "a third command ran with both slots taken"
    );
    // Free the slots: the cats finish, and the waiting uptime runs.
    fifo.release("first\n");
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let Response::Result(up) = recv(&mut c) else {
        panic!("uptime did not run")
    };
    assert_eq!(up.exit_code, Some(0));
    for s in [&mut a, &mut b] {
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let Response::Result(r) = recv(s) else {
            panic!("cat did not finish")
        };
        assert_eq!(r.exit_code, Some(0));
    }
}

/// The status from the control socket (root's, never paced).
fn status_of(w: &Warden) -> aromba_warden_proto::Status {
    let mut s = UnixStream::connect(Layout::rooted(&w.root).control_socket()).expect("connects");
    send(&mut s, &Request::Status);
    match recv(&mut s) {
        Response::Status(st) => st,
        other => panic!("no status: {other:?}"),
    }
}

/// The anchor `(seq, hash)` as the relay signs it (its key pinned now).
fn check_anchor(w: &Warden, seq: u64, hash: &str) -> (bool, String) {
    anchor::pin_test_relay_key(&Layout::rooted(&w.root));
    let mut s = w.connect();
    send(
        &mut s,
        &anchor::relay_anchor(&Layout::rooted(&w.root), seq, hash),
    );
    match recv(&mut s) {
        Response::Verified { ok, report } => (ok, report),
        other => panic!("no verdict: {other:?}"),
    }
}

#[test]
fn the_journal_extends_the_relays_anchor_and_a_cut_below_it_is_a_signal() {
    let w = Warden::start("anchor", 2);
    for i in 0..3 {
        let mut s = w.connect();
        send(
            &mut s,
            &Request::Note {
                text: format!("note {i}"),
            },
        );
        let _ = recv(&mut s);
    }
    let anchored = status_of(&w);
    // More lines after the anchor: it is still extended.
    let mut s = w.connect();
    send(
        &mut s,
        &Request::Note {
            text: "later".into(),
        },
    );
    let _ = recv(&mut s);
    let (ok, report) = check_anchor(&w, anchored.journal_seq, &anchored.journal_head);
    assert!(ok, "{report}");
    assert_eq!(status_of(&w).ladder_name, "normal");
    // The relay holds a line the journal no longer reaches: cut.
    let (ok, report) = check_anchor(&w, anchored.journal_seq + 1000, &anchored.journal_head);
    assert!(!ok);
    assert!(report.contains("it was cut"), "{report}");
    assert_eq!(status_of(&w).ladder_name, "cut");
}

#[test]
fn a_journal_line_other_than_the_anchored_one_is_a_rewrite() {
    let w = Warden::start("anchor-rewrite", 2);
    let mut s = w.connect();
    send(
        &mut s,
        &Request::Note {
            text: "a line".into(),
        },
    );
    let _ = recv(&mut s);
    let st = status_of(&w);
    let (ok, report) = check_anchor(&w, st.journal_seq, &"0".repeat(64));
    assert!(!ok);
    assert!(report.contains("rewritten"), "{report}");
    assert_eq!(status_of(&w).ladder_name, "cut");
}

/// Asks `Request::Trust` until its journal line starts with `prefix`.
fn trust_until(w: &Warden, prefix: &str) -> (String, Vec<String>, u64, String) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let mut s = w.connect();
        send(&mut s, &Request::Trust);
        let Response::Trust {
            policy,
            fences,
            fences_total,
            journal,
        } = recv(&mut s)
        else {
            panic!("no trust answer")
        };
        if journal.starts_with(prefix) {
            return (policy, fences, fences_total, journal);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the journal's check never said {prefix:?}: {journal}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_trust_page_gets_the_policy_verbatim_the_fences_and_the_journals_last_check() {
    let w = Warden::start_with("trust", |o| {
        o.integrity_interval = Duration::from_millis(200);
        o.watch_interval = Duration::from_millis(50);
        let fences = o.layout.fences_file();
        std::fs::create_dir_all(fences.parent().expect("a folder")).expect("the folder");
        std::fs::write(&fences, "/srv/app\n/var/lib/postgresql\n").expect("the fence list");
    });
    let (policy, fences, total, journal) = trust_until(&w, "verified at");
    assert_eq!(policy, aromba_warden::policy::render(), "verbatim");
    assert_eq!(fences, vec!["/srv/app", "/var/lib/postgresql"]);
    assert_eq!(total, 2);
    assert!(
        journal.contains("journal whole from its first line"),
        "{journal}"
    );
    // A line of the journal rewritten: the next check says so.
    let file = Layout::rooted(&w.root).journal_file();
    let text = std::fs::read_to_string(&file).expect("the journal");
    std::fs::write(&file, text.replacen("warden-started", "warden-startex", 1)).expect("rewritten");
    let (_, _, _, broken) = trust_until(&w, "BROKEN at");
    assert!(!broken.contains("whole"), "{broken}");
}
