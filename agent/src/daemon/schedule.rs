//! The schedule: once a minute the Warden's chores with their schedules
//! (`manual`, `daily HH:MM`, `weekly DAY HH:MM`, `monthly D HH:MM`, in the
//! server's local time). When a chore's time has come:
//!
//! - its first real run waits for a dry run shown in the chat: the Worker
//!   asks for the dry run, shows what it would change, and tells the Warden
//!   it was shown (`dry_run_shown`); the real run comes at the next time;
//! - a green chore is asked for (`run_due`): the Warden runs it when it may
//!   and the receipt goes to the chat;
//! - a yellow or red one is proposed: the Warden's own message and buttons
//!   go to the chat unchanged, and a tap on "Approve" comes back through
//!   the relay, signed, to the Warden.
//!
//! The Worker decides when to ask; the Warden decides whether anything
//! runs. What was last handled is kept in the Worker's home, so a restart
//! asks for nothing twice.

use super::Daemon;
use crate::warden_client;
use aromba_warden_proto::{ChoreInfo, Request, Response, printable};
use aromba_words::chores as words;
use jiff::civil::{Date, DateTime, Weekday};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

const EVERY: Duration = Duration::from_secs(60);

/// The most recent time at or before `now` that `schedule` names; `None`
/// for `manual` or a schedule this does not read.
pub fn last_due(schedule: &str, now: DateTime) -> Option<DateTime> {
    let words: Vec<&str> = schedule.split_whitespace().collect();
    let (kind, rest) = words.split_first()?;
    let time = |hhmm: &str| -> Option<(i8, i8)> {
        let (h, m) = hhmm.split_once(':')?;
        let (h, m): (i8, i8) = (h.parse().ok()?, m.parse().ok()?);
        ((0..24).contains(&h) && (0..60).contains(&m)).then_some((h, m))
    };
    let at = |d: Date, (h, m): (i8, i8)| d.at(h, m, 0, 0);
    match (*kind, rest) {
        ("daily", [hhmm]) => {
            let t = time(hhmm)?;
            let today = at(now.date(), t);
            if today <= now {
                Some(today)
            } else {
                Some(at(now.date().yesterday().ok()?, t))
            }
        }
        ("weekly", [day, hhmm]) => {
            let t = time(hhmm)?;
            let want = weekday(day)?;
            let mut d = now.date();
            for _ in 0..8 {
                if d.weekday() == want && at(d, t) <= now {
                    return Some(at(d, t));
                }
                d = d.yesterday().ok()?;
            }
            None
        }
        ("monthly", [day, hhmm]) => {
            let t = time(hhmm)?;
            let day: i8 = day.parse().ok().filter(|d| (1..=31).contains(d))?;
            // This month's, or the last month's; a day past a month's end
            // is its last day.
            let this = now.date().first_of_month();
            let last = this.yesterday().ok()?.first_of_month();
            for month in [this, last] {
                let d = month
                    .with()
                    .day(day.min(month.days_in_month()))
                    .build()
                    .ok()?;
                if at(d, t) <= now {
                    return Some(at(d, t));
                }
            }
            None
        }
        _ => None,
    }
}

fn weekday(name: &str) -> Option<Weekday> {
    Some(match name {
        "mon" => Weekday::Monday,
        "tue" => Weekday::Tuesday,
        "wed" => Weekday::Wednesday,
        "thu" => Weekday::Thursday,
        "fri" => Weekday::Friday,
        "sat" => Weekday::Saturday,
        "sun" => Weekday::Sunday,
        _ => return None,
    })
}

/// Per chore, the scheduled time (Unix seconds) last handled.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Handled(BTreeMap<String, i64>);

const HANDLED: &str = "schedule.json";

fn save(daemon: &Daemon, handled: &Handled) {
    if let Err(e) = super::kept::save(daemon, HANDLED, handled) {
        tracing::warn!(error = %e, "what the schedule handled was not kept");
    }
}

pub async fn keep(daemon: Arc<Daemon>) {
    let mut handled: Handled = super::kept::load(&daemon, HANDLED);
    let mut ticker = tokio::time::interval(EVERY);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        // Slowed down (or further up): the schedule waits. The Warden lets
        // the Worker's background work one request in ten minutes then,
        // which the health poll needs more; a chore due meanwhile runs at
        // the next tick after the ladder comes down.
        if daemon.step.load(std::sync::atomic::Ordering::Relaxed) >= super::events::SLOW {
            continue;
        }
        let chores = match daemon.warden().chores().await {
            Ok(chores) => chores,
            Err(e) => {
                tracing::warn!(error = %e, "the chores could not be listed");
                continue;
            }
        };
        let now = jiff::ZonedDateTime::now();
        let first_start = handled.0.is_empty();
        for chore in chores {
            let Some(due) = last_due(&chore.schedule, now.datetime()) else {
                continue;
            };
            let Ok(due) = due.to_zoned_datetime(now.time_zone().clone()) else {
                continue;
            };
            let due = due.timestamp().as_second();
            match handled.0.get(&chore.name) {
                Some(last) if *last >= due => continue,
                // A first start only notes where the schedule stands: what
                // fell due before the Worker ran is not done all at once.
                None if first_start => {
                    handled.0.insert(chore.name.clone(), due);
                    continue;
                }
                _ => {}
            }
            handled.0.insert(chore.name.clone(), due);
            save(&daemon, &handled);
            handle(&daemon, &chore).await;
        }
        save(&daemon, &handled);
    }
}

/// One chore whose time has come.
async fn handle(daemon: &Daemon, chore: &ChoreInfo) {
    ask_for(daemon, chore).await;
}

/// A chore the schedule or the person asks for, step by step: a damage cap
/// above the default is confirmed first (the Warden's proposal, on a tap);
/// then its first real run waits for its dry run, shown here; a yellow or
/// red one waits out the first seven days, said in words; then a green one
/// is asked for and a yellow or red one proposed. Returns whether it got as
/// far as asking for the run.
pub async fn ask_for(daemon: &Daemon, chore: &ChoreInfo) -> bool {
    if chore.cap_unconfirmed {
        propose(
            daemon,
            &Request::ProposeConfirmCap {
                chore: chore.name.clone(),
            },
            &chore.name,
        )
        .await;
        return false;
    }
    if !chore.dry_run_seen {
        show_dry_run(daemon, &chore.name).await;
        return false;
    }
    if chore.color != "green"
        && let Ok(st) = daemon.warden().status().await
        && (1..=7).contains(&st.install_day)
    {
        daemon
            .say(
                words::first_week(st.install_day, &chore.name, &chore.color),
                vec![],
            )
            .await;
        return false;
    }
    if !daemon.take_read() {
        daemon.say(daemon.busy(), vec![]).await;
        return false;
    }
    if chore.color == "green" {
        let answer = warden_client::ask(
            &daemon.worker_socket(),
            &Request::RunDue {
                chore: chore.name.clone(),
            },
        )
        .await;
        say_outcome(daemon, &chore.name, answer).await;
        return true;
    }
    propose(
        daemon,
        &Request::Propose {
            chore: chore.name.clone(),
        },
        &chore.name,
    )
    .await;
    true
}

/// A run's answer in the chat: a receipt (with Undo when it names an undo
/// id), or why nothing ran.
pub async fn say_outcome(
    daemon: &Daemon,
    name: &str,
    answer: Result<Response, warden_client::ClientError>,
) {
    let receipt = match &answer {
        Ok(Response::Receipt { receipt, .. }) => Some(receipt.clone()),
        _ => None,
    };
    let text = receipt_text(name, answer);
    match receipt {
        Some(receipt) => super::undo::say_receipt(daemon, text, &receipt).await,
        None => {
            daemon.say(text, vec![]).await;
        }
    }
}

pub async fn show_dry_run(daemon: &Daemon, name: &str) {
    let heading = words::dry_run_before_first(name);
    if !daemon.take_read() {
        tracing::info!(chore = name, "the read budget is spent; the dry run waits");
        return;
    }
    show_dry_run_read(daemon, name, &heading).await;
}

/// A chore's dry run under `heading`, said to the chat when the read
/// budget allows; whether it was shown.
pub async fn show_dry_run_headed(daemon: &Daemon, name: &str, heading: &str) -> bool {
    if !daemon.take_read() {
        daemon
            .say(words::cannot_show_dry_run(name, &daemon.busy()), vec![])
            .await;
        return false;
    }
    show_dry_run_read(daemon, name, heading).await
}

/// The dry run itself, its read taken from the budget already.
async fn show_dry_run_read(daemon: &Daemon, name: &str, heading: &str) -> bool {
    let socket = daemon.worker_socket();
    let answer = warden_client::ask(
        &socket,
        &Request::DryRun {
            chore: name.to_string(),
        },
    )
    .await;
    match answer {
        Ok(Response::Receipt {
            receipt, stdout, ..
        }) => {
            let what = printable(&stdout);
            let what = cut(what.trim(), 2500);
            let text = format!(
                "{heading}\n{}",
                aromba_words::receipt::dry_run(&receipt, &what)
            );
            daemon.say(text, vec![]).await;
            let shown = Request::DryRunShown {
                chore: name.to_string(),
            };
            if let Err(e) = daemon.warden().noted(&shown).await {
                tracing::warn!(error = %e, "the dry run was not marked shown");
            }
            true
        }
        other => {
            daemon.say(receipt_text(name, other), vec![]).await;
            false
        }
    }
}

/// The Warden's proposal, sent as the Warden wrote it: the relay signs a
/// tap over this exact text and the label of the button.
pub async fn propose(daemon: &Daemon, request: &Request, name: &str) -> Option<uuid::Uuid> {
    let answer = warden_client::ask(&daemon.worker_socket(), request).await;
    match Proposal::of(answer) {
        Ok(proposal) => Some(proposal.post(daemon).await),
        Err(other) => {
            daemon.say(receipt_text(name, *other), vec![]).await;
            None
        }
    }
}

/// The Warden's proposal of an action, to post in the chat.
pub struct Proposal {
    action_id: String,
    text: String,
    buttons: Vec<aromba_warden_proto::Button>,
    app: Option<String>,
}

impl Proposal {
    /// The proposal the Warden answered, or its other answer.
    pub fn of(
        answer: Result<Response, warden_client::ClientError>,
    ) -> Result<Proposal, Box<Result<Response, warden_client::ClientError>>> {
        match answer {
            Ok(Response::Proposed {
                action_id,
                text,
                buttons,
                app,
                ..
            }) => Ok(Proposal {
                action_id,
                text,
                buttons,
                app,
            }),
            other => Err(Box::new(other)),
        }
    }

    /// Posts it: the Warden's text and buttons, Approve opening the app.
    /// A PIN, when the action needs one, is typed in the app's page and
    /// sealed for the Warden: the chat never asks for it.
    pub async fn post(self, daemon: &Daemon) -> uuid::Uuid {
        let buttons = super::in_app::buttons(&self.action_id, self.buttons, self.app.as_deref());
        let message = daemon.say(self.text, buttons).await;
        super::in_app::remember(daemon, message, self.app);
        message
    }
}

fn receipt_text(name: &str, answer: Result<Response, warden_client::ClientError>) -> String {
    match answer {
        Ok(Response::Receipt { receipt, ok, .. }) => super::undo::receipt_text(ok, &receipt),
        Ok(Response::Refused { reason, .. }) => words::did_not_run(name, &reason),
        Ok(Response::Error { message }) => words::did_not_run(name, &message),
        Ok(other) => words::odd_answer_for(name, &super::chat::odd(&other)),
        Err(e) => words::did_not_run_no_warden(name, &e),
    }
}

/// At most `max` bytes of `text`, cut at a character.
pub fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::civil::date;

    fn at(y: i16, mo: i8, d: i8, h: i8, mi: i8) -> DateTime {
        date(y, mo, d).at(h, mi, 0, 0)
    }

    #[test]
    fn daily_is_today_once_its_time_has_come_else_yesterday() {
        let now = at(2026, 12, 3, 9, 0);
        assert_eq!(last_due("daily 04:15", now), Some(at(2026, 12, 3, 4, 15)));
        assert_eq!(last_due("daily 23:00", now), Some(at(2026, 12, 2, 23, 0)));
        assert_eq!(last_due("daily 09:00", now), Some(now));
    }

    #[test]
    fn weekly_is_the_last_such_day_at_its_time() {
        // 2026-12-03 is a Thursday.
        let now = at(2026, 12, 3, 9, 0);
        assert_eq!(
            last_due("weekly sun 04:00", now),
            Some(at(2026, 11, 29, 4, 0))
        );
        assert_eq!(
            last_due("weekly thu 04:00", now),
            Some(at(2026, 12, 3, 4, 0))
        );
        assert_eq!(
            last_due("weekly thu 10:00", now),
            Some(at(2026, 11, 26, 10, 0))
        );
    }

    #[test]
    fn monthly_takes_a_short_months_last_day() {
        let now = at(2026, 12, 3, 9, 0);
        assert_eq!(
            last_due("monthly 1 03:00", now),
            Some(at(2026, 12, 1, 3, 0))
        );
        assert_eq!(
            last_due("monthly 5 03:00", now),
            Some(at(2026, 11, 5, 3, 0))
        );
        assert_eq!(
            last_due("monthly 31 03:00", at(2026, 3, 1, 0, 0)),
            Some(at(2026, 2, 28, 3, 0))
        );
    }

    #[test]
    fn manual_and_unreadable_schedules_are_never_due() {
        let now = at(2026, 12, 3, 9, 0);
        for s in [
            "manual",
            "daily",
            "daily 24:00",
            "weekly xyz 04:00",
            "monthly 0 01:00",
            "",
        ] {
            assert_eq!(last_due(s, now), None, "{s:?}");
        }
    }
}
