//! Approvals the Warden verifies itself: a relay-signed tap (the test key
//! pair in keys/test/), over an action id the Warden issued, fresh, used
//! once. Everything else is refused and is a ladder signal.

use aromba_warden::approvals::{Approval, message, relay_key_file};
use aromba_warden::install::{InstallOptions, install};
use aromba_warden::ladder::{Clock, ManualClock};
use aromba_warden::layout::Layout;
use aromba_warden::server::{ServeOptions, Server, ShutdownHandle};
use aromba_warden_proto::{
    MAX_RESPONSE, Request, Response, decode_response, encode_request, read_frame, write_frame,
};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const TEST_PUB: &str = include_str!("../../keys/test/relay-approvals.pub");
const TEST_KEY: &str = include_str!("../../keys/test/relay-approvals.key");

struct Warden {
    root: PathBuf,
    handle: ShutdownHandle,
    thread: Option<std::thread::JoinHandle<()>>,
    clock: Arc<ManualClock>,
    touched: PathBuf,
}

impl Drop for Warden {
    fn drop(&mut self) {
        self.handle.shutdown();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_dir_all(&self.root);
        let _ = std::fs::remove_dir_all(&self.touched);
    }
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// An installed, paired Warden, eight days old, with a yellow chore of the
/// owner's that writes one file.
fn warden(name: &str, paired: bool) -> Warden {
    let root = std::env::temp_dir().join(format!("aromba-approvals-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let touched = PathBuf::from(format!(
        "/var/tmp/aromba-approvals-{name}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&touched).unwrap();
    let layout = Layout::rooted(&root);
    std::fs::create_dir_all(&layout.state_dir).unwrap();
    if paired {
        std::fs::write(relay_key_file(&layout), TEST_PUB).unwrap();
    }
    let mine = layout.config_dir.join("mine");
    std::fs::create_dir_all(&mine).unwrap();
    std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        mine.join("hello.sh"),
        format!(
            "# aromba-chore: 1\n# name: hello\n# description: Write hello\n# color: yellow\n# touches: {t}\n# network: no\n# schedule: manual\n# end\n[ \"$1\" = --dry-run ] && {{ echo would-write; exit 0; }}\necho hello > {t}/hello\n",
            t = touched.display()
        ),
    )
    .unwrap();
    std::fs::create_dir_all(root.join("bin")).unwrap();
    std::fs::copy("/bin/true", root.join("bin/aromba")).unwrap();
    install(&InstallOptions {
        layout: &layout,
        warden_bin: Path::new("/proc/self/exe"),
        worker_bin: &root.join("bin/aromba"),
        worker_gid: 0,
        clock: Arc::new(aromba_warden::ladder::SystemClock),
    })
    .unwrap();
    let clock = ManualClock::new(now() + 8 * 86_400);
    let mut o = ServeOptions::new(layout, 0, 0);
    o.watch_network = false;
    o.clock = clock.clone();
    let server = Server::bind(o).unwrap();
    let handle = server.shutdown_handle();
    let thread = Some(std::thread::spawn(move || server.run()));
    Warden {
        root,
        handle,
        thread,
        clock,
        touched,
    }
}

impl Warden {
    fn ask(&self, r: &Request) -> Response {
        let mut s = UnixStream::connect(Layout::rooted(&self.root).worker_socket()).unwrap();
        write_frame(&mut s, &encode_request(r), 1 << 16).unwrap();
        decode_response(&read_frame(&mut s, MAX_RESPONSE).unwrap()).unwrap()
    }

    fn ladder(&self) -> u64 {
        let mut s = UnixStream::connect(Layout::rooted(&self.root).control_socket()).unwrap();
        write_frame(&mut s, &encode_request(&Request::Status), 1 << 16).unwrap();
        match decode_response(&read_frame(&mut s, MAX_RESPONSE).unwrap()).unwrap() {
            Response::Status(st) => st.ladder_step,
            other => panic!("{other:?}"),
        }
    }

    /// Dry run, shown, proposed: an action id and the server id to sign.
    fn proposed(&self) -> (String, String) {
        assert!(matches!(
            self.ask(&Request::DryRun {
                chore: "hello".into()
            }),
            Response::Receipt { ok: true, .. }
        ));
        assert!(matches!(
            self.ask(&Request::DryRunShown {
                chore: "hello".into()
            }),
            Response::Noted { .. }
        ));
        match self.ask(&Request::Propose {
            chore: "hello".into(),
        }) {
            Response::Proposed {
                action_id,
                server_id,
            } => (action_id, server_id),
            other => panic!("not proposed: {other:?}"),
        }
    }
}

fn signed(server_id: &str, action_id: &str, button: &str, time: u64, key: &str) -> Request {
    let mut a = Approval {
        action_id: action_id.into(),
        button: button.into(),
        chat: "4242".into(),
        time,
        signature: String::new(),
    };
    let sk = minisign::SecretKeyBox::from_string(key)
        .unwrap()
        .into_unencrypted_secret_key()
        .unwrap();
    a.signature = minisign::sign(
        None,
        &sk,
        std::io::Cursor::new(message(server_id, &a)),
        None,
        None,
    )
    .unwrap()
    .into_string();
    Request::Approve {
        action_id: a.action_id,
        button: a.button,
        chat: a.chat,
        time: a.time,
        signature: a.signature,
    }
}

#[test]
fn a_verified_fresh_tap_runs_the_chore_once() {
    let w = warden("ok", true);
    let (action, server) = w.proposed();
    let tap = signed(&server, &action, "approve", w.clock.now(), TEST_KEY);
    let Response::Receipt { ok, receipt, .. } = w.ask(&tap) else {
        panic!("did not run")
    };
    assert!(ok, "{receipt}");
    assert!(w.touched.join("hello").exists());
    assert_eq!(w.ladder(), 0);
    // The same tap again: spent.
    let Response::Refused { reason, .. } = w.ask(&tap) else {
        panic!("ran twice")
    };
    assert!(reason.contains("used already"), "{reason}");
    assert_eq!(w.ladder(), 1, "a replayed approval is a ladder signal");
}

#[test]
fn a_tap_signed_by_another_key_is_refused() {
    let w = warden("forged", true);
    let (action, server) = w.proposed();
    let other = minisign::KeyPair::generate_unencrypted_keypair().unwrap();
    let other_key = other.sk.to_box(None).unwrap().into_string();
    let Response::Refused { reason, .. } = w.ask(&signed(
        &server,
        &action,
        "approve",
        w.clock.now(),
        &other_key,
    )) else {
        panic!("a forged tap ran")
    };
    assert!(reason.contains("does not verify"), "{reason}");
    assert!(!w.touched.join("hello").exists());
    assert_eq!(w.ladder(), 1);
}

#[test]
fn a_stale_tap_is_refused() {
    let w = warden("stale", true);
    let (action, server) = w.proposed();
    let old = w.clock.now() - 601;
    let Response::Refused { reason, .. } =
        w.ask(&signed(&server, &action, "approve", old, TEST_KEY))
    else {
        panic!("a stale tap ran")
    };
    assert!(reason.contains("not fresh"), "{reason}");
}

#[test]
fn an_action_id_the_warden_did_not_issue_is_refused() {
    let w = warden("unissued", true);
    let (_, server) = w.proposed();
    let made_up = "0123456789abcdef0123456789abcdef";
    let Response::Refused { reason, .. } = w.ask(&signed(
        &server,
        made_up,
        "approve",
        w.clock.now(),
        TEST_KEY,
    )) else {
        panic!("an unissued action ran")
    };
    assert!(reason.contains("not issued"), "{reason}");
    // Signed for another server: the signature does not cover this one.
    let (action, _) = w.proposed();
    let Response::Refused { .. } = w.ask(&signed(
        "another-server",
        &action,
        "approve",
        w.clock.now(),
        TEST_KEY,
    )) else {
        panic!("a tap for another server ran")
    };
}

#[test]
fn a_declining_tap_runs_nothing() {
    let w = warden("decline", true);
    let (action, server) = w.proposed();
    let Response::Refused { reason, .. } =
        w.ask(&signed(&server, &action, "cancel", w.clock.now(), TEST_KEY))
    else {
        panic!("ran on cancel")
    };
    assert!(reason.contains("cancel"), "{reason}");
    assert!(!w.touched.join("hello").exists());
    assert_eq!(w.ladder(), 0, "declining is not suspicious");
}

#[test]
fn without_a_pinned_relay_key_nothing_can_be_approved() {
    let w = warden("unpaired", false);
    let (action, server) = w.proposed();
    let Response::Refused { reason, .. } = w.ask(&signed(
        &server,
        &action,
        "approve",
        w.clock.now(),
        TEST_KEY,
    )) else {
        panic!("ran unpaired")
    };
    assert!(reason.contains("not paired"), "{reason}");
}
