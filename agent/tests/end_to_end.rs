//! The whole product on one machine: a real relay (on a fresh database)
//! with the fake Bot API standing in for Telegram, a real Warden on real
//! sockets, `aromba pair` as root and `aromba run` as the aromba user —
//! the binaries as shipped. The person is played through the fake.

#[path = "../../relay/tests/support/mod.rs"]
mod relay_support;
mod support;

use relay_support::bot::{Bot, start_bot};
use sqlx::PgPool;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Stdio};
use std::time::Duration;
use support::{TestWarden, account};

const CHAT: i64 = 5_550_001;

/// A child process, killed when the test ends however it ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn aromba(args: &[&str]) -> std::process::Command {
    use assert_cmd::cargo::CommandCargoExt;
    let mut cmd = std::process::Command::cargo_bin("aromba").expect("the aromba binary");
    cmd.args(args);
    cmd
}

/// `aromba pair` against `bot`'s relay, the PIN on standard input; returns
/// the child and the pairing code it printed.
async fn start_pairing(warden: &TestWarden, bot: &Bot) -> (Running, String) {
    let relay = format!("http://{}", bot.relay.addr);
    let root = warden.root.to_str().expect("a UTF-8 root");
    let mut child = aromba(&[
        "pair",
        "--root",
        root,
        "--relay",
        &relay,
        "--worker-user",
        "aromba",
        "--install-source",
        "test",
    ])
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
        .write_all(b"472913\n472913\n")
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

async fn wait_exit(child: &mut Running) -> std::process::ExitStatus {
    for _ in 0..600 {
        if let Some(status) = child.0.try_wait().expect("wait") {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the process did not end within a minute");
}

/// The first message to the chat after `after` messages whose text
/// satisfies `want`, within a minute.
async fn reply(bot: &Bot, after: usize, want: impl Fn(&str) -> bool) -> String {
    for _ in 0..600 {
        let sent = bot.fake.sent_to(CHAT);
        if let Some(m) = sent.iter().skip(after).find(|m| want(&m.text)) {
            return m.text.clone();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let all: Vec<String> = bot.fake.sent_to(CHAT).into_iter().map(|m| m.text).collect();
    panic!("no such reply; the chat has: {all:#?}");
}

#[sqlx::test(migrations = false)]
async fn pairs_then_answers_the_chat_from_the_warden(db: PgPool) {
    let bot = start_bot(db, false).await;
    let worker = account("aromba");
    let warden = TestWarden::start_with("e2e-pair", worker, true, |_| {});
    std::fs::create_dir_all(warden.root.join("home")).expect("home");
    std::os::unix::fs::chown(warden.root.join("home"), Some(worker.uid), Some(worker.gid))
        .expect("chown home");

    let (mut pairing, code) = start_pairing(&warden, &bot).await;
    assert_eq!(code.len(), 6, "a six-character code: {code:?}");
    bot.fake.user_message(CHAT, &format!("/start {code}"));
    let status = wait_exit(&mut pairing).await;
    assert!(status.success(), "aromba pair ends well: {status}");
    let st = warden.aromba_as("root", &["status"]);
    assert!(support::text(&st.stdout).contains("pin: set"));
    assert!(
        warden
            .layout()
            .state_dir
            .join("relay-approvals.pub")
            .exists()
    );
    // The relay's files: the token's is the Worker's, 0600.
    use std::os::unix::fs::MetadataExt;
    let relay_toml = std::fs::metadata(warden.root.join("worker/relay.toml")).expect("relay.toml");
    assert_eq!(
        (relay_toml.uid(), relay_toml.mode() & 0o777),
        (worker.uid, 0o600)
    );
    let network = std::fs::metadata(warden.root.join("worker/network.toml")).expect("network.toml");
    assert_eq!((network.uid(), network.mode() & 0o777), (0, 0o644));
    // The chat's menu was set for this chat.
    let menu = bot
        .fake
        .state()
        .commands
        .get(&format!("chat:{CHAT}"))
        .cloned();
    let menu = menu.expect("setMyCommands for the chat");
    assert!(menu.iter().any(|(c, _)| c == "disk"));

    let root = warden.root.to_str().expect("a UTF-8 root");
    let _daemon = Running(
        aromba(&["run", "--root", root, "--user", "aromba"])
            .stdin(Stdio::null())
            .spawn()
            .expect("aromba run starts"),
    );

    let before = bot.fake.sent_to(CHAT).len();
    bot.fake.user_message(CHAT, "/trust");
    let trust = reply(&bot, before, |t| t.starts_with("Ladder:")).await;
    assert!(trust.contains("Ladder: normal"), "{trust}");
    assert!(trust.contains("Journal: line"), "{trust}");

    let before = bot.fake.sent_to(CHAT).len();
    bot.fake.user_message(CHAT, "/panic");
    let panicked = reply(&bot, before, |t| t.starts_with("Ladder:")).await;
    assert!(panicked.contains("cut"), "{panicked}");
    warden.wait_for_ladder("cut");
}
