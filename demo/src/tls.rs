//! The demo's certificate authority and the relay's certificate under it,
//! so that the Worker dials `wss://` and verifies the relay as it does in
//! production (its configuration names the authority's file). And free
//! ports, which a shell cannot ask the kernel for.

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, SanType};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Writes `ca.pem`, `relay.pem` and `relay-key.pem` into `dir`.
pub fn write(dir: &Path) -> Result<(), String> {
    let fail = |what: &str, e: rcgen::Error| format!("cannot make the {what}: {e}");
    let ca_key = KeyPair::generate().map_err(|e| fail("authority's key", e))?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(|e| fail("authority", e))?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.distinguished_name
        .push(DnType::CommonName, "Aromba demo CA (this machine only)");
    let ca_cert = ca.self_signed(&ca_key).map_err(|e| fail("authority", e))?;
    let issuer = Issuer::new(ca, ca_key);

    let key = KeyPair::generate().map_err(|e| fail("relay's key", e))?;
    let mut relay = CertificateParams::new(vec!["localhost".to_string()])
        .map_err(|e| fail("relay's certificate", e))?;
    relay
        .subject_alt_names
        .push(SanType::IpAddress(std::net::Ipv4Addr::LOCALHOST.into()));
    relay
        .distinguished_name
        .push(DnType::CommonName, "127.0.0.1");
    let relay_cert = relay
        .signed_by(&key, &issuer)
        .map_err(|e| fail("relay's certificate", e))?;

    file(&dir.join("ca.pem"), &ca_cert.pem(), 0o644)?;
    file(&dir.join("relay.pem"), &relay_cert.pem(), 0o644)?;
    file(&dir.join("relay-key.pem"), &key.serialize_pem(), 0o600)
}

fn file(path: &Path, text: &str, mode: u32) -> Result<(), String> {
    let fail = |e: std::io::Error| format!("cannot write {}: {e}", path.display());
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(fail)?;
    f.write_all(text.as_bytes()).map_err(fail)
}

/// `count` distinct ports on 127.0.0.1 the kernel says are free now.
pub fn free_ports(count: u16) -> Result<Vec<u16>, String> {
    // Held together until all are known, so none is handed out twice.
    let held: Vec<std::net::TcpListener> = (0..count)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("cannot find a free port: {e}"))?;
    held.iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("cannot find a free port: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_relays_certificate_is_issued_by_the_written_authority() {
        let dir = std::env::temp_dir().join(format!("aromba-demo-tls-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        write(&dir).expect("the files");
        let ca = std::fs::read_to_string(dir.join("ca.pem")).expect("ca.pem");
        let relay = std::fs::read_to_string(dir.join("relay.pem")).expect("relay.pem");
        assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(relay.starts_with("-----BEGIN CERTIFICATE-----"));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join("relay-key.pem"))
            .expect("the key")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // Written once: a second run refuses to overwrite.
        assert!(write(&dir).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn free_ports_are_distinct() {
        let ports = free_ports(5).expect("ports");
        let mut unique = ports.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), 5);
    }
}
