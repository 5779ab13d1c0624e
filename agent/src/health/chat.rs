//! `/status`, `/disk`, `/services`, `/updates`, `/digest`.

use super::{DigestAt, compose, load_digest, save_digest};
use crate::daemon::Daemon;
use crate::daemon::chat::Reply;
use aromba_health::{Alerts, Thresholds};
use aromba_words::health::{self as render, self as words};

pub async fn answer(daemon: &Daemon, name: &str, args: &[String]) -> Reply {
    if name == "digest" {
        return digest(daemon, args.first().map(String::as_str)).await;
    }
    // No health set now (the budget, Slow's minute): why, and when to ask
    // again, rather than a table of "unknown".
    let (snapshot, unread) = match super::collect_or_why(daemon).await {
        Ok(x) => x,
        Err(why) => return why.into(),
    };
    let reply = match name {
        "status" => render::status(&snapshot),
        "disk" => match snapshot.space {
            Some(space) => render::disk(&space),
            None => return words::cannot_read(words::DISKS_SPACE, unread.why("df_space")).into(),
        },
        "services" => match snapshot.failed_units {
            Some(units) if all(args) => render::services_all(&units),
            Some(units) => render::services(&units),
            None => match unread.why("failed_units") {
                Some(why) if super::no_systemd(why) => return words::NO_SYSTEMD.to_string().into(),
                why => return words::cannot_read(words::SERVICES_STATE, why).into(),
            },
        },
        "updates" => match snapshot.updates {
            Some(ups) if all(args) => render::updates_all(&ups),
            Some(ups) => render::updates(&ups),
            None => match unread.why("updates") {
                Some(why) if super::not_installed(why) => return words::NO_APT.to_string().into(),
                why => return words::cannot_read(words::PENDING_UPDATES, why).into(),
            },
        },
        _ => return aromba_words::chat::unknown_command(name).into(),
    };
    let (text, monospace) = compose(&reply);
    Reply {
        text,
        buttons: vec![],
        monospace,
    }
}

/// `all` asks for the whole list rather than its first lines.
fn all(args: &[String]) -> bool {
    args.first().is_some_and(|a| a == "all")
}

/// `HH:MM`, 00:00 to 23:59.
pub fn parse_time(s: &str) -> Option<u16> {
    let (h, m) = s.split_once(':')?;
    if h.is_empty() || h.len() > 2 || m.len() != 2 {
        return None;
    }
    let (h, m): (u16, u16) = (h.parse().ok()?, m.parse().ok()?);
    (h < 24 && m < 60).then_some(h * 60 + m)
}

async fn digest(daemon: &Daemon, arg: Option<&str>) -> Reply {
    if arg == Some("now") {
        // The table in monospace, as the daily one is (it came plain and
        // misaligned).
        let snapshot = match super::collect_or_why(daemon).await {
            Ok((s, _)) => s,
            Err(why) => return why.into(),
        };
        let mut alerts = Alerts::new(Thresholds::default());
        alerts.observe(&snapshot);
        let (text, monospace) = compose(&render::digest(&snapshot, &alerts));
        return Reply {
            text,
            buttons: vec![],
            monospace,
        };
    }
    digest_time(daemon, arg).into()
}

fn digest_time(daemon: &Daemon, arg: Option<&str>) -> String {
    let mut at = load_digest(daemon);
    match arg {
        None => match at.minute {
            Some(m) => words::digest_comes_at(m),
            None => words::NO_DIGEST.into(),
        },
        Some("off") => {
            at = DigestAt::default();
            match save_digest(daemon, &at) {
                Ok(()) => words::DIGEST_OFF.into(),
                Err(e) => e,
            }
        }
        Some(time) => match parse_time(time) {
            Some(minute) => {
                at.minute = Some(minute);
                // A time already past today starts tomorrow: set at 14:00
                // for 08:30, the first digest is not sent a minute later.
                let (today, now) = super::local_day_and_minute();
                let tomorrow = now >= minute;
                at.last_day = tomorrow.then_some(today);
                match save_digest(daemon, &at) {
                    Ok(()) => words::digest_will_come(minute, tomorrow),
                    Err(e) => e,
                }
            }
            None => words::DIGEST_TIME_FORMAT.into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::parse_time;

    #[test]
    fn digest_times_are_hours_and_minutes_of_a_day() {
        assert_eq!(parse_time("08:30"), Some(510));
        assert_eq!(parse_time("8:05"), Some(485));
        assert_eq!(parse_time("23:59"), Some(1439));
        assert_eq!(parse_time("24:00"), None);
        assert_eq!(parse_time("12:60"), None);
        assert_eq!(parse_time("1230"), None);
        assert_eq!(parse_time("12:3"), None);
        assert_eq!(parse_time("-1:30"), None);
    }
}
