//! The first scan, and the weekly one: does this server look like
//! production, and which of its folders hold data?
//!
//! Pure decisions over the Warden's reads (the daemon asks for them):
//!
//! - [`public_web`]: a web server on port 443 for everyone, or on port 80
//!   with certificates for a domain (`ls /etc/letsencrypt/live`, Caddy's
//!   certificate folders);
//! - [`Database::with_data`]: a database directory under `/var/lib` that
//!   holds databases of its own (PostgreSQL: a database directory numbered
//!   from 16384, the first number a user's database gets; MySQL and
//!   MariaDB: a folder that is not one of the server's own; the others: a
//!   size no empty install has);
//! - [`old_apps`]: a process serving a port (not one of the base system's
//!   daemons) that has run for 30 days;
//! - [`sustained_traffic`]: at least 1 Mbit/s on average through every
//!   interface but loopback, over a day since boot or over an hour the
//!   Worker watched;
//! - [`data_folders`]: database directories, uploads, backups, mail and
//!   repositories (every one: telling uncommitted work would take running
//!   `git`, which runs programs a repository's configuration names — as
//!   root, in the Warden — so every working tree is fenced).

pub mod parse;

pub use parse::{
    Listener, Process, parse_du, parse_etime, parse_listeners, parse_ls, parse_net_dev,
    parse_processes, parse_uptime,
};

/// What the scan saw that says "production"; [`Finding::describe`] says it
/// in the chat's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    PublicWeb {
        ports: Vec<u16>,
        domains: Vec<String>,
    },
    Database {
        engine: &'static str,
        folder: String,
        detail: String,
    },
    OldApp {
        name: String,
        port: u16,
        days: u64,
    },
    Traffic {
        bytes_per_day: u64,
        over: String,
    },
}

impl Finding {
    pub fn describe(&self) -> String {
        match self {
            Finding::PublicWeb { ports, domains } => {
                let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
                let mut s = format!(
                    "a web server answers everyone on port {}",
                    ports.join(" and ")
                );
                if !domains.is_empty() {
                    let shown: Vec<&str> = domains.iter().take(3).map(String::as_str).collect();
                    s.push_str(&format!(", with certificates for {}", shown.join(", ")));
                    if domains.len() > 3 {
                        s.push_str(&format!(" and {} more", domains.len() - 3));
                    }
                }
                s
            }
            Finding::Database {
                engine,
                folder,
                detail,
            } => format!("a database with data: {engine}, {detail} in {folder}"),
            Finding::OldApp { name, port, days } => {
                format!("an app running for {days} days: {name}, serving port {port}")
            }
            Finding::Traffic {
                bytes_per_day,
                over,
            } => format!(
                "sustained traffic: about {} a day, {over}",
                crate::human_bytes(*bytes_per_day)
            ),
        }
    }
}

/// A web server for the world: port 443 reachable from outside, or port 80
/// with certificates for a domain.
pub fn public_web(listeners: &[Listener], cert_domains: &[String]) -> Option<Finding> {
    let mut ports: Vec<u16> = listeners
        .iter()
        .filter(|l| !l.loopback && (l.port == 80 || l.port == 443))
        .map(|l| l.port)
        .collect();
    ports.sort_unstable();
    ports.dedup();
    let domains: Vec<String> = cert_domains
        .iter()
        .filter(|d| looks_like_domain(d))
        .cloned()
        .collect();
    let serves = ports.contains(&443) || (ports.contains(&80) && !domains.is_empty());
    serves.then_some(Finding::PublicWeb { ports, domains })
}

/// `example.com`, `www.example.co.uk`: letters, digits, hyphens and dots,
/// with at least one dot, not at either end.
pub fn looks_like_domain(name: &str) -> bool {
    name.contains('.')
        && !name.starts_with('.')
        && !name.ends_with('.')
        && name.len() <= 253
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
}

/// A database engine's directory under `/var/lib`, and how to tell it holds
/// data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Database {
    /// Its folder's name under `/var/lib`.
    pub dir: &'static str,
    pub engine: &'static str,
    pub rule: DataRule,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataRule {
    /// PostgreSQL: `du -B1 --max-depth=3` of the directory finds each
    /// cluster's `base`; `du -B1 --max-depth=1` of a `base` lists one
    /// folder per database, named by its number.
    PostgresBase,
    /// MySQL, MariaDB: `du -B1 --max-depth=1` lists one folder per
    /// database; these are the server's own.
    Folders(&'static [&'static str]),
    /// Bigger than any empty install (`du -B1 --max-depth=1`, the last
    /// line is the whole directory).
    Size(u64),
}

const MIB: u64 = 1 << 20;

/// The database directories the scan looks for (and fences).
pub const DATABASES: &[Database] = &[
    Database {
        dir: "postgresql",
        engine: "PostgreSQL",
        rule: DataRule::PostgresBase,
    },
    Database {
        dir: "mysql",
        engine: "MySQL or MariaDB",
        rule: DataRule::Folders(MYSQL_OWN),
    },
    Database {
        dir: "mariadb",
        engine: "MariaDB",
        rule: DataRule::Folders(MYSQL_OWN),
    },
    Database {
        dir: "mongodb",
        engine: "MongoDB",
        rule: DataRule::Size(1024 * MIB),
    },
    Database {
        dir: "redis",
        engine: "Redis",
        rule: DataRule::Size(MIB),
    },
    Database {
        dir: "influxdb",
        engine: "InfluxDB",
        rule: DataRule::Size(256 * MIB),
    },
    Database {
        dir: "clickhouse",
        engine: "ClickHouse",
        rule: DataRule::Size(256 * MIB),
    },
    Database {
        dir: "elasticsearch",
        engine: "Elasticsearch",
        rule: DataRule::Size(256 * MIB),
    },
    Database {
        dir: "opensearch",
        engine: "OpenSearch",
        rule: DataRule::Size(256 * MIB),
    },
    Database {
        dir: "cassandra",
        engine: "Cassandra",
        rule: DataRule::Size(256 * MIB),
    },
    Database {
        dir: "couchdb",
        engine: "CouchDB",
        rule: DataRule::Size(256 * MIB),
    },
    Database {
        dir: "neo4j",
        engine: "Neo4j",
        rule: DataRule::Size(256 * MIB),
    },
];

const MYSQL_OWN: &[&str] = &["mysql", "performance_schema", "sys", "information_schema"];

/// The first number PostgreSQL gives a database a user made.
const FIRST_USER_OID: u64 = 16_384;

impl Database {
    /// The `base` folders of each PostgreSQL cluster in a `du -B1
    /// --max-depth=3` listing of the directory.
    pub fn postgres_bases(listing: &[(u64, String)]) -> Vec<String> {
        listing
            .iter()
            .filter(|(_, p)| p.ends_with("/base"))
            .map(|(_, p)| p.clone())
            .collect()
    }

    /// Whether `listing` (a `du -B1 --max-depth=1` of the directory, or of
    /// each PostgreSQL `base`) shows data; the finding says what.
    pub fn with_data(&self, folder: &str, listing: &[(u64, String)]) -> Option<Finding> {
        let children = |l: &[(u64, String)]| -> Vec<(u64, String)> {
            l.iter()
                .filter_map(|(size, p)| {
                    let (parent, name) = p.rsplit_once('/')?;
                    (!parent.is_empty() && p.len() > folder.len() && !name.is_empty())
                        .then(|| (*size, name.to_string()))
                })
                .collect()
        };
        let detail = match self.rule {
            DataRule::PostgresBase => {
                let own = children(listing)
                    .into_iter()
                    .filter(|(_, n)| n.parse::<u64>().is_ok_and(|oid| oid >= FIRST_USER_OID))
                    .count();
                (own > 0).then(|| count(own, "database of its own", "databases of their own"))
            }
            DataRule::Folders(server_own) => {
                let own = children(listing)
                    .into_iter()
                    .filter(|(_, n)| {
                        !server_own.contains(&n.as_str())
                            && !n.starts_with('#')
                            && n != "lost+found"
                    })
                    .count();
                (own > 0).then(|| count(own, "database of its own", "databases of their own"))
            }
            DataRule::Size(min) => {
                let total = listing
                    .iter()
                    .find(|(_, p)| p.trim_end_matches('/') == folder.trim_end_matches('/'))
                    .map(|(s, _)| *s)?;
                (total >= min).then(|| crate::human_bytes(total))
            }
        }?;
        Some(Finding::Database {
            engine: self.engine,
            folder: folder.to_string(),
            detail,
        })
    }
}

fn count(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

/// Process names of the base system that serve a port on any server: none
/// of them says an app runs here. Mail servers count only when they serve
/// the world (many systems run one for local mail).
const BASE_SYSTEM: &[&str] = &[
    "sshd",
    "sshd-session",
    "chronyd",
    "ntpd",
    "rpcbind",
    "rpc.statd",
    "avahi-daemon",
    "cupsd",
    "cups-browsed",
    "dhclient",
    "dhcpcd",
    "tailscaled",
    "containerd",
];
const LOCAL_MAIL: &[&str] = &["exim4", "exim", "master", "sendmail", "smtpd", "nullmailer"];

/// The age, in days, from which an app says "production".
pub const OLD_APP_DAYS: u64 = 30;

/// Apps serving a port that have run for [`OLD_APP_DAYS`] or more: one
/// finding per name, the oldest.
pub fn old_apps(listeners: &[Listener], processes: &[Process]) -> Vec<Finding> {
    let mut out: Vec<Finding> = Vec::new();
    for l in listeners {
        for (name, pid) in &l.processes {
            let base = BASE_SYSTEM.contains(&name.as_str())
                || name.starts_with("systemd")
                || name.starts_with("aromba")
                || (l.loopback && LOCAL_MAIL.contains(&name.as_str()));
            if base {
                continue;
            }
            let Some(p) = processes.iter().find(|p| p.pid == *pid) else {
                continue;
            };
            let days = p.age_secs / 86_400;
            if days < OLD_APP_DAYS {
                continue;
            }
            let older = |f: &Finding| matches!(f, Finding::OldApp { name: n, .. } if n == name);
            match out.iter_mut().find(|f| older(f)) {
                Some(Finding::OldApp { days: d, port, .. }) if *d < days => {
                    *d = days;
                    *port = l.port;
                }
                Some(_) => {}
                None => out.push(Finding::OldApp {
                    name: name.clone(),
                    port: l.port,
                    days,
                }),
            }
        }
    }
    out
}

/// A sample of the traffic counters: seconds since boot, and bytes through
/// every interface but loopback since boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrafficSample {
    pub uptime_secs: u64,
    pub bytes: u64,
}

/// 1 Mbit/s, in bytes a second.
pub const SUSTAINED_BYTES_PER_SEC: u64 = 125_000;
const DAY: u64 = 86_400;
/// How long the Worker watches the counters when the server has not been
/// up for a day.
pub const TRAFFIC_WINDOW_SECS: u64 = 3_600;

/// What the traffic counters say: `Some(Some(finding))` sustained traffic,
/// `Some(None)` not, `None` not known yet (up for less than a day, and
/// `later` is not an hour after `first` on the same boot).
pub fn sustained_traffic(
    first: TrafficSample,
    later: Option<TrafficSample>,
) -> Option<Option<Finding>> {
    let judge = |bytes: u64, secs: u64, over: String| {
        let per_sec = bytes / secs.max(1);
        (per_sec >= SUSTAINED_BYTES_PER_SEC).then(|| Finding::Traffic {
            bytes_per_day: per_sec.saturating_mul(DAY),
            over,
        })
    };
    let latest = later.unwrap_or(first);
    if latest.uptime_secs >= DAY {
        let days = latest.uptime_secs / DAY;
        return Some(judge(
            latest.bytes,
            latest.uptime_secs,
            format!("over the {days} days since boot"),
        ));
    }
    let later = later?;
    let same_boot = later.uptime_secs >= first.uptime_secs && later.bytes >= first.bytes;
    let secs = later.uptime_secs.saturating_sub(first.uptime_secs);
    if !same_boot || secs < TRAFFIC_WINDOW_SECS {
        return None;
    }
    Some(judge(
        later.bytes - first.bytes,
        secs,
        format!("over {} minutes", secs / 60),
    ))
}

/// Why a folder was fenced, in the chat's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DataKind {
    Database,
    Uploads,
    Backups,
    Mail,
    Repository,
}

impl DataKind {
    pub fn describe(self) -> &'static str {
        match self {
            DataKind::Database => "a database",
            DataKind::Uploads => "uploads",
            DataKind::Backups => "backups",
            DataKind::Mail => "mail",
            DataKind::Repository => "a repository",
        }
    }
}

/// Folders under `/var` that hold data wherever they exist.
pub const VAR_DATA: &[(&str, DataKind)] = &[
    ("mail", DataKind::Mail),
    ("vmail", DataKind::Mail),
    ("backups", DataKind::Backups),
];

/// The folders the scan lists (`du -B1 --max-depth=3`) for uploads,
/// backups, mail and repositories.
pub const LISTED_ROOTS: &[&str] = &["srv", "var/www", "home", "opt", "root"];

/// The data-like folders in a `du` listing: uploads, backups, mail and
/// repositories (the working tree holding a `.git`, or a bare `*.git`).
pub fn data_folders(listing: &[(u64, String)]) -> Vec<(String, DataKind)> {
    let mut out: Vec<(String, DataKind)> = Vec::new();
    for (_, path) in listing {
        let Some((parent, name)) = path.rsplit_once('/') else {
            continue;
        };
        let found = match name {
            ".git" if !parent.is_empty() => Some((parent.to_string(), DataKind::Repository)),
            n if n.len() > 4 && n.ends_with(".git") => Some((path.clone(), DataKind::Repository)),
            "uploads" | "upload" => Some((path.clone(), DataKind::Uploads)),
            "backup" | "backups" => Some((path.clone(), DataKind::Backups)),
            "Maildir" => Some((path.clone(), DataKind::Mail)),
            _ => None,
        };
        if let Some(f) = found {
            out.push(f);
        }
    }
    outermost(out)
}

/// Each folder once, and none inside another one kept (its fence covers
/// it).
pub fn outermost(mut folders: Vec<(String, DataKind)>) -> Vec<(String, DataKind)> {
    folders.sort();
    folders.dedup_by(|a, b| a.0 == b.0);
    let mut kept: Vec<(String, DataKind)> = Vec::new();
    for f in folders {
        let inside = kept
            .iter()
            .any(|(k, _)| f.0.starts_with(&format!("{}/", k.trim_end_matches('/'))));
        if !inside {
            kept.push(f);
        }
    }
    kept
}

#[cfg(test)]
mod tests;
