use super::*;

fn listener(port: u16, loopback: bool, procs: &[(&str, u32)]) -> Listener {
    Listener {
        host: if loopback { "127.0.0.1" } else { "0.0.0.0" }.into(),
        port,
        loopback,
        processes: procs.iter().map(|(n, p)| (n.to_string(), *p)).collect(),
    }
}

fn process(pid: u32, name: &str, days: u64) -> Process {
    Process {
        pid,
        user: "app".into(),
        age_secs: days * 86_400 + 5,
        name: name.into(),
    }
}

#[test]
fn a_public_https_server_or_http_with_a_domain_certificate_is_a_public_web_server() {
    let https = [listener(443, false, &[("nginx", 1)])];
    assert!(public_web(&https, &[]).is_some());
    let http = [listener(80, false, &[("nginx", 1)])];
    assert_eq!(
        public_web(&http, &[]),
        None,
        "a default page on an address is not a domain"
    );
    assert_eq!(public_web(&http, &["README".into()]), None);
    let found = public_web(&http, &["shop.example.com".into()]).unwrap();
    assert_eq!(
        found.describe(),
        "a web server answers everyone on port 80, with certificates for shop.example.com"
    );
    let local = [
        listener(443, true, &[("nginx", 1)]),
        listener(8443, false, &[]),
    ];
    assert_eq!(public_web(&local, &["example.com".into()]), None);
}

#[test]
fn postgres_counts_only_databases_a_user_made() {
    let pg = DATABASES[0];
    let cluster = vec![
        (1u64, "/var/lib/postgresql/15/main/base".to_string()),
        (2, "/var/lib/postgresql/15/main/global".to_string()),
    ];
    assert_eq!(
        Database::postgres_bases(&cluster),
        vec!["/var/lib/postgresql/15/main/base".to_string()]
    );
    let base = "/var/lib/postgresql/15/main/base";
    let empty: Vec<(u64, String)> = ["1", "4", "5"]
        .iter()
        .map(|o| (7_700_000, format!("{base}/{o}")))
        .chain([(23_100_000, base.to_string())])
        .collect();
    assert_eq!(pg.with_data(base, &empty), None);
    let mut used = empty.clone();
    used.push((9_000_000, format!("{base}/16384")));
    used.push((9_000_000, format!("{base}/pgsql_tmp")));
    assert_eq!(
        pg.with_data(base, &used).unwrap().describe(),
        format!("a database with data: PostgreSQL, 1 database of its own in {base}")
    );
}

#[test]
fn mysql_counts_folders_that_are_not_the_servers_own() {
    let my = DATABASES[1];
    let dir = "/var/lib/mysql";
    let fresh: Vec<(u64, String)> = [
        "mysql",
        "performance_schema",
        "sys",
        "#innodb_temp",
        "#innodb_redo",
    ]
    .iter()
    .map(|n| (1000, format!("{dir}/{n}")))
    .chain([(200_000_000, dir.to_string())])
    .collect();
    assert_eq!(my.with_data(dir, &fresh), None);
    let mut used = fresh;
    used.push((5000, format!("{dir}/shop")));
    used.push((5000, format!("{dir}/blog")));
    assert!(
        my.with_data(dir, &used)
            .unwrap()
            .describe()
            .contains("2 databases of their own")
    );
}

#[test]
fn other_engines_need_a_size_no_empty_install_has() {
    let redis = DATABASES.iter().find(|d| d.dir == "redis").unwrap();
    let dir = "/var/lib/redis";
    assert_eq!(redis.with_data(dir, &[(92, dir.into())]), None);
    let found = redis.with_data(dir, &[(5_000_000, dir.into())]).unwrap();
    assert_eq!(
        found.describe(),
        "a database with data: Redis, 5.0 MB in /var/lib/redis"
    );
    assert_eq!(
        redis.with_data(dir, &[]),
        None,
        "no total line: nothing known"
    );
}

#[test]
fn an_app_serving_a_port_for_thirty_days_is_old_but_the_base_system_is_not() {
    let listeners = [
        listener(22, false, &[("sshd", 10)]),
        listener(53, true, &[("systemd-resolve", 11)]),
        listener(25, true, &[("exim4", 12)]),
        listener(3000, true, &[("node", 13)]),
        listener(8080, false, &[("java", 14)]),
        listener(8081, false, &[("java", 15)]),
    ];
    let processes = [
        process(10, "sshd", 400),
        process(11, "systemd-resolve", 400),
        process(12, "exim4", 400),
        process(13, "node", 31),
        process(14, "java", 29),
        process(15, "java", 45),
    ];
    let found = old_apps(&listeners, &processes);
    assert_eq!(
        found,
        vec![
            Finding::OldApp {
                name: "node".into(),
                port: 3000,
                days: 31
            },
            Finding::OldApp {
                name: "java".into(),
                port: 8081,
                days: 45
            },
        ]
    );
    let public_mail = [listener(25, false, &[("exim4", 12)])];
    assert_eq!(
        old_apps(&public_mail, &processes).len(),
        1,
        "a mail server for the world"
    );
}

#[test]
fn traffic_is_judged_over_a_day_since_boot_or_an_hour_watched() {
    let day = 86_400;
    let busy = TrafficSample {
        uptime_secs: 3 * day,
        bytes: 3 * day * 200_000,
    };
    let found = sustained_traffic(busy, None).unwrap().unwrap();
    assert!(
        found.describe().contains("over the 3 days since boot"),
        "{found:?}"
    );
    let quiet = TrafficSample {
        uptime_secs: 3 * day,
        bytes: 3 * day * 1_000,
    };
    assert_eq!(sustained_traffic(quiet, None), Some(None));
    // Up for ten minutes: not known until an hour is watched.
    let young = TrafficSample {
        uptime_secs: 600,
        bytes: 50_000_000_000,
    };
    assert_eq!(sustained_traffic(young, None), None);
    let half_hour = TrafficSample {
        uptime_secs: 600 + 1_800,
        bytes: 50_000_000_000 + 1_800 * 500_000,
    };
    assert_eq!(sustained_traffic(young, Some(half_hour)), None);
    let hour = TrafficSample {
        uptime_secs: 600 + 3_600,
        bytes: 50_000_000_000 + 3_600 * 500_000,
    };
    let found = sustained_traffic(young, Some(hour)).unwrap().unwrap();
    assert!(found.describe().contains("over 60 minutes"), "{found:?}");
    // The download burst at boot does not count: only the hour watched.
    let calm_hour = TrafficSample {
        uptime_secs: 600 + 3_600,
        bytes: 50_000_000_000 + 3_600 * 1_000,
    };
    assert_eq!(sustained_traffic(young, Some(calm_hour)), Some(None));
    // A reboot between the samples: not known.
    let rebooted = TrafficSample {
        uptime_secs: 300,
        bytes: 10,
    };
    assert_eq!(sustained_traffic(young, Some(rebooted)), None);
}

#[test]
fn finds_uploads_backups_mail_and_repositories_once_each() {
    let listing: Vec<(u64, String)> = [
        "/srv/shop",
        "/srv/shop/.git",
        "/srv/shop/public/uploads",
        "/srv/site.git",
        "/var/www/blog/wp-content/uploads",
        "/home/ann/Maildir",
        "/home/ann/backups",
        "/home/ann/.git",
        "/home/ann/notes",
        "/opt/tool/upload",
        "/.git",
    ]
    .iter()
    .map(|p| (4096, p.to_string()))
    .collect();
    let found = data_folders(&listing);
    assert_eq!(
        found,
        vec![
            ("/home/ann".to_string(), DataKind::Repository),
            ("/opt/tool/upload".to_string(), DataKind::Uploads),
            ("/srv/shop".to_string(), DataKind::Repository),
            ("/srv/site.git".to_string(), DataKind::Repository),
            (
                "/var/www/blog/wp-content/uploads".to_string(),
                DataKind::Uploads
            ),
        ]
    );
}
