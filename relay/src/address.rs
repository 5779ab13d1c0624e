//! Which address a request counts against.
//!
//! The peer's address, unless the peer is a trusted proxy: then the
//! rightmost X-Forwarded-For entry that is not itself a trusted proxy (each
//! proxy appends the address it saw, so entries left of that are whatever
//! the client chose to write). An IPv6 address counts as its /64: one host
//! is given a whole /64 and may use any address in it.

use axum::http::HeaderMap;
use ipnet::IpNet;
use std::net::{IpAddr, Ipv6Addr};

/// The key a request is limited under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AddressKey(IpAddr);

impl AddressKey {
    /// The key of one address: itself for IPv4, its /64 for IPv6 (an IPv4
    /// address mapped into IPv6 counts as the IPv4 address).
    pub fn of(addr: IpAddr) -> AddressKey {
        match addr {
            IpAddr::V4(_) => AddressKey(addr),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => AddressKey(IpAddr::V4(v4)),
                None => {
                    let s = v6.segments();
                    AddressKey(IpAddr::V6(Ipv6Addr::new(
                        s[0], s[1], s[2], s[3], 0, 0, 0, 0,
                    )))
                }
            },
        }
    }

    /// Bytes that name the key, for its stored hash.
    pub fn to_bytes(self) -> Vec<u8> {
        match self.0 {
            IpAddr::V4(a) => a.octets().to_vec(),
            IpAddr::V6(a) => a.octets().to_vec(),
        }
    }
}

/// Whether `addr` is one of the trusted proxies.
pub(crate) fn is_trusted_proxy(addr: IpAddr, proxies: &[IpNet]) -> bool {
    let addr = match addr {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(addr, IpAddr::V4),
        v4 => v4,
    };
    proxies.iter().any(|net| net.contains(&addr))
}

/// An X-Forwarded-For entry: an address, or (as some load balancers write
/// it) an address with a port, `1.2.3.4:5678` or `[2001:db8::1]:5678`.
fn parse_entry(entry: &str) -> Result<IpAddr, std::net::AddrParseError> {
    entry.parse::<IpAddr>().or_else(|e| {
        entry
            .parse::<std::net::SocketAddr>()
            .map(|s| s.ip())
            .map_err(|_| e)
    })
}

/// The address a request counts against.
pub(crate) fn client_address(peer: IpAddr, headers: &HeaderMap, proxies: &[IpNet]) -> AddressKey {
    if !is_trusted_proxy(peer, proxies) {
        return AddressKey::of(peer);
    }
    // Every X-Forwarded-For header, in order, as one list.
    let entries: Vec<&str> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .collect();
    for entry in entries.iter().rev() {
        match parse_entry(entry) {
            Ok(addr) if is_trusted_proxy(addr, proxies) => continue,
            Ok(addr) => return AddressKey::of(addr),
            // An entry no proxy of ours wrote: what is right of it is all we
            // can believe, and that was a trusted proxy; count the proxy.
            Err(_) => break,
        }
    }
    AddressKey::of(peer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(xff: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in xff {
            h.append(
                "x-forwarded-for",
                HeaderValue::from_str(v).unwrap_or(HeaderValue::from_static("")),
            );
        }
        h
    }

    fn ip(s: &str) -> IpAddr {
        s.parse()
            .unwrap_or(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED))
    }

    #[test]
    fn an_untrusted_peer_counts_as_itself_whatever_it_forwards() {
        let proxies = crate::config::parse_proxies("10.0.0.0/8").unwrap_or_default();
        let key = client_address(ip("203.0.113.5"), &headers(&["198.51.100.1"]), &proxies);
        assert_eq!(key, AddressKey::of(ip("203.0.113.5")));
    }

    #[test]
    fn a_trusted_proxy_gives_the_rightmost_untrusted_entry() {
        let proxies = crate::config::parse_proxies("10.0.0.0/8").unwrap_or_default();
        let h = headers(&["1.1.1.1, 198.51.100.7", "10.0.0.3"]);
        assert_eq!(
            client_address(ip("10.0.0.2"), &h, &proxies),
            AddressKey::of(ip("198.51.100.7"))
        );
    }

    #[test]
    fn garbage_in_forwarded_for_counts_the_proxy() {
        let proxies = crate::config::parse_proxies("10.0.0.0/8").unwrap_or_default();
        let h = headers(&["1.1.1.1, not-an-address"]);
        assert_eq!(
            client_address(ip("10.0.0.2"), &h, &proxies),
            AddressKey::of(ip("10.0.0.2"))
        );
    }

    #[test]
    fn forwarded_entries_with_ports_are_read() {
        let proxies = crate::config::parse_proxies("10.0.0.0/8").unwrap_or_default();
        for (entry, want) in [
            ("198.51.100.7:4711", "198.51.100.7"),
            ("[2001:db8::1]:443", "2001:db8::1"),
        ] {
            assert_eq!(
                client_address(ip("10.0.0.2"), &headers(&[entry]), &proxies),
                AddressKey::of(ip(want))
            );
        }
    }

    #[test]
    fn ipv6_counts_by_its_64() {
        assert_eq!(
            AddressKey::of(ip("2001:db8:1:2:aaaa::1")),
            AddressKey::of(ip("2001:db8:1:2:ffff:ffff:ffff:ffff"))
        );
        assert_ne!(
            AddressKey::of(ip("2001:db8:1:2::1")),
            AddressKey::of(ip("2001:db8:1:3::1"))
        );
        assert_eq!(
            AddressKey::of(ip("::ffff:192.0.2.1")),
            AddressKey::of(ip("192.0.2.1"))
        );
    }
}
