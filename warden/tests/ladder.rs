//! The ladder through real sockets: each signal, each step, panic, resume,
//! decay, the integrity baseline. The test's own uid (root) stands in for
//! the Worker here; the tests that need the real `aromba` uid (honeypots,
//! unknown hosts, resume refused to non-root) are in `agent/tests/ladder.rs`.

use aromba_warden::install::{InstallOptions, install};
use aromba_warden::ladder::{ManualClock, QUIET_FOR_DECAY_S};
use aromba_warden::layout::Layout;
use aromba_warden::server::{ServeError, ServeOptions, Server, ShutdownHandle};
use aromba_warden_proto::{
    MAX_RESPONSE, Request, Response, Status, decode_response, encode_request, read_frame,
    write_frame,
};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

struct Warden {
    root: PathBuf,
    handle: ShutdownHandle,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn root_for(name: &str) -> PathBuf {
    let root = std::env::temp_dir().join(format!("aromba-ladder-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    root
}

fn options(root: &Path, clock: Option<Arc<ManualClock>>) -> ServeOptions {
    let mut o = ServeOptions::new(Layout::rooted(root), 0, 0);
    o.watch_network = false;
    o.watch_interval = Duration::from_millis(50);
    o.command_threshold = 5;
    if let Some(c) = clock {
        o.clock = c;
    }
    o
}

impl Warden {
    fn start(options: ServeOptions) -> Result<Warden, ServeError> {
        let root = options.layout.run_dir.parent().unwrap().to_path_buf();
        let server = Server::bind(options)?;
        let handle = server.shutdown_handle();
        let thread = Some(std::thread::spawn(move || server.run()));
        Ok(Warden {
            root,
            handle,
            thread,
        })
    }

    fn ask(&self, r: &Request) -> Response {
        call(&Layout::rooted(&self.root).worker_socket(), r)
    }

    fn control(&self, r: &Request) -> Response {
        call(&Layout::rooted(&self.root).control_socket(), r)
    }

    fn status(&self) -> Status {
        match self.control(&Request::Status) {
            Response::Status(s) => s,
            other => panic!("no status: {other:?}"),
        }
    }

    fn stop(mut self) {
        self.handle.shutdown();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    fn journal(&self) -> String {
        std::fs::read_to_string(Layout::rooted(&self.root).journal_file()).unwrap_or_default()
    }
}

fn call(socket: &Path, r: &Request) -> Response {
    let mut s = UnixStream::connect(socket).expect("connect");
    write_frame(&mut s, &encode_request(r), 1 << 16).unwrap();
    decode_response(&read_frame(&mut s, MAX_RESPONSE).unwrap()).unwrap()
}

fn read(cmd: &str, args: &[&str]) -> Request {
    Request::Read {
        cmd: cmd.into(),
        args: args.iter().map(|s| s.to_string()).collect(),
    }
}

fn wait_for_step(w: &Warden, step: u64) -> Status {
    for _ in 0..200 {
        let s = w.status();
        if s.ladder_step == step {
            return s;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("the ladder never reached step {step}: {:?}", w.status());
}

#[test]
fn a_deny_list_hit_climbs_to_slow_and_slow_allows_one_command_a_minute() {
    let root = root_for("deny");
    let clock = ManualClock::new(1_800_000_000);
    let w = Warden::start(options(&root, Some(clock.clone()))).unwrap();
    assert!(matches!(
        w.ask(&read("rm", &["-rf", "/"])),
        Response::Refused { .. }
    ));
    assert_eq!(w.status().ladder_name, "slow");
    // The refused request was this minute's command.
    let Response::Refused { reason, .. } = w.ask(&read("uptime", &[])) else {
        panic!("not paced")
    };
    assert!(reason.contains("one command a minute"), "{reason}");
    clock.advance(60);
    assert!(matches!(w.ask(&read("uptime", &[])), Response::Result(_)));
    assert!(matches!(
        w.ask(&read("uptime", &[])),
        Response::Refused { .. }
    ));
    // The move is journaled and offered to the chat in the spec's words.
    assert!(w.journal().contains("\"kind\":\"ladder-move\""));
    let Response::Events { events } = w.ask(&Request::Events { after: 0 }) else {
        panic!("no events")
    };
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        events[0].message,
        "Unusual activity, I've slowed down. Was that you?"
    );
    w.stop();
}

#[test]
fn a_secret_path_read_climbs_a_step_each_time_up_to_cut() {
    let root = root_for("secret");
    let w = Warden::start(options(&root, None)).unwrap();
    let clock_free = |w: &Warden| w.ask(&read("ls", &["/root/.ssh"]));
    assert!(matches!(clock_free(&w), Response::Refused { .. }));
    assert_eq!(w.status().ladder_name, "slow");
    w.stop();
    // Each refusal is a signal even when paced out: three more reach Cut.
    let clock = ManualClock::new(1_900_000_000);
    let w = Warden::start(options(&root, Some(clock.clone()))).unwrap();
    for _ in 0..2 {
        clock.advance(61);
        assert!(matches!(
            w.ask(&read("du", &["-sh", "/etc/shadow"])),
            Response::Refused { .. }
        ));
    }
    assert_eq!(w.status().ladder_name, "cut");
    clock.advance(61);
    w.ask(&read("ls", &["/root/.ssh"]));
    assert_eq!(
        w.status().ladder_name,
        "cut",
        "ordinary signals never pass Cut"
    );
    w.stop();
}

#[test]
fn too_many_commands_in_ten_minutes_climbs_a_step() {
    let root = root_for("many");
    let w = Warden::start(options(&root, None)).unwrap();
    for _ in 0..5 {
        assert!(matches!(w.ask(&read("uptime", &[])), Response::Result(_)));
    }
    assert_eq!(w.status().ladder_name, "normal");
    w.ask(&read("uptime", &[]));
    assert_eq!(w.status().ladder_name, "slow");
    assert!(w.journal().contains("too-many-commands"));
    w.stop();
}

#[test]
fn a_red_action_without_a_fresh_approval_is_refused_and_climbs_a_step() {
    let root = root_for("red");
    let w = Warden::start(options(&root, None)).unwrap();
    let r = w.ask(&Request::RedAction {
        action: "apt-get install -y --only-upgrade openssl".into(),
        approval: Some("forged".into()),
    });
    assert!(matches!(r, Response::Refused { .. }), "{r:?}");
    assert_eq!(w.status().ladder_name, "slow");
    assert!(w.journal().contains("red-action-without-approval"));
    w.stop();
}

#[test]
fn panic_from_the_chat_cuts_and_wipes_the_ai_key() {
    let root = root_for("chat-panic");
    let layout = Layout::rooted(&root);
    std::fs::create_dir_all(&layout.worker_config_dir).unwrap();
    std::fs::write(
        layout.ai_key_file(),
        "[assistant]\napi_key = \"sk-proj-abc\"\n",
    )
    .unwrap();
    let w = Warden::start(options(&root, None)).unwrap();
    let Response::Ladder { name, .. } = w.ask(&Request::Panic) else {
        panic!("no ladder answer")
    };
    assert_eq!(name, "cut");
    assert!(!layout.ai_key_file().exists(), "the AI key survived Cut");
    assert!(w.journal().contains("ai-key-wiped"));
    // Reads still work at Cut; resume from the control socket brings it back.
    assert!(matches!(w.ask(&read("uptime", &[])), Response::Result(_)));
    let Response::Ladder { name, .. } = w.control(&Request::Resume) else {
        panic!("no ladder answer")
    };
    assert_eq!(name, "normal");
    w.stop();
}

#[test]
fn the_worker_cannot_resume_or_disarm_through_its_own_socket() {
    let root = root_for("worker-resume");
    let w = Warden::start(options(&root, None)).unwrap();
    w.ask(&Request::Panic);
    assert!(matches!(w.ask(&Request::Resume), Response::Error { .. }));
    assert_eq!(w.status().ladder_name, "cut");
    w.stop();
}

#[test]
fn aromba_panic_disarms_the_warden_which_then_refuses_everything() {
    let root = root_for("disarm");
    let layout = Layout::rooted(&root);
    let w = Warden::start(options(&root, None)).unwrap();
    let Response::Ladder { name, .. } = w.control(&Request::Panic) else {
        panic!("no ladder answer")
    };
    assert_eq!(name, "disarm");
    // The Warden stops itself…
    let t = std::time::Instant::now();
    while UnixStream::connect(layout.worker_socket())
        .ok()
        .and_then(|mut s| {
            write_frame(&mut s, &encode_request(&Request::Ping), 1 << 16).ok()?;
            read_frame(&mut s, MAX_RESPONSE).ok()
        })
        .is_some()
    {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the Warden kept serving after Disarm"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    w.stop();
    // …and does not start again: the state survived.
    assert!(matches!(
        Warden::start(options(&root, None)),
        Err(ServeError::Disarmed)
    ));
    assert!(UnixStream::connect(layout.worker_socket()).is_err());
}

#[test]
fn slow_and_freeze_decay_after_24_quiet_hours() {
    let root = root_for("decay");
    let clock = ManualClock::new(1_800_000_000);
    let w = Warden::start(options(&root, Some(clock.clone()))).unwrap();
    w.ask(&read("rm", &["-rf", "/"]));
    clock.advance(61);
    w.ask(&read("rm", &["-rf", "/"]));
    assert_eq!(w.status().ladder_name, "freeze");
    clock.advance(QUIET_FOR_DECAY_S);
    wait_for_step(&w, 1);
    clock.advance(QUIET_FOR_DECAY_S);
    wait_for_step(&w, 0);
    w.stop();
}

#[test]
fn the_ladder_survives_a_restart() {
    let root = root_for("restart");
    let w = Warden::start(options(&root, None)).unwrap();
    w.ask(&read("rm", &["-rf", "/"]));
    w.stop();
    let w = Warden::start(options(&root, None)).unwrap();
    assert_eq!(w.status().ladder_name, "slow");
    w.stop();
}

fn installed(name: &str) -> (PathBuf, Layout) {
    let root = root_for(name);
    let layout = Layout::rooted(&root);
    std::fs::create_dir_all(root.join("bin")).unwrap();
    let worker = root.join("bin/aromba");
    std::fs::copy("/bin/true", &worker).unwrap();
    install(&InstallOptions {
        layout: &layout,
        warden_bin: Path::new("/proc/self/exe"),
        worker_bin: &worker,
        worker_gid: 0,
        clock: Arc::new(aromba_warden::ladder::SystemClock),
        telegram_key: None,
    })
    .expect("install");
    (root, layout)
}

#[test]
fn a_tampered_policy_rendering_moves_the_ladder_to_cut_at_start() {
    let (root, layout) = installed("tamper-policy");
    let w = Warden::start(options(&root, None)).unwrap();
    let s = w.status();
    assert!(s.integrity.starts_with("ok"), "{}", s.integrity);
    assert_eq!(s.ladder_name, "normal");
    assert!(s.phase.starts_with("day 1"), "{}", s.phase);
    w.stop();
    std::fs::write(
        layout.config_dir.join("policy.toml"),
        "[[allow]]\ncmd = \"bash\"\n",
    )
    .unwrap();
    let w = Warden::start(options(&root, None)).unwrap();
    let s = w.status();
    assert_eq!(s.ladder_name, "cut");
    assert!(
        s.integrity.contains("policy rendering on disk"),
        "{}",
        s.integrity
    );
    w.stop();
}

#[test]
fn a_changed_binary_is_caught_by_the_periodic_check() {
    let (root, _layout) = installed("tamper-binary");
    let mut o = options(&root, None);
    o.integrity_interval = Duration::from_millis(100);
    let w = Warden::start(o).unwrap();
    assert_eq!(w.status().ladder_name, "normal");
    std::fs::copy("/bin/false", root.join("bin/aromba")).unwrap();
    let s = wait_for_step(&w, 3);
    assert!(
        s.integrity.contains("the Worker's binary changed"),
        "{}",
        s.integrity
    );
    w.stop();
}

#[test]
fn a_changed_fence_list_or_state_record_is_caught_too() {
    let (root, layout) = installed("tamper-state");
    std::fs::write(layout.fences_file(), "/srv/data\n").unwrap();
    let w = Warden::start(options(&root, None)).unwrap();
    assert!(w.status().integrity.contains("fence list"));
    w.stop();
    let (root, layout) = installed("tamper-record");
    std::fs::write(layout.state_dir.join("pin.argon2"), "x").unwrap();
    let w = Warden::start(options(&root, None)).unwrap();
    assert!(w.status().integrity.contains("state records"));
    w.stop();
}

#[test]
fn a_damaged_ladder_file_is_taken_as_tampering() {
    let (root, layout) = installed("ladder-file");
    std::fs::write(layout.ladder_file(), "{}").unwrap();
    let w = Warden::start(options(&root, None)).unwrap();
    assert_eq!(w.status().ladder_name, "cut");
    w.stop();
    std::fs::remove_file(layout.ladder_file()).unwrap();
    let w = Warden::start(options(&root, None)).unwrap();
    assert_eq!(
        w.status().ladder_name,
        "cut",
        "a missing ladder file after install"
    );
    w.stop();
}

#[test]
fn the_control_socket_verifies_the_journal() {
    let root = root_for("verify");
    let w = Warden::start(options(&root, None)).unwrap();
    w.ask(&read("uptime", &[]));
    let Response::Verified { ok, report } = w.control(&Request::JournalVerify) else {
        panic!("no report")
    };
    assert!(ok, "{report}");
    w.stop();
}
