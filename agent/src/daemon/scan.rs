//! The first scan and the weekly one (decisions in `aromba_health::scan`).
//!
//! The first time the daemon runs it looks at the server through Warden
//! reads: a web server for the world, a database with data, an app serving
//! a port for 30 days, sustained traffic. Any of them turns prod mode on
//! (the Warden's `prod_mode_on`; only the PIN turns it off), and the chat
//! is told what was seen either way. Traffic needs a day since boot or an
//! hour watched, so it may be judged an hour later. Data-like folders are
//! fenced (the Warden's `add_fences`, which only adds) at the first scan
//! and every week after; the chat is told of each new fence.
//!
//! Under `--root` (the tests, the demo) the folders looked at are under
//! `ROOT/system` rather than `/`; the process, socket and traffic reads
//! are the machine's.

use super::Daemon;
use crate::warden_client::{self, WardenError};
use aromba_health::scan::{
    self, DATABASES, DataKind, DataRule, Database, Finding, LISTED_ROOTS, TrafficSample, VAR_DATA,
    parse_du, parse_listeners, parse_ls, parse_net_dev, parse_processes, parse_uptime,
};
use aromba_warden_proto::{MAX_FENCES_ASKED, MAX_FINDING, Request, Response, printable};
use aromba_words::chores as words;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// What the daemon remembers of its scans, in its home.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Scans {
    /// When the first scan was done (seconds since the epoch).
    first_at: Option<i64>,
    /// When folders were last looked for.
    fences_at: Option<i64>,
    /// The traffic counters at the first scan, while traffic is not judged.
    traffic_first: Option<(u64, u64)>,
    /// Traffic was judged (or cannot be).
    traffic_judged: bool,
}

const SCANS: &str = "scans.json";
const WEEK: i64 = 7 * 86_400;
/// How often the task wakes to see what is due.
const WAKE: Duration = Duration::from_secs(300);
/// After a scan that could not ask the Warden.
const RETRY: Duration = Duration::from_secs(60);

/// The scan could not be done now (the Warden is not there, or the read
/// budget is spent): try again later, nothing half-recorded. Logged, never
/// said in the chat.
#[derive(Debug, thiserror::Error)]
enum NotNow {
    #[error("the read budget is spent")]
    Budget,
    #[error("cannot ask the Warden: {0}")]
    Warden(#[source] warden_client::ClientError),
    #[error("cannot ask the Warden to fence: {0}")]
    Fence(#[source] warden_client::ClientError),
}

pub async fn keep(daemon: Arc<Daemon>) {
    loop {
        let wait = match step(&daemon).await {
            Ok(()) => WAKE,
            Err(why) => {
                tracing::info!(reason = %why, "the scan waits");
                RETRY
            }
        };
        tokio::time::sleep(wait).await;
    }
}

fn now() -> i64 {
    jiff::Timestamp::now().as_second()
}

async fn step(daemon: &Daemon) -> Result<(), NotNow> {
    let mut scans: Scans = super::kept::load(daemon, SCANS);
    if scans.first_at.is_none() {
        first_scan(daemon, &mut scans).await?;
    } else if !scans.traffic_judged {
        watch_traffic(daemon, &mut scans).await?;
    } else if scans.fences_at.is_none_or(|t| now() - t >= WEEK) {
        let added = fence(daemon).await?;
        scans.fences_at = Some(now());
        if !added.is_empty() {
            daemon
                .say(words::weekly_look(&fences_text(&added)), Vec::new())
                .await;
        }
    }
    if let Err(e) = super::kept::save(daemon, SCANS, &scans) {
        tracing::warn!(error = %e, "cannot save the scans' record");
    }
    Ok(())
}

async fn first_scan(daemon: &Daemon, scans: &mut Scans) -> Result<(), NotNow> {
    let mut findings = Vec::new();
    let listeners = parse_listeners(&read(daemon, "ss", &["-tlnpH"]).await?.unwrap_or_default());
    let domains = cert_domains(daemon).await?;
    findings.extend(scan::public_web(&listeners, &domains));
    findings.extend(databases_with_data(daemon).await?);
    let processes = parse_processes(
        &read(
            daemon,
            "ps",
            &["-eo", "pid,user,%cpu,%mem,rss,etime,comm", "--no-headers"],
        )
        .await?
        .unwrap_or_default(),
    );
    findings.extend(scan::old_apps(&listeners, &processes));
    let sample = traffic_sample(daemon).await?;
    match sample.map(|s| (s, scan::sustained_traffic(s, None))) {
        Some((_, Some(judged))) => {
            findings.extend(judged);
            scans.traffic_judged = true;
        }
        Some((s, None)) => scans.traffic_first = Some((s.uptime_secs, s.bytes)),
        None => scans.traffic_judged = true,
    }
    let added = fence(daemon).await?;
    let prod = if findings.is_empty() {
        None
    } else {
        Some(prod_mode_on(daemon, &findings).await)
    };
    scans.first_at = Some(now());
    scans.fences_at = scans.first_at;
    let mut text = match prod {
        None => words::first_look_not_production(scans.traffic_judged),
        Some(outcome) => {
            let named: Vec<String> = findings.iter().map(Finding::describe).collect();
            words::first_look_production(&named, &outcome)
        }
    };
    if !added.is_empty() {
        text.push_str(&format!("\n{}", fences_text(&added)));
    }
    daemon.say(text, Vec::new()).await;
    Ok(())
}

/// An hour after the first scan (same boot), the traffic is judged; found
/// sustained, prod mode turns on and the chat is told.
async fn watch_traffic(daemon: &Daemon, scans: &mut Scans) -> Result<(), NotNow> {
    let Some((uptime_secs, bytes)) = scans.traffic_first else {
        scans.traffic_judged = true;
        return Ok(());
    };
    let first = TrafficSample { uptime_secs, bytes };
    let Some(later) = traffic_sample(daemon).await? else {
        return Ok(());
    };
    if later.uptime_secs < first.uptime_secs {
        // Rebooted: watch again from here.
        scans.traffic_first = Some((later.uptime_secs, later.bytes));
        return Ok(());
    }
    let Some(judged) = scan::sustained_traffic(first, Some(later)) else {
        return Ok(());
    };
    scans.traffic_judged = true;
    scans.traffic_first = None;
    if let Some(finding) = judged {
        let outcome = prod_mode_on(daemon, std::slice::from_ref(&finding)).await;
        daemon
            .say(
                words::an_hour_of_traffic(&finding.describe(), &outcome),
                Vec::new(),
            )
            .await;
    }
    Ok(())
}

/// Asks the Warden to turn prod mode on; the sentence for the chat.
async fn prod_mode_on(daemon: &Daemon, findings: &[Finding]) -> String {
    let findings: Vec<String> = findings
        .iter()
        .map(|f| super::schedule::cut(&f.describe(), MAX_FINDING))
        .take(aromba_warden_proto::MAX_FINDINGS)
        .collect();
    match daemon
        .warden()
        .noted(&Request::ProdModeOn { findings })
        .await
    {
        Ok(()) => words::PROD_MODE_TURNED_ON.to_string(),
        Err(e) => words::prod_mode_not_on(&super::chat::said(&e)),
    }
}

/// The domains with certificates (Let's Encrypt's `live` folder; Caddy's
/// certificate folders).
async fn cert_domains(daemon: &Daemon) -> Result<Vec<String>, NotNow> {
    let live = daemon.paths.system("etc/letsencrypt/live");
    let mut domains = parse_ls(&read(daemon, "ls", &[&live]).await?.unwrap_or_default());
    let caddy = daemon
        .paths
        .system("var/lib/caddy/.local/share/caddy/certificates");
    if let Some(out) = read(daemon, "du", &["-B1", "--max-depth=2", &caddy]).await? {
        domains.extend(scan::caddy_domains(&caddy, &parse_du(&out)));
    }
    domains.retain(|d| scan::looks_like_domain(d));
    domains.sort();
    domains.dedup();
    Ok(domains)
}

/// Each database directory under `/var/lib` that holds data.
async fn databases_with_data(daemon: &Daemon) -> Result<Vec<Finding>, NotNow> {
    let var_lib = daemon.paths.system("var/lib");
    let present = parse_ls(&read(daemon, "ls", &[&var_lib]).await?.unwrap_or_default());
    let mut out = Vec::new();
    for db in DATABASES
        .iter()
        .filter(|d| present.iter().any(|p| p == d.dir))
    {
        let folder = format!("{var_lib}/{}", db.dir);
        if let Some(f) = database_with_data(daemon, db, &folder).await? {
            out.push(f);
        }
    }
    Ok(out)
}

async fn database_with_data(
    daemon: &Daemon,
    db: &Database,
    folder: &str,
) -> Result<Option<Finding>, NotNow> {
    if db.rule != DataRule::PostgresBase {
        let listing = read(daemon, "du", &["-B1", "--max-depth=1", folder]).await?;
        return Ok(db.with_data(folder, &parse_du(&listing.unwrap_or_default())));
    }
    let clusters = read(daemon, "du", &["-B1", "--max-depth=3", folder]).await?;
    for base in Database::postgres_bases(&parse_du(&clusters.unwrap_or_default())) {
        let listing = read(daemon, "du", &["-B1", "--max-depth=1", &base]).await?;
        if let Some(mut f) = db.with_data(&base, &parse_du(&listing.unwrap_or_default())) {
            if let Finding::Database { folder: shown, .. } = &mut f {
                folder.clone_into(shown);
            }
            return Ok(Some(f));
        }
    }
    Ok(None)
}

async fn traffic_sample(daemon: &Daemon) -> Result<Option<TrafficSample>, NotNow> {
    let uptime = read(daemon, "cat", &["/proc/uptime"]).await?;
    let dev = read(daemon, "cat", &["/proc/net/dev"]).await?;
    Ok(
        match (
            uptime.as_deref().and_then(parse_uptime),
            dev.as_deref().and_then(parse_net_dev),
        ) {
            (Some(uptime_secs), Some(bytes)) => Some(TrafficSample { uptime_secs, bytes }),
            _ => None,
        },
    )
}

/// Looks for data-like folders and fences the new ones; returns what was
/// added, each with why.
async fn fence(daemon: &Daemon) -> Result<Vec<(String, DataKind)>, NotNow> {
    let root_names = parse_ls(
        &read(daemon, "ls", &[&daemon.paths.system("")])
            .await?
            .unwrap_or_default(),
    );
    let var = daemon.paths.system("var");
    let var_names = parse_ls(&read(daemon, "ls", &[&var]).await?.unwrap_or_default());
    let var_lib = daemon.paths.system("var/lib");
    let lib_names = parse_ls(&read(daemon, "ls", &[&var_lib]).await?.unwrap_or_default());
    let mut found: Vec<(String, DataKind)> = Vec::new();
    for db in DATABASES
        .iter()
        .filter(|d| lib_names.iter().any(|n| n == d.dir))
    {
        found.push((format!("{var_lib}/{}", db.dir), DataKind::Database));
    }
    if lib_names.iter().any(|n| n == "docker") {
        let volumes = format!("{var_lib}/docker/volumes");
        if read(daemon, "ls", &[&volumes]).await?.is_some() {
            found.push((volumes, DataKind::Database));
        }
    }
    for (name, kind) in VAR_DATA {
        if var_names.iter().any(|n| n == name) {
            found.push((format!("{var}/{name}"), *kind));
        }
    }
    for rel in LISTED_ROOTS {
        let there = match rel.split_once('/') {
            Some(("var", name)) => var_names.iter().any(|n| n == name),
            _ => root_names.iter().any(|n| n == rel),
        };
        if !there {
            continue;
        }
        let dir = daemon.paths.system(rel);
        if let Some((out, cut)) = read_whole(daemon, "du", &["-B1", "--max-depth=3", &dir]).await? {
            found.extend(scan::crowded(&dir, scan::data_folders(&parse_du(&out))));
            if cut {
                // What du would have listed after the cut was not seen.
                let names = parse_ls(&read(daemon, "ls", &[&dir]).await?.unwrap_or_default());
                found.extend(scan::unseen(&dir, &names));
            }
        }
    }
    let found = scan::to_ask(found);
    let mut added = Vec::new();
    for chunk in found.chunks(MAX_FENCES_ASKED) {
        let paths: Vec<String> = chunk.iter().map(|(p, _)| p.clone()).collect();
        match warden_client::ask(&daemon.worker_socket(), &Request::AddFences { paths }).await {
            Ok(Response::Fenced {
                added: newly,
                refused,
                ..
            }) => {
                for r in &refused {
                    tracing::info!(refused = %r, "a folder was not fenced");
                }
                for path in newly {
                    let kind = chunk
                        .iter()
                        .find(|(p, _)| same_folder(p, &path))
                        .map_or(DataKind::Database, |(_, k)| *k);
                    added.push((path, kind));
                }
            }
            Ok(other) => tracing::warn!(answer = ?other, "the Warden did not fence"),
            Err(e) => return Err(NotNow::Fence(e)),
        }
    }
    Ok(added)
}

/// The Warden answers with resolved paths: `/var/mail` may come back as
/// itself or as where a link led.
fn same_folder(asked: &str, resolved: &str) -> bool {
    asked == resolved || std::fs::canonicalize(asked).is_ok_and(|p| p.to_string_lossy() == resolved)
}

fn fences_text(added: &[(String, DataKind)]) -> String {
    let shown: Vec<(String, &str)> = added
        .iter()
        .map(|(path, kind)| (scan::shown(path), kind.describe()))
        .collect();
    words::fenced(&shown)
}

/// A read's standard output (whatever its exit code: `du` ends 1 when a
/// file vanished under it, and what it listed still counts); `None` when it
/// did not run (refused, or a folder not there). The Warden not answering,
/// or the read budget spent, is [`NotNow`].
async fn read(daemon: &Daemon, cmd: &str, args: &[&str]) -> Result<Option<String>, NotNow> {
    Ok(read_whole(daemon, cmd, args).await?.map(|(out, _)| out))
}

/// As [`read`], with whether the output was cut (the byte cap, or the
/// time limit): what it would have printed after is unseen.
async fn read_whole(
    daemon: &Daemon,
    cmd: &str,
    args: &[&str],
) -> Result<Option<(String, bool)>, NotNow> {
    if !daemon.take_read() {
        return Err(NotNow::Budget);
    }
    let args = args.iter().map(|a| a.to_string()).collect();
    match daemon.warden().read(cmd, args).await {
        Ok(r) if r.exit_code == Some(0) || !r.stdout.is_empty() => {
            Ok(Some((printable(&r.stdout), r.cut || r.timed_out)))
        }
        Ok(_) => Ok(None),
        Err(WardenError::Refused(reason)) => {
            tracing::debug!(cmd, reason = %reason, "a scan read was refused (a folder not there)");
            Ok(None)
        }
        Err(WardenError::Unreachable(e)) => Err(NotNow::Warden(e)),
        Err(e) => {
            tracing::warn!(cmd, error = %e, "a scan read was not answered");
            Ok(None)
        }
    }
}
