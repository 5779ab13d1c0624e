//! The chat's commands the Worker answers, with the words Telegram's menu
//! shows for each: the relay registers them with `setMyCommands` at
//! pairing, the Worker answers them and lists them in `/help`.

pub const COMMANDS: &[(&str, &str)] = &[
    ("status", "How the server is doing"),
    ("disk", "Space left on each disk"),
    ("services", "Services that failed"),
    ("updates", "Updates waiting"),
    ("logs", "The last lines of a service's log"),
    ("chores", "The chores and when they run"),
    ("run", "Run a chore now"),
    ("trust", "What I may do here, and my journal"),
    ("digest", "A daily summary at a time you pick"),
    ("prodmode", "Prod mode, and turning it off"),
    ("ai", "The assistant's daily token budget"),
    ("panic", "Stop me now"),
    ("help", "What I can do"),
];
