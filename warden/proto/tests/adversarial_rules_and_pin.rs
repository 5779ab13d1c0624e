//! A hostile model, Worker or chat against the contract crate's refusal
//! rules (`aromba_warden_proto::rules`: the deny list and the secret
//! paths, one copy for the Warden and the Worker's assistant) and against
//! the PIN type (`aromba_warden_proto::Pin`, which must never print).
//!
//! An attack the code holds (or was fixed to hold) is a plain test; a
//! limit left on purpose is `#[ignore]`d, marked LIMIT with why.

use aromba_warden_proto::rules::{
    DENY, SECRET_DIRS, SECRET_NAMES, SECRET_PREFIXES, SecretRule, as_proc_self, command_line,
    deny_hit, glob, secret_rule,
};
use aromba_warden_proto::{Pin, Request, decode_request, decode_request_in, encode_request};

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// The arguments the assistant's `disk_usage` tool sends for `path`
/// (`agent/src/assistant/tools.rs`, `Tool::read`).
fn du(path: &str) -> Vec<String> {
    strings(&["-x", "-h", "--max-depth=1", path])
}

/// The Worker's own normal form of a written path before it judges it
/// (`agent/src/assistant/tools.rs`, `path`: empty and `.` components
/// dropped). For a path without links this is also what `canonicalize`
/// gives, which is what the Worker then sends (`conversation.rs`,
/// `tool.at(real)`) and what the Warden judges again after its own
/// resolution.
fn normal(p: &str) -> String {
    p.split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .fold(String::new(), |acc, c| acc + "/" + c)
}

// ---------------------------------------------------------------------
// The rules
// ---------------------------------------------------------------------

// The break this round found — a path the deny list's strings miss as
// written (`/etc/ssh/./sshd_config`, a link) reached the Warden resolved,
// as a hit it counts — is fixed in the Worker (`conversation.rs` judges
// the request again as the Warden will get it) and held there:
// `agent/tests/adversarial_model_ladder/in_process.rs`,
// `a_path_that_hits_the_deny_list_only_resolved_never_reaches_the_warden`.

/// Why the Worker judges the resolved request, held as a plain test: the deny
/// list is a set of strings, so a doubled slash or a `.` component walks
/// past it, and the same path written plainly is a hit.
#[test]
fn the_deny_list_reads_strings_so_a_doubled_slash_walks_past_it() {
    assert_eq!(
        deny_hit("du", &du("/etc/aromba/worker")),
        Some("protected-path")
    );
    assert_eq!(deny_hit("du", &du("/etc//aromba/worker")), None);
    assert_eq!(
        deny_hit("ls", &strings(&["-la", "/etc/ssh/sshd_config"])),
        Some("protected-path")
    );
    assert_eq!(
        deny_hit("ls", &strings(&["-la", "/etc/ssh/./sshd_config"])),
        None
    );
}

/// Where the deny list is walked past, the secret paths still hold once
/// the path is in its normal form (which the Warden's `canonicalize` and
/// the Worker's `normal` both give): every secret prefix, folder and name,
/// written with doubled slashes and `.` components, is caught after
/// normalising. (Unnormalised, `secret_rule("//etc/shadow")` is `None`:
/// the function trusts its callers to have resolved the path.)
#[test]
fn secret_paths_hold_through_doubled_slashes_and_dots_once_normalised() {
    let mut written = Vec::new();
    for prefix in SECRET_PREFIXES {
        let p = format!("/{}", prefix.replace('/', "//./"));
        written.push(p);
    }
    for dir in SECRET_DIRS {
        written.push(format!("/home//ann/./{dir}/x"));
    }
    for name in SECRET_NAMES {
        written.push(format!("/srv/./app//{}", name.replace('*', "x")));
    }
    for p in written {
        let judged = secret_rule(&p).or_else(|| secret_rule(&normal(&p)));
        assert!(judged.is_some(), "{p} is not judged secret");
    }
}

/// `/proc/<pid>/…` in every form the kernel answers to is judged as
/// `/proc/self/…`: a task's folder, a pid past 2^22, the process's root,
/// cwd and fds, the folder alone with and without its slash.
#[test]
fn every_proc_pid_form_is_judged_as_proc_self() {
    for p in [
        "/proc/1",
        "/proc/1/",
        "/proc/1/environ",
        "/proc/1/cmdline",
        "/proc/1/mem",
        "/proc/4194304/environ",
        "/proc/1/task/1/environ",
        "/proc/1/task/77/root/etc/hostname",
        "/proc/1/root",
        "/proc/1/root/etc/hostname",
        "/proc/1/cwd",
        "/proc/1/fd/3",
        "/proc/1/map_files",
        "/proc/thread-self",
        "/proc/thread-self/environ",
        "/proc/self/fd/0",
    ] {
        assert!(
            matches!(
                secret_rule(p),
                Some(SecretRule::Prefix("/proc/self" | "/proc/thread-self"))
            ),
            "{p}: {:?}",
            secret_rule(p)
        );
    }
    // Not a pid: the kernel's own files stay readable.
    for p in [
        "/proc/meminfo",
        "/proc/net/dev",
        "/proc/sys/kernel/hostname",
    ] {
        assert_eq!(secret_rule(p), None, "{p}");
        assert_eq!(as_proc_self(p), None, "{p}");
    }
}

/// The deny list's `/proc/<pid>/…` rule and the secret prefix agree on
/// what a pid is: digits only.
#[test]
fn a_pid_is_digits_for_both_the_deny_list_and_the_secret_paths() {
    for p in ["/proc/12/environ", "/proc/12/cmdline", "/proc/12/mem"] {
        assert_eq!(
            deny_hit("ls", &strings(&["-la", p])),
            Some("secret-path"),
            "{p}"
        );
        assert!(secret_rule(p).is_some(), "{p}");
    }
    assert_eq!(as_proc_self("/proc/1a/environ"), None);
    assert_eq!(as_proc_self("/proc/-1/environ"), None);
}

/// A small reference matcher for `*`-only globs: the glob is a regex of
/// literal bytes and `.*`, anchored.
fn reference(pattern: &[u8], name: &[u8]) -> bool {
    // Dynamic programming over (pattern, name) prefixes.
    let (p, n) = (pattern.len(), name.len());
    let mut m = vec![vec![false; n + 1]; p + 1];
    m[0][0] = true;
    for i in 1..=p {
        for j in 0..=n {
            m[i][j] = if pattern[i - 1] == b'*' {
                m[i - 1][j] || (j > 0 && m[i][j - 1])
            } else {
                j > 0 && m[i - 1][j - 1] && pattern[i - 1] == name[j - 1]
            };
        }
    }
    m[p][n]
}

/// The glob agrees with a reference matcher on every pattern and name of
/// up to five bytes over a small alphabet (with `*` in names too, and
/// patterns of several stars), and on the real list against names that
/// differ from a match by one byte.
#[test]
fn the_glob_agrees_with_a_reference_matcher() {
    let alphabet = [b'a', b'b', b'*', b'.'];
    let mut all: Vec<Vec<u8>> = vec![vec![]];
    let mut level: Vec<Vec<u8>> = vec![vec![]];
    for _ in 0..5 {
        let mut next = Vec::new();
        for w in &level {
            for c in alphabet {
                let mut v = w.clone();
                v.push(c);
                next.push(v);
            }
        }
        all.extend(next.iter().cloned());
        level = next;
    }
    let mut checked = 0u64;
    for p in &all {
        for n in all.iter().filter(|n| n.len() <= 4) {
            assert_eq!(
                glob(p, n),
                reference(p, n),
                "{:?} vs {:?}",
                String::from_utf8_lossy(p),
                String::from_utf8_lossy(n)
            );
            checked += 1;
        }
    }
    assert!(checked > 100_000);
    for pattern in SECRET_NAMES {
        let base = pattern.replace('*', "x");
        for name in [
            base.clone(),
            format!("{base}x"),
            format!("x{base}"),
            base[1..].to_string(),
        ] {
            assert_eq!(
                glob(pattern.as_bytes(), name.as_bytes()),
                reference(pattern.as_bytes(), name.as_bytes()),
                "{pattern} vs {name}"
            );
        }
    }
}

/// A non-UTF-8-looking name cannot reach the glob (the rules take `&str`),
/// and a multi-byte one is matched byte for byte: `*` takes a split
/// character whole, a look-alike is another name.
#[test]
fn multibyte_names_are_matched_byte_for_byte() {
    assert!(glob("*secret*".as_bytes(), "é-secret-é".as_bytes()));
    // A Cyrillic `е` in `.еnv` is not `.env`: the name is not a secret
    // name — and the file it names is not `.env` either.
    assert!(!glob(".env*".as_bytes(), ".еnv".as_bytes()));
}

/// Well-known files that hold passwords or a copy of `/etc/shadow` are not
/// secret paths: the Warden lists their names and sizes (`ls`, `du`) and,
/// more to the point, a chore that declares `reads:` of their folder sees
/// them in its cage, since a declared read hides only what `secret_rule`
/// covers (`warden/src/cage/mod.rs`, `secrets_under(r, false)`).
/// `/var/backups/shadow.bak` is what `/etc/cron.daily/passwd` (Ubuntu
/// 22.04's `passwd` package) copies `/etc/shadow` to, daily.
#[test]
fn well_known_password_files_are_secret_paths() {
    let missed: Vec<&str> = [
        "/var/backups/shadow.bak",
        "/var/backups/gshadow.bak",
        "/root/.pgpass",
        "/home/ann/.pgpass",
        "/root/.my.cnf",
        "/home/ann/.my.cnf",
        "/root/.bash_history",
        "/home/ann/.bash_history",
        "/home/ann/.npmrc",
        "/home/ann/.pypirc",
        "/root/.config/rclone/rclone.conf",
    ]
    .into_iter()
    .filter(|p| secret_rule(p).is_none())
    .collect();
    assert!(missed.is_empty(), "not secret paths: {missed:#?}");
}

/// The names are matched case and all: a key or a password file whose
/// name is in upper case is not covered. Linux names are case-sensitive,
/// so `SERVER.KEY` is another file than `server.key` — but no less a key.
/// Realism: low for keys (tools write lower case), higher for files named
/// after variables (`DB_PASSWORD`, `API_TOKEN`) outside `/run/secrets`.
#[test]
#[ignore = "LIMIT (left on purpose): SECRET_NAMES globs are case-sensitive (SERVER.KEY, DB_PASSWORD are not secret); matching without case would also hide, and make a ladder signal of, every TokenService or Keys folder"]
fn upper_case_secret_names_are_secret_paths() {
    let missed: Vec<&str> = [
        "/srv/tls/SERVER.KEY",
        "/srv/tls/site.PEM",
        "/srv/app/ID_RSA",
        "/srv/app/config/DB_PASSWORD",
        "/srv/app/config/API_TOKEN",
        "/srv/app/.ENV",
    ]
    .into_iter()
    .filter(|p| secret_rule(p).is_none())
    .collect();
    assert!(missed.is_empty(), "not secret paths: {missed:#?}");
}

/// A trailing slash, a folder at the end of the path, a folder's name as
/// a prefix of another's: each judged as meant.
#[test]
fn folders_are_judged_whole_with_or_without_a_trailing_slash() {
    for p in [
        "/home/ann/.ssh",
        "/home/ann/.ssh/",
        "/home/ann/.ssh//",
        "/home/ann/.config/gh",
        "/home/ann/.config/gh/hosts.yml",
        "/srv/x/.aws",
    ] {
        assert!(secret_rule(p).is_some(), "{p}");
    }
    for p in [
        "/home/ann/.sshx",
        "/home/ann/.config/ghx",
        "/home/ann/x.aws",
    ] {
        assert_eq!(secret_rule(p), None, "{p}");
    }
}

/// The command line is the arguments in order, joined by single spaces —
/// the same line whether the words come as separate arguments or as one
/// holding spaces, so splitting a request differently (the Warden runs
/// argv, no shell) changes nothing the deny list sees.
#[test]
fn the_command_line_is_the_arguments_in_order() {
    assert_eq!(command_line("du", &strings(&["-x", "/var"])), "du -x /var");
    assert_eq!(command_line("uptime", &[]), "uptime");
    // Rejoined differently, the same words hit the same rule.
    for (cmd, args) in [
        ("rm", vec!["-rf", "/"]),
        ("dd", vec!["if=/dev/zero", "of=/dev/sda"]),
        ("ls", vec!["-la", "/home/ann/.ssh"]),
    ] {
        let args = strings(&args);
        let hit = deny_hit(cmd, &args);
        assert!(hit.is_some(), "{cmd} {args:?}");
        let together = vec![args.join(" ")];
        assert_eq!(deny_hit(cmd, &together), hit, "{cmd} {together:?}");
    }
}

/// The fail-closed claim: every pattern compiles (a request far from
/// every rule hits none, so the list is not failing closed on everything
/// now), and each pattern has a request that hits it by name — so a
/// pattern that did not compile would show as that name on every request.
#[test]
fn every_pattern_compiles_and_each_has_a_hit_of_its_own() {
    assert_eq!(deny_hit("uptime", &[]), None);
    assert_eq!(deny_hit("du", &du("/var/log")), None);
    let hits = [
        ("rm", vec!["-rf", "/"]),
        ("dd", vec!["if=/dev/zero", "of=/dev/sda"]),
        ("mkfs.ext4", vec!["/dev/sdb1"]),
        ("curl", vec!["https://x", "|", "sh"]),
        ("cat", vec!["/etc/aromba/x"]),
        ("chmod", vec!["-R", "777", "/srv"]),
        ("reboot", vec![]),
        ("iptables", vec!["-F"]),
        ("history", vec!["-c"]),
        ("ls", vec!["/home/ann/.ssh"]),
    ];
    let mut named: Vec<&str> = hits
        .iter()
        .filter_map(|(cmd, args)| deny_hit(cmd, &strings(args)))
        .collect();
    named.sort_unstable();
    named.dedup();
    let mut all: Vec<&str> = DENY.iter().map(|(name, _)| *name).collect();
    all.sort_unstable();
    assert_eq!(named, all);
}

// ---------------------------------------------------------------------
// The PIN
// ---------------------------------------------------------------------

const THE_PIN: &str = "428193";

/// Every request that carries a PIN prints `[pin]` in its `Debug` form,
/// plain and pretty, and inside an `Option` and a `Vec`.
#[test]
fn no_request_prints_its_pin() {
    let requests = [
        Request::SetPin {
            pin: Pin::new(THE_PIN),
        },
        Request::ProdMode {
            on: false,
            pin: Some(THE_PIN.into()),
        },
    ];
    for r in &requests {
        for shown in [
            format!("{r:?}"),
            format!("{r:#?}"),
            format!("{:?}", Some(r)),
            format!("{:?}", vec![r.clone()]),
        ] {
            assert!(!shown.contains(THE_PIN), "{shown}");
            assert!(shown.contains("[pin]"), "{shown}");
        }
    }
}

/// A request decoded from its frame prints no PIN either: the PIN is
/// wrapped as it is read, before any error or `Debug` could see it.
#[test]
fn a_decoded_request_prints_no_pin() {
    for frame in [
        format!(r#"{{"type":"set_pin","pin":"{THE_PIN}"}}"#),
        format!(r#"{{"type":"prod_mode","on":false,"pin":"{THE_PIN}"}}"#),
    ] {
        let r = decode_request(frame.as_bytes()).expect("a request");
        assert!(!format!("{r:?}").contains(THE_PIN), "{r:?}");
        // …and the frame it came from is the one place it is written.
        assert!(
            String::from_utf8_lossy(&encode_request(&r)).contains(THE_PIN),
            "the PIN still travels"
        );
    }
}

/// Frames that carry the PIN and fail to decode, in every way the decoder
/// can fail: the error (its words and its `Debug`), which the Warden
/// journals and answers with (`malformed`, `paced`), never echoes it.
#[test]
fn no_decoding_error_echoes_a_pin() {
    let p = THE_PIN;
    let frames: Vec<Vec<u8>> = vec![
        // The PIN of the wrong type: a number, an array, an object.
        format!(r#"{{"type":"set_pin","pin":{p}}}"#).into_bytes(),
        format!(r#"{{"type":"set_pin","pin":[{p}]}}"#).into_bytes(),
        format!(r#"{{"type":"set_pin","pin":{{"v":"{p}"}}}}"#).into_bytes(),
        format!(r#"{{"type":"prod_mode","on":false,"pin":{p}}}"#).into_bytes(),
        format!(r#"{{"type":"prod_mode","on":false,"pin":{p}.5}}"#).into_bytes(),
        // A number too large to be one.
        format!(r#"{{"type":"set_pin","pin":{p}{}}}"#, "9".repeat(400)).into_bytes(),
        // Cut in the middle of the PIN; a bad escape in it; a raw control
        // byte in it; invalid UTF-8 in it; a lone surrogate in it.
        format!(r#"{{"type":"set_pin","pin":"{p}"#).into_bytes(),
        format!(r#"{{"type":"set_pin","pin":"{p}\q"}}"#).into_bytes(),
        format!("{{\"type\":\"set_pin\",\"pin\":\"{p}\u{1}\"}}").into_bytes(),
        [
            format!(r#"{{"type":"set_pin","pin":"{p}"#).into_bytes(),
            vec![0xff, b'"', b'}'],
        ]
        .concat(),
        format!(r#"{{"type":"set_pin","pin":"{p}\ud800"}}"#).into_bytes(),
        // Trailing bytes after a good object.
        format!(r#"{{"type":"set_pin","pin":"{p}"}} {p}"#).into_bytes(),
        format!(r#"{{"type":"set_pin","pin":"{p}"}}{{}}"#).into_bytes(),
        // A relay tap with a PIN: no relay tap carries one (every action
        // that needs it is approved in the Mini App, the PIN sealed).
        format!(
            r#"{{"type":"approve","action_id":"a","button":"approve","chat":"1","time":1,"signature":"s","pin":"{p}"}}"#
        )
        .into_bytes(),
        // A good PIN, then a field the kind does not have, or a bad lane.
        format!(r#"{{"type":"set_pin","pin":"{p}","extra":1}}"#).into_bytes(),
        format!(r#"{{"type":"set_pin","pin":"{p}","lane":"{p}"}}"#).into_bytes(),
        // The PIN read, then another field missing or wrong.
        format!(r#"{{"type":"prod_mode","pin":"{p}"}}"#).into_bytes(),
        format!(r#"{{"type":"prod_mode","on":"no","pin":"{p}"}}"#).into_bytes(),
        format!(
            r#"{{"type":"approve","action_id":"a","button":"approve","chat":"1","time":-1,"signature":"s","pin":"{p}"}}"#
        )
        .into_bytes(),
        format!(
            r#"{{"type":"approve","action_id":"a","button":"approve","chat":"1","time":1,"pin":"{p}"}}"#
        )
        .into_bytes(),
        // A PIN field on a kind that has none, and an unknown kind.
        format!(r#"{{"type":"ping","pin":"{p}"}}"#).into_bytes(),
        format!(r#"{{"type":"set-pin","pin":"{p}"}}"#).into_bytes(),
        // Not an object; no type.
        format!(r#"["set_pin","{p}"]"#).into_bytes(),
        format!(r#"{{"pin":"{p}"}}"#).into_bytes(),
        // Nested past serde_json's recursion limit after the PIN.
        format!(
            r#"{{"type":"set_pin","pin":"{p}","x":{}1{}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        )
        .into_bytes(),
    ];
    for frame in frames {
        for error in [
            decode_request(&frame).map(drop).err(),
            decode_request_in(&frame).map(drop).err(),
        ] {
            let error = error.unwrap_or_else(|| {
                panic!(
                    "decoded: {}",
                    String::from_utf8_lossy(&frame).replace(p, "[pin]")
                )
            });
            let shown = format!("{error} {error:?}");
            assert!(
                !shown.contains(p),
                "the error echoes the PIN: {}",
                shown.replace(p, "[PIN HERE]")
            );
        }
    }
}

/// The PIN's `Debug` hides even a PIN of the shape of its own mask, and
/// an empty one: nothing of the value shows, not its length either.
#[test]
fn the_pins_debug_shows_nothing_of_the_value() {
    for value in ["", "[pin]", "1", &"9".repeat(64), "pin: 428193"] {
        assert_eq!(format!("{:?}", Pin::new(value)), "[pin]");
    }
}
