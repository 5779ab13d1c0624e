//! The chat's commands the Worker answers: one table, from which the relay
//! registers Telegram's menu (`setMyCommands`, at pairing), the Worker
//! writes `/help`, and the Worker's answer is chosen — by [`Command`], so a
//! command in the table that the Worker does not answer is a compile
//! error, not a silent "I don't know".
//!
//! ```
//! use aromba_relay_proto::commands::{COMMANDS, Command};
//!
//! assert_eq!(Command::parse("logs"), Some(Command::Logs));
//! assert_eq!(Command::parse("start"), Some(Command::Help));
//! assert_eq!(Command::parse("rm"), None);
//! assert!(COMMANDS.iter().any(|c| c.name == "ai"));
//! ```

/// A command the Worker answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    Status,
    Disk,
    Services,
    Updates,
    Logs,
    Chores,
    Skills,
    Run,
    Trust,
    Digest,
    ProdMode,
    Ai,
    Panic,
    Help,
}

/// A row of the table.
#[derive(Debug)]
pub struct Row {
    pub command: Command,
    /// What is typed after `/`.
    pub name: &'static str,
    /// Telegram's menu's words for it.
    pub menu: &'static str,
    /// Its line in `/help`.
    pub help: &'static str,
}

/// Every command, in the order the menu and `/help` show them.
pub const COMMANDS: &[Row] = &[
    Row {
        command: Command::Status,
        name: "status",
        menu: "How the server is doing",
        help: "/status: how the server is doing",
    },
    Row {
        command: Command::Disk,
        name: "disk",
        menu: "Space left on each disk",
        help: "/disk: space left on each disk",
    },
    Row {
        command: Command::Services,
        name: "services",
        menu: "Services that failed",
        help: "/services: services that failed (/services all: every one)",
    },
    Row {
        command: Command::Updates,
        name: "updates",
        menu: "Updates waiting",
        help: "/updates: updates waiting (/updates all: every one)",
    },
    Row {
        command: Command::Logs,
        name: "logs",
        menu: "The last lines of a service's log",
        help: "/logs <service>: the last lines of a service's log (/logs <service> all: the last 200)",
    },
    Row {
        command: Command::Chores,
        name: "chores",
        menu: "The chores and when they run",
        help: "/chores: the chores and when they run",
    },
    Row {
        command: Command::Skills,
        name: "skills",
        menu: "The skills installed, and what each may reach",
        help: "/skills: the skills installed, and what each may reach on the network",
    },
    Row {
        command: Command::Run,
        name: "run",
        menu: "Run a chore now",
        help: "/run <chore>: run a chore now (its dry run first; I ask before a yellow or red one)",
    },
    Row {
        command: Command::Trust,
        name: "trust",
        menu: "What I may do here, and my journal",
        help: "/trust: what I may do here, and whether my journal is intact",
    },
    Row {
        command: Command::Digest,
        name: "digest",
        menu: "A daily summary at a time you pick",
        help: "/digest HH:MM: a daily summary at that time (/digest off to stop)",
    },
    Row {
        command: Command::ProdMode,
        name: "prodmode",
        menu: "Prod mode, and turning it off",
        help: "/prodmode off: turn prod mode off (asks for your PIN)",
    },
    Row {
        command: Command::Ai,
        name: "ai",
        menu: "The assistant's daily token budget",
        help: "/ai budget N: a daily token budget for the assistant (with an AI key, ask me anything)",
    },
    Row {
        command: Command::Panic,
        name: "panic",
        menu: "Stop me now",
        help: "/panic: stop me now (reads only, until root runs `aromba resume` on the server)",
    },
    Row {
        command: Command::Help,
        name: "help",
        menu: "What I can do",
        help: "/help: this list",
    },
];

impl Command {
    /// The command named `name` (lower case, without `/`); `start`, which
    /// Telegram sends when a chat opens, is `help`.
    pub fn parse(name: &str) -> Option<Command> {
        if name == "start" {
            return Some(Command::Help);
        }
        COMMANDS
            .iter()
            .find(|row| row.name == name)
            .map(|row| row.command)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_has_one_row_and_its_help_line_starts_with_its_name() {
        for row in COMMANDS {
            assert_eq!(
                COMMANDS.iter().filter(|r| r.command == row.command).count(),
                1,
                "{row:?}"
            );
            assert!(
                row.help.starts_with(&format!("/{} ", row.name))
                    || row.help.starts_with(&format!("/{}:", row.name)),
                "{row:?}"
            );
            assert_eq!(Command::parse(row.name), Some(row.command));
            // Telegram's limits for a menu entry.
            assert!(
                row.name.len() <= 32 && (3..=256).contains(&row.menu.chars().count()),
                "{row:?}"
            );
        }
    }
}
