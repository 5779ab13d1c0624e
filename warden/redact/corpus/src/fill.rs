//! Ordinary command output with no secret in it: what most of what the
//! Warden returns looks like.

use rand::Rng;
use rand::seq::IndexedRandom;

const HOSTS: &[&str] = &["web-1", "vps-ams", "app01", "db-main", "edge"];
const USERS: &[&str] = &[
    "root", "www-data", "postgres", "deploy", "aromba", "systemd+", "message+",
];
const UNITS: &[&str] = &[
    "nginx.service",
    "docker.service",
    "postgresql@15-main.service",
    "ssh.service",
    "cron.service",
    "fail2ban.service",
    "systemd-timesyncd.service",
    "unattended-upgrades.service",
];
const PATHS: &[&str] = &[
    "/api/v1/items",
    "/health",
    "/static/app.3f9a1c.js",
    "/login",
    "/wp-login.php",
    "/favicon.ico",
    "/api/v1/orders/8812/status",
    "/.well-known/acme-challenge/x7Yh2",
];
const AGENTS: &[&str] = &[
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36",
    "curl/8.5.0",
    "Go-http-client/1.1",
    "Prometheus/2.53.0",
    "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
];
const COMMANDS: &[&str] = &[
    "/usr/sbin/nginx -g daemon on; master_process on;",
    "nginx: worker process",
    "/usr/bin/dockerd -H fd:// --containerd=/run/containerd/containerd.sock",
    "/usr/lib/postgresql/15/bin/postgres -D /var/lib/postgresql/15/main -c config_file=/etc/postgresql/15/main/postgresql.conf",
    "postgres: 15/main: checkpointer",
    "/usr/sbin/sshd -D",
    "/usr/sbin/cron -f",
    "/usr/bin/python3 /usr/bin/fail2ban-server -xf start",
    "node /srv/app/dist/server.js --port 3000",
    "/lib/systemd/systemd-journald",
    "[kworker/1:2-events]",
    "gunicorn: worker [app.wsgi:application]",
];
const IMAGES: &[&str] = &[
    "nginx:1.27-alpine",
    "postgres:16",
    "redis:7",
    "ghcr.io/acme/shop-api:2.14.1",
    "grafana/grafana:11.3.0",
];
const MESSAGES: &[&str] = &[
    "request completed",
    "cache miss",
    "connected to database",
    "job finished",
    "retrying in 5s",
    "upstream timed out",
    "health check ok",
];

fn ip(rng: &mut impl Rng) -> String {
    format!("203.0.113.{}", rng.random_range(1..255))
}

fn hex(rng: &mut impl Rng, n: usize) -> String {
    (0..n)
        .map(|_| char::from(b"0123456789abcdef"[rng.random_range(0..16)]))
        .collect()
}

fn clock(rng: &mut impl Rng) -> String {
    format!(
        "{:02}:{:02}:{:02}",
        rng.random_range(0..24),
        rng.random_range(0..60),
        rng.random_range(0..60)
    )
}

fn pick<'a>(rng: &mut impl Rng, from: &[&'a str]) -> &'a str {
    from.choose(rng).copied().unwrap_or("")
}

/// One line of ordinary output, drawn from the shapes the Warden's read
/// commands print.
pub fn filler_line(rng: &mut impl Rng) -> String {
    match rng.random_range(0..12) {
        0 => format!(
            "{:<10} {:>6}  {}.{}  {}.{} {:>6} {:>5} ?        Ss   Dec01   0:{:02} {}",
            pick(rng, USERS),
            rng.random_range(1..65000),
            rng.random_range(0..9),
            rng.random_range(0..9),
            rng.random_range(0..9),
            rng.random_range(0..9),
            rng.random_range(10000..900000),
            rng.random_range(1000..90000),
            rng.random_range(0..59),
            pick(rng, COMMANDS)
        ),
        1 => format!(
            "Dec 02 {} {} sshd[{}]: Accepted publickey for deploy from {} port {} ssh2: ED25519 SHA256:{}",
            clock(rng),
            pick(rng, HOSTS),
            rng.random_range(1000..40000),
            ip(rng),
            rng.random_range(30000..65000),
            hex(rng, 43)
        ),
        2 => format!(
            "{} - - [02/Dec/2026:{} +0000] \"GET {}?page={} HTTP/1.1\" {} {} \"-\" \"{}\"",
            ip(rng),
            clock(rng),
            pick(rng, PATHS),
            rng.random_range(1..40),
            [200, 200, 200, 304, 404, 502][rng.random_range(0..6)],
            rng.random_range(0..90000),
            pick(rng, AGENTS)
        ),
        3 => format!(
            "Dec 02 {} {} systemd[1]: Started {} - {}.",
            clock(rng),
            pick(rng, HOSTS),
            pick(rng, UNITS),
            [
                "A high performance web server",
                "Docker Application Container Engine",
                "Daily apt upgrade and clean activities",
                "Regular background program processing daemon"
            ][rng.random_range(0..4)]
        ),
        4 => format!(
            "{{\"level\":\"info\",\"ts\":\"2026-12-02T{}.{:03}Z\",\"msg\":\"{}\",\"path\":\"{}\",\"status\":{},\"duration_ms\":{},\"request_id\":\"{}\"}}",
            clock(rng),
            rng.random_range(0..1000),
            pick(rng, MESSAGES),
            pick(rng, PATHS),
            [200, 201, 404, 500][rng.random_range(0..4)],
            rng.random_range(1..900),
            hex(rng, 16)
        ),
        5 => format!(
            "/dev/vda{}       {:>4}G  {:>4}G  {:>4}G  {:>2}% {}",
            rng.random_range(1..4),
            rng.random_range(20..500),
            rng.random_range(1..200),
            rng.random_range(1..300),
            rng.random_range(1..99),
            ["/", "/boot", "/var/lib/docker", "/srv"][rng.random_range(0..4)]
        ),
        6 => format!(
            "{}   {:<32} \"docker-entrypoint.s…\"   {} days ago   Up {} days (healthy)   0.0.0.0:{}->{}/tcp   {}",
            hex(rng, 12),
            pick(rng, IMAGES),
            rng.random_range(2..60),
            rng.random_range(1..30),
            rng.random_range(3000..9000),
            rng.random_range(80..9000),
            ["shop-api-1", "shop-db-1", "cache", "grafana"][rng.random_range(0..4)]
        ),
        7 => format!(
            "Dec 02 {} {} kernel: [UFW BLOCK] IN=eth0 OUT= MAC=52:54:00:{}:{}:{} SRC={} DST=198.51.100.4 LEN=40 TOS=0x00 PREC=0x00 TTL=244 ID={} PROTO=TCP SPT={} DPT={} WINDOW=1024 RES=0x00 SYN URGP=0",
            clock(rng),
            pick(rng, HOSTS),
            hex(rng, 2),
            hex(rng, 2),
            hex(rng, 2),
            ip(rng),
            rng.random_range(1..65535),
            rng.random_range(1024..65535),
            [22, 23, 3389, 5432, 6379, 8080][rng.random_range(0..6)]
        ),
        8 => format!(
            "{}/{} {}.{}.{}-{}ubuntu{} amd64 [upgradable from: {}.{}.{}-{}]",
            [
                "openssl",
                "libssl3",
                "nginx",
                "linux-image-generic",
                "curl",
                "tzdata"
            ][rng.random_range(0..6)],
            ["jammy-updates", "noble-security", "bookworm-security"][rng.random_range(0..3)],
            rng.random_range(1..4),
            rng.random_range(0..20),
            rng.random_range(0..20),
            rng.random_range(1..9),
            rng.random_range(1..5),
            rng.random_range(1..4),
            rng.random_range(0..20),
            rng.random_range(0..20),
            rng.random_range(1..9)
        ),
        9 => format!(
            "  {:<40} loaded active running {}",
            pick(rng, UNITS),
            [
                "A high performance web server and a reverse proxy server",
                "OpenBSD Secure Shell server",
                "Regular background program processing daemon"
            ][rng.random_range(0..3)]
        ),
        10 => format!(
            "Dec 02 {} {} dockerd[{}]: time=\"2026-12-02T{}.{}Z\" level=info msg=\"ignoring event\" container={} module=libcontainerd namespace=moby topic=/tasks/delete type=\"*events.TaskDelete\"",
            clock(rng),
            pick(rng, HOSTS),
            rng.random_range(400..900),
            clock(rng),
            rng.random_range(100000000..999999999),
            hex(rng, 64)
        ),
        _ => format!(
            "Mem:           {}Mi       {}Mi       {}Mi        {}Mi       {}Mi       {}Mi",
            rng.random_range(1000..64000),
            rng.random_range(100..32000),
            rng.random_range(100..32000),
            rng.random_range(1..900),
            rng.random_range(100..32000),
            rng.random_range(100..32000)
        ),
    }
}
