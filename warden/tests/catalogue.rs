//! The skills a release ships (`skills/`), each through a real Warden as
//! a release signs them: verified with the release key, shown as each
//! README reviews them, and their chores and tools run in the cage — the
//! backup to a repository with its password from the settings alone, the
//! certificate read through the Warden's proxy from a site standing for
//! the owner's, nginx's error log summarised.

use aromba_testkit::catalogue::{Made, install, run, set, started, tool, with_hosts};
use aromba_testkit::skills::{catalogue_dir, tls_site};
use aromba_warden::server::ServeOptions;
use aromba_warden_proto::{Request, Response};
use std::path::Path;

const PASSWORD: &str = "a-long-repository-password-7";

/// `site.example.org` is the loopback address the test's TLS site listens
/// on; `s3.example.org` resolves but is never dialed.
fn options(o: &mut ServeOptions) {
    with_hosts(
        o,
        &[
            ("site.example.org", "127.0.0.7"),
            ("s3.example.org", "127.0.0.7"),
        ],
    );
}

#[test]
fn every_skill_of_the_catalogue_verifies_with_the_release_key_and_its_readme_shows_what_the_warden_shows()
 {
    let w = started("catalogue", options);
    let mut names: Vec<String> = std::fs::read_dir(catalogue_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["certs", "nginx", "restic-backup"]);
    let mut unreviewed = Vec::new();
    for name in &names {
        let shown = install(&w, name);
        let readme = std::fs::read_to_string(catalogue_dir().join(name).join("README.md"))
            .unwrap_or_else(|_| panic!("skills/{name} has no README.md"));
        if !readme.contains(&format!("```text\n{shown}\n```")) {
            unreviewed.push(format!("skills/{name}/README.md:\n{shown}"));
        }
    }
    assert!(
        unreviewed.is_empty(),
        "each README must show, in a text block, what the Warden shows:\n\n{}",
        unreviewed.join("\n\n")
    );
    let Response::Skills { skills, refused } = w.control(&Request::Skills) else {
        panic!("no list");
    };
    assert!(refused.is_empty(), "{refused:?}");
    assert_eq!(skills.len(), 3);
}

#[test]
fn the_backup_skill_backs_up_with_the_password_from_its_settings_and_never_shows_it() {
    assert!(
        Path::new("/usr/bin/restic").exists(),
        "restic is not installed: scripts/test installs it (apt-get install restic)"
    );
    let _made = Made::if_absent("/var/cache/aromba-restic");
    let w = started("catalogue-restic", options);
    install(&w, "restic-backup");
    let repo = format!("/var/cache/aromba-restic/test-{}", std::process::id());
    let why = aromba_testkit::warden::refused(w.control(&Request::ChoreRun {
        name: "restic-backup".into(),
        dry_run: true,
    }));
    assert!(
        why.starts_with("restic-backup needs restic-backup's settings first: S3_HOST, RESTIC_REPOSITORY, RESTIC_PASSWORD"),
        "{why}"
    );
    set(&w, "restic-backup", "S3_HOST", "s3.example.org");
    set(&w, "restic-backup", "RESTIC_PASSWORD", PASSWORD);
    set(
        &w,
        "restic-backup",
        "AWS_ACCESS_KEY_ID",
        "AKIA-TEST-NOT-USED",
    );
    set(
        &w,
        "restic-backup",
        "AWS_SECRET_ACCESS_KEY",
        "test-secret-not-used-1",
    );
    // A repository elsewhere is refused in words, before restic runs.
    set(
        &w,
        "restic-backup",
        "RESTIC_REPOSITORY",
        "s3:https://other.example.org/bucket",
    );
    let (ok, out) = run(&w, "restic-backup", true);
    assert!(
        !ok && out.contains("RESTIC_REPOSITORY must be s3:https://s3.example.org/BUCKET"),
        "{out}"
    );
    set(&w, "restic-backup", "RESTIC_REPOSITORY", &repo);
    let (ok, out) = run(&w, "restic-backup", true);
    assert!(
        ok && out.starts_with("would back up /etc")
            && out.contains(&format!("to the folder {repo}")),
        "{out}"
    );
    w.dry_run_shown("restic-backup");
    let (ok, out) = run(&w, "restic-backup", false);
    assert!(ok, "{out}");
    assert!(
        out.contains(&format!("made a new repository at the folder {repo}")),
        "{out}"
    );
    assert!(out.contains("Backed up: /etc"), "{out}");
    assert!(Path::new(&repo).join("config").is_file(), "no repository");
    assert!(!out.contains(PASSWORD));
    assert!(!w.journal().contains(PASSWORD));
    let last = tool(&w, "restic-backup", "restic-last");
    assert!(
        last.starts_with("Backed up: /etc") && last.contains(&format!("Repository: {repo}")),
        "{last}"
    );
    assert!(!last.contains(PASSWORD));
    // A second night: the same repository, a second snapshot.
    let (ok, out) = run(&w, "restic-backup", false);
    assert!(
        ok && out.contains("Backed up") && !out.contains("made a new repository"),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&repo);
}

#[test]
fn the_certificate_skill_reads_when_the_site_certificate_expires_through_the_proxy() {
    let _made = Made::if_absent("/var/lib/aromba-certs");
    tls_site("127.0.0.7:443".parse().unwrap(), "site.example.org", 9);
    let w = started("catalogue-certs", options);
    install(&w, "certs");
    set(&w, "certs", "SITE", "site.example.org");
    let (ok, out) = run(&w, "certs-expiry", true);
    assert!(
        ok && out.starts_with("would read the certificate site.example.org shows on port 443"),
        "{out}"
    );
    w.dry_run_shown("certs-expiry");
    // Nine days left: read, and the run fails to say so.
    let (ok, out) = run(&w, "certs-expiry", false);
    assert!(!ok, "{out}");
    assert!(
        out.starts_with("site.example.org's certificate expires in 8 days")
            && out.contains("renew it (the chore certs-renew, on a tap)"),
        "{out}"
    );
    let journal = w.journal();
    assert!(
        journal
            .lines()
            .any(|l| l.contains("\"egress\"") && l.contains("\"verdict\":\"allowed\"")),
        "the connection is journaled"
    );
    let read = tool(&w, "certs", "certs-expiry");
    assert!(
        read.starts_with("site.example.org's certificate expires in 8 days"),
        "{read}"
    );
    // certbot is not on the machines the tests run on: said so, and the
    // Warden starts nothing.
    if !Path::new("/usr/bin/certbot").exists() {
        let (ok, out) = run(&w, "certs-renew", true);
        assert!(
            !ok && out.contains("certbot is not installed here"),
            "{out}"
        );
    }
}

#[test]
fn the_nginx_skill_summarises_the_error_log_and_lists_the_sites() {
    let log_dir = Path::new("/var/log/nginx");
    let made = Made::if_absent("/var/log/nginx");
    let w = started("catalogue-nginx", options);
    install(&w, "nginx");
    if made.0.is_some() {
        assert_eq!(
            tool(&w, "nginx", "nginx-errors"),
            "No nginx error log at /var/log/nginx/error.log.\n"
        );
        std::fs::create_dir(log_dir).unwrap();
        std::fs::write(
            log_dir.join("error.log"),
            "2026/12/06 10:00:01 [error] 812#812: *1 open() \"/var/www/html/favicon.ico\" failed (2: No such file or directory), client: 203.0.113.5, server: _, request: \"GET /favicon.ico HTTP/1.1\"\n\
             2026/12/06 10:00:02 [error] 812#812: *2 open() \"/var/www/html/favicon.ico\" failed (2: No such file or directory), client: 203.0.113.9, server: _, request: \"GET /favicon.ico HTTP/1.1\"\n\
             2026/12/06 10:05:00 [warn] 812#812: conflicting server name \"example.org\" on 0.0.0.0:80, ignored\n",
        )
        .unwrap();
        let summary = tool(&w, "nginx", "nginx-errors");
        assert!(
            summary.contains("By level:\n      2 error\n      1 warn\n"),
            "{summary}"
        );
        assert!(
            summary.contains(
                "      2 open() \"/var/www/html/favicon.ico\" failed (2: No such file or directory)\n"
            ),
            "{summary}"
        );
        assert!(!summary.contains("203.0.113"), "{summary}");
    }
    if !Path::new("/etc/nginx").exists() {
        assert_eq!(
            tool(&w, "nginx", "nginx-sites"),
            "No enabled nginx site (nothing in /etc/nginx/sites-enabled or /etc/nginx/conf.d).\n"
        );
        let (ok, out) = run(&w, "nginx-restart", true);
        assert!(!ok && out.contains("nginx is not installed here"), "{out}");
    }
}
