//! `aromba update` (a root terminal) against a hostile release server on
//! loopback: a manifest signed by another key, redirects, bodies that
//! never end, huge headers, a tarball longer than its manifest says or not
//! the release's. Each must fail quickly, fetch nothing it should not, and
//! leave the installed release as it was. A good release, served the same
//! way, installs (so the failures are the server's doing).

use aromba_testkit::release as releases;
use aromba_testkit::worker as support;

use releases::{OTHER_KEY, RELEASE_KEY, RELEASE_PUB, key_line};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::TestWarden;

/// What the server answers for one path.
#[derive(Clone)]
enum Answer {
    Body(Vec<u8>),
    /// A 200 with no length, whose body never ends.
    Endless,
    /// A 200 whose body is these bytes, then more without end.
    Longer(Vec<u8>),
    Redirect(String),
    /// A 200 with a megabyte-long header, never finished.
    HugeHeader,
}

struct Server {
    port: u16,
    asked: Arc<Mutex<Vec<String>>>,
}

fn serve(answers: Vec<(String, Answer)>) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let asked = Arc::new(Mutex::new(Vec::new()));
    let log = asked.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let answers = answers.clone();
            let log = log.clone();
            std::thread::spawn(move || {
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                let mut head = Vec::new();
                let mut b = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && head.len() < 65536 {
                    match s.read(&mut b) {
                        Ok(1) => head.push(b[0]),
                        _ => return,
                    }
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
                log.lock().unwrap().push(path.clone());
                let answer = answers
                    .iter()
                    .find(|(p, _)| *p == path)
                    .map(|(_, a)| a.clone());
                let chunk = vec![b'A'; 64 * 1024];
                let deadline = Instant::now() + Duration::from_secs(60);
                match answer {
                    None => {
                        let _ = s.write_all(
                            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                        );
                    }
                    Some(Answer::Body(body)) => {
                        let _ = s.write_all(
                            format!(
                                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                                body.len()
                            )
                            .as_bytes(),
                        );
                        let _ = s.write_all(&body);
                    }
                    Some(Answer::Endless) => {
                        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
                        while Instant::now() < deadline && s.write_all(&chunk).is_ok() {}
                    }
                    Some(Answer::Longer(body)) => {
                        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
                        let _ = s.write_all(&body);
                        while Instant::now() < deadline && s.write_all(&chunk).is_ok() {}
                    }
                    Some(Answer::Redirect(to)) => {
                        let _ = s.write_all(
                            format!(
                                "HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                            )
                            .as_bytes(),
                        );
                    }
                    Some(Answer::HugeHeader) => {
                        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nX-Big: ");
                        while Instant::now() < deadline && s.write_all(&chunk).is_ok() {}
                    }
                }
            });
        }
    });
    Server { port, asked }
}

/// A release's files: (manifest, signature, [(tarball name, bytes)]).
struct Release {
    manifest: Vec<u8>,
    signature: String,
    tarballs: Vec<(String, Vec<u8>)>,
}

/// A release `version` signed with `key`, made in `work` and read back.
fn release(work: &Path, version: &str, key: &str) -> Release {
    let worker = format!("aromba {version}");
    let warden = format!("aromba-warden {version}");
    releases::Release {
        key,
        ..releases::Release::of(version, worker.as_bytes(), warden.as_bytes())
    }
    .write(work);
    let read = |name: &str| std::fs::read(work.join(name)).unwrap();
    Release {
        manifest: read("manifest.json"),
        signature: String::from_utf8(read("manifest.json.minisig")).unwrap(),
        tarballs: ["aromba", "aromba-warden"]
            .iter()
            .map(|b| {
                let name = releases::tarball_name(b, version);
                let bytes = read(&name);
                (name, bytes)
            })
            .collect(),
    }
}

fn warden(name: &str) -> TestWarden {
    let root = aromba_warden::users::lookup(Path::new("/etc/passwd"), "root")
        .unwrap()
        .unwrap();
    TestWarden::start_with(name, root, true, |o| {
        // Root stands in for the Worker: its connections are not watched.
        o.watch_network = false;
        let base = o.layout.state_dir.parent().unwrap().to_path_buf();
        o.releases = aromba_warden::update::Releases::rooted(&base);
        o.release_keys = Some(vec![key_line(RELEASE_PUB)]);
    })
}

/// `aromba update --releases URL` as root, within `limit`; its output, or
/// a panic when it hung.
fn update(w: &TestWarden, url: &str, limit: Duration) -> (bool, String) {
    let mut child = support::aromba(&["update", "--releases", url, "--root"])
        .arg(&w.root)
        .env("AROMBA_RELEASE_KEYS", key_line(RELEASE_PUB))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    loop {
        if let Some(_status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            return (out.status.success(), text);
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("aromba update still ran after {limit:?} against {url}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn current(w: &TestWarden) -> Option<PathBuf> {
    std::fs::read_link(w.root.join("opt/aromba/current")).ok()
}

fn files(r: &Release) -> Vec<(String, Answer)> {
    let mut v = vec![
        (
            "/rel/manifest.json".to_string(),
            Answer::Body(r.manifest.clone()),
        ),
        (
            "/rel/manifest.json.minisig".to_string(),
            Answer::Body(r.signature.clone().into_bytes()),
        ),
    ];
    for (name, bytes) in &r.tarballs {
        v.push((format!("/rel/{name}"), Answer::Body(bytes.clone())));
    }
    v
}

fn set(v: &mut [(String, Answer)], path: &str, a: Answer) {
    v.iter_mut().find(|(p, _)| p == path).unwrap().1 = a;
}

/// What is tried, the server's answers, and what the failure must say.
type Case = (&'static str, Vec<(String, Answer)>, &'static str);

#[test]
fn a_hostile_release_server_gets_nothing_installed_and_no_hang() {
    let w = warden("adv-update-server");
    let work = w.root.join("work");
    let good = release(&work.join("good"), "1.0.0", RELEASE_KEY);
    let other = release(&work.join("other"), "1.0.0", OTHER_KEY);
    let worker_tar = format!("/rel/{}", good.tarballs[0].0);
    let limit = Duration::from_secs(60);

    let mut cases: Vec<Case> = Vec::new();
    cases.push((
        "a manifest signed by another key",
        files(&other),
        "signature",
    ));
    let mut v = files(&good);
    set(
        &mut v,
        "/rel/manifest.json",
        Answer::Redirect("http://127.0.0.1:1/evil/manifest.json".into()),
    );
    cases.push(("a redirect", v, "302"));
    let mut v = files(&good);
    set(&mut v, "/rel/manifest.json", Answer::Endless);
    cases.push(("a manifest that never ends", v, "more than"));
    let mut v = files(&good);
    set(&mut v, "/rel/manifest.json.minisig", Answer::HugeHeader);
    cases.push(("a huge header", v, ""));
    let mut v = files(&good);
    set(
        &mut v,
        &worker_tar,
        Answer::Longer(good.tarballs[0].1.clone()),
    );
    cases.push(("a tarball longer than its manifest says", v, "more than"));
    let mut v = files(&good);
    let mut wrong = good.tarballs[0].1.clone();
    let last = wrong.len() - 1;
    wrong[last] ^= 1;
    set(&mut v, &worker_tar, Answer::Body(wrong));
    cases.push(("a tarball that is not the release's", v, "SHA-256"));
    let mut v = files(&good);
    set(&mut v, &worker_tar, Answer::Body(b"short".to_vec()));
    cases.push(("a short tarball", v, "bytes"));

    for (what, answers, want) in cases {
        let server = serve(answers);
        let url = format!("http://127.0.0.1:{}/rel", server.port);
        let started = Instant::now();
        let (ok, out) = update(&w, &url, limit);
        assert!(!ok, "{what}: succeeded: {out}");
        assert!(out.contains(want), "{what}: {out} lacks {want:?}");
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{what}: took {:?}",
            started.elapsed()
        );
        assert_eq!(current(&w), None, "{what} installed something");
        let asked = server.asked.lock().unwrap().clone();
        if what == "a manifest signed by another key" {
            assert!(
                asked.iter().all(|p| !p.ends_with(".tar.gz")),
                "{what}: tarballs fetched before the signature verified: {asked:?}"
            );
        }
        assert!(
            asked.iter().all(|p| !p.starts_with("/evil")),
            "{what}: followed a redirect: {asked:?}"
        );
        assert!(
            !w.journal().contains("AAAAAAAA"),
            "{what}: the server's bytes reached the journal"
        );
    }
    // Nothing left in /var/tmp by the failed downloads.
    let left: Vec<_> = std::fs::read_dir("/var/tmp")
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("aromba-update-")
        })
        .filter(|e| {
            e.metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().unwrap_or_default() < Duration::from_secs(600))
        })
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");

    // The same server, honest: installed.
    let server = serve(files(&good));
    let url = format!("http://127.0.0.1:{}/rel", server.port);
    let (ok, out) = update(&w, &url, limit);
    assert!(ok, "{out}");
    assert_eq!(current(&w), Some(PathBuf::from("releases/1.0.0")));
}

/// A release made in `work` whose manifest expires at `expires`.
fn release_expiring(work: &Path, version: &str, expires: u64) -> Release {
    let worker = format!("aromba {version}");
    let warden = format!("aromba-warden {version}");
    releases::Release {
        expires,
        ..releases::Release::of(version, worker.as_bytes(), warden.as_bytes())
    }
    .write(work);
    let read = |name: &str| std::fs::read(work.join(name)).unwrap();
    Release {
        manifest: read("manifest.json"),
        signature: String::from_utf8(read("manifest.json.minisig")).unwrap(),
        tarballs: ["aromba", "aromba-warden"]
            .iter()
            .map(|b| {
                let name = releases::tarball_name(b, version);
                let bytes = read(&name);
                (name, bytes)
            })
            .collect(),
    }
}

/// A stale or withholding mirror serves the installed release's manifest,
/// validly signed but expired in 1970: `aromba update` said "nothing to
/// do" and exited 0, so root never learnt updates were held back. Now it
/// fails saying the manifest expired and when; a manifest claiming 90
/// days ahead (an old long signature a mirror could serve for months) is
/// refused too.
#[test]
fn a_mirror_serving_an_expired_manifest_is_not_nothing_to_do() {
    let w = warden("adv-update-stale-mirror");
    let work = w.root.join("work");
    let good = release(&work.join("good"), "1.0.0", RELEASE_KEY);
    let server = serve(files(&good));
    let url = format!("http://127.0.0.1:{}/rel", server.port);
    let (ok, out) = update(&w, &url, Duration::from_secs(60));
    assert!(ok, "{out}");
    // The same version again, its manifest expired long ago.
    let stale = release_expiring(&work.join("stale"), "1.0.0", 1);
    let server = serve(files(&stale));
    let url = format!("http://127.0.0.1:{}/rel", server.port);
    let (ok, out) = update(&w, &url, Duration::from_secs(60));
    assert!(!ok, "an expired manifest was taken as nothing to do: {out}");
    assert!(out.contains("expired on 1970-01-01"), "{out}");
    assert!(!out.contains("nothing to do"), "{out}");
    // A newer release signed for 90 days: refused, not installed.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let long = release_expiring(&work.join("long"), "1.0.1", now + 90 * 86_400);
    let server = serve(files(&long));
    let url = format!("http://127.0.0.1:{}/rel", server.port);
    let (ok, out) = update(&w, &url, Duration::from_secs(60));
    assert!(!ok, "{out}");
    assert!(out.contains("days ahead"), "{out}");
    assert_eq!(current(&w), Some(PathBuf::from("releases/1.0.0")));
}
