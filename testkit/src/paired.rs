//! A server paired end to end, for the tests that play the person: a real
//! relay (on a fresh database) with the fake Bot API standing in for
//! Telegram, a real Warden on real sockets, `aromba pair` as root and
//! `aromba run` as the aromba user — the binaries as shipped, found next
//! to the test that runs (the Worker's tests, which cargo builds them for).
//!
//! With what the chat shows of the assistant: [`MARKER`], [`said`],
//! [`watch_until`], and the ladder's step as `aromba status` says it.

use crate::relay::bot::{Bot, start_bot};
use crate::worker::{self as support, Running, TestWarden, account, aromba};
use aromba_botfake::state::Sent;
use sqlx::PgPool;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The person's private chat with the bot.
pub const CHAT: i64 = 5_550_001;

/// The Warden's clock for the tests that move time ("a minute later"
/// without the minute), starting now: the relay signs taps with the real
/// time, and the Warden takes a tap within ten minutes of its clock.
pub static TEST_CLOCK: std::sync::LazyLock<std::sync::Arc<aromba_warden::ladder::ManualClock>> =
    std::sync::LazyLock::new(|| {
        aromba_warden::ladder::ManualClock::new(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("a clock after 1970")
                .as_secs(),
        )
    });

/// As [`paired`], the Warden serving on [`TEST_CLOCK`].
pub async fn paired_on_the_test_clock(db: PgPool, name: &str) -> Paired {
    paired_with(
        db,
        name,
        Setup {
            adjust: |o| o.clock = TEST_CLOCK.clone(),
            ..Setup::default()
        },
        |_| {},
    )
    .await
}

/// One Worker at a time: every Warden watches all connections of the
/// aromba user, so another test's daemon dialing its own relay would be an
/// unlisted host to this test's Warden.
static ONE_DAEMON: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// For a test outside a runtime that starts a watching Warden of its own
/// in a file with paired tests: no daemon runs meanwhile.
pub fn alone() -> (tokio::sync::MutexGuard<'static, ()>, support::MachineLock) {
    let one = ONE_DAEMON.blocking_lock();
    (one, support::one_daemon_on_this_machine_blocking())
}

/// How the server is set up before pairing.
pub struct Setup {
    /// The Warden counts itself installed this many days ago.
    pub days_ago: u64,
    /// The PIN `aromba pair` sets.
    pub pin: &'static str,
    /// Where the daemon's standard error goes, at `AROMBA_LOG=trace`
    /// (removed with the pairing); inherited when `None`.
    pub daemon_log: Option<PathBuf>,
    /// The release folder `aromba pair --releases` records.
    pub releases: Option<String>,
    /// More of the daemon's environment.
    pub daemon_env: Vec<(&'static str, String)>,
    /// The Warden's options, changed before it starts.
    pub adjust: fn(&mut aromba_warden::server::ServeOptions),
}

impl Default for Setup {
    fn default() -> Setup {
        Setup {
            days_ago: 0,
            pin: "472913",
            daemon_log: None,
            releases: None,
            daemon_env: Vec::new(),
            adjust: |_| {},
        }
    }
}

/// A relay with a bot, a Warden, the server paired with [`CHAT`] by
/// `aromba pair`, and `aromba run` connected.
pub struct Paired {
    // Dropped in this order: the daemon first, the lock last.
    pub daemon: Running,
    pub daemon_log: DaemonLog,
    pub warden: TestWarden,
    pub bot: Bot,
    pub one: tokio::sync::MutexGuard<'static, ()>,
    pub machine: support::MachineLock,
}

/// The daemon's log file, removed when the test ends.
pub struct DaemonLog(pub Option<PathBuf>);

impl Drop for DaemonLog {
    fn drop(&mut self) {
        if let Some(log) = &self.0 {
            let _ = std::fs::remove_file(log);
        }
    }
}

/// The label of the pairing's confirmation button (the relay's words).
pub const CONFIRM: &str = "Confirm it is you (opens the app)";

/// The person confirms in the app from the pairing's button, as `aromba
/// pair` waits for: the page's view, then its confirmation.
pub async fn confirm_in_app(bot: &Bot) {
    let message = crate::relay::bot::eventually("the pairing's confirmation button", || {
        bot.fake
            .sent_to(CHAT)
            .into_iter()
            .find(|m| m.buttons.iter().flatten().any(|(l, _)| l == CONFIRM))
    })
    .await;
    let launch = bot.open_app(CHAT, &message, CONFIRM);
    let view = bot.ask_app(&launch, "view").await;
    assert_eq!(view.status, 200, "{view:?}");
    let confirmed = bot.ask_app(&launch, "approve").await;
    assert_eq!(confirmed.status, 200, "{confirmed:?}");
    assert!(confirmed.text().starts_with("Done ✓"), "{confirmed:?}");
}

/// `aromba pair` against `bot`'s relay, the PIN on standard input; returns
/// the child and the pairing code it printed.
pub async fn start_pairing(warden: &TestWarden, bot: &Bot, pin: &str) -> (Running, String) {
    start_pairing_with(warden, bot, pin, &[]).await
}

/// As [`start_pairing`], with more arguments for `aromba pair`.
pub async fn start_pairing_with(
    warden: &TestWarden,
    bot: &Bot,
    pin: &str,
    more: &[&str],
) -> (Running, String) {
    let relay = format!("http://{}", bot.relay.addr);
    let root = warden.root.to_str().expect("a UTF-8 root");
    let mut args = vec![
        "pair",
        "--root",
        root,
        "--relay",
        &relay,
        "--worker-user",
        "aromba",
        "--install-source",
        "test",
    ];
    args.extend_from_slice(more);
    let mut child = aromba(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map(Running)
        .expect("aromba pair starts");
    child
        .0
        .stdin
        .take()
        .expect("stdin")
        .write_all(format!("{pin}\n{pin}\n").as_bytes())
        .expect("the PIN is written");
    let stdout = child.0.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(rest) = line.trim().strip_prefix("Or send the bot: /start ") {
                let code = rest.split_whitespace().next().unwrap_or("").to_string();
                let _ = tx.send(code);
            }
        }
    });
    // The relay runs on this test's runtime: wait without blocking it.
    for _ in 0..600 {
        if let Ok(code) = rx.try_recv() {
            return (child, code);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("aromba pair printed no code within a minute");
}

pub async fn wait_exit(child: &mut Running) -> std::process::ExitStatus {
    for _ in 0..600 {
        if let Some(status) = child.0.try_wait().expect("wait") {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the process did not end within a minute");
}

/// `aromba run` on the test's root; its log appended to `log` at the
/// finest level, when given.
pub fn start_daemon(warden: &TestWarden, log: Option<&Path>) -> Running {
    start_daemon_with(warden, log, &[])
}

/// As [`start_daemon`], with more of its environment.
pub fn start_daemon_with(
    warden: &TestWarden,
    log: Option<&Path>,
    env: &[(&str, String)],
) -> Running {
    let root = warden.root.to_str().expect("a UTF-8 root");
    let mut cmd = aromba(&["run", "--root", root, "--user", "aromba"]);
    cmd.stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    if let Some(log) = log {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .expect("the log file");
        cmd.env("AROMBA_LOG", "trace").stderr(file);
    }
    Running(cmd.spawn().expect("aromba run starts"))
}

pub async fn paired(db: PgPool, name: &str) -> Paired {
    paired_with(db, name, Setup::default(), |_| {}).await
}

/// As [`paired`], set up as `setup` says, and `before` done to the Warden
/// before the daemon starts.
pub async fn paired_with(
    db: PgPool,
    name: &str,
    setup: Setup,
    before: impl FnOnce(&TestWarden),
) -> Paired {
    let one = ONE_DAEMON.lock().await;
    let machine = support::one_daemon_on_this_machine().await;
    let bot = start_bot(db, false).await;
    let worker = account("aromba");
    let warden = TestWarden::start_installed(name, worker, Some(setup.days_ago), setup.adjust);
    before(&warden);
    std::fs::create_dir_all(warden.root.join("home")).expect("home");
    std::os::unix::fs::chown(warden.root.join("home"), Some(worker.uid), Some(worker.gid))
        .expect("chown home");
    let more: Vec<&str> = match &setup.releases {
        Some(url) => vec!["--releases", url],
        None => vec![],
    };
    let (mut pairing, code) = start_pairing_with(&warden, &bot, setup.pin, &more).await;
    assert_eq!(code.len(), 6, "a six-character code: {code:?}");
    bot.fake.user_message(CHAT, &format!("/start {code}"));
    confirm_in_app(&bot).await;
    let status = wait_exit(&mut pairing).await;
    assert!(status.success(), "aromba pair ends well: {status}");
    if let Some(log) = &setup.daemon_log {
        let _ = std::fs::remove_file(log);
    }
    let daemon = start_daemon_with(&warden, setup.daemon_log.as_deref(), &setup.daemon_env);
    Paired {
        daemon,
        daemon_log: DaemonLog(setup.daemon_log),
        warden,
        bot,
        one,
        machine,
    }
}

/// Writes `script` as the owner's chore `name` in the Warden's `mine/`.
pub fn write_mine(w: &TestWarden, name: &str, script: &str) {
    use std::os::unix::fs::PermissionsExt;
    let mine = w.layout().config_dir.join("mine");
    std::fs::create_dir_all(&mine).expect("mine/");
    std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o755)).expect("0755");
    let path = mine.join(format!("{name}.sh"));
    std::fs::write(&path, script).expect("the chore");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("0644");
}

/// A yellow chore `count` that appends a line to `runs` in `dir` each time
/// it really runs (the taps' tests count its runs): approved with a tap the
/// relay signs.
pub fn counting_chore(dir: &Path) -> String {
    counting_chore_of(dir, "yellow")
}

/// [`counting_chore`] of `color` (a red one is approved in the Mini App).
pub fn counting_chore_of(dir: &Path, color: &str) -> String {
    format!(
        "#!/bin/sh\n# aromba-chore: 1\n# name: count\n# description: Counts its runs\n# color: {color}\n# touches: {d}\n# network: no\n# schedule: manual\n# end\nif [ \"$1\" = --dry-run ]; then echo would add a line; exit 0; fi\necho run >> {d}/runs\n",
        d = dir.display()
    )
}

/// Paired eight days after install (yellow and red chores may run), with
/// [`counting_chore`] in `dir`, its dry run seen; the folder's path.
pub async fn with_counting_chore_in(db: PgPool, name: &str, dir: PathBuf) -> (Paired, PathBuf) {
    with_colored_counting_chore_in(db, name, dir, "yellow").await
}

/// [`with_counting_chore`], the chore red: its run is approved in the app.
pub async fn with_red_counting_chore(db: PgPool, name: &str) -> (Paired, PathBuf) {
    let dir = PathBuf::from(format!("/var/tmp/aromba-{name}-{}", std::process::id()));
    with_colored_counting_chore_in(db, name, dir, "red").await
}

async fn with_colored_counting_chore_in(
    db: PgPool,
    name: &str,
    dir: PathBuf,
    color: &str,
) -> (Paired, PathBuf) {
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the chore's folder");
    let script = counting_chore_of(&dir, color);
    let p = paired_with(
        db,
        name,
        Setup {
            days_ago: 8,
            ..Setup::default()
        },
        |w| write_mine(w, "count", &script),
    )
    .await;
    p.ask("/run count", |t| t.starts_with("Before count runs"))
        .await;
    (p, dir)
}

/// [`with_counting_chore_in`] a folder of the test's own.
pub async fn with_counting_chore(db: PgPool, name: &str) -> (Paired, PathBuf) {
    let dir = PathBuf::from(format!("/var/tmp/aromba-{name}-{}", std::process::id()));
    with_counting_chore_in(db, name, dir).await
}

/// Paired eight days after install, with the owner's red chore `wipe`,
/// which removes `notes.txt` ("mine") from a folder of the test's own: the
/// stack and the folder (its dry run not yet shown).
pub async fn with_red_wipe(db: PgPool, name: &str) -> (Paired, PathBuf) {
    let dir = PathBuf::from(format!("/var/tmp/aromba-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the chore's folder");
    std::fs::write(dir.join("notes.txt"), "mine\n").expect("a file");
    let script = format!(
        "#!/bin/sh\n# aromba-chore: 1\n# name: wipe\n# description: Empties a folder\n# color: red\n# touches: {d}\n# network: no\n# schedule: manual\n# end\nif [ \"$1\" = --dry-run ]; then echo would remove notes.txt; exit 0; fi\nrm -f {d}/notes.txt\n",
        d = dir.display()
    );
    let p = paired_with(
        db,
        name,
        Setup {
            days_ago: 8,
            ..Setup::default()
        },
        |w| write_mine(w, "wipe", &script),
    )
    .await;
    (p, dir)
}

/// How many times [`counting_chore`] really ran in `dir`.
pub fn runs(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("runs"))
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

/// The callback data of the button labelled `label` on `message`.
pub fn button_data(message: &Sent, label: &str) -> String {
    message
        .buttons
        .iter()
        .flatten()
        .find(|(l, _)| l == label)
        .map(|(_, d)| d.clone())
        .unwrap_or_else(|| panic!("no {label} button on {message:?}"))
}

/// The line every message of the assistant's opens with (the Worker's
/// `assistant::voice::MARKER`, then a line feed).
pub const MARKER: &str = "🤖 Assistant (AI, may be wrong):\n";

/// A message's text after the assistant's marker (all of it when it has
/// none: a message of the Worker's own).
/// The Trust page's section headings, in order, on a server with one run
/// of `chore` still undoable (the policy comes in an answer of its own).
pub fn trust_page_headings(chore: &str) -> Vec<String> {
    use aromba_words::trust::page as w;
    [
        w::ISOLATION.to_string(),
        w::LADDER.into(),
        w::INTEGRITY.into(),
        w::JOURNAL.into(),
        w::PROD_MODE.into(),
        w::CHORES.into(),
        w::undo_heading(Some(chore)),
        w::NETWORK.into(),
        w::SKILLS.into(),
        w::UPDATES.into(),
        w::ASSISTANT.into(),
        w::APPROVALS.into(),
    ]
    .to_vec()
}

pub fn said(t: &str) -> &str {
    t.strip_prefix(MARKER).unwrap_or(t)
}

/// Watches the chat from `after` until a message `done` takes shows (or
/// `limit` passes); every text seen on the way, edits included.
pub async fn watch_until(
    p: &Paired,
    after: usize,
    limit: Duration,
    done: impl Fn(&str) -> bool,
) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    let end = Instant::now() + limit;
    while Instant::now() < end {
        let mut finished = false;
        for m in p.bot.fake.sent_to(CHAT).into_iter().skip(after) {
            finished |= done(&m.text);
            if !seen.contains(&m.text) {
                seen.push(m.text);
            }
        }
        if finished {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    seen
}

/// The ladder's line of `aromba status` ("ladder: normal …").
pub fn ladder(p: &Paired) -> String {
    let status = support::text(&p.warden.aromba_as("root", &["status"]).stdout);
    status
        .lines()
        .find(|l| l.starts_with("ladder:"))
        .unwrap_or("ladder: ?")
        .to_string()
}

/// The person sends `text` and the test waits for the Worker to be done
/// with it: the assistant's answer (its footer), or any of the Worker's
/// own replies about a PIN.
pub async fn settle(p: &Paired, text: &str) -> String {
    let before = p.bot.fake.sent_to(CHAT).len();
    p.bot.fake.user_message(CHAT, text);
    let m = p
        .next(before, |t| {
            t.contains("tokens in")
                || t.contains("from the assistant")
                || t.contains("looked like a PIN")
                || t.contains("could not answer")
        })
        .await;
    m.text
}

impl Paired {
    /// Waits (up to a minute) until the ladder has left Normal; what
    /// `aromba status` then says.
    pub async fn ladder_moves(&self) -> String {
        let mut last = String::new();
        for _ in 0..600 {
            last = support::text(&self.warden.aromba_as("root", &["status"]).stdout);
            if !last.contains("ladder: normal") {
                return last;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the ladder never moved:\n{last}");
    }

    /// Asserts the ladder is at Normal.
    pub fn ladder_is_normal(&self) {
        let status = support::text(&self.warden.aromba_as("root", &["status"]).stdout);
        assert!(status.contains("ladder: normal"), "{status}");
    }

    /// Waits (up to ten seconds) for the bot to delete a message from the
    /// chat (a secret's), then checks it deleted exactly one.
    pub async fn deleted_once(&self) {
        for _ in 0..100 {
            if !self.bot.fake.state().deleted_by_bot.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(
            self.bot.fake.state().deleted_by_bot.len(),
            1,
            "the PIN's message is deleted from the chat"
        );
    }

    /// The person taps the button labelled `label` on `message`, once the
    /// relay has recorded its buttons. A button that opens the app (the
    /// Warden's label, said to open it) is approved there: the app opened,
    /// the proposal viewed, Approve tapped.
    pub async fn tap(&self, message: &Sent, label: &str) {
        if let Some(reply) = self.approve_in_app(message, label).await {
            assert_eq!(reply.status, 200, "the app's approval: {reply:?}");
            return;
        }
        self.bot.wait_recorded(message).await;
        let data = button_data(message, label);
        self.bot
            .fake
            .tap(CHAT, message.message_id, &data)
            .expect("the message is in the chat");
    }

    /// When `message` has a button labelled `label` that opens the app: the
    /// person opens it, views the proposal and taps Approve there; the
    /// page's last answer.
    pub async fn approve_in_app(
        &self,
        message: &Sent,
        label: &str,
    ) -> Option<crate::relay::bot::AppReply> {
        self.approve_in_app_with(message, label, None).await
    }

    /// As [`Self::approve_in_app`], with `pin` typed in the page (sealed
    /// for the Warden) when given.
    pub async fn approve_in_app_with(
        &self,
        message: &Sent,
        label: &str,
        pin: Option<&str>,
    ) -> Option<crate::relay::bot::AppReply> {
        let in_app = aromba_words::approvals::in_app(label);
        let has = |l: &str| {
            message
                .buttons
                .iter()
                .flatten()
                .any(|(b, d)| b == l && aromba_botfake::is_link(d))
        };
        let label = [label, in_app.as_str()].into_iter().find(|l| has(l))?;
        let launch = self.bot.open_app(CHAT, message, label);
        let view = self.bot.ask_app(&launch, "view").await;
        if view.status != 200 || view.body.get("kind").and_then(|k| k.as_str()) != Some("proposal")
        {
            return Some(view);
        }
        Some(match pin {
            Some(pin) => self.bot.approve_app_with_pin(&launch, pin).await,
            None => self.bot.ask_app(&launch, "approve").await,
        })
    }

    /// The person taps the button labelled `label` as `message` showed it,
    /// whatever the message shows now (a second tap on a keyboard already
    /// taken off); the notice the tap was answered with, within ten
    /// seconds.
    pub async fn tap_again(&self, message: &Sent, label: &str) -> Option<String> {
        let data = button_data(message, label);
        let query = self
            .bot
            .fake
            .tap(CHAT, message.message_id, &data)
            .expect("the message is in the chat");
        for _ in 0..100 {
            if let Some(answer) = self.bot.fake.answer_of(&query) {
                return answer;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the tap on {label} was never answered");
    }

    /// The message `message` as the chat shows it now (edited in place).
    pub fn now(&self, message: &Sent) -> Sent {
        self.bot
            .fake
            .sent_to(CHAT)
            .into_iter()
            .find(|m| m.message_id == message.message_id)
            .expect("the message is in the chat")
    }

    /// Waits (up to a minute) until `message` shows a text `want` takes.
    pub async fn shows(&self, message: &Sent, want: impl Fn(&str) -> bool) -> Sent {
        for _ in 0..600 {
            let now = self.now(message);
            if want(&now.text) {
                return now;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!(
            "the message never showed it; it shows {:?}",
            self.now(message).text
        );
    }

    /// The first message after the first `after` whose text `want` takes,
    /// within a minute.
    pub async fn next(&self, after: usize, want: impl Fn(&str) -> bool) -> Sent {
        for _ in 0..600 {
            let sent = self.bot.fake.sent_to(CHAT);
            if let Some(m) = sent.iter().skip(after).find(|m| want(&m.text)) {
                return m.clone();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let all = self.chat_texts();
        let status = support::text(&self.warden.aromba_as("root", &["status"]).stdout);
        panic!("no such message; the chat has: {all:#?}\nthe Warden: {status}");
    }

    /// The texts of the chat's messages so far, oldest first.
    pub fn chat_texts(&self) -> Vec<String> {
        self.bot
            .fake
            .sent_to(CHAT)
            .into_iter()
            .map(|m| m.text)
            .collect()
    }

    /// The person sends `text`; the first reply after it that `want` takes.
    pub async fn ask(&self, text: &str, want: impl Fn(&str) -> bool) -> Sent {
        let before = self.bot.fake.sent_to(CHAT).len();
        self.bot.fake.user_message(CHAT, text);
        self.next(before, want).await
    }
}
