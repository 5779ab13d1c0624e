//! `/trust`, `/prodmode` and the journal's anchor: what Aromba may do
//! here, whether its record is intact, and what prod mode is. The
//! ladder's own messages ("Unusual activity…", "Was that you?", "You
//! stopped Aromba…") are the Warden's words (`aromba_warden_proto`'s
//! `ladder` and `refusals`), passed on as written.

/// `/trust`'s first line when the relay's copy of the journal's head does
/// not match.
pub const JOURNAL_DOES_NOT_MATCH: &str = "Something is wrong: my journal does not match the copy the relay keeps, so it may have been cut or rewritten.";

/// `/trust`'s first line when a watched file changed.
pub fn a_watched_file_changed(integrity: &str) -> String {
    format!("Something is wrong: a file I watch changed ({integrity}).")
}

/// `/trust`'s first line by the ladder's step, all else being well.
pub fn ladder_verdict(step: u64) -> &'static str {
    match step {
        0 => "All good: I'm working normally, and nothing I watch has changed.",
        1 => "I'm slowed down after unusual activity (one command a minute); the reason is below.",
        2 => {
            "I've stopped my schedule and the assistant after unusual activity; the chat works. The reason is below."
        }
        3 => {
            "I'm stopped: reads only, until `sudo aromba resume` on the server. The reason is below."
        }
        _ => "The Warden has stopped itself for good: reinstall Aromba on the server to recover.",
    }
}

/// The lines of `/trust` under its verdict, the Warden's status in its
/// own words (times already local).
pub struct TrustLines<'a> {
    pub ladder_name: &'a str,
    pub ladder_step: u64,
    pub ladder_reason: &'a str,
    pub phase: &'a str,
    pub isolation: &'a str,
    pub integrity: &'a str,
    pub prod_mode: &'a str,
    pub journal_entries: u64,
    pub journal_head: &'a str,
}

impl TrustLines<'_> {
    pub fn lines(&self) -> Vec<String> {
        let mut lines = vec![format!(
            "Ladder: {} (step {})",
            self.ladder_name, self.ladder_step
        )];
        if !self.ladder_reason.is_empty() {
            lines.push(format!("Why: {}", self.ladder_reason));
        }
        lines.push(format!("Phase: {}", self.phase));
        lines.push(format!("Isolation: {}", self.isolation));
        lines.push(format!("Integrity: {}", self.integrity));
        lines.push(format!("Prod mode: {}", self.prod_mode));
        lines.push(format!(
            "Journal: {} entries; the last one's fingerprint {}",
            self.journal_entries,
            self.journal_head.get(..12).unwrap_or(self.journal_head)
        ));
        lines
    }
}

/// `/trust`'s line on the relay's anchor: `None` before one came.
pub fn anchor_line(checked: Option<(bool, &str)>) -> String {
    match checked {
        Some((true, report)) => format!("Relay's anchor: {report}"),
        Some((false, report)) => format!("Relay's anchor: DOES NOT MATCH: {report}"),
        None => "Relay's anchor: none yet (the relay has no head of this journal)".into(),
    }
}

/// Said once an anchor does not match the journal.
pub fn journal_changed(report: &str) -> String {
    format!(
        "My journal no longer matches what the relay holds of it: {report}. Someone with root on the server changed it."
    )
}

/// What prod mode is, said where it is switched.
pub const PROD_MODE_IS: &str = "Prod mode is for a server that serves people: every chore asks before it runs (red), nothing is deleted (it goes to quarantine and stays), and the assistant only proposes.";

/// `/prodmode`: where it stands (`state` in the Warden's words, times
/// local), what it is, and how it is switched.
pub fn prod_mode(state: &str, on: bool) -> String {
    format!(
        "Prod mode: {state}.\n{PROD_MODE_IS}\n{}",
        if on {
            "/prodmode off turns it off (it shows what changes, and asks for your PIN)."
        } else {
            "It turns on by itself when the first scan sees a production server; `sudo aromba prod-mode on` turns it on."
        }
    )
}

/// The Trust page (the Mini App, opened from `/trust`): its headings and
/// the lines the status does not say in the Warden's own words.
pub mod page {
    /// `/trust`'s button that opens the page.
    pub const OPEN: &str = "Open the Trust page";
    pub const ISOLATION: &str = "Isolation";
    pub const LADDER: &str = "Ladder";
    pub const INTEGRITY: &str = "Integrity";
    pub const JOURNAL: &str = "Journal";
    pub const PROD_MODE: &str = "Prod mode and fenced folders";
    pub const CHORES: &str = "Chores";
    pub const NETWORK: &str = "Network";
    /// The skills installed, each as the Warden renders its manifest.
    pub const SKILLS: &str = "Skills";
    pub const SKILLS_HELD_AT_SLOW: &str = "Not asked while I'm slowed down: the one request a minute the Warden allows is kept for your commands. /skills lists them.";
    /// A skill that no longer verifies: the Warden's why.
    pub fn skill_not_loaded(why: &str) -> String {
        format!("Not loaded (its chores do not run): {why}")
    }
    /// What a skill may reach now: the Warden's words.
    pub fn skill_network(network: &str) -> String {
        format!("Network now: {network}")
    }
    /// A skill's setting and what it holds now (a secret only as set or
    /// not): the Warden's words.
    pub fn skill_setting(name: &str, shown: &str) -> String {
        format!("Its setting {name}: {shown}")
    }
    pub const UPDATES: &str = "Updates";
    pub const ASSISTANT: &str = "Assistant";
    pub const APPROVALS: &str = "Approvals";
    pub const POLICY: &str = "Policy (the Warden's rendering, verbatim)";

    /// The isolation line: the specification's "isolation: none" where no
    /// cage can be built, and what that means.
    pub fn isolation(isolation: &str) -> Vec<String> {
        if isolation.starts_with("none") {
            vec![
                "Isolation: none".into(),
                "This server has no isolation. I only run green system chores here.".into(),
                format!("Why: {}", isolation.trim_start_matches("none").trim()),
            ]
        } else {
            vec![format!("Isolation: {isolation}")]
        }
    }

    /// A move of the ladder, with its local time.
    pub fn ladder_move(at: &str, from: &str, to: &str, reason: &str) -> String {
        format!("{at}: {from} → {to}: {reason}")
    }

    pub const NO_MOVES: &str = "No moves of the ladder yet.";
    pub const RECENT_MOVES: &str = "Recent moves, newest first:";

    pub fn journal_head(entries: u64, head: &str) -> String {
        format!("{entries} entries; the last one's fingerprint (SHA-256): {head}")
    }

    pub fn journal_checked(said: &str) -> String {
        format!("Verification: {said}")
    }

    pub fn policy_fingerprint(sha256: &str) -> String {
        format!("Policy rendering's fingerprint (SHA-256): {sha256}")
    }

    pub const NO_FENCES: &str =
        "Fenced folders: none (no chore may touch a fenced folder; none is listed yet).";
    pub const FENCES: &str = "Fenced folders (no chore may touch them):";

    pub fn more_fences(more: u64) -> String {
        format!("… and {more} more (`sudo cat /etc/aromba/warden/fences` lists them all).")
    }

    /// The chores, not asked while the ladder is at Slow or above.
    pub const HELD_AT_SLOW: &str = "Not asked while I'm slowed down: the one request a minute the Warden allows is kept for your commands. /chores lists them.";
    /// The releases installed, not asked at Slow or above.
    pub const RELEASES_HELD_AT_SLOW: &str = "Installed releases: not asked while I'm slowed down (the one request a minute is kept for your commands).";

    pub fn chore(name: &str, color: &str, schedule: &str, last: &str) -> String {
        let last = if last.is_empty() { "not run yet" } else { last };
        format!("{name} ({color}, {schedule}); last: {last}")
    }

    /// The heading of an Undo link's section.
    pub fn undo_heading(chore: Option<&str>) -> String {
        match chore {
            Some(c) => format!("Undo: {c}"),
            None => "Undo: a run".into(),
        }
    }

    pub fn undo_until(until: &str) -> String {
        format!(
            "This run can be undone until {until}. Undo proposes it in your chat, where you approve it."
        )
    }

    pub const NO_HOSTS: &str = "The Worker may reach no host (network.toml lists none).";
    pub const HOSTS: &str = "The only hosts the Worker may reach:";

    pub fn running(version: &str) -> String {
        format!("Running: Aromba {version}")
    }

    pub fn installed(current: Option<&str>, previous: Option<&str>) -> String {
        format!(
            "Installed release: {}; the one before: {}",
            current.unwrap_or("none recorded"),
            previous.unwrap_or("none")
        )
    }

    pub const NO_ASSISTANT: &str = "No assistant: no model is set for this server.";

    pub fn approvals(user: Option<u64>, key: &str) -> Vec<String> {
        match user {
            Some(id) => vec![
                format!(
                    "Red chores, Undo, installs and prod mode off are approved only in this app, by Telegram account {id}."
                ),
                format!("Telegram's signature is checked with {key}."),
            ],
            None => vec![
                "No Telegram account is pinned: run `sudo aromba pair` to approve in this app."
                    .into(),
            ],
        }
    }

    /// A section that could not be read, in one sentence.
    pub fn unread(why: &str) -> String {
        format!("Not read just now: {why}")
    }

    /// The policy section's answer when it could not be read.
    pub const POLICY_UNREAD: &str = "The policy could not be read just now. Try again in a minute.";
    /// The policy answer's verdict.
    pub const POLICY_IS: &str =
        "What the Warden may run here: its compiled-in list, as it renders it. Nothing else runs.";
    /// A section too long for the page, cut.
    pub fn cut(more: usize) -> String {
        format!("… {more} more lines not shown here.")
    }
}
