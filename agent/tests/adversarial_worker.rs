//! Attacks on `aromba pair` and `aromba run` as a hostile relay or a
//! hostile Worker would make them: a real Warden on real sockets, the
//! binaries as shipped, and a relay played by this test with the real
//! protocol (`aromba_proto::session`), saying what an attacker would.

mod support;

use aromba_proto::frame::{Accept, Body, Delivery, Hello, Nonce, PROTOCOL_VERSION, TapProof};
use aromba_proto::session::{Direction, Opener, Sealer, derive, now_ms};
use futures_util::{SinkExt, StreamExt};
use std::io::Write;
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{Running, TestWarden, account, aromba};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;

/// A well-formed minisign public key (`Ed`, a key id, 32 bytes): the
/// honest relay's.
const HONEST_KEY: &str = "RWQBAQEBAQEBAQABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhscHR4f";
/// Another one: the attacker's.
const HOSTILE_KEY: &str = "RWQHBwcHBwcHBwABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhscHR4f";

/// What the played relay answers.
#[derive(Clone, Default)]
struct Script {
    /// Answer a pairing request with this code and link, then deliver
    /// `Paired` with `key`; without a key, answer `AlreadyPaired`.
    code: String,
    link: String,
    key: Option<String>,
    /// Delivered to every connection right after the welcome.
    deliveries: Vec<Delivery>,
}

/// A relay played by the test on 127.0.0.1: `POST /v1/servers` answered
/// 201, the WebSocket speaking the real protocol. Every frame it opened is
/// kept in `seen`.
struct PlayedRelay {
    addr: SocketAddr,
    script: Arc<Mutex<Script>>,
    seen: Arc<Mutex<Vec<Body>>>,
}

impl PlayedRelay {
    async fn start(script: Script) -> PlayedRelay {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(Mutex::new(script));
        let (kept, playing) = (seen.clone(), script.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let script = playing.lock().unwrap_or_else(|p| p.into_inner()).clone();
                tokio::spawn(serve(stream, script, kept.clone()));
            }
        });
        PlayedRelay { addr, script, seen }
    }

    /// From the next connection on, the relay answers by `script`.
    fn turn(&self, script: Script) {
        *self.script.lock().unwrap_or_else(|p| p.into_inner()) = script;
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn seen(&self) -> Vec<Body> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Waits (up to a minute) until a frame `want` takes arrived.
    async fn wait_for(&self, what: &str, want: impl Fn(&Body) -> bool) -> Body {
        for _ in 0..600 {
            if let Some(b) = self.seen().into_iter().find(|b| want(b)) {
                return b;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the relay never saw {what}; it saw {:#?}", self.seen());
    }
}

async fn serve(mut stream: tokio::net::TcpStream, script: Script, seen: Arc<Mutex<Vec<Body>>>) {
    let mut head = [0u8; 4];
    if stream.peek(&mut head).await.is_err() {
        return;
    }
    if &head == b"POST" {
        // The registration: read the request whole, answer "new".
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            let Ok(n) = stream.read(&mut chunk).await else {
                return;
            };
            if n == 0 {
                return;
            }
            buf.extend_from_slice(&chunk[..n]);
            let text = String::from_utf8_lossy(&buf).to_string();
            if let Some(end) = text.find("\r\n\r\n") {
                let length = text[..end]
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse::<usize>().ok())
                            .flatten()
                    })
                    .unwrap_or(0);
                if buf.len() >= end + 4 + length {
                    break;
                }
            }
        }
        let body = r#"{"outcome":"registered"}"#;
        let answer = format!(
            "HTTP/1.1 201 Created\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = stream.write_all(answer.as_bytes()).await;
        let _ = stream.shutdown().await;
        return;
    }
    let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
        return;
    };
    let Some(Ok(Message::Text(text))) = ws.next().await else {
        return;
    };
    let Ok(hello) = serde_json::from_str::<Hello>(text.as_str()) else {
        return;
    };
    let nonce = Nonce::random();
    let up = derive(&hello.token, &hello.nonce, &nonce, Direction::ServerToRelay);
    let down = derive(&hello.token, &hello.nonce, &nonce, Direction::RelayToServer);
    let mut sealer = Sealer::new(down);
    let mut opener = Opener::new(up);
    let accept = Accept {
        v: PROTOCOL_VERSION,
        nonce,
        welcome: sealer.seal(&Body::Welcome { ping_secs: 30 }, now_ms()),
    };
    let Ok(accept) = serde_json::to_string(&accept) else {
        return;
    };
    if ws.send(Message::Text(accept.into())).await.is_err() {
        return;
    }
    let mut next_id = 1;
    for delivery in &script.deliveries {
        let frame = sealer.seal(
            &Body::Deliver {
                id: next_id,
                delivery: delivery.clone(),
            },
            now_ms(),
        );
        next_id += 1;
        if ws.send(Message::Text(frame.into())).await.is_err() {
            return;
        }
    }
    while let Some(Ok(message)) = ws.next().await {
        let Message::Text(text) = message else {
            continue;
        };
        let Ok(body) = opener.open(text.as_bytes(), now_ms()) else {
            return;
        };
        seen.lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(body.clone());
        let mut answers = Vec::new();
        match body {
            Body::PairingRequest {} => match &script.key {
                Some(key) => {
                    answers.push(Body::PairingCode {
                        code: script.code.clone(),
                        link: script.link.clone(),
                        expires_at: now_ms() + 15 * 60 * 1000,
                    });
                    answers.push(Body::Deliver {
                        id: next_id,
                        delivery: Delivery::Paired {
                            approval_key: key.clone(),
                        },
                    });
                    next_id += 1;
                }
                None => answers.push(Body::AlreadyPaired {}),
            },
            Body::Send { id, .. } => answers.push(Body::AckMessage { id }),
            _ => {}
        }
        for answer in answers {
            let frame = sealer.seal(&answer, now_ms());
            if ws.send(Message::Text(frame.into())).await.is_err() {
                return;
            }
        }
    }
}

/// A Warden (installed, with the Worker's home) for `name`.
fn warden(name: &str) -> TestWarden {
    let worker = account("aromba");
    let warden = TestWarden::start_with(name, worker, true, |_| {});
    std::fs::create_dir_all(warden.root.join("home")).expect("home");
    std::os::unix::fs::chown(warden.root.join("home"), Some(worker.uid), Some(worker.gid))
        .expect("chown home");
    warden
}

/// Runs `aromba pair` as root (with `--relay` when given) to its end, the
/// PIN on standard input; its exit status and what it printed.
async fn run_pair(warden: &TestWarden, relay: Option<&str>) -> (bool, Vec<u8>) {
    let root = warden.root.to_str().expect("a UTF-8 root");
    let mut args = vec![
        "pair",
        "--root",
        root,
        "--worker-user",
        "aromba",
        "--install-source",
        "test",
    ];
    if let Some(relay) = relay {
        args.extend(["--relay", relay]);
    }
    let mut child = Running(
        aromba(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("aromba pair starts"),
    );
    let _ = child
        .0
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"472913\n472913\n");
    let mut stdout = child.0.stdout.take().expect("stdout");
    let mut stderr = child.0.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || {
        let mut all = Vec::new();
        let _ = std::io::Read::read_to_end(&mut stdout, &mut all);
        let mut err = Vec::new();
        let _ = std::io::Read::read_to_end(&mut stderr, &mut err);
        all.extend_from_slice(&err);
        all
    });
    for _ in 0..900 {
        if let Some(status) = child.0.try_wait().expect("wait") {
            let printed = out.join().expect("the output");
            return (status.success(), printed);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("aromba pair did not end within 90 seconds");
}

fn pinned(warden: &TestWarden) -> Option<String> {
    std::fs::read_to_string(warden.layout().state_dir.join("relay-approvals.pub"))
        .ok()
        .map(|k| k.trim().to_string())
}

fn honest_script() -> Script {
    Script {
        code: "ABC346".into(),
        link: "https://t.me/aromba_test_bot?start=ABC346".into(),
        key: Some(HONEST_KEY.into()),
        deliveries: vec![],
    }
}

/// The server paired with `relay` by `aromba pair`.
async fn paired_with(warden: &TestWarden, relay: &PlayedRelay) {
    let (ok, printed) = run_pair(warden, Some(&relay.url())).await;
    assert!(
        ok,
        "aromba pair ends well: {}",
        String::from_utf8_lossy(&printed)
    );
    assert_eq!(pinned(warden).as_deref(), Some(HONEST_KEY));
}

/// Replaces the `relay = ...` line of the Worker's `relay.toml` as the
/// Worker can (the file is its own): written in place, so its owner and
/// mode stay.
fn worker_points_relay_toml_at(warden: &TestWarden, relay: &str) {
    let path = warden.root.join("worker/relay.toml");
    let text = std::fs::read_to_string(&path).expect("relay.toml");
    let rewritten: String = text
        .lines()
        .map(|l| {
            if l.starts_with("relay =") {
                format!("relay = \"{relay}\"\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    assert_ne!(text, rewritten, "relay.toml has a relay line");
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&path)
        .and_then(|mut f| f.write_all(rewritten.as_bytes()))
        .expect("the Worker writes its own relay.toml");
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(&path).expect("relay.toml");
    assert_eq!(meta.uid(), account("aromba").uid, "still the Worker's");
}

/// The Worker owns `relay.toml`, so it may write anything there; root's
/// `aromba pair`, run again on the paired server, must not take the relay
/// to talk to (and whose tap key to pin) from it: a relay of the Worker's
/// own on a loopback port would hand over a key whose taps the Worker
/// signs itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_pointing_relay_toml_at_its_own_relay_gets_no_key_pinned_by_pair() {
    let warden = warden("adv-repoint");
    let honest = PlayedRelay::start(honest_script()).await;
    paired_with(&warden, &honest).await;
    // Paired already when asked again, as the real relay says.
    honest.turn(Script {
        key: None,
        ..honest_script()
    });
    let hostile = PlayedRelay::start(Script {
        key: Some(HOSTILE_KEY.into()),
        ..honest_script()
    })
    .await;
    worker_points_relay_toml_at(&warden, &hostile.url());
    let (_, printed) = run_pair(&warden, None).await;
    assert_eq!(
        pinned(&warden).as_deref(),
        Some(HONEST_KEY),
        "the Warden still holds the honest relay's key; pair said: {}",
        String::from_utf8_lossy(&printed)
    );
    assert!(
        !hostile
            .seen()
            .iter()
            .any(|b| matches!(b, Body::PairingRequest {})),
        "root's pair never asked the Worker's relay for anything"
    );
    let network =
        std::fs::read_to_string(warden.root.join("worker/network.toml")).expect("network.toml");
    assert!(
        !network.contains(&hostile.addr.to_string()),
        "network.toml lists no relay of the Worker's choosing:\n{network}"
    );
}

/// A relay's pairing code and link go to root's terminal: one carrying
/// escape sequences (retitle the window, clear the screen, or worse) is
/// refused and nothing of it is printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pairing_code_with_terminal_escapes_never_reaches_roots_terminal() {
    let warden = warden("adv-escapes");
    let hostile = PlayedRelay::start(Script {
        code: "ABC\u{1b}[2J346".into(),
        link: "https://t.me/x?start=\u{1b}]0;owned\u{7}".into(),
        key: Some(HOSTILE_KEY.into()),
        deliveries: vec![],
    })
    .await;
    let (ok, printed) = run_pair(&warden, Some(&hostile.url())).await;
    assert!(!ok, "pair refuses such a code");
    assert!(
        !printed.contains(&0x1b) && !printed.contains(&0x07),
        "no escape byte printed: {:?}",
        String::from_utf8_lossy(&printed)
    );
    assert_eq!(pinned(&warden), None, "no key pinned from that relay");
}

/// One daemon at a time: the Warden watches every connection of the
/// aromba user, and another test's daemon dialing its own relay is, to
/// this test's Warden, a host its `network.toml` does not list.
static ONE_DAEMON: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Starts `aromba run` as the aromba user against `warden`.
fn daemon(warden: &TestWarden) -> Running {
    let root = warden.root.to_str().expect("a UTF-8 root");
    Running(
        aromba(&["run", "--root", root, "--user", "aromba"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("aromba run starts"),
    )
}

/// The texts the daemon sent the played relay.
fn sent_texts(relay: &PlayedRelay) -> Vec<String> {
    relay
        .seen()
        .into_iter()
        .filter_map(|b| match b {
            Body::Send { text, .. } => Some(text),
            _ => None,
        })
        .collect()
}

/// A relay (or whoever holds its connection) delivers `Paired` with a key
/// of its own to the running daemon: the key is pinned only by root's
/// `aromba pair`, so it never reaches the Warden.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paired_delivery_with_another_key_to_the_daemon_never_reaches_the_warden() {
    let _one = ONE_DAEMON.lock().await;
    let warden = warden("adv-paired");
    let honest = PlayedRelay::start(honest_script()).await;
    paired_with(&warden, &honest).await;
    let pins_before = warden.journal().matches("relay-key-pinned").count();
    // The same relay, turned: the daemon's connection gets a new key.
    honest.turn(Script {
        deliveries: vec![
            Delivery::Paired {
                approval_key: HOSTILE_KEY.into(),
            },
            Delivery::Message {
                text: "/trust".into(),
            },
        ],
        ..honest_script()
    });
    let turned = honest;
    let _daemon = daemon(&warden);
    turned
        .wait_for(
            "the answer to /trust",
            |b| matches!(b, Body::Send { text, .. } if text.starts_with("Ladder:")),
        )
        .await;
    assert!(
        sent_texts(&turned)
            .iter()
            .any(|t| t.starts_with("This chat is paired")),
        "the daemon took the Paired delivery as news only"
    );
    assert_eq!(pinned(&warden).as_deref(), Some(HONEST_KEY));
    assert_eq!(
        warden.journal().matches("relay-key-pinned").count(),
        pins_before,
        "no pinning of the other key was even tried"
    );
}

/// A tap the relay forged (a made-up action, a signature of nothing) is
/// passed to the Warden, which refuses it; the chat says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_tap_from_the_relay_is_refused_by_the_warden() {
    let _one = ONE_DAEMON.lock().await;
    let warden = warden("adv-tap");
    let honest = PlayedRelay::start(honest_script()).await;
    paired_with(&warden, &honest).await;
    honest.turn(Script {
        deliveries: vec![Delivery::Tap {
            message: uuid::Uuid::new_v4(),
            button: "run".into(),
            proof: TapProof {
                action: Some("0123456789abcdef0123456789abcdef".into()),
                label: "Run it".into(),
                chat: 5_550_001,
                time: (now_ms() / 1000) as u64,
                text_sha256: "0".repeat(64),
                signature: "untrusted comment: x\nRWQ=\ntrusted comment: x\nAAAA\n".into(),
            },
        }],
        ..honest_script()
    });
    let forged = honest;
    let _daemon = daemon(&warden);
    let reply = forged
        .wait_for(
            "the answer to the tap",
            // The first scan's message may come first.
            |b| matches!(b, Body::Send { text, .. } if !text.starts_with("I had a first look")),
        )
        .await;
    let Body::Send { text, .. } = reply else {
        unreachable!()
    };
    assert!(text.starts_with("The Warden refused"), "{text}");
}

/// The Warden counts every read toward "too many commands in ten minutes"
/// and climbs the ladder past its threshold. The Worker's own health
/// numbers and a person asking for them a few times must stay under it:
/// otherwise an ordinary chat (or the idle daemon, given a few minutes)
/// slows the Warden down, and each further window climbs another step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_asking_for_the_status_repeatedly_does_not_move_the_ladder() {
    let _one = ONE_DAEMON.lock().await;
    let warden = warden("adv-status-flood");
    let relay = PlayedRelay::start(honest_script()).await;
    paired_with(&warden, &relay).await;
    const ASKS: usize = 8;
    relay.turn(Script {
        deliveries: (0..ASKS)
            .map(|_| Delivery::Message {
                text: "/status".into(),
            })
            .collect(),
        ..honest_script()
    });
    let _daemon = daemon(&warden);
    for _ in 0..1200 {
        let answered = sent_texts(&relay)
            .iter()
            .filter(|t| t.starts_with("Server status:") || t.starts_with("I have asked"))
            .count();
        if answered >= ASKS {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let status = support::text(&warden.aromba_as("root", &["status"]).stdout);
    assert!(
        status.contains("ladder: normal "),
        "the chat's own questions moved the ladder:\n{status}\nthe chat saw: {:#?}",
        sent_texts(&relay)
    );
}
