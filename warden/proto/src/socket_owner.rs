//! Who serves a TCP port on this machine. Any local user may bind a free
//! loopback port, so before the Worker speaks plain HTTP to one, its
//! network gate learns from the kernel's tables (`/proc/net/tcp`, `tcp6`)
//! which uid holds the socket at the other end: through the Warden's
//! `socket_owner` (the Worker's unit runs it in a user namespace, where
//! every uid but root's and its own reads as `nobody`, and hides
//! `/proc/net`), or read directly by `aromba pair`, which runs as root.
//! Shared here so that neither links the other's code. Each line gives a socket's local
//! and remote address, its state and its owner's uid; an accepted socket
//! (and one still waiting to be accepted) carries its listener's uid.
//!
//! The tables are read as hostile text: a line that does not parse is
//! skipped, and only so many bytes are read.

use std::io::{self, BufRead, Read};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The kernel's TCP tables, and whether each holds IPv6 addresses.
const TABLES: [(&str, bool); 2] = [("/proc/net/tcp", false), ("/proc/net/tcp6", true)];
/// The most of one table read (some 400,000 sockets); past it, rows are
/// not seen, and the gate refuses what it cannot vouch for.
const MAX_TABLE: u64 = 64 << 20;

/// The states that matter here (`include/net/tcp_states.h`).
pub const ESTABLISHED: u8 = 0x01;
pub const SYN_RECV: u8 = 0x03;
pub const LISTEN: u8 = 0x0A;

/// One socket of a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    /// IPv4-mapped IPv6 addresses are given as IPv4: a dual-stack
    /// listener's accepted IPv4 connection is in `tcp6` so.
    pub local: SocketAddr,
    pub remote: SocketAddr,
    pub state: u8,
    pub uid: u32,
}

/// Why no one uid serves an address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unclear {
    /// No socket of this machine's tables serves it.
    Nobody,
    /// Sockets of several uids could.
    Several(Vec<u32>),
}

/// One line of a table: `sl local remote st queues timer retr uid …`.
pub fn parse_row(line: &str, v6: bool) -> Option<Row> {
    let f: Vec<&str> = line.split_whitespace().take(8).collect();
    let (slot, local, remote, state, uid) =
        (f.first()?, f.get(1)?, f.get(2)?, f.get(3)?, f.get(7)?);
    // The header line (`sl local_address …`) is not a row.
    slot.strip_suffix(':')?.parse::<u64>().ok()?;
    if state.len() != 2 || !state.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Some(Row {
        local: parse_addr(local, v6)?,
        remote: parse_addr(remote, v6)?,
        state: u8::from_str_radix(state, 16).ok()?,
        // Digits only: `parse` would take a sign.
        uid: if uid.bytes().all(|b| b.is_ascii_digit()) {
            uid.parse().ok()?
        } else {
            return None;
        },
    })
}

/// `0100007F:1F90` (IPv4) or 32 hex digits and a port (IPv6): each 32-bit
/// word as the kernel holds it, printed as a number of this machine's
/// byte order (so `127.0.0.1` reads `0100007F` on a little-endian one).
fn parse_addr(text: &str, v6: bool) -> Option<SocketAddr> {
    let (ip, port) = text.split_once(':')?;
    let hex = |s: &str| s.bytes().all(|b| b.is_ascii_hexdigit());
    // Checked before slicing and parsing: `from_str_radix` takes a sign.
    if port.len() != 4 || !hex(port) || !hex(ip) {
        return None;
    }
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| {
        ip.get(i * 8..i * 8 + 8)
            .and_then(|w| u32::from_str_radix(w, 16).ok())
            .map(u32::to_ne_bytes)
    };
    let ip = match (v6, ip.len()) {
        (false, 8) => IpAddr::V4(Ipv4Addr::from(word(0)?)),
        (true, 32) => {
            let mut bytes = [0u8; 16];
            for (i, chunk) in bytes.chunks_exact_mut(4).enumerate() {
                chunk.copy_from_slice(&word(i)?);
            }
            IpAddr::V6(Ipv6Addr::from(bytes)).to_canonical()
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// The rows of `table` whose local port is `port`.
fn rows_in(table: impl Read, v6: bool, port: u16, out: &mut Vec<Row>) {
    let mut lines = io::BufReader::new(table.take(MAX_TABLE));
    let mut line = Vec::new();
    // Bytes, not `lines()`: one line that is not UTF-8 ends no read.
    while lines.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
        if let Some(row) = std::str::from_utf8(&line)
            .ok()
            .and_then(|l| parse_row(l, v6))
            .filter(|r| r.local.port() == port)
        {
            out.push(row);
        }
        line.clear();
    }
}

/// The sockets of this machine whose local port is `port`, from both
/// tables. An error only when neither can be read (`tcp6` is absent when
/// IPv6 is off).
pub fn rows_on_port(port: u16) -> io::Result<Vec<Row>> {
    let mut out = Vec::new();
    let mut read_one = None;
    for (path, v6) in TABLES {
        match std::fs::File::open(path) {
            Ok(file) => {
                rows_in(file, v6, port, &mut out);
                read_one = Some(Ok(()));
            }
            Err(e) => {
                read_one.get_or_insert(Err(io::Error::new(
                    e.kind(),
                    format!("{path} cannot be read: {e}"),
                )));
            }
        }
    }
    read_one.unwrap_or(Ok(()))?;
    Ok(out)
}

fn one_uid(mut uids: Vec<u32>) -> Result<u32, Unclear> {
    uids.sort_unstable();
    uids.dedup();
    match uids.as_slice() {
        [] => Err(Unclear::Nobody),
        [uid] => Ok(*uid),
        _ => Err(Unclear::Several(uids)),
    }
}

/// The uids of the listening sockets that would take a connection to
/// `addr`: those bound to it exactly, else the wildcard ones
/// (`0.0.0.0` takes IPv4 only, `::` both, unless it is IPv6-only, which
/// the table does not say).
pub fn listening_uids(rows: &[Row], addr: SocketAddr) -> Vec<u32> {
    let addr = SocketAddr::new(addr.ip().to_canonical(), addr.port());
    let listening = || {
        rows.iter()
            .filter(move |r| r.state == LISTEN && r.local.port() == addr.port())
    };
    let exact: Vec<u32> = listening()
        .filter(|r| r.local.ip() == addr.ip())
        .map(|r| r.uid)
        .collect();
    if !exact.is_empty() {
        return exact;
    }
    listening()
        .filter(|r| match r.local.ip() {
            IpAddr::V4(ip) => ip.is_unspecified() && addr.is_ipv4(),
            IpAddr::V6(ip) => ip.is_unspecified(),
        })
        .map(|r| r.uid)
        .collect()
}

/// The uid serving the connection from `ours` to `peer`: that of the
/// socket at its other end (local `peer`, remote `ours`, established or
/// not yet accepted), else — the row not seen — that of the listener that
/// took it. A socket closed already is no answer (its row, kept by the
/// kernel a while, says uid 0): the listener is asked then.
pub fn serving_uid(rows: &[Row], ours: SocketAddr, peer: SocketAddr) -> Result<u32, Unclear> {
    let canonical = |a: SocketAddr| SocketAddr::new(a.ip().to_canonical(), a.port());
    let (ours, peer) = (canonical(ours), canonical(peer));
    let other_end: Vec<u32> = rows
        .iter()
        .filter(|r| r.local == peer && r.remote == ours)
        .filter(|r| matches!(r.state, ESTABLISHED | SYN_RECV))
        .map(|r| r.uid)
        .collect();
    if !other_end.is_empty() {
        return one_uid(other_end);
    }
    one_uid(listening_uids(rows, peer))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode";

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn reads_ipv4_rows_as_the_kernel_prints_them() {
        let listen = "   0: 0100007F:2CAA 00000000:0000 0A 00000000:00000000 00:00000000 00000000   998        0 31337 1 0000000000000000 100 0 0 10 0";
        let r = parse_row(listen, false).unwrap();
        assert_eq!(r.local, sa("127.0.0.1:11434"));
        assert_eq!(r.remote, sa("0.0.0.0:0"));
        assert_eq!((r.state, r.uid), (LISTEN, 998));
        let accepted = "  12: 0100007F:2CAA 0100007F:D431 01 00000000:00000000 00:00000000 00000000 65534        0 0 1 0000000000000000 20 4 30 10 -1";
        let r = parse_row(accepted, false).unwrap();
        assert_eq!(r.remote, sa("127.0.0.1:54321"));
        assert_eq!((r.state, r.uid), (ESTABLISHED, 65534));
        // 10.1.2.3 and 0.0.0.0.
        let r = parse_row("1: 0302010A:0050 00000000:0000 0A 0:0 0:0 0 0", false).unwrap();
        assert_eq!(r.local, sa("10.1.2.3:80"));
        assert_eq!(parse_row(HEADER, false), None);
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn reads_ipv6_rows_and_gives_mapped_ipv4_as_ipv4() {
        let loopback = "   0: 00000000000000000000000001000000:2CAA 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0";
        let r = parse_row(loopback, true).unwrap();
        assert_eq!(r.local, sa("[::1]:11434"));
        assert_eq!(r.remote, sa("[::]:0"));
        assert_eq!(r.uid, 0);
        // A dual-stack listener's IPv4 connection: ::ffff:127.0.0.1.
        let mapped = "   3: 0000000000000000FFFF00000100007F:2CAA 0000000000000000FFFF00000100007F:D431 01 00000000:00000000 00:00000000 00000000   998        0 99 1 0000000000000000 20 4 30 10 -1";
        let r = parse_row(mapped, true).unwrap();
        assert_eq!(r.local, sa("127.0.0.1:11434"));
        assert_eq!(r.remote, sa("127.0.0.1:54321"));
        // 2001:db8::7.
        let r = parse_row(
            "4: B80D0120000000000000000007000000:01BB 00000000000000000000000000000000:0000 0A 0:0 0:0 0 1000",
            true,
        )
        .unwrap();
        assert_eq!(r.local, sa("[2001:db8::7]:443"));
        assert_eq!(r.uid, 1000);
    }

    #[test]
    fn a_line_that_is_not_a_row_is_no_row() {
        for bad in [
            "",
            HEADER,
            "0: 0100007F:2CAA",
            "0: 0100007F:2CAA 00000000:0000 0A 0:0 0:0 0",
            "0: 0100007F:2CAA 00000000:0000 0A 0:0 0:0 0 -1",
            "0: 0100007F:2CAA 00000000:0000 0A 0:0 0:0 0 +5",
            "0: 0100007F:2CAA 00000000:0000 0A 0:0 0:0 0 4294967296",
            "0: +100007F:2CAA 00000000:0000 0A 0:0 0:0 0 0",
            "0: 0100007F:+CAA 00000000:0000 0A 0:0 0:0 0 0",
            "0: 0100007F:2CAAA 00000000:0000 0A 0:0 0:0 0 0",
            "0: 0100007F0:2CAA 00000000:0000 0A 0:0 0:0 0 0",
            "0: 0100007F:2CAA 00000000:0000 0AA 0:0 0:0 0 0",
            "0: 0100007F:2CAA 00000000:0000 +A 0:0 0:0 0 0",
            "x: 0100007F:2CAA 00000000:0000 0A 0:0 0:0 0 0",
            "0: é100007F:2CAA 00000000:0000 0A 0:0 0:0 0 0",
            "0: 0100007Fé:2CAA 00000000:0000 0A 0:0 0:0 0 0",
        ] {
            assert_eq!(parse_row(bad, false), None, "{bad:?}");
        }
        // An IPv6 address in the IPv4 table, and the other way round.
        assert_eq!(
            parse_row(
                "0: 00000000000000000000000001000000:2CAA 00000000000000000000000000000000:0000 0A 0:0 0:0 0 0",
                false
            ),
            None
        );
        assert_eq!(
            parse_row("0: 0100007F:2CAA 00000000:0000 0A 0:0 0:0 0 0", true),
            None
        );
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn keeps_the_rows_of_one_port_and_skips_what_does_not_parse() {
        let mut table =
            format!("{HEADER}\n   0: 0100007F:2CAA 00000000:0000 0A 0:0 0:0 0 998 0 1\n")
                .into_bytes();
        // A line that is not UTF-8 ends no read.
        table.extend_from_slice(b"\xff\xfe garbage\n");
        table.extend_from_slice(b"   1: 0100007F:0050 00000000:0000 0A 0:0 0:0 0 0 0 2\n");
        table.extend_from_slice(b"   2: 0100007F:2CAA 0100007F:D431 01 0:0 0:0 0 998 0 3");
        let mut rows = Vec::new();
        rows_in(table.as_slice(), false, 11434, &mut rows);
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert_eq!(rows[1].remote, sa("127.0.0.1:54321"));
        let mut rows = Vec::new();
        rows_in(table.as_slice(), false, 80, &mut rows);
        assert_eq!(rows.len(), 1);
    }

    fn row(local: &str, remote: &str, state: u8, uid: u32) -> Row {
        Row {
            local: sa(local),
            remote: sa(remote),
            state,
            uid,
        }
    }

    #[test]
    fn the_other_end_of_the_connection_names_who_serves_it() {
        let ours = sa("127.0.0.1:54321");
        let peer = sa("127.0.0.1:11434");
        let rows = vec![
            row("127.0.0.1:11434", "0.0.0.0:0", LISTEN, 998),
            // Ours: the Worker's.
            row("127.0.0.1:54321", "127.0.0.1:11434", ESTABLISHED, 110),
            row("127.0.0.1:11434", "127.0.0.1:54321", ESTABLISHED, 65534),
            // Another connection to the port.
            row("127.0.0.1:11434", "127.0.0.1:40000", ESTABLISHED, 998),
        ];
        assert_eq!(serving_uid(&rows, ours, peer), Ok(65534));
        // Not accepted yet: the listener's uid, on the waiting request.
        let rows = vec![row("127.0.0.1:11434", "127.0.0.1:54321", SYN_RECV, 998)];
        assert_eq!(serving_uid(&rows, ours, peer), Ok(998));
    }

    #[test]
    fn a_closed_other_end_is_no_answer_the_listener_is() {
        let ours = sa("127.0.0.1:54321");
        let peer = sa("127.0.0.1:11434");
        // A socket its owner closed is kept as a row of uid 0.
        let closed = row("127.0.0.1:11434", "127.0.0.1:54321", 0x05, 0);
        assert_eq!(serving_uid(&[closed], ours, peer), Err(Unclear::Nobody));
        let rows = vec![closed, row("0.0.0.0:11434", "0.0.0.0:0", LISTEN, 65534)];
        assert_eq!(serving_uid(&rows, ours, peer), Ok(65534));
    }

    #[test]
    fn the_listener_bound_exactly_wins_over_a_wildcard_one() {
        let rows = vec![
            row("0.0.0.0:8080", "0.0.0.0:0", LISTEN, 1000),
            row("127.0.0.1:8080", "0.0.0.0:0", LISTEN, 0),
            row("[::1]:8080", "[::]:0", LISTEN, 7),
        ];
        assert_eq!(listening_uids(&rows, sa("127.0.0.1:8080")), vec![0]);
        assert_eq!(listening_uids(&rows, sa("[::1]:8080")), vec![7]);
        // `::` may take IPv4 too; `0.0.0.0` never takes IPv6.
        let rows = vec![
            row("[::]:8080", "[::]:0", LISTEN, 998),
            row("0.0.0.0:8080", "0.0.0.0:0", LISTEN, 998),
        ];
        assert_eq!(listening_uids(&rows, sa("127.0.0.1:8080")), vec![998, 998]);
        assert_eq!(
            listening_uids(&rows[1..], sa("[::1]:8080")),
            Vec::<u32>::new()
        );
        assert_eq!(
            serving_uid(&rows, sa("127.0.0.1:1"), sa("127.0.0.1:8080")),
            Ok(998)
        );
        // Listeners of two uids: no one answer.
        let rows = vec![
            row("[::]:8080", "[::]:0", LISTEN, 998),
            row("0.0.0.0:8080", "0.0.0.0:0", LISTEN, 65534),
        ];
        assert_eq!(
            serving_uid(&rows, sa("127.0.0.1:1"), sa("127.0.0.1:8080")),
            Err(Unclear::Several(vec![998, 65534]))
        );
    }

    #[test]
    fn reads_this_machines_tables() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let rows = rows_on_port(addr.port()).unwrap();
        // `/proc/self` belongs to this process's uid.
        let uid = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap());
        assert_eq!(listening_uids(&rows, addr), vec![uid], "{rows:?}");
    }
}
