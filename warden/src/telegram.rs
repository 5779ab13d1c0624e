//! The Telegram side of approvals: the key Telegram signs launch data with
//! (compiled in, or pinned by root at install), the account pinned at
//! pairing, and the `start_param`s the Warden issues — so that an action
//! approved in the Mini App was approved by the paired person in Telegram,
//! whatever the relay says.
//!
//! Records of the state directory (under the integrity baseline):
//! `telegram.pub` (a key root pinned at install; absent: Telegram's
//! production key) and `telegram-account` (`bot=<id>\nuser=<id>\n`,
//! pinned by `aromba pair` from launch data Telegram signed).
//!
//! An action's `start_param` is `<action id>_<SHA-256 of its text>` (97
//! characters of `[0-9a-f_]`): the app opened from it approves exactly the
//! text the Warden rendered, and nothing else. The pairing's is
//! `pair_<code>`, the relay's one-time pairing code `aromba pair` showed.

#![forbid(unsafe_code)]

use crate::init_data::{self, InitDataError, Launch, TelegramKey};
use crate::layout::Layout;

/// The record of a Telegram key root pinned at install.
pub const KEY_RECORD: &str = "telegram.pub";

/// The record of the Telegram account pinned at pairing.
pub const ACCOUNT_RECORD: &str = "telegram-account";

/// The prefix of the pairing's `start_param`.
pub const PAIRING_PREFIX: &str = "pair_";

/// The key launch data is verified with: the one root pinned at install,
/// else Telegram's production key. A pinned record that cannot be read
/// verifies nothing (never a silent fall back to another key).
pub fn key(layout: &Layout) -> Result<TelegramKey, String> {
    match crate::state::read(layout, KEY_RECORD) {
        Ok(None) => Ok(TelegramKey::production()),
        Ok(Some(bytes)) => std::str::from_utf8(&bytes)
            .ok()
            .and_then(|t| TelegramKey::from_hex(t.trim_end_matches('\n')).ok())
            .ok_or_else(|| {
                "the Telegram key pinned at install is unreadable; reinstall with `aromba-warden install`"
                    .to_string()
            }),
        Err(e) => Err(e.to_string()),
    }
}

/// How `aromba status` names the key in use.
pub fn key_words(layout: &Layout) -> String {
    match key(layout) {
        Ok(k) if k.is_production() => "Telegram's production key".into(),
        Ok(k) if k.to_hex() == init_data::TEST_ENVIRONMENT_KEY => {
            "Telegram's test-environment key (pinned at install)".into()
        }
        Ok(k) => format!("pinned at install: {} (not Telegram's)", k.to_hex()),
        Err(e) => e,
    }
}

/// Writes the key root gives at install (`None`: the production key, the
/// record removed). Install runs before the baseline is taken.
pub fn pin_key_at_install(layout: &Layout, key: Option<&TelegramKey>) -> std::io::Result<()> {
    let path = layout.state_dir.join(KEY_RECORD);
    match key {
        Some(k) if !k.is_production() => {
            crate::atomic_file::replace(&path, format!("{}\n", k.to_hex()).as_bytes(), 0o600)
        }
        _ => match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        },
    }
}

/// The Telegram account a server is paired with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Account {
    /// The relay's bot, whose launch data Telegram signs with its id.
    pub bot_id: u64,
    /// The person.
    pub user_id: u64,
}

impl Account {
    pub fn record(&self) -> String {
        format!("bot={}\nuser={}\n", self.bot_id, self.user_id)
    }

    fn parse(text: &str) -> Option<Account> {
        let mut lines = text.strip_suffix('\n')?.split('\n');
        let number = |line: Option<&str>, key: &str| {
            line?
                .strip_prefix(key)?
                .strip_prefix('=')
                .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))?
                .parse::<u64>()
                .ok()
        };
        let account = Account {
            bot_id: number(lines.next(), "bot")?,
            user_id: number(lines.next(), "user")?,
        };
        lines.next().is_none().then_some(account)
    }
}

/// The account pinned at pairing, when there is one.
pub fn account(layout: &Layout) -> Result<Option<Account>, String> {
    match crate::state::read(layout, ACCOUNT_RECORD) {
        Ok(None) => Ok(None),
        Ok(Some(bytes)) => std::str::from_utf8(&bytes)
            .ok()
            .and_then(Account::parse)
            .map(Some)
            .ok_or_else(|| "the pinned Telegram account record is unreadable".to_string()),
        Err(e) => Err(e.to_string()),
    }
}

/// The `start_param` of the app that approves action `action_id`, shown
/// with the text whose SHA-256 is `text_sha256`; for an action that needs
/// the PIN, with the public half of the key the page seals it for
/// (`seal.rs`), so the page takes that key from Telegram's signed launch.
pub fn action_param(action_id: &str, text_sha256: &str, seal_key: Option<&str>) -> String {
    match seal_key {
        Some(key) => format!("{action_id}_{text_sha256}_{key}"),
        None => format!("{action_id}_{text_sha256}"),
    }
}

/// What an action's `start_param` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActionParam<'a> {
    pub action_id: &'a str,
    pub text_sha256: &'a str,
    /// The public key the PIN is sealed for, when the action needs it.
    pub seal_key: Option<&'a str>,
}

/// The action, text hash and seal key a `start_param` names; `None` for
/// one that is not of the Warden's form.
pub fn parse_action_param(param: &str) -> Option<ActionParam<'_>> {
    let lower_hex = |s: &str, n: usize| {
        s.len() == n && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    let mut parts = param.split('_');
    let action_id = parts.next().filter(|id| lower_hex(id, 32))?;
    let text_sha256 = parts.next().filter(|h| lower_hex(h, 64))?;
    let seal_key = match parts.next() {
        None => None,
        Some(key) if lower_hex(key, 64) => Some(key),
        Some(_) => return None,
    };
    parts.next().is_none().then_some(ActionParam {
        action_id,
        text_sha256,
        seal_key,
    })
}

/// The `start_param` of the pairing with code `code`; `None` for a code
/// no direct link can carry.
pub fn pairing_param(code: &str) -> Option<String> {
    let param = format!("{PAIRING_PREFIX}{code}");
    init_data::is_start_param(&param).then_some(param)
}

/// Why launch data was not taken: said in words, and whether the person
/// could have sent it (an old app reopened is not an attack).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LaunchRefusal {
    /// The app was opened too long ago: open it again.
    Stale(String),
    /// Anything else: not the paired person's tap in Telegram.
    Invalid(String),
}

impl LaunchRefusal {
    pub fn words(&self) -> &str {
        match self {
            LaunchRefusal::Stale(w) | LaunchRefusal::Invalid(w) => w,
        }
    }
}

impl From<InitDataError> for LaunchRefusal {
    fn from(e: InitDataError) -> LaunchRefusal {
        match e {
            InitDataError::NotFresh { .. } => LaunchRefusal::Stale(e.to_string()),
            other => LaunchRefusal::Invalid(other.to_string()),
        }
    }
}

/// Verifies launch data as the paired person's: signed by Telegram (the
/// key in use) for the pinned bot, fresh, opened by the pinned user.
pub fn verify_paired(layout: &Layout, launch: &str, now: u64) -> Result<Launch, LaunchRefusal> {
    let account = account(layout)
        .map_err(LaunchRefusal::Invalid)?
        .ok_or_else(|| {
            LaunchRefusal::Invalid(
                "no Telegram account is pinned here: pair the server again with `aromba pair` so approvals in the app can be checked".into(),
            )
        })?;
    let key = key(layout).map_err(LaunchRefusal::Invalid)?;
    let verified = init_data::verify(launch, account.bot_id, &key, now)?;
    if verified.user_id != account.user_id {
        return Err(LaunchRefusal::Invalid(format!(
            "the app was opened by Telegram account {}, not the one this server is paired with",
            verified.user_id
        )));
    }
    Ok(verified)
}

/// Verifies the pairing's launch data: signed by Telegram for `bot_id`,
/// fresh, opened with the pairing's `start_param`. The account to pin.
pub fn verify_pairing(
    layout: &Layout,
    launch: &str,
    bot_id: u64,
    start_param: &str,
    now: u64,
) -> Result<(Account, Launch), LaunchRefusal> {
    if !start_param.starts_with(PAIRING_PREFIX) || !init_data::is_start_param(start_param) {
        return Err(LaunchRefusal::Invalid(
            "the pairing's start parameter is not one `aromba pair` makes".into(),
        ));
    }
    let key = key(layout).map_err(LaunchRefusal::Invalid)?;
    let verified = init_data::verify(launch, bot_id, &key, now)?;
    if verified.start_param.as_deref() != Some(start_param) {
        return Err(LaunchRefusal::Invalid(
            "the app was not opened from this pairing's button".into(),
        ));
    }
    Ok((
        Account {
            bot_id,
            user_id: verified.user_id,
        },
        verified,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_action_param_reads_back_with_and_without_its_pin_key() {
        let (id, hash, key) = ("a".repeat(32), "b".repeat(64), "c".repeat(64));
        let plain = action_param(&id, &hash, None);
        let p = parse_action_param(&plain).unwrap();
        assert_eq!(
            (p.action_id, p.text_sha256, p.seal_key),
            (&*id, &*hash, None)
        );
        let with_key = action_param(&id, &hash, Some(&key));
        assert!(
            init_data::is_start_param(&with_key),
            "a direct link carries it"
        );
        let p = parse_action_param(&with_key).unwrap();
        assert_eq!(p.seal_key, Some(&*key));
    }

    #[test]
    fn a_param_of_another_shape_names_no_action() {
        let (id, hash, key) = ("a".repeat(32), "b".repeat(64), "c".repeat(64));
        for bad in [
            format!("{id}_{hash}_{key}_"),
            format!("{id}_{hash}_{key}_{key}"),
            format!("{id}_{hash}_"),
            format!("{id}_{hash}_{}", "C".repeat(64)),
            format!("{id}_{hash}_{}", "c".repeat(63)),
            format!("{id}_{}", "B".repeat(64)),
            format!("{id}{hash}"),
            "pair_ABC234".into(),
        ] {
            assert_eq!(parse_action_param(&bad), None, "{bad}");
        }
    }
}
