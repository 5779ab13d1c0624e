//! The chat's commands: `/help`, what the Worker says when it cannot
//! answer (its budget, the Warden away or refusing), `/logs`, `/chores`
//! and `/run`.

use std::fmt::Display;
use std::time::Duration;

/// `/help`'s first line.
pub const HELP_HEADING: &str = "What I can do:";

/// `/help`'s line for `/unpair`, which the relay answers.
pub const UNPAIR_HELP: &str = "/unpair: unpair this chat from the server (I ask first)";

/// `/help` (and `/start`): the heading, then each command's line of the
/// commands' table (`aromba_relay_proto::commands`, whose `help` lines are part
/// of this catalogue's reading), `/unpair`'s before the last.
pub fn help<'a>(command_lines: impl IntoIterator<Item = &'a str>) -> String {
    let mut lines: Vec<&str> = command_lines.into_iter().collect();
    lines.insert(lines.len().saturating_sub(1), UNPAIR_HELP);
    format!("{HELP_HEADING}\n{}", lines.join("\n"))
}

/// A message that is not a command, where there is no assistant.
pub const ONLY_COMMANDS: &str =
    "I only understand commands (no AI key is set up here). Send /help to see them.";

/// A command the Worker does not know.
pub fn unknown_command(name: &str) -> String {
    format!("I don't know /{name}. Send /help to see what I can do.")
}

/// The relay says the chat is paired (the key itself is pinned by
/// `aromba pair`, never taken from here).
pub const PAIRED: &str = "This chat is paired with the server. Send /help to see what I can do.";

/// Said once when the chat sends more than the Worker answers in a while.
pub const TOO_MANY: &str = "Too many messages at once: I skipped some of them. Send yours again in a minute. /panic always works.";

/// The Worker's own budget of asks to the Warden is spent.
pub const BUSY: &str = "I have asked the Warden for a lot in the last ten minutes (I hold myself to a budget, so that I never look like something gone wrong).";

/// [`BUSY`], with when to ask again: `wait` rounded up to the minute, a
/// wait the budget keeps.
pub fn busy_for(wait: Duration) -> String {
    let minutes = wait.as_secs().div_ceil(60).max(1);
    let when = if minutes == 1 {
        "in a minute".to_string()
    } else {
        format!("in {minutes} minutes")
    };
    format!("{BUSY} Ask again {when}. /panic always works.")
}

/// The Warden's socket did not answer.
pub fn could_not_ask_the_warden(error: &dyn Display) -> String {
    format!("I could not ask the Warden: {error}")
}

/// A read the Warden ran that failed: its first line of errors.
pub fn read_failed(cmd: &str, first_error_line: Option<&str>) -> String {
    format!(
        "`{cmd}` failed: {}",
        first_error_line.unwrap_or("no reason given")
    )
}

/// The Warden refused, in its own words.
pub fn warden_refused(reason: &str) -> String {
    format!("The Warden refused: {reason}")
}

/// The Warden could not do it, in its own words.
pub fn warden_could_not(message: &str) -> String {
    format!("The Warden could not: {message}")
}

/// The Warden answered with something the Worker did not ask for, as a
/// clause (a read's reason, the rest of a sentence).
pub const WARDEN_ODD_CLAUSE: &str = "the Warden gave an answer I did not expect";

/// [`WARDEN_ODD_CLAUSE`] said on its own.
pub fn warden_odd() -> String {
    crate::sentence(WARDEN_ODD_CLAUSE)
}

/// The Warden's socket did not answer, as a clause (a report's reason, a
/// tool's answer to the model).
pub fn warden_not_asked(error: &dyn Display) -> String {
    format!("the Warden could not be asked: {error}")
}

/// A tap on a button that no longer does anything (an Undo whose run the
/// Worker no longer offers to undo).
/// A second tap on a receipt's Undo while its Undo waits in the chat.
pub const UNDO_PROPOSED_ALREADY: &str =
    "The Undo is proposed already, just above: approve it there.";
pub const BUTTON_DOES_NOTHING: &str = "That button does nothing any more.";

/// `/logs` without a service.
pub const WHICH_SERVICE: &str = "Which service? For example: /logs nginx";

/// `/logs` with something that cannot be a unit's name.
pub const NOT_A_SERVICE: &str = "That is not a service name.";

/// `/logs UNIT`: its last lines; `all_lines` names how many
/// `/logs UNIT all` shows when these were cut.
pub fn log_lines(unit: &str, lines: &str, all_lines: Option<&str>) -> String {
    match all_lines {
        None => format!("The last lines of {unit}:\n{lines}"),
        Some(n) => {
            format!("The last lines of {unit}:\n{lines}\n(/logs {unit} all: the last {n} lines)")
        }
    }
}

/// What `/logs` says on a server without systemd's journal.
pub const NO_JOURNAL: &str =
    "This server does not run systemd, so there is no journal of its services' log lines to show.";

/// `/logs UNIT` where there is no such unit.
pub fn no_such_service(unit: &str) -> String {
    format!("There is no service called {unit} here. /services all lists the ones there are.")
}

/// `/logs UNIT` where the unit has written nothing the journal keeps.
pub fn no_log_lines(unit: &str) -> String {
    format!("{unit} has written no log lines that the journal still keeps.")
}

/// `/logs UNIT` with no lines, and whether the unit exists not known.
pub fn no_log_lines_unsure(unit: &str, why: &str) -> String {
    format!(
        "The journal has no lines of {unit}, and I could not tell whether there is such a service here: {why}"
    )
}

/// `/chores` on a server with none.
pub const NO_CHORES: &str = "No chores here.";

/// A line of `/chores`.
pub fn chore_line(name: &str, color: &str, schedule: &str) -> String {
    format!("{name} ({color}): {schedule}")
}

/// `/skills` on a server with none.
pub const NO_SKILLS: &str = "No skill is installed. A skill adds chores a publisher signed; root installs one on the server with `aromba skill install FILE`, after reading what it may do.";

/// The first line of `/skills`.
pub fn skills_verdict(loaded: usize, not_loaded: usize) -> String {
    let n = |k: usize| if k == 1 { "skill" } else { "skills" };
    match not_loaded {
        0 => format!("{loaded} {} installed:", n(loaded)),
        _ => format!(
            "{loaded} {} installed, and {not_loaded} that no longer load (their chores do not run):",
            n(loaded)
        ),
    }
}

/// A line of `/skills`: the Warden's words for its network, and the
/// settings not set yet (its chores wait for them).
pub fn skill_line(
    name: &str,
    version: &str,
    publisher: &str,
    network: &str,
    unset: &[&str],
) -> String {
    let mut line = format!("{name} {version}, from {publisher}. Network: {network}");
    if !unset.is_empty() {
        line.push_str(&format!(
            ". Its chores wait for {} to be set, as root: aromba skill set {name} {}",
            unset.join(", "),
            if unset.len() == 1 { unset[0] } else { "NAME" }
        ));
    }
    line
}

/// A skill of `/skills` that no longer verifies: the Warden's why.
pub fn skill_not_loaded(why: &str) -> String {
    format!("Not loaded: {why}")
}

/// The last line of `/skills`.
pub const SKILLS_MORE: &str = "What each may write and run: the Trust page (/trust), or `aromba skill show NAME` on the server.";

/// `/run` without a chore's name (or with one no chore can have).
pub const WHICH_CHORE: &str = "Which chore? /chores lists them; then, for example, /run apt-clean";

/// `/run NAME` after its first dry run was shown.
pub fn run_again_for_real(name: &str) -> String {
    format!("Send /run {name} again to run it for real.")
}

/// `/run NAME` with no such chore.
pub fn no_such_chore(name: &str) -> String {
    format!("There is no chore called {name}. /chores lists them.")
}
