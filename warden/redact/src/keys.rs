//! Private-key material, found by its shape from either end.
//!
//! A key rarely reaches the redactor whole: `journalctl -n 10` and
//! `docker logs --tail 10` show its last lines, a logger prefixes every line,
//! a byte cap cuts it. So a block is not "BEGIN through END" but its body
//! lines, walked line by line:
//!
//! - forwards from a `BEGIN` line: armor headers (`Proc-Type:`, `DEK-Info:`,
//!   `Version:` …) and the blank line after them (or alone after the armor
//!   line, as `gpg --armor` writes a block without headers), base64 lines of
//!   the block's width, one shorter last line, a PGP checksum (`=AbCd`), and
//!   the `END` line when it is there — an `END` line of the other kind (a
//!   certificate's after a key's lines, a key's after a certificate's) is
//!   another block's, and the walk ends before it;
//! - backwards from an `END` line whose `BEGIN` is not in the output, the
//!   same lines in reverse;
//! - and a run of two or more full-width base64 lines with neither (a key's
//!   middle).
//!
//! Each walk stops at the first line that cannot belong to a body (one
//! interleaved line of another writer is passed over when the body goes on
//! after it, and kept), so a cut key takes nothing with it but its own
//! lines. A line's body is its last field, so a logger's prefix does not
//! hide it. A key inside a JSON string runs from its BEGIN line to its END
//! line or the string's end (escapes such as PHP's `\/` break its lines'
//! width), and a tail of one back over its escaped lines. Blocks whose own
//! armor says they are a certificate or a public key are walked the same
//! way and kept; their lines are never taken for a key's middle. Past an
//! interleaved line, though, nothing tells a certificate's lines from a
//! key's: a public block keeps them only between its own armor lines.

use crate::Class;
use crate::bytes::MARKER_PREFIX;
use crate::tokens::Found;
use memchr::memmem;

/// Base64 line widths of armored keys: PEM and PGP use 64, OpenSSH 70,
/// RFC 4716 at most 72, MIME 76. A body line narrower than this is a last
/// line; wider is not a body line.
const MIN_FULL: usize = 40;
const MAX_FULL: usize = 80;
/// A run of unarmored lines is taken for a key's middle only at the widths
/// key formats use, which ordinary output does not wrap at.
const MIN_RUN_WIDTH: usize = 60;
const MAX_RUN_WIDTH: usize = 76;
const LABEL_CAP: usize = 96;

/// Armor header names (RFC 1421, RFC 4880) that follow a BEGIN line.
const HEADERS: &[&[u8]] = &[
    b"Proc-Type",
    b"DEK-Info",
    b"Version",
    b"Comment",
    b"Hash",
    b"Charset",
    b"MessageID",
    b"Subject",
];

/// `Name: value` with an armor header's name, after any prefix.
fn is_header(text: &[u8]) -> bool {
    memchr::memchr_iter(b':', text).any(|colon| {
        text.get(colon + 1) == Some(&b' ')
            && HEADERS.iter().any(|h| {
                colon >= h.len()
                    && &text[colon - h.len()..colon] == *h
                    && (colon == h.len() || is_blank(text[colon - h.len() - 1]))
            })
    })
}

/// How lines are separated: real line breaks, or `\n` escapes inside a
/// JSON string (a service account's `"private_key"`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Sep {
    Newline,
    Escaped,
}

/// A line's content, without its separator.
#[derive(Clone, Copy, Debug)]
struct Line {
    start: usize,
    end: usize,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    /// A trailing base64 field of this length; `padded` when it ends in `=`.
    Field {
        start: usize,
        len: usize,
        padded: bool,
    },
    Checksum,
    Header,
    Blank,
    /// A line with a marker in it: another rule judged part of it, so it is
    /// never a key's line. A private key's walk stops at it (a second pass
    /// must judge as the first did, which saw the line whole); a public
    /// block's walk passes over it, since the first pass may have walked
    /// that line whole, and a public block only ever keeps lines.
    Marker,
    Other,
}

fn is_b64(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'+' || b == b'/'
}

fn is_blank(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// What a line is, judged by its last field.
fn kind(hay: &[u8], line: Line) -> Kind {
    if memchr::memchr_iter(b'[', &hay[line.start..line.end])
        .any(|i| hay[line.start + i..].starts_with(MARKER_PREFIX))
    {
        return Kind::Marker;
    }
    let mut end = line.end;
    while end > line.start && is_blank(hay[end - 1]) {
        end -= 1;
    }
    // Empty, or a logger's prefix with an empty message (`app[812]: `).
    if end == line.start || (end < line.end && hay[end - 1] == b':') {
        return Kind::Blank;
    }
    if is_header(&hay[line.start..end]) {
        return Kind::Header;
    }
    let mut body_end = end;
    let mut pads = 0;
    while body_end > line.start && hay[body_end - 1] == b'=' && pads < 3 {
        body_end -= 1;
        pads += 1;
    }
    let mut start = body_end;
    while start > line.start && is_b64(hay[start - 1]) {
        start -= 1;
    }
    // `=AbCd`: the checksum line of a PGP block.
    if pads == 0
        && body_end - start == 4
        && start > line.start
        && hay[start - 1] == b'='
        && (start - 1 == line.start || is_blank(hay[start - 2]))
    {
        return Kind::Checksum;
    }
    let bounded = start == line.start || matches!(hay[start - 1], b' ' | b'\t' | b'"');
    // A full line of a key's base64 is never all hex digits: that is a
    // digest or an id, one a line.
    let hex = end - start >= MIN_FULL && hay[start..end].iter().all(u8::is_ascii_hexdigit);
    // A last line may be padding alone (`==`, a body wrapped at 70).
    if (start < body_end || pads > 0) && bounded && pads <= 2 && !hex {
        return Kind::Field {
            start,
            len: end - start,
            padded: pads > 0,
        };
    }
    Kind::Other
}

/// `kind`, where a body field must start `prefix` bytes into its line: the
/// lines of one block carry one logger's prefix, of one length.
fn kind_with_prefix(hay: &[u8], line: Line, prefix: usize) -> Kind {
    match kind(hay, line) {
        Kind::Field { start, .. } if start - line.start != prefix => Kind::Other,
        k => k,
    }
}

/// The next line after the separator that ends `line`, if any.
fn next_line(hay: &[u8], line: Line, sep: Sep) -> Option<Line> {
    let from = match sep {
        Sep::Newline => {
            let nl = memchr::memchr(b'\n', &hay[line.end..])? + line.end;
            nl + 1
        }
        Sep::Escaped => {
            if !hay[line.end..].starts_with(b"\\n") {
                return None;
            }
            line.end + 2
        }
    };
    Some(line_from(hay, from, sep))
}

/// The line that starts at `from`.
fn line_from(hay: &[u8], from: usize, sep: Sep) -> Line {
    let end = match sep {
        Sep::Newline => {
            let nl = memchr::memchr(b'\n', &hay[from..]).map_or(hay.len(), |i| from + i);
            if nl > from && hay[nl - 1] == b'\r' {
                nl - 1
            } else {
                nl
            }
        }
        Sep::Escaped => escaped_line_end(hay, from),
    };
    Line { start: from, end }
}

/// Inside a JSON string a line ends at the next `\n` (or `\r\n`) escape, the
/// string's closing quote or a real line break.
fn escaped_line_end(hay: &[u8], from: usize) -> usize {
    let mut i = from;
    while i < hay.len() {
        match hay[i] {
            b'"' | b'\n' | b'\r' => return i,
            b'\\' => match hay.get(i + 1) {
                Some(b'n') => return i,
                Some(b'r') if hay.get(i + 2..i + 4) == Some(b"\\n") => return i,
                _ => i += 2,
            },
            _ => i += 1,
        }
    }
    hay.len()
}

/// The line before the one that starts at `start`, if any.
fn prev_line(hay: &[u8], start: usize, sep: Sep) -> Option<Line> {
    match sep {
        Sep::Newline => {
            if start == 0 || hay[start - 1] != b'\n' {
                return None;
            }
            let nl = start - 1;
            let end = if nl > 0 && hay[nl - 1] == b'\r' {
                nl - 1
            } else {
                nl
            };
            let begin = memchr::memrchr(b'\n', &hay[..nl]).map_or(0, |i| i + 1);
            Some(Line { start: begin, end })
        }
        Sep::Escaped => {
            if start < 2 || &hay[start - 2..start] != b"\\n" {
                return None;
            }
            let mut end = start - 2;
            if end >= 2 && &hay[end - 2..end] == b"\\r" {
                end -= 2;
            }
            let mut begin = end;
            while begin > 0 {
                let b = hay[begin - 1];
                if b == b'"' || b == b'\n' || b == b'\r' {
                    break;
                }
                if begin >= 2 && b == b'n' && hay[begin - 2] == b'\\' {
                    break;
                }
                begin -= 1;
            }
            Some(Line { start: begin, end })
        }
    }
}

/// An armor line: `-----BEGIN LABEL-----`, `-----END LABEL-----`, or the
/// RFC 4716 `---- BEGIN SSH2 LABEL ----`.
#[derive(Clone, Copy, Debug)]
struct Armor {
    begin: bool,
    private: bool,
    /// The first dash.
    start: usize,
    /// After the closing dashes, or the end of the line when it was cut.
    end: usize,
    /// Where its label (`CERTIFICATE`) starts and ends.
    label: (usize, usize),
}

/// Whether two armor lines name the same kind of block.
fn same_label(hay: &[u8], a: (usize, usize), b: (usize, usize)) -> bool {
    hay[a.0..a.1] == hay[b.0..b.1]
}

/// Armor labels are upper-case words (`RSA PRIVATE KEY`, `PGP PRIVATE KEY
/// BLOCK`); anything else between the dashes is not an armor line.
fn is_label(label: &[u8]) -> bool {
    !label.is_empty()
        && label
            .iter()
            .all(|&b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b' ')
}

/// The armor line whose word (`BEGIN` or `END`) starts at `word`.
fn armor_at(hay: &[u8], word: usize, begin: bool) -> Option<Armor> {
    let word_len = if begin { 5 } else { 3 };
    let after_word = word + word_len;
    if hay.get(after_word) != Some(&b' ') {
        return None;
    }
    let (start, closing, label_start) = if word >= 5 && &hay[word - 5..word] == b"-----" {
        (word - 5, b"-----".as_slice(), after_word + 1)
    } else if word >= 5
        && &hay[word - 5..word] == b"---- "
        && hay[after_word + 1..].starts_with(b"SSH2 ")
    {
        (word - 5, b" ----".as_slice(), after_word + 6)
    } else {
        return None;
    };
    let limit = label_start.saturating_add(LABEL_CAP).min(hay.len());
    let window = &hay[label_start..limit];
    let line = memchr::memchr3(b'\n', b'\r', b'\\', window).unwrap_or(window.len());
    let window = &window[..line];
    let (label_end, end) = match memmem::find(window, closing) {
        Some(i) => (label_start + i, label_start + i + closing.len()),
        // A BEGIN line cut inside its label still opens a block.
        None if begin && label_start + line == hay.len() => (hay.len(), hay.len()),
        None => return None,
    };
    let label = &hay[label_start..label_end];
    // A label cut by the end of the input may be empty.
    let cut_empty = label_end == hay.len() && label.is_empty();
    if !(is_label(label) || cut_empty) {
        return None;
    }
    Some(Armor {
        begin,
        private: memmem::find(label, b"PRIVATE").is_some(),
        start,
        end,
        label: (label_start, label_end),
    })
}

/// How lines around an armor line are separated: by `\n` escapes when the
/// armor sits in a JSON string, else by line breaks.
fn sep_after(hay: &[u8], end: usize) -> Sep {
    if hay[end..].starts_with(b"\\n") || hay[end..].starts_with(b"\\r\\n") {
        Sep::Escaped
    } else {
        Sep::Newline
    }
}

fn sep_before(hay: &[u8], start: usize) -> Sep {
    if start >= 2 && &hay[start - 2..start] == b"\\n" {
        Sep::Escaped
    } else {
        Sep::Newline
    }
}

/// The END armor line `line` holds, if it holds one.
fn end_armor_in(hay: &[u8], line: Line) -> Option<Armor> {
    let text = &hay[line.start..line.end];
    let at = memmem::find(text, b"END ")? + line.start;
    armor_at(&hay[..line.end], at, false)
}

/// A line a walk may pass over as another writer's: one that holds no
/// armor. An armor line kept inside a walk would start a walk of its own on
/// a second pass, once the lines around it are markers.
fn passable(hay: &[u8], line: Line) -> bool {
    let text = &hay[line.start..line.end];
    // A line with a marker is judged as the first pass saw it, whole: the
    // armor line it replaced was not passable, so neither is the marker
    // (else a second pass would join a run the first kept apart).
    memmem::find(text, b"----").is_none() && memmem::find(text, MARKER_PREFIX).is_none()
}

fn full_width(len: usize) -> bool {
    (MIN_FULL..=MAX_FULL).contains(&len)
}

/// The line of another writer a walk passed over: it is not the key's and
/// stays. `before` is where the body before it ends, `after` where the body
/// after it starts (its first field).
#[derive(Clone, Copy, Debug)]
struct Gap {
    before: usize,
    after: usize,
}

/// A block whose BEGIN line sits in a JSON string (its line breaks written
/// `\n`, or `\\n` when that JSON is itself a string in JSON, as
/// `kubectl -o json` prints a last-applied annotation and Docker's
/// json-file log a JSON log line) runs to its END line or the end of the
/// string, whichever comes first: line by line it cannot be read, because
/// PHP's `json_encode` writes each `/` of the base64 as `\/` and the lines
/// lose their width. The string ends at a quote (escaped or not: base64 and
/// armor hold none) or a real line break. None when the BEGIN line is not
/// followed by an escaped line break. An END line of the other kind
/// (`private` or not) is another block's: a private block ends before it, a
/// public one at its own BEGIN line, so that the END line's block is walked
/// back from it (a key's lines are never kept as a certificate's).
fn escaped_block_end(hay: &[u8], armor_end: usize, private: bool) -> Option<usize> {
    let rest = &hay[armor_end..];
    let escaped = [b"\\n".as_slice(), b"\\r\\n", b"\\\\n", b"\\\\r\\\\n"]
        .iter()
        .any(|sep| rest.starts_with(sep));
    if !escaped {
        return None;
    }
    let stop = memchr::memchr3(b'"', b'\n', b'\r', rest).map_or(hay.len(), |i| armor_end + i);
    let mut from = armor_end;
    while let Some(i) = memmem::find(&hay[from..stop], b"-----END ") {
        let word = from + i + 5;
        if let Some(armor) = armor_at(&hay[..stop], word, false) {
            return Some(match (armor.private == private, private) {
                (true, _) => armor.end,
                (false, true) => armor.start,
                (false, false) => armor_end,
            });
        }
        from = word;
    }
    // No END line: the string's own trailing line breaks stay.
    let mut end = stop;
    loop {
        let before = end;
        for sep in [b"\\n".as_slice(), b"\\r"] {
            if end >= armor_end + sep.len() && hay[..end].ends_with(sep) {
                end -= sep.len();
            }
        }
        while end > armor_end && hay[end - 1] == b'\\' {
            end -= 1;
        }
        if end == before {
            return Some(end);
        }
    }
}

/// The start of a key's tail whose END line sits in a JSON string (see
/// [`escaped_block_end`]): the lines before the END line back to the
/// string's start, as long as each is base64 once its escapes are dropped
/// (`\/`) and no wider than a key's line. None when the END line does not
/// follow an escaped line break.
fn escaped_block_start(hay: &[u8], armor_start: usize) -> Option<usize> {
    if !hay[..armor_start].ends_with(b"\\n") {
        return None;
    }
    // The string starts after a quote (escaped or not) or a real line break.
    let string_start =
        memchr::memrchr3(b'"', b'\n', b'\r', &hay[..armor_start]).map_or(0, |i| i + 1);
    // Split into lines at runs of backslashes followed by `n` (`\n`, `\\n`),
    // dropping `\r` escapes before them.
    let mut lines: Vec<(usize, usize)> = Vec::new();
    let mut line_start = string_start;
    let mut i = string_start;
    while i < armor_start {
        if hay[i] == b'\\' {
            let run = hay[i..armor_start]
                .iter()
                .take_while(|&&b| b == b'\\')
                .count();
            if hay.get(i + run) == Some(&b'n') {
                let mut end = i;
                // A `\r` escape before the `\n`.
                if end > line_start && hay[end - 1] == b'r' {
                    let r_run = hay[line_start..end - 1]
                        .iter()
                        .rev()
                        .take_while(|&&b| b == b'\\')
                        .count();
                    if r_run == run {
                        end -= 1 + r_run;
                    }
                }
                lines.push((line_start, end));
                i += run + 1;
                line_start = i;
                continue;
            }
            i += run;
            continue;
        }
        i += 1;
    }
    let mut start = armor_start;
    for &(from, to) in lines.iter().rev() {
        let body = hay[from..to].iter().filter(|&&b| b != b'\\');
        let width = body.clone().count();
        let b64 = body.clone().all(|&b| is_b64(b) || b == b'=');
        if width == 0 || width > MAX_FULL || !b64 {
            break;
        }
        start = from;
    }
    (start < armor_start).then_some(start)
}

/// A logger's prefix with nothing after it (`web-1  | `, as `docker compose
/// logs` prints an empty line): a line of the prefix's length, less its
/// trailing blank, with nothing after that.
fn is_bare_prefix(hay: &[u8], line: Line, prefix: usize) -> bool {
    let mut end = line.end;
    while end > line.start && is_blank(hay[end - 1]) {
        end -= 1;
    }
    let len = end - line.start;
    prefix > 0 && len <= prefix && len + 1 >= prefix && kind(hay, line) != Kind::Marker
}

/// Where a walk forwards ended.
#[derive(Clone, Copy, Debug)]
struct Forward {
    /// The end of the block: its last body line, or its END line.
    end: usize,
    /// The interleaved line it passed over, if any.
    gap: Option<Gap>,
    /// It ended at its own END line.
    closed: bool,
}

/// Walks forwards from the line after a BEGIN line. `private`: the armor
/// names a private key.
///
/// An END line of the other kind (a certificate's after a key's lines, a
/// key's after a certificate's) is not this block's: the lines after an
/// interleaved line the walk passed are that block's (its walk back from
/// its END line takes them), and without one the lines cannot be told
/// apart, so the key's side has them — a private block ends before that END
/// line, a public one at its own BEGIN line.
fn walk_forward(hay: &[u8], armor_start: usize, armor_end: usize, private: bool) -> Forward {
    let open = |end: usize, gap: Option<Gap>| Forward {
        end,
        gap,
        closed: false,
    };
    if let Some(end) = escaped_block_end(hay, armor_end, private) {
        return Forward {
            end,
            gap: None,
            closed: true,
        };
    }
    let sep = sep_after(hay, armor_end);
    let prefix = match sep {
        Sep::Newline => {
            armor_start - memchr::memrchr(b'\n', &hay[..armor_start]).map_or(0, |i| i + 1)
        }
        Sep::Escaped => 0,
    };
    // A body starts on the next line; text after the armor on its own line
    // means this is not a block.
    let rest = line_from(hay, armor_end, sep);
    if !hay[rest.start..rest.end].iter().all(|&b| is_blank(b)) {
        return open(armor_end, None);
    }
    let mut end = armor_end;
    let mut current = rest;
    let mut width: Option<usize> = None;
    let mut headers_allowed = true;
    let mut last_line_seen = false;
    let mut gap: Option<Gap> = None;
    while let Some(line) = next_line(hay, current, sep) {
        current = line;
        if let Some(armor) = end_armor_in(hay, line) {
            if armor.private == private {
                return Forward {
                    end: armor.end,
                    gap,
                    closed: true,
                };
            }
            return match gap {
                Some(gap) => open(gap.before, None),
                None if private => open(end, None),
                None => open(armor_end, None),
            };
        }
        let mut line_kind = kind_with_prefix(hay, line, prefix);
        if headers_allowed && width.is_none() && is_bare_prefix(hay, line, prefix) {
            line_kind = Kind::Blank;
        }
        match line_kind {
            Kind::Header if headers_allowed => {}
            // The blank line that ends the armor headers, or stands alone
            // after the armor line (RFC 4880 armor with no headers, as
            // `gpg --armor` writes it): once, before the first body line.
            Kind::Blank if headers_allowed && width.is_none() => {
                headers_allowed = false;
                continue;
            }
            Kind::Field { len, padded, .. } if !last_line_seen => {
                headers_allowed = false;
                match width {
                    None if full_width(len) && !padded => width = Some(len),
                    Some(w) if len == w && !padded => {}
                    Some(w) if len <= w => last_line_seen = true,
                    None => last_line_seen = true,
                    Some(_) => break,
                }
            }
            Kind::Checksum => last_line_seen = true,
            Kind::Marker if !private => {}
            Kind::Marker => break,
            _ => {
                // One line of another writer inside the body is passed over
                // when the body goes on after it.
                let resumes = width.and_then(|w| {
                    if last_line_seen || !passable(hay, line) {
                        return None;
                    }
                    let next = next_line(hay, line, sep)?;
                    match kind_with_prefix(hay, next, prefix) {
                        Kind::Field {
                            start,
                            len,
                            padded: false,
                        } if len == w => Some(start),
                        _ => None,
                    }
                });
                if let Some(after) = resumes
                    && gap.is_none()
                {
                    gap = Some(Gap { before: end, after });
                    continue;
                }
                break;
            }
        }
        end = line.end;
    }
    open(end, gap)
}

/// Walks backwards from the line before an END line; returns where the
/// block starts (the first body field, or a BEGIN line) and the interleaved
/// line it passed over, if any. `private`: the armor names a private key.
fn walk_backward(hay: &[u8], armor_start: usize, private: bool) -> (usize, Option<Gap>) {
    let sep = sep_before(hay, armor_start);
    // The END line's own start: a logger prefix before the armor stays.
    let end_line_start = match sep {
        Sep::Newline => memchr::memrchr(b'\n', &hay[..armor_start]).map_or(0, |i| i + 1),
        Sep::Escaped => armor_start,
    };
    let mut start = armor_start;
    let mut width: Option<usize> = None;
    let mut checksum_allowed = true;
    let mut short_allowed = true;
    let mut gap: Option<Gap> = None;
    let prefix = armor_start - end_line_start;
    let kind_of = |line: Line| kind_with_prefix(hay, line, prefix);
    let mut cursor = end_line_start;
    while let Some(line) = prev_line(hay, cursor, sep) {
        cursor = line.start;
        match kind_of(line) {
            Kind::Checksum if checksum_allowed => checksum_allowed = false,
            Kind::Field {
                start: field,
                len,
                padded,
            } => {
                checksum_allowed = false;
                match width {
                    Some(w) if len == w && !padded => {}
                    Some(_) => break,
                    None => {
                        // The line before END is a full line, or the short
                        // last line of a body whose width the line above it
                        // tells.
                        let above = prev_line(hay, line.start, sep).map(kind_of);
                        match above {
                            Some(Kind::Field {
                                len: w,
                                padded: false,
                                ..
                            }) if full_width(w) && (len < w || (len == w && padded)) => {
                                width = Some(w);
                            }
                            _ if full_width(len) && !padded => width = Some(len),
                            _ if short_allowed => {}
                            _ => break,
                        }
                    }
                }
                short_allowed = false;
                start = field;
            }
            Kind::Blank if width.is_some() => {
                // The blank line after armor headers: take the headers too.
                let mut cur = line.start;
                let mut took = false;
                while let Some(h) = prev_line(hay, cur, sep) {
                    if kind(hay, h) != Kind::Header {
                        break;
                    }
                    start = h.start;
                    cur = h.start;
                    took = true;
                }
                if !took {
                    break;
                }
                break;
            }
            Kind::Marker if !private => {}
            Kind::Marker => break,
            _ => {
                let resumes = width.and_then(|w| {
                    if !passable(hay, line) {
                        return None;
                    }
                    let prev = prev_line(hay, line.start, sep)?;
                    match kind_of(prev) {
                        Kind::Field {
                            len, padded: false, ..
                        } if len == w => Some(prev.end),
                        _ => None,
                    }
                });
                if let Some(before) = resumes
                    && gap.is_none()
                {
                    gap = Some(Gap {
                        before,
                        after: start,
                    });
                    continue;
                }
                break;
            }
        }
    }
    (start, gap)
}

/// A span the armor walks claimed: removed when `private`, kept otherwise.
#[derive(Clone, Copy, Debug)]
struct Claim {
    start: usize,
    end: usize,
    private: bool,
    /// The earliest byte the judgement read before `start` (the BEGIN line
    /// of a body resumed after an interleaved line).
    anchor: usize,
    /// The last byte the judgement read: a public block's walk that passed
    /// an interleaved line read past the lines it keeps (see
    /// `own_lines_after_gap`), and a stream must not cut there.
    reach: usize,
    /// The label of a public block's BEGIN line when no END line closed
    /// its walk.
    open: Option<(usize, usize)>,
}

/// What the key pass found: the regions to remove, and the armor lines of
/// certificates and public keys, which no other rule may touch (a second
/// pass must find the same armor, or it would take the block's body for a
/// key's middle).
pub(crate) struct KeyScan {
    /// Private-key material, in order, not overlapping, each with the
    /// earliest byte its judgement read.
    pub removed: Vec<(Found, usize)>,
    /// Public armor lines, in order, not overlapping each other or a removal.
    pub kept: Vec<(usize, usize)>,
    /// The whole public blocks those lines belong to.
    pub public: Vec<(usize, usize)>,
}

/// `continues`: the input starts in the middle of a key's lines; `cut`: it
/// was cut right after its last line, so a key's middle may go on past it.
/// At either end one full-width line is enough.
/// `dashes`: where runs of four dashes start, in order (every armor line
/// has one).
pub(crate) fn key_regions(hay: &[u8], dashes: &[usize], continues: bool, cut: bool) -> KeyScan {
    let (mut claims, kept) = armored(hay, dashes);
    middle_runs(hay, &mut claims, continues, cut);
    claims.sort_by_key(|c| c.start);
    let public = claims
        .iter()
        .filter(|c| !c.private)
        .map(|c| (c.start, c.reach.max(c.end)))
        .collect();
    let mut removed: Vec<(Found, usize)> = Vec::new();
    for c in claims.into_iter().filter(|c| c.private) {
        match removed.last_mut() {
            Some((last, anchor)) if c.start <= last.end => {
                last.end = last.end.max(c.end);
                *anchor = (*anchor).min(c.anchor);
            }
            _ => removed.push((
                Found {
                    start: c.start,
                    end: c.end,
                    class: Class::PrivateKey,
                },
                c.anchor,
            )),
        }
    }
    KeyScan {
        removed,
        kept,
        public,
    }
}

/// The armored blocks, whole or cut at either end, in order.
fn armored(hay: &[u8], dashes: &[usize]) -> (Vec<Claim>, Vec<(usize, usize)>) {
    // Every armor line has a run of four or more dashes before its word:
    // one search finds both kinds.
    let mut armors: Vec<Armor> = Vec::new();
    let mut from = 0;
    for &at in dashes {
        if at < from {
            continue;
        }
        let run_end = at + hay[at..].iter().take_while(|&&b| b == b'-').count();
        let word = if hay[run_end..].starts_with(b" ") {
            run_end + 1
        } else {
            run_end
        };
        let armor = if hay[word..].starts_with(b"BEGIN") {
            armor_at(hay, word, true)
        } else if hay[word..].starts_with(b"END") {
            armor_at(hay, word, false)
        } else {
            None
        };
        armors.extend(armor);
        from = run_end;
    }
    let mut claims: Vec<Claim> = Vec::new();
    let mut kept = Vec::new();
    let mut claimed_until = 0;
    for a in armors {
        if a.start < claimed_until {
            // Inside a public block (its END line, or an armor line its
            // walk passed over) the armor line is still kept whole.
            if !a.private && claims.last().is_some_and(|c| !c.private) {
                kept.push((a.start, a.end));
            }
            continue;
        }
        if !a.private {
            kept.push((a.start, a.end));
        }
        // A public block's lines after an interleaved line may as well be a
        // key's: they are its own only between its armor lines (see
        // `own_lines_after_gap`). `reach`: how far the judgement read.
        let mut open = None;
        let (start, end, gap, reach) = if a.begin {
            let walk = walk_forward(hay, a.start, a.end, a.private);
            if !a.private && !walk.closed {
                open = Some(a.label);
            }
            match walk.gap {
                Some(gap) if !a.private && !walk.closed => {
                    match own_lines_after_gap(hay, walk.end, a.label) {
                        (true, reach) => (a.start, walk.end, walk.gap, reach),
                        (false, reach) => (a.start, gap.before, None, reach),
                    }
                }
                _ => (a.start, walk.end, walk.gap, walk.end),
            }
        } else {
            let (start, gap) = match escaped_block_start(hay, a.start) {
                Some(start) => (start, None),
                None => walk_backward(hay, a.start, a.private),
            };
            match gap {
                Some(gap) if !a.private => match claims.last_mut() {
                    // The walk back stopped one line below the lines of a
                    // BEGIN line of its label that no END line closed: one
                    // block, armor to armor.
                    Some(last)
                        if last.open.is_some_and(|l| same_label(hay, l, a.label))
                            && follows(hay, start, last.end) =>
                    {
                        last.open = None;
                        last.end = a.end;
                        last.reach = a.end;
                        claimed_until = a.end;
                        continue;
                    }
                    _ => (gap.after.max(claimed_until), a.end, None, a.end),
                },
                _ => (start.max(claimed_until), a.end, gap, a.end),
            }
        };
        claimed_until = end;
        match gap {
            // The interleaved line is another writer's and stays: a key
            // takes only its own lines. The body after it was judged from
            // the body before it.
            Some(gap) if a.private => {
                if gap.before > start {
                    claims.push(Claim {
                        start,
                        end: gap.before,
                        private: true,
                        anchor: start,
                        reach: gap.before,
                        open: None,
                    });
                }
                claims.push(Claim {
                    start: gap.after.max(start),
                    end,
                    private: true,
                    anchor: start,
                    reach: end,
                    open: None,
                });
            }
            _ => claims.push(Claim {
                start,
                end,
                private: a.private,
                anchor: start,
                reach: reach.max(end),
                open,
            }),
        }
    }
    (claims, kept)
}

/// Whether the lines a public block's walk forwards took after an
/// interleaved line are the block's own, and how far that judgement read.
/// They are when an END line of its `label` follows the line that stopped
/// the walk (one more line of another writer): between its armor lines a
/// block's lines are its own. Else nothing tells them from a key's lines after another
/// writer's line (`sed -n 5,12p key.pem` printed after a certificate's
/// head), and they are judged as any lines are: two or more full-width
/// ones are a key's middle.
fn own_lines_after_gap(hay: &[u8], end: usize, label: (usize, usize)) -> (bool, usize) {
    let stop = next_line_start(hay, end);
    let after = next_line_start(hay, stop);
    if after >= hay.len() {
        return (false, hay.len());
    }
    let line = line_from(hay, after, Sep::Newline);
    let own = end_armor_in(hay, line).is_some_and(|armor| same_label(hay, armor.label, label));
    (own, line.end)
}

/// Whether the line above the one that stopped a walk back (the walk's
/// first field is `start`) ends by `claim_end`, inside the block before it.
fn follows(hay: &[u8], start: usize, claim_end: usize) -> bool {
    let line_start = memchr::memrchr(b'\n', &hay[..start]).map_or(0, |i| i + 1);
    prev_line(hay, line_start, Sep::Newline)
        .and_then(|stop| prev_line(hay, stop.start, Sep::Newline))
        .is_some_and(|above| above.start < claim_end)
}

/// A line's full-width base64 field for a key's middle: only at the widths
/// key formats wrap at, mixed case, and not a hex digest.
fn run_field(hay: &[u8], line: Line) -> Option<(usize, usize)> {
    // Cheap rejections first: most lines end in a word, not 60 bytes of
    // base64.
    if line.end - line.start < MIN_RUN_WIDTH {
        return None;
    }
    let tail = &hay[line.end - MIN_RUN_WIDTH..line.end];
    if !tail.iter().step_by(7).all(|&b| is_b64(b) || b == b'=') {
        return None;
    }
    let Kind::Field { start, len, .. } = kind(hay, line) else {
        return None;
    };
    if !(MIN_RUN_WIDTH..=MAX_RUN_WIDTH).contains(&len) {
        return None;
    }
    let field = &hay[start..start + len];
    let upper = field.iter().any(u8::is_ascii_uppercase);
    let lower = field.iter().any(u8::is_ascii_lowercase);
    (upper && lower).then_some((start, len))
}

/// A run of full-width lines being gathered.
struct Run {
    /// Where the run's first line starts.
    first_line: usize,
    start: usize,
    end: usize,
    width: usize,
    prefix: usize,
    lines: usize,
    /// One line of another writer the run passed over: where the run's
    /// part before it ends and its part after it starts.
    gap: Option<(usize, usize)>,
}

/// Runs of two or more full-width lines of one width and one prefix length,
/// outside every claim; also one such line that ends a `cut` input or
/// starts one that `continues` a key.
fn middle_runs(hay: &[u8], claims: &mut Vec<Claim>, continues: bool, cut: bool) {
    let armored: Vec<(usize, usize)> = claims.iter().map(|c| (c.start, c.end)).collect();
    let inside = |pos: usize| armored.iter().any(|&(s, e)| s <= pos && pos < e);
    let mut run: Option<Run> = None;
    for line in full_width_lines(hay) {
        // A block's claim starts at its first line's field, after any
        // prefix: that line is inside it too.
        let Some((start, width)) = run_field(hay, line).filter(|&(start, _)| !inside(start)) else {
            continue;
        };
        let prefix = start - line.start;
        // The line right after the run's last one continues it; so does
        // the line after one line of another writer (`docker compose logs`
        // interleaves them), once per run.
        let adjacent = run
            .as_ref()
            .is_some_and(|r| next_line_start(hay, r.end) == line.start);
        let after_gap = run.as_ref().is_some_and(|r| {
            let between = next_line_start(hay, r.end);
            r.gap.is_none()
                && between < line.start
                && next_line_start(hay, between) == line.start
                && passable(hay, line_from(hay, between, Sep::Newline))
        });
        match run.as_mut() {
            Some(r) if (adjacent || after_gap) && r.width == width && r.prefix == prefix => {
                if after_gap {
                    r.gap = Some((r.end, start));
                }
                r.end = start + width;
                r.lines += 1;
                continue;
            }
            _ => {}
        }
        if let Some(r) = run.take() {
            claims.extend(close_run(hay, r, continues, cut, &inside));
        }
        run = Some(Run {
            first_line: line.start,
            start,
            end: start + width,
            width,
            prefix,
            lines: 1,
            gap: None,
        });
    }
    if let Some(r) = run {
        claims.extend(close_run(hay, r, continues, cut, &inside));
    }
}

/// Ends a run: takes the short last line after it when there is one, and
/// claims it when it has enough lines — two, or one that ends a `cut` input
/// or starts one that `continues` a key (after the line break that ended
/// the removal before it).
fn close_run(
    hay: &[u8],
    mut r: Run,
    continues: bool,
    cut: bool,
    inside: &dyn Fn(usize) -> bool,
) -> Vec<Claim> {
    let next = next_line_start(hay, r.end);
    let mut ends_input = next >= hay.len();
    if !ends_input {
        // The short last line of the key, right after its middle.
        let line = line_from(hay, next, Sep::Newline);
        // The short last line of the key after one line of another writer
        // (once per run, as within it).
        let after_other = || {
            let after = next_line_start(hay, line.end);
            (r.gap.is_none() && after < hay.len() && passable(hay, line))
                .then(|| short_last_line(hay, &r, line_from(hay, after, Sep::Newline), inside))
                .flatten()
        };
        if let Some((start, len)) = short_last_line(hay, &r, line, inside) {
            r.end = start + len;
            ends_input = next_line_start(hay, r.end) >= hay.len();
        } else if let Some((start, len)) = after_other() {
            r.gap = Some((r.end, start));
            r.end = start + len;
            ends_input = next_line_start(hay, r.end) >= hay.len();
        } else {
            // `docker compose logs` interleaves writers: one line of
            // another between a key's last shown line and the cut.
            ends_input = cut
                && r.lines == 1
                && passable(hay, line)
                && next_line_start(hay, line.end) >= hay.len();
        }
    }
    let enough = r.lines >= 2 || (cut && ends_input) || (continues && r.first_line <= 2);
    if !enough {
        return Vec::new();
    }
    let claim = |start: usize, end: usize| Claim {
        start,
        end,
        private: true,
        anchor: r.start,
        reach: end,
        open: None,
    };
    match r.gap {
        // The other writer's line stays: a key takes only its own lines.
        Some((before, after)) => vec![claim(r.start, before), claim(after, r.end)],
        None => vec![claim(r.start, r.end)],
    }
}

/// `line` as the short last line of run `r`'s key: a field narrower than
/// the run, behind the same prefix, outside every claim.
fn short_last_line(
    hay: &[u8],
    r: &Run,
    line: Line,
    inside: &dyn Fn(usize) -> bool,
) -> Option<(usize, usize)> {
    match kind(hay, line) {
        Kind::Field { start, len, .. }
            if len < r.width && start - line.start == r.prefix && !inside(start) =>
        {
            Some((start, len))
        }
        _ => None,
    }
}

/// The start of the line after the one `pos` is in (or the input's end).
fn next_line_start(hay: &[u8], pos: usize) -> usize {
    memchr::memchr(b'\n', &hay[pos.min(hay.len())..]).map_or(hay.len(), |i| pos + i + 1)
}

/// The lines that may end in a full-width field, in order: a cheap look at
/// a few of the last 60 bytes of each line rejects almost every line of
/// ordinary output.
fn full_width_lines(hay: &[u8]) -> impl Iterator<Item = Line> + '_ {
    let mut line_start = 0;
    let mut breaks = memchr::memchr_iter(b'\n', hay)
        .map(Some)
        .chain(std::iter::once(None));
    std::iter::from_fn(move || {
        for nl in breaks.by_ref() {
            let raw_end = nl.unwrap_or(hay.len());
            let end = if raw_end > line_start && hay[raw_end - 1] == b'\r' {
                raw_end - 1
            } else {
                raw_end
            };
            let line = Line {
                start: line_start,
                end,
            };
            line_start = raw_end + 1;
            let e = line.end;
            if e - line.start >= MIN_RUN_WIDTH
                && [1, 20, 40, MIN_RUN_WIDTH]
                    .into_iter()
                    .all(|back| is_b64(hay[e - back]) || hay[e - back] == b'=')
            {
                return Some(line);
            }
        }
        None
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn removed(hay: &str) -> Vec<&str> {
        let dashes: Vec<usize> = memmem::find_iter(hay.as_bytes(), b"----").collect();
        key_regions(hay.as_bytes(), &dashes, false, false)
            .removed
            .into_iter()
            .map(|(f, _)| &hay[f.start..f.end])
            .collect()
    }

    const L1: &str = "MIIEpAIBAAKCAQEAu7x8Qd2Vh5cZ3mFq9nYk0wPzL1sJt4RbXe6gHa2KdUoNcMvW";
    const L2: &str = "Yp0qSx3Tz7AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcdefghijklmnopqr";

    #[test]
    fn keeps_a_certificate() {
        let hay = format!("-----BEGIN CERTIFICATE-----\n{L1}\n{L2}\n-----END CERTIFICATE-----\n");
        assert!(removed(&hay).is_empty());
    }

    #[test]
    fn removes_a_block_through_its_end_line() {
        let hay = format!(
            "x\n-----BEGIN RSA PRIVATE KEY-----\n{L1}\nAQAB\n-----END RSA PRIVATE KEY-----\ny"
        );
        let got = removed(&hay);
        assert_eq!(got.len(), 1);
        assert!(got[0].starts_with("-----BEGIN") && got[0].ends_with("KEY-----"));
    }

    #[test]
    fn a_block_without_end_line_takes_only_its_body() {
        // A bare word could be the key's short last line, so it goes too;
        // a line shaped otherwise (a field after other text) does not.
        let hay =
            format!("-----BEGIN OPENSSH PRIVATE KEY-----\n{L1}\n{L2}\nnext line\nmore words.\n");
        let got = removed(&hay);
        assert_eq!(got, vec![&hay[..hay.find("\nnext").unwrap()]]);
        let hay =
            format!("-----BEGIN OPENSSH PRIVATE KEY-----\n{L1}\n{L2}\nstarted\nmore words.\n");
        let got = removed(&hay);
        assert_eq!(got, vec![&hay[..hay.find("\nmore").unwrap()]]);
    }

    #[test]
    fn a_walk_passes_one_interleaved_line_but_not_lines_of_another_shape() {
        let key = format!("app[1]: {L1}\napp[1]: {L2}\n");
        let ids = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n".repeat(3);
        let hay =
            format!("{ids}other: interleaved line.\n{key}app[1]: -----END RSA PRIVATE KEY-----\n");
        let got = removed(&hay);
        assert_eq!(got.len(), 1);
        assert!(got[0].starts_with(L1), "{got:?}");
    }

    #[test]
    fn a_tail_is_walked_back_from_its_end_line() {
        let hay = format!(
            "Dec 02 a[1]: {L1}\nDec 02 a[1]: {L2}\nDec 02 a[1]: AQAB==\nDec 02 a[1]: -----END RSA PRIVATE KEY-----\n"
        );
        let got = removed(&hay);
        assert_eq!(got.len(), 1);
        assert!(got[0].starts_with(L1), "{got:?}");
    }

    #[test]
    fn a_middle_without_armor_is_removed() {
        let hay = format!("before\n{L1}\n{L2}\nafter words here\n");
        assert_eq!(removed(&hay), vec![format!("{L1}\n{L2}").as_str()]);
    }

    #[test]
    fn hex_digests_one_a_line_are_not_a_key() {
        let a = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        let hay = format!("{a}\n{a}\n{a}\n");
        assert!(removed(&hay).is_empty());
    }
}
