//! The chat page in a real browser: Debian's Chromium, driven through
//! chromedriver (WebDriver), plays the person against the whole product —
//! a real relay with the fake Bot API and its chat page, a real Warden,
//! `aromba pair` and `aromba run` as shipped. It types `/status` and reads
//! this machine's numbers, uses the command menu from the keyboard, runs a
//! red chore's dry run, taps Approve (the proposal then says what became
//! of it, its buttons gone), reads the receipt, taps Undo, and answers the
//! PIN prompt; a screenshot of the conversation is kept under
//! `target/tmp/browser/`. Without Chromium the test fails: the test
//! command installs it.

use aromba_testkit::paired;
use aromba_testkit::worker as support;

use aromba_botfake::page::Person;
use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use paired::{CHAT, Paired, Setup, paired, paired_with, write_mine};
use serde_json::json;
use sqlx::PgPool;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The PIN `aromba pair` sets in these tests (`Setup::default`).
const PIN: &str = "472913";

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// chromedriver, started as a daemon of its own (the tests spawn no long
/// process but the binaries under test) and stopped when dropped.
struct Driver {
    dir: PathBuf,
    port: u16,
}

impl Driver {
    async fn start() -> Driver {
        for (path, package) in [(CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")] {
            assert!(
                Path::new(path).exists(),
                "{path} is missing: install Debian's {package} (scripts/test does)"
            );
        }
        // One folder (and pid file) per driver: the tests of this file run
        // side by side in one process.
        static DRIVERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = DRIVERS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("aromba-browser-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("the driver's folder");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let out = assert_cmd::Command::new("start-stop-daemon")
            .args(["--start", "--background", "--make-pidfile", "--pidfile"])
            .arg(dir.join("pid"))
            .arg("--output")
            .arg(dir.join("chromedriver.log"))
            .args(["--exec", CHROMEDRIVER, "--"])
            .arg(format!("--port={port}"))
            .output()
            .expect("start-stop-daemon runs");
        assert!(
            out.status.success(),
            "chromedriver did not start: {}",
            support::text(&out.stderr)
        );
        let driver = Driver { dir, port };
        let http = reqwest::Client::new();
        for _ in 0..100 {
            let ready = http
                .get(format!("http://127.0.0.1:{port}/status"))
                .send()
                .await;
            if ready.is_ok_and(|r| r.status().is_success()) {
                return driver;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("chromedriver does not answer on port {port}");
    }

    /// A headless Chromium at phone width, on a fresh profile, with
    /// nothing of its own going to the network.
    async fn browser(&self) -> Client {
        let profile = self.dir.join("profile");
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": CHROMIUM,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--window-size=420,900",
                    format!("--user-data-dir={}", profile.display()),
                ],
            }),
        );
        ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{}", self.port))
            .await
            .expect("a browser session")
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(self.dir.join("pid"))
            && let Ok(pid) = pid.trim().parse::<i32>()
        {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The bot's messages on the page now.
async fn bot_messages(c: &Client) -> Vec<Element> {
    c.find_all(Locator::Css("article.msg.bot"))
        .await
        .expect("the page's messages")
}

/// A message's text. The page re-renders a message that is edited (its
/// text node replaced), so a read that meets the old node is tried again.
async fn text_of(message: &Element) -> String {
    for _ in 0..50 {
        if let Some(text) = try_text_of(message).await {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the message's text could not be read");
}

/// A message's text, or `None` while the page is replacing it.
async fn try_text_of(message: &Element) -> Option<String> {
    message
        .find(Locator::Css(".text"))
        .await
        .ok()?
        .text()
        .await
        .ok()
}

/// The first bot message after the first `after` whose text `want` takes,
/// within a minute.
async fn message(c: &Client, after: usize, want: impl Fn(&str) -> bool) -> Element {
    let mut seen = Vec::new();
    for _ in 0..300 {
        seen.clear();
        for m in bot_messages(c).await.into_iter().skip(after) {
            // Being re-rendered (an edit): read again on the next round.
            let Some(text) = try_text_of(&m).await else {
                continue;
            };
            if want(&text) {
                return m;
            }
            seen.push(text);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("no such message on the page; after {after} it shows: {seen:#?}");
}

/// Types `text` in the message field and sends it with Enter.
async fn type_and_send(c: &Client, text: &str) -> usize {
    let before = bot_messages(c).await.len();
    let field = c
        .find(Locator::Id("text"))
        .await
        .expect("the message field");
    field.send_keys(text).await.expect("typed");
    field
        .send_keys(&fantoccini::key::Key::Enter.to_string())
        .await
        .expect("Enter");
    before
}

/// Taps the button labelled `label` on `message`.
async fn tap(c: &Client, message: &Element, label: &str) -> usize {
    let before = bot_messages(c).await.len();
    message
        .find(Locator::XPath(&format!(
            ".//div[@class='keyboard']//button[normalize-space(.)='{label}']"
        )))
        .await
        .unwrap_or_else(|_| panic!("no {label} button on the message"))
        .click()
        .await
        .expect("tapped");
    before
}

/// Into the app's panel's frame (the relay's page).
async fn enter_app(c: &Client) {
    c.find(Locator::Id("app-frame"))
        .await
        .expect("the app's frame")
        .enter_frame()
        .await
        .expect("into the app");
}

/// Taps the button labelled `label` on `message` that opens the Mini App
/// (`<label> (opens the app)`), and in the app's panel — the relay's page,
/// its launch signed in Telegram's place — reads the proposal's text and
/// taps Approve (after typing `pin` in the page's masked field, when the
/// action needs it), then closes the app as a person would. The number of
/// the bot's messages before.
async fn approve_in_app(
    c: &Client,
    message: &Element,
    label: &str,
    pin: Option<&str>,
    shot: Option<&str>,
) -> usize {
    let proposal = text_of(message).await;
    let before = tap(c, message, &format!("{label} (opens the app)")).await;
    let mut shown = false;
    for _ in 0..100 {
        let panel = c.find(Locator::Id("app-panel")).await.expect("the panel");
        if panel.attr("hidden").await.expect("hidden").is_none() {
            shown = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(shown, "the app's panel opened");
    enter_app(c).await;
    let mut text = String::new();
    for _ in 0..100 {
        if let Ok(t) = c.find(Locator::Id("text")).await
            && t.is_displayed().await.unwrap_or(false)
        {
            text = t.text().await.unwrap_or_default();
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !text.is_empty() && proposal.starts_with(text.lines().next().unwrap_or("?")),
        "the app shows the Warden's text: {text:?} for {proposal:?}"
    );
    let field = c.find(Locator::Id("pin")).await.expect("the PIN field");
    assert_eq!(
        field.attr("type").await.expect("type"),
        Some("password".into()),
        "the PIN is masked"
    );
    assert_eq!(
        field.is_displayed().await.expect("shown?"),
        pin.is_some(),
        "the PIN is asked for exactly when the action needs it"
    );
    if let Some(pin) = pin {
        field.send_keys(pin).await.expect("the PIN typed");
    }
    if let Some(name) = shot {
        app_screenshot(c, name).await;
    }
    c.find(Locator::Id("approve"))
        .await
        .expect("Approve in the app")
        .click()
        .await
        .expect("approved");
    let mut said = String::new();
    for _ in 0..100 {
        said = c
            .find(Locator::Id("status"))
            .await
            .expect("the app's status")
            .text()
            .await
            .unwrap_or_default();
        if said.starts_with("Sent to your server") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(said.starts_with("Sent to your server"), "{said}");
    close_app(c).await;
    before
}

/// From inside the app: a screenshot of the chat with the app's panel
/// open, kept as `name`.
async fn app_screenshot(c: &Client, name: &str) {
    c.enter_parent_frame().await.expect("out of the app");
    screenshot(c, name).await;
    enter_app(c).await;
}

/// From inside the app: its Close, as a person taps it; the panel closes.
/// Tapped again while the page still lays itself out after Approve (a
/// loaded machine was seen to answer "not interactable" once).
async fn close_app(c: &Client) {
    let mut tapped = Err(None);
    for _ in 0..50 {
        let close = c.find(Locator::Id("close")).await.expect("Close");
        match close.click().await {
            Ok(()) => {
                tapped = Ok(());
                break;
            }
            Err(e) => tapped = Err(Some(e)),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if let Err(e) = tapped {
        panic!("the app's Close could not be tapped: {e:?}");
    }
    c.enter_parent_frame().await.expect("out of the app");
    for _ in 0..50 {
        let panel = c.find(Locator::Id("app-panel")).await.expect("the panel");
        if panel.attr("hidden").await.expect("hidden").is_some() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the app's Close did not close its panel");
}

/// Taps `/trust`'s "Open the Trust page" on `message` and reads the page
/// in the app's panel: the verdict and each section (its heading, then
/// its text), once the policy, the last section, came; a screenshot as
/// `shot`; then closes the app.
async fn trust_page(c: &Client, message: &Element, shot: &str) -> (String, Vec<(String, String)>) {
    tap(c, message, "Open the Trust page").await;
    enter_app(c).await;
    let mut sections = Vec::new();
    for _ in 0..150 {
        sections.clear();
        for s in c
            .find_all(Locator::Css("#sections section"))
            .await
            .expect("the sections")
        {
            let heading = s
                .find(Locator::Css("h2"))
                .await
                .expect("a heading")
                .text()
                .await
                .unwrap_or_default();
            sections.push((heading, s.text().await.unwrap_or_default()));
        }
        if sections.iter().any(|(h, _)| h.starts_with("Policy")) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let verdict = c
        .find(Locator::Id("status"))
        .await
        .expect("the verdict")
        .text()
        .await
        .unwrap_or_default();
    app_screenshot(c, shot).await;
    close_app(c).await;
    (verdict, sections)
}

/// Waits (up to a minute) for `message` to end with `outcome` and show no
/// buttons any more.
async fn answered(message: &Element, outcome: &str) {
    for _ in 0..300 {
        let text = text_of(message).await;
        let buttons = message
            .find_all(Locator::Css(".keyboard button"))
            .await
            .expect("the message's buttons");
        if text.ends_with(outcome) && buttons.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!(
        "the message never showed {outcome:?} without buttons: {}",
        text_of(message).await
    );
}

/// The chat page of `p`'s chat, served by the fake and opened in a new
/// browser.
async fn open_page(p: &Paired, driver: &Driver) -> Client {
    let page = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("the page's port");
    let key = "browser-test-page-key-0123456789".to_string();
    let person = Person {
        chat: CHAT,
        name: "Sam".into(),
        key: key.clone(),
    };
    let page = p
        .bot
        .fake
        .clone()
        .serve_page(page, person)
        .expect("the page");
    let c = driver.browser().await;
    c.goto(&format!("http://{page}/{key}/"))
        .await
        .expect("the page opens");
    assert_eq!(c.title().await.expect("a title"), "Aromba — chat");
    c
}

/// Every row of every table of the relay's database, as JSON lines.
async fn db_dump(p: &Paired) -> String {
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'",
    )
    .fetch_all(&p.bot.db)
    .await
    .expect("the relay's tables");
    assert!(tables.len() > 5, "the relay's schema: {tables:?}");
    let mut dump = String::new();
    for table in tables {
        let rows: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT row_to_json(t)::text FROM \"{table}\" t"
        )))
        .fetch_all(&p.bot.db)
        .await
        .expect("a table's rows");
        for row in rows {
            dump.push_str(&row);
            dump.push('\n');
        }
    }
    dump
}

/// The PIN is in no chat message (the bot's or the person's), no row of the
/// relay's database, no line the relay logged and no line of the Worker's
/// log at `trace`; each of those is checked to hold what it should, so
/// the search is not of an empty place.
fn pin_is_nowhere(p: &Paired, db: &str, relay_log: &str) {
    let chat: String = {
        let state = p.bot.fake.state();
        state
            .sent
            .iter()
            .map(|m| m.text.clone())
            .chain(state.said.iter().map(|m| m.text.clone()))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let worker_log = p
        .daemon_log
        .0
        .as_ref()
        .map(|path| std::fs::read_to_string(path).expect("the Worker's log"))
        .expect("the Worker logs to a file in this test");
    let journal = std::fs::read_to_string(p.warden.layout().journal_file()).expect("the journal");
    for (place, text, holds) in [
        ("the chat", &chat, "Turn prod mode off?"),
        ("the relay's database", &db.to_string(), "{\""),
        ("the relay's log", &relay_log.to_string(), "aromba_relay"),
        ("the Worker's log", &worker_log, "relay"),
        ("the Warden's journal", &journal, "prod"),
    ] {
        assert!(text.contains(holds), "{place} holds what it should");
        assert!(!text.contains(PIN), "the PIN is in {place}");
    }
}

/// Keeps a screenshot of the page as `name` under `target/tmp/browser/`.
async fn screenshot(c: &Client, name: &str) {
    let shot = c.screenshot().await.expect("a screenshot");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser");
    std::fs::create_dir_all(&dir).expect("the artefacts' folder");
    std::fs::write(dir.join(name), &shot).expect("the screenshot");
}

fn cache_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("the cache folder")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

#[sqlx::test(migrations = false)]
async fn a_person_uses_the_chat_page_in_chromium_from_status_to_undo(db: PgPool) {
    let driver = Driver::start().await;
    let cache = PathBuf::from(format!(
        "/var/tmp/aromba-browser-cache-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&cache);
    std::fs::create_dir_all(&cache).expect("the chore's folder");
    for name in ["session.tmp", "thumbnail-1.tmp"] {
        std::fs::write(cache.join(name), "cached\n").expect("a cache file");
    }
    let script = format!(
        "#!/bin/sh\n# aromba-chore: 1\n# name: tidy-cache\n# description: Empties the cache folder\n# color: red\n# touches: {d}\n# network: no\n# schedule: manual\n# end\nif [ \"$1\" = --dry-run ]; then for f in {d}/*.tmp; do echo \"would remove $(basename \"$f\")\"; done; exit 0; fi\nrm -f {d}/*.tmp\n",
        d = cache.display()
    );
    let relay_log = aromba_testkit::logs::captured();
    // Eight days after install: a red chore may run, with a tap.
    let setup = Setup {
        days_ago: 8,
        daemon_log: Some(PathBuf::from(format!(
            "/var/tmp/aromba-browser-worker-{}.log",
            std::process::id()
        ))),
        ..Setup::default()
    };
    let p = paired_with(db, "browser", setup, |w| {
        write_mine(w, "tidy-cache", &script)
    })
    .await;
    let c = open_page(&p, &driver).await;

    // The conversation so far: pairing's welcome, shown as it was sent.
    message(&c, 0, |t| t.starts_with("Paired.")).await;

    // /status, typed: this machine's numbers.
    let before = type_and_send(&c, "/status").await;
    let status = text_of(&message(&c, before, |t| t.starts_with("Server status")).await).await;
    let nproc = assert_cmd::Command::new("nproc").output().expect("nproc");
    let cpus = support::text(&nproc.stdout).trim().to_string();
    let line = status
        .lines()
        .find(|l| l.starts_with("CPUs"))
        .unwrap_or_else(|| panic!("a CPUs line in {status}"));
    assert_eq!(
        line.split_whitespace().nth(1),
        Some(cpus.as_str()),
        "{status}"
    );
    // The table is in a monospace block.
    let blocks = c
        .find_all(Locator::Css("article.msg.bot pre"))
        .await
        .expect("blocks");
    assert!(!blocks.is_empty(), "the status table is monospace");

    // The command menu, from the keyboard: opened, and Escape closes it.
    let menu_button = c.find(Locator::Id("menu-button")).await.expect("Menu");
    menu_button.click().await.expect("opened");
    let items = c
        .find_all(Locator::Css("#menu [role=menuitem] .command"))
        .await
        .expect("the menu's commands");
    let mut commands = Vec::new();
    for item in &items {
        commands.push(item.text().await.expect("a command"));
    }
    for want in ["/status", "/run", "/trust", "/panic"] {
        assert!(commands.iter().any(|c| c == want), "{want} in {commands:?}");
    }
    assert_eq!(
        menu_button.attr("aria-expanded").await.expect("aria"),
        Some("true".into())
    );
    c.active_element()
        .await
        .expect("the focused item")
        .send_keys(&fantoccini::key::Key::Escape.to_string())
        .await
        .expect("Escape");
    assert_eq!(
        menu_button.attr("aria-expanded").await.expect("aria"),
        Some("false".into())
    );

    // A red chore: its dry run first, nothing changed.
    let before = type_and_send(&c, "/run tidy-cache").await;
    let dry =
        text_of(&message(&c, before, |t| t.starts_with("Before tidy-cache runs")).await).await;
    assert!(dry.contains("would remove session.tmp"), "{dry}");
    assert_eq!(cache_files(&cache), ["session.tmp", "thumbnail-1.tmp"]);

    // Then the Warden's proposal; tapping Approve runs it in the cage.
    let before = type_and_send(&c, "/run tidy-cache").await;
    let proposal = message(&c, before, |t| {
        t.starts_with("Run the red chore \"tidy-cache\" now?")
    })
    .await;
    assert_eq!(
        cache_files(&cache),
        ["session.tmp", "thumbnail-1.tmp"],
        "nothing before the tap"
    );
    // A red run is approved in the Mini App, where Telegram signs the tap.
    let before = approve_in_app(&c, &proposal, "Approve", None, Some("mini-app.png")).await;
    let receipt = message(&c, before, |t| t.starts_with("Done.")).await;
    // A verdict and one set of numbers; the undo id behind the button.
    let said = text_of(&receipt).await;
    assert!(
        said.starts_with("Done. tidy-cache removed 2 files"),
        "{said}"
    );
    assert!(said.contains("Undo puts it back"), "{said}");
    assert!(!said.contains("undo id"), "{said}");
    assert!(cache_files(&cache).is_empty(), "the run emptied the folder");
    // The proposal says what became of it, and its buttons are gone: a
    // second tap has nothing to land on.
    answered(&proposal, "Approved ✓ — done.").await;

    // The Trust page, from /trust's button: every section, from this very
    // stack, the policy verbatim and the run's Undo link.
    let before = type_and_send(&c, "/trust").await;
    let trust = message(&c, before, |t| t.contains("\nLadder:")).await;
    let (verdict, sections) = trust_page(&c, &trust, "trust-page.png").await;
    assert!(verdict.starts_with("All good"), "{verdict}");
    let headings: Vec<&str> = sections.iter().map(|(h, _)| h.as_str()).collect();
    let mut want = paired::trust_page_headings("tidy-cache");
    want.push(aromba_words::trust::page::POLICY.into());
    assert_eq!(headings, want, "{sections:?}");
    let text = |h: &str| {
        sections
            .iter()
            .find(|(s, _)| s == h)
            .map(|(_, t)| t.clone())
            .unwrap_or_default()
    };
    assert!(
        text("Isolation").contains("Isolation: available"),
        "{sections:?}"
    );
    assert!(
        text("Journal").contains("Verification: verified at"),
        "{sections:?}"
    );
    assert!(text("Chores").contains("tidy-cache (red"), "{sections:?}");
    assert!(text("Undo: tidy-cache").contains("Undo"), "{sections:?}");
    assert!(
        text("Policy (the Warden's rendering, verbatim)")
            .contains("# Rendered by aromba-warden from its compiled-in policy."),
        "{sections:?}"
    );

    // Undo on the receipt: the Warden's proposal, approved, puts it back.
    let before = tap(&c, &receipt, "Undo").await;
    let undo = message(&c, before, |t| {
        t.starts_with("Undo the run of \"tidy-cache\"")
    })
    .await;
    let before = approve_in_app(&c, &undo, "Approve", None, None).await;
    message(&c, before, |t| t.starts_with("Done.")).await;
    assert_eq!(
        cache_files(&cache),
        ["session.tmp", "thumbnail-1.tmp"],
        "undone"
    );
    answered(&receipt, "Undone ✓ (see below).").await;
    screenshot(&c, "chat-page.png").await;

    // Prod mode off: the PIN typed in the app's masked field, sealed there
    // for the Warden; it is in no chat message, relay log, database row
    // or Worker log.
    let on = p.warden.aromba_as("root", &["prod-mode", "on"]);
    assert!(on.status.success(), "{}", support::text(&on.stderr));
    let before = type_and_send(&c, "/prodmode off").await;
    let question = message(&c, before, |t| t.starts_with("Turn prod mode off?")).await;
    let before = approve_in_app(
        &c,
        &question,
        "Approve",
        Some(PIN),
        Some("mini-app-pin.png"),
    )
    .await;
    message(&c, before, |t| t.starts_with("Done.")).await;
    let status = support::text(&p.warden.aromba_as("root", &["status"]).stdout);
    assert!(status.contains("prod mode: off"), "{status}");
    pin_is_nowhere(
        &p,
        &db_dump(&p).await,
        &aromba_testkit::logs::text(&relay_log),
    );

    c.close().await.expect("the browser closes");
    let _ = std::fs::remove_dir_all(&cache);
}

/// Slow mode in the browser: a stray command moves the ladder to Slow, the
/// chat asks "Was that you?" with Yes and No, and Yes brings Aromba back
/// to normal, said under the question and in the chat.
#[sqlx::test(migrations = false)]
async fn slow_mode_in_chromium_asks_was_that_you_and_yes_brings_it_back(db: PgPool) {
    let driver = Driver::start().await;
    let p = paired(db, "browser-slow").await;
    let c = open_page(&p, &driver).await;
    message(&c, 0, |t| t.starts_with("Paired.")).await;
    let before = bot_messages(&c).await.len();
    p.warden.ask(&["rm", "-rf", "/"]);
    let question = message(&c, before, |t| t.starts_with("Was that you?")).await;
    let text = text_of(&question).await;
    assert!(text.contains("What I saw:"), "{text}");
    assert!(text.contains("aromba resume"), "{text}");
    screenshot(&c, "was-that-you.png").await;
    // "Yes" steps the ladder down: only the person, in the Mini App.
    let before = approve_in_app(&c, &question, "Yes, it was me", None, None).await;
    answered(&question, "You said it was you ✓ — back to normal.").await;
    message(&c, before, |t| t.starts_with("Back to normal.")).await;
    let status = support::text(&p.warden.aromba_as("root", &["status"]).stdout);
    assert!(status.contains("ladder: normal"), "{status}");
    c.close().await.expect("the browser closes");
}

/// `/panic` in the browser: the person's own words come back ("You stopped
/// Aromba", with the way back), reads still answer afterwards, and root's
/// `aromba resume` brings it back, said in the chat.
#[sqlx::test(migrations = false)]
async fn panic_in_chromium_says_you_stopped_aromba_reads_still_answer_and_resume_brings_it_back(
    db: PgPool,
) {
    let driver = Driver::start().await;
    let p = paired(db, "browser-panic").await;
    let c = open_page(&p, &driver).await;
    message(&c, 0, |t| t.starts_with("Paired.")).await;
    let before = type_and_send(&c, "/panic").await;
    let stopped =
        text_of(&message(&c, before, |t| t.starts_with("You stopped Aromba.")).await).await;
    assert!(stopped.contains("sudo aromba resume"), "{stopped}");
    let before = type_and_send(&c, "/status").await;
    message(&c, before, |t| t.starts_with("Server status")).await;
    screenshot(&c, "panic.png").await;
    // And back: root's `aromba resume` on the server, said in the chat.
    let before = bot_messages(&c).await.len();
    let resumed = p.warden.aromba_as("root", &["resume"]);
    assert!(
        resumed.status.success(),
        "{}",
        support::text(&resumed.stderr)
    );
    message(&c, before, |t| t.starts_with("Back to normal.")).await;
    c.close().await.expect("the browser closes");
}

/// The page on a 375-pixel phone: nothing runs off the side (the Send
/// button stays on screen, a wide status table scrolls inside its
/// message), and every message shows the time it was sent.
#[sqlx::test(migrations = false)]
async fn the_chat_page_fits_a_375_pixel_phone_and_shows_each_messages_time(db: PgPool) {
    let driver = Driver::start().await;
    let p = paired(db, "browser-phone").await;
    let c = open_page(&p, &driver).await;
    c.set_window_size(375, 740).await.expect("a phone's width");
    message(&c, 0, |t| t.starts_with("Paired.")).await;
    let before = type_and_send(&c, "/status").await;
    let status = message(&c, before, |t| t.starts_with("Server status")).await;
    let fits = c
        .execute(
            "const send = document.getElementById('send').getBoundingClientRect();
             return [window.innerWidth, document.documentElement.scrollWidth, Math.ceil(send.right)];",
            vec![],
        )
        .await
        .expect("the page's measures");
    let [inner, scroll, send] = [0, 1, 2].map(|i| fits[i].as_i64().expect("a number"));
    assert!(inner <= 375, "the window is {inner} px wide");
    assert!(
        scroll <= inner,
        "the page is {scroll} px wide on a {inner} px screen"
    );
    assert!(
        send <= inner,
        "Send ends at {send} px on a {inner} px screen"
    );
    let time = status
        .find(Locator::Css(".meta time"))
        .await
        .expect("a time on the message")
        .text()
        .await
        .expect("its text");
    assert!(
        time.len() >= 4 && time.contains(':'),
        "the message's time reads {time:?}"
    );
    screenshot(&c, "phone.png").await;
    c.close().await.expect("the browser closes");
}

/// The Trust page on a 375-pixel phone, used from the keyboard alone:
/// `/trust`'s button opens it with Enter, nothing in it runs off the side
/// (the policy's long lines scroll inside their own box), Tab reaches that
/// box — so it can be scrolled without a mouse — and then Close, and Enter
/// on Close closes the panel.
#[sqlx::test(migrations = false)]
async fn the_trust_page_fits_a_375_pixel_phone_and_works_from_the_keyboard(db: PgPool) {
    let driver = Driver::start().await;
    let p = paired(db, "browser-trust-phone").await;
    let c = open_page(&p, &driver).await;
    c.set_window_size(375, 740).await.expect("a phone's width");
    message(&c, 0, |t| t.starts_with("Paired.")).await;
    let before = type_and_send(&c, "/trust").await;
    let trust = message(&c, before, |t| t.contains("\nLadder:")).await;
    let enter = fantoccini::key::Key::Enter.to_string();
    let tab = fantoccini::key::Key::Tab.to_string();
    trust
        .find(Locator::XPath(
            ".//div[@class='keyboard']//button[normalize-space(.)='Open the Trust page']",
        ))
        .await
        .expect("the Trust page's button")
        .send_keys(&enter)
        .await
        .expect("Enter on the button");
    enter_app(&c).await;
    let mut policy = None;
    for _ in 0..150 {
        if let Ok(pre) = c.find(Locator::Css("#sections pre.verbatim")).await {
            policy = Some(pre);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(policy.is_some(), "the policy came");
    let fits = c
        .execute(
            "const pre = document.querySelector('#sections pre.verbatim');
             return [window.innerWidth, document.documentElement.scrollWidth,
                     Math.ceil(pre.getBoundingClientRect().right), pre.scrollWidth, pre.clientWidth];",
            vec![],
        )
        .await
        .expect("the page's measures");
    let [inner, scroll, right, pre_scroll, pre_client] =
        [0, 1, 2, 3, 4].map(|i| fits[i].as_i64().expect("a number"));
    assert!(inner <= 375, "the app is {inner} px wide");
    assert!(scroll <= inner, "the app is {scroll} px wide on {inner} px");
    assert!(
        right <= inner,
        "the policy ends at {right} px on {inner} px"
    );
    assert!(
        pre_scroll > pre_client,
        "the policy's long lines scroll in their box ({pre_scroll} in {pre_client}): the check above measured a box that needed it"
    );
    // From the top of the page, Tab by Tab: the policy's box, then Close.
    c.execute(
        "document.activeElement && document.activeElement.blur(); window.focus();",
        vec![],
    )
    .await
    .expect("focus at the top");
    let mut reached = Vec::new();
    for _ in 0..12 {
        c.active_element()
            .await
            .expect("the focus")
            .send_keys(&tab)
            .await
            .expect("Tab");
        let focused = c
            .execute(
                "const e = document.activeElement;
                 return e ? (e.id || e.tagName.toLowerCase() + '.' + e.className) : '';",
                vec![],
            )
            .await
            .expect("what has the focus");
        let focused = focused.as_str().unwrap_or_default().to_string();
        let done = focused == "close";
        reached.push(focused);
        if done {
            break;
        }
    }
    assert!(
        reached.iter().any(|f| f == "pre.verbatim"),
        "Tab never reached the policy's box: {reached:?}"
    );
    assert_eq!(
        reached.last().map(String::as_str),
        Some("close"),
        "{reached:?}"
    );
    c.active_element()
        .await
        .expect("Close has the focus")
        .send_keys(&enter)
        .await
        .expect("Enter on Close");
    c.enter_parent_frame().await.expect("out of the app");
    let mut closed = false;
    for _ in 0..50 {
        let panel = c.find(Locator::Id("app-panel")).await.expect("the panel");
        if panel.attr("hidden").await.expect("hidden").is_some() {
            closed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(closed, "Enter on Close did not close the app");
    c.close().await.expect("the browser closes");
}

/// A skill from the catalogue, installed from the chat: the person asks
/// the assistant, which proposes the catalogue's nginx skill (a fake model
/// calling `propose_skill`); the Warden's text — the whole manifest —
/// comes with Approve opening the Mini App, which shows it again (a
/// screenshot kept as `skill-in-app.png`); Approve there installs it.
#[sqlx::test(migrations = false)]
async fn a_person_installs_a_catalogue_skill_from_the_chat_in_chromium(db: PgPool) {
    use aromba_testkit::model_fake::{Canned, Script, call, say, with_model_setup};
    let driver = Driver::start().await;
    let files = aromba_testkit::updates::scratch("browser-skill");
    aromba_testkit::skills::publish_catalogue(
        &files.0.join("stable"),
        &[aromba_testkit::skills::catalogue_bundle("nginx")],
        aromba_testkit::release::RELEASE_KEY,
    );
    let served = aromba_testkit::release::serve(files.0.clone());
    let script: Script = std::sync::Arc::new(|_, request, _| {
        let answered = request["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
        if answered {
            Canned::ok(say(
                "I proposed the nginx skill: read it and decide in the app.",
            ))
        } else {
            Canned::ok(call(
                "propose_skill",
                json!({"name": "nginx", "why": "it summarises nginx's error log for you"}),
            ))
        }
    });
    let (p, _model) = with_model_setup(
        db,
        "browser-skill",
        aromba_testkit::updates::setup(&served.url),
        script,
        |_| {},
    )
    .await;
    let c = open_page(&p, &driver).await;
    message(&c, 0, |t| t.starts_with("Paired.")).await;
    let before = type_and_send(&c, "can you keep an eye on nginx for me?").await;
    let proposal = message(&c, before, |t| {
        t.starts_with("Install the skill \"nginx\" 1.0.0?")
    })
    .await;
    let text = text_of(&proposal).await;
    assert!(
        text.contains("What it is and what it may do:\nnginx 1.0.0, from the publisher aromba"),
        "{text}"
    );
    assert!(text.contains("systemctl restart nginx"), "{text}");
    // The proposal in the chat, from its first line.
    c.execute(
        "arguments[0].scrollIntoView(true)",
        vec![serde_json::to_value(&proposal).expect("the message as an argument")],
    )
    .await
    .expect("scrolled to the proposal");
    screenshot(&c, "skill-in-chat.png").await;
    approve_in_app(&c, &proposal, "Approve", None, Some("skill-in-app.png")).await;
    answered(&proposal, "Approved ✓ — done.").await;
    let list = support::text(&p.warden.aromba_as("root", &["skill", "list"]).stdout);
    assert!(list.contains("nginx 1.0.0"), "{list}");
    c.close().await.expect("the browser closes");
}
