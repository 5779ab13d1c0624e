//! Secrets in the shapes real programs print them: passwords with reserved
//! bytes in connection strings, URLs JSON-escaped (PHP) or percent-encoded
//! (a redirect parameter), assignments escaped by Gson or .NET, form bodies,
//! YAML values on the next lines, ADO.NET connection strings, and the
//! output of libpq, pgbouncer, Go, Java, Kubernetes, Docker, systemd, curl
//! and Python; and the decoys those programs print beside them.

use crate::Item;
use crate::secrets::{ALNUM, B64URL, DIGITS, HEX, clock, from, from_r, opaque, opaque_r, pick};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// A password as people choose them, with the bytes URL parsers stop at.
fn reserved_password(rng: &mut ChaCha8Rng) -> String {
    match rng.random_range(0..4) {
        0 => format!("{}#{}", opaque(rng, 4), opaque(rng, 9)),
        1 => format!("{}/{}?{}", opaque(rng, 5), opaque(rng, 4), opaque(rng, 5)),
        2 => format!(
            "my {} pass {}",
            pick(rng, &["secret", "long", "db", "own"]),
            from(rng, DIGITS, 2)
        ),
        _ => format!("{}@{}", opaque(rng, 6), opaque(rng, 7)),
    }
}

pub fn url_password_reserved(rng: &mut ChaCha8Rng) -> Item {
    let password = reserved_password(rng);
    let text = match rng.random_range(0..4) {
        0 => format!("DATABASE_URL=postgres://app:{password}@db/app"),
        1 => format!("cache: redis://:{password}@cache:6379/0"),
        2 => format!(
            "Dec 02 {} web-1 worker[31]: connecting to mysql://root:{password}@127.0.0.1:3306/app",
            clock(rng)
        ),
        _ => format!("  url: amqp://rabbit:{password}@mq.internal:5672/vhost"),
    };
    Item::secret(text, "url-password", vec![password])
}

/// `postgres:\/\/…` as PHP's `json_encode` writes it.
pub fn url_password_json_escaped(rng: &mut ChaCha8Rng) -> Item {
    let password = format!("{}\\/{}", opaque(rng, 6), opaque(rng, 8));
    let text = format!(
        "[2026-12-02 {}] production.ERROR: {{\"exception\":\"PDOException\",\"dsn\":\"pgsql:\\/\\/laravel:{password}@db.internal:5432\\/shop\"}}",
        clock(rng)
    );
    Item::secret(text, "url-password", vec![password])
}

/// A whole URL percent-encoded as a query value.
pub fn url_password_percent_encoded(rng: &mut ChaCha8Rng) -> Item {
    let password = format!("{}%23{}", opaque(rng, 7), opaque(rng, 6));
    let text = format!(
        "{} - - [02/Dec/2026:{} +0000] \"GET /login?next=https%3A%2F%2Fadmin%3A{password}%40intranet.example.com%2Fdash HTTP/1.1\" 302 0",
        "203.0.113.9",
        clock(rng)
    );
    Item::secret(text, "url-password", vec![password])
}

pub fn escaped_assignment(rng: &mut ChaCha8Rng) -> Item {
    let value = opaque_r(rng, 14..30);
    let (text, fragment) = match rng.random_range(0..7) {
        // Gson escapes `=` and `&` in strings.
        0 => (
            format!(
                "Dec 02 {} web-1 java[411]: {{\"query\":\"user\\u003dbob\\u0026password\\u003d{value}\\u0026remember\\u003d1\"}}",
                clock(rng)
            ),
            value,
        ),
        // .NET's JavaScriptEncoder escapes quotes.
        1 => (
            format!(
                "{{\\u0022User\\u0022:\\u0022bob\\u0022,\\u0022Password\\u0022:\\u0022{value}\\u0022}}"
            ),
            value,
        ),
        2 => (
            format!(
                "POST /oauth/token body: grant_type=client_credentials&client_id=shop&client_secret%3D{value}%26scope%3Dall"
            ),
            value,
        ),
        3 => (
            format!("app:\n  secret: >-\n    {value}\n  user: shop"),
            value,
        ),
        4 => (format!("db:\n  password:\n    {value}\n  host: db"), value),
        5 => {
            let phrase = format!(
                "{} {}",
                pick(rng, &["two", "red", "blue", "old"]),
                pick(rng, &["words", "horse", "moon", "bridge"])
            );
            (
                format!("Server=db;Database=shop;User Id=sa;Password={phrase};Encrypt=true"),
                phrase,
            )
        }
        _ => (
            format!(
                "  \"ConnectionStrings\": {{ \"Default\": \"Host=db;Username=app;Password={value};\" }}"
            ),
            value,
        ),
    };
    Item::secret(text, "secret-assignment", vec![fragment])
}

pub fn telegram_encoded(rng: &mut ChaCha8Rng) -> Item {
    let token = format!(
        "{}%3AAA{}",
        from_r(rng, DIGITS, 9..11),
        from(rng, B64URL, 33)
    );
    let text = format!(
        "Dec 02 {} web-1 bot[991]: proxying https%3A%2F%2Fapi.telegram.org%2Fbot{token}%2FsendMessage",
        clock(rng)
    );
    Item::secret(text, "telegram-bot-token", vec![token])
}

pub fn authorization_schemes(rng: &mut ChaCha8Rng) -> Item {
    match rng.random_range(0..3) {
        0 => {
            let token = from(rng, HEX, 40);
            let text = format!("> Authorization: token {token}");
            Item::secret(text, "auth-header", vec![token])
        }
        1 => {
            let response = from(rng, HEX, 32);
            let text = format!(
                "Authorization: Digest username=\"admin\", realm=\"shop\", nonce=\"{}\", uri=\"/admin\", response=\"{response}\"",
                from(rng, HEX, 16)
            );
            Item::secret(text, "auth-header", vec![response])
        }
        _ => {
            let signature = from(rng, HEX, 64);
            let text = format!(
                "  -H 'Authorization: AWS4-HMAC-SHA256 Credential=backup/20261202/eu-central-1/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature={signature}'"
            );
            Item::secret(text, "auth-header", vec![signature])
        }
    }
}

/// Secrets as libpq, pgbouncer, Go, Java, Kubernetes, Docker, systemd and
/// Python print them.
pub fn program_output(rng: &mut ChaCha8Rng) -> Item {
    let value = opaque_r(rng, 14..28);
    let (text, class, fragment) = match rng.random_range(0..8) {
        0 => (
            format!(
                "psql \"host=db port=5432 user=app password={value} dbname=shop sslmode=require\""
            ),
            "secret-assignment",
            value,
        ),
        1 => (
            format!(
                "[databases]\nshop = host=10.0.0.5 port=5432 dbname=shop user=app password={value}"
            ),
            "secret-assignment",
            value,
        ),
        2 => (
            format!(
                "level=debug msg=\"config\" cfg=\"&{{Addr:db:5432 User:app Password:{value} Database:shop}}\""
            ),
            "secret-assignment",
            value,
        ),
        3 => (
            format!(
                "Caused by: java.sql.SQLException: cannot open jdbc:postgresql://db:5432/shop?user=app&password={value}&ssl=true"
            ),
            "secret-assignment",
            value,
        ),
        4 => {
            let encoded = STANDARD.encode(&value);
            (
                format!(
                    "apiVersion: v1\ndata:\n  password: {encoded}\n  username: YXBw\nkind: Secret"
                ),
                "secret-assignment",
                encoded,
            )
        }
        5 => (
            format!(
                "        \"Env\": [\n            \"POSTGRES_PASSWORD={value}\",\n            \"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin\""
            ),
            "secret-assignment",
            value,
        ),
        6 => (
            format!("Environment=NODE_ENV=production DB_PASSWORD={value} PORT=8080"),
            "secret-assignment",
            value,
        ),
        _ => (
            format!(
                "requests.exceptions.HTTPError: 401 Client Error: Unauthorized for url: https://api.example.com/v1/items?api_key={value}"
            ),
            "secret-assignment",
            value,
        ),
    };
    Item::secret(text, class, vec![fragment])
}

/// Errors that name a password, as libpq and JDBC print them.
pub fn program_prose(rng: &mut ChaCha8Rng) -> Item {
    program_decoy(rng, 0..2)
}

/// Authentication challenges (`WWW-Authenticate`).
pub fn challenge(rng: &mut ChaCha8Rng) -> Item {
    program_decoy(rng, 2..4)
}

/// WireGuard's public keys, as `wg show` and its configuration print them.
pub fn wireguard_public_key(rng: &mut ChaCha8Rng) -> Item {
    program_decoy(rng, 4..6)
}

/// Digests that name their algorithm, under a name with `key` in it.
pub fn digest(rng: &mut ChaCha8Rng) -> Item {
    program_decoy(rng, 6..8)
}

/// Values already masked by the program that printed them.
pub fn masked(rng: &mut ChaCha8Rng) -> Item {
    program_decoy(rng, 8..10)
}

/// What those programs print around their secrets.
fn program_decoy(rng: &mut ChaCha8Rng, variants: std::ops::Range<u32>) -> Item {
    let wg_key = format!("{}=", from(rng, ALNUM, 43));
    let digest = from(rng, HEX, 64);
    let (text, kind, keep) = match rng.random_range(variants) {
        0 => {
            let t = "psql: error: connection to server at \"db\" (10.0.0.5), port 5432 failed: FATAL:  password authentication failed for user \"app\"".to_string();
            (t.clone(), "prose", t)
        }
        1 => {
            let t = "java.sql.SQLException: Access denied for user 'root'@'localhost' (using password: YES)".to_string();
            (t.clone(), "prose", t)
        }
        2 => {
            let t = "WWW-Authenticate: Bearer realm=\"api\", error=\"invalid_token\"".to_string();
            (t.clone(), "challenge", t)
        }
        3 => {
            let t = "< www-authenticate: Basic realm=\"Restricted\", charset=\"UTF-8\"".to_string();
            (t.clone(), "challenge", t)
        }
        4 => (
            format!(
                "peer: {}\n  public key: {wg_key}\n  endpoint: 203.0.113.7:51820",
                from(rng, ALNUM, 12)
            ),
            "public-key",
            wg_key,
        ),
        5 => (
            format!("[Peer]\nPublicKey = {wg_key}\nAllowedIPs = 10.8.0.2/32"),
            "public-key",
            wg_key,
        ),
        6 => {
            let t = format!("signing key_id=sha256:{digest}");
            (t.clone(), "digest", t)
        }
        7 => {
            let t = format!(
                "\"image\": \"registry.example.com/shop@sha256:{digest}\", \"key\": \"sha256:{digest}\""
            );
            (t.clone(), "digest", t)
        }
        8 => {
            let t = "sqlalchemy.exc.OperationalError: (psycopg2.OperationalError) could not connect to postgresql://app:***@db:5432/shop".to_string();
            (t.clone(), "masked", t)
        }
        _ => {
            let t = "Dec 02 04:11:09 web-1 app[812]: config: password=************** token=**************".to_string();
            (t.clone(), "masked", t)
        }
    };
    Item::decoy(text, kind, keep)
}

/// A passphrase with spaces, as people choose them.
fn phrase(rng: &mut ChaCha8Rng) -> String {
    format!(
        "{} {} {} {}",
        pick(rng, &["my", "correct", "old", "blue"]),
        pick(rng, &["secret", "horse", "moon", "river"]),
        pick(rng, &["pass", "battery", "staple", "bridge"]),
        from(rng, DIGITS, 2)
    )
}

/// A whole assignment quoted as one word (`systemctl show`'s
/// `Environment=`, `docker inspect`'s `Env`): the value runs to the quote,
/// spaces and all.
pub fn quoted_whole_assignment(rng: &mut ChaCha8Rng) -> Item {
    let value = phrase(rng);
    let name = pick(rng, &["SMTP_PASSWORD", "DB_PASSWORD", "API_SECRET"]);
    let text = if rng.random_bool(0.5) {
        format!("Environment=LANG=C.UTF-8 \"{name}={value}\" PATH=/usr/bin:/bin")
    } else {
        format!(
            "        \"Env\": [\n            \"{name}={value}\",\n            \"PATH=/usr/local/sbin:/usr/local/bin\"\n        ],"
        )
    };
    let mut item = Item::secret(text, "secret-assignment", vec![value]);
    item.decoys.push(crate::Decoy {
        kind: "neighbour-assignment".to_string(),
        text: "PATH=/usr/".to_string(),
    });
    item
}

/// Kubernetes env entries: the value sits under a `name:` that names a
/// secret (YAML or JSON), and a value under a harmless name survives.
pub fn env_name_value_pair(rng: &mut ChaCha8Rng) -> Item {
    let value = if rng.random_bool(0.5) {
        opaque_r(rng, 14..26)
    } else {
        phrase(rng)
    };
    let name = pick(
        rng,
        &["DB_PASSWORD", "SMTP_PASSWORD", "API_KEY", "JWT_SECRET"],
    );
    let text = if rng.random_bool(0.5) {
        format!(
            "    env:\n    - name: {name}\n      value: \"{value}\"\n    - name: LOG_LEVEL\n      value: info"
        )
    } else {
        format!(
            "                \"env\": [\n                    {{\n                        \"name\": \"{name}\",\n                        \"value\": \"{value}\"\n                    }},\n                    {{\"name\":\"LOG_LEVEL\",\"value\":\"info\"}}\n                ],"
        )
    };
    let keep = if text.contains("\"LOG_LEVEL\"") {
        "{\"name\":\"LOG_LEVEL\",\"value\":\"info\"}"
    } else {
        "- name: LOG_LEVEL\n      value: info"
    };
    let mut item = Item::secret(text, "secret-assignment", vec![value]);
    item.decoys.push(crate::Decoy {
        kind: "env-pair".to_string(),
        text: keep.to_string(),
    });
    item
}
