//! Characters a reader sees as nothing, or that reorder the text around
//! them, which a program reads all the same: one set for every place that
//! shows words a hostile side wrote (the approval's text, the ladder's
//! reasons, a PIN, the assistant's voice, the skill catalogue).

/// Zero widths and direction marks, bidirectional embeddings, overrides and
/// isolates, invisible operators, fillers, the soft hyphen, the byte order
/// mark, interlinear annotations and tags. Line and paragraph separators
/// are line breaks, not in it: see [`invisible_or_separator`].
pub fn invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00ad}'
            | '\u{034f}'
            | '\u{061c}'
            | '\u{115f}'
            | '\u{1160}'
            | '\u{17b4}'
            | '\u{17b5}'
            | '\u{180e}'
            | '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            | '\u{3164}'
            | '\u{feff}'
            | '\u{ffa0}'
            | '\u{fff9}'..='\u{fffb}'
            | '\u{1bca0}'..='\u{1bca3}'
            | '\u{1d173}'..='\u{1d17a}'
            | '\u{e0000}'..='\u{e007f}'
    )
}

/// [`invisible`], and the line and paragraph separators (U+2028, U+2029),
/// which a chat or a terminal shows as a line break of their own.
pub fn invisible_or_separator(c: char) -> bool {
    invisible(c) || matches!(c, '\u{2028}' | '\u{2029}')
}

#[cfg(test)]
mod tests {
    use super::{invisible, invisible_or_separator};

    #[test]
    fn every_bidi_control_and_zero_width_is_hidden() {
        for c in [
            '\u{200b}',
            '\u{200e}',
            '\u{202a}',
            '\u{202e}',
            '\u{2066}',
            '\u{2069}',
            '\u{061c}',
            '\u{feff}',
            '\u{e0041}',
        ] {
            assert!(invisible(c), "{:?}", c);
        }
    }

    #[test]
    fn separators_are_hidden_only_in_the_wider_set() {
        for c in ['\u{2028}', '\u{2029}'] {
            assert!(!invisible(c));
            assert!(invisible_or_separator(c));
        }
    }

    #[test]
    fn letters_and_spaces_are_not_hidden() {
        for c in ['a', 'é', 'ж', '字', ' ', '\u{00a0}', '-', '🙂'] {
            assert!(!invisible_or_separator(c), "{:?}", c);
        }
    }
}
