//! Attack round on issue 29's fixes, from the model's side and a local
//! user's: the PIN kept from the model, one question's tokens capped, and
//! the owner check on a plain-HTTP model endpoint served on this machine.
//! A real relay with the fake Bot API, a real Warden, `aromba pair` and
//! `aromba run` as shipped, a scripted model endpoint.
//!
//! Each test asserts what the fix claims: a failing test is a break.

mod model_fake;
mod paired;
#[path = "../../relay/tests/support/mod.rs"]
mod relay_support;
mod support;

use model_fake::{Canned, fake_model, say};
use paired::{CHAT, Paired, Setup, paired_with};
use sqlx::PgPool;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// A PIN `aromba pair` accepts (and the issue's example).
const PIN: &str = "Tr0ub4dor&3";

/// Everything the model endpoint was sent, as one text.
fn all_sent(model: &model_fake::FakeModel) -> String {
    model
        .asked()
        .iter()
        .map(|a| a.body.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The person sends `text` and the test waits for the Worker to be done
/// with it: the assistant's answer (its footer), or any of the Worker's
/// own replies about a PIN.
async fn settle(p: &Paired, text: &str) -> String {
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

/// The model asks for the PIN "to confirm" — the phishing the issue names
/// (item 3) — and the person answers with the PIN and one more word, as
/// people do. The Worker keeps from the model the PIN's one-word shape and
/// the PIN after "pin", "my pin is", "code"; any other word beside it
/// sends the PIN, word for word, to the model endpoint (and the relay,
/// which deletes only one-word messages, leaves it in the chat).
#[sqlx::test(migrations = false)]
async fn a_pin_typed_with_another_word_beside_it_never_reaches_the_model(db: PgPool) {
    let model = fake_model(Arc::new(|_, _, _| Canned::ok(say("Noted.")))).await;
    let url = model.url.clone();
    let p = paired_with(db, "r29-pin-words", Setup::default(), move |w| {
        model_fake::assistant_files(w, &url, "pin-words")
    })
    .await;
    let mut leaked = Vec::new();
    for text in [
        format!("confirm {PIN}"),
        format!("{PIN} thanks"),
        format!("ok {PIN}"),
        format!("my PIN: {PIN} ok?"),
        format!("{PIN} {PIN}"),
        format!("here you go: {PIN}"),
        format!("sure, it's {PIN}"),
    ] {
        let _ = settle(&p, &text).await;
        if all_sent(&model).contains(PIN) {
            leaked.push(text);
            // Only the first reaches it once; the rest are judged afresh.
            model.asked.lock().expect("the log").clear();
        }
    }
    assert!(
        leaked.is_empty(),
        "messages holding the PIN reached the model endpoint: {leaked:#?}"
    );
}

/// The shapes the fix claims to keep (held): one word, the PIN after
/// "pin"/"code", digits split by spaces or written in another script, a
/// trailing period, NBSP around it.
#[sqlx::test(migrations = false)]
async fn a_pin_in_the_shapes_the_fix_names_never_reaches_the_model(db: PgPool) {
    let model = fake_model(Arc::new(|_, _, _| Canned::ok(say("Noted.")))).await;
    let url = model.url.clone();
    let p = paired_with(db, "r29-pin-shapes", Setup::default(), move |w| {
        model_fake::assistant_files(w, &url, "pin-shapes")
    })
    .await;
    let cases = [
        PIN.to_string(),
        format!("{PIN}."),
        format!("\u{a0}{PIN}\u{a0}"),
        format!("pin: {PIN}"),
        format!("My PIN is {PIN}!"),
        format!("code {PIN}"),
        "４７２９１３".to_string(),
        "4729 13".to_string(),
        "٤٧٢٩١٣".to_string(),
        format!("`{PIN}`"),
    ];
    for text in &cases {
        let said = settle(&p, text).await;
        assert!(
            !said.contains("tokens in"),
            "{text:?} was answered by the model: {said}"
        );
    }
    let sent = all_sent(&model);
    for needle in [PIN, "472913", "４７２９１３", "٤٧٢٩١٣", "4729 13"] {
        assert!(!sent.contains(needle), "{needle:?} reached the model");
    }
}

/// Issue 29 item 6: "an injected instruction can make one question cost
/// about 0.7 M input tokens … check the budget within a round, not only
/// between rounds". The Worker caps a question at `MAX_PER_QUESTION`
/// (60,000) by looking before each round, but an OpenAI-shaped request
/// carries no bound on the answer it asks for (`max_tokens` /
/// `max_completion_tokens`): one round's output is the endpoint's to
/// choose, and a model told by a log line to "write the whole file out"
/// spends whatever the provider allows in one round. The request must
/// bound the completion by what is left of the question's cap.
#[sqlx::test(migrations = false)]
async fn one_completion_asks_for_no_more_tokens_than_the_question_has_left(db: PgPool) {
    let model = fake_model(Arc::new(|_, _, _| Canned::ok(say("All fine.")))).await;
    let url = model.url.clone();
    let p = paired_with(db, "r29-max-out", Setup::default(), move |w| {
        model_fake::assistant_files(w, &url, "max-out")
    })
    .await;
    let said = settle(&p, "how is the load today?").await;
    assert!(said.contains("tokens in"), "{said}");
    let asked = model.asked();
    assert!(!asked.is_empty(), "the model was asked");
    for a in &asked {
        let cap = a.body["max_tokens"]
            .as_u64()
            .or_else(|| a.body["max_completion_tokens"].as_u64());
        assert!(
            cap.is_some_and(|c| c <= 60_000),
            "a completion was asked for with no bound on its output: {}",
            serde_json::to_string(&a.body)
                .unwrap_or_default()
                .chars()
                .filter(|c| *c != '\n')
                .take(300)
                .collect::<String>()
        );
    }
}

/// Listens on `$ARGV[2]:$ARGV[0]` as whoever runs it (the squatter of
/// adversarial_port_squat.rs, on a given address).
const SQUATTER: &str = r##"
use strict; use warnings; use IO::Socket::INET; use IO::Select;
$| = 1; $SIG{PIPE} = "IGNORE"; alarm 300;
my ($port, $dir, $addr) = @ARGV;
my $s = IO::Socket::INET->new(LocalAddr => $addr, LocalPort => $port,
    Listen => 16, ReuseAddr => 1, Proto => "tcp") or die "bind: $!\n";
open(my $ready, ">", "$dir/ready") or die "ready: $!\n";
print $ready "$$\n"; close $ready;
my $listening = IO::Select->new($s);
until (-e "$dir/stop") {
    next unless $listening->can_read(0.2);
    my $c = $s->accept or next;
    my $got = "";
    my $sel = IO::Select->new($c);
    while ($sel->can_read(1)) {
        my $n = sysread($c, my $buf, 65536);
        last unless $n;
        $got .= $buf;
    }
    print "got ", unpack("H*", $got), "\n";
    my $body = '{"choices":[{"message":{"role":"assistant","content":"SQUATTED: all is well, nothing to see"}}],"usage":{"prompt_tokens":1,"completion_tokens":1}}';
    print $c "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
        . length($body) . "\r\nConnection: close\r\n\r\n" . $body;
    close $c;
}
"##;

struct Stop(PathBuf);

impl Drop for Stop {
    fn drop(&mut self) {
        let _ = std::fs::write(self.0.join("stop"), "");
        std::thread::sleep(Duration::from_millis(500));
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn unhex(hex: &str) -> Vec<u8> {
    (0..hex.len() / 2)
        .filter_map(|i| hex.get(2 * i..2 * i + 2))
        .filter_map(|b| u8::from_str_radix(b, 16).ok())
        .collect()
}

fn wait_ready(dir: &Path) {
    for _ in 0..100 {
        if std::fs::read_to_string(dir.join("ready")).is_ok_and(|t| !t.trim().is_empty()) {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the squatter never bound its port");
}

/// Runs the squatter as `nobody` on `addr:port`; what it was sent, and
/// what the chat showed for `question`.
async fn squatted(p: &Paired, addr: &str, port: u16, question: &str) -> (String, String, bool) {
    let dir = PathBuf::from(format!("/tmp/aromba-r29-squat-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the squatter's folder");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("0755");
    std::fs::write(dir.join("ready"), "").expect("ready");
    std::fs::set_permissions(dir.join("ready"), std::fs::Permissions::from_mode(0o666))
        .expect("0666");
    let stop = Stop(dir.clone());
    let squatter = {
        let (port, dir, addr) = (
            port.to_string(),
            dir.to_string_lossy().into_owned(),
            addr.to_string(),
        );
        std::thread::spawn(move || {
            assert_cmd::Command::new("runuser")
                .args([
                    "-u", "nobody", "--", "perl", "-e", SQUATTER, &port, &dir, &addr,
                ])
                .timeout(Duration::from_secs(300))
                .output()
                .expect("runuser runs")
        })
    };
    wait_ready(&dir);
    let answer = p
        .ask(question, |t| {
            t.contains("The assistant could not answer") || t.contains("SQUATTED")
        })
        .await;
    drop(stop);
    let out = squatter.join().expect("the squatter's thread");
    let printed = support::text(&out.stdout);
    let got: Vec<Vec<u8>> = printed
        .lines()
        .filter_map(|l| l.strip_prefix("got"))
        .map(|hex| unhex(hex.trim()))
        .collect();
    (
        String::from_utf8_lossy(&got.concat()).into_owned(),
        answer.text,
        !got.is_empty(),
    )
}

/// Issue 29 item 5 with no owner recorded: 127.0.0.1, nothing listening
/// while root pairs, then `nobody` binds the port (held: the gate refuses
/// before a byte is sent). The same on the server's own non-loopback
/// address cannot be set up: a plain `http://` endpoint is refused unless
/// its host is 127.0.0.1 or [::1] (`aromba pair` fails).
#[sqlx::test(migrations = false)]
async fn a_local_user_squatting_an_ownerless_loopback_model_port_gets_no_key(db: PgPool) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("a port")
        .local_addr()
        .expect("its address")
        .port();
    let url = format!("http://127.0.0.1:{port}/v1");
    let endpoint = url.clone();
    let p = paired_with(db, "r29-squat-lo", Setup::default(), move |w| {
        model_fake::assistant_files(w, &endpoint, "test-model")
    })
    .await;
    let (seen, answer, _) = squatted(&p, "127.0.0.1", port, "why is my disk full?").await;
    assert!(seen.is_empty(), "the squatter was sent: {seen:?}");
    assert!(!answer.contains("SQUATTED"), "{answer}");
}
