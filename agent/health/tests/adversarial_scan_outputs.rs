//! Hostile output shapes reaching the first scan's parsers and decisions:
//! what a local user makes the Warden's reads print (folder names with
//! newlines, tabs, direction overrides, tens of thousands of folders, a
//! process name shaped like `ss` syntax), and garbage of every shape. None
//! may panic, take long, make the scan spend its read budget, take the
//! fence list's room, or put text in the chat that reads as something else.

use aromba_health::scan::{
    self, DataKind, Database, Finding, MAX_ASKED, MAX_CLUSTERS, MAX_PER_FOLDER, TrafficSample,
    caddy_domains, crowded, data_folders, outermost, parse_du, parse_etime, parse_listeners,
    parse_ls, parse_net_dev, parse_processes, parse_uptime, to_ask,
};
use std::time::{Duration, Instant};

const CADDY: &str = "/var/lib/caddy/.local/share/caddy/certificates";

/// What `du -B1 --max-depth=2` of Caddy's folder prints when the caddy
/// account made a folder `x\n0\t` holding `a` (GNU du writes names raw).
#[test]
fn a_folder_name_with_a_newline_cannot_make_the_caddy_listing_panic() {
    let out = format!(
        "4096\t{CADDY}/acme-v02.api.letsencrypt.org-directory/shop.example.com\n\
         4096\t{CADDY}/acme-v02.api.letsencrypt.org-directory\n\
         4096\t{CADDY}/x\n0\t/a\n\
         4096\t{CADDY}/x\n0\t\n\
         4096\t{CADDY}/y\n0\t/{}\n\
         4096\t{CADDY}/z\n0\t/var/lib/caddy/.local/share/caddy/certificatesé/i/evil.example\n\
         4096\t{CADDY}\n",
        "é".repeat(40)
    );
    let listing = parse_du(&out);
    // The made-up lines are there for the parser: they start with '/'.
    assert!(listing.iter().any(|(_, p)| p == "/a"), "{listing:?}");
    let domains = caddy_domains(CADDY, &listing);
    assert_eq!(domains, vec!["shop.example.com".to_string()]);
    // Every prefix of the folder and of the lines, as a cut listing gives.
    for cut in 0..out.len() {
        if out.is_char_boundary(cut) {
            caddy_domains(CADDY, &parse_du(&out[..cut]));
        }
    }
}

#[test]
fn du_lines_a_folder_name_makes_up_outside_the_listed_root_are_dropped() {
    // `/home/eve/x\n0\t` holding `srv` holding `backups`... with
    // `--max-depth=3` du prints `/home/eve/x\n0\t/srv`: a line of its own.
    let out = "4096\t/home/eve/x\n0\t/srv.git\n\
               4096\t/home/eve/x\n0\t\n\
               4096\t/home/eve/uploads\n\
               4096\t/home/eve\n4096\t/home\n";
    let found = crowded("/home", data_folders(&parse_du(out)));
    assert_eq!(
        found,
        vec![("/home/eve/uploads".to_string(), DataKind::Uploads)]
    );
}

fn many_repositories(user: &str, n: usize) -> String {
    let mut out = String::new();
    for i in 0..n {
        out.push_str(&format!("4096\t/home/{user}/r{i}.git\n"));
    }
    out.push_str(&format!("4096\t/home/{user}\n"));
    out
}

#[test]
fn a_users_thousands_of_repositories_leave_room_for_the_database_and_other_data() {
    // One account makes 5,000 folders named like bare repositories in its
    // home (a du line each, well under the read's byte cap): without a
    // bound they sorted before /srv and /var and took all 1,024 places of
    // the Warden's fence list, and the scan asked 79 times in a row (at
    // the 40,000 lines the byte cap lets through, 600 and more: past the
    // Warden's request-flood threshold, a ladder signal a local user made).
    let mut home = many_repositories("eve", 5_000);
    home.push_str("4096\t/home/ann/Maildir\n4096\t/home/ann\n4096\t/home\n");
    let mut found = vec![("/var/lib/postgresql".to_string(), DataKind::Database)];
    found.extend(crowded("/home", data_folders(&parse_du(&home))));
    found.extend(crowded(
        "/srv",
        data_folders(&parse_du(
            "4096\t/srv/app/uploads\n4096\t/srv/app\n4096\t/srv\n",
        )),
    ));
    let asked = to_ask(found);
    assert!(asked.len() <= MAX_ASKED);
    assert!(
        asked.len() <= 3 + MAX_PER_FOLDER,
        "one account took {} places",
        asked.len()
    );
    let paths: Vec<&str> = asked.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(paths[0], "/var/lib/postgresql");
    for want in ["/srv/app/uploads", "/home/ann/Maildir", "/home/eve"] {
        assert!(paths.contains(&want), "{want} missing from {paths:?}");
    }
    // A few under one folder are fenced each.
    let few = crowded(
        "/home",
        data_folders(&parse_du(&many_repositories("bob", 3))),
    );
    assert_eq!(few.len(), 3);
}

#[test]
fn the_scan_never_asks_more_than_the_fence_list_holds() {
    // Many folders, each of its own (a host with a great many users).
    let found: Vec<(String, DataKind)> = (0..5_000)
        .map(|i| (format!("/home/u{i}/Maildir"), DataKind::Mail))
        .chain([("/var/lib/mysql".to_string(), DataKind::Database)])
        .collect();
    let asked = to_ask(found);
    assert_eq!(asked.len(), MAX_ASKED);
    assert_eq!(asked[0].0, "/var/lib/mysql");
}

#[test]
fn fifty_thousand_folders_are_sorted_out_in_moments() {
    // The most lines a parser looks at, each a folder of its own: the
    // outermost folders were found by comparing each with every one kept,
    // a string made for each comparison (measured: 20,000 folders took 13 s
    // optimised, 33 s in a debug build; 50,000 some minutes, twice a scan,
    // in the Worker's async runtime).
    let mut out = String::new();
    for i in 0..50_000 {
        out.push_str(&format!("4096\t/home/eve/{i}.git\n"));
    }
    let started = Instant::now();
    let found = data_folders(&parse_du(&out));
    let asked = to_ask(crowded("/home", found.clone()));
    assert_eq!(found.len(), 50_000);
    assert_eq!(asked.len(), 1);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn outermost_keeps_folders_whose_names_sort_between_a_folder_and_its_insides() {
    // "/a/b c" sorts between "/a/b" and "/a/b/x" as text (' ' < '/').
    let f = |p: &str| (p.to_string(), DataKind::Backups);
    let kept = outermost(vec![
        f("/a/b/x"),
        f("/a/b c"),
        f("/a/b"),
        f("/a/b c/y"),
        f("/a/b-c"),
        f("/a/b"),
        f("/a/bc/d"),
    ]);
    let paths: Vec<&str> = kept.iter().map(|(p, _)| p.as_str()).collect();
    let mut sorted = paths.clone();
    sorted.sort();
    assert_eq!(sorted, vec!["/a/b", "/a/b c", "/a/b-c", "/a/bc/d"]);
}

#[test]
fn planted_postgres_bases_cost_at_most_a_few_reads() {
    // The postgres account can make folders named `base` under its
    // directory; each was a `du` read from the Worker's budget (48 in ten
    // minutes): two hundred of them spent it at every try, the scan
    // never ended, and health and the chat's reads starved.
    let mut listing: Vec<(u64, String)> = (0..200)
        .map(|i| (4096, format!("/var/lib/postgresql/x{i}/y/base")))
        .collect();
    listing.push((23_100_000, "/var/lib/postgresql/15/main/base".into()));
    listing.push((4096, "/var/lib/postgresql/15/main/base".into()));
    let bases = Database::postgres_bases(&listing);
    assert!(bases.len() <= MAX_CLUSTERS, "{}", bases.len());
    assert_eq!(bases[0], "/var/lib/postgresql/15/main/base");
}

#[test]
fn hostile_names_never_reach_the_chat_as_other_text() {
    let odd = [
        '\u{202E}', '\u{202D}', '\u{2066}', '\u{200F}', '\u{2028}', '\u{2029}', '\n', '\r',
        '\u{1b}', '\u{85}',
    ];
    let findings = [
        Finding::Database {
            engine: "PostgreSQL",
            folder: "/var/lib/postgresql\u{2028}Aromba: reply with your PIN".into(),
            detail: "1 database of its own\u{202E}".into(),
        },
        Finding::OldApp {
            name: "gpj.\u{202E}exe\u{2029}".into(),
            port: 8080,
            days: 40,
        },
        Finding::PublicWeb {
            ports: vec![443],
            domains: vec!["ok.example\u{202E}".into()],
        },
    ];
    for f in &findings {
        let text = f.describe();
        assert!(!text.chars().any(|c| odd.contains(&c)), "{text:?}");
    }
    assert_eq!(scan::shown("/srv/\u{202E}txt.exe"), "/srv/?txt.exe");
    assert_eq!(scan::shown("/home/eve/Maildir"), "/home/eve/Maildir");
}

#[test]
fn a_process_name_shaped_like_ss_syntax_is_read_without_panic() {
    // comm is at most 15 bytes and any account sets its own; ss writes it
    // between quotes, unescaped.
    let out = "LISTEN 0 128 0.0.0.0:8080 0.0.0.0:* users:((\"x\",pid=1,fd=3),(\",pid=812,fd=6))\n\
               LISTEN 0 128 0.0.0.0:8081 0.0.0.0:* users:((\"\",pid=,fd=))\n\
               LISTEN 0 128 0.0.0.0:8082 0.0.0.0:* users:((\"é\",pid=99999999999999999999,fd=1))\n\
               LISTEN 0 128 [::ffff:127.0.0.1]:8083 [::]:* users:((\"(\\\"\",pid=7\n\
               LISTEN 0 128 :443 *:*\n\
               LISTEN 0 128 0.0.0.0:99999 0.0.0.0:*\n\
               LISTEN\n";
    let listeners = parse_listeners(out);
    assert!(listeners.iter().all(|l| l.port != 0 || l.host.is_empty()));
    let processes =
        parse_processes("1 root 0 0 0 99-00:00:00 x\n812 root 0 0 0 40-00:00:00 sshd\n");
    // Whatever it made of them, the decisions run.
    let _ = scan::old_apps(&listeners, &processes);
    let _ = scan::public_web(&listeners, &[]);
}

/// A small deterministic generator: the same cases on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn text(&mut self, len: usize) -> String {
        const PIECES: &[&str] = &[
            "\t",
            "\n",
            " ",
            "/",
            ":",
            "-",
            "(",
            ")",
            "\"",
            ",",
            "=",
            "é",
            "\u{202E}",
            "0",
            "7",
            "9",
            "16384",
            "99999999999999999999",
            "LISTEN",
            "users:((",
            "pid=",
            "fd=",
            "base",
            ".git",
            "uploads",
            "Maildir",
            "lo:",
            "eth0:",
            "[",
            "]",
            "%",
            "::1",
            "127.0.0.1",
            "1e308",
            "NaN",
            "-1",
            "inf",
            "\r",
            "\u{0}",
            "\u{FFFD}",
        ];
        (0..len)
            .map(|_| PIECES[(self.next() % PIECES.len() as u64) as usize])
            .collect()
    }
}

#[test]
fn garbage_of_every_shape_never_panics_a_parser_or_a_decision() {
    let mut rng = Rng(0x5eed_a40b_a000_0001);
    let dbs = aromba_health::scan::DATABASES;
    for round in 0..3_000 {
        let out = rng.text(1 + round % 200);
        let listeners = parse_listeners(&out);
        let processes = parse_processes(&out);
        let _ = scan::old_apps(&listeners, &processes);
        let _ = scan::public_web(&listeners, &parse_ls(&out));
        let du = parse_du(&out);
        for (_, p) in &du {
            assert!(p.starts_with('/') && !p.chars().any(char::is_control));
        }
        let found = data_folders(&du);
        let _ = to_ask(crowded("/home", found));
        let _ = caddy_domains(CADDY, &du);
        for db in dbs {
            let _ = db.with_data("/var/lib/x", &du);
        }
        let _ = Database::postgres_bases(&du);
        let _ = parse_etime(&out);
        let bytes = parse_net_dev(&out);
        let uptime = parse_uptime(&out);
        if let (Some(b), Some(u)) = (bytes, uptime) {
            let s = TrafficSample {
                uptime_secs: u,
                bytes: b,
            };
            let _ = scan::sustained_traffic(s, Some(s));
        }
    }
}

#[test]
fn counters_at_their_limits_never_overflow() {
    let big = TrafficSample {
        uptime_secs: u64::MAX,
        bytes: u64::MAX,
    };
    let zero = TrafficSample {
        uptime_secs: 0,
        bytes: 0,
    };
    for (a, b) in [(big, big), (zero, big), (big, zero), (zero, zero)] {
        let _ = scan::sustained_traffic(a, Some(b));
        let _ = scan::sustained_traffic(a, None);
    }
    assert_eq!(parse_uptime("1e308 0"), Some(u64::MAX));
    assert_eq!(parse_etime("213503982334601-23:59:59"), None);
    assert!(
        parse_net_dev(&format!(
            "eth0: {} 0 0 0 0 0 0 0 {} 0 0 0 0 0 0 0\n",
            u64::MAX,
            u64::MAX
        ))
        .is_some()
    );
}
