//! Private keys as output windows cut them — the tail `journalctl -n 10`
//! shows, the middle `sed -n 5,12p` shows, the head a `head` shows with the
//! output going on after it — and public blocks cut the same way, which
//! must survive.

use crate::Item;
use crate::secrets::{ALNUM, HEX, clock, from, pem_body_r, pick};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

fn journal_prefix(rng: &mut ChaCha8Rng) -> String {
    format!("Dec 02 {} web-1 app[812]: ", clock(rng))
}

fn docker_prefix(rng: &mut ChaCha8Rng) -> String {
    format!(
        "2026-12-02T{}.{:09}Z ",
        clock(rng),
        rng.random_range(0..1_000_000_000u32)
    )
}

/// Makes the prefix of one line.
type Prefixer = fn(&mut ChaCha8Rng) -> String;

/// A line prefix: a logger's (with the clock ticking between lines, as it
/// does), Docker's timestamps, or none.
fn prefixer(rng: &mut ChaCha8Rng) -> Prefixer {
    match rng.random_range(0..3) {
        0 => journal_prefix,
        1 => docker_prefix,
        _ => |_| String::new(),
    }
}

fn private_label(rng: &mut ChaCha8Rng) -> &'static str {
    pick(
        rng,
        &[
            "RSA PRIVATE KEY",
            "PRIVATE KEY",
            "EC PRIVATE KEY",
            "OPENSSH PRIVATE KEY",
        ],
    )
}

/// OpenSSH wraps at 70 columns, PEM at 64.
fn body_for(rng: &mut ChaCha8Rng, label: &str) -> Vec<String> {
    let body = pem_body_r(rng, 600..1200);
    if label.starts_with("OPENSSH") {
        let joined = body.concat();
        joined
            .as_bytes()
            .chunks(70)
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .collect()
    } else {
        body
    }
}

fn fragments(lines: &[String]) -> Vec<String> {
    lines.iter().filter(|l| l.len() >= 8).cloned().collect()
}

/// The last lines of a key and its END line; the BEGIN line is outside the
/// window.
pub fn key_tail(rng: &mut ChaCha8Rng) -> Item {
    let label = private_label(rng);
    let body = body_for(rng, label);
    let shown = rng.random_range(2..body.len().min(9));
    let tail = body[body.len() - shown..].to_vec();
    let prefix = prefixer(rng);
    let mut text: Vec<String> = tail.iter().map(|l| format!("{}{l}", prefix(rng))).collect();
    text.push(format!("{}-----END {label}-----", prefix(rng)));
    Item::secret(text.join("\n"), "private-key", fragments(&tail))
}

/// Full-width lines from the middle of a key, with neither armor line.
pub fn key_middle(rng: &mut ChaCha8Rng) -> Item {
    let label = private_label(rng);
    let body = body_for(rng, label);
    let from_line = rng.random_range(1..body.len() / 2);
    let shown = rng.random_range(2..7).min(body.len() - 1 - from_line);
    let middle = body[from_line..from_line + shown.max(2)].to_vec();
    let prefix = prefixer(rng);
    let text: Vec<String> = middle
        .iter()
        .map(|l| format!("{}{l}", prefix(rng)))
        .collect();
    Item::secret(text.join("\n"), "private-key", fragments(&middle))
}

/// A BEGIN line and the first lines of a key, with the output going on
/// after it: only the key's lines may go.
pub fn key_head(rng: &mut ChaCha8Rng) -> Item {
    let label = private_label(rng);
    let body = body_for(rng, label);
    let shown = rng.random_range(2..body.len().min(8));
    let head = body[..shown].to_vec();
    let prefix = prefixer(rng);
    let mut text = vec![format!("{}-----BEGIN {label}-----", prefix(rng))];
    text.extend(head.iter().map(|l| format!("{}{l}", prefix(rng))));
    // What comes next cannot be a key's line: it ends in punctuation.
    text.push(format!(
        "Dec 02 {} web-1 app[812]: key loaded, {} bytes.",
        clock(rng),
        rng.random_range(1000..4000)
    ));
    Item::secret(text.join("\n"), "private-key", fragments(&head))
}

/// A key inside a JSON string with `\n` escapes, its END cut by the window.
pub fn key_in_json_cut(rng: &mut ChaCha8Rng) -> Item {
    let body = pem_body_r(rng, 600..1200);
    let shown = rng.random_range(3..body.len());
    let head = body[..shown].to_vec();
    let text = format!(
        "{{\"level\":\"debug\",\"msg\":\"loaded credentials\",\"private_key\":\"-----BEGIN PRIVATE KEY-----\\n{}",
        head.join("\\n")
    );
    Item::secret(text, "private-key", fragments(&head))
}

/// The tail and head of certificates and public keys: kept whole, and never
/// taken for a key's middle.
pub fn public_block_cut(rng: &mut ChaCha8Rng) -> Item {
    let label = pick(rng, &["CERTIFICATE", "PUBLIC KEY", "PGP PUBLIC KEY BLOCK"]);
    let body = pem_body_r(rng, 600..1200);
    let text = if rng.random_bool(0.5) {
        let shown = rng.random_range(2..body.len());
        let mut lines = body[body.len() - shown..].to_vec();
        lines.push(format!("-----END {label}-----"));
        lines.join("\n")
    } else {
        let shown = rng.random_range(2..body.len());
        let mut lines = vec![format!("-----BEGIN {label}-----")];
        lines.extend(body[..shown].iter().cloned());
        lines.push("issuer verified.".to_string());
        lines.join("\n")
    };
    Item::decoy(text.clone(), "public-key-cut", text)
}

/// Hex identifiers one a line (`docker ps -q --no-trunc`): full-width, but
/// not a key.
pub fn hex_ids(rng: &mut ChaCha8Rng) -> Item {
    let n = rng.random_range(2..6);
    let text = (0..n)
        .map(|_| from(rng, HEX, 64))
        .collect::<Vec<_>>()
        .join("\n");
    Item::decoy(text.clone(), "hex-lines", text)
}

/// `docker compose logs --tail` interleaves services: another service's line
/// between the lines of a key's tail is not the key's, and survives.
pub fn key_tail_interleaved(rng: &mut ChaCha8Rng) -> Item {
    let label = private_label(rng);
    let body = body_for(rng, label);
    let shown = rng.random_range(3..body.len().min(9));
    let tail = body[body.len() - shown..].to_vec();
    let other = format!(
        "db-1   | {} UTC [{}] LOG:  checkpoint starting: time",
        clock(rng),
        rng.random_range(20..90)
    );
    let at = rng.random_range(1..tail.len());
    let mut text: Vec<String> = tail.iter().map(|l| format!("web-1  | {l}")).collect();
    text.insert(at, other.clone());
    text.push(format!("web-1  | -----END {label}-----"));
    text.push("web-1  | listening on :8080".to_string());
    // The key's lines on either side of the other line go as two removals.
    let mut item = Item::secret(text.join("\n"), "private-key", fragments(&tail[..at]));
    item.secrets.push(crate::Planted {
        class: "private-key".to_string(),
        fragments: fragments(&tail[at..]),
    });
    item.decoys.push(crate::Decoy {
        kind: "interleaved-line".to_string(),
        text: format!("\n{other}\n"),
    });
    item
}

/// The pieces of escaped key lines that must be gone: what lies between
/// the escapes.
fn escaped_fragments(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .flat_map(|l| l.split('/'))
        .filter(|piece| piece.len() >= 8)
        .map(str::to_string)
        .collect()
}

/// A whole key as PHP's `json_encode` writes it (`\/` for `/`, `\n` for a
/// line break), or as a JSON document kept in a JSON string writes it
/// (`\\n`, a Kubernetes last-applied-configuration annotation).
pub fn key_in_escaped_json(rng: &mut ChaCha8Rng) -> Item {
    let body = pem_body_r(rng, 600..1200);
    let label = private_label(rng);
    let text = if rng.random_bool(0.5) {
        let key = format!(
            "-----BEGIN {label}-----\\n{}\\n-----END {label}-----\\n",
            body.join("\\n")
        )
        .replace('/', "\\/");
        format!(
            "[2026-12-03 {}] local.DEBUG: config {{\"app_key\":\"{key}\",\"debug\":true}}",
            clock(rng)
        )
    } else {
        format!(
            "            \"kubectl.kubernetes.io/last-applied-configuration\": \"{{\\\"stringData\\\":{{\\\"tls.pem\\\":\\\"-----BEGIN {label}-----\\\\n{}\\\\n-----END {label}-----\\\\n\\\"}}}}\\n\"",
            body.join("\\\\n")
        )
    };
    Item::secret(text, "private-key", escaped_fragments(&body))
}

/// A prefix for every line of one block, and the line it prints for an
/// empty one: a logger's (the clock ticking, its width fixed), `docker
/// compose logs`' (the trailing blank dropped on an empty line), a YAML
/// block scalar's indent (an empty line bare), or none.
fn block_prefix(rng: &mut ChaCha8Rng) -> (Prefixer, &'static str) {
    match rng.random_range(0..4) {
        0 => (journal_prefix, "journal"),
        1 => (|_| "web-1  | ".to_string(), "compose"),
        2 => (|_| "    ".to_string(), "indent"),
        _ => (|_| String::new(), "none"),
    }
}

/// The blank line after a PGP armor line, as each prefix prints it.
fn blank_line(rng: &mut ChaCha8Rng, prefix: Prefixer, how: &str) -> String {
    match how {
        "compose" => "web-1  |".to_string(),
        "indent" | "none" => String::new(),
        _ => prefix(rng),
    }
}

/// A key's base64 lines at `width` columns.
fn body_at(rng: &mut ChaCha8Rng, width: usize) -> Vec<String> {
    pem_body_r(rng, 600..1200)
        .concat()
        .as_bytes()
        .chunks(width)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect()
}

/// The head of a PGP block as `gpg --armor` writes it — the armor line, a
/// blank line (after armor headers, or alone), 64- or 70-column lines —
/// cut after its first lines (`head -n 4`): one or more full lines, then a
/// short one or a checksum or nothing.
fn pgp_head(rng: &mut ChaCha8Rng, label: &str) -> (Vec<String>, Vec<String>) {
    let width = if rng.random_bool(0.5) { 64 } else { 70 };
    let body = body_at(rng, width);
    let (prefix, how) = block_prefix(rng);
    let mut shown: Vec<String> = body[..rng.random_range(1..4)].to_vec();
    match rng.random_range(0..3) {
        0 => shown.push(body[5][..rng.random_range(8..width - 8)].to_string()),
        1 => shown.push(format!("={}", from(rng, ALNUM, 4))),
        _ => {}
    }
    let mut text = vec![format!("{}-----BEGIN {label}-----", prefix(rng))];
    if rng.random_bool(0.3) {
        text.push(format!("{}Version: GnuPG v2", prefix(rng)));
    }
    text.push(blank_line(rng, prefix, how));
    text.extend(shown.iter().map(|l| format!("{}{l}", prefix(rng))));
    (text, shown)
}

/// A PGP private key block cut after its blank line and its first lines:
/// every body line goes (the armor line went and the body passed).
pub fn pgp_private_block_cut(rng: &mut ChaCha8Rng) -> Item {
    let (text, shown) = pgp_head(rng, "PGP PRIVATE KEY BLOCK");
    Item::secret(text.join("\n"), "private-key", fragments(&shown))
}

/// A PGP public key block cut the same way: kept whole (its lines were
/// taken for a key's middle).
pub fn pgp_public_block_cut(rng: &mut ChaCha8Rng) -> Item {
    let (text, _) = pgp_head(rng, "PGP PUBLIC KEY BLOCK");
    let text = text.join("\n");
    Item::decoy(text.clone(), "public-key-cut", text)
}

const PUBLIC_LABELS: &[&str] = &[
    "CERTIFICATE",
    "PUBLIC KEY",
    "X509 CRL",
    "CERTIFICATE REQUEST",
];

/// The line of another writer between two blocks' lines.
fn other_writer(rng: &mut ChaCha8Rng) -> String {
    pick(
        rng,
        &[
            "$ tail -n 5 /etc/ssl/certs/site.pem",
            "db-1   | LOG:  checkpoint starting: time",
            "  postgresql@15-main.service  loaded active running PostgreSQL",
            "issuer: CN=R11, O=Let's Encrypt, C=US",
        ],
    )
    .to_string()
}

/// A key cut after its first lines (or its middle, without armor), one
/// line of another writer, then the tail of a certificate, a public key, a
/// CRL or a CSR: the key's lines go, the tail stays (the key's walk went on
/// over it to its END line; a prefix of the key's length made its first
/// line the key's short last line).
pub fn public_tail_beside_a_cut_key(rng: &mut ChaCha8Rng) -> Item {
    let width = if rng.random_bool(0.5) { 64 } else { 70 };
    let key_body = body_at(rng, width);
    let cert_body = pem_body_r(rng, 600..1200);
    let (key_prefix, cert_prefix): (Prefixer, Prefixer) = match rng.random_range(0..3) {
        // Docker's timestamps and a journal prefix, both 31 bytes.
        0 => (docker_prefix, |rng| {
            format!("Dec 02 {} host app[812]: ", clock(rng))
        }),
        1 => (|_| "web-1  | ".to_string(), |_| "web-1  | ".to_string()),
        _ => (|_| String::new(), |_| String::new()),
    };
    let key_lines = key_body[..rng.random_range(2..5)].to_vec();
    let mut text = Vec::new();
    if rng.random_bool(0.5) {
        let label = pick(rng, &["PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY"]);
        text.push(format!("{}-----BEGIN {label}-----", key_prefix(rng)));
    }
    text.extend(key_lines.iter().map(|l| format!("{}{l}", key_prefix(rng))));
    let label = pick(rng, PUBLIC_LABELS);
    let shown = rng.random_range(2..cert_body.len());
    let mut tail = vec![other_writer(rng)];
    tail.extend(
        cert_body[cert_body.len() - shown..]
            .iter()
            .map(|l| format!("{}{l}", cert_prefix(rng))),
    );
    tail.push(format!("{}-----END {label}-----", cert_prefix(rng)));
    let tail = tail.join("\n");
    text.push(tail.clone());
    let mut item = Item::secret(text.join("\n"), "private-key", fragments(&key_lines));
    item.decoys.push(crate::Decoy {
        kind: "public-key-cut-beside-key".to_string(),
        text: tail,
    });
    item
}

/// The mirror image: a certificate cut after its first lines, one line of
/// another writer, then a key's tail (or its middle): the key's lines go
/// (the certificate's walk went on over them to the key's END line and kept
/// them), the certificate's head stays.
pub fn key_beside_a_cut_certificate(rng: &mut ChaCha8Rng) -> Item {
    let cert_body = pem_body_r(rng, 600..1200);
    let key_body = body_at(rng, 64);
    let prefix = prefixer(rng);
    let mut head = vec![format!("{}-----BEGIN CERTIFICATE-----", prefix(rng))];
    head.extend(
        cert_body[..rng.random_range(1..4)]
            .iter()
            .map(|l| format!("{}{l}", prefix(rng))),
    );
    head.push(other_writer(rng));
    let head = head.join("\n");
    let mut key_lines = key_body[..rng.random_range(2..5)].to_vec();
    let mut text = vec![head.clone()];
    if rng.random_bool(0.6) {
        let label = pick(
            rng,
            &[
                "PRIVATE KEY",
                "RSA PRIVATE KEY",
                "EC PRIVATE KEY",
                "PGP PRIVATE KEY BLOCK",
            ],
        );
        key_lines.push(key_body[6][..rng.random_range(8..40)].to_string());
        text.extend(key_lines.iter().map(|l| format!("{}{l}", prefix(rng))));
        if label.starts_with("PGP") {
            text.push(format!("{}={}", prefix(rng), from(rng, ALNUM, 4)));
        }
        text.push(format!("{}-----END {label}-----", prefix(rng)));
    } else {
        // A key's middle, and the output going on.
        text.extend(key_lines.iter().map(|l| format!("{}{l}", prefix(rng))));
        text.push(format!("{}key checked.", prefix(rng)));
    }
    let mut item = Item::secret(text.join("\n"), "private-key", fragments(&key_lines));
    item.decoys.push(crate::Decoy {
        kind: "public-key-cut-beside-key".to_string(),
        text: head,
    });
    item
}
