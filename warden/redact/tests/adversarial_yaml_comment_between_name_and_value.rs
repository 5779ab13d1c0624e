//! The attack round on fabb5ed (`between_name_and_value` / `scan_span`:
//! every rule reads the bytes between a secret-named key and its value on
//! the first pass, e.g. a YAML comment between `key:` and a value on the
//! next line), run against the running redactor.
//!
//! What was tried:
//! - every rule's shape in the comment, under every kind of key name
//!   (`password`, `pass`, `secret`, `token`, `api_key`, `Pwd`, several
//!   keywords in one name `key.token.secret`), with list and key
//!   indicators, block indicators, tabs, CRLF, blank lines (also `\r\n`
//!   and whitespace-only) before the value: held;
//! - nested chains `KEY: # key: # key: … # pass X`, and keys in the
//!   comment whose own value is a bearer, a `Basic` credential, a quoted
//!   passphrase, an assignment quoted whole, a connection string, a JSON
//!   `name`/`value` pair, an option, a URL whose password holds `#`, a
//!   percent-encoded Telegram token, a Bot API URL, a token glued to
//!   another: held;
//! - a value the key's rule refuses (a path, a short value, a list, a
//!   mask): the comment is judged by the main loop, as before: held;
//! - a token inside the key's name with a second keyword after it: on one
//!   line held; as a YAML key, an idempotence break (finding 1, pre-existing:
//!   the parent commit breaks the same way, and the new doc comment's "the
//!   name's other keywords ... name the same name" does not hold there);
//! - a plain value longer than the YAML rule's 256-line window followed by
//!   a line shaped like a mapping or list item: idempotence break (finding
//!   2, pre-existing), and a block scalar's lines past the window kept
//!   (finding 3, pre-existing, undocumented cap);
//! - an armor line on the key's line (`password: # -----BEGIN PRIVATE
//!   KEY-----`): the key block cuts the segment, so the first pass never
//!   sees the value on the next line; a second pass removes it (finding 4,
//!   pre-existing);
//! - comments elsewhere between a name and its value: a comment line
//!   between `password:` and its indented value (finding 5), a comment
//!   after `- name: API_KEY` or a comment line before its `value:`
//!   (finding 6): the value is printed (pre-existing, realistic in
//!   hand-written YAML shown by `cat`);
//! - quoted keys: `"password": |` then the value (finding 7, low: no
//!   `kubectl`, `helm get values`, `docker inspect` or ansible output
//!   quotes a key like this; hand-written YAML does); a quoted key's
//!   plain value on the next line is kept by design (held, exact output);
//! - a YAML anchor or tag before an inline value (`POSTGRES_PASSWORD: &pw
//!   s3cr3t…`, finding 8, pre-existing);
//! - the stream with default limits fed a key, more than its 64 KiB margin
//!   of whitespace lines, then the value: the stream prints the value the
//!   whole-buffer redactor removes (finding 9, pre-existing, command-line
//!   filter only);
//! - ~3,000 generated YAML-shaped inputs around the new code (key line,
//!   comment made of every rule's pieces, blank lines, value lines, markers),
//!   through `invariants::check` and, one in ten, the stream: no break and no
//!   panic outside the shapes above (240,000 more in a release scratch run);
//! - time: 1 MiB hostile lines in the comment and the name (keywords,
//!   `key: # ` chains, `Authorization:`, glued keys, Telegram colons, `sk-`,
//!   `eyJ`, `%3A`, long names, 255 blank lines of 4 KiB, key+value pairs
//!   repeated, nested block scalars whose values are refused): all under
//!   100 ms in release but `a://b:c@` repeated (about 0.6 s with or without
//!   the key in front: the known URL-userinfo cost SECURITY.md names; the
//!   change adds nothing to it).
//!
//! All nine findings are fixed; each finding's test says how, and the
//! generated inputs and the shapes at the end hold the fixes together.

use aromba_redact::{Limits, Redactor, Stream, redact};
use aromba_redact_corpus::invariants::check;
use aromba_testkit::redaction::keys::{AWS, GITHUB, GOOGLE, OPENAI, TELEGRAM};
use aromba_testkit::redaction::{Rng, once_is_enough, short};

const S: &str = "[redacted:secret-assignment]";

/// Windows far smaller than the defaults: a construct crosses many cuts.
const SMALL: Limits = Limits {
    window: 256,
    margin: 96,
    max_window: 4096,
};

fn text(input: &str) -> String {
    String::from_utf8(redact(input.as_bytes()).text).expect("UTF-8")
}

fn stream_with(input: &[u8], limits: Limits, chunk: usize) -> Vec<u8> {
    let redactor = Redactor::new();
    let mut s = Stream::with_limits(&redactor, limits);
    let mut out = Vec::new();
    for piece in input.chunks(chunk) {
        s.push(piece, &mut out);
    }
    s.finish(false, &mut out);
    out
}

/// Whole buffer and stream agree (small windows, pieces of 1 and 7 bytes,
/// pads that move every boundary).
fn stream_agrees(input: &str) {
    for pad in [0, 37, 120, 200] {
        let padded = format!("{}\n{input}", "-".repeat(pad));
        let whole = redact(padded.as_bytes()).text;
        for chunk in [1, 7] {
            assert!(
                stream_with(padded.as_bytes(), SMALL, chunk) == whole,
                "stream differs: pad {pad}, chunk {chunk}, input {}",
                short(input)
            );
        }
    }
}

fn holds(input: &str, want: &str) {
    assert_eq!(text(input), want, "{input:?}");
    once_is_enough(input);
    check(input.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
}

// ---------------------------------------------------------------------------
// Held: every rule reads the comment, whatever the key's name.

#[test]
fn every_rule_reads_the_comment_under_every_kind_of_key_name() {
    let names = [
        "KEY",
        "password",
        "pass",
        "secret",
        "token",
        "api_key",
        "key.token.secret",
        "PASSWORD",
        "Pwd",
        "xkey",
    ];
    for name in names {
        for (comment, want) in [
            ("# pass=abcdefghijkl1", format!("# pass={S}")),
            ("#pass=abcdefghijkl1", format!("#pass={S}")),
            ("# Auth a.ed77777777", format!("# Auth {S}")),
            (
                "# postgres://app:Hx7#kLq92@db/app",
                "# postgres://app:[redacted:url-password]@db/app".to_string(),
            ),
        ] {
            let input = format!("{name}: {comment}\n  QswCQQGFtlor\n");
            holds(&input, &format!("{name}: {want}\n  {S}\n"));
        }
    }
    stream_agrees("key.token.secret: # pass abcdefghijkl1\n  QswCQQGFtlor\n");
}

#[test]
fn every_rule_shape_in_the_comment_is_removed_by_the_first_pass() {
    let cases = [
        (
            "password: # pass: \"two words here\"\n  QswCQQGFtlor\n".to_string(),
            format!("password: # pass: \"{S}\"\n  {S}\n"),
        ),
        (
            "password: # \"SMTP_PASSWORD=two words 42\"\n  QswCQQGFtlor\n".into(),
            format!("password: # \"SMTP_PASSWORD={S}\"\n  {S}\n"),
        ),
        (
            "password: # {\"name\": \"DB_PASSWORD\", \"value\": \"two words here\"}\n  QswCQQGFtlor\n"
                .into(),
            format!(
                "password: # {{\"name\": \"DB_PASSWORD\", \"value\": \"{S}\"}}\n  {S}\n"
            ),
        ),
        (
            "password: # --password hunter2hunter2\n  QswCQQGFtlor\n".into(),
            format!("password: # --password {S}\n  {S}\n"),
        ),
        (
            "password: # 123456789%3AAAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1\n  QswCQQGFtlor\n".into(),
            format!("password: # [redacted:telegram-bot-token]\n  {S}\n"),
        ),
        (
            format!("password: # https://api.telegram.org/bot{TELEGRAM}/getMe\n  QswCQQGFtlor\n"),
            format!(
                "password: # https://api.telegram.org/bot[redacted:telegram-bot-token]/getMe\n  {S}\n"
            ),
        ),
        (
            "password: | # Bearer abcdefgh12345678\n  QswCQQGFtlor\n  second line\n".into(),
            format!("password: | # Bearer [redacted:auth-header]\n  {S}\n"),
        ),
        (
            "- password: # Authorization: Bearer abcd1234efgh5678\r\n    QswCQQGFtlor\r\n".into(),
            format!("- password: # Authorization: Bearer [redacted:auth-header]\r\n    {S}\r\n"),
        ),
        (
            "KEY: # Bearer abcdefgh=\n  QswCQQGFtlor\n".into(),
            format!("KEY: # Bearer [redacted:auth-header]\n  {S}\n"),
        ),
        (
            "KEY: # \"token\": \"Basic abcdefgh12345678\n  QswCQQGFtlor\n".into(),
            format!("KEY: # \"token\": \"Basic [redacted:auth-header]\n  {S}\n"),
        ),
        (
            "KEY: # Authorization: Bearer\n  QswCQQGFtlor\n".into(),
            format!("KEY: # Authorization: Bearer\n  {S}\n"),
        ),
        (
            format!("KEY: # pass={GOOGLE}\n  QswCQQGFtlor\n"),
            format!("KEY: # pass=[redacted:google-key]\n  {S}\n"),
        ),
        (
            format!("KEY: # pass=/run/x/y.{AWS}\n  QswCQQGFtlor\n"),
            format!("KEY: # pass=/run/x/y.[redacted:aws-key]\n  {S}\n"),
        ),
        (
            format!("KEY: # pass=/run/secrets/x/{AWS}\n  QswCQQGFtlor\n"),
            format!("KEY: # pass={S}\n  {S}\n"),
        ),
        (
            format!("password: # {GOOGLE}-{OPENAI}\n  QswCQQGFtlor\n"),
            format!("password: # [redacted:google-key][redacted:openai-key]\n  {S}\n"),
        ),
        (
            format!("password: # {AWS}AKIAIOSFODNN7EXAMPLF\n  QswCQQGFtlor\n"),
            format!("password: # [redacted:aws-key][redacted:aws-key]\n  {S}\n"),
        ),
        (
            format!("password: # {GITHUB}\n  QswCQQGFtlor\n"),
            format!("password: # [redacted:github-token]\n  {S}\n"),
        ),
    ];
    for (input, want) in &cases {
        holds(input, want);
    }
    stream_agrees(&cases[6].0);
    stream_agrees(&cases[7].0);
}

/// Keys in the comment whose own comment holds another key, and blank,
/// CRLF and whitespace-only lines before the value.
#[test]
fn nested_key_chains_in_the_comment_and_blank_lines_before_the_value_hold() {
    holds(
        "KEY: # key: # key: # key: # key: # key: # pass abcdefghijkl1\n  QswCQQGFtlor\n",
        &format!("KEY: # key: # key: # key: # key: # key: # pass {S}\n  {S}\n"),
    );
    holds(
        "password: # key: # token: # secret: # pass abcdefghijkl1\n\n\r\n  \n  QswCQQGFtlor\n",
        &format!("password: # key: # token: # secret: # pass {S}\n\n\r\n  \n  {S}\n"),
    );
    holds(
        "key: # key2: abcdefghijklmn # key3: # pass abcdefghijkl1\n  QswCQQGFtlor\n",
        &format!("key: # key2: {S} # key3: # pass {S}\n  {S}\n"),
    );
    // The comment's key is no YAML key (text before it on its line): its
    // value is the comment's rest, not the next line.
    holds(
        "key: # key2:\n  key3: # pass abcdefghijkl1\n    QswCQQGFtlor\n",
        &format!("key: # key2:\n  key3: # pass {S}\n    {S}\n"),
    );
    stream_agrees(
        "password: # key: # token: # secret: # pass abcdefghijkl1\n\n\r\n  \n  QswCQQGFtlor\n",
    );
}

/// When the key's rule refuses its value, the main loop reads the comment,
/// as before the change.
#[test]
fn a_refused_value_leaves_the_comment_to_the_main_loop() {
    holds(
        "password: # pass abcdefghijkl1\n  short\n",
        &format!("password: # pass {S}\n  short\n"),
    );
    holds(
        "password: # pass abcdefghijkl1\n  - item\n",
        &format!("password: # pass {S}\n  - item\n"),
    );
    holds(
        "password: # pass abcdefghijkl1\n  ********\n",
        &format!("password: # pass {S}\n  ********\n"),
    );
    holds(
        "password: # abcdefghijklmnop\n  /run/secrets/db/password\n",
        "password: # abcdefghijklmnop\n  /run/secrets/db/password\n",
    );
}

/// A token in the name before a second keyword, on one line: the second
/// pass's shorter name meets the same operator and the value's marker.
#[test]
fn a_token_in_the_name_before_a_second_keyword_holds_on_one_line() {
    holds(
        &format!("KEY_{AWS}.token=abcdefghijklmn\n"),
        &format!("KEY_[redacted:aws-key].token={S}\n"),
    );
    holds(
        &format!("KEY_{AWS}.token abcdefghijkl1\n"),
        &format!("KEY_[redacted:aws-key].token {S}\n"),
    );
    holds(
        &format!("KEY_{AWS}.token: abcdefghijklmn\n"),
        &format!("KEY_[redacted:aws-key].token: {S}\n"),
    );
    // A comment that is no value alone (a blank inside) holds as a YAML key.
    holds(
        &format!("KEY_{AWS}.token: # x\n  value123456789\n"),
        &format!("KEY_[redacted:aws-key].token: # x\n  {S}\n"),
    );
}

/// A quoted key's plain value on the next line is no value (by design,
/// SECURITY.md); its comment is read all the same.
#[test]
fn a_quoted_keys_plain_value_on_the_next_line_is_kept_by_design() {
    holds(
        "\"password\":\n  s3cretvalue1234\n",
        "\"password\":\n  s3cretvalue1234\n",
    );
    holds(
        "\"KEY\": # Auth a.ed77777777\n  QswCQQGFtlor\n",
        &format!("\"KEY\": # Auth {S}\n  QswCQQGFtlor\n"),
    );
}

// ---------------------------------------------------------------------------
// Held: generated inputs around the new code.

fn generated(r: &mut Rng) -> String {
    let names = [
        "KEY",
        "password",
        "api_key-ghp_R4nd0mG1tHubT0k3nW1thThirtySixChars",
        "KEYTOKEN",
        "db.pass",
        "x_token_y",
        "Authorization",
        "name",
        "secret",
        "tokenAIzaSyDq3xV8bN2kLmP0rT5wYzA1cE4gH7jK9oQ",
        "sid",
        "Bearer",
        "basic",
    ];
    let words = [
        "Auth a.ed77777777",
        "pass=abcdefghijkl",
        "key: ",
        "KEY: # ",
        "#",
        GITHUB,
        AWS,
        GOOGLE,
        OPENAI,
        TELEGRAM,
        "redis://u:abcdefghijk1@host/0",
        "https://u:p w@h/x",
        "Bearer abcd1234efgh5678",
        "Authorization: Basic",
        "Authorization:",
        S,
        "\"password\": \"",
        "name: DB_PASSWORD",
        "\"",
        "'",
        "%3A",
        "\\/\\/",
        "1//0",
        "AKIAIOSFODNN7",
        "eyJ",
        "123456789",
        ":AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1",
        "token",
        "=",
        ":",
        ";",
        "Server=db;Password=two words;",
        "\\u003d",
        "abcdefghijklmnop",
        "-",
        "|",
        "sk-",
        "Bearer",
        "session=",
        "{\"name\": \"API_KEY\",",
        "/run/secrets/a/b",
        "\r",
        "@h",
    ];
    let values = [
        "QswCQQGFtlor",
        GITHUB,
        AWS,
        S,
        "- a",
        "a: b",
        "#x",
        "/run/secrets/x/y",
        "https://u:abcdefghijk@h/x",
        "Bearer abcdefgh1234",
        "****",
        "sha256:9f86d081884c7d659a2feaa0c55ad015",
        "abc",
        "two words here",
        "\"quoted value 123\"",
        "value: abcdefghijklmn",
        "\"value\":\"abcdefghijklmn\"}",
        "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1",
        ":AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1",
        "@host/0",
        "KEY: #c",
        "password: |",
    ];
    let seps = ["", " ", " ", "\t", "\r", "  "];
    let mut s = String::new();
    if r.below(4) == 0 {
        s.push_str(r.pick(&["prefix line\n", "a: b\n", "KEY: x\n", "  \n"]));
    }
    s.push_str(r.pick(&["", " ", "  ", "   "]));
    s.push_str(r.pick(&["", "- ", "? ", "- ? ", "-\t"]));
    let quote = r.pick(&["", "", "", "\"", "'"]);
    s.push_str(quote);
    s.push_str(r.pick(&names));
    s.push_str(quote);
    s.push(':');
    s.push_str(r.pick(&["", "", " |", " >-", " |2+", " >", "|"]));
    s.push_str(r.pick(&["", " ", "  ", "\t", " \t"]));
    if r.below(5) != 0 {
        s.push('#');
        s.push_str(r.pick(&["", " ", "  "]));
        for _ in 0..r.below(5) {
            s.push_str(r.pick(&words));
            s.push_str(r.pick(&seps));
        }
    }
    if r.below(6) == 0 {
        s.push('\r');
    }
    s.push('\n');
    for _ in 0..r.below(3) {
        s.push_str(r.pick(&["", "  ", "\t", " \r", "\r", "      "]));
        s.push('\n');
    }
    for _ in 0..1 + r.below(3) {
        s.push_str(r.pick(&["", " ", "  ", "    ", "\t", "      "]));
        for _ in 0..1 + r.below(2) {
            s.push_str(r.pick(&values));
            s.push_str(r.pick(&seps));
        }
        if r.below(5) == 0 {
            s.push('\r');
        }
        s.push('\n');
    }
    if r.below(3) == 0 {
        s.push_str(r.pick(&["next: 1\n", "  other: 2\n", "KEY: abcdefghijklmn\n"]));
    }
    if r.below(8) == 0 {
        s.pop();
    }
    s
}

/// 3,000 inputs from `generate` (seeded): each passes the invariants, and
/// every `stream_every`-th is streamed alike in pieces of each of `chunks`.
fn generated_hold(
    seed: u64,
    generate: fn(&mut Rng) -> String,
    stream_every: usize,
    chunks: &[usize],
) {
    let mut r = Rng(seed);
    for i in 0..3000 {
        let input = generate(&mut r);
        check(input.as_bytes()).unwrap_or_else(|e| panic!("#{i}: {e}"));
        if i % stream_every == 0 {
            let padded = format!("{}\n{input}", "-".repeat(90));
            let whole = redact(padded.as_bytes()).text;
            for &chunk in chunks {
                assert!(
                    stream_with(padded.as_bytes(), SMALL, chunk) == whole,
                    "#{i}: stream differs for {input:?}"
                );
            }
        }
    }
}

#[test]
fn generated_yaml_comments_between_name_and_value_are_idempotent_and_streamed_alike() {
    generated_hold(0x9e37_79b9_7f4a_7c15, generated, 10, &[7]);
}

// ---------------------------------------------------------------------------
// Held: time. A hostile mebibyte around the new recursion costs no more
// than its length (release only: a debug build is 10–30 times slower).

fn mib(head: &str, unit: &str, tail: &str) -> String {
    let n = ((1usize << 20) - head.len() - tail.len()) / unit.len();
    format!("{head}{}{tail}", unit.repeat(n))
}

#[test]
fn a_hostile_mebibyte_in_the_comment_or_the_name_is_redacted_in_linear_time() {
    let v = "\n  QswCQQGFtlor\n";
    let mut shapes = vec![
        mib("KEY: # ", "Auth a.ed77777777 ", v),
        mib("", "KEY: # Auth a.ed77777777\n  QswCQQGFtlor\n", ""),
        mib("KEY: # ", "key: ", v),
        mib("KEY: # ", "key: # ", v),
        mib("KEY: #", "KEY:#", v),
        mib("KEY: # ", "Authorization: ", v),
        mib("KEY: # ", "key=", v),
        mib("KEY: # ", "sk-", v),
        mib("KEY: # ", GOOGLE, v),
        mib("KEY: # ", AWS, v),
        mib("KEY: # ", "123456:A", v),
        mib("KEY: # ", "eyJ", v),
        mib("KEY: # ", "123456%3AA", v),
        mib("KEY: # ", "Bearer ", v),
        mib("KEY: # ", "\"password\": \"", v),
        mib("", "key", ": # c\n  QswCQQGFtlor\n"),
        mib("", "key_", ": # c\n  QswCQQGFtlor\n"),
        mib("Authorization: ", "key", " abcdefgh\n"),
        mib("KEY: |\n", "  key: # pass a.ed77777777\n", ""),
        format!(
            "KEY: # c\n{}  QswCQQGFtlor\n",
            format!("{}\n", " ".repeat(4096)).repeat(255)
        ),
        // The fixes of the findings below: an armor line in a key's
        // comment, comment lines before a value, Kubernetes pairs with
        // comments, a name after a marker, anchors, a value past the window.
        mib("", "password: # -----BEGIN PRIVATE KEY-----\n", ""),
        mib(
            "",
            "x: # -----BEGIN PRIVATE KEY-----\n  ",
            "\n  QswCQQGFtlor\n",
        ),
        mib("password:\n", "  # c\n", "  QswCQQGFtlor\n"),
        mib("", "password:\n  # c\n", "  QswCQQGFtlor\n"),
        mib(
            "",
            "- name: API_KEY # c\n    # c\n",
            "    value: QswCQQGFtlor\n",
        ),
        mib("", "[redacted:aws-key]key: ", "\n  QswCQQGFtlor\n"),
        mib(
            "",
            "KEY_[redacted:aws-key]",
            ".token: # c\n  QswCQQGFtlor\n",
        ),
        mib("secret: |\n", "  line-Vq7xRm2pLk9sWd4z\n", ""),
        mib("password:\n", "  Vq7xRm2pLk9sWd4z\n", ""),
        mib("KEY: &", "a", " QswCQQGFtlor\n"),
        mib("", "KEY: !!str &a ", "QswCQQGFtlor\n"),
    ];
    // Nested block scalars, each value refused (it starts with a scheme), so
    // each key reads the lines below it.
    let mut pyramid = String::new();
    while pyramid.len() < 1 << 20 {
        for i in 0..256 {
            pyramid.push_str(&format!("{}KEY: # Auth a.ed77777777\n", " ".repeat(2 * i)));
            pyramid.push_str(&format!(
                "{}a://{}\n",
                " ".repeat(2 * i + 1),
                "x".repeat(1500)
            ));
        }
    }
    pyramid.truncate(1 << 20);
    shapes.push(pyramid);
    for input in &shapes {
        if cfg!(debug_assertions) {
            // Still run a slice of each in debug: no panic, idempotent.
            let cut = &input[..input.len().min(16 << 10)];
            let _ = check(cut.as_bytes());
            continue;
        }
        let _ = redact(input.as_bytes());
        let best = (0..3)
            .map(|_| {
                let t = std::time::Instant::now();
                let _ = redact(input.as_bytes());
                t.elapsed()
            })
            .min()
            .expect("three runs");
        assert!(
            best.as_millis() < 200,
            "{} ms for {}",
            best.as_millis(),
            short(input)
        );
    }
}

// ---------------------------------------------------------------------------
// Findings.

/// Finding 1 (idempotence; pre-existing, but it contradicts the new doc
/// comment: "the name's other keywords are passed over, as on a second
/// pass they name the same name and meet the same marker"). A token inside
/// a YAML key's name splits the name on a second pass: the first pass
/// removes the token (`between_name_and_value` from the keyword on) and the
/// value on the next line, and passes over `token`; the second pass reads
/// `.token:` as a name of its own, which is no YAML key (text before it on
/// its line), so it judges the comment as the inline value and removes it.
/// Also with `ghp_…` and `pass`. Should: one pass leaves nothing for a
/// second (the first pass judges a keyword after a removed token in the
/// name as a name of its own, or the second pass keeps the key's
/// judgement).
///
/// Fixed: a name right after a marker, or right after a removal of the same
/// pass, starts its YAML key where the whole name did (yaml.rs
/// `name_start_past_markers`), so both passes judge one key.
#[test]
fn a_token_inside_a_yaml_keys_name_before_a_second_keyword_is_idempotent() {
    for input in [
        format!("KEY_{AWS}.token: #abcdefghijkl\n  abcdefghijkl\n"),
        format!("KEY-{GITHUB}.pass: #abcdefghijklmnopq\n  value123456789\n"),
        // The token before the first keyword: removed before the name is read.
        format!("x-{GITHUB}.pass: |2\n  # rotated 2024-05\n"),
        format!("- KEY_{AWS}.token: # -----BEGIN PRIVATE KEY-----\n    value123456789\n"),
    ] {
        check(input.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        stream_agrees(&input);
    }
    holds(
        &format!("KEY_{AWS}.token: #abcdefghijkl\n  abcdefghijkl\n"),
        &format!("KEY_[redacted:aws-key].token: #abcdefghijkl\n  {S}\n"),
    );
}

/// Finding 2 (idempotence; pre-existing, yaml.rs). The YAML rule reads at
/// most 256 lines after a key (blank lines count). A plain value that
/// fills them is removed whole; a second pass reads from the marker on,
/// reaches a line shaped like a list item, mapping entry or comment that
/// the first pass never saw, takes the key for a section's head, and so
/// judges the key's comment as an inline value (`KEY: #abcdefghijkl`).
/// Same with 200 blank lines then 56 value lines. Should: idempotent.
///
/// Fixed: a line with a marker ends the walk at once (`Judged`), before any
/// line the first pass did not see; and a value removed whole takes its
/// lines past the window with it (see finding 3).
#[test]
fn a_yaml_value_that_fills_the_line_window_is_idempotent() {
    for tail in ["  - a\n", "  a: b\n", "  #c\n", "  b:\n"] {
        let input = format!("KEY: #abcdefghijkl\n{}{tail}", "  x\n".repeat(256));
        check(input.as_bytes()).unwrap_or_else(|e| panic!("{}", short(&e)));
    }
    let input = format!(
        "KEY: #abcdefghijkl\n{}{}  - a\n",
        "\n".repeat(200),
        "  x\n".repeat(56)
    );
    check(input.as_bytes()).unwrap_or_else(|e| panic!("{}", short(&e)));
    // A plain value longer than the window goes whole, up to the line that
    // ends it.
    let input = format!(
        "KEY: #abcdefghijkl\n{}  - a\n",
        "  Vq7xRm2pLk9sWd4z\n".repeat(300)
    );
    assert_eq!(text(&input), format!("KEY: #abcdefghijkl\n  {S}\n  - a\n"));
    check(input.as_bytes()).unwrap_or_else(|e| panic!("{}", short(&e)));
}

/// Finding 3 (under-redaction; pre-existing, undocumented cap). A block
/// scalar under a secret's name longer than 256 lines: its lines past the
/// 256th are printed. Should: the whole block goes (or SECURITY.md says
/// where it stops).
///
/// Fixed: the window still bounds what is read to judge a value, but a
/// value removed whole takes every line of it past the window too
/// (yaml.rs `value_end_past_window`), read once as the scan resumes after
/// them.
#[test]
fn a_long_block_scalar_under_a_secret_name_goes_whole() {
    let mut input = String::from("secret: |\n");
    for i in 0..300 {
        input.push_str(&format!("  line{i:03}-Vq7xRm2pLk9sWd4z\n"));
    }
    input.push_str("user: bob\n");
    let out = text(&input);
    assert!(!out.contains("line299-Vq7x"), "{}", short(&out));
    assert_eq!(out, format!("secret: |\n  {S}\nuser: bob\n"));
    check(input.as_bytes()).unwrap_or_else(|e| panic!("{}", short(&e)));
    // Streamed with windows smaller than the block: the same.
    let limits = Limits {
        window: 4096,
        margin: 1024,
        max_window: 64 << 10,
    };
    assert!(stream_with(input.as_bytes(), limits, 7) == redact(input.as_bytes()).text);
}

/// Finding 4 (under-redaction on the first pass, and idempotence;
/// pre-existing). An armor line on the key's line (in its comment) is a key
/// block: the scan stops the segment at its BEGIN, so the key's rule never
/// sees the value on the next line, and the value is printed. A second
/// pass, where the block is a marker, removes it. Contrived (an armor line
/// in a comment), but any program that prints a cut key's BEGIN after a
/// secret-named key hides the key's value this way. Should: the value goes
/// on the first pass.
///
/// Fixed: after a removed block that starts in the comment of a YAML key's
/// line, the key is judged as a second pass judges it, its line read on
/// after the block (scan.rs `value_past_block`).
#[test]
fn an_armor_line_on_the_key_line_does_not_hide_the_value_on_the_next_line() {
    let input = "password: # -----BEGIN PRIVATE KEY-----\n  hunter2hunter2\n";
    let out = text(input);
    assert!(!out.contains("hunter2hunter2"), "{out:?}");
    check(input.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    holds(
        "- password: | # x -----BEGIN RSA PRIVATE KEY----- pass abcdefghijkl1\n\n    # c\n    hunter2hunter2\n  user: bob\n",
        &format!("- password: | # x [redacted:private-key] pass {S}\n\n    {S}\n  user: bob\n"),
    );
    // A value the key's rule refuses stays, on both passes.
    holds(
        "password: # -----BEGIN PRIVATE KEY-----\n  - a\n",
        "password: # [redacted:private-key]\n  - a\n",
    );
    stream_agrees(input);
}

/// Found by the redactor's fuzz campaign (kept as the corpus input
/// `armor_end_on_a_comment_line_between_a_key_and_its_value`): finding 4's
/// shape with the armor on a comment line of its own between the key and
/// its value. The key block cut the segment before the value, and the
/// block's segment starts after the key, so the first pass printed the
/// value and a second removed it. The value goes on the first pass now,
/// the key read as a second pass reads it (`value_past_block` looks up
/// from a block on a comment line, over blank and comment lines, for the
/// key; the YAML walk reads the block's lines as its comment line).
#[test]
fn an_armor_line_on_a_comment_line_before_the_value_does_not_hide_the_value() {
    for input in [
        "KEY:\n#-----END PRIVATE-----\n ..xapp-rRouR",
        "password:\n# -----END RSA PRIVATE KEY-----\n  hunter2hunter2\n",
        "password:\n\n  # rotated\n  # -----END RSA PRIVATE KEY-----\n\n  hunter2hunter2\n",
        &format!("token:\n  # old {GITHUB}\n  # -----END PRIVATE KEY-----\n  hunter2hunter2\n"),
        // And one in the key line's comment as well (the campaign's second
        // input, `armor_end_on_the_key_line_and_on_a_comment_line_before_the_value`).
        "KEY: #-----END PRIVATE-----\n#-----END PRIVATE-----\n \u{de}i--\u{de}I--hi--",
        &format!("password: # {GITHUB}\n  # -----END PRIVATE KEY-----\n  hunter2hunter2\n"),
    ] {
        let out = text(input);
        assert!(
            !out.contains("hunter2hunter2") && !out.contains("xapp-rRouR") && !out.contains("hi--"),
            "{out:?}"
        );
        check(input.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        stream_agrees(input);
    }
    holds(
        "password:\n# -----END RSA PRIVATE KEY-----\n  hunter2hunter2\n",
        &format!("password:\n# [redacted:private-key]\n  {S}\n"),
    );
    // A section stays one; a key with its value on its own line keeps
    // judging that value alone.
    holds(
        "password:\n# -----END RSA PRIVATE KEY-----\n  user: bob\n",
        "password:\n# [redacted:private-key]\n  user: bob\n",
    );
    holds(
        "name: bob\n# -----END RSA PRIVATE KEY-----\n  hunter2hunter2\n",
        "name: bob\n# [redacted:private-key]\n  hunter2hunter2\n",
    );
    // In a block scalar a comment line is content: the block is in the
    // value, whose marker is a pass's judgement, on both passes.
    holds(
        "db:\n  password: |\n    # -----END PRIVATE KEY-----\n    hunter2hunter2\n  user: bob\n",
        "db:\n  password: |\n    # [redacted:private-key]\n    hunter2hunter2\n  user: bob\n",
    );
    // A key's lines under a BEGIN in a comment are a block of their own,
    // whose marker ends the reading on both passes (a marker is a pass's
    // judgement): the line after them is judged alone.
    holds(
        "password:\n  # -----BEGIN RSA PRIVATE KEY-----\n  MIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu\n  -----END RSA PRIVATE KEY-----\n  hunter2hunter2\n",
        "password:\n  # [redacted:private-key]\n  [redacted:private-key]\n  hunter2hunter2\n",
    );
}

/// Finding 5 (under-redaction; pre-existing, yaml.rs `heads_a_section`).
/// The change's shape on a line of its own: a comment line between a key
/// and its indented value makes the key a section's head, so the value is
/// printed. YAML reads `hunter2hunter2` as the key's value; hand-written
/// config shown with `cat` has this (a note on when it was rotated).
/// Should: comment lines are passed over like blank ones, and the first
/// line after them decides.
///
/// Fixed: comment lines are passed over before a plain value, as blank ones
/// are, and end it after its first line; in a block scalar they are its
/// content, as YAML reads them.
#[test]
fn a_comment_line_between_a_yaml_key_and_its_value_does_not_keep_the_value() {
    for input in [
        "password:\n  # rotated 2024-05\n  hunter2hunter2\n",
        "KEY: # c\n  # pass abcdefghijkl1\n  hunter2hunter2\n",
        "db:\n  password: |\n    # the prod one\n    hunter2hunter2\n",
        "password:\n# rotated\n\n  hunter2hunter2\n",
    ] {
        let out = text(input);
        assert!(!out.contains("hunter2hunter2"), "{out:?}");
        check(input.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        stream_agrees(input);
    }
    // A comment after the value's first line ends it; a section stays one.
    holds(
        "password:\n  hunter2hunter2\n  # note\nnext: 1\n",
        &format!("password:\n  {S}\n  # note\nnext: 1\n"),
    );
    holds(
        "credentials:\n  # the db\n  username: bob\n  password: x\n",
        "credentials:\n  # the db\n  username: bob\n  password: x\n",
    );
    holds("tokens:\n  # list\n  - a\n", "tokens:\n  # list\n  - a\n");
}

/// Finding 6 (under-redaction; pre-existing, assign.rs `pair_value`).
/// Kubernetes env as people write it: a comment after the secret's name,
/// or a comment line before its `value:`. The `name`/`value` rule wants
/// the `value` key on the very next line with nothing after the name.
/// Should: the value goes.
///
/// Fixed: `pair_value` passes over a comment after the name and up to four
/// comment lines (each at most 256 bytes) before `value:`.
#[test]
fn a_comment_in_a_kubernetes_env_pair_does_not_keep_the_value() {
    for input in [
        "env:\n  - name: API_KEY  # from vault\n    value: Vq7xRm2pLk9sWd4z\n",
        "env:\n  - name: API_KEY\n    # from vault\n    value: Vq7xRm2pLk9sWd4z\n",
        "env:\n  - name: API_KEY # pass abcdefghijkl1\n    # token abcdefghijkl2\n\n    value: Vq7xRm2pLk9sWd4z\n",
    ] {
        let out = text(input);
        assert!(!out.contains("Vq7xRm2pLk9sWd4z"), "{out:?}");
        check(input.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        stream_agrees(input);
    }
    // Not a secret's name: kept.
    holds(
        "env:\n  - name: LOG_LEVEL  # from vault\n    value: debug-verbose-all\n",
        "env:\n  - name: LOG_LEVEL  # from vault\n    value: debug-verbose-all\n",
    );
}

/// Finding 7 (under-redaction; low). A quoted key heads no value on the
/// next lines, by design, so `"password": |` then the block is printed.
/// Judged: `kubectl get secret -o yaml` (data keys match `[-._a-zA-Z0-9]+`
/// and are never quoted; values are inline base64), `helm get values`
/// (go-yaml quotes only keys that would read as another type: `"on"`,
/// `"123"`), `docker inspect` (JSON, values inline) and ansible (JSON, or
/// the YAML callback's unquoted keys) do not write this; hand-written YAML
/// shown with `cat` does. A block indicator after a quoted key is
/// unambiguous (JSON has no `|`), so taking it costs no over-redaction.
/// Should: the block goes.
///
/// Fixed: a quoted key followed by a block indicator heads a value on the
/// next lines (assign.rs `operator_after_name`).
#[test]
fn a_quoted_yaml_key_with_a_block_scalar_does_not_keep_the_value() {
    for input in [
        "\"password\": |\n  s3cret value here\n",
        "\"db-password\": |-\n    hunter2hunter2\n",
        "config:\n  'api_key': >-\n    Vq7xRm2pLk9sWd4z\n",
    ] {
        let out = text(input);
        for secret in ["s3cret value here", "hunter2hunter2", "Vq7xRm2pLk9sWd4z"] {
            assert!(!out.contains(secret), "{out:?}");
        }
        check(input.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        stream_agrees(input);
    }
}

/// Finding 8 (under-redaction; pre-existing, assign.rs `value_span`). A
/// YAML anchor or tag before an inline value: the value starts at `&` (a
/// byte that ends an unquoted value) or at the tag, so nothing or the tag
/// is judged, and the secret is printed. Compose files and CI YAML use
/// anchors to share a value. Should: the anchor or tag is passed over.
///
/// Fixed: after a YAML key's colon, up to two node properties (`&anchor`,
/// `!tag`) followed by a blank or the line's end are passed over
/// (assign.rs `after_yaml_properties`).
#[test]
fn a_yaml_anchor_or_tag_before_the_value_does_not_keep_it() {
    for input in [
        "  POSTGRES_PASSWORD: &pw Vq7xRm2pLk9sWd4z\n",
        "password: !!str Vq7xRm2pLk9sWd4z\n",
        "x-db-password: &dbpw Vq7xRm2pLk9sWd4z\n",
        "password: !!str &a Vq7xRm2pLk9sWd4z\n",
        "password: &pw\n  Vq7xRm2pLk9sWd4z\n",
    ] {
        let out = text(input);
        assert!(!out.contains("Vq7xRm2pLk9sWd4z"), "{out:?}");
        check(input.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        stream_agrees(input);
    }
    // An alias or a short value after an anchor, and an anchor under a
    // name that is no secret's, stay.
    for kept in [
        "password: *pw\n",
        "password: &pw short\n",
        "defaults: &defaults Vq7xRm2pLk9sWd4z\n",
        "token_config: &cfg\n  ttl: 3600\n",
    ] {
        holds(kept, kept);
    }
}

/// Finding 9 (under-redaction in the stream only; pre-existing, the
/// command-line filter, not the Warden's whole-buffer path). The YAML rule
/// reads up to 256 lines after a key, of any length, but the stream's
/// margin is 64 KiB: with more whitespace lines than that between a key and
/// its value, a window judges the key with its value out of sight, writes
/// the key, and the next window sees the value without it. The whole
/// buffer removes the value. Should: the stream agrees with the whole
/// buffer (a key whose value may be past the margin anchors the cut).
///
/// Fixed: a window's cut never goes after the line before a run of blank
/// and comment lines that reaches the window's end (stream.rs `open_tail`):
/// that line and the run are judged again with the next window. A value
/// more than 256 lines after its key (blank and comment lines count) is not
/// read as its value by either (SECURITY.md, Known limits).
#[test]
fn the_stream_agrees_on_a_yaml_value_after_many_whitespace_lines() {
    let pad = "x\n".repeat(((1 << 20) - 40) / 2);
    let input = format!(
        "{pad}password:\n{}  hunter2hunter2\n",
        format!("{}\n", " ".repeat(300)).repeat(250)
    );
    let whole = redact(input.as_bytes()).text;
    assert!(!String::from_utf8_lossy(&whole).contains("hunter2hunter2"));
    let streamed = stream_with(input.as_bytes(), Limits::default(), 4096);
    assert!(
        !String::from_utf8_lossy(&streamed).contains("hunter2hunter2"),
        "the stream printed the value"
    );
    assert!(streamed == whole);
    // Comment lines too, and with small windows.
    let input = format!(
        "password:\n{}  hunter2hunter2\n",
        "  # a comment line of some length\n".repeat(20)
    );
    stream_agrees(&input);
    assert!(!text(&input).contains("hunter2hunter2"));
    // The documented limit: past 256 lines, neither reads the value.
    let input = format!("password:\n{}  hunter2hunter2\n", "\n".repeat(256));
    assert!(text(&input).contains("hunter2hunter2"));
    stream_agrees(&input);
}

// ---------------------------------------------------------------------------
// Held: generated inputs around the fixes of the findings above (comment
// lines before a value, anchors and tags, quoted keys with a block, an armor
// line in the key's comment, Kubernetes pairs with comments, a token in the
// name).

fn generated_fixes(r: &mut Rng) -> String {
    let mut s = String::new();
    if r.below(4) == 0 {
        s.push_str(r.pick(&["prefix line\n", "a: b\n", "  \n", "# c\n"]));
    }
    if r.below(4) == 0 {
        let indent = r.pick(&["", "  ", "    "]);
        s.push_str(&format!(
            "{indent}- name: {}",
            r.pick(&["API_KEY", "DB_PASSWORD", "user"])
        ));
        s.push_str(r.pick(&["", "  # from vault", " #c", " # pass abcdefghijkl1", "#x"]));
        s.push('\n');
        for _ in 0..r.below(4) {
            s.push_str(r.pick(&[
                "    # c\n",
                "  # c\n",
                "\n",
                "    #\n",
                "      # token abcdefghijkl1\n",
            ]));
        }
        s.push_str(&format!(
            "{indent}  value: {}\n",
            r.pick(&[
                "Vq7xRm2pLk9sWd4z",
                "short",
                S,
                "&a Vq7xRm2pLk9sWd4z",
                "\"two words here\""
            ])
        ));
        return s;
    }
    s.push_str(r.pick(&["", "  ", "- ", "  - "]));
    let quote = r.pick(&["", "", "\"", "'"]);
    let name = r.pick(&[
        "password",
        "KEY",
        "api_key",
        "db.pass",
        "secret",
        "note",
        "KEY_AKIAIOSFODNN7EXAMPLE.token",
        "x-ghp_R4nd0mG1tHubT0k3nW1thThirtySixChars.pass",
    ]);
    s.push_str(&format!("{quote}{name}{quote}:"));
    s.push_str(r.pick(&["", " &pw", " !!str", " !!str &a", " &", " !"]));
    s.push_str(r.pick(&["", "", " |", " >-", " |2"]));
    s.push_str(r.pick(&[
        "",
        " ",
        " # c",
        " #abcdefghijkl",
        " # -----BEGIN PRIVATE KEY-----",
        " # x -----BEGIN RSA PRIVATE KEY----- pass abcdefghijkl1",
        " # pass abcdefghijkl1",
        " Vq7xRm2pLk9sWd4z",
    ]));
    s.push_str(r.pick(&["\n", "\n", "\r\n"]));
    for _ in 0..r.below(4) {
        s.push_str(r.pick(&[
            "\n",
            "  # rotated 2024-05\n",
            "# c\n",
            "    # pass abcdefghijkl1\n",
            "  \n",
            "\t# c\n",
            "-----END PRIVATE KEY-----\n",
        ]));
    }
    for _ in 0..r.below(4) {
        s.push_str(r.pick(&["  ", "    ", " ", ""]));
        s.push_str(r.pick(&[
            "hunter2hunter2",
            "short",
            "- a",
            "a: b",
            "# c",
            S,
            "/run/secrets/db/password",
            "two words here",
            "ghp_R4nd0mG1tHubT0k3nW1thThirtySixChars",
        ]));
        s.push('\n');
    }
    if r.below(3) == 0 {
        s.push_str(r.pick(&["next: 1\n", "  other: 2\n", "  - b\n", "  # c\n"]));
    }
    if r.below(8) == 0 {
        s.pop();
    }
    s
}

#[test]
fn generated_shapes_of_the_fixes_are_idempotent_and_streamed_alike() {
    generated_hold(0x2545_f491_4f6c_dd1d, generated_fixes, 5, &[1, 7]);
}

/// Shapes a scratch fuzz run found around the first versions of the fixes
/// (a URL or token in a tag, a property or a Kubernetes comment right
/// before a key block, whose first pass sees the block's start where a
/// second pass sees its marker): each judged alike by both passes.
#[test]
fn shapes_found_around_the_fixes_are_idempotent() {
    for input in [
        "password:!_https://u:abcdefghijk@h/xAKIAIOSFODNN7EXAMPLE\n    AKIAIOSFODNN7EXAMPLE\r\n".to_string(),
        "password: !_https://u:abcdefghijk@h/x\n  Vq7xRm2pLk9sWd4z\n".to_string(),
        format!("token: !abcdefghijkl{GITHUB} Vq7xRm2pLk9sWd4z\n"),
        format!("token: &a-{AWS} Vq7xRm2pLk9sWd4z\n"),
        "token: &-----END PRIVATE KEY-----    abcdefghijkl\n\nabcdefghijkl  ".to_string(),
        "password:&-----END PRIVATE KEY-----!!str #.shortvalue-----END PRIVATE KEY-----\n".to_string(),
        "token: &abc-----BEGIN PRIVATE KEY----- Vq7xRm2pLk9sWd4z\n".to_string(),
        "name: API_KEY\n# x -----BEGIN PRIVATE KEY----- # c\nvalue:     value:    _? short\n".to_string(),
        format!("- name: API_KEY # {GITHUB}\n  value: Vq7xRm2pLk9sWd4z\n"),
        format!("- name: API_KEY # {GITHUB}\n  value: short\n"),
        "\t[redacted:aws-key]name- |\n- a!!str token: !Vq7xRm2pLk9sWd4z_password-----BEGIN PRIVATE KEY----- :x\n".to_string(),
    ] {
        check(input.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        stream_agrees(&input);
    }
}
