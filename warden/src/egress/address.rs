//! Which addresses a skill's connection may reach: only the public
//! internet's. A declared name that resolves to this machine, a private
//! network, a link-local address (the cloud metadata service at
//! 169.254.169.254 among them), or anything not meant to be routed is
//! refused, so a name an attacker controls cannot steer the proxy inward.

#![forbid(unsafe_code)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why `a` may not be reached, or `None` when it may.
pub fn not_public(a: IpAddr) -> Option<&'static str> {
    match a {
        IpAddr::V4(v4) => v4_refusal(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return v4_refusal(v4);
            }
            v6_refusal(v6)
        }
    }
}

fn v4_refusal(a: Ipv4Addr) -> Option<&'static str> {
    let [o0, o1, o2, _] = a.octets();
    if a.is_loopback() {
        Some("this machine (loopback)")
    } else if a.is_link_local() {
        Some("link-local (the cloud metadata service lives there)")
    } else if a.is_private() || (o0 == 100 && (64..128).contains(&o1)) {
        Some("a private network")
    } else if a.is_unspecified() || o0 == 0 {
        Some("unspecified")
    } else if a.is_multicast() || a.is_broadcast() || o0 >= 240 {
        Some("not a unicast internet address")
    } else if (o0 == 192 && o1 == 0 && (o2 == 0 || o2 == 2))
        || (o0 == 198 && (o1 == 18 || o1 == 19))
        || (o0 == 198 && o1 == 51 && o2 == 100)
        || (o0 == 203 && o1 == 0 && o2 == 113)
    {
        Some("reserved for documentation or testing")
    } else {
        None
    }
}

fn v6_refusal(a: Ipv6Addr) -> Option<&'static str> {
    let s = a.segments();
    if a.is_loopback() {
        Some("this machine (loopback)")
    } else if a.is_unspecified() {
        Some("unspecified")
    } else if s[0] & 0xffc0 == 0xfe80 {
        Some("link-local (the cloud metadata service lives there)")
    } else if s[0] & 0xfe00 == 0xfc00 || s[0] & 0xffc0 == 0xfec0 {
        Some("a private network")
    } else if a.is_multicast() {
        Some("not a unicast internet address")
    } else if (s[0..4] == [0; 4] && s[4] == 0xffff && s[5] == 0) || (s[0] == 0x64 && s[1] == 0xff9b)
    {
        // IPv4-translated (`::ffff:0:a.b.c.d`) and NAT64 (`64:ff9b::a.b.c.d`)
        // embed an IPv4 address: judged as that one.
        v4_refusal(Ipv4Addr::new(
            (s[6] >> 8) as u8,
            s[6] as u8,
            (s[7] >> 8) as u8,
            s[7] as u8,
        ))
    } else if s[0] == 0x2001 && s[1] == 0x0db8 {
        Some("reserved for documentation or testing")
    } else if s[0] == 0x2002 || (s[0] == 0x2001 && s[1] == 0) || s[0..6] == [0; 6] {
        Some("a tunnel or compatibility address")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_this_machine_private_networks_and_the_metadata_service() {
        for a in [
            "127.0.0.1",
            "127.5.6.7",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "100.64.0.1",
            "169.254.169.254",
            "0.0.0.0",
            "0.1.2.3",
            "224.0.0.1",
            "255.255.255.255",
            "192.0.2.10",
            "::1",
            "::",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:0:a9fe:a9fe",
            "::127.0.0.1",
            "fe80::1",
            "fd00:ec2::254",
            "fc00::1",
            "ff02::1",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
            "2001:db8::1",
        ] {
            assert!(not_public(a.parse().unwrap()).is_some(), "{a}");
        }
    }

    #[test]
    fn lets_the_public_internet_through() {
        for a in [
            "1.1.1.1",
            "93.184.215.14",
            "2606:4700:4700::1111",
            "64:ff9b::101:101",
        ] {
            assert_eq!(not_public(a.parse().unwrap()), None, "{a}");
        }
    }
}
