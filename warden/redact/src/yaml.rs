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
//! the name heads a section, not a value).

use crate::bytes::{MARKER_PREFIX, is_blank};

/// At most this many lines of one value are read.
const MAX_LINES: usize = 256;

/// What the lines after a YAML key hold.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum NextLines {
    /// Its value, `[start, end)`.
    Value(usize, usize),
    /// A marker: a first pass judged these lines (as this key's value, or
    /// by another rule), and the rest of the key's line not as a value.
    Judged,
}

/// For a name that starts at `name_start` and is followed by `:`, with
/// `value_at` the first byte after the colon's blanks: what its following
/// lines hold, when the name is a YAML key whose value is on them.
pub(crate) fn value_after(hay: &[u8], name_start: usize, value_at: usize) -> Option<NextLines> {
    let column = key_column(hay, name_start)?;
    let (rest_end, block) = rest_of_key_line(hay, value_at)?;
    let mut first: Option<usize> = None;
    let mut last_end = 0;
    let mut next = rest_end + 1;
    for _ in 0..MAX_LINES {
        if next > hay.len() {
            break;
        }
        let end = memchr::memchr(b'\n', &hay[next..]).map_or(hay.len(), |i| next + i);
        let mut content_end = end;
        if content_end > next && hay[content_end - 1] == b'\r' {
            content_end -= 1;
        }
        let line = &hay[next..content_end];
        let indent = line.iter().take_while(|&&b| b == b' ').count();
        if line[indent..].iter().all(|&b| is_blank(b)) {
            // A blank line belongs to the value only if the value goes on.
            next = end + 1;
            if end == hay.len() {
                break;
            }
            continue;
        }
        if indent <= column {
            break;
        }
        let text = &line[indent..];
        if !block && heads_a_section(text) {
            return None;
        }
        first.get_or_insert(next + indent);
        last_end = content_end;
        next = end + 1;
    }
    let start = first?;
    // A marker in the lines means a pass that saw them whole judged them:
    // that pass's judgement stands.
    if memchr::memmem::find(&hay[start..last_end], MARKER_PREFIX).is_some() {
        return Some(NextLines::Judged);
    }
    let mut end = last_end;
    while end > start && hay[end - 1].is_ascii_whitespace() {
        end -= 1;
    }
    (end > start).then_some(NextLines::Value(start, end))
}

/// The column of a mapping key that starts at `name_start` (at its opening
/// quote, if quoted), if only indentation and list or key indicators
/// (`- `, `? `) stand before it on its line, as in YAML. A name after other
/// text is not a key whose value is on the next lines; and this keeps the
/// rule to one candidate a line, so a line of `key: ` repeated costs no
/// more than its length.
fn key_column(hay: &[u8], name_start: usize) -> Option<usize> {
    let mut key = name_start;
    if key > 0 && matches!(hay[key - 1], b'"' | b'\'') {
        key -= 1;
    }
    let mut i = key;
    while i > 0 && matches!(hay[i - 1], b' ' | b'\t' | b'-' | b'?') {
        i -= 1;
    }
    (i == 0 || hay[i - 1] == b'\n').then_some(key - i)
}

/// What follows `:` on the key's line, read from `value_at` (after the
/// colon's blanks): nothing, or a block indicator (`|`, `>`, with chomping
/// and indentation indicators), then blanks and perhaps a comment. Returns
/// where the line ends and whether a block scalar starts; `None` when a
/// value starts on the key's own line.
fn rest_of_key_line(hay: &[u8], value_at: usize) -> Option<(usize, bool)> {
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
            let end = memchr::memchr(b'\n', &hay[i..]).map_or(hay.len(), |n| i + n);
            Some((end, block))
        }
        _ => None,
    }
}

/// A line that makes the name a section: a mapping entry, a list item or a
/// comment.
fn heads_a_section(text: &[u8]) -> bool {
    text.starts_with(b"- ")
        || text == b"-"
        || text.starts_with(b"#")
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
        match value_after(hay.as_bytes(), name_start, at)? {
            NextLines::Value(s, e) => Some(&hay[s..e]),
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
