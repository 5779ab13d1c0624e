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

/// For a name that starts at `name_start` and is followed by `:`, with
/// `value_at` the first byte after the colon's blanks: the value's span when
/// it lies on the following lines.
pub(crate) fn value_after(
    hay: &[u8],
    name_start: usize,
    value_at: usize,
) -> Option<(usize, usize)> {
    let line_start = memchr::memrchr(b'\n', &hay[..name_start]).map_or(0, |i| i + 1);
    let mut column = name_start - line_start;
    if column > 0 && matches!(hay[name_start - 1], b'"' | b'\'') {
        column -= 1;
    }
    let rest_end = memchr::memchr(b'\n', &hay[value_at..]).map_or(hay.len(), |i| value_at + i);
    let rest = trim_comment(&hay[value_at..rest_end]);
    let block = match rest {
        [] => false,
        [b'|' | b'>', indicators @ ..]
            if indicators
                .iter()
                .all(|&b| matches!(b, b'-' | b'+') || b.is_ascii_digit()) =>
        {
            true
        }
        _ => return None,
    };
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
    // A marker in the lines means another rule judged part of them, on a
    // pass that saw them whole: that pass's judgement stands.
    if memchr::memmem::find(&hay[start..last_end], MARKER_PREFIX).is_some() {
        return None;
    }
    let mut end = last_end;
    while end > start && hay[end - 1].is_ascii_whitespace() {
        end -= 1;
    }
    (end > start).then_some((start, end))
}

/// What follows `:` on the name's line, without a trailing comment and blanks.
fn trim_comment(rest: &[u8]) -> &[u8] {
    let cut = rest
        .windows(2)
        .position(|w| is_blank(w[0]) && w[1] == b'#')
        .unwrap_or(rest.len());
    let mut rest = &rest[..cut];
    while let [head @ .., last] = rest
        && (is_blank(*last) || *last == b'\r')
    {
        rest = head;
    }
    rest
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
        let (s, e) = value_after(hay.as_bytes(), name_start, at)?;
        Some(&hay[s..e])
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
    fn a_sibling_of_a_list_item_is_not_its_value() {
        let hay = "- password: |\n    s3cret value\n  user: bob\n";
        assert_eq!(value(hay, "password"), Some("s3cret value"));
    }
}
