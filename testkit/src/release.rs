//! Releases for the tests, made as `scripts/release` makes them (ustar
//! tarballs, owner 0, a manifest signed with minisign) with the test keys
//! of `keys/test/`, and a file server on loopback to serve them, for the
//! Warden's and the Worker's tests of updates and the installer.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};

pub const RELEASE_KEY: &str = include_str!("../../keys/test/release.key");
pub const RELEASE_PUB: &str = include_str!("../../keys/test/release.pub");
/// A key that is not a release key.
pub const OTHER_KEY: &str = include_str!("../../keys/test/relay-approvals.key");

/// The base64 line of a minisign public key file.
pub fn key_line(public: &str) -> String {
    public
        .lines()
        .find(|l| !l.starts_with("untrusted comment:"))
        .expect("a key line")
        .trim()
        .to_string()
}

/// `bytes` signed with the minisign secret key `key` (unencrypted).
pub fn sign(bytes: &[u8], key: &str) -> String {
    sign_with_comment(bytes, key, None)
}

/// As [`sign`], with `comment` as the signed trusted comment (minisign's
/// own, naming a time and no commit, when `None`).
pub fn sign_with_comment(bytes: &[u8], key: &str, comment: Option<&str>) -> String {
    let sk = minisign::SecretKeyBox::from_string(key)
        .expect("a minisign secret key")
        .into_unencrypted_secret_key()
        .expect("unencrypted");
    minisign::sign(None, &sk, std::io::Cursor::new(bytes), comment, None)
        .expect("signed")
        .to_string()
}

pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("time")
        .as_secs()
}

/// What `scripts/release` names a tarball.
pub fn tarball_name(binary: &str, version: &str) -> String {
    format!("{binary}-{version}-{}.tar.gz", std::env::consts::ARCH)
}

/// A tarball of `files` (name, bytes; a name ending `@` is a link to
/// `/etc/shadow`), made in `dir` by the system's tar as the release script
/// makes it; its bytes.
pub fn tarball(dir: &Path, name: &str, files: &[(&str, &[u8])]) -> Vec<u8> {
    let stage = dir.join(format!("{name}.stage"));
    std::fs::create_dir_all(&stage).expect("the stage");
    let mut names = Vec::new();
    for (file, bytes) in files {
        if let Some(link) = file.strip_suffix('@') {
            std::os::unix::fs::symlink("/etc/shadow", stage.join(link)).expect("a link");
            names.push(link.to_string());
        } else {
            std::fs::write(stage.join(file), bytes).expect("a file");
            names.push(file.to_string());
        }
    }
    let out = dir.join(name);
    let made = assert_cmd::Command::new("tar")
        .args(["--format=ustar", "--owner=0", "--group=0", "-czf"])
        .arg(&out)
        .arg("-C")
        .arg(&stage)
        .args(&names)
        .output()
        .expect("tar runs");
    assert!(made.status.success(), "{made:?}");
    std::fs::remove_dir_all(&stage).expect("the stage removed");
    std::fs::read(&out).expect("the tarball")
}

/// What a release is made of, changed by each test as it likes.
pub struct Release<'a> {
    pub version: &'a str,
    pub channel: &'a str,
    pub expires: u64,
    /// The files of each tarball (normally the one binary).
    pub worker: Vec<(&'a str, &'a [u8])>,
    pub warden: Vec<(&'a str, &'a [u8])>,
    /// The secret key the manifest is signed with.
    pub key: &'a str,
    /// Changes the manifest after the tarballs are hashed.
    pub tamper: fn(&mut Value),
    /// The commit the signature's trusted comment names, as
    /// `scripts/release` writes it; `None`: no commit named.
    pub commit: Option<&'a str>,
}

impl<'a> Release<'a> {
    /// Two stand-in binaries, the stable channel, 14 days to expiry, the
    /// release test key.
    pub fn new(version: &'a str) -> Release<'a> {
        Release::of(version, b"worker binary", b"warden binary")
    }

    /// A release of these two binaries.
    pub fn of(version: &'a str, worker: &'a [u8], warden: &'a [u8]) -> Release<'a> {
        Release {
            version,
            channel: "stable",
            expires: now() + 14 * 86_400,
            worker: vec![("aromba", worker)],
            warden: vec![("aromba-warden", warden)],
            key: RELEASE_KEY,
            tamper: |_| {},
            commit: None,
        }
    }

    /// Writes the tarballs, `manifest.json` and its `.minisig` into `dir`
    /// (made when missing).
    pub fn write(&self, dir: &Path) {
        std::fs::create_dir_all(dir).expect("the release folder");
        let mut entries = Vec::new();
        for (binary, files) in [("aromba", &self.worker), ("aromba-warden", &self.warden)] {
            let name = tarball_name(binary, self.version);
            let gz = tarball(dir, &name, files);
            entries.push(json!({
                "binary": binary,
                "tarball": name,
                "sha256": aromba_release::sha256_hex(&gz),
                "size": gz.len(),
            }));
        }
        let mut manifest = json!({
            "format": 1, "version": self.version, "channel": self.channel,
            "arch": std::env::consts::ARCH, "expires": self.expires, "binaries": entries,
        });
        (self.tamper)(&mut manifest);
        let bytes = serde_json::to_vec(&manifest).expect("JSON");
        std::fs::write(dir.join("manifest.json"), &bytes).expect("the manifest");
        let comment = self.commit.map(|c| {
            format!(
                "aromba {} {} {} commit {c}",
                self.version,
                self.channel,
                std::env::consts::ARCH
            )
        });
        std::fs::write(
            dir.join("manifest.json.minisig"),
            sign_with_comment(&bytes, self.key, comment.as_deref()),
        )
        .expect("the signature");
    }
}

/// A file server on loopback: its base URL and the paths asked of it.
pub struct Served {
    pub url: String,
    pub asked: Arc<Mutex<Vec<String>>>,
}

/// Serves the files of `dir` over HTTP/1.0 on loopback, one request at a
/// time, until the test ends.
pub fn serve(dir: std::path::PathBuf) -> Served {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a port");
    let addr = listener.local_addr().expect("its address");
    let asked = Arc::new(Mutex::new(Vec::new()));
    let log = asked.clone();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut line = String::new();
            if BufReader::new(&stream).read_line(&mut line).is_err() {
                continue;
            }
            let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
            log.lock().expect("the log").push(path.clone());
            let reply = match std::fs::read(dir.join(path.trim_start_matches('/'))) {
                Ok(body) if !path.contains("..") => {
                    let mut r = format!(
                        "HTTP/1.0 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    )
                    .into_bytes();
                    r.extend(body);
                    r
                }
                _ => b"HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_vec(),
            };
            let _ = stream.write_all(&reply);
        }
    });
    Served {
        url: format!("http://{addr}"),
        asked,
    }
}
