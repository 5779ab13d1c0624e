//! A real Warden on real sockets in a temporary root, and the `aromba`
//! binary run under real uids (`runuser`). These tests need root, as the
//! Warden does; they fail, never skip, without it.

use crate::serving::Serving;
use aromba_warden::layout::Layout;
use aromba_warden::server::ServeOptions;
use aromba_warden::users::{Account, lookup};
use assert_cmd::Command;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

static USERS: Mutex<()> = Mutex::new(());

/// Held while a test's Worker daemon runs: one on this machine at a time,
/// across test processes too. Every Warden watches all connections of the
/// aromba user, so another process's daemon dialing its own relay would be
/// an unlisted host to this test's Warden and move its ladder.
pub struct MachineLock {
    _held: nix::fcntl::Flock<std::fs::File>,
}

impl std::fmt::Debug for MachineLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MachineLock")
    }
}

fn try_machine_lock() -> Option<MachineLock> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open("/tmp/aromba-test-daemon.lock")
        .expect("the lock file");
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock)
        .ok()
        .map(|held| MachineLock { _held: held })
}

/// Waits for [`MachineLock`].
pub async fn one_daemon_on_this_machine() -> MachineLock {
    loop {
        match try_machine_lock() {
            Some(lock) => return lock,
            None => tokio::time::sleep(std::time::Duration::from_millis(200)).await,
        }
    }
}

/// Waits for [`MachineLock`], outside a runtime.
pub fn one_daemon_on_this_machine_blocking() -> MachineLock {
    loop {
        match try_machine_lock() {
            Some(lock) => return lock,
            None => std::thread::sleep(std::time::Duration::from_millis(200)),
        }
    }
}

/// The `aromba` binary where any user can run it: the checkout (CI's among
/// them) may sit in a directory other users cannot enter.
pub fn aromba_bin() -> &'static Path {
    static COPY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    COPY.get_or_init(|| {
        use std::os::unix::fs::PermissionsExt;
        remove_stale_copies();
        let dir = PathBuf::from(format!("/var/tmp/aromba-test-bin-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let copy = dir.join("aromba");
        std::fs::copy(assert_cmd::cargo::cargo_bin("aromba"), &copy).unwrap();
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
        copy
    })
}

/// Removes the copies earlier test processes left (a static is never
/// dropped): those whose process is gone.
fn remove_stale_copies() {
    let Ok(entries) = std::fs::read_dir("/var/tmp") else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("aromba-test-bin-"))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// The account `name`, created (system, no home, no shell) when missing.
pub fn account(name: &str) -> Account {
    let _guard = USERS.lock().unwrap_or_else(|p| p.into_inner());
    let passwd = Path::new("/etc/passwd");
    if let Some(a) = lookup(passwd, name).expect("read /etc/passwd") {
        return a;
    }
    let out = Command::new("useradd")
        .args([
            "--system",
            "--no-create-home",
            "--shell",
            "/usr/sbin/nologin",
            name,
        ])
        .output()
        .expect("useradd runs (the tests need root)");
    assert!(
        out.status.success(),
        "useradd {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    lookup(passwd, name)
        .expect("read /etc/passwd")
        .expect("the account exists now")
}

pub struct TestWarden {
    pub root: PathBuf,
    serving: Serving,
}

impl TestWarden {
    /// A Warden whose Worker socket serves `worker`.
    pub fn start(name: &str, worker: Account, max_running: usize) -> TestWarden {
        TestWarden::start_with(name, worker, false, |o| o.max_running = max_running)
    }

    /// A Warden installed first (`install`: policy, honeypots, ladder,
    /// baseline) when `installed`, with options adjusted by `adjust`.
    pub fn start_with(
        name: &str,
        worker: Account,
        installed: bool,
        adjust: impl FnOnce(&mut ServeOptions),
    ) -> TestWarden {
        TestWarden::start_installed(name, worker, installed.then_some(0), adjust)
    }

    /// As [`TestWarden::start_with`], installed `days_ago` days before now
    /// when given (on day 8 yellow and red chores may run) and serving on
    /// the real clock, as the relay's signatures need.
    pub fn start_installed(
        name: &str,
        worker: Account,
        days_ago: Option<u64>,
        adjust: impl FnOnce(&mut ServeOptions),
    ) -> TestWarden {
        let installed = days_ago.is_some();
        let root = std::env::temp_dir().join(format!("aromba-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        // The Worker must be able to reach its socket: the root directory
        // is traversable.
        std::fs::set_permissions(&root, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        if installed {
            let layout = Layout::rooted(&root);
            std::fs::create_dir_all(root.join("bin")).unwrap();
            let worker_bin = root.join("bin/aromba");
            std::fs::copy(aromba_bin(), &worker_bin).unwrap();
            aromba_warden::install::install(&aromba_warden::install::InstallOptions {
                layout: &layout,
                warden_bin: Path::new("/proc/self/exe"),
                worker_bin: &worker_bin,
                worker_gid: worker.gid,
                clock: {
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .unwrap()
                        .as_secs();
                    aromba_warden::ladder::ManualClock::new(now - days_ago.unwrap_or(0) * 86_400)
                },
                telegram_key: Some(
                    aromba_warden::init_data::TelegramKey::from_hex(crate::telegram::test_pub())
                        .unwrap(),
                ),
            })
            .expect("install");
        }
        let serving = serve(&root, worker, adjust);
        TestWarden { root, serving }
    }

    pub fn layout(&self) -> Layout {
        Layout::rooted(&self.root)
    }

    /// `r` on the Warden's control socket, as a root terminal asks it.
    pub fn control(&self, r: &aromba_warden_proto::Request) -> aromba_warden_proto::Response {
        use aromba_warden_proto::{
            MAX_RESPONSE, decode_response, encode_request, read_frame, write_frame,
        };
        let mut s = std::os::unix::net::UnixStream::connect(self.layout().control_socket())
            .expect("the control socket");
        write_frame(&mut s, &encode_request(r), 1 << 16).expect("sent");
        decode_response(&read_frame(&mut s, MAX_RESPONSE).expect("an answer")).expect("decoded")
    }

    /// The skills installed: each name and version.
    pub fn skills_installed(&self) -> Vec<(String, String)> {
        match self.control(&aromba_warden_proto::Request::Skills) {
            aromba_warden_proto::Response::Skills { skills, .. } => {
                skills.into_iter().map(|s| (s.name, s.version)).collect()
            }
            other => panic!("{other:?}"),
        }
    }

    /// Installs the skill bundle `bytes` from a root terminal, as `aromba
    /// skill install` does (shown, then installed with no PIN).
    pub fn install_skill(&self, bytes: &[u8]) {
        use aromba_warden_proto::{Request, Response};
        let path = self.root.join("install.skill");
        std::fs::write(&path, bytes).expect("the bundle");
        let path = path.to_string_lossy().into_owned();
        let Response::SkillShown { sha256, .. } =
            self.control(&Request::SkillCheck { path: path.clone() })
        else {
            panic!("not shown");
        };
        let r = self.control(&Request::SkillInstall {
            path,
            sha256,
            pin: None,
        });
        assert!(matches!(r, Response::Noted { .. }), "{r:?}");
    }

    /// `aromba status` as root, until its ladder line says `name`.
    pub fn wait_for_ladder(&self, name: &str) -> String {
        let want = format!("ladder: {name} ");
        let mut last = String::new();
        for _ in 0..100 {
            let out = self.aromba_as("root", &["status"]);
            last = text(&out.stdout);
            if last.contains(&want) {
                return last;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("the ladder never reached {name}:\n{last}");
    }

    pub fn journal(&self) -> String {
        std::fs::read_to_string(self.layout().journal_file()).unwrap_or_default()
    }

    /// `aromba ARGS…` as `user`, against this Warden.
    pub fn aromba_as(&self, user: &str, args: &[&str]) -> std::process::Output {
        self.aromba_as_with_stdin(user, args, "")
    }

    /// As [`TestWarden::aromba_as`], with `stdin` on standard input.
    pub fn aromba_as_with_stdin(
        &self,
        user: &str,
        args: &[&str],
        stdin: &str,
    ) -> std::process::Output {
        let mut cmd = Command::new("runuser");
        cmd.write_stdin(stdin.to_string());
        cmd.args(["-u", user, "--"]).arg(aromba_bin());
        // `--root DIR` goes before a `--`, or at the end.
        let split = args.iter().position(|a| *a == "--").unwrap_or(args.len());
        cmd.args(&args[..split])
            .arg("--root")
            .arg(&self.root)
            .args(&args[split..]);
        cmd.output().expect("runuser runs")
    }

    /// `aromba ask -- CMD ARGS…` as the aromba user.
    pub fn ask(&self, command: &[&str]) -> std::process::Output {
        let mut args = vec!["ask", "--"];
        args.extend_from_slice(command);
        self.aromba_as("aromba", &args)
    }
}

/// A Warden on `root` whose Worker is `worker`, serving until stopped.
fn serve(root: &Path, worker: Account, adjust: impl FnOnce(&mut ServeOptions)) -> Serving {
    let mut options = crate::serving::options(Layout::rooted(root), worker.uid, worker.gid);
    options.watch_interval = std::time::Duration::from_millis(100);
    adjust(&mut options);
    Serving::start(options, || {})
}

impl TestWarden {
    /// Stops this Warden (its root stays), as stopping the service does.
    pub fn stop(&mut self) {
        self.serving.stop();
    }

    /// Starts another Warden on the root of one [`TestWarden::stop`]ped:
    /// what survives is what is on disk.
    pub fn serve_again(&mut self, worker: Account, adjust: impl FnOnce(&mut ServeOptions)) {
        self.stop();
        self.serving = serve(&self.root, worker, adjust);
    }
}

impl Drop for TestWarden {
    fn drop(&mut self) {
        self.serving.stop();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A child process, killed when the test ends however it ends.
pub struct Running(pub std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The `aromba` binary as a long-running child would start (as root:
/// `aromba run --user aromba` drops to the Worker's account itself).
pub fn aromba(args: &[&str]) -> std::process::Command {
    use assert_cmd::cargo::CommandCargoExt;
    let mut cmd = std::process::Command::cargo_bin("aromba").expect("the aromba binary");
    cmd.args(args);
    cmd
}
