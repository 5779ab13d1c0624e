//! Health: the numbers from Warden reads, every five minutes (about ten
//! reads each time, within the Worker's read budget, `READ_BUDGET`, which
//! keeps it under the Warden's "too many commands"). They go through
//! `aromba-health`'s parsers into its alert state machine, whose events
//! become chat messages, and into the daily digest at the time the person
//! picked (`/digest HH:MM`, the server's local time).

pub mod chat;

use crate::daemon::Daemon;
use crate::daemon::chat::read;
use aromba_health::{
    Alerts, Snapshot, Thresholds, parse_apt_upgradable, parse_df_inodes, parse_df_space,
    parse_failed_units, parse_loadavg, parse_meminfo, parse_nproc, parse_reboot_required,
    parse_timedatectl_show, render,
};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// Ten reads a snapshot: 20 of the Worker's 48 reads in ten minutes,
/// leaving the rest to the chat.
const EVERY: Duration = Duration::from_secs(300);

/// Every read of one minute, each on its own: one that fails leaves its
/// part of the snapshot empty (which neither raises nor clears an alert).
pub async fn collect(daemon: &Daemon) -> Snapshot {
    let at = jiff::Timestamp::now().as_second().max(0) as u64;
    let mut s = Snapshot::empty(at);
    s.load = ok(read(daemon, "cat", &["/proc/loadavg"]).await, parse_loadavg);
    s.cpus = ok(read(daemon, "nproc", &[]).await, parse_nproc);
    s.memory = ok(read(daemon, "cat", &["/proc/meminfo"]).await, parse_meminfo);
    s.space = match read(daemon, "df", &["-P", "-B1", "-T"]).await {
        Ok(text) => parse_df_space(&text).ok(),
        // busybox's df has no -B1: 1024-byte blocks, as its header says.
        Err(_) => ok(
            read(daemon, "df", &["-P", "-k", "-T"]).await,
            parse_df_space,
        ),
    };
    s.inodes = ok(
        read(daemon, "df", &["-P", "-i", "-T"]).await,
        parse_df_inodes,
    );
    s.failed_units = ok(
        read(
            daemon,
            "systemctl",
            &[
                "list-units",
                "--failed",
                "--plain",
                "--no-legend",
                "--no-pager",
            ],
        )
        .await,
        parse_failed_units,
    );
    s.updates = ok(
        read(daemon, "apt", &["list", "--upgradable"]).await,
        parse_apt_upgradable,
    );
    s.reboot = reboot(daemon).await;
    s.clock = ok(
        read(daemon, "timedatectl", &["show"]).await,
        parse_timedatectl_show,
    );
    s
}

fn ok<T, E>(text: Result<String, String>, parse: impl Fn(&str) -> Result<T, E>) -> Option<T> {
    parse(&text.ok()?).ok()
}

/// Whether `/run/reboot-required` is there is read from the listing of
/// `/run` (the Warden refuses a path that does not exist, which is no
/// answer to read).
async fn reboot(daemon: &Daemon) -> Option<aromba_health::RebootStatus> {
    let listing = read(daemon, "ls", &["-1", "/run"]).await.ok()?;
    let names: Vec<&str> = listing.lines().map(str::trim).collect();
    let flag = if names.contains(&"reboot-required") {
        Some(read(daemon, "cat", &["/run/reboot-required"]).await.ok()?)
    } else {
        None
    };
    let pkgs = if names.contains(&"reboot-required.pkgs") {
        read(daemon, "cat", &["/run/reboot-required.pkgs"])
            .await
            .ok()
    } else {
        None
    };
    parse_reboot_required(flag.as_deref(), pkgs.as_deref()).ok()
}

/// The person's digest time, kept in the Worker's home.
#[derive(Debug, Default, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct DigestAt {
    /// Minutes after local midnight; `None`: no digest.
    pub minute: Option<u16>,
    /// The local date of the last digest sent (`YYYYMMDD`).
    pub last_day: Option<u32>,
}

pub fn digest_file(daemon: &Daemon) -> std::path::PathBuf {
    daemon.paths.home.join("digest.json")
}

pub fn load_digest(daemon: &Daemon) -> DigestAt {
    std::fs::read(digest_file(daemon))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

pub fn save_digest(daemon: &Daemon, at: &DigestAt) -> Result<(), String> {
    let path = digest_file(daemon);
    let tmp = path.with_extension("tmp");
    let text = serde_json::to_vec(at).map_err(|e| e.to_string())?;
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|e| format!("I could not keep it: {e}"))
}

/// Sends a reply of `aromba-health`'s: its text, then its block marked
/// monospace.
pub async fn say_reply(daemon: &Daemon, reply: render::Reply) {
    let (text, spans) = compose(&reply);
    daemon.say_formatted(text, vec![], spans).await;
}

/// The text and its block as one message, and the block's span.
pub fn compose(reply: &render::Reply) -> (String, Vec<aromba_proto::frame::Span>) {
    match &reply.block {
        None => (reply.text.clone(), Vec::new()),
        Some(block) => {
            let text = format!("{}\n{block}", reply.text);
            let start = reply.text.len() + 1;
            let spans = aromba_proto::frame::Span::of(&text, start, text.len())
                .into_iter()
                .collect();
            (text, spans)
        }
    }
}

/// Every five minutes: a snapshot, its alerts to the chat, and the digest when
/// its time has come.
pub async fn watch(daemon: Arc<Daemon>) {
    let mut alerts = Alerts::new(Thresholds::default());
    let mut ticker = tokio::time::interval(EVERY);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let snapshot = collect(&daemon).await;
        for event in alerts.observe(&snapshot) {
            daemon.say(render::event(&event), vec![]).await;
        }
        let mut digest = load_digest(&daemon);
        let now = jiff::ZonedDateTime::now();
        let today = (now.year() as u32) * 10_000 + (now.month() as u32) * 100 + now.day() as u32;
        let minute = now.hour() as u16 * 60 + now.minute() as u16;
        if let Some(at) = digest.minute
            && minute >= at
            && digest.last_day != Some(today)
        {
            say_reply(&daemon, render::digest(&snapshot, &alerts)).await;
            digest.last_day = Some(today);
            if let Err(e) = save_digest(&daemon, &digest) {
                tracing::warn!(error = %e, "the digest's day was not kept");
            }
        }
    }
}
