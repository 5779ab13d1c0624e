//! The Trust page's contents (the Mini App opened from `/trust`): what
//! Aromba may do here and whether its record holds, gathered from the
//! Warden when the page asks and kept nowhere — not here, not at the
//! relay, which only carries the answer to the page.
//!
//! Read-only: the page's one link, Undo, proposes in the chat as the
//! receipt's button does, and the proposal is approved there.

use super::Daemon;
use aromba_relay_proto::frame::{AppAnswer, AppAnswerKind, AppSection};
use aromba_warden_proto::{Request, Response};
use aromba_words::trust::page as words;

/// How long the policy stays owed to the page that was just shown.
const OWED_FOR: std::time::Duration = std::time::Duration::from_secs(60);

/// The policy rendering the Trust page shown to `launch` asks for next:
/// one look at the page is one turn of the chat and one read, its policy
/// section included (found by the attack round: a look cost two of each,
/// and ten looks took the person's next command).
#[derive(Debug)]
pub struct Owed {
    launch: String,
    at: tokio::time::Instant,
    policy: String,
}

/// Whether the page shown to `launch` is owed its policy section: its
/// `policy` ask then takes no turn of the chat and no read.
pub fn owed(daemon: &Daemon, launch: &str) -> bool {
    daemon
        .policy_owed
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
        .is_some_and(|o| o.launch == launch && o.at.elapsed() < OWED_FOR)
}

/// The policy owed to `launch`, once.
fn take_owed(daemon: &Daemon, launch: &str) -> Option<String> {
    let mut owed = daemon.policy_owed.lock().unwrap_or_else(|p| p.into_inner());
    match owed.take() {
        Some(o) if o.launch == launch && o.at.elapsed() < OWED_FOR => Some(o.policy),
        other => {
            *owed = other;
            None
        }
    }
}

/// Moves of the ladder shown, newest first.
const MOVES_SHOWN: usize = 10;
/// Undo links shown, newest first.
const UNDO_SHOWN: usize = 8;

fn section(heading: &str, lines: Vec<String>) -> AppSection {
    AppSection {
        heading: heading.to_string(),
        lines,
        verbatim: false,
        undo: None,
    }
}

/// Unix seconds as the server's local time, to the minute.
fn local(at: i64) -> String {
    jiff::Timestamp::from_second(at).map_or_else(
        |_| at.to_string(),
        |t| {
            t.to_zoned_datetime(jiff::tz::TimeZone::system())
                .strftime("%Y-%m-%d %H:%M")
                .to_string()
        },
    )
}

fn step_name(step: u64) -> &'static str {
    match step {
        0 => "normal",
        1 => "slow",
        2 => "freeze",
        3 => "cut",
        _ => "disarm",
    }
}

/// The Trust page shown to `launch`: the verdict `/trust` leads with,
/// then a section each.
pub async fn page(daemon: &Daemon, launch: &str) -> AppAnswer {
    let warden = daemon.warden();
    let st = match warden.status().await {
        Ok(st) => st,
        Err(e) => {
            return AppAnswer::said(AppAnswerKind::Closed, &super::chat::said(&e));
        }
    };
    let anchor = daemon
        .anchor
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let facts = warden.trust().await;
    if let Ok(f) = &facts {
        *daemon.policy_owed.lock().unwrap_or_else(|p| p.into_inner()) = Some(Owed {
            launch: launch.to_string(),
            at: tokio::time::Instant::now(),
            policy: f.policy.clone(),
        });
    }
    let mut sections = vec![section(words::ISOLATION, words::isolation(&st.isolation))];

    let mut ladder = vec![format!("Now: {} (step {})", st.ladder_name, st.ladder_step)];
    if !st.ladder_reason.is_empty() {
        ladder.push(format!("Why: {}", st.ladder_reason));
    }
    ladder.push(format!("Phase: {}", st.phase));
    match warden.events(0).await {
        Ok(events) if events.is_empty() => ladder.push(words::NO_MOVES.into()),
        Ok(events) => {
            ladder.push(words::RECENT_MOVES.into());
            ladder.extend(events.iter().rev().take(MOVES_SHOWN).map(|e| {
                words::ladder_move(
                    &local(e.time as i64),
                    step_name(e.from),
                    step_name(e.to),
                    &e.reason,
                )
            }));
        }
        Err(e) => ladder.push(words::unread(&super::chat::said(&e))),
    }
    sections.push(section(words::LADDER, ladder));

    sections.push(section(
        words::INTEGRITY,
        vec![
            format!("Integrity: {}", st.integrity),
            words::policy_fingerprint(&st.policy_sha256),
        ],
    ));

    let mut journal = vec![words::journal_head(st.journal_seq, &st.journal_head)];
    match &facts {
        Ok(f) => journal.push(words::journal_checked(&f.journal)),
        Err(e) => journal.push(words::unread(&super::chat::said(e))),
    }
    journal.push(aromba_words::trust::anchor_line(
        anchor.as_ref().map(|a| (a.ok, a.report.as_str())),
    ));
    sections.push(section(words::JOURNAL, journal));

    let mut prod = vec![format!(
        "Prod mode: {}",
        super::chat::plain_times(&st.prod_mode)
    )];
    match &facts {
        Ok(f) if f.fences.is_empty() => prod.push(words::NO_FENCES.into()),
        Ok(f) => {
            prod.push(words::FENCES.into());
            prod.extend(f.fences.iter().cloned());
            let more = f.fences_total.saturating_sub(f.fences.len() as u64);
            if more > 0 {
                prod.push(words::more_fences(more));
            }
        }
        Err(e) => prod.push(words::unread(&super::chat::said(e))),
    }
    sections.push(section(words::PROD_MODE, prod));

    // From Slow up the Warden lets the person one request a minute, and
    // the chore list and the releases are such requests: the page leaves
    // them to the person's own commands rather than take that minute
    // (found by the attack round).
    let slowed = st.ladder_step >= 1;
    let chores = if slowed {
        Err(words::HELD_AT_SLOW.to_string())
    } else {
        warden.chores().await.map_err(|e| super::chat::said(&e))
    };
    let chore_lines = match &chores {
        Ok(c) if c.is_empty() => vec![aromba_words::chat::NO_CHORES.into()],
        Ok(c) => c
            .iter()
            .map(|c| words::chore(&c.name, &c.color, &c.schedule, &c.last_receipt))
            .collect(),
        Err(e) if slowed => vec![e.clone()],
        Err(e) => vec![words::unread(e)],
    };
    sections.push(section(words::CHORES, chore_lines));
    for (_, undo_id, until) in super::undo::live(daemon).into_iter().take(UNDO_SHOWN) {
        let chore = chores.as_ref().ok().and_then(|c| {
            c.iter()
                .find(|c| super::undo::undo_id(&c.last_receipt) == Some(undo_id.as_str()))
                .map(|c| c.name.clone())
        });
        sections.push(AppSection {
            undo: Some(undo_id),
            ..section(
                &words::undo_heading(chore.as_deref()),
                vec![words::undo_until(&local(until))],
            )
        });
    }

    let mut hosts = Vec::new();
    if daemon.network_hosts.is_empty() {
        hosts.push(words::NO_HOSTS.into());
    } else {
        hosts.push(words::HOSTS.into());
        hosts.extend(daemon.network_hosts.iter().cloned());
    }
    sections.push(section(words::NETWORK, hosts));

    // Each skill as the Warden renders its manifest (what it may write,
    // run and reach), and what it may reach now.
    let skills = if slowed {
        vec![words::SKILLS_HELD_AT_SLOW.to_string()]
    } else {
        match warden.skills().await {
            Ok((s, r)) if s.is_empty() && r.is_empty() => {
                vec![aromba_words::chat::NO_SKILLS.into()]
            }
            Ok((s, r)) => s
                .iter()
                .flat_map(|s| {
                    s.text
                        .lines()
                        .map(str::to_string)
                        .chain([words::skill_network(&s.network)])
                        .chain(
                            s.settings
                                .iter()
                                .map(|t| words::skill_setting(&t.name, &t.shown)),
                        )
                })
                .chain(r.iter().map(|r| words::skill_not_loaded(r)))
                .collect(),
            Err(e) => vec![words::unread(&super::chat::said(&e))],
        }
    };
    sections.push(section(words::SKILLS, skills));

    let mut updates = vec![words::running(env!("CARGO_PKG_VERSION"))];
    if slowed {
        updates.push(words::RELEASES_HELD_AT_SLOW.into());
    } else if let Ok(Response::Releases {
        current, previous, ..
    }) = super::chat::ask(daemon, &Request::Releases).await
    {
        updates.push(words::installed(current.as_deref(), previous.as_deref()));
    }
    updates.push(super::update::trust_line(daemon));
    sections.push(section(words::UPDATES, updates));

    let assistant = if daemon.assistant.is_some() {
        super::ask::budget(daemon, &[])
    } else {
        words::NO_ASSISTANT.into()
    };
    sections.push(section(words::ASSISTANT, vec![assistant]));
    sections.push(section(
        words::APPROVALS,
        words::approvals(st.telegram_user, &st.telegram_key),
    ));

    let verdict = super::chat::trust_verdict(&st, anchor.as_ref());
    fit(AppAnswer {
        kind: AppAnswerKind::Page,
        text: verdict,
        sections,
    })
}

/// The policy section, asked apart: the Warden's rendering verbatim, the
/// one the page shown to `launch` is owed, or asked of the Warden.
pub async fn policy(daemon: &Daemon, launch: &str) -> AppAnswer {
    let rendering = match take_owed(daemon, launch) {
        Some(p) => Ok(p),
        None => daemon.warden().trust().await.map(|f| f.policy),
    };
    match rendering {
        Ok(policy) => fit(AppAnswer {
            kind: AppAnswerKind::Page,
            text: words::POLICY_IS.into(),
            sections: vec![AppSection {
                verbatim: true,
                ..section(words::POLICY, policy.lines().map(str::to_string).collect())
            }],
        }),
        Err(_) => AppAnswer::said(AppAnswerKind::Closed, words::POLICY_UNREAD),
    }
}

/// The answer within what a frame carries: while it is too long, the
/// longest section loses lines from its end and says how many.
fn fit(mut answer: AppAnswer) -> AppAnswer {
    for s in &mut answer.sections {
        for line in &mut s.lines {
            if line.chars().count() > aromba_relay_proto::frame::MAX_TEXT_CHARS {
                *line = line
                    .chars()
                    .take(aromba_relay_proto::frame::MAX_TEXT_CHARS - 1)
                    .chain(['…'])
                    .collect();
            }
            line.retain(|c| !c.is_control() || c == '\t');
        }
    }
    let mut cut = vec![0usize; answer.sections.len()];
    while answer.check().is_err() {
        let Some((i, _)) = answer
            .sections
            .iter()
            .enumerate()
            .filter(|(_, s)| s.lines.len() > 1)
            .max_by_key(|(_, s)| s.lines.iter().map(String::len).sum::<usize>())
        else {
            break;
        };
        let s = &mut answer.sections[i];
        if cut[i] > 0 {
            s.lines.pop();
        }
        let drop = (s.lines.len() / 8).max(1);
        s.lines.truncate(s.lines.len().saturating_sub(drop));
        cut[i] += drop;
        s.lines.push(words::cut(cut[i]));
    }
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_too_long_for_a_frame_is_cut_and_says_so() {
        let long = AppAnswer {
            kind: AppAnswerKind::Page,
            text: "All good.".into(),
            sections: vec![
                section("Short", vec!["one line".into()]),
                section(
                    "Long",
                    (0..2000)
                        .map(|i| format!("line {i} {}", "x".repeat(30)))
                        .collect(),
                ),
            ],
        };
        let fitted = fit(long);
        assert!(fitted.check().is_ok());
        assert_eq!(fitted.sections[0].lines, vec!["one line".to_string()]);
        let last = fitted.sections[1].lines.last().unwrap();
        assert!(last.contains("more lines not shown"), "{last}");
    }

    #[test]
    fn control_characters_in_a_line_never_reach_the_page() {
        let answer = fit(AppAnswer {
            kind: AppAnswerKind::Page,
            text: "All good.".into(),
            sections: vec![section("Chores", vec!["a\u{1b}[31mred\u{7}".into()])],
        });
        assert_eq!(answer.sections[0].lines[0], "a[31mred");
        assert!(answer.check().is_ok());
    }
}
