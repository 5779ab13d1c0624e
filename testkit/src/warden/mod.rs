//! An installed, paired Warden serving the test's own uid (root) as its
//! Worker, with the owner's chores written into `mine/` and a clock the
//! test moves; and relay-signed taps made with the test key pair in
//! `keys/test/`.

pub mod anchor;
pub mod honeypots;
pub mod process;

use crate::serving::Serving;
use aromba_warden::approvals::{Approval, message, relay_key_file, text_sha256};
use aromba_warden::install::{InstallOptions, install};
use aromba_warden::ladder::{Clock, ManualClock};
use aromba_warden::layout::Layout;
use aromba_warden::server::ServeOptions;
use aromba_warden_proto::{
    MAX_RESPONSE, Request, Response, decode_response, encode_request, read_frame, write_frame,
};
use process::Host;
use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub const TEST_PUB: &str = include_str!("../../../keys/test/relay-approvals.pub");
pub const TEST_KEY: &str = include_str!("../../../keys/test/relay-approvals.key");

pub struct Warden {
    pub root: PathBuf,
    serving: Host,
    pub clock: Arc<ManualClock>,
    /// A directory the chores may write (outside /tmp, which the cage
    /// replaces).
    pub touched: PathBuf,
    /// The text the Warden gave with each action id it proposed: what the
    /// relay delivers with the buttons, and whose SHA-256 a tap signs.
    texts: Mutex<HashMap<String, String>>,
    /// The app's `start_param` of each action id proposed with one.
    apps: Mutex<HashMap<String, String>>,
    adjust: fn(&mut ServeOptions),
    journal_made_immutable: std::sync::atomic::AtomicBool,
}

/// How far a test Warden is paired.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pairing {
    None,
    /// Before the Mini App: the relay's key only.
    RelayOnly,
    /// As `aromba pair` pairs: the relay's key and the person's account.
    Bound,
}

impl Pairing {
    fn of(paired: bool) -> Pairing {
        if paired {
            Pairing::Bound
        } else {
            Pairing::None
        }
    }
}

impl Drop for Warden {
    fn drop(&mut self) {
        self.stop();
        if self
            .journal_made_immutable
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            let _ = assert_cmd::Command::new("chattr")
                .arg("-i")
                .arg(self.layout().journal_file())
                .output();
        }
        let _ = std::fs::remove_dir_all(&self.root);
        let _ = std::fs::remove_dir_all(&self.touched);
    }
}

/// A read of `cmd` with no arguments.
pub fn plain_read(cmd: &str) -> Request {
    Request::Read {
        cmd: cmd.into(),
        args: vec![],
    }
}

/// A read the deny list refuses (`rm -rf /`): one ladder signal.
pub fn deny_list_hit() -> Request {
    Request::Read {
        cmd: "rm".into(),
        args: vec!["-rf".into(), "/".into()],
    }
}

/// The owner's red chore `wipe`: it writes `TOUCHED/wiped` when it really
/// runs (approved in the Mini App on a bound server).
pub fn wipe_chore() -> (String, String) {
    owner_chore(
        "wipe",
        "red",
        "",
        "[ \"$1\" = --dry-run ] && exit 0\necho wiped > TOUCHED/wiped",
    )
}

/// A paired Warden named `name` with [`wipe_chore`], bound to the test
/// person's Telegram account (pinned as `aromba pair` pins it).
pub fn bound(name: &str) -> Warden {
    Warden::start(name, true, &[wipe_chore()])
}

/// The reason of a refusal (panics on any other answer).
pub fn refused(r: Response) -> String {
    match r {
        Response::Refused { reason, .. } => reason,
        other => panic!("not refused: {other:?}"),
    }
}

/// A paired Warden named `name` with `chores`, moved to Slow by one
/// deny-list hit.
pub fn slowed(name: &str, chores: &[(String, String)]) -> Warden {
    let w = Warden::start(name, true, chores);
    assert!(matches!(w.ask(&deny_list_hit()), Response::Refused { .. }));
    assert_eq!(w.ladder(), 1);
    w
}

pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A chore script of the owner's: `header` lines go between `name` and
/// `end`; `TOUCHED` in it is replaced by the touched directory.
pub fn owner_chore(name: &str, color: &str, extra_header: &str, body: &str) -> (String, String) {
    (
        name.to_string(),
        format!(
            "# aromba-chore: 1\n# name: {name}\n# description: A chore of the tests\n# color: {color}\n# touches: TOUCHED\n{extra_header}# network: no\n# schedule: manual\n# end\n{body}\n"
        ),
    )
}

/// An owner chore (green) whose dry run runs `body` and whose real run
/// does nothing: what a Worker may start at will.
pub fn dry_chore(name: &str, body: &str) -> (String, String) {
    owner_chore(
        name,
        "green",
        "",
        &format!("[ \"$1\" = --dry-run ] || exit 0\n{body}"),
    )
}

impl Warden {
    /// A dry run of `chore` asked for by the Worker: the receipt, its
    /// standard output, and whether it was clean.
    pub fn dry_run_receipt(&self, chore: &str) -> (String, String, bool) {
        match self.ask(&Request::DryRun {
            chore: chore.into(),
        }) {
            Response::Receipt {
                receipt,
                stdout,
                ok,
                ..
            } => (receipt, String::from_utf8_lossy(&stdout).into_owned(), ok),
            other => panic!("no receipt: {other:?}"),
        }
    }

    /// Runs `name` for real from a root terminal (its dry run shown
    /// first), returning the receipt, clean or not.
    pub fn red_run(&self, name: &str) -> String {
        self.dry_run_shown(name);
        match self.control(&Request::ChoreRun {
            name: name.into(),
            dry_run: false,
        }) {
            Response::Receipt { receipt, .. } => receipt,
            other => panic!("{name} did not run: {other:?}"),
        }
    }

    /// Waits (up to 5 s) for the ladder to reach `name`.
    pub fn reaches(&self, name: &str) -> aromba_warden_proto::Status {
        for _ in 0..250 {
            let st = self.status();
            if st.ladder_name == name {
                return st;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let st = self.status();
        panic!(
            "the ladder stayed at {} ({}), not {name}",
            st.ladder_name, st.ladder_reason
        );
    }

    /// `aromba resume` from a root terminal: back to normal.
    pub fn resume(&self) {
        assert!(matches!(
            self.control(&Request::Resume),
            Response::Ladder { .. }
        ));
        assert_eq!(self.status().ladder_name, "normal");
    }

    /// Installed and eight days old; paired when `paired`, as `aromba
    /// pair` pairs: the relay's test key pinned before install, and the
    /// test person's Telegram account once it serves.
    pub fn start(name: &str, paired: bool, chores: &[(String, String)]) -> Warden {
        Warden::start_with(name, paired, chores, |_| {})
    }

    /// As [`Warden::start`] paired before the Mini App: the relay's key
    /// pinned, no Telegram account.
    pub fn start_unbound(name: &str, chores: &[(String, String)]) -> Warden {
        let root = std::env::temp_dir().join(format!("aromba-{name}-{}", std::process::id()));
        Warden::start_between(root, name, Pairing::RelayOnly, chores, |_| {}, |_| {})
    }

    pub fn start_with(
        name: &str,
        paired: bool,
        chores: &[(String, String)],
        adjust: fn(&mut ServeOptions),
    ) -> Warden {
        let root = std::env::temp_dir().join(format!("aromba-{name}-{}", std::process::id()));
        Warden::start_at(root, name, Pairing::of(paired), chores, adjust)
    }

    /// As [`Warden::start`], with the Warden's directories under `root`
    /// (one outside `/tmp`, which a chore may declare as a read).
    pub fn start_rooted(root: PathBuf, name: &str, chores: &[(String, String)]) -> Warden {
        Warden::start_at(root, name, Pairing::None, chores, |_| {})
    }

    /// As [`Warden::start`], with `between` run once the Warden is bound
    /// and before it serves: what the Worker could do the moment the
    /// Warden's process started.
    pub fn start_then(name: &str, between: fn(&Layout)) -> Warden {
        let root = std::env::temp_dir().join(format!("aromba-{name}-{}", std::process::id()));
        Warden::start_between(root, name, Pairing::None, &[], |_| {}, between)
    }

    fn start_at(
        root: PathBuf,
        name: &str,
        pairing: Pairing,
        chores: &[(String, String)],
        adjust: fn(&mut ServeOptions),
    ) -> Warden {
        Warden::start_between(root, name, pairing, chores, adjust, |_| {})
    }

    fn start_between(
        root: PathBuf,
        name: &str,
        pairing: Pairing,
        chores: &[(String, String)],
        adjust: fn(&mut ServeOptions),
        between: fn(&Layout),
    ) -> Warden {
        let (layout, touched) = prepare_root(&root, name, pairing, chores);
        install_here(&root);
        let clock = ManualClock::new(now() + 8 * 86_400);
        let serving = Host::InProcess(serve(layout, clock.clone(), adjust, between));
        Warden::around(root, serving, clock, touched, adjust, pairing)
    }

    /// As [`Warden::start`], with the Warden a process of its own
    /// (`aromba-test-warden`, which installs itself, so its integrity
    /// baseline is its own binary), for the tests that kill it: see
    /// [`Warden::kill`] and [`Warden::restart`].
    pub fn start_process(name: &str, chores: &[(String, String)]) -> Warden {
        let root = std::env::temp_dir().join(format!("aromba-{name}-{}", std::process::id()));
        let (_, touched) = prepare_root(&root, name, Pairing::Bound, chores);
        let clock = ManualClock::new(now() + PROCESS_AHEAD);
        let serving = Host::process(&root, PROCESS_AHEAD);
        Warden::around(root, serving, clock, touched, |_| {}, Pairing::Bound)
    }

    /// A process Warden's clock runs with the system's, [`PROCESS_AHEAD`]
    /// ahead: the test's, which signs launches and taps, is brought up to
    /// it.
    pub fn keep_time(&self) {
        let target = now() + PROCESS_AHEAD;
        let at = self.clock.now();
        if target > at {
            self.clock.advance(target - at);
        }
    }

    /// Kills a process Warden with SIGKILL, as the out-of-memory killer or
    /// a power cut would stop it, whatever it was doing.
    pub fn kill(&mut self) {
        self.serving.kill();
    }

    fn around(
        root: PathBuf,
        serving: Host,
        clock: Arc<ManualClock>,
        touched: PathBuf,
        adjust: fn(&mut ServeOptions),
        pairing: Pairing,
    ) -> Warden {
        let w = Warden {
            root,
            serving,
            clock,
            touched,
            texts: Mutex::default(),
            apps: Mutex::default(),
            adjust,
            journal_made_immutable: Default::default(),
        };
        if pairing == Pairing::Bound {
            match w.pin_telegram_account(crate::telegram::PERSON) {
                Response::TelegramAccount { .. } => {}
                other => panic!("the test account was not pinned: {other:?}"),
            }
        }
        w
    }

    pub fn stop(&mut self) {
        self.serving.stop();
    }

    /// Stops this Warden and starts a new one on the same root, with the
    /// same options and clock: what survives is what the Warden keeps on
    /// disk. (A process Warden killed before is started again.)
    pub fn restart(&mut self) {
        self.stop();
        self.serving = match &self.serving {
            Host::InProcess(_) => Host::InProcess(serve(
                self.layout(),
                self.clock.clone(),
                self.adjust,
                |_| {},
            )),
            Host::Process(_) => Host::process(&self.root, PROCESS_AHEAD),
        };
    }

    /// Stops this Warden, rewrites its confirmed damage caps with `edit`
    /// as a Warden of another version would have written them (the
    /// baseline re-taken with them, as that Warden did), and starts it
    /// again.
    pub fn rewrite_confirmed_caps(&mut self, edit: impl FnOnce(&mut serde_json::Value)) {
        self.stop();
        let layout = self.layout();
        let record = aromba_warden::state::read(&layout, "confirmed-caps")
            .unwrap()
            .expect("the confirmed caps");
        let mut all: serde_json::Value = serde_json::from_slice(&record).unwrap();
        edit(&mut all);
        let mut baseline = aromba_warden::integrity::Baseline::read(&layout).unwrap();
        assert!(baseline.is_some(), "installed: a baseline to keep");
        aromba_warden::state::change(
            &layout,
            &mut baseline,
            "confirmed-caps",
            Some(&serde_json::to_vec(&all).unwrap()),
        )
        .unwrap();
        self.restart();
    }

    pub fn layout(&self) -> Layout {
        Layout::rooted(&self.root)
    }

    fn on(&self, socket: PathBuf, r: &Request) -> Response {
        let mut s = UnixStream::connect(socket).unwrap();
        write_frame(&mut s, &encode_request(r), 1 << 16).unwrap();
        decode_response(&read_frame(&mut s, MAX_RESPONSE).unwrap()).unwrap()
    }

    /// On the Worker socket.
    pub fn ask(&self, r: &Request) -> Response {
        self.on(self.layout().worker_socket(), r)
    }

    /// `frame`'s bytes as they are, on the Worker socket: for a request
    /// no `Request` can encode.
    pub fn ask_raw(&self, frame: &[u8]) -> Response {
        let mut s = UnixStream::connect(self.layout().worker_socket()).unwrap();
        write_frame(&mut s, frame, 1 << 16).unwrap();
        decode_response(&read_frame(&mut s, MAX_RESPONSE).unwrap()).unwrap()
    }

    /// On the Worker socket, in the background's lane (the Worker's own
    /// work: health, the schedule).
    pub fn ask_in_background(&self, r: &Request) -> Response {
        let mut s = UnixStream::connect(self.layout().worker_socket()).unwrap();
        let frame =
            aromba_warden_proto::encode_request_in(r, aromba_warden_proto::Lane::Background);
        write_frame(&mut s, &frame, 1 << 16).unwrap();
        decode_response(&read_frame(&mut s, MAX_RESPONSE).unwrap()).unwrap()
    }

    /// On the control socket (a root terminal).
    pub fn control(&self, r: &Request) -> Response {
        self.on(self.layout().control_socket(), r)
    }

    /// From the root terminal: sets `pin`, then turns prod mode on.
    pub fn set_pin_and_prod_mode_on(&self, pin: &str) {
        assert!(matches!(
            self.control(&Request::SetPin { pin: pin.into() }),
            Response::Noted { .. }
        ));
        assert!(matches!(
            self.control(&Request::ProdMode {
                on: true,
                pin: None
            }),
            Response::Noted { .. }
        ));
    }

    pub fn status(&self) -> aromba_warden_proto::Status {
        match self.control(&Request::Status) {
            Response::Status(st) => st,
            other => panic!("{other:?}"),
        }
    }

    pub fn ladder(&self) -> u64 {
        self.status().ladder_step
    }

    pub fn journal(&self) -> String {
        std::fs::read_to_string(self.layout().journal_file()).unwrap_or_default()
    }

    /// Dry run of `chore`, shown to the user (as the Worker says).
    pub fn dry_run_shown(&self, chore: &str) {
        let r = self.ask(&Request::DryRun {
            chore: chore.into(),
        });
        assert!(matches!(r, Response::Receipt { ok: true, .. }), "{r:?}");
        let r = self.ask(&Request::DryRunShown {
            chore: chore.into(),
        });
        assert!(matches!(r, Response::Noted { .. }), "{r:?}");
    }

    /// Proposes `r`; the action id, the server id and whether it needs
    /// the PIN (its app's `start_param` names a key to seal it for). The
    /// text the Warden gave is kept for [`Warden::tap`].
    pub fn propose(&self, r: &Request) -> (String, String, bool) {
        match self.ask(r) {
            Response::Proposed {
                action_id,
                server_id,
                text,
                app,
                ..
            } => {
                let needs_pin = app
                    .as_deref()
                    .and_then(aromba_warden::telegram::parse_action_param)
                    .is_some_and(|p| p.seal_key.is_some());
                self.texts.lock().unwrap().insert(action_id.clone(), text);
                if let Some(app) = app {
                    self.apps.lock().unwrap().insert(action_id.clone(), app);
                }
                (action_id, server_id, needs_pin)
            }
            other => panic!("not proposed: {other:?}"),
        }
    }

    /// Makes the journal refuse every write from now on, as a full or
    /// failing disk would: the file is made immutable (`chattr +i`), so
    /// appends through the descriptor the Warden holds fail with EPERM.
    pub fn make_journal_unwritable(&self) {
        let journal = self.layout().journal_file();
        let out = assert_cmd::Command::new("chattr")
            .arg("+i")
            .arg(&journal)
            .output()
            .expect("chattr runs");
        assert!(
            out.status.success(),
            "chattr +i {} (root, on a filesystem with attributes): {}",
            journal.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        self.journal_made_immutable
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// A tap signed with `key` at `time`, shown with the Warden's own text
    /// for `action_id` (none for an id it did not propose).
    pub fn signed(
        &self,
        server_id: &str,
        action_id: &str,
        button: &str,
        time: u64,
        key: &str,
    ) -> Request {
        let text = self
            .texts
            .lock()
            .unwrap()
            .get(action_id)
            .cloned()
            .unwrap_or_default();
        signed_over(&text, server_id, action_id, button, time, key)
    }

    /// Pins the test person's Telegram account, as `aromba pair` does from
    /// the launch of the pairing's app: the Warden's answer.
    pub fn pin_telegram_account(&self, user: i64) -> Response {
        let param = "pair_ABC234";
        self.control(&Request::PinTelegramAccount {
            launch: crate::telegram::launch_of(user, Some(param), self.clock.now()),
            bot_id: crate::telegram::BOT_ID,
            start_param: param.into(),
        })
    }

    /// The person `user` opens the app from the button of the proposal
    /// whose `start_param` is `param`, now, and approves: the request the
    /// Worker passes on.
    pub fn in_app(&self, user: i64, param: &str) -> Request {
        Request::ApproveInApp {
            launch: crate::telegram::launch_of(user, Some(param), self.clock.now()),
            sealed_pin: None,
        }
    }

    /// As [`Self::in_app`], with `pin` typed in the page and sealed for
    /// the key the `start_param` names.
    pub fn in_app_with_pin(&self, user: i64, param: &str, pin: &str) -> Request {
        Request::ApproveInApp {
            launch: crate::telegram::launch_of(user, Some(param), self.clock.now()),
            sealed_pin: Some(crate::telegram::seal_pin(param, pin)),
        }
    }

    /// Proposes `r` on a server paired with a Telegram account: the action
    /// id and the `start_param` of its app (panics when it has none).
    pub fn propose_in_app(&self, r: &Request) -> (String, String) {
        match self.proposal(r) {
            (action_id, _, Some(param)) => (action_id, param),
            (_, _, None) => panic!("proposed without an app button"),
        }
    }

    /// `wipe`'s dry run shown, then its run proposed on a bound server: the
    /// action id, the server id and the app's `start_param`.
    pub fn proposed_wipe(&self) -> (String, String, String) {
        self.dry_run_shown("wipe");
        let (action, server, app) = self.proposal(&Request::Propose {
            chore: "wipe".into(),
        });
        (
            action,
            server,
            app.expect("a red run is approved in the app"),
        )
    }

    /// Proposes `r`: the action id, the server id and the app's
    /// `start_param`, if it has one. The text is kept for [`Warden::tap`].
    pub fn proposal(&self, r: &Request) -> (String, String, Option<String>) {
        match self.ask(r) {
            Response::Proposed {
                action_id,
                server_id,
                text,
                app,
                ..
            } => {
                self.texts.lock().unwrap().insert(action_id.clone(), text);
                if let Some(app) = &app {
                    self.apps
                        .lock()
                        .unwrap()
                        .insert(action_id.clone(), app.clone());
                }
                (action_id, server_id, app)
            }
            other => panic!("not proposed: {other:?}"),
        }
    }

    /// The text the Warden gave with `action_id` when it proposed it.
    pub fn text_of(&self, action_id: &str) -> String {
        self.texts
            .lock()
            .unwrap()
            .get(action_id)
            .cloned()
            .expect("an action id this test proposed")
    }

    /// The person's tap on `button` for `action_id`, as it reaches the
    /// Warden: Approve on an action of the app's route in the app (the
    /// launch Telegram signs, `pin` typed in the page and sealed), any other
    /// tap shown with the Warden's own text and signed now with the relay's
    /// test key (`pin` with it).
    pub fn tap(
        &self,
        server_id: &str,
        action_id: &str,
        button: &str,
        pin: Option<&str>,
    ) -> Request {
        let app = self.apps.lock().unwrap().get(action_id).cloned();
        match (app, button, pin) {
            (Some(param), "approve", Some(pin)) => {
                self.in_app_with_pin(crate::telegram::PERSON, &param, pin)
            }
            (Some(param), "approve", None) => self.in_app(crate::telegram::PERSON, &param),
            (_, _, None) => self.relay_tap(server_id, action_id, button),
            (_, _, Some(_)) => {
                panic!("a relay tap carries no PIN: {action_id} was not proposed in the app")
            }
        }
    }

    /// A tap on `button` for `action_id` through the relay, shown with the
    /// Warden's own text for it, signed now with the relay's test key,
    /// whatever the action's route.
    pub fn relay_tap(&self, server_id: &str, action_id: &str, button: &str) -> Request {
        signed_over(
            &self.text_of(action_id),
            server_id,
            action_id,
            button,
            self.clock.now(),
            TEST_KEY,
        )
    }
}

/// How far ahead of the system a process Warden's clock is: eight days,
/// past the first week.
pub const PROCESS_AHEAD: u64 = 8 * 86_400;

/// A Warden's root made as `install` finds it: its state directory, the
/// relay's key when paired, the owner's chores in `mine/` (`TOUCHED` in
/// them the test's writable directory, returned), a Worker binary.
fn prepare_root(
    root: &Path,
    name: &str,
    pairing: Pairing,
    chores: &[(String, String)],
) -> (Layout, PathBuf) {
    let _ = std::fs::remove_dir_all(root);
    let touched = PathBuf::from(format!("/var/tmp/aromba-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&touched);
    std::fs::create_dir_all(&touched).unwrap();
    let layout = Layout::rooted(root);
    std::fs::create_dir_all(&layout.state_dir).unwrap();
    if pairing != Pairing::None {
        std::fs::write(relay_key_file(&layout), TEST_PUB).unwrap();
    }
    let mine = layout.config_dir.join("mine");
    std::fs::create_dir_all(&mine).unwrap();
    std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o755)).unwrap();
    for (name, script) in chores {
        let path = mine.join(format!("{name}.sh"));
        std::fs::write(&path, script.replace("TOUCHED", &touched.to_string_lossy())).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    std::fs::create_dir_all(root.join("bin")).unwrap();
    std::fs::copy("/bin/true", root.join("bin/aromba")).unwrap();
    (layout, touched)
}

/// Installs the Warden rooted at `root` (prepared as `prepare_root`
/// prepares it) as this process: its binary, the one running, is the
/// baseline's.
pub fn install_here(root: &Path) {
    install(&InstallOptions {
        layout: &Layout::rooted(root),
        warden_bin: Path::new("/proc/self/exe"),
        worker_bin: &root.join("bin/aromba"),
        worker_gid: 0,
        clock: Arc::new(aromba_warden::ladder::SystemClock),
        telegram_key: Some(
            aromba_warden::init_data::TelegramKey::from_hex(crate::telegram::test_pub()).unwrap(),
        ),
    })
    .unwrap();
}

/// The options of every test Warden on `layout`, with `clock`.
pub fn test_options(layout: Layout, clock: Arc<dyn Clock>) -> ServeOptions {
    let mut o = crate::serving::options(layout, 0, 0);
    o.watch_network = false;
    o.clock = clock;
    // Root stands in for the Worker on the socket; the path check judges
    // reads as from an account that owns nothing here, as the real Worker
    // owns nothing on the paths the tests read.
    o.worker_account = Some(aromba_warden::users::WorkerAccount {
        uid: 4_242_000,
        gids: vec![4_242_000],
    });
    o
}

fn serve(
    layout: Layout,
    clock: Arc<ManualClock>,
    adjust: fn(&mut ServeOptions),
    between: fn(&Layout),
) -> Serving {
    let mut o = test_options(layout.clone(), clock);
    adjust(&mut o);
    Serving::start(o, || between(&layout))
}

/// A tap as the relay signs it: over the SHA-256 of `text`, the message
/// text it delivered with the button.
pub fn signed_over(
    text: &str,
    server_id: &str,
    action_id: &str,
    button: &str,
    time: u64,
    key: &str,
) -> Request {
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
    // "Was that you?" has buttons of its own.
    let kind = if text.starts_with("Was that you?") {
        "step-down"
    } else {
        ""
    };
    let label = aromba_warden::approvals::label_of(kind, button).unwrap_or(button);
    let signed = message(server_id, &text_sha256(text), kind, &a).unwrap_or_else(|| {
        // A button the Warden never offered: sign what a relay would.
        format!(
            "aromba-approval-v2\nserver={server_id}\naction={action_id}\ntext_sha256={}\nbutton={button}\nlabel={label}\nchat={}\ntime={time}\n",
            text_sha256(text),
            a.chat
        )
        .into_bytes()
    });
    a.signature = minisign::sign(None, &sk, std::io::Cursor::new(signed), None, None)
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

/// How many lines of `journal` hold `what`.
pub fn lines_with(journal: &str, what: &str) -> usize {
    journal.lines().filter(|l| l.contains(what)).count()
}

pub use crate::serving::TEST_KEEP_FREE;
