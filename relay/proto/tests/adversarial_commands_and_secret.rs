//! A hostile chat (or a careless table edit) against the commands' table
//! (`aromba_relay_proto::commands`), which drives the relay's Telegram
//! menu, the Worker's `/help` and which handler answers; and a PIN sent
//! the way it went before the Mini App (`secret`), which is no frame now.
//!
//! Each attack is a plain test: the code holds it, or was fixed to.

use aromba_relay_proto::commands::{COMMANDS, Command};
use aromba_relay_proto::frame::{Body, Delivery};

/// What the Worker reads as a command name (`agent/src/daemon/chat.rs`,
/// `command`): ASCII lower case and `_`, nothing else — a digit or an
/// upper-case letter makes the message a question for the assistant.
fn the_worker_reads_it(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
}

/// What Telegram's `setMyCommands` takes: 1 to 32 of `a-z`, `0-9`, `_`,
/// a description of 1 to 256 characters, at most 100 commands.
fn telegram_takes(name: &str, description: &str) -> bool {
    (1..=32).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && (1..=256).contains(&description.chars().count())
}

/// Every row's name is one Telegram's menu takes and one the Worker reads
/// as a command (the table's own test checks only the length: a row
/// `ipv6` or `Logs` would pass it, and the whole-product test would not
/// see the difference either — the Worker's answer to a non-command is
/// "I only understand commands…", not "I don't know /…"). The relay adds
/// `/unpair` to the menu and answers `/start` itself: no row may take
/// either, and no two rows a name. At most 100 entries with `/unpair`.
#[test]
fn every_row_is_a_menu_entry_telegram_takes_and_a_command_the_worker_reads() {
    for row in COMMANDS {
        assert!(telegram_takes(row.name, row.menu), "{row:?}");
        assert!(the_worker_reads_it(row.name), "{row:?}");
        assert!(!["unpair", "start"].contains(&row.name), "{row:?}");
        assert_eq!(
            COMMANDS.iter().filter(|r| r.name == row.name).count(),
            1,
            "{row:?}"
        );
    }
    assert!(COMMANDS.len() < 100);
    // The relay's own entry, as `relay/src/telegram/pairing.rs` adds it.
    assert!(telegram_takes("unpair", "Unpair this chat from its server"));
}

/// `Command::parse` takes only the exact lower-case name the Worker has
/// already made of the message (lower-cased, `@bot` cut off): no case,
/// space, suffix, prefix, look-alike letter or invisible character gets a
/// handler; `start` is `help` and nothing else is renamed.
#[test]
fn parse_takes_only_the_exact_name() {
    for row in COMMANDS {
        let name = row.name;
        for spelled in [
            name.to_ascii_uppercase(),
            format!("{name} "),
            format!(" {name}"),
            format!("/{name}"),
            format!("{name}@aromba_bot"),
            format!("{name}s"),
            format!("{name}\u{200b}"),
            format!("\u{feff}{name}"),
            // A Cyrillic look-alike for the first Latin letter that has one.
            name.replacen('a', "а", 1)
                .replacen('o', "о", 1)
                .replacen('e', "е", 1)
                .replacen('p', "р", 1)
                .replacen('c', "с", 1),
        ] {
            if spelled == name {
                continue;
            }
            assert_eq!(Command::parse(&spelled), None, "{spelled:?}");
        }
        assert_eq!(Command::parse(name), Some(row.command));
    }
    assert_eq!(Command::parse("start"), Some(Command::Help));
    for other in [
        "", "unpair", "Start", "START", "resume", "stop", "_", "help_",
    ] {
        assert_eq!(Command::parse(other), None, "{other:?}");
    }
}

/// The two ladder commands are in the table (the Worker's fast path for
/// them goes through `Command::parse` since the table), and `/panic` is
/// its own command, not an alias of anything.
#[test]
fn panic_and_trust_are_rows_of_their_own() {
    let named = |c: Command| COMMANDS.iter().filter(|r| r.command == c).count();
    assert_eq!(named(Command::Panic), 1);
    assert_eq!(named(Command::Trust), 1);
    assert_eq!(Command::parse("panic"), Some(Command::Panic));
}

const THE_PIN: &str = "428193";

/// The PIN no longer travels from the relay to the Worker at all: a PIN
/// is typed only in the Mini App, sealed for the Warden. A `secret`
/// delivery (what a relay of before the Mini App sent) and an
/// `expect_secret` request are frames of no kind, refused as they are
/// read — and the refusal does not echo the PIN it carried.
#[test]
fn a_secret_delivery_and_expect_secret_are_no_frames_and_echo_no_pin() {
    for frame in [
        format!(r#"{{"type":"deliver","id":7,"delivery":{{"kind":"secret","text":"{THE_PIN}"}}}}"#),
        r#"{"type":"expect_secret"}"#.to_string(),
    ] {
        let e = serde_json::from_str::<Body>(&frame).expect_err("not a frame");
        let shown = format!("{e} {e:?}");
        assert!(!shown.contains(THE_PIN), "{shown}");
    }
    let delivery =
        serde_json::from_str::<Delivery>(&format!(r#"{{"kind":"secret","text":"{THE_PIN}"}}"#));
    assert!(delivery.is_err(), "a secret is no delivery");
}
