//! The server name a TLS ClientHello asks for (its SNI), read from the
//! first record a client sends through the tunnel. The proxy passes TLS
//! through untouched; it only checks that the name the client will verify
//! the certificate of is the name the CONNECT line asked for.

#![forbid(unsafe_code)]

/// The most a first record may be (TLS's own bound on a record's body,
/// and its five-byte header).
pub const MAX_RECORD: usize = 5 + 16_384;

/// How many bytes the first record takes, once its header is in `buf`.
pub fn record_len(buf: &[u8]) -> Option<usize> {
    if buf.len() < 5 {
        return None;
    }
    Some(5 + usize::from(u16::from_be_bytes([buf[3], buf[4]])))
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err("the ClientHello ends early".into());
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u8(&mut self) -> Result<usize, String> {
        Ok(usize::from(self.take(1)?[0]))
    }

    fn u16(&mut self) -> Result<usize, String> {
        let b = self.take(2)?;
        Ok(usize::from(u16::from_be_bytes([b[0], b[1]])))
    }

    fn u24(&mut self) -> Result<usize, String> {
        let b = self.take(3)?;
        Ok((usize::from(b[0]) << 16) | (usize::from(b[1]) << 8) | usize::from(b[2]))
    }
}

/// The host name of the ClientHello in `record` (one whole TLS record),
/// lower-cased, or why there is none to check.
pub fn server_name(record: &[u8]) -> Result<String, String> {
    let mut r = Reader(record);
    if r.u8()? != 0x16 {
        return Err("the tunnel did not start with TLS (no handshake record)".into());
    }
    r.take(2)?;
    let len = r.u16()?;
    let mut body = Reader(r.take(len)?);
    if body.u8()? != 0x01 {
        return Err("the first handshake message is not a ClientHello".into());
    }
    let hello_len = body.u24()?;
    // A ClientHello split over several records is not read: real clients
    // send a name in the first.
    let mut h = Reader(body.take(hello_len)?);
    h.take(2 + 32)?;
    let session = h.u8()?;
    h.take(session)?;
    let suites = h.u16()?;
    h.take(suites)?;
    let compression = h.u8()?;
    h.take(compression)?;
    let ext_len = h.u16()?;
    let mut ext = Reader(h.take(ext_len)?);
    let mut found: Option<String> = None;
    while !ext.0.is_empty() {
        let kind = ext.u16()?;
        let len = ext.u16()?;
        let data = ext.take(len)?;
        if kind != 0 {
            continue;
        }
        if found.is_some() {
            return Err("the ClientHello names a server twice".into());
        }
        let mut list = Reader(data);
        let list_len = list.u16()?;
        let mut names = Reader(list.take(list_len)?);
        if names.u8()? != 0 {
            return Err("the ClientHello's server name is not a host name".into());
        }
        let n = names.u16()?;
        let name = names.take(n)?;
        if !names.0.is_empty() || !list.0.is_empty() {
            return Err("the ClientHello names more than one server".into());
        }
        let name = std::str::from_utf8(name)
            .map_err(|_| "the ClientHello's server name is not text".to_string())?;
        found = Some(name.to_ascii_lowercase());
    }
    found.ok_or_else(|| "the ClientHello names no server (no SNI)".into())
}

/// A minimal ClientHello record naming `name` (for tests, here and in the
/// Warden's integration tests).
pub fn client_hello(name: &str) -> Vec<u8> {
    let name = name.as_bytes();
    let mut sni = Vec::new();
    sni.extend((name.len() as u16 + 3).to_be_bytes());
    sni.push(0);
    sni.extend((name.len() as u16).to_be_bytes());
    sni.extend(name);
    let mut ext = vec![0, 0];
    ext.extend((sni.len() as u16).to_be_bytes());
    ext.extend(&sni);
    let mut hello = vec![0x03, 0x03];
    hello.extend([7u8; 32]);
    hello.push(0);
    hello.extend([0, 2, 0x13, 0x01]);
    hello.extend([1, 0]);
    hello.extend((ext.len() as u16).to_be_bytes());
    hello.extend(&ext);
    let mut hs = vec![0x01];
    hs.extend(&(hello.len() as u32).to_be_bytes()[1..]);
    hs.extend(&hello);
    let mut record = vec![0x16, 0x03, 0x01];
    record.extend((hs.len() as u16).to_be_bytes());
    record.extend(&hs);
    record
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_name_of_a_client_hello() {
        let r = client_hello("Acme.Example.org");
        assert_eq!(record_len(&r), Some(r.len()));
        assert_eq!(server_name(&r).unwrap(), "acme.example.org");
    }

    #[test]
    fn refuses_what_is_not_a_client_hello_with_one_name() {
        assert!(server_name(b"GET / HTTP/1.1\r\n\r\n").is_err());
        let r = client_hello("a.example.org");
        for cut in [6, 20, r.len() - 1] {
            assert!(server_name(&r[..cut]).is_err(), "{cut}");
        }
        // No server name extension at all.
        let mut plain = client_hello("x.example.org");
        let n = plain.len();
        plain.truncate(n - ("x.example.org".len() + 9));
        assert!(server_name(&plain).is_err());
    }
}
