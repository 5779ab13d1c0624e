//! Removes secrets from command output before it leaves the Warden.
//!
//! Every result the Warden returns — to the Worker, and from there to a
//! model, a log or Telegram — passes through [`redact`] first, and the
//! journal records the same redacted bytes with the per-class [`Counts`].
//! The crate does no IO and has no `unsafe`.
//!
//! ```
//! let out = aromba_redact::redact(b"DATABASE_URL=postgres://app:s3cr3tpw@db/app\n");
//! assert_eq!(out.text, b"DATABASE_URL=postgres://app:[redacted:url-password]@db/app\n");
//! assert_eq!(out.counts.get(aromba_redact::Class::UrlPassword), 1);
//! ```
//!
//! # What is removed
//!
//! Private-key material by its shape from either end (a key cut by an
//! output window takes only its own lines); OpenAI, Anthropic, OpenRouter,
//! Stripe, GitHub, AWS, Slack, Google and Telegram bot tokens (also inside
//! Bot API URLs); JWTs; passwords in URLs of any scheme, to the last `@`
//! before the host, also JSON-escaped or percent-encoded; the credential of
//! an `Authorization` header whatever its scheme; and values of assignments
//! whose name contains `key`, `token`, `secret`, `password`, `passwd`,
//! `passphrase`, `pass`, `pwd`, `session`, `sid`, `credential`,
//! `bearer` or `auth` when 12 bytes or longer and not a
//! path — also escaped (`\u003d`, `\u0022`, `%3D`), on the next lines (YAML)
//! or in a connection string. Each removal becomes `[redacted:CLASS]`.
//! SECURITY.md's Redaction section is the full account, with what is kept.
//!
//! # Whole buffers, and a stream
//!
//! The Warden collects a command's output up to its byte cap and answers only
//! when the command has ended, so it calls [`redact`] on the whole buffer.
//! When it had to cut the output at the cap, it calls [`redact_cut`]: the
//! last, unfinished line is dropped whole, because whatever secret it held
//! may now be too short for its rule to recognise. [`Stream`] redacts input
//! of any size in bounded memory, with the same result (the command-line
//! filter uses it).

#![forbid(unsafe_code)]

mod assign;
mod bytes;
mod class;
mod header;
mod keys;
mod runs;
mod scan;
mod stream;
mod tokens;
mod url;
mod yaml;

pub use class::{Class, Counts};
pub use stream::{Limits, Stream};

use std::sync::OnceLock;

/// A redacted text and what was removed from it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Redacted {
    pub text: Vec<u8>,
    pub counts: Counts,
}

/// The redactor: a compiled set of triggers. Build once and share; it is
/// immutable and cheap to call. [`redact`] uses a process-wide one.
pub struct Redactor {
    triggers: scan::Triggers,
}

impl Default for Redactor {
    fn default() -> Self {
        Redactor::new()
    }
}

impl Redactor {
    pub fn new() -> Redactor {
        Redactor {
            triggers: scan::Triggers::new(),
        }
    }

    pub(crate) fn triggers(&self) -> &scan::Triggers {
        &self.triggers
    }

    /// Redacts a complete output.
    pub fn redact(&self, input: &[u8]) -> Redacted {
        self.redact_lines(input, false)
    }

    fn redact_lines(&self, input: &[u8], cut: bool) -> Redacted {
        let out = scan::scan(&self.triggers, input, cut);
        Redacted {
            text: out.text,
            counts: out.counts,
        }
    }

    /// Redacts an output that was cut at an arbitrary byte: everything after
    /// the last line break is replaced by one `[redacted:cut-line]`.
    pub fn redact_cut(&self, input: &[u8]) -> Redacted {
        let whole_lines = memchr::memrchr(b'\n', input).map_or(0, |i| i + 1);
        // The output went on past the cap: what ends it may be cut too.
        let mut out = self.redact_lines(&input[..whole_lines], true);
        if whole_lines < input.len() {
            scan::push_marker(&mut out.text, Class::CutLine);
            out.counts.add(Class::CutLine);
        }
        out
    }
}

fn shared() -> &'static Redactor {
    static REDACTOR: OnceLock<Redactor> = OnceLock::new();
    REDACTOR.get_or_init(Redactor::new)
}

/// Takes every occurrence of each of `known` (values the caller knows are
/// secret, such as a skill's secret settings) out of `input`, longest
/// first, each as `[redacted:skill-secret]`, then redacts the rest as
/// [`redact`] (or [`redact_cut`] with `cut`) does.
pub fn redact_known(input: &[u8], known: &[String], cut: bool) -> Redacted {
    let mut known: Vec<&[u8]> = known
        .iter()
        .map(String::as_bytes)
        .filter(|k| !k.is_empty())
        .collect();
    known.sort_by_key(|k| std::cmp::Reverse(k.len()));
    let mut text = Vec::with_capacity(input.len());
    let mut taken = 0u32;
    let mut i = 0;
    'outer: while i < input.len() {
        for k in &known {
            if input[i..].starts_with(k) {
                scan::push_marker(&mut text, Class::SkillSecret);
                taken = taken.saturating_add(1);
                i += k.len();
                continue 'outer;
            }
        }
        text.push(input[i]);
        i += 1;
    }
    let mut out = if cut {
        redact_cut(&text)
    } else {
        redact(&text)
    };
    out.counts.add_n(Class::SkillSecret, taken);
    out
}

/// Redacts a complete output with the process-wide [`Redactor`].
pub fn redact(input: &[u8]) -> Redacted {
    shared().redact(input)
}

/// Redacts an output cut at an arbitrary byte; see [`Redactor::redact_cut`].
pub fn redact_cut(input: &[u8]) -> Redacted {
    shared().redact_cut(input)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_known_secret_is_taken_out_wherever_it_is_and_counted() {
        let out = redact_known(
            b"pw=hunter2-hunter2 and hunter2-hunter2hunter2-hunter2\n",
            &["hunter2-hunter2".into(), String::new()],
            false,
        );
        assert_eq!(
            String::from_utf8_lossy(&out.text),
            "pw=[redacted:skill-secret] and [redacted:skill-secret][redacted:skill-secret]\n"
        );
        assert_eq!(out.counts.get(Class::SkillSecret), 3);
    }

    #[test]
    fn the_longest_known_secret_is_taken_first() {
        let out = redact_known(
            b"abcdefgh-more",
            &["abcdefgh".into(), "abcdefgh-more".into()],
            false,
        );
        assert_eq!(
            String::from_utf8_lossy(&out.text),
            "[redacted:skill-secret]"
        );
    }
}
