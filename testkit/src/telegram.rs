//! Telegram's signature over Mini App launches, in the tests: the test key
//! pair of `keys/test/telegram-launch.*` (a test Warden pins its public
//! half at install), a test bot and the paired person.

pub use aromba_botfake::launch::{LaunchKey, Person, launch, signature};

/// The public key a test Warden pins with `--telegram-key`.
pub const TEST_PUB: &str = include_str!("../../keys/test/telegram-launch.pub");
const TEST_SEED: &str = include_str!("../../keys/test/telegram-launch.seed");

/// The bot the tests' launches are for (its token's number is its id).
pub const BOT_TOKEN: &str = "7000000001:TEST-launch-token-not-a-secret";
pub const BOT_ID: u64 = 7_000_000_001;

/// The paired person's Telegram user id (their private chat's id).
pub const PERSON: i64 = 4242;

/// The test key Telegram's part signs with.
pub fn test_key() -> LaunchKey {
    LaunchKey::from_seed_hex(TEST_SEED).expect("keys/test/telegram-launch.seed is a seed")
}

/// The public key, trimmed, as `--telegram-key` takes it.
pub fn test_pub() -> &'static str {
    TEST_PUB.trim()
}

/// Launch data of Telegram user `user` opening the test bot's app from a
/// direct link with `start_param`, at `now`, signed with the test key.
pub fn launch_of(user: i64, start_param: Option<&str>, now: u64) -> String {
    launch(
        &test_key(),
        BOT_TOKEN,
        &Person::new(user, "Ana"),
        start_param,
        now,
    )
}
