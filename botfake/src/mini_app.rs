//! Telegram's part when the person taps a button that opens a Mini App
//! from a direct link (`https://t.me/<bot>/<app>?startapp=<param>`): the
//! app's URL as registered with BotFather (`/newapp`), opened with the
//! launch parameters in its fragment — `tgWebAppData` (the launch data,
//! signed by the fake's key in Telegram's place, [`crate::launch`]), the
//! version, the platform and the theme — as Telegram's clients open it.
//!
//! ```
//! use aromba_botfake::{Fake, launch::LaunchKey};
//! let fake = Fake::new("123456:TEST-token-not-a-secret-at-all-0000", "aromba_test_bot");
//! fake.register_app("aromba", "http://127.0.0.1:8080/app/");
//! fake.set_launch_key(LaunchKey::from_seed_hex(&"07".repeat(32)).unwrap());
//! let opened = fake
//!     .open_app(42, "https://t.me/aromba_test_bot/aromba?startapp=abc")
//!     .unwrap();
//! assert!(opened.url.starts_with("http://127.0.0.1:8080/app/?tgWebAppStartParam=abc#tgWebAppData="));
//! assert!(opened.launch.contains("start_param=abc"));
//! ```

use crate::Fake;
use crate::launch::{LaunchKey, Person, encode, launch};
use std::collections::HashMap;

/// The registered apps and the signing key.
#[derive(Default)]
pub struct Apps {
    urls: HashMap<String, String>,
    key: Option<LaunchKey>,
}

/// A Mini App as Telegram opens it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Opened {
    /// The app's URL with the launch parameters.
    pub url: String,
    /// The launch data alone (`tgWebAppData`), as the page reads it.
    pub launch: String,
}

/// The theme Telegram passes (its light defaults).
const THEME: &str = r##"{"bg_color":"#ffffff","text_color":"#000000","hint_color":"#707579","link_color":"#3390ec","button_color":"#3390ec","button_text_color":"#ffffff","secondary_bg_color":"#f4f4f5"}"##;

impl Fake {
    fn apps(&self) -> std::sync::MutexGuard<'_, Apps> {
        self.apps.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// BotFather's `/newapp`: the app `short_name` opens `url`.
    pub fn register_app(&self, short_name: &str, url: &str) {
        self.apps()
            .urls
            .insert(short_name.to_ascii_lowercase(), url.to_string());
    }

    /// The key launches are signed with (Telegram's, in the fake's world).
    pub fn set_launch_key(&self, key: LaunchKey) {
        self.apps().key = Some(key);
    }

    /// The origins of the registered apps (the chat page frames them).
    pub fn app_origins(&self) -> Vec<String> {
        self.apps()
            .urls
            .values()
            .filter_map(|u| {
                let rest = u.split_once("://")?;
                let host = rest.1.split('/').next()?;
                Some(format!("{}://{host}", rest.0))
            })
            .collect()
    }

    /// The person in private chat `chat` opens `link`: the app's URL with
    /// its launch parameters, or why Telegram would not open it.
    pub fn open_app(&self, chat: i64, link: &str) -> Result<Opened, String> {
        let rest = link
            .strip_prefix("https://t.me/")
            .ok_or("not a t.me link")?;
        let (path, query) = rest.split_once('?').ok_or("no startapp parameter")?;
        let (bot, short) = path.split_once('/').ok_or("not a Mini App's direct link")?;
        if !bot.eq_ignore_ascii_case(&self.username) {
            return Err(format!("{bot} is not this bot"));
        }
        let param = query
            .strip_prefix("startapp=")
            .filter(|p| {
                !p.is_empty()
                    && p.len() <= 512
                    && p.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            })
            .ok_or("the startapp parameter is not one Telegram passes")?;
        let apps = self.apps();
        let url = apps
            .urls
            .get(&short.to_ascii_lowercase())
            .ok_or_else(|| format!("no Mini App {short} is registered for this bot"))?;
        let key = apps.key.as_ref().ok_or("no launch key is set")?;
        let now = crate::state::unix_now();
        let data = launch(
            key,
            &self.token,
            &Person::new(chat, "Person"),
            Some(param),
            now,
        );
        Ok(Opened {
            url: format!(
                "{url}?tgWebAppStartParam={param}#tgWebAppData={}&tgWebAppVersion=8.0&tgWebAppPlatform=weba&tgWebAppThemeParams={}",
                encode(&data),
                encode(THEME)
            ),
            launch: data,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake() -> Fake {
        let f = Fake::new("123456:TEST-token-not-a-secret-at-all-0000", "Aromba_Bot");
        f.register_app("aromba", "http://127.0.0.1:1/app/");
        f.set_launch_key(LaunchKey::from_seed_hex(&"07".repeat(32)).unwrap());
        f
    }

    #[test]
    fn only_this_bots_registered_app_opens_with_a_valid_parameter() {
        let f = fake();
        assert!(
            f.open_app(1, "https://t.me/aromba_bot/aromba?startapp=a_b-1")
                .is_ok()
        );
        for bad in [
            "https://t.me/other_bot/aromba?startapp=a",
            "https://t.me/aromba_bot/other?startapp=a",
            "https://t.me/aromba_bot/aromba?startapp=",
            "https://t.me/aromba_bot/aromba?startapp=a%20b",
            "https://t.me/aromba_bot/aromba",
            "http://t.me/aromba_bot/aromba?startapp=a",
            "https://evil.example/aromba_bot/aromba?startapp=a",
        ] {
            assert!(f.open_app(1, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_frame_origins_are_the_registered_apps() {
        assert_eq!(fake().app_origins(), vec!["http://127.0.0.1:1".to_string()]);
    }
}
