//! Named secrets: `NAME=value`, `NAME = value`, `NAME: value`,
//! `"NAME": "value"`, `--name=value`, `--name value`, the bare `NAME value`
//! when the value carries a digit; the same written with escapes
//! (`password\u003d…` as Gson prints it, `{\u0022Password\u0022:\u0022…`
//! as .NET does, `client_secret%3D…` in a form body); a value on the lines
//! after its name (YAML, see [`crate::yaml`]); a connection string's
//! `Password=two words;`; an assignment quoted whole (`"NAME=two words"`);
//! and the `value` after a `name` that is a secret's (Kubernetes env).
//!
//! NAME is a run of `[A-Za-z0-9_.-]` that contains, in any case, one of the
//! keywords `key`, `token`, `secret`, `password`, `passwd`, `passphrase`,
//! `pass`, `pwd`, `session`, `sid`,
//! `credential`, `bearer` or `auth`; the scanner finds the keyword and this
//! module grows the name around it. A value is removed when it is 12 bytes or
//! longer, is not already a marker, is not a path and is not a URL (a URL's
//! password and query parameters are judged by their own rules). A value that
//! is a known provider token is counted under that token's class.
//!
//! Not secrets, whatever their length: the values of names that say they are
//! public (`public_key`, `PublicKey`, `public key:` as WireGuard prints it)
//! or a challenge (`WWW-Authenticate`), a digest with its algorithm
//! (`sha256:…`), and a value already masked (`********`).

use crate::Class;
use crate::bytes::{
    MARKER_PREFIX, contains_ignore_case, is_blank, is_marker_at, is_name_byte, run_end,
    skip_blanks, starts_with_ignore_case,
};
use crate::header::{authorization_value, credential_after_scheme, scheme_len};
use crate::tokens::{Found, class_of_value};

/// A name longer than this is not a name but part of a blob (base64 and such).
const NAME_CAP: usize = 64;
const MIN_VALUE: usize = 12;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Form {
    /// `NAME=value`, `NAME: value`, `"NAME": "value"`, `--name=value`.
    Operator,
    /// `--name value`, `-name value`.
    OptionSpace,
    /// `NAME value`: prose shares this shape, so the value must carry a digit.
    Bare,
}

/// How the text around the operator is written.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Escape {
    Plain,
    /// `\u003d`, `\u0022`: JSON with every special byte escaped.
    Unicode,
    /// `%3D`: a form body or query string.
    Percent,
}

/// What follows a name.
#[derive(Clone, Copy, Debug)]
struct Operator {
    form: Form,
    /// Where the value starts (after blanks).
    value_at: usize,
    escape: Escape,
    /// The operator was `=` (a connection string's `;Password=…;` uses it).
    equals: bool,
    /// The operator was `:` (YAML puts a value on the next lines after it).
    colon: bool,
}

/// Where the first token that its own rule removes starts in
/// `[start, end)`, if one does.
pub(crate) type TokenInside<'a> = &'a dyn Fn(usize, usize) -> Option<usize>;

/// At a keyword match `[kw_start, kw_end)`.
/// Nothing before `floor` is read: it was already replaced.
/// `hole`: a private key's block that starts in the comment of this name's
/// YAML key line and is removed (see `crate::scan`): only the YAML rule is
/// judged, reading the key's line on after the block, as a second pass reads
/// it after the block's marker. `removed`: where a removal of this pass that
/// ends at a byte starts (a YAML key's name may start right after one).
pub(crate) fn assignment_at(
    hay: &[u8],
    kw_start: usize,
    kw_end: usize,
    floor: usize,
    token_inside: TokenInside<'_>,
    hole: Option<(usize, usize)>,
    removed: crate::yaml::Removed<'_>,
) -> Option<Found> {
    let mut name_start = kw_start;
    while name_start > floor && is_name_byte(hay[name_start - 1]) {
        if kw_start - name_start >= NAME_CAP {
            return None;
        }
        name_start -= 1;
    }
    let mut name_end = kw_end;
    while name_end < hay.len() && is_name_byte(hay[name_end]) {
        if name_end - kw_end >= NAME_CAP {
            return None;
        }
        name_end += 1;
    }
    let name = &hay[name_start..name_end];
    if names_no_secret(hay, name_start, name, floor) {
        return None;
    }
    let dashes = name.iter().take_while(|&&b| b == b'-').count();
    let bare_name = &name[dashes..];

    if dashes == 0
        && hole.is_none()
        && (bare_name.eq_ignore_ascii_case(b"bearer") || bare_name.eq_ignore_ascii_case(b"basic"))
    {
        return credential_after_scheme(hay, name_end, false, token_inside);
    }

    if dashes == 0
        && hole.is_none()
        && let Some(value) = pair_value(hay, name_start, name_end, floor)
    {
        return judge_value(hay, value, name, Form::Operator, token_inside);
    }
    let mut op = operator_after_name(hay, name_end, dashes > 0)?;
    if hole.is_some() && (!op.colon || is_authorization(bare_name)) {
        return None;
    }
    if op.form == Form::Operator && is_authorization(bare_name) {
        return authorization_value(hay, op.value_at);
    }
    if op.colon {
        op.value_at = after_yaml_properties(hay, op.value_at);
    }
    if op.colon
        && let Some(next) = crate::yaml::value_after(hay, name_start, op.value_at, hole, removed)
    {
        let crate::yaml::NextLines::Value { start, end, more } = next else {
            // A first pass judged the lines, so it did not judge the rest
            // of this line as a value (`password: # the db's`) either.
            return None;
        };
        let v = Value {
            start,
            end,
            quoted: true,
        };
        let mut found = judge_value(hay, v, name, Form::Operator, token_inside)?;
        if let Some(more) = more
            && found.start == start
            && found.end == end
        {
            // Removed whole, and its lines go on past the window: they go
            // too (a second pass sees the marker and judges no further).
            found.end = crate::yaml::value_end_past_window(hay, end, more);
        }
        return Some(found);
    }
    if hole.is_some() {
        return None;
    }
    let mut value = value_span(hay, op.value_at, op.form, op.escape)?;
    if op.equals
        && !value.quoted
        && let Some(end) = enclosed_value_end(hay, name_start, value.end, floor)
    {
        value.end = end;
    }
    if op.equals
        && !value.quoted
        && let Some(end) = connection_string_value_end(hay, name_start, value.end, floor)
    {
        value.end = end;
        if is_password_name(bare_name) {
            // A connection string's password is a password at any length.
            return (value.end > value.start && !is_masked(&hay[value.start..value.end]))
                .then_some(Found {
                    start: value.start,
                    end: value.end,
                    class: Class::SecretAssignment,
                });
        }
    }
    judge_value(hay, value, name, op.form, token_inside)
}

/// YAML node properties before a value: an anchor (`&pw`) or a tag
/// (`!!str`, `!vault`), each followed by a blank (`POSTGRES_PASSWORD: &pw
/// s3cr3t…`). Returns where the value starts after them; `at` when there
/// are none. A property followed by the line's end leaves the value to the
/// next lines (`password: &pw` then an indented value).
fn after_yaml_properties(hay: &[u8], at: usize) -> usize {
    let mut i = at;
    for _ in 0..2 {
        if !matches!(hay.get(i), Some(b'&' | b'!')) {
            break;
        }
        let end = run_end(hay, i + 1, |b| is_name_byte(b) || b == b'!');
        if is_marker_at(hay, end) {
            // A first pass removed what was there (a token in the name, or
            // a block that starts right after it): its judgement stands,
            // and the value starts at the marker.
            return end;
        }
        let bare = hay[i] == b'&' && end == i + 1;
        match hay.get(end) {
            Some(&b) if !bare && (is_blank(b) || b == b'\r' || b == b'\n') => {
                i = skip_blanks(hay, end, 16);
            }
            // The input's end may be a removed block's start: a second pass
            // reads a marker there (above), not a blank.
            _ => break,
        }
    }
    i
}

/// `Authorization`, `Proxy-Authorization`, `X-Authorization`.
fn is_authorization(name: &[u8]) -> bool {
    name.len() >= 13 && name[name.len() - 13..].eq_ignore_ascii_case(b"authorization")
}

fn is_password_name(name: &[u8]) -> bool {
    [
        b"password".as_slice(),
        b"pwd",
        b"passwd",
        b"pass",
        b"passphrase",
    ]
    .into_iter()
    .any(|w| name.eq_ignore_ascii_case(w))
}

/// Names whose values are not secrets: public keys and authentication
/// challenges. Judged on the name's own bytes and the word before it, never
/// before `floor`.
fn names_no_secret(hay: &[u8], name_start: usize, name: &[u8], floor: usize) -> bool {
    if contains_ignore_case(name, b"public")
        || contains_ignore_case(name, b"pubkey")
        || contains_ignore_case(name, b"authenticate")
    {
        return true;
    }
    // `public key: …` (WireGuard's `wg show`): the word before says so.
    let mut i = name_start;
    if i > floor && is_blank(hay[i - 1]) {
        i -= 1;
        let word_end = i;
        while i > floor && hay[i - 1].is_ascii_alphabetic() {
            i -= 1;
        }
        return hay[i..word_end].eq_ignore_ascii_case(b"public");
    }
    false
}

/// Finds what follows the name: an operator and the value's start, or the
/// space-separated value of an option or a bare name.
fn operator_after_name(hay: &[u8], name_end: usize, is_option: bool) -> Option<Operator> {
    let mut i = name_end;
    let mut quoted_name = false;
    let mut escape = Escape::Plain;
    if let Some(&q) = hay.get(i)
        && (q == b'"' || q == b'\'')
    {
        i += 1;
        quoted_name = true;
    } else if hay[i..].starts_with(b"\\\"") {
        i += 2;
        quoted_name = true;
    } else if unicode_quote_at(hay, i) {
        i += 6;
        quoted_name = true;
        escape = Escape::Unicode;
    }
    let j = skip_blanks(hay, i, 16);
    let (op_len, equals, colon) = match hay.get(j..) {
        Some([b':', b'=', ..]) | Some([b'=', b'>', ..]) => (2, true, false),
        Some([b'=', b'=', ..]) => return None,
        Some([b'=', ..]) => (1, true, false),
        Some([b':', b'/', b'/', ..]) => return None,
        Some([b':', b':', ..]) => return None,
        Some([b':', ..]) => (1, false, true),
        _ if starts_with_ignore_case(hay, j, b"\\u003d") => {
            escape = Escape::Unicode;
            (6, true, false)
        }
        _ if starts_with_ignore_case(hay, j, b"\\u003a") => {
            escape = Escape::Unicode;
            (6, false, false)
        }
        _ if starts_with_ignore_case(hay, j, b"%3d") => {
            escape = Escape::Percent;
            (3, true, false)
        }
        _ if starts_with_ignore_case(hay, j, b"%3a") => {
            escape = Escape::Percent;
            (3, false, false)
        }
        _ => (0, false, false),
    };
    if op_len > 0 {
        let value_at = skip_blanks(hay, j + op_len, 16);
        // A quoted key's value is on its own line (JSON), but a block
        // indicator after it (`"password": |`) is YAML's, and JSON has none.
        let block = matches!(hay.get(value_at), Some(b'|' | b'>'));
        return Some(Operator {
            form: Form::Operator,
            value_at,
            escape,
            equals: equals && escape == Escape::Plain,
            colon: colon && escape == Escape::Plain && (!quoted_name || block),
        });
    }
    if quoted_name || j == i || j >= hay.len() {
        return None;
    }
    Some(Operator {
        form: if is_option {
            Form::OptionSpace
        } else {
            Form::Bare
        },
        value_at: j,
        escape,
        equals: false,
        colon: false,
    })
}

/// `\u0022` or `\u0027` (any case) at `i`: a quote written as an escape.
fn unicode_quote_at(hay: &[u8], i: usize) -> bool {
    starts_with_ignore_case(hay, i, b"\\u0022") || starts_with_ignore_case(hay, i, b"\\u0027")
}

/// A value's bytes, without its quotes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Value {
    pub start: usize,
    pub end: usize,
    pub quoted: bool,
}

fn value_span(hay: &[u8], at: usize, form: Form, escape: Escape) -> Option<Value> {
    let first = *hay.get(at)?;
    if is_marker_at(hay, at) {
        return None;
    }
    if first == b'"' || first == b'\'' {
        let start = at + 1;
        if is_marker_at(hay, start) {
            return None;
        }
        return Some(Value {
            start,
            end: quoted_end(hay, start, first),
            quoted: true,
        });
    }
    if hay[at..].starts_with(b"\\\"") {
        return escaped_quoted(hay, at + 2, b"\\\"");
    }
    if unicode_quote_at(hay, at) {
        return escaped_quoted(hay, at + 6, &hay[at..at + 6]);
    }
    if form != Form::Operator && first == b'-' {
        // The next option, not a value.
        return None;
    }
    let mut end = at;
    while end < hay.len() && !ends_unquoted(hay, end, escape) {
        end += 1;
    }
    if form == Form::Bare {
        while end > at && matches!(hay[end - 1], b':' | b'.' | b',' | b';' | b'!' | b'?') {
            end -= 1;
        }
    }
    (end > at).then_some(Value {
        start: at,
        end,
        quoted: false,
    })
}

/// A value quoted by an escaped quote (`\"…\"`, `\u0022…\u0022`): it ends at
/// the same escape (in any case), its line, or a marker.
fn escaped_quoted(hay: &[u8], start: usize, quote: &[u8]) -> Option<Value> {
    if is_marker_at(hay, start) {
        return None;
    }
    let window_end = memchr::memchr2(b'\n', b'\r', &hay[start..]).map_or(hay.len(), |i| start + i);
    let window = &hay[start..window_end];
    let close = window
        .windows(quote.len())
        .position(|w| w.eq_ignore_ascii_case(quote))
        .unwrap_or(window.len());
    let marker = memchr::memmem::find(&window[..close], MARKER_PREFIX).unwrap_or(close);
    Some(Value {
        start,
        end: start + marker,
        quoted: true,
    })
}

/// The closing quote, honouring backslash escapes inside double quotes; an
/// unclosed quote ends with its line (the value was cut or is malformed, and
/// either way is treated as a value).
fn quoted_end(hay: &[u8], start: usize, quote: u8) -> usize {
    let mut i = start;
    while i < hay.len() {
        match hay[i] {
            b'[' if is_marker_at(hay, i) => return i,
            b'\\' if quote == b'"' => i += 2,
            b'\n' | b'\r' => return i,
            b if b == quote => return i,
            _ => i += 1,
        }
    }
    hay.len()
}

fn ends_unquoted(hay: &[u8], i: usize, escape: Escape) -> bool {
    match hay[i] {
        // A marker ends a value: what precedes it was judged on the first pass.
        b'[' => is_marker_at(hay, i),
        b' ' | b'\t' | b'\r' | b'\n' | 0x0b | 0x0c => true,
        b'"' | b'\'' | b'`' | b',' | b';' | b'&' | b')' | b']' | b'}' | b'<' | b'>' => true,
        // Inside escaped text (JSON in a log line): `\"`, `\n`, and the
        // `\u00XX` escapes of the bytes that would end a value.
        b'\\' => match hay.get(i + 1) {
            Some(b'"' | b'\'' | b'n' | b'r' | b't') => true,
            Some(b'u' | b'U') => [b"0022".as_slice(), b"0027", b"0026", b"003c", b"003e"]
                .into_iter()
                .any(|code| starts_with_ignore_case(hay, i + 2, code)),
            _ => false,
        },
        // In a form body `%26` is the `&` between fields.
        b'%' if escape == Escape::Percent => {
            starts_with_ignore_case(hay, i + 1, b"26") || starts_with_ignore_case(hay, i + 1, b"3b")
        }
        _ => false,
    }
}

/// A name given as the value of a `name` key, its value under a `value` key
/// right after it, as Kubernetes prints a container's environment
/// (`- name: DB_PASSWORD` then `  value: …`, or `{"name": "DB_PASSWORD",
/// "value": "…"}` in JSON, one pair a line or both on one) and ECS and SSM
/// print theirs (`"Name"`, `"Value"`). Returns the value of `value`.
fn pair_value(hay: &[u8], name_start: usize, name_end: usize, floor: usize) -> Option<Value> {
    // Before the name: an optional quote, blanks, `:`, the key `name`,
    // itself quoted in JSON.
    let mut i = name_start;
    let mut quote = None;
    if i > floor && matches!(hay[i - 1], b'"' | b'\'') {
        quote = Some(hay[i - 1]);
        i -= 1;
    }
    while i > floor && is_blank(hay[i - 1]) {
        i -= 1;
    }
    if i <= floor || hay[i - 1] != b':' {
        return None;
    }
    i -= 1;
    let json = i > floor && hay[i - 1] == b'"';
    if json {
        i -= 1;
    }
    if i < floor + 4 || !hay[i - 4..i].eq_ignore_ascii_case(b"name") {
        return None;
    }
    let key_start = i - 4;
    if key_start > floor && is_name_byte(hay[key_start - 1]) {
        return None;
    }
    // After the name: its closing quote.
    let mut j = name_end;
    if let Some(q) = quote {
        if hay.get(j) != Some(&q) {
            return None;
        }
        j += 1;
    }
    let value_key = if json {
        // `, "value":` on the same line or the next ones (pretty-printed).
        j = skip_space(hay, j, 32);
        if hay.get(j) != Some(&b',') {
            return None;
        }
        j = skip_space(hay, j + 1, 64);
        if hay.get(j) != Some(&b'"') {
            return None;
        }
        j + 1
    } else {
        // YAML: the next line, its key in the column of `name`; a comment
        // may follow the name (`- name: API_KEY  # from vault`), and
        // comment and blank lines may stand between the two.
        let nl = yaml_comment_end(hay, j)?;
        let line_start = memchr::memrchr(b'\n', &hay[..key_start]).map_or(0, |p| p + 1);
        let column = key_start - line_start;
        let next = comment_lines_end(hay, nl + 1)?;
        let indent = hay[next..]
            .iter()
            .take(column + 1)
            .take_while(|&&b| b == b' ')
            .count();
        if indent != column {
            return None;
        }
        next + column
    };
    if !starts_with_ignore_case(hay, value_key, b"value") {
        return None;
    }
    let mut k = value_key + 5;
    if json {
        if hay.get(k) != Some(&b'"') {
            return None;
        }
        k += 1;
    }
    k = skip_blanks(hay, k, 16);
    if hay.get(k) != Some(&b':') {
        return None;
    }
    let at = skip_blanks(hay, k + 1, 16);
    let value = value_span(hay, at, Form::Operator, Escape::Plain)?;
    if json || value.quoted {
        return Some(value);
    }
    // A YAML plain scalar runs to the end of its line.
    let mut end = memchr::memchr2(b'\n', b'\r', &hay[at..]).map_or(hay.len(), |p| at + p);
    if let Some(m) = memchr::memmem::find(&hay[at..end], MARKER_PREFIX) {
        end = at + m;
    }
    while end > at && is_blank(hay[end - 1]) {
        end -= 1;
    }
    Some(Value { end, ..value })
}

/// The line break that ends the rest of a YAML line from `at`: blanks, then
/// perhaps a comment (after a blank). `None` when anything else follows.
fn yaml_comment_end(hay: &[u8], at: usize) -> Option<usize> {
    let rest = skip_blanks(hay, at, 16);
    let rest = match hay.get(rest) {
        Some(b'#') if rest > at => rest + comment_len(hay, rest)?,
        _ => rest,
    };
    match hay.get(rest) {
        Some(b'\n') => Some(rest),
        Some(b'\r') if hay.get(rest + 1) == Some(&b'\n') => Some(rest + 1),
        _ => None,
    }
}

/// The longest comment a `name`/`value` pair passes over, and how many
/// comment lines (a look-ahead well inside the stream's margin).
const COMMENT_CAP: usize = 256;
const COMMENT_LINES: usize = 4;

/// The start of the first line from `from` that is no comment or blank
/// line, passing over at most `COMMENT_LINES` of them.
fn comment_lines_end(hay: &[u8], from: usize) -> Option<usize> {
    let mut next = from;
    for _ in 0..=COMMENT_LINES {
        let text = skip_blanks(hay, next, COMMENT_CAP);
        if !matches!(hay.get(text), Some(b'#' | b'\r' | b'\n')) {
            return Some(next);
        }
        next = text + comment_len(hay, text)? + 1;
    }
    None
}

/// The length of a comment (or blank line's rest) from `at` to its line
/// break, if it has one within `COMMENT_CAP` bytes and no marker: a marker
/// means a first pass cut the line there (a key block's start) or judged
/// it, so the pair is left as that pass left it.
fn comment_len(hay: &[u8], at: usize) -> Option<usize> {
    let line = &hay[at..hay.len().min(at + COMMENT_CAP)];
    let len = memchr::memchr(b'\n', line)?;
    memchr::memmem::find(&line[..len], MARKER_PREFIX)
        .is_none()
        .then_some(len)
}

/// Skips blanks and line breaks, at most `cap` bytes.
fn skip_space(hay: &[u8], mut i: usize, cap: usize) -> usize {
    let limit = i.saturating_add(cap).min(hay.len());
    while i < limit && matches!(hay[i], b' ' | b'\t' | b'\r' | b'\n') {
        i += 1;
    }
    i
}

/// A whole assignment in quotes (`"SMTP_PASSWORD=two words 42"`, as
/// `systemctl show -p Environment` quotes an entry with spaces and `docker
/// inspect` writes `Env`): the value runs to the closing quote through its
/// spaces. `value_end` is where the value stopped at a blank; returns the
/// quote's position when the name follows that quote and the quote closes
/// on the same line, before any marker.
fn enclosed_value_end(
    hay: &[u8],
    name_start: usize,
    value_end: usize,
    floor: usize,
) -> Option<usize> {
    if name_start <= floor || !hay.get(value_end).is_some_and(|&b| is_blank(b)) {
        return None;
    }
    let quote = hay[name_start - 1];
    if quote != b'"' && quote != b'\'' {
        return None;
    }
    let mut i = value_end;
    while i < hay.len() {
        match hay[i] {
            b'\n' | b'\r' => return None,
            b'[' if is_marker_at(hay, i) => return None,
            b'\\' if quote == b'"' => i += 2,
            b if b == quote => break,
            _ => i += 1,
        }
    }
    if i >= hay.len() {
        return None;
    }
    let mut end = i;
    while end > value_end && is_blank(hay[end - 1]) {
        end -= 1;
    }
    Some(end)
}

/// A connection string (`Server=db;User Id=sa;Password=two words;`): the
/// pairs are separated by `;`, so a value runs to the `;` through its
/// spaces. `value_end` is where the value stopped at a blank; returns the
/// `;`-bounded end (also when the value stopped at that `;`) when the text
/// is shaped like a connection string: the
/// `;` comes on the same line with no `=` or quote before it, and the name
/// follows a `;` or the value is followed by one.
fn connection_string_value_end(
    hay: &[u8],
    name_start: usize,
    value_end: usize,
    floor: usize,
) -> Option<usize> {
    match hay.get(value_end) {
        Some(b';') => {}
        Some(&b) if is_blank(b) => {}
        _ => return None,
    }
    let limit = value_end.saturating_add(256).min(hay.len());
    let mut i = value_end;
    while i < limit {
        match hay[i] {
            b';' => break,
            b'=' | b'"' | b'\'' | b'\n' | b'\r' | b'[' | b'&' | b',' => return None,
            _ => i += 1,
        }
    }
    if i == limit {
        return None;
    }
    let mut end = i;
    while end > value_end && is_blank(hay[end - 1]) {
        end -= 1;
    }
    // The pair before ends in `;` too, or the string is open before the
    // name (`"Password=…;`, the line's start): both mark a connection string.
    let mut b = name_start;
    while b > floor && is_blank(hay[b - 1]) {
        b -= 1;
    }
    let after_pair = b == floor || matches!(hay[b - 1], b';' | b'"' | b'\'' | b'\n');
    after_pair.then_some(end)
}

/// A value that is kept whole (a path, a digest) may hold a token that its
/// own rule removes; a second pass then sees the value end at that token's
/// marker and judges only what precedes it. Judge that now, so that
/// redacting twice is redacting once.
fn judge_value(
    hay: &[u8],
    value: Value,
    name: &[u8],
    form: Form,
    token_inside: TokenInside<'_>,
) -> Option<Found> {
    if let Some(found) = judge_whole_value(hay, value, name, form, token_inside) {
        return Some(found);
    }
    let token = token_inside(value.start, value.end).filter(|&t| t > value.start)?;
    judge_whole_value(
        hay,
        Value {
            end: token,
            ..value
        },
        name,
        form,
        token_inside,
    )
}

fn judge_whole_value(
    hay: &[u8],
    value: Value,
    name: &[u8],
    form: Form,
    token_inside: TokenInside<'_>,
) -> Option<Found> {
    let bytes = &hay[value.start..value.end];
    // `"token": "Basic …"`: the credential only. An unquoted value ended at
    // the blank after the scheme, so look past it.
    let scheme_window = if value.quoted {
        bytes
    } else {
        &hay[value.start..]
    };
    if let Some(scheme_len) = scheme_len(scheme_window) {
        let found = credential_after_scheme(hay, value.start + scheme_len, true, token_inside)?;
        let end = if value.quoted {
            found.end.min(value.end)
        } else {
            found.end
        };
        return (end > found.start).then_some(Found { end, ..found });
    }
    if let Some(class) = class_of_value(bytes) {
        return Some(Found {
            start: value.start,
            end: value.end,
            class,
        });
    }
    // A cookie's value ends at `;` (`session=eyJ…; Path=/`): a token there
    // is counted as the token it is.
    let before_semicolon = bytes.len() - bytes.iter().rev().take_while(|&&b| b == b';').count();
    if !value.quoted
        && before_semicolon < bytes.len()
        && let Some(class) = class_of_value(&bytes[..before_semicolon])
    {
        return Some(Found {
            start: value.start,
            end: value.start + before_semicolon,
            class,
        });
    }
    if bytes.len() < MIN_VALUE || starts_with_scheme(bytes) {
        return None;
    }
    if looks_like_path(name, bytes) || is_digest(bytes) || is_masked(bytes) {
        return None;
    }
    if form == Form::Bare && !bare_value_is_secret(bytes) {
        return None;
    }
    Some(Found {
        start: value.start,
        end: value.end,
        class: Class::SecretAssignment,
    })
}

/// A URL (`scheme://…`): its password and query parameters have rules of
/// their own, and a URL without them is not a secret.
fn starts_with_scheme(bytes: &[u8]) -> bool {
    let scheme = bytes
        .iter()
        .take_while(|&&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
        .count();
    scheme > 0 && bytes[0].is_ascii_alphabetic() && bytes[scheme..].starts_with(b"://")
}

/// `sha256:9f…` (hex) or `sha512-z4P…` (base64, a subresource digest): a
/// digest that names its algorithm (`key_id=sha256:9f…`, an image digest)
/// is an identifier, not a secret.
fn is_digest(value: &[u8]) -> bool {
    const ALGORITHMS: &[&[u8]] = &[
        b"sha1",
        b"sha224",
        b"sha256",
        b"sha384",
        b"sha512",
        b"sha3-256",
        b"sha3-512",
        b"md5",
        b"blake2b",
        b"blake3",
    ];
    ALGORITHMS.iter().any(|alg| {
        if !starts_with_ignore_case(value, 0, alg) {
            return false;
        }
        let body = &value[alg.len()..];
        match body.split_first() {
            Some((b':', hex)) => hex.len() >= 16 && hex.iter().all(u8::is_ascii_hexdigit),
            Some((b'-', b64)) => {
                let digits = b64.iter().take_while(|&&b| b != b'=').count();
                digits >= 16
                    && b64[..digits]
                        .iter()
                        .all(|&b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
                    && b64[digits..].iter().all(|&b| b == b'=')
                    && b64.len() - digits <= 2
            }
            _ => false,
        }
    })
}

/// A value that is already masked: only `*` (`********`, `***`).
fn is_masked(value: &[u8]) -> bool {
    !value.is_empty() && value.iter().all(|&b| b == b'*')
}

/// A value is a path when it starts like one, holds only path bytes, has
/// two separators (`/run/secrets/db`) or a name that says it is a file
/// (`KEY_FILE=./k.pem`), and every segment reads like a file name.
///
/// The last condition is what keeps a base64 secret that happens to start
/// with `/` from passing as a path: its segments are long runs of mixed-case
/// letters and digits with no `.`, `-`, `_` or `~`, which file names rarely are.
fn looks_like_path(name: &[u8], value: &[u8]) -> bool {
    let rooted = value.starts_with(b"/")
        || value.starts_with(b"./")
        || value.starts_with(b"../")
        || value.starts_with(b"~/");
    if !rooted {
        return false;
    }
    let path_bytes = value
        .iter()
        .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'.' | b'_' | b'-' | b'~'));
    if !path_bytes {
        return false;
    }
    let separators = value.iter().filter(|&&b| b == b'/').count();
    let named_as_path = [b"file".as_slice(), b"path", b"dir"]
        .into_iter()
        .any(|w| contains_ignore_case(name, w));
    (separators >= 2 || named_as_path) && value.split(|&b| b == b'/').all(segment_reads_like_a_name)
}

fn segment_reads_like_a_name(segment: &[u8]) -> bool {
    let punctuated = segment
        .iter()
        .any(|b| matches!(b, b'.' | b'-' | b'_' | b'~'));
    let upper = segment.iter().any(u8::is_ascii_uppercase);
    let digit = segment.iter().any(u8::is_ascii_digit);
    segment.len() <= 3 || punctuated || !upper || (!digit && segment.len() <= 12)
}

/// The bare form `password hunter2hunter2`: a digit and a letter, and not an
/// identifier that prose names this way (a UUID, a hex digest or key id).
fn bare_value_is_secret(value: &[u8]) -> bool {
    let digit = value.iter().any(u8::is_ascii_digit);
    let letter = value.iter().any(u8::is_ascii_alphabetic);
    let hex = value.iter().all(|&b| b.is_ascii_hexdigit() || b == b'-');
    digit && letter && !hex
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value_of(s: &str, keyword: &str) -> Option<(String, Class)> {
        let start = s.find(keyword)?;
        let found = assignment_at(
            s.as_bytes(),
            start,
            start + keyword.len(),
            0,
            &|_, _| None,
            None,
            &|_| None,
        )?;
        Some((s[found.start..found.end].to_string(), found.class))
    }

    fn secret(v: &str) -> Option<(String, Class)> {
        Some((v.to_string(), Class::SecretAssignment))
    }

    #[test]
    fn finds_each_assignment_form() {
        let want = secret("hunter2hunter2x");
        assert_eq!(value_of("DB_PASSWORD=hunter2hunter2x", "PASSWORD"), want);
        assert_eq!(value_of("db_password = hunter2hunter2x", "password"), want);
        assert_eq!(value_of("password: hunter2hunter2x", "password"), want);
        assert_eq!(
            value_of(r#"{"password": "hunter2hunter2x"}"#, "password"),
            want
        );
        assert_eq!(value_of("app --password=hunter2hunter2x", "password"), want);
        assert_eq!(value_of("app --password hunter2hunter2x", "password"), want);
        assert_eq!(value_of("password hunter2hunter2x", "password"), want);
    }

    #[test]
    fn finds_escaped_assignments() {
        let want = secret("hunter2hunter2x");
        assert_eq!(
            value_of(
                r"{\u0022login\u0022:\u0022bob\u0022,\u0022password\u003dhunter2hunter2x\u0026b",
                "password"
            ),
            want
        );
        assert_eq!(
            value_of(
                r"{\u0022Password\u0022:\u0022hunter2hunter2x\u0022}",
                "Password"
            ),
            want
        );
        assert_eq!(
            value_of(
                "grant_type=x&client_secret%3Dhunter2hunter2x%26scope%3Dall",
                "secret"
            ),
            want
        );
    }

    #[test]
    fn a_connection_string_password_runs_to_its_semicolon() {
        assert_eq!(
            value_of(
                "Server=db;User Id=sa;Password=two words;Encrypt=true",
                "Password"
            ),
            secret("two words")
        );
        assert_eq!(
            value_of("\"Data Source=db;Pwd=pass phrase 42;\"", "Pwd"),
            secret("pass phrase 42")
        );
        assert_eq!(
            value_of("Host=db;Username=app;Password=changeme;", "Password"),
            secret("changeme")
        );
    }

    #[test]
    fn keeps_prose_paths_and_short_values() {
        assert_eq!(
            value_of("password authentication failed for user", "password"),
            None
        );
        assert_eq!(
            value_of("DB_PASSWORD_FILE=/run/secrets/db", "PASSWORD"),
            None
        );
        assert_eq!(value_of("token=abc", "token"), None);
        assert_eq!(
            value_of("password correcthorsebatterystaple", "password"),
            None
        );
    }

    #[test]
    fn keeps_public_keys_digests_and_masks() {
        assert_eq!(
            value_of(
                "  public key: xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=",
                "key"
            ),
            None
        );
        assert_eq!(
            value_of(
                "PublicKey = xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=",
                "Key"
            ),
            None
        );
        assert_eq!(
            value_of(
                "key_id=sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
                "key"
            ),
            None
        );
        assert_eq!(value_of("password=****************", "password"), None);
    }
}
