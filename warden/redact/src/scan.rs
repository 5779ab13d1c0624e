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
use crate::bytes::{MARKER_PREFIX, is_blank, is_name_byte, run_end};
use crate::class::Counts;
use crate::runs::Runs;
use crate::tokens::{Found, Prefix, telegram_at_colon, telegram_at_encoded_colon, token_at};
use crate::url::{UrlForm, url_password_at};
use aho_corasick::{AhoCorasick, AhoCorasickBuilder, Input, MatchKind};

#[derive(Clone, Copy, Debug)]
enum Trigger {
    Token(Prefix),
    SchemeSeparator(UrlForm),
}

/// Candidates found outside the automaton: a Telegram token's colon (no
/// literal at all), and the rare escaped separators, each found with
/// `memchr`/`memmem` on the byte that makes it rare (`%`, `\`), so that the
/// automaton keeps few enough literals for its fastest (slim Teddy) search.
#[derive(Clone, Copy, Debug)]
enum Rare {
    /// `123456:`
    TelegramColon,
    /// `%3A`: a Telegram token's colon, percent-encoded.
    EncodedColon,
    /// `:\/\/` or `%3A%2F%2F`.
    Scheme(UrlForm),
}

const TRIGGERS: &[(&str, Trigger)] = &[
    ("://", Trigger::SchemeSeparator(UrlForm::Plain)),
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
];

/// The keywords of a secret's name. They have an automaton of their own:
/// two small sets search about twice as fast as one large one (the packed
/// search keeps each set's fingerprints apart).
const KEYWORDS: &[&str] = &[
    "credential",
    "password",
    "passwd",
    "passphrase",
    "pass",
    "secret",
    "session",
    "bearer",
    "basic",
    "token",
    "auth",
    "key",
    "pwd",
    "sid",
];

pub(crate) struct Triggers {
    tokens: AhoCorasick,
    keywords: AhoCorasick,
    /// `----`, `:a`, `%3a`, `:\/\/`: see [`Rares`].
    rare: AhoCorasick,
}

impl Triggers {
    pub(crate) fn new() -> Triggers {
        let build = |literals: &mut dyn Iterator<Item = &str>| {
            AhoCorasickBuilder::new()
                .match_kind(MatchKind::LeftmostFirst)
                .build(literals)
                // A fixed, small set of literals: building cannot fail.
                .expect("the trigger literals build an automaton")
        };
        Triggers {
            tokens: build(&mut TRIGGERS.iter().map(|(literal, _)| *literal)),
            keywords: build(&mut KEYWORDS.iter().copied()),
            rare: build(&mut RARE.iter().copied()),
        }
    }
}

/// A running search of one automaton over a segment, restarted only where
/// a removal ended in the middle of a match (a trigger may start inside it).
struct Matches<'a> {
    automaton: &'a AhoCorasick,
    lower: &'a [u8],
    iter: aho_corasick::FindIter<'a, 'a>,
    next: Option<aho_corasick::Match>,
}

impl<'a> Matches<'a> {
    fn new(automaton: &'a AhoCorasick, lower: &'a [u8], from: usize) -> Matches<'a> {
        let mut iter = automaton.find_iter(Input::new(lower).span(from..lower.len()));
        let next = iter.next();
        Matches {
            automaton,
            lower,
            iter,
            next,
        }
    }

    /// The first match that starts at `at` or later.
    fn peek_from(&mut self, at: usize) -> Option<aho_corasick::Match> {
        while let Some(m) = self.next.filter(|m| m.start() < at) {
            if m.end() > at {
                *self = Matches::new(self.automaton, self.lower, at);
            } else {
                self.next = self.iter.next();
            }
        }
        self.next
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
    /// Token candidates since the last removal that their rule refused.
    refused: Vec<Candidate>,
    runs: Runs,
}

/// A token rule's candidate: where its prefix (or a Telegram token's
/// colon) is and which rule it starts. Every token rule reads forward over
/// one run of bytes and stops at the first byte outside it, and a marker's
/// `[` is outside every one: so what a second pass judges, where a removal
/// after the candidate left a marker, is exactly the candidate judged on
/// the input cut where that removal starts. A Telegram secret is base64url,
/// so it may end in `_` or `-` and have a key glued right after it.
#[derive(Clone, Copy, Debug)]
struct Candidate {
    at: usize,
    rule: TokenRule,
    /// Nothing before it is read: the end of the last removal, or the
    /// candidate's own start where a refused candidate before it would end
    /// as a token right there (see `glued_after_refused`).
    floor: usize,
}

#[derive(Clone, Copy, Debug)]
enum TokenRule {
    Prefix(Prefix),
    TelegramColon,
    TelegramEncodedColon,
}

impl Candidate {
    /// Where the token it would remove starts: its prefix, or a Telegram
    /// token's bot id before its colon.
    fn start(self, hay: &[u8]) -> usize {
        match self.rule {
            TokenRule::Prefix(_) => self.at,
            TokenRule::TelegramColon | TokenRule::TelegramEncodedColon => {
                let mut start = self.at;
                while start > self.floor && self.at - start < 12 && hay[start - 1].is_ascii_digit()
                {
                    start -= 1;
                }
                start
            }
        }
    }

    fn judge(self, hay: &[u8], runs: &mut Runs) -> Option<Found> {
        let floor = self.floor;
        match self.rule {
            TokenRule::Prefix(prefix) => token_at(hay, self.at, prefix, floor, runs),
            TokenRule::TelegramColon => telegram_at_colon(hay, self.at, floor, runs),
            TokenRule::TelegramEncodedColon => telegram_at_encoded_colon(hay, self.at, floor, runs),
        }
    }
}

/// Judges `refused` again on `hay`, cut where the removal after them
/// starts, from `floor` on, as a second pass over the output would, and
/// appends what it now removes to `out` in order: a key glued to the one
/// removed after it (`AIza…-sk-…`) made one run too long for its rule, and
/// the marker ends that run. They are judged from the last: one removed
/// this way cuts the run of those before it in turn. Each is judged once,
/// and reads no further than its rule's longest body.
fn judge_again(
    hay: &[u8],
    refused: &[Candidate],
    floor: usize,
    runs: &mut Runs,
    out: &mut Vec<(Found, usize)>,
) {
    let first = out.len();
    let mut limit = hay.len();
    for &candidate in refused.iter().rev() {
        if candidate.at < floor || candidate.at >= limit {
            continue;
        }
        let candidate = Candidate {
            floor: candidate.floor.max(floor),
            ..candidate
        };
        // A Telegram bot id may start in the removal before `floor`: what
        // is left of it goes.
        let found = candidate
            .judge(&hay[..limit], runs)
            .map(|found| Found {
                start: found.start.max(floor),
                ..found
            })
            .filter(|found| found.end > found.start);
        if let Some(found) = found {
            out.push((found, candidate.at));
            limit = found.start;
        }
    }
    out[first..].reverse();
}

impl Recorder<'_> {
    fn replace(&mut self, found: Found, trigger: usize) {
        // A secret overlapping one already removed: remove what is left of it.
        let start = found.start.max(self.copied);
        let mut anchor = self.anchor(trigger, start);
        if !self.refused.is_empty() {
            let refused = std::mem::take(&mut self.refused);
            let mut again = Vec::new();
            let hay = self.hay;
            judge_again(
                &hay[..start],
                &refused,
                self.copied,
                &mut self.runs,
                &mut again,
            );
            for (earlier, trigger) in again {
                let earlier_anchor = self.anchor(trigger, earlier.start);
                // Their removal depends on this one: a stream window must
                // not cut between them.
                anchor = anchor.min(earlier_anchor);
                self.hits.push(Hit {
                    found: earlier,
                    anchor: earlier_anchor,
                });
                self.copied = earlier.end;
            }
        }
        let end = found.end.max(start);
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

    /// The earliest byte a judgement at `trigger` may have read.
    fn anchor(&self, trigger: usize, start: usize) -> usize {
        // Only the last LOOKBACK bytes: a long line with many removals must
        // not be searched back to its start for each.
        let earliest = trigger.saturating_sub(LOOKBACK);
        let line_start = memchr::memrchr(b'\n', &self.hay[earliest..trigger])
            .map_or(earliest, |i| earliest + i + 1);
        line_start.min(start)
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
    // The exact length, so that the buffer is never grown (a grown 1 MiB
    // buffer is a fresh mapping to fault in).
    let len = found.hits.iter().fold(hay.len(), |len, h| {
        len - (h.found.end - h.found.start) + MARKER_PREFIX.len() + h.found.class.name().len() + 1
    });
    let mut text = Vec::with_capacity(len);
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
        refused: Vec::new(),
        runs: Runs::default(),
    };
    let rares = rares(triggers, hay, lower);
    let rare = &rares.candidates;
    let mut segment_start = 0;
    let keys = crate::keys::key_regions(hay, &rares.dashes, continues, cut);
    let mut kept = keys.kept.iter().peekable();
    let removed_starts: Vec<usize> = keys.removed.iter().map(|(b, _)| b.start).collect();
    for (block, anchor) in keys.removed {
        while let Some(&(start, end)) = kept.next_if(|k| k.0 < block.start) {
            if start >= segment_start {
                scan_segment(triggers, whole.until(start), rare, segment_start, &mut w);
                segment_start = end.min(block.start);
            }
        }
        scan_segment(
            triggers,
            whole.until(block.start),
            rare,
            segment_start,
            &mut w,
        );
        let before_block = w.hits.len();
        w.replace(block, anchor);
        segment_start = block.end;
        // The segment after the block ends where the next block starts.
        let next_block = removed_starts
            .get(removed_starts.partition_point(|&s| s <= block.start))
            .copied()
            .unwrap_or(hay.len());
        let next_kept = kept.peek().map_or(hay.len(), |k| k.0.max(block.end));
        let stop = next_block.min(next_kept).max(block.end);
        if let Some(end) = value_past_block(
            triggers,
            whole.until(stop),
            rare,
            block,
            before_block,
            &mut w,
        ) {
            segment_start = end;
        }
    }
    for &(start, end) in kept {
        if start >= segment_start {
            scan_segment(triggers, whole.until(start), rare, segment_start, &mut w);
            segment_start = end;
        }
    }
    scan_segment(triggers, whole, rare, segment_start, &mut w);
    Scan {
        hits: w.hits,
        public: keys.public,
    }
}

/// The start of the line above the line at `line_start` that is neither
/// blank nor a comment, if it starts at or after `earliest`.
fn key_line_above(hay: &[u8], mut line_start: usize, earliest: usize) -> Option<usize> {
    while line_start > earliest {
        let end = line_start - 1;
        let start =
            memchr::memrchr(b'\n', &hay[earliest..end]).map_or(earliest, |i| earliest + i + 1);
        if start == earliest && earliest > 0 && hay[earliest - 1] != b'\n' {
            return None;
        }
        let text = &hay[start..end];
        let indent = text
            .iter()
            .take_while(|&&b| is_blank(b) || b == b'\r')
            .count();
        match text.get(indent) {
            None | Some(b'#') => line_start = start,
            Some(_) => return Some(start),
        }
    }
    None
}

/// Whether `found` lies in one comment line, after its `#`.
fn within_a_comment(hay: &[u8], found: Found) -> bool {
    let line_start = memchr::memrchr(b'\n', &hay[..found.start]).map_or(0, |i| i + 1);
    let first = run_end(hay, line_start, is_blank);
    first < found.start
        && hay[first] == b'#'
        && memchr::memchr(b'\n', &hay[found.start..found.end]).is_none()
}

/// Where the removal among `hits` (in order) that ends at `end` starts.
fn removal_ending_at(hits: &[Hit], end: usize) -> Option<usize> {
    let i = hits.partition_point(|h| h.found.end < end);
    hits.get(i)
        .filter(|h| h.found.end == end)
        .map(|h| h.found.start)
}

/// A private key's block that starts in the comment on a YAML key's line
/// (`password: # -----BEGIN PRIVATE KEY-----` then the value on the next
/// line), or on a comment line between the key's line and its value
/// (`password:`, `# -----END RSA PRIVATE KEY-----`, `  hunter2`): the
/// segment before the block ends before the value, so the key's rule did
/// not see it; a second pass, where the block is a marker, reads past it
/// (a comment) and then the value. Judge the key that way now: the bytes
/// from the block's end to the value go through every rule first, then the
/// value. `view` ends where the segment after the
/// block does; `hits_before` is how many hits there were before the block's.
/// Returns where the value's removal ends.
fn value_past_block(
    triggers: &Triggers,
    view: View<'_>,
    rare: &[(usize, Rare)],
    block: Found,
    hits_before: usize,
    w: &mut Recorder<'_>,
) -> Option<usize> {
    let hay = view.hay;
    // Within LOOKBACK bytes only: armor lines glued on one long line must
    // not each search back to its start.
    let earliest = block.start.saturating_sub(LOOKBACK);
    let line_start = match memchr::memrchr(b'\n', &hay[earliest..block.start]) {
        Some(i) => earliest + i + 1,
        None if earliest == 0 => 0,
        None => return None,
    };
    let hash = line_start + memchr::memchr(b'#', &hay[line_start..block.start])?;
    // A comment line of its own: the key is on a line above, with only
    // blank and comment lines between (their bytes within LOOKBACK too).
    let own_line = !hay[line_start..hash].iter().all(|&b| is_blank(b));
    let (line_start, hash) = if own_line {
        (line_start, hash)
    } else {
        let key_line = key_line_above(hay, line_start, earliest)?;
        let key_line_end = key_line + memchr::memchr(b'\n', &hay[key_line..line_start])?;
        (key_line, key_line_end)
    };
    // The key at the line's start, its name up to the colon.
    let key = run_end(hay, line_start, |b| matches!(b, b' ' | b'\t' | b'-' | b'?'));
    let name = if matches!(hay.get(key), Some(b'"' | b'\'')) {
        key + 1
    } else {
        key
    };
    let name_end = run_end(&hay[..hash], name, is_name_byte);
    let before = &w.hits[..hits_before];
    let after_name = || before.iter().rev().take_while(|h| h.found.end > name_end);
    if own_line {
        // Nothing removed from the name's end to the comment: a second pass
        // reads the colon and the comment's start as they were.
        if after_name().any(|h| h.found.start <= hash) {
            return None;
        }
    } else {
        // Removed since the name only within a comment, one line each (in
        // the key line's comment, or on comment lines): a second pass reads
        // those lines as comments still.
        let comment = (name_end..hash).find(|&i| i > 0 && hay[i] == b'#' && is_blank(hay[i - 1]));
        if after_name().any(|h| {
            memchr::memchr(b'\n', &hay[h.found.start..h.found.end]).is_some()
                || if h.found.start <= hash {
                    comment.is_none_or(|c| h.found.start <= c)
                } else {
                    !within_a_comment(hay, h.found)
                }
        }) {
            return None;
        }
    }
    // A token removed inside the name leaves its rest after the marker to
    // a second pass: the first keyword there names the key (see
    // `yaml::name_start_past_markers`).
    let floor = before
        .iter()
        .rev()
        .find(|h| h.found.end <= name_end)
        .map_or(0, |h| h.found.end);
    let input = Input::new(view.lower).span(name.max(floor)..name_end.max(floor));
    let m = triggers.keywords.find(input)?;
    let token_inside = |start: usize, end: usize| first_token(triggers, view, start, end);
    let hole = Some((block.start, block.end));
    let removed = |end: usize| removal_ending_at(before, end);
    let found = assignment_at(
        hay,
        m.start(),
        m.end(),
        floor,
        &token_inside,
        hole,
        &removed,
    )
    .filter(|found| found.start >= block.end)?;
    // As `between_name_and_value`: the rest of the line after the block and
    // the lines before the value, with every rule.
    scan_span(
        triggers,
        view.until(found.start),
        rare,
        block.end,
        block.end,
        w,
    );
    w.replace(found, m.start());
    Some(w.copied)
}

/// Judges the bytes between an assignment's keyword and its value with
/// every rule, as a second pass does: the scan resumes after the value, so
/// it would never come back to them, and a second pass, whose keyword meets
/// the value's marker, reads them all. Most of the time they are the rest
/// of the name and the operator, where only a token can hide
/// (`api_key-ghp_…=value`); but a YAML key's value on the next lines leaves
/// the rest of the key's line between them, a comment that may hold
/// anything (`key: # pass x1234567890y` then `  value`). The view ends where
/// the value starts, as the value's marker ends every rule's reach on a
/// second pass; the name's other keywords are passed over, as on a second
/// pass they name the same name and meet the same marker.
fn between_name_and_value(
    triggers: &Triggers,
    view: View<'_>,
    rare: &[(usize, Rare)],
    keyword_end: usize,
    value_start: usize,
    w: &mut Recorder<'_>,
) {
    if value_start <= keyword_end {
        return;
    }
    let view = view.until(value_start);
    let name_end = run_end(view.hay, keyword_end, is_name_byte);
    scan_span(triggers, view, rare, keyword_end, name_end, w);
}

/// Removes tokens that sit in a URL's user name before its password
/// (`https://ghp_…:x-oauth-basic@github.com`): the scan resumes after the
/// password, so it would never come back to them. `view` ends where the
/// password starts.
fn tokens_between(triggers: &Triggers, view: View<'_>, from: usize, w: &mut Recorder<'_>) {
    let input = Input::new(view.lower).span(from..view.lower.len());
    for m in triggers.tokens.find_iter(input) {
        let Trigger::Token(prefix) = TRIGGERS[m.pattern().as_usize()].1 else {
            continue;
        };
        if m.start() < w.copied {
            continue;
        }
        let candidate = Candidate {
            at: m.start(),
            rule: TokenRule::Prefix(prefix),
            floor: w.copied,
        };
        // Keys glued together are judged as in the scan
        // (`https://AIza…-sk-…:x@h`, `https://AKIA…ghp_…:x@h`).
        token_candidate(triggers, view, candidate, w);
    }
}

/// Judges a token rule's candidate and removes what it finds, with what is
/// left of a token that started inside it (`tokens_inside`); refused, it is
/// judged again as glued to the refused candidate before it
/// (`glued_after_refused`), and else kept among the refused, to be judged
/// again at the next removal. Returns whether something was removed (the
/// scan resumes at `w.copied` then).
fn token_candidate(
    triggers: &Triggers,
    view: View<'_>,
    candidate: Candidate,
    w: &mut Recorder<'_>,
) -> bool {
    let hay = view.hay;
    let past = |found: &Found, w: &Recorder<'_>| found.end > w.copied;
    let mut candidate = candidate;
    let mut found = candidate
        .judge(hay, &mut w.runs)
        .filter(|found| past(found, w));
    if found.is_none() {
        let glued = glued_after_refused(hay, w.refused.last().copied(), candidate, &mut w.runs);
        if glued.floor > candidate.floor {
            found = glued.judge(hay, &mut w.runs).filter(|found| past(found, w));
        }
        candidate = glued;
    }
    match found {
        Some(found) => {
            w.replace(found, candidate.at);
            tokens_inside(triggers, view, found.start, w);
            true
        }
        None => {
            w.refused.push(candidate);
            false
        }
    }
}

/// Where the first token that its own rule removes starts in
/// `view[start..end]`.
/// `view[start..end]`, as the scan would find it: with the refused
/// candidates before it that it makes tokens (`AIza…-sk-…`), and keys glued
/// together (`AKIA…EXAMPLEAIza…`).
fn first_token(triggers: &Triggers, view: View<'_>, start: usize, end: usize) -> Option<usize> {
    let input = Input::new(view.lower).span(start..end.min(view.lower.len()));
    let mut runs = Runs::default();
    let mut refused: Vec<Candidate> = Vec::new();
    for m in triggers.tokens.find_iter(input) {
        let Trigger::Token(prefix) = TRIGGERS[m.pattern().as_usize()].1 else {
            continue;
        };
        let mut candidate = Candidate {
            at: m.start(),
            rule: TokenRule::Prefix(prefix),
            floor: start,
        };
        let mut found = candidate.judge(view.hay, &mut runs);
        if found.is_none() {
            let glued =
                glued_after_refused(view.hay, refused.last().copied(), candidate, &mut runs);
            if glued.floor > candidate.floor {
                found = glued.judge(view.hay, &mut runs);
            }
            candidate = glued;
        }
        let Some(token) = found else {
            refused.push(candidate);
            continue;
        };
        let mut again = Vec::new();
        judge_again(
            &view.hay[..token.start],
            &refused,
            start,
            &mut runs,
            &mut again,
        );
        let first = again
            .first()
            .map_or(token.start, |(earlier, _)| earlier.start);
        return (first < end).then_some(first);
    }
    None
}

/// Literals that are rare in output, found in one search of their own
/// (four literals: the fastest packed search) so that the two main
/// automata stay small: the dashes of armor lines, and the separators of
/// the rare candidates below.
const RARE: &[&str] = &["----", ":a", "%3a", ":\\/\\/"];

/// What the rare search found in a whole input, in order.
pub(crate) struct Rares {
    /// Where runs of four dashes start (armor lines have one).
    pub dashes: Vec<usize>,
    /// Colons that may end a Telegram bot id — six digits before, and the
    /// secret's first byte after: `A`, as in every token Telegram issues
    /// (its secret is base64url of bytes that start with a zero; secret
    /// scanners such as gitleaks anchor on it too), found as `:a` in the
    /// lower-cased copy instead of by a walk over every colon of the output;
    /// percent-encoded colons; JSON-escaped and percent-encoded schemes.
    candidates: Vec<(usize, Rare)>,
}

fn rares(triggers: &Triggers, hay: &[u8], lower: &[u8]) -> Rares {
    let digit = |i: usize| hay[i].is_ascii_digit();
    let mut out = Rares {
        dashes: Vec::new(),
        candidates: Vec::new(),
    };
    for m in triggers.rare.find_iter(lower) {
        let at = m.start();
        match m.pattern().as_usize() {
            0 => out.dashes.push(at),
            1 => {
                if at >= 6 && (1..=6).all(|k| digit(at - k)) {
                    out.candidates.push((at, Rare::TelegramColon));
                }
            }
            2 => {
                let kind = if lower[at..].starts_with(b"%3a%2f%2f") {
                    Rare::Scheme(UrlForm::PercentEncoded)
                } else {
                    Rare::EncodedColon
                };
                out.candidates.push((at, kind));
            }
            _ => out
                .candidates
                .push((at, Rare::Scheme(UrlForm::JsonEscaped))),
        }
    }
    out
}

/// Runs the rules over `view[from..]`; the view ends where the next key block
/// starts (or is the whole input).
fn scan_segment(
    triggers: &Triggers,
    view: View<'_>,
    rare: &[(usize, Rare)],
    from: usize,
    w: &mut Recorder<'_>,
) {
    // Candidates before this segment were judged on bytes up to its start,
    // as a second pass judges them: a kept block is in both.
    w.refused.clear();
    scan_span(triggers, view, rare, from, from, w);
}

/// Runs the rules over `view[from..]`, passing over the keywords that start
/// before `keywords_from` (see `between_name_and_value`).
fn scan_span(
    triggers: &Triggers,
    view: View<'_>,
    all_rare: &[(usize, Rare)],
    from: usize,
    keywords_from: usize,
    w: &mut Recorder<'_>,
) {
    let hay = view.hay;
    let mut tokens = Matches::new(&triggers.tokens, view.lower, from);
    let mut keywords = Matches::new(&triggers.keywords, view.lower, keywords_from);
    let first = all_rare.partition_point(|&(c, _)| c < from);
    let end = all_rare.partition_point(|&(c, _)| c < hay.len());
    let rare = &all_rare[first..end.max(first)];
    let mut rare_index = 0;

    let mut at = from;
    while at < hay.len() {
        while rare.get(rare_index).is_some_and(|&(c, _)| c < at) {
            rare_index += 1;
        }
        // The leftmost candidate of the three; on a tie a token prefix
        // before a keyword, as one automaton listing them first would.
        let token = tokens.peek_from(at);
        let keyword = keywords.peek_from(at.max(keywords_from));
        let next_rare = rare.get(rare_index).copied();
        let starts = [
            token.map(|m| m.start()),
            keyword.map(|m| m.start()),
            next_rare.map(|(c, _)| c),
        ];
        let Some(first) = starts.iter().flatten().min().copied() else {
            break;
        };
        // A token rule's candidate is judged and removed in one step (with
        // keys glued to it); the others return what they found.
        let candidate_at = |at: usize, rule: TokenRule, w: &Recorder<'_>| Candidate {
            at,
            rule,
            floor: w.copied,
        };
        let (found, resume, trigger) = if let Some(m) = token.filter(|m| m.start() == first) {
            match TRIGGERS[m.pattern().as_usize()].1 {
                Trigger::Token(prefix) => {
                    let candidate = candidate_at(m.start(), TokenRule::Prefix(prefix), w);
                    at = if token_candidate(triggers, view, candidate, w) {
                        w.copied
                    } else {
                        m.end()
                    };
                    continue;
                }
                Trigger::SchemeSeparator(form) => {
                    let found = url_password_at(hay, m.start(), w.copied, form);
                    if let Some(password) = found {
                        // A token as the URL's user name
                        // (`https://ghp_…:x-oauth-basic@github.com`).
                        tokens_between(triggers, view.until(password.start), m.end(), w);
                    }
                    (found, m.end(), m.start())
                }
            }
        } else if let Some(m) = keyword.filter(|m| m.start() == first) {
            let floor = w.copied;
            let token_inside = |start: usize, end: usize| first_token(triggers, view, start, end);
            let hits = &w.hits;
            let removed = |end: usize| removal_ending_at(hits, end);
            let found = assignment_at(
                hay,
                m.start(),
                m.end(),
                floor,
                &token_inside,
                None,
                &removed,
            );
            if let Some(value) = found {
                between_name_and_value(triggers, view, all_rare, m.end(), value.start, w);
            }
            (found, m.end(), m.start())
        } else {
            let Some((c, kind)) = next_rare else { break };
            let telegram = match kind {
                Rare::TelegramColon => Some(TokenRule::TelegramColon),
                Rare::EncodedColon => Some(TokenRule::TelegramEncodedColon),
                Rare::Scheme(_) => None,
            };
            if let Some(rule) = telegram {
                let candidate = candidate_at(c, rule, w);
                at = if token_candidate(triggers, view, candidate, w) {
                    w.copied
                } else {
                    c + 1
                };
                continue;
            }
            let Rare::Scheme(form) = kind else { break };
            let found = url_password_at(hay, c, w.copied, form);
            if let Some(password) = found {
                tokens_between(triggers, view.until(password.start), c + 1, w);
            }
            (found, c + 1, c)
        };
        match found {
            Some(found) if found.end > w.copied => {
                w.replace(found, trigger);
                at = w.copied;
            }
            _ => at = resume,
        }
    }
}

/// A candidate refused because a letter or digit is glued before it, right
/// where the refused candidate before it would end as a token
/// (`AKIA…EXAMPLEAIza…`, `AIza…sk-proj-…`): a key glued to a key with
/// nothing between. It is judged again as if that one were removed (its
/// floor moves to its own start), and so is the next one glued after it;
/// when one is removed, `replace` judges those before it again, and the
/// chain goes. Each check judges one candidate, so a line of keys glued
/// together costs no more than its length.
fn glued_after_refused(
    hay: &[u8],
    before: Option<Candidate>,
    candidate: Candidate,
    runs: &mut Runs,
) -> Candidate {
    let start = candidate.start(hay);
    let Some(before) = before else {
        return candidate;
    };
    let floor = candidate.floor;
    if start <= floor || before.at >= start || !hay[start - 1].is_ascii_alphanumeric() {
        return candidate;
    }
    match before.judge(&hay[..start], runs) {
        Some(earlier) if earlier.end == start && earlier.start >= floor => Candidate {
            floor: start,
            ..candidate
        },
        _ => candidate,
    }
}

/// Tokens that start inside the token just removed (from `start` to where
/// the removal ended) and go on past it: the removed key's run took their
/// prefix or header in (`ghp_…sk-proj-…`, `sk-…-eyJhbGci….eyJ…`,
/// `sk-…-1//0…`). What is left of them goes too; a second pass would see
/// only its bytes after the marker, matching nothing.
fn tokens_inside(triggers: &Triggers, view: View<'_>, start: usize, w: &mut Recorder<'_>) {
    // A trigger may start inside the removal and end after it.
    const LONGEST_TRIGGER: usize = 25;
    let mut from = start + 1;
    while from < w.copied {
        let end = (w.copied + LONGEST_TRIGGER).min(view.lower.len());
        let input = Input::new(view.lower).span(from..end);
        let Some(m) = triggers.tokens.find(input).filter(|m| m.start() < w.copied) else {
            return;
        };
        from = m.start() + 1;
        let Trigger::Token(prefix) = TRIGGERS[m.pattern().as_usize()].1 else {
            continue;
        };
        let candidate = Candidate {
            at: m.start(),
            rule: TokenRule::Prefix(prefix),
            floor: m.start(),
        };
        if let Some(found) = candidate.judge(view.hay, &mut w.runs)
            && found.end > w.copied
        {
            w.replace(found, m.start());
        }
    }
}
