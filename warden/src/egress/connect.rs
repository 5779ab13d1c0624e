//! The one request the proxy understands: `CONNECT host:port HTTP/1.1`,
//! its headers to the blank line, read within a bound. Anything else is
//! refused; what the target names is judged by the caller.

#![forbid(unsafe_code)]

use std::net::IpAddr;

/// The most a request may be, its headers included.
pub const MAX_REQUEST: usize = 4096;

/// What a CONNECT line asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A name, lower-cased, and a port.
    Name(String, u16),
    /// An IP address, written as one (with or without brackets).
    Address(IpAddr, u16),
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Name(n, p) => write!(f, "{n}:{p}"),
            Target::Address(IpAddr::V6(a), p) => write!(f, "[{a}]:{p}"),
            Target::Address(a, p) => write!(f, "{a}:{p}"),
        }
    }
}

/// Where the request ends (the blank line), if it has.
pub fn end_of_request(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// The target of a whole request (`buf` up to its blank line), or why it
/// is refused.
pub fn parse(buf: &[u8]) -> Result<Target, String> {
    let text = std::str::from_utf8(buf).map_err(|_| "the request is not text".to_string())?;
    let line = text.split("\r\n").next().unwrap_or_default();
    let mut words = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return Err("the request line is not METHOD TARGET VERSION".into());
    };
    if method != "CONNECT" {
        return Err(format!(
            "only CONNECT is served (a tunnel for TLS), not {}",
            printable(method)
        ));
    }
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err("the request is not HTTP/1".into());
    }
    let (host, port) = target
        .rsplit_once(':')
        .ok_or_else(|| "the target names no port".to_string())?;
    let port: u16 = port
        .parse()
        .ok()
        .filter(|p| *p > 0 && !port.starts_with('0') && !port.starts_with('+'))
        .ok_or_else(|| format!("the port of {} is not one", printable(target)))?;
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if let Ok(a) = bare.parse::<IpAddr>() {
        return Ok(Target::Address(a, port));
    }
    // Anything that is not plainly a DNS name (an address in another
    // spelling, `%` zones, a trailing dot) is not one to look up.
    let name = host.to_ascii_lowercase();
    if name.is_empty()
        || name.len() > 253
        || !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
    {
        return Err(format!("{} is not a host name", printable(host)));
    }
    Ok(Target::Name(name, port))
}

/// At most 64 characters of `s`, with what would not print escaped (the
/// journal and the answer carry it).
pub fn printable(s: &str) -> String {
    s.chars()
        .take(64)
        .flat_map(|c| {
            if c.is_ascii_graphic() {
                vec![c]
            } else {
                c.escape_default().collect()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(line: &str) -> Result<Target, String> {
        parse(format!("{line}\r\nHost: x\r\n\r\n").as_bytes())
    }

    #[test]
    fn reads_a_name_or_an_address_and_its_port() {
        assert_eq!(
            req("CONNECT Acme.Example.org:443 HTTP/1.1"),
            Ok(Target::Name("acme.example.org".into(), 443))
        );
        assert_eq!(
            req("CONNECT 169.254.169.254:80 HTTP/1.1"),
            Ok(Target::Address("169.254.169.254".parse().unwrap(), 80))
        );
        assert_eq!(
            req("CONNECT [::1]:443 HTTP/1.1"),
            Ok(Target::Address("::1".parse().unwrap(), 443))
        );
    }

    #[test]
    fn refuses_other_methods_ports_and_odd_names() {
        for line in [
            "GET http://example.org/ HTTP/1.1",
            "CONNECT example.org HTTP/1.1",
            "CONNECT example.org:0 HTTP/1.1",
            "CONNECT example.org:0443 HTTP/1.1",
            "CONNECT example.org:65536 HTTP/1.1",
            "CONNECT example.org:443 HTTP/2",
            "CONNECT example.org:443  HTTP/1.1",
            "CONNECT exa_mple.org:443 HTTP/1.1",
            "CONNECT [fe80::1%eth0]:443 HTTP/1.1",
        ] {
            assert!(req(line).is_err(), "{line}");
        }
    }
}
