//! Parsers for the scan's reads. Each takes the whole output and keeps the
//! lines it understands: a garbled or hostile line is skipped, never a
//! panic, and no more than [`MAX_LINES`] lines are looked at.

use crate::MAX_LINES;

/// One listening TCP socket, from `ss -tlnpH`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    /// The local address as `ss` prints it, without brackets or interface.
    pub host: String,
    pub port: u16,
    /// Bound to a loopback address (or the `lo` interface): not reachable
    /// from outside.
    pub loopback: bool,
    /// The processes holding it: (name, pid).
    pub processes: Vec<(String, u32)>,
}

/// `ss -tlnpH`: `LISTEN 0 4096 0.0.0.0:80 0.0.0.0:* users:(("nginx",pid=1,fd=6))`.
pub fn parse_listeners(out: &str) -> Vec<Listener> {
    out.lines()
        .take(MAX_LINES)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() < 5 || fields[0] != "LISTEN" {
                return None;
            }
            let (host, port) = fields[3].rsplit_once(':')?;
            let port: u16 = port.parse().ok()?;
            let host = host.trim_start_matches('[').trim_end_matches(']');
            let (host, iface) = match host.split_once('%') {
                Some((h, i)) => (h, Some(i)),
                None => (host, None),
            };
            let loopback = iface == Some("lo") || is_loopback(host);
            let processes = fields
                .get(5..)
                .map(|rest| users(&rest.join(" ")))
                .unwrap_or_default();
            Some(Listener {
                host: host.to_string(),
                port,
                loopback,
                processes,
            })
        })
        .collect()
}

fn is_loopback(host: &str) -> bool {
    let v4 = host.strip_prefix("::ffff:").unwrap_or(host);
    v4.starts_with("127.") || host == "::1" || host == "localhost"
}

/// `users:(("nginx",pid=1234,fd=6),("nginx",pid=1235,fd=6))` → names and pids.
fn users(text: &str) -> Vec<(String, u32)> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("(\"") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("\",pid=") else {
            break;
        };
        let name = &after[..end];
        let digits: String = after[end + 6..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        if let Ok(pid) = digits.parse() {
            out.push((name.to_string(), pid));
        }
        rest = &after[end + 6..];
    }
    out
}

/// One process, from `ps -eo pid,user,%cpu,%mem,rss,etime,comm --no-headers`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    pub pid: u32,
    pub user: String,
    /// Seconds since it started.
    pub age_secs: u64,
    /// Its command name (`comm`, at most 15 bytes; may hold spaces).
    pub name: String,
}

pub fn parse_processes(out: &str) -> Vec<Process> {
    out.lines()
        .take(MAX_LINES)
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let pid = fields.next()?.parse().ok()?;
            let user = fields.next()?.to_string();
            let _cpu = fields.next()?;
            let _mem = fields.next()?;
            let _rss = fields.next()?;
            let age_secs = parse_etime(fields.next()?)?;
            let name = fields.collect::<Vec<_>>().join(" ");
            if name.is_empty() {
                return None;
            }
            Some(Process {
                pid,
                user,
                age_secs,
                name,
            })
        })
        .collect()
}

/// `ps`'s elapsed time, `[[dd-]hh:]mm:ss`, in seconds.
pub fn parse_etime(text: &str) -> Option<u64> {
    let (days, clock) = match text.split_once('-') {
        Some((d, c)) => (d.parse::<u64>().ok()?, c),
        None => (0, text),
    };
    let parts: Vec<u64> = clock
        .split(':')
        .map(|p| {
            if p.is_empty() || p.len() > 2 || !p.bytes().all(|b| b.is_ascii_digit()) {
                None
            } else {
                p.parse().ok()
            }
        })
        .collect::<Option<_>>()?;
    let (h, m, s) = match parts[..] {
        [m, s] => (0, m, s),
        [h, m, s] => (h, m, s),
        _ => return None,
    };
    if m >= 60 || s >= 60 || h >= 24 {
        return None;
    }
    days.checked_mul(86_400)?.checked_add(h * 3600 + m * 60 + s)
}

/// Bytes received and sent through every interface but loopback, from
/// `cat /proc/net/dev`.
pub fn parse_net_dev(out: &str) -> Option<u64> {
    let mut total: u64 = 0;
    let mut seen = false;
    for line in out.lines().take(MAX_LINES) {
        let Some((iface, counters)) = line.split_once(':') else {
            continue;
        };
        let iface = iface.trim();
        if iface.is_empty() || iface.contains(' ') || iface == "lo" {
            continue;
        }
        let numbers: Vec<u64> = counters
            .split_whitespace()
            .map(str::parse)
            .collect::<Result<_, _>>()
            .ok()?;
        if numbers.len() < 16 {
            return None;
        }
        total = total.saturating_add(numbers[0]).saturating_add(numbers[8]);
        seen = true;
    }
    seen.then_some(total)
}

/// Seconds since boot, from `cat /proc/uptime`.
pub fn parse_uptime(out: &str) -> Option<u64> {
    let first = out.split_whitespace().next()?;
    let secs: f64 = first.parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then_some(secs as u64)
}

/// `du -B1 …`: (bytes, path) a line; paths are absolute.
pub fn parse_du(out: &str) -> Vec<(u64, String)> {
    out.lines()
        .take(MAX_LINES)
        .filter_map(|line| {
            let (size, path) = line.split_once('\t')?;
            let size = size.trim().parse().ok()?;
            (path.starts_with('/') && !path.chars().any(char::is_control))
                .then(|| (size, path.to_string()))
        })
        .collect()
}

/// `ls DIR`: one name a line (names with control characters are skipped).
pub fn parse_ls(out: &str) -> Vec<String> {
    out.lines()
        .take(MAX_LINES)
        .filter(|n| !n.is_empty() && !n.contains('/') && !n.chars().any(char::is_control))
        .map(String::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_ss_listeners_with_their_processes() {
        let out = "LISTEN 0      511          0.0.0.0:80        0.0.0.0:*    users:((\"nginx\",pid=812,fd=6),(\"nginx\",pid=811,fd=6))\n\
                   LISTEN 0      4096   127.0.0.53%lo:53        0.0.0.0:*    users:((\"systemd-resolve\",pid=402,fd=14))\n\
                   LISTEN 0      244        127.0.0.1:5432      0.0.0.0:*    users:((\"postgres\",pid=990,fd=6))\n\
                   LISTEN 0      511             [::]:443          [::]:*    users:((\"nginx\",pid=812,fd=8))\n\
                   LISTEN 0      128            [::1]:6379         [::]:*\n\
                   garbage line\n";
        let l = parse_listeners(out);
        assert_eq!(l.len(), 5);
        assert_eq!((l[0].port, l[0].loopback), (80, false));
        assert_eq!(
            l[0].processes,
            vec![("nginx".to_string(), 812), ("nginx".to_string(), 811)]
        );
        assert!(l[1].loopback && l[2].loopback && l[4].loopback);
        assert_eq!(
            (l[3].host.as_str(), l[3].port, l[3].loopback),
            ("::", 443, false)
        );
        assert!(l[4].processes.is_empty());
    }

    #[test]
    fn reads_elapsed_times_in_every_shape_ps_prints() {
        assert_eq!(parse_etime("05:03"), Some(303));
        assert_eq!(parse_etime("02:05:03"), Some(7503));
        assert_eq!(parse_etime("31-02:05:03"), Some(31 * 86_400 + 7503));
        for bad in [
            "",
            "5",
            "1-",
            "-1:00",
            "aa:bb",
            "1:2:3:4",
            "99999999999999999999-00:00:00",
            "00:61",
        ] {
            assert_eq!(parse_etime(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn reads_processes_whose_names_hold_spaces() {
        let out = "    1 root      0.0  0.1 12000   45-01:02:03 systemd\n\
                   812 www-data  0.3  1.2 40000   40-00:00:09 nginx\n\
                   900 app       1.0  3.0 90000        12:00 Web Content\n\
                   bad\n";
        let p = parse_processes(out);
        assert_eq!(p.len(), 3);
        assert_eq!(p[1].age_secs, 40 * 86_400 + 9);
        assert_eq!(p[2].name, "Web Content");
    }

    #[test]
    fn sums_traffic_of_every_interface_but_loopback() {
        let out = "Inter-|   Receive                                                |  Transmit\n \
                   face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    \
                   lo: 5000 10 0 0 0 0 0 0 5000 10 0 0 0 0 0 0\n  \
                   eth0: 1000 10 0 0 0 0 0 0 200 3 0 0 0 0 0 0\n  \
                   wg0: 30 1 0 0 0 0 0 0 40 1 0 0 0 0 0 0\n";
        assert_eq!(parse_net_dev(out), Some(1270));
        assert_eq!(parse_net_dev("eth0: 1 2 3\n"), None);
        assert_eq!(parse_net_dev(""), None);
    }

    #[test]
    fn reads_uptime_du_and_ls() {
        assert_eq!(parse_uptime("93784.51 180000.2\n"), Some(93784));
        assert_eq!(parse_uptime("NaN 1"), None);
        assert_eq!(parse_uptime("-1 1"), None);
        let du = parse_du("4096\t/srv/app/.git\n12\t/srv/my files\nx\t/srv\n5\trelative\n");
        assert_eq!(
            du,
            vec![(4096, "/srv/app/.git".into()), (12, "/srv/my files".into())]
        );
        assert_eq!(
            parse_ls("a\nb c\n\nd\x1b\n"),
            vec!["a".to_string(), "b c".to_string()]
        );
    }
}
