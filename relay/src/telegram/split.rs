//! Splitting a text Telegram would refuse as one message.
//!
//! Telegram takes at most 4,096 characters. Whether it counts Unicode
//! scalars or UTF-16 code units has been reported both ways (a measurement
//! against the real Bot API found scalars); the relay counts UTF-16 units,
//! which is never more than Telegram takes either way, so a part is never
//! refused for its length. A longer text is cut on line boundaries; a
//! single line longer than a message is cut between characters.

/// The most UTF-16 code units the relay puts in one message.
pub const MAX_UNITS: usize = 4096;

fn units(text: &str) -> usize {
    text.chars().map(char::len_utf16).sum()
}

/// `text` as messages of at most `max` UTF-16 units each, cut after a line
/// break where one fits. Joined, the parts are `text` again.
pub fn split(text: &str, max: usize) -> Vec<String> {
    let max = max.max(2);
    if units(text) <= max {
        return vec![text.to_string()];
    }
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut current_units = 0;
    for line in text.split_inclusive('\n') {
        let line_units = units(line);
        if current_units + line_units <= max {
            current.push_str(line);
            current_units += line_units;
            continue;
        }
        if !current.is_empty() {
            parts.push(std::mem::take(&mut current));
            current_units = 0;
        }
        if line_units <= max {
            current.push_str(line);
            current_units = line_units;
            continue;
        }
        for c in line.chars() {
            if current_units + c.len_utf16() > max {
                parts.push(std::mem::take(&mut current));
                current_units = 0;
            }
            current.push(c);
            current_units += c.len_utf16();
        }
    }
    if !current.is_empty() {
        parts.push(current);
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_text_is_one_part() {
        assert_eq!(split("hello\nworld", MAX_UNITS), vec!["hello\nworld"]);
    }

    #[test]
    fn a_long_text_is_cut_on_line_boundaries() {
        let line = format!("{}\n", "x".repeat(99));
        let text = line.repeat(50);
        let parts = split(&text, 1_000);
        assert_eq!(parts.len(), 5);
        assert!(parts.iter().all(|p| p.ends_with('\n') && units(p) <= 1_000));
        assert_eq!(parts.concat(), text);
    }

    #[test]
    fn emoji_count_twice_and_a_long_line_is_cut_between_characters() {
        let text = "😀".repeat(3_000);
        let parts = split(&text, MAX_UNITS);
        assert_eq!(parts.len(), 2);
        assert!(parts.iter().all(|p| units(p) <= MAX_UNITS));
        assert_eq!(parts.concat(), text);
    }
}
