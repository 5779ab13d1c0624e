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

/// Text from the server (a folder's or a process's name) made safe to
/// show in the chat: control characters, direction overrides and line or
/// paragraph separators — which could make a line read as something else,
/// or as a message of its own — become `?`.
pub fn shown(s: &str) -> String {
    s.chars()
        .map(|c| {
            let odd = c.is_control()
                || matches!(c, '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
                || matches!(c, '\u{2028}' | '\u{2029}');
            if odd { '?' } else { c }
        })
        .collect()
}

impl Finding {
    pub fn describe(&self) -> String {
        shown(&self.describe_raw())
    }

    fn describe_raw(&self) -> String {
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

/// The most PostgreSQL clusters the scan looks into.
pub const MAX_CLUSTERS: usize = 4;

/// The first number PostgreSQL gives a database a user made.
const FIRST_USER_OID: u64 = 16_384;

impl Database {
    /// The `base` folders of each PostgreSQL cluster in a `du -B1
    /// --max-depth=3` listing of the directory.
    ///
    /// The PostgreSQL user can make folders there: each `base` found costs
    /// a read of the Worker's budget, so only the [`MAX_CLUSTERS`] biggest
    /// are looked into (a real cluster's `base` holds its template
    /// databases, megabytes; an empty folder planted as one, a few
    /// kilobytes).
    pub fn postgres_bases(listing: &[(u64, String)]) -> Vec<String> {
        let mut bases: Vec<&(u64, String)> = listing
            .iter()
            .filter(|(_, p)| p.ends_with("/base"))
            .collect();
        bases.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        bases.dedup_by(|a, b| a.1 == b.1);
        bases
            .into_iter()
            .take(MAX_CLUSTERS)
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
    /// A folder of a listed root whose listing was cut (too big, or too
    /// slow, to look through): fenced whole, as what is in it was not seen.
    Unseen,
}

impl DataKind {
    pub fn describe(self) -> &'static str {
        match self {
            DataKind::Database => "a database",
            DataKind::Uploads => "uploads",
            DataKind::Backups => "backups",
            DataKind::Mail => "mail",
            DataKind::Repository => "a repository",
            DataKind::Unseen => "too big to look through",
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
/// it). Sorted by components, a folder's insides come right after it, so
/// each is compared with the last one kept only: a listing of tens of
/// thousands of folders (a user can make that many) costs no more than
/// sorting it.
pub fn outermost(mut folders: Vec<(String, DataKind)>) -> Vec<(String, DataKind)> {
    folders.sort_by(|a, b| {
        std::path::Path::new(&a.0)
            .cmp(std::path::Path::new(&b.0))
            .then(a.1.cmp(&b.1))
    });
    let mut kept: Vec<(String, DataKind)> = Vec::new();
    for f in folders {
        let inside = kept
            .last()
            .is_some_and(|(k, _)| std::path::Path::new(&f.0).starts_with(k));
        if !inside {
            kept.push(f);
        }
    }
    kept
}

/// The certificates' domains in a `du` listing of Caddy's certificate
/// folder `caddy` (one folder per issuer, one per domain in it). A line
/// that is not below `caddy` (a folder name with a newline in it makes one
/// up) is skipped.
pub fn caddy_domains(caddy: &str, listing: &[(u64, String)]) -> Vec<String> {
    let caddy = caddy.trim_end_matches('/');
    listing
        .iter()
        .filter_map(|(_, path)| {
            let rest = path.strip_prefix(caddy)?.strip_prefix('/')?;
            let (_issuer, name) = rest.split_once('/')?;
            (!name.is_empty() && !name.contains('/')).then(|| name.to_string())
        })
        .filter(|d| looks_like_domain(d))
        .collect()
}

/// When the listing of the listed root `root` was cut (the read's byte cap
/// or its time limit: one account's enormous tree leaves every folder du
/// would have listed after it unseen), each of its folders `ls` names is
/// fenced whole.
pub fn unseen(root: &str, names: &[String]) -> Vec<(String, DataKind)> {
    let root = root.trim_end_matches('/');
    names
        .iter()
        .filter(|n| !n.is_empty() && !n.contains('/') && *n != "." && *n != "..")
        .map(|n| (format!("{root}/{n}"), DataKind::Unseen))
        .collect()
}

/// More data-like folders than this in one folder of a listed root (a
/// user's home, an app's folder under `/srv`) and that folder is fenced
/// whole instead: one account cannot take the fence list's room (the
/// Warden keeps 1,024) and leave the next database unfenced.
pub const MAX_PER_FOLDER: usize = 16;

/// The most folders one scan asks to fence: the Warden's list holds 1,024.
pub const MAX_ASKED: usize = 1024;

/// `found` under the listed root `root` (a `du` of it), with each folder
/// of `root` that holds more than [`MAX_PER_FOLDER`] of them asked for
/// whole; a path not below `root` is dropped.
pub fn crowded(root: &str, found: Vec<(String, DataKind)>) -> Vec<(String, DataKind)> {
    let root = root.trim_end_matches('/');
    let group = |p: &str| -> Option<String> {
        let rest = p.strip_prefix(root)?.strip_prefix('/')?;
        let first = rest.split('/').next().filter(|f| !f.is_empty())?;
        Some(format!("{root}/{first}"))
    };
    let mut counts: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (p, _) in &found {
        if let Some(g) = group(p) {
            *counts.entry(g).or_default() += 1;
        }
    }
    let mut out: Vec<(String, DataKind)> = Vec::new();
    for (p, kind) in found {
        match group(&p) {
            Some(g) if counts.get(&g).is_some_and(|n| *n > MAX_PER_FOLDER) => {
                out.push((g, kind));
            }
            Some(_) => out.push((p, kind)),
            // Not below the root: a line a folder name with a newline in
            // it made up.
            None => {}
        }
    }
    outermost(out)
}

/// What one scan asks the Warden to fence, in order: databases first (a
/// database directory under `/var/lib`, Docker's volumes), then the rest,
/// each once and none inside another, at most [`MAX_ASKED`].
pub fn to_ask(found: Vec<(String, DataKind)>) -> Vec<(String, DataKind)> {
    let mut all = outermost(found);
    all.sort_by_key(|(_, k)| *k != DataKind::Database);
    all.truncate(MAX_ASKED);
    all
}

#[cfg(test)]
mod tests;
