//! The attack round on b70460d (keys glued together removed by one pass,
//! the relaxed Telegram boundary, the lazy Authorization end, YAML key
//! columns, the stream's in-line cut), run against the running redactor.
//! Each test is named by what it proves; the comments of the first eight
//! say what was broken then (all fixed since: the glued rule runs in a
//! URL's user name and in `first_token` too, every token removal is
//! followed by `tokens_inside`, the Telegram rule knows percent-encoded
//! bytes and takes 35 bytes before any `-`/`_`, and a YAML comment may
//! follow the colon's blank).

use aromba_redact::{Limits, Redactor, Stream, redact};
use aromba_testkit::redaction::keys::{
    AWS, AWS2, GITHUB, GOOGLE, JWT, OPENAI, REFRESH, SLACK, TELEGRAM, TELEGRAM_SECRET,
};
use aromba_testkit::redaction::{once_is_enough, short};

fn text(input: &str) -> String {
    String::from_utf8(redact(input.as_bytes()).text).expect("UTF-8")
}

/// The middle 12 bytes of `secret` (no prefix) must not be in `out`.
fn assert_gone(input: &str, secret: &str) {
    let out = text(input);
    let mid = secret.len() / 2;
    let piece = &secret[mid - 6..mid + 6];
    assert!(!out.contains(piece), "{piece:?} survived: {}", short(&out));
}

fn stream_with(input: &[u8], limits: Limits, chunk: usize) -> (Vec<u8>, aromba_redact::Counts) {
    let redactor = Redactor::new();
    let mut s = Stream::with_limits(&redactor, limits);
    let mut out = Vec::new();
    for piece in input.chunks(chunk) {
        s.push(piece, &mut out);
    }
    let counts = s.finish(false, &mut out);
    (out, counts)
}

const SMALL: Limits = Limits {
    window: 256,
    margin: 96,
    max_window: 4096,
};

/// Whole-buffer and stream agree, windows 256/96 and 512/200, pieces of
/// 1, 7, 17 and 4096 bytes, behind pads that move every boundary.
fn stream_agrees(input: &str) {
    for limits in [
        SMALL,
        Limits {
            window: 512,
            margin: 200,
            max_window: 4096,
        },
    ] {
        for pad in [0, 37, 120, 200, 255] {
            let padded = format!("{}\n{input}", "-".repeat(pad));
            let whole = redact(padded.as_bytes());
            for chunk in [1, 7, 17, 4096] {
                let (out, counts) = stream_with(padded.as_bytes(), limits, chunk);
                assert!(
                    out == whole.text && counts == whole.counts,
                    "stream differs: window {}, pad {pad}, chunk {chunk}, input {}",
                    limits.window,
                    short(input)
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Once broken: idempotence.

/// `tokens_between` (a URL's user name) pushes refused candidates but never
/// runs `glued_after_refused`: the first pass keeps `AKIA…EXAMPLEghp_…` in
/// the user name; the second pass, whose URL password is a marker, reads
/// the user name with the main loop, which removes the glued pair.
#[test]
fn glued_keys_in_a_url_user_name_are_removed_by_one_pass() {
    let inputs = [
        format!("https://{AWS}{GITHUB}:x-oauth-basic@github.com/a\n"),
        format!("https://{GOOGLE}{OPENAI}:x@github.com/a\n"),
        format!("https://{AWS}{AWS2}:x@github.com/a\n"),
        format!("https:\\/\\/{AWS}{AWS2}:x@github.com\\/a\n"),
        format!("https%3A%2F%2F{AWS}{GITHUB}%3Ax%40github.com%2Fa\n"),
        format!("{{\"url\": \"https://{AWS}{GITHUB}:x@github.com/a\"}}\n"),
    ];
    for input in &inputs {
        once_is_enough(input);
    }
}

/// A bare `Bearer` whose credential ends in a parameter (`=x`) is kept, and
/// `first_token` (no glued rule) sees no token inside it; the main loop
/// then removes the glued pair, and a second pass reads the credential up
/// to their marker (`abcdefgh-`) and removes it.
#[test]
fn glued_keys_inside_a_bare_bearer_parameter_are_judged_as_a_second_pass_judges_them() {
    once_is_enough(&format!("Bearer abcdefgh-{AWS}{GOOGLE}=x\n"));
    once_is_enough(&format!(
        "Bearer 56789sk-AIzaS0123-AbCdEfGhIjKlMnOpQrStUvWx{GOOGLE}=l\n"
    ));
}

// ---------------------------------------------------------------------------
// Once broken: recall.

/// A key removed by the glued rule (`glued_after_refused`) is not followed
/// by `tokens_inside`: when its run took in the next token's prefix, the
/// rest of that token is printed (and a second pass cannot see it).
#[test]
fn a_key_removed_by_the_glued_rule_takes_the_rest_of_the_token_it_took_in() {
    // `ghp_…sk` is the GitHub token; `-proj-…` was the OpenAI key.
    assert_gone(&format!("{AWS}{GITHUB}{OPENAI}\n"), &OPENAI[8..]);
    assert_gone(
        &format!("{{\"note\": \"{AWS}{GITHUB}{OPENAI}\"}}\n"),
        &OPENAI[8..],
    );
    // `AIza…-eyJhbGci…` is the Google key; the JWT's payload and signature stay.
    assert_gone(&format!("{AWS}{GOOGLE}-{JWT}\n"), &JWT[40..]);
    // `sk-…-1` is the OpenAI key; `//09gKx…` stays.
    assert_gone(&format!("{AWS}{OPENAI}-{REFRESH}\n"), &REFRESH[4..]);
    // `ghp_…xoxb` is the GitHub token; `-1234…-AbCd…` stays.
    assert_gone(&format!("{AWS}{GITHUB}{SLACK}\n"), &SLACK[5..]);
}

/// The same in a URL's user name: `tokens_between` removes the GitHub
/// token but never calls `tokens_inside`, so `-proj-…` stays.
#[test]
fn a_token_in_a_url_user_name_takes_the_rest_of_the_token_it_took_in() {
    assert_gone(
        &format!("https://{GITHUB}{OPENAI}:x@github.com/a\n"),
        &OPENAI[8..],
    );
}

/// SECURITY.md: a token is "not glued to a preceding letter or digit (a
/// percent-encoded byte such as `%2F` is no letter)", Telegram included —
/// but the Telegram rule has no percent-encoded boundary: after `%2F`,
/// `%3D`, `%2C` … (a hex letter) its secret is printed.
#[test]
fn a_telegram_token_after_a_percent_encoded_byte_ending_in_a_letter_is_removed() {
    for before in ["%2F", "%3D", "%2C", "%3B", "%0A"] {
        for colon in [":", "%3A"] {
            let input = format!(
                "next=https%3A%2F%2Fexample.com{before}123456789{colon}{TELEGRAM_SECRET}%2FgetMe\n"
            );
            assert_gone(&input, TELEGRAM_SECRET);
        }
    }
}

/// The secret is always 35 bytes; one `-`/`_` after it is a separator, but
/// a word glued after that hides the whole token (`…-prod`, `…_old`).
#[test]
fn a_telegram_token_followed_by_a_dash_and_a_word_is_removed() {
    assert_gone(&format!("bot {TELEGRAM}-prod\n"), TELEGRAM_SECRET);
    assert_gone(&format!("cp {TELEGRAM}_old.txt /tmp\n"), TELEGRAM_SECRET);
}

/// YAML: a plain value on the next line after a comment on the key's line
/// (`password: # the db one`) is kept, though `rest_of_key_line` accepts
/// the comment (same before b70460d).
#[test]
fn a_yaml_value_on_the_next_line_after_a_comment_is_removed() {
    let input = "db:\n  password: # the db one\n    s3cret value 12345\n  user: bob\n";
    let out = text(input);
    assert!(!out.contains("s3cret value"), "{out:?}");
}

// ---------------------------------------------------------------------------
// Once broken: a YAML key's comment, read by no rule but the token rules
// (the fourth fuzz find; corpus input
// `secret_in_a_yaml_comment_before_the_value_left_for_a_second_pass`).

/// The fuzz input minimised by hand (from 152 bytes) to
/// `KEY: #Auth a.ed77777777\n QswCQQGFtlor`: the name `Auth` and its bare
/// value (12 bytes, a digit, a byte no hex digit is) in the comment on the
/// key's line, and a 12-byte plain value on the next line. The first pass
/// removed the value and resumed after it, so of the comment between the
/// key and its value only tokens were judged: `Auth a.ed…` was kept. The
/// second pass, whose key meets its value's marker and is left alone,
/// read the comment with every rule and removed `a.ed…`. A secret in the
/// comment (a password, a URL's, a Telegram token) was printed, and a
/// second pass changed the output. Now every rule reads the comment on the
/// first pass, as far as the value's start.
#[test]
fn a_secret_in_a_yaml_comment_before_the_value_is_removed_by_the_first_pass() {
    let input = "KEY: #Auth a.ed77777777\n QswCQQGFtlor";
    assert_eq!(
        text(input),
        "KEY: #Auth [redacted:secret-assignment]\n [redacted:secret-assignment]"
    );
    once_is_enough(input);
    stream_agrees(input);
}

/// The shape's siblings: other blanks before the comment, tabs, list and
/// key indicators, block indicators, CRLF, blank lines before the value,
/// another keyword in the key's name, a token in it; and every rule's
/// shape in the comment. Each one is removed by the first pass, and a
/// second changes nothing. A quoted key (`"KEY": #…`) or a value indented
/// with a tab heads no value on the next line (as before): its comment is
/// read by every rule all the same.
#[test]
fn every_rule_reads_a_yaml_comment_before_the_value_on_the_first_pass() {
    const S: &str = "[redacted:secret-assignment]";
    let cases = [
        (
            "KEY: # Auth a.ed77777777\n  QswCQQGFtlor\n".to_string(),
            format!("KEY: # Auth {S}\n  {S}\n"),
        ),
        (
            "KEY:  #Auth a.ed77777777\n  QswCQQGFtlor\n".into(),
            format!("KEY:  #Auth {S}\n  {S}\n"),
        ),
        (
            "KEY:\t#Auth\ta.ed77777777\n  QswCQQGFtlor\n".into(),
            format!("KEY:\t#Auth\t{S}\n  {S}\n"),
        ),
        (
            "KEY: \t# Auth a.ed77777777\t\n\tQswCQQGFtlor\n".into(),
            format!("KEY: \t# Auth {S}\t\n\tQswCQQGFtlor\n"),
        ),
        (
            "- KEY: #Auth a.ed77777777\n    QswCQQGFtlor\n".into(),
            format!("- KEY: #Auth {S}\n    {S}\n"),
        ),
        (
            "  - KEY: # Auth a.ed77777777\n      QswCQQGFtlor\n".into(),
            format!("  - KEY: # Auth {S}\n      {S}\n"),
        ),
        (
            "? KEY: #Auth a.ed77777777\n    QswCQQGFtlor\n".into(),
            format!("? KEY: #Auth {S}\n    {S}\n"),
        ),
        (
            "\"KEY\": #Auth a.ed77777777\n  QswCQQGFtlor\n".into(),
            format!("\"KEY\": #Auth {S}\n  QswCQQGFtlor\n"),
        ),
        (
            "'KEY': # Auth a.ed77777777\n  QswCQQGFtlor\n".into(),
            format!("'KEY': # Auth {S}\n  QswCQQGFtlor\n"),
        ),
        (
            "KEY: | # Auth a.ed77777777\n  QswCQQGFtlor\n".into(),
            format!("KEY: | # Auth {S}\n  {S}\n"),
        ),
        (
            "KEY: >-2 #Auth a.ed77777777\n  QswCQQGFtlor\n  more lines\n".into(),
            format!("KEY: >-2 #Auth {S}\n  {S}\n"),
        ),
        (
            "KEY: #Auth a.ed77777777\r\n QswCQQGFtlor\r\n".into(),
            format!("KEY: #Auth {S}\r\n {S}\r\n"),
        ),
        (
            "KEY: #Auth a.ed77777777\n\n   \n  QswCQQGFtlor\nnext: 1\n".into(),
            format!("KEY: #Auth {S}\n\n   \n  {S}\nnext: 1\n"),
        ),
        (
            "KEYTOKEN: #Auth a.ed77777777\n  QswCQQGFtlor\n".into(),
            format!("KEYTOKEN: #Auth {S}\n  {S}\n"),
        ),
        // The name's second keyword does not read the comment as its value.
        (
            "KEYTOKEN: #abcdefghijklmnopq\n  QswCQQGFtlor\n".into(),
            format!("KEYTOKEN: #abcdefghijklmnopq\n  {S}\n"),
        ),
        (
            format!("api_key-{GITHUB}: # pass a.ed77777777\n  QswCQQGFtlor\n"),
            format!("api_key-[redacted:github-token]: # pass {S}\n  {S}\n"),
        ),
        (
            "KEY: # Auth a.ed77777777 KEY: # Auth b.ed77777777\n  QswCQQGFtlor\n".into(),
            format!("KEY: # Auth {S} KEY: # Auth {S}\n  {S}\n"),
        ),
        (
            "KEY: # pass=abcdefghijkl\n  QswCQQGFtlor\n".into(),
            format!("KEY: # pass={S}\n  {S}\n"),
        ),
        (
            "KEY: # \"password\": \"two words here\"\n  QswCQQGFtlor\n".into(),
            format!("KEY: # \"password\": \"{S}\"\n  {S}\n"),
        ),
        (
            "KEY: # Server=db;Password=two words;\n  QswCQQGFtlor\n".into(),
            format!("KEY: # Server=db;Password={S};\n  {S}\n"),
        ),
        (
            "KEY: # see redis://u:abcdefghijk1@host/0\n  QswCQQGFtlor\n".into(),
            format!("KEY: # see redis://u:[redacted:url-password]@host/0\n  {S}\n"),
        ),
        (
            "KEY: # see https:\\/\\/u:abcdefghijk1@host\\/0\n  QswCQQGFtlor\n".into(),
            format!("KEY: # see https:\\/\\/u:[redacted:url-password]@host\\/0\n  {S}\n"),
        ),
        (
            "KEY: # next=https%3A%2F%2Fadmin%3Aabcdefghijk1%40host\n  QswCQQGFtlor\n".into(),
            format!("KEY: # next=https%3A%2F%2Fadmin%3A[redacted:url-password]%40host\n  {S}\n"),
        ),
        (
            format!("KEY: # bot{TELEGRAM}/getMe\n  QswCQQGFtlor\n"),
            format!("KEY: # bot[redacted:telegram-bot-token]/getMe\n  {S}\n"),
        ),
        (
            "KEY: # Authorization: Bearer abcd1234efgh5678\n  QswCQQGFtlor\n".into(),
            format!("KEY: # Authorization: Bearer [redacted:auth-header]\n  {S}\n"),
        ),
        (
            "KEY: # Bearer abcd1234efgh5678\n  QswCQQGFtlor\n".into(),
            format!("KEY: # Bearer [redacted:auth-header]\n  {S}\n"),
        ),
        (
            format!("KEY: # {GOOGLE}-{OPENAI}\n  QswCQQGFtlor\n"),
            format!("KEY: # [redacted:google-key][redacted:openai-key]\n  {S}\n"),
        ),
    ];
    for (input, want) in &cases {
        assert_eq!(&text(input), want, "{input:?}");
        once_is_enough(input);
    }
    stream_agrees(&cases[0].0);
    stream_agrees(&cases[21].0);
}

// ---------------------------------------------------------------------------
// Once over-redaction (the escape's digits taken as the bot id's).

/// The relaxed Telegram boundary let the bot id run back into the digits
/// of a percent-encoded byte (`%22`, `%20`, `%40`): the encoding was broken
/// (`%[redacted:…]`), and with an 11- or 12-digit id the 13 digits refused
/// the token and its secret was printed.
#[test]
fn a_telegram_token_after_a_percent_encoded_digit_byte_leaves_the_escape_whole() {
    let out = text(&format!("data=%22{TELEGRAM}%22\n"));
    assert!(out.starts_with("data=%22[redacted:"), "{out:?}");
    assert_gone(
        &format!("data=%2212345678901%3A{TELEGRAM_SECRET}%22\n"),
        TELEGRAM_SECRET,
    );
}

// ---------------------------------------------------------------------------
// What held (kept as guards).

/// The glued rule in the main loop, in the contexts where only token rules
/// apply: every pair removed, once is enough, and the stream agrees.
#[test]
fn glued_pairs_and_chains_in_plain_contexts_are_removed_once() {
    let after = [OPENAI, GITHUB, AWS2, GOOGLE, TELEGRAM, SLACK];
    for first in [AWS, GOOGLE] {
        for second in after {
            for (before, end) in [("", "\n"), ("{\"v\": \"", "\"}\n"), ("x ", " y\n")] {
                let input = format!("{before}{first}{second}{end}");
                once_is_enough(&input);
            }
        }
    }
    let mut chain = String::new();
    for _ in 0..20 {
        chain.push_str(AWS);
        chain.push_str(GOOGLE);
    }
    chain.push('\n');
    let out = text(&chain);
    assert!(
        !out.contains("IOSFODNN") && !out.contains("V8bN2kLm"),
        "{}",
        short(&out)
    );
    once_is_enough(&chain);
    stream_agrees(&chain);
}

/// Telegram tokens next to every key and separator: removed once, same in
/// the stream; clock times and short id:word shapes are kept.
#[test]
fn telegram_tokens_glued_to_keys_are_removed_and_ordinary_colons_kept() {
    for sep in ["-", "_", "", " ", "/"] {
        for key in [GOOGLE, OPENAI, AWS, GITHUB] {
            let input = format!("{key}{sep}{TELEGRAM}\n{TELEGRAM}{sep}{key}\n");
            assert_gone(&input, TELEGRAM_SECRET);
            once_is_enough(&input);
        }
    }
    stream_agrees(&format!("{GOOGLE}-{TELEGRAM}-{OPENAI}\n"));
    for kept in [
        "Dec 02 04:14:53 host sshd[1234567]: Accepted\n",
        "build_1234567:Abc done\n",
        "id 1234567:AAAA short\n",
        "uuid 123e4567-e89b-12d3-a456-426614174000:abcdef\n",
    ] {
        assert_eq!(text(kept), kept);
    }
}

/// `tokens_inside` hits: markers and counts agree, output well formed.
#[test]
fn tokens_inside_removals_count_one_marker_each() {
    for input in [
        format!("{GITHUB}{OPENAI}\n"),
        format!("{OPENAI}-{JWT}\n"),
        format!("{OPENAI}-{REFRESH}\n"),
        format!("{JWT}.{JWT}\n"),
    ] {
        let once = redact(input.as_bytes());
        let out = String::from_utf8(once.text).unwrap();
        assert_eq!(
            out.matches("[redacted:").count() as u64,
            once.counts.total(),
            "{out:?}"
        );
        once_is_enough(&input);
        stream_agrees(&input);
    }
}
