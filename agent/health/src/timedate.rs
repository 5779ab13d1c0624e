//! `timedatectl show`: systemd-timedated's properties as `Key=value` lines.
//!
//! Booleans are `yes`/`no`. `NTPSynchronized` must be present; `Timezone`,
//! `NTP` (whether time synchronization is turned on), `CanNTP` and
//! `LocalRTC` are read when present; other keys (`TimeUSec`, …) are read
//! for their form only. systemd before 239 has no `show` and answers
//! `Unknown operation show`: that is [`ErrorKind::Unsupported`].

use crate::error::{ErrorKind, ParseError, Source};
use crate::text::{Replacement, checked_lines};

/// The clock's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClockStatus {
    /// `Europe/Paris`; `None` when unset.
    pub timezone: Option<String>,
    /// `NTP`: time synchronization is turned on.
    pub ntp_enabled: Option<bool>,
    /// `CanNTP`: a synchronization service is installed.
    pub can_ntp: Option<bool>,
    /// `LocalRTC`: the hardware clock keeps local time (a Windows habit).
    pub local_rtc: Option<bool>,
    /// `NTPSynchronized`: the kernel considers the clock synchronized.
    pub synchronized: bool,
}

pub fn parse_timedatectl_show(text: &str) -> Result<ClockStatus, ParseError> {
    const S: Source = Source::Timedatectl;
    let lines = checked_lines(S, text, Replacement::Refused)?;
    let mut timezone: Option<Option<String>> = None;
    let mut ntp = None;
    let mut can_ntp = None;
    let mut local_rtc = None;
    let mut synchronized = None;
    let mut any = false;
    for (n, line) in lines {
        if line.is_empty() {
            continue;
        }
        if !any
            && (line.starts_with("Unknown operation") || line.starts_with("Unknown command verb"))
        {
            return Err(ParseError::at(S, n, ErrorKind::Unsupported));
        }
        any = true;
        let (key, value) =
            line.split_once('=')
                .ok_or(ParseError::at(S, n, ErrorKind::UnexpectedLine))?;
        if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(ParseError::at(S, n, ErrorKind::Invalid("key")));
        }
        let flag = |slot: &mut Option<bool>, field: &'static str| -> Result<(), ParseError> {
            if slot.is_some() {
                return Err(ParseError::at(S, n, ErrorKind::Duplicate(field)));
            }
            *slot = Some(match value {
                "yes" => true,
                "no" => false,
                _ => return Err(ParseError::at(S, n, ErrorKind::Invalid(field))),
            });
            Ok(())
        };
        match key {
            "NTPSynchronized" => flag(&mut synchronized, "NTPSynchronized")?,
            "NTP" => flag(&mut ntp, "NTP")?,
            "CanNTP" => flag(&mut can_ntp, "CanNTP")?,
            "LocalRTC" => flag(&mut local_rtc, "LocalRTC")?,
            "Timezone" => {
                if timezone.is_some() {
                    return Err(ParseError::at(S, n, ErrorKind::Duplicate("Timezone")));
                }
                if !value
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"/_+-.".contains(&b))
                    || value.len() > 64
                {
                    return Err(ParseError::at(S, n, ErrorKind::Invalid("Timezone")));
                }
                timezone = Some((!value.is_empty()).then(|| value.to_owned()));
            }
            _ => {}
        }
    }
    if !any {
        return Err(ParseError::whole(S, ErrorKind::Empty));
    }
    Ok(ClockStatus {
        timezone: timezone.flatten(),
        ntp_enabled: ntp,
        can_ntp,
        local_rtc,
        synchronized: synchronized.ok_or(ParseError::whole(
            S,
            ErrorKind::MissingField("NTPSynchronized"),
        ))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_synchronized_clock() {
        let c = parse_timedatectl_show("Timezone=Etc/UTC\nNTP=yes\nNTPSynchronized=yes\n");
        assert_eq!(
            c,
            Ok(ClockStatus {
                timezone: Some("Etc/UTC".to_owned()),
                ntp_enabled: Some(true),
                can_ntp: None,
                local_rtc: None,
                synchronized: true,
            })
        );
    }

    #[test]
    fn an_empty_timezone_is_none() {
        let c = parse_timedatectl_show("Timezone=\nNTPSynchronized=no\n");
        assert_eq!(c.map(|c| c.timezone), Ok(None));
    }

    #[test]
    fn refusals_name_the_line() {
        for (text, line, kind) in [
            ("", 0, ErrorKind::Empty),
            ("NTP=yes\n", 0, ErrorKind::MissingField("NTPSynchronized")),
            (
                "NTPSynchronized=maybe\n",
                1,
                ErrorKind::Invalid("NTPSynchronized"),
            ),
            (
                "NTPSynchronized=yes\nNTPSynchronized=no\n",
                2,
                ErrorKind::Duplicate("NTPSynchronized"),
            ),
            (
                "NTPSynchronized=yes\ngarbage\n",
                2,
                ErrorKind::UnexpectedLine,
            ),
            (
                "Timezone=Europe/Par is\nNTPSynchronized=yes\n",
                1,
                ErrorKind::Invalid("Timezone"),
            ),
        ] {
            assert_eq!(
                parse_timedatectl_show(text).map_err(|e| (e.line, e.kind)),
                Err((line, kind)),
                "{text:?}"
            );
        }
    }
}
