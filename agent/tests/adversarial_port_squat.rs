//! Issue 29, item 5: a local user squats the loopback model port. With a
//! local model named as `http://127.0.0.1:PORT/v1` and nothing listening
//! there for a moment (the model restarting, not started yet), an
//! unprivileged user bound the port and got the API key, the owner's
//! question and the Warden's reads — a `du /root` it cannot make itself —
//! and its answer reached the chat. The Worker now speaks plain HTTP on
//! loopback only to a socket of the uid `network.toml` names as the
//! host's `owner`, which `aromba pair` recorded from who served the port
//! as root paired. With no owner recorded (nothing listened on the port
//! while root paired), the gate refuses the same squatter before a byte
//! is sent.
//!
//! The squatter is a real process of `nobody`'s, a few lines of Perl
//! (`perl-base` is Essential on Debian, whose tools these tests need
//! anyway: `runuser`, `useradd`).

use aromba_testkit::model_fake;
use aromba_testkit::paired;
use aromba_testkit::worker as support;

use paired::{Paired, Setup, paired_with};
use sqlx::PgPool;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Listens on `$ARGV[2]`:`$ARGV[0]` as whoever runs it, writes its pid to
/// `$ARGV[1]/ready` once bound, and for each connection prints `got ` and
/// the bytes it was sent (hex), then answers as a model would: its own
/// words, for the chat. Stops when `$ARGV[1]/stop` appears, or after five
/// minutes.
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

/// Tells the squatter to stop however the test ends, and removes its
/// folder.
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

/// Waits (up to ten seconds) for the squatter to have bound its port.
fn wait_ready(dir: &Path) {
    for _ in 0..100 {
        if std::fs::read_to_string(dir.join("ready")).is_ok_and(|t| !t.trim().is_empty()) {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the squatter never bound its port");
}

#[sqlx::test(migrations = false)]
async fn a_local_user_squatting_the_models_loopback_port_gets_no_key_and_no_question(db: PgPool) {
    // The model, served by root while root pairs: `aromba pair` records
    // root as the owner of its port.
    let model = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let port = model.local_addr().expect("its address").port();
    let url = format!("http://127.0.0.1:{port}/v1");
    let endpoint = url.clone();
    let p = paired_with(db, "port-squat", Setup::default(), move |w| {
        model_fake::assistant_files(w, &endpoint, "test-model")
    })
    .await;
    let network =
        std::fs::read_to_string(p.warden.root.join("worker/network.toml")).expect("network.toml");
    let listed = format!("port = {port}\naddresses = [\"127.0.0.1:{port}\"]\nowner = \"root\"\n");
    assert!(
        network.contains(&listed),
        "the model's host is listed with its owner:\n{network}"
    );

    // The model stops; a local user binds its port at once.
    drop(model);
    let dir = PathBuf::from(format!("/tmp/aromba-squat-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the squatter's folder");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("0755");
    std::fs::write(dir.join("ready"), "").expect("ready");
    std::fs::set_permissions(dir.join("ready"), std::fs::Permissions::from_mode(0o666))
        .expect("0666");
    let stop = Stop(dir.clone());
    let squatter = {
        let (port, dir) = (port.to_string(), dir.to_string_lossy().into_owned());
        std::thread::spawn(move || {
            assert_cmd::Command::new("runuser")
                .args([
                    "-u",
                    "nobody",
                    "--",
                    "perl",
                    "-e",
                    SQUATTER,
                    &port,
                    &dir,
                    "127.0.0.1",
                ])
                .timeout(Duration::from_secs(300))
                .output()
                .expect("runuser runs")
        })
    };
    wait_ready(&dir);

    let question = "why is my disk full under /root?";
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
    let seen = String::from_utf8_lossy(&got.concat()).into_owned();
    assert!(
        !seen.contains(model_fake::KEY) && !seen.contains("disk full") && seen.is_empty(),
        "the squatter was sent: {seen:?}"
    );
    assert!(
        !answer.text.contains("SQUATTED"),
        "the squatter's answer reached the chat: {}",
        answer.text
    );
    // The Worker did reach the port (it is its gate that stopped it, not
    // an empty port), and says who holds it.
    assert!(
        !got.is_empty(),
        "the squatter saw no connection; it printed {printed:?}, stderr {:?}",
        support::text(&out.stderr)
    );
    assert!(
        answer.text.contains("uid 65534") && answer.text.contains("owner"),
        "{}",
        answer.text
    );
    // The model's host is listed: the Warden saw nothing amiss.
    let status = support::text(&p.warden.aromba_as("root", &["status"]).stdout);
    assert!(status.contains("ladder: normal"), "{status}\n{network}");
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
