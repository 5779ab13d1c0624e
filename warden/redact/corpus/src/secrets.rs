//! Secrets of every class in the formats they really take, and decoys.

use crate::Item;
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use rand::Rng;
use rand::seq::IndexedRandom;
use rand_chacha::ChaCha8Rng;

pub type Maker = fn(&mut ChaCha8Rng) -> Item;

pub(crate) const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
pub(crate) const B64URL: &[u8] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
pub(crate) const HEX: &[u8] = b"0123456789abcdef";
pub(crate) const UPPER_DIGIT: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
pub(crate) const DIGITS: &[u8] = b"0123456789";

pub(crate) fn from(rng: &mut ChaCha8Rng, alphabet: &[u8], n: usize) -> String {
    (0..n)
        .map(|_| char::from(alphabet[rng.random_range(0..alphabet.len())]))
        .collect()
}

/// A random value with at least one digit, as generated secrets have.
pub(crate) fn opaque(rng: &mut ChaCha8Rng, n: usize) -> String {
    let mut s = from(rng, ALNUM, n.saturating_sub(1));
    let at = rng.random_range(0..=s.len());
    s.insert(at, char::from(DIGITS[rng.random_range(0..10)]));
    s
}

pub(crate) fn from_r(rng: &mut ChaCha8Rng, alphabet: &[u8], n: std::ops::Range<usize>) -> String {
    let n = rng.random_range(n);
    from(rng, alphabet, n)
}

pub(crate) fn opaque_r(rng: &mut ChaCha8Rng, n: std::ops::Range<usize>) -> String {
    let n = rng.random_range(n);
    opaque(rng, n)
}

pub(crate) fn pem_body_r(rng: &mut ChaCha8Rng, n: std::ops::Range<usize>) -> Vec<String> {
    let n = rng.random_range(n);
    pem_body(rng, n)
}

pub(crate) fn pick<'a>(rng: &mut ChaCha8Rng, from: &[&'a str]) -> &'a str {
    from.choose(rng).copied().unwrap_or("")
}

pub(crate) fn clock(rng: &mut ChaCha8Rng) -> String {
    format!(
        "{:02}:{:02}:{:02}",
        rng.random_range(0..24),
        rng.random_range(0..60),
        rng.random_range(0..60)
    )
}

/// Base64 body lines of a PEM block, 64 columns.
pub(crate) fn pem_body(rng: &mut ChaCha8Rng, bytes: usize) -> Vec<String> {
    let raw: Vec<u8> = (0..bytes).map(|_| rng.random()).collect();
    let b64 = STANDARD.encode(raw);
    b64.as_bytes()
        .chunks(64)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect()
}

/// A private-key block; the fragments are its BEGIN line and every body line.
fn key_block(rng: &mut ChaCha8Rng, label: &str, headers: &[String], prefix: &str) -> Item {
    let body = pem_body_r(rng, 120..900);
    let begin = format!("-----BEGIN {label}-----");
    let mut lines = vec![begin.clone()];
    lines.extend(headers.iter().cloned());
    if !headers.is_empty() {
        lines.push(String::new());
    }
    lines.extend(body.iter().cloned());
    lines.push(format!("-----END {label}-----"));
    let text = lines
        .iter()
        .map(|l| format!("{prefix}{l}"))
        .collect::<Vec<_>>()
        .join("\n");
    // The body lines: the BEGIN line's words also head public keys.
    let fragments = body.into_iter().filter(|l| l.len() >= 8).collect();
    Item::secret(text, "private-key", fragments)
}

fn private_key(rng: &mut ChaCha8Rng) -> Item {
    let prefix = if rng.random_bool(0.3) {
        format!("Dec 02 {} web-1 app[812]: ", clock(rng))
    } else {
        String::new()
    };
    match rng.random_range(0..7) {
        0 => key_block(rng, "RSA PRIVATE KEY", &[], &prefix),
        1 => key_block(rng, "PRIVATE KEY", &[], &prefix),
        2 => key_block(rng, "EC PRIVATE KEY", &[], &prefix),
        3 => key_block(rng, "ENCRYPTED PRIVATE KEY", &[], &prefix),
        4 => {
            let iv = from(rng, b"0123456789ABCDEF", 32);
            let headers = [
                "Proc-Type: 4,ENCRYPTED".to_string(),
                format!("DEK-Info: AES-256-CBC,{iv}"),
            ];
            key_block(rng, "RSA PRIVATE KEY", &headers, &prefix)
        }
        5 => key_block(rng, "OPENSSH PRIVATE KEY", &[], &prefix),
        _ => {
            let headers = ["Version: GnuPG v2".to_string()];
            key_block(rng, "PGP PRIVATE KEY BLOCK", &headers, &prefix)
        }
    }
}

/// A service-account JSON as `cat` shows it: the key inside a JSON string.
fn private_key_in_json(rng: &mut ChaCha8Rng) -> Item {
    let body = pem_body_r(rng, 600..1200);
    let key_id = from(rng, HEX, 40);
    let escaped = format!(
        "-----BEGIN PRIVATE KEY-----\\n{}\\n-----END PRIVATE KEY-----\\n",
        body.join("\\n")
    );
    let text = format!(
        "{{\n  \"type\": \"service_account\",\n  \"project_id\": \"shop-prod-381212\",\n  \"private_key_id\": \"{key_id}\",\n  \"private_key\": \"{escaped}\",\n  \"client_email\": \"deployer@shop-prod-381212.iam.gserviceaccount.com\"\n}}"
    );
    let fragments = body.into_iter().filter(|l| l.len() >= 8).collect();
    let mut item = Item::secret(text, "private-key", fragments);
    item.secrets.push(crate::Planted {
        class: "secret-assignment".to_string(),
        fragments: vec![key_id],
    });
    item
}

pub fn truncated_private_key(rng: &mut ChaCha8Rng) -> Item {
    let label = pick(
        rng,
        &["RSA PRIVATE KEY", "OPENSSH PRIVATE KEY", "PRIVATE KEY"],
    );
    let body = pem_body_r(rng, 300..900);
    let keep = rng.random_range(1..body.len());
    let mut kept: Vec<String> = body[..keep].to_vec();
    // Cut inside the last kept line, as a byte cap would.
    if let Some(last) = kept.last_mut() {
        let cut = rng.random_range(8..=last.len());
        last.truncate(cut);
    }
    let begin = format!("-----BEGIN {label}-----");
    let text = format!("{begin}\n{}", kept.join("\n"));
    let fragments = kept.into_iter().filter(|l| l.len() >= 8).collect();
    Item::secret(text, "private-key", fragments)
}

/// Puts a token in one of the places tokens are seen.
fn in_context(rng: &mut ChaCha8Rng, env_name: &str, token: &str) -> String {
    match rng.random_range(0..5) {
        0 => format!("{env_name}={token}"),
        1 => format!(
            "deploy    {:>6}  0.3  1.2 812344 98112 ?        Sl   Dec01   1:02 node /srv/bot/index.js --api-key={token}",
            rng.random_range(1000..60000)
        ),
        2 => format!(
            "Dec 02 {} web-1 app[812]: using credentials {token} for upstream",
            clock(rng)
        ),
        3 => format!("  \"{}\": \"{token}\",", env_name.to_lowercase()),
        _ => format!("export {env_name}=\"{token}\""),
    }
}

fn token_item(rng: &mut ChaCha8Rng, class: &str, env_name: &str, token: String) -> Item {
    let text = in_context(rng, env_name, &token);
    Item::secret(text, class, vec![token])
}

fn openai(rng: &mut ChaCha8Rng) -> Item {
    let token = match rng.random_range(0..4) {
        0 => format!("sk-proj-{}", from(rng, B64URL, 156)),
        1 => format!(
            "sk-{}T3BlbkFJ{}",
            from(rng, ALNUM, 20),
            from(rng, ALNUM, 20)
        ),
        2 => format!("sk-svcacct-{}", from(rng, B64URL, 120)),
        _ => format!("sk-admin-{}", from(rng, B64URL, 100)),
    };
    token_item(rng, "openai-key", "OPENAI_API_KEY", token)
}

fn anthropic(rng: &mut ChaCha8Rng) -> Item {
    let token = match rng.random_range(0..2) {
        0 => format!("sk-ant-api03-{}AA", from(rng, B64URL, 93)),
        _ => format!("sk-ant-admin01-{}AA", from(rng, B64URL, 93)),
    };
    token_item(rng, "anthropic-key", "ANTHROPIC_API_KEY", token)
}

fn openrouter(rng: &mut ChaCha8Rng) -> Item {
    let token = format!("sk-or-v1-{}", from(rng, HEX, 64));
    token_item(rng, "openrouter-key", "OPENROUTER_API_KEY", token)
}

fn stripe(rng: &mut ChaCha8Rng) -> Item {
    let token = match rng.random_range(0..4) {
        0 => format!("sk_live_{}", from(rng, ALNUM, 99)),
        1 => format!("sk_test_{}", from(rng, ALNUM, 24)),
        2 => format!("rk_live_{}", from(rng, ALNUM, 99)),
        _ => format!("whsec_{}", from(rng, ALNUM, 32)),
    };
    token_item(rng, "stripe-key", "STRIPE_SECRET_KEY", token)
}

fn github(rng: &mut ChaCha8Rng) -> Item {
    let token = match rng.random_range(0..3) {
        0 => format!(
            "{}{}",
            pick(rng, &["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]),
            from(rng, ALNUM, 36)
        ),
        _ => format!(
            "github_pat_{}_{}",
            from(rng, ALNUM, 22),
            from(rng, ALNUM, 59)
        ),
    };
    if rng.random_bool(0.3) {
        // `git remote -v`: the token is the URL's password, counted as a token.
        let text =
            format!("origin\thttps://x-access-token:{token}@github.com/acme/shop.git (fetch)");
        return Item::secret(text, "github-token", vec![token]);
    }
    token_item(rng, "github-token", "GITHUB_TOKEN", token)
}

fn aws(rng: &mut ChaCha8Rng) -> Item {
    let id = format!(
        "{}{}",
        pick(rng, &["AKIA", "ASIA"]),
        from(rng, UPPER_DIGIT, 16)
    );
    if rng.random_bool(0.5) {
        let secret = from(
            rng,
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
            40,
        );
        let text = format!(
            "[default]\naws_access_key_id = {id}\naws_secret_access_key = {secret}\nregion = eu-central-1"
        );
        let mut item = Item::secret(text, "aws-key", vec![id]);
        item.secrets.push(crate::Planted {
            class: "secret-assignment".to_string(),
            fragments: vec![secret],
        });
        return item;
    }
    token_item(rng, "aws-key", "AWS_ACCESS_KEY_ID", id)
}

fn slack(rng: &mut ChaCha8Rng) -> Item {
    match rng.random_range(0..3) {
        0 => {
            let token = format!(
                "{}-{}-{}-{}",
                pick(rng, &["xoxb", "xoxp"]),
                from(rng, DIGITS, 12),
                from(rng, DIGITS, 13),
                from(rng, ALNUM, 24)
            );
            token_item(rng, "slack-token", "SLACK_BOT_TOKEN", token)
        }
        1 => {
            let token = format!(
                "xapp-1-A{}-{}-{}",
                from(rng, UPPER_DIGIT, 10),
                from(rng, DIGITS, 13),
                from(rng, HEX, 64)
            );
            token_item(rng, "slack-token", "SLACK_APP_TOKEN", token)
        }
        _ => {
            let path = format!(
                "T{}/B{}/{}",
                from(rng, UPPER_DIGIT, 10),
                from(rng, UPPER_DIGIT, 10),
                from(rng, ALNUM, 24)
            );
            let text = format!("ALERT_WEBHOOK=https://hooks.slack.com/services/{path}");
            Item::secret(text, "slack-token", vec![path])
        }
    }
}

fn google(rng: &mut ChaCha8Rng) -> Item {
    let token = match rng.random_range(0..4) {
        0 => format!("AIza{}", from(rng, B64URL, 35)),
        1 => format!("GOCSPX-{}", from(rng, B64URL, 28)),
        2 => format!("ya29.a0{}", from(rng, B64URL, 150)),
        _ => format!("1//0{}", from(rng, B64URL, 99)),
    };
    token_item(rng, "google-key", "GOOGLE_API_KEY", token)
}

fn telegram(rng: &mut ChaCha8Rng) -> Item {
    let token = format!("{}:AA{}", from_r(rng, DIGITS, 9..11), from(rng, B64URL, 33));
    match rng.random_range(0..3) {
        0 => {
            let text = format!(
                "Dec 02 {} web-1 bot[991]: POST https://api.telegram.org/bot{token}/sendMessage 200",
                clock(rng)
            );
            Item::secret(text, "telegram-bot-token", vec![token])
        }
        1 => {
            let text = format!("Dec 02 {} web-1 bot[991]: polling with {token}", clock(rng));
            Item::secret(text, "telegram-bot-token", vec![token])
        }
        _ => token_item(rng, "telegram-bot-token", "TELEGRAM_BOT_TOKEN", token),
    }
}

fn jwt(rng: &mut ChaCha8Rng) -> Item {
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
    let payload = URL_SAFE_NO_PAD.encode(format!(
        r#"{{"sub":"{}","name":"shop-api","iat":{}}}"#,
        from(rng, DIGITS, 10),
        rng.random_range(1_700_000_000u64..1_800_000_000)
    ));
    let token = format!("{header}.{payload}.{}", from(rng, B64URL, 43));
    let text = match rng.random_range(0..3) {
        0 => format!("Set-Cookie: session={token}; Path=/; HttpOnly"),
        1 => format!("{{\"id_token\": \"{token}\", \"expires_in\": 3600}}"),
        _ => format!(
            "Dec 02 {} web-1 api[77]: verified {token} for user 42",
            clock(rng)
        ),
    };
    Item::secret(text, "jwt", vec![token])
}

fn url_password(rng: &mut ChaCha8Rng) -> Item {
    let password = match rng.random_range(0..3) {
        0 => opaque_r(rng, 8..24),
        1 => format!("{}%40{}", opaque(rng, 6), from(rng, ALNUM, 6)),
        _ => format!(
            "{}!{}-{}",
            opaque(rng, 5),
            from(rng, ALNUM, 4),
            from(rng, DIGITS, 3)
        ),
    };
    let text = match rng.random_range(0..6) {
        0 => {
            format!("DATABASE_URL=postgres://shop:{password}@db.internal:5432/shop?sslmode=require")
        }
        1 => format!("REDIS_URL=redis://:{password}@cache:6379/0"),
        2 => format!(
            "MONGO_URI=\"mongodb+srv://app:{password}@cluster0.ab1cd.mongodb.net/prod?retryWrites=true\""
        ),
        3 => format!("    amqp://rabbit:{password}@mq.internal:5672/%2F"),
        4 => format!(
            "Dec 02 {} web-1 worker[31]: connecting to mysql://root:{password}@127.0.0.1:3306/app",
            clock(rng)
        ),
        _ => format!("smtp_url: smtps://mailer:{password}@smtp.example.net:465"),
    };
    Item::secret(text, "url-password", vec![password])
}

fn auth_header(rng: &mut ChaCha8Rng) -> Item {
    let (scheme, credential) = if rng.random_bool(0.5) {
        let user_pass = format!("admin:{}", opaque(rng, 14));
        ("Basic", STANDARD.encode(user_pass))
    } else {
        ("Bearer", from_r(rng, B64URL, 24..64))
    };
    let text = match rng.random_range(0..4) {
        0 => format!("Authorization: {scheme} {credential}"),
        1 => format!(
            "root       {:>5}  0.0  0.0  10820  4412 pts/0    S+   04:11   0:00 curl -sS -H Authorization: {scheme} {credential} https://api.example.com/v1/me",
            rng.random_range(1000..60000)
        ),
        2 => format!("> authorization: {} {credential}", scheme.to_lowercase()),
        _ => format!("  -H \"Authorization: {scheme} {credential}\" \\"),
    };
    Item::secret(text, "auth-header", vec![credential])
}

fn assignment(rng: &mut ChaCha8Rng) -> Item {
    let value = opaque_r(rng, 16..50);
    let text = match rng.random_range(0..11) {
        0 => format!("DB_PASSWORD={value}"),
        1 => format!("SECRET_KEY_BASE={value}"),
        2 => format!("  password: {value}"),
        3 => format!("  \"client_secret\": \"{value}\","),
        4 => format!("auth_token = {value}"),
        5 => format!(
            "mysql     {:>6}  0.1  2.0 1812344 198112 ?      Ssl  Dec01   4:12 /usr/sbin/mysqld --user=mysql --password={value}",
            rng.random_range(1000..60000)
        ),
        6 => format!(
            "deploy    {:>6}  0.0  0.4 712344 38112 ?        Sl   Dec01   0:12 /opt/sync/bin/sync --access-token {value} --interval 60",
            rng.random_range(1000..60000)
        ),
        7 => format!(
            "{} - - [02/Dec/2026:{} +0000] \"GET /export?format=csv&api_key={value}&page=1 HTTP/1.1\" 200 812 \"-\" \"curl/8.5.0\"",
            "203.0.113.50",
            clock(rng)
        ),
        8 => format!("machine backup.example.net login backup password {value}"),
        9 => format!(
            "  \"credentials\": \"{} {} {}\",",
            from(rng, b"abcdefghijklmnopqrstuvwxyz", 7),
            from(rng, b"abcdefghijklmnopqrstuvwxyz", 6),
            from(rng, b"abcdefghijklmnopqrstuvwxyz", 8)
        ),
        _ => format!(
            "Dec 02 {} web-1 app[812]: config loaded: {{'webhook_secret': '{value}'}}",
            clock(rng)
        ),
    };
    let fragment = if text.contains("\"credentials\"") {
        // The passphrase with spaces: the whole quoted value goes.
        let start = text.find(": \"").map_or(0, |i| i + 3);
        text[start..text.len() - 2].to_string()
    } else {
        value
    };
    Item::secret(text, "secret-assignment", vec![fragment])
}

pub const SECRET_MAKERS: &[Maker] = &[
    private_key,
    openai,
    anthropic,
    openrouter,
    stripe,
    github,
    aws,
    slack,
    google,
    telegram,
    jwt,
    url_password,
    auth_header,
    assignment,
    private_key_in_json,
    crate::cut_keys::key_tail,
    crate::cut_keys::key_middle,
    crate::cut_keys::key_head,
    crate::cut_keys::key_in_json_cut,
    crate::cut_keys::key_tail_interleaved,
    crate::cut_keys::key_in_escaped_json,
    crate::shapes::url_password_reserved,
    crate::shapes::url_password_json_escaped,
    crate::shapes::url_password_percent_encoded,
    crate::shapes::escaped_assignment,
    crate::shapes::telegram_encoded,
    crate::shapes::authorization_schemes,
    crate::shapes::program_output,
    crate::shapes::quoted_whole_assignment,
    crate::shapes::env_name_value_pair,
    crate::cut_keys::pgp_private_block_cut,
    crate::cut_keys::key_beside_a_cut_certificate,
];

fn prose(rng: &mut ChaCha8Rng) -> Item {
    let line = pick(
        rng,
        &[
            "2026-12-02 04:14:53.120 UTC [812] app@shop FATAL:  password authentication failed for user \"app\"",
            "Failed password for invalid user admin from 203.0.113.77 port 51122 ssh2",
            "pam_unix(sshd:auth): authentication failure; logname= uid=0 euid=0 tty=ssh ruser= rhost=203.0.113.77",
            "Basic authentication is enabled for /admin",
            "Bearer token expired, refreshing credentials",
            "key rotation scheduled for next Monday",
            "token refresh succeeded after retry",
            "the secret garden opens at nine",
            "Please enter the passphrase for the key to continue",
            "error: authentication required to access the registry",
        ],
    );
    let text = format!("Dec 02 {} web-1 app[812]: {line}", clock(rng));
    Item::decoy(text, "prose", line.to_string())
}

fn path_value(rng: &mut ChaCha8Rng) -> Item {
    let (text, keep) = match rng.random_range(0..6) {
        0 => (
            "DB_PASSWORD_FILE=/run/secrets/db_password",
            "/run/secrets/db_password",
        ),
        1 => (
            "    ssl_certificate_key /etc/letsencrypt/live/shop.example.com/privkey.pem;",
            "/etc/letsencrypt/live/shop.example.com/privkey.pem",
        ),
        2 => (
            "  \"keyfile\": \"/etc/aromba/keys/relay.pub\",",
            "/etc/aromba/keys/relay.pub",
        ),
        3 => (
            "GOOGLE_APPLICATION_CREDENTIALS=/srv/app/config/gcp.json",
            "/srv/app/config/gcp.json",
        ),
        4 => (
            "SSH_AUTH_SOCK=/tmp/ssh-XXXXkq82/agent.1734",
            "/tmp/ssh-XXXXkq82/agent.1734",
        ),
        _ => (
            "app --token-file ./secrets/api-token.txt --verbose",
            "./secrets/api-token.txt",
        ),
    };
    Item::decoy(text.to_string(), "path", keep.to_string())
}

fn uuid(rng: &mut ChaCha8Rng) -> Item {
    let u = format!(
        "{}-{}-4{}-{}{}-{}",
        from(rng, HEX, 8),
        from(rng, HEX, 4),
        from(rng, HEX, 3),
        pick(rng, &["8", "9", "a", "b"]),
        from(rng, HEX, 3),
        from(rng, HEX, 12)
    );
    let text = match rng.random_range(0..4) {
        0 => format!("request_id={u} status=200 duration=12ms"),
        1 => format!("  \"trace\": \"{u}\","),
        2 => format!(
            "Dec 02 {} web-1 app[1]: rotated key {u} for tenant 7",
            clock(rng)
        ),
        _ => format!("/proc/sys/kernel/random/boot_id: {u}"),
    };
    Item::decoy(text, "uuid", u)
}

fn git_sha(rng: &mut ChaCha8Rng) -> Item {
    let sha = from(rng, HEX, 40);
    let text = match rng.random_range(0..4) {
        0 => format!("commit {sha}"),
        1 => format!("  \"sha\": \"{sha}\","),
        2 => format!("HEAD is now at {} fix: retry on timeout", &sha[..7]),
        _ => format!(
            "gpg: Signature made Mon 01 Dec 2026 using RSA key {}",
            sha.to_uppercase()
        ),
    };
    let keep = if text.starts_with("HEAD") {
        sha[..7].to_string()
    } else if text.starts_with("gpg") {
        sha.to_uppercase()
    } else {
        sha
    };
    Item::decoy(text, "git-sha", keep)
}

fn public_key(rng: &mut ChaCha8Rng) -> Item {
    match rng.random_range(0..4) {
        0 => {
            let key = format!("AAAAC3NzaC1lZDI1NTE5AAAAI{}", from(rng, ALNUM, 43));
            let text = format!("ssh-ed25519 {key} deploy@laptop");
            Item::decoy(text, "public-key", key)
        }
        n => {
            let label = ["CERTIFICATE", "PUBLIC KEY", "PGP PUBLIC KEY BLOCK"][n - 1];
            let body = pem_body_r(rng, 200..700).join("\n");
            let text = format!("-----BEGIN {label}-----\n{body}\n-----END {label}-----");
            Item::decoy(text.clone(), "public-key", text)
        }
    }
}

fn short_value(rng: &mut ChaCha8Rng) -> Item {
    let text = pick(
        rng,
        &[
            "token=abc123",
            "password: changeme",
            "API_KEY=",
            "  \"secret\": \"s3cr3t\",",
            "auth=none",
            "--api-key xyz",
        ],
    );
    Item::decoy(text.to_string(), "short-value", text.to_string())
}

fn plain_url(rng: &mut ChaCha8Rng) -> Item {
    let url = pick(
        rng,
        &[
            "https://api.example.com/v1/users?page=2",
            "postgres://app@db.internal:5432/shop",
            "ssh://git@github.com/acme/shop.git",
            "redis://cache:6379/0",
            "https://shop.example.com:8443/checkout#step-2",
            "https://example.org/contact?mail=ops@example.org",
        ],
    );
    let text = format!("upstream: {url}");
    Item::decoy(text, "url-without-password", url.to_string())
}

pub const DECOY_MAKERS: &[Maker] = &[
    prose,
    path_value,
    uuid,
    git_sha,
    public_key,
    short_value,
    plain_url,
    crate::cut_keys::public_block_cut,
    crate::cut_keys::hex_ids,
    crate::shapes::program_prose,
    crate::shapes::challenge,
    crate::shapes::wireguard_public_key,
    crate::shapes::digest,
    crate::shapes::masked,
    crate::cut_keys::pgp_public_block_cut,
    crate::cut_keys::public_tail_beside_a_cut_key,
];
