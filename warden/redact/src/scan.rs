//! Two passes over the bytes. First a `memmem` search for `BEGIN` finds the
//! private-key blocks: they come first because they reach past their line,
//! and no other rule may swallow a block's BEGIN line into a value and so
//! hide the block. Then, between blocks, one Aho-Corasick automaton over
//! every literal that can start a secret (keywords, token prefixes, `://`),
//! run on a lower-cased copy of the input, and a `memchr` walk over colons
//! for Telegram tokens, which have no literal. Only at those candidates does
//! any rule look at the bytes around them, so the cost on ordinary output is
//! the vectorised searches. Rules see the bytes only up to the next block,
//! so nothing they find overlaps one.

use crate::Class;
use crate::assign::assignment_at;
use crate::class::Counts;
use crate::tokens::{Found, Prefix, telegram_at_colon, telegram_at_encoded_colon, token_at};
use crate::url::{UrlForm, url_password_at};
use aho_corasick::{AhoCorasick, AhoCorasickBuilder, Input, MatchKind};

#[derive(Clone, Copy, Debug)]
enum Trigger {
    Keyword,
    Token(Prefix),
    SchemeSeparator(UrlForm),
    /// `%3A`: a Telegram token's colon, percent-encoded.
    EncodedColon,
}

const TRIGGERS: &[(&str, Trigger)] = &[
    ("://", Trigger::SchemeSeparator(UrlForm::Plain)),
    (":\\/\\/", Trigger::SchemeSeparator(UrlForm::JsonEscaped)),
    (
        "%3a%2f%2f",
        Trigger::SchemeSeparator(UrlForm::PercentEncoded),
    ),
    ("%3a", Trigger::EncodedColon),
    (
        "hooks.slack.com/services/",
        Trigger::Token(Prefix::SlackWebhook),
    ),
    ("github_pat_", Trigger::Token(Prefix::GitHubFineGrained)),
    ("sk-", Trigger::Token(Prefix::SkDash)),
    ("sk_", Trigger::Token(Prefix::StripeKey)),
    ("rk_", Trigger::Token(Prefix::StripeKey)),
    ("whsec_", Trigger::Token(Prefix::StripeWebhook)),
    ("ghp_", Trigger::Token(Prefix::GitHubClassic)),
    ("gho_", Trigger::Token(Prefix::GitHubClassic)),
    ("ghu_", Trigger::Token(Prefix::GitHubClassic)),
    ("ghs_", Trigger::Token(Prefix::GitHubClassic)),
    ("ghr_", Trigger::Token(Prefix::GitHubClassic)),
    ("akia", Trigger::Token(Prefix::AwsAccessKeyId)),
    ("asia", Trigger::Token(Prefix::AwsAccessKeyId)),
    ("xox", Trigger::Token(Prefix::SlackXox)),
    ("xapp-", Trigger::Token(Prefix::SlackApp)),
    ("aiza", Trigger::Token(Prefix::GoogleApiKey)),
    ("gocspx-", Trigger::Token(Prefix::GoogleClientSecret)),
    ("ya29.", Trigger::Token(Prefix::GoogleAccessToken)),
    ("1//0", Trigger::Token(Prefix::GoogleRefreshToken)),
    ("eyj", Trigger::Token(Prefix::Jwt)),
    ("credential", Trigger::Keyword),
    ("password", Trigger::Keyword),
    ("passwd", Trigger::Keyword),
    ("secret", Trigger::Keyword),
    ("bearer", Trigger::Keyword),
    ("basic", Trigger::Keyword),
    ("token", Trigger::Keyword),
    ("auth", Trigger::Keyword),
    ("key", Trigger::Keyword),
    ("pwd", Trigger::Keyword),
];

pub(crate) struct Triggers {
    automaton: AhoCorasick,
}

impl Triggers {
    pub(crate) fn new() -> Triggers {
        let automaton = AhoCorasickBuilder::new()
            .match_kind(MatchKind::LeftmostFirst)
            .build(TRIGGERS.iter().map(|(literal, _)| literal))
            // A fixed, small set of literals: building cannot fail.
            .expect("the trigger literals build an automaton");
        Triggers { automaton }
    }
}

/// What the pass produced.
pub(crate) struct Output {
    pub text: Vec<u8>,
    pub counts: Counts,
}

/// One removal and the earliest byte its judgement read: a cut of the input
/// between the two would change the judgement (see `crate::stream`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Hit {
    pub found: Found,
    pub anchor: usize,
}

/// Everything one pass found, in order and not overlapping.
pub(crate) struct Scan {
    pub hits: Vec<Hit>,
    /// Certificates and public keys: kept, but a cut through one would
    /// show its lines without their armor.
    pub public: Vec<(usize, usize)>,
}

/// How far before its trigger a rule may read (a name, a scheme, a bot id):
/// the anchor is the trigger's line start, but never further back than this.
const LOOKBACK: usize = 256;

struct Recorder<'h> {
    hay: &'h [u8],
    hits: Vec<Hit>,
    /// The end of the last removal: rules read nothing before it.
    copied: usize,
}

impl Recorder<'_> {
    fn replace(&mut self, found: Found, trigger: usize) {
        // A secret overlapping one already removed: remove what is left of it.
        let start = found.start.max(self.copied);
        let end = found.end.max(start);
        let line_start = memchr::memrchr(b'\n', &self.hay[..trigger]).map_or(0, |i| i + 1);
        let anchor = line_start.max(trigger.saturating_sub(LOOKBACK)).min(start);
        self.hits.push(Hit {
            found: Found {
                start,
                end,
                ..found
            },
            anchor,
        });
        self.copied = end;
    }
}

/// Writes `hay[from..upto]` with every hit that ends by `upto` replaced by
/// its marker, and counts them. A hit that starts before `from` (in bytes
/// already written) is marked from `from` on.
pub(crate) fn write(
    hay: &[u8],
    hits: &[Hit],
    from: usize,
    upto: usize,
    out: &mut Vec<u8>,
    counts: &mut Counts,
) {
    let mut copied = from;
    for hit in hits.iter().take_while(|h| h.found.end <= upto) {
        if hit.found.end <= from {
            continue;
        }
        let start = hit.found.start.max(copied);
        out.extend_from_slice(&hay[copied..start]);
        push_marker(out, hit.found.class);
        counts.add(hit.found.class);
        copied = hit.found.end;
    }
    out.extend_from_slice(&hay[copied..upto]);
}

pub(crate) fn push_marker(out: &mut Vec<u8>, class: Class) {
    out.extend_from_slice(crate::bytes::MARKER_PREFIX);
    out.extend_from_slice(class.name().as_bytes());
    out.push(b']');
}

/// The input and its lower-cased copy (same length, same offsets), both cut
/// at the end of the current segment.
#[derive(Clone, Copy)]
struct View<'h> {
    hay: &'h [u8],
    lower: &'h [u8],
}

impl<'h> View<'h> {
    fn until(self, end: usize) -> View<'h> {
        View {
            hay: &self.hay[..end],
            lower: &self.lower[..end],
        }
    }
}

/// The Warden's output cap is 1 MiB; keep a few of those.
const KEEP_LOWER: usize = 8 << 20;

thread_local! {
    /// The lower-cased copy, kept per thread so that redacting many outputs
    /// does not map and fault in a fresh buffer each time.
    static LOWER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Redacts `hay` whole. `cut`: the input ends where a cap cut the output
/// (see `keys::key_regions`).
pub(crate) fn scan(triggers: &Triggers, hay: &[u8], cut: bool) -> Output {
    let found = find(triggers, hay, false, cut);
    let mut text = Vec::with_capacity(hay.len());
    let mut counts = Counts::default();
    write(hay, &found.hits, 0, hay.len(), &mut text, &mut counts);
    Output { text, counts }
}

/// Finds every removal in `hay`. `continues`: the input starts in the
/// middle of a key's lines; `cut`: it ends in them.
pub(crate) fn find(triggers: &Triggers, hay: &[u8], continues: bool, cut: bool) -> Scan {
    LOWER.with_borrow_mut(|lower| {
        lower.clear();
        lower.extend(hay.iter().map(u8::to_ascii_lowercase));
        let out = find_with(triggers, hay, lower, continues, cut);
        if lower.capacity() > KEEP_LOWER {
            // A one-off huge input does not pin its copy for the life of
            // the thread.
            *lower = Vec::new();
        }
        out
    })
}

fn find_with(triggers: &Triggers, hay: &[u8], lower: &[u8], continues: bool, cut: bool) -> Scan {
    let whole = View { hay, lower };
    let mut w = Recorder {
        hay,
        hits: Vec::new(),
        copied: 0,
    };
    let mut segment_start = 0;
    let keys = crate::keys::key_regions(hay, continues, cut);
    let mut kept = keys.kept.iter().peekable();
    for block in keys.removed {
        while let Some(&(start, end)) = kept.next_if(|k| k.0 < block.start) {
            if start >= segment_start {
                scan_segment(triggers, whole.until(start), segment_start, &mut w);
                segment_start = end.min(block.start);
            }
        }
        scan_segment(triggers, whole.until(block.start), segment_start, &mut w);
        w.replace(block, block.start);
        segment_start = block.end;
    }
    for &(start, end) in kept {
        if start >= segment_start {
            scan_segment(triggers, whole.until(start), segment_start, &mut w);
            segment_start = end;
        }
    }
    scan_segment(triggers, whole, segment_start, &mut w);
    Scan {
        hits: w.hits,
        public: keys.public,
    }
}

/// Removes tokens that sit in an assignment's name after its keyword
/// (`api_key-ghp_…=value`): the scan resumes after the value, so it would
/// never come back to them. `view` ends where the value starts.
fn tokens_between(triggers: &Triggers, view: View<'_>, from: usize, w: &mut Recorder<'_>) {
    let input = Input::new(view.lower).span(from..view.lower.len());
    for m in triggers.automaton.find_iter(input) {
        if let Trigger::Token(prefix) = TRIGGERS[m.pattern().as_usize()].1
            && m.start() >= w.copied
            && let Some(token) = token_at(view.hay, m.start(), prefix, w.copied)
        {
            w.replace(token, m.start());
        }
    }
}

/// Colons that may end a Telegram bot id: six digits before, a token byte
/// after. Cheap enough to run over every colon (clock times fail at the
/// third byte); the full rule runs on these few.
fn telegram_candidates(hay: &[u8], from: usize) -> Vec<usize> {
    let digit = |i: usize| hay[i].is_ascii_digit();
    memchr::memchr_iter(b':', &hay[from..])
        .map(|i| from + i)
        .filter(|&c| {
            c >= from + 6
                && digit(c - 3)
                && digit(c - 1)
                && digit(c - 2)
                && digit(c - 4)
                && digit(c - 5)
                && digit(c - 6)
                && hay
                    .get(c + 1)
                    .is_some_and(|&b| crate::bytes::is_token_byte(b))
        })
        .collect()
}

/// Runs the rules over `view[from..]`; the view ends where the next key block
/// starts (or is the whole input).
fn scan_segment(triggers: &Triggers, view: View<'_>, from: usize, w: &mut Recorder<'_>) {
    let hay = view.hay;
    let find_trigger = |from: usize| {
        triggers
            .automaton
            .find(Input::new(view.lower).span(from..hay.len()))
    };
    let colons = telegram_candidates(hay, from);
    let mut colon_index = 0;

    let mut at = from;
    let mut next_trigger = find_trigger(from);
    while at < hay.len() {
        if next_trigger.is_some_and(|m| m.start() < at) {
            next_trigger = find_trigger(at);
        }
        while colons.get(colon_index).is_some_and(|&c| c < at) {
            colon_index += 1;
        }
        let next_colon = colons.get(colon_index).copied();
        let colon_first = match (next_trigger, next_colon) {
            (None, None) => break,
            (Some(m), Some(c)) => c < m.start(),
            (None, Some(_)) => true,
            (Some(_), None) => false,
        };
        let (found, resume, trigger) = if colon_first {
            let c = next_colon.unwrap_or(at);
            (telegram_at_colon(hay, c, w.copied), c + 1, c)
        } else {
            let Some(m) = next_trigger else { break };
            let found = match TRIGGERS[m.pattern().as_usize()].1 {
                Trigger::Keyword => {
                    let found = assignment_at(hay, m.start(), m.end(), w.copied);
                    if let Some(value) = found {
                        tokens_between(triggers, view.until(value.start), m.end(), w);
                    }
                    found
                }
                Trigger::Token(prefix) => token_at(hay, m.start(), prefix, w.copied),
                Trigger::SchemeSeparator(form) => url_password_at(hay, m.start(), w.copied, form),
                Trigger::EncodedColon => telegram_at_encoded_colon(hay, m.start(), w.copied),
            };
            (found, m.end(), m.start())
        };
        match found {
            Some(found) if found.end > w.copied => {
                at = found.end;
                w.replace(found, trigger);
            }
            _ => at = resume,
        }
    }
}
