//! A chore runs as uid 0 without capabilities, which still reads every
//! root-owned file the cage shows it: with the whole host bound read-only, a
//! hostile chore printed `/etc/ssl/private/*.key` and data under `/srv`
//! base64-encoded, past any redactor. The cage now shows only the system
//! directories, `/etc` with every secret in it hidden, the chore's touches
//! and what its header `reads:`. Each test plants real files in real host
//! paths (removed after) and runs a hostile `mine/` chore through a real
//! Warden and real bubblewrap. Needs root and bubblewrap.

use aromba_testkit::warden as support;

use aromba_warden::chores::catalog;
use aromba_warden::chores::header::Header;
use aromba_warden::chores::run::{Chore, Context, Mode, Origin, RunError, run};
use aromba_warden::layout::Layout;
use aromba_warden_proto::{Request, Response};
use std::path::{Path, PathBuf};
use std::time::Duration;
use support::Warden;

/// These tests plant files and directories in the host's own `/etc`, which
/// every cage walks for secrets: one planted and removed while another
/// test's cage is being built fails that cage (bubblewrap cannot bind what
/// its walk found a moment before). They run one at a time.
static HOST_PATHS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    HOST_PATHS.lock().unwrap_or_else(|p| p.into_inner())
}

/// A name no other run of these tests uses.
fn unique(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("aromba-test-{what}-{}-{nanos}", std::process::id())
}

/// Files and directories planted in the host's own paths, removed however
/// the test ends.
#[derive(Default)]
struct Planted(Vec<PathBuf>);

impl Planted {
    fn file(&mut self, path: &Path, content: &str) {
        if let Some(parent) = path.parent()
            && !parent.exists()
        {
            std::fs::create_dir_all(parent).unwrap();
            self.0.push(parent.to_path_buf());
        }
        std::fs::write(path, content).unwrap();
        self.0.push(path.to_path_buf());
    }

    fn dir(&mut self, path: &Path) {
        std::fs::create_dir_all(path).unwrap();
        self.0.push(path.to_path_buf());
    }
}

impl Drop for Planted {
    fn drop(&mut self) {
        for p in self.0.iter().rev() {
            if p.is_dir() {
                let _ = std::fs::remove_dir_all(p);
            } else {
                let _ = std::fs::remove_file(p);
            }
        }
    }
}

/// What a dry run of `chore`, asked for by the Worker, printed.
fn dry_run_output(w: &Warden, chore: &str) -> (String, String) {
    match w.ask(&Request::DryRun {
        chore: chore.into(),
    }) {
        Response::Receipt {
            stdout,
            stderr,
            ok,
            receipt,
        } => {
            let (out, err) = (
                String::from_utf8_lossy(&stdout).into_owned(),
                String::from_utf8_lossy(&stderr).into_owned(),
            );
            assert!(ok, "{chore} did not run: {receipt}\n{out}\n{err}");
            (out, err)
        }
        other => panic!("{chore} did not run: {other:?}"),
    }
}

/// `text` as `base64 -w0` prints it.
fn base64(text: &str) -> String {
    let out = assert_cmd::Command::new("base64")
        .arg("-w0")
        .write_stdin(text)
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()
}

fn assert_not_shown(out: &str, secret: &str) {
    assert!(!out.contains(secret), "the chore printed it: {out}");
    assert!(
        !out.contains(&base64(secret)),
        "the chore printed it base64-encoded: {out}"
    );
}

#[test]
fn a_chore_cannot_read_a_tls_private_key_under_etc_ssl_private() {
    let _one = one_at_a_time();
    let key_name = unique("tls");
    let secret = format!("-----BEGIN PRIVATE KEY----- {key_name}");
    let mut planted = Planted::default();
    let key = PathBuf::from(format!("/etc/ssl/private/{key_name}.key"));
    planted.file(&key, &secret);
    // A directory under /etc named as a secret is hidden whole, whatever
    // its files are called.
    let secret_dir = PathBuf::from(format!("/etc/{key_name}-secrets"));
    planted.dir(&secret_dir);
    planted.file(
        &secret_dir.join("plain.conf"),
        &format!("{secret} in a dir"),
    );
    let body = format!(
        "cat {key} | base64 -w0; echo; base64 -w0 /etc/ssl/private/*.key; echo\n\
         cat {dir}/plain.conf; base64 -w0 {dir}/plain.conf; echo\n\
         cat /etc/hostname >/dev/null && echo etc-is-shown",
        key = key.display(),
        dir = secret_dir.display()
    );
    let chore = support::owner_chore("steal-tls-key", "green", "", &body);
    let w = Warden::start("adv-vis-tls", false, &[chore]);
    let (out, _) = dry_run_output(&w, "steal-tls-key");
    assert_not_shown(&out, &secret);
    // The rest of /etc is there: the chore is not simply broken.
    assert!(out.contains("etc-is-shown"), "{out}");
}

#[test]
fn a_chore_cannot_read_data_under_srv_unless_declared() {
    let _one = one_at_a_time();
    let site = PathBuf::from(format!("/srv/{}", unique("srv")));
    let data = format!("customer records {}", unique("data"));
    let deploy_key = format!("deploy key {}", unique("key"));
    let mut planted = Planted::default();
    planted.dir(&site);
    planted.file(&site.join("records.csv"), &data);
    // Secrets inside a declared read are hidden still.
    planted.file(&site.join("app.key"), &deploy_key);
    planted.file(&site.join(".ssh/id_ed25519"), &deploy_key);
    let body = format!(
        "base64 -w0 {s}/records.csv; echo; cat {s}/records.csv; ls -a /srv\n\
         base64 -w0 {s}/app.key; cat {s}/.ssh/id_ed25519; echo done",
        s = site.display()
    );
    let undeclared = support::owner_chore("srv-undeclared", "green", "", &body);
    let declared = support::owner_chore(
        "srv-declared",
        "green",
        &format!("# reads: {}\n", site.display()),
        &body,
    );
    let w = Warden::start("adv-vis-srv", false, &[undeclared, declared]);
    let (out, _) = dry_run_output(&w, "srv-undeclared");
    assert_not_shown(&out, &data);
    let site_name = site.file_name().unwrap().to_string_lossy().into_owned();
    assert!(!out.contains(&site_name), "/srv is listed: {out}");
    assert!(out.contains("done"), "{out}");
    // Declared, it is read (read-only), and its secrets are not.
    let (out, _) = dry_run_output(&w, "srv-declared");
    assert!(out.contains(&data), "the declared read is not shown: {out}");
    assert_not_shown(&out, &deploy_key);
    assert!(site.join("records.csv").exists());
}

#[test]
fn a_chore_cannot_list_home_or_root() {
    let _one = one_at_a_time();
    let name = unique("home");
    let secret = format!("not for chores {name}");
    let mut planted = Planted::default();
    let places = ["/root", "/home", "/opt", "/var/lib", "/mnt", "/media"];
    for place in places {
        let dir = Path::new(place).join(&name);
        planted.dir(&dir);
        planted.file(&dir.join("notes.txt"), &secret);
    }
    let body = format!(
        "for d in {places}; do ls -a \"$d\"; cat \"$d\"/*/notes.txt; done 2>&1\n\
         ls -a / /var /run 2>&1; echo done",
        places = places.join(" ")
    );
    let chore = support::owner_chore("list-homes", "green", "", &body);
    let w = Warden::start("adv-vis-home", false, &[chore]);
    let (out, _) = dry_run_output(&w, "list-homes");
    assert!(!out.contains(&name), "a planted name is listed: {out}");
    assert_not_shown(&out, &secret);
    assert!(out.contains("done"), "{out}");
    for absent in ["root", "home", "srv", "opt", "mnt", "media", "boot"] {
        assert!(
            !out.lines().any(|l| l == absent),
            "/{absent} is shown: {out}"
        );
    }
}

#[test]
fn a_chore_whose_reads_name_a_secret_path_is_refused() {
    let _one = one_at_a_time();
    let chores = [
        support::owner_chore("read-root-ssh", "green", "# reads: /root/.ssh\n", "true"),
        support::owner_chore(
            "read-tls-key",
            "green",
            "# reads: /etc/ssl/private/web.key\n",
            "true",
        ),
        support::owner_chore("read-host-proc", "green", "# reads: /proc/1\n", "true"),
    ];
    let w = Warden::start("adv-vis-refused", false, &chores);
    let (loaded, refused) = catalog::mine(&w.layout());
    assert!(loaded.is_empty(), "{:?}", loaded.len());
    assert_eq!(refused.len(), 3, "{refused:?}");
    for why in &refused {
        assert!(
            why.contains("reads:") && why.contains("is a secret"),
            "{why}"
        );
    }
    for rule in [
        "secret_prefixes \"/root/.ssh\"",
        "secret_names \"*.key\"",
        "/proc/self",
    ] {
        assert!(
            refused.iter().any(|r| r.contains(rule)),
            "{rule}: {refused:?}"
        );
    }
    // Nothing of them runs.
    for name in ["read-root-ssh", "read-tls-key", "read-host-proc"] {
        let r = w.ask(&Request::DryRun { chore: name.into() });
        assert!(
            !matches!(r, Response::Receipt { ok: true, .. }),
            "{name} ran: {r:?}"
        );
    }
}

fn chore_reading(read: &Path, touched: &Path) -> Chore {
    let script = format!(
        "#!/bin/sh\n# aromba-chore: 1\n# name: reader\n# description: A chore of the tests\n# color: green\n# touches: {}\n# reads: {}\n# network: no\n# schedule: manual\n# end\ntrue\n",
        touched.display(),
        read.display()
    );
    Chore {
        header: Header::parse(&script).expect("the test header parses"),
        script,
        origin: Origin::Mine,
    }
}

#[test]
fn a_read_of_the_wardens_own_files_fenced_data_or_through_a_symlink_is_refused() {
    let _one = one_at_a_time();
    // Outside /tmp, which no read may name: the Warden's directories here.
    let root = PathBuf::from(format!("/var/tmp/{}", unique("own")));
    let mut planted = Planted::default();
    planted.dir(&root);
    let layout = Layout::rooted(&root.join("aromba"));
    let touched = root.join("touched");
    std::fs::create_dir_all(&touched).unwrap();
    std::fs::create_dir_all(layout.state_dir.join("runs")).unwrap();
    std::fs::create_dir_all(&layout.worker_home).unwrap();
    let ctx = Context {
        layout: &layout,
        isolation: true,
        days_installed: 30,
        cap_confirmed: false,
        cap_interval: Duration::from_millis(100),
        timeout: Duration::from_secs(60),
        halt: None,
        egress: None,
        settings: Vec::new(),
        secrets: Vec::new(),
    };
    let refused = |read: &Path| match run(&chore_reading(read, &touched), Mode::DryRun, &ctx) {
        Err(RunError::Refused(why)) => why,
        other => panic!("a read of {} was not refused: {other:?}", read.display()),
    };
    let why = refused(&layout.state_dir.join("runs"));
    assert!(why.contains("own files"), "{why}");
    let why = refused(&layout.worker_home);
    assert!(why.contains("own files"), "{why}");
    // A fenced data folder, either way round.
    let data = root.join("data/db");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::create_dir_all(&layout.config_dir).unwrap();
    std::fs::write(layout.fences_file(), format!("{}\n", data.display())).unwrap();
    assert!(refused(&data).contains("fenced"));
    assert!(refused(&root.join("data")).contains("fenced"));
    std::fs::write(layout.fences_file(), "").unwrap();
    // Through a link, bubblewrap would bind what it leads to: /root here.
    let link = root.join("link");
    std::os::unix::fs::symlink("/root", &link).unwrap();
    assert!(refused(&link).contains("symbolic link"));
    // A plain read is let through.
    assert!(
        run(
            &chore_reading(&root.join("data"), &touched),
            Mode::DryRun,
            &ctx
        )
        .is_ok()
    );
}
