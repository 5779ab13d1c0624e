//! Chores: the first week's limit, dry runs, what a run that did not
//! happen says, receipts' verdicts (the receipt itself in [`crate::receipt`]),
//! and the scans that look for production and fence data.

use std::fmt::Display;

/// A yellow or red chore asked for in the first seven days.
pub fn first_week(day: u64, chore: &str, color: &str) -> String {
    format!(
        "This is day {day} since Aromba was installed: for its first 7 days it runs green chores only, so that you see what it does before it does more. {chore} is {color}; it can run from day 8."
    )
}

/// The heading of a chore's first dry run.
pub fn dry_run_before_first(chore: &str) -> String {
    format!(
        "Before {chore} runs for the first time, here is what it would do (a dry run, nothing changed):"
    )
}

/// The heading of a chore's dry run when it was seen before.
pub fn dry_run_now(chore: &str) -> String {
    format!("Here is what {chore} would do now (a dry run, nothing changed):")
}

/// A dry run the budget does not allow now; `busy` says when it does.
pub fn cannot_show_dry_run(chore: &str, busy: &str) -> String {
    format!("I cannot show {chore}'s dry run now. {busy}")
}

/// What a proposal that did not come is named by: an undo.
pub const THE_UNDO: &str = "The undo";
/// …turning prod mode off.
pub const PROD_MODE_OFF: &str = "Turning prod mode off";
/// …a release's install.
pub const THE_UPDATE: &str = "The update";

/// `what` did not run (a chore, [`THE_UNDO`], …), in the Warden's words.
pub fn did_not_run(what: &str, reason: &str) -> String {
    format!("{what} did not run: {reason}")
}

/// `what` got an answer from the Warden the Worker did not expect.
pub fn odd_answer_for(what: &str, odd: &str) -> String {
    format!("{what}: {odd}")
}

/// `what` did not run: the Warden could not be asked.
pub fn did_not_run_no_warden(what: &str, error: &dyn Display) -> String {
    format!("{what} did not run: I could not ask the Warden: {error}")
}

/// A receipt's verdict, before what the chore did.
pub fn receipt_verdict(ok: bool) -> &'static str {
    if ok { "Done." } else { "It did not go well." }
}

/// The first scan's opening.
pub const FIRST_LOOK: &str = "I had a first look at this server.";

/// The first scan found nothing of production; `traffic_judged` when the
/// traffic was judged too (else it is watched for an hour).
pub fn first_look_not_production(traffic_judged: bool) -> String {
    format!(
        "{FIRST_LOOK} Nothing in it says production: no web server for the world, no database with data, no app serving a port for 30 days{}",
        if traffic_judged {
            ", no sustained traffic. Prod mode stays off."
        } else {
            ". Prod mode stays off; I am watching the traffic for an hour."
        }
    )
}

/// The first scan found production: what (each finding named by the
/// scan), then what came of it.
pub fn first_look_production(findings: &[String], outcome: &str) -> String {
    let mut text = format!("{FIRST_LOOK} It looks like production:");
    for f in findings {
        text.push_str(&format!("\n- {f}"));
    }
    text.push_str(&format!("\n{outcome}"));
    text
}

/// An hour of watched traffic found production.
pub fn an_hour_of_traffic(finding: &str, outcome: &str) -> String {
    format!("An hour of watching the traffic: {finding}.\n{outcome}")
}

/// Prod mode turned on after a scan.
pub const PROD_MODE_TURNED_ON: &str = "So prod mode is on: every chore asks you first, nothing is deleted (quarantine never purges), and the assistant only proposes. /prodmode off turns it off; it shows what that changes and asks for your PIN.";

/// Prod mode should have turned on and did not; `why` is the sentence
/// that says why, as the chat says it anywhere else.
pub fn prod_mode_not_on(why: &str) -> String {
    format!("Prod mode should be on, but it did not turn on. {why}")
}

/// The weekly scan fenced more data.
pub fn weekly_look(fenced: &str) -> String {
    format!("Weekly look: {fenced}")
}

/// Folders fenced as data: each path (made safe to show) with its kind.
pub fn fenced(added: &[(String, &str)]) -> String {
    const SHOWN: usize = 10;
    let mut s = format!(
        "Fenced as data, so no chore may touch {}:",
        if added.len() == 1 { "it" } else { "them" }
    );
    for (path, kind) in added.iter().take(SHOWN) {
        s.push_str(&format!("\n- {path} ({kind})"));
    }
    if added.len() > SHOWN {
        s.push_str(&format!("\n- and {} more", added.len() - SHOWN));
    }
    s
}
