//! A caged skill chore with network attacks the Warden's egress proxy
//! from inside its own network namespace, through a real Warden: the
//! declared host is reached (a loopback server standing for it through
//! the Warden's resolver in tests); another name, an IP literal, another
//! port, IPv6, a request other than CONNECT, a ClientHello naming another
//! server, a declared name resolving to the metadata service or a private
//! network, the host's loopback services and UDP to port 53 are all
//! refused, and each connection through the proxy is journaled. A host
//! the owner names by a setting is reached only as set, with the PIN, and
//! the one it named before is refused once it changes.

use aromba_testkit::skills::{Publisher, bundle_file, chore, manifest};
use aromba_testkit::warden::Warden;
use aromba_warden::egress::{Resolver, hello::client_hello};
use aromba_warden::server::ServeOptions;
use aromba_warden_proto::{Request, Response};
use serde_json::json;
use std::io::{Read, Write};
use std::net::{IpAddr, TcpListener};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

const PIN: &str = "4729135";

/// How often the Warden looked up `acme.example.org`.
static ACME_LOOKUPS: AtomicUsize = AtomicUsize::new(0);

fn lookup(name: &str) -> Vec<IpAddr> {
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    match name {
        "acme.example.org" => {
            ACME_LOOKUPS.fetch_add(1, Ordering::SeqCst);
            vec![ip("127.0.0.1")]
        }
        "meta.example.org" => vec![ip("169.254.169.254")],
        "s3.example.org" | "box.example.org" => vec![ip("127.0.0.1")],
        "inside.example.org" => vec![ip("10.0.0.7"), ip("::1")],
        _ => vec![],
    }
}

fn test_resolver(o: &mut ServeOptions) {
    o.egress_resolver = Resolver::Fixed {
        lookup: Arc::new(lookup),
        reachable: vec!["127.0.0.1".parse().unwrap()],
    };
}

/// A loopback server standing for the declared host: what each connection
/// sent it, and it answers one line.
fn upstream() -> (u16, Arc<Mutex<Vec<Vec<u8>>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let got = Arc::new(Mutex::new(Vec::new()));
    let seen = got.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let seen = seen.clone();
            std::thread::spawn(move || {
                let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(5)));
                let mut buf = vec![0u8; 4096];
                let n = s.read(&mut buf).unwrap_or(0);
                seen.lock().unwrap().push(buf[..n].to_vec());
                let _ = s.write_all(b"UPSTREAM-SAYS-HELLO\n");
            });
        }
    });
    (port, got)
}

/// `bytes` as a `printf` format of `\xNN` escapes.
fn escaped(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("\\x{b:02x}")).collect()
}

/// A bash snippet: a CONNECT for `target` with the ClientHello `sni`
/// (none: no hello), printing `label` and the two lines it read.
fn attempt(label: &str, request: &str, sni: Option<&str>) -> String {
    let hello = sni
        .map(|n| format!("printf '{}' >&3\n", escaped(&client_hello(n))))
        .unwrap_or_default();
    format!(
        "if exec 3<>/dev/tcp/127.0.0.1/$port; then\n  printf '{request}\\r\\n\\r\\n' >&3\n  IFS= read -r -t 5 status <&3\n  IFS= read -r -t 5 blank <&3\n  {hello}  IFS= read -r -t 5 reply <&3\n  echo \"{label}|${{status%$'\\r'}}|$reply\"\n  exec 3<&-\nelse echo \"{label}|no connection|\"; fi\n"
    )
}

#[test]
fn a_caged_skill_chore_reaches_its_declared_host_through_the_proxy_and_nothing_else() {
    let w = Warden::start_with("skill-egress", true, &[], test_resolver);
    let (port, got) = upstream();
    let acme = Publisher::new("acme-tools");
    acme.trust(&w);
    assert!(matches!(
        w.control(&Request::SetPin { pin: PIN.into() }),
        Response::Noted { .. }
    ));
    let mut m = manifest("netty", "1.0.0", "acme-tools", &w.touched, &["netty"]);
    m["hosts"] = json!([
        {"name": "acme.example.org", "port": port, "why": "the declared host"},
        {"name": "meta.example.org", "port": port, "why": "resolves to the metadata service"},
        {"name": "inside.example.org", "port": port, "why": "resolves to a private network"},
    ]);
    let out = w.touched.join("out");
    let mut program = String::from("port=${https_proxy##*:}\n");
    for (label, request, sni) in [
        (
            "declared",
            format!("CONNECT acme.example.org:{port} HTTP/1.1"),
            Some("acme.example.org".to_string()),
        ),
        (
            "other-name",
            format!("CONNECT evil.example.org:{port} HTTP/1.1"),
            Some("evil.example.org".into()),
        ),
        (
            "ip-literal",
            format!("CONNECT 127.0.0.1:{port} HTTP/1.1"),
            Some("acme.example.org".into()),
        ),
        (
            "ipv6",
            format!("CONNECT [::1]:{port} HTTP/1.1"),
            Some("acme.example.org".into()),
        ),
        (
            "other-port",
            "CONNECT acme.example.org:22 HTTP/1.1".to_string(),
            Some("acme.example.org".into()),
        ),
        (
            "plain-get",
            format!("GET http://acme.example.org:{port}/ HTTP/1.1"),
            None,
        ),
        (
            "other-sni",
            format!("CONNECT acme.example.org:{port} HTTP/1.1"),
            Some("evil.example.org".into()),
        ),
        (
            "metadata",
            format!("CONNECT meta.example.org:{port} HTTP/1.1"),
            Some("meta.example.org".into()),
        ),
        (
            "private",
            format!("CONNECT inside.example.org:{port} HTTP/1.1"),
            Some("inside.example.org".into()),
        ),
    ] {
        program.push_str(&attempt(label, &request, sni.as_deref()));
    }
    // Around the proxy: the host's loopback service, UDP to a resolver.
    program.push_str(&format!(
        "if (exec 4<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null; then echo 'host-loopback|reached|'; else echo 'host-loopback|no connection|'; fi\n"
    ));
    program.push_str(
        "if (echo x > /dev/udp/8.8.8.8/53) 2>/dev/null; then echo 'udp-53|sent|'; else echo 'udp-53|not sent|'; fi\n",
    );
    let script = chore(
        "netty",
        "green",
        &w.touched,
        "# network: yes\n",
        &format!(
            "[ \"$1\" = --dry-run ] && exit 0\nbash > {} 2>&1 <<'BASH'\n{program}BASH",
            out.display()
        ),
    );
    let path = bundle_file(
        &w,
        "netty",
        &acme.bundle(m, &[("chores/netty.sh", &script)]),
    );
    let Response::SkillShown { sha256, .. } =
        w.control(&Request::SkillCheck { path: path.clone() })
    else {
        panic!()
    };
    let r = w.control(&Request::SkillInstall {
        path,
        sha256,
        pin: Some(PIN.into()),
    });
    assert!(matches!(r, Response::Noted { .. }), "{r:?}");
    w.dry_run_shown("netty");
    let before = ACME_LOOKUPS.load(Ordering::SeqCst);
    let r = w.control(&Request::ChoreRun {
        name: "netty".into(),
        dry_run: false,
    });
    assert!(matches!(r, Response::Receipt { ok: true, .. }), "{r:?}");
    let text = std::fs::read_to_string(&out).unwrap();
    let line = |label: &str| -> String {
        text.lines()
            .find(|l| l.starts_with(&format!("{label}|")))
            .unwrap_or_else(|| panic!("no {label} line in {text}"))
            .to_string()
    };
    assert_eq!(
        line("declared"),
        "declared|HTTP/1.1 200 Connection established|UPSTREAM-SAYS-HELLO",
        "{text}"
    );
    for refused in [
        "other-name",
        "ip-literal",
        "ipv6",
        "other-port",
        "plain-get",
    ] {
        assert!(
            line(refused).starts_with(&format!("{refused}|HTTP/1.1 403 Forbidden|")),
            "{text}"
        );
    }
    // Let into the tunnel, closed before anything reached a host.
    for closed in ["other-sni", "metadata", "private"] {
        assert_eq!(
            line(closed),
            format!("{closed}|HTTP/1.1 200 Connection established|"),
            "{text}"
        );
    }
    assert_eq!(line("host-loopback"), "host-loopback|no connection|");
    assert_eq!(line("udp-53"), "udp-53|not sent|");
    // Only the declared connection reached the host, with its hello whole,
    // and its name was looked up once: dialed as checked.
    let got = got.lock().unwrap();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0], client_hello("acme.example.org"));
    assert_eq!(ACME_LOOKUPS.load(Ordering::SeqCst) - before, 1);
    let journal = w.journal();
    let egress: Vec<&str> = journal
        .lines()
        .filter(|l| l.contains("\"egress\""))
        .collect();
    assert_eq!(egress.len(), 9, "{egress:#?}");
    assert_eq!(
        egress
            .iter()
            .filter(|l| l.contains("\"verdict\":\"allowed\""))
            .count(),
        1
    );
    for (what, why) in [
        ("evil.example.org", "not a host its manifest declares"),
        ("127.0.0.1", "an IP address"),
        ("[::1]", "an IP address"),
        ("acme.example.org:22", "not a host its manifest declares"),
        ("GET", "only CONNECT is served"),
        ("acme.example.org", "its TLS names evil.example.org"),
        (
            "meta.example.org",
            "resolves to 169.254.169.254: link-local",
        ),
        (
            "inside.example.org",
            "resolves to 10.0.0.7: a private network",
        ),
    ] {
        assert!(
            egress
                .iter()
                .any(|l| l.contains(what) && l.contains(why) && l.contains("\"refused\"")),
            "no refused line for {what} ({why}): {egress:#?}"
        );
    }
}

#[test]
fn a_host_named_by_a_setting_is_reached_only_as_set_with_the_pin_and_not_after_it_changes() {
    let w = Warden::start_with("skill-egress-setting", true, &[], test_resolver);
    let (port, got) = upstream();
    let acme = Publisher::new("acme-tools");
    acme.trust(&w);
    assert!(matches!(
        w.control(&Request::SetPin { pin: PIN.into() }),
        Response::Noted { .. }
    ));
    let mut m = manifest("store", "1.0.0", "acme-tools", &w.touched, &["store"]);
    m["settings"] = json!([{"name": "S3_HOST", "kind": "host", "why": "your storage"}]);
    m["hosts"] = json!([{"name": "@S3_HOST", "port": port, "why": "the storage you name"}]);
    let out = w.touched.join("out");
    let mut program = String::from("port=${https_proxy##*:}\n");
    for name in ["box.example.org", "s3.example.org"] {
        program.push_str(&attempt(
            name,
            &format!("CONNECT {name}:{port} HTTP/1.1"),
            Some(name),
        ));
    }
    let script = chore(
        "store",
        "green",
        &w.touched,
        "# network: yes\n",
        &format!(
            "[ \"$1\" = --dry-run ] && exit 0\nbash > {} 2>&1 <<'BASH'\n{program}BASH",
            out.display()
        ),
    );
    let path = bundle_file(
        &w,
        "store",
        &acme.bundle(m, &[("chores/store.sh", &script)]),
    );
    let Response::SkillShown {
        sha256,
        needs_pin,
        text,
        ..
    } = w.control(&Request::SkillCheck { path: path.clone() })
    else {
        panic!()
    };
    assert!(!needs_pin, "no host is named yet");
    assert!(
        text.contains(&format!(
            "the host you set as S3_HOST, port {port} — the storage you name"
        )),
        "{text}"
    );
    let r = w.control(&Request::SkillInstall {
        path,
        sha256,
        pin: None,
    });
    assert!(matches!(r, Response::Noted { .. }), "{r:?}");
    let set = |value: &str, pin: Option<&str>| {
        w.control(&Request::SkillSet {
            name: "store".into(),
            setting: "S3_HOST".into(),
            value: aromba_warden_proto::SettingValue::new(value),
            pin: pin.map(Into::into),
        })
    };
    let run = || {
        let r = w.control(&Request::ChoreRun {
            name: "store".into(),
            dry_run: false,
        });
        assert!(matches!(r, Response::Receipt { ok: true, .. }), "{r:?}");
        std::fs::read_to_string(&out).unwrap()
    };
    // Without the PIN, or with a wrong one, or an address: nothing kept.
    for (value, pin) in [
        ("box.example.org", None),
        ("box.example.org", Some("1111111")),
        ("127.0.0.1", Some(PIN)),
    ] {
        assert!(
            matches!(set(value, pin), Response::Refused { .. }),
            "{value} {pin:?}"
        );
    }
    assert!(!w.layout().state_dir.join("skill-store.settings").exists());
    assert!(matches!(
        set("box.example.org", Some(PIN)),
        Response::Noted { .. }
    ));
    w.dry_run_shown("store");
    let text = run();
    assert!(
        text.contains("box.example.org|HTTP/1.1 200 Connection established|UPSTREAM-SAYS-HELLO"),
        "{text}"
    );
    assert!(
        text.contains("s3.example.org|HTTP/1.1 403 Forbidden|"),
        "{text}"
    );
    // Changed: the new host reached, the old one no longer.
    assert!(matches!(
        set("s3.example.org", Some(PIN)),
        Response::Noted { .. }
    ));
    let text = run();
    assert!(
        text.contains("s3.example.org|HTTP/1.1 200 Connection established|UPSTREAM-SAYS-HELLO"),
        "{text}"
    );
    assert!(
        text.contains("box.example.org|HTTP/1.1 403 Forbidden|"),
        "{text}"
    );
    assert_eq!(got.lock().unwrap().len(), 2);
    let Response::Skills { skills, .. } = w.control(&Request::Skills) else {
        panic!()
    };
    assert_eq!(
        skills[0].network,
        format!(
            "only s3.example.org:{port}, through the Warden's proxy, each connection journaled"
        )
    );
}
