//! Issue 30, item 13: shapes a labelled corpus outside the project got
//! through the redactor, each with its neighbours.
//!
//! (a) A PGP private key block as `gpg --armor --export-secret-keys` writes
//! it — the armor line, a blank line (no armor headers), the body — cut
//! after its first body lines: the armor line went, the body lines passed.
//!
//! (b) The tail of a certificate (its last lines and its END line, the
//! BEGIN line cut away) removed as a key's, when a cut key's lines came
//! just before it with one line of another writer between, or behind a
//! logger prefix of the key's length. And the mirror images, which leaked:
//! a key's lines taken into a certificate's block and kept.

use aromba_testkit::redaction as support;

use aromba_redact::{Class, Limits, Redactor, Stream, redact, redact_cut};
use support::{L1, L2, L3};

/// A PGP body line as some tools wrap it (70 columns).
const P70: &str = "lQdGBGdQ8yABEAC7x8Qd2Vh5cZ3mFq9nYk0wPzL1sJt4RbXe6gHa2KdUoNcMvWYp0qSx3T";
/// The short line a cut leaves after it.
const PSHORT: &str = "Zm9vYmFyYmF6cXV4";
/// A PGP checksum line.
const CHECKSUM: &str = "=Xq7b";

/// A certificate's lines.
const C1: &str = "MIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBaMQswCQYDVQQGEwJJ";
const C2: &str = "RTESMBAGA1UEChMJQmFsdGltb3JlMRMwEQYDVQQLEwpDeWJlclRydXN0MSIwIAYD";
const C3: &str = "VQQDExlCYWx0aW1vcmUgQ3liZXJUcnVzdCBSb290MB4XDTAwMDUxMjE4NDYwMFoX";
const CSHORT: &str = "Ep4kxS9Nu7JN8KlkVk8=";

const PUBLIC_LABELS: [&str; 4] = [
    "CERTIFICATE",
    "PUBLIC KEY",
    "X509 CRL",
    "CERTIFICATE REQUEST",
];

/// Every 12-byte window of `secret`: a part of a secret is a leak.
fn leaked<'a>(text: &str, secret: &'a str) -> Option<&'a str> {
    let n = secret.len().min(12);
    (0..=secret.len() - n)
        .map(|i| &secret[i..i + n])
        .find(|w| text.contains(w))
}

/// What the redactor makes of `input` whole, as a cut output (`redact_cut`)
/// and as a stream: no window of any of `secrets` is left, every one of
/// `kept` is still there, a second pass changes nothing, and the stream
/// writes what the whole-buffer redaction writes.
fn check(input: &str, secrets: &[&str], kept: &[&str]) -> aromba_redact::Counts {
    let whole = redact(input.as_bytes());
    for (how, out) in [
        ("redact", &whole),
        ("redact_cut", &redact_cut(input.as_bytes())),
    ] {
        let text = String::from_utf8_lossy(&out.text);
        for s in secrets {
            if let Some(w) = leaked(&text, s) {
                panic!("{how}: {w:?} of {s:?} survived in {text:?}");
            }
        }
        for k in kept {
            assert!(text.contains(k), "{how}: {k:?} was destroyed in {text:?}");
        }
        let twice = redact(&out.text);
        assert_eq!(
            String::from_utf8_lossy(&twice.text),
            text,
            "{how}: a second pass changed the output"
        );
    }
    stream_agrees(input);
    whole.counts
}

/// The stream, with windows small enough to cut the input everywhere,
/// writes what the whole-buffer redaction writes.
fn stream_agrees(input: &str) {
    let redactor = Redactor::new();
    for (window, margin) in [(256, 96), (256, 200), (512, 200)] {
        let limits = Limits {
            window,
            margin,
            max_window: 4096,
        };
        for pad in 0..90 {
            let padded = format!("{}\n{input}", "-".repeat(pad));
            let whole = redact(padded.as_bytes());
            let mut s = Stream::with_limits(&redactor, limits);
            let mut text = Vec::new();
            for piece in padded.as_bytes().chunks(17) {
                s.push(piece, &mut text);
            }
            let counts = s.finish(false, &mut text);
            assert_eq!(
                String::from_utf8_lossy(&text),
                String::from_utf8_lossy(&whole.text),
                "window {window}, margin {margin}, pad {pad}"
            );
            assert_eq!(
                counts, whole.counts,
                "window {window}, margin {margin}, pad {pad}"
            );
        }
    }
}

fn unchanged(input: &str) {
    for out in [redact(input.as_bytes()), redact_cut(input.as_bytes())] {
        assert_eq!(String::from_utf8_lossy(&out.text), input);
        assert_eq!(out.counts.total(), 0, "{:?}", out.counts);
    }
    stream_agrees(input);
}

// (a) A PGP block cut after its blank line.

#[test]
fn pgp_private_block_cut_after_its_blank_line_loses_both_body_lines() {
    // The shape found: armor line, blank line, a 70-column line and a short
    // one, then the end of the output (`head -n 4`).
    let input = format!("-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n{P70}\n{PSHORT}\n");
    let counts = check(&input, &[P70, PSHORT, "PGP PRIVATE KEY BLOCK"], &[]);
    assert_eq!(counts.get(Class::PrivateKey), 1);
    // The output going on after it: only the block's lines go.
    let input = format!(
        "$ gpg --armor --export-secret-keys ops@example.org | head -n 4\n-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n{P70}\n{PSHORT}\ngpg: 1 key exported.\n"
    );
    check(
        &input,
        &[P70, PSHORT],
        &["| head -n 4\n", "\ngpg: 1 key exported.\n"],
    );
}

#[test]
fn pgp_private_block_cut_inside_its_short_line_loses_its_body() {
    // The Warden's byte cap cut the short line: it goes as the cut line,
    // and the full line before it with the block.
    let input = format!(
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n{P70}\n{}",
        &PSHORT[..9]
    );
    let out = redact_cut(input.as_bytes());
    let text = String::from_utf8_lossy(&out.text);
    assert!(leaked(&text, P70).is_none(), "{text}");
    assert!(!text.contains(&PSHORT[..9]), "{text}");
    let out = redact(input.as_bytes());
    let text = String::from_utf8_lossy(&out.text);
    assert!(leaked(&text, P70).is_none(), "{text}");
}

#[test]
fn pgp_private_block_cut_after_its_first_body_line_loses_it() {
    for width in [64, 70] {
        let line = format!("{P70}{L1}");
        let line = &line[..width];
        let input = format!("-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n{line}\n");
        check(&input, &[line], &[]);
    }
}

#[test]
fn pgp_private_block_with_armor_headers_before_its_blank_line_loses_its_body() {
    let input = format!(
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: GnuPG v2\nComment: ops@example.org\n\n{P70}\n{PSHORT}\n"
    );
    check(&input, &[P70, PSHORT, "ops@example.org"], &[]);
}

#[test]
fn pgp_private_block_with_crlf_line_ends_cut_after_its_blank_line_loses_its_body() {
    let input = format!("-----BEGIN PGP PRIVATE KEY BLOCK-----\r\n\r\n{P70}\r\n{PSHORT}\r\n");
    check(&input, &[P70, PSHORT], &[]);
    let input = format!(
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\r\nComment: ops\r\n\r\n{P70}\r\n{PSHORT}\r\nnext: ok.\r\n"
    );
    check(&input, &[P70, PSHORT], &["\r\nnext: ok.\r\n"]);
}

#[test]
fn pgp_private_block_cut_after_its_checksum_line_loses_the_checksum_too() {
    let input =
        format!("-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n{P70}\n{P70}\n{PSHORT}\n{CHECKSUM}\n");
    check(&input, &[P70, PSHORT, CHECKSUM], &[]);
}

#[test]
fn whole_pgp_private_block_without_armor_headers_is_one_removal() {
    let input = format!(
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n{P70}\n{P70}\n{PSHORT}\n{CHECKSUM}\n-----END PGP PRIVATE KEY BLOCK-----\nimported.\n"
    );
    let counts = check(&input, &[P70, PSHORT, CHECKSUM], &["\nimported.\n"]);
    assert_eq!(counts.get(Class::PrivateKey), 1);
    assert_eq!(counts.total(), 1);
}

#[test]
fn pgp_private_block_in_an_indented_yaml_value_cut_after_its_blank_line_loses_its_body() {
    // A ConfigMap as `kubectl get -o yaml` prints it, cut by `head`: the
    // blank line inside the block scalar is empty, or keeps the indent.
    for blank in ["", "    "] {
        let input = format!(
            "apiVersion: v1\ndata:\n  release.asc: |\n    -----BEGIN PGP PRIVATE KEY BLOCK-----\n{blank}\n    {P70}\n    {PSHORT}\nkind: ConfigMap\n"
        );
        check(
            &input,
            &[P70, PSHORT],
            &["  release.asc: |\n", "\nkind: ConfigMap\n"],
        );
    }
}

#[test]
fn pgp_private_block_behind_a_logger_prefix_cut_after_its_blank_line_loses_its_body() {
    // The blank line is the prefix alone, or less its trailing blank as
    // `docker compose logs` and `docker logs -t` print an empty line.
    for (p, blank) in [
        (
            "Dec 02 04:14:53 web-1 app[812]: ",
            "Dec 02 04:14:53 web-1 app[812]: ",
        ),
        ("web-1  | ", "web-1  | "),
        ("web-1  | ", "web-1  |"),
        ("[pod/web-7d9f/app] ", "[pod/web-7d9f/app] "),
        (
            "2026-12-02T04:14:53.120931475Z ",
            "2026-12-02T04:14:53.120954012Z",
        ),
    ] {
        let input = format!(
            "{p}-----BEGIN PGP PRIVATE KEY BLOCK-----\n{blank}\n{p}{P70}\n{p}{PSHORT}\n{p}signing key loaded.\n"
        );
        check(&input, &[P70, PSHORT], &["signing key loaded.\n"]);
    }
}

#[test]
fn short_line_after_a_prefixed_certificates_begin_line_does_not_hide_a_keys_middle() {
    // Only the prefix alone is a blank line: another writer's short line
    // after the armor line ends the certificate's walk.
    let input =
        format!("app | -----BEGIN CERTIFICATE-----\nok\napp | {L1}\napp | {L2}\napp | ready.\n");
    check(
        &input,
        &[L1, L2],
        &["-----BEGIN CERTIFICATE-----\nok\n", "app | ready."],
    );
}

#[test]
fn pgp_public_block_cut_after_its_blank_line_is_kept_whole() {
    // Its lines were taken for a key's middle: two full-width lines with
    // no armor the walk had reached.
    unchanged(&format!(
        "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n{C1}\n{C2}\n{C3}\ngpg: key 9F1C0D2E: public key imported\n"
    ));
    unchanged(&format!(
        "-----BEGIN PGP PUBLIC KEY BLOCK-----\r\n\r\n{C1}\r\n{C2}\r\n"
    ));
    unchanged(&format!(
        "web-1  | -----BEGIN PGP PUBLIC KEY BLOCK-----\nweb-1  |\nweb-1  | {C1}\nweb-1  | {C2}\nweb-1  | imported.\n"
    ));
}

// (b) A certificate's tail beside a key's lines.

#[test]
fn tail_of_a_public_block_alone_is_kept() {
    for label in PUBLIC_LABELS {
        for prefix in ["", "    ", "web-1  | ", "Dec 02 04:14:53 web-1 app[812]: "] {
            unchanged(&format!(
                "{prefix}{C1}\n{prefix}{C2}\n{prefix}{C3}\n{prefix}{CSHORT}\n{prefix}-----END {label}-----\n"
            ));
        }
    }
}

#[test]
fn tail_of_a_public_block_after_a_cut_keys_head_and_another_writers_line_is_kept() {
    // The shape found: a key cut after its first lines, one line of another
    // writer, then a certificate's tail. The key's walk passed the line and
    // went on over the certificate's lines, of the key's width, to the
    // certificate's END line, which it took for its own.
    for label in PUBLIC_LABELS {
        for key in ["PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY"] {
            let tail = format!("{C1}\n{C2}\n{C3}\n{CSHORT}\n-----END {label}-----\n");
            let input = format!(
                "-----BEGIN {key}-----\n{L1}\n{L2}\n$ tail -n 5 /etc/ssl/certs/site.pem\n{tail}"
            );
            let counts = check(
                &input,
                &[L1, L2],
                &["\n$ tail -n 5 /etc/ssl/certs/site.pem\n", &tail],
            );
            assert_eq!(counts.get(Class::PrivateKey), 1, "{label} after {key}");
        }
    }
}

#[test]
fn tail_of_a_public_block_glued_to_a_cut_keys_head_keeps_its_end_line() {
    // Nothing tells the key's lines from the certificate's when no line
    // stands between them: they go with the key (a key's line must never
    // pass), but the certificate's END line is not the key's and stays.
    for label in PUBLIC_LABELS {
        let input = format!(
            "-----BEGIN RSA PRIVATE KEY-----\n{L1}\n{L2}\n{C1}\n{CSHORT}\n-----END {label}-----\nok\n"
        );
        check(
            &input,
            &[L1, L2],
            &[&format!("\n-----END {label}-----\nok\n")],
        );
    }
}

#[test]
fn tail_of_a_certificate_after_a_keys_middle_behind_a_prefix_of_the_same_length_is_kept() {
    // Docker's timestamps and a journal prefix are both 31 bytes: the
    // certificate's first line, after one line of another writer, was taken
    // for the key's short last line (its prefix is not inside the block,
    // which starts at the line's base64).
    let d1 = "2026-12-02T01:08:45.874677381Z ";
    let d2 = "2026-12-02T01:08:45.874702115Z ";
    let j = "Dec 02 18:00:00 host app[812]: ";
    let k2 = format!("{}{}", &L2[..40], &P70[..30]);
    let tail = format!("{j}{C1}\n{j}{C2}\n{j}{C3}\n{j}{CSHORT}\n{j}-----END CERTIFICATE-----\n");
    let input = format!(
        "{d1}{P70}\n{d2}{k2}\n  postgresql@15-main.service  loaded active running PostgreSQL\n{tail}"
    );
    check(&input, &[P70, &k2], &["postgresql@15-main.service", &tail]);
    // And without the other writer's line, `docker compose logs`: the key's
    // last line is padded, so the certificate's walk stops above its lines.
    let w = "web-1  | ";
    let padded = format!("{}==", &L3[..62]);
    let tail = format!("{w}{C1}\n{w}{C2}\n{w}{CSHORT}\n{w}-----END CERTIFICATE-----\n");
    let input = format!("{w}{L1}\ndb-1   | LOG:  checkpoint starting: time\n{w}{padded}\n{tail}");
    check(&input, &[L1, &padded], &["checkpoint starting", &tail]);
}

#[test]
fn tail_of_a_private_key_is_removed() {
    for (label, line) in [
        ("PRIVATE KEY", L1),
        ("RSA PRIVATE KEY", L2),
        ("OPENSSH PRIVATE KEY", P70),
        ("PGP PRIVATE KEY BLOCK", L3),
    ] {
        let checksum = if label.starts_with("PGP") {
            format!("{CHECKSUM}\n")
        } else {
            String::new()
        };
        let input = format!("{line}\n{line}\n{PSHORT}\n{checksum}-----END {label}-----\ndone.\n");
        let counts = check(&input, &[line, PSHORT, CHECKSUM], &["\ndone.\n"]);
        assert_eq!(counts.get(Class::PrivateKey), 1, "{label}");
    }
}

#[test]
fn tail_of_a_private_key_after_a_cut_certificates_head_and_another_writers_line_is_removed() {
    // The mirror image, a leak: the certificate's walk passed the line and
    // went on over the key's lines to the key's END line; the key's block,
    // inside the certificate's, was never walked, and its lines were kept.
    for label in [
        "PRIVATE KEY",
        "RSA PRIVATE KEY",
        "EC PRIVATE KEY",
        "PGP PRIVATE KEY BLOCK",
    ] {
        let head = format!("-----BEGIN CERTIFICATE-----\n{C1}\n{C2}\n");
        let input = format!(
            "{head}issuer: CN=R11, O=Let's Encrypt\n{L1}\n{L2}\n{L3}\n{PSHORT}\n-----END {label}-----\n"
        );
        let counts = check(&input, &[L1, L2, L3, PSHORT], &[&head, "\nissuer: CN=R11"]);
        assert_eq!(counts.get(Class::PrivateKey), 1, "{label}");
    }
}

#[test]
fn tail_of_a_private_key_glued_to_a_cut_certificates_head_is_removed() {
    // No line between: the key's lines cannot be told from the
    // certificate's, and a key's line must never pass.
    for label in ["PRIVATE KEY", "RSA PRIVATE KEY", "PGP PRIVATE KEY BLOCK"] {
        let input = format!(
            "-----BEGIN CERTIFICATE-----\n{C1}\n{C2}\n{L1}\n{L2}\n{PSHORT}\n-----END {label}-----\n"
        );
        check(
            &input,
            &[L1, L2, PSHORT],
            &["-----BEGIN CERTIFICATE-----\n"],
        );
    }
}

#[test]
fn keys_middle_then_another_writers_line_then_a_certificates_tail_loses_only_the_key() {
    // A leak: the certificate's walk back from its END line passed the
    // other writer's line and kept the key's lines above it as its own.
    for label in PUBLIC_LABELS {
        let tail = format!("{C1}\n{C2}\n{CSHORT}\n-----END {label}-----\n");
        let input = format!("$ sed -n 5,6p key.pem\n{L1}\n{L2}\n$ tail -n 4 cert.pem\n{tail}");
        let counts = check(&input, &[L1, L2], &["$ tail -n 4 cert.pem\n", &tail]);
        assert_eq!(counts.get(Class::PrivateKey), 1, "{label}");
    }
}

#[test]
fn certificates_head_then_another_writers_line_then_a_keys_middle_loses_only_the_key() {
    // A leak: the certificate's walk forwards passed the other writer's
    // line and kept the key's lines after it as its own.
    let head = format!("-----BEGIN CERTIFICATE-----\n{C1}\n{C2}\n");
    let input = format!("{head}$ sed -n 5,7p key.pem\n{L1}\n{L2}\n{L3}\n");
    let counts = check(&input, &[L1, L2, L3], &[&head, "$ sed -n 5,7p key.pem\n"]);
    assert_eq!(counts.get(Class::PrivateKey), 1);
}

#[test]
fn public_block_with_another_writers_line_inside_between_its_armor_lines_is_kept_whole() {
    // Between its own BEGIN and END lines a block's lines are its own, even
    // with a line of another writer inside (the walk passes one).
    for label in ["CERTIFICATE", "PGP PUBLIC KEY BLOCK"] {
        unchanged(&format!(
            "-----BEGIN {label}-----\n{C1}\ndb-1   | LOG:  checkpoint starting: time\n{C2}\n{C3}\n{CSHORT}\n-----END {label}-----\n"
        ));
        unchanged(&format!(
            "-----BEGIN {label}-----\n{C1}\ndb-1   | LOG:  checkpoint starting: time\n{C2}\n{C3}\ndb-1   | LOG:  checkpoint complete\n-----END {label}-----\n"
        ));
        // Two lines of another writer, apart: the walk forwards stops at the
        // second, the walk back from the END line at the first.
        unchanged(&format!(
            "-----BEGIN {label}-----\n{C1}\ndb-1   | LOG:  checkpoint starting: time\n{C2}\ndb-1   | LOG:  checkpoint complete\n{C3}\n{CSHORT}\n-----END {label}-----\n"
        ));
    }
}

#[test]
fn key_and_certificate_lines_glued_in_a_json_string_lose_the_key_lines() {
    // In a JSON string a block runs to the first END line: one of the other
    // kind is another block's.
    let input = format!(
        "{{\"pem\": \"-----BEGIN CERTIFICATE-----\\n{C1}\\n{L1}\\n{L2}\\n-----END RSA PRIVATE KEY-----\\n\"}}\n"
    );
    check(
        &input,
        &[L1, L2],
        &["{\"pem\": \"-----BEGIN CERTIFICATE-----\\n"],
    );
    let input = format!(
        "{{\"pem\": \"-----BEGIN RSA PRIVATE KEY-----\\n{L1}\\n{L2}\\n{C1}\\n-----END CERTIFICATE-----\\n\"}}\n"
    );
    check(&input, &[L1, L2], &["-----END CERTIFICATE-----\\n\"}\n"]);
}
