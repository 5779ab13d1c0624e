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
