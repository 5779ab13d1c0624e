//! The classes of secrets the redactor removes, and per-class counts.

use std::fmt;

/// What kind of secret a removal was. Its [`Class::name`] is what the marker
/// `[redacted:NAME]` and the journal's counts carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Class {
    /// A PEM, OpenSSH or PGP private-key block, whole (or to the end of a cut input).
    PrivateKey,
    OpenAiKey,
    AnthropicKey,
    OpenRouterKey,
    StripeKey,
    GitHubToken,
    AwsKey,
    SlackToken,
    GoogleKey,
    TelegramBotToken,
    Jwt,
    /// The password part of `scheme://user:password@host`.
    UrlPassword,
    /// The credential after `Bearer` or `Basic`.
    AuthHeader,
    /// The value of `NAME=value` and its kin where NAME names a secret.
    SecretAssignment,
    /// A value the caller knows is secret (a skill's secret setting),
    /// wherever it appears.
    SkillSecret,
    /// The unfinished last line of an output that was cut at the byte cap.
    CutLine,
}

impl Class {
    pub const COUNT: usize = 16;

    pub const ALL: [Class; Class::COUNT] = [
        Class::PrivateKey,
        Class::OpenAiKey,
        Class::AnthropicKey,
        Class::OpenRouterKey,
        Class::StripeKey,
        Class::GitHubToken,
        Class::AwsKey,
        Class::SlackToken,
        Class::GoogleKey,
        Class::TelegramBotToken,
        Class::Jwt,
        Class::UrlPassword,
        Class::AuthHeader,
        Class::SecretAssignment,
        Class::SkillSecret,
        Class::CutLine,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            Class::PrivateKey => "private-key",
            Class::OpenAiKey => "openai-key",
            Class::AnthropicKey => "anthropic-key",
            Class::OpenRouterKey => "openrouter-key",
            Class::StripeKey => "stripe-key",
            Class::GitHubToken => "github-token",
            Class::AwsKey => "aws-key",
            Class::SlackToken => "slack-token",
            Class::GoogleKey => "google-key",
            Class::TelegramBotToken => "telegram-bot-token",
            Class::Jwt => "jwt",
            Class::UrlPassword => "url-password",
            Class::AuthHeader => "auth-header",
            Class::SecretAssignment => "secret-assignment",
            Class::SkillSecret => "skill-secret",
            Class::CutLine => "cut-line",
        }
    }

    /// The class whose [`Class::name`] is `name`.
    pub fn from_name(name: &str) -> Option<Class> {
        Class::ALL.into_iter().find(|c| c.name() == name)
    }

    const fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How many removals of each class one call made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts([u32; Class::COUNT]);

impl Counts {
    pub fn get(&self, class: Class) -> u32 {
        self.0[class.index()]
    }

    pub fn total(&self) -> u64 {
        self.0.iter().map(|&n| u64::from(n)).sum()
    }

    pub(crate) fn add_n(&mut self, class: Class, n: u32) {
        let slot = &mut self.0[class.index()];
        *slot = slot.saturating_add(n);
    }

    pub(crate) fn add(&mut self, class: Class) {
        let slot = &mut self.0[class.index()];
        *slot = slot.saturating_add(1);
    }

    /// The classes with at least one removal, in [`Class::ALL`] order.
    pub fn nonzero(&self) -> impl Iterator<Item = (Class, u32)> + '_ {
        Class::ALL
            .into_iter()
            .map(|c| (c, self.get(c)))
            .filter(|&(_, n)| n > 0)
    }
}

impl fmt::Display for Counts {
    /// `github-token=2 jwt=1`, or `none`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (class, n) in self.nonzero() {
            if !first {
                f.write_str(" ")?;
            }
            write!(f, "{class}={n}")?;
            first = false;
        }
        if first {
            f.write_str("none")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_class_has_a_distinct_name_that_round_trips() {
        for (i, class) in Class::ALL.into_iter().enumerate() {
            assert_eq!(class.index(), i);
            assert_eq!(Class::from_name(class.name()), Some(class));
        }
    }
}
