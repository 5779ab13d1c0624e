//! The health replies (`/status`, `/disk`, `/services`, `/updates`, the
//! daily digest, the alerts) and what the health commands say when they
//! cannot answer, for a phone, in plain text (Telegram gets no parse mode).
//!
//! A [`Reply`] is prose plus, where numbers belong in columns, a separate
//! block the caller shows in a monospace font. Block lines are at most
//! [`BLOCK_WIDTH`] characters, which fits a phone held upright; a long
//! mount point is shortened in the middle with `…`, so both its start and
//! its last component stay readable. Widths count characters, not
//! display cells: East Asian wide characters in a mount point can make a
//! line look wider than it is.
//!
//! Sizes are decimal, as `df -h --si` prints them, rounded up: `2.5 MB`,
//! `76 GB` (see [`human_bytes`]). A used percentage is rounded up as `df`
//! rounds it, so `/disk` shows what `df` shows on the server; a free
//! percentage is rounded down. A value read from an estimate (memory on a
//! kernel without `MemAvailable`) is marked `~`.

use std::fmt::Write as _;

use aromba_health::alerts::{AlertKind, Alerts, Event, Measure, Snapshot, Thresholds};
use aromba_health::apt::Upgrade;
use aromba_health::df::Filesystem;
use aromba_health::fsfilter::is_relevant;
use aromba_health::systemctl::FailedUnit;
use aromba_health::units::{Ratio, human_bytes};

/// The widest line of a monospace block.
pub const BLOCK_WIDTH: usize = 32;

/// Names listed in `/updates` before "and N more".
pub const UPDATES_LISTED: usize = 10;

/// Failed units listed in `/services` before "and N more".
pub const UNITS_LISTED: usize = 20;

/// A reply: prose, and a block to show in monospace (if any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub text: String,
    pub block: Option<String>,
}

/// `s` in at most `width` characters: unchanged if it fits, else its start
/// and end around `…`.
pub fn ellipsize_middle(s: &str, width: usize) -> String {
    let chars: Vec<char> = s.chars().collect();
    if chars.len() <= width {
        return s.to_owned();
    }
    if width == 0 {
        return String::new();
    }
    let left = width / 2;
    let right = width - 1 - left;
    let mut out: String = chars[..left].iter().collect();
    out.push('…');
    out.extend(&chars[chars.len() - right..]);
    out
}

/// `s` in at most `width` characters, cut at the end with `…`.
fn ellipsize_end(s: &str, width: usize) -> String {
    let chars: Vec<char> = s.chars().collect();
    if chars.len() <= width {
        return s.to_owned();
    }
    let mut out: String = chars[..width.saturating_sub(1)].iter().collect();
    out.push('…');
    out
}

/// Text from the server made safe to show: control characters and
/// direction overrides (which could make a line read as something else)
/// become `?`.
fn clean(s: &str) -> String {
    s.chars()
        .map(|c| {
            let bidi = matches!(c, '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}');
            if c.is_control() || bidi { '?' } else { c }
        })
        .collect()
}

fn plural(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {many}")
    }
}

/// A `label value` line of the status block.
fn line(label: &str, value: &str) -> String {
    ellipsize_end(&format!("{label:<9}{value}"), BLOCK_WIDTH)
}

/// The fullest relevant filesystem of a table.
fn fullest(rows: &[Filesystem]) -> Option<(&Filesystem, Ratio)> {
    rows.iter()
        .filter(|fs| is_relevant(fs))
        .filter_map(|fs| fs.used_ratio().map(|r| (fs, r)))
        .max_by(|a, b| a.1.compare(b.1))
}

fn fullest_line(label: &str, rows: Option<&Vec<Filesystem>>) -> String {
    match rows.map(|r| fullest(r)) {
        None => line(label, "unknown"),
        Some(None) => line(label, "nothing to watch"),
        Some(Some((fs, used))) => {
            let pct = format!("{}% ", used.percent_ceil());
            let room = BLOCK_WIDTH - 9 - pct.chars().count();
            line(
                label,
                &format!("{pct}{}", ellipsize_middle(&clean(&fs.mount), room)),
            )
        }
    }
}

/// The lines of `/status`, also the heart of the digest.
fn status_block(s: &Snapshot) -> String {
    let mut lines = Vec::new();
    lines.push(match &s.load {
        None => line("Load", "unknown"),
        Some(l) => {
            let all = format!("{} {} {}", l.one, l.five, l.fifteen);
            if 9 + all.len() <= BLOCK_WIDTH {
                line("Load", &all)
            } else {
                line("Load", &l.one.to_string())
            }
        }
    });
    lines.push(match s.cpus {
        None => line("CPUs", "unknown"),
        Some(n) => line("CPUs", &n.to_string()),
    });
    lines.push(match &s.memory {
        None => line("Memory", "unknown"),
        Some(m) => {
            let approx = if m.available_estimated { "~" } else { "" };
            line(
                "Memory",
                &format!(
                    "{approx}{}% free of {}",
                    m.available_ratio().percent_floor(),
                    human_bytes(m.total)
                ),
            )
        }
    });
    lines.push(match &s.memory {
        None => line("Swap", "unknown"),
        Some(m) => match m.swap_used_ratio() {
            None => line("Swap", "none"),
            Some(used) => line(
                "Swap",
                &format!(
                    "{}% used of {}",
                    used.percent_ceil(),
                    human_bytes(m.swap_total)
                ),
            ),
        },
    });
    lines.push(fullest_line("Disk", s.space.as_ref()));
    lines.push(fullest_line("Inodes", s.inodes.as_ref()));
    lines.push(match &s.failed_units {
        None => line("Services", "unknown"),
        Some(u) if u.is_empty() => line("Services", "all running"),
        Some(u) => line("Services", &format!("{} failed", u.len())),
    });
    lines.push(match &s.updates {
        None => line("Updates", "unknown"),
        Some(u) if u.is_empty() => line("Updates", "none"),
        Some(u) => {
            let security = u.iter().filter(|u| u.is_security()).count();
            line("Updates", &format!("{}, {security} security", u.len()))
        }
    });
    lines.push(match &s.reboot {
        None => line("Reboot", "unknown"),
        Some(r) if r.required => line("Reboot", "needed"),
        Some(_) => line("Reboot", "not needed"),
    });
    lines.push(match &s.clock {
        None => line("Clock", "unknown"),
        Some(c) if c.synchronized => line("Clock", "in sync"),
        Some(c) if c.ntp_enabled == Some(false) => line("Clock", "NOT in sync, NTP off"),
        Some(_) => line("Clock", "NOT in sync"),
    });
    lines.join("\n")
}

/// `/status`: load, memory, swap, the fullest disk, failed units, updates,
/// reboot and clock, one line each.
pub fn status(s: &Snapshot) -> Reply {
    Reply {
        text: format!("Server status: {}", verdict(s)),
        block: Some(status_block(s)),
    }
}

/// The verdict `/status` leads with, in plain words: what the alerts'
/// thresholds would raise on this snapshot, or that all is well (as far
/// as it could be read).
pub fn verdict(s: &Snapshot) -> String {
    let mut alerts = Alerts::new(Thresholds::default());
    let raised: Vec<String> = alerts
        .observe(s)
        .iter()
        .filter(|e| matches!(e, Event::Raised { .. }))
        .map(event)
        .collect();
    let unread = s.load.is_none() || s.memory.is_none() || s.space.is_none();
    match (raised.is_empty(), unread) {
        (true, false) => "all good.".to_owned(),
        (true, true) => {
            "nothing wrong in what I could read (the rows that say unknown I could not).".to_owned()
        }
        (false, _) => format!("needs a look. {}", raised.join(" ")),
    }
}

/// `/disk`: one line per relevant filesystem — mount point, used %, free.
pub fn disk(space: &[Filesystem]) -> Reply {
    const MOUNT: usize = 20;
    let rows: Vec<&Filesystem> = space.iter().filter(|fs| is_relevant(fs)).collect();
    if rows.is_empty() {
        return Reply {
            text: "No filesystems to show.".to_owned(),
            block: None,
        };
    }
    let mut block = format!("{:<MOUNT$} {:>4} {:>6}", "Mount", "Used", "Free");
    for fs in &rows {
        let used = fs
            .used_ratio()
            .map_or_else(|| "-".to_owned(), |r| format!("{}%", r.percent_ceil()));
        let _ = write!(
            block,
            "\n{:<MOUNT$} {:>4} {:>6}",
            ellipsize_middle(&clean(&fs.mount), MOUNT),
            used,
            human_bytes(fs.avail)
        );
    }
    Reply {
        text: format!(
            "Disk space, {}:",
            plural(rows.len(), "filesystem", "filesystems")
        ),
        block: Some(block),
    }
}

/// `/services`: the failed units (the first [`UNITS_LISTED`]), or that all
/// services run.
pub fn services(units: &[FailedUnit]) -> Reply {
    services_listing(units, UNITS_LISTED)
}

/// `/services all`: every failed unit.
pub fn services_all(units: &[FailedUnit]) -> Reply {
    services_listing(units, usize::MAX)
}

fn services_listing(units: &[FailedUnit], listed: usize) -> Reply {
    if units.is_empty() {
        return Reply {
            text: "All services running.".to_owned(),
            block: None,
        };
    }
    let mut text = if units.len() == 1 {
        "1 service has failed:".to_owned()
    } else {
        format!("{} services have failed:", units.len())
    };
    for u in units.iter().take(listed) {
        let _ = write!(text, "\n• {}", clean(&u.name));
        if !u.description.is_empty() {
            let _ = write!(text, " ({})", ellipsize_end(&clean(&u.description), 60));
        }
    }
    if units.len() > listed {
        let _ = write!(
            text,
            "\nand {} more (/services all lists them all).",
            units.len() - listed
        );
    }
    Reply { text, block: None }
}

/// `/updates`: how many, how many are security updates, and up to
/// [`UPDATES_LISTED`] names (security updates first, then by name).
pub fn updates(ups: &[Upgrade]) -> Reply {
    updates_listing(ups, UPDATES_LISTED)
}

/// `/updates all`: every name.
pub fn updates_all(ups: &[Upgrade]) -> Reply {
    updates_listing(ups, usize::MAX)
}

fn updates_listing(ups: &[Upgrade], listed: usize) -> Reply {
    if ups.is_empty() {
        return Reply {
            text: "No updates pending.".to_owned(),
            block: None,
        };
    }
    let security = ups.iter().filter(|u| u.is_security()).count();
    let count = plural(ups.len(), "update", "updates");
    let mut text = match (ups.len(), security) {
        (_, 0) => format!("{count} pending, none of them a security update."),
        (1, 1) => "1 update pending, a security update.".to_owned(),
        (_, 1) => format!("{count} pending, 1 of them a security update."),
        (_, n) => format!("{count} pending, {n} of them security updates."),
    };
    let mut sorted: Vec<&Upgrade> = ups.iter().collect();
    sorted.sort_by(|a, b| {
        b.is_security()
            .cmp(&a.is_security())
            .then_with(|| a.package.cmp(&b.package))
    });
    for u in sorted.iter().take(listed) {
        let mark = if u.is_security() { " (security)" } else { "" };
        let _ = write!(text, "\n• {}{mark}", u.package);
    }
    if ups.len() > listed {
        let _ = write!(
            text,
            "\nand {} more (/updates all lists them all).",
            ups.len() - listed
        );
    }
    Reply { text, block: None }
}

/// The clock's alert, when it has no count of minutes.
const CLOCK_NOT_SYNCHRONIZED: &str = "the clock is not synchronized";

/// An open alert in a few words.
fn describe(kind: AlertKind, subject: &str) -> String {
    let subject = clean(subject);
    match kind {
        AlertKind::DiskSpace => format!("disk space on {subject}"),
        AlertKind::Inodes => format!("inodes on {subject}"),
        AlertKind::Memory => "memory".to_owned(),
        AlertKind::Swap => "swap".to_owned(),
        AlertKind::Load => "load".to_owned(),
        AlertKind::FailedUnit => format!("{subject} failed"),
        AlertKind::RebootRequired => "a reboot is needed".to_owned(),
        AlertKind::ClockUnsynchronized => CLOCK_NOT_SYNCHRONIZED.to_owned(),
    }
}

/// The daily digest: the open alerts, what asks for a reboot, the pending
/// security updates, and the status block.
pub fn digest(s: &Snapshot, alerts: &Alerts) -> Reply {
    let mut text = "Daily digest.".to_owned();
    let open = alerts.active();
    if open.is_empty() {
        text.push_str("\nNo alerts open.");
    } else {
        let _ = write!(text, "\n{} open:", plural(open.len(), "alert", "alerts"));
        for (kind, subject) in &open {
            let _ = write!(text, "\n• {}", describe(*kind, subject));
        }
    }
    if let Some(r) = s
        .reboot
        .as_ref()
        .filter(|r| r.required && !r.packages.is_empty())
    {
        let names: Vec<&str> = r
            .packages
            .iter()
            .take(UPDATES_LISTED)
            .map(String::as_str)
            .collect();
        let _ = write!(text, "\nThe reboot is asked for by {}.", names.join(", "));
    }
    if let Some(ups) = &s.updates {
        let mut security: Vec<&str> = ups
            .iter()
            .filter(|u| u.is_security())
            .map(|u| u.package.as_str())
            .collect();
        security.sort_unstable();
        if !security.is_empty() {
            let more = security.len().saturating_sub(UPDATES_LISTED);
            let listed = security[..security.len().min(UPDATES_LISTED)].join(", ");
            let _ = write!(text, "\nSecurity updates: {listed}");
            if more > 0 {
                let _ = write!(text, " and {more} more");
            }
            text.push('.');
        }
    }
    Reply {
        text,
        block: Some(status_block(s)),
    }
}

fn percent_used(m: Measure) -> String {
    match m {
        Measure::Percent(r) => format!("{}%", r.percent_ceil()),
        _ => "?".to_owned(),
    }
}

fn percent_free(m: Measure) -> String {
    match m {
        Measure::Percent(r) => format!("{}%", r.percent_floor()),
        _ => "?".to_owned(),
    }
}

fn load(m: Measure) -> String {
    match m {
        Measure::LoadPerCpu(l) => l.to_string(),
        _ => "?".to_owned(),
    }
}

/// The chat message for an alert raised or cleared.
pub fn event(e: &Event) -> String {
    match e {
        Event::Raised {
            kind,
            subject,
            value,
            threshold,
        } => {
            let subject = clean(subject);
            match kind {
                AlertKind::DiskSpace => format!(
                    "Disk {subject} is {} full (alert at {}).",
                    percent_used(*value),
                    percent_used(*threshold)
                ),
                AlertKind::Inodes => format!(
                    "Disk {subject} has used {} of its inodes (alert at {}): new files will soon fail.",
                    percent_used(*value),
                    percent_used(*threshold)
                ),
                AlertKind::Memory => format!(
                    "Memory is low: {} available (alert below {}).",
                    percent_free(*value),
                    percent_free(*threshold)
                ),
                AlertKind::Swap => format!(
                    "Swap is {} used (alert above {}).",
                    percent_used(*value),
                    percent_used(*threshold)
                ),
                AlertKind::Load => format!(
                    "Load is high: {} per CPU for several minutes (alert above {}).",
                    load(*value),
                    load(*threshold)
                ),
                AlertKind::FailedUnit => format!("Service {subject} has failed."),
                AlertKind::RebootRequired => {
                    "A reboot is needed to finish installing updates.".to_owned()
                }
                AlertKind::ClockUnsynchronized => match value {
                    Measure::Readings(n) => {
                        format!("The clock has not been synchronized for {n} minutes.")
                    }
                    _ => crate::sentence(CLOCK_NOT_SYNCHRONIZED),
                },
            }
        }
        Event::Cleared {
            kind,
            subject,
            value,
            ..
        } => {
            let subject = clean(subject);
            match (kind, value) {
                (AlertKind::DiskSpace | AlertKind::Inodes, Measure::Gone) => {
                    format!("Disk {subject} is no longer mounted; its alert is closed.")
                }
                (AlertKind::DiskSpace, v) => {
                    format!("Disk {subject} is back to {} used.", percent_used(*v))
                }
                (AlertKind::Inodes, v) => {
                    format!(
                        "Disk {subject} is back to {} of its inodes used.",
                        percent_used(*v)
                    )
                }
                (AlertKind::Memory, v) => {
                    format!("Memory is back to {} available.", percent_free(*v))
                }
                (AlertKind::Swap, Measure::Gone) => {
                    "Swap was turned off; its alert is closed.".to_owned()
                }
                (AlertKind::Swap, v) => format!("Swap is back to {} used.", percent_used(*v)),
                (AlertKind::Load, v) => format!("Load is back to {} per CPU.", load(*v)),
                (AlertKind::FailedUnit, _) => format!("Service {subject} is no longer failed."),
                (AlertKind::RebootRequired, _) => "The reboot is done.".to_owned(),
                (AlertKind::ClockUnsynchronized, _) => {
                    "The clock is synchronized again.".to_owned()
                }
            }
        }
    }
}

/// What `/services` says on a server without systemd.
pub const NO_SYSTEMD: &str = "This server does not run systemd, so I cannot list its services.";
/// What `/updates` says on a server without apt.
pub const NO_APT: &str =
    "This server has no apt (it is not a Debian or Ubuntu system), so I cannot list its updates.";

/// What [`cannot_read`] could not read.
pub const DISKS_SPACE: &str = "the disks' space";
pub const SERVICES_STATE: &str = "the services' state";
pub const PENDING_UPDATES: &str = "the pending updates";

/// "I could not read WHAT", with the reason when there is one.
pub fn cannot_read(what: &str, why: Option<&str>) -> String {
    match why {
        Some(why) => format!("I could not read {what}: {why}."),
        None => format!("I could not read {what}: the Warden's answer left it out."),
    }
}

/// Why a read gave nothing, when it did not say: how it ended.
pub fn read_ended_with(code: i32) -> String {
    format!("it ended with code {code}")
}

/// `/digest`: when it comes.
pub fn digest_comes_at(minute: u16) -> String {
    format!(
        "The daily digest comes at {:02}:{:02}. /digest off stops it; /digest now sends one now.",
        minute / 60,
        minute % 60
    )
}

/// `/digest` with none set.
pub const NO_DIGEST: &str = "No daily digest. /digest 08:30 sends one every day at 08:30.";

/// `/digest off`.
pub const DIGEST_OFF: &str = "No more daily digest.";

/// `/digest HH:MM`: when the first one comes, `tomorrow` when the time is
/// past today.
pub fn digest_will_come(minute: u16, tomorrow: bool) -> String {
    format!(
        "The daily digest will come at {:02}:{:02}, this server's time, from {}.",
        minute / 60,
        minute % 60,
        if tomorrow { "tomorrow" } else { "today" }
    )
}

/// `/digest` with something else than a time.
pub const DIGEST_TIME_FORMAT: &str = "Give the time as HH:MM, for example /digest 08:30.";

/// The digest time could not be kept in the Worker's home.
pub fn digest_not_kept(error: &dyn std::fmt::Display) -> String {
    format!("I could not keep it: {error}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_names_are_cut_in_the_middle() {
        assert_eq!(ellipsize_middle("/srv/backup disk", 20), "/srv/backup disk");
        assert_eq!(
            ellipsize_middle("/var/lib/postgresql/16/main", 20),
            "/var/lib/p…l/16/main"
        );
        assert_eq!(
            ellipsize_middle("/var/lib/postgresql/16/main", 20)
                .chars()
                .count(),
            20
        );
        assert_eq!(ellipsize_middle("abc", 1), "…");
        assert_eq!(ellipsize_middle("abc", 0), "");
    }

    #[test]
    fn direction_overrides_are_neutralised() {
        assert_eq!(clean("/srv/\u{202E}txt.exe"), "/srv/?txt.exe");
    }
}
