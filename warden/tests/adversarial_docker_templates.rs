//! docker's `--format` against the real docker client.
//!
//! A Go template calls a method as readily as it reads a field, and
//! docker's formatting contexts have methods that re-encode what they print:
//! `docker ps --format '{{.MarshalJSON}}'` passed the template grammar (a
//! field reference, no function) and printed the container's JSON as an
//! array of byte numbers — its command line, with a password and a Stripe
//! key in it, came back in clear past the redactor. Here every name docker's
//! contexts have (placeholders, methods, whole structs) is put in a
//! template for each docker verb the policy allows; every request the
//! policy accepts is run by the real docker client against a small fake
//! engine holding planted secrets, and its redacted output must hold none
//! of them, as written or decoded from byte numbers.

use aromba_testkit::warden as support;

use aromba_warden::policy::{ALLOW, Requester, Table, check};
use aromba_warden_proto::{Request, Response};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

const STRIPE: &str = "sk_live_4eC39HqLyjWDarjtT1zdp7dc";
const DB_PASSWORD: &str = "SuperSecretPw123";
const ASSIGNED: &str = "Hunter2Hunter2Secret";

fn secrets() -> [&'static str; 3] {
    [STRIPE, DB_PASSWORD, ASSIGNED]
}

/// The engine's answers, every text field of which holds a secret.
fn body(path: &str) -> Option<String> {
    let command = format!("app --token={ASSIGNED} --stripe {STRIPE}");
    let url = format!("postgres://app:{DB_PASSWORD}@db/app");
    if path.contains("/containers/json") {
        return Some(
            serde_json::json!([{
                "Id": "a".repeat(64),
                "Names": ["/db"],
                "Image": "postgres",
                "ImageID": format!("sha256:{}", "b".repeat(64)),
                "Command": command,
                "Created": 1_700_000_000u64,
                "Ports": [],
                "Labels": {"DATABASE_URL": url, "API_KEY": STRIPE},
                "State": "running",
                "Status": "Up 2 hours",
                "HostConfig": {},
                "NetworkSettings": {"Networks": {}},
                "Mounts": []
            }])
            .to_string(),
        );
    }
    if path.contains("/images/json") {
        return Some(
            serde_json::json!([{
                "Id": format!("sha256:{}", "c".repeat(64)),
                "RepoTags": ["app:latest"],
                "RepoDigests": [],
                "Created": 1_700_000_000u64,
                "Size": 1000,
                "SharedSize": -1,
                "Containers": -1,
                "Labels": {"DATABASE_URL": url, "API_KEY": STRIPE}
            }])
            .to_string(),
        );
    }
    if path.contains("/version") {
        return Some(
            serde_json::json!({
                "Version": "28.2.2",
                "ApiVersion": "1.45",
                "MinAPIVersion": "1.24",
                "GitCommit": "e6534b4",
                "GoVersion": "go1.24.3",
                "Os": "linux",
                "Arch": "amd64",
                "KernelVersion": "6.1.0",
                "Platform": {"Name": command},
                "Components": [{"Name": "Engine", "Version": "28.2.2", "Details": {"Url": url}}]
            })
            .to_string(),
        );
    }
    if path.contains("/info") {
        return Some(
            serde_json::json!({
                "ID": "x",
                "Containers": 1,
                "Images": 1,
                "Driver": "overlay2",
                "Name": "host",
                "ServerVersion": "28.2.2",
                "OperatingSystem": "Debian",
                "Labels": [format!("DATABASE_URL={url}")],
                "HttpProxy": url,
                "Swarm": {"NodeID": "", "LocalNodeState": "inactive"},
                "Warnings": [command]
            })
            .to_string(),
        );
    }
    None
}

/// A fake docker engine on a Unix socket: one answer per connection.
fn engine(socket: &Path) {
    let _ = std::fs::remove_file(socket);
    let listener = UnixListener::bind(socket).unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut first = String::new();
                if reader.read_line(&mut first).is_err() {
                    return;
                }
                loop {
                    let mut line = String::new();
                    match reader.read_line(&mut line) {
                        Ok(0) | Err(_) => return,
                        Ok(_) if line == "\r\n" => break,
                        Ok(_) => {}
                    }
                }
                let path = first.split(' ').nth(1).unwrap_or("");
                let head = first.starts_with("HEAD ");
                let (status, text, kind) = if path.contains("/_ping") {
                    ("200 OK", "OK".to_string(), "text/plain")
                } else {
                    match body(path) {
                        Some(b) => ("200 OK", b, "application/json"),
                        None => (
                            "404 Not Found",
                            r#"{"message":"no such thing"}"#.to_string(),
                            "application/json",
                        ),
                    }
                };
                let _ = write!(
                    conn,
                    "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nApi-Version: 1.45\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
                    text.len(),
                    if head { "" } else { text.as_str() }
                );
            });
        }
    });
}

/// Every name docker's contexts answer to that a template could reach:
/// the placeholders, the methods behind them (MarshalJSON among them),
/// and the structs that print whole.
fn names() -> Vec<String> {
    // docker's documented placeholders of ps, images, stats, system df,
    // version and info (stated here apart from the policy's list)...
    let mut v: Vec<String> = "ID Image Command CreatedAt RunningFor Ports State Status Size Names \
         Labels Mounts Networks LocalVolumes Repository Tag Digest CreatedSince Containers \
         SharedSize UniqueSize VirtualSize Container Name CPUPerc MemUsage MemPerc NetIO BlockIO \
         PIDs Type TotalCount Active Reclaimable Client.Version Client.APIVersion \
         Client.GoVersion Client.GitCommit Client.BuildTime Client.Os Client.Arch \
         Client.Context Server.Version Server.APIVersion Server.MinAPIVersion Server.GitCommit \
         Server.GoVersion Server.Os Server.Arch Server.KernelVersion Server.BuildTime \
         ServerVersion OperatingSystem OSType OSVersion Architecture KernelVersion NCPU MemTotal \
         DockerRootDir Driver LoggingDriver CgroupDriver CgroupVersion ContainersRunning \
         ContainersPaused ContainersStopped Images Warnings Swarm.LocalNodeState Swarm.NodeID \
         Swarm.NodeAddr"
        .split_whitespace()
        .map(String::from)
        .collect();
    // ...and what else their contexts answer to.
    for extra in [
        "MarshalJSON",
        "Label",
        "Platform",
        "Client",
        "Server",
        "Server.Components",
        "Server.Platform",
        "Server.Platform.Name",
        "Swarm",
        "Plugins",
        "Runtimes",
        "RegistryConfig",
        "HTTPProxy",
        "ClientInfo",
        "Header",
        "Labels.MarshalJSON",
        "Command.String",
        "Names.MarshalJSON",
    ] {
        v.push(extra.to_string());
    }
    v
}

/// The text, and every run of byte numbers (`[123 34 …]`) decoded.
fn readings(text: &str) -> Vec<String> {
    let mut out = vec![text.to_string()];
    for (i, _) in text.match_indices('[') {
        let rest = &text[i + 1..];
        let Some(end) = rest.find(']') else { continue };
        let bytes: Option<Vec<u8>> = rest[..end]
            .split(' ')
            .map(|n| n.parse::<u8>().ok())
            .collect();
        if let Some(b) = bytes
            && b.len() > 4
        {
            out.push(String::from_utf8_lossy(&b).into_owned());
        }
    }
    out
}

fn docker() -> PathBuf {
    let rule = ALLOW.iter().find(|r| r.cmd == "docker").unwrap();
    aromba_warden::exec::pick_binary("docker", rule.bins)
        .expect("the docker client is installed (the engine is faked here)")
}

#[test]
fn no_docker_template_the_policy_accepts_prints_a_planted_secret_in_any_encoding() {
    let dir = std::env::temp_dir().join(format!("aromba-docker-fmt-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("config")).unwrap();
    let socket = dir.join("engine.sock");
    engine(&socket);
    let docker = docker();
    let verbs: [&[&str]; 4] = [
        &["ps", "--no-trunc"],
        &["images", "--no-trunc"],
        &["version"],
        &["info"],
    ];
    let mut ran = 0usize;
    let mut seen_raw = 0usize;
    for verb in verbs {
        for name in names() {
            let template = format!("{{{{.{name}}}}}");
            let mut args: Vec<String> = verb.iter().map(|s| s.to_string()).collect();
            args.push("--format".into());
            args.push(template.clone());
            if check(Table::Allow, "docker", &args, &Requester::Warden).is_err() {
                continue;
            }
            let out = assert_cmd::Command::new(&docker)
                .args(&args)
                .env_clear()
                .env("DOCKER_HOST", format!("unix://{}", socket.display()))
                .env("DOCKER_CONFIG", dir.join("config"))
                .timeout(std::time::Duration::from_secs(60))
                .output()
                .unwrap();
            ran += 1;
            let mut raw = out.stdout.clone();
            raw.extend_from_slice(&out.stderr);
            if secrets()
                .iter()
                .any(|s| String::from_utf8_lossy(&raw).contains(s))
            {
                seen_raw += 1;
            }
            let redacted = aromba_redact::redact(&raw).text;
            let redacted = String::from_utf8_lossy(&redacted);
            for reading in readings(&redacted) {
                for secret in secrets() {
                    assert!(
                        !reading.contains(secret),
                        "docker {args:?} passed the policy and printed {secret} past the redactor: {redacted}"
                    );
                }
            }
        }
    }
    // Not blind: the placeholders ran, and some printed a secret the
    // redactor then removed.
    assert!(ran >= 40, "only {ran} templates ran");
    assert!(
        seen_raw >= 2,
        "only {seen_raw} outputs held a planted secret"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Through a real Warden: the request that leaked is refused before docker runs.
#[test]
fn docker_ps_format_marshaljson_is_refused() {
    let w = support::Warden::start("docker-marshaljson", false, &[]);
    for template in [
        "{{.MarshalJSON}}",
        "{{ .MarshalJSON }}",
        "table {{.Names}} {{.MarshalJSON}}",
    ] {
        let r = w.ask(&Request::Read {
            cmd: "docker".into(),
            args: vec![
                "ps".into(),
                "--no-trunc".into(),
                "--format".into(),
                template.into(),
            ],
        });
        match r {
            Response::Refused { reason, .. } => {
                assert!(reason.contains("MarshalJSON"), "{reason}")
            }
            other => panic!("{template} was not refused: {other:?}"),
        }
    }
    assert!(!w.journal().contains("\"verdict\":\"allowed\""));
}
