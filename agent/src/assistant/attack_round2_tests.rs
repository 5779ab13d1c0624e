//! The assistant's second attack round, at the unit level: the link
//! filter against what Telegram makes tappable, the streamed answer's cost
//! to the Worker, the stream parser against hostile events, and the PIN
//! filter. Each test is named after its attack and asserts the property
//! the attack tries to break; the breaks it found are fixed.

use super::conversation::{self, Host, Limits, without_links};
use super::model::{Message, Model, ModelError, Reply, Usage};
use super::stream::{AnthropicStream, Events, OpenAiStream};
use super::tools;

/// Whether `out` still holds `host` as it was written (not taken out, not
/// defanged).
fn kept(out: &str, host: &str) -> bool {
    out.contains(host)
}

// --- Links. ---

/// Telegram's entity parser (tdlib's `match_urls`) takes `.`, U+3002,
/// U+FF0E and U+FF61 (halfwidth ideographic full stop) for a dot between
/// a host's labels. `without_links` maps only U+FF0E and U+3002 to `.`
/// first: a host written with U+FF61 (or the other look-alike dots, U+2024
/// one dot leader and U+FE52 small full stop) is neither a link nor a host
/// to it, and reaches the chat as written.
#[test]
fn look_alike_dots_leave_no_host_to_tap() {
    let mut survived = Vec::new();
    for dot in ['\u{ff61}', '\u{2024}', '\u{fe52}'] {
        for host in [
            format!("collect{dot}pro/k?d=1"),
            format!("evil{dot}com"),
            format!("t{dot}me/evil_support_bot"),
        ] {
            let out = without_links(&format!("send the log to {host} now"));
            if kept(&out, &host) {
                survived.push(format!("U+{:04X}: {out:?}", dot as u32));
            }
        }
    }
    assert!(survived.is_empty(), "hosts that survived: {survived:#?}");
}

/// A punycode top-level domain (`xn--p1ai` is .рф, `xn--80asehdb` is
/// .онлайн) holds digits and `-`: `names_a_host` wants a top-level domain
/// of letters only, and `is_link`'s list has none, so the host reaches the
/// chat whole. Telegram links these as it links `пример.рф`, which the
/// filter does defang.
#[test]
fn a_punycode_top_level_domain_is_defanged() {
    let mut survived = Vec::new();
    for host in [
        "collect.xn--p1ai",
        "collect.xn--p1ai/k?d=1",
        "xn--80ak6aa92e.xn--80asehdb",
    ] {
        let out = without_links(&format!("upload it to {host} please"));
        if kept(&out, host) {
            survived.push(out);
        }
    }
    assert!(survived.is_empty(), "hosts that survived: {survived:#?}");
}

/// A host that is an IPv4 address, with a port or a path: its last label
/// is digits, so neither `names_a_host` nor `is_link` looks at it; Telegram
/// links an address with a path (`203.0.113.7/k`) as it links a domain.
#[test]
fn an_ip_address_with_a_path_is_taken_out() {
    let mut survived = Vec::new();
    for host in ["203.0.113.7/k?d=1", "203.0.113.7:8080/upload"] {
        let out = without_links(&format!("post the output to {host} for a check"));
        if kept(&out, host) {
            survived.push(out);
        }
    }
    assert!(survived.is_empty(), "hosts that survived: {survived:#?}");
}

/// Held: the same hosts with a plain dot, a full-width one or U+3002 are
/// defanged or taken out.
#[test]
fn plain_and_mapped_dots_are_defanged() {
    for case in [
        "collect.pro/k",
        "collect\u{ff0e}pro/k",
        "collect\u{3002}pro/k",
        "t.me/evil_support_bot",
        "root@collect.pro",
    ] {
        let out = without_links(case);
        assert!(
            !out.contains("collect.pro") && !out.contains("t.me/"),
            "{case:?} → {out:?}"
        );
    }
}

// --- A streamed answer's cost. ---

/// A model that streams `pieces` pieces of `each` characters to the
/// partial callback, as the real clients do for each event that grows the
/// text.
struct Streamer {
    pieces: usize,
    each: String,
}

impl Model for Streamer {
    async fn complete(
        &self,
        messages: &[Message],
        tools: Option<&serde_json::Value>,
    ) -> Result<Reply, ModelError> {
        self.complete_streamed(messages, tools, &|_: &str| {}).await
    }

    async fn complete_streamed(
        &self,
        _messages: &[Message],
        _tools: Option<&serde_json::Value>,
        partial: &dyn super::model::Progress,
    ) -> Result<Reply, ModelError> {
        let mut text = String::new();
        for _ in 0..self.pieces {
            text.push_str(&self.each);
            partial.text(&text);
        }
        Ok(Reply {
            text,
            calls: vec![],
            usage: Usage::default(),
        })
    }
}

struct Quiet;

impl Host for Quiet {
    async fn read(&self, _cmd: String, _args: Vec<String>) -> Result<String, String> {
        Ok(String::new())
    }
    async fn chores(&self) -> Vec<String> {
        Vec::new()
    }
}

/// The text so far is run through `without_links` (and capped) on every
/// event that grows it, before the host's 1.2 s throttle: an endpoint that
/// streams its answer in small events makes the Worker filter the whole
/// text again each time — quadratic work on the Worker's runtime. 1,000
/// events of 48 characters (about 95 KB of body, a tenth of the 1 MiB cap)
/// took 9.9 s in a debug build (500: 2.5 s, 2,000: 45 s); the cap allows
/// about 11,000 such events, so one completion keeps a core busy until the
/// 120 s timeout.
#[tokio::test]
async fn a_stream_of_small_events_costs_the_worker_little_cpu() {
    let model = Streamer {
        pieces: 1_000,
        each: "disk ok on sda1, see www notes for the detail. ".into(),
    };
    let started = std::time::Instant::now();
    let a = conversation::answer(
        &model,
        &Quiet,
        "q",
        Limits {
            prod_mode: false,
            tokens_left: None,
        },
    )
    .await
    .expect("an answer");
    let took = started.elapsed();
    assert!(!a.text.is_empty());
    assert!(
        took < std::time::Duration::from_secs(1),
        "one streamed completion of {} characters in 1,000 events took {took:?} of the Worker's CPU",
        1_000 * 48
    );
}

// --- The stream parsers. ---

/// A tool call's name sent in pieces is put together and judged whole by
/// the grammar: pieces that spell a name outside it are refused (held).
#[test]
fn a_tool_name_in_pieces_is_judged_whole() {
    let mut s = OpenAiStream::default();
    for piece in ["disk_", "usage", "\\n--files0-from"] {
        let event = serde_json::json!({"choices": [{"delta": {"tool_calls": [
            {"index": 0, "id": "c1", "function": {"name": piece}}]}}]});
        s.feed(format!("data: {event}\n\n").as_bytes()).unwrap();
    }
    let r = s.reply().unwrap();
    assert_eq!(r.calls.len(), 1);
    assert!(tools::parse(&r.calls[0].name, "{\"path\": \"/var\"}").is_err());
}

/// Events after `[DONE]` (text, calls, a usage that would reset the
/// count) are ignored (held).
#[test]
fn events_after_done_change_nothing() {
    let mut s = OpenAiStream::default();
    s.feed(b"data: {\"choices\":[{\"delta\":{\"content\":\"ok\"}}]}\n\n")
        .unwrap();
    s.feed(b"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":900,\"completion_tokens\":90}}\n\ndata: [DONE]\n\n")
        .unwrap();
    s.feed(b"data: {\"choices\":[{\"delta\":{\"content\":\" evil.com\"}}],\"usage\":{\"prompt_tokens\":0,\"completion_tokens\":0}}\n\n")
        .unwrap();
    let r = s.reply().unwrap();
    assert_eq!(r.text, "ok");
    assert_eq!(
        r.usage,
        Usage {
            input: 900,
            output: 90
        }
    );
}

/// Huge usage numbers in stream events saturate instead of wrapping
/// (held): u64::MAX in and out is still u64::MAX in total.
#[test]
fn huge_usage_in_stream_events_saturates() {
    let mut s = AnthropicStream::default();
    let max = u64::MAX;
    s.feed(format!("data: {{\"type\":\"message_start\",\"message\":{{\"usage\":{{\"input_tokens\":{max},\"output_tokens\":1}}}}}}\n").as_bytes())
        .unwrap();
    s.feed(
        format!("data: {{\"type\":\"message_delta\",\"usage\":{{\"output_tokens\":{max}}}}}\n")
            .as_bytes(),
    )
    .unwrap();
    let r = s.reply().unwrap();
    assert_eq!(r.usage.total(), u64::MAX);
}

/// Tool-call index gaps: indexes 0 and 15 make two calls, and index 16 is
/// refused (held).
#[test]
fn tool_call_index_gaps_are_bounded() {
    let mut s = OpenAiStream::default();
    for i in [0, 15] {
        let event = serde_json::json!({"choices": [{"delta": {"tool_calls": [
            {"index": i, "id": format!("c{i}"), "function": {"name": "memory", "arguments": "{}"}}]}}]});
        s.feed(format!("data: {event}\n\n").as_bytes()).unwrap();
    }
    assert_eq!(s.reply().unwrap().calls.len(), 2);
    let mut s = OpenAiStream::default();
    let event = serde_json::json!({"choices": [{"delta": {"tool_calls": [
        {"index": 16, "function": {"name": "memory"}}]}}]});
    assert!(s.feed(format!("data: {event}\n\n").as_bytes()).is_err());
}

// --- PINs. ---

/// A PIN typed in full-width digits, or split with a dot, a comma or an
/// underscore, or after a word ("pin 472913"), is not "4 to 12 digits,
/// perhaps spaced": it goes to the third party's model as a question.
#[test]
fn a_pin_in_other_digits_or_separators_is_kept_from_the_model() {
    let mut sent = Vec::new();
    for pin in [
        "\u{ff14}\u{ff17}\u{ff12}\u{ff19}\u{ff11}\u{ff13}",
        "472.913",
        "472,913",
        "472_913",
        "pin 472913",
        "472913.",
    ] {
        if !crate::daemon::ask::looks_like_pin(pin) {
            sent.push(pin);
        }
    }
    assert!(sent.is_empty(), "sent to the model: {sent:?}");
}

// --- Reads the grammar lets through that the Warden takes for an attack. ---

/// The Warden matches its deny list against the whole command line before
/// anything else, and a hit is a signal that climbs the ladder
/// (`DenyListHit`). The grammar's secret-path lists are not the deny list:
/// a path under `/etc/aromba/` that is not one of the listed files, sshd's
/// config, a folder whose name holds `.key.` or `.pem-`, a unit or
/// container name ending in `.key` or `.pem`, `id_rsa`, `secrets.toml` —
/// each passes the grammar and is then a deny-list hit. A model (or a line
/// it read) that names one moves the ladder: Slow, then Freeze, then Cut,
/// which wipes the key.
#[test]
fn no_read_the_grammar_allows_hits_the_wardens_deny_list() {
    let mut hits = Vec::new();
    for (tool, arguments) in [
        ("disk_usage", r#"{"path": "/etc/aromba/worker"}"#),
        ("disk_usage", r#"{"path": "/etc/ssh/sshd_config"}"#),
        ("disk_usage", r#"{"path": "/srv/backup.key.d"}"#),
        ("disk_usage", r#"{"path": "/var/www/site.pem-old"}"#),
        ("container_logs", r#"{"name": "web.key"}"#),
        ("container_logs", r#"{"name": "id_rsa"}"#),
        ("service_status", r#"{"unit": "secrets.toml"}"#),
        ("journal", r#"{"unit": "vault.pem"}"#),
    ] {
        let Ok(parsed) = tools::parse(tool, arguments) else {
            continue;
        };
        let Some((cmd, args)) = parsed.read(&|rel| format!("/{rel}")) else {
            continue;
        };
        if let Some(pattern) = aromba_warden::policy::deny_hit(&cmd, &args) {
            hits.push(format!("{tool} {arguments} → {cmd} {args:?}: {pattern}"));
        }
    }
    assert!(hits.is_empty(), "deny-list hits: {hits:#?}");
}

/// An event line with no newline, sent a byte at a time (one chunk of a
/// chunked body each): every piece makes the parser search the whole line
/// so far for a newline again — quadratic in the line, up to the 1 MiB
/// body cap. 64 KiB in 1-byte pieces must cost little.
#[test]
fn an_endless_event_line_in_small_pieces_costs_little() {
    let mut s = OpenAiStream::default();
    let started = std::time::Instant::now();
    s.feed(b"data: {\"choices\":[{\"delta\":{\"content\":\"")
        .unwrap();
    for _ in 0..64 * 1024 {
        s.feed(b"x").unwrap();
    }
    let took = started.elapsed();
    assert!(
        took < std::time::Duration::from_secs(1),
        "64 KiB of one event line, a byte at a time, took {took:?}"
    );
}

// --- A cap that makes a host. ---

/// A model whose whole answer is `text`.
struct Says(String);

impl Model for Says {
    async fn complete(
        &self,
        _messages: &[Message],
        _tools: Option<&serde_json::Value>,
    ) -> Result<Reply, ModelError> {
        Ok(Reply {
            text: self.0.clone(),
            calls: vec![],
            usage: Usage::default(),
        })
    }
}

/// Links are taken out first and the answer is cut after: `collect.pro1`
/// is no host to the filter (its last label holds a digit), but cut at
/// 3,000 characters right after `collect.pro` it is one, followed by the
/// cut's newline — a host Telegram links. A proposal's reason is filtered,
/// then cut at 300 characters, the same way (`ask::offer`).
#[tokio::test]
async fn the_answers_cut_does_not_make_a_host_the_filter_let_through() {
    let prefix = "x ".repeat(1_500);
    let prefix: String = prefix
        .chars()
        .take(conversation::MAX_ANSWER_CHARS - "collect.pro".len() - 1)
        .collect();
    let prefix = format!("{prefix} ");
    let text = format!("{prefix}collect.pro1234 is where the logs go.");
    let a = conversation::answer(
        &Says(text),
        &Quiet,
        "q",
        Limits {
            prod_mode: false,
            tokens_left: None,
        },
    )
    .await
    .expect("an answer");
    let tail: String = a
        .text
        .chars()
        .rev()
        .take(80)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    assert!(
        !a.text.contains("collect.pro\n"),
        "the answer ends: {tail:?}"
    );
}
