//! Values on the lines after their name, as YAML writes them:
//!
//! ```yaml
//! secret: >-
//!   the value, folded
//!   over two lines
//! password:
//!   hunter2hunter2
//! ```
//!
//! A block scalar (`|`, `>`, with chomping and indentation indicators) is
//! every following line indented deeper than its name; a plain scalar on the
//! next line is the same, unless those lines are a mapping or a list (then
//! the name heads a section, not a value). Blank and comment lines before a
//! plain scalar are passed over; a comment line after its first line ends
//! it. A line with a marker ends the reading at once: a pass that saw the
//! lines judged them.

use crate::bytes::{MARKER_PREFIX, is_blank, is_name_byte};

/// At most this many lines after a key (blank and comment lines count) are
/// read to judge its value; a value removed whole takes its lines past them
/// too (see [`value_end_past_window`]).
const MAX_LINES: usize = 256;

/// What the lines after a YAML key hold.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum NextLines {
    /// Its value, `[start, end)`, read within the window of `MAX_LINES`
    /// lines. `more`: the window ended with the value still going on (see
    /// [`value_end_past_window`]).
    Value {
        start: usize,
        end: usize,
        more: Option<More>,
    },
    /// A marker: a first pass judged these lines (as this key's value, or
    /// by another rule), and the rest of the key's line not as a value.
    Judged,
}

/// Where a value's lines go on past the window: the next line to read, and
/// what the walk needs to read them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct More {
    next: usize,
    column: usize,
    block: bool,
}

/// How a walk over the lines after a key ended.
enum Stop {
    /// A line that ends the value, or the input's end.
    End,
    /// The window's lines are all read.
    Full,
    /// A line shaped like a mapping entry or a list item (a plain value).
    Section,
    /// A line with a marker.
    Marker,
}

struct Walk {
    first: Option<usize>,
    last_end: usize,
    next: usize,
    stop: Stop,
}

/// Reads at most `max_lines` lines from `next` that belong to the value of
/// a key in `column`: blank lines (the value's only if it goes on after
/// them), comment lines (passed over before a plain value, ending it after
/// its first line), and lines indented deeper than the key.
/// `started`: the value's first line was read before `next`. `hole`: a
/// removed block (a private key's) that starts on a line read here; that
/// line goes on to the end of the block's last line, as its marker's line
/// does on a second pass.
fn walk(
    hay: &[u8],
    mut next: usize,
    column: usize,
    block: bool,
    max_lines: usize,
    started: bool,
    hole: Option<(usize, usize)>,
) -> Walk {
    let mut first: Option<usize> = None;
    let mut last_end = 0;
    let mut lines = 0;
    let stop = loop {
        if next > hay.len() {
            break Stop::End;
        }
        if lines == max_lines {
            break Stop::Full;
        }
        lines += 1;
        let line_end =
            |from: usize| memchr::memchr(b'\n', &hay[from..]).map_or(hay.len(), |i| from + i);
        let mut end = line_end(next);
        if let Some((start, hole_end)) = hole
            && next <= start
            && start <= end
            && hole_end <= hay.len()
        {
            end = line_end(hole_end.max(end));
        }
        let mut content_end = end;
        if content_end > next && hay[content_end - 1] == b'\r' {
            content_end -= 1;
        }
        let line = &hay[next..content_end];
        let indent = line.iter().take_while(|&&b| b == b' ').count();
        let blank = line[indent..].iter().all(|&b| is_blank(b));
        // A comment line (`# rotated 2024-05`) is no part of a plain value:
        // passed over before it, as a blank line is; after it, the value has
        // ended.
        let comment = !block && is_comment(&line[indent..]);
        if blank || (comment && first.is_none() && !started) {
            // A blank line belongs to the value only if the value goes on.
            next = end + 1;
            continue;
        }
        if comment || indent <= column {
            break Stop::End;
        }
        // A marker means a pass that saw the lines whole judged them: that
        // pass's judgement stands, whatever lines it did not see follow.
        if memchr::memmem::find(line, MARKER_PREFIX).is_some() {
            break Stop::Marker;
        }
        if !block && heads_a_section(&line[indent..]) {
            break Stop::Section;
        }
        first.get_or_insert(next + indent);
        last_end = content_end;
        next = end + 1;
    };
    Walk {
        first,
        last_end,
        next,
        stop,
    }
}

/// For a name that starts at `name_start` and is followed by `:`, with
/// `value_at` the first byte after the colon's blanks: what its following
/// lines hold, when the name is a YAML key whose value is on them.
/// `hole`: a removed block that starts in the key line's comment; the
/// line goes on after it.
pub(crate) fn value_after(
    hay: &[u8],
    name_start: usize,
    value_at: usize,
    hole: Option<(usize, usize)>,
    removed: Removed<'_>,
) -> Option<NextLines> {
    let column = key_column(hay, name_start, removed)?;
    let (rest_end, block) = rest_of_key_line(hay, value_at, hole)?;
    let w = walk(hay, rest_end + 1, column, block, MAX_LINES, false, hole);
    let more = match w.stop {
        Stop::Marker => return Some(NextLines::Judged),
        Stop::Section => return None,
        Stop::Full => w.first.map(|_| More {
            next: w.next,
            column,
            block,
        }),
        Stop::End => None,
    };
    let start = w.first?;
    let end = trim_end(hay, start, w.last_end);
    (end > start).then_some(NextLines::Value { start, end, more })
}

fn trim_end(hay: &[u8], start: usize, mut end: usize) -> usize {
    while end > start && hay[end - 1].is_ascii_whitespace() {
        end -= 1;
    }
    end
}

/// Where a value removed whole ends when its lines go on past the window
/// (`end` is where the window's part ended): the rest of its lines go with
/// it, read once, as the scan resumes after them. A line that would end
/// the value or make the key a section's head (one the window did not
/// see), or a marker, ends it there.
pub(crate) fn value_end_past_window(hay: &[u8], end: usize, more: More) -> usize {
    let w = walk(
        hay,
        more.next,
        more.column,
        more.block,
        usize::MAX,
        true,
        None,
    );
    match w.first {
        Some(start) => trim_end(hay, start, w.last_end).max(end),
        None => end,
    }
}

/// The column of a mapping key that starts at `name_start` (at its opening
/// quote, if quoted), if only indentation and list or key indicators
/// (`- `, `? `) stand before it on its line, as in YAML. A name after other
/// text is not a key whose value is on the next lines; and this keeps the
/// rule to one candidate a line, so a line of `key: ` repeated costs no
/// more than its length.
fn key_column(hay: &[u8], name_start: usize, removed: Removed<'_>) -> Option<usize> {
    let mut key = name_start;
    if key > 0 && matches!(hay[key - 1], b'"' | b'\'') {
        key -= 1;
    } else {
        key = name_start_past_markers(hay, key, removed);
    }
    let mut i = key;
    while i > 0 && matches!(hay[i - 1], b' ' | b'\t' | b'-' | b'?') {
        i -= 1;
    }
    (i == 0 || hay[i - 1] == b'\n').then_some(key - i)
}

/// Where a removal that ends at a byte starts, if one does (the removals
/// this pass made before the name).
pub(crate) type Removed<'a> = &'a dyn Fn(usize) -> Option<usize>;

/// A name right after a marker (`KEY_[redacted:aws-key].token`) is the
/// rest of a name a first pass read whole, a token inside it removed: the
/// key starts where that name did, so a second pass judges the key as the
/// first did. A name right after a removal of this pass
/// (`x-ghp_….pass:`, the token removed before the keyword was read) is
/// judged the same way, as the second pass will see it. Reads back at most
/// 256 bytes.
fn name_start_past_markers(hay: &[u8], key: usize, removed: Removed<'_>) -> usize {
    let floor = key.saturating_sub(256);
    let past = |at: usize| {
        marker_ending_at(hay, at, floor).or_else(|| removed(at).filter(|&s| s >= floor && s < at))
    };
    let Some(mut key) = past(key) else {
        return key;
    };
    loop {
        if let Some(start) = past(key) {
            key = start;
        } else if key > floor && is_name_byte(hay[key - 1]) {
            key -= 1;
        } else {
            return key;
        }
    }
}

/// The start of a marker that ends right before `end`, if one does (after
/// `floor`).
fn marker_ending_at(hay: &[u8], end: usize, floor: usize) -> Option<usize> {
    if end == 0 || hay[end - 1] != b']' {
        return None;
    }
    let class = hay[floor..end - 1]
        .iter()
        .rev()
        .take_while(|&&b| b.is_ascii_lowercase() || b == b'-')
        .count();
    let start = (end - 1 - class).checked_sub(MARKER_PREFIX.len())?;
    (class > 0 && start >= floor && hay[start..].starts_with(MARKER_PREFIX)).then_some(start)
}

/// What follows `:` on the key's line, read from `value_at` (after the
/// colon's blanks): nothing, or a block indicator (`|`, `>`, with chomping
/// and indentation indicators), then blanks and perhaps a comment. Returns
/// where the line ends and whether a block scalar starts; `None` when a
/// value starts on the key's own line.
fn rest_of_key_line(
    hay: &[u8],
    value_at: usize,
    hole: Option<(usize, usize)>,
) -> Option<(usize, bool)> {
    let mut i = value_at;
    let block = matches!(hay.get(i), Some(b'|' | b'>'));
    if block {
        i += 1;
        while hay
            .get(i)
            .is_some_and(|&b| matches!(b, b'-' | b'+') || b.is_ascii_digit())
        {
            i += 1;
        }
    }
    while hay.get(i).is_some_and(|&b| is_blank(b) || b == b'\r') {
        i += 1;
    }
    match hay.get(i) {
        None => Some((i, block)),
        Some(b'\n') => Some((i, block)),
        // A comment needs a blank before it (`key: |#x` is no comment);
        // right after the colon, that blank is the colon's
        // (`password: # the db's`).
        Some(b'#') if i > 0 && is_blank(hay[i - 1]) => {
            let line_end =
                |from: usize| memchr::memchr(b'\n', &hay[from..]).map_or(hay.len(), |n| from + n);
            let mut end = line_end(i);
            if let Some((start, hole_end)) = hole
                && start > i
                && start <= end
                && hole_end <= hay.len()
            {
                end = line_end(hole_end);
            }
            Some((end, block))
        }
        _ => None,
    }
}

/// A comment line's text after its indentation (spaces, then perhaps tabs).
fn is_comment(text: &[u8]) -> bool {
    let blanks = text.iter().take_while(|&&b| is_blank(b)).count();
    text.get(blanks) == Some(&b'#')
}

/// A line that makes the name a section: a mapping entry or a list item.
fn heads_a_section(text: &[u8]) -> bool {
    text.starts_with(b"- ")
        || text == b"-"
        || text.ends_with(b":")
        || memchr::memmem::find(text, b": ").is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value<'a>(hay: &'a str, name: &str) -> Option<&'a str> {
        let name_start = hay.find(name)?;
        let colon = name_start + name.len();
        let mut at = colon + 1;
        while hay.as_bytes().get(at) == Some(&b' ') {
            at += 1;
        }
        match value_after(hay.as_bytes(), name_start, at, None, &|_| None)? {
            NextLines::Value { start, end, .. } => Some(&hay[start..end]),
            NextLines::Judged => None,
        }
    }

    #[test]
    fn reads_a_block_scalar() {
        let hay = "app:\n  secret: >-\n    two words\n    and more\n  user: bob\n";
        assert_eq!(value(hay, "secret"), Some("two words\n    and more"));
    }

    #[test]
    fn reads_a_plain_scalar_on_the_next_line() {
        let hay = "password:\n  hunter2hunter2\nnext: 1\n";
        assert_eq!(value(hay, "password"), Some("hunter2hunter2"));
    }

    #[test]
    fn a_section_is_not_a_value() {
        let hay = "credentials:\n  username: bob\n  password: x\n";
        assert_eq!(value(hay, "credentials"), None);
        let hay = "tokens:\n  - a\n  - b\n";
        assert_eq!(value(hay, "tokens"), None);
    }

    #[test]
    fn a_name_after_other_text_on_its_line_heads_no_value() {
        let hay = "note password: |\n    s3cret value\n";
        assert_eq!(value(hay, "password"), None);
        let hay = "- ? password: |\n      s3cret value\n";
        assert_eq!(value(hay, "password"), Some("s3cret value"));
    }

    #[test]
    fn a_comment_after_the_indicator_needs_a_blank_before_it() {
        let hay = "password: | # the key\n  s3cret value\n";
        assert_eq!(value(hay, "password"), Some("s3cret value"));
        let hay = "password: |# the key\n  s3cret value\n";
        assert_eq!(value(hay, "password"), None);
    }

    #[test]
    fn a_sibling_of_a_list_item_is_not_its_value() {
        let hay = "- password: |\n    s3cret value\n  user: bob\n";
        assert_eq!(value(hay, "password"), Some("s3cret value"));
    }
}
