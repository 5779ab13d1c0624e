//! Aromba's own updates: a new version running, a rollback, a release
//! list gone stale, and `/trust`'s line on them.

/// `/trust`'s line where no release folder is set.
pub const TRUST_NO_RELEASE_FOLDER: &str =
    "Updates: no release folder is set (network.toml names none)";

/// `/trust`'s line when no current release list was seen for `days`.
pub fn trust_stale(days: i64) -> String {
    format!(
        "Updates: NO current release list seen for {days} days: the release folder may be stale or holding updates back"
    )
}

/// `/trust`'s line when a current release list was seen.
pub fn trust_seen_hours_ago(hours: i64) -> String {
    format!("Updates: a current release list was seen {hours} hours ago")
}

/// `/trust`'s line before the first check.
pub const TRUST_NOT_CHECKED: &str = "Updates: no release list checked yet";

/// Said after a start on another version.
pub fn now_running(now: &str, before: &str) -> String {
    format!("Aromba is now {now} (it was {before}).")
}

/// What a rollback put back, when the Warden did not name it.
pub const THE_PREVIOUS_RELEASE: &str = "the previous release";

/// A release that failed to start was rolled back.
pub fn rolled_back(failed: &str, back: &str) -> String {
    format!(
        "Aromba {failed} failed to start three times, so {back} was put back. {failed} will not be tried again; updates wait for a release after it."
    )
}

/// No current release list was seen for `days`.
pub fn held_back(days: i64) -> String {
    format!(
        "Updates may be held back: Aromba has not seen a current release list for {days} days. The release folder may be stale or withholding updates, so security fixes may not reach this server. `aromba update` in a root terminal says why."
    )
}

/// A patch release the Warden did not install.
pub fn patch_not_installed(version: &str, reason: &str) -> String {
    format!("The patch release {version} was not installed: {reason}")
}

/// The daily check applied the update of an installed skill that asks for
/// nothing more than the version installed.
pub fn skill_updated(name: &str, version: &str) -> String {
    format!("Updated the skill {name} to {version}: it asks for nothing more than before.")
}

/// What the proposal of a skill's update is named by, when the Warden
/// does not propose it (after [`crate::chores::did_not_run`]'s words).
pub fn the_skill_update(name: &str) -> String {
    format!("The update of the skill {name}")
}
