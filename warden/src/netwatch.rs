//! Outbound connections of the Worker: the kernel's TCP and UDP tables
//! (`/proc/net/tcp`, `tcp6`, `udp`, `udp6`), read every few seconds,
//! against the addresses the Worker's `network.toml` lists. A connection of
//! the Worker's uid to anything else is a ladder signal (straight to Cut).
//! A connection that opens and closes between two reads passes unseen, and
//! so does a datagram sent from a UDP socket never connected (its table
//! line has no remote address).
//!
//! `network.toml` is trusted only when it is a regular file of root's that
//! no one else may write: one the Worker could write would let it list
//! where it likes. An untrusted one lists nothing, and it is a signal.
//!
//! From `network.toml` the Warden reads only `addresses = [...]` lines
//! (each entry an IP address, `IP:port` or `[IPv6]:port`); it links no TOML
//! parser and needs no more.

#![forbid(unsafe_code)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;

/// What the Worker may connect to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Allowed {
    addrs: Vec<(IpAddr, Option<u16>)>,
}

impl Allowed {
    /// The file's addresses; an absent file lists none. `Err` says why a
    /// present file is not trusted (and then nothing is listed).
    pub fn read(path: &Path) -> Result<Allowed, String> {
        use std::os::unix::fs::MetadataExt;
        let meta = match std::fs::symlink_metadata(path) {
            Ok(m) => m,
            Err(_) => return Ok(Allowed::default()),
        };
        if !meta.is_file() {
            return Err(format!("{} is not a regular file", path.display()));
        }
        if meta.uid() != 0 || meta.mode() & 0o022 != 0 {
            return Err(format!(
                "{} is not root's alone to write (owner uid {}, mode {:04o})",
                path.display(),
                meta.uid(),
                meta.mode() & 0o7777
            ));
        }
        Ok(std::fs::read_to_string(path)
            .map(|t| Allowed::parse(&t))
            .unwrap_or_default())
    }

    pub fn parse(text: &str) -> Allowed {
        let mut addrs = Vec::new();
        for line in text.lines() {
            let Some(rest) = line.trim().strip_prefix("addresses") else {
                continue;
            };
            let Some(list) = rest.trim_start().strip_prefix('=') else {
                continue;
            };
            for item in list.split(['[', ']', ',', ' ']).filter(|s| !s.is_empty()) {
                let item = item.trim_matches('"');
                if let Ok(sa) = item.parse::<SocketAddr>() {
                    addrs.push((sa.ip(), Some(sa.port())));
                } else if let Ok(ip) = item.parse::<IpAddr>() {
                    addrs.push((ip, None));
                }
            }
            // `[::1]:443` was split at the brackets above; take it whole too.
            for quoted in list.split('"').skip(1).step_by(2) {
                if let Ok(sa) = quoted.parse::<SocketAddr>() {
                    addrs.push((sa.ip(), Some(sa.port())));
                }
            }
        }
        Allowed { addrs }
    }

    pub fn permits(&self, remote: SocketAddr) -> bool {
        self.addrs
            .iter()
            .any(|(ip, port)| *ip == remote.ip() && port.is_none_or(|p| p == remote.port()))
    }
}

/// Established or connecting TCP sockets, and connected UDP sockets, of
/// `uid`, by remote address.
pub fn connections_of(uid: u32) -> Vec<SocketAddr> {
    let mut out = Vec::new();
    for (file, v6) in [("/proc/net/tcp", false), ("/proc/net/tcp6", true)] {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        out.extend(parse_table(&text, v6, uid));
    }
    for (file, v6) in [("/proc/net/udp", false), ("/proc/net/udp6", true)] {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        out.extend(parse_udp_table(&text, v6, uid));
    }
    out
}

/// UDP sockets of `uid` with a remote address (state 01: connected).
fn parse_udp_table(text: &str, v6: bool, uid: u32) -> Vec<SocketAddr> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (remote, state, owner) = (f.get(2)?, f.get(3)?, f.get(7)?);
            if owner.parse::<u32>().ok()? != uid || *state != "01" {
                return None;
            }
            parse_addr(remote, v6).filter(|a| a.port() != 0)
        })
        .collect()
}

fn parse_table(text: &str, v6: bool, uid: u32) -> Vec<SocketAddr> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            // sl local rem st queues timer retr uid …
            let (remote, state, owner) = (f.get(2)?, f.get(3)?, f.get(7)?);
            if owner.parse::<u32>().ok()? != uid || !matches!(*state, "01" | "02") {
                return None;
            }
            parse_addr(remote, v6)
        })
        .collect()
}

fn parse_addr(s: &str, v6: bool) -> Option<SocketAddr> {
    let (ip, port) = s.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let ip = if v6 {
        if ip.len() != 32 {
            return None;
        }
        let mut bytes = [0u8; 16];
        for word in 0..4 {
            let w = u32::from_str_radix(&ip[word * 8..word * 8 + 8], 16).ok()?;
            bytes[word * 4..word * 4 + 4].copy_from_slice(&w.to_le_bytes());
        }
        let v6 = Ipv6Addr::from(bytes);
        v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4)
    } else {
        let w = u32::from_str_radix(ip, 16).ok()?;
        IpAddr::V4(Ipv4Addr::from(w.to_le_bytes()))
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_kernel_tables() {
        let t = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:9C40 0100007F:1F90 01 00000000:00000000 00:00000000 00000000   998        0 1 1 0 20 4 30 10 -1\n   1: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1 0 100 0 0 10 0\n";
        assert_eq!(
            parse_table(t, false, 998),
            vec!["127.0.0.1:8080".parse().unwrap()]
        );
        assert!(
            parse_table(t, false, 0).is_empty(),
            "a listening socket is not a connection"
        );
        let t6 = "h\n 0: 00000000000000000000000001000000:9C40 00000000000000000000000001000000:01BB 01 0:0 0:0 0 998 0 1\n";
        assert_eq!(
            parse_table(t6, true, 998),
            vec!["[::1]:443".parse().unwrap()]
        );
    }

    #[test]
    fn reads_connected_udp_sockets_only() {
        // A resolver's connected socket, and an unconnected one.
        let t = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n  1: 0100007F:D431 3500007F:0035 01 00000000:00000000 00:00000000 00000000   998        0 1 2 0 0\n  2: 00000000:0044 00000000:0000 07 00000000:00000000 00:00000000 00000000   998        0 2 2 0 0\n";
        assert_eq!(
            parse_udp_table(t, false, 998),
            vec!["127.0.0.53:53".parse().unwrap()]
        );
        assert!(parse_udp_table(t, false, 0).is_empty());
    }

    #[test]
    fn a_network_toml_others_may_write_is_not_trusted() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("aromba-netwatch-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("network.toml");
        assert_eq!(Allowed::read(&file), Ok(Allowed::default()), "absent: none");
        std::fs::write(&file, "addresses = [\"203.0.113.10:443\"]\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(
            Allowed::read(&file)
                .unwrap()
                .permits("203.0.113.10:443".parse().unwrap())
        );
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert!(Allowed::read(&file).is_err(), "world-writable");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::os::unix::fs::chown(&file, Some(65534), None).unwrap();
        assert!(Allowed::read(&file).is_err(), "not root's");
        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", &file).unwrap();
        assert!(Allowed::read(&file).is_err(), "a link");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn permits_only_listed_addresses() {
        let a = Allowed::parse(
            "[relay]\nhost = \"relay.aro.mba\"\naddresses = [\"203.0.113.10:443\", \"2001:db8::10\", \"[::1]:8443\"]\n",
        );
        assert!(a.permits("203.0.113.10:443".parse().unwrap()));
        assert!(!a.permits("203.0.113.10:80".parse().unwrap()));
        assert!(a.permits("[2001:db8::10]:1".parse().unwrap()));
        assert!(a.permits("[::1]:8443".parse().unwrap()));
        assert!(!a.permits("127.0.0.1:8443".parse().unwrap()));
    }
}
