//! Health: the numbers from the Warden's health set, every minute (one
//! request, one command toward the Warden's "too many commands", taken from
//! the Worker's budget, `READ_BUDGET`). They go through
//! `aromba-health`'s parsers into its alert state machine, whose events
//! become chat messages (in `aromba-words`' health replies), and into the daily digest at the time the person
//! picked (`/digest HH:MM`, the server's local time).

pub mod chat;

use crate::daemon::Daemon;
use aromba_health::{
    Alerts, Snapshot, Thresholds, parse_apt_upgradable, parse_df_inodes, parse_df_space,
    parse_failed_units, parse_loadavg, parse_meminfo, parse_nproc, parse_reboot_required,
    parse_timedatectl_show,
};
use aromba_warden_proto::{Response, printable};
use aromba_words::health as words;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// One command a minute: ten of the Worker's 48 in ten minutes, the rest
/// left to the chat, dry runs and scheduled runs.
const EVERY: Duration = Duration::from_secs(60);
/// The shortest period `AROMBA_HEALTH_EVERY_S` may ask (the tests', which
/// watch an alert raised and cleared): forty commands in ten minutes.
const EVERY_AT_LEAST: Duration = Duration::from_secs(15);

fn every() -> Duration {
    std::env::var("AROMBA_HEALTH_EVERY_S")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .map_or(EVERY, |s| {
            Duration::from_secs(s).clamp(EVERY_AT_LEAST, EVERY)
        })
}

/// The minute's health, from the Warden's health set (one request): a
/// read that failed leaves its part of the snapshot empty, which neither
/// raises nor clears an alert.
pub async fn collect(daemon: &Daemon) -> Snapshot {
    match collect_or_why(daemon).await {
        Ok((s, _)) => s,
        Err(why) => {
            tracing::info!(why = %why, "this minute's health waits");
            Snapshot::empty(jiff::Timestamp::now().as_second().max(0) as u64)
        }
    }
}

/// The health set, or the one sentence saying why there is none now (the
/// budget spent, the Warden holding the Worker back at Slow with the
/// seconds to wait, the Warden not there): the chat says it rather than a
/// table of "unknown".
pub async fn collect_or_why(daemon: &Daemon) -> Result<(Snapshot, Unread), String> {
    let at = jiff::Timestamp::now().as_second().max(0) as u64;
    let mut s = Snapshot::empty(at);
    if !daemon.take_read() {
        return Err(daemon.busy());
    }
    let reads = match daemon.warden().health().await {
        Ok(reads) => reads,
        Err(e) => return Err(crate::daemon::chat::said(&e)),
    };
    let output = |name: &str| -> Option<String> {
        reads
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, r)| match r {
                Response::Result(r) if r.exit_code == Some(0) => Some(printable(&r.stdout)),
                _ => None,
            })
    };
    let unread = Unread(
        reads
            .iter()
            .filter_map(|(name, r)| why_not(r).map(|why| (name.clone(), why)))
            .collect(),
    );
    s.load = output("loadavg").and_then(|t| parse_loadavg(&t).ok());
    s.cpus = output("nproc").and_then(|t| parse_nproc(&t).ok());
    s.memory = output("meminfo").and_then(|t| parse_meminfo(&t).ok());
    s.space = output("df_space").and_then(|t| parse_df_space(&t).ok());
    s.inodes = output("df_inodes").and_then(|t| parse_df_inodes(&t).ok());
    s.failed_units = output("failed_units").and_then(|t| parse_failed_units(&t).ok());
    s.updates = output("updates").and_then(|t| parse_apt_upgradable(&t).ok());
    s.clock = output("clock").and_then(|t| parse_timedatectl_show(&t).ok());
    // The flag files are in the answer only when they exist; one there but
    // unread leaves the reboot part empty.
    let flag_there = reads.iter().any(|(n, _)| n == "reboot_required");
    let flag = output("reboot_required");
    s.reboot = if flag_there && flag.is_none() {
        None
    } else {
        parse_reboot_required(flag.as_deref(), output("reboot_required_pkgs").as_deref()).ok()
    };
    Ok((s, unread))
}

/// Why each read of the health set that gave nothing gave nothing, by the
/// read's name, in the Warden's words.
#[derive(Debug, Default)]
pub struct Unread(Vec<(String, String)>);

impl Unread {
    /// Why `name` was not read, when it was not.
    pub fn why(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, w)| w.as_str())
    }
}

/// Why a read's answer holds nothing to parse; `None` for a good one.
fn why_not(r: &Response) -> Option<String> {
    match r {
        Response::Result(r) if r.exit_code == Some(0) => None,
        Response::Result(r) => Some(
            printable(&r.stderr)
                .lines()
                .next()
                .filter(|l| !l.trim().is_empty())
                .map_or_else(
                    || words::read_ended_with(r.exit_code.unwrap_or(-1)),
                    str::to_string,
                ),
        ),
        Response::Refused { reason, .. } => Some(reason.clone()),
        Response::Error { message } => Some(message.clone()),
        _ => Some(aromba_words::chat::WARDEN_ODD_CLAUSE.into()),
    }
}

/// Whether `why` says the program is not on this server (the Warden's
/// words for a command with none of its binaries here).
pub fn not_installed(why: &str) -> bool {
    why.contains("is not installed here")
}

/// Whether `why` says systemd is not what runs this server (a container,
/// a system with another init): systemctl is there, but has nothing to ask.
pub fn no_systemd(why: &str) -> bool {
    not_installed(why) || why.contains("not been booted with systemd")
}

/// The person's digest time, kept in the Worker's home.
#[derive(Debug, Default, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct DigestAt {
    /// Minutes after local midnight; `None`: no digest.
    pub minute: Option<u16>,
    /// The local date of the last digest sent (`YYYYMMDD`).
    pub last_day: Option<u32>,
}

const DIGEST: &str = "digest.json";

pub fn load_digest(daemon: &Daemon) -> DigestAt {
    crate::daemon::kept::load(daemon, DIGEST)
}

pub fn save_digest(daemon: &Daemon, at: &DigestAt) -> Result<(), String> {
    crate::daemon::kept::save(daemon, DIGEST, at).map_err(|e| words::digest_not_kept(&e))
}

/// Sends a reply of `aromba-health`'s: its text, then its block marked
/// monospace.
pub async fn say_reply(daemon: &Daemon, reply: words::Reply) {
    let (text, spans) = compose(&reply);
    daemon.say_formatted(text, vec![], spans).await;
}

/// The text and its block as one message, and the block's span.
pub fn compose(reply: &words::Reply) -> (String, Vec<aromba_relay_proto::frame::Span>) {
    match &reply.block {
        None => (reply.text.clone(), Vec::new()),
        Some(block) => {
            let text = format!("{}\n{block}", reply.text);
            let start = reply.text.len() + 1;
            let spans = aromba_relay_proto::frame::Span::of(&text, start, text.len())
                .into_iter()
                .collect();
            (text, spans)
        }
    }
}

/// Today's local date (`YYYYMMDD`) and the minute of the day.
pub fn local_day_and_minute() -> (u32, u16) {
    let now = jiff::ZonedDateTime::now();
    let today = (now.year() as u32) * 10_000 + (now.month() as u32) * 100 + now.day() as u32;
    (today, now.hour() as u16 * 60 + now.minute() as u16)
}

/// Every minute, from a minute after start: a snapshot, its alerts to the
/// chat, and the digest when its time has come. Not at start: a Worker
/// restarted again and again (a crash loop, an update) would run the whole
/// health set each time, `apt list` alone over a second of CPU; `/status`
/// reads it whenever the person asks.
pub async fn watch(daemon: Arc<Daemon>) {
    let mut alerts = Alerts::new(Thresholds::default());
    let period = every();
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let snapshot = collect(&daemon).await;
        for event in alerts.observe(&snapshot) {
            daemon.say(words::event(&event), vec![]).await;
        }
        let mut digest = load_digest(&daemon);
        let (today, minute) = local_day_and_minute();
        if let Some(at) = digest.minute
            && minute >= at
            && digest.last_day != Some(today)
        {
            say_reply(&daemon, words::digest(&snapshot, &alerts)).await;
            digest.last_day = Some(today);
            if let Err(e) = save_digest(&daemon, &digest) {
                tracing::warn!(error = %e, "the digest's day was not kept");
            }
        }
    }
}
